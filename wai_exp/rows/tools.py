"""Which tools change state: one rule shared by the mock world, the scripted agent and
the graders, so a call the world treats as a write is a write for the judge too."""

from __future__ import annotations

import functools
import re

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
