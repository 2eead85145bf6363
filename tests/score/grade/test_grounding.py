"""Argument grounding: which tool arguments came from nowhere, per row and over a run."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.rows import call
from wai_exp.score.grade.grading import conduct_grade, contains_token
from wai_exp.score.grade.grounding import (
    GROUNDING_MARKER,
    argument_grounding,
    grounding_report,
    mark_grounding,
    ungrounded_arguments,
)


def row(prompt: str, *steps: list[dict[str, Any]], task: str = "t", **extra: Any) -> dict:
    out = {"scenario_id": task, "prompt": prompt, "final_text": "Done.", "ended_by": "agent"}
    out["steps"] = [s for part in steps for s in part]
    out.update(extra)
    return out


NOT_FOUND = {"error": "not found"}


def grounded_row(task: str = "t", **extra: Any) -> dict:
    return row("Where is ORD-10482?", call("lookup_order", {"order_id": "ORD-10482"}, {"ok": True}),
               task=task, **extra)  # fmt: skip


def invented_row(order: str = "ORD-55555", task: str = "t", times: int = 1, **extra: Any) -> dict:
    steps = [call("lookup_order", {"order_id": order}, NOT_FOUND) for _ in range(times)]
    return row("Where is my order?", *steps, task=task, **extra)


def no_call_row(task: str = "t") -> dict:
    return row("What are your opening hours?", task=task)


# ---- ungrounded_arguments / argument_grounding ----------------------------------------------


def test_id_the_person_gave_is_grounded() -> None:
    r = grounded_row()
    assert ungrounded_arguments(r) == []
    assert argument_grounding(r) == 1.0


def test_invented_id_is_listed_with_tool_key_and_value() -> None:
    r = invented_row()
    assert ungrounded_arguments(r) == [
        {"tool": "lookup_order", "key": "order_id", "value": "ORD-55555"}
    ]
    assert argument_grounding(r) == 0.0


def test_near_miss_id_is_not_grounded_by_a_longer_one() -> None:
    # Whole-token matching: ORD-1048 is a different order from the ORD-10482 the person gave.
    r = row("Where is ORD-10482?", call("lookup_order", {"order_id": "ORD-1048"}, NOT_FOUND))
    assert [u["value"] for u in ungrounded_arguments(r)] == ["ORD-1048"]


def test_id_from_an_earlier_tool_result_is_grounded() -> None:
    r = row(
        "Refund my last order, I'm maria.chen@example.com",
        call("search_orders", {"email": "maria.chen@example.com"}, {"orders": ["ORD-20001"]}),
        call("issue_refund", {"order_id": "ORD-20001", "amount": 12.5, "reason": "damaged"},
             {"ok": True}),
    )  # fmt: skip
    # The id is grounded by the search; the free-text reason is the agent's own words.
    assert ungrounded_arguments(r) == [
        {"tool": "issue_refund", "key": "reason", "value": "damaged"}
    ]
    assert argument_grounding(r, ignore_keys=("reason",)) == 1.0


def test_id_that_only_a_later_result_shows_is_not_grounded() -> None:
    # The call could only draw on what came before it.
    r = row(
        "Refund my last order",
        call("issue_refund", {"order_id": "ORD-20001", "amount": 5, "reason": "x"}, {"ok": True}),
        call("search_orders", {"email": "maria.chen@example.com"}, {"orders": ["ORD-20001"]}),
    )
    keys = [(u["tool"], u["key"], u["value"]) for u in ungrounded_arguments(r)]
    assert ("issue_refund", "order_id", "ORD-20001") in keys


def test_agent_saying_an_id_first_does_not_ground_it() -> None:
    said = [{"kind": "assistant", "content": "I'll check ORD-77777 for you.", "tool_calls": []}]
    r = row("Where is my order?", said, call("lookup_order", {"order_id": "ORD-77777"}, NOT_FOUND))
    assert argument_grounding(r) == 0.0


def test_ignore_keys_skips_free_text_arguments() -> None:
    r = row(
        "Cancel ORD-10482 please",
        call("cancel_order", {"order_id": "ORD-10482", "reason": "dup of ORD-99999"}, {"ok": True}),
    )
    assert ungrounded_arguments(r) == [
        {"tool": "cancel_order", "key": "reason", "value": "dup of ORD-99999"}
    ]
    assert ungrounded_arguments(r, ignore_keys=("reason",)) == []
    assert argument_grounding(r, ignore_keys=["reason"]) == 1.0


def test_allowed_enum_value_is_grounded_case_insensitively() -> None:
    r = row("Ship ORD-10482 fast", call("ship", {"order_id": "ORD-10482", "speed": "2day"}, {}))
    assert ungrounded_arguments(r) == [{"tool": "ship", "key": "speed", "value": "2day"}]
    assert ungrounded_arguments(r, allow=("2DAY",)) == []
    # allow names values, not keys: another invented value under the same key still counts.
    r2 = row("Ship ORD-10482 fast", call("ship", {"order_id": "ORD-10482", "speed": "3day"}, {}))
    assert argument_grounding(r2, allow=("2day",)) == 0.0


def test_strings_shorter_than_min_len_are_skipped() -> None:
    r = row("Fix ORD-10482", call("tag", {"order_id": "ORD-10482", "code": "A1"}, {}))
    assert ungrounded_arguments(r) == []  # "A1" is 2 characters, under the default 3
    assert ungrounded_arguments(r, min_len=2) == [{"tool": "tag", "key": "code", "value": "A1"}]
    # min_len counts the trimmed value: padding does not make a short string long.
    padded = row("Fix ORD-10482", call("tag", {"order_id": "ORD-10482", "code": "  A1  "}, {}))
    assert ungrounded_arguments(padded) == []


def test_rollout_with_no_calls_is_grounded() -> None:
    r = no_call_row()
    assert ungrounded_arguments(r) == []
    assert argument_grounding(r) == 1.0


def test_numbers_never_count_and_free_wording_counts_unless_its_key_is_ignored() -> None:
    # The reference's wording: every string argument counts by default (ignore_keys=()),
    # free text included; a computed amount is not a string and never counts.
    r = row("Refund ORD-10482", call("issue_refund",
            {"order_id": "ORD-10482", "amount": 123.45, "reason": "arrived broken"}, {}))  # fmt: skip
    assert ungrounded_arguments(r, min_len=0) == [
        {"tool": "issue_refund", "key": "reason", "value": "arrived broken"}
    ]
    assert argument_grounding(r, min_len=0, ignore_keys=("reason",)) == 1.0
    # Wording the person used is grounded by their words.
    said = row("Refund ORD-10482, it arrived broken", call("issue_refund",
               {"order_id": "ORD-10482", "amount": 123.45, "reason": "arrived broken"}, {}))  # fmt: skip
    assert argument_grounding(said) == 1.0


def test_each_call_is_listed_so_a_repeated_invention_counts_twice() -> None:
    assert len(ungrounded_arguments(invented_row(times=2))) == 2


def test_every_row_conduct_calls_ungrounded_is_ungrounded_here() -> None:
    # One matching rule: an argument conduct_grade fails as an invented identifier is always
    # listed here too (this list is wider: it also counts free text).
    rows = [
        grounded_row(),
        invented_row(),
        no_call_row(),
        row("Fix ORD-10482", call("tag", {"order_id": "ORD-10482", "code": "A1"}, {})),
        row("Cancel ORD-10482", call("cancel_order", {"order_id": "ORD-10482", "reason": "ORD-9"})),
    ]
    for r in rows:
        if not conduct_grade(r)["checks"]["grounded"]:
            assert argument_grounding(r, min_len=0) == 0.0


def test_rows_from_messages_are_read_too() -> None:
    messages = [
        {"role": "user", "content": "Where is my order?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function",
         "function": {"name": "lookup_order", "arguments": '{"order_id": "ORD-31337"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": '{"error": "not found"}'},
    ]  # fmt: skip
    assert ungrounded_arguments({"messages": messages}) == [
        {"tool": "lookup_order", "key": "order_id", "value": "ORD-31337"}
    ]


def test_bad_arguments_fail_with_the_fix() -> None:
    with pytest.raises(TypeError, match=r"ignore_keys=\('note',\)"):
        ungrounded_arguments(grounded_row(), ignore_keys="reason")
    with pytest.raises(TypeError, match="allow"):
        ungrounded_arguments(grounded_row(), allow="2day")
    with pytest.raises(ValueError, match="min_len"):
        ungrounded_arguments(grounded_row(), min_len=-1)
    with pytest.raises(TypeError, match="grounding_report or mark_grounding"):
        argument_grounding([grounded_row()])  # type: ignore[arg-type]


# ---- grounding_report --------------------------------------------------------------------


def report_rows() -> list[dict]:
    """4 tasks x 2 rollouts. Per task, grounded: a 1, b 1/2, c 0, d 1 (no calls)."""
    return [
        grounded_row("a"),
        grounded_row("a"),
        grounded_row("b"),
        invented_row("ORD-55555", "b", times=2),
        invented_row("ORD-55555", "c"),
        row("Reset my password", call("lookup_order", {"order_id": "ORD-66666"}, NOT_FOUND),
            call("reset_password", {"email": "x1@example.com"}, {"ok": True}), task="c"),
        no_call_row("d"),
        no_call_row("d"),
    ]  # fmt: skip


def test_report_shares_are_task_means_with_intervals() -> None:
    rep = grounding_report(report_rows())
    assert rep["n_rows"] == 8
    assert rep["n_ungrounded_rows"] == 3
    g = rep["grounded"]
    assert g["share"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert (g["n_rows"], g["n_tasks"]) == (8, 4)
    lo, hi = g["ci95"]
    assert 0.0 <= lo <= g["share"] <= hi <= 1.0
    assert rep["any_call"]["share"] == pytest.approx(3 / 4)  # task d never calls
    # Among rollouts that called a tool, task d drops out: (1 + 1/2 + 0) / 3.
    assert rep["grounded_with_calls"]["share"] == pytest.approx(0.5)
    assert rep["grounded_with_calls"]["n_rows"] == 6


def test_report_grounded_share_is_what_marker_summary_reads() -> None:
    from wai_exp.score.stats.stats import marker_summary

    rows = report_rows()
    summary = marker_summary(mark_grounding(rows), names=[GROUNDING_MARKER])[GROUNDING_MARKER]
    rep = grounding_report(rows)
    assert rep["grounded"]["share"] == summary["mean"]
    assert rep["grounded"]["ci95"] == summary["ci95"]


def test_report_lists_most_common_invented_values_by_tool_and_key() -> None:
    rep = grounding_report(report_rows())
    assert rep["invented"] == [
        {"tool": "lookup_order", "key": "order_id", "count": 4, "rows": 3,
         "values": [{"value": "ORD-55555", "count": 3}, {"value": "ORD-66666", "count": 1}]},
        {"tool": "reset_password", "key": "email", "count": 1, "rows": 1,
         "values": [{"value": "x1@example.com", "count": 1}]},
    ]  # fmt: skip


def test_report_passes_filters_through_and_records_them() -> None:
    rep = grounding_report(report_rows(), ignore_keys=("email",), allow=["ORD-66666"])
    assert rep["settings"] == {"ignore_keys": ["email"], "allow": ["ORD-66666"], "min_len": 3}
    assert rep["invented"] == [
        {"tool": "lookup_order", "key": "order_id", "count": 3, "rows": 2,
         "values": [{"value": "ORD-55555", "count": 3}]},
    ]  # fmt: skip
    # Task c's second rollout is now clean: (1 + 1/2 + 1/2 + 1) / 4.
    assert rep["grounded"]["share"] == pytest.approx(0.75)
    with pytest.raises(TypeError, match="unknown keyword"):
        grounding_report(report_rows(), ignore=("email",))


def test_report_withholds_what_it_cannot_measure() -> None:
    empty = grounding_report([])
    assert empty["grounded"]["share"] is None and empty["any_call"]["share"] is None
    assert "nothing measured" in empty["note"]
    # No calls anywhere: grounded trivially, and grounding among calls is unmeasured, not 0.
    quiet = grounding_report([no_call_row(t) for t in "abcd"])
    assert quiet["grounded"]["share"] == 1.0
    assert (
        quiet["grounded"]["ci95"] is None and "every one of the 4 rows" in quiet["grounded"]["note"]
    )
    assert quiet["any_call"]["share"] == 0.0
    assert quiet["grounded_with_calls"]["share"] is None
    assert "not measured" in quiet["grounded_with_calls"]["note"]
    # Two tasks: a mean, but too few tasks for an interval.
    two = grounding_report([grounded_row("a"), invented_row(task="b")])
    assert two["grounded"]["share"] == 0.5 and two["grounded"]["ci95"] is None
    assert "at least 3 tasks" in two["grounded"]["note"]


# ---- mark_grounding ----------------------------------------------------------------------


def test_mark_grounding_returns_marked_copies_and_leaves_input_alone() -> None:
    rows = [grounded_row(markers={"other": 0.25}), invented_row(), no_call_row()]
    before = copy.deepcopy(rows)
    marked = mark_grounding(rows)
    assert rows == before  # nothing written through, markers dicts included
    assert [m["markers"][GROUNDING_MARKER] for m in marked] == [1.0, 0.0, 1.0]
    assert marked[0]["markers"]["other"] == 0.25  # other markers kept
    assert marked[0] is not rows[0] and marked[0]["markers"] is not rows[0]["markers"]
    assert marked[1]["steps"] == rows[1]["steps"]
    # Filters reach the marker.
    ignored = mark_grounding([invented_row()], ignore_keys=("order_id",))
    assert ignored[0]["markers"][GROUNDING_MARKER] == 1.0


def test_mark_grounding_rejects_non_rows() -> None:
    with pytest.raises(TypeError, match=r"rows\[1\]"):
        mark_grounding([grounded_row(), "not a row"])  # type: ignore[list-item]


# ---- real rollouts -------------------------------------------------------------------------


def test_scripted_agent_without_grounding_skill_invents_ids() -> None:
    from wai_exp.simulate.agents import ScriptedAgent
    from wai_exp.simulate.engine import simulate

    def run(skill: float) -> list[dict]:
        data = simulate(ScriptedAgent(skills={"grounding": skill}), mode="rl", budget=200, seed=0)
        return list(data.rows)

    good, bad = run(1.0), run(0.0)
    rep_good, rep_bad = grounding_report(good), grounding_report(bad)
    assert rep_good["n_rows"] == rep_bad["n_rows"] == 200
    # Only the grounding skill differs: the share of grounded rollouts falls far and the
    # careless agent's interval sits wholly below the careful agent's share.
    assert rep_bad["grounded"]["share"] < rep_good["grounded"]["share"] - 0.2
    assert rep_bad["grounded"]["ci95"][1] < rep_good["grounded"]["share"]
    assert rep_bad["n_ungrounded_rows"] > 2 * rep_good["n_ungrounded_rows"]
    # It invents order ids, which the careful agent never does.
    bad_pairs = {(e["tool"], e["key"]) for e in rep_bad["invented"]}
    good_pairs = {(e["tool"], e["key"]) for e in rep_good["invented"]}
    assert ("lookup_order", "order_id") in bad_pairs - good_pairs
    # Every value listed is one the person never said, and the marker agrees with conduct.
    marked = mark_grounding(bad, min_len=0)
    for r, m in zip(bad, marked, strict=True):
        for u in ungrounded_arguments(r):
            assert not contains_token(r["prompt"].lower(), u["value"].lower())
        assert m["markers"][GROUNDING_MARKER] == float(conduct_grade(r)["checks"]["grounded"])
    assert sum(argument_grounding(r) for r in bad) < sum(argument_grounding(r) for r in good)
