"""pass@1, pass^k, pass@k: unbiased estimators by hand, grouping, notes, printed form."""

from __future__ import annotations

import re
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wai_exp.score.stats.intervals import wilson_score
from wai_exp.score.stats.passat import PassAt, as_rows, pass_at, pass_k_estimates, run_config
from wai_exp.score.stats.resample import SMALL_EVAL_TASKS


def group(task: str, passes: int, n: int, **extra: object) -> list[dict]:
    """``n`` graded rows of one task, the first ``passes`` of them passing."""
    return [
        {"scenario_id": task, "rollout_index": i, "reward": 1.0 if i < passes else 0.0, **extra}
        for i in range(n)
    ]


def rows_from(spec: list[tuple[int, int]], **extra: object) -> list[dict]:
    out: list[dict] = []
    for i, (c, n) in enumerate(spec):
        out.extend(group(f"t{i}", c, n, **extra))
    return out


# --------------------------------------------------------------------------------------
# The estimators
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "pow_k", "at_k"),
    [
        (4, 2, 2, 1 / 6, 5 / 6),  # C(2,2)/C(4,2); 1 - C(2,2)/C(4,2)
        (5, 4, 4, 1 / 5, 1.0),  # C(4,4)/C(5,4); C(1,4) = 0
        (6, 4, 4, 1 / 15, 1.0),  # C(4,4)/C(6,4) = 1/15
        (8, 2, 4, 0.0, 1 - 15 / 70),  # C(2,4) = 0; 1 - C(6,4)/C(8,4)
        (4, 4, 4, 1.0, 1.0),
        (4, 0, 4, 0.0, 0.0),
        (10, 3, 1, 0.3, 0.3),  # k=1: both are the pass rate
    ],
)
def test_unbiased_estimators_by_hand(n: int, c: int, k: int, pow_k: float, at_k: float) -> None:
    pk, ak = pass_k_estimates([n], [c], k)
    assert pk[0] == pytest.approx(pow_k)
    assert ak[0] == pytest.approx(at_k)
    assert pk[0] == pytest.approx(comb(c, k) / comb(n, k))
    assert ak[0] == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def test_estimators_short_groups_are_nan_and_bad_input_raises() -> None:
    pk, ak = pass_k_estimates([3, 5], [1, 2], 4)
    assert np.isnan(pk[0]) and np.isnan(ak[0])
    assert not np.isnan(pk[1])
    with pytest.raises(ValueError, match="k must be"):
        pass_k_estimates([4], [2], 0)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_k_estimates([4], [5], 2)


def test_pass_at_known_answer() -> None:
    # Four tasks at k=4 with 4, 2, 0, 3 passes.
    p = pass_at(rows_from([(4, 4), (2, 4), (0, 4), (3, 4)]))
    assert p.k == 4
    assert p.pass_at_1 == pytest.approx((1 + 0.5 + 0 + 0.75) / 4)
    assert p.pass_pow_k == pytest.approx(0.25)  # only the 4/4 task passes all four
    assert p.pass_at_k == pytest.approx(0.75)  # every task but the 0/4 one
    assert p.headroom == pytest.approx(0.75 - 0.5625)
    assert p.n_groups == 4 and p.n_rows == 16 and p.n_groups_at_k == 4
    assert p.per_task == {"t0": 1.0, "t1": 0.5, "t2": 0.0, "t3": 0.75}
    assert p.note == ""


def test_pass_at_averages_tasks_not_rows() -> None:
    # 8 passing rows on one task, 0 of 4 on another: pass@1 is 0.5, not 8/12.
    p = pass_at(group("a", 8, 8) + group("b", 0, 4))
    assert p.pass_at_1 == pytest.approx(0.5)


def test_default_k_is_smallest_repeated_group_and_short_groups_are_left_out() -> None:
    rows = rows_from([(3, 6), (2, 4), (5, 5), (1, 1)])
    p = pass_at(rows)
    assert p.k == 4
    assert p.n_groups == 4
    assert p.n_groups_at_k == 3  # the single-rollout task cannot give a 4-way number
    assert "left out 1 of 4 groups" in p.note
    pk, ak = pass_k_estimates([6, 4, 5], [3, 2, 5], 4)
    assert p.pass_pow_k == pytest.approx(pk.mean())
    assert p.pass_at_k == pytest.approx(ak.mean())
    # pass@1 still averages every group, including the short one.
    assert p.pass_at_1 == pytest.approx((0.5 + 0.5 + 1 + 1) / 4)


