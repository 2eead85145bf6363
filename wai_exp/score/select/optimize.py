"""Concentrate a big graded batch into the dataset post-training needs.

* ``filter_rl_rows`` splits off junk (``is_incomplete_junk``): rows no trainer should see.
* ``group_signal`` measures within-ask contrast: how many asks mix passes and fails.
* ``next_round`` picks the next round's prompt set from the current policy's pass rates.
* ``optimize`` is the one call after grading: RL selection (``select_for_rl``) or SFT
  selection (``select_for_sft``) by mode, with the result optionally written as JSONL.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wai_exp.domain.gc_tuning import without_gc
from wai_exp.rows.keys import task_key
from wai_exp.rows.reader import read_steps
from wai_exp.score.select.trim import (
    DEFAULT_BAND,
    check_band,
    group_stats,
    unanimous_mask,
)
from wai_exp.score.stats.readers import reward_under
from wai_exp.score.stats.row_facts import as_rows, checked_row_list


def _has_tool_call(row: dict[str, Any]) -> bool:
    for step in read_steps(row)[1]:
        kind = step.get("kind")
        if kind == "tool" or (kind == "assistant" and step.get("tool_calls")):
            return True
    return False


def is_incomplete_junk(row: dict[str, Any], has_tools: bool = True) -> str | None:
    """Why ``row`` is junk no trainer should see, or None when it is a usable rollout.

    The rule, first match wins:

    * ``"error"``: the rollout was lost (``row["error"]`` is set, e.g. an HTTP failure).
    * ``"empty"``: the final reply is empty and the agent made no tool call. With
      ``has_tools=False`` the agent has no tools to act through, so an empty reply is junk
      whatever the steps hold.
    * ``"unjudged"``: no numeric reward (the judge errored, timed out or abstained). An
      unjudged row is not a failure, so it must not enter a dataset as one.
    """
    if row.get("error"):
        return "error"
    if not str(row.get("final_text") or "").strip() and (not has_tools or not _has_tool_call(row)):
        return "empty"
    if reward_under(row) is None:
        return "unjudged"
    return None


@without_gc
def filter_rl_rows(
    rows: Sequence[dict[str, Any]], has_tools: bool = True
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Split keep/drop by ``is_incomplete_junk``. Does not mutate ``rows``.

    Returns ``(kept_rows, report)``: the kept rows are the same dicts in input order; the
    report has ``rows_in``, ``rows_kept``, ``rows_dropped`` and ``dropped`` (count per reason:
    ``error``, ``empty``, ``unjudged``).
    """
    rows = list(rows)
    keep, report = junk_positions(rows, has_tools=has_tools)
    return [rows[i] for i in keep], report


def junk_positions(
    rows: Sequence[dict[str, Any]], has_tools: bool = True
) -> tuple[list[int], dict[str, Any]]:
    """``filter_rl_rows`` as the positions of the kept rows (in order) and its report."""
    keep: list[int] = []
    reasons: Counter[str] = Counter()
    for i, row in enumerate(rows):
        why = is_incomplete_junk(row, has_tools=has_tools)
        if why is None:
            keep.append(i)
        else:
            reasons[why] += 1
    n = len(rows)
    dropped = {r: reasons.get(r, 0) for r in ("error", "empty", "unjudged")}
    return keep, {
        "rows_in": n,
        "rows_kept": len(keep),
        "rows_dropped": n - len(keep),
        "dropped": dropped,
    }


