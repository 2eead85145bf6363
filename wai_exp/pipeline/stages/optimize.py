"""Stage ``optimize``: concentrate the graded rows for the post-training target.

Calls ``optimize(rows, mode=, target=, band=, ...)`` with the ``selection`` config section
(stage ``params`` override single keys). Rows out: the selection. Report: the selector's
report. Metrics: ``rows_in``, ``rows_kept``, ``rows_dropped``, ``tasks_in``, ``tasks_kept``.
"""

from __future__ import annotations

import json
from typing import Any

from wai_exp.config.models import SelectionConfig
from wai_exp.pipeline.registry import StageContext, StageResult, input_rows, register
from wai_exp.pipeline.stored_rows import StoredRows
from wai_exp.rows.keys import task_key, without_fields


def selection(ctx: StageContext, params: dict[str, Any]) -> SelectionConfig:
    """The selection section with the stage's params laid over it."""
    return ctx.section(SelectionConfig, "selection", params)


def stamp_difficulty(rows: list[dict[str, Any]], sel: SelectionConfig) -> list[dict[str, Any]]:
    """Copies of ``rows`` with each task's ``calibration`` measured over every graded rollout.

    ``select_for_rl`` stamps the rate it selected on; the sft and preference selections keep
    only some rollouts of a task (passes, or one pass and one fail), and the gate would
    re-measure the rate on those. Stamped here, before the selection, the carried stamp counts
    more repeats and stays (``put_calibration``), so the published pass-rate spread is the
    tasks' difficulty. The upstream stage's rows are not touched."""
    from wai_exp.score.select.publish_gate import calibrate

    rows = [dict(r) for r in rows]
    calibrate(rows, band=sel.band)
    return rows


