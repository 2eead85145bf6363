"""A demonstration that calls a tool its own ``tools`` lacks is refused by the gate and
left out of the SFT export, counted (issue 18 section 7). Before, both passed it: the
trainer was taught to call a tool the model is never given."""

from __future__ import annotations

import pytest

from wai_exp.rows.export import sft_records
from wai_exp.score.select.publish_gate import PublishGateError, publish_gate

TOOLS = [{"type": "function", "function": {"name": "lookup_order", "parameters": {}}}]


def row(i: int, tool: str, mode: str = "sft") -> dict:
    call = {"id": f"c{i}", "type": "function",
            "function": {"name": tool, "arguments": '{"order_id": "A1"}'}}  # fmt: skip
    return {
        "rollout_id": f"r{i}",
        "mode": mode,
        "prompt": f"Where is order A{i}?",
        "messages": [
            {"role": "user", "content": f"Where is order A{i}?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": '{"status": "shipped"}'},
            {"role": "assistant", "content": "It has shipped."},
        ],
        "tools": TOOLS,
        "reward": 1.0,
    }


def test_the_gate_refuses_sft_rows_calling_undeclared_tools_with_the_count():
    rows = [row(i, "lookup_order") for i in range(6)] + [row(6, "refund_order"), row(7, "wipe_db")]
    with pytest.raises(PublishGateError) as err:
        publish_gate(rows, mode="sft")
    report = err.value.report
    assert report["checks"]["tools_declared"] is False
    assert report["n_undeclared_tool_calls"] == 2
    assert "2 of 8 rows that declare their tools call a tool absent from them" in str(err.value)
    assert "'r6' calls ['refund_order']" in str(err.value)


def test_the_gate_passes_declared_calls_and_leaves_rl_calls_to_the_reward():
    ok = publish_gate([row(i, "lookup_order") for i in range(4)], mode="sft")
    assert ok["verdict"] == "passed" and ok["checks"]["tools_declared"] is True
    # RL: calling a tool the prompt lacks is the policy's mistake; its reward says so.
    rl = [row(i, "lookup_order", "rl") | {"prompt": "same ask", "reward": float(i % 2)}
          for i in range(4)] + [row(9, "refund_order", "rl") | {"prompt": "same ask", "reward": 0.0}]  # fmt: skip
    for r in rl:
        r["messages"][0]["content"] = "same ask"
    report = publish_gate(rl, mode="rl")
    assert report["checks"]["tools_declared"] is None
    assert "tools_declared" in report["checks_not_run"]


def test_sft_records_leave_out_undeclared_calls_counted():
    records, report = sft_records([row(0, "lookup_order"), row(1, "refund_order")])
    assert [r["rollout_id"] for r in records] == ["r0"]
    assert report["skipped"] == 1 and report["undeclared_tools"] == 1
    assert "calls ['refund_order'] absent from the record's tools" in report["skip_reasons"][0]
