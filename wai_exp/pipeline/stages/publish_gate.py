"""Stage ``publish_gate``: check and calibrate the dataset before it leaves.

Calls ``publish_gate(rows, mode=, band=, strict=, endorsed=, strict_hacks=)`` with the
``selection`` section (``selection.gate`` holds ``strict`` and ``strict_hacks``). When the
gate raises ``PublishGateError`` the runner records the refusal as the stage's result (tag
``gate_verdict=refused``, exit status ``pipeline.refusal_exit_code``); see ``runner.py``.
Rows out: the input rows with their ``calibration`` stamp.
"""

from __future__ import annotations

from typing import Any

from wai_exp.config.models import GateConfig
from wai_exp.pipeline.registry import StageContext, StageResult, input_rows, register
from wai_exp.pipeline.stages.optimize import selection


@register("publish_gate", reads=("selection",), headline="gate")
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """Gate the single input's rows. Raises ``PublishGateError`` on refusal."""
    from wai_exp.score.select.publish_gate import publish_gate

    # Copies: the gate stamps calibration in place, and the upstream result stays as written.
    rows = [dict(r) for r in input_rows(ctx.name, inputs)]
    sel = selection(ctx, params)
    # params.strict / params.strict_hacks override selection.gate's
    gate = GateConfig.model_validate(
        {**sel.gate.model_dump(), **{k: params[k] for k in GateConfig.model_fields if k in params}}
    )
    report = publish_gate(
        rows,
        mode=sel.mode,
        band=sel.band,
        strict=gate.strict,
        endorsed=tuple(sel.endorsed),
        strict_hacks=gate.strict_hacks,
    )
    metrics = {"gate_passed": 1.0, "rows_in": float(len(rows))}
    numbers = {
        "rows_graded": report.get("n_graded"),
        "rows_unjudged": report.get("n_unjudged"),
        "rows_stamped": (report.get("calibration") or {}).get("rows_stamped"),
        "tasks_stamped": (report.get("calibration") or {}).get("tasks_stamped"),
        "mixed_groups": (report.get("group_signal") or {}).get("mixed"),
    }
    for key, value in numbers.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            metrics[key] = float(value)
    pass_at = report.get("pass_at") or {}
    lines = [f"publish gate: {report['verdict']} ({len(rows)} rows, mode {report.get('mode')})"]
    not_run = report.get("checks_not_run") or {}
    for name, ok in (report.get("checks") or {}).items():
        if ok is None:
            # A check that never ran is neither ok nor FAILED: say so, and why.
            lines.append(f"  check {name}: not run ({not_run.get(name, 'no reason recorded')})")
        else:
            lines.append(f"  check {name}: {'ok' if ok else 'FAILED'}")
    if pass_at.get("pass_at_1") is not None:
        ci = pass_at.get("ci95")
        interval = (
            f"95% CI [{ci[0]:.3f}, {ci[1]:.3f}]"
            if isinstance(ci, list | tuple) and len(ci) == 2
            else "interval not measured"
        )
        # The gated rows are a selection (band-trimmed): their rate is not the agent's.
        lines.append(
            f"  pass@1 of the gated rows (a selection, not the agent's rate): "
            f"{pass_at['pass_at_1']:.3f} {interval} over {pass_at.get('n_groups')} tasks"
        )
    scan = report.get("hack_scan") or {}
    if scan.get("regime"):
        lines.append(f"  hack scan: {scan['regime']} (top feature {scan.get('top_feature')})")
    lines += [f"  warning: {w}" for w in report.get("warnings") or []]
    return StageResult(
        rows=rows,
        report=report,
        text="\n".join(lines) + "\n",
        metrics=metrics,
        tags={"gate_verdict": report["verdict"]},
    )
