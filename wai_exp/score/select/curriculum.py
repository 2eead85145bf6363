"""Curriculum: order graded tasks easy-to-hard, hold the unready ones, retire the solved ones.

Rows group under ``task_key`` and a task's difficulty is its pass rate over *binary* rewards
(``score.resample.binary_reward``): partial-credit and unjudged rows ride with their task but
never decide it, the rule ``pass_at`` and ``group_signal`` use, so every report counts the
same tasks. Per-task counts come from one ``np.bincount`` each over the codes
``resample.factorize`` gives, and the split is a handful of boolean masks over those arrays.

The defaults are the edges of ``DEFAULT_BAND`` (0.2, 0.8), the band ``select_for_rl`` keeps:

* *solved*: pass rate above ``solved``; an all-pass task is dead gradient, so retire it;
* *not ready*: pass rate below ``floor``; no signal until the policy sometimes solves it;
* *trainable*: ``floor <= pass rate <= solved`` (edges inclusive), ordered easy to hard and
  cut into ``tiers`` equal-count buckets for a staged schedule;
* *too few*: fewer than ``min_rollouts`` graded rollouts, so no difficulty at all.

A pass rate from k rollouts is an estimate, so each task also carries its Wilson interval
(``resample.wilson_interval``): a task "solved" at 2 of 2 may well sit at 0.35.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.rows.keys import task_key
from wai_exp.score.select.trim import DEFAULT_BAND, check_band
from wai_exp.score.stats.passat import as_rows
from wai_exp.score.stats.resample import binary_reward, factorize, wilson_interval

__all__ = ["curriculum", "format_curriculum", "retire_solved"]

#: Pass rates are ratios of small integers; a threshold equal to one (0.2 = 1/5) must land on
#: the inclusive side whatever the float rounding, the tolerance ``group_signal`` uses.
_EPS = 1e-9

#: Category codes of ``_Tasks.category``.
_TOO_FEW, _NOT_READY, _TRAINABLE, _SOLVED = 0, 1, 2, 3


@dataclass(frozen=True)
class _Tasks:
    """Per-task arrays over the sorted task keys; ``row_task[i]`` is row i's task."""

    keys: tuple[str, ...]
    row_task: np.ndarray
    k: np.ndarray  # graded (binary) rollouts per task
    n_pass: np.ndarray
    rate: np.ndarray  # NaN where k == 0
    category: np.ndarray
    n_graded: int


def _check_thresholds(solved: float, floor: float, min_rollouts: int) -> tuple[float, float]:
    if isinstance(min_rollouts, bool) or not isinstance(min_rollouts, int | np.integer):
        raise ValueError(f"min_rollouts must be an integer >= 1 (got {min_rollouts!r}); default 2.")
    if min_rollouts < 1:
        raise ValueError(f"min_rollouts must be an integer >= 1 (got {min_rollouts!r}); default 2.")
    solved, floor = float(solved), float(floor)
    if not 0.0 <= floor <= solved <= 1.0:
        raise ValueError(
            f"curriculum needs 0 <= floor <= solved <= 1 (got floor={floor}, solved={solved}); "
            f"the defaults are floor={DEFAULT_BAND[0]}, solved={DEFAULT_BAND[1]}."
        )
    return solved, floor


def _tasks(
    rows: Sequence[dict[str, Any]], solved: float, floor: float, min_rollouts: int
) -> _Tasks:
    # One pass per row for its key and verdict; everything after is per-task arrays.
    values = np.fromiter(
        (np.nan if (b := binary_reward(r)) is None else b for r in rows),
        dtype=float,
        count=len(rows),
    )
    keys, row_task = factorize([task_key(r) for r in rows])
    graded = ~np.isnan(values)
    n = len(keys)
    k = np.bincount(row_task, weights=graded.astype(float), minlength=n).astype(np.int64)
    n_pass = np.bincount(row_task, weights=np.where(graded, values, 0.0), minlength=n)
    n_pass = np.rint(n_pass).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(k > 0, n_pass / np.maximum(k, 1), np.nan)
    category = np.full(n, _TRAINABLE, dtype=np.int8)
    category[rate > solved + _EPS] = _SOLVED
    category[rate < floor - _EPS] = _NOT_READY
    # Last, so a task with too few rollouts is never called solved or unready on 1 draw.
    category[k < min_rollouts] = _TOO_FEW
    return _Tasks(keys, row_task, k, n_pass, rate, category, int(graded.sum()))


def _easy_to_hard(t: _Tasks, mask: np.ndarray) -> np.ndarray:
    # Highest pass rate first; ties by task key (keys are sorted, so by index), stable.
    idx = np.flatnonzero(mask)
    return idx[np.argsort(-t.rate[idx], kind="stable")]


