"""metric_summary, marker_summary, compare_runs and eval_variance."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wai_exp.score.stats.stats import (
    MIN_CI_TASKS,
    STABILITY_BANDS,
    adaptive_note,
    compare_runs,
    eval_variance,
    marker_names,
    marker_summary,
    metric_summary,
    noise_band,
    rollout_std,
    run_intervals,
    stability,
)


def arm(passes: list[int], k: int = 4, prefix: str = "t", **extra: object) -> list[dict]:
    """Rows for one arm: task i has ``passes[i]`` passing rollouts out of ``k``."""
    rows = []
    for i, c in enumerate(passes):
        for j in range(k):
            rows.append({"scenario_id": f"{prefix}{i}", "reward": 1.0 if j < c else 0.0, **extra})
    return rows


def random_arm(p: np.ndarray, seed: int, k: int = 4) -> list[dict]:
    return arm(np.random.default_rng(seed).binomial(k, p).tolist(), k)


# --------------------------------------------------------------------------------------
# metric_summary / marker_summary
# --------------------------------------------------------------------------------------


def test_metric_summary_is_a_mean_over_tasks() -> None:
    rows = arm([4, 0, 2], k=4) + arm([1], k=1, prefix="u")
    s = metric_summary(rows)
    assert s["mean"] == pytest.approx((1 + 0 + 0.5 + 1) / 4)
    assert s["n_tasks"] == 4 and s["n_rows"] == 13
    assert s["n_rows_at_1"] == 7 and s["n_rows_at_0"] == 6
    assert s["degenerate"] is False
    lo, hi = s["ci95"]
    assert 0.0 <= lo <= s["mean"] <= hi <= 1.0
    assert set(s) == {
        "mean",
        "ci95",
        "n_tasks",
        "n_rows",
        "n_rows_at_1",
        "n_rows_at_0",
        "degenerate",
    }


def test_metric_summary_reads_markers_and_skips_rows_without_them() -> None:
    rows = [
        {"scenario_id": "a", "markers": {"polite": 1.0}},
        {"scenario_id": "a", "markers": {"polite": 0.0}},
        {"scenario_id": "b", "markers": {"polite": 1.0}},
        {"scenario_id": "c", "markers": {"polite": 0.0}},
        {"scenario_id": "d", "markers": {}},
    ]
    s = metric_summary(rows, "polite")
    assert s["mean"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert s["n_tasks"] == 3 and s["n_rows"] == 4
    assert metric_summary(rows, "marker:polite") == s


def test_ci_withheld_below_min_tasks_with_a_note_naming_counts() -> None:
    s = metric_summary(arm([1, 3]))
    assert s["ci95"] is None
    assert "2 task" in s["note"] and str(MIN_CI_TASKS) in s["note"]


def test_degenerate_metric_has_no_interval_and_warns() -> None:
    rows = [{"scenario_id": f"t{i}", "markers": {"always": 1.0}} for i in range(10)]
    s = metric_summary(rows, "always")
    assert s["degenerate"] is True and s["ci95"] is None
    assert "every one of the 10 rows" in s["warning"]
    assert s["mean"] == 1.0


def test_metric_nobody_carries() -> None:
    s = metric_summary(arm([1, 2, 3]), "missing_marker")
    assert s["mean"] is None and s["ci95"] is None and s["n_tasks"] == 0
    assert "missing_marker" in s["note"]


def test_unjudged_rows_never_count_as_failures() -> None:
    rows = arm([2, 3, 1]) + [
        {"scenario_id": "t0", "reward": None},
        {"scenario_id": "t1", "reward": 0.0, "judge_status": "error"},
    ]
    assert metric_summary(rows) == metric_summary(arm([2, 3, 1]))


def test_marker_names_and_marker_summary() -> None:
    rows = [
        {"scenario_id": f"t{i}", "markers": {"polite": float(i % 2), "grounded": 1.0, "tag": "x"}}
        for i in range(6)
    ]
    assert marker_names(rows) == ["grounded", "polite"]
    summary = marker_summary(rows)
    assert set(summary) == {"grounded", "polite"}
    assert summary["polite"]["mean"] == pytest.approx(0.5)
    assert summary["grounded"]["degenerate"] is True
    assert set(marker_summary(rows, names=["polite"])) == {"polite"}


# --------------------------------------------------------------------------------------
# compare_runs
# --------------------------------------------------------------------------------------


def test_identical_runs_show_no_difference() -> None:
    a = arm([1, 2, 3, 4, 0, 2, 3])
    res = compare_runs(a, a)
    # Every paired difference is 0: no resample can differ, yet 7 tasks are not certainty.
    # The runs can differ on at most Wilson's upper bound for 0 of 7 tasks, by at most 1
    # each; Newcombe's interval over the two rates (+-0.43 here) would ignore the pairing.
    z2 = 1.959963984540054**2
    half = z2 / (7 + z2)
    assert res["delta"] == 0.0 and res["ci95"] == pytest.approx([-half, half])
    assert res["method"] == "paired_boundary" and "cannot vary" in res["note"]
    assert res["p_value"] == 1.0
    assert res["verdict"] == "no_difference_detected"
    assert res["paired"] is True and res["paired_share"] == 1.0


def test_clear_gain_is_b_better_and_reversed_is_a_better() -> None:
    a = arm([0, 1, 0, 1, 2, 0, 1, 0, 1, 1, 0, 2])
    b = arm([3, 4, 2, 4, 4, 3, 4, 2, 3, 4, 3, 4])
    res = compare_runs(a, b)
    assert res["verdict"] == "b_better"
    assert res["delta"] == pytest.approx(np.mean([3, 3, 2, 3, 2, 3, 3, 2, 2, 3, 3, 2]) / 4)
    assert res["ci95"][0] > 0 and res["p_value"] < 0.01
    assert compare_runs(b, a)["verdict"] == "a_better"


def test_paired_delta_is_mean_of_per_task_differences() -> None:
    a = arm([1, 2, 3, 0, 4])
    b = arm([2, 2, 4, 1, 3])
    res = compare_runs(a, b)
    assert res["delta"] == pytest.approx((1 + 0 + 1 + 1 - 1) / 4 / 5)
    assert res["mean_a"] == pytest.approx(10 / 20) and res["mean_b"] == pytest.approx(12 / 20)
    # Five nonzero pairs: every one of the 32 sign patterns is enumerated.
    assert res["p_exact"] is True


def test_one_sided_tasks_are_dropped_and_counted() -> None:
    a = arm([1, 2, 3, 4, 0, 2])
    b = arm([2, 2, 4, 1, 3, 1]) + arm([4, 4], prefix="new")
    res = compare_runs(a, b)
    assert res["n_paired"] == 6 and res["n_only_b"] == 2 and res["n_only_a"] == 0
    assert res["paired_share"] == pytest.approx(6 / 8)
    assert "2 tasks on one side only (0 in a, 2 in b) were dropped" in res["note"]


def test_unpaired_fallback_below_min_paired() -> None:
    a = arm([1, 2, 3, 0], prefix="a")
    b = arm([2, 3, 4, 4], prefix="b")
    res = compare_runs(a, b)
    assert res["paired"] is False and res["method"] == "unpaired_bootstrap"
    assert "min_paired=5" in res["note"]
    assert res["delta"] == pytest.approx((13 - 6) / 16)
    assert res["ci95"] is not None
    assert compare_runs(a, b, min_paired=1)["n_paired"] == 0


def test_level_is_reported_and_widens_the_interval() -> None:
    a = random_arm(np.full(30, 0.5), 1)
    b = random_arm(np.full(30, 0.6), 2)
    r95, r99 = compare_runs(a, b), compare_runs(a, b, level=0.99)
    assert r95["level"] == 0.95 and r99["level"] == 0.99
    assert r99["ci95"][0] < r95["ci95"][0] and r99["ci95"][1] > r95["ci95"][1]
    with pytest.raises(ValueError, match="level"):
        compare_runs(a, b, level=95)


def test_compare_runs_on_a_marker() -> None:
    a = [{"scenario_id": f"t{i}", "markers": {"m": float(i % 3 == 0)}} for i in range(12)]
    b = [{"scenario_id": f"t{i}", "markers": {"m": 1.0}} for i in range(12)]
    res = compare_runs(a, b, metric="m")
    assert res["metric"] == "m" and res["delta"] == pytest.approx(8 / 12)
    assert res["verdict"] == "b_better"


passes = st.lists(st.integers(0, 4), min_size=1, max_size=20)


@settings(max_examples=30, deadline=None)
@given(passes, passes, st.integers(0, 3))
def test_compare_runs_is_antisymmetric(pa: list[int], pb: list[int], extra: int) -> None:
    n = min(len(pa), len(pb))
    a = arm(pa[:n]) + arm([1] * extra, prefix="only_a")
    b = arm(pb[:n])
    ab, ba = compare_runs(a, b, n_boot=300), compare_runs(b, a, n_boot=300)
    assert ab["delta"] == pytest.approx(-ba["delta"], abs=1e-12)
    if ab["ci95"] is not None:
        assert ab["ci95"][0] == pytest.approx(-ba["ci95"][1], abs=1e-9)
        assert ab["ci95"][1] == pytest.approx(-ba["ci95"][0], abs=1e-9)
        assert ab["ci95"][0] - 1e-12 <= ab["delta"] <= ab["ci95"][1] + 1e-12
    mirror = {"b_better": "a_better", "a_better": "b_better"}
    assert ba["verdict"] == mirror.get(ab["verdict"], ab["verdict"])
    if ab["p_value"] is not None:
        assert ab["p_value"] == pytest.approx(ba["p_value"])


@settings(max_examples=25, deadline=None)
@given(passes, passes, st.integers(0, 4))
def test_adding_a_task_never_crashes(pa: list[int], pb: list[int], c: int) -> None:
    a, b = arm(pa), arm(pb)
    for x, y in ((a + arm([c], prefix="new"), b), (a, b + arm([c], prefix="new"))):
        res = compare_runs(x, y, n_boot=200)
        assert res["verdict"] in {"b_better", "a_better", "no_difference_detected"}
        metric_summary(x, n_boot=200)
        eval_variance(x, y)


# --------------------------------------------------------------------------------------
# eval_variance
# --------------------------------------------------------------------------------------


def with_run(rows: list[dict], **lineage: object) -> list[dict]:
    return [{**r, "lineage": dict(lineage)} for r in rows]


def test_eval_variance_by_hand_from_separate_runs() -> None:
    runs = [arm([4, 2, 0, 2]), arm([3, 2, 1, 2]), arm([4, 3, 1, 3])]
    means = [8 / 16, 8 / 16, 11 / 16]
    res = eval_variance(*runs)
    assert res["means"] == pytest.approx(means)
    assert res["mean"] == pytest.approx(statistics.mean(means))
    assert res["run_std"] == pytest.approx(statistics.stdev(means))
    assert res["noise_band"] == pytest.approx(1.96 * math.sqrt(2) * statistics.stdev(means))
    assert res["n_runs"] == 3
    assert res["run_std_by_metric"]["pass_at_1"] == pytest.approx(res["run_std"])
    assert res["stability"] == stability(res["run_std"])


def test_eval_variance_splits_one_list_by_lineage() -> None:
    r0, r1, r2 = arm([4, 2, 0]), arm([3, 2, 1]), arm([4, 4, 1])
    by_eval_run = with_run(r0, eval_run=0) + with_run(r1, eval_run=1) + with_run(r2, eval_run=2)
    res = eval_variance(by_eval_run)
    assert res["runs"] == [0, 1, 2] and res["n_runs"] == 3
    assert res["run_std"] == pytest.approx(eval_variance(r0, r1, r2)["run_std"])
    by_scoring = with_run(r0, scoring_run_id="x") + with_run(r1, scoring_run_id="y")
    assert eval_variance(by_scoring)["runs"] == ["x", "y"]
    custom = [{**r, "attempt": i // 12} for i, r in enumerate(r0 + r1 + r2)]
    assert eval_variance(custom, by="attempt")["run_std"] == pytest.approx(res["run_std"])


def test_eval_variance_with_fewer_than_three_runs_says_so() -> None:
    two = eval_variance(arm([4, 2, 0]), arm([3, 2, 1]))
    assert two["run_std"] is not None
    assert any("difference, not a distribution" in n for n in two["notes"])
    one = eval_variance(arm([4, 2, 0]))
    assert one["run_std"] is None and one["noise_band"] is None and one["stability"] is None
    assert any("one run" in n for n in one["notes"])
    with pytest.raises(ValueError, match="needs rows"):
        eval_variance()


def test_run_std_by_metric_covers_markers_shared_by_every_run() -> None:
    def marked(passes: list[int], polite: float, extra: bool) -> list[dict]:
        rows = arm(passes)
        for r in rows:
            r["markers"] = {"polite": polite} | ({"rare": 1.0} if extra else {})
        return rows

    res = eval_variance(
        marked([4, 2], 0.5, True), marked([3, 2], 0.7, False), marked([4, 3], 0.6, True)
    )
    assert set(res["run_std_by_metric"]) == {"pass_at_1", "polite"}
    assert res["run_std_by_metric"]["polite"] == pytest.approx(statistics.stdev([0.5, 0.7, 0.6]))
    marker = eval_variance(marked([4, 2], 0.5, True), marked([3, 2], 0.7, False), metric="polite")
    assert marker["run_std"] == pytest.approx(statistics.stdev([0.5, 0.7]))


def test_stability_bands_in_points() -> None:
    assert stability(0.004) == "stable"
    assert stability(0.01) == "moderate"
    assert stability(0.02) == "noisy"
    assert stability(0.05) == "unstable"
    assert stability(None) is None
    assert [label for _, label in STABILITY_BANDS] == ["stable", "moderate", "noisy", "unstable"]
    json.dumps(eval_variance(arm([1, 2]), arm([2, 2])))  # JSON-safe: no infinity


# --------------------------------------------------------------------------------------
# Reproducibility across processes
# --------------------------------------------------------------------------------------

_CHILD = """
import json, numpy as np
from wai_exp.score.stats.stats import compare_runs, metric_summary
rng = np.random.default_rng(5)
def arm(c):
    return [{"scenario_id": f"t{i}", "reward": 1.0 if j < x else 0.0}
            for i, x in enumerate(c) for j in range(4)]
