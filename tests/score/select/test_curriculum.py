"""curriculum / retire_solved / format_curriculum over hand-built task groups."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from wai_exp.pipeline.registry import StageContext, StageResult, resolve
from wai_exp.score.select.curriculum import curriculum, format_curriculum, retire_solved


def group(task: str, passes: int, k: int, **extra: object) -> list[dict]:
    """``k`` graded rollouts of ``task``, the first ``passes`` of them passing."""
    return [
        {"scenario_id": task, "rollout_id": f"{task}-{i}", "reward": int(i < passes), **extra}
        for i in range(k)
    ]


def names(entries: list[dict]) -> list[str]:
    return [e["task"] for e in entries]


def test_edges_are_inclusive_and_one_of_eight_is_not_ready():
    rows = (
        group("at_floor", 1, 5)  # 0.2 exactly: trainable
        + group("at_solved", 4, 5)  # 0.8 exactly: trainable
        + group("above", 7, 8)  # 0.875: solved
        + group("all_pass", 4, 4)  # 1.0: solved
        + group("one_of_eight", 1, 8)  # 0.125: not ready
        + group("all_fail", 0, 4)  # 0.0: not ready
        + group("single", 1, 1)  # one rollout: too few, never "solved"
    )
    rep = curriculum(rows)
    assert names(rep["trainable"]) == ["at_solved", "at_floor"]
    assert names(rep["solved"]) == ["all_pass", "above"]
    assert names(rep["not_ready"]) == ["one_of_eight", "all_fail"]
    assert names(rep["too_few"]) == ["single"]
    assert rep["too_few"][0]["pass_rate"] is None and rep["too_few"][0]["k"] == 1
    assert (rep["n_trainable"], rep["n_solved"], rep["n_not_ready"], rep["n_too_few"]) == (
        2,
        2,
        2,
        1,
    )
    assert rep["n_tasks"] == 7 and rep["n_rows"] == len(rows) == rep["n_graded"]
    # Both trainable tasks sit in the default 20-80% band, edges included.
    assert rep["n_in_band"] == 2 and rep["in_band_share"] == 1.0


def test_moving_the_thresholds_moves_the_edge_tasks():
    rows = group("a", 1, 5) + group("b", 4, 5)
    rep = curriculum(rows, solved=0.79, floor=0.21)
    assert names(rep["solved"]) == ["b"] and names(rep["not_ready"]) == ["a"]
    assert rep["n_trainable"] == 0 and rep["in_band_share"] is None
    assert "nothing to train on" in rep["note"]


def test_tiers_split_easy_to_hard_with_equal_counts():
    # Seven trainable tasks with distinct pass rates out of 10 rollouts: 0.8 down to 0.2.
    rows = []
    for task, passes in zip("gfedcba", range(2, 9), strict=True):
        rows += group(task, passes, 10)
    rep = curriculum(rows, tiers=3)
    rates = [e["pass_rate"] for e in rep["trainable"]]
    assert rates == pytest.approx([0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])  # easy to hard
    assert [t["n_tasks"] for t in rep["tiers"]] == [3, 2, 2]  # 7 = 3 + 2 + 2
    assert rep["tiers"][0]["tasks"] == ["a", "b", "c"]
    assert rep["tiers"][0]["pass_rate_max"] == pytest.approx(0.8)
    assert rep["tiers"][2]["pass_rate_min"] == pytest.approx(0.2)
    assert [e["tier"] for e in rep["trainable"]] == [1, 1, 1, 2, 2, 3, 3]
    # A narrower band counts only the middle of the trainable set; the split does not move.
    narrow = curriculum(rows, band=(0.4, 0.6))
    assert narrow["n_in_band"] == 3 and narrow["in_band_share"] == pytest.approx(3 / 7)
    assert narrow["n_trainable"] == 7 and narrow["thresholds"]["band"] == [0.4, 0.6]


def test_more_tiers_than_tasks_leaves_empty_tiers_and_says_so():
    rep = curriculum(group("a", 1, 2) + group("b", 1, 4), tiers=4)
    assert [t["n_tasks"] for t in rep["tiers"]] == [1, 1, 0, 0]
    assert rep["tiers"][3]["pass_rate_max"] is None
    assert "2 trainable tasks for 4 tiers: the last 2 tiers are empty" in rep["note"]


def test_equal_pass_rates_order_by_task_key():
    rows = group("zeta", 2, 4) + group("alpha", 1, 2) + group("mid", 3, 4)
    rep = curriculum(rows, tiers=1)
    assert names(rep["trainable"]) == ["mid", "alpha", "zeta"]


def test_only_binary_rewards_count_and_unjudged_rows_are_not_failures():
    rows = group("t", 2, 2)
    rows += [
        {"scenario_id": "t", "reward": None},  # unjudged
        {"scenario_id": "t", "reward": 0.5},  # partial credit
        {"scenario_id": "t", "reward": 0, "judge_status": "timeout"},  # no verdict
    ]
    rows += [{"scenario_id": "u", "qwen_reward": 1}, {"scenario_id": "u", "qwen_reward": 0}]
    rep = curriculum(rows)
    # t is 2 of 2 (solved), not 2 of 5 (trainable); u reads qwen_reward: 1 of 2.
    assert names(rep["solved"]) == ["t"] and rep["solved"][0]["k"] == 2
    assert names(rep["trainable"]) == ["u"]
    assert rep["n_skipped"] == 3 and rep["n_graded"] == 4


def test_groups_under_task_key_not_prompt_text():
    # Two phrasings of one situation pool into one task: 1 of 2 together, 0/1 and 1/1 apart.
    rows = [
        {"scenario_id": "s1", "prompt": "where is my order?", "reward": 1},
        {"scenario_id": "s1", "prompt": "order status please", "reward": 0},
        {"task_id": "t9", "prompt": "x", "reward": 1},
        {"prompt": "raw prompt", "reward": 0},
    ]
    rep = curriculum(rows)
    assert names(rep["trainable"]) == ["s1"] and rep["trainable"][0]["k"] == 2
    assert sorted(names(rep["too_few"])) == ["raw prompt", "t9"]


def test_each_measured_task_carries_its_wilson_interval():
    rep = curriculum(group("two_of_two", 2, 2) + group("half", 5, 10))
    lo, hi = rep["solved"][0]["ci95"]
    # Wilson at 2 of 2: z^2 = 3.8415, centre (1 + z^2/4) / (1 + z^2/2) = 0.6576,
    # half-width z * sqrt(z^2 / 16) / (1 + z^2/2) = 0.3424, so [0.3424, 1].
    assert lo == pytest.approx(0.3424, abs=1e-4) and hi == pytest.approx(1.0)
    lo, hi = rep["trainable"][0]["ci95"]
    assert lo == pytest.approx(1 - hi) and 0.2 < lo < 0.25  # symmetric around 0.5


def test_nothing_is_mutated():
    rows = group("a", 1, 2) + group("b", 2, 2) + group("c", 0, 1)
    before = copy.deepcopy(rows)
    curriculum(rows)
    retire_solved(rows)
    assert rows == before


def test_retire_solved_drops_solved_tasks_and_keeps_too_few():
    rows = (
        group("solved", 4, 4)
        + [{"scenario_id": "solved", "reward": None}]  # its unjudged row goes with it
        + group("edge", 4, 5)  # 0.8 is not above 0.8: kept
        + group("hard", 0, 3)  # not ready is held, not retired
        + group("one", 1, 1)  # a single pass cannot prove a task solved
    )
    kept = retire_solved(rows)
    assert {r["scenario_id"] for r in kept} == {"edge", "hard", "one"}
    assert len(kept) == 5 + 3 + 1
    expected = [r for r in rows if r["scenario_id"] != "solved"]
    assert all(a is b for a, b in zip(kept, expected, strict=True))  # same dicts, same order
    # Lowering min_rollouts to 1 lets the single 1-of-1 task count as solved.
    assert {r["scenario_id"] for r in retire_solved(rows, min_rollouts=1)} == {"edge", "hard"}
    assert retire_solved([]) == []


def test_retire_solved_agrees_with_curriculum():
    rows = group("a", 3, 3) + group("b", 5, 6) + group("c", 2, 6) + group("d", 1, 1)
    rep = curriculum(rows, solved=0.7)
    kept = retire_solved(rows, solved=0.7)
    assert (
        {r["scenario_id"] for r in kept}
        == {"c", "d"}
        == {r["scenario_id"] for r in rows} - set(names(rep["solved"]))
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"solved": 0.2, "floor": 0.5}, "floor <= solved"),
        ({"solved": 1.2}, "floor <= solved"),
        ({"band": (0.9, 0.1)}, "lo <= hi"),
        ({"tiers": 0}, "tiers must be an integer >= 1"),
        ({"min_rollouts": 0}, "min_rollouts must be an integer >= 1"),
        ({"min_rollouts": 1.5}, "min_rollouts must be an integer >= 1"),
    ],
)
def test_bad_arguments_name_the_problem(kwargs, message):
    with pytest.raises(ValueError, match=message):
        curriculum(group("a", 1, 2), **kwargs)


def test_no_graded_rows_says_grade_first():
    rep = curriculum([{"scenario_id": "a"}, {"scenario_id": "a", "reward": None}])
    assert rep["n_graded"] == 0 and rep["n_too_few"] == 1 and rep["n_trainable"] == 0
    assert rep["in_band_share"] is None
    assert "grade the rows" in rep["note"]
    assert curriculum([])["n_tasks"] == 0


def test_format_prints_one_line_per_fact():
    rows = group("a", 3, 4) + group("b", 1, 4) + group("c", 4, 4) + group("d", 0, 4)
    rows += group("e", 1, 1) + [{"scenario_id": "e", "reward": None}]
    text = format_curriculum(curriculum(rows, tiers=2))
    lines = text.splitlines()
    assert lines[0] == "curriculum: 5 tasks from 18 rows (1 row without a 0/1 reward skipped)"
    assert lines[1] == "trainable: 2 tasks with pass rate in [0.20, 0.80], easy to hard in 2 tiers"
    assert lines[2] == "  tier 1 (easiest): 1 task, pass rate 0.75 to 0.75"
    assert lines[3] == "  tier 2 (hardest): 1 task, pass rate 0.25 to 0.25"
    assert lines[4] == "in band [0.20, 0.80]: 2 of 2 trainable tasks (100%)"
    assert lines[5] == "solved (retire): 1 task with pass rate above 0.80"
    assert lines[6] == "not ready (hold): 1 task with pass rate below 0.20"
    assert lines[7] == "too few rollouts: 1 task with fewer than 2 graded rollouts"
    assert lines[8] == (
        "note: 1 task has fewer than 2 graded rollouts: simulate more repeats to place it"
    )
    assert len(lines) == 9
    with pytest.raises(ValueError, match="curriculum\\(\\) report"):
        format_curriculum({"mean": 0.5})


def test_report_stage_runs_curriculum_by_module_path(tmp_path: Path):
    """What a user writes in a pipeline YAML: ``kind: report`` with ``fn``/``format`` paths."""
    rows = group("a", 3, 4) + group("b", 4, 4) + group("c", 0, 4)
    ctx = StageContext(
        name="curriculum",
        kind="report",
        config={},
        run_dir=tmp_path / "run",
        stage_dir=tmp_path / "entry",
        start_dir=tmp_path,
        key="k" * 64,
        partial_path=tmp_path / "entry/partial.jsonl",
    )
    res = resolve("report").fn(
        ctx,
        {
            "fn": "wai_exp.score.select.curriculum:curriculum",
            "format": "wai_exp.score.select.curriculum:format_curriculum",
            "kwargs": {"tiers": 2},
        },
        {"grade": StageResult(rows=rows)},
    )
    assert names(res.report["trainable"]) == ["a"] and res.report["thresholds"]["tiers"] == 2
    # Top-level counts become tracker metrics; lists and the unmeasured share do not.
    assert res.metrics["n_trainable"] == 1.0 and res.metrics["n_solved"] == 1.0
    assert res.metrics["n_not_ready"] == 1.0 and "trainable" not in res.metrics
    assert res.text.startswith("curriculum: 3 tasks from 12 rows")


def test_one_empty_tier_is_said_in_the_singular():
    rep = curriculum(group("a", 1, 2) + group("b", 1, 4), tiers=3)
    assert [t["n_tasks"] for t in rep["tiers"]] == [1, 1, 0]
    assert "2 trainable tasks for 3 tiers: the last tier is empty" in rep["note"]
    one = curriculum(group("a", 1, 2), tiers=2)
    assert "1 trainable task for 2 tiers: the last tier is empty" in one["note"]
    lines = format_curriculum(one).splitlines()
    assert lines[0] == "curriculum: 1 task from 2 rows (0 rows without a 0/1 reward skipped)"
    assert lines[1].startswith("trainable: 1 task with pass rate in")
    assert lines[4] == "in band [0.20, 0.80]: 1 of 1 trainable task (100%)"
