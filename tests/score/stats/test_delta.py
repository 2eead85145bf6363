"""delta_report / format_delta_report: the verdicts a user gates a training run on."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wai_exp.score.stats.delta import (
    CEILING_MIN_TASKS_WITH_ROOM,
    delta_report,
    format_delta_report,
    paired_headline,
)


def arm(
    n_tasks: int,
    k: int,
    rates: float | np.ndarray,
    seed: int,
    *,
    markers: dict[str, float] | None = None,
    runs: int = 1,
    policy: str = "base",
    prefix: str = "t",
    final_text: str = "Done: the order is cancelled.",
) -> list[dict]:
    rng = np.random.default_rng(seed)
    p = np.broadcast_to(np.asarray(rates, dtype=float), (n_tasks,))
    rows = []
    for r in range(runs):
        for t in range(n_tasks):
            for _ in range(k):
                row = {
                    "scenario_id": f"{prefix}{t}",
                    "reward": float(rng.random() < p[t]),
                    "final_text": final_text,
                    "policy_version": policy,
                    "lineage": {"eval_run": r} if runs > 1 else {},
                }
                if markers:
                    row["markers"] = {m: float(rng.random() < q) for m, q in markers.items()}
                rows.append(row)
    return rows


def fixed(
    values: dict[str, list[float]], policy: str, runs: dict[str, int] | None = None
) -> list[dict]:
    """Rows with exactly these rewards per task (deterministic known answers)."""
    out = []
    for task, rewards in values.items():
        for i, r in enumerate(rewards):
            row = {"scenario_id": task, "reward": r, "final_text": "ok", "policy_version": policy}
            if runs is not None:
                row["lineage"] = {"eval_run": i % runs[task]}
            out.append(row)
    return out


def test_known_moved_case_passes() -> None:
    before = arm(150, 4, 0.4, 1, runs=3, policy="base")
    after = arm(150, 4, 0.7, 2, runs=3, policy="trained")
    rep = delta_report(before, after)
    assert rep["headline_verdict"] == "PASS" and rep["ok"]
    assert rep["verdict"]["moved"] and rep["target_verdict"] == "moved"
    lo, hi = rep["target_ci95"]
    assert lo > 0.2 and hi < 0.4  # true delta 0.3
    assert rep["n_paired_tasks"] == 150 and rep["n_unpaired_tasks"] == 0
    assert format_delta_report(rep).splitlines()[0].startswith("PASS: pass_at_1")


def test_delta_and_interval_are_the_paired_task_mean() -> None:
    before = fixed({"a": [0, 0], "b": [1, 0], "c": [1, 1], "d": [0, 0]}, "p0")
    after = fixed({"a": [1, 1], "b": [1, 1], "c": [1, 1], "d": [1, 0]}, "p1")
    rep = delta_report(before, after, n_boot=500)
    # per-task deltas 1, 0.5, 0, 0.5 -> mean 0.5
    assert rep["target_delta"] == pytest.approx(0.5)
    m = rep["metrics"]["pass_at_1"]
    assert (m["before"], m["after"]) == (pytest.approx(0.375), pytest.approx(0.875))
    assert m["ci95"][0] <= 0.5 <= m["ci95"][1]


def test_identical_arms_read_no_change() -> None:
    rows = arm(100, 4, 0.5, 3, policy="p")
    rep = delta_report(rows, [dict(r) for r in rows])
    assert rep["target_delta"] == 0.0
    assert rep["target_verdict"] == "no_change_detected" and rep["verdict"]["no_change_detected"]
    assert rep["headline_verdict"] == "NO DIFFERENCE"
    assert any("same policy version" in w or "policy version 'p'" in w for w in rep["warnings"])


def test_identical_draws_from_one_policy_with_reruns_are_noise_or_no_change() -> None:
    before = arm(120, 4, 0.5, 4, runs=3)
    after = arm(120, 4, 0.5, 5, runs=3)
    rep = delta_report(before, after)
    assert rep["target_verdict"] in ("no_change_detected", "within_eval_noise")
    assert rep["ok"]


def test_antisymmetry_and_seed_reproducibility() -> None:
    before = arm(80, 4, 0.4, 6, markers={"m": 0.5})
    after = arm(80, 4, 0.6, 7, markers={"m": 0.4})
    ab = delta_report(before, after, seed=3)
    ba = delta_report(after, before, seed=3)
    for name in ("pass_at_1", "m"):
        x, y = ab["metrics"][name], ba["metrics"][name]
        assert x["delta"] == pytest.approx(-y["delta"])
        assert x["ci95"][0] == pytest.approx(-y["ci95"][1])
        assert x["ci95"][1] == pytest.approx(-y["ci95"][0])
    again = delta_report(before, after, seed=3)
    assert again["metrics"] == ab["metrics"]
    other = delta_report(before, after, seed=4)
    assert other["target_ci95"] != ab["target_ci95"]


def test_t_quantile_band_at_df_2_by_hand() -> None:
    before = arm(60, 4, 0.5, 8)
    after = arm(60, 4, 0.55, 9)
    floor = 0.02
    rep = delta_report(before, after, run_std=floor, run_std_runs=3)
    # one run per side, floor from 3 re-runs: t(0.975, 2) = 4.303 x floor x sqrt(1 + 1)
    assert rep["noise_band"] == pytest.approx(4.302653 * floor * math.sqrt(2), rel=1e-5)
    assert rep["floor_source"] == "given"
    # without run_std_runs the band is 1.96 and a warning names the fix
    rep = delta_report(before, after, run_std=floor)
    assert rep["noise_band"] == pytest.approx(1.96 * floor * math.sqrt(2))
    assert any("run_std_runs" in w for w in rep["warnings"])


def test_pooled_floor_from_eval_runs_by_hand() -> None:
    # Two tasks, three runs per side; each run's pass@1 is a mean over the 2 tasks.
    # before runs: task x rewards per run (1,0,1), task y (1,1,0) -> run means 1, .5, .5
    # after runs:  x (1,1,1), y (1,0,1) -> run means 1, .5, 1
    runs = {"x": 3, "y": 3}
    before = fixed({"x": [1, 0, 1], "y": [1, 1, 0]}, "b", runs)
    after = fixed({"x": [1, 1, 1], "y": [1, 0, 1]}, "a", runs)
    rep = delta_report(before, after, n_boot=200)
    ss = sum((v - 2 / 3) ** 2 for v in (1, 0.5, 0.5)) + sum((v - 5 / 6) ** 2 for v in (1, 0.5, 1))
    floor = math.sqrt(ss / 4)  # df = (3 - 1) + (3 - 1)
    assert rep["run_std"] == pytest.approx(floor)
    assert rep["eval_runs"] == {"before": 3, "after": 3}
    # three runs per side: t(0.975, 4) = 2.776 x floor x sqrt(2/3)
    assert rep["noise_band"] == pytest.approx(2.776445 * floor * math.sqrt(2 / 3), rel=1e-5)
    assert "df=4" in rep["noise_rule"]
    assert rep["run_std_by_metric"]["pass_at_1"] == pytest.approx(floor)


def test_within_noise_when_delta_is_inside_the_band() -> None:
    before = arm(400, 4, 0.5, 10)
    after = arm(400, 4, 0.58, 11)
    rep = delta_report(before, after, run_std=0.1, run_std_runs=3)
    assert rep["metrics"]["pass_at_1"]["verdict"] == "within_noise"
    assert rep["target_verdict"] == "within_eval_noise"
    # The paired interval excludes zero: the arms do differ on these tasks, and a re-run
    # moves the eval as far. "NO DIFFERENCE" would contradict the printed interval.
    assert rep["target_ci95"][0] > 0
    assert rep["headline_verdict"] == "REAL ON THESE TASKS, WITHIN RE-RUN NOISE"
    assert format_delta_report(rep).startswith("REAL ON THESE TASKS, WITHIN RE-RUN NOISE: ")
    assert rep["ok"]


def test_no_difference_only_for_an_interval_over_zero() -> None:
    before = arm(400, 4, 0.5, 10)
    after = arm(400, 4, 0.5, 11)
    for rep in (
        delta_report(before, after, run_std=0.1, run_std_runs=3),  # within the band
        delta_report(before, after),  # no floor: the task interval alone
    ):
        lo, hi = rep["target_ci95"]
        assert lo <= 0 <= hi
        assert rep["headline_verdict"] == "NO DIFFERENCE", rep["target_verdict"]


def test_a_drop_on_one_run_a_side_reads_like_a_gain_on_one_run_a_side() -> None:
    """One evaluation a side is a draw whichever way it moved: a drop reads
    moved_unreplicated / INCONCLUSIVE, with the same gate, as the same-sized gain does."""
    low, high = arm(150, 4, 0.3, 14, policy="a"), arm(150, 4, 0.7, 15, policy="b")
    up, down = delta_report(low, high), delta_report(high, low)
    assert up["target_ci95"][0] > 0 and down["target_ci95"][1] < 0
    for rep in (up, down):
        assert rep["target_verdict"] == "moved_unreplicated"
        assert rep["headline_verdict"] == "INCONCLUSIVE (1 eval run a side: rerun to confirm)"
        assert rep["ok"] and not rep["verdict"]["regressed"]
        assert any("runs=3" in w for w in rep["warnings"])
    # Replicated, the same drop is a regression and fails.
    rep = delta_report(
        arm(150, 4, 0.7, 1, runs=3, policy="a"), arm(150, 4, 0.3, 2, runs=3, policy="b")
    )
    assert rep["target_verdict"] == "regressed" and rep["headline_verdict"] == "FAIL"
    assert not rep["ok"]


def test_paired_headline_says_what_delta_report_says_for_the_same_interval() -> None:
    """A sweep's table words each paired delta with ``paired_headline``: for one run a side
    (no floor either way) it must be ``delta_report``'s headline for the same rows."""
    low, high, same = (
        arm(150, 4, p, s, policy=f"p{s}") for p, s in ((0.3, 14), (0.7, 15), (0.3, 16))
    )
    for before, after in ((low, high), (high, low), (low, same)):
        rep = delta_report(before, after)
        ci = tuple(rep["target_ci95"])
        assert paired_headline(rep["target_delta"], ci, 1, 1) == rep["headline_verdict"]
    # replicated, a real move is PASS up and FAIL down, as delta_report says with a floor
    # that does not swallow it (test_a_drop_on_one_run_a_side_reads_like_a_gain_...)
    assert paired_headline(0.3, (0.2, 0.4), 2, 2) == "PASS"
    assert paired_headline(-0.3, (-0.4, -0.2), 2, 3) == "FAIL"
    assert paired_headline(0.01, (-0.05, 0.07), 2, 2) == "NO DIFFERENCE"
    assert paired_headline(0.3, (0.2, 0.4), 1, 2) == (
        "INCONCLUSIVE (1 eval run before, 2 after: rerun to confirm)"
    )
    assert paired_headline(None, None, 2, 2).startswith("NOT MEASURED")


