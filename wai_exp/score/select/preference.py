"""Same-task chosen/rejected pairs for preference training (DPO-style): ``build_preference_pairs``.

A pair exists only where one task (``task_key``) has two trajectories whose judged scores
differ by at least ``min_margin``: the contrast is the training signal, so failures are
supply here, not waste. Rows without a valid judge verdict never pair.

Pairing, per task, is greedy and deterministic. Valid rows are ordered by score (highest
first), then ``rollout_id``, then input position; each row in that order that is still free
becomes a chosen side and takes one still-free row scoring at least ``min_margin`` less:

* ``length_match=True``: the rejected row whose reply length is closest to the chosen one
  (ties: the larger margin, then the same order as above). DPO learns a length gap faster
  than the behaviour behind it, so the pair should differ in what was done, not in length.
* ``length_match=False``: the largest margin (ties: the same order).

A row sits in at most one pair, so no single trajectory is weighted several times in the
loss, and a task gives at most ``max_pairs_per_prompt`` pairs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.llm.providers import bare_model
from wai_exp.rows.keys import task_key
from wai_exp.score.stats.intervals import wilson_interval
from wai_exp.score.stats.readers import factorize, numeric_reward

#: ``judge_status`` values that carry a usable verdict (``None``: a hand-labelled row).
VALID_STATUSES = frozenset({"ok", None})
#: Two scores this close count as equal when compared against ``min_margin`` (so 0.7 - 0.2
#: still clears a margin of 0.5 despite float rounding).
MARGIN_TOL = 1e-9
#: Every reason a row is or is not in a pair; ``report["rows_by_reason"]`` has each key.
ROW_REASONS: tuple[str, ...] = (
    "paired",
    "unjudged",
    "single_rollout",
    "no_contrast",
    "no_partner",
    "over_cap",
)
#: Every reason a task does or does not give a pair; ``report["tasks_by_reason"]`` keys.
TASK_REASONS: tuple[str, ...] = ("paired", "no_valid_rows", "single_rollout", "no_contrast")


def _score(row: Mapping[str, Any]) -> float | None:
    """The row's judged score in [0, 1], or ``None`` when it has no valid judge verdict.

    ``resample.numeric_reward`` (``reward``, else ``qwen_reward``; a missing, non-numeric or
    out-of-[0, 1] reward is "no verdict"), gated more strictly on status: only ``ok`` or no
    status (a hand-labelled row) counts, so an unknown status is not taken as a verdict.
    """
    if row.get("judge_status") not in VALID_STATUSES:
        return None
    return numeric_reward(row)


def _scores(rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """``_score`` of every row as a float array, NaN where None. The common row (a float
    reward, status ``ok``) is read inline: a function call per row was a third of
    ``build_preference_pairs``' time on 100,000 rows."""
    out: list[float] = []
    append = out.append
    for row in rows:
        if row.get("judge_status") not in VALID_STATUSES:
            append(math.nan)
            continue
        value = row.get("reward")
        if type(value) is float:
            # numeric_reward's rule for a float: NaN, inf and anything outside [0, 1] fail.
            append(value if 0.0 <= value <= 1.0 else math.nan)
            continue
        score = numeric_reward(row)
        append(math.nan if score is None else score)
    return np.array(out, dtype=float).reshape(len(rows))


def _reply_chars(row: Mapping[str, Any]) -> int:
    """``len(final_reply(row))``; a non-blank ``final_text`` is read without the strip."""
    text = row.get("final_text")
    if type(text) is str and text and not text.isspace():
        return len(text)
    # Imported here: only a row without a written reply needs the trajectory read (and
    # grading's import, with its reply vocabularies, is a tenth of this call's time).
    from wai_exp.score.grade.grading import final_reply

    return len(final_reply(row))


def _unjudged_kind(row: Mapping[str, Any]) -> str:
    """Why a row has no valid verdict: its judge status, else ``no_reward`` (none given)
    or ``bad_reward`` (a reward that is not a number in [0, 1])."""
    status = row.get("judge_status")
    if status not in VALID_STATUSES:
        return str(status)
    return (
        "no_reward"
        if row.get("reward") is None and row.get("qwen_reward") is None
        else "bad_reward"
    )


def _model(row: Mapping[str, Any]) -> str | None:
    """The policy that produced the row: ``model_version``, else ``model``, else the
    ``judged_model`` grading stamped in the lineage."""
    for value in (row.get("model_version"), row.get("model")):
        if isinstance(value, str) and value.strip():
            return value
    lineage = row.get("lineage")
    if isinstance(lineage, Mapping):
        value = lineage.get("judged_model")
        if isinstance(value, str) and value.strip():
            return value
    return None


