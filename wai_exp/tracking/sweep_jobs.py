"""A sweep's jobs as :mod:`wai_exp.tracking.sweep` reads them, from what each job left in its
run folder: ``run.json`` (its overrides, status and headline metrics) and its graded stage's
rows and report (per-task estimates). MLflow child runs give the same jobs with their
metrics from the store; with ``tracking=none`` the folders are all there is, and the sweep's
table is built from them by the same code.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["RUN_FILE", "folder_job", "folder_jobs", "graded_tasks", "write_tables"]

#: What wai-exp writes into every run folder when the run returns (``pipeline.runner``).
RUN_FILE = "run.json"
#: ``run.json``'s status -> the MLflow status a tracked run of that outcome ends with
#: (a refused gate is a finished run whose answer is "refused").
_STATUS = {"passed": "FINISHED", "refused": "FINISHED", "failed": "FAILED"}
#: Stage kinds whose rows hold the run's grades (``mlflow_tracker.GRADED_KINDS``).
_GRADED = ("grade", "evaluate")


def graded_tasks(run_dir: str | Path, stages: Sequence[str]) -> dict[str, Any]:
    """Per-task numbers of a run from the first of its graded ``stages`` (by name) in
    ``run_dir``: ``tasks`` (each task's pass rate), and when the run measured pass^k,
    ``k`` and ``tasks_pass_pow_k`` / ``tasks_pass_at_k`` (each task's unbiased estimate at
    that k, for the tasks the run's pass^k counted), else ``k_note`` (the report's reason).
    They follow the run's own headline (``passat.task_estimates`` with the arguments its
    report records): lost rollouts it counted are failed repeats, ``unanimous_short``
    imputes, and an adaptive run reads each task's fixed first batch, so a sweep pooling
    them never reads better than its runs do. {} when the rows are not there.
    """
    if not stages:
        return {}
    from wai_exp.rows.jsonl import read_rows

    stage_dir = Path(run_dir) / sorted(stages)[0]
    with contextlib.suppress(OSError, ValueError):
        rows = read_rows(stage_dir / "rows.jsonl")
        return {**_task_numbers(rows, _report(stage_dir))}
    return {}


def _report(stage_dir: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        report = json.loads((stage_dir / "report.json").read_text(encoding="utf-8"))
        if isinstance(report, dict):
            return report
    return {}


def _task_numbers(rows: list[dict[str, Any]], report: Mapping[str, Any]) -> dict[str, Any]:
    from wai_exp.score.stats.passat import task_estimates

    k = report.get("k")
    args = _pass_at_args(report)
    measured = report.get("pass_pow_k") is not None and isinstance(k, int) and k >= 1
    if measured:
        # the k the run's pass^k was read at (under runs=N, one run's repeats), as it was
        args.update(k=k, min_k=k)
    est = task_estimates(rows, **args)
    out: dict[str, Any] = {"tasks": est.pass_at_1}
    if not measured:
        out["k_note"] = report.get("note") or None
        return out
    return {**out, "k": k, "tasks_pass_pow_k": est.pass_pow_k, "tasks_pass_at_k": est.pass_at_k}


def _pass_at_args(report: Mapping[str, Any]) -> dict[str, Any]:
    """What a graded stage's ``pass_at`` counted beyond its rows, from its report: the lost
    rollouts it counted as failures (``lost.by_task`` under ``simulate.lost_as=failure``)
    and ``judge.pass_at.unanimous_short`` (``pass_at_options``)."""
    lost, options = report.get("lost"), report.get("pass_at_options")
    by_task = lost.get("by_task") if isinstance(lost, Mapping) and lost.get("counted") else None
    return {
        "lost": by_task if isinstance(by_task, Mapping) else None,
        "unanimous_short": bool(isinstance(options, Mapping) and options.get("unanimous_short")),
    }


def folder_job(run_dir: Path) -> dict[str, Any]:
    """One job from its run folder, shaped as :mod:`wai_exp.tracking.sweep` reads a child
    run. A folder without ``run.json`` is a job that never returned (killed, or still
    running): status ``KILLED``, its overrides from Hydra's ``.hydra/overrides.yaml``."""
    record: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
        record = loaded if isinstance(loaded, dict) else {}
    stages = record.get("stages") or {}
    graded = [n for n, s in stages.items() if isinstance(s, Mapping) and s.get("kind") in _GRADED]
    headline = record.get("headline")
    return {
        "run_id": run_dir.name,
        "run_name": run_dir.name,
        "run_dir": str(run_dir),
        "status": _STATUS.get(str(record.get("status")), "KILLED") if record else "KILLED",
        "overrides": [str(o) for o in record.get("overrides") or _hydra_overrides(run_dir)],
        "metrics": dict(headline) if isinstance(headline, Mapping) else {},
        "error": record.get("error"),
        **graded_tasks(run_dir, graded),
    }


def _hydra_overrides(run_dir: Path) -> list[str]:
    """The job's overrides as Hydra wrote them at its start (``hydra.output_subdir``)."""
    with contextlib.suppress(OSError, ValueError, ImportError):
        import yaml

        from wai_exp.domain.secrets import redact_overrides
        from wai_exp.tracking.sweep import as_typed

        items = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text("utf-8"))
        if isinstance(items, list):
            return redact_overrides(as_typed(items, from_sweeper=True))
    return []


def folder_jobs(sweep_dir: str | Path) -> list[dict[str, Any]]:
    """Every job folder under ``sweep_dir`` (a folder holding ``run.json`` or Hydra's
    ``.hydra/overrides.yaml``), in job order (``hydra.sweep.subdir`` is the job number
    unless set otherwise)."""
    root = Path(sweep_dir)
    found = {p.parent for p in root.rglob(RUN_FILE)}
    found |= {p.parent.parent for p in root.rglob(".hydra/overrides.yaml")}
    found.discard(root)
    return [folder_job(d) for d in sorted(found, key=_job_order)]


def _job_order(path: Path) -> tuple[int, str]:
    digits = re.fullmatch(r"\d+", path.name)
    return (int(path.name), "") if digits else (1 << 30, str(path))


def write_tables(answer: Mapping[str, Any], sweep_dir: str | Path) -> Path:
    """The sweep's answer as files in ``<sweep_dir>/sweep/`` (the names the MLflow parent
    run's artifacts have): ``per_value.csv``/``.json``, ``paired_deltas.json``,
    ``replicates.json``. Returns that folder."""
    from wai_exp.rows.jsonl import atomic_write_text, write_json
    from wai_exp.tracking.sweep import table_csv

    out = Path(sweep_dir) / "sweep"
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "per_value.csv", table_csv(answer["per_value"]))
    write_json(out / "per_value.json", answer["per_value"])
    write_json(out / "paired_deltas.json", answer["paired"])
    write_json(out / "replicates.json", answer["spread"])
    return out
