"""An optimize stage that keeps no row says why, in the closing summary and in its report,
through the console script: a judge that gives every rollout the same reward leaves no ask
with a contrast, and one that gives partial scores leaves no pass or fail to contrast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")

JUDGES = """
def every_row_passes(row, **_):
    return 1.0


def a_partial_score(row, **_):
    return 0.7
"""


def _run(tmp_path: Path, judge: str) -> tuple[str, dict]:
    (tmp_path / "my_judges.py").write_text(JUDGES)
    res = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "simulate.budget=120", "judge=callable",
         f"judge.target=my_judges:{judge}", "tracking=none", f"hydra.run.dir={tmp_path / judge}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert res.returncode == 3, res.stderr[-3000:] + res.stdout[-2000:]  # the gate refuses 0 rows
    report = json.loads((tmp_path / judge / "optimize" / "report.json").read_text())
    [kept] = [line for line in res.stdout.splitlines() if line.startswith("rows kept:")]
    return kept, report


@pytest.mark.parametrize(
    ("judge", "why"),
    [
        ("every_row_passes", "every ask has the same reward on all its graded rollouts ("),
        ("a_partial_score", "120 of 120 rows carry a partial reward (not 0 or 1)"),
    ],
)
def test_an_empty_selection_says_why_in_the_summary(tmp_path, judge, why):
    kept, report = _run(tmp_path, judge)
    assert kept.startswith("rows kept: 0 of 120 (optimize): ") and why in kept
    assert why in report["kept_none_because"]
    # The input's signal carries the cause; the note never asks to grade graded rows.
    assert why in report["group_signal_in"]["note"]
    assert "grade the rows" not in json.dumps(report)
