"""Which rows repeat one trajectory: the dedupe key ``(ask, normalized reply, behavior
signature)``, shared by ``select.hygiene.dedupe_groups`` and ``diagnose.hack_scan``.
"""

from __future__ import annotations

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
    if asks is None:
        asks = [task_key(r) for r in rows]
    replies = [normalized_reply(r) for r in rows]
    pairs = list(zip(asks, replies, strict=True))
    seen: dict[tuple[str, str], int] = {}
    for pair in pairs:
        seen[pair] = seen.get(pair, 0) + 1
    keys: list[tuple[str, str, str]] = []
    computed = 0
    for row, pair in zip(rows, pairs, strict=True):
        if seen[pair] < 2:
            keys.append((pair[0], pair[1], ""))
            continue
        if not row.get("behavior_signature"):
            computed += 1
        keys.append((pair[0], pair[1], row_signature(row)))
    return keys, computed


__all__ = ["normalized_reply", "row_signature", "trajectory_keys"]