def _wilson_table(t: _Tasks, idx: np.ndarray) -> dict[tuple[int, int], list[float] | None]:
    # A run has few distinct (passes, rollouts) pairs, so one interval per pair, not per task.
    if idx.size == 0:
        return {}
    pairs = np.unique(np.stack([t.n_pass[idx], t.k[idx]], axis=1), axis=0)
    out: dict[tuple[int, int], list[float] | None] = {}
    for c, n in pairs.tolist():
        iv = wilson_interval(int(c), int(n))
        out[(c, n)] = None if iv is None else [round(iv.low, 4), round(iv.high, 4)]
    return out


def _entries(t: _Tasks, idx: np.ndarray, measured: bool) -> list[dict[str, Any]]:
    table = _wilson_table(t, idx) if measured else {}
    out = []
    for i, c, n in zip(idx.tolist(), t.n_pass[idx].tolist(), t.k[idx].tolist(), strict=True):
        entry: dict[str, Any] = {"task": t.keys[i], "n_pass": c, "k": n}
        if measured:
            entry["pass_rate"] = c / n
            entry["ci95"] = table[(c, n)]
        else:
            # Fewer than min_rollouts graded rollouts: no difficulty, so none is printed.
            entry["pass_rate"] = None
        out.append(entry)
    return out


def curriculum(
    rows: Sequence[dict[str, Any]],
    solved: float = 0.8,
    floor: float = 0.2,
    band: tuple[float, float] = (0.2, 0.8),
    tiers: int = 3,
    min_rollouts: int = 2,
) -> dict[str, Any]:
    """Split graded tasks into a training curriculum by measured difficulty.

    Rows group under ``task_key``; a task's pass rate counts binary rewards only (partial and
    unjudged rows are skipped, as in ``pass_at``). A task with fewer than ``min_rollouts``
    graded rollouts is *too few*; otherwise it is *solved* above ``solved``, *not ready*
    below ``floor`` and *trainable* in between (both edges inclusive). Trainable tasks are
    ordered easy to hard (highest pass rate first, ties by task key) and cut into ``tiers``
    buckets of equal count (``np.array_split``: earlier tiers take the remainder; tied pass
    rates may straddle a cut). ``band`` only counts trainable tasks inside ``[lo, hi]``.
    ``rows`` is not mutated (a list of row dicts or anything with ``.rows``).

    Returns a dict: ``n_rows``, ``n_graded``, ``n_skipped`` (rows without a 0/1 reward),
    ``n_tasks``, ``n_solved``, ``n_not_ready``, ``n_trainable``, ``n_too_few``, ``n_in_band``,
    ``in_band_share`` (of trainable tasks; None when there are none), ``thresholds``
    (``solved``, ``floor``, ``band``, ``tiers``, ``min_rollouts``), ``trainable`` (task
    entries easy to hard, each with ``tier``), ``tiers`` (``tier``, ``n_tasks``,
    ``pass_rate_max``, ``pass_rate_min``, ``tasks``), ``solved``, ``not_ready`` and
    ``too_few`` (task entries), and ``note``. A task entry is ``task``, ``n_pass``, ``k``,
    ``pass_rate`` (None for too-few tasks) and ``ci95`` (Wilson, for measured tasks).
    Raises ``ValueError`` unless ``0 <= floor <= solved <= 1``, ``0 <= lo <= hi <= 1``,
    ``tiers >= 1`` and ``min_rollouts >= 1`` (integers).
    """
    solved, floor = _check_thresholds(solved, floor, min_rollouts)
    lo, hi = check_band(*band)
    if isinstance(tiers, bool) or not isinstance(tiers, int | np.integer) or tiers < 1:
        raise ValueError(f"tiers must be an integer >= 1 (got {tiers!r}); the default is 3.")
    tiers = int(tiers)
    row_list = as_rows(rows)
    t = _tasks(row_list, solved, floor, min_rollouts)

    train_idx = _easy_to_hard(t, t.category == _TRAINABLE)
    train_rate = t.rate[train_idx]
    in_band = (train_rate >= lo - _EPS) & (train_rate <= hi + _EPS)
    n_train = int(train_idx.size)

    trainable = _entries(t, train_idx, measured=True)
    tier_list: list[dict[str, Any]] = []
    start = 0
    for number, chunk in enumerate(np.array_split(np.arange(n_train), tiers), start=1):
        part = trainable[start : start + chunk.size]
        start += chunk.size
        for entry in part:
            entry["tier"] = number
        tier_list.append(
            {
                "tier": number,
                "n_tasks": len(part),
                "pass_rate_max": part[0]["pass_rate"] if part else None,
                "pass_rate_min": part[-1]["pass_rate"] if part else None,
                "tasks": [e["task"] for e in part],
            }
        )

    notes = []
    if t.n_graded == 0:
        notes.append("no row carries a 0/1 reward: grade the rows before building a curriculum")
    elif n_train == 0:
        notes.append(
            f"no task has a pass rate in [{floor:g}, {solved:g}] over >= {min_rollouts} "
            "graded rollouts: nothing to train on at this difficulty"
        )
    elif n_train < tiers:
        empty = tiers - n_train
        last = "the last tier is" if empty == 1 else f"the last {empty} tiers are"
        notes.append(f"{counted(n_train, 'trainable task')} for {tiers} tiers: {last} empty")
    n_too_few = int((t.category == _TOO_FEW).sum())
    if n_too_few and t.n_graded:
        notes.append(
            f"{counted(n_too_few, 'task')} {'has' if n_too_few == 1 else 'have'} fewer than "
            f"{min_rollouts} graded rollouts: simulate more repeats to place "
            f"{'it' if n_too_few == 1 else 'them'}"
        )

    return {
        "n_rows": len(row_list),
        "n_graded": t.n_graded,
        "n_skipped": len(row_list) - t.n_graded,
        "n_tasks": len(t.keys),
        "n_solved": int((t.category == _SOLVED).sum()),
        "n_not_ready": int((t.category == _NOT_READY).sum()),
        "n_trainable": n_train,
        "n_too_few": n_too_few,
        "n_in_band": int(in_band.sum()),
        "in_band_share": float(in_band.mean()) if n_train else None,
        "thresholds": {
            "solved": solved,
            "floor": floor,
            "band": [lo, hi],
            "tiers": tiers,
            "min_rollouts": int(min_rollouts),
        },
        "trainable": trainable,
        "tiers": tier_list,
        "solved": _entries(t, _easy_to_hard(t, t.category == _SOLVED), measured=True),
        "not_ready": _entries(t, _easy_to_hard(t, t.category == _NOT_READY), measured=True),
        "too_few": _entries(t, np.flatnonzero(t.category == _TOO_FEW), measured=False),
        "note": "; ".join(notes),
    }


