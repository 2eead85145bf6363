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
    heights = [p.get_height() for p in ax.containers[0]]
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


def test_histogram_draws_the_selection_band_and_counts_the_tasks_in_it(graded_rows):
    # rates: t1 0.5, t2 1.0, t3 0.5 -> two of three tasks inside 20-80%
    ax = pass_rate_histogram(graded_rows, band=(0.2, 0.8)).axes[0]
    spans = [p for p in ax.patches if p not in list(ax.containers[0])]
    assert len(spans) == 1
    x0, x1 = spans[0].get_bbox().x0, spans[0].get_bbox().x1
    assert x0 == pytest.approx(0.2) and x1 == pytest.approx(0.8)
    labels = ax.get_legend_handles_labels()[1]
    assert any("selection band 20%–80%: 2 of 3 tasks" in lab for lab in labels)


def test_headline_figure_has_error_bars_and_marks_unmeasured():
    from wai_exp.tracking.plots import headline_figure

    metrics = {"pass_at_1": 0.6, "pass_at_1_ci_lo": 0.5, "pass_at_1_ci_hi": 0.7, "pass_at_k": 0.9}
    ax = headline_figure(metrics, {"k": 4}).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["pass@1", "pass^4", "pass@4"]
    bars = [p.get_height() for c in ax.containers if hasattr(c, "patches") for p in c.patches]
    assert bars == [pytest.approx(0.6), pytest.approx(0.9)]  # pass^4 unmeasured: no bar
    texts = [t.get_text() for t in ax.texts]
    assert "0.600\n[0.500, 0.700]" in texts and "not\nmeasured" in texts
    assert headline_figure({"pass_at_1": None}) is None


def test_headline_figure_draws_the_floor_only_when_it_was_measured():
    from wai_exp.tracking.plots import headline_figure

    metrics = {"pass_at_1": 0.18, "pass_at_1_ci_lo": 0.1, "pass_at_1_ci_hi": 0.29}
    floor = {"floor": 0.18, "floor_ci_lo": 0.1, "floor_ci_hi": 0.29}
    ax = headline_figure({**metrics, **floor}).axes[0]
    [line] = [ln for ln in ax.get_lines() if ln.get_label().startswith("floor")]
    assert line.get_label() == "floor (do-nothing agent) 0.180"
    assert list(line.get_ydata()) == [0.18, 0.18]
    # not measured: no line at all (never one drawn at 0)
    ax = headline_figure(metrics).axes[0]
    assert not [ln for ln in ax.get_lines() if ln.get_label().startswith("floor")]


def test_sweep_figure_plots_each_value_with_its_interval():
    from wai_exp.tracking.plots import sweep_figure

    table = {
        "value_keys": ["agent.skill"],
        "rows": [
            {
                "values": {"agent.skill": "0.6"},
                "mean": 0.4,
                "ci_lo": 0.3,
                "ci_hi": 0.5,
                "n_runs": 1,
            },
            {
                "values": {"agent.skill": "0.9"},
                "mean": 0.8,
                "ci_lo": 0.7,
                "ci_hi": 0.9,
                "n_runs": 2,
            },
        ],
    }
    ax = sweep_figure(table).axes[0]
    line = ax.lines[0]
    assert list(line.get_xdata()) == [0.6, 0.9] and list(line.get_ydata()) == [0.4, 0.8]
    assert ax.get_xlabel() == "agent.skill"
    assert sweep_figure({"value_keys": [], "rows": []}) is None


def test_delta_figure_shows_each_paired_delta_with_its_interval():
    from wai_exp.tracking.plots import delta_figure

    report = {
        "headline_verdict": "IMPROVED",
        "metrics": {
            "pass_at_1": {"delta": 0.1, "ci95": [0.02, 0.18], "verdict": "improved"},
            "grounded": {"delta": -0.01, "ci95": [-0.05, 0.03], "verdict": "no_change"},
            "unmeasured": {"delta": None},
        },
    }
    ax = delta_figure(report).axes[0]
    assert sorted(t.get_text() for t in ax.get_yticklabels()) == ["grounded", "pass_at_1"]
    assert delta_figure({"metrics": {}}) is None


def test_delta_figure_labels_an_unreplicated_move_as_such():
    """The plot, titled with an INCONCLUSIVE headline, labelled the delta ``improved``."""
    from wai_exp.tracking.plots import delta_figure

    report = {
        "floor_source": "none",
        "metrics": {
            "pass_at_1": {"delta": 0.3, "ci95": [0.2, 0.4], "verdict": "improved"},
            "grounded": {"delta": -0.2, "ci95": [-0.3, -0.1], "verdict": "regressed"},
        },
    }
    ax = delta_figure(report).axes[0]
    labels = sorted(t.get_text() for t in ax.texts if t.get_text().startswith(("+", "-")))
    assert labels == ["+0.300 up, unreplicated", "-0.200 down, unreplicated"]
    colors = sorted(str(line.get_color()) for line in ax.get_lines() if line.get_marker() == "o")
    assert colors == ["tab:green", "tab:red"]


