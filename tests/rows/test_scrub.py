"""The scrub removes only what the spec names: ``privileged`` at any depth and the engine's
own top-level ``vector``; a user's tool arguments and results keep every key."""

from __future__ import annotations

import json

import wai_exp as wai
from wai_exp.rows.jsonl import read_rows
from wai_exp.rows.scrub import carries_never_shipped, scrub
from wai_exp.simulate.agents.scripted import ORDER_RE


def _order_id(prompt):
    """The order number in the ask, as a deployed agent would read it (None if none)."""
    m = ORDER_RE.search(prompt)
    return m.group(0) if m else None


def test_engine_vector_goes_user_vector_stays_privileged_goes_at_any_depth():
    row = {
        "prompt": "p",
        "vector": [0.3, 0.4],  # the engine's embedding of the row
        "privileged": {"reference": "answer"},
        "steps": [
            {"kind": "assistant", "tool_calls": [{"name": "embed", "arguments": {"vector": [0.1, 0.2]}}]},
            {"kind": "tool", "content": {"vector": [1, 2], "privileged": {"hidden_state": 1}}},
        ],
    }  # fmt: skip
    clean = scrub(row)
    assert "vector" not in clean and "privileged" not in clean
    assert clean["steps"][0]["tool_calls"][0]["arguments"] == {"vector": [0.1, 0.2]}
    assert clean["steps"][1]["content"] == {"vector": [1, 2]}
    assert carries_never_shipped(row) and not carries_never_shipped(clean)
    assert not carries_never_shipped(clean["steps"])  # a user's vector is not ours to drop


def vector_tool_agent(prompt, *, tools, system_prompt, world, sampling):
    """A user's agent whose own tool takes an argument named ``vector``."""
    args = {"vector": [0.1, 0.2], "order_id": _order_id(prompt)}
    result = world.execute("lookup_order", args, call_id="c1")
    steps = [
        {"kind": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "lookup_order", "arguments": args}]},
        result,
        {"kind": "assistant", "content": "Done.", "tool_calls": []},
    ]  # fmt: skip
    return {"steps": steps, "final_text": "Done.", "model_version": "vec-agent"}


def test_a_users_vector_argument_survives_in_steps_messages_and_the_file(tmp_path):
    out = tmp_path / "rows.jsonl"
    data = wai.simulate(agent=vector_tool_agent, mode="sft", budget=6, seed=0, output=str(out))
    wire = [json.loads(line) for line in out.read_text().splitlines()]
    # On the wire the call and its answer are one row-v1 tool step.
    assert all(r["steps"][0]["arguments"]["vector"] == [0.1, 0.2] for r in wire)
    written = read_rows(out)
    for rows in (data.rows, written):
        assert rows
        for r in rows:
            call = r["steps"][0]["tool_calls"][0]
            assert call["arguments"]["vector"] == [0.1, 0.2]
            [sent] = [m for m in r["messages"] if m.get("tool_calls")]
            args = sent["tool_calls"][0]["function"]["arguments"]
            args = json.loads(args) if isinstance(args, str) else args
            assert args["vector"] == [0.1, 0.2]