def test_mapping_run_std_without_a_metric_gets_no_replicate_floor() -> None:
    before = arm(50, 4, 0.5, 12, markers={"polite": 0.5})
    after = arm(50, 4, 0.5, 13, markers={"polite": 0.5})
    rep = delta_report(before, after, run_std={"pass_at_1": 0.02}, run_std_runs=3)
    m = rep["metrics"]["polite"]
    assert m["noise_note"] == "no_replicate_floor" and m["noise_band"] is None
    assert rep["metrics"]["pass_at_1"]["noise_band"] is not None
    assert any("polite" in w and "no re-run floor" in w for w in rep["warnings"])


def test_one_run_without_run_std_reads_moved_unreplicated() -> None:
    before = arm(150, 4, 0.3, 14, policy="a")
    after = arm(150, 4, 0.7, 15, policy="b")
    rep = delta_report(before, after)
    assert rep["target_verdict"] == "moved_unreplicated" and rep["verdict"]["moved_unreplicated"]
    # Not a gain the report supports yet, and not "no difference" either: the interval
    # excludes zero on one evaluation a side.
    assert rep["target_ci95"][0] > 0
    assert rep["headline_verdict"] == "INCONCLUSIVE (1 eval run a side: rerun to confirm)"
    assert format_delta_report(rep).splitlines()[0].startswith("INCONCLUSIVE (1 eval run a side")
    assert any("runs=3" in w for w in rep["warnings"])


def _metric_line(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(f"{name} "))