def preference_rows(
    rows: list[dict[str, Any]], sel: SelectionConfig
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``selection.mode: preference``: the rows that form ``build_preference_pairs`` pairs
    (chosen and rejected, in input order) and the pair report with ``mode`` and ``n_pairs``.
    ``publish`` builds the same pairs again from the gated rows (the pairing is deterministic)."""
    from wai_exp.score.select.preference import build_preference_pairs

    pairs, report = build_preference_pairs(
        rows,
        max_pairs_per_prompt=sel.max_pairs_per_prompt,
        min_margin=sel.min_margin,
        length_match=sel.length_match,
    )
    paired = {id(p[side]) for p in pairs for side in ("chosen", "rejected")}
    kept = [r for r in rows if id(r) in paired]
    report = {**report, "mode": "preference", "n_pairs": len(pairs), "rows_kept": len(kept)}
    if not pairs:
        report["kept_none_because"] = _no_pair_because(report, sel)
    return kept, report


def _no_pair_because(report: dict[str, Any], sel: SelectionConfig) -> str:
    """Why no task gave a chosen/rejected pair, from the pair report's task counts."""
    by = report.get("tasks_by_reason") or {}
    if not sum(by.values()):
        return "no rows came in"
    return (
        f"no task gives a pair: {by.get('no_valid_rows', 0)} have no judged row, "
        f"{by.get('single_rollout', 0)} one judged rollout, {by.get('no_contrast', 0)} no two "
        f"rollouts whose scores differ by selection.min_margin={sel.min_margin:g} or more"
    )


#: Where a selection row without its ``messages`` came from in the stage's input file.
_POSITION = "_optimize_input_line"


def _selection_rows(
    name: str, inputs: dict[str, StageResult]
) -> tuple[list[dict[str, Any]], StoredRows | None]:
    """The rows to select from, and their file when they are read from disk.

    A graded row holds its transcript twice: ``messages`` (the chat a trainer reads) and
    ``steps``, which every selection check reads (tool calls, replies, signatures). Read
    from disk, a row with steps comes without its ``messages`` and with its line number,
    and ``_with_transcripts`` puts the messages back on the rows kept: the selection is the
    same, and 100,000 graded rows take about 0.4 GB less while it runs."""
    source = next(iter(inputs.values())).rows if len(inputs) == 1 else None
    if not isinstance(source, StoredRows):
        return input_rows(name, inputs), None
    rows = []
    for i, row in enumerate(source):
        if row.get("steps"):
            row = without_fields(row, ("messages",))
            row[_POSITION] = i
        rows.append(row)
    return rows, source


def _with_transcripts(kept: list[dict[str, Any]], stored: StoredRows) -> list[dict[str, Any]]:
    """``kept`` with the ``messages`` each row was read without, from ``stored``'s file."""
    wanted = {r[_POSITION] for r in kept if _POSITION in r}
    messages: dict[int, Any] = {}
    for i, line in enumerate(stored.lines()):
        if i in wanted:
            original = json.loads(line)
            if "messages" in original:
                messages[i] = original["messages"]
    out = []
    for row in kept:
        if _POSITION in row:
            row = dict(row)
            i = row.pop(_POSITION)
            if i in messages:
                row["messages"] = messages[i]
        out.append(row)
    return out


@register("optimize", reads=("selection",), headline="selection")
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """Select from the single input's graded rows; see ``wai_exp.score.select.optimize.optimize``."""
    from wai_exp.score.select.optimize import optimize

    rows, stored = _selection_rows(ctx.name, inputs)
    sel = selection(ctx, params)
    if sel.mode in ("sft", "preference"):
        rows = stamp_difficulty(rows, sel)
    if sel.mode == "preference":
        kept, report = preference_rows(rows, sel)
    else:
        kept, report = optimize(
            rows,
            mode=sel.mode,
            target=sel.target,
            band=sel.band,
            enforce_band=sel.enforce_band,
            select=sel.select,
            min_reward=sel.min_reward,
            endorsed=tuple(sel.endorsed),
            truncated=sel.truncated,
            order=sel.order,
        )
    if stored is not None:
        kept = _with_transcripts(kept, stored)
    tasks_in = len({task_key(r) for r in rows})
    tasks_kept = len({task_key(r) for r in kept})
    metrics = {
        "rows_in": float(len(rows)),
        "rows_kept": float(len(kept)),
        "rows_dropped": float(len(rows) - len(kept)),
        "tasks_in": float(tasks_in),
        "tasks_kept": float(tasks_kept),
    }
    mode = report.get("mode", sel.mode)
    if mode == "preference":
        lines = [
            f"{ctx.name}: {report['n_pairs']} same-task chosen/rejected pairs from {len(rows)} "
            f"rows ({tasks_kept} of {tasks_in} tasks); the {len(kept)} paired rows go on"
        ]
        lines += _kept_none_lines(report)
        lines += [f"warning: {w}" for w in report.get("warnings") or []]
        metrics["pairs"] = float(report["n_pairs"])
        return StageResult(rows=kept, report=report, text="\n".join(lines) + "\n", metrics=metrics)
    lines = [
        f"{ctx.name}: kept {len(kept)} of {len(rows)} rows ({tasks_kept} of {tasks_in} tasks), mode {mode}"
    ]
    if mode != "sft":
        lo, hi = sel.band
        lines.append(
            f"difficulty band [{lo}, {hi}], enforce_band={sel.enforce_band}, order={sel.order}"
        )
    lines += _kept_none_lines(report)
    for w in report.get("hygiene_warnings") or report.get("warnings") or []:
        lines.append(f"warning: {w}")
    return StageResult(rows=kept, report=report, text="\n".join(lines) + "\n", metrics=metrics)


def _kept_none_lines(report: dict[str, Any]) -> list[str]:
    """The report.txt line saying why the selection is empty (the closing summary prints
    ``kept_none_because`` beside "rows kept: 0")."""
    why = report.get("kept_none_because")
    warned = any(why in str(w) for w in report.get("hygiene_warnings") or ()) if why else False
    return [f"kept no rows: {why}"] if why and not warned else []
