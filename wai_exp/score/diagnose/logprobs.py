"""What the policy's own log-probabilities buy you: coverage, sampled KL, off-policy checks.

``simulate(logprobs=True)`` stamps every agent turn with ``logprob`` (summed over the tokens
it generated) and ``n_tokens``; ``logprobs="tokens"`` also keeps ``token_logprobs``. A row may
carry ``logprob`` / ``n_tokens`` totals of its own; when it does not, the totals are the sums
over its assistant steps (``row_logprob``). Everything here is a pure function over row dicts.

* ``logprob_report``: how much was captured, the per-token mean, the spread of per-row means,
  and whether reward tracks the policy's confidence (it should not on a fair judge).
* ``mean_kl``: sampled ``KL(pi || pi_ref)`` per generated token, overall and per task, from the
  policy's logprob and the reference's over the same tokens.
* ``staleness_report``: which policies produced the rows and whether an update can still use
  them (rlhf-book ch. 6: an importance ratio needs the sampler's version and its logprobs).

Ratios of sums (total logprob over total tokens, summed log-ratio over tokens) get a
linearized (delta-method) interval that treats tasks as the independent units, so one long
rollout or one many-repeat task does not pose as many independent observations.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wai_exp.domain.numbers import finite_float
from wai_exp.rows.keys import task_key
from wai_exp.rows.reader import read_steps
from wai_exp.score.stats.resample import binary_reward, factorize, t_quantile, z_quantile

#: The interval level every report here uses.
LEVEL = 0.95

#: Quantiles of the per-row mean token logprob that ``logprob_report`` lists.
_QUANTILES = (("min", 0.0), ("p10", 0.1), ("p25", 0.25), ("p50", 0.5), ("p75", 0.75),
              ("p90", 0.9), ("max", 1.0))  # fmt: skip


def _scan(row: Mapping[str, Any]) -> tuple[float | None, float | None, bool, int]:
    """One pass over a row: (logprob, tokens) as ``row_logprob`` defines them, whether any
    per-token list is kept, and how many assistant turns were cut at the token cap."""
    lp = finite_float(row.get("logprob"))
    nt = finite_float(row.get("n_tokens"))
    need = lp is None or nt is None
    has_tokens = bool(row.get("token_logprobs"))
    n_trunc = 0
    s_lp = s_nt = 0.0
    seen_lp = seen_nt = False
    for step in read_steps(row)[1]:
        if step.get("kind") != "assistant":
            continue
        if step.get("truncated"):
            n_trunc += 1
        toks = step.get("token_logprobs")
        if toks:
            has_tokens = True
        if not need:
            continue
        step_lp = finite_float(step.get("logprob"))
        if step_lp is None and isinstance(toks, Sequence) and toks:
            step_lp = finite_float(float(np.sum(np.asarray(toks, dtype=float))))
        if step_lp is None:
            continue
        seen_lp = True
        s_lp += step_lp
        step_nt = finite_float(step.get("n_tokens"))
        if step_nt is None and isinstance(toks, Sequence):
            step_nt = float(len(toks))
        if step_nt is not None:
            seen_nt = True
            s_nt += step_nt
    if lp is None and seen_lp:
        lp = s_lp
    if nt is None and seen_nt:
        nt = s_nt
    return lp, nt, has_tokens, n_trunc


def row_logprob(row: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """``(summed policy logprob, generated tokens)`` of one rollout.

    Each is the row's top-level total (``logprob``, ``n_tokens``) when present, else the sum over
    its assistant steps that carry a logprob (a step without ``logprob`` but with
    ``token_logprobs`` contributes their sum; a step without ``n_tokens`` contributes the length
    of its ``token_logprobs``). Tokens are summed only over steps that carry a logprob, so the
    two totals describe the same tokens. Either is None when nothing carries it.
    """
    lp, nt, _, _ = _scan(row)
    return lp, nt


def _totals(
    rows: Sequence[Mapping[str, Any]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-row arrays from one ``_scan`` each: logprob and tokens (NaN where missing), whether
    per-token lists are kept, and truncated-turn counts."""
    n = len(rows)
    lp = np.full(n, np.nan)
    nt = np.full(n, np.nan)
    has_tokens = np.zeros(n, dtype=bool)
    n_trunc = np.zeros(n, dtype=np.int64)
    for i, row in enumerate(rows):
        a, b, has_tokens[i], n_trunc[i] = _scan(row)
        if a is not None:
            lp[i] = a
        if b is not None:
            nt[i] = b
    return lp, nt, has_tokens, n_trunc


