"""Is the verifier failing answers that are right?

A rule verifier (an exact-match checker, ``task_checklist``) is cheap and consistent, but it
can reject a right answer written another way: a different rounding, field order or
phrasing. Training on those rows teaches the policy that right answers are wrong.
``audit_grades`` measures how often that happens: it draws a seeded sample of the rows the
verifier failed, puts each to a second judge (usually a model reading the reference answer)
and counts the failures that judge overturns. The share overturned is the verifier's
false-negative rate, reported with its Wilson interval, because a sample of 40 pins a rate
down to roughly +-15 points and the reader should see that.

Only the sample is judged; the rest of the failed rows are never re-graded, so
``estimated_wrong_fails`` is an extrapolation (rate x failed rows), not a count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.rows.keys import task_key

# FN_WARN: the false-negative rate above which the audit says to fix the verifier before
# training; select_for_rl warns at the same threshold, so it is defined once, beside it.
from wai_exp.score.select.select import FN_WARN
from wai_exp.score.stats.resample import as_generator, binary_reward, wilson_ci

#: A judge reward at or above this on a verifier-failed row overturns the failure.
PASS_THRESHOLD = 0.5
#: The question the judge answers when a sampled row carries no rubric of its own.
DEFAULT_QUESTION = (
    "The reference answer is the answer key for this task. Is the reply's final answer "
    "correct, meaning it gives the same result as the reference? Differences in formatting, "
    "rounding, ordering (unless the task asks for an order), column or field naming, or an "
    "equivalent way of expressing the same result do not make it wrong. A missing, "
    "different, or partial result does."
)
#: Overturned rows (and, with ``passes``, overturned passes) listed in ``examples``.
MAX_EXAMPLES = 5
#: Characters of reply or reason quoted in an example (the counts are exact; this is to read).
EXAMPLE_CHARS = 300
#: Characters of a verifier reason kept as its failure kind.
KIND_CHARS = 60


def failure_kind(reason: Any) -> str:
    """The verifier's failure kind: the reason's leading label.

    Rule verifiers write ``"<rule>: <detail>"`` (``"refund: invented the order id"``); the
    text before the first ``:`` or ``;`` names the kind, so rows failed by one rule group
    together whatever their details. A reason with no separator is its own kind (cut to
    ``KIND_CHARS``); ``"(no reason)"`` when the verifier gave none.
    """
    if not isinstance(reason, str) or not reason.strip():
        return "(no reason)"
    text = " ".join(reason.split())
    for sep in (":", ";"):
        head, found, _ = text.partition(sep)
        if found and head.strip():
            text = head
    return text.strip()[:KIND_CHARS]


def _with_reference(row: Mapping[str, Any], question: str) -> tuple[dict[str, Any], bool]:
    """A copy of ``row`` whose ``privileged`` block holds the reference and a rubric.

    Rows read back from JSONL lost ``privileged`` (every writer scrubs it); it is rebuilt
    from ``scenario_dimensions`` + ``faults`` the way the grade stage does. A top-level
    ``reference`` (rows from elsewhere) is used when there is no block. Returns the copy and
    whether a reference is in place.
    """
    from wai_exp.score.judges.judging import _copy

    out = _copy(dict(row))
    block = out.get("privileged")
    block = dict(block) if isinstance(block, Mapping) else {}
    if not block.get("reference") and isinstance(row.get("reference"), str):
        block["reference"] = row["reference"]
    if not block.get("reference") and isinstance(row.get("scenario_dimensions"), Mapping):
        from wai_exp.score.grade.checklist import privileged_context

        rebuilt = privileged_context(row.get("scenario_dimensions"), row.get("faults"))
        block = {**rebuilt, **{k: v for k, v in block.items() if v}}
    if not block.get("rubric"):
        block["rubric"] = question
    out["privileged"] = block
    return out, bool(block.get("reference"))


def _rate(k: int, n: int) -> tuple[float | None, list[float] | None]:
    return (k / n if n else None), wilson_ci(k, n)


def _example(original: Mapping[str, Any], judged: Mapping[str, Any]) -> dict[str, Any]:
    from wai_exp.score.grade.grading import final_reply

    reply = final_reply(original)
    return {
        "rollout_id": original.get("rollout_id"),
        "task_key": task_key(original),
        "verifier_reward": original.get("reward"),
        "verifier_reason": (original.get("reason") or None),
        "judge_reward": judged.get("reward"),
        "judge_reason": (judged.get("reason") or "")[:EXAMPLE_CHARS] or None,
        "reply": reply[:EXAMPLE_CHARS],
    }


def _judge_sample(
    rows: list[Mapping[str, Any]],
    judge: Callable[[dict], Any],
    question: str,
    concurrency: int,
    timeout: float,
    judge_name: str | None,
) -> tuple[list[dict[str, Any]], int, str | None, list[str]]:
    """Judge copies of ``rows`` with the reference in place; returns the scored copies, how
    many had no reference to read, the judge's name, and ``run_judge``'s self-judging
    warning when the audit judge's model also wrote the rollouts."""
    from wai_exp.score.judges.judging import _judge_name, run_judge

    if not rows:
        return [], 0, judge_name or _judge_name(judge), []
    inputs, missing = [], 0
    for row in rows:
        copy, has_ref = _with_reference(row, question)
        missing += not has_ref
        inputs.append(copy)
    scored = run_judge(
        inputs,
        judge,
        judge_name=judge_name,
        source="audit",
        concurrency=concurrency,
        timeout=timeout,
    )
    # Only the self-judging note carries over: run_judge's other hollow-run notes (no tool
    # called, ...) describe the sample, not the audit.
    own = [w for w in scored.warnings if w.startswith("self_judged")]
    return list(scored.rows), missing, scored.judge_name, own