def test_a_k_that_ungraded_rows_shrank_names_them_not_more_repeats() -> None:
    # 4 repeats simulated; the judge gave no verdict on one row of two tasks: k fell to 3.
    rows = rows_from([(2, 4), (3, 4), (1, 4), (4, 4)])
    rows[0]["reward"] = rows[5]["reward"] = None
    p = pass_at(rows)
    assert p.k == 3 and p.pass_pow_k is None
    assert "repeats>=4" not in p.note
    assert "2 rows with no 0/1 grade (unjudged, or a partial reward) left 2 of 4 tasks" in p.note
    assert (
        "pass k=4 to read pass^4 and pass@4 over the 2 tasks with at least 4 graded repeats"
        in p.note
    )
    # The advice holds: k=4 reads the full tasks and leaves the short ones out.
    assert pass_at(rows, k=4).n_groups_at_k == 2
    # Too few simulated, nothing ungraded: the fix is still more repeats.
    assert "repeats>=4" in pass_at(rows_from([(2, 3), (1, 3), (0, 3)])).note


def _unserved(row: dict) -> None:
    row["reward"] = None
    row["judge_meta"] = {"plan_not_served": "get_note"}


def test_a_k_that_plan_not_served_rows_shrank_names_their_fix_not_grading_again() -> None:
    """Rows unjudged because the world did not hold the planned record are unjudged again
    when graded again: the note named "grade those rows again" for them. It names the fix
    for why they are unjudged, and keeps "grade again" for rows a judge error left."""
    rows = rows_from([(2, 4), (3, 4), (1, 4), (4, 4)])
    _unserved(rows[0])
    _unserved(rows[5])
    note = pass_at(rows).note
    assert "grade those rows again" not in note
    assert "2 are unjudged because the world answered not found" in note
    assert "enum of the ids your world holds" in note and "simulate.tasks=" in note
    assert "pass k=4 to read pass^4 and pass@4 over the 2 tasks" in note
    rows[9]["reward"] = None  # a judge error on a third task: grading again can fix that one
    note = pass_at(rows).note
    assert "2 are unjudged because the world answered not found" in note
    assert "1 is unjudged: grade those rows again" in note
    rows[9]["reward"] = 0.5  # a partial score: grading again returns it again
    assert "1 carries a partial reward: have the judge return 0/1" in pass_at(rows).note


def test_a_first_batch_k_that_unjudged_rows_shrank_names_them_not_more_repeats() -> None:
    """An adaptive run (rl's split): pass^k reads each task's first batch of 4. Two of one
    task's first 4 were unjudged for want of the planned record, so k fell to 2: the note
    said "simulate with repeats>=4" (the run had 8), not why the rows are unjudged."""
    rows = rows_from([(2, 4), (3, 4), (1, 4), (4, 4)])
    rows += group("t0", 2, 4, selection_reason="group_split")  # t0's first 4 split
    _unserved(rows[0])
    _unserved(rows[1])
    note = pass_at(rows).note
    assert pass_at(rows).k == 2 and "repeats>=4" not in note, note
    assert "2 rows with no 0/1 grade (unjudged, or a partial reward) left 1 of 4 tasks" in note
    assert "2 are unjudged because the world answered not found" in note
    assert "pass k=4 to read pass^4 and pass@4 over the 3 tasks" in note
    assert pass_at(rows, k=4).n_groups_at_k == 3  # the advice holds


def test_the_shrunk_k_note_counts_its_reasons_over_the_rows_it_counts() -> None:
    # t0 lost one row's grade; every row of t4 is unjudged, so t4 is not in the numbers.
    # The note said "1 rows with no 0/1 grade ... left 1 of 4 tasks short ...: 5 are
    # unjudged because ...": two counts of one thing.
    rows = rows_from([(2, 4), (3, 4), (1, 4), (4, 4), (0, 4)])
    for i in (0, 16, 17, 18, 19):
        _unserved(rows[i])
    note = pass_at(rows).note
    assert "1 rows with no 0/1 grade (unjudged, or a partial reward) left 1 of 4 tasks" in note
    assert "1 is unjudged because the world answered not found" in note, note


def test_no_binary_rows_for_want_of_the_planned_record_names_that_fix() -> None:
    rows = [{"scenario_id": t, "reward": 1.0} for t in "ab"]
    for r in rows:
        _unserved(r)
    note = pass_at(rows).note
    assert "grade the rows" not in note and "enum of the ids your world holds" in note