def group_signal(
    rows: Sequence[Mapping[str, Any]], lo: float = 0.2, hi: float = 0.8
) -> dict[str, Any]:
    """Within-ask contrast: how many asks' k rollouts disagree.

    Rows group under ``task_key``; only binary rewards count (partial and unjudged rows are
    skipped, the rule ``pass_at`` uses). An ask with two or more graded rollouts is *mixed*
    when it holds both a 0 and a 1; mixed asks whose pass rate lies in ``[lo, hi]`` (edges
    inclusive) are *in band*. Unanimous asks are dead gradient. Asks with one graded rollout
    cannot mix and are counted under ``asks_single``, not blamed.

    Returns ``n_rows``, ``n_graded``, ``n_skipped``, ``n_asks``, ``asks_grouped`` (k >= 2),
    ``asks_single``, ``asks_ungraded``, ``mixed``, ``all_pass``, ``all_fail``, ``in_band``,
    ``out_of_band`` (mixed but outside the band), ``mixed_share`` and ``in_band_share`` (of
    grouped asks; None with a note when there are none), ``rows_in_mixed``,
    ``gradient_capacity`` (share of graded rows sitting in a mixed ask), ``k_min``,
    ``k_median``, ``k_max``, ``mean_pass_rate``, ``band``, ``has_signal`` and ``note``.
    Raises ``ValueError`` for a band outside ``0 <= lo <= hi <= 1``.
    """
    lo, hi = check_band(lo, hi)
    # A row list as_rows already checked in this publish_gate is used as is (its row facts
    # are then found by the list, without keying the rows again).
    rows = checked_row_list(rows) or list(rows)
    stats = group_stats(rows)
    # No binary reward: the note says whether the rows were graded at all.
    partial = 0 if int(stats.k.sum()) else partial_rewards(rows)
    return signal_from_stats(stats, len(rows), lo, hi, partial=partial)


def partial_rewards(rows: Sequence[Mapping[str, Any]]) -> int:
    """How many rows carry a reward strictly between 0 and 1 (graded, but never a pass or a
    fail to the binary rules)."""
    n = 0
    for row in rows:
        reward = reward_under(row)
        n += reward is not None and 0.0 < reward < 1.0
    return n


def signal_from_stats(
    stats: Any, n_rows: int, lo: float, hi: float, *, partial: int = 0
) -> dict[str, Any]:
    """``group_signal``'s report from ``group_stats`` already computed over ``n_rows`` rows,
    ``partial`` of them graded with a reward strictly between 0 and 1 (it words the note when
    no row has a binary reward)."""
    k, npass, rate = stats.k, stats.n_pass, stats.pass_rate
    grouped = k >= 2
    unanimous = unanimous_mask(stats, 2)
    mixed = grouped & ~unanimous
    eps = 1e-9
    in_band = mixed & (rate >= lo - eps) & (rate <= hi + eps)
    n_graded = int(k.sum())
    n_grouped = int(grouped.sum())
    rows_in_mixed = int(k[mixed].sum())
    graded_k = k[k > 0]
    all_pass = int((unanimous & (npass == k)).sum())
    all_fail = int((unanimous & (npass == 0)).sum())
    note = _signal_note(n_rows, n_graded, n_grouped, int(mixed.sum()), all_pass, all_fail, partial)
    return {
        "n_rows": n_rows,
        "n_graded": n_graded,
        "n_skipped": n_rows - n_graded,
        "n_asks": stats.n_groups,
        "asks_grouped": n_grouped,
        "asks_single": int((k == 1).sum()),
        "asks_ungraded": int((k == 0).sum()),
        "mixed": int(mixed.sum()),
        "all_pass": all_pass,
        "all_fail": all_fail,
        "in_band": int(in_band.sum()),
        "out_of_band": int((mixed & ~in_band).sum()),
        "mixed_share": (float(mixed.sum()) / n_grouped) if n_grouped else None,
        "in_band_share": (float(in_band.sum()) / n_grouped) if n_grouped else None,
        "rows_in_mixed": rows_in_mixed,
        "gradient_capacity": (rows_in_mixed / n_graded) if n_graded else None,
        "k_min": int(graded_k.min()) if graded_k.size else None,
        "k_median": float(np.median(graded_k)) if graded_k.size else None,
        "k_max": int(graded_k.max()) if graded_k.size else None,
        "mean_pass_rate": float(np.nanmean(rate)) if graded_k.size else None,
        "band": [lo, hi],
        "has_signal": bool(mixed.any()),
        "note": note,
    }


def _signal_note(
    n_rows: int, n_graded: int, n_grouped: int, mixed: int, all_pass: int, all_fail: int,
    partial: int,
) -> str:  # fmt: skip
    """What keeps the rows from carrying a within-ask signal ("" when some ask mixes)."""
    if n_rows == 0:
        return "no rows: nothing to measure"
    if n_graded == 0 and partial:
        return (
            f"no row has a 0/1 reward: {partial} of {n_rows} rows carry a partial reward (not 0 "
            "or 1), and an ask mixes only passes and fails: have the judge return 0/1 (a "
            "threshold on its score)"
        )
    if n_graded == 0:
        return (
            f"no row has a reward: the {n_rows} rows are unjudged (no reward, or the judge "
            "gave no verdict); grade the rows before measuring signal"
        )
    if n_grouped == 0:
        return "every ask has one graded rollout: simulate with repeats >= 2 to measure contrast"
    if not mixed:
        return (
            f"every ask has the same reward on all its graded rollouts ({all_pass} all pass, "
            f"{all_fail} all fail), so no ask carries a within-ask contrast for a grouped update"
        )
    return ""


