"""The writer process: the same record as in-process tracking, off the run's critical path."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from wai_exp.tracking import make_tracker
from wai_exp.tracking.background import BackgroundTracker, _shared_writer
from wai_exp.tracking.mlflow_tracker import TrackingError


def _client(start):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{start.resolve() / 'mlflow.db'}")


def test_a_background_run_is_complete_when_finish_returns(
    start_dir, tmp_path, graded_rows, write_jsonl
):
    tracker = make_tracker({}, start_dir)
    assert isinstance(tracker, BackgroundTracker)
    run_dir = tmp_path / "run"
    tracker.start({"seed": 1, "simulate": {"budget": 9}}, ["seed=1"], run_dir, "eval", "cafe")
    rows = write_jsonl(run_dir / "grade" / "rows.jsonl", graded_rows)
    tracker.log_stage(
        "grade", kind="grade", report={"k": 4, "n_groups": 3}, text="t", rows_path=rows,
        metrics={"pass_at_1": 0.6, "pass_at_1_ci_lo": 0.4, "pass_at_1_ci_hi": 0.8}, seconds=1.0,
        cached=False, rows=graded_rows,
    )  # fmt: skip
    tracker.set_tags({"gate_verdict": "passed"})
    tracker.finish("FINISHED")
    assert tracker.run_id and tracker.status == "FINISHED"
    run = _client(start_dir).get_run(tracker.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "eval seed=1"
    assert run.data.metrics["pass_at_1"] == 0.6 and run.data.params["simulate.budget"] == "9"
    assert "pass@1 0.600 (95% CI 0.400–0.800)" in run.data.tags["mlflow.note.content"]
    arts = {a.path for a in _client(start_dir).list_artifacts(run.info.run_id, "grade")}
    assert {"grade/rows.jsonl.gz", "grade/pass_rate_hist.png", "grade/headline.png"} <= arts
    assert (run_dir / "tracking.log").is_file()


def test_one_writer_serves_every_run_of_a_process(start_dir, tmp_path):
    """A reused launcher worker imports MLflow once: the second run uses the same writer."""
    pids = []
    for i in range(2):
        tracker = make_tracker({}, start_dir)
        tracker.start({}, [f"seed={i}"], tmp_path / str(i), "eval", "h")
        tracker.finish("FINISHED")
        pids.append(_shared_writer().proc.pid)
        run = _client(start_dir).get_run(tracker.run_id)
        assert run.data.tags["wai.process"].startswith(f"{pids[-1]}:")
    assert pids[0] == pids[1]


def test_a_writer_started_from_a_folder_since_removed_still_records_the_next_run(
    tmp_path, migrated_db, monkeypatch
):
    """A notebook runs an experiment from a scratch folder, removes it, and runs the next
    from elsewhere: the shared writer, started in the removed folder, records it."""
    import shutil

    monkeypatch.delenv("WAI_EXP_MLFLOW_PARENT_RUN_ID", raising=False)
    for i in range(2):
        scratch = tmp_path / f"scratch{i}"
        (scratch / "start").mkdir(parents=True)
        shutil.copyfile(migrated_db, scratch / "start" / "mlflow.db")
        monkeypatch.chdir(scratch)
        tracker = make_tracker({}, scratch / "start")
        tracker.start({}, [f"seed={i}"], scratch / "run", "eval", "h")
        tracker.finish("FINISHED")
        assert tracker.status == "FINISHED"
        assert _client(scratch / "start").get_run(tracker.run_id).info.status == "FINISHED"
        monkeypatch.chdir(tmp_path)
        shutil.rmtree(scratch)


def test_a_store_error_in_the_writer_reaches_the_runner(start_dir, tmp_path):
    client = _client(start_dir)
    exp = client.create_experiment("gone")
    client.delete_experiment(exp)
    tracker = make_tracker({"experiment": "gone"}, start_dir)
    tracker.start({}, [], tmp_path, "eval", "h")
    with pytest.raises(TrackingError, match="deleted"):
        tracker.finish("FINISHED")


def test_a_killed_wai_exp_process_leaves_no_running_run(start_dir, tmp_path):
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from wai_exp.tracking import make_tracker
        t = make_tracker({{}}, Path({str(start_dir)!r}))
        t.start({{}}, [], Path({str(tmp_path / "killed")!r}), "eval", "h")
        t._writer.send({{"op": "flush", "run": t._key, "token": -1}})
        t._writer.wait_for(-1, 120)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == -9, proc.stderr
    client = _client(start_dir)
    exp = client.get_experiment_by_name("wai-exp")
    deadline = time.monotonic() + 60
    while True:
        [run] = client.search_runs([exp.experiment_id])
        if run.info.status != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert run.info.status == "KILLED"
    pid = run.data.tags["wai.pid"]  # the killed process, not its writer
    assert f"pid {pid}" in run.data.tags["wai.error"] and "is gone" in run.data.tags["wai.error"]


def test_the_writer_redacts_the_secrets_this_process_knows(start_dir, tmp_path):
    from wai_exp.domain.secrets import register_secret

    register_secret("sk-live-abcdef0123456789")
    tracker = make_tracker({}, start_dir)
    tracker.start({"agent": {"base_url": "http://h"}}, [], tmp_path / "r", "eval", "h")
    tracker.set_tags({"note": "key sk-live-abcdef0123456789 leaked"})
    tracker.finish("FINISHED")
    tags = _client(start_dir).get_run(tracker.run_id).data.tags
    assert "sk-live-abcdef0123456789" not in tags["note"] and "***redacted***" in tags["note"]


def test_a_killed_writer_is_named_as_such_not_as_a_moved_database(tmp_path):
    """Issue 25 item 6: the writer killed before it created the store read as 'the MLflow
    database was deleted or moved'. Now: the writer process, its pid and the signal."""
    import os
    import signal

    from wai_exp.tracking.store_errors import describe_store_error

    db = tmp_path / "fresh.db"  # the writer creates it once MLflow is imported: not yet
    tracker = BackgroundTracker(uri=f"sqlite:///{db}", start_dir=tmp_path)
    tracker.start({}, [], tmp_path / "run", "eval", "h")
    proc = tracker._writer.proc
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    for call in (
        lambda: tracker.log_stage(
            "simulate", report={}, text="", rows_path=None, metrics={}, seconds=0.0, cached=False
        ),  # fmt: skip
        lambda: tracker.finish("FINISHED"),
    ):
        with pytest.raises(Exception) as err:
            call()
        why = describe_store_error(err.value, tracker.uri, tmp_path / "run")
        assert (
            f"the tracking writer process (pid {proc.pid}) is gone (killed by signal SIGKILL)"
            in why
        )
        assert "deleted or moved" not in why
        assert "re-run the same command" in why


def test_the_run_starts_when_the_command_did(start_dir, tmp_path):
    """Issue 23 §3: the writer creates the run seconds after the command began (it imports
    MLflow first), and MLflow's Duration column read ~9 s for 40-58 s runs. The run's start
    time is now the process's start."""
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from wai_exp.tracking import make_tracker
        t = make_tracker({{}}, Path({str(start_dir)!r}))
        t.start({{}}, [], Path({str(tmp_path / "r")!r}), "eval", "h")
        t.finish("FINISHED")
        print(t.run_id)
        """
    )
    began = time.time()
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    run = _client(start_dir).get_run(proc.stdout.split()[-1])
    assert began * 1000 - 2000 <= run.info.start_time <= (began + 1.0) * 1000
