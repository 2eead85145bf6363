"""Text from a model or a tool made writable: every row must encode as UTF-8 JSON.

A model may answer with a lone surrogate escape (``"\\udd2f"`` is valid JSON, but no UTF-8
encoder writes it) or a NUL byte (which breaks line-oriented tools and some databases). Both
are replaced by U+FFFD here, at the edge, and the row records that it happened
(``text_repaired``), so one odd reply never fails a write hours into a run.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
# Lone (or any) surrogate code points and NUL: not writable as UTF-8 / not wanted in a row.
_UNWRITABLE = re.compile("[\x00\ud800-\udfff]")
#: Paths listed in ``text_repaired`` at most (the count covers them all).
MAX_PATHS = 20


def writable(value: Any, path: str = "") -> tuple[Any, list[str], int]:
    """``(copy, paths, count)``: ``value`` with every surrogate code point and NUL in its
    strings (keys included) replaced by U+FFFD, the dotted paths of the strings that changed
    and how many characters were replaced. Containers are rebuilt only where something
    changed; an untouched value comes back as it is. Never raises."""
    if isinstance(value, str):
        if value.isascii() and "\x00" not in value:
            return value, [], 0
        fixed, n = _UNWRITABLE.subn(REPLACEMENT, value)
        return (fixed, [path or "."], n) if n else (value, [], 0)
    if isinstance(value, dict):
        out, paths, total, changed = {}, [], 0, False
        for k, v in value.items():
            key, _, nk = writable(k, path) if isinstance(k, str) else (k, [], 0)
            new, p, n = writable(v, f"{path}.{key}" if path else str(key))
            out[key] = new
            if n or nk:
                changed = True
                total += n + nk
                paths.extend(p or [path or "."])
        return (out if changed else value), paths, total
    if isinstance(value, list | tuple):
        items, paths, total = [], [], 0
        for i, v in enumerate(value):
            new, p, n = writable(v, f"{path}.{i}" if path else str(i))
            items.append(new)
            paths.extend(p)
            total += n
        if not total:
            return value, [], 0
        return (items if isinstance(value, list) else tuple(items)), paths, total
    return value, [], 0


def _unclean(s: str) -> bool:
    return ("\x00" in s) if s.isascii() else _UNWRITABLE.search(s) is not None


_CONTAINERS = (dict, list, tuple)


def needs_repair(value: Any) -> bool:
    """True when ``writable`` would change ``value``: a NUL or surrogate code point in any
    string (keys included) at any depth. Never raises.

    A read-only walk with an explicit stack, a third of ``writable``'s cost: almost every
    row is clean, and only a row that is not pays for the walk that rebuilds it."""
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        v = pop()
        if isinstance(v, str):
            if _unclean(v):
                return True
        elif isinstance(v, dict):
            for k, x in v.items():
                if isinstance(k, str) and _unclean(k):
                    return True
                if isinstance(x, str):
                    if _unclean(x):
                        return True
                elif isinstance(x, _CONTAINERS):
                    push(x)
        elif isinstance(v, list | tuple):
            for x in v:
                if isinstance(x, str):
                    if _unclean(x):
                        return True
                elif isinstance(x, _CONTAINERS):
                    push(x)
    return False


def repair_row(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` made writable; when anything was replaced the row gains ``text_repaired``:
    ``{"replaced": <characters>, "paths": [<first fields>], "why": ...}``. A clean row comes
    back as it is (the same object)."""
    if not needs_repair(row):
        return row
    fixed, paths, n = writable(row)
    if not n:
        return row
    fixed["text_repaired"] = {
        "replaced": n,
        "paths": paths[:MAX_PATHS],
        "why": "lone surrogates or NUL characters in model or tool text, replaced by U+FFFD",
    }
    return fixed
