"""``simulate.simulator=<spec>`` and ``simulate.user_model=<spec>`` from the console script,
against one server on 127.0.0.1 the test scripts: it writes the situations and plays the
person; the rows on disk name both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.simulate.test_model_user import PersonServer
from tests.simulate.test_model_writer import WriterServer
from tests.support.scripted_server import scripted_server
from wai_exp.rows.jsonl import read_rows

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


class Both:
    """Writer waves (a system prompt about test situations) go to the writer script, the
    person's lines to the person script."""

    def __init__(self) -> None:
        self.writer = WriterServer("good")
        self.person = PersonServer()

    def __call__(self, path, headers, body):
        if "test situations" in body["messages"][0]["content"]:
            return self.writer(path, headers, body)
        return self.person(path, headers, body)


def test_the_cli_runs_a_model_writer_and_a_model_user(tmp_path: Path) -> None:
    both = Both()
    with scripted_server(both) as url:
        res = subprocess.run(
            [
                WAI_EXP,
                f"simulate.simulator=vllm:writer-bot@{url}",
                f"simulate.user_model=vllm:person-bot@{url}",
                "simulate.budget=30",
                "tracking=none",
            ],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = next(
        p
        for p in (tmp_path / "outputs").glob("*/*")
        if p.is_dir() and not p.parent.name.startswith(".")
    )
    rows = read_rows(run_dir / "simulate" / "rows.jsonl")  # row-v1 steps, read as every stage does
    assert len(rows) == 30
    assert {r["writer_model"] for r in rows} == {"vllm:writer-bot"}
    followed = [r for r in rows if any(s["kind"] == "user" for s in r["steps"])]
    assert followed and {r["user_model"] for r in followed} == {"vllm:person-bot"}
    assert both.person.requests, "the person's lines came from the model"
    report = json.loads((run_dir / "simulate" / "report.json").read_text())
    assert report["writer"]["model"] == "vllm:writer-bot"
    assert report["simulator"] == "vllm:writer-bot"


def test_a_model_writer_that_writes_only_junk_fails_the_run_saying_why_and_the_fix(
    tmp_path: Path,
) -> None:
    from tests.support.scripted_server import chat_reply

    waves: list[dict] = []

    def junk(path, headers, body):  # what a too-small writer sends: prose, never the JSON
        waves.append(body)
        return 200, chat_reply('Sure! Here are the situations: {"situations": [card 1')

    with scripted_server(junk) as url:
        res = subprocess.run(
            [WAI_EXP, f"simulate.simulator=vllm:junk-bot@{url}", "simulate.budget=4", "tracking=none"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    out = res.stdout
    assert "wai-exp: FAILED" in out
    assert "the model writer (vllm:junk-bot) wrote nothing usable in" in out
    assert f"in {len(waves)} waves" in out and "malformed (not the JSON asked for)" in out
    assert "(writer_exhausted)" in out and "0 rows landed" in out
    assert "fix: a model that keeps to JSON" in out
    assert "simulate.simulator=false for the template writer" in out
    run_dir = next(
        p
        for p in (tmp_path / "outputs").glob("*/*")
        if p.is_dir() and not p.parent.name.startswith(".")
    )
    report = json.loads((run_dir / "simulate" / "report.json").read_text())
    assert report["failed_because"] == "writer_exhausted"
    assert report["writer"]["waves_malformed"] == len(waves) and report["rows"] == 0
