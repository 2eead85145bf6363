"""Stage lineage: which post-training stage consumed each row (rlhf-book ch. 3).

A row carries ``stage`` once someone stamps it (``stamp_stage``). ``stage_report`` then
says how many rows and tasks each stage used and, the point of it, which tasks were used
both for evaluation and for training: a held-out number measured on a task the policy
was trained on was optimized against, so it overstates the gain.

Every count here is a census of the rows given, not an estimate from a sample, so no
interval goes with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.domain.plurals import counted
from wai_exp.rows.keys import task_key

#: The stages a row can be stamped with, in pipeline order: mid-training, supervised
#: fine-tuning, reward-model training, reinforcement learning, and held-out evaluation.
STAGES: tuple[str, ...] = ("mid", "sft", "rm", "rl", "eval")
#: The stages that train the policy or its reward; a task seen here must not be in ``eval``.
TRAINING_STAGES: tuple[str, ...] = ("mid", "sft", "rm", "rl")
#: How many leaked tasks ``format_stages`` prints before summarising the rest.
FORMAT_MAX_LEAKS = 20


def stage_of(row: Mapping[str, Any]) -> str | None:
    """The stamped stage, or None.

    A non-empty string under ``row["stage"]`` is returned as stamped (even one outside
    ``STAGES``; ``stage_report`` flags those). A row with no stamp whose
    ``lineage.source`` is ``"eval"`` reads as ``"eval"``, so a held-out set is never taken
    for training data just because no one stamped it. Anything else is None. Never raises
    on a row dict.
    """
    stamped = row.get("stage")
    if isinstance(stamped, str) and stamped.strip():
        return stamped
    lineage = row.get("lineage")
    if isinstance(lineage, Mapping) and lineage.get("source") == "eval":
        return "eval"
    return None


def stamp_stage(rows: Sequence[dict], stage: str) -> list[dict]:
    """Return copies of ``rows`` with ``row["stage"] = stage``; the originals are unchanged.

    The copies are shallow: only the top-level ``stage`` key differs, nested values are
    shared with the originals ("nothing else is touched"). Raises ``ValueError`` naming
    ``STAGES`` when ``stage`` is not one of them, and ``TypeError`` when ``rows`` is a
    single dict instead of a list of rows.
    """
    if not isinstance(stage, str) or stage not in STAGES:
        raise ValueError(
            f"stage must be one of {', '.join(STAGES)}; got {stage!r} "
            "(mid/sft/rm/rl are training stages, eval is the held-out set)"
        )
    if isinstance(rows, Mapping):
        raise TypeError("rows is a single dict; pass a list of rows (e.g. [row])")
    return [{**row, "stage": stage} for row in rows]


def stage_report(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Rows per stage, tasks per stage, and the cross-stage leaks.

    A leak is a task (``task_key``) used both in ``eval`` and in a training stage
    (``TRAINING_STAGES``: mid/sft/rm/rl); the held-out number on it was optimized against.

    Returns ``n_rows``; ``rows`` and ``tasks`` (``{stage: count}``, stages of ``STAGES``
    that occur in that order, then any unknown stamped stage); ``unstamped`` (rows with no
    stage, not counted as any stage); ``unknown_stages`` (stamped names outside
    ``STAGES``); ``no_task_key`` (rows with no scenario_id, task_id or prompt, left out of
    the task counts since they cannot be told apart); ``leaks`` (one dict per leaked task,
    sorted by task: ``task``, ``eval_rows``, ``training_rows`` ``{stage: rows}``);
    ``n_leaked_tasks``, ``n_eval_tasks``, ``leaked_eval_share`` (leaked / eval tasks, None
    without eval tasks); ``ok`` (both eval and training rows present and no leak: with
    either side missing nothing was checked) and ``warnings``,
    each naming its fix. Raises ``TypeError`` when ``rows`` is a single dict.
    """
    if isinstance(rows, Mapping):
        raise TypeError("rows is a single dict; pass a list of rows (e.g. [row])")
    row_counts: Counter[str] = Counter()
    # (stage, task) -> rows, so a leak can say how much of each side it is.
    cell_counts: Counter[tuple[str, str]] = Counter()
    unstamped = 0
    no_key = 0
    n_rows = 0
    for row in rows:
        n_rows += 1
        stage = stage_of(row)
        if stage is None:
            unstamped += 1
            continue
        row_counts[stage] += 1
        key = task_key(row)
        if key == "":
            no_key += 1
            continue
        cell_counts[(stage, key)] += 1

    known = [s for s in STAGES if s in row_counts]
    unknown = sorted(s for s in row_counts if s not in STAGES)
    order = known + unknown
    tasks_by_stage: dict[str, set[str]] = {s: set() for s in order}
    for stage, key in cell_counts:
        tasks_by_stage[stage].add(key)

    eval_tasks = tasks_by_stage.get("eval", set())
    leaks: list[dict[str, Any]] = []
    for key in sorted(eval_tasks):
        training = {s: cell_counts[(s, key)] for s in TRAINING_STAGES if (s, key) in cell_counts}
        if training:
            leaks.append(
                {"task": key, "eval_rows": cell_counts[("eval", key)], "training_rows": training}
            )

    has_training = any(s in row_counts for s in TRAINING_STAGES)
    warnings: list[str] = []
    if leaks:
        warnings.append(_leak_warning(len(leaks), len(eval_tasks)))
    if "eval" not in row_counts:
        warnings.append(
            "no eval rows: nothing to check for leaks; include the held-out rows "
            "(stamp_stage(rows, 'eval') or lineage.source='eval')"
        )
    elif not has_training:
        warnings.append(
            "no training-stage rows (mid/sft/rm/rl): leaks cannot be checked without the "
            "training data; include it, stamped with stamp_stage"
        )
    warnings.extend(_stamp_warnings(unstamped, unknown, no_key))

    return {
        "n_rows": n_rows,
        "rows": {s: row_counts[s] for s in order},
        "tasks": {s: len(tasks_by_stage[s]) for s in order},
        "unstamped": unstamped,
        "unknown_stages": unknown,
        "no_task_key": no_key,
        "leaks": leaks,
        "n_leaked_tasks": len(leaks),
        "n_eval_tasks": len(eval_tasks),
        "leaked_eval_share": len(leaks) / len(eval_tasks) if eval_tasks else None,
        "ok": not leaks and "eval" in row_counts and has_training,
        "warnings": warnings,
    }


