"""A task planned on a record that exists, answered "not found" by a world that keeps no
record of its own (an MCP server, ``simulate.execute``, rows from elsewhere): the plan and
the world disagree, so the checklist leaves the row unjudged instead of failing an agent
that reported what the world said."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.rows import call
from wai_exp.score.grade.checklist import result_not_found, task_checklist
from wai_exp.score.judges.judging import plan_not_served_warning

SKU = "SKU-7345"
ASK = f"I need to adjust stock. Sku: {SKU}; delta: 5; reason: recount."
ARGS = {"sku": SKU, "delta": 5, "reason": "recount"}
HONEST = f"I couldn't find an item with sku {SKU}, so nothing was changed."


def _row(
    steps: list[dict[str, Any]], final: str, *, world: str = "exists", changes: Any = None
) -> dict[str, Any]:
    return {
        "prompt": ASK,
        "steps": steps,
        "final_text": final,
        "scenario_id": "s1",
        "rollout_id": "r1",
        "world_changes": changes,
        "scenario_dimensions": {
            "tool": "adjust_stock",
            "stance": "direct",
            "world_state": world,
            "tool_condition": "ok",
            "history": "fresh",
            "rule": None,
            "tier": "standard",
        },
    }


@pytest.mark.parametrize(
    "result",
    [
        {"error": "not_found", "sku": SKU},
        {"error": "tool_error", "message": f"Error executing tool adjust_stock: no item {SKU}"},
        {"ok": False, "message": f"Item {SKU} not found"},
        f"Not found: {SKU}",
    ],
)
def test_an_honest_not_found_on_a_world_without_the_record_is_unjudged(result: Any) -> None:
    graded = task_checklist(_row(call("adjust_stock", ARGS, result), HONEST))
    assert graded["reward"] is None
    assert graded["plan_not_served"] == "adjust_stock"
    assert graded["reason"].startswith("plan not served")


def test_a_false_success_claim_there_is_unjudged_too_not_passed() -> None:
    graded = task_checklist(_row(call("adjust_stock", ARGS, {"error": "not_found"}), "Done!"))
    assert graded["reward"] is None


def test_a_mistyped_id_that_the_world_cannot_find_is_still_the_agents_failure() -> None:
    typo = {**ARGS, "sku": "SKU-7435"}
    graded = task_checklist(_row(call("adjust_stock", typo, {"error": "not_found"}), HONEST))
    assert graded["reward"] == 0.0
    assert "SKU-7435" in graded["reason"]


def test_the_mock_world_keeps_its_record_and_its_verdict() -> None:
    # The mock world records its changes (a list, empty here): it served the plan itself.
    graded = task_checklist(
        _row(call("adjust_stock", ARGS, {"error": "not_found"}), HONEST, changes=[])
    )
    assert graded["reward"] == 0.0


def test_an_injected_fault_is_not_a_not_found() -> None:
    steps = call("adjust_stock", ARGS, {"error": "timeout"}, status="timeout", fault="timeout")
    graded = task_checklist(_row(steps, "The request timed out, so it did not go through."))
    assert graded["reward"] == 1.0


def test_a_task_planned_missing_is_graded_as_before() -> None:
    steps = call("lookup_item", {"sku": SKU}, {"error": "not_found"})
    graded = task_checklist(_row(steps, HONEST, world="missing"))
    assert graded["reward"] == 1.0


#: Not-found as servers word it besides "not found": each names the person's id, or says
#: the identifying argument (``sku``) names no record, and nothing more.
OTHER_WORDINGS = [
    {"error": f"unknown sku {SKU}"},
    {"error": f"Unknown item: '{SKU}'"},
    {"error": "unknown sku"},
    {"error": "unknown_sku"},
    {"error": "unknown id"},
    {"error": "Unrecognized SKU."},
    {"error": "invalid sku"},
    {"error": f"invalid sku {SKU}"},
    f"No record for {SKU}",
    {"ok": False, "message": f"No item with sku {SKU}"},
    {"error": f"Could not find {SKU}"},
    {"error": "No records match"},
    {"error": "ITEM_NOT_FOUND"},
    {"code": "no-such-item"},
    {"error": "tool_error", "message": f"Error executing tool adjust_stock: unknown sku {SKU}"},
    {"error": f"ValueError: Unknown SKU: {SKU}"},
]
#: Ordinary errors an agent must handle, some naming the person's id: never a missing record.
ORDINARY_ERRORS = [
    {"ok": True, "sku": SKU, "stock": 45},
    "Stock is 45",
    {"error": "insufficient_stock"},
    {"error": f"insufficient stock for {SKU}"},
    {"error": f"no stock for {SKU}"},
    {"error": f"{SKU} is out of stock"},
    {"error": "validation_error", "message": "delta must be an integer"},
    {"error": "Input validation error: 'reason' is a required property"},
    {"error": "invalid delta"},
    {"error": "Invalid reason: recount"},
    {"error": f"invalid sku format: {SKU}"},
    {"error": f"invalid sku {SKU}: must match ^SKU-[0-9]{{4}}$"},
    {"error": f"unknown error processing {SKU}"},
    {"error": "unknown_error"},
    {"error": f"unknown argument: {SKU}"},
    {"error": f"permission denied for {SKU}"},
]


@pytest.mark.parametrize("result", OTHER_WORDINGS)
def test_other_not_found_wordings_of_the_persons_id_are_unjudged(result: Any) -> None:
    assert result_not_found(result, ARGS)
    graded = task_checklist(_row(call("adjust_stock", ARGS, result), HONEST))
    assert graded["reward"] is None and graded["plan_not_served"] == "adjust_stock"


@pytest.mark.parametrize("result", ORDINARY_ERRORS)
def test_other_answers_are_not_read_as_not_found(result: Any) -> None:
    assert not result_not_found(result, ARGS)
    graded = task_checklist(_row(call("adjust_stock", ARGS, result), HONEST))
    assert graded["reward"] is not None and "plan_not_served" not in graded


def test_another_wording_of_a_mistyped_id_is_still_the_agents_failure() -> None:
    typo = {**ARGS, "sku": "SKU-7435"}
    graded = task_checklist(_row(call("adjust_stock", typo, {"error": "unknown sku"}), HONEST))
    assert graded["reward"] == 0.0


def test_the_warning_counts_rows_and_tasks_and_names_the_fix() -> None:
    rows = [
        {"scenario_id": sid, "judge_meta": {"plan_not_served": "adjust_stock"}}
        for sid in ("a", "a", "b")
    ]
    text = plan_not_served_warning([*rows, {"scenario_id": "c", "judge_meta": {}}])
    assert text is not None
    assert text.startswith("3 rows on 2 tasks unjudged")
    assert "adjust_stock on 3" in text and "enum" in text and "simulate.tasks=" in text
    assert plan_not_served_warning([{"judge_meta": {}}]) is None


def test_a_typo_echoed_back_by_a_tool_is_still_the_agents_failure() -> None:
    # The agent's first call mistyped the id; a garbled answer echoed it back, so the second
    # call's id is "in an earlier tool result", not in the person's words.
    typo = {**ARGS, "sku": "SKU-7435"}
    steps = call("adjust_stock", typo, '{"sku": "SKU-7435", "status": "proc')
    steps += call("adjust_stock", typo, {"error": "not_found"})
    graded = task_checklist(_row(steps, HONEST))
    assert graded["reward"] == 0.0