def test_below_min_k_the_k_way_numbers_are_none_with_the_fix() -> None:
    p = pass_at(rows_from([(1, 2), (2, 2), (0, 2)]))
    assert p.k == 2
    assert p.pass_pow_k is None and p.pass_at_k is None and p.headroom is None
    assert p.pass_at_1 == pytest.approx(0.5)
    assert "min_k=4" in p.note and "repeats>=4" in p.note
    # Lowering min_k accepts it.
    p2 = pass_at(rows_from([(1, 2), (2, 2), (0, 2)]), min_k=2)
    assert p2.pass_pow_k == pytest.approx((0 + 1 + 0) / 3)


def test_explicit_k() -> None:
    rows = rows_from([(2, 4), (4, 4), (1, 4)])
    p = pass_at(rows, k=2, min_k=2)
    assert p.k == 2
    assert p.pass_pow_k == pytest.approx((1 / 6 + 1 + 0) / 3)
    with pytest.raises(ValueError, match="k must be"):
        pass_at(rows, k=0)


def test_single_rollouts_have_no_k_way_numbers() -> None:
    p = pass_at(rows_from([(1, 1), (0, 1), (1, 1)]))
    assert p.pass_pow_k is None and p.pass_at_k is None
    assert "one graded rollout" in p.note


def test_unanimous_short_imputes_only_unanimous_groups() -> None:
    rows = rows_from([(2, 4), (2, 2), (1, 2), (0, 3)])
    plain = pass_at(rows, k=4)
    assert plain.n_groups_at_k == 1 and plain.n_groups_imputed == 0
    imputed = pass_at(rows, k=4, unanimous_short=True)
    # The 2/2 group counts as 1, the 0/3 group as 0; the mixed 1/2 group stays out.
    assert imputed.n_groups_imputed == 2
    assert imputed.n_groups_at_k == 3
    pk, ak = pass_k_estimates([4], [2], 4)
    assert imputed.pass_pow_k == pytest.approx((pk[0] + 1 + 0) / 3)
    assert imputed.pass_at_k == pytest.approx((ak[0] + 1 + 0) / 3)


def test_unjudged_and_partial_rows_are_never_counted() -> None:
    base = rows_from([(2, 4), (3, 4), (1, 4)])
    noisy = base + [
        {"scenario_id": "t0", "reward": None},
        {"scenario_id": "t0", "reward": 0.0, "judge_status": "error"},
        {"scenario_id": "t1", "reward": 0.5},
        {"scenario_id": "t9", "reward": None, "judge_status": "timeout"},
    ]
    a, b = pass_at(base), pass_at(noisy)
    assert a.to_dict() | {"config": None} == b.to_dict() | {"config": None}
    assert b.n_groups == 3 and b.n_rows == 12


def test_qwen_reward_counts_when_reward_is_absent() -> None:
    rows = [{"scenario_id": "a", "qwen_reward": 1.0}, {"scenario_id": "a", "qwen_reward": 0.0}]
    assert pass_at(rows).pass_at_1 == pytest.approx(0.5)


def test_no_graded_rows() -> None:
    p = pass_at([{"scenario_id": "a", "reward": None}])
    assert p.pass_at_1 is None and p.ci95 is None and p.n_groups == 0
    assert "no binary-graded rows" in p.note
    assert "pass@1 n/a" in str(p)
    assert "grade the rows" in p.note


def test_rows_graded_with_partial_rewards_say_so_not_to_grade_them() -> None:
    # a judge returning 0.9 / 0.1: the rows are graded, "grade the rows" was the wrong fix
    rows = [{"scenario_id": t, "reward": r} for t in "ab" for r in (0.9, 0.1)]
    p = pass_at(rows)
    assert p.pass_at_1 is None
    assert "4 of 4 rows carry a partial reward" in p.note and "return 0/1" in p.note
    assert "grade the rows" not in p.note


def test_grouping_uses_task_key() -> None:
    rows = [
        {"scenario_id": "s1", "prompt": "phrasing one", "reward": 1.0},
        {"scenario_id": "s1", "prompt": "phrasing two", "reward": 0.0},
        {"task_id": "t1", "prompt": "x", "reward": 1.0},
        {"prompt": "bare prompt", "reward": 0.0},
    ]
    p = pass_at(rows)
    assert p.per_task == {"s1": 0.5, "t1": 1.0, "bare prompt": 0.0}


# --------------------------------------------------------------------------------------
# Intervals
# --------------------------------------------------------------------------------------