def test_metric_lines_do_not_claim_more_than_an_inconclusive_headline() -> None:
    """Under ``INCONCLUSIVE (1 eval run a side ...)`` the pass_at_1 line said ``improved``
    (and a marker's ``regressed``): words the headline withholds. On one run a side a line
    says which way its interval points and that it is unreplicated; with re-runs a side the
    same move keeps ``improved``."""
    marks = {"grounded": 0.9}
    before = arm(150, 4, 0.3, 14, policy="a", markers=marks)
    after = arm(150, 4, 0.7, 15, policy="b", markers={"grounded": 0.4})
    text = format_delta_report(delta_report(before, after))
    assert text.startswith("INCONCLUSIVE (1 eval run a side")
    assert "improved" not in text and "regressed" not in text
    assert _metric_line(text, "pass_at_1").split("]  ")[1].startswith("up, unreplicated")
    assert _metric_line(text, "grounded").split("]  ")[1].startswith("down, unreplicated")
    by_group = format_delta_report(delta_report(before, after, by="grounded"))
    assert "improved" not in by_group and "up, unreplicated" in by_group.split("groups")[1]
    rep = delta_report(
        arm(150, 4, 0.3, 1, runs=3, policy="a"), arm(150, 4, 0.7, 2, runs=3, policy="b")
    )
    text = format_delta_report(rep)
    assert text.startswith("PASS") and "unreplicated" not in text
    assert " improved " in _metric_line(text, "pass_at_1")


def test_must_not_regress_failing_fails_the_report() -> None:
    before = arm(150, 4, 0.4, 16, markers={"grounded": 0.9}, runs=3, policy="a")
    after = arm(150, 4, 0.7, 17, markers={"grounded": 0.5}, runs=3, policy="b")
    rep = delta_report(before, after, must_not_regress=["marker:grounded"])
    assert rep["metrics"]["grounded"]["verdict"] == "regressed"
    assert rep["verdict"]["guards_failed"] == ["grounded"]
    assert not rep["ok"] and rep["headline_verdict"] == "FAIL"
    # the same comparison without the guard passes
    assert delta_report(before, after)["ok"]


def test_guard_on_a_missing_metric_fails() -> None:
    rows = arm(20, 4, 0.5, 18)
    rep = delta_report(rows, arm(20, 4, 0.5, 19), must_not_regress=["nonexistent"])
    assert rep["verdict"]["guards_failed"] == ["nonexistent"] and not rep["ok"]


def test_over_optimized_when_proxy_moves_and_target_does_not() -> None:
    before = arm(150, 4, 0.5, 20, markers={"first_action": 0.3}, runs=3, policy="a")
    after = arm(150, 4, 0.5, 21, markers={"first_action": 0.9}, runs=3, policy="b")
    rep = delta_report(before, after, proxy="marker:first_action")
    assert rep["over_optimized"] and rep["verdict"]["over_optimized"]
    assert rep["headline_verdict"] == "FAIL" and not rep["ok"]


def test_groups_down_is_listed_and_warned_but_does_not_flip_ok() -> None:
    rates_b = np.full(200, 0.4)
    rates_a = np.where(np.arange(200) % 2 == 0, 0.9, 0.1)  # even tasks up, odd tasks down
    before = arm(200, 4, rates_b, 22, runs=3, policy="a")
    after = arm(200, 4, rates_a, 23, runs=3, policy="b")
    for rows in (before, after):
        for r in rows:
            r["tier"] = "even" if int(r["scenario_id"][1:]) % 2 == 0 else "odd"
    rep = delta_report(before, after, by="tier")
    assert set(rep["groups"]) == {"even", "odd"}
    assert rep["groups_down"] == ["odd"]
    assert rep["groups"]["even"]["verdict"] == "improved"
    assert any("group odd" in w for w in rep["warnings"])
    assert rep["ok"]  # groups_down is a warning; must_not_regress is the contract


def test_ceiling_flag() -> None:
    before = arm(100, 4, 0.97, 24)
    after = arm(100, 4, 0.99, 25)
    rep = delta_report(before, after)
    assert rep["ceiling"] is not None and rep["ceiling"]["before_rate"] >= 0.9
    # few tasks with room (and under half) is also a ceiling, below the pass-rate bar
    vals = {f"t{i}": [1, 1] for i in range(60)}
    vals.update({f"r{i}": [0, 0] for i in range(CEILING_MIN_TASKS_WITH_ROOM - 1)})
    rep = delta_report(fixed(vals, "a"), fixed(vals, "b"), n_boot=200)
    assert rep["ceiling"]["tasks_with_room"] == CEILING_MIN_TASKS_WITH_ROOM - 1
    rep = delta_report(arm(100, 4, 0.5, 26), arm(100, 4, 0.5, 27))
    assert rep["ceiling"] is None


def test_answered_share_gap_is_not_comparable() -> None:
    before = arm(100, 4, 0.5, 28, final_text="<think>out of budget", policy="a")
    for r in before[:200]:
        r["final_text"] = "Done."
    after = arm(100, 4, 0.6, 29, policy="b")
    rep = delta_report(before, after)
    assert rep["answered"]["before"] == pytest.approx(0.5) and rep["answered"]["after"] == 1.0
    assert rep["answered"]["p_value"] < 0.01
    assert any(c.startswith("answered") for c in rep["not_comparable"])
    assert rep["headline_verdict"] == "NOT COMPARABLE (answered)" and not rep["ok"]
    assert "NOT COMPARABLE:" in format_delta_report(rep)


def test_different_situations_are_not_comparable() -> None:
    before = arm(100, 4, 0.5, 30, prefix="a", policy="a")
    after = arm(100, 4, 0.5, 31, prefix="a", policy="b")[: 4 * 30] + arm(
        70, 4, 0.5, 32, prefix="b", policy="b"
    )
    rep = delta_report(before, after)
    assert rep["n_paired_tasks"] == 30 and rep["n_unpaired_tasks"] == 140
    assert rep["paired_share"] == pytest.approx(30 / 170)
    assert rep["headline_verdict"] == "NOT COMPARABLE (situations)"
    assert any("tasks=" in c for c in rep["not_comparable"])


def test_config_disagreements_and_prompt_sha_warn() -> None:
    before = arm(30, 4, 0.5, 33, policy="a")
    after = arm(30, 4, 0.5, 34, policy="b")
    for r in before:
        r["sampling"] = {"temperature": 0.7, "max_tokens": 512}
        r["lineage"]["system_prompt_sha"] = "aaa"
    for r in after:
        r["sampling"] = {"temperature": 1.0, "max_tokens": 512}
        r["lineage"]["system_prompt_sha"] = "bbb"
    rep = delta_report(before, after)
    assert any("temperature" in w for w in rep["warnings"])
    assert not any("max_tokens" in w and "disagree" in w for w in rep["warnings"])
    assert any("system_prompt_sha differs" in w for w in rep["warnings"])
    assert rep["config"]["before"]["temperature"] == 0.7
    before[0]["sampling"] = {"temperature": 0.2, "max_tokens": 512}
    rep = delta_report(before, after)
    assert any("before rows disagree among themselves on temperature" in w for w in rep["warnings"])


