"""Stage ``compare``: ``delta_report`` between two upstream stages' graded rows.

Params (``pipeline.stages.<name>.params``)::

    before: grade_base        # stage whose rows are the before arm (default: first need)
    after: grade_trained      # stage whose rows are the after arm (default: second need)
    target: pass_at_1         # or "marker:<name>"
    by: null                  # row key / marker name to split the target by
    must_not_regress: []      # metrics whose significant drop fails the report
    markers: null             # which markers to compare (default: every shared one)
    proxy: null               # the metric the run was trained on, for over_optimized
    run_std: null             # a number or {metric: sd}; default: an upstream eval_variance's
    run_std_runs: null        # how many re-runs run_std came from
    n_boot: 2000
    balance_rollouts: false
    alpha: 0.05
    power: 0.8

With ``judge=pairwise`` the stage also asks a model which arm's reply to the same task is
better, both ways round (``judge_pairs``): rows of the two arms are paired per task (same
task key, same eval run and rollout index), at most ``judge.pairwise.max_pairs`` pairs
spread round-robin over the tasks, and ``report["pairwise"]`` holds the after arm's win rate
and the before arm's, each with a Wilson interval, the tie and failure counts and the
position-flip rate. Metrics ``pairwise_after_win_rate`` (+ bounds) and
``pairwise_position_flip_rate``.

Each arm's lost rollouts count as its grade stage counted them (``arm_lost``: the
report's ``lost`` block, ``by_task`` under ``simulate.lost_as=failure``), so the delta's
pass@1 for an arm equals that arm's own; ``report["lost_lines"]`` says so per arm.

An upstream ``eval_variance`` stage among the needs (any input whose report carries
``run_std_by_metric``) supplies ``run_std`` (per metric) and ``run_std_runs`` unless the
params give them. The seed is the run's ``seed``.

Report: the ``delta_report`` dict; text: ``format_delta_report``. Metrics: ``delta``,
``delta_ci_lo``, ``delta_ci_hi``, ``before``, ``after``, ``n_paired_tasks``,
``n_unpaired_tasks``, ``p_value``, ``run_std``, ``noise_band``, ``family_error``, ``ok`` and
``<metric>_delta`` (+ ``_ci_lo``/``_ci_hi``) for every marker; an unmeasured number is left
out (the report says why). Tag ``delta_verdict`` is the headline verdict.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from wai_exp.pipeline.registry import StageContext, StageResult, register

#: params passed to delta_report as they are
PASSED = (
    "target",
    "by",
    "must_not_regress",
    "markers",
    "proxy",
    "run_std",
    "run_std_runs",
    "n_boot",
    "balance_rollouts",
    "alpha",
    "power",
    "ceiling_pass_rate",
    "answered_gap_points",
    "answered_alpha",
)
KNOWN = {*PASSED, "before", "after", "run_std_from"}


def _metric_key(name: str) -> str:
    # MLflow metric names allow letters, digits, _ - . / and spaces
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", name)


def _is_variance(result: StageResult) -> bool:
    return isinstance(result.report, dict) and "run_std_by_metric" in result.report


def pick_arms(
    name: str, params: dict[str, Any], inputs: dict[str, StageResult]
) -> tuple[str, str, StageResult | None]:
    """(before stage, after stage, eval_variance result or None) for a compare stage.

    Raises ``ValueError`` naming the fix when the arms cannot be told apart.
    """
    arms = [n for n, r in inputs.items() if not _is_variance(r)]
    before, after = params.get("before"), params.get("after")
    if before is None and after is None:
        if len(arms) != 2:
            raise ValueError(
                f"stage {name!r} (kind compare) needs two arms; its needs give {arms or 'none'}. "
                "List both graded stages in `needs` or set params.before / params.after"
            )
        before, after = arms
    for side, value in (("before", before), ("after", after)):
        if value not in inputs:
            raise ValueError(
                f"stage {name!r}: params.{side}={value!r} is not one of its needs "
                f"({', '.join(inputs) or 'none'}); add it to `needs`"
            )
    source = params.get("run_std_from")
    variance = None
    if source is not None:
        if source not in inputs or not _is_variance(inputs[source]):
            raise ValueError(
                f"stage {name!r}: params.run_std_from={source!r} must name an eval_variance "
                "stage listed in `needs`"
            )
        variance = inputs[source]
    else:
        variance = next((r for n, r in inputs.items() if _is_variance(r)), None)
    return str(before), str(after), variance


def delta_metrics(report: dict[str, Any]) -> dict[str, float]:
    """The flat headline metrics of a delta_report (None values left out)."""
    t = report["metrics"][report["target"]]
    ci = report.get("target_ci95") or [None, None]
    raw: dict[str, Any] = {
        "delta": report.get("target_delta"),
        "delta_ci_lo": ci[0],
        "delta_ci_hi": ci[1],
        "before": t.get("before"),
        "after": t.get("after"),
        "p_value": t.get("p_value"),
        "n_paired_tasks": report.get("n_paired_tasks"),
        "n_unpaired_tasks": report.get("n_unpaired_tasks"),
        "run_std": report.get("run_std"),
        "noise_band": report.get("noise_band"),
        "family_error": report.get("family_error"),
        "ok": 1.0 if report.get("ok") else 0.0,
    }
    for name, m in report["metrics"].items():
        if name == report["target"]:
            continue
        key = _metric_key(name)
        mci = m.get("ci95") or [None, None]
        raw[f"{key}_delta"] = m.get("delta")
        raw[f"{key}_delta_ci_lo"] = mci[0]
        raw[f"{key}_delta_ci_hi"] = mci[1]
    return {k: float(v) for k, v in raw.items() if v is not None}


def arm_pairs(
    before: list[dict[str, Any]], after: list[dict[str, Any]], max_pairs: int, seed: int
) -> list[dict[str, Any]]:
    """Pairs ``{"chosen": after row, "rejected": before row, "task_key", ...}`` of the two
    arms' rows on the same task (matched by eval run and rollout index, in that order),
    at most ``max_pairs``, taken round-robin over the tasks in a seeded order so no task
    fills the budget alone. Tasks on one side only give no pair."""
    import random

    from wai_exp.rows.keys import task_key

    def grouped(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            out.setdefault(task_key(r), []).append(r)
        for group in out.values():
            group.sort(
                key=lambda r: (
                    int((r.get("lineage") or {}).get("eval_run") or 0),
                    int(r.get("rollout_index") or 0),
                    str(r.get("rollout_id") or ""),
                )
            )
        return out

    b, a = grouped(before), grouped(after)
    tasks = sorted(set(a) & set(b))
    random.Random(seed).shuffle(tasks)
    per_task = {t: list(zip(a[t], b[t], strict=False)) for t in tasks}
    pairs: list[dict[str, Any]] = []
    depth = 0
    while len(pairs) < max_pairs and any(depth < len(p) for p in per_task.values()):
        for t in tasks:
            if depth < len(per_task[t]) and len(pairs) < max_pairs:
                after_row, before_row = per_task[t][depth]
                pairs.append(
                    {
                        "chosen": after_row,
                        "rejected": before_row,
                        "task_key": t,
                        "chosen_score": after_row.get("reward"),
                        "rejected_score": before_row.get("reward"),
                    }
                )
        depth += 1
    return pairs


def side_by_side(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    judge_cfg: dict[str, Any],
    seed: int,
    judge: Any = None,
) -> dict[str, Any]:
    """The ``judge=pairwise`` block: the two arms' replies judged side by side by a model.
    ``judge`` replaces the model judge (tests). Raises ``ValueError`` as the judge's
    config does (no model, a bad spec, an unset key variable)."""
    from wai_exp.config.models import JudgeConfig
    from wai_exp.score.judges.pairwise import judge_pairs, pairwise_judge
    from wai_exp.score.stats.resample import wilson_ci

    typed = JudgeConfig.model_validate(judge_cfg)
    opts = typed.pairwise
    if judge is None:
        from wai_exp.pipeline.stages.grade import judge_api_key, judge_model_spec

        judge = pairwise_judge(
            judge_model_spec(judge_cfg),
            api_key=judge_api_key(judge_cfg),
            prompt=typed.prompt,
            timeout=typed.request_timeout,
            max_tokens=opts.max_tokens,
            structured_output=typed.structured_output,
        )
    pairs = arm_pairs(before, after, opts.max_pairs, seed)
    if not pairs:
        return {
            "n_pairs": 0,
            "note": "no task has rows on both arms: nothing to compare side by side",
        }
    pairs, rep = judge_pairs(
        pairs,
        judge,
        swap=opts.swap,
        concurrency=typed.concurrency,
    )
    wins = {"after": 0, "before": 0, "tie": 0}
    for p in pairs:
        w = p["pairwise"]["winner"]
        if w == "chosen":
            wins["after"] += 1
        elif w == "rejected":
            wins["before"] += 1
        elif w == "tie":
            wins["tie"] += 1
    judged = sum(wins.values())
    return {
        "n_pairs": len(pairs),
        "judged": judged,
        "failed": rep["failed"],
        "after_wins": wins["after"],
        "before_wins": wins["before"],
        "ties": wins["tie"],
        "after_win_rate": wins["after"] / judged if judged else None,
        "after_win_rate_ci95": wilson_ci(wins["after"], judged),
        "before_win_rate": wins["before"] / judged if judged else None,
        "before_win_rate_ci95": wilson_ci(wins["before"], judged),
        **(judge.structured_meta() if hasattr(judge, "structured_meta") else {}),
        "position_flip_rate": rep["position_flip_rate"],
        "position_flip_rate_ci95": rep.get("position_flip_rate_ci95"),
        "swap": rep["swap"],
        "judge": rep["judge"],
        "model": getattr(judge, "model", None),
        "failed_reasons": rep["failed_reasons"][:5],
        "warnings": rep["warnings"],
    }


def _pairwise_lines(block: dict[str, Any]) -> list[str]:
    if not block.get("judged"):
        why = block.get("note") or f"every one of {block.get('n_pairs', 0)} pairs failed"
        return [f"pairwise: not measured ({why})"]

    def iv(ci: Any) -> str:
        return f" [{ci[0]:.0%}, {ci[1]:.0%}]" if ci else ""

    n = block["judged"]
    lines = [
        f"pairwise ({block['judge']}): after better in {block['after_wins']} of {n} judged "
        f"pairs ({block['after_win_rate']:.0%}{iv(block['after_win_rate_ci95'])}), before "
        f"better in {block['before_wins']} ({block['before_win_rate']:.0%}"
        f"{iv(block['before_win_rate_ci95'])}), ties {block['ties']}, failed {block['failed']}"
    ]
    if block.get("position_flip_rate") is not None:
        lines.append(
            f"pairwise: the verdict flipped with the order on {block['position_flip_rate']:.0%}"
            f"{iv(block.get('position_flip_rate_ci95'))} of pairs (counted as ties)"
        )
    lines += [f"warning: {w}" for w in block.get("warnings") or []]
    return lines


class ArmLost(NamedTuple):
    """What an arm's lost rollouts are in a compare: ``by_task`` (``pass_at``'s ``lost``)
    to count as failed rows, or None; and the line that says so, or None (nothing lost)."""

    by_task: dict[str, list[str | None]] | None
    line: str | None


def arm_lost(side: str, report: Any, where: str | None = None) -> ArmLost:
    """How the run behind one arm counted its lost rollouts, from its graded stage's
    ``report`` (grade.py's ``lost`` block), so the compare counts them the same way.
    ``report`` None: the rows came from elsewhere (``where``), so their lost rollouts, if
    any, cannot be known; the line says so."""
    if not isinstance(report, dict):
        return ArmLost(
            None,
            f"{side}: lost rollouts not known (rows from {where or 'elsewhere'}, not a run's "
            "graded stage): only its rows are scored; a run that lost rollouts and counted "
            "them as failures reads lower in its own pass@1",
        )
    block = report.get("lost")
    if not isinstance(block, dict) or not block.get("rollouts"):
        return ArmLost(None, None)
    n, how = int(block["rollouts"]), block.get("lost_as")
    if not block.get("counted"):
        return ArmLost(
            None, f"{side}: {n} lost rollouts left out, as the run did (simulate.lost_as={how})"
        )
    by_task = block.get("by_task")
    if not isinstance(by_task, dict) or sum(len(v) for v in by_task.values()) != n:
        return ArmLost(
            None,
            f"{side}: {n} lost rollouts not counted: the run counted them as failures "
            f"(simulate.lost_as={how}; its pass@1 {_num(report.get('pass_at_1'))}) but its "
            "report does not name their tasks; only its rows are scored",
        )
    return ArmLost(
        {str(k): list(v) for k, v in by_task.items()},
        f"{side}: {n} lost rollouts counted as failures, as the run did (simulate.lost_as={how})",
    )


def _num(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, int | float) else "not recorded"


@register("compare", reads=("seed", "judge"))
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """delta_report(before rows, after rows, ...) with the run's seed."""
    from wai_exp.score.stats.delta import delta_report, format_delta_report

    unknown = sorted(set(params) - KNOWN)
    if unknown:
        import difflib

        hints = [
            f"{u!r} (did you mean {c[0]!r}?)"
            if (c := difflib.get_close_matches(u, KNOWN, n=1))
            else repr(u)
            for u in unknown
        ]
        raise ValueError(
            f"stage {ctx.name!r} (kind compare): unknown params {', '.join(hints)}; valid: "
            f"{', '.join(sorted(KNOWN))}"
        )
    before, after, variance = pick_arms(ctx.name, params, inputs)
    kwargs = {k: params[k] for k in PASSED if params.get(k) is not None}
    if isinstance(kwargs.get("must_not_regress"), str):
        kwargs["must_not_regress"] = [kwargs["must_not_regress"]]
    if variance is not None and "run_std" not in kwargs:
        kwargs["run_std"] = variance.report.get("run_std_by_metric") or None
        n_runs = variance.report.get("n_runs")
        if "run_std_runs" not in kwargs and isinstance(n_runs, int) and n_runs >= 2:
            kwargs["run_std_runs"] = n_runs
    lost = {
        "before": arm_lost("before", inputs[before].report),
        "after": arm_lost("after", inputs[after].report),
    }
    report = delta_report(
        list(inputs[before].rows),
        list(inputs[after].rows),
        seed=ctx.seed,
        lost={side: got.by_task for side, got in lost.items()},
        **kwargs,
    )
    report["arms"] = {"before": before, "after": after}
    report["lost_lines"] = [got.line for got in lost.values() if got.line]
    # The headline leads: the run summary prints each report stage's first line, so the
    # verdict is what a reader sees at the end of the run; the arms follow the block.
    text = format_delta_report(report) + f"\narms: before {before}, after {after}\n"
    metrics = delta_metrics(report)
    judge_cfg = dict(ctx.config.get("judge") or {})
    if judge_cfg.get("kind") == "pairwise":
        block = side_by_side(
            list(inputs[before].rows), list(inputs[after].rows), judge_cfg, ctx.seed
        )
        report["pairwise"] = block
        text += "\n".join(_pairwise_lines(block)) + "\n"
        if block.get("after_win_rate") is not None:
            metrics["pairwise_after_win_rate"] = float(block["after_win_rate"])
            ci = block.get("after_win_rate_ci95")
            if ci:
                metrics["pairwise_after_win_rate_ci_lo"] = float(ci[0])
                metrics["pairwise_after_win_rate_ci_hi"] = float(ci[1])
        if block.get("position_flip_rate") is not None:
            metrics["pairwise_position_flip_rate"] = float(block["position_flip_rate"])
    return StageResult(
        rows=[],
        report=report,
        text=text,
        metrics=metrics,
        tags={"delta_verdict": report["headline_verdict"]},
    )
