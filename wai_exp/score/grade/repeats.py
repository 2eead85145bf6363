"""Which rows repeat one trajectory: the dedupe key ``(ask, normalized reply, behavior
signature)``, shared by ``select.hygiene.dedupe_groups`` and ``diagnose.hack_scan``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from wai_exp.rows.keys import task_key


def normalized_reply(row: dict[str, Any]) -> str:
    """The final reply, lower-cased with whitespace collapsed: two replies that differ only
    in spacing or case are the same reply."""
    text = row.get("final_text") or ""
    # str.split() collapses every whitespace run; several times faster than a regex here.
    return " ".join(str(text).lower().split())


def row_signature(row: dict[str, Any]) -> str:
    """The row's ``behavior_signature``; computed with ``wai_exp.score.grade.grading`` when the row
    lacks one (simulate stamps it, so only hand-built rows pay for this)."""
    sig = row.get("behavior_signature")
    if sig:
        return str(sig)
    from wai_exp.score.grade.grading import behavior_signature  # lazy: grading is another module

    return str(behavior_signature(row))


def trajectory_keys(
    rows: Sequence[dict[str, Any]], asks: Sequence[str] | None = None
) -> tuple[list[tuple[str, str, str]], int]:
    """The dedupe key of each row: ``(ask, normalized reply, behavior signature)``.

    Two rows can only be repeats when they share an ask and a normalized reply, so the
    signature is looked up (or computed, for a row that carries none) only for rows whose
    reply collides with another row of their ask; a row with a reply of its own gets ``""``
    there, which cannot make it equal to any other row's key. ``asks`` are the rows'
    ``task_key`` values when the caller has them. Returns ``(keys, signatures_computed)``:
    how many rows lacked a ``behavior_signature`` and needed one computed.
    """
    keys, colliding, computed = collision_keys(rows, asks)
    return keys, computed


def collision_keys(
    rows: Sequence[dict[str, Any]], asks: Sequence[str] | None
) -> tuple[list[tuple[str, str, str]], list[int], int]:
    """``trajectory_keys`` plus the positions of the rows whose reply collides (in order):
    only those can repeat another row."""
    if asks is None:
        asks = [task_key(r) for r in rows]
    pairs = list(zip(asks, map(normalized_reply, rows), strict=True))
    keys = [(a, r, "") for a, r in pairs]
    counts = Counter(pairs)  # counted in C; on distinct replies nothing below runs
    if len(counts) == len(pairs):
        return keys, [], 0
    colliding = [i for i, pair in enumerate(pairs) if counts[pair] > 1]
    computed = 0
    for i in colliding:
        row = rows[i]
        if not row.get("behavior_signature"):
            computed += 1
        keys[i] = (*pairs[i], row_signature(row))
    return keys, colliding, computed


__all__ = ["collision_keys", "normalized_reply", "row_signature", "trajectory_keys"]
