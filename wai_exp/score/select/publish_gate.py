"""The gate a dataset passes before it leaves for the platform: check, calibrate, report.

``calibrate`` stamps each graded row with its task's measured difficulty (pass rate over the
k repeats, the band, who produced it). ``publish_gate`` refuses RL-shaped rows that are
ungraded or carry no mixed group (nothing for a grouped update to learn from), and, with
``strict_hacks``, rows whose reward ``hack_scan`` says is best explained by something other
than what it should track. A refusal raises ``PublishGateError`` carrying the full report
(``err.report``), so the pipeline can record it as a result.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wai_exp.domain.gc_tuning import without_gc
from wai_exp.rows.keys import task_key
from wai_exp.rows.load import read_reward
from wai_exp.rows.reader import row_messages
from wai_exp.score.select.trim import (
    DEFAULT_BAND,
    check_band,
    group_stats,
    put_calibration,
)
from wai_exp.score.stats.row_facts import as_rows, row_facts, shares_row_facts


class PublishGateError(RuntimeError):
    """The dataset must not be published as it stands. The message says why.

    ``report`` is the gate's full report (``verdict == "refused"``, ``reasons``), so a caller
    that treats the refusal as a result can record it without re-running the gate.
    """

    def __init__(self, message: str, report: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.report = report or {}


def _policy_label(policy: Any) -> Any:
    """A JSON-friendly form of ``policy``: str and dict as given, a pydantic model or a
    dataclass as its dict, anything else as ``str``."""
    if policy is None or isinstance(policy, str):
        return policy
    if isinstance(policy, Mapping):
        return dict(policy)
    if hasattr(policy, "model_dump"):
        return policy.model_dump()
    if dataclasses.is_dataclass(policy) and not isinstance(policy, type):
        return dataclasses.asdict(policy)
    return str(policy)


def _pass_at_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``pass_at(rows)`` as a dict without the per-task table (one entry per task is too big
    for a summary; ``calibration`` carries each task's rate on its rows)."""
    from wai_exp.score.stats.passat import pass_at

    res = pass_at(rows)
    out = res.to_dict()
    out.pop("per_task", None)
    return out


