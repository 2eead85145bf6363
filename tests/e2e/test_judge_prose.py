"""A judge whose model answers prose, never a verdict, from the console script: the stage
fails (exit 1) and says which judge, what it answered and how to fix it, for ``eval`` and
``rl_round`` alike. Before, ``eval`` said "done" with 24 of 24 verdicts ``invalid_result``
and ``rl_round`` blamed the publish gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.scripted_server import chat_reply, scripted_server

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
SECRET = "sk-prose-judge-key-4c9e2a7b1d"


def prose(path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
    # A small chat model ignoring the format: it quotes its key back, which must not leak.
    return 200, chat_reply(f"Well, the assistant seems helpful overall (key {SECRET}).")


@pytest.mark.parametrize("experiment", ["eval", "rl_round"])
def test_a_judge_that_answers_prose_fails_the_stage_and_names_the_fix(
    tmp_path: Path, experiment: str
) -> None:
    with scripted_server(prose) as url:
        res = subprocess.run(
            [
                WAI_EXP,
                f"+experiment={experiment}",
                "judge=llm",
                f"judge.model=vllm:prose-judge@{url}",
                "judge.api_key_env=MY_JUDGE_KEY",
                "simulate.budget=12",
                "tracking=none",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={
                **{k: v for k, v in os.environ.items() if k != "WAI_EXP_JUDGE"},
                "MY_JUDGE_KEY": SECRET,
            },
        )
    text = res.stdout + res.stderr
    assert res.returncode == 1, text
    assert "prose-judge" in text  # the judge, by its model
    assert "the assistant seems helpful" in text  # its first unparsable answer
    assert "structured_output" in text and "another model" in text  # the fix
    assert "publish" not in text.split("error:")[-1]  # not the publish gate
    assert "run_judge / data.grade" not in text  # not the "grade the rows" advice
    assert SECRET not in text
    report = next(
        (p for p in (tmp_path / "outputs").rglob("report.json") if "judge_status" in p.read_text()),
        None,
    )
    assert report is not None, text
    data = json.loads(report.read_text())
    assert data["failed_because"] == "judge_failed"
    assert data["judge_status"].get("invalid_result") == 12
    # The answer quoted the key: it reached no file of the run either.
    for path in (tmp_path / "outputs").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
