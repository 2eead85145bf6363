"""Hydra callback for sweeps: one MLflow parent run per multirun, one child run per job.

Register in the primary config::

    hydra:
      callbacks:
        mlflow_sweep:
          _target_: wai_exp.tracking.callbacks.MlflowSweepCallback

Where each hook runs (shared/NOTES-hydra-mlflow.md): ``on_multirun_start``/``on_multirun_end``
in the launching process with every launcher; ``on_job_start``/``on_job_end`` wherever the job
runs (the same process for the basic launcher, a worker for joblib/submitit/Ray).

- ``on_multirun_start`` creates the store's schema and the experiment under a file lock
  (a fresh SQLite file races when parallel jobs migrate it), then the parent run with
  ``MlflowClient.create_run`` (not ``mlflow.start_run``: jobs of the basic launcher run in this
  process and an active run would clash), and writes ``.wai_mlflow_parent.json`` into the
  sweep folder.
- ``on_job_start`` puts the parent id into ``WAI_EXP_MLFLOW_PARENT_RUN_ID`` in the job's
  process (never ``MLFLOW_RUN_ID``, which would resume the parent instead of nesting under
  it); the job's ``MlflowTracker`` starts its run with ``mlflow.parentRunId`` set to it.
- ``on_multirun_end`` aggregates the children's metrics into the parent (mean, sample sd, n;
  for every ``*.pass_at_1`` also the re-run spread ``run_std`` and its noise band), logs the
  run table, and ends the parent FINISHED.
- When a job fails Hydra skips ``on_multirun_end``; an ``atexit`` hook then aggregates the
  finished children all the same, prints the table, and ends the parent FAILED with the
  failed jobs and their errors, so a sweep never leaves a RUNNING run behind.

With ``tracking=none`` there is no parent run, but the sweep still ends with its table:
``on_multirun_end`` (or the ``atexit`` hook) reads the jobs' run folders
(``tracking.sweep_jobs``) and builds the table, the paired deltas and the re-run spread with
the same functions (``sweep.sweep_answer``, ``sweep.summary_lines``), then prints them and
writes ``<sweep dir>/sweep/per_value.csv`` and its JSON siblings.

MLflow is imported only when a sweep with tracking on starts: Hydra instantiates callbacks on
every start, single runs and ``--help`` included.
"""

from __future__ import annotations

import atexit
import contextlib
import csv
import io
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from wai_exp.domain.numbers import finite_float
from wai_exp.domain.plurals import counted
from wai_exp.tracking import PARENT_RUN_ENV, resolve_tracking_uri, tracking_settings

log = logging.getLogger(__name__)

#: Same name as wai_exp.commands.START_DIR_ENV (not imported: tracking sits below commands).
START_DIR_ENV = "WAI_EXP_START_DIR"

#: Child metrics copied into the run table's CSV (any stage prefix); the JSON has them all.
HEADLINE_SUFFIXES = (
    "pass_at_1",
    "pass_at_1_ci_lo",
    "pass_at_1_ci_hi",
    "floor",
    "floor_ci_lo",
    "floor_ci_hi",
    "pass_pow_k",
    "pass_at_k",
    "rows_in",
    "rows_kept",
)


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """``{"mean", "sd", "n"}`` of ``values``; ``sd`` is the sample (ddof=1) standard deviation,
    None with a ``note`` when fewer than two values exist. Raises ValueError on no values."""
    import numpy as np

    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("summarize() needs at least one value")
    out: dict[str, Any] = {"mean": float(arr.mean()), "sd": None, "n": int(arr.size)}
    if arr.size >= 2:
        out["sd"] = float(arr.std(ddof=1))
    else:
        out["note"] = "one run: no spread measured; sweep two or more seeds for run_std"
    return out


