"""Per-row facts several checks read (task key, 0/1 reward, a numeric reward), read once per
row list and shared by every check of one top-level call.

``publish_gate`` runs ``group_signal``, ``hack_scan``, ``calibrate`` and ``pass_at`` over the
same 100,000 rows; each used to key every row, read every reward and factorize the keys
again. Inside ``sharing_row_facts()`` (entered by those top-level calls), ``row_facts(rows)``
returns one ``RowFacts`` per row list (the same row objects in the same order), whose facts
are read on first use and kept until the outermost scope ends. Outside a scope each call
reads its own, so a caller that edits rows between two calls never sees stale facts.

The facts are derived from the rows and nothing else, so sharing them changes no result.
Arrays handed out are read-only: a caller that needs to change one takes a copy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from wai_exp.rows.keys import task_key
from wai_exp.score.stats.readers import binary_reward, factorize, reward_under


class _Scope:
    """One ``sharing_row_facts()`` block: facts by row identities, and the row lists
    ``as_rows`` built and checked in it (held, so their ids stay theirs)."""

    def __init__(self) -> None:
        self.by_rows: dict[tuple[int, ...], RowFacts] = {}
        self.by_list: dict[int, tuple[list[Any], RowFacts | None]] = {}


_SCOPE: ContextVar[_Scope | None] = ContextVar("wai_exp_row_facts", default=None)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


class RowFacts:
    """What one row list says, read on first use: ``keys`` (``task_key`` per row),
    ``codes`` / ``uniq`` (``factorize(keys)``: sorted distinct keys and each row's position
    among them), ``binary`` (``binary_reward`` per row, NaN where None) and
    ``reward_under(key)`` (``resample.reward_under`` per row, NaN where None)."""

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.rows = rows
        self._reward: dict[str, np.ndarray] = {}

    @functools.cached_property
    def _keys_and_binary(self) -> tuple[list[str], np.ndarray]:
        # Read together, in one pass: every group-by asks for both, and on 100,000 rows a
        # pass costs mostly the fetching of each row dict, not the reading.
        keys: list[str] = []
        binary: list[float] = []
        add_key, add_bin = keys.append, binary.append
        nan = math.nan
        for row in self.rows:
            add_key(task_key(row))
            b = binary_reward(row)
            add_bin(nan if b is None else b)
        return keys, _frozen(np.array(binary, dtype=float).reshape(len(keys)))

    @property
    def keys(self) -> list[str]:
        return self._keys_and_binary[0]

    @functools.cached_property
    def _factorized(self) -> tuple[tuple[str, ...], np.ndarray]:
        uniq, codes = factorize(self.keys)
        return uniq, _frozen(codes)

    @property
    def uniq(self) -> tuple[str, ...]:
        return self._factorized[0]

    @property
    def codes(self) -> np.ndarray:
        return self._factorized[1]

    @property
    def binary(self) -> np.ndarray:
        return self._keys_and_binary[1]

    def reward_under(self, key: str = "reward") -> np.ndarray:
        if key not in self._reward:
            self._reward[key] = _frozen(
                np.fromiter(
                    (np.nan if (v := reward_under(r, key)) is None else v for r in self.rows),
                    dtype=float,
                    count=len(self.rows),
                )
            )
        return self._reward[key]

    def subgroups(self, mask: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
        """``factorize([keys[i] for i in flatnonzero(mask)])`` from the codes already held:
        the distinct keys of the masked rows (sorted) and each masked row's position."""
        uniq, codes = self._factorized
        sub = codes[mask]
        present = np.flatnonzero(np.bincount(sub, minlength=len(uniq)))
        remap = np.empty(len(uniq), dtype=np.intp)
        remap[present] = np.arange(len(present), dtype=np.intp)
        return tuple(uniq[i] for i in present.tolist()), remap[sub]


@contextmanager
def sharing_row_facts() -> Iterator[None]:
    """Share ``row_facts`` across every check run inside the block (nested blocks join the
    outermost one, which drops the facts when it ends)."""
    if _SCOPE.get() is not None:
        yield
        return
    token = _SCOPE.set(_Scope())
    try:
        yield
    finally:
        _SCOPE.reset(token)