a, b = arm(rng.integers(0, 5, 25).tolist()), arm(rng.integers(0, 5, 25).tolist())
print(json.dumps([compare_runs(a, b, seed=3), metric_summary(a, seed=3)]))
"""


def test_same_seed_same_numbers_in_another_process() -> None:
    rng = np.random.default_rng(5)
    a = arm(rng.integers(0, 5, 25).tolist())
    b = arm(rng.integers(0, 5, 25).tolist())
    here = json.loads(json.dumps([compare_runs(a, b, seed=3), metric_summary(a, seed=3)]))
    child = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True
    )
    assert json.loads(child.stdout) == here
    assert compare_runs(a, b, seed=3) == compare_runs(a, b, seed=3)


def wilson_over(p: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson's score interval written out for a (possibly fractional) proportion p of n."""
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def test_runs_that_both_fail_everything_are_not_certain_of_no_difference() -> None:
    # Six tasks failed every time on both sides: the old interval was [0, 0].
    a = arm([0] * 6)
    res = compare_runs(a, a)
    _, hi = wilson_over(0.0, 6)
    assert hi == pytest.approx(3.8415 / (6 + 3.8415), abs=1e-4)  # z^2 / (n + z^2) = 0.39
    assert res["ci95"] == pytest.approx([-hi, hi])
    assert res["verdict"] == "no_difference_detected"


