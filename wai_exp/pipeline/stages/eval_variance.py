"""Stage ``eval_variance``: how much the eval moves when the same model is evaluated again.

Reads the rows of one upstream graded stage whose simulate ran with ``runs=N`` (rows carry
``lineage.eval_run``) and runs ``eval_variance`` over them.

Params::

    metric: pass_at_1   # or a marker name
    by: null            # a top-level or lineage key naming the run, instead of eval_run

Report: the ``eval_variance`` dict (``run_std``, ``run_std_by_metric``, ``noise_band``,
``n_runs`` ...) plus ``mean_ci95`` and ``run_std_ci95``; a downstream ``compare`` stage picks
it up as its re-run floor. Metrics: ``mean`` and ``run_std`` (each with ``_ci_lo``/``_ci_hi``),
``noise_band``, ``n_runs``, ``run_mean_<i>`` per run and
``run_std_<metric>`` per metric; an unmeasured number (run_std below two runs) is left out
and the report's ``notes`` say why.
"""

from __future__ import annotations

import re
from typing import Any

from wai_exp.pipeline.registry import StageContext, StageResult, input_rows, register


def _key(name: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", str(name))


def format_eval_variance(report: dict[str, Any]) -> str:
    """The block a person reads: the spread first, then each run's mean, then notes."""

    def f(x: Any) -> str:
        return "n/a" if x is None else f"{x:.4f}"

    floor = report.get("rollout_std")
    below = floor is not None and report["run_std"] is not None
    # The runs agreed far more than their rollouts allow: the band and word use the rollouts'.
    by_floor = f" (rollouts alone give {f(floor)}: the runs agreed by chance)" if below else ""
    lines = [
        f"eval_variance on {report['metric']}: run_std {f(report['run_std'])} over "
        f"{report['n_runs']} runs{by_floor} (mean {f(report['mean'])}), re-run band "
        f"+-{f(report['noise_band'])}, stability {report.get('stability') or 'n/a'}"
    ]
    if report.get("run_std_ci95"):
        lo, hi = report["run_std_ci95"]
        of = f" of {f(floor)}" if below else ""
        lines.append(
            f"  run_std 95% CI{of} [{f(lo)}, {f(hi)}] (chi-square, df={report['n_runs'] - 1})"
        )
    for label, mean in zip(report["runs"], report["means"], strict=False):
        lines.append(f"  run {label}: {f(mean)}")
    for name, sd in (report.get("run_std_by_metric") or {}).items():
        lines.append(f"  run_std[{name}] = {f(sd)}")
    lines += [f"note: {n}" for n in report.get("notes", [])]
    return "\n".join(lines)


@register("eval_variance", reads=())
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """eval_variance(rows, metric=, by=) over the single upstream stage's rows."""
    from wai_exp.score.stats.stats import eval_variance, run_intervals

    unknown = sorted(set(params) - {"metric", "by"})
    if unknown:
        raise ValueError(
            f"stage {ctx.name!r} (kind eval_variance): unknown params {unknown}; valid: metric, by"
        )
    rows = input_rows(ctx.name, inputs)
    report = eval_variance(
        rows, metric=str(params.get("metric") or "pass_at_1"), by=params.get("by")
    )
    report["mean_ci95"], report["run_std_ci95"] = run_intervals(report)
    mean_ci = report["mean_ci95"] or [None, None]
    sd_ci = report["run_std_ci95"] or [None, None]
    raw: dict[str, Any] = {
        "mean": report.get("mean"),
        "mean_ci_lo": mean_ci[0],
        "mean_ci_hi": mean_ci[1],
        "run_std": report.get("run_std"),
        "run_std_ci_lo": sd_ci[0],
        "run_std_ci_hi": sd_ci[1],
        "noise_band": report.get("noise_band"),
        "n_runs": report.get("n_runs"),
    }
    for label, mean in zip(report["runs"], report["means"], strict=False):
        raw[f"run_mean_{_key(label)}"] = mean
    for name, sd in (report.get("run_std_by_metric") or {}).items():
        raw[f"run_std_{_key(name)}"] = sd
    metrics = {k: float(v) for k, v in raw.items() if v is not None}
    # No stage-name prefix: the run summary already puts the stage name before line one.
    text = format_eval_variance(report) + "\n"
    return StageResult(rows=[], report=report, text=text, metrics=metrics)
