"""Plots for graded stages: the numbers behind them, derived by hand, and valid PNGs."""

from __future__ import annotations

import io

import numpy as np
import pytest

from wai_exp.tracking.plots import (
    binary_reward,
    pass_at_k_curve,
    pass_at_k_figure,
    pass_rate_histogram,
    stage_figures,
    task_counts,
)


def test_only_binary_rewards_count_and_rows_group_by_task_key(graded_rows):
    counts = task_counts(graded_rows)
    # t4 is unjudged, t5 partial: neither is a task here.
    assert counts.keys == ["t1", "t2", "t3"]
    assert counts.n.tolist() == [4, 4, 2]
    assert counts.c.tolist() == [2, 4, 1]
    assert counts.rates.tolist() == [0.5, 1.0, 0.5]


def test_binary_reward_reads_qwen_reward_and_bools():
    assert binary_reward({"qwen_reward": 1}) == 1.0
    assert binary_reward({"reward": True}) == 1.0
    assert binary_reward({"reward": 0.25, "qwen_reward": 1}) is None  # partial reward wins
    assert binary_reward({"reward": "1"}) is None
    assert binary_reward({}) is None


def test_pass_at_k_curve_matches_the_unbiased_estimators_by_hand(graded_rows):
    curve = pass_at_k_curve(task_counts(graded_rows))
    # Tasks (n, c): (4, 2), (4, 4), (2, 1).
    # k=1: rates .5, 1, .5                       -> 2/3 for both
    # k=2: pass@2 = 1 - C(2,2)/C(4,2) = 5/6, 1, 1 - C(1,2)/C(2,2) = 1   -> 17/18
    #      pass^2 = C(2,2)/C(4,2) = 1/6, 1, C(1,2)/C(2,2) = 0           -> 7/18
    # k=3,4: only the two 4-row tasks: pass@k 1 and 1 -> 1; pass^k 0 and 1 -> 1/2
    assert curve["k"].tolist() == [1, 2, 3, 4]
    np.testing.assert_allclose(curve["pass_at_k"], [2 / 3, 17 / 18, 1.0, 1.0])
    np.testing.assert_allclose(curve["pass_pow_k"], [2 / 3, 7 / 18, 0.5, 0.5])
    assert curve["n_groups"].tolist() == [3, 3, 2, 2]


def test_no_curve_without_repeats():
    rows = [{"scenario_id": f"t{i}", "reward": i % 2} for i in range(5)]
    assert pass_at_k_curve(task_counts(rows))["k"].size == 0
    assert pass_at_k_figure(rows) is None


def test_histogram_bins_the_per_task_rates(graded_rows):
    fig = pass_rate_histogram(graded_rows)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert len(heights) == 10
    assert heights[5] == 2  # two tasks at 0.5, in [0.5, 0.6)
    assert heights[9] == 1  # one task at 1.0, in the closed last bin
    assert sum(heights) == 3
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


def test_nothing_graded_means_no_plots():
    rows = [{"scenario_id": "a", "prompt": "p"}, {"scenario_id": "b", "reward": None}]
    assert pass_rate_histogram(rows) is None
    assert stage_figures("simulate", rows) == {}


@pytest.mark.parametrize(
    ("report", "expect_curve"),
    [
        (None, True),
        ({"pass_at_1": 0.6, "k": 4, "pass_at_k": 0.9}, True),
        ({"pass_at": {"pass_at_k": None, "note": "below min_k"}}, False),
        ({"pass_at_k": None}, False),
    ],
)
def test_curve_respects_a_report_that_withheld_k_way_numbers(graded_rows, report, expect_curve):
    figs = stage_figures("grade", graded_rows, report)
    assert "pass_rate_hist.png" in figs
    assert ("pass_at_k.png" in figs) is expect_curve