def test_unequal_k_warns_next_to_sizing_and_balance_trims() -> None:
    before = arm(60, 4, 0.5, 35, policy="a")
    after = arm(60, 2, 0.5, 36, policy="b")
    rep = delta_report(before, after)
    assert rep["k"] == {"before": 4, "after": 2}
    w = rep["sizing"]["warning"]
    assert "before has 4 rows per task" in w and "after 2 (fewest 2)" in w
    bal = delta_report(before, after, balance_rollouts=True)
    assert bal["balanced"] == {"before": 120, "after": 0}
    assert bal["k"] == {"before": 2, "after": 2}


def test_family_error_and_sizing_line() -> None:
    before = arm(100, 4, 0.5, 37, markers={"m1": 0.5, "m2": 0.5})
    after = arm(100, 4, 0.6, 38, markers={"m1": 0.5, "m2": 0.5})
    rep = delta_report(before, after, alpha=0.1)
    assert rep["n_metrics"] == 3
    assert rep["family_error"] == pytest.approx(1 - 0.9**3)
    assert rep["metrics"]["pass_at_1"]["level"] == pytest.approx(0.9)
    assert rep["sizing"]["detectable_effect"] is not None
    text = format_delta_report(rep)
    assert "sizing:" in text and "family error" in text
    lines = text.splitlines()
    assert any(line.strip().startswith("m1") for line in lines)


def test_marker_target_and_bad_target() -> None:
    before = arm(60, 4, 0.5, 39, markers={"m": 0.2}, runs=3)
    after = arm(60, 4, 0.5, 40, markers={"m": 0.8}, runs=3)
    rep = delta_report(before, after, target="marker:m")
    assert rep["target"] == "m" and rep["target_verdict"] == "moved"
    with pytest.raises(ValueError, match="shared markers"):
        delta_report(before, after, target="nope")
    with pytest.raises(ValueError, match="rows on both sides"):
        delta_report([], after)


def test_target_on_one_side_only_is_bad_input() -> None:
    before = arm(20, 4, 0.5, 41, markers={"m": 0.5})
    after = arm(20, 4, 0.5, 42)
    with pytest.raises(ValueError, match="no after row carries it"):
        delta_report(before, after, target="marker:m")


def test_unequal_k_warning_is_printed_once_beside_the_sizing_line() -> None:
    text = format_delta_report(delta_report(arm(60, 4, 0.5, 43), arm(60, 2, 0.5, 44)))
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("sizing:"))
    assert "unequal rows per task" in lines[at + 1]
    assert sum("unequal rows per task" in line for line in lines) == 1


def test_rows_per_task_under_runs_are_not_printed_as_a_pass_pow_k() -> None:
    # 4 repeats x 3 runs pool into 12 rows per task on the before arm, 2 x 3 = 6 on the
    # after arm: the count pass@1's power rests on, which "k=12" made read as pass^12.
    before = arm(40, 4, 0.5, 7, runs=3, policy="a")
    after = arm(40, 2, 0.6, 8, runs=3, policy="b")
    rep = delta_report(before, after)
    # the report's keys keep their names and values
    assert rep["sizing"]["k"] == 12 and rep["k"] == {"before": 12, "after": 6}
    assert rep["config"]["before"]["k"] == 12 and rep["config"]["after"]["k"] == 6
    text = format_delta_report(rep)
    line = next(x for x in text.splitlines() if x.startswith("sizing:"))
    assert line.startswith("sizing: 40 paired tasks with 12 rows per task (3 eval runs pooled) ")
    assert "in the calibration study's nearest cell: 8 rows per task, " in line
    assert "unequal rows per task: before has 12 rows per task (fewest 12), after 6" in text
    assert "the arms disagree on rows per task (config k): before 12, after 6" in text
    assert re.search(r"\bk=\d", text) is None, text


def test_one_row_per_task_is_said_in_the_singular() -> None:
    # simulate.repeats=1 before, 2 after: the sizing, its calibration note and the
    # unequal-rows warning each count the before arm's one row a task.
    text = format_delta_report(delta_report(arm(60, 1, 0.4, 1), arm(60, 2, 0.6, 2)))
    line = next(x for x in text.splitlines() if x.startswith("sizing:"))
    assert line.startswith("sizing: 60 paired tasks with 1 row per task detect ")
    assert "smallest holdout with 1 row per task (" in line
    assert "unequal rows per task: before has 1 row per task (fewest 1), after 2 " in text
    assert "1 rows" not in text


def test_one_task_one_side_and_one_eval_run_are_said_in_the_singular() -> None:
    # One eval run before, three after, on 40 shared tasks plus one the after arm alone has:
    # each count of one was "1 task(s) are", "1 evaluation run(s)" or "1 eval run(s)".
    before = arm(40, 4, 0.3, 81, policy="a")
    after = arm(40, 4, 0.9, 82, runs=3, policy="b") + arm(1, 4, 0.5, 83, prefix="x", policy="b")
    rep = delta_report(before, after)
    text = format_delta_report(rep)
    assert "warning: 1 task measured on one side only (0 before, 1 after), dropped from " in text
    assert "pass_at_1 moved, but with 1 evaluation run before and 3 after and no run_std" in text
    assert "by design: before pools 1 eval run (4 rows per task), after 3 (12)" in text
    assert "(s)" not in text


def test_marker_on_a_subset_of_tasks_gets_its_own_interval() -> None:
    from wai_exp.score.stats.resample import paired_bootstrap

    before = arm(300, 4, 0.5, 45, markers={"m": 0.5})
    after = arm(300, 4, 0.5, 46, markers={"m": 0.6})
    for r in before + after:  # the marker only exists on the first 100 tasks
        if int(r["scenario_id"][1:]) >= 100:
            r.pop("markers")
    rep = delta_report(before, after)
    m = rep["metrics"]["m"]
    assert m["n_paired"] == 100 and rep["metrics"]["pass_at_1"]["n_paired"] == 300

    def per_task(rows: list[dict]) -> np.ndarray:
        out = np.zeros(100)
        for r in rows:
            if "markers" in r:
                out[int(r["scenario_id"][1:])] += r["markers"]["m"] / 4
        return out

    ref = paired_bootstrap(per_task(before), per_task(after), n_resamples=4000, seed=1)
    assert m["delta"] == pytest.approx(ref.estimate)
    width, ref_width = m["ci95"][1] - m["ci95"][0], ref.interval.high - ref.interval.low
    assert width == pytest.approx(ref_width, rel=0.15)


