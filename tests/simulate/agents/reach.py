"""What an agent can reach from the objects it is handed, and whether the answer key is
among them. Shared by the in-process context tests and the console-script one (which copies
this file next to its user module, so it imports nothing of wai_exp).

``walk`` follows what an agent's own code can follow without asking the interpreter for
objects it was not given: ``gc.get_referents`` (what the interpreter says an object holds:
``__dict__`` values, ``__slots__``, container items, closure cells, a bound method's
``__self__``, a ``functools.partial``'s function and arguments, a frame's locals), plus
``__dict__`` itself (for attribute names), ``__wrapped__`` and weak references (called).
It does not step into modules or a module's globals (the namespace every piece of code
shares, not something handed over) nor into code objects.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import types
import weakref
from collections.abc import Mapping
from typing import Any

#: Keys and attribute names that carry the answer key: the situation's grid cell, the fault
#: plan, the privileged block, the world's seeded records.
HIDDEN_NAMES = frozenset(
    {
        "dims",
        "situation",
        "entities",
        "world_state",
        "tool_condition",
        "stance",
        "rule",
        "fault_plan",
        "fault_mode",
        "privileged",
        "hidden_state",
        "reference",
        "_orders",
        "_accounts",
        "_generic_records",
    }
)
#: Types whose instances are the answer key (by name: the e2e copy imports no wai_exp).
HIDDEN_TYPES = frozenset({"RolloutWorld", "UserExecRolloutWorld", "Situation"})


class Walk:
    """The reachable objects, each with the path it was first reached by."""

    def __init__(
        self, roots: dict[str, Any], limit: int = 300_000, *, into_classes: bool = True
    ) -> None:
        self.roots = roots
        self.objects: list[Any] = []
        self.paths: dict[int, str] = {}
        self.complete = True
        shared = {id(vars(m)) for m in list(sys.modules.values()) if hasattr(m, "__dict__")}
        stack = [(obj, name) for name, obj in roots.items()]
        seen: set[int] = set()
        while stack:
            obj, path = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, types.ModuleType | types.CodeType) or id(obj) in shared:
                continue
            if not into_classes and isinstance(obj, type):
                continue
            if len(self.objects) >= limit:
                self.complete = False  # an unbounded graph is itself a finding
                break
            self.objects.append(obj)
            self.paths[id(obj)] = path
            for label, nxt in _next(obj):
                if id(nxt) not in seen:
                    stack.append((nxt, f"{path}{label}"))

    def strings(self) -> set[str]:
        return {o for o in self.objects if type(o) is str}

    def stored_strings(self) -> set[str]:
        """Strings stored as values (data dicts, instance attributes and slots) outside any
        class's namespace: where a row's short hidden words would sit."""
        data = Walk(self.roots, into_classes=False)
        return {v for o in data.objects for v in _stored_values(o) if type(v) is str}

    def hits(self, hidden_values: dict[str, Any] | None = None) -> list[str]:
        """Where the answer key was reached: a hidden type, a key or attribute name that
        carries it, a value equal to one in ``hidden_values`` (name -> value: the row's
        dims, fault plan, privileged texts)."""
        out = [] if self.complete else ["the walk did not finish (over its object limit)"]
        wanted = [
            (name, value)
            for name, value in (hidden_values or {}).items()
            if value not in (None, "", {}, [])
        ]
        # A short word ('direct', 'error', 'R7') is also a method name or a result key: it
        # counts where a value is stored, in an instance's attributes or a data dict, never
        # as a key or in a class's namespace (code every rollout shares).
        words = {v: n for n, v in wanted if isinstance(v, str) and len(v) < 24}
        wanted = [(n, v) for n, v in wanted if not (isinstance(v, str) and v in words)]
        if words:
            data = Walk(self.roots, into_classes=False)
            for obj in data.objects:
                for value in _stored_values(obj):
                    if type(value) is str and value in words:
                        out.append(
                            f"{data.paths[id(obj)]}: holds the row's {words[value]} ({value!r})"
                        )
        for obj in self.objects:
            path = self.paths[id(obj)]
            tname = type(obj).__name__
            if tname in HIDDEN_TYPES:
                out.append(f"{path}: a {tname}")
            if isinstance(obj, Mapping):
                try:
                    keys = [k for k in obj if isinstance(k, str) and k in HIDDEN_NAMES]
                except Exception:  # noqa: BLE001 - an odd mapping: its items are walked anyway
                    keys = []
                out += [f"{path}: key {k!r}" for k in keys]
            for slot in _slot_names(type(obj)):
                if slot.lstrip("_") in HIDDEN_NAMES or slot in HIDDEN_NAMES:
                    out.append(f"{path}: slot {slot!r}")
            for name, value in wanted:
                if type(obj) is type(value) and _equal(obj, value):
                    out.append(f"{path}: the row's {name} ({value!r:.80})")
        return out


def _stored_values(obj: Any) -> list[Any]:
    """The values ``obj`` stores: a dict's values, an instance's slot and ``__dict__`` values."""
    if isinstance(obj, dict):
        return list(obj.values())
    if isinstance(obj, type | types.FunctionType):
        return []
    out = []
    for slot in _slot_names(type(obj)):
        with contextlib.suppress(Exception):  # an unset slot
            out.append(object.__getattribute__(obj, slot))
    return out


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return False


def _slot_names(cls: type) -> list[str]:
    out: list[str] = []
    for klass in getattr(cls, "__mro__", ()):
        slots = klass.__dict__.get("__slots__", ())
        out += [slots] if isinstance(slots, str) else list(slots)
    return out


def _next(obj: Any) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    try:
        referents = gc.get_referents(obj)
    except Exception:  # noqa: BLE001
        referents = []
    if isinstance(obj, dict):
        for k, v in list(obj.items()):
            out.append((f"[{k!r:.40}]", v))
            out.append(("<key>", k))
    else:
        out += [(f"<{type(r).__name__}>", r) for r in referents]
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:  # noqa: BLE001 - no instance dict
        d = None
    if isinstance(d, dict):
        out.append((".__dict__", d))
    wrapped = _static(obj, "__wrapped__")
    if wrapped is not None:
        out.append((".__wrapped__", wrapped))
    if isinstance(obj, weakref.ref):
        target = obj()
        if target is not None:
            out.append(("()", target))
    if isinstance(obj, types.MethodType):
        out.append((".__self__", obj.__self__))
    if isinstance(obj, types.FunctionType) and obj.__closure__:
        out += [(f".__closure__[{i}]", c) for i, c in enumerate(obj.__closure__)]
    if isinstance(obj, types.CellType):
        with contextlib.suppress(ValueError):  # an empty cell
            out.append((".cell_contents", obj.cell_contents))
    return out


def _static(obj: Any, name: str) -> Any:
    """``obj.name`` when it is stored, not computed (no property or ``__getattr__`` runs)."""
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:  # noqa: BLE001
        return None
    return d.get(name) if isinstance(d, dict) else None
