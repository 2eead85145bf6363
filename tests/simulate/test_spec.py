"""Agent specs: the shipped support-desk spec and load_agent_spec's shapes and errors."""

from __future__ import annotations

import json

import pytest

from wai_exp.simulate.spec import AgentSpec, builtin_specs, load_agent_spec, normalize_tools
from wai_exp.simulate.writer import parse_rules

DOMAIN_TOOLS = {
    "lookup_order": ["order_id"],
    "lookup_account": ["email"],
    "search_orders": ["email"],
    "issue_refund": ["order_id", "amount", "reason"],
    "cancel_order": ["order_id", "reason"],
    "update_shipping_address": ["order_id", "address"],
    "reset_password": ["email"],
}


def test_default_spec_is_the_support_desk_of_domain_md():
    spec = load_agent_spec()
    assert spec.name == "support_desk"
    assert "support_desk" in builtin_specs()
    got = {t["function"]["name"]: t["function"]["parameters"]["required"] for t in spec.tools}
    assert got == DOMAIN_TOOLS
    for t in spec.tools:
        assert t["type"] == "function"
        assert t["function"]["description"]
    amount = next(t for t in spec.tools if t["function"]["name"] == "issue_refund")
    assert amount["function"]["parameters"]["properties"]["amount"]["type"] == "number"
    rules = parse_rules(spec.system_prompt)
    assert [r for r, _ in rules] == [f"R{i}" for i in range(1, 8)]
    assert "lookup_order" in rules[0][1] and "total" in rules[1][1] and "shipped" in rules[2][1]


def test_bare_function_dicts_are_normalised_to_openai_shape():
    bare = {
        "name": "get_weather",
        "description": "Weather.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
    full = {"type": "function", "function": dict(bare)}
    assert normalize_tools([bare]) == normalize_tools([full])
    spec = load_agent_spec({"name": "w", "system_prompt": "Be nice.", "tools": [bare]})
    assert spec.tools[0]["type"] == "function"
    assert spec.tool_names == ["get_weather"]


def test_a_tool_without_parameters_gets_an_empty_object_schema():
    (tool,) = normalize_tools([{"name": "ping"}])
    assert tool["function"]["parameters"] == {"type": "object", "properties": {}, "required": []}


def test_load_from_a_json_file(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"system_prompt": "1. Be kind.", "tools": [{"name": "ping"}]}))
    spec = load_agent_spec(path)
    assert spec.name == "mine"  # the file stem when the spec names itself nothing
    assert isinstance(spec, AgentSpec)


def test_missing_spec_names_the_builtins():
    with pytest.raises(FileNotFoundError, match="support_desk"):
        load_agent_spec("no_such_spec")


def test_bad_tool_shape_names_the_tool_and_the_fix():
    with pytest.raises(ValueError, match=r"tools\[1\].*'name'.*type.*function"):
        load_agent_spec(
            {"system_prompt": "x", "tools": [{"name": "a"}, {"description": "no name"}]}
        )
    with pytest.raises(ValueError, match="required argument 'b' is not in 'properties'"):
        normalize_tools(
            [{"name": "a", "parameters": {"type": "object", "properties": {}, "required": ["b"]}}]
        )
    with pytest.raises(ValueError, match="declared twice"):
        normalize_tools([{"name": "a"}, {"name": "a"}])
    with pytest.raises(ValueError, match="unknown type 'str'"):
        normalize_tools(
            [{"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "str"}}}}]
        )


def test_bad_spec_file_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_agent_spec(bad)
    with pytest.raises(ValueError, match="missing \\['tools'\\]"):
        load_agent_spec({"system_prompt": "x"})
    with pytest.raises(ValueError, match="unknown keys \\['tool'\\]"):
        load_agent_spec({"system_prompt": "x", "tools": [], "tool": []})
