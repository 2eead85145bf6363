"""Agent specs shared by the simulate and config tests, written as a user would."""

from __future__ import annotations

#: One generic tool: with one customer name, a unique run soon redraws a situation it had.
STATUS_TOOL = {
    "type": "function",
    "function": {
        "name": "check_status",
        "description": "Check the service status",
        "parameters": {
            "type": "object",
            "properties": {"region": {"type": "string", "enum": ["eu", "us"]}},
            "required": ["region"],
        },
    },
}
