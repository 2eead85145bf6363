"""``judge=llm`` from the console script against a judge server on 127.0.0.1 that the test
scripts, and the refusals a bad judge config gets before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support.scripted_server import chat_reply, scripted_server

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
SECRET = "sk-e2e-judge-key-7f3a9c1e5b"


def wai(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "WAI_EXP_JUDGE"}
    return subprocess.run(
        [WAI_EXP, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**base, **(env or {})},
    )


def test_judge_llm_grades_every_row_through_the_model(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    def answer(path: str, headers: dict[str, str], body: dict[str, Any]):
        with lock:
            auth = {k.lower(): v for k, v in headers.items()}.get("authorization")
            seen.append({"auth": auth, "body": body})
        tool_call = "ASSISTANT calls" in body["messages"][-1]["content"]
        verdict = {"score": 1 if tool_call else 0, "reason": "graded by the scripted judge"}
        return 200, chat_reply(json.dumps(verdict))

    with scripted_server(answer) as url:
        res = wai(
            tmp_path,
            "judge=llm",
            f"judge.model=vllm:scripted-judge@{url}",
            "judge.api_key_env=MY_JUDGE_KEY",
            "simulate.budget=12",
            "tracking=none",
            env={"MY_JUDGE_KEY": SECRET},
        )
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = next(
        p
        for p in (tmp_path / "outputs").glob("*/*")
        if p.is_dir() and not p.parent.name.startswith(".")
    )
    rows = [
        json.loads(line) for line in (run_dir / "grade" / "rows.jsonl").read_text().splitlines()
    ]
    assert len(rows) == 12 and len(seen) == 12
    assert all(r["judge_status"] == "ok" and r["reward"] in (0.0, 1.0) for r in rows)
    meta = rows[0]["judge_meta"]
    assert meta["model"] == "vllm:scripted-judge"
    assert {"prompt_hash", "temperature", "version"} <= set(meta)
    assert rows[0]["judge_name"] == f"grade_llm:{meta['version']}"
    report = json.loads((run_dir / "grade" / "report.json").read_text())
    assert report["judge"]["kind"] == "llm" and report["judge"]["version"] == meta["version"]
    assert report["self_judged"] is False
    # The key went to the server as a header, and into no file of the run.
    assert {s["auth"] for s in seen} == {f"Bearer {SECRET}"}
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


def test_a_judge_config_without_a_model_is_refused_before_any_work(tmp_path: Path) -> None:
    res = wai(tmp_path, "judge=llm", "simulate.budget=12", "tracking=none")
    assert res.returncode == 2
    text = res.stdout + res.stderr
    assert "judge=llm needs a model" in text and "WAI_EXP_JUDGE" in text
    assert not (tmp_path / "outputs").exists() or not any(
        (tmp_path / "outputs").rglob("rows.jsonl")
    )


def test_a_malformed_judge_spec_and_an_unset_key_variable_are_refused(tmp_path: Path) -> None:
    res = wai(tmp_path, "judge=llm", "judge.model=gpt4", "tracking=none")
    assert res.returncode == 2 and "judge.model" in res.stdout + res.stderr
    res = wai(
        tmp_path,
        "judge=rubric_llm",
        "judge.model=openai:gpt-4.1-mini",
        "judge.api_key_env=NOT_SET_ANYWHERE",
        "tracking=none",
    )
    assert res.returncode == 2 and "NOT_SET_ANYWHERE" in res.stdout + res.stderr
    res = wai(tmp_path, "judge=pairwise", "judge.model=openai:m", "tracking=none")
    assert res.returncode == 2 and "+experiment=delta" in res.stdout + res.stderr


def test_delta_with_judge_pairwise_compares_the_arms_side_by_side(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []
    lock = threading.Lock()

    def answer(path: str, headers: dict[str, str], body: dict[str, Any]):
        # Prefer the reply that made more tool calls; a tie when equal. A judge that reads
        # the replies, not their order: swapping A and B swaps its answer.
        user = body["messages"][-1]["content"]
        a_part, b_part = user.split("Reply B:", 1)
        a, b = a_part.count("tool call:"), b_part.count("tool call:")
        winner = "A" if a > b else "B" if b > a else "tie"
        with lock:
            calls.append(body)
        return 200, chat_reply(json.dumps({"winner": winner, "reason": "more tool use"}))

    with scripted_server(answer) as url:
        res = wai(
            tmp_path,
            "+experiment=delta",
            "judge=pairwise",
            f"judge.model=vllm:pair-judge@{url}",
            "judge.pairwise.max_pairs=12",
            "simulate.budget=24",
            "simulate.runs=1",
            "tracking=none",
        )
    assert res.returncode in (0, 3), res.stdout + res.stderr
    run_dir = next(
        p
        for p in (tmp_path / "outputs").glob("*/*")
        if p.is_dir() and not p.parent.name.startswith(".")
    )
    report = json.loads((run_dir / "compare" / "report.json").read_text())
    block = report["pairwise"]
    assert block["n_pairs"] == 12 and len(calls) == 24  # each pair judged both ways round
    assert block["judged"] == 12 and block["failed"] == 0
    assert block["after_wins"] + block["before_wins"] + block["ties"] == 12
    assert block["position_flip_rate"] == 0.0  # this judge follows content, not position
    assert block["after_win_rate_ci95"] is not None
    # The arms are still graded pointwise (the checklist) for the delta report itself.
    grade_rows = (run_dir / "grade_before" / "rows.jsonl").read_text().splitlines()
    assert json.loads(grade_rows[0])["judge_name"] == "task_checklist"
    assert "pairwise (" in (run_dir / "compare" / "report.txt").read_text()
