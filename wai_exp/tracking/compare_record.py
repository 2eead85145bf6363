"""``wai-exp compare`` on the record: its delta report as an MLflow run linked to both arms.

The run lands in experiment ``compare`` of the tracking store (the same store the arms came
from when they are run ids), named ``compare <before> → <after>`` (the arms' run names when
they are runs). It holds the headline numbers as metrics (``delta``, ``delta_ci_lo``,
``delta_ci_hi``, ``before``, ``after``, ``n_paired_tasks``), the verdict and both arms as
tags (``wai.compare.before`` / ``.after``: what was compared; ``wai.compare.before_run_id`` /
``.after_run_id`` when an arm is a run), ``report.json``, ``report.txt`` and the paired-delta
plot ``delta.png`` as artifacts, and a markdown description with links to both arms.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wai_exp.domain.numbers import finite_float

EXPERIMENT = "compare"


def start_delta_plot(report: Mapping[str, Any]) -> Any:
    """Start rendering the report's ``delta.png`` in a process of its own
    (wai_exp.tracking.plot_process), to overlap the MLflow import."""
    from wai_exp.tracking.plot_process import delta_plot

    verdict = str(report.get("headline_verdict") or "")
    return delta_plot(report, title=f"paired deltas: {verdict}")


def _arm_run(client: Any, ref: str) -> Any | None:
    run_id = ref.rsplit(":", 1)[0] if ":" in ref and "/" not in ref else ref
    if "/" in run_id or len(run_id) < 8:
        return None
    try:
        return client.get_run(run_id)
    except Exception:  # noqa: BLE001 - a path or a foreign id: not a run in this store
        return None


def record_compare(
    report: Mapping[str, Any],
    text: str,
    *,
    before: str,
    after: str,
    sources: tuple[str, str],
    uri: str,
    plot_files: Mapping[str, Path] | None = None,
    start_dir: str | Path | None = None,
    owner: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Log one compare run; returns ``{"run_id", "experiment_id", "ui"}``. Raises whatever
    the store raises (the caller reports it and keeps the report); a run it had created by
    then is ended FAILED with the error in ``wai.error``. ``plot_files`` are the
    rendered plots (``{"delta.png": path}``, :func:`start_delta_plot`), logged at the run's
    top. ``start_dir`` is where the command was typed (its git commit is tagged; default:
    this process's working directory). ``owner`` are the tags naming the processes that
    record the run (``orphans.owner_tags``, plus ``writer_tags`` from the tracking writer;
    default: this process): a run whose processes all died mid-record is marked KILLED by
    the next compare into the store (``orphans.reap_orphans``)."""
    from mlflow import MlflowClient

    from wai_exp.domain.secrets import redact_text
    from wai_exp.tracking.mlflow_tracker import git_candidates, git_tags, prepare_store, ui_hint
    from wai_exp.tracking.orphans import command_start_ms, owner_tags, reap_orphans
    from wai_exp.tracking.summary import shorten_override

    exp_id = prepare_store(uri, EXPERIMENT)
    client = MlflowClient(tracking_uri=uri)
    # A compare run whose command and writer were killed mid-record is still RUNNING.
    reap_orphans(client, [exp_id])
    arms = {"before": _arm_run(client, before), "after": _arm_run(client, after)}
    names = {
        side: (run.info.run_name if run is not None else shorten_override(ref) or ref)
        for side, run, ref in (("before", arms["before"], before), ("after", arms["after"], after))
    }
    names = {k: (v if len(v) <= 50 else "…" + v[-49:]) for k, v in names.items()}
    verdict = str(report.get("headline_verdict") or "")
    m = (report.get("metrics") or {}).get(report.get("target") or "pass_at_1") or {}
    ci = m.get("ci95") or [None, None]
    links = []
    tags = {
        "wai.compare.before": sources[0],
        "wai.compare.after": sources[1],
        "wai.compare.verdict": verdict,
        "mlflow.source.name": "wai-exp compare",
        "mlflow.source.type": "LOCAL",
        **git_tags(git_candidates(Path(start_dir or Path.cwd()), [])),
        **(owner or owner_tags()),
    }
    for side, run in arms.items():
        if run is not None:
            tags[f"wai.compare.{side}_run_id"] = run.info.run_id
            links.append(
                f"- {side}: [{run.info.run_name}](#/experiments/{run.info.experiment_id}/runs/"
                f"{run.info.run_id}) ({sources[0] if side == 'before' else sources[1]})"
            )
        else:
            links.append(f"- {side}: {sources[0] if side == 'before' else sources[1]}")
    d, lo, hi = finite_float(m.get("delta")), finite_float(ci[0]), finite_float(ci[1])
    head = (
        f"### {verdict}: {report.get('target') or 'pass_at_1'} {d:+.3f} (95% CI {lo:+.3f} to {hi:+.3f})"
        if d is not None and lo is not None and hi is not None
        else f"### {verdict}: delta not measured"
    )
    note = "\n".join([head, "", *links, "", "```", text.strip(), "```"])
    tags["mlflow.note.content"] = note[:8000]
    tags = {k: redact_text(str(v))[:8000] for k, v in tags.items()}
    run = client.create_run(
        exp_id,
        # when the command began, not when the store was reached (seconds later): MLflow's
        # Duration is what the user waited for
        start_time=command_start_ms(),
        tags=tags,
        run_name=f"compare {names['before']} → {names['after']}",
    )
    rid = run.info.run_id
    try:
        _log_results(client, rid, report, text, m, (d, lo, hi), plot_files)
    except BaseException as exc:
        # Never a RUNNING half-run beside the answer the command prints (the store filled
        # up, a plot could not be copied): FAILED, saying what stopped it.
        with contextlib.suppress(Exception):
            client.set_tag(rid, "wai.error", redact_text(f"not recorded in full: {exc}")[:8000])
            client.set_terminated(rid, "FAILED")
        raise
    client.set_terminated(rid, "FINISHED")
    return {"run_id": rid, "experiment_id": exp_id, "ui": ui_hint(uri, exp_id, rid)}