def shares_row_facts(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: run ``fn`` inside ``sharing_row_facts()``. Keeps the signature."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with sharing_row_facts():
            return fn(*args, **kwargs)

    return wrapper


def row_facts(rows: Sequence[Mapping[str, Any]]) -> RowFacts:
    """The ``RowFacts`` of ``rows``: shared with every earlier call in the current
    ``sharing_row_facts()`` scope that passed the same row objects in the same order (the
    scope holds the rows, so their ids stay theirs), else fresh."""
    scope = _SCOPE.get()
    if scope is None:
        return RowFacts(rows)
    held = scope.by_list.get(id(rows))
    if held is not None and held[0] is rows and held[1] is not None:
        return held[1]
    ident = tuple(map(id, rows))
    facts = scope.by_rows.get(ident)
    if facts is None:
        facts = scope.by_rows[ident] = RowFacts(rows)
    if held is not None and held[0] is rows:
        scope.by_list[id(rows)] = (held[0], facts)
    return facts


def checked_row_list(source: Any) -> list[Any] | None:
    """``source`` itself when it is a row list ``as_rows`` already built and checked in the
    current ``sharing_row_facts()`` scope (the score functions never change such a list in
    place), else None: a nested check of the same rows is not paid again."""
    scope = _SCOPE.get()
    if scope is None or type(source) is not list:
        return None
    held = scope.by_list.get(id(source))
    return source if held is not None and held[0] is source else None


def hold_checked(row_list: list[Any]) -> None:
    """Record ``row_list`` (built and checked by ``as_rows``) in the current scope, if any."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.by_list.setdefault(id(row_list), (row_list, None))


def as_rows(source: Any) -> list[dict[str, Any]]:
    """The row list behind ``source``: a sequence of row dicts, or anything with ``.rows``.

    ``.rows`` may be a list or a method returning one (``SimulationData.rows()``). Raises
    ``TypeError`` naming what was passed when neither applies, and naming the position of the
    first element that is not a row dict (``rows[3] is a int, not a row dict``). Inside a
    ``sharing_row_facts()`` scope (one ``publish_gate``, ``select_for_rl``, ...) a list
    ``as_rows`` already built and checked there comes back as is, not checked again.
    Typed as the contract says, row dicts: another ``Mapping`` passes the check for the
    functions that only read, and a function that stamps rows in place needs dicts.
    """
    held = checked_row_list(source)
    if held is not None:
        return held
    if isinstance(source, (list, tuple)):
        row_list = list(source)
    else:
        inner = getattr(source, "rows", None)
        if inner is not None:
            if not isinstance(inner, (list, tuple)) and callable(inner):
                inner = inner()
            row_list = list(inner)
        elif isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
            row_list = list(source)
        else:
            raise TypeError(
                "expected a list of row dicts or an object with .rows (SimulationData, "
                f"ScoredData); got {type(source).__name__}"
            )
    # The common case in one C-level pass (every row a plain dict); only otherwise the
    # per-row test, slow against the Mapping ABC on 100k rows, finds the first bad one.
    kinds = set(map(type, row_list))
    if kinds and kinds != {dict}:
        for i, row in enumerate(row_list):
            if type(row) is not dict and not isinstance(row, Mapping):
                raise TypeError(
                    f"rows[{i}] is a {type(row).__name__}, not a row dict; every row must be "
                    "a dict (a JSONL file's lines parsed with json.loads, or SimulationData.rows)"
                )
    hold_checked(row_list)
    return row_list


def row_dicts(source: Any) -> list[dict[str, Any]]:
    """``as_rows(source)`` (kept for callers that name the check): raises ``TypeError``
    naming the first element (by index) that is not a row dict."""
    return as_rows(source)


__all__ = [
    "RowFacts",
    "as_rows",
    "checked_row_list",
    "hold_checked",
    "row_dicts",
    "row_facts",
    "shares_row_facts",
    "sharing_row_facts",
]