def retire_solved(
    rows: Sequence[dict[str, Any]], solved: float = 0.8, min_rollouts: int = 2
) -> list[dict[str, Any]]:
    """Return the rows with every solved task removed.

    A task is solved when it has at least ``min_rollouts`` graded (0/1) rollouts and its pass
    rate is above ``solved``, the rule ``curriculum`` uses; all of its rows go, graded or
    not. Tasks with too few rollouts to judge are kept. The kept rows are the same dict
    objects in their input order; ``rows`` is not mutated. Raises ``ValueError`` unless
    ``0 <= solved <= 1`` and ``min_rollouts`` is an integer >= 1.
    """
    solved, _ = _check_thresholds(solved, 0.0, min_rollouts)
    row_list = as_rows(rows)
    if not row_list:
        return []
    t = _tasks(row_list, solved, 0.0, min_rollouts)
    keep = t.category[t.row_task] != _SOLVED
    return [row_list[i] for i in np.flatnonzero(keep).tolist()]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def format_curriculum(report: dict[str, Any]) -> str:
    """One-line-per-fact summary of a ``curriculum`` report for a terminal.

    Raises ``ValueError`` when ``report`` is not a ``curriculum`` report (missing fields).
    """
    missing = [
        key
        for key in ("n_tasks", "n_trainable", "n_solved", "n_not_ready", "thresholds", "tiers")
        if key not in report
    ]
    if missing:
        raise ValueError(
            f"format_curriculum needs a curriculum() report; this one lacks {', '.join(missing)}"
        )
    th = report["thresholds"]
    lo, hi = th["band"]
    lines = [
        f"curriculum: {counted(report['n_tasks'], 'task')} from {counted(report['n_rows'], 'row')} "
        f"({counted(report['n_skipped'], 'row')} without a 0/1 reward skipped)",
        f"trainable: {counted(report['n_trainable'], 'task')} with pass rate in "
        f"[{th['floor']:.2f}, {th['solved']:.2f}], easy to hard in {th['tiers']} tiers",
    ]
    last = len(report["tiers"])
    for tier in report["tiers"]:
        label = " (easiest)" if tier["tier"] == 1 else " (hardest)" if tier["tier"] == last else ""
        if tier["n_tasks"]:
            span = f"pass rate {tier['pass_rate_max']:.2f} to {tier['pass_rate_min']:.2f}"
        else:
            span = "empty"
        lines.append(f"  tier {tier['tier']}{label}: {counted(tier['n_tasks'], 'task')}, {span}")
    lines += [
        f"in band [{lo:.2f}, {hi:.2f}]: {report['n_in_band']} of "
        f"{counted(report['n_trainable'], 'trainable task')} ({_pct(report['in_band_share'])})",
        f"solved (retire): {counted(report['n_solved'], 'task')} with pass rate above "
        f"{th['solved']:.2f}",
        f"not ready (hold): {counted(report['n_not_ready'], 'task')} with pass rate below "
        f"{th['floor']:.2f}",
        f"too few rollouts: {counted(report['n_too_few'], 'task')} with fewer than "
        f"{th['min_rollouts']} graded rollouts",
    ]
    if report.get("note"):
        lines.append(f"note: {report['note']}")
    return "\n".join(lines)