def test_all_zero_runs_are_no_signal_not_stable() -> None:
    # Three re-runs that failed every rollout agree exactly: run_std 0, which the bands
    # would call "stable". Nothing could vary, so it is no signal.
    runs = [arm([0] * 8) for _ in range(3)]
    res = eval_variance(*runs)
    assert res["run_std"] == 0.0
    assert res["stability"] == "no_signal"
    assert any("no signal, not stability" in n for n in res["notes"])
    # Runs that vary and happen to agree closely are still banded as before.
    moving = eval_variance(arm([1, 2, 3, 2]), arm([1, 2, 3, 3]), arm([2, 2, 3, 2]))
    assert moving["stability"] == stability(moving["run_std"])


def test_eval_variance_leaves_out_rows_that_name_no_run() -> None:
    # Two stamped re-runs plus 4 rows another tool wrote with no run id: still two runs.
    run0 = arm([4, 2, 0], lineage={"eval_run": 0})
    run1 = arm([3, 2, 1], lineage={"eval_run": 1})
    stray = [{"scenario_id": "t0", "reward": 0.0} for _ in range(4)]
    rep = eval_variance(run0 + run1 + stray)
    assert rep["n_runs"] == 2 and rep["runs"] == [0, 1] and rep["n_stray_rows"] == 4
    assert rep["means"] == pytest.approx([0.5, 0.5])
    assert any(
        n.startswith("4 of 28 rows name no run") and "they are not" in n for n in rep["notes"]
    )
    # No row names a run: they are the one run, nothing is stray.
    alone = eval_variance(stray)
    assert alone["n_stray_rows"] == 0 and len(alone["means"]) == 1