def test_intervals_none_under_three_groups() -> None:
    p = pass_at(rows_from([(2, 4), (3, 4)]))
    assert p.ci95 is None and p.pass_pow_k_ci95 is None and p.pass_at_k_ci95 is None
    assert p.pass_pow_k is not None
    assert "intervals need >= 3 tasks" in p.note


def test_intervals_present_from_three_groups_and_reproducible() -> None:
    rows = rows_from([(2, 4), (3, 4), (1, 4), (4, 4), (0, 4)])
    p = pass_at(rows)
    for value, ci in (
        (p.pass_at_1, p.ci95),
        (p.pass_pow_k, p.pass_pow_k_ci95),
        (p.pass_at_k, p.pass_at_k_ci95),
    ):
        assert ci is not None
        assert 0.0 <= ci[0] <= value <= ci[1] <= 1.0
    assert pass_at(rows).to_dict() == p.to_dict()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(1, 6)).map(lambda t: (min(t), t[1])),
        min_size=1,
        max_size=25,
    )
)
def test_intervals_bracket_estimates_and_adding_a_task_never_crashes(
    spec: list[tuple[int, int]],
) -> None:
    rows = rows_from(spec)
    for p in (pass_at(rows), pass_at(rows + group("extra", 1, 4)), pass_at(rows, k=1, min_k=1)):
        for value, ci in (
            (p.pass_at_1, p.ci95),
            (p.pass_pow_k, p.pass_pow_k_ci95),
            (p.pass_at_k, p.pass_at_k_ci95),
        ):
            if ci is not None:
                assert ci[0] - 1e-12 <= value <= ci[1] + 1e-12
        str(p)
        p.to_dict()


# --------------------------------------------------------------------------------------
# The printed form and to_dict
# --------------------------------------------------------------------------------------


def test_printed_line_has_the_documented_shape() -> None:
    rows = rows_from([(c, 4) for c in (4, 3, 2, 4, 1, 3, 4, 2, 3, 4, 0, 4, 3, 2, 4, 3)])
    p = pass_at(rows)
    pattern = (
        r"pass@1 \d\.\d\d \[\d\.\d\d\.\.\d\.\d\d\] \| "
        r"pass\^4 \(pass_pow_k\) \d\.\d\d \[\d\.\d\d\.\.\d\.\d\d\] \| "
        r"pass@4 \d\.\d\d \[\d\.\d\d\.\.\d\.\d\d\] \| "
        r"headroom -?\d\.\d\d \(16 groups, k=4\)$"
    )
    assert re.fullmatch(pattern, str(p)), str(p)
    assert f"pass@1 {p.pass_at_1:.2f} [{p.ci95[0]:.2f}..{p.ci95[1]:.2f}]" in str(p)


def test_printed_line_ends_with_the_note() -> None:
    p = pass_at(rows_from([(1, 2), (2, 2), (0, 2)]))
    assert str(p).endswith(p.note)
    assert "pass^2 (pass_pow_k) n/a" in str(p)


def test_to_dict_keys_lists_and_headroom() -> None:
    p = pass_at(rows_from([(2, 4), (3, 4), (1, 4), (4, 4)]))
    d = p.to_dict()
    assert set(d) == {
        "k", "pass_at_1", "pass_pow_k", "pass_at_k", "headroom", "n_groups", "n_rows",
        "n_groups_at_k", "n_groups_imputed", "n_lost", "per_task", "note", "config", "ci95",
        "pass_pow_k_ci95", "pass_at_k_ci95", "pass_at_1_basis", "n_rows_pass_at_1",
        "ci_method",
    }  # fmt: skip
    assert isinstance(d["ci95"], list) and len(d["ci95"]) == 2
    assert d["ci_method"] == "wilson_deff"  # 4 tasks: under SMALL_EVAL_TASKS
    assert d["headroom"] == pytest.approx(p.pass_at_k - p.pass_at_1)


def test_headroom_property_on_a_hand_built_passat() -> None:
    p = PassAt(k=4, pass_at_1=0.66, pass_pow_k=0.31, pass_at_k=0.94, n_groups=16, n_rows=64)
    assert p.headroom == pytest.approx(0.28)
    assert str(p) == (
        "pass@1 0.66 | pass^4 (pass_pow_k) 0.31 | pass@4 0.94 | headroom 0.28 (16 groups, k=4)"
    )


# --------------------------------------------------------------------------------------
# Inputs and config
# --------------------------------------------------------------------------------------


