"""A count and its noun, agreeing: the one rule for every "N tasks" a person reads."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 task"``, ``"0 tasks"``, ``"3 tasks"``; ``plural`` for a noun that does not end
    in an added ``s`` (``counted(2, "child", "children")``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