def _log_results(
    client: Any,
    rid: str,
    report: Mapping[str, Any],
    text: str,
    m: Mapping[str, Any],
    delta: tuple[float | None, float | None, float | None],
    plot_files: Mapping[str, Path] | None,
) -> None:
    """The compare run's metrics, reports and plots."""
    from mlflow.entities import Metric, RunTag

    from wai_exp.domain.secrets import redact, redact_text
    from wai_exp.tracking.mlflow_tracker import jsonable

    d, lo, hi = delta
    now = int(time.time() * 1000)
    values = {
        "delta": d,
        "delta_ci_lo": lo,
        "delta_ci_hi": hi,
        "before": finite_float(m.get("before")),
        "after": finite_float(m.get("after")),
        "n_paired_tasks": finite_float(report.get("n_paired_tasks")),
        "ok": 1.0 if report.get("ok") else 0.0,
    }
    metrics = [Metric(k, v, now, 0) for k, v in values.items() if v is not None]
    client.log_batch(
        rid, metrics=metrics, tags=[RunTag("wai.compare.ok", str(bool(report.get("ok"))).lower())]
    )
    client.log_text(rid, json.dumps(redact(jsonable(report), keys=False), indent=2), "report.json")
    client.log_text(rid, redact_text(text, keys=False), "report.txt")
    for path in (plot_files or {}).values():
        client.log_artifact(rid, str(path))


def end_half_made(uri: str, writer_pid: int, why: str, complete_run_id: str | None) -> list[str]:
    """End FAILED the compare runs this process's tracking writer ``writer_pid`` created and
    never ended (it died mid-record: ``why``), naming the run that holds the complete record
    (``complete_run_id``, recorded by this process since; None when that failed too).
    Returns their ids. Never raises: the comparison's answer is printed already."""
    from mlflow import MlflowClient

    from wai_exp.tracking.orphans import end_runs_of_dead_writer

    then = (
        f"; the complete record is run {complete_run_id}"
        if complete_run_id
        else "; recording it again from the command failed too"
    )
    try:
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(EXPERIMENT)
    except Exception:  # noqa: BLE001 - the store that failed the record fails this too
        return []
    if exp is None:
        return []
    reason = f"not recorded in full: {why}{then}"
    return end_runs_of_dead_writer(client, [exp.experiment_id], writer_pid, "FAILED", reason)