def test_unpaired_runs_at_zero_are_not_certain_either() -> None:
    # Three tasks a side, none shared: the unpaired fallback's bootstrap cannot vary.
    a = [{"scenario_id": f"a{i}", "reward": 0.0} for i in range(3) for _ in range(4)]
    b = [{"scenario_id": f"b{i}", "reward": 0.0} for i in range(3) for _ in range(4)]
    res = compare_runs(a, b)
    _, hi = wilson_over(0.0, 3)
    assert res["paired"] is False and res["method"] == "unpaired_boundary"
    assert res["ci95"] == pytest.approx([-hi, hi])
    assert res["verdict"] == "no_difference_detected"


def test_rows_an_adaptive_policy_added_are_left_out_of_summary_and_compare() -> None:
    # 30 tasks open with 1 pass in 4; a verify policy then added 4 passing rows to each.
    first = arm([1] * 30)
    added = arm([4] * 30, selection_reason="verify")
    summary = metric_summary(first + added)
    assert summary["mean"] == pytest.approx(0.25) and summary["n_rows"] == 120
    assert "120 rows an adaptive policy added" in summary["note"]
    cmp = compare_runs(first + added, first)
    assert cmp["delta"] == pytest.approx(0.0) and cmp["verdict"] == "no_difference_detected"
    assert "run a: 120 rows an adaptive policy added" in cmp["note"]