def test_template_seed_and_replay_writers_count_as_one_writer() -> None:
    before = arm(30, 4, 0.5, 47, policy="a")
    after = arm(30, 4, 0.5, 48, policy="b")
    for r in before:
        r["writer_model"] = None  # offline template writer
    for r in after:
        r["writer_model"] = "template"
    rep = delta_report(before, after)
    assert rep["writers"] == {"before": ["template"], "after": ["template"]}
    assert not any("different writers" in w for w in rep["warnings"])
    for r in after:
        r["writer_model"] = "gpt-4.1-mini"
    rep = delta_report(before, after)
    assert any("different writers" in w for w in rep["warnings"])


def test_rows_with_different_marker_sets_read_each_value() -> None:
    before = fixed({f"t{i}": [0, 1] for i in range(6)}, "a")
    after = fixed({f"t{i}": [1, 1] for i in range(6)}, "b")
    for i, r in enumerate(before + after):
        # every row has "x"; only even rows have "y"; one row carries a non-number
        r["markers"] = {"x": 1.0} | ({"y": 0.0} if i % 2 == 0 else {})
    before[0]["markers"]["x"] = "n/a"
    rep = delta_report(before, after, n_boot=200)
    x, y = rep["metrics"]["x"], rep["metrics"]["y"]
    assert x["n_paired"] == 6 and x["before"] == 1.0 and x["delta"] == 0.0
    assert y["n_paired"] == 6 and y["after"] == 0.0


def test_small_significant_answered_gap_warns_but_stays_comparable() -> None:
    # 5,000 rows per side: 97% vs 94% answered is significant (p < 0.01) yet a 3-point gap,
    # under ANSWERED_GAP_POINTS (no re-run band here), so it warns and does not fail.
    before = arm(1250, 4, 0.5, 49, policy="a")
    after = arm(1250, 4, 0.5, 50, policy="b")
    for r in before[:150]:
        r["final_text"] = "<think>ran out"
    for r in after[:300]:
        r["final_text"] = "<think>ran out"
    rep = delta_report(before, after, n_boot=300)
    assert rep["answered"]["p_value"] < 0.01
    assert rep["answered"]["gap"] == pytest.approx(-0.03)
    assert any("answered share differs" in w for w in rep["warnings"])
    assert rep["not_comparable"] == []


@pytest.mark.parametrize(
    ("rate_b", "rate_a", "k", "seed"),
    [(0.5, 0.5, 4, 0), (0.4, 0.6, 4, 7), (0.6, 0.45, 8, 3), (0.5, 0.55, 3, 11)],
)
def test_pass_at_1_interval_p_value_and_verdict_are_compare_runs(
    rate_b: float, rate_a: float, k: int, seed: int
) -> None:
    from wai_exp.score.stats.stats import compare_runs

    # Markers ride along (one on a subset of tasks) and some tasks are on one side only:
    # pass@1 must still be exactly the paired bootstrap compare_runs runs on its own.
    before = arm(60, k, rate_b, 100 + seed, markers={"m": 0.5, "n": 0.3}, policy="a")
    after = arm(64, k, rate_a, 200 + seed, markers={"m": 0.6, "n": 0.3}, policy="b")
    for r in before + after:
        if int(r["scenario_id"][1:]) % 5 == 0:
            r["markers"].pop("n")
    rep = delta_report(before, after, seed=seed)
    ref = compare_runs(before, after, seed=seed)
    m = rep["metrics"]["pass_at_1"]
    assert ref["paired"] and m["n_paired"] == ref["n_paired"] == 60
    assert m["delta"] == pytest.approx(ref["delta"], abs=1e-12)
    assert m["ci95"] == pytest.approx(ref["ci95"], abs=1e-12)
    assert m["p_value"] == pytest.approx(ref["p_value"], abs=1e-12)
    verdicts = {
        "improved": "b_better",
        "regressed": "a_better",
        "no_change": "no_difference_detected",
    }
    assert verdicts[m["verdict"]] == ref["verdict"]


def test_every_marker_interval_is_its_own_paired_bootstrap() -> None:
    from wai_exp.score.stats.stats import compare_runs

    # A marker's interval is the studentized paired bootstrap over its own paired tasks:
    # across seeds it matches compare_runs on that marker in width and in verdict rate.
    before = arm(80, 4, 0.5, 60, markers={"m": 0.4}, policy="a")
    after = arm(80, 4, 0.5, 61, markers={"m": 0.55}, policy="b")
    ours = [delta_report(before, after, seed=s)["metrics"]["m"]["ci95"] for s in range(15)]
    theirs = [compare_runs(before, after, metric="m", seed=s)["ci95"] for s in range(15)]
    width = np.mean([hi - lo for lo, hi in ours])
    assert width == pytest.approx(np.mean([hi - lo for lo, hi in theirs]), rel=0.03)
    assert np.mean([lo for lo, _ in ours]) == pytest.approx(
        np.mean([lo for lo, _ in theirs]), abs=0.01
    )


def test_a_numeric_string_marker_counts_as_absent_like_marker_value() -> None:
    # marker_value (and so marker_summary / compare_runs) ignores strings, even "0.5": the
    # bulk conversion must not turn it into a number.
    before = fixed({f"t{i}": [0, 1] for i in range(6)}, "a")
    after = fixed({f"t{i}": [1, 1] for i in range(6)}, "b")
    for r in before + after:
        r["markers"] = {"x": 1.0}
    before[0]["markers"]["x"] = "0.5"
    rep = delta_report(before, after, n_boot=200)
    assert rep["metrics"]["x"]["before"] == 1.0 and rep["metrics"]["x"]["n_paired"] == 6


def test_each_group_interval_is_compare_runs_on_that_groups_rows() -> None:
    from wai_exp.score.stats.stats import compare_runs

    before = arm(90, 4, 0.5, 70, policy="a")
    after = arm(90, 4, 0.6, 71, policy="b")
    for r in before + after:
        r["tier"] = "hard" if int(r["scenario_id"][1:]) % 3 == 0 else "easy"
    rep = delta_report(before, after, by="tier", seed=5)
    for tier in ("hard", "easy"):
        ref = compare_runs(
            [r for r in before if r["tier"] == tier],
            [r for r in after if r["tier"] == tier],
            seed=5,
        )
        got = rep["groups"][tier]
        assert got["n_paired"] == ref["n_paired"]
        assert got["ci95"] == pytest.approx(ref["ci95"], abs=1e-12)