def _check(sample: Any, passes: Any, concurrency: Any, timeout: Any, fn_warn: Any) -> None:
    for name, value, low in (("sample", sample, 1), ("passes", passes, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    if not isinstance(fn_warn, int | float) or isinstance(fn_warn, bool) or not 0 <= fn_warn <= 1:
        raise ValueError(
            f"fn_warn must be a rate in [0, 1] (default FN_WARN=0.10), got {fn_warn!r}"
        )


@dataclass
class _Tally:
    """Sampled rows the audit judge gave a verdict on (``n``), how many it overturned
    (``k``), the first examples, and the rows it left without a verdict."""

    n: int = 0
    k: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    overturned_rows: list[Mapping[str, Any]] = field(default_factory=list)
    unjudged: int = 0


def _tally(
    originals: Sequence[Mapping[str, Any]],
    judged: Sequence[Mapping[str, Any]],
    overturned: Callable[[float], bool],
) -> _Tally:
    out = _Tally()
    for original, res in zip(originals, judged, strict=True):
        reward = res.get("reward")
        if not isinstance(reward, int | float) or res.get("judge_status") != "ok":
            out.unjudged += 1
            continue
        out.n += 1
        if overturned(reward):
            out.k += 1
            out.overturned_rows.append(original)
            if len(out.examples) < MAX_EXAMPLES:
                out.examples.append(_example(original, res))
    return out


def _draw(
    rows: list[dict], sample: int, passes: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every failed and passed row (by position) and the sorted seeded samples of each.
    Failures first, passes from the same generator after: a run with passes=0 draws the
    same failed sample as one with passes=40."""
    verdicts = np.array([np.nan if (b := binary_reward(r)) is None else b for r in rows])
    failed_idx = np.flatnonzero(verdicts == 0.0)
    passed_idx = np.flatnonzero(verdicts == 1.0)
    rng = as_generator(seed)
    take_f = rng.choice(failed_idx, size=min(sample, failed_idx.size), replace=False)
    take_p = (
        rng.choice(passed_idx, size=min(passes, passed_idx.size), replace=False)
        if passes
        else np.empty(0, dtype=int)
    )
    return failed_idx, passed_idx, np.sort(take_f), np.sort(take_p)


def _findings(
    n_failed: int,
    n_sampled: int,
    sample: int,
    unjudged: int,
    no_ref: int,
    fn_rate: float | None,
    fn_ci: list[float] | None,
    n_over: int,
    n_judged: int,
    est: float | None,
    fn_warn: float,
    fp_rate: float | None,
    fp_ci: list[float] | None,
    fp_k: int,
    fp_n: int,
    notes: list[str],
    warnings: list[str],
) -> str:
    """The audit's summary line, with its notes and warnings appended in reading order."""
    if n_failed == 0:
        warnings.append(
            "no failed row with a verdict (reward 0, judge ok): nothing to audit; grade the "
            "rows with the verifier first"
        )
    elif n_sampled < sample:
        notes.append(f"only {n_failed} failed rows: all of them were audited (sample={sample})")
    if unjudged:
        warnings.append(
            f"{counted(unjudged, 'sampled row')} got no verdict from the audit judge (reward "
            f"None); {'it is' if unjudged == 1 else 'they are'} left out of fn_rate/fp_rate, not "
            "counted either way"
        )
    if no_ref:
        warnings.append(
            f"{counted(no_ref, 'sampled row')} {'carries' if no_ref == 1 else 'carry'} no "
            "reference answer (no privileged.reference, no scenario_dimensions to rebuild it): "
            "the judge answered the question without an answer key"
        )
    if fn_rate is None:
        if n_failed:
            notes.append("fn_rate: not measured (no sampled failed row got a verdict)")
        summary = "verifier false-negative rate: not measured"
    else:
        assert fn_ci is not None  # _rate measures a rate and its interval together
        lo, hi = fn_ci
        summary = (
            f"the judge overturned {n_over} of {n_judged} sampled verifier failures: "
            f"fn_rate {fn_rate:.0%} (95% CI {lo:.0%}-{hi:.0%}), about {est:.0f} of "
            f"{n_failed} failed rows wrongly failed"
        )
        if fn_rate > fn_warn:
            warning = (
                f"the verifier rejects right answers {fn_rate:.0%} of the time (above fn_warn "
                f"{fn_warn:.0%}): fix the verifier before training on these grades"
            )
            summary += "; " + warning
            warnings.append(warning)
        elif hi > fn_warn:
            notes.append(
                f"fn_rate {fn_rate:.0%} is under fn_warn {fn_warn:.0%} but the interval reaches "
                f"{hi:.0%}: audit a larger sample to rule a bad verifier out"
            )
    if fp_rate is not None:
        assert fp_ci is not None  # _rate measures a rate and its interval together
        lo, hi = fp_ci
        summary += (
            f"; the judge failed {fp_k} of {fp_n} sampled passes: fp_rate {fp_rate:.0%} "
            f"(95% CI {lo:.0%}-{hi:.0%})"
        )
    return summary


def audit_grades(
    rows: Sequence[dict],
    judge: Callable[[dict], Any],
    sample: int = 40,
    passes: int = 0,
    question: str = DEFAULT_QUESTION,
    seed: int = 0,
    concurrency: int = 4,
    timeout: float = 120,
    judge_name: str | None = None,
    fn_warn: float = FN_WARN,
) -> dict[str, Any]:
    """Estimate the verifier's false-negative rate from a judged sample.

    ``rows`` carry the verifier's grade (``reward`` 0/1, ``reason``). Up to ``sample``
    failed rows (reward 0 with a verdict: ``resample.binary_reward``) are drawn without
    replacement with ``seed`` and judged by ``judge`` (any ``run_judge`` judge) on copies
    whose ``privileged`` block holds the reference (rebuilt from the row's dimensions when
    it was scrubbed) and ``question`` as the rubric when the row has none. A judge reward
    >= ``PASS_THRESHOLD`` overturns the failure: a false negative. ``passes`` > 0 samples
    that many passed rows the same way; a judge reward below the threshold there is a false
    positive.

    Returns a dict: ``fn_rate`` and ``fn_ci95`` (Wilson; both None with a note when no
    sampled row got a verdict), ``n_judged``, ``n_overturned``, ``n_failed`` (every failed
    row), ``n_sampled``, ``estimated_wrong_fails`` (``fn_rate * n_failed``) with its
    ``_ci95``, ``reasons`` (failure kind -> ``{"sampled", "overturned"}``, most sampled
    first), ``examples`` (up to ``MAX_EXAMPLES`` overturned rows), ``fp_rate``/``fp_ci95``
    (None with a note unless ``passes`` > 0), ``unjudged`` (sampled rows the judge could
    not score, left out of every rate), ``fn_warn``, ``ok`` (measured and at or under
    ``fn_warn``), ``judge``, ``summary``, ``notes`` and ``warnings``. ``rows`` are not
    modified. Raises ``ValueError`` for a bad ``sample``/``passes``/``concurrency``/
    ``timeout``/``fn_warn``, ``TypeError`` when a row is not a dict or ``judge`` is not
    callable.
    """
    _check(sample, passes, concurrency, timeout, fn_warn)
    if not callable(judge):
        raise TypeError(f"judge must be callable (row -> result), got {type(judge).__name__}")
    rows = list(rows)
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"row {i} is a {type(row).__name__}, not a dict; pass graded rows")
    failed_idx, passed_idx, take_f, take_p = _draw(rows, sample, passes, seed)
    picked = [rows[i] for i in take_f] + [rows[i] for i in take_p]
    judged, no_ref, name, judge_warnings = _judge_sample(
        picked, judge, question, concurrency, timeout, judge_name
    )
    j_fail, j_pass = judged[: take_f.size], judged[take_f.size :]
    o_fail = [rows[i] for i in take_f]

    warnings: list[str] = list(judge_warnings)
    notes: list[str] = []
    fn = _tally(o_fail, j_fail, overturned=lambda r: r >= PASS_THRESHOLD)
    kinds = {
        kind: {"sampled": n, "overturned": 0}
        for kind, n in Counter(failure_kind(r.get("reason")) for r in o_fail).items()
    }
    for original in fn.overturned_rows:
        kinds[failure_kind(original.get("reason"))]["overturned"] += 1
    n_judged, n_over, examples = fn.n, fn.k, fn.examples
    unjudged = take_f.size - n_judged
    fn_rate, fn_ci = _rate(n_over, n_judged)
    n_failed = int(failed_idx.size)
    est = fn_rate * n_failed if fn_rate is not None else None
    est_ci = [lo * n_failed for lo in fn_ci] if fn_ci is not None else None

    fp_rate = fp_ci = None
    fp = _Tally()
    if passes:
        fp = _tally([rows[i] for i in take_p], j_pass, overturned=lambda r: r < PASS_THRESHOLD)
        unjudged += fp.unjudged
        fp_rate, fp_ci = _rate(fp.k, fp.n)
        if fp_rate is None:
            notes.append("fp_rate: not measured (no sampled passed row got a verdict)")
    else:
        notes.append("fp_rate: not measured (passes=0; pass passes=40 to audit the passes too)")
    fp_n, fp_k, fp_examples = fp.n, fp.k, fp.examples

    summary = _findings(
        n_failed, int(take_f.size), sample, unjudged, no_ref, fn_rate, fn_ci, n_over, n_judged,
        est, fn_warn, fp_rate, fp_ci, fp_k, fp_n, notes, warnings,
    )  # fmt: skip

    ordered = dict(sorted(kinds.items(), key=lambda kv: (-kv[1]["sampled"], kv[0])))
    return {
        "fn_rate": fn_rate,
        "fn_ci95": fn_ci,
        "n_judged": n_judged,
        "n_overturned": n_over,
        "n_sampled": int(take_f.size),
        "n_failed": n_failed,
        "n_passed": int(passed_idx.size),
        "estimated_wrong_fails": est,
        "estimated_wrong_fails_ci95": est_ci,
        "reasons": ordered,
        "examples": examples,
        "fp_rate": fp_rate,
        "fp_ci95": fp_ci,
        "fp_judged": fp_n,
        "fp_overturned": fp_k,
        "fp_examples": fp_examples,
        "unjudged": unjudged,
        "missing_reference": no_ref,
        "fn_warn": float(fn_warn),
        "ok": fn_rate is not None and fn_rate <= fn_warn,
        "judge": name,
        "sample": sample,
        "passes": passes,
        "seed": seed,
        "summary": summary,
        "notes": notes,
        "warnings": warnings,
    }


def format_audit(report: Mapping[str, Any]) -> str:
    """The block a person reads: the summary, the warnings, then the reasons (failure kind,
    sampled, overturned) and the overturned examples. Raises ``TypeError`` when ``report``
    is not an ``audit_grades`` dict."""
    if not isinstance(report, Mapping) or "summary" not in report:
        raise TypeError("format_audit takes the dict audit_grades returns")
    lines = [f"verifier audit (judge {report.get('judge')}): {report['summary']}"]
    lines += [f"  WARNING: {w}" for w in report.get("warnings") or ()]
    lines += [f"  note: {n}" for n in report.get("notes") or ()]
    reasons = report.get("reasons") or {}
    if reasons:
        width = max(len(k) for k in reasons)
        lines.append(f"  {'failure kind'.ljust(width)}  sampled  overturned")
        for kind, c in reasons.items():
            lines.append(f"  {kind.ljust(width)}  {c['sampled']:>7}  {c['overturned']:>10}")
    for ex in report.get("examples") or ():
        lines.append(
            f"  overturned {ex.get('rollout_id') or ex.get('task_key')}: verifier said "
            f"{ex.get('verifier_reason')!r}; judge said {ex.get('judge_reason')!r}"
        )
    for ex in report.get("fp_examples") or ():
        lines.append(
            f"  judge failed a pass {ex.get('rollout_id') or ex.get('task_key')}: "
            f"{ex.get('judge_reason')!r}"
        )
    return "\n".join(lines)


__all__ = ["DEFAULT_QUESTION", "FN_WARN", "PASS_THRESHOLD", "audit_grades", "format_audit"]
