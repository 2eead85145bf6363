"""On a spec of your own, a write tool is planned on a missing record or an action already
done only when a read tool of the spec takes its identifying argument. The checklist passes
those tasks only for an agent that looked the record up and made no write call; with no read
tool to look it up with, no agent could pass them, and pass@1 would count tasks nobody can
do."""

from __future__ import annotations

from collections import Counter

from wai_exp.simulate.writer import TemplateWriter


def _fn(name: str, description: str, props: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


LOAN = {"type": "string", "pattern": "^LN-\\d{5}$"}
TOOLS = [
    _fn("lookup_loan", "Look up a loan by its id.", {"loan_id": LOAN}, ["loan_id"]),
    _fn(
        "renew_loan",
        "Renew a loan for some weeks.",
        {"loan_id": LOAN, "weeks": {"type": "integer", "minimum": 1, "maximum": 4}},
        ["loan_id", "weeks"],
    ),
    _fn(
        "place_hold",
        "Place a hold on a book for a patron.",
        {
            "isbn": {"type": "string", "pattern": "^978\\d{10}$"},
            "patron_email": {"type": "string", "format": "email"},
        },
        ["isbn", "patron_email"],
    ),
]


def _states() -> dict[str, Counter[str]]:
    writer = TemplateWriter(TOOLS, "You are a library desk assistant.", seed=0)
    out: dict[str, Counter[str]] = {}
    for sit in writer.next_batch(600):
        out.setdefault(sit.dims["tool"], Counter())[sit.dims["world_state"]] += 1
    return out


def test_a_write_no_read_tool_can_look_up_is_planned_on_existing_records_only() -> None:
    assert set(_states()["place_hold"]) == {"exists"}


def test_a_write_a_read_tool_can_look_up_keeps_every_state() -> None:
    states = _states()
    assert {"exists", "missing", "already_done"} <= set(states["renew_loan"])
    assert {"exists", "missing"} <= set(states["lookup_loan"])


def test_an_agent_that_looks_up_a_done_record_can_pass_the_task() -> None:
    from tests.support.rows import call
    from wai_exp.score.grade.checklist import task_checklist
    from wai_exp.simulate.world import RolloutWorld

    writer = TemplateWriter(TOOLS, "You are a library desk assistant.", seed=0)
    sit = next(
        s
        for s in writer.next_batch(600)
        if s.dims["tool"] == "renew_loan"
        and s.dims["world_state"] == "already_done"
        and s.dims["stance"] == "direct"
        and s.dims["tool_condition"] == "ok"
    )
    loan = sit.entities["key_value"]
    seen = RolloutWorld(sit, TOOLS, fault_rate=0.0, seed=0).execute(
        "lookup_loan", {"loan_id": loan}
    )["result"]
    assert seen["status"] == "renew loan already done"
    row = {
        "prompt": sit.phrasings[0],
        "steps": call("lookup_loan", {"loan_id": loan}, seen),
        "final_text": f"Loan {loan} was already renewed, so I haven't repeated it.",
        "scenario_dimensions": sit.dims,
        "world_changes": [],
    }
    graded = task_checklist(row)
    assert graded["reward"] == 1.0, graded["reason"]