def test_accepts_objects_with_rows() -> None:
    rows = rows_from([(2, 4), (3, 4), (1, 4)])

    class Data:
        def __init__(self) -> None:
            self.rows = rows

    class Callable:
        def rows(self) -> list[dict]:
            return rows

    assert pass_at(Data()).to_dict() == pass_at(rows).to_dict()
    assert pass_at(Callable()).to_dict() == pass_at(rows).to_dict()
    with pytest.raises(TypeError, match=r"\.rows"):
        as_rows(42)


def test_config_names_settings_and_what_is_mixed() -> None:
    common = {
        "policy_version": "agent@abc",
        "lineage": {"system_prompt_sha": "abc", "judge_version": "checklist@2"},
        "final_text": "Your booking is confirmed.",
    }
    rows = rows_from([(2, 4), (3, 4)], sampling={"temperature": 0.7, "max_tokens": 512}, **common)
    rows += rows_from([(1, 4)], sampling={"temperature": 1.0, "max_tokens": 512}, **common)
    rows[0]["ended_by"] = "max_tokens"
    rows[1]["final_text"] = "<think>still thinking"
    cfg = pass_at(rows).config
    assert cfg["k"] == 4 and cfg["n_rows"] == 12
    assert cfg["max_tokens"] == 512
    assert cfg["temperature"] == [0.7, 1.0] and cfg["mixed"] == ["temperature"]
    assert cfg["policy_version"] == "agent@abc"
    assert cfg["judge_version"] == "checklist@2"
    assert cfg["prompt_sha"] == "abc"
    assert cfg["token_cap_share"] == pytest.approx(1 / 12)
    assert cfg["answered_share"] == pytest.approx(11 / 12)
    assert "token cap hit on 8% of rows" in str(pass_at(rows))


def test_run_config_standalone() -> None:
    rows = rows_from([(1, 3), (2, 2)], judge_name="checklist")
    cfg = run_config(rows)
    assert cfg["n_tasks"] == 2 and cfg["k"] == 2
    assert cfg["judge_version"] == "checklist"
    assert cfg["temperature"] is None and cfg["mixed"] == []


def test_six_tasks_that_all_failed_are_not_a_certain_zero() -> None:
    # The task bootstrap cannot vary when every task has the same rate; it printed
    # pass@1 0.000 [0.000, 0.000]. Wilson over the 6 tasks: [0, z^2 / (6 + z^2)] = [0, 0.39].
    res = pass_at(rows_from([(0, 4)] * 6))
    z2 = 1.959963984540054**2
    assert res.pass_at_1 == 0.0
    assert res.ci95 == pytest.approx((0.0, z2 / (6 + z2)))
    assert res.pass_pow_k_ci95 == pytest.approx((0.0, z2 / (6 + z2)))
    assert res.pass_at_k_ci95 == pytest.approx((0.0, z2 / (6 + z2)))
    assert res.ci95[0] == 0.0  # exactly the boundary, not 2.8e-17 from the subtraction
    assert "Wilson over the 6 tasks" in res.note and res.ci_method == "wilson_tasks"
    # Every task passing every time is the same at the other end.
    top = pass_at(rows_from([(4, 4)] * 6))
    assert top.ci95 == pytest.approx((1 - z2 / (6 + z2), 1.0)) and top.ci95[1] == 1.0
    # Tasks that differ keep the bootstrap and carry no such note.
    mixed = pass_at(rows_from([(0, 4), (2, 4), (4, 4), (1, 4)]))
    assert "Wilson" not in mixed.note and mixed.ci95 is not None


# ---- adaptive runs: pass@1 from the fixed first batch ----------------------------------