def test_rows_per_task_that_differ_only_by_eval_runs_are_not_blamed_on_lost_rollouts() -> None:
    # runs=3 x 4 repeats against runs=1 x 4: nothing was lost, so the warning must not send
    # the user to rollouts_lost_by or --balance-rollouts after a cause that is not there.
    rep = delta_report(arm(40, 4, 0.5, 71, runs=3, policy="a"), arm(40, 4, 0.6, 72, policy="b"))
    assert rep["k"] == {"before": 12, "after": 4}
    w = rep["sizing"]["warning"]
    assert w.startswith("unequal rows per task by design: before pools 3 eval runs (12 rows")
    assert "4 a run on both sides: no rollout was lost" in w
    assert "lost for a reason" not in w and "trims both" not in w
    # a runs=3 arm that also lost rollouts keeps the lost-rollout warning
    short = arm(40, 4, 0.5, 73, runs=3, policy="a")[1:]
    assert "lost for a reason" in delta_report(short, arm(40, 4, 0.6, 74))["sizing"]["warning"]


def test_unequal_k_on_a_minority_of_tasks_still_warns_beside_sizing() -> None:
    # The after arm lost half its rollouts on 18 of 60 tasks: its usual k is still 4, but
    # its fewest is 2, which is the k pass_at would use. The sizing line must say so.
    before = arm(60, 4, 0.5, 61, policy="a")
    after = arm(60, 4, 0.5, 62, policy="b")
    short = {f"t{t}" for t in range(18)}
    seen: dict[str, int] = {}
    kept = []
    for r in after:
        seen[r["scenario_id"]] = seen.get(r["scenario_id"], 0) + 1
        if r["scenario_id"] not in short or seen[r["scenario_id"]] <= 2:
            kept.append(r)
    rep = delta_report(before, kept)
    assert rep["k"] == {"before": 4, "after": 4}
    assert rep["k_min"] == {"before": 4, "after": 2}
    w = rep["sizing"]["warning"]
    assert "fewest 4" in w and "fewest 2" in w and "18 of 60 paired tasks differ" in w
    lines = format_delta_report(rep).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("sizing:"))
    assert "unequal rows per task" in lines[at + 1]
    # equal k on both sides: no such warning
    assert delta_report(before, after)["sizing"]["warning"] is None


def test_sizing_says_when_the_before_side_leaves_no_provable_gain() -> None:
    # before at 0.975 on 40 tasks at k=4: 40 tasks can prove about +0.05, more than the
    # 0.025 left below 1 (saturation), and the sizing note says so instead of a bare number.
    rates = np.array([1.0] * 36 + [0.75] * 4)
    before = fixed({f"t{i}": [1.0] * int(r * 4) + [0.0] * (4 - int(r * 4)) for i, r in
                    enumerate(rates)}, "a")  # fmt: skip
    after = fixed({f"t{i}": [1.0] * 4 for i in range(40)}, "b")
    rep = delta_report(before, after)
    s = rep["sizing"]
    assert s["detectable_effect"] > 1 - 0.975
    assert "no gain on this holdout is provable" in s["note"]
    assert any(line.startswith("sizing note:") for line in format_delta_report(rep).splitlines())
    assert rep["ceiling"] is not None


# --------------------------------------------------------------------------------------
# Properties (hypothesis) and reproducibility across processes
# --------------------------------------------------------------------------------------

_counts = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=25)


def _pair_rows(pairs: list[tuple[int, int]], side: int, marker_on: int = 0) -> list[dict]:
    rows = []
    for t, pair in enumerate(pairs):
        c = pair[side]
        for j in range(4):
            row = {"scenario_id": f"t{t}", "reward": 1.0 if j < c else 0.0, "final_text": "ok"}
            # a marker on every other task, so it pairs on a subset
            if t % 2 == 0:
                row["markers"] = {"m": 1.0 if (j + t + side + marker_on) % 3 == 0 else 0.0}
            rows.append(row)
    return rows


@settings(max_examples=30, deadline=None)
@given(_counts, st.integers(0, 4), st.booleans())
def test_delta_intervals_bracket_antisymmetric_and_a_new_task_never_crashes(
    pairs: list[tuple[int, int]], extra: int, extra_after: bool
) -> None:
    before, after = _pair_rows(pairs, 0), _pair_rows(pairs, 1)
    ab = delta_report(before, after, n_boot=300, seed=1)
    ba = delta_report(after, before, n_boot=300, seed=1)
    for name, x in ab["metrics"].items():
        y = ba["metrics"][name]
        if x["delta"] is None:
            continue
        assert x["delta"] == pytest.approx(-y["delta"], abs=1e-12)
        if x["ci95"] is not None:
            lo, hi = x["ci95"]
            assert lo - 1e-12 <= x["delta"] <= hi + 1e-12
            assert y["ci95"] == pytest.approx([-hi, -lo], abs=1e-9)
    assert ab["headline_verdict"] in {
        "PASS",
        "NO DIFFERENCE",
        "FAIL",
        "REAL ON THESE TASKS, WITHIN RE-RUN NOISE",
    } or ab["headline_verdict"].startswith(("NOT COMPARABLE", "INCONCLUSIVE", "NOT MEASURED"))
    # "NO DIFFERENCE" is said only of an interval that holds zero.
    if ab["headline_verdict"] == "NO DIFFERENCE":
        assert ab["target_ci95"][0] <= 0 <= ab["target_ci95"][1]
    # a task on one side only: counted, never a crash
    new = [{"scenario_id": "new", "reward": float(j < extra), "final_text": "ok"} for j in range(4)]
    b2, a2 = (before, after + new) if extra_after else (before + new, after)
    rep = delta_report(b2, a2, n_boot=300, seed=1)
    assert rep["n_unpaired_tasks"] == 1 and rep["n_paired_tasks"] == len(pairs)
    format_delta_report(rep)


_CHILD = """
import json, sys
sys.path.insert(0, {here!r})
from test_delta import arm
from wai_exp.score.stats.delta import delta_report
before = arm(50, 4, 0.4, 71, markers={{"m": 0.5, "n": 0.3}}, runs=3, policy="a")
after = arm(50, 4, 0.55, 72, markers={{"m": 0.4, "n": 0.3}}, runs=3, policy="b")
for r in before + after:
    r["tier"] = "hard" if r["scenario_id"] < "t3" else "easy"
print(json.dumps(delta_report(before, after, seed=5, by="tier")))
"""