def _rows(n_by_task: dict[str, tuple[int, int]]) -> list[dict]:
    """Rows with ``c`` passes out of ``n`` per task."""
    return [
        {"scenario_id": t, "reward": float(i < c)}
        for t, (n, c) in n_by_task.items()
        for i in range(n)
    ]


def test_histogram_line_is_the_headline_pass_at_1_with_its_interval():
    """The plot said 'pass@1 = 0.652' (its own mean over all rows) where the summary said
    0.631 (the first-batch headline): the line labelled pass@1 is now the headline."""
    rows = _rows({"a": (8, 6), "b": (4, 2), "c": (4, 3)})  # mean of rates 0.667
    metrics = {"pass_at_1": 0.631, "pass_at_1_ci_lo": 0.5, "pass_at_1_ci_hi": 0.75}
    ax = pass_rate_histogram(rows, metrics=metrics).axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "pass@1 0.631 [0.500, 0.750]" in labels
    assert not any(lab.startswith("pass@1") and "0.667" in lab for lab in labels)
    assert "mean of these rates (all rows) 0.667" in labels
    # without a headline the line says what it is, not pass@1
    labels = pass_rate_histogram(rows).axes[0].get_legend_handles_labels()[1]
    assert "mean per-task rate 0.667" in labels and not any("pass@1" in x for x in labels)


def test_pass_at_k_curve_keeps_one_task_population_and_draws_bands():
    """Tasks with 8 rows next to tasks with 4: averaged over whichever tasks reach k, pass^k
    jumped at k=5 where the 4-row tasks drop out. On one population it only falls."""
    rows = _rows({f"long{i}": (8, 2) for i in range(10)} | {f"short{i}": (4, 4) for i in range(30)})
    old = pass_at_k_curve(task_counts(rows))
    assert old["pass_pow_k"][4] < old["pass_pow_k"][3] - 0.5  # the jump the old plot drew
    fig = pass_at_k_figure(rows, {"k": 4})
    ax = fig.axes[0]
    pow_line = [ln for ln in ax.get_lines() if ln.get_label().startswith("pass^k")][0]
    ys = pow_line.get_ydata()
    assert list(pow_line.get_xdata()) == [1, 2, 3, 4]  # up to the reported k
    assert all(b <= a + 1e-12 for a, b in zip(ys, ys[1:], strict=False))
    assert len(ax.collections) == 2  # a 95% band per curve
    assert any("the same 40 tasks" in t.get_text() for t in ax.texts)


def test_delta_figure_keeps_every_label_inside_the_image():
    from wai_exp.tracking.plots import delta_figure

    report = {
        "headline_verdict": "REAL ON THESE TASKS, WITHIN RE-RUN NOISE",
        "metrics": {
            "pass_at_1": {"delta": -0.037, "ci95": [-0.06, -0.017], "verdict": "within_noise"},
            "marker:asked_before_acting_on_ambiguous_requests": {
                "delta": 0.2, "ci95": [0.1, 0.3], "verdict": "improved"
            },
        },
    }  # fmt: skip
    fig = delta_figure(report, title="compare: paired deltas")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.bbox
    ax = fig.axes[0]
    texts = [ax.title, *ax.get_yticklabels(), *ax.texts, ax.xaxis.label]
    for t in texts:
        if not t.get_text():
            continue
        ext = t.get_window_extent(renderer)
        assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1, t.get_text()
        assert ext.y0 >= box.y0 - 1 and ext.y1 <= box.y1 + 1, t.get_text()


def test_pass_at_k_plot_shows_the_headline_pass_at_1_with_its_interval():
    """Issue 23 §6, plots agree with the headline: the curves' k=1 point (all rows, 0.647 in
    an rl_round) stood alone where the summary said pass@1 0.625 (first batch)."""
    rows = _rows({f"t{i}": (4, i % 5) for i in range(20)})
    metrics = {"pass_at_1": 0.625, "pass_at_1_ci_lo": 0.485, "pass_at_1_ci_hi": 0.758}
    ax = pass_at_k_figure(rows, {"k": 4}, metrics=metrics).axes[0]
    assert "pass@1 0.625 [0.485, 0.758] (headline)" in ax.get_legend_handles_labels()[1]
    # without a measured headline nothing claims to be it
    ax = pass_at_k_figure(rows, {"k": 4}).axes[0]
    assert not any("headline" in lab for lab in ax.get_legend_handles_labels()[1])