def test_adaptive_run_reads_pass_at_1_unbiased_at_a_known_p() -> None:
    """A user agent that succeeds with probability 0.7 (seeded per rollout), run under the rl
    default repeat_policy=split: 4 rollouts a task, 4 more where those split. Over all rows
    the per-task mean reads ~0.73; the headline must read 0.7, and say what it read."""
    import random

    import wai_exp as wai
    from wai_exp.simulate.agents import current_rollout

    p = 0.7

    def agent(prompt, *, tools, system_prompt, world, sampling):
        won = random.Random(current_rollout.get().seed).random() < p
        return {"steps": [], "final_text": "DONE" if won else "Sorry, I could not."}

    def grader(row):
        return {"reward": float(row["final_text"] == "DONE"), "reason": "scripted coin"}

    n_tasks = 400
    data = wai.simulate(
        agent, mode="rl", situations=n_tasks, budget=8 * n_tasks, grader=grader, seed=0
    )
    rows = data.rows()
    assert {r["selection_reason"] for r in rows} == {"initial", "group_split"}
    by_task: dict[str, list[float]] = {}
    for r in rows:
        by_task.setdefault(r["scenario_id"], []).append(r["reward"])
    naive = float(np.mean([np.mean(v) for v in by_task.values()]))
    assert naive > 0.72  # the skew this test exists to catch (4 + 4 at p=0.7: 0.733)

    pa = pass_at(rows)
    assert pa.pass_at_1_basis == "first_batch"
    assert pa.n_rows_pass_at_1 == 4 * n_tasks
    assert abs(pa.pass_at_1 - p) < 0.02
    assert pa.ci95[0] < p < pa.ci95[1]
    # per_task is the vector pass@1 averages, so a user's own statistic over it (or the
    # floor's paired comparison) reads the first batch too, not the skewed all-rows rates
    assert float(np.mean(list(pa.per_task.values()))) == pytest.approx(pa.pass_at_1)
    assert "fixed first batch" in str(pa).split(" | ")[0]
    assert pa.to_dict()["pass_at_1_basis"] == "first_batch"


def test_a_fixed_run_reads_pass_at_1_over_every_row() -> None:
    rows = [
        {"scenario_id": f"t{t}", "reward": float(i < t % 4), "selection_reason": "fixed"}
        for t in range(8)
        for i in range(4)
    ]
    pa = pass_at(rows)
    assert pa.pass_at_1_basis == "all_rows" and pa.n_rows_pass_at_1 == 32
    assert pa.pass_at_1 == pytest.approx(np.mean([t % 4 / 4 for t in range(8)]))
    assert "first batch" not in str(pa)


def test_token_cap_share_reads_a_marked_step_in_any_shape() -> None:
    plain = [{"kind": "user", "content": "hi"}, {"kind": "assistant", "content": "ok"}]
    rows = [dict(r, steps=list(plain)) for r in rows_from([(2, 4), (3, 4)])]
    assert run_config(rows)["token_cap_share"] == 0.0  # every step internal, none marked
    rows[0]["steps"] = [*plain, {"kind": "tool", "name": "t", "result": {}, "truncated": True}]
    rows[1]["steps"] = tuple(plain[:1]) + ({"kind": "assistant", "content": "", "truncated": 1},)
    rows[2]["ended_by"] = "length"
    rows[3]["steps"] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    assert run_config(rows)["token_cap_share"] == pytest.approx(3 / 8)


def test_rows_whose_settings_are_lists_still_give_a_run_config() -> None:
    # Another tool wrote policy_version as a list and temperature inside a list: pass_at
    # (and so publish_gate) used to raise "unhashable type: 'list'".
    rows = [
        {"scenario_id": f"t{i // 4}", "reward": float(i % 2), "final_text": "ok, done",
         "policy_version": ["base", "lora-3"] if i < 8 else "base",
         "sampling": {"temperature": [0.7], "max_tokens": 256}}
        for i in range(16)
    ]  # fmt: skip
    config = pass_at(rows).config
    assert config["policy_version"] == ['["base", "lora-3"]', "base"]
    assert config["mixed"] == ["policy_version"] and config["temperature"] == "[0.7]"
    assert config["max_tokens"] == 256


def test_lost_rollouts_count_as_failed_repeats_of_their_task() -> None:
    """Issue 18.1: a task whose every rollout was lost stays in the score at 0."""
    rows = rows_from([(4, 4), (2, 4)])
    plain = pass_at(rows)
    counted = pass_at(rows, lost={"t1": ["fixed", "fixed"], "gone": ["fixed"] * 4})
    assert plain.n_groups == 2 and plain.pass_at_1 == pytest.approx(0.75)
    # t1 is 2 of 6, "gone" 0 of 4: (1 + 1/3 + 0) / 3
    assert counted.n_groups == 3 and counted.pass_at_1 == pytest.approx(4 / 9)
    assert counted.per_task["gone"] == 0.0 and counted.n_lost == 6
    assert counted.n_rows == plain.n_rows == 8  # graded rows only
    assert counted.pass_pow_k == pytest.approx((1 + 0 + 0) / 3)
    assert "6 lost rollouts counted as failures" in str(counted)


def test_a_lost_extension_stays_out_of_a_first_batch_pass_at_1() -> None:
    rows = group("a", 1, 2, selection_reason="initial") + group(
        "b", 2, 2, selection_reason="initial"
    )
    rows += group("a", 2, 2, selection_reason="group_split")
    lost = {"a": ["group_split"], "b": ["initial", "initial"]}
    pa = pass_at(rows, lost=lost)
    assert pa.pass_at_1_basis == "first_batch"
    # a: 1 of 2 in its first batch; b: 2 of 4 with its two lost first-batch rollouts
    assert pa.pass_at_1 == pytest.approx(0.5)
    assert pa.n_rows_pass_at_1 == 4 and pa.n_lost == 3


