"""Rows written by hand in the shape the reference engine writes (the spec's row-v1 contract):
``{"tool", "arguments", "result"}`` / ``{"text"}`` / ``{"user"}`` steps, the grid words on
the row's own top-level fields (``stance``, ``world_state``, ``history``, ``tier``) and the
target tool and its condition in ``scenario_dimensions``. Not produced by our writer, so a
test over them checks what the graders read, not what our engine happens to write."""

from __future__ import annotations

from typing import Any


def tool(name: str, arguments: dict[str, Any], result: Any) -> dict[str, Any]:
    """One row-v1 tool step: the call and the world's answer."""
    return {"tool": name, "arguments": arguments, "result": result}


def said(text: str) -> dict[str, Any]:
    """An agent turn without a call."""
    return {"text": text}


def user(text: str) -> dict[str, Any]:
    """A turn of the person."""
    return {"user": text}


def ref_row(
    prompt: str,
    steps: list[dict[str, Any]],
    final: str,
    *,
    target: str,
    stance: str = "direct",
    world_state: str = "exists",
    tool_condition: str = "ok",
    scenario: str = "ref-0",
    index: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "schema_version": "1",
        "prompt": prompt,
        "steps": [*steps, said(final)],
        "final_text": final,
        "scenario_id": scenario,
        "rollout_index": index,
        "stance": stance,
        "world_state": world_state,
        "history": "fresh",
        "tier": "standard",
        "model_version": "ref-agent",
        "scenario_dimensions": {"tool": target, "tool_condition": tool_condition},
    }
    row.update(extra)
    return row


ORDER = {
    "order_id": "ORD-20417",
    "total": 40.0,
    "status": "delivered",
    "email": "d.okafor14@example.com",
}
REFUND_ASK = "Please refund order ORD-20417, it arrived broken."


def refund_row(
    result: Any, final: str, *, tool_condition: str = "ok", stance: str = "direct", **kw: Any
) -> dict[str, Any]:
    """A refund ask: the agent looks the order up, then refunds it; ``result`` is what the
    refund call answered."""
    steps = [
        tool("lookup_order", {"order_id": "ORD-20417"}, ORDER),
        tool(
            "issue_refund",
            {"order_id": "ORD-20417", "amount": 40.0, "reason": "arrived broken"},
            result,
        ),
    ]
    return ref_row(
        REFUND_ASK, steps, final, target="issue_refund", tool_condition=tool_condition,
        stance=stance, **kw,
    )  # fmt: skip
