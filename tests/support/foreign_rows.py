"""Rows in the public shapes other tools write, built by hand from those tools' formats
(never by wai-exp): a τ-bench result record and an OpenAI chat fine-tuning line."""

from __future__ import annotations

import json
from typing import Any


def tau_record(
    task: int, trial: int, reward: float, reply: str = "Your order is cancelled."
) -> dict[str, Any]:
    """One τ-bench result record: ``task_id``, ``trial``, ``reward``, the answer key under
    ``info``, the transcript under ``traj`` (tool arguments as a JSON string), ending on the
    simulated user's ``###STOP###``."""
    call = f"toolu_{task}_{trial}"
    return {
        "task_id": task,
        "trial": trial,
        "reward": reward,
        "info": {"task": {"actions": [{"name": "cancel_pending_order", "kwargs": {"x": 1}}]}},
        "traj": [
            {"role": "system", "content": "# Retail agent policy"},
            {"role": "user", "content": f"Hi! Cancel order #W{task}, please 🙏"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {
                            "name": "cancel_pending_order",
                            "arguments": json.dumps({"order_id": f"#W{task}"}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": '{"status": "cancelled"}'},
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "###STOP###"},
        ],
    }


#: The tools an OpenAI fine-tuning line declares (function-calling shape).
CANCEL_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "cancel_order",
            "description": "Cancel an order",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
]


def openai_line(order: str, arguments: object) -> dict[str, Any]:
    """One line of the OpenAI chat fine-tuning format with function calling; ``arguments``
    as given (the format says a JSON string; some SDKs log the parsed object)."""
    return {
        "messages": [
            {"role": "system", "content": "You are a retail support agent."},
            {"role": "user", "content": f"Please cancel order {order}."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "cancel_order", "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "cancelled"}'},
            {"role": "assistant", "content": f"Order {order} is cancelled. 👍"},
        ],
        "tools": CANCEL_TOOLS,
        "parallel_tool_calls": False,
    }
