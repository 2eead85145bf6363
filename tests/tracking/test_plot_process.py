"""Plots rendered by a process of their own: the same figures a stage always got, off the
tracking writer's path, and a failure that costs the plots only, never the run."""

from __future__ import annotations

import io
import logging
import threading

import pytest

from wai_exp.tracking import make_tracker
from wai_exp.tracking.plot_process import PlotsFailed, delta_plot, stage_plots
from wai_exp.tracking.plots import stage_figures

PNG = b"\x89PNG\r\n\x1a\n"


def test_a_stage_job_renders_the_stages_figures_as_pngs(graded_rows, write_jsonl, tmp_path):
    rows = write_jsonl(tmp_path / "grade" / "rows.jsonl", graded_rows)
    metrics = {"pass_at_1": 0.7, "pass_at_1_ci_lo": 0.5, "pass_at_1_ci_hi": 0.9}
    job = stage_plots("grade", rows, {"k": 4}, metrics, (0.2, 0.8))
    files = job.files()
    # the figures the stage got when they were rendered in the writer, same names, same bytes
    here = stage_figures("grade", graded_rows, {"k": 4}, metrics)
    assert set(files) == set(here) and {"pass_rate_hist.png", "pass_at_k.png"} <= set(files)
    png = io.BytesIO()
    here["pass_rate_hist.png"].savefig(png)
    assert files["pass_rate_hist.png"].read_bytes() == png.getvalue()
    assert all(p.read_bytes().startswith(PNG) for p in files.values())
    job.discard()
    assert not job.out_dir.exists()


def test_a_delta_job_renders_delta_png():
    report = {
        "target": "pass_at_1", "headline_verdict": "IMPROVED",
        "metrics": {"pass_at_1": {"before": 0.5, "after": 0.7, "delta": 0.2, "ci95": [0.1, 0.3]}},
    }  # fmt: skip
    job = delta_plot(report, "paired deltas")
    files = job.files()
    assert set(files) == {"delta.png"} and files["delta.png"].read_bytes().startswith(PNG)
    job.discard()


def test_a_job_that_cannot_read_its_rows_fails_saying_why(tmp_path):
    job = stage_plots("grade", tmp_path / "gone.jsonl", None, None, None)
    with pytest.raises(PlotsFailed, match="gone.jsonl"):
        job.files()
    job.discard()


def test_failed_plots_cost_the_plots_only_and_say_so(
    start_dir, tmp_path, graded_rows, write_jsonl, monkeypatch, caplog
):
    import wai_exp.tracking.plot_process as plot_process

    real = plot_process.stage_plots
    monkeypatch.setattr(
        plot_process, "stage_plots", lambda stage, *a: real(stage, tmp_path / "gone.jsonl", *a[1:])
    )
    tracker = make_tracker({"kind": "mlflow", "background": False}, start_dir)
    tracker.start({"seed": 0}, [], tmp_path / "run", None, "h")
    rows = write_jsonl(tmp_path / "run" / "grade" / "rows.jsonl", graded_rows)
    with caplog.at_level(logging.WARNING):
        tracker.log_stage(
            "grade", kind="grade", report={}, rows_path=rows, metrics={"pass_at_1": 0.7}
        )
        tracker.finish("FINISHED")
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracker.uri)
    assert client.get_run(tracker.run_id).info.status == "FINISHED"
    names = {f.path for f in client.list_artifacts(tracker.run_id, "grade")}
    assert "grade/report.json" in names and not any(n.endswith(".png") for n in names)
    assert "stage grade: plots not logged (PlotsFailed" in caplog.text


def test_a_process_that_exits_without_finishing_still_logs_the_plots_it_rendered(
    start_dir, tmp_path, graded_rows, write_jsonl
):
    """An in-process tracker (tracking.background=false) whose process exits mid-run
    (a crash) ends the run FAILED with the plots of the stages it recorded."""
    tracker = make_tracker({"kind": "mlflow", "background": False}, start_dir)
    tracker.start({"seed": 0}, [], tmp_path / "run", None, "h")
    rows = write_jsonl(tmp_path / "run" / "grade" / "rows.jsonl", graded_rows)
    tracker.log_stage("grade", kind="grade", report={}, rows_path=rows, metrics={"pass_at_1": 0.7})
    tracker._atexit()  # what the exit handler does when finish() never came
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracker.uri)
    assert client.get_run(tracker.run_id).info.status == "FAILED"
    names = {f.path for f in client.list_artifacts(tracker.run_id, "grade")}
    assert {"grade/pass_rate_hist.png", "grade/pass_at_k.png"} <= names


def test_a_trace_batch_waits_for_the_writer_thread_holding_the_store():
    """Two threads of one writer never write the SQLite store at once: a trace batch waits
    on STORE_WRITES (SQLite's own busy handler would sleep in steps of up to 50 ms)."""
    from wai_exp.tracking.traces import STORE_WRITES, _one_transaction

    opened: list[str] = []

    class Store:
        def __init__(self) -> None:
            import contextlib

            @contextlib.contextmanager
            def maker(read_only: bool = True):
                opened.append("session")
                yield object()

            self.ManagedSessionMaker = maker

        def get_experiment(self, experiment_id: str) -> str:
            return experiment_id

    def batch() -> None:
        with _one_transaction(Store()):
            pass

    with STORE_WRITES:
        other = threading.Thread(target=batch)
        other.start()
        other.join(0.3)
        assert other.is_alive() and opened == []  # waits while this thread writes
    other.join(5)
    assert not other.is_alive() and opened == ["session"]