def test_same_seed_same_report_in_another_process() -> None:
    before = arm(50, 4, 0.4, 71, markers={"m": 0.5, "n": 0.3}, runs=3, policy="a")
    after = arm(50, 4, 0.55, 72, markers={"m": 0.4, "n": 0.3}, runs=3, policy="b")
    for r in before + after:
        r["tier"] = "hard" if r["scenario_id"] < "t3" else "easy"
    here = json.loads(json.dumps(delta_report(before, after, seed=5, by="tier")))
    code = _CHILD.format(here=str(Path(__file__).parent))
    child = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "123"},  # set order must not leak into numbers
    )
    there = json.loads(child.stdout)
    assert there == here
    # every marker interval and the pooled floors came through, not just pass@1
    assert here["metrics"]["m"]["ci95"] is not None and here["floor_source"] == "pooled"
    assert set(here["groups"]) == {"easy", "hard"}


def test_a_regression_is_sized_from_the_failure_rate_not_refused() -> None:
    # before 0.875 -> after 0.375 on 40 tasks: a drop of 0.5, larger than the 0.125 a gain
    # from 0.875 could be. Sized as a rise in the failure rate, with the measured sd:
    # n = ((1.96 + 0.8416) * sd / 0.5) ** 2.
    before = fixed({f"t{i}": [1.0, 1.0, 1.0, 0.0] if i % 2 else [1.0] * 4 for i in range(40)}, "a")
    after = fixed({f"t{i}": [1.0, 1.0, 0.0, 0.0] if i % 2 else [1.0, 0.0, 0.0, 0.0]
                   for i in range(40)}, "b")  # fmt: skip
    rep = delta_report(before, after)
    s = rep["sizing"]
    assert rep["target_delta"] == pytest.approx(-0.5)
    # per-task differences: -0.25 on odd tasks, -0.75 on even ones
    sd = float(np.std([-0.25, -0.75] * 20, ddof=1))
    assert s["task_std"] == pytest.approx(sd)
    z = 1.959963984540054 + 0.8416212335729143
    assert s["n_tasks_for_observed"] == max(math.ceil((z * sd / 0.5) ** 2), 5)
    assert s["note"] is None
    assert "sizing note" not in format_delta_report(rep)


def test_a_delta_that_cannot_vary_still_has_an_honest_interval() -> None:
    # Both sides fail every rollout on 6 tasks: every paired difference is 0, and the
    # bootstrap's [0, 0] would claim certainty.
    before, after = arm(6, 4, 0.0, 1), arm(6, 4, 0.0, 2)
    rep = delta_report(before, after)
    z2 = 1.959963984540054**2
    hi = z2 / (6 + z2)
    assert rep["target_ci95"] == pytest.approx([-hi, hi])
    t = rep["metrics"]["pass_at_1"]
    assert t["interval_method"] == "paired_boundary" and "cannot vary" in t["interval_note"]
    assert rep["target_verdict"] == "no_change_detected"


def test_a_run_against_itself_on_ten_tasks_is_bounded_by_the_tasks_that_could_differ() -> None:
    # Ten tasks at 3 repeats with mixed rates, compared with themselves: every paired
    # difference is 0. Newcombe's interval over the two rates ignored the pairing and gave
    # +-0.372; the arms can differ on at most Wilson's upper bound for 0 of 10 tasks, by at
    # most 1 each.
    rows = [
        {"scenario_id": f"t{i}", "rollout_index": j, "reward": float(j < c)}
        for i, c in enumerate((0, 0, 2, 1, 2, 2, 1, 2, 2, 2))
        for j in range(3)
    ]
    t = delta_report(rows, rows)["metrics"]["pass_at_1"]
    z2 = 1.959963984540054**2
    assert t["delta"] == 0.0
    assert t["ci95"] == pytest.approx([-z2 / (10 + z2), z2 / (10 + z2)])  # +-0.278
    assert "none of 10 did" in t["interval_note"]


# ---- one task id, two asks ------------------------------------------------------------


def _asks(prompt_of, p: float, seed: int, n: int = 30) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {"scenario_id": f"sit-{t}", "prompt": prompt_of(t), "reward": float(rng.random() < p)}
        for t in range(n)
        for _ in range(4)
    ]


def test_paired_tasks_with_different_prompts_are_not_comparable() -> None:
    """Old-style ids (a hash of seed and draw index) name different asks in two runs: the
    pairing is refused with the count, not silently reported."""
    before = _asks(lambda t: f"Refund order ORD-{t}.", 0.4, 1)
    after = _asks(
        lambda t: f"Cancel order ORD-{t + 100}." if t < 26 else f"Refund order ORD-{t}.", 0.7, 2
    )
    rep = delta_report(before, after)
    assert rep["prompt_mismatch"]["n_mismatched"] == 26
    assert rep["prompt_mismatch"]["n_checked"] == 30
    assert rep["headline_verdict"].startswith("NOT COMPARABLE (prompts")
    assert rep["ok"] is False
    assert any(c.startswith("prompts: 26 of 30 paired tasks") for c in rep["not_comparable"])
    assert format_delta_report(rep).splitlines()[0].startswith("NOT COMPARABLE")
    same = delta_report(before, _asks(lambda t: f"Refund   order ORD-{t}.", 0.7, 2))
    assert same["prompt_mismatch"]["n_mismatched"] == 0
    assert not any(c.startswith("prompts") for c in same["not_comparable"])


def test_compare_runs_refuses_paired_tasks_with_different_prompts() -> None:
    from wai_exp.score.stats.stats import compare_runs

    a = _asks(lambda t: f"Refund order ORD-{t}.", 0.2, 1)
    b = _asks(
        lambda t: f"Cancel order ORD-{t + 100}." if t % 3 else f"Refund order ORD-{t}.", 0.9, 2
    )
    out = compare_runs(a, b)
    assert out["verdict"] == "not_comparable"
    assert out["prompt_mismatch"]["n_mismatched"] == 20
    assert out["not_comparable"][0].startswith("prompts: 20 of 30 paired tasks")
    ok = compare_runs(a, _asks(lambda t: f"Refund order ORD-{t}.", 0.9, 2))
    assert ok["verdict"] == "b_better" and ok["not_comparable"] == []


def test_sizing_on_a_before_side_that_failed_everything_is_degenerate_not_zero() -> None:
    # Before at 0 on every rollout: detectable_effect used to start its fixed point at
    # q = p = 0, stay there, and print "detect +0.000". Now a real gain, flagged DEGENERATE.
    before, after = arm(30, 4, 0.0, 3), arm(30, 4, 0.3, 4)
    s = delta_report(before, after)["sizing"]
    assert s["detectable_effect"] > 0.05
    assert s["note"].startswith("DEGENERATE:") and "cannot vary" in s["note"]


