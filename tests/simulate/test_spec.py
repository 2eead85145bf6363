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


def _spec_with(name: str = "pay_bill", **amount: object) -> dict:
    schema = {"type": "number", **amount}
    return {
        "system_prompt": "1. Never pay more than the open balance.",
        "tools": [
            {
                "name": name,
                "parameters": {
                    "type": "object",
                    "properties": {"amount": schema},
                    "required": ["amount"],
                },
            }
        ],
    }


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (_spec_with("pay bill"), r"tools\[0\] \(pay bill\): tool names may hold only.*'pay_bill'"),
        (_spec_with("billing.pay"), r"rename it, e.g. 'billing_pay'"),
        (_spec_with("p" * 65), r"at most 64"),
        (_spec_with(pattern="^BW-(\\d{6}$"), r"'amount' has pattern .*not a regular expression"),
        (_spec_with(enum=[]), r"'amount' has enum \[\]: an enum is a non-empty list"),
        (_spec_with(minimum=3000, maximum=2000), r"minimum 3000 and maximum 2000: no value"),
        (_spec_with(exclusiveMinimum=5, maximum=5), r"exclusiveMinimum 5 and maximum 5"),
        (_spec_with(minLength=4, maxLength=2), r"minLength 4 and maxLength 2"),
    ],
)
def test_a_spec_no_model_api_or_call_could_use_is_refused_naming_the_fix(spec, says, tmp_path):
    """A tool name OpenAI and Anthropic refuse (HTTP 400 on the first call, mid-run), a
    pattern that is no regex, an empty enum and bounds no value meets are refused as the
    spec loads, before any work, naming the tool, the argument and the fix; from a file, the
    file too."""
    with pytest.raises(ValueError, match=says):
        load_agent_spec(spec)
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=rf"agent spec {path}: tools\[0\]"):
        load_agent_spec(path)


def test_usable_bounds_patterns_and_ecma_only_escapes_still_load():
    for amount in (
        {"minimum": 1, "maximum": 1},
        {"minimum": 1, "maximum": 2000, "pattern": "^\\d+$"},
        {"pattern": "^\\p{L}+$"},  # ECMA-262's Unicode class: Python's re lacks it
        {"enum": [5, 10]},
    ):
        assert load_agent_spec(_spec_with(**amount)).tool_names == ["pay_bill"]


def test_a_spec_file_with_no_tools_is_refused_naming_the_file(tmp_path):
    """It said "pass tools=[...] or a spec with tools" to a command-line user whose
    simulate.spec file listed none, naming neither the file nor the setting."""
    from wai_exp.simulate.world_setup import resolve_spec

    path = tmp_path / "pharmacy.json"
    path.write_text(json.dumps({"system_prompt": "1. Be kind.", "tools": []}))
    with pytest.raises(ValueError, match=r"pharmacy\.json lists none; add one to its \"tools\""):
        resolve_spec(str(path), None, None)
    with pytest.raises(ValueError, match=r"tools= is empty"):
        resolve_spec(None, [], None)
