"""The limits a tool's schema declares (``maximum``, ``pattern``, lengths, ``format``) reach
the schema TRL renders from an ``environment_factory`` method: its docstring says them in
the parameter's description, since ``get_json_schema`` has no field for them. Without them
a boundary task ("make an exception on the weeks") is graded on a limit the policy never
sees."""

from __future__ import annotations

from typing import Any

from tests.support.training import require_training_stack
from wai_exp.env.trl import environment_factory

require_training_stack("transformers")

RENEW = {
    "type": "function",
    "function": {
        "name": "renew_loan",
        "description": "Renew a loan for some weeks.",
        "parameters": {
            "type": "object",
            "properties": {
                "loan_id": {"type": "string", "pattern": "^LN-\\d{5}$"},
                "weeks": {"type": "integer", "minimum": 1, "maximum": 4},
                "note": {"type": "string", "description": "Why.", "maxLength": 80},
                "channel": {"type": "string", "enum": ["desk", "web"], "format": "word"},
            },
            "required": ["loan_id", "weeks"],
        },
    },
}


def _rendered_params() -> dict[str, Any]:
    from transformers.utils import get_json_schema

    env = environment_factory([{"tools": [RENEW]}])()
    return get_json_schema(env.renew_loan)["function"]["parameters"]["properties"]


def test_each_declared_limit_is_in_the_rendered_description() -> None:
    props = _rendered_params()
    assert props["weeks"]["description"] == "weeks (at least 1; at most 4)"
    assert props["loan_id"]["description"] == "loan_id (matching ^LN-\\d{5}$)"
    assert props["note"]["description"] == "Why. (at most 80 characters)"


def test_an_enum_is_still_read_back_as_an_enum() -> None:
    channel = _rendered_params()["channel"]
    assert channel["enum"] == ["desk", "web"]
    assert channel["description"] == "channel (format word)"