def _ratio_interval(
    num: np.ndarray, den: np.ndarray, level: float = LEVEL
) -> tuple[list[float] | None, str | None]:
    """Delta-method interval for ``sum(num) / sum(den)`` with tasks as the units.

    ``num``/``den`` are per-task sums. The linearized variance of a ratio of cluster sums is
    ``G / (G - 1) * sum((num_g - R den_g)^2) / sum(den)^2``; t with ``G - 1`` degrees of
    freedom carries the small-task-count tails. Returns ``(None, why)`` below two tasks.
    """
    g = num.size
    total = float(den.sum())
    if g < 2 or total <= 0:
        return None, f"interval needs at least 2 tasks with tokens (have {g})"
    ratio = float(num.sum()) / total
    resid = num - ratio * den
    se = math.sqrt(g / (g - 1) * float(resid @ resid)) / total
    half = t_quantile(g - 1, level) * se
    return [ratio - half, ratio + half], None


def _by_task(
    keys: Sequence[str], num: np.ndarray, den: np.ndarray
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
    """Per-task (keys, sum of num, sum of den, row count) via one bincount each."""
    uniq, inv = factorize(keys)
    n = len(uniq)
    return (
        uniq,
        np.bincount(inv, weights=num, minlength=n),
        np.bincount(inv, weights=den, minlength=n),
        np.bincount(inv, minlength=n),
    )


def _pearson_fisher(
    x: np.ndarray, y: np.ndarray, level: float = LEVEL
) -> tuple[float | None, list[float] | None, str | None]:
    """Pearson r of ``x`` and ``y`` with its Fisher-z interval, or None and why not."""
    n = x.size
    if n < 3:
        return None, None, f"needs at least 3 graded rows with logprobs (have {n})"
    if np.ptp(x) == 0:
        return None, None, f"every graded row has reward {x[0]:g}: no variation to correlate"
    if np.ptp(y) == 0:
        return None, None, "every graded row has the same mean token logprob"
    r = float(np.corrcoef(x, y)[0, 1])
    r = max(-1.0, min(1.0, r))
    if n < 4 or abs(r) == 1.0:
        return r, None, f"interval needs at least 4 rows and |r| < 1 (n={n}, r={r:g})"
    z = math.atanh(r)
    half = z_quantile(level) / math.sqrt(n - 3)
    return r, [math.tanh(z - half), math.tanh(z + half)], None


def logprob_report(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Coverage and shape of the captured logprobs.

    A row counts as covered when it has a logprob and more than zero tokens (``row_logprob``).
    Returns:

    * ``n_rows``, ``n_with_logprob``, ``coverage`` (share covered; None for no rows),
      ``n_with_token_logprobs`` (rows keeping the per-token list), ``n_truncated_turns``;
    * ``n_tokens`` and ``total_logprob`` (None when nothing is covered) over covered rows; ``mean_token_logprob`` = total
      logprob / total tokens with ``mean_token_logprob_ci`` (delta method over tasks, None
      below two tasks);
    * ``per_row``: quantiles (min, p10 ... p90, max) of each covered row's own mean token
      logprob, so one long rollout does not dominate;
    * ``n_graded`` (covered rows with a 0/1 reward), ``corr_reward_confidence`` (Pearson
      between reward and per-row mean; strongly positive says the judge rewards fluency) and
      its Fisher-z ``corr_reward_confidence_ci``;
    * ``level`` and ``notes`` (why any of the above is None).

    Never raises on row content; unmeasured numbers are None with a note.
    """
    rows = list(rows)
    notes: list[str] = []
    lp, nt, has_tokens, truncated = _totals(rows)
    covered = np.isfinite(lp) & np.isfinite(nt) & (np.nan_to_num(nt) > 0)
    n_cov = int(covered.sum())
    n_tok_lists = int(has_tokens.sum())
    n_trunc = int(truncated.sum())
    out: dict[str, Any] = {
        "n_rows": len(rows),
        "n_with_logprob": n_cov,
        "coverage": n_cov / len(rows) if rows else None,
        "n_with_token_logprobs": n_tok_lists,
        "n_truncated_turns": n_trunc,
        "n_tokens": int(nt[covered].sum()),
        "total_logprob": float(lp[covered].sum()) if n_cov else None,
        "mean_token_logprob": None,
        "mean_token_logprob_ci": None,
        "per_row": None,
        "n_graded": 0,
        "corr_reward_confidence": None,
        "corr_reward_confidence_ci": None,
        "level": LEVEL,
        "notes": notes,
    }
    if not rows:
        notes.append("no rows")
        return out
    if n_cov == 0:
        notes.append(
            "no row carries a logprob with tokens: simulate with logprobs=True "
            "(a model backend) to capture them"
        )
        return out
    if n_cov < len(rows):
        notes.append(f"{len(rows) - n_cov} of {len(rows)} rows carry no logprob and are left out")
    idx = np.flatnonzero(covered)
    c_lp, c_nt = lp[idx], nt[idx]
    out["mean_token_logprob"] = float(c_lp.sum() / c_nt.sum())
    _, t_lp, t_nt, _ = _by_task([task_key(rows[i]) for i in idx.tolist()], c_lp, c_nt)
    ci, why = _ratio_interval(t_lp, t_nt)
    out["mean_token_logprob_ci"] = ci
    if why:
        notes.append(f"mean_token_logprob_ci: {why}")
    per_row = c_lp / c_nt
    qs = np.quantile(per_row, [q for _, q in _QUANTILES])
    out["per_row"] = {name: float(v) for (name, _), v in zip(_QUANTILES, qs, strict=True)}
    reward = np.fromiter(
        (np.nan if (b := binary_reward(rows[i])) is None else b for i in idx.tolist()),
        dtype=float,
        count=idx.size,
    )
    graded = np.isfinite(reward)
    out["n_graded"] = int(graded.sum())
    r, r_ci, why = _pearson_fisher(reward[graded], per_row[graded])
    out["corr_reward_confidence"] = r
    out["corr_reward_confidence_ci"] = r_ci
    if why:
        notes.append(f"corr_reward_confidence: {why}")
    return out


def _ref_from_rows(
    rows: Sequence[Mapping[str, Any]], ref_rows: Sequence[Mapping[str, Any]]
) -> np.ndarray:
    """The reference's summed logprob for each row, NaN where no reference row matches.

    A reference row matches by ``rollout_id``, else ``scenario_id`` + ``rollout_index``, else
    ``prompt`` + ``final_text`` (both set; first match wins when the reference list repeats a key).
    """
    by_id: dict[Any, float] = {}
    by_idx: dict[Any, float] = {}
    by_text: dict[Any, float] = {}
    for r in ref_rows:
        if not isinstance(r, Mapping):
            raise TypeError(f"ref rows must be dicts; got {type(r).__name__}")
        lp, _ = row_logprob(r)
        if lp is None:
            continue
        if r.get("rollout_id"):
            by_id.setdefault(r["rollout_id"], lp)
        if r.get("scenario_id") is not None:
            by_idx.setdefault((r["scenario_id"], r.get("rollout_index")), lp)
        # Rows with no prompt/final text must not all match each other on (None, None).
        if r.get("prompt") is not None and r.get("final_text") is not None:
            by_text.setdefault((r["prompt"], r["final_text"]), lp)
    out = np.full(len(rows), np.nan)
    for i, row in enumerate(rows):
        v = by_id.get(row["rollout_id"]) if row.get("rollout_id") else None
        if v is None and row.get("scenario_id") is not None:
            v = by_idx.get((row["scenario_id"], row.get("rollout_index")))
        if v is None and row.get("prompt") is not None and row.get("final_text") is not None:
            v = by_text.get((row["prompt"], row["final_text"]))
        if v is not None:
            out[i] = v
    return out


def mean_kl(
    rows: Sequence[dict[str, Any]],
    ref: str | Sequence[dict[str, Any]] = "ref_logprob",
) -> dict[str, Any]:
    """Sampled ``KL(pi || pi_ref)`` per generated token, overall and per task.

    The estimate is ``sum(logprob - ref_logprob) / sum(n_tokens)`` over the rows that carry
    both sides: the tokens were sampled from the policy, so the mean log-ratio is an unbiased
    KL estimate (a single task's can be negative by sampling noise; it is not clipped). Per
    task (``task_key``) tokens are pooled across that task's rollouts. ``ref`` is a key on the
    same rows holding the reference's summed logprob over the same tokens, or a list of rows
    scored under the reference, carrying ``logprob`` (or step logprobs) and matched by
    rollout id, scenario id + rollout index, or prompt + final text.

    Returns ``mean_kl`` (None with ``note`` when nothing is measurable), ``ci`` (delta method
    over tasks, None below two tasks), ``level``, ``n_rows``, ``n_used``, ``n_skipped`` with
    ``skipped`` = ``{"no_logprob", "no_ref", "no_tokens"}`` (first missing side wins),
    ``n_tokens``, ``n_tasks``, ``per_task`` = ``{task: {"mean_kl", "n_tokens", "n_rows"}}``,
    ``ref`` (the key, or ``"rows"``) and ``note``. Raises ``TypeError`` when ``ref`` is neither
    a key nor a list of row dicts.
    """
    rows = list(rows)
    lp, nt, _, _ = _totals(rows)
    if isinstance(ref, str):
        ref_lp = np.fromiter(
            (np.nan if (v := finite_float(r.get(ref))) is None else v for r in rows),
            dtype=float,
            count=len(rows),
        )
        ref_label = ref
    elif isinstance(ref, Sequence) and not isinstance(ref, (str, bytes, bytearray)):
        ref_lp = _ref_from_rows(rows, ref)
        ref_label = "rows"
    else:
        raise TypeError(
            f"ref must be a key on the rows (e.g. 'ref_logprob') or a list of rows scored under "
            f"the reference; got {type(ref).__name__}"
        )
    has_lp = np.isfinite(lp)
    has_ref = np.isfinite(ref_lp)
    has_tok = np.isfinite(nt) & (np.nan_to_num(nt) > 0)
    no_lp = ~has_lp
    no_ref = has_lp & ~has_ref
    no_tok = has_lp & has_ref & ~has_tok
    used = has_lp & has_ref & has_tok
    idx = np.flatnonzero(used)
    n_skipped = len(rows) - idx.size
    out: dict[str, Any] = {
        "mean_kl": None,
        "ci": None,
        "level": LEVEL,
        "n_rows": len(rows),
        "n_used": int(idx.size),
        "n_skipped": n_skipped,
        "skipped": {
            "no_logprob": int(no_lp.sum()),
            "no_ref": int(no_ref.sum()),
            "no_tokens": int(no_tok.sum()),
        },
        "n_tokens": int(nt[idx].sum()),
        "n_tasks": 0,
        "per_task": {},
        "ref": ref_label,
        "note": None,
    }
    if idx.size == 0:
        out["note"] = (
            "no row carried both its own logprob (with tokens) and the reference's: "
            "mean_kl not measured"
            + (f" (is '{ref}' the key reference_logprobs stamped?)" if isinstance(ref, str) else "")
        )
        return out
    diff = lp[idx] - ref_lp[idx]
    toks = nt[idx]
    keys, t_diff, t_tok, t_rows = _by_task([task_key(rows[i]) for i in idx.tolist()], diff, toks)
    out["mean_kl"] = float(diff.sum() / toks.sum())
    out["n_tasks"] = len(keys)
    per_task_kl = t_diff / t_tok
    out["per_task"] = {
        k: {"mean_kl": float(v), "n_tokens": int(n), "n_rows": int(c)}
        for k, v, n, c in zip(
            keys, per_task_kl.tolist(), t_tok.tolist(), t_rows.tolist(), strict=True
        )
    }
    ci, why = _ratio_interval(t_diff, t_tok)
    out["ci"] = ci
    notes = []
    if n_skipped:
        notes.append(f"{n_skipped} rows lacked a logprob on one side and were skipped")
    if why:
        notes.append(f"ci: {why}")
    out["note"] = "; ".join(notes) or None
    return out


def staleness_report(
    rows: Sequence[dict[str, Any]],
    base_model: str | None = None,
) -> dict[str, Any]:
    """Which policies produced these rows, and can an update still use them.

    A row's sampler version is its ``policy_version``, else its ``model_version`` (rows that
    predate ``policy_version``); a row with neither is from an unknown sampler. With
    ``base_model`` (the model about to be trained), rows whose ``model_version`` is set and
    differs are ``stale``; rows whose ``model_version`` equals it are on-policy. An update can
    use a row when it is on-policy, or when it carries its sampler's version and a logprob
    over its tokens so the importance ratio ``exp(new - old)`` can be formed; without
    ``base_model`` on-policy-ness is unknown and only the second rule applies.

    Returns ``n_rows``; ``versions`` (rows per sampler version, most common first),
    ``n_unversioned``, ``n_version_from_model`` (versions read from ``model_version``);
    ``base_model``, ``n_stale`` and ``stale_versions`` (None without ``base_model``),
    ``n_on_policy``, ``n_unknown_model`` (no ``model_version`` to compare); ``coverage`` =
    ``{"sampling", "logprob", "token_logprobs"}`` counts and ``coverage_share``; ``usable`` =
    ``{"n_usable", "n_on_policy", "n_ratio_ready", "n_unusable", "unusable_reasons"}``; and
    ``notes``. Raises ``TypeError`` when ``base_model`` is not a string.
    """
    if base_model is not None and not isinstance(base_model, str):
        raise TypeError(
            f"base_model must be the trained model's name (str) or None; got {base_model!r}"
        )
    rows = list(rows)
    n = len(rows)
    notes: list[str] = []
    policy = [r.get("policy_version") for r in rows]
    model = [r.get("model_version") for r in rows]
    version = [p if p not in (None, "") else m for p, m in zip(policy, model, strict=True)]
    has_version = np.fromiter((v not in (None, "") for v in version), dtype=bool, count=n)
    from_model = has_version & np.fromiter((p in (None, "") for p in policy), dtype=bool, count=n)
    has_model = np.fromiter((m not in (None, "") for m in model), dtype=bool, count=n)
    lp, nt, has_tokens, _ = _totals(rows)
    has_lp = np.isfinite(lp) & np.isfinite(nt) & (np.nan_to_num(nt) > 0)
    has_sampling = np.fromiter((bool(r.get("sampling")) for r in rows), dtype=bool, count=n)
    ratio_ready = has_version & has_lp

    versions = Counter(str(v) for v, ok in zip(version, has_version.tolist(), strict=True) if ok)
    coverage = {
        "sampling": int(has_sampling.sum()),
        "logprob": int(has_lp.sum()),
        "token_logprobs": int(has_tokens.sum()),
    }
    out: dict[str, Any] = {
        "n_rows": n,
        "versions": dict(versions.most_common()),
        "n_unversioned": int((~has_version).sum()),
        "n_version_from_model": int(from_model.sum()),
        "base_model": base_model,
        "n_stale": None,
        "stale_versions": None,
        "n_on_policy": None,
        "n_unknown_model": int((~has_model).sum()),
        "coverage": coverage,
        "coverage_share": {k: (v / n if n else None) for k, v in coverage.items()},
        "usable": {},
        "notes": notes,
    }
    reasons: dict[str, int] = {"unknown_sampler": int((~has_version).sum())}
    if base_model is None:
        usable = ratio_ready
        reasons["no_logprob"] = int((has_version & ~has_lp).sum())
        notes.append(
            "pass base_model= (the model about to be trained) to count stale and on-policy rows"
        )
        n_on = None
    else:
        on_policy = has_model & np.fromiter((m == base_model for m in model), dtype=bool, count=n)
        stale = has_model & ~on_policy
        out["n_stale"] = int(stale.sum())
        out["stale_versions"] = dict(
            Counter(str(m) for m, s in zip(model, stale.tolist(), strict=True) if s).most_common()
        )
        out["n_on_policy"] = n_on = int(on_policy.sum())
        usable = on_policy | ratio_ready
        reasons["stale_without_logprob"] = int((stale & ~has_lp).sum())
        # A versioned row with no model_version is neither provably on-policy nor stale.
        reasons["no_logprob"] = int((has_version & ~has_model & ~has_lp).sum())
        if out["n_unknown_model"]:
            notes.append(
                f"{out['n_unknown_model']} rows carry no model_version: neither stale nor on-policy"
            )
    out["usable"] = {
        "n_usable": int(usable.sum()),
        "n_on_policy": n_on,
        "n_ratio_ready": int(ratio_ready.sum()),
        "n_unusable": int(n - usable.sum()),
        "unusable_reasons": reasons,
    }
    if not n:
        notes.append("no rows")
    return out