# --------------------------------------------------------------------------------------
# Small evals: the interval over a handful of tasks
# --------------------------------------------------------------------------------------


def test_ten_tasks_at_three_repeats_get_an_interval_around_their_rate() -> None:
    # Per-task passes of 3: rates 0, 0, 2/3, 1/3, 2/3, 2/3, 1/3, 2/3, 2/3, 2/3 (mean 0.467).
    # The bootstrap-t printed [0.006, 0.644]: a lower end near 0 that no task count supports
    # (resamples holding one repeated rate have almost no spread, so their t is huge).
    res = pass_at(rows_from([(c, 3) for c in (0, 0, 2, 1, 2, 2, 1, 2, 2, 2)]))
    assert res.ci_method == "wilson_deff"
    rates = np.array([0, 0, 2, 1, 2, 2, 1, 2, 2, 2]) / 3
    # The spread is worth 31.5 trials, more than the 30 rows: capped at the rows.
    assert rates.mean() * (1 - rates.mean()) / (rates.var(ddof=1) / 10) > 30
    n_eff = 30 * (1.959963984540054 / 2.2621571627409915) ** 2  # (z / t_9)^2
    assert res.ci95 == pytest.approx(tuple(wilson_score(rates.mean(), n_eff)))
    assert res.ci95 == pytest.approx((0.281, 0.662), abs=1e-3)


def test_three_of_ten_tasks_passing_every_time_is_not_a_rate_that_could_be_zero() -> None:
    # The bootstrap (expanded, as a studentized one that cannot studentize falls back to)
    # printed [0.000, 0.715]: 3 tasks passing 4 of 4 rule a 0% rate out.
    res = pass_at(rows_from([(4, 4)] * 3 + [(0, 4)] * 7))
    assert res.ci95 is not None and res.ci95[0] > 0.05
    assert res.ci95 == pytest.approx((0.087, 0.658), abs=1e-3)
    assert res.pass_pow_k_ci95 is not None and res.pass_pow_k_ci95[0] > 0.05


def test_thirty_tasks_and_more_keep_the_task_bootstrap() -> None:
    spec = [(c, 4) for c in (4, 3, 2, 4, 1, 3, 4, 2, 3, 4, 0, 4, 3, 2, 4)] * 2
    res = pass_at(rows_from(spec))
    assert res.n_groups == SMALL_EVAL_TASKS and res.ci_method == "bootstrap"
    assert pass_at(rows_from(spec[:-1])).ci_method == "wilson_deff"


def test_the_small_eval_interval_covers_the_rate_it_claims_to() -> None:
    # 1,000 simulated evals of 10 tasks at 3 repeats, task difficulties uniform on
    # [0.2, 0.8] (true mean 0.5), seeded: the 95% interval must hold the true mean in at
    # least 93% of them (the study, experiments/bench/bench_small_eval.py, measured 98%).
    rng = np.random.default_rng(20261206)
    p = rng.uniform(0.2, 0.8, size=(1000, 10))
    passes = rng.binomial(3, p)
    covered = 0
    for row in passes:
        res = pass_at(rows_from([(int(c), 3) for c in row]))
        assert res.ci95 is not None
        covered += res.ci95[0] <= 0.5 <= res.ci95[1]
    assert covered >= 930


def _split_policy_rows(p: float, n_tasks: int, seed: int) -> list[dict]:
    """rl's split policy: 4 rollouts a task, 4 more (``group_split``) where the 4 split."""
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    for t in range(n_tasks):
        first = (rng.random(4) < p).astype(float)
        rows += [{"scenario_id": f"t{t}", "reward": r} for r in first]
        if 0 < first.sum() < 4:
            more = (rng.random(4) < p).astype(float)
            rows += [
                {"scenario_id": f"t{t}", "reward": r, "selection_reason": "group_split"}
                for r in more
            ]
    return rows


