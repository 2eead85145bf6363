"""Row-building helpers shared by the scoring tests."""

from __future__ import annotations

from itertools import count
from typing import Any

# One counter for every test module: call ids stay unique however tests are combined.
_ids = count()


def call(
    name: str,
    args: dict[str, Any],
    result: Any = None,
    status: str = "ok",
    fault: str | None = None,
    content: str = "",
) -> list[dict[str, Any]]:
    """An assistant turn making one call (with ``content`` as its text), and the tool step
    that answered it with ``result``, ``status`` and ``fault``."""
    cid = f"c{next(_ids)}"
    return [
        {
            "kind": "assistant",
            "content": content,
            "tool_calls": [{"id": cid, "name": name, "arguments": args}],
        },
        {
            "kind": "tool",
            "tool_call_id": cid,
            "name": name,
            "arguments": args,
            "result": result,
            "status": status,
            "fault": fault,
        },
    ]