@without_gc
@shares_row_facts
def calibrate(
    rows: Sequence[dict[str, Any]],
    policy: Any = None,
    model: str | None = None,
    ref: str | Sequence[dict[str, Any]] | None = None,
    band: tuple[float, float] = DEFAULT_BAND,
) -> dict[str, Any]:
    """Stamp ``calibration`` on every row with a 0/1 reward, in place.

    The stamp is the row's task difficulty: ``pass_rate`` and ``n_pass`` over the task's
    binary rewards (grouped by ``task_key``, the grouping ``group_signal`` and ``pass_at``
    use), ``k``, ``band`` and ``in_band``, plus ``policy`` (this call's, else the row's
    ``policy_version``) and ``model`` (else ``model_version``). Rows without a 0/1 reward
    are left alone and counted. A row whose carried stamp counts more repeats than these
    rows hold keeps its pass rate (``n_carried``): a dedupe upstream shrank the group, and
    re-measuring would report the post-dedup k; the policy, model and ``mean_kl`` are still
    filled in. ``ref`` (a key holding the reference model's summed logprob, or rows scored
    under it) fills ``mean_kl`` per task: sum(logprob - ref) over generated tokens, pooled
    over the task's rollouts.

    Returns ``tasks_stamped``, ``rows_stamped``, ``rows_skipped``, ``n_carried``, ``band``,
    ``policy``, ``model``, ``mean_kl`` (overall, or None with a note) and ``pass_at`` (the
    ``pass_at`` summary without its per-task table). Raises ``ValueError`` for a bad band.
    """
    lo, hi = check_band(*band)
    rows = as_rows(rows)
    binary = row_facts(rows).binary
    stats = group_stats(rows)
    pol = _policy_label(policy)
    kl_task: dict[int, float] = {}
    kl_note = (
        "pass ref= (a key holding the reference logprob, or reference-scored rows) to fill mean_kl"
    )
    kl_overall: float | None = None
    n_kl = 0
    if ref is not None:
        # Imported here: only a call with ref= pays for the logprob module.
        from wai_exp.score.diagnose.logprobs import mean_kl

        kl = mean_kl(rows, ref=ref)
        n_kl = kl["n_used"]
        kl_overall = kl["mean_kl"]
        # mean_kl groups by task_key, as group_stats does, so its task keys are stats.keys.
        group_of = {k: g for g, k in enumerate(stats.keys)}
        kl_task = {group_of[k]: t["mean_kl"] for k, t in kl["per_task"].items()}
        if kl_overall is not None:
            kl_note = f"{len(rows) - n_kl} rows lacked a logprob on one side and were skipped"
        else:
            kl_note = (
                "no row carried both its own logprob and the reference's: mean_kl not measured"
            )
    eps = 1e-9
    carried = 0
    # One stamp per task, copied onto its rows (put_calibration copies): building a dict per
    # row from numpy scalars is most of this call's time on 100,000 rows.
    per_task: list[dict[str, Any]] = []
    for g, (rate, k, n_pass) in enumerate(
        zip(stats.pass_rate.tolist(), stats.k.tolist(), stats.n_pass.tolist(), strict=True)
    ):
        stamp = {
            "pass_rate": rate,
            "k": int(k),
            "n": int(k),  # row-v1's name for the rollouts the rate is over
            "n_pass": int(n_pass),
            "band": [lo, hi],
            "in_band": bool(lo - eps <= rate <= hi + eps),
            "policy": pol,
            "model": model,
            "source": "calibrate",
        }
        if g in kl_task:
            stamp["mean_kl"] = kl_task[g]
        per_task.append(stamp)
    graded_at = np.isfinite(binary)
    graded = graded_at.tolist()
    # A task's rows mostly share one policy and model: one stamp per (task, policy, model)
    # seen, instead of a fresh dict per row before put_calibration copies it again.
    own: dict[tuple[int, Any, Any], dict[str, Any]] = {}
    for row, g, ok in zip(rows, stats.inv.tolist(), graded, strict=True):
        if not ok:
            continue
        stamp = per_task[g]
        if pol is None or model is None:
            who = (
                pol if pol is not None else row.get("policy_version"),
                model if model is not None else row.get("model_version"),
            )
            try:
                mine = own.get((g, *who))
            except TypeError:  # an unhashable version: build this row's stamp alone
                mine = None
                cacheable = False
            else:
                cacheable = True
            if mine is None:
                mine = {**stamp, "policy": who[0], "model": who[1]}
                if cacheable:
                    own[(g, *who)] = mine
            stamp = mine
        if row.get("calibration") is None:
            row["calibration"] = dict(stamp)  # put_calibration's case with no carried stamp
        else:
            carried += put_calibration(row, stamp)
    stamped = int(graded_at.sum())
    n_tasks = int(np.unique(stats.inv[graded_at]).size)
    pa = _pass_at_summary(rows)
    return {
        "tasks_stamped": n_tasks,
        "rows_stamped": stamped,
        "rows_skipped": len(rows) - stamped,
        "n_carried": carried,
        "band": [lo, hi],
        "policy": pol,
        "model": model,
        "mean_kl": {"overall": kl_overall, "tasks": len(kl_task), "rows": n_kl, "note": kl_note},
        "pass_at": pa,
    }


