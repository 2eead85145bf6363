"""A knob value outside its Field's bounds is refused by the console script before any work:
exit 2, the knob named with the bound it broke (read from ``Knobs``' ``Field(ge=, le=)``),
its default, and nothing written. A sweep is checked for every job before the first runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import annotated_types
import pytest

from wai_exp.config.knobs import Knobs

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def _bound(name: str, side: type) -> float:
    field = Knobs.model_fields[name]
    [bound] = [getattr(m, side.__name__.lower()) for m in field.metadata if isinstance(m, side)]
    return bound


def _wai_exp(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAI_EXP, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("name", "side"),
    [
        ("concurrency", annotated_types.Le),
        ("pass_threshold", annotated_types.Le),
        ("avg_turns", annotated_types.Ge),
    ],
)
def test_a_knob_past_its_bound_exits_2_naming_knob_and_bound(tmp_path, name, side):
    bound = _bound(name, side)
    bad = bound + 1 if side is annotated_types.Le else bound - 1
    res = _wai_exp(tmp_path, f"knobs.{name}={bad}")
    assert res.returncode == 2, res.stderr[-2000:]
    where = "above the ceiling" if side is annotated_types.Le else "below the floor"
    default = Knobs.model_fields[name].default
    assert f"knobs.{name}={bad!r} is {where} {bound!r}" in res.stderr, res.stderr
    assert f"default {default!r}" in res.stderr and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []  # no outputs/, no cache, no mlflow.db


def test_a_sweep_with_one_bad_value_runs_no_job(tmp_path):
    ceiling = _bound("pass_threshold", annotated_types.Le)
    res = _wai_exp(tmp_path, "-m", f"knobs.pass_threshold=0.5,{ceiling + 0.5}", "simulate.budget=3")
    assert res.returncode == 2, res.stderr[-2000:]
    assert f"knobs.pass_threshold={ceiling + 0.5!r} is above the ceiling {ceiling!r}" in res.stderr
    assert not list(tmp_path.rglob("rows.jsonl"))  # the good job did not run either
