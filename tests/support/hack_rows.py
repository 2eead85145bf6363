"""Rollout builders shared by the hack_scan and hack_scan_diff tests."""

from __future__ import annotations


def call(name: str, i: int, **args) -> list[dict]:
    """An assistant turn calling ``name`` with ``args`` (call id ``c{i}``) and its ``ok``
    tool step with an empty result."""
    c = {"id": f"c{i}", "name": name, "arguments": args}
    return [
        {"kind": "assistant", "content": "", "tool_calls": [c]},
        {
            "kind": "tool",
            "tool_call_id": c["id"],
            "name": name,
            "arguments": args,
            "result": {},
            "status": "ok",
        },
    ]


def degenerate_pool() -> list[dict]:
    """10 asks x 8 rollouts with one distinct rollout per outcome: pass = lookup + long
    reply, fail = neither (so no single feature can be named as the reason)."""
    rows = []
    for a in range(10):
        for j in range(8):
            passed = j % 2 == 0
            steps = call("lookup_order", 0, order_id="ORD-1") if passed else []
            text = "Your order ORD-1 has shipped and will arrive soon." if passed else "Sorry."
            steps = steps + [{"kind": "assistant", "content": text, "tool_calls": []}]
            rows.append(
                {
                    "scenario_id": f"s{a}",
                    "steps": steps,
                    "final_text": text,
                    "behavior_signature": "pass" if passed else "fail",
                    "reward": float(passed),
                }
            )
    return rows