def aggregate_metrics(
    children: Sequence[Mapping[str, float]], *, replicates: bool = True
) -> dict[str, dict[str, Any]]:
    """Per metric over child runs: mean, sample sd and n (children lacking a metric are skipped).

    ``replicates`` says the children differ only by seed/replicate; only then is a spread a
    re-run spread. For a metric whose last segment is ``pass_at_1`` (e.g. ``grade.pass_at_1``
    across seeds) with ``replicates``,
    the sd is the eval's re-run spread: ``run_std`` = sd, ``noise_band`` =
    ``1.96 * sqrt(2) * run_std`` (how far one re-run moves a single-run delta at the 95%
    level with the spread taken as known), and ``noise_band_t`` the same with the two-sided
    t quantile at ``n - 1`` degrees of freedom, since a spread from n runs is an estimate.
    """
    by_key: dict[str, list[float]] = {}
    for metrics in children:
        for key, value in metrics.items():
            if (number := finite_float(value)) is not None:
                by_key.setdefault(key, []).append(number)
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(by_key):
        agg = summarize(by_key[key])
        if replicates and key.rsplit(".", 1)[-1] == "pass_at_1":
            # The re-run band is score's (resample.noise_band, which delta_report uses), so a
            # sweep's parent run and a delta report size the same spread with one formula.
            from wai_exp.score.stats.resample import noise_band

            sd = agg["sd"]
            agg["run_std"] = sd
            agg["noise_band"] = noise_band(sd)
            agg["noise_band_t"] = None if sd is None else noise_band(sd, df=agg["n"] - 1)
        out[key] = agg
    return out