def _unfit_counts(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """One pass over the rows for the checks every set must pass, read before ``calibrate``
    re-stamps anything:

    * ``out_of_range``: a numeric ``reward`` outside [0, 1] (or NaN/inf), the judge
      contract's range, so a broken judge rather than a strong signal;
    * ``no_prompt``: neither a ``prompt`` nor any ``messages``, nothing a trainer can feed in;
    * ``dup_rows`` / ``dup_ids``: rows whose ``rollout_id`` an earlier row already carried
      (a rollout counted twice: a double-appended file, overlapping runs merged), and how
      many ids repeat; rows without an id are not counted;
    * ``contra_rows`` / ``contra_asks``: rows whose ``select_for_rl`` stamp (band enforced)
      has a ``pass_rate`` outside its ``band`` or says ``in_band: false``;
    * ``text_numbers`` / ``text_words``: rewards that are text, read as ``load_rows`` reads
      them (``rows.load.read_reward``): a number written as text (``"1.0"``), or a word
      that is no verdict (``"pass"``);
    * ``judge_trust``: the judge-trust summary ``grade`` stamped on rows that carried human
      labels (the first row's that has one), else None. Read in this pass because each
      pass over 100,000 rows costs mostly the fetching of every row.
    """
    eps = 1e-9
    out_of_range = no_prompt = contra = 0
    text_rewards: Counter[str] = Counter()
    ids: list[str] = []
    contra_asks: set[str] = set()
    jt: Any = None
    for row in rows:
        if jt is None:
            jt = row.get("judge_trust")
            if jt is None:
                meta = row.get("judge_meta")
                if meta:
                    jt = meta.get("judge_trust")
        r = row.get("reward")
        if type(r) is float:  # the common case first: this runs once per row
            if not 0.0 <= r <= 1.0:
                out_of_range += 1
        elif isinstance(r, int | float) and not isinstance(r, bool) and not 0.0 <= r <= 1.0:
            out_of_range += 1
        elif isinstance(r, str):
            # Read as load_rows reads it: '1.0' is a number written as text, 'pass' no verdict.
            text_rewards[read_reward(r)[1] or "text"] += 1
        prompt = row.get("prompt")
        # For a str, "strip() leaves something" is "non-empty and not all whitespace",
        # without building the stripped copy.
        has_prompt = (
            (prompt != "" and not prompt.isspace()) if isinstance(prompt, str) else bool(prompt)
        )
        if not has_prompt and not row_messages(row):
            no_prompt += 1
        rid = row.get("rollout_id")
        if rid is not None and rid != "":
            ids.append(rid if type(rid) is str else str(rid))
        cal = row.get("calibration")
        if (
            isinstance(cal, dict)
            and cal.get("source") == "select_for_rl"
            and cal.get("band_enforced") is not False
        ):
            rate, band = cal.get("pass_rate"), cal.get("band")
            outside = False
            if isinstance(rate, int | float) and isinstance(band, list | tuple) and len(band) == 2:
                outside = not (float(band[0]) - eps <= float(rate) <= float(band[1]) + eps)
            if outside or cal.get("in_band") is False:
                contra += 1
                contra_asks.add(task_key(row))
    # Counting every id is only needed when some repeat (a set is cheaper than a Counter).
    repeated = [] if len(set(ids)) == len(ids) else [n for n in Counter(ids).values() if n > 1]
    return {
        "out_of_range": out_of_range,
        "no_prompt": no_prompt,
        "dup_rows": sum(n - 1 for n in repeated),
        "dup_ids": len(repeated),
        "contra_rows": contra,
        "contra_asks": len(contra_asks),
        "text_numbers": text_rewards["text"],
        "text_words": text_rewards["unreadable"],
        "judge_trust": jt,
    }


def _undeclared_tool_rows(
    rows: Sequence[dict[str, Any]],
) -> tuple[int, list[tuple[str, list[str]]]]:
    """``(rows that declare their own tools, [(rollout id, tools called but not declared)])``.
    Rows without a ``tools`` list (the engine's: the agent spec declares them) are skipped;
    a row the reader cannot read is left to the checks that read it."""
    from wai_exp.rows.export import tool_names
    from wai_exp.rows.reader import RowShapeError, read_steps

    declared_rows = 0
    out: list[tuple[str, list[str]]] = []
    for row in rows:
        tools = row.get("tools")
        if not isinstance(tools, list | tuple) or not tools:
            continue
        declared = tool_names(tools)
        if not declared:
            continue
        declared_rows += 1
        try:
            _, steps = read_steps(row)
        except RowShapeError:
            continue
        called = {
            str(c.get("name"))
            for s in steps
            if s.get("kind") == "assistant"
            for c in s.get("tool_calls") or ()
        }
        absent = sorted(called - declared)
        if absent:
            out.append((str(row.get("rollout_id") or task_key(row)[:60]), absent))
    return declared_rows, out


def _text_rewards_reason(numbers: int, words: int, n_rows: int) -> str:
    """Why rows whose reward is text are refused, and the fix for each kind."""
    kinds = []
    if numbers:
        kinds.append(
            f"{numbers} numbers written as text such as '1.0': read the file with "
            "wai_exp.rows.load_rows (which reads them as numbers) or write numbers"
        )
    if words:
        kinds.append(
            f"{words} words such as 'pass' that are no verdict: grade those rows "
            "(run_judge / the grade stage) or write 0/1"
        )
    return (
        f"{numbers + words} of {n_rows} rows carry a reward that is text, not a number, so "
        f"every count and rate here would read them as unjudged ({'; '.join(kinds)})"
    )


def _rows_mode(rows: Sequence[dict[str, Any]]) -> str | None:
    modes = Counter(str(r["mode"]) for r in rows if r.get("mode"))
    return modes.most_common(1)[0][0] if modes else None


@without_gc
def _why_not_run(
    checks: dict[str, bool | None],
    rows: list[dict[str, Any]],
    rl_shaped: bool,
    mode: Any,
    scan: dict[str, Any],
) -> dict[str, str]:
    """``{check: why it did not run}`` for every check left ``None``: a check that never ran
    neither passed nor failed, and the report says so in words."""
    why: dict[str, str] = {}
    for name, value in checks.items():
        if value is not None:
            continue
        if not rows:
            why[name] = "there are no rows to check"
        elif name in ("graded", "mixed_group") and not rl_shaped:
            why[name] = (
                f"the rows are not RL-shaped (mode {mode!r}, no ask has two or more rollouts): "
                "a grouped update's checks do not apply"
            )
        elif name == "tools_declared":
            why[name] = (
                "the rows are RL-shaped: a call to a tool the prompt never offers is the "
                "policy's mistake, and its reward says so"
                if rl_shaped
                else "no row declares its own tools (the agent spec's are checked at publish)"
            )
        elif name == "hack_free":
            said = [w for w in scan.get("warnings") or () if isinstance(w, str)]
            why[name] = (
                "hack_scan could not classify the reward (regime unknown"
                + (f": {said[-1]}" if said else ", too few graded mixed asks to test features")
                + ") and no endorsed features were given"
            )
        else:
            why[name] = "its input was not available"
    return why


@without_gc
@shares_row_facts
def _row_checks(
    rows: list[dict[str, Any]],
    unfit: Mapping[str, Any],
    declared_rows: int,
    undeclared: list[tuple[Any, Any]],
) -> dict[str, bool | None]:
    """Every check, True/False for the ones the rows decide (None: did not run)."""
    checks: dict[str, bool | None] = {
        "non_empty": bool(rows),
        "rewards_in_range": None,
        "prompts": None,
        "unique_rollout_ids": None,
        "stamps_in_band": None,
        "rewards_are_numbers": None,
        "tools_declared": None,
        "graded": None,
        "mixed_group": None,
        "hack_free": None,
    }
    if rows:
        checks["rewards_in_range"] = unfit["out_of_range"] == 0
        checks["prompts"] = unfit["no_prompt"] == 0
        checks["unique_rollout_ids"] = unfit["dup_rows"] == 0
        checks["stamps_in_band"] = unfit["contra_rows"] == 0
        checks["rewards_are_numbers"] = unfit["text_numbers"] + unfit["text_words"] == 0
        if declared_rows:
            checks["tools_declared"] = not undeclared
    return checks


def _unfit_problems(
    unfit: Mapping[str, Any], n_rows: int, declared_rows: int, undeclared: list[tuple[Any, Any]]
) -> list[str]:
    """One reason per kind of unfit row, with its count and the fix."""
    problems: list[str] = []
    n_out_of_range, n_no_prompt = unfit["out_of_range"], unfit["no_prompt"]
    n_dup_rows, n_dup_ids = unfit["dup_rows"], unfit["dup_ids"]
    n_contra_rows, n_contra_asks = unfit["contra_rows"], unfit["contra_asks"]
    if n_out_of_range:
        problems.append(
            f"{n_out_of_range} of {n_rows} rows carry a reward outside [0, 1] (the judge "
            f"contract's range): fix the judge, or give it scale=(lo, hi) to map its ratings"
        )
    if n_no_prompt:
        problems.append(
            f"{n_no_prompt} of {n_rows} rows carry neither a prompt nor messages: a trainer "
            f"has nothing to feed in; drop them or fix the writer"
        )
    if n_dup_rows:
        problems.append(
            f"{n_dup_rows} rows repeat a rollout_id ({n_dup_ids} ids appear more than once): a "
            f"rollout counted twice skews every group; dedupe the file (was it appended twice?)"
        )
    if n_contra_rows:
        problems.append(
            f"{n_contra_rows} rows in {n_contra_asks} asks carry a select_for_rl stamp whose "
            f"pass rate lies outside the band they were selected for: re-run select_for_rl "
            f"(optimize) on the graded rows"
        )
    if unfit["text_numbers"] + unfit["text_words"]:
        # Every mode: an SFT set kept by a text verdict is as unread as an RL one.
        problems.append(_text_rewards_reason(unfit["text_numbers"], unfit["text_words"], n_rows))
    if undeclared:
        first_id, first_names = undeclared[0]
        problems.append(
            f"{len(undeclared)} of {declared_rows} rows that declare their tools call a tool "
            f"absent from them (first: {first_id!r} calls {first_names}): a trainer would "
            "teach the model tools it is not given; add the tools to the rows' `tools`, or "
            "drop those rows"
        )
    return problems


def _rl_problems(
    checks: Mapping[str, bool | None], signal: Mapping[str, Any], n_text: int
) -> list[str]:
    """What an RL-shaped set lacks: a grade, or a mixed group to learn from."""
    if not checks["graded"]:
        # Text rewards are "not read", not "no reward": the unfit reason says so.
        if n_text:
            return []
        return [
            "RL-shaped rows are ungraded (no row carries a reward): grade them "
            "(run_judge / the grade stage) before publishing"
        ]
    if not checks["mixed_group"]:
        return [
            f"RL-shaped rows carry no mixed group ({signal['all_pass']} asks all-pass, "
            f"{signal['all_fail']} all-fail, {signal['asks_single']} single): a grouped update "
            f"learns nothing; run optimize/select_for_rl or simulate harder asks"
        ]
    return []


#: The hack_scan keys publish_gate's report carries (with the five top features).
_SCAN_SUMMARY = (
    "regime",
    "tau",
    "top_feature",
    "endorsed_on_top",
    "integrity",
    "inverted",
    "collinear",
    "asks_mixed",
    "asks_all_pass",
    "asks_all_fail",
    "gradient_capacity",
    "distinct_per_ask",
    "sampled",
    "warnings",
)


def _scan_summary(scan: Mapping[str, Any]) -> dict[str, Any]:
    return {k: scan.get(k) for k in _SCAN_SUMMARY} | {"features": scan.get("features", [])[:5]}


def publish_gate(
    rows: Sequence[dict[str, Any]],
    mode: str | None = None,
    band: tuple[float, float] = DEFAULT_BAND,
    policy: Any = None,
    model: str | None = None,
    strict: bool = True,
    endorsed: Sequence[str] = (),
    strict_hacks: bool = False,
) -> dict[str, Any]:
    """Check, calibrate, and report.

    ``mode`` defaults to the rows' own ``mode``: ``"rl"`` rows are *RL-shaped*, ``"sft"`` rows
    are not, and otherwise (no mode, ``explore``, ...) rows are RL-shaped when some task has
    two or more rollouts. Checks: any set must be non-empty, every numeric ``reward`` must lie
    in [0, 1] (``rewards_in_range``), every row must carry a ``prompt`` or ``messages``
    (``prompts``), no ``rollout_id`` may repeat (``unique_rollout_ids``), and no
    ``select_for_rl`` stamp may carry a pass rate outside the band it was selected for
    (``stamps_in_band``; read before this call re-stamps), and no ``reward`` may be text
    (``rewards_are_numbers``: ``"1.0"`` and ``"pass"`` are read as ``load_rows`` reads them
    and refused in every mode, naming the fix for each), and in a set that is not RL-shaped
    no row that declares its own ``tools`` may call a tool absent from them
    (``tools_declared``, counted in ``n_undeclared_tool_calls``). An RL-shaped set must also be
    graded (some row carries a numeric reward) and carry at least one mixed group (an ask
    whose rewards disagree). Each failed check is a reason with its count. ``hack_scan``
    (with ``endorsed``) always runs for the report.

    Raises ``PublishGateError`` (with ``err.report``) when ``strict`` and a check fails, or
    when ``strict_hacks`` and the scan's regime is ``reward_hack``. With ``strict=False`` a
    failed check becomes a warning and the verdict stays ``"passed"``. Never mutates anything
    except the ``calibration`` stamp (``calibrate`` on the graded rows).

    Returns ``verdict`` (``"passed"`` / ``"refused"``), ``reasons`` (why refused), ``warnings``,
    ``checks`` (True, False, or None for a check that did not run), ``checks_not_run``
    (``{check: why}`` for each None), ``mode``, ``rl_shaped``, row counts, ``group_signal``,
    ``calibration`` (the ``calibrate`` report), ``pass_at`` (summary), ``hack_scan`` (summary: regime, tau, top
    feature, integrity, endorsed_on_top, inverted, collinear, support, warnings) and
    ``judge_trust`` (None unless ``grade`` stamped one).
    """
    from wai_exp.score.diagnose.hack_scan import hack_scan
    from wai_exp.score.select.optimize import group_signal

    lo, hi = check_band(*band)
    rows = as_rows(rows)
    resolved = mode or _rows_mode(rows)
    signal = group_signal(rows, lo=lo, hi=hi)
    if resolved in ("rl", "sft"):
        rl_shaped = resolved == "rl"
    else:
        # No mode, or one that does not say (explore, eval): RL-shaped means repeats per ask.
        rl_shaped = any(n >= 2 for n in Counter(row_facts(rows).keys).values())
    n_numeric = int((~np.isnan(row_facts(rows).reward_under())).sum())
    # Read the incoming stamps before calibrate re-stamps them.
    unfit = _unfit_counts(rows)
    n_text = unfit["text_numbers"] + unfit["text_words"]
    # A demonstration (SFT, preference) calling a tool its own `tools` lacks teaches the
    # model to call tools it is not given. RL rows are exempt: that call is the policy's.
    declared_rows, undeclared = (0, []) if rl_shaped else _undeclared_tool_rows(rows)
    scan = hack_scan(rows, endorsed=endorsed)
    calibration = calibrate(rows, policy=policy, model=model, band=(lo, hi))

    checks = _row_checks(rows, unfit, declared_rows, undeclared)
    problems = [] if rows else ["no rows to publish"]
    problems += _unfit_problems(unfit, len(rows), declared_rows, undeclared)
    if rl_shaped and rows:
        checks["graded"] = n_numeric > 0
        checks["mixed_group"] = signal["mixed"] > 0 or scan["asks_mixed"] > 0
        problems += _rl_problems(checks, signal, n_text)
    if scan["regime"] != "unknown" or endorsed:
        checks["hack_free"] = scan["regime"] != "reward_hack"
    not_run = _why_not_run(checks, rows, rl_shaped, resolved, scan)
    reasons = list(problems) if strict else []
    warnings = [] if strict else list(problems)
    if scan["regime"] == "reward_hack":
        said = [w for w in scan["warnings"] if w.startswith("reward hack:")]
        msg = (
            said[-1]
            if said
            else f"reward hack: the reward is best explained by {scan['top_feature']}"
        )
        (reasons if strict_hacks else warnings).append("hack_scan " + msg)
    n_unjudged = len(rows) - n_numeric
    if rows and n_unjudged:
        warnings.append(
            f"{n_unjudged} of {len(rows)} rows carry no reward (unjudged); they are not failures"
        )
    jt = unfit["judge_trust"]
    verdict = "refused" if reasons else "passed"
    report = {
        "verdict": verdict,
        "reasons": reasons,
        "warnings": warnings,
        "checks": checks,
        "checks_not_run": not_run,
        "mode": resolved,
        "rl_shaped": rl_shaped,
        "strict": strict,
        "strict_hacks": strict_hacks,
        "n_rows": len(rows),
        "n_graded": n_numeric,
        "n_unjudged": n_unjudged,
        "n_reward_out_of_range": unfit["out_of_range"],
        "n_no_prompt": unfit["no_prompt"],
        "n_duplicate_rollout_ids": unfit["dup_rows"],
        "n_stamps_out_of_band": unfit["contra_rows"],
        "n_undeclared_tool_calls": len(undeclared),
        "band": [lo, hi],
        "group_signal": signal,
        "calibration": {k: v for k, v in calibration.items() if k != "pass_at"},
        "pass_at": calibration["pass_at"],
        "hack_scan": _scan_summary(scan),
        "judge_trust": jt,
    }
    if reasons:
        raise PublishGateError("publish_gate refused: " + "; ".join(reasons), report)
    return report
