"""Group trims for a grouped RL update: drop unanimous asks, drop asks outside a difficulty band.

Both trims group rows under ``task_key`` and measure each ask's pass rate over its *binary*
rewards (``score.resample.binary_reward``: 0/1 under ``reward``, else ``qwen_reward``, with a
judge verdict): partial-credit and unjudged rows ride with their ask but never decide it, the
same rule ``group_signal`` and ``pass_at`` use. Group
statistics are computed with ``np.unique`` + ``np.bincount`` so a 100k-row pool costs one
Python pass to read the rewards.

The small helpers here (``binary_rewards``, ``group_stats``) are the shared group-by of the
optimize-stage modules (select, optimize, publish_gate). ``reward_under`` and ``without_gc``,
which diagnose's hack scan shares, sit below in ``stats.resample`` and ``domain.gc_tuning``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_exp.score.stats.readers import factorize
from wai_exp.score.stats.row_facts import row_facts

#: The difficulty band every selection defaults to (rlhf-book ch. 7: the 20-80% band).
DEFAULT_BAND: tuple[float, float] = (0.2, 0.8)


def binary_rewards(rows: Sequence[dict[str, Any]]) -> np.ndarray:
    """Binary rewards as a float array (the caller's own copy), NaN where a row has no 0/1
    reward (``resample.binary_reward``). Read once per row list inside
    ``sharing_row_facts()``."""
    return row_facts(rows).binary.copy()


@dataclass
class GroupStats:
    """Per-ask statistics over binary rewards.

    ``keys[g]`` is ask g's task key, ``inv[i]`` the ask of row i, ``k[g]`` its number of binary
    rewards, ``n_pass[g]`` how many of those are 1, ``pass_rate[g]`` their mean (NaN when k is
    0), ``size[g]`` all its rows (graded or not), ``first[g]`` the index of its first row, so
    asks can be listed in the order they arrived.
    """

    keys: list[str]
    inv: np.ndarray
    k: np.ndarray
    n_pass: np.ndarray
    pass_rate: np.ndarray
    size: np.ndarray
    first: np.ndarray

    @property
    def n_groups(self) -> int:
        return len(self.keys)

    def arrival_order(self) -> np.ndarray:
        """Ask indices in the order their first row arrived."""
        return np.argsort(self.first, kind="stable")


def group_stats(
    rows: Sequence[dict[str, Any]],
    keys: Sequence[str] | None = None,
    binary: np.ndarray | None = None,
) -> GroupStats:
    """Group ``rows`` by ``task_key`` and count binary rewards per ask (see ``GroupStats``).

    ``keys`` and ``binary`` may be passed when the caller already has them (one pass per row);
    left out, they come from ``row_facts(rows)`` (read once per row list inside
    ``sharing_row_facts()``, with the keys factorized once). ``inv`` may be read-only.
    """
    n = len(rows)
    if n == 0:
        empty_i = np.zeros(0, dtype=np.int64)
        empty_f = np.zeros(0, dtype=float)
        return GroupStats([], empty_i, empty_f, empty_f, empty_f, empty_i, empty_i)
    if keys is None or binary is None:
        facts = row_facts(rows)
        if binary is None:
            binary = facts.binary
    if keys is None:
        uniq, inv = facts.uniq, facts.codes
    else:
        # factorize (a dict pass, then a sort of the distinct keys only) gives np.unique's
        # sorted keys and inverse at about half the cost on 100,000 string keys.
        uniq, inv = factorize([str(k) for k in keys])
    g = len(uniq)
    first = np.full(g, n, dtype=np.int64)
    np.minimum.at(first, inv, np.arange(n, dtype=np.int64))
    graded = np.isfinite(binary)
    k = np.bincount(inv, weights=graded.astype(float), minlength=g)
    n_pass = np.bincount(inv, weights=np.where(graded, binary, 0.0), minlength=g)
    size = np.bincount(inv, minlength=g)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(k > 0, n_pass / np.maximum(k, 1), np.nan)
    return GroupStats([str(u) for u in uniq], inv, k, n_pass, rate, size, first)


def put_calibration(
    row: dict[str, Any],
    stamp: dict[str, Any],
    always: Sequence[str] = ("policy", "model", "mean_kl"),
) -> bool:
    """Write ``stamp`` as ``row["calibration"]`` in place, unless the row carries a stamp
    that counts more repeats (``k``): then the carried pass rate stays (it was measured on
    the rows before a dedupe shrank the group), the fields the carried stamp lacks are
    filled in, and the ``always`` fields (who produced the rows) come from ``stamp`` when it
    has them. Returns True when the carried stamp was kept.
    """
    carried = row.get("calibration")
    if (
        isinstance(carried, dict)
        and isinstance(carried.get("k"), int | float)
        and carried["k"] > (stamp.get("k") or 0)
    ):
        fresh = {key: stamp[key] for key in always if stamp.get(key) is not None}
        row["calibration"] = {**stamp, **carried, **fresh, "carried": True, "n": int(carried["k"])}
        return True
    row["calibration"] = dict(stamp)
    return False


def unanimous_mask(stats: GroupStats, min_k: int = 2) -> np.ndarray:
    """Asks with k >= ``min_k`` binary rewards that all landed 0 or all landed 1."""
    return (stats.k >= min_k) & ((stats.n_pass == 0) | (stats.n_pass == stats.k))


def _check_min_k(min_k: int) -> None:
    if not isinstance(min_k, int | np.integer) or min_k < 1:
        raise ValueError(f"min_k must be an integer >= 1 (got {min_k!r}); 2 is the default.")


def check_band(lo: float, hi: float) -> tuple[float, float]:
    """Validate a difficulty band; raises ``ValueError`` naming the bad bound."""
    lo, hi = float(lo), float(hi)
    if not (0.0 <= lo <= hi <= 1.0):
        raise ValueError(
            f"the difficulty band needs 0 <= lo <= hi <= 1 (got lo={lo}, hi={hi}); "
            f"the default is {DEFAULT_BAND}."
        )
    return lo, hi


def _drop_asks(
    rows: list[dict[str, Any]], stats: GroupStats, drop: np.ndarray
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows of asks not in ``drop`` (in input order) and the counts both trims report."""
    keep_row = ~drop[stats.inv] if rows else np.zeros(0, dtype=bool)
    kept = [r for r, keep in zip(rows, keep_row, strict=True) if keep]
    report = {
        "rows_in": len(rows),
        "rows_kept": len(kept),
        "rows_dropped": len(rows) - len(kept),
        "asks_in": stats.n_groups,
        "asks_kept": int((~drop).sum()),
    }
    return kept, report


def trim_unanimous_groups(
    rows: Sequence[dict[str, Any]],
    min_k: int = 2,
    *,
    keys: Sequence[str] | None = None,
    binary: np.ndarray | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Drop asks whose k >= ``min_k`` binary rewards all landed 0 or all landed 1.

    Asks with fewer than ``min_k`` graded rollouts (unique-situation runs, or asks whose rows
    are unjudged / partial) always stay: trimming them would gut an explore dataset, and they
    carry no group gradient either way. Does not mutate ``rows``; the kept rows are the same
    dict objects, in their input order.

    Returns ``(kept_rows, report)`` with ``rows_in``, ``rows_kept``, ``rows_dropped``,
    ``asks_in``, ``asks_kept``, ``asks_dropped_all_pass``, ``asks_dropped_all_fail``,
    ``asks_short`` (fewer than ``min_k`` graded rollouts, kept) and ``min_k``. ``keys`` and
    ``binary`` are the rows' task keys and 0/1 rewards when the caller has them
    (``group_stats``). Raises ``ValueError`` when ``min_k`` is not an integer >= 1.
    """
    rows = list(rows)
    keep_row, report = unanimous_keep_mask(rows, min_k, keys=keys, binary=binary)
    kept = [r for r, keep in zip(rows, keep_row.tolist(), strict=True) if keep]
    return kept, report


def unanimous_keep_mask(
    rows: Sequence[dict[str, Any]],
    min_k: int = 2,
    *,
    keys: Sequence[str] | None = None,
    binary: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """``trim_unanimous_groups`` as a per-row keep mask and its report."""
    _check_min_k(min_k)
    stats = group_stats(rows, keys=keys, binary=binary)
    unanimous = unanimous_mask(stats, min_k)
    all_pass = unanimous & (stats.n_pass == stats.k)
    keep_row = ~unanimous[stats.inv] if len(rows) else np.zeros(0, dtype=bool)
    n_kept = int(keep_row.sum())
    report = {
        "rows_in": len(rows),
        "rows_kept": n_kept,
        "rows_dropped": len(rows) - n_kept,
        "asks_in": stats.n_groups,
        "asks_kept": int((~unanimous).sum()),
    }
    report.update(
        {
            "asks_dropped_all_pass": int(all_pass.sum()),
            "asks_dropped_all_fail": int((unanimous & ~all_pass).sum()),
            "asks_short": int((stats.k < min_k).sum()),
            "min_k": min_k,
        }
    )
    return keep_row, report


def trim_out_of_band(
    rows: Sequence[dict[str, Any]],
    lo: float = 0.2,
    hi: float = 0.8,
    min_k: int = 2,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Drop asks whose pass rate over k >= ``min_k`` binary rewards falls outside ``[lo, hi]``.

    A *difficulty* filter, nothing to do with topic: an ask the policy almost always solves
    (rate above ``hi``) or almost never solves (below ``lo``) carries little gradient per
    rollout. The edges are inclusive (a rate of exactly ``lo`` or ``hi`` stays). Unanimous
    asks (rate exactly 0 or 1) are ``trim_unanimous_groups``'s job and are left alone here;
    asks with fewer than ``min_k`` graded rollouts always stay. Does not mutate ``rows``.

    Returns ``(kept_rows, report)`` with ``rows_in``, ``rows_kept``, ``rows_dropped``,
    ``asks_in``, ``asks_kept``, ``asks_dropped_too_easy``, ``asks_dropped_too_hard``,
    ``asks_unanimous_left`` (kept for the other trim), ``asks_short``, ``band`` and ``min_k``.
    Raises ``ValueError`` for a band outside ``0 <= lo <= hi <= 1`` or a bad ``min_k``.
    """
    lo, hi = check_band(lo, hi)
    _check_min_k(min_k)
    rows = list(rows)
    stats = group_stats(rows)
    eligible = stats.k >= min_k
    unanimous = unanimous_mask(stats, min_k)
    rate = np.nan_to_num(stats.pass_rate, nan=0.5)
    # Small tolerance so 2/10 counts as inside a band that starts at 0.2.
    eps = 1e-9
    too_easy = eligible & ~unanimous & (rate > hi + eps)
    too_hard = eligible & ~unanimous & (rate < lo - eps)
    drop = too_easy | too_hard
    kept, report = _drop_asks(rows, stats, drop)
    report.update(
        {
            "asks_dropped_too_easy": int(too_easy.sum()),
            "asks_dropped_too_hard": int(too_hard.sum()),
            "asks_unanimous_left": int(unanimous.sum()),
            "asks_short": int((~eligible).sum()),
            "band": [lo, hi],
            "min_k": min_k,
        }
    )
    return kept, report
