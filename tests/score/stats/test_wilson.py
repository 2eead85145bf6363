"""The one Wilson score interval (``intervals.wilson_score``) behind ``wilson_interval`` and
``resample.wilson_over_tasks``, checked against scipy's own over a grid of k, n and levels."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from wai_exp.score.stats.intervals import wilson_interval, wilson_score
from wai_exp.score.stats.resample import wilson_ci, wilson_over_tasks

NS = [1, 2, 3, 5, 6, 10, 37, 100, 1001]
LEVELS = [0.5, 0.8, 0.9, 0.95, 0.99, 0.999]


def _grid():
    for n in NS:
        ks = range(n + 1) if n <= 37 else sorted({0, 1, 2, n // 3, n // 2, n - 1, n})
        for k in ks:
            yield k, n


@pytest.mark.parametrize("level", LEVELS)
def test_wilson_matches_scipy(level):
    checked = 0
    for k, n in _grid():
        want = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
        got = wilson_interval(k, n, level)
        assert got == pytest.approx((want.low, want.high), abs=1e-12), (k, n, level)
        assert wilson_score(k / n, n, level) == got
        assert wilson_ci(k, n, level) == [got.low, got.high]
        # A mean of n task values in [0, 1] at k/n is k successes of n.
        assert wilson_over_tasks(k / n, n, level) == pytest.approx(got, abs=1e-15)
        # Rescaled bounds give the same interval, moved onto them.
        lo, hi = wilson_over_tasks(-1.0 + 3.0 * k / n, n, level, bounds=(-1.0, 2.0))
        assert (lo, hi) == pytest.approx((-1.0 + 3.0 * got.low, -1.0 + 3.0 * got.high), abs=1e-12)
        checked += 1
    assert checked == 85


def test_bounds_are_exact_at_zero_and_all():
    for n in NS:
        assert wilson_interval(0, n).low == 0.0
        assert wilson_interval(n, n).high == 1.0
    assert wilson_over_tasks(0.0, 6) == pytest.approx((0.0, 0.39), abs=0.005)


def test_bad_counts():
    assert wilson_interval(0, 0) is None
    assert wilson_ci(0, 0) is None
    for k, n in [(-1, 3), (4, 3), (0, -1)]:
        with pytest.raises(ValueError, match="0 <= successes <= n"):
            wilson_interval(k, n)
    with pytest.raises(ValueError, match="level must be in"):
        wilson_interval(1, 2, 1.5)
    with pytest.raises(ValueError, match="n >= 1"):
        wilson_over_tasks(0.5, 0)
