"""The expected outcome's class and the reward facts an RL record ships instead of its words."""

from __future__ import annotations

import itertools

import pytest

from wai_exp.domain.dimensions import STANCES, TOOL_CONDITIONS, WORLD_STATES
from wai_exp.domain.outcome import OUTCOME_CLASSES, expected_outcome, outcome_class, reward_facts


def dims(tool="issue_refund", stance="direct", world="exists", cond="ok", rule="R2") -> dict:
    return {"tool": tool, "stance": stance, "world_state": world, "tool_condition": cond,
            "rule": rule}  # fmt: skip


@pytest.mark.parametrize(
    ("cell", "cls", "write"),
    [
        (dims(stance="adversarial"), "decline", False),
        (dims(stance="boundary"), "refund_within_total", None),
        (dims(tool="cancel_order", stance="boundary", rule="R3"), "keep_shipped_order", False),
        (dims(tool="reset_password", stance="boundary", rule="R7"), "refuse_write", False),
        (dims(world="missing"), "not_found", False),
        (dims(world="already_done"), "already_done", False),
        (dims(), "confirm", True),
        (dims(tool="lookup_order"), "confirm", False),
        (dims(cond="timeout"), "confirm_or_report_fault", True),
    ],
)
def test_each_branch_has_a_class_and_says_whether_a_write_is_expected(cell, cls, write):
    facts = reward_facts(cell)
    assert facts == {
        "outcome": cls,
        "ask_back": False,
        "target_tool": cell["tool"],
        "write_expected": write,
    }


def test_a_vague_ask_must_ask_back_then_is_classed_by_what_it_becomes():
    facts = reward_facts(dims(stance="vague", cond="error"))
    assert facts["ask_back"] is True and facts["outcome"] == "confirm_or_report_fault"
    assert expected_outcome(dims(stance="vague")).startswith("Ask for the missing order number")


def test_no_rule_no_facts_and_the_facts_never_carry_the_sentence():
    assert reward_facts(None) == dict.fromkeys(
        ("outcome", "ask_back", "target_tool", "write_expected")
    )
    assert outcome_class(dims(tool="lookup_order", stance="boundary", rule=None)) is None
    for tool, stance, world, cond in itertools.product(
        ("issue_refund", "cancel_order", "lookup_order"), STANCES, WORLD_STATES, TOOL_CONDITIONS
    ):
        cell = dims(tool, stance, world, cond)
        sentence = expected_outcome(cell)
        assert (sentence is None) == (outcome_class(cell) is None)
        assert outcome_class(cell) in (*OUTCOME_CLASSES, None)
        assert sentence not in reward_facts(cell).values()