def _lineage(row: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the row's lineage plus its own ``rollout_id``, so a pair names both parents."""
    lineage = row.get("lineage")
    out = dict(lineage) if isinstance(lineage, Mapping) else {}
    out["rollout_id"] = row.get("rollout_id")
    return out


def _check(max_pairs_per_prompt: Any, min_margin: Any) -> tuple[int, float]:
    if (
        isinstance(max_pairs_per_prompt, bool)
        or not isinstance(max_pairs_per_prompt, int | np.integer)
        or max_pairs_per_prompt < 1
    ):
        raise ValueError(
            f"max_pairs_per_prompt must be an int >= 1 (pairs kept per task), got "
            f"{max_pairs_per_prompt!r}"
        )
    if isinstance(min_margin, bool) or not isinstance(min_margin, int | float | np.floating):
        raise ValueError(f"min_margin must be a number in (0, 1], got {min_margin!r}")
    margin = float(min_margin)
    if not (math.isfinite(margin) and 0.0 < margin <= 1.0):
        raise ValueError(
            f"min_margin must be in (0, 1] (rewards live in [0, 1]; 1.0 pairs passes with "
            f"fails, 0.5 also admits partial credit), got {min_margin!r}"
        )
    return int(max_pairs_per_prompt), margin


def _share(count: int, n: int) -> tuple[float | None, list[float] | None]:
    ci = wilson_interval(count, n)
    return (count / n if n else None), (ci.as_list() if ci is not None else None)


def _pair_group(
    s: list[float], ln: list[float], cap: int, margin: float, length_match: bool
) -> tuple[list[tuple[int, int]], list[bool]]:
    """Greedy pairs inside one task whose rows are already in pairing order (score
    descending, then tie-break). Returns ``(pairs as (chosen, rejected) positions, used)``.

    Each free row, in order, takes the free row at least ``margin`` below it with the closest
    length (``length_match``), then the larger margin (lower score), then the earlier
    position. Plain lists, not numpy: a task holds a handful of rows, and per-call numpy
    overhead was most of ``build_preference_pairs``' time on 100,000 rows.
    """
    n = len(s)
    used = [False] * n
    pairs: list[tuple[int, int]] = []
    for i in range(n):
        if len(pairs) >= cap:
            break
        if used[i]:
            continue
        bar = s[i] - margin + MARGIN_TOL
        best: int | None = None
        best_key: tuple[float, ...] | None = None
        for j in range(n):
            if used[j] or s[j] > bar:
                continue
            key = (abs(ln[j] - ln[i]), s[j], j) if length_match else (s[j], j)
            if best_key is None or key < best_key:
                best, best_key = j, key
        if best is None:
            continue
        used[i] = used[best] = True
        pairs.append((i, best))
    return pairs, used


def _row_dicts(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = list(rows)
    for i, row in enumerate(rows):
        if type(row) is not dict and not isinstance(row, Mapping):
            raise TypeError(f"row {i} is a {type(row).__name__}, not a dict; pass graded rows")
    return rows


def _pair(
    task: Any,
    c: dict[str, Any],
    r: dict[str, Any],
    c_score: float,
    r_score: float,
    lens: tuple[int, int],
) -> dict[str, Any]:
    """One preference pair: chosen ``c`` over rejected ``r`` of one task, with who wrote
    each, their margin and lengths, and the lineage of both."""
    c_model, r_model = _model(c), _model(r)
    same = (
        None
        if c_model is None or r_model is None
        else c_model == r_model or bare_model(c_model) == bare_model(r_model)
    )
    c_len, r_len = lens
    return {
        "task_key": task,
        "prompt": c.get("prompt"),
        "same_prompt": c.get("prompt") == r.get("prompt"),
        "chosen": c,
        "rejected": r,
        "chosen_score": c_score,
        "rejected_score": r_score,
        "margin": float(c_score - r_score),
        "chosen_model": c_model,
        "rejected_model": r_model,
        "same_policy": same,
        "chosen_chars": c_len,
        "rejected_chars": r_len,
        "length_delta": c_len - r_len,
        "lineage": {
            "source": "preference",
            "chosen": _lineage(c),
            "rejected": _lineage(r),
        },
    }


def build_preference_pairs(
    rows: Sequence[dict[str, Any]],
    max_pairs_per_prompt: int = 1,
    min_margin: float = 1.0,
    length_match: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Same-task chosen/rejected pairs for preference training (DPO-style).

    ``rows`` are graded row dicts (``run_judge`` output, or anything with ``reward`` and
    ``judge_status``). Rows group by ``task_key``; a pair needs two valid rows of one task
    whose scores differ by at least ``min_margin`` (1.0: passes against fails only; 0.5
    also admits partial credit against a full pass or fail). Rows whose judge gave no valid
    verdict never pair. How a chosen row picks its rejected partner is in the module
    docstring; each row is in at most one pair, each task gives at most
    ``max_pairs_per_prompt`` pairs. Pairs come in sorted task-key order, then pairing order,
    so the same rows always give the same pairs (whatever order they arrive in, as long as
    ``rollout_id`` is unique).

    Each pair is a dict: ``task_key``, ``prompt`` (the chosen row's), ``same_prompt`` (the
    two rows' prompt texts agree; phrasings of one situation share a task key), ``chosen``
    and ``rejected`` (the input row dicts themselves, not copies), ``chosen_score``,
    ``rejected_score``, ``margin``, ``chosen_model``, ``rejected_model``, ``same_policy``
    (``None`` when either model is unknown), ``chosen_chars``, ``rejected_chars``,
    ``length_delta`` (chosen reply chars minus rejected), and ``lineage`` = ``{"source":
    "preference", "chosen": ..., "rejected": ...}`` with a copy of each parent's lineage
    plus its ``rollout_id``.

    The report counts rows and tasks per reason (``rows_by_reason`` over ``ROW_REASONS``,
    summing to ``n_rows``; ``tasks_by_reason`` over ``TASK_REASONS``), unjudged rows per
    judge status (``no_reward`` / ``bad_reward`` when the status was ``ok``), pairs per margin, how often chosen is still the longer reply (with a
    Wilson interval; ``None`` and a note when there are no pairs), off-policy and
    unknown-policy pairs, and ``warnings``. Nothing is mutated.

    Raises ``ValueError`` for ``max_pairs_per_prompt`` < 1 or ``min_margin`` outside
    (0, 1], and ``TypeError`` when a row is not a dict.
    """
    cap, margin = _check(max_pairs_per_prompt, min_margin)
    rows = _row_dicts(rows)
    n = len(rows)
    scores = _scores(rows)
    valid = ~np.isnan(scores)
    keys, codes = factorize([task_key(r) for r in rows])
    reasons = np.full(n, "", dtype=object)
    reasons[~valid] = "unjudged"
    unjudged_by_status = Counter(_unjudged_kind(rows[i]) for i in np.flatnonzero(~valid))
    task_reasons: Counter[str] = Counter()

    idx = np.flatnonzero(valid)
    lengths = np.zeros(n, dtype=float)
    lengths[idx] = [_reply_chars(rows[i]) for i in idx.tolist()]
    # One stable sort puts each task's valid rows together (in input order); each task's
    # handful is then put in pairing order (score descending, rollout id, input position)
    # by a small sort in the loop below, which is cheaper than ranking 100,000 ids.
    order = idx[np.argsort(codes[idx], kind="stable")]
    counts = np.bincount(codes[order], minlength=len(keys))
    starts = np.cumsum(counts) - counts
    task_reasons["no_valid_rows"] = int(np.sum(counts == 0))

    pairs: list[dict[str, Any]] = []
    # The per-task loop works on plain lists: a task holds a handful of rows, and numpy's
    # per-call overhead on 12,500 tiny slices is most of the time on 100,000 rows.
    order_l, scores_l, lengths_l = order.tolist(), scores.tolist(), lengths.tolist()
    starts_l = starts.tolist()
    why = reasons.tolist()
    tol = margin - MARGIN_TOL

    def pairing_order(m: int) -> tuple[float, str, int]:
        return (-scores_l[m], str(rows[m].get("rollout_id") or ""), m)

    for g, count in enumerate(counts.tolist()):
        if not count:
            continue
        members = order_l[starts_l[g] : starts_l[g] + count]
        members.sort(key=pairing_order)
        sl = [scores_l[m] for m in members]
        if count == 1:
            why[members[0]] = "single_rollout"
            task_reasons["single_rollout"] += 1
            continue
        if sl[0] - sl[-1] < tol:
            for m in members:
                why[m] = "no_contrast"
            task_reasons["no_contrast"] += 1
            continue
        task_reasons["paired"] += 1
        found, used = _pair_group(sl, [lengths_l[m] for m in members], cap, margin, length_match)
        free = [sl[pos] for pos in range(count) if not used[pos]]
        top, bottom = (max(free), min(free)) if free else (0.0, 0.0)
        for pos, m in enumerate(members):
            if used[pos]:
                why[m] = "paired"
            else:
                # A free row that still has a free partner at the margin lost out to the
                # cap; one without could never have paired in this task.
                reach = max(top - sl[pos], sl[pos] - bottom) >= tol
                why[m] = "over_cap" if reach else "no_partner"
        for ci, ri in found:
            c, r = rows[members[ci]], rows[members[ri]]
            lens = int(lengths_l[members[ci]]), int(lengths_l[members[ri]])
            pairs.append(_pair(keys[g], c, r, float(sl[ci]), float(sl[ri]), lens))
    return pairs, _report(
        pairs,
        rows,
        np.array(why, dtype=object),
        task_reasons,
        unjudged_by_status,
        len(keys),
        cap,
        margin,
        length_match,
    )


def _report(
    pairs: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    reasons: np.ndarray,
    task_reasons: Counter[str],
    unjudged_by_status: Counter[str],
    n_tasks: int,
    cap: int,
    margin: float,
    length_match: bool,
) -> dict[str, Any]:
    n_pairs = len(pairs)
    deltas = np.array([p["length_delta"] for p in pairs], dtype=float)
    longer = int(np.sum(deltas > 0))
    shorter = int(np.sum(deltas < 0))
    longer_share, longer_ci = _share(longer, n_pairs)
    off = sum(p["same_policy"] is False for p in pairs)
    unknown = sum(p["same_policy"] is None for p in pairs)
    known = n_pairs - unknown
    off_share, off_ci = _share(off, known)
    cross = sum(not p["same_prompt"] for p in pairs)
    row_counts = Counter(reasons.tolist())
    notes: list[str] = []
    warnings: list[str] = []
    if not n_pairs:
        notes.append(
            "no pairs: no task has two validly judged rollouts whose scores differ by at least "
            f"min_margin={margin:g} (see rows_by_reason); length and policy shares are "
            "unmeasured (None)"
        )
    if unknown:
        one = unknown == 1
        notes.append(
            f"{counted(unknown, 'pair')} {'has' if one else 'have'} a side with no model_version; "
            f"same_policy is None there and {'it is' if one else 'they are'} left out of "
            "off_policy_share"
        )
    if longer_ci is not None and longer_ci[0] > 0.5:
        warnings.append(
            f"chosen is the longer reply in {longer} of {n_pairs} pairs (95% CI "
            f"{longer_ci[0]:.2f}-{longer_ci[1]:.2f}): length still predicts the label, and DPO "
            "learns that gap faster than the behaviour"
            + ("" if length_match else "; pass length_match=True")
        )
    if off:
        warnings.append(
            f"{off} of {known} pairs are off-policy (chosen and rejected from different "
            "models); preference data works best when both sides come from the policy trained"
        )
    if cross:
        warnings.append(
            f"{counted(cross, 'pair')} {'joins' if cross == 1 else 'join'} different phrasings "
            "of one task (prompt texts differ); a DPO trainer needs one prompt per pair, so "
            "check how it reads `prompt`"
        )
    margins = Counter(round(p["margin"], 6) for p in pairs)
    return {
        "n_rows": len(rows),
        "n_valid": int(sum(row_counts[r] for r in ROW_REASONS if r != "unjudged")),
        "n_tasks": n_tasks,
        "n_pairs": n_pairs,
        "min_margin": margin,
        "max_pairs_per_prompt": cap,
        "length_match": length_match,
        "rows_by_reason": {r: int(row_counts.get(r, 0)) for r in ROW_REASONS},
        "tasks_by_reason": {r: int(task_reasons.get(r, 0)) for r in TASK_REASONS},
        "unjudged_by_status": dict(sorted(unjudged_by_status.items())),
        "pairs_by_margin": {f"{m:g}": c for m, c in sorted(margins.items(), reverse=True)},
        "length": {
            "chosen_longer": longer,
            "chosen_shorter": shorter,
            "equal_length": n_pairs - longer - shorter,
            "chosen_longer_share": longer_share,
            "chosen_longer_ci95": longer_ci,
            "mean_length_delta": float(deltas.mean()) if n_pairs else None,
            "mean_abs_length_delta": float(np.abs(deltas).mean()) if n_pairs else None,
        },
        "off_policy": off,
        "unknown_policy": unknown,
        "off_policy_share": off_share,
        "off_policy_ci95": off_ci,
        "cross_phrasing": cross,
        "notes": notes,
        "warnings": warnings,
    }


__all__ = ["ROW_REASONS", "TASK_REASONS", "build_preference_pairs"]
