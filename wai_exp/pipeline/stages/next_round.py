"""Stage ``next_round``: the next round's prompt set from this round's graded rollouts.

Calls ``next_round(prior=rows, lo=, hi=)`` with ``selection.band`` (``params.band`` overrides).
Rows out: one representative row per kept task (with ``calibration.pass_rate``). Metrics:
``kept``, ``dropped_solved``, ``dropped_unsolved``, ``unknown``, ``rows_in`` and ``rows_kept``
(the rows it wrote); tag ``prompt_set_sha``.
"""

from __future__ import annotations

from typing import Any

from wai_exp.config.models import SelectionConfig
from wai_exp.pipeline.registry import StageContext, StageResult, input_rows, register

#: What next_round's ``rows_kept`` counts, said beside it wherever rows kept are said.
ROWS_KEPT_ARE = "one row per task it keeps, the next round's prompt set"


@register("next_round", reads=("selection",))
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """Keep the asks the current policy passes inside the band; drop solved and unsolved."""
    from wai_exp.score.select.optimize import next_round

    rows = input_rows(ctx.name, inputs)
    lo, hi = params.get("band") or ctx.section(SelectionConfig, "selection").band
    result = next_round(rows, lo=float(lo), hi=float(hi))
    tasks = list(result.get("tasks") or [])
    report = {k: v for k, v in result.items() if k != "tasks"}
    metrics = {
        k: float(report[k])
        for k in ("kept", "dropped_solved", "dropped_unsolved", "unknown")
        if isinstance(report.get(k), int | float)
    }
    # What it wrote is one row per task it keeps: the summaries count those, in that unit.
    metrics["rows_in"], metrics["rows_kept"] = float(len(rows)), float(len(tasks))
    report["rows_kept_are"] = ROWS_KEPT_ARE
    text = (
        f"{ctx.name}: kept {report.get('kept')} tasks in the band [{lo}, {hi}]; dropped "
        f"{report.get('dropped_solved')} solved, {report.get('dropped_unsolved')} unsolved; "
        f"{report.get('unknown')} unknown (kept)\nprompt set {report.get('prompt_set_sha')}"
    )
    tags = {"prompt_set_sha": str(report["prompt_set_sha"])} if report.get("prompt_set_sha") else {}
    return StageResult(rows=tasks, report=report, text=text + "\n", metrics=metrics, tags=tags)