def aggregate_as_metrics(aggregate: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Flatten :func:`aggregate_metrics` into parent metrics ``<metric>.<stat>``; None skipped."""
    out: dict[str, float] = {}
    for key, agg in aggregate.items():
        for stat in ("mean", "sd", "n", "run_std", "noise_band", "noise_band_t"):
            value = agg.get(stat)
            if value is not None:
                out[f"{key}.{stat}"] = float(value)
    return out


def run_table_csv(table: Sequence[Mapping[str, Any]]) -> str:
    """The run table as CSV: run id, name, status, overrides, then the headline metrics."""
    metric_keys = sorted(
        {
            k
            for row in table
            for k in row.get("metrics", {})
            if k.rsplit(".", 1)[-1] in HEADLINE_SUFFIXES
        }
    )
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["run_id", "run_name", "status", "overrides", *metric_keys])
    for row in table:
        metrics = row.get("metrics", {})
        writer.writerow(
            [
                row["run_id"],
                row.get("run_name", ""),
                row.get("status", ""),
                row.get("overrides", ""),
                *("" if metrics.get(k) is None else repr(metrics[k]) for k in metric_keys),
            ]
        )
    return buf.getvalue()


def _select(config: Any, path: str) -> Any:
    """``OmegaConf.select`` for DictConfigs, a dotted lookup for plain mappings; None if absent."""
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.select(config, path, default=None)
    node: Any = config
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


class MlflowSweepCallback(Callback):
    """Parent MLflow run for a Hydra multirun; see the module docstring for the hook roles.

    State set in ``on_multirun_start`` (``parent_run_id``, ``uri``, ``experiment_id``) travels
    to workers with the pickled callback; the parent file in the sweep folder is the fallback.
    """

    def __init__(self) -> None:
        self.parent_run_id: str | None = None
        self.uri: str | None = None
        self.experiment_id: str | None = None
        self.sweep_dir: Path | None = None
        self.jobs_failed = 0
        #: jobs the basic sweeper will launch (None: another sweeper, or not known)
        self.planned: int | None = None
        self.overrides: list[str] = []
        self.summary: str | None = None
        #: tracking=none: the table is built from the jobs' run folders
        self.unrecorded = False
        self._ended = False
        self._set_env = False

    # -- launching side -----------------------------------------------------------------

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        """Create schema, experiment and the parent run (tracking=none: do nothing)."""
        tracking = _select(config, "tracking")
        if tracking is None:
            log.debug("no tracking group in the config; no MLflow parent run")
            return
        settings = tracking_settings(tracking)
        if settings["kind"] != "mlflow":
            self._start_unrecorded(config)
            return
        # The folder the command was typed in: the CLI records it before Hydra runs (the
        # same one the jobs' trackers resolve the store from); Hydra's runtime.cwd otherwise.
        start_dir = Path(
            os.environ.get(START_DIR_ENV) or _select(config, "hydra.runtime.cwd") or os.getcwd()
        )
        uri = resolve_tracking_uri(settings["uri"], start_dir)
        from mlflow import MlflowClient

        from wai_exp.tracking.mlflow_tracker import (
            PARENT_FILE,
            git_candidates,
            git_tags,
            prepare_store,
        )
        from wai_exp.tracking.summary import run_name
        from wai_exp.tracking.sweep import as_typed, unpinned

        exp_id = prepare_store(uri, settings["experiment"])
        client = MlflowClient(tracking_uri=uri)
        preset = _select(config, "hydra.runtime.choices.experiment")
        from wai_exp.domain.secrets import redact_overrides

        overrides = redact_overrides(as_typed(_select(config, "hydra.overrides.task")))
        sweep_dir_raw = _select(config, "hydra.sweep.dir")
        # Hydra makes the sweep folder relative to the process's cwd (it never chdirs here).
        hydra_cwd = Path(_select(config, "hydra.runtime.cwd") or os.getcwd())
        sweep_dir = (hydra_cwd / str(sweep_dir_raw)).resolve() if sweep_dir_raw else None
        tags = {
            "preset": str(preset or "none"),
            "wai.sweep": "parent",
            "wai.overrides": " ".join(overrides)[:8000],
            **git_tags(git_candidates(start_dir)),
            "mlflow.source.name": "wai-exp",
            "mlflow.source.type": "LOCAL",
            "mlflow.note.content": (
                f"wai-exp sweep ({preset or 'custom'}): {' '.join(overrides) or 'no overrides'}; "
                "child runs hold each job, this run holds the aggregate"
            )[:8000],
        }
        if sweep_dir is not None:
            tags["wai.sweep_dir"] = str(sweep_dir)
        run = client.create_run(
            exp_id, tags=tags, run_name=run_name(preset, unpinned(overrides), prefix="sweep")
        )
        self.parent_run_id = run.info.run_id
        self.overrides = overrides
        self._plan(config)
        self.uri = uri
        self.experiment_id = exp_id
        self.sweep_dir = sweep_dir
        self._ended = False
        atexit.register(self._atexit)
        client.log_text(self.parent_run_id, _yaml(overrides), "overrides.yaml")
        if sweep_dir is not None:
            sweep_dir.mkdir(parents=True, exist_ok=True)
            (sweep_dir / PARENT_FILE).write_text(
                json.dumps({"run_id": self.parent_run_id, "uri": uri, "experiment_id": exp_id})
            )
        log.info("MLflow sweep parent run %s in %s", self.parent_run_id, uri)

    def _plan(self, config: Any) -> None:
        """Count the jobs the basic sweeper will launch: it words a sweep no job ran in."""
        from wai_exp.tracking.sweep import planned_jobs

        with contextlib.suppress(Exception):
            self.planned = len(planned_jobs(config) or []) or None

    def _start_unrecorded(self, config: Any) -> None:
        """tracking=none: no parent run, but the sweep still ends with its table, built from
        the jobs' run folders (``sweep_jobs``) by the code that builds it from child runs."""
        from wai_exp.domain.secrets import redact_overrides
        from wai_exp.tracking.sweep import as_typed

        sweep_dir_raw = _select(config, "hydra.sweep.dir")
        if not sweep_dir_raw:
            return
        hydra_cwd = Path(_select(config, "hydra.runtime.cwd") or os.getcwd())
        self.sweep_dir = (hydra_cwd / str(sweep_dir_raw)).resolve()
        self.overrides = redact_overrides(as_typed(_select(config, "hydra.overrides.task")))
        self._plan(config)
        self.unrecorded = True
        self._ended = False
        atexit.register(self._atexit)

    def _finish_unrecorded(self, *, failed: bool = False) -> None:
        """The table of a sweep nothing recorded: on the terminal, and as files in
        ``<sweep dir>/sweep/``."""
        from wai_exp.tracking import sweep as sweep_mod
        from wai_exp.tracking.sweep_jobs import folder_jobs, write_tables

        self._ended = True
        with contextlib.suppress(Exception):
            atexit.unregister(self._atexit)
        assert self.sweep_dir is not None  # set with unrecorded
        jobs = folder_jobs(self.sweep_dir)
        answer = sweep_mod.sweep_answer(jobs, self.overrides)
        done = [j for j in jobs if j["status"] == "FINISHED"]
        error = (
            _folder_failures(jobs, self.jobs_failed) if failed or len(done) < len(jobs) else None
        )
        if error and not jobs and not self.jobs_failed:
            error = self._none_ran()
        lines = sweep_mod.summary_lines(answer, len(jobs), len(done), error)
        try:
            where = f"tables: {write_tables(answer, self.sweep_dir)}"
        except OSError as exc:
            where = f"tables not written ({exc})"
        print("\n".join([*lines, f"{where} (tracking=none: nothing recorded in MLflow)"]),
              flush=True)  # fmt: skip

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        """Aggregate the children into the parent, log the run table, end it FINISHED."""
        if self.unrecorded and not self._ended:
            self._finish_unrecorded()
            return
        if self.parent_run_id is None or self._ended:
            return
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=self.uri)
        self.finalize(client)
        self._print_summary()

    def _print_summary(self) -> None:
        """The sweep's table and the command that opens the parent run, on the terminal."""
        if self.summary and self.uri is not None:  # both set once the parent run started
            from wai_exp.tracking.mlflow_tracker import ui_hint

            print(f"{self.summary}\nopen it:  {ui_hint(self.uri, self.experiment_id, self.parent_run_id)}",
                  flush=True)  # fmt: skip

    # -- job side -----------------------------------------------------------------------

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        """Hand the parent id to this job's tracker through the job's environment."""
        parent = self.parent_run_id
        if parent is None:
            # A worker that got a fresh callback (no pickled state): read the sweep folder.
            from wai_exp.tracking.mlflow_tracker import PARENT_FILE

            sweep_dir = _select(config, "hydra.sweep.dir")
            cwd = _select(config, "hydra.runtime.cwd") or os.getcwd()
            if sweep_dir:
                marker = Path(cwd) / str(sweep_dir) / PARENT_FILE
                with contextlib.suppress(OSError, ValueError, KeyError):
                    parent = json.loads(marker.read_text())["run_id"]
        if parent:
            os.environ[PARENT_RUN_ENV] = parent
            self._set_env = True

    def on_job_end(self, config: Any, job_return: Any = None, **kwargs: Any) -> None:
        """Count failed jobs and drop the env var so nothing after the job nests by accident."""
        status = getattr(job_return, "status", None)
        if status is not None and getattr(status, "name", str(status)) == "FAILED":
            self.jobs_failed += 1
        if self._set_env:
            os.environ.pop(PARENT_RUN_ENV, None)
            self._set_env = False

    # -- shared -------------------------------------------------------------------------

    def children(self, client: Any) -> list[Any]:
        """Every run nested under the parent (all pages), oldest first."""
        runs: list[Any] = []
        token = None
        while True:
            page = client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.mlflow.parentRunId = '{self.parent_run_id}'",
                max_results=1000,
                order_by=["attributes.start_time ASC"],
                page_token=token,
            )
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def finalize(
        self, client: Any, *, status: str = "FINISHED", error: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """Aggregate the children into the parent and end it ``status`` (``error`` becomes
        its ``wai.error`` tag); returns the aggregate. Only FINISHED children are aggregated.

        The parent gets the swept keys as params; ``sweep/per_value.{csv,json}`` (one row per
        swept value: mean pass@1 and its interval, pass^k, pass@k, rows kept), the same table
        in its description, ``sweep/pass_at_1_by_value.png``; ``run_std`` and the noise bands
        only over jobs that differ only by seed/replicate (``sweep/replicates.json`` says over
        which, or why there are none); ``sweep/aggregate.json`` (per-metric mean/sd/n),
        ``sweep/runs.{json,csv}`` (every child). The terminal summary (the table and the
        parent's id) is kept in ``self.summary`` and printed by ``on_multirun_end``.
        """
        from mlflow.entities import Metric, Param, RunTag

        from wai_exp.tracking import sweep as sweep_mod

        pid = self.parent_run_id
        kids = self.children(client)
        table = [
            {
                "run_id": r.info.run_id,
                "run_name": r.info.run_name,
                "status": r.info.status,
                "overrides": r.data.tags.get("wai.overrides", ""),
                "override_list": sweep_mod.override_list(r.data.tags),
                "metrics": dict(r.data.metrics),
            }
            for r in kids
        ]
        jobs = [
            {**row, "overrides": row["override_list"], **_child_tasks(r)}
            for row, r in zip(table, kids, strict=True)
        ]
        answer = sweep_mod.sweep_answer(jobs, self.overrides)
        per_value, spread, paired = answer["per_value"], answer["spread"], answer["paired"]
        only_replicates = not per_value["value_keys"]
        finished = [row["metrics"] for row in table if row["status"] == "FINISHED"]
        aggregate = aggregate_metrics(finished, replicates=only_replicates)
        now = int(time.time() * 1000)
        # Means and sds over jobs that ran different configurations describe no one thing:
        # a sweep over a key logs its per-value table instead (aggregate.json keeps them).
        values = aggregate_as_metrics(aggregate) if only_replicates else {}
        if not only_replicates:  # the per-value answer, readable in the runs table
            values.update(sweep_mod.parent_metrics(per_value, paired))
        for key in ("run_std", "noise_band", "noise_band_t"):
            if spread[key] is not None:
                values[key] = float(spread[key])
        metrics = [Metric(k, v, now, 0) for k, v in values.items()]
        for start in range(0, len(metrics), 1000):
            client.log_batch(pid, metrics=metrics[start : start + 1000], synchronous=True)
        typed = sweep_mod.parse_overrides(self.overrides)
        params = []
        for key in per_value["swept"]:
            seen = sorted(
                {sweep_mod.parse_overrides(j["overrides"]).get(key, "") for j in jobs},
                key=sweep_mod._sort_key,
            )
            params.append(Param(key, (typed.get(key) or ",".join(seen))[:6000]))
        if params:
            client.log_batch(pid, params=params[:100], synchronous=True)
        for name, obj in (
            ("sweep/per_value.json", per_value),
            ("sweep/replicates.json", spread),
            ("sweep/paired_deltas.json", paired),
            ("sweep/aggregate.json", aggregate),
            (
                "sweep/runs.json",
                [{k: v for k, v in r.items() if k != "override_list"} for r in table],
            ),
        ):
            client.log_text(pid, json.dumps(obj, indent=2), name)
        client.log_text(pid, sweep_mod.table_csv(per_value), "sweep/per_value.csv")
        client.log_text(pid, run_table_csv(table), "sweep/runs.csv")
        with contextlib.suppress(Exception):
            from wai_exp.tracking.plots import sweep_figure

            fig = sweep_figure(per_value)
            if fig is not None:
                client.log_figure(pid, fig, "sweep/pass_at_1_by_value.png")
        n_failed = sum(1 for row in table if row["status"] != "FINISHED")
        note = _sweep_note(per_value, spread, len(table), n_failed, self.overrides, answer["notes"])
        client.log_batch(
            pid,
            tags=[
                RunTag("wai.sweep.n_jobs", str(len(table))),
                RunTag("wai.sweep.n_finished", str(len(finished))),
                RunTag("wai.sweep.n_not_finished", str(n_failed)),
                RunTag("wai.sweep.keys", ",".join(per_value["swept"])[:8000]),
                RunTag("mlflow.note.content", note[:8000]),
                *([RunTag("wai.error", error[:1000])] if error else []),
            ],
            synchronous=True,
        )
        client.set_terminated(pid, status)
        self._ended = True
        with contextlib.suppress(Exception):
            atexit.unregister(self._atexit)
        lines = sweep_mod.summary_lines(answer, len(table), len(finished), error)
        self.summary = "\n".join([*lines, f"MLflow parent run: {pid}"])
        return aggregate

    def _failure(self, client: Any) -> str:
        """Which jobs failed and why, from the children's ``wai.error`` tags."""
        kids = self.children(client)
        if not kids and not self.jobs_failed:
            return self._none_ran()
        failed = [r for r in kids if r.info.status != "FINISHED"]
        n = max(self.jobs_failed, len(failed))
        # A job refused before its run opened (invalid config) has no child run to list.
        total = max(len(kids), len(kids) - len(failed) + n)
        lines = [f"{n} of {total} jobs failed"]
        for r in failed[:5]:
            why = r.data.tags.get("wai.error") or f"run {r.info.status}"
            lines.append(f"{r.data.tags.get('wai.overrides') or r.info.run_name}: {why[:300]}")
        if len(failed) > 5:
            lines.append(f"... and {len(failed) - 5} more (see the child runs)")
        if not failed:
            lines.append("see the Hydra log for the jobs that never opened a run")
        return "; ".join(lines)

    def _none_ran(self) -> str:
        """The error of a sweep Hydra stopped before its first job: how many were planned."""
        planned = counted(self.planned, "planned job") if self.planned else "its jobs"
        return (
            f"Hydra stopped the sweep before the first of {planned} started; Hydra's error, "
            "printed with this summary, says why"
        )

    def _atexit(self) -> None:
        """The sweep ended without on_multirun_end (a job failed, or a crash): the finished
        children are still aggregated and the table printed, and the parent ends FAILED
        naming the failed jobs and their errors."""
        if self.unrecorded and not self._ended:
            with contextlib.suppress(Exception):
                self._finish_unrecorded(failed=True)
            return
        if self.parent_run_id is None or self._ended:
            return
        with contextlib.suppress(Exception):
            from mlflow import MlflowClient

            client = MlflowClient(tracking_uri=self.uri)
            self.finalize(client, status="FAILED", error=self._failure(client))
            self._print_summary()
            return
        with contextlib.suppress(Exception):
            from mlflow import MlflowClient

            client = MlflowClient(tracking_uri=self.uri)
            client.set_tag(
                self.parent_run_id,
                "wai.error",
                f"the sweep ended before on_multirun_end ({counted(self.jobs_failed, 'job')} "
                "failed in this process); see the child runs and the Hydra log",
            )
            client.set_terminated(self.parent_run_id, "FAILED")
        self._ended = True


def _folder_failures(jobs: Sequence[Mapping[str, Any]], counted: int) -> str:
    """Which jobs did not finish and why, from their run folders (``counted``: the jobs
    this process saw fail, some of which may have left no folder)."""
    failed = [j for j in jobs if j["status"] != "FINISHED"]
    lines = [f"{max(counted, len(failed))} of {max(len(jobs), counted)} jobs failed"]
    for j in failed[:5]:
        why = j.get("error") or "it never returned (no run.json)"
        lines.append(f"{' '.join(j['overrides']) or j['run_dir']}: {str(why)[:300]}")
    if len(failed) > 5:
        lines.append(f"... and {len(failed) - 5} more (see their run.json)")
    return "; ".join(lines)


def _child_tasks(run: Any) -> dict[str, Any]:
    """A child's per-task numbers (``sweep_jobs.graded_tasks``) from its graded stage's rows
    in its run folder (the ``wai.run_dir`` tag; the folder is on this machine for every
    launcher that shares the disk); {} when the folder or the rows are not there."""
    from wai_exp.tracking.mlflow_tracker import GRADED_KINDS
    from wai_exp.tracking.sweep_jobs import graded_tasks

    tags = run.data.tags
    run_dir = tags.get("wai.run_dir")
    stages = [
        k[: -len(".kind")] for k, v in tags.items() if k.endswith(".kind") and v in GRADED_KINDS
    ]
    return graded_tasks(run_dir, stages) if run_dir else {}


def _sweep_note(
    per_value: Mapping[str, Any],
    spread: Mapping[str, Any],
    n_jobs: int,
    n_failed: int,
    overrides: Sequence[str],
    notes: Sequence[str] = (),
) -> str:
    """The parent run's markdown description: the per-value table, the lines under it (task
    sets, paired deltas, seeds needed) and the re-run spread."""
    from wai_exp.tracking.sweep import spread_line, table_markdown

    swept = ", ".join(f"`{k}`" for k in per_value["swept"]) or "nothing"
    lines = [
        f"### Sweep over {swept}: pass@1 per value",
        "",
        table_markdown(per_value),
        "",
        "Intervals: over a value's tasks (its runs' per-task pass rates pooled, 95% "
        "bootstrap) when its runs recorded them, else a 95% t interval over its re-runs; one "
        "run: that run's own 95% interval. pass^k and pass@k the same way, each task's "
        "estimate at the runs' k averaged over its runs.",
        "",
        *(f"- {line}" for line in notes),
        *([""] if notes else []),
    ]
    lines += [
        spread_line(spread, markdown=True),
        "",
        counted(n_jobs, "child run") + (f", {n_failed} not finished" if n_failed else "") + ".",
        f"<sub>overrides: {' '.join(overrides) or 'none'}</sub>",
    ]
    return "\n".join(lines) + "\n"


def _yaml(obj: Any) -> str:
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True)
