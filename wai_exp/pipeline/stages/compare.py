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
from typing import Any

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


@register("compare", reads=("seed",))
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
    report = delta_report(
        list(inputs[before].rows), list(inputs[after].rows), seed=ctx.seed, **kwargs
    )
    report["arms"] = {"before": before, "after": after}
    # The headline leads: the run summary prints each report stage's first line, so the
    # verdict is what a reader sees at the end of the run; the arms follow the block.
    text = format_delta_report(report) + f"\narms: before {before}, after {after}\n"
    return StageResult(
        rows=[],
        report=report,
        text=text,
        metrics=delta_metrics(report),
        tags={"delta_verdict": report["headline_verdict"]},
    )