def _leak_warning(n_leaks: int, n_eval: int) -> str:
    one = n_leaks == 1
    return (
        f"{n_leaks} of {counted(n_eval, 'eval task')} {'was' if one else 'were'} also used for "
        f"training: the eval number on {'it' if one else 'them'} was optimized against; drop "
        f"{'it' if one else 'them'} from the eval set or from training (decontaminate) and "
        "re-measure"
    )


def _stamp_warnings(unstamped: int, unknown: Sequence[str], no_key: int) -> list[str]:
    """The warnings for rows whose stage or task cannot be read, each in its count's number."""
    out = []
    if unstamped:
        one = unstamped == 1
        out.append(
            f"{counted(unstamped, 'row')} {'carries' if one else 'carry'} no stage and "
            f"{'is' if one else 'are'} not eval-sourced: {'it is' if one else 'they are'} not "
            f"counted in any stage; stamp {'it' if one else 'them'} with "
            "stamp_stage(rows, stage)"
        )
    if unknown:
        one = len(unknown) == 1
        out.append(
            f"unknown stage {'name' if one else 'names'} {', '.join(repr(s) for s in unknown)}: "
            f"not one of {', '.join(STAGES)}, so "
            f"{'it never counts' if one else 'they never count'} as training; re-stamp with "
            "stamp_stage"
        )
    if no_key:
        out.append(
            f"{counted(no_key, 'stamped row')} {'has' if no_key == 1 else 'have'} no scenario_id, "
            "task_id or prompt: left out of the task counts and the leak check"
        )
    return out


def format_stages(report: dict[str, Any]) -> str:
    """The block a person reads: the verdict line, one line per stage, the leaked tasks
    (at most ``FORMAT_MAX_LEAKS``), then the warnings.

    Raises ``KeyError`` on a dict that is not a ``stage_report`` result.
    """
    n_leaks = report["n_leaked_tasks"]
    if n_leaks:
        verdict = (
            f"LEAK: {n_leaks} of {counted(report['n_eval_tasks'], 'eval task')} also used in "
            f"training ({report['leaked_eval_share']:.0%})"
        )
    elif not report["rows"].get("eval"):
        verdict = "leaks unchecked: no eval rows"
    elif not any(report["rows"].get(s) for s in TRAINING_STAGES):
        verdict = "leaks unchecked: no training rows"
    else:
        verdict = (
            f"no leak: none of {counted(report['n_eval_tasks'], 'eval task')} used in training"
        )
    lines = [f"stages: {counted(report['n_rows'], 'row')}; {verdict}"]
    names = list(report["rows"])
    if report["unstamped"]:
        names.append("(no stage)")
    width = max((len(n) for n in names), default=0)
    for stage in report["rows"]:
        lines.append(
            f"  {stage:<{width}}  {report['rows'][stage]:>6} rows  "
            f"{report['tasks'][stage]:>5} tasks"
        )
    if report["unstamped"]:
        lines.append(f"  {'(no stage)':<{width}}  {report['unstamped']:>6} rows")
    if report["leaks"]:
        lines.append("leaked tasks (eval rows; training rows by stage):")
        for leak in report["leaks"][:FORMAT_MAX_LEAKS]:
            training = ", ".join(f"{s} {n}" for s, n in leak["training_rows"].items())
            lines.append(f"  {leak['task']}: eval {leak['eval_rows']}; {training}")
        if n_leaks > FORMAT_MAX_LEAKS:
            lines.append(f"  ... and {n_leaks - FORMAT_MAX_LEAKS} more (see report['leaks'])")
    for warning in report["warnings"]:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)
