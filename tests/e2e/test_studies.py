"""The worked studies under experiments/ do what their READMEs say.

Each study's README holds the exact commands (a ``bash`` block, run from the study's folder)
and what each printed (the ``text`` blocks, in the same order). These tests run every
documented command through the console script in a copy of the folder and check that it prints
the documented results (``tests/test_readme.py``'s reading: stage row counts, pass@1, the floor,
pass^k and pass@k with their intervals), then check the claim the study makes about its rows.
``tracking=none`` is added: MLflow records a run but changes no number, and costs seconds.
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_cli import run_dirs, wai
from tests.test_readme import _what_it_says

STUDIES = Path(__file__).resolve().parents[2] / "experiments"

pytestmark = pytest.mark.slow


def _documented(study: str) -> tuple[list[list[str]], list[list[str]]]:
    """The study's commands (``wai-exp ...`` lines of its bash block) and printed results."""
    text = (STUDIES / study / "README.md").read_text()
    bash = text.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [shlex.split(line)[1:] for line in bash.splitlines() if line.startswith("wai-exp ")]
    outputs = [block.split("```", 1)[0] for block in text.split("```text\n")[1:]]
    return commands, [_what_it_says(out) for out in outputs]


def _run_documented(study: str, tmp_path: Path) -> list[Path]:
    """Run each documented command in a copy of the study's folder; return the run folders."""
    folder = tmp_path / study
    shutil.copytree(STUDIES / study, folder, ignore=shutil.ignore_patterns("outputs", "mlflow.db*"))
    commands, printed = _documented(study)
    assert commands and len(commands) == len(printed), (commands, printed)
    for args, expected in zip(commands, printed, strict=True):
        assert len(expected) >= 6, expected
        done = wai(folder, *args, "tracking=none")
        assert done.returncode == 0, done.stdout + done.stderr
        assert _what_it_says(done.stdout) == expected, (args, done.stdout)
    return run_dirs(folder)


def _rows(run: Path, stage: str = "evaluate") -> list[dict]:
    lines = (run / stage / "rows.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_own_agent_study(tmp_path):
    [run] = _run_documented("own_agent", tmp_path)
    rows = _rows(run)
    # Every reply is the study's function's own: desk_agent.py's sentences, not the scripted agent's.
    openers = ("I can only help", "Could you", "I couldn't find", "Order ", "Done: ", "I tried to",
               "I found these orders", "What address")  # fmt: skip
    assert all(r["final_text"].startswith(openers) for r in rows)
    # The README's reading: boundary asks are where it fails.
    boundary = [r for r in rows if r["scenario_dimensions"]["stance"] == "boundary"]
    assert sum(r["reward"] >= 0.5 for r in boundary) / len(boundary) < 0.25


def test_own_judge_study(tmp_path):
    own, checklist = _run_documented("own_judge", tmp_path)
    mine, theirs = _rows(own), _rows(checklist)
    assert [r["prompt"] for r in mine] == [r["prompt"] for r in theirs]  # the same rows, cached
    assert {r["judge_name"] for r in mine} == {"fits_an_sms"}
    # The judge only ever takes a pass away: every row it passes, the checklist passed too.
    by_id = {r["rollout_id"]: r for r in theirs}
    assert all(by_id[r["rollout_id"]]["reward"] >= 0.5 for r in mine if r["reward"] >= 0.5)
    taken = [r for r in mine if r["reward"] == 0 and by_id[r["rollout_id"]]["reward"] >= 0.5]
    assert taken and all(len(r["final_text"]) > 160 for r in taken)


def test_own_world_study(tmp_path):
    runs = _run_documented("own_world", tmp_path)
    for run in runs:
        calls = [s for r in _rows(run) for s in r["steps"] if s.get("tool")]
        assert calls
        # Every tool answer is shop.py's: an answer it served, or the error it raised.
        for step in calls:
            if step["status"] == "ok":
                assert step["result"]["served_by"] == "shop.py"
            else:
                assert step["status"] == "error" and step["result"]["error"] == "Refused"
