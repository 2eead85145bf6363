"""Tool steps an agent returns are its word until the world's record vouches for them:
``trajectory_of`` marks every one ``source: NOT_EXECUTED`` and puts the world's record in
place of the calls it did make through ``world.execute``."""

from __future__ import annotations

import json

from wai_exp.rows.model import NOT_EXECUTED
from wai_exp.simulate.agent_setup import trajectory_of

ARGS = {"order_id": "ORD-1"}


def transcript(result: dict) -> list[dict]:
    call = {"name": "lookup_order", "arguments": json.dumps(ARGS)}
    return [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": call}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(result)},
        {"role": "assistant", "content": "ORD-1 came to 50.0."},
    ]  # fmt: skip


def tools(out: dict) -> list[dict]:
    return [s for s in out["steps"] if s["kind"] == "tool"]


def test_a_call_the_world_never_made_is_kept_marked_as_the_agents_claim():
    # no world.execute at all (the world recorded nothing), and beside a person's answer only
    for recorded in ((), [{"kind": "user", "content": "It is ORD-1."}]):
        [step] = tools(
            trajectory_of("Refund ORD-1", transcript({"total": 50.0}), recorded=recorded)
        )
        assert step["source"] == NOT_EXECUTED and step["result"] == {"total": 50.0}


def test_a_call_the_world_made_is_the_worlds_record_unmarked():
    made = {"kind": "tool", "tool_call_id": "world-1", "name": "lookup_order",
            "arguments": ARGS, "result": {"total": 12.0}, "status": "ok", "fault": None}  # fmt: skip
    [step] = tools(trajectory_of("Refund ORD-1", transcript({"total": 50.0}), recorded=[made]))
    assert "source" not in step and step["result"] == {"total": 12.0}
    assert step["tool_call_id"] == "c1"
