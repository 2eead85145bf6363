"""Remove what must never leave memory, and only that: the teacher's ``privileged`` block at
any depth, and the engine's own ``vector`` field (the raw embedding the diversity search keeps
on a row for the length of the run).

A user's data keeps every key it has: a tool argument or result named ``vector``,
``reference`` or ``rubric`` is the user's, not an answer key or an embedding of ours.
"""

from __future__ import annotations

from typing import Any

#: Keys dropped at any depth of a row before it is written anywhere.
NEVER_SHIPPED = ("privileged",)
#: The engine's in-memory fields, dropped from the row itself (top level) only.
ENGINE_ONLY = ("vector",)
#: Keys that only mean "answer key" inside a privileged block; outside one (a user's own
#: tool argument named ``reference``) they are ordinary data and survive.
PRIVILEGED_FIELDS = ("principle", "hidden_state", "reference", "rubric")


#: Values returned as they are without a call: most of a row (a third off ``scrub``).
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _drop_privileged(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: v if type(v) in _LEAVES else _drop_privileged(v)
            for k, v in value.items()
            if k not in NEVER_SHIPPED
        }
    if isinstance(value, list | tuple):
        return [v if type(v) in _LEAVES else _drop_privileged(v) for v in value]
    return value


def scrub(value: Any) -> Any:
    """Return a deep copy of ``value`` without ``privileged`` keys at any depth and, when
    ``value`` is a mapping (a row), without its top-level ``vector``.

    Lists, tuples and dicts are rebuilt; other values are returned as they are. Never raises.
    """
    if isinstance(value, dict):
        return {
            k: v if type(v) in _LEAVES else _drop_privileged(v)
            for k, v in value.items()
            if k not in NEVER_SHIPPED and k not in ENGINE_ONLY
        }
    return _drop_privileged(value)


_CONTAINERS = (dict, list, tuple)


def carries_never_shipped(value: Any) -> bool:
    """True when ``scrub`` would change ``value``: a ``privileged`` key anywhere, or a
    top-level ``vector`` of a mapping. Never raises.

    A read-only walk with an explicit stack (half the cost of ``scrub``'s rebuild): most
    rows carry neither key, and only those that do pay for the deep copy.
    """
    if isinstance(value, dict) and any(k in value for k in ENGINE_ONLY):
        return True
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