def test_sizing_line_names_the_power_the_study_measured() -> None:
    before, after = arm(44, 4, 0.5, 5), arm(44, 4, 0.62, 6)
    rep = delta_report(before, after)
    mp = rep["sizing"]["measured_power"]
    assert mp is not None and mp["k"] == 4 and mp["difficulty"] == "equal"
    lo, hi = mp["ci95"]
    assert lo <= mp["power"] <= hi and "bench_calibration.py" in mp["source"]
    # 44 paired tasks at k=4: the study's cell with the nearest holdout is 42 tasks (0.15).
    assert mp["n_tasks"] == 42 and mp["effect"] == 0.15
    line = next(x for x in format_delta_report(rep).splitlines() if x.startswith("sizing:"))
    assert "at 80% power nominal (measured " in line
    assert "4 rows per task, equal difficulty, 42 tasks" in line


def test_sizing_line_does_not_quote_a_larger_holdouts_power() -> None:
    # 8 paired tasks at k=4 is under the study's smallest k=4 holdout (23 tasks): the power
    # there is unmeasured and lower, so the line says so instead of quoting 23 tasks' power.
    before, after = arm(8, 4, 0.5, 5), arm(8, 4, 0.62, 6)
    rep = delta_report(before, after)
    mp = rep["sizing"]["measured_power"]
    assert mp["power"] is None and mp["ci95"] is None and "not measured" in mp["note"]
    line = next(x for x in format_delta_report(rep).splitlines() if x.startswith("sizing:"))
    assert "below the calibration study's smallest holdout with 4 rows per task (23 tasks)" in line
    assert "(measured" not in line


def test_rows_an_adaptive_policy_added_do_not_skew_the_delta() -> None:
    # Both arms open every task with the same fixed batch (1 pass in 4). The before arm's
    # adaptive policy then added four passing rows where each task split; averaged in, they
    # would show a regression the agent never had.
    first = {f"t{i}": [1.0, 0.0, 0.0, 0.0] for i in range(40)}
    before = fixed(first, "base")
    for i in range(40):
        before += [
            {"scenario_id": f"t{i}", "reward": 1.0, "final_text": "ok", "policy_version": "base",
             "selection_reason": "group_split"}
            for _ in range(4)
        ]  # fmt: skip
    after = fixed(first, "trained")
    rep = delta_report(before, after)
    metric = rep["metrics"]["pass_at_1"]
    assert metric["before"] == pytest.approx(0.25) and metric["delta"] == pytest.approx(0.0)
    assert rep["target_verdict"] != "regressed"
    assert any("160 rows an adaptive policy added" in w for w in rep["warnings"])


def test_lost_rollouts_count_as_failed_repeats_as_pass_at_counts_them() -> None:
    """delta_report(lost=...) reads an arm's pass@1 as pass_at(lost=...) does: the
    rollouts that left no row are failed repeats of their tasks (one task lost them all)."""
    from wai_exp.score.stats.passat import pass_at

    rng = np.random.default_rng(3)
    before = [
        {"scenario_id": f"t{t}", "reward": float(rng.random() < 0.6), "final_text": "ok"}
        for t in range(30)
        for _ in range(4)
    ]
    after = [dict(r, reward=float(rng.random() < 0.6)) for r in before]
    # t0 lost every rollout (no row); t1..t9 lost one each
    after = [r for r in after if r["scenario_id"] != "t0"]
    lost_after = {"t0": ["fixed"] * 4, **{f"t{t}": ["fixed"] for t in range(1, 10)}}
    for t in range(1, 10):
        after.remove(next(r for r in after if r["scenario_id"] == f"t{t}"))
    rep = delta_report(before, after, lost={"after": lost_after}, n_boot=500)
    m = rep["metrics"]["pass_at_1"]
    assert m["after"] == pytest.approx(pass_at(after, lost=lost_after).pass_at_1)
    assert m["before"] == pytest.approx(pass_at(before).pass_at_1)
    assert rep["n_paired_tasks"] == 30 and rep["lost_counted"] == {"before": 0, "after": 13}
    # the lost rollouts hold their slots: k stays 4 and no unequal-k warning
    assert rep["config"]["after"]["k"] == 4
    assert not any("unequal rows per task" in w for w in rep["warnings"])
    without = delta_report(before, after, n_boot=500)
    assert without["metrics"]["pass_at_1"]["after"] > m["after"]


def test_same_rollouts_on_both_sides_are_named_as_such() -> None:
    rows = [
        {"scenario_id": f"t{t}", "reward": float(t % 2), "rollout_id": f"r{t}-{i}"}
        for t in range(10)
        for i in range(2)
    ]
    rep = delta_report(rows, list(reversed(rows)), n_boot=500)
    assert any("compares a run's rows with themselves, not a re-run" in w for w in rep["warnings"])


def test_same_rollout_ids_with_other_answers_are_not_called_the_same_rows() -> None:
    """Two callable agents of one name (a class agent at two ``kwargs``) drew the same
    rollout ids on the same pinned tasks; the warning said every delta was 0 by
    construction beside a delta of +0.265."""
    rows = [
        {"scenario_id": f"t{t}", "reward": 0.0, "rollout_id": f"r{t}-{i}", "final_text": "Done."}
        for t in range(10)
        for i in range(2)
    ]
    better = [{**r, "reward": 1.0, "final_text": "Refilled RX-1."} for r in rows]
    rep = delta_report(rows, better, n_boot=500)
    assert rep["metrics"]["pass_at_1"]["delta"] == pytest.approx(1.0)
    assert not any("by construction" in w for w in rep["warnings"]), rep["warnings"]


def test_tasks_whose_rows_on_one_side_carry_no_pass_fail_are_not_called_absent() -> None:
    """A task the after file holds, all of whose rows carry a partial reward, has no pass@1
    there: it is dropped from the pairing like a task the file lacks, and the warning says
    which it is, so a reader does not go looking for tasks that are in the file."""

    def rows(task: str, rewards: list[float]) -> list[dict]:
        return [{"scenario_id": task, "reward": r, "final_text": "ok"} for r in rewards]

    before = [r for t in "abcde" for r in rows(t, [1.0, 0.0, 1.0, 1.0])]
    after = [r for t in "abc" for r in rows(t, [1.0, 1.0, 0.0, 1.0])] + rows("d", [0.6] * 4)
    rep = delta_report(before, after, n_boot=200, seed=0)
    assert rep["n_paired_tasks"] == 3 and rep["n_unpaired_tasks"] == 2
    (warning,) = [w for w in rep["warnings"] if "one side only" in w]
    assert warning.startswith("2 tasks measured on one side only (2 before, 0 after), dropped")
    assert "1 of them with rows on the other side too (1 after, 0 before)" in warning
    assert "a partial reward or an unjudged row carries none" in warning