def _rerun(rates: list[int], k: int, run: int) -> list[dict]:
    """One eval run: task t passes ``rates[t]`` of its ``k`` rows."""
    return [
        {"scenario_id": f"t{t}", "reward": float(j < c), "lineage": {"eval_run": run}}
        for t, c in enumerate(rates)
        for j in range(k)
    ]


def test_three_runs_that_land_on_one_number_are_not_a_stable_eval() -> None:
    # 10 tasks at 4 rows: every run totals 20 of 40, but the tasks themselves moved (each
    # task's count changes between runs). The sd of the three means is 0; the rollouts'
    # own noise says a re-run moves pass@1 by about 0.07. Before, this read run_std 0,
    # band +-0, "stable", and a delta floored on it called any difference real.
    runs = [
        _rerun([4, 0, 2, 2, 3, 1, 2, 2, 1, 3], 4, 0),
        _rerun([2, 2, 4, 0, 1, 3, 3, 1, 2, 2], 4, 1),
        _rerun([0, 4, 1, 3, 2, 2, 1, 3, 3, 1], 4, 2),
    ]
    rep = eval_variance(*runs)
    assert rep["run_std"] == 0.0 and eval_variance(*runs[:2])["run_std"] == 0.0
    # pooled per task over 12 rows: c (n - c) / (n (n - 1)), then / 4 rows, / 10^2 tasks
    pooled = [6, 6, 7, 5, 6, 6, 6, 6, 6, 6]
    var = sum(c * (12 - c) / (12 * 11) / 4 for c in pooled) / 100
    assert rep["rollout_std"] == pytest.approx(math.sqrt(var))
    assert rep["run_std_by_metric"]["pass_at_1"] == pytest.approx(math.sqrt(var))
    assert rep["noise_band"] == pytest.approx(noise_band(math.sqrt(var)))
    assert rep["stability"] != "stable"
    assert any("agreed by chance" in n for n in rep["notes"])
    mean_ci, sd_ci = run_intervals(rep)
    assert sd_ci is not None and sd_ci[0] > 0 and mean_ci is not None and mean_ci[1] > mean_ci[0]


