"""Tool facts: which tools change state, and the support-desk tools' identifiers and
arguments (docs/DOMAIN.md). One rule shared by the mock world, the writer, the scripted agent
and the graders, so a call the world treats as a write is a write for the judge too."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

#: First words of a tool name that mark it read-only (``lookup_order``, ``getUser``,
#: ``search-orders``); any other tool is treated as a write, the safe side for the
#: repeated-write rule.
READ_VERBS: frozenset[str] = frozenset(
    {
        "get",
        "lookup",
        "look",
        "search",
        "find",
        "list",
        "read",
        "fetch",
        "check",
        "view",
        "query",
        "show",
        "describe",
        "count",
    }
)
_FIRST_WORD = re.compile(r"[_\-\s.]|(?<=[a-z])(?=[A-Z])")


@functools.lru_cache(maxsize=4096)
def is_write_tool(name: str) -> bool:
    """True unless the tool name's first word is a read verb. Never raises."""
    first = _FIRST_WORD.split(name.strip(), maxsplit=1)[0].lower()
    return first not in READ_VERBS


# The support-desk vocabulary (docs/DOMAIN.md). Tools outside it are answered generically.

#: The identifier each support-desk tool needs (what a vague ask leaves out).
ID_ARG = {
    "lookup_order": "order_id",
    "lookup_account": "email",
    "search_orders": "email",
    "issue_refund": "order_id",
    "cancel_order": "order_id",
    "update_shipping_address": "order_id",
    "reset_password": "email",
}
#: The arguments each support-desk tool takes (docs/DOMAIN.md).
SUPPORT_ARGS: dict[str, frozenset[str]] = {
    "lookup_order": frozenset({"order_id"}),
    "lookup_account": frozenset({"email"}),
    "search_orders": frozenset({"email"}),
    "issue_refund": frozenset({"order_id", "amount", "reason"}),
    "cancel_order": frozenset({"order_id", "reason"}),
    "update_shipping_address": frozenset({"order_id", "address"}),
    "reset_password": frozenset({"email"}),
}


def is_support_tool(fn: Mapping[str, Any]) -> bool:
    """True when a declared tool (its ``function`` dict) is the support-desk tool of its name:
    it declares that tool's arguments and requires nothing else. A user's own tool that only
    shares a name (``lookup_order(id)``) is answered generically instead."""
    name = fn.get("name")
    if name not in SUPPORT_ARGS:
        return False
    params = fn.get("parameters") or {}
    props = set(params.get("properties") or {})
    required = set(params.get("required") or ())
    return SUPPORT_ARGS[name] <= props and required <= SUPPORT_ARGS[name]
