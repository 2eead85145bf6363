"""bootstrap_columns: many metrics on one resample, each column its own bootstrap_mean."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wai_exp.score.stats.resample import _resample_columns, bootstrap_columns, bootstrap_mean


def _pass_rate_diffs(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.integers(0, k + 1, n) - rng.integers(0, k + 1, n)) / k


@pytest.mark.parametrize(
    "first",
    [_pass_rate_diffs(120, 4, 1), np.random.default_rng(2).normal(0.1, 1.0, 50)],
    ids=["count_matrix", "index_matrix"],
)
def test_first_column_is_exactly_bootstrap_mean_whatever_rides_along(first: np.ndarray) -> None:
    rng = np.random.default_rng(3)
    others = np.column_stack([_pass_rate_diffs(first.size, 8, 4), rng.random(first.size)])
    x = np.column_stack([first, others])
    got = bootstrap_columns(x, seed=5)
    assert got[0] == bootstrap_mean(first, seed=5)
    # A Generator handed in ends where a one-column call leaves it: the next draw matches,
    # which is what lets delta_report run compare_runs' sign-flip test after it.
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    bootstrap_columns(x, seed=g1)
    bootstrap_mean(first, seed=g2)
    assert g1.random() == g2.random()


def test_a_column_that_is_a_function_of_the_first_shares_its_resample_exactly() -> None:
    # 2 * x: same t statistics, twice the standard error and lattice step, so exactly twice
    # the interval (scaling by 2 is exact in floating point).
    x = _pass_rate_diffs(80, 4, 6)
    first, double = bootstrap_columns(np.column_stack([x, 2 * x]), seed=1)
    assert double.interval.low == pytest.approx(2 * first.interval.low, rel=1e-12)
    assert double.interval.high == pytest.approx(2 * first.interval.high, rel=1e-12)


def test_other_columns_get_a_joint_resample_with_the_right_spread() -> None:
    # Column 1 = column 0 + independent noise. One shared resample of tasks means the two
    # resampled means correlate as the columns do (corr(x, x + e) = 1/sqrt(2) for unit
    # variances), and each spread is the plug-in sd / sqrt(n) of a bootstrap mean.
    rng = np.random.default_rng(7)
    n = 400
    x = (rng.integers(0, 5, n) - 2) / 4.0  # few distinct values: the refined path
    y = x + rng.normal(0.0, x.std(), n)
    means, variances = _resample_columns(
        np.column_stack([x, y]), 20000, np.random.default_rng(1), None,
        lambda: np.random.default_rng(2),
    )  # fmt: skip
    for j, col in enumerate((x, y)):
        assert means[:, j].mean() == pytest.approx(
            col.mean(), abs=3 * col.std() / math.sqrt(n) / 100
        )
        assert means[:, j].std() == pytest.approx(col.std() / math.sqrt(n), rel=0.03)
        assert variances[:, j].mean() == pytest.approx(col.var() * (n - 1) / n, rel=0.02)
    expected = np.corrcoef(x, y)[0, 1]
    assert np.corrcoef(means[:, 0], means[:, 1])[0, 1] == pytest.approx(expected, abs=0.02)


@pytest.mark.parametrize("first", [_pass_rate_diffs(90, 4, 8), np.linspace(-1, 1, 90)])
def test_batch_size_changes_no_number(first: np.ndarray) -> None:
    x = np.column_stack([first, _pass_rate_diffs(90, 8, 9), np.random.default_rng(0).random(90)])
    whole = bootstrap_columns(x, seed=3)
    for batch in (1, 13, 5000):
        assert bootstrap_columns(x, seed=3, batch=batch) == whole


def test_missing_values_each_column_bootstraps_its_own_tasks() -> None:
    x = np.column_stack([_pass_rate_diffs(60, 4, 10), _pass_rate_diffs(60, 4, 11)])
    x[:20, 1] = np.nan  # second metric on 40 of the 60 tasks
    single = np.full((60, 1), np.nan)
    single[5, 0] = 0.25
    got = bootstrap_columns(np.column_stack([x, single, np.full(60, np.nan)]), seed=2)
    assert got[0] == bootstrap_mean(x[:, 0], seed=2)
    assert got[1].n == 40 and got[1].estimate == pytest.approx(np.nanmean(x[:, 1]))
    assert got[1].interval.low < got[1].estimate < got[1].interval.high
    assert got[2].estimate == 0.25 and got[2].interval is None and got[2].n == 1
    assert got[3] is None


def test_mirrored_data_give_mirrored_intervals() -> None:
    x = np.column_stack([_pass_rate_diffs(70, 4, 12), _pass_rate_diffs(70, 8, 13)])
    for a, b in zip(bootstrap_columns(x, seed=4), bootstrap_columns(-x, seed=4), strict=True):
        assert a.interval.low == pytest.approx(-b.interval.high, abs=1e-12)
        assert a.interval.high == pytest.approx(-b.interval.low, abs=1e-12)


def test_bounds_per_column_or_shared_and_bad_input() -> None:
    x = np.column_stack([np.r_[np.ones(9), 0.75], np.r_[np.zeros(9), 0.25]])
    shared = bootstrap_columns(x, bounds=(0.0, 1.0))
    assert all(r.interval.low >= 0.0 and r.interval.high <= 1.0 for r in shared)
    own = bootstrap_columns(x, bounds=[(0.0, 0.9), None])
    assert own[0].interval.high <= 0.9 and own[1] == bootstrap_columns(x)[1]
    with pytest.raises(ValueError, match="matrix"):
        bootstrap_columns(np.zeros(5))
    with pytest.raises(ValueError, match="one per column"):
        bootstrap_columns(x, bounds=[(0.0, 1.0)] * 3)
    with pytest.raises(ValueError, match="method"):
        bootstrap_columns(x, method="normal")  # type: ignore[arg-type]
