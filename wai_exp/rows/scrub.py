"""Remove what must never leave memory: the teacher's ``privileged`` block and raw vectors."""

from __future__ import annotations

from typing import Any

#: Keys dropped at any depth of a row before it is written anywhere.
NEVER_SHIPPED = ("privileged", "vector")
#: Keys that only mean "answer key" inside a privileged block; outside one (a user's own
#: tool argument named ``reference``) they are ordinary data and survive.
PRIVILEGED_FIELDS = ("principle", "hidden_state", "reference", "rubric")


def scrub(value: Any) -> Any:
    """Return a deep copy of ``value`` without ``privileged`` or ``vector`` keys at any depth.

    Lists, tuples and dicts are rebuilt; other values are returned as they are. Never raises.
    """
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k not in NEVER_SHIPPED}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value


_CONTAINERS = (dict, list, tuple)


def carries_never_shipped(value: Any) -> bool:
    """True when a ``privileged``/``vector`` key sits anywhere in ``value``. Never raises.

    A read-only walk with an explicit stack (half the cost of ``scrub``'s rebuild): most
    rows carry neither key, and only those that do pay for the deep copy.
    """
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        v = pop()
        if isinstance(v, dict):
            for k in v:
                if k in NEVER_SHIPPED:
                    return True
            for x in v.values():
                if isinstance(x, _CONTAINERS):
                    push(x)
        elif isinstance(v, list | tuple):
            for x in v:
                if isinstance(x, _CONTAINERS):
                    push(x)
    return False
