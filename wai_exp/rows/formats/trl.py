"""``trl`` (the default): TRL's conversational shapes, with tool-call arguments as objects.

Hugging Face chat templates that render tool calls (Qwen2.5's and its kin) write
``tool_call.arguments | tojson``: given OpenAI's JSON string they train the model on
double-encoded JSON (``"arguments": "{\\"email\\": ...}"``). Here every ``arguments`` is the
parsed object, so the rendered text holds each call once as plain JSON. TRL's SFT and DPO
tokenizers pass the record's ``tools`` to the template, so the schemas reach the prompt.
"""

from __future__ import annotations

import json
from typing import Any

from wai_exp.rows.formats.registry import Records, TrainerFormat, register_format

#: The message-list columns of each shape.
MESSAGE_COLUMNS = ("messages", "prompt", "chosen", "rejected", "completion")


def object_arguments(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with each tool call's ``arguments`` parsed into an object."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    fixed = []
    for call in calls:
        fn = dict(call.get("function") or {})
        args = fn.get("arguments")
        fn["arguments"] = json.loads(args) if isinstance(args, str) else (args or {})
        fixed.append({**call, "function": fn})
    return {**message, "tool_calls": fixed}


def convert(shape: str, records: Records) -> Records:
    """The records with every message's tool-call arguments as objects."""
    out = []
    for record in records:
        record = dict(record)
        for column in MESSAGE_COLUMNS:
            if isinstance(record.get(column), list):
                record[column] = [object_arguments(m) for m in record[column]]
        out.append(record)
    return out


FORMAT = register_format(
    TrainerFormat(
        name="trl",
        convert=convert,
        trainers={
            "sft": "TRL SFTTrainer (conversational messages + tools; arguments as objects)",
            "preference": "TRL DPOTrainer (conversational prompt / chosen / rejected + tools)",
            "rl": "TRL GRPOTrainer (prompt + tools; reward facts under reward_model)",
        },
        templates=(
            "checked with TRL's SFT and DPO tokenization through a Qwen2.5-style tool-calling "
            "template (tests/e2e/test_trainer_formats.py); SmolLM2's own template, Phi-3.5's "
            "and Gemma 3's drop `tool_calls` and `tools`, so pass a tool-rendering "
            "`chat_template` with those models"
        ),
    )
)
