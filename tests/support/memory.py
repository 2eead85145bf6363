"""What objects hold in memory, for tests of a row's cost."""

from __future__ import annotations

import sys


def held_bytes(objects: list[object]) -> int:
    """What ``objects`` hold in memory: every object reachable from them (through dicts,
    lists and tuples), each counted once (an object two rows share costs once, as it does
    in the process)."""
    seen: set[int] = set()
    stack: list[object] = list(objects)
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple):
            stack.extend(obj)
    return total