def test_pass_k_under_the_split_policy_reads_the_first_batch() -> None:
    # Extra rollouts go only where the first 4 split, so C(c, 4) / C(n, 4) over all rows is
    # skewed: at p = 0.5 it averaged 0.107 where p^4 is 0.0625. The first batch is unbiased.
    res = pass_at(_split_policy_rows(0.5, 4000, seed=11))
    assert res.pass_at_1_basis == "first_batch" and res.k == 4
    assert res.pass_pow_k == pytest.approx(0.5**4, abs=0.012)
    assert res.pass_at_k == pytest.approx(1 - 0.5**4, abs=0.012)
    assert "as pass^4 and pass@4 are" in str(res)


def test_pass_k_under_the_split_policy_counts_each_task_once_from_its_first_four() -> None:
    rows = [{"scenario_id": "a", "reward": r} for r in (1.0, 1.0, 1.0, 0.0)]
    rows += [{"scenario_id": "a", "reward": 1.0, "selection_reason": "group_split"}] * 4
    rows += [{"scenario_id": "b", "reward": 1.0}] * 4
    rows += [{"scenario_id": "c", "reward": 0.0}] * 4
    res = pass_at(rows)
    # a: 3 of its first 4 (all 8 rows would give C(7,4)/C(8,4) = 0.5 to pass^4)
    assert res.pass_pow_k == pytest.approx((0 + 1 + 0) / 3)
    assert res.pass_at_k == pytest.approx((1 + 1 + 0) / 3)
    assert res.n_groups_at_k == 3


def test_per_run_k_is_one_runs_repeats_when_rows_come_from_several_runs():
    from wai_exp.score.stats.passat import per_run_k

    def row(task, run, reward=1.0):
        return {"scenario_id": task, "reward": reward, "lineage": {"eval_run": run}}

    three = [row(t, r) for t in ("a", "b") for r in range(3) for _ in range(4)]
    assert per_run_k(three) == (4, 3)
    # a task one run gave 3 graded rows: the smallest group within a run, as pass_at's default
    assert per_run_k([*three[:-1], row("b", 2, None)]) == (3, 3)
    # one run, or rows that name none: pass_at's own default applies
    assert per_run_k([row("a", 0) for _ in range(4)]) == (None, 1)
    assert per_run_k([{"scenario_id": "a", "reward": 1.0}] * 4) == (None, 0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"k": 4, "lost": {"t1": ["fixed", "fixed"], "gone": ["fixed"] * 4}},
        {"k": 4, "unanimous_short": True},
        {"k": 4, "unanimous_short": True, "lost": {"t2": ["initial"]}},
    ],
)
def test_task_estimates_average_to_the_headline_they_come_from(kwargs: dict) -> None:
    # Short unanimous groups (t3, t5), a split short one (t4), a lost rollout, and an
    # adaptive extension of t0: each rule pass_at applies shows in its per-task numbers.
    from wai_exp.score.stats.passat import task_estimates

    rows = rows_from([(2, 4), (4, 4), (0, 4), (3, 3), (1, 3), (0, 2)], selection_reason="initial")
    rows += group("t0", 4, 4, selection_reason="group_split")
    pa, est = pass_at(rows, **kwargs), task_estimates(rows, **kwargs)
    assert est.k == pa.k
    assert np.mean(list(est.pass_at_1.values())) == pytest.approx(pa.pass_at_1, abs=1e-12)
    assert len(est.pass_pow_k) == pa.n_groups_at_k
    assert np.mean(list(est.pass_pow_k.values())) == pytest.approx(pa.pass_pow_k, abs=1e-12)
    assert np.mean(list(est.pass_at_k.values())) == pytest.approx(pa.pass_at_k, abs=1e-12)
    assert est.pass_at_1["t0"] == 0.5  # its first batch, not the 4 passes added after
    if "lost" in kwargs and "gone" in kwargs["lost"]:
        assert est.pass_at_1["gone"] == 0.0 and est.pass_at_1["t1"] == pytest.approx(4 / 6)
    if kwargs.get("unanimous_short"):
        assert est.pass_pow_k["t3"] == 1.0 and est.pass_pow_k["t5"] == 0.0
        assert "t4" not in est.pass_pow_k


@pytest.mark.parametrize(
    ("n", "said"),
    [
        (1, "1 task has no graded first-batch row and is left out"),
        (2, "2 tasks have no graded first-batch row and are left out"),
    ],
)
def test_tasks_with_only_added_rows_are_counted_in_their_number(n: int, said: str) -> None:
    first = [{"scenario_id": "a", "reward": r, "selection_reason": "initial"} for r in (1.0, 0.0)]
    added = [
        {"scenario_id": f"x{i}", "reward": 1.0, "selection_reason": "group_split"} for i in range(n)
    ]
    assert said in pass_at(first + added).note