def test_rollout_std_is_what_re_runs_spread_by_on_average() -> None:
    # 30 tasks of fixed difficulty, 4 rows a run, 3 runs, 400 times: the mean squared
    # spread of the run means matches the rollout prediction's mean square within 10%.
    rng = np.random.default_rng(5)
    p = rng.uniform(0.1, 0.9, size=30)
    measured, predicted, floored = [], [], 0
    for _ in range(400):
        runs = [_rerun(list(rng.binomial(4, p)), 4, r) for r in range(3)]
        measured.append(eval_variance(*runs)["run_std"] ** 2)
        predicted.append(rollout_std(runs) ** 2)
        floored += eval_variance(*runs)["rollout_std"] is not None
    assert np.mean(measured) == pytest.approx(np.mean(predicted), rel=0.1)
    # Only spreads under the chi-square's 2.5% point are floored: about 2.5% of honest runs.
    assert floored <= 25


def test_counts_of_one_in_the_notes_are_singular_and_agree_with_their_verb() -> None:
    assert "on 1 task; an interval needs" in metric_summary(arm([1]))["note"]
    assert "on 2 tasks; an interval needs" in metric_summary(arm([1, 3]))["note"]
    assert adaptive_note(1).startswith("1 row an adaptive policy added")
    assert ") is left out: it is drawn where" in adaptive_note(1)
    assert ") are left out: they are drawn where" in adaptive_note(2)
    shared = arm([1, 2, 3, 4, 0, 2])
    one_side = compare_runs(shared, shared + arm([4], prefix="new"))["note"]
    assert "1 task on one side only (0 in a, 1 in b) was dropped" in one_side
    assert "only 1 shared task (< min_paired=" in compare_runs(arm([1]), arm([2]))["note"]
    assert eval_variance(arm([1, 2]))["notes"][-1].startswith("1 run: a spread needs")
    run0 = arm([4, 2, 0], lineage={"eval_run": 0})
    run1 = arm([3, 2, 1], lineage={"eval_run": 1})
    stray = [{"scenario_id": "t0", "reward": 0.0}]
    notes = eval_variance(run0 + run1 + stray)["notes"]
    assert any(n.startswith("1 of 25 rows names no run") and "it is not" in n for n in notes)
