"""``rollout.complete_steps``: tool steps the world recorded with no assistant turn asking
for them (an agent that only called ``world.execute``) each get a turn of their own; a
model's parallel tool calls (several in one assistant turn) stay together."""

from __future__ import annotations

from wai_exp.simulate.agent_world import PARALLEL
from wai_exp.simulate.rollout import complete_steps


def tool(cid: str, name: str) -> dict:
    return {"kind": "tool", "tool_call_id": cid, "name": name, "arguments": {"n": cid}}


def test_world_execute_calls_are_one_turn_each_in_the_order_made() -> None:
    out = complete_steps([tool("a", "lookup_order"), tool("b", "issue_refund")], "Done.")
    assert [s["kind"] for s in out] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert [c["id"] for c in out[0]["tool_calls"]] == ["a"]
    assert [c["id"] for c in out[2]["tool_calls"]] == ["b"]
    assert out[2]["tool_calls"][0] == {"id": "b", "name": "issue_refund", "arguments": {"n": "b"}}
    assert out[-1] == {"kind": "assistant", "content": "Done.", "tool_calls": []}


def test_parallel_tool_calls_a_model_requested_together_are_kept_together() -> None:
    asked = {
        "kind": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "a", "name": "lookup_order", "arguments": {}},
            {"id": "b", "name": "issue_refund", "arguments": {}},
        ],
    }
    steps = [asked, tool("a", "lookup_order"), tool("b", "issue_refund")]
    out = complete_steps([dict(s) for s in steps], "")
    assert out == steps


def test_calls_made_while_the_one_before_was_unanswered_share_its_turn() -> None:
    """The world's server marks a call made before the previous one answered (asyncio.gather
    over aexecute): the two are one parallel turn, and the mark does not reach the row."""
    made = [tool("a", "lookup_order"), {**tool("b", "issue_refund"), PARALLEL: True}]
    made.append(tool("c", "lookup_order"))
    out = complete_steps(made, "")
    assert [s["kind"] for s in out] == ["assistant", "tool", "tool", "assistant", "tool"]
    assert [c["id"] for c in out[0]["tool_calls"]] == ["a", "b"]
    assert [c["id"] for c in out[3]["tool_calls"]] == ["c"]
    assert not any(PARALLEL in s for s in out)
