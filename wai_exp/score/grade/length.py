"""Reply-length hygiene: rollouts cut at the token cap, and asks whose reply lengths are far
apart.

A grouped RL update compares the rollouts of one ask against each other. A rollout cut at
the token cap has a reward for a reply nobody finished, and an ask where one reply is many
times longer than the typical one lets a length-biased judge, or a per-token loss, weight that
ask's rollouts unevenly. ``length_report`` finds both; it changes nothing.

This is the ``hygiene`` section of the score API; it sits in grade/ rather than select/
because ``is_truncated`` is read by both ``length_report`` and ``select_for_rl``'s
truncation policy, and grade/ is the lower layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from wai_exp.rows.keys import task_key
from wai_exp.rows.reader import STEP_KINDS, read_steps
from wai_exp.score.stats.resample import factorize, wilson_interval

#: How many example rows / asks a report lists for a reader to look at.
MAX_EXAMPLES = 10
#: ``ended_by`` values that mean the rollout was cut at the token cap.
TRUNCATED_ENDINGS = frozenset({"max_tokens", "length", "token_cap", "truncated"})


def is_truncated(row: dict[str, Any]) -> bool:
    """True when the rollout was cut at the token cap: the row says ``truncated`` /
    ``overlong``, ended by a length stop, or any assistant turn is marked ``truncated``."""
    if row.get("truncated") or row.get("overlong"):
        return True
    if str(row.get("ended_by") or "") in TRUNCATED_ENDINGS:
        return True
    steps = row.get("steps")
    if type(steps) is list and steps:
        # One pass that both checks the steps are internal (so read_steps would hand back
        # this very list) and looks for a cut assistant turn: select_for_rl asks this of
        # every row, and read_steps' own check plus a second pass doubled the cost.
        hit = False
        for step in steps:
            if type(step) is not dict:
                break
            kind = step.get("kind")
            if kind.__class__ is not str or kind not in STEP_KINDS:
                break
            if kind == "assistant" and step.get("truncated"):
                hit = True
        else:
            return hit
    return any(
        step.get("kind") == "assistant" and step.get("truncated") for step in read_steps(row)[1]
    )


def _reply_chars(row: dict[str, Any]) -> int:
    text = row.get("final_text")
    return len(text) if isinstance(text, str) else 0


def group_max_median(
    codes: np.ndarray, values: np.ndarray, n_groups: int
) -> tuple[np.ndarray, ...]:
    """Per-group ``(counts, max, median)`` of ``values`` grouped by integer ``codes``.

    One ``np.lexsort`` orders the values by group, then by value; each group is then a
    contiguous sorted run, so its max is the run's last element and its median the mean of
    the run's two middle elements. A group with no rows gets count 0 and NaN max/median.
    Raises ``ValueError`` when ``codes`` and ``values`` differ in length.
    """
    if codes.shape != values.shape:
        raise ValueError(f"codes and values must align: {codes.shape} vs {values.shape}")
    counts = np.bincount(codes, minlength=n_groups)
    maxima = np.full(n_groups, np.nan)
    medians = np.full(n_groups, np.nan)
    if values.size == 0:
        return counts, maxima, medians
    ordered = values[np.lexsort((values, codes))].astype(float)
    starts = np.cumsum(counts) - counts
    has = counts > 0
    s, c = starts[has], counts[has]
    maxima[has] = ordered[s + c - 1]
    medians[has] = 0.5 * (ordered[s + (c - 1) // 2] + ordered[s + c // 2])
    return counts, maxima, medians


def _wide_examples(
    uniq: Sequence[Any],
    counts: np.ndarray,
    medians: np.ndarray,
    maxima: np.ndarray,
    spread: np.ndarray,
    unbounded: np.ndarray,
    wide_idx: np.ndarray,
) -> list[dict[str, Any]]:
    return [
        {
            "task_key": uniq[i],
            "n": int(counts[i]),
            "median_chars": float(medians[i]),
            "max_chars": int(maxima[i]),
            "spread": None if unbounded[i] else float(spread[i]),
        }
        for i in wide_idx[:MAX_EXAMPLES].tolist()
    ]


def _cut_examples(
    rows: list[dict[str, Any]], keys: list[Any], lengths: np.ndarray, cut_idx: np.ndarray
) -> list[dict[str, Any]]:
    return [
        {
            "task_key": keys[j],
            "scenario_id": rows[j].get("scenario_id"),
            "rollout_index": rows[j].get("rollout_index"),
            "rollout_id": rows[j].get("rollout_id"),
            "ended_by": rows[j].get("ended_by"),
            "reply_chars": int(lengths[j]),
        }
        for j in cut_idx[:MAX_EXAMPLES].tolist()
    ]


def _length_findings(
    n: int,
    n_truncated: int,
    asks_with_truncated: int,
    n_measured: int,
    n_wide: int,
    max_spread: float,
    largest: float | None,
) -> tuple[list[str], str]:
    """The warnings (cut rollouts, wide asks) and the one-line summary."""
    warnings: list[str] = []
    if n_truncated:
        warnings.append(
            f"{n_truncated} of {n} rollouts were cut at the token cap (in "
            f"{asks_with_truncated} asks); their reward scores an unfinished reply. Decide what "
            "happens to them: select_for_rl(truncated='drop' | 'keep' | 'penalize')."
        )
    if n_wide:
        warnings.append(
            f"{n_wide} of {n_measured} asks have a reply more than {max_spread:g}x their median "
            "length; a length-biased judge or a per-token loss weights those rollouts unevenly."
        )
    if n == 0:
        summary = "No rows: nothing measured."
    else:
        spread_part = (
            f"{n_wide} of {n_measured} asks with 2+ rows have max/median reply length above "
            f"{max_spread:g}"
            + (f" (largest finite spread {largest:.2f})" if largest is not None else "")
            if n_measured
            else "no ask has 2+ rows, so reply-length spread is not measured"
        )
        summary = f"{n_truncated} of {n} rollouts truncated; {spread_part}."
    return warnings, summary


def length_report(rows: Sequence[dict[str, Any]], max_spread: float = 4.0) -> dict[str, Any]:
    """Truncated rollouts and asks whose reply lengths are far apart.

    Reply length is the number of characters of ``final_text`` (a row without one counts 0).
    Asks are ``task_key`` groups. An ask's *spread* is max / median reply length over its
    rows; it is measured for asks with at least two rows. An ask is *wide* when its spread is
    above ``max_spread``, or when its median reply is empty and some reply is not (the ratio is
    unbounded; ``spread`` is then ``None``). An ask whose replies are all empty has spread 1.
    Truncated rows (a ``truncated``/``overlong`` flag on the row, an ``ended_by`` length stop,
    or an assistant step with ``truncated=True``; ``is_truncated``) are counted and
    stay in the spread, since a cut reply is usually the long one. ``rows`` is not mutated.

    Returns ``n_rows``; ``n_truncated``, ``truncated_share`` (``None`` for no rows) with
    ``truncated_ci`` (95% Wilson ``[lo, hi]``), ``truncated`` (up to ``MAX_EXAMPLES`` rows:
    ``task_key``, ``scenario_id``, ``rollout_index``, ``rollout_id``, ``ended_by``,
    ``reply_chars``) and ``asks_with_truncated``; ``n_asks``, ``n_asks_measured`` (asks with
    two or more rows), ``n_wide``, ``wide_share`` (of measured asks, ``None`` when none) with
    ``wide_ci``, ``wide_asks`` (up to ``MAX_EXAMPLES``, widest first: ``task_key``, ``n``,
    ``median_chars``, ``max_chars``, ``spread``), ``largest_spread`` (``None`` when no ask was
    measured), ``max_spread``, ``unit`` (``"chars"``), ``warnings`` and ``summary``.

    Raises ``ValueError`` when ``max_spread`` is not a finite number >= 1 (max / median is
    never below 1), ``TypeError`` when a row is not a dict.
    """
    if (
        isinstance(max_spread, bool)
        or not isinstance(max_spread, int | float)
        or not math.isfinite(max_spread)
        or max_spread < 1
    ):
        raise ValueError(
            f"max_spread must be a finite number >= 1 (got {max_spread!r}): it is max / median "
            "reply length within one ask, which is never below 1; the default is 4.0"
        )
    rows = list(rows)
    for row in rows:
        if not isinstance(row, dict):
            raise TypeError(f"length_report: every row must be a dict (got {type(row).__name__})")
    n = len(rows)
    keys = [task_key(r) for r in rows]
    lengths = np.fromiter((_reply_chars(r) for r in rows), dtype=np.int64, count=n)
    cut = np.fromiter((is_truncated(r) for r in rows), dtype=bool, count=n)

    uniq, codes = factorize(keys)
    n_asks = len(uniq)
    counts, maxima, medians = group_max_median(codes, lengths, n_asks)
    measured = counts >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(medians > 0, maxima / medians, np.nan)
    spread[measured & (maxima == 0)] = 1.0  # every reply empty: identical lengths
    unbounded = measured & (medians == 0) & (maxima > 0)
    wide = measured & ((spread > max_spread) | unbounded)

    # Widest first; an unbounded spread ranks above every finite one, ties by key order.
    rank = np.where(unbounded, np.inf, np.nan_to_num(spread, nan=-1.0))
    wide_idx = np.flatnonzero(wide)
    wide_idx = wide_idx[np.argsort(-rank[wide_idx], kind="stable")]
    wide_asks = _wide_examples(uniq, counts, medians, maxima, spread, unbounded, wide_idx)
    truncated = _cut_examples(rows, keys, lengths, np.flatnonzero(cut))

    n_truncated = int(cut.sum())
    n_measured = int(measured.sum())
    n_wide = int(wide.sum())
    t_ci = wilson_interval(n_truncated, n)
    w_ci = wilson_interval(n_wide, n_measured)
    finite = spread[measured & ~unbounded]
    largest = float(finite.max()) if finite.size else None
    asks_with_truncated = int(np.unique(codes[cut]).size)

    warnings, summary = _length_findings(
        n, n_truncated, asks_with_truncated, n_measured, n_wide, max_spread, largest
    )

    return {
        "n_rows": n,
        "n_truncated": n_truncated,
        "truncated_share": n_truncated / n if n else None,
        "truncated_ci": t_ci.as_list() if t_ci is not None else None,
        "truncated": truncated,
        "asks_with_truncated": asks_with_truncated,
        "n_asks": n_asks,
        "n_asks_measured": n_measured,
        "n_wide": n_wide,
        "wide_share": n_wide / n_measured if n_measured else None,
        "wide_ci": w_ci.as_list() if w_ci is not None else None,
        "wide_asks": wide_asks,
        "largest_spread": largest,
        "max_spread": float(max_spread),
        "unit": "chars",
        "warnings": warnings,
        "summary": summary,
    }
