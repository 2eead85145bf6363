"""A user's own agent for the ``world=mcp`` tests (``agent=callable
agent.target=tests.support.plain_spoken_agent:answer``): it calls the tool the ask names,
with the values the ask gives, and answers in its tool's own words ("I've created the note
for you.", "I've deleted the note for you.") whatever the tool answered. It quotes no id and
never mentions a fault, so under a fault it claims a success that did not happen, in words
that are not the support desk's."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

#: Tool-name verbs that only read: the agent shows what came back instead of claiming.
READ_VERBS = frozenset({"get", "list", "search", "find", "read", "lookup", "show", "notes"})


def _spoken(name: str) -> str:
    return name.replace("_", " ")


def _pick(message: str, tools: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The tool whose spoken name the ask holds (the longest, when several do)."""
    low = message.lower()
    named = [t["function"] for t in tools if _spoken(t["function"]["name"]) in low]
    return max(named, key=lambda f: len(f["name"])) if named else None


def _arguments(message: str, function: Mapping[str, Any]) -> dict[str, str]:
    """``{param: value}`` for each parameter the ask spells out as ``param name: value``."""
    out = {}
    for param in (function.get("parameters") or {}).get("properties") or {}:
        said = re.search(rf"\b{re.escape(_spoken(param))}: ([^;.)]+)", message, re.IGNORECASE)
        if said:
            out[param] = said.group(1).strip()
    return out


def _past(verb: str) -> str:
    return verb + ("d" if verb.endswith("e") else "ed")


def answer(message: str, *, tools: Sequence[Mapping[str, Any]], world: Any) -> str:
    function = _pick(message, tools)
    if function is None:
        return "I'm not sure which of my tools that needs."
    verb, _, noun = function["name"].partition("_")
    step = world.execute(function["name"], _arguments(message, function))
    if verb in READ_VERBS or not noun:
        return f"Here is what came back: {json.dumps(step.get('result'), default=str)}"
    return f"I've {_past(verb)} the {_spoken(noun)} for you."
