"""The paired verdict at its nominal rates: a small seeded slice of the calibration study.

The full grid is a benchmark (experiments/bench/bench_calibration.py, 3,000 replications per
cell). Here one null cell and one power cell run a few hundred seeded replications and must
land inside wide bounds, and the study's batched verdict is checked against compare_runs on
rows, so the benchmark measures what users run.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from wai_exp.score.stats.power import MEASURED_POWER, holdout_size
from wai_exp.score.stats.stats import compare_runs

BENCH = Path(__file__).resolve().parents[3] / "experiments" / "bench" / "bench_calibration.py"


@pytest.fixture(scope="module")
def study():
    spec = importlib.util.spec_from_file_location("bench_calibration", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(passes: np.ndarray, k: int) -> list[dict]:
    return [
        {"scenario_id": f"t{i}", "reward": 1.0 if j < c else 0.0}
        for i, c in enumerate(passes.tolist())
        for j in range(k)
    ]


def test_batched_verdicts_are_compare_runs_verdicts(study) -> None:
    # Same draws through the study's batched path and through compare_runs on row dicts.
    # The two resample with different streams, so a replication whose interval ends near 0
    # may fall either way; away from that margin they must agree.
    rng = np.random.default_rng(7)
    k, n, reps = 4, 20, 80
    p = rng.uniform(0.2, 0.8, size=(reps, n))
    ca, cb = rng.binomial(k, p), rng.binomial(k, np.minimum(p + 0.15, 1.0))
    batched = study.verdicts(ca / k, cb / k, k, False, np.random.default_rng(1))
    words = {"b_better": 1, "a_better": -1, "no_difference_detected": 0}
    direct = np.array(
        [
            words[compare_runs(rows(ca[r], k), rows(cb[r], k), seed=r)["verdict"]]
            for r in range(reps)
        ]
    )
    assert np.mean(batched == direct) >= 0.9
    assert (
        0.2 < np.mean(direct == 1) < 0.9
    )  # the slice has both outcomes, so agreement means something


def test_null_cell_false_positive_rate_is_near_five_percent(study) -> None:
    # k=4, difficulties spread around 0.5, at holdout_size(0.15, base=0.5, k=4)'s n.
    res = study.cell(0.15, 4, "spread", reps=400)
    assert res["n_tasks"] == holdout_size(0.15, base=0.5, k=4)["n_tasks"]
    assert 0.01 <= res["fpr"]["value"] <= 0.10


def test_power_cell_matches_the_measured_power_delta_report_quotes(study) -> None:
    # Equal difficulties at 0.5, k=8, +0.20: the smallest n of the grid (the spec's closed
    # form says 12 tasks), where a test that estimates the sd off the same tasks falls
    # furthest short of the nominal 80%. delta_report's sizing line quotes MEASURED_POWER for
    # this cell, so a slice of the study must land near it: a verdict or sizing change that
    # moves the power fails here until the table is baked again.
    res = study.cell(0.20, 8, "equal", reps=400)
    assert res["n_tasks"] == holdout_size(0.20, base=0.5, k=8)["n_tasks"] == 12
    measured = MEASURED_POWER[(8, "equal", 0.20)][0]
    assert abs(res["power"]["value"] - measured) <= 0.08
    assert 0.6 <= res["power"]["value"] <= 0.9
