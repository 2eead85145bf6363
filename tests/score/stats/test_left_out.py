"""``ungraded_tasks_line``: the tasks a pass@1 headline leaves out because none of their
rows has a 0/1 grade, in words a person reads under "over N tasks"."""

from __future__ import annotations

from typing import Any

from wai_exp.score.stats.left_out import fix_said_once, k_way_note, ungraded_tasks_line
from wai_exp.score.stats.passat import BASIS_NOTE_HEAD, PLAN_NOT_SERVED_FIX, pass_at


def _rows(rewards: dict[str, list[Any]], unserved: set[str] = frozenset()) -> list[dict]:
    """One row per reward; a task in ``unserved`` has its None rows marked plan_not_served."""
    rows = []
    for task, values in rewards.items():
        for value in values:
            row: dict[str, Any] = {"scenario_id": task, "reward": value}
            if value is None and task in unserved:
                row["judge_meta"] = {"plan_not_served": "get_note"}
            rows.append(row)
    return rows


GRADED = {"a": [1.0, 0.0], "b": [1.0, 1.0], "c": [0.0, 0.0]}


def test_a_task_whose_every_row_is_unjudged_is_named_with_its_count_and_fix():
    rows = _rows({**GRADED, "d": [None, None]}, unserved={"d"})
    line = ungraded_tasks_line(rows)
    assert line is not None
    assert line.startswith(
        "left out: 1 of 4 tasks is not in pass@1, pass^k or pass@k (over 3 tasks): none of its "
        "rows has a 0/1 grade; of its 2 rows, 2 are unjudged because the world answered not "
        "found (or nothing) for the record the ask names (judge_meta.plan_not_served)"
    )
    assert "give the identifying argument an enum" in line
    assert pass_at(rows).n_groups == 3  # the headline's "over N tasks" is the line's


def test_rows_unjudged_for_no_reason_of_the_worlds_say_grade_them_again():
    line = ungraded_tasks_line(_rows({**GRADED, "d": [None], "e": [None, 0.5]}))
    assert line is not None
    assert "2 of 5 tasks are not in pass@1, pass^k or pass@k (over 3 tasks)" in line
    assert line.endswith(
        "of their 3 rows, 1 carries a partial reward: have the judge return 0/1 (a threshold "
        "on its score); 2 are unjudged: grade those rows again"
    )


def test_a_task_that_lost_rollouts_and_left_only_unjudged_rows_says_both():
    """lost_as=excluded: task d lost one rollout and its other row is unjudged; task z lost
    every rollout (no row), which the lost line says, so it counts in the total only."""
    rows = _rows({**GRADED, "d": [None]})
    lost = {"counted": False, "by_task": {"d": [None], "z": [None, None]}}
    line = ungraded_tasks_line(rows, lost)
    assert line is not None
    assert line.startswith(
        "left out: 1 of 5 tasks is not in pass@1, pass^k or pass@k (over 3 tasks): none of its "
        "rows has a 0/1 grade (it also lost rollouts, not counted as failures: "
        "simulate.lost_as=excluded); "
        "of its 1 row, 1 is unjudged: grade those rows again"
    )


def test_lost_rollouts_counted_as_failures_keep_their_task_in_the_score():
    rows = _rows({**GRADED, "d": [None]})
    lost = {"counted": True, "by_task": {"d": [None]}}
    assert ungraded_tasks_line(rows, lost) is None
    assert pass_at(rows, lost=lost["by_task"]).n_groups == 4


def test_nothing_to_say_when_every_task_has_a_graded_row():
    assert ungraded_tasks_line(_rows({**GRADED, "d": [None, 1.0]})) is None


def _batched(first: dict[str, list[Any]], added: dict[str, list[Any]]) -> list[dict]:
    """An adaptive run's rows: each task's first batch, then rows the split policy added."""
    rows = [{**r, "selection_reason": "initial"} for r in _rows(first, unserved=set(first))]
    return rows + [{**r, "selection_reason": "group_split"} for r in _rows(added)]


def test_an_adaptive_run_leaves_out_a_task_whose_first_batch_has_no_grade_and_says_so():
    """rl_round on the notes MCP server: a task whose first batch was all unjudged but
    whose added rows were graded sat in "over 145 tasks" while pass@1 read 144; only the
    pass^k note said one task had no graded first-batch row."""
    rows = _batched({**GRADED, "d": [None, None], "e": [None]}, {"a": [1.0], "d": [1.0, 0.0]})
    line = ungraded_tasks_line(rows)
    assert line is not None
    assert line.startswith(
        "left out: 2 of 5 tasks are not in pass@1, pass^k or pass@k (over 3 tasks): none of "
        "their first-batch rows has a 0/1 grade (1 of them has 0/1 grades only on rows an "
        "adaptive policy added, which pass@1 leaves out: they skew the rates); of their 3 "
        "first-batch rows, 3 are unjudged because the world answered not found"
    ), line
    pa = pass_at(rows)
    assert pa.pass_at_1_basis == "first_batch" and pa.n_groups == 3  # "over 3 tasks" too


def test_the_pass_k_note_leaves_the_tasks_with_no_first_batch_grade_to_the_line():
    rows = _batched({**GRADED, "d": [None, None]}, {"d": [1.0, 0.0]})
    line, pa = ungraded_tasks_line(rows), pass_at(rows)
    assert BASIS_NOTE_HEAD in pa.note  # pass_at's own note still says it
    said = k_way_note({"note": pa.note, "ungraded_tasks_line": line})
    assert BASIS_NOTE_HEAD not in said and "first-batch row" not in said
    assert k_way_note({"note": pa.note}) == pa.note  # no line: the note keeps it


def test_the_plan_not_served_fix_is_given_once_and_pointed_back_to():
    fix = PLAN_NOT_SERVED_FIX
    text = f"warning: 3 rows ... fail there. {fix[0].upper()}{fix[1:]}\nleft out: ...: {fix}\n"
    text += f"pass^k: not measured (... does not change: {fix}; or pass k=4)"
    once = fix_said_once(text)
    assert once.lower().count(fix) == 1 and once.startswith(text.splitlines()[0])
    assert once.splitlines()[1] == "left out: ...: see the fix above"
    assert "does not change: see the fix above; or pass k=4" in once


def test_grades_pass_at_line_leaves_the_first_batch_fact_to_the_left_out_line():
    from wai_exp.pipeline.stages.grade import pass_at_line

    rows = _batched({**GRADED, "d": [None, None]}, {"d": [1.0, 0.0]})
    line, pa = ungraded_tasks_line(rows), pass_at(rows)
    text = pass_at_line(pa, {"ungraded_tasks_line": line})
    assert BASIS_NOTE_HEAD not in text and "first-batch row" not in text
    assert text.startswith(str(pa).split(" | ", 1)[0])
    assert pass_at_line(pa, {}) == str(pa)  # no left-out line: the note keeps the fact
