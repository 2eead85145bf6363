"""Stage ``optimize``: concentrate the graded rows for the post-training target.

Calls ``optimize(rows, mode=, target=, band=, ...)`` with the ``selection`` config section
(stage ``params`` override single keys). Rows out: the selection. Report: the selector's
report. Metrics: ``rows_in``, ``rows_kept``, ``rows_dropped``, ``tasks_in``, ``tasks_kept``.
"""

from __future__ import annotations

from typing import Any

from wai_exp.pipeline.registry import StageContext, StageResult, input_rows, register
from wai_exp.rows.keys import task_key


def selection(ctx: StageContext, params: dict[str, Any]) -> dict[str, Any]:
    """The selection section with the stage's params laid over it."""
    return {**ctx.config.get("selection", {}), **params}


@register("optimize", reads=("selection",))
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """Select from the single input's graded rows; see ``wai_exp.score.select.optimize.optimize``."""
    from wai_exp.score.select.optimize import optimize

    rows = input_rows(ctx.name, inputs)
    sel = selection(ctx, params)
    kept, report = optimize(
        rows,
        mode=sel.get("mode"),
        target=int(sel.get("target", 1000)),
        band=tuple(sel.get("band", (0.2, 0.8))),
        enforce_band=bool(sel.get("enforce_band", True)),
        select=sel.get("select", "top_per_prompt"),
        min_reward=float(sel.get("min_reward", 1.0)),
        endorsed=tuple(sel.get("endorsed") or ()),
        truncated=sel.get("truncated", "drop"),
        order=sel.get("order", "spread"),
    )
    tasks_in = len({task_key(r) for r in rows})
    tasks_kept = len({task_key(r) for r in kept})
    metrics = {
        "rows_in": float(len(rows)),
        "rows_kept": float(len(kept)),
        "rows_dropped": float(len(rows) - len(kept)),
        "tasks_in": float(tasks_in),
        "tasks_kept": float(tasks_kept),
    }
    mode = report.get("mode", sel.get("mode"))
    lines = [
        f"{ctx.name}: kept {len(kept)} of {len(rows)} rows ({tasks_kept} of {tasks_in} tasks), mode {mode}"
    ]
    if mode != "sft":
        lo, hi = sel.get("band", (0.2, 0.8))
        lines.append(
            f"difficulty band [{lo}, {hi}], enforce_band={sel.get('enforce_band', True)}, order={sel.get('order')}"
        )
    for w in report.get("hygiene_warnings") or report.get("warnings") or []:
        lines.append(f"warning: {w}")
    return StageResult(rows=kept, report=report, text="\n".join(lines) + "\n", metrics=metrics)
