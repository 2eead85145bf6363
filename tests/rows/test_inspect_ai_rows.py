"""inspect_ai's tool-call shape is read by the one reader (issue 18 section 7).

inspect_ai writes an assistant tool call as ``{"id", "function": "<tool name>",
"arguments": {...}}`` (``function`` is the name itself, not OpenAI's object) and names the
tool of a ``role: "tool"`` answer in ``function``; a failed call carries ``error: {"type",
"message"}``. The old reader took ``function`` for OpenAI's object, found no name there and
kept every call as a call to ``""``: "no rollout called a tool", and ``publish`` failed at the
last stage with "has no function.name".
"""

from __future__ import annotations

import json

import pytest

from wai_exp.rows.export import sft_records
from wai_exp.rows.load import RowsFileError, load_rows
from wai_exp.rows.reader import RowShapeError, read_steps

TOOLS = [
    {"name": "lookup_order", "description": "Look up an order",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
]  # fmt: skip


def inspect_row(error: dict | None = None) -> dict:
    answer = {"role": "tool", "content": '{"status": "shipped"}', "tool_call_id": "c1",
              "function": "lookup_order"}  # fmt: skip
    if error:
        answer = {**answer, "content": "", "error": error}
    return {
        "messages": [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": "Where is order A1?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "function": "lookup_order", "arguments": {"order_id": "A1"},
                 "type": "function"}]},
            answer,
            {"role": "assistant", "content": "Order A1 has shipped."},
        ],
        "tools": TOOLS,
        "reward": 1.0,
    }  # fmt: skip


def test_an_inspect_ai_call_keeps_its_tool_name_arguments_and_answer():
    prompt, steps = read_steps(inspect_row())
    assert prompt == "Where is order A1?"
    call = steps[0]["tool_calls"][0]
    assert (call["id"], call["name"], call["arguments"]) == (
        "c1",
        "lookup_order",
        {"order_id": "A1"},
    )
    tool = steps[1]
    assert tool["kind"] == "tool" and tool["name"] == "lookup_order"
    assert tool["result"] == {"status": "shipped"} and tool["status"] == "ok"
    assert steps[-1] == {"kind": "assistant", "content": "Order A1 has shipped.", "tool_calls": []}


@pytest.mark.parametrize(
    ("error", "status"),
    [({"type": "timeout", "message": "took too long"}, "timeout"),
     ({"type": "permission", "message": "not allowed"}, "permission_denied"),
     ({"type": "parsing", "message": "bad JSON"}, "invalid"),
     ({"type": "unknown", "message": "boom"}, "error")],
)  # fmt: skip
def test_an_inspect_ai_tool_error_is_read_as_its_status(error, status):
    _, steps = read_steps(inspect_row(error))
    assert steps[1]["status"] == status


def test_a_tool_call_with_no_name_is_refused_not_read_as_a_call_to_nothing(tmp_path):
    row = inspect_row()
    del row["messages"][2]["tool_calls"][0]["function"]
    with pytest.raises(RowShapeError, match="a tool call with no tool name"):
        read_steps(row)
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(RowsFileError, match=r"rows.jsonl:1: .*a tool call with no tool name"):
        load_rows(path)


def test_inspect_ai_rows_export_as_openai_sft_records(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(inspect_row()) + "\n")
    rows, report = load_rows(path)
    records, export = sft_records(rows)
    assert export["skipped"] == 0, export
    [call] = records[0]["messages"][2]["tool_calls"]
    assert call["function"] == {"name": "lookup_order", "arguments": '{"order_id": "A1"}'}
    assert records[0]["messages"][3]["name"] == "lookup_order"
    assert report["tools"] == ["lookup_order"]
