import json
from pathlib import Path

from wai_exp.rows import Row, messages_from_steps, row_json_schema

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "wai_exp" / "rows" / "row-v1.json"


def test_a_row_written_from_the_model_validates_against_the_shipped_row_v1():
    import jsonschema

    from wai_exp.rows.jsonl import dumps_row

    shipped = json.loads(SCHEMA_FILE.read_text())
    assert shipped == row_json_schema() and shipped["title"] == "While row, schema version 1"
    steps = [
        {"kind": "assistant", "content": "Checking.", "tool_calls": [{"id": "c1", "name": "lookup_order", "arguments": {"order_id": "ORD-1"}}]},
        {"kind": "tool", "tool_call_id": "c1", "name": "lookup_order", "arguments": {"order_id": "ORD-1"}, "result": {"status": "shipped"}, "status": "ok", "fault": None},
        {"kind": "assistant", "content": "It shipped.", "tool_calls": []},
    ]  # fmt: skip
    row = Row(prompt="Where is ORD-1?", scenario_id="s", steps=steps, final_text="It shipped.")
    line = json.loads(dumps_row(row.model_dump(exclude_none=True)))
    jsonschema.validate(line, shipped)
    assert [sorted(s) for s in line["steps"]] == [
        ["text", "turn"],
        ["arguments", "fault", "id", "result", "status", "tool", "turn"],
        ["text", "turn"],
    ]


def test_row_dump_excludes_privileged_and_keeps_extra_fields():
    row = Row(prompt="p", scenario_id="s", privileged={"reference": "k"}, quality=0.9)
    dumped = row.model_dump()
    assert "privileged" not in dumped
    assert dumped["quality"] == 0.9
    assert dumped["schema_version"] == "1"


def test_messages_rebuilt_from_steps_in_openai_shape():
    steps = [
        {
            "kind": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "name": "lookup_order", "arguments": {"order_id": "ORD-1"}}
            ],
        },
        {
            "kind": "tool",
            "tool_call_id": "c1",
            "name": "lookup_order",
            "result": {"status": "shipped"},
        },
        {"kind": "assistant", "content": "It shipped."},
    ]
    msgs = messages_from_steps("be kind", "where is ORD-1?", steps)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    call = msgs[2]["tool_calls"][0]
    assert call["type"] == "function" and json.loads(call["function"]["arguments"]) == {
        "order_id": "ORD-1"
    }
    assert json.loads(msgs[3]["content"]) == {"status": "shipped"}
