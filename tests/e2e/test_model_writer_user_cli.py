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
    rows = [json.loads(x) for x in (run_dir / "simulate" / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 30
    assert {r["writer_model"] for r in rows} == {"vllm:writer-bot"}
    followed = [r for r in rows if any(s["kind"] == "user" for s in r["steps"])]
    assert followed and {r["user_model"] for r in followed} == {"vllm:person-bot"}
    assert both.person.requests, "the person's lines came from the model"
    report = json.loads((run_dir / "simulate" / "report.json").read_text())
    assert report["writer"]["model"] == "vllm:writer-bot"
    assert report["simulator"] == "vllm:writer-bot"