def _candidate_key(task: Any, prompt_to_key: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The task key a ``tasks=`` entry names, and a row-like dict to represent it."""
    if isinstance(task, str):
        return prompt_to_key.get(task, task), {"prompt": task}
    if isinstance(task, dict):
        key = task_key(task)
        prompt = task.get("prompt")
        if not (task.get("scenario_id") or task.get("task_id")) and isinstance(prompt, str):
            key = prompt_to_key.get(prompt, key)
        return key, task
    raise TypeError(
        f"next_round(tasks=...) takes rows, task dicts with a 'prompt', or prompt strings; "
        f"got {type(task).__name__}"
    )


def next_round(
    prior: Sequence[dict[str, Any]],
    tasks: Sequence[Any] | None = None,
    lo: float = 0.2,
    hi: float = 0.8,
) -> dict[str, Any]:
    """The prompt set for the next round, from the last round's graded rollouts.

    Each task's pass rate over ``prior``'s binary rewards decides: inside ``[lo, hi]``
    (inclusive) it is kept, above ``hi`` it is solved and dropped, below ``lo`` unsolved and
    dropped. ``tasks`` restricts the candidates (rows, task dicts with a ``prompt``, or prompt
    strings, matched to prior rows by ``task_key`` or by prompt text); a candidate with no
    graded prior rollout is ``unknown`` and kept, since nothing says it is flat. Does not
    mutate ``prior`` or ``tasks``.

    Returns ``tasks`` (one representative per kept task: a copy of its first prior row, or of
    the candidate when unknown, with ``calibration`` = pass rate, k, band), ``kept``,
    ``dropped_solved``, ``dropped_unsolved``, ``unknown``, ``pass_rates`` (task key -> rate),
    ``band``, ``from_policy`` (policy versions of the prior rows) and ``prompt_set_sha``
    (sha256 of the kept task keys and prompts, for lineage). Raises ``ValueError`` for a bad
    band and ``TypeError`` for a candidate of another type.
    """
    lo, hi = check_band(lo, hi)
    prior = list(prior)
    keys = [task_key(r) for r in prior]
    stats = group_stats(prior, keys=keys)
    index = {k: g for g, k in enumerate(stats.keys)}
    first_row: dict[str, dict[str, Any]] = {}
    prompt_to_key: dict[str, str] = {}
    policies: Counter[str] = Counter()
    for row, key in zip(prior, keys, strict=True):
        first_row.setdefault(key, row)
        prompt = row.get("prompt")
        if isinstance(prompt, str):
            prompt_to_key.setdefault(prompt, key)
        pv = row.get("policy_version") or row.get("model_version")
        if pv:
            policies[str(pv)] += 1
    if tasks is None:
        candidates = [(key, first_row[key]) for key in dict.fromkeys(keys)]
    else:
        candidates = [_candidate_key(t, prompt_to_key) for t in tasks]
    eps = 1e-9
    out: list[dict[str, Any]] = []
    pass_rates: dict[str, float] = {}
    counts = {"kept": 0, "dropped_solved": 0, "dropped_unsolved": 0, "unknown": 0}
    seen: set[str] = set()
    for key, candidate in candidates:
        if key in seen:
            continue
        seen.add(key)
        g = index.get(key)
        k = int(stats.k[g]) if g is not None else 0
        if k == 0:
            counts["unknown"] += 1
            rep = dict(candidate)
            rep["calibration"] = {"pass_rate": None, "k": 0, "band": [lo, hi], "status": "unknown"}
            out.append(rep)
            continue
        rate = float(stats.pass_rate[g])
        pass_rates[key] = rate
        if rate > hi + eps:
            counts["dropped_solved"] += 1
        elif rate < lo - eps:
            counts["dropped_unsolved"] += 1
        else:
            counts["kept"] += 1
            rep = dict(first_row[key])
            rep["calibration"] = {
                **(rep.get("calibration") or {}),
                "pass_rate": rate,
                "k": k,
                "n": k,  # row-v1's name for the rollouts the rate is over
                "band": [lo, hi],
                "status": "in_band",
            }
            out.append(rep)
    sha = hashlib.sha256(
        json.dumps(
            sorted([task_key(r), str(r.get("prompt") or "")] for r in out), ensure_ascii=False
        ).encode()
    ).hexdigest()
    return {
        "tasks": out,
        **counts,
        "pass_rates": pass_rates,
        "band": [lo, hi],
        "from_policy": sorted(policies),
        "prompt_set_sha": sha,
    }


def _resolve_source(source: Any) -> tuple[list[dict[str, Any]], str | None]:
    """Rows and the data's own mode (when it says). score/ reads no files: a path is
    ``wai_exp.optimize``'s (the edge in ``wai_exp.pipeline.edges``)."""
    if isinstance(source, str | Path):
        raise TypeError(
            f"this optimize takes rows, not the path {str(source)!r}; call "
            "wai_exp.optimize(path), which reads and writes the JSONL files"
        )
    mode = getattr(source, "mode", None)
    if mode is None:
        meta = getattr(source, "metadata", None)
        if isinstance(meta, dict):
            mode = meta.get("mode")
    if hasattr(source, "rows") and not isinstance(source, list | tuple):
        rows = source.rows
        # SimulationData.rows / ScoredData.rows are lists that are also callable.
        if callable(rows) and not isinstance(rows, list):
            rows = rows()
        return list(rows), mode if isinstance(mode, str) else None
    if isinstance(source, Sequence):
        return list(source), None
    raise TypeError(
        f"optimize(source=...) takes a row list, an object with .rows (SimulationData, "
        f"ScoredData) or a JSONL path; got {type(source).__name__}"
    )


def _rows_mode(rows: Sequence[dict[str, Any]]) -> str | None:
    modes = Counter(str(r["mode"]) for r in rows if r.get("mode"))
    return modes.most_common(1)[0][0] if modes else None


def optimize(
    source: Any,
    mode: str | None = None,
    target: int = 1000,
    band: tuple[float, float] = DEFAULT_BAND,
    enforce_band: bool = True,
    select: str = "top_per_prompt",
    min_reward: float = 1.0,
    endorsed: Sequence[str] = (),
    truncated: str = "drop",
    order: str = "spread",
    audit: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One call after grading: concentrate a graded batch for the post-training target.

    ``source`` is a row list or an object with ``.rows`` (``SimulationData``, ``ScoredData``);
    ``wai_exp.optimize`` (``wai_exp.pipeline.edges.optimize``) also takes a JSONL path and an
    ``output`` file, and is this function plus the file reading and writing. ``mode`` defaults to the data's own mode (the object's ``mode``, else the
    rows' most common ``mode`` field): ``"sft"`` runs ``select_for_sft`` (``select``,
    ``min_reward``); anything else runs ``select_for_rl`` with the difficulty ``band``,
    ``enforce_band``, ``endorsed``, ``truncated``, ``order`` and ``audit``, which applies the
    junk filter (``is_incomplete_junk``) first.

    Returns ``(rows, report)``: the selector's report plus ``mode``, ``source`` (the source's
    type name) and ``output`` (None: nothing is written here). Raises ``ValueError`` for an
    unknown option value and ``TypeError`` for a path or another unreadable source.
    """
    rows, data_mode = _resolve_source(source)
    rows = as_rows(rows)  # TypeError naming the position of a non-dict row
    resolved_mode = mode or data_mode or _rows_mode(rows) or "rl"
    lo, hi = check_band(*band)
    if resolved_mode == "sft":
        from wai_exp.score.select.select import select_for_sft

        selected, report = select_for_sft(rows, target=target, select=select, min_reward=min_reward)
    else:
        from wai_exp.score.select.select import select_for_rl

        selected, report = select_for_rl(
            rows,
            target=target,
            lo=lo,
            hi=hi,
            enforce_band=enforce_band,
            endorsed=endorsed,
            truncated=truncated,
            order=order,
            audit=audit,
        )
    report = {**report, "mode": resolved_mode, "source": type(source).__name__, "output": None}
    return selected, report
