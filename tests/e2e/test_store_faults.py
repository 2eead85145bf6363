"""A tracking store that fails says which file and what to do, never a SQL dump, and never
blames the stage that had finished."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def test_a_deleted_mlflow_db_is_named_and_the_finished_stage_is_not_blamed(tmp_path):
    proc = subprocess.Popen(
        # In-process tracking opens the store as the run starts; the writer process (the
        # default) may create it only after simulate, when there is nothing left to delete.
        [WAI_EXP, "+experiment=rl_round", "simulate.budget=1500", "tracking.background=false"],
        cwd=tmp_path,
        env=dict(os.environ), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = list((tmp_path / "outputs/.cache").glob("simulate-*/partial.jsonl"))
        # The tracking writer creates the store on its own schedule: wait for both.
        store_made = (tmp_path / "mlflow.db").exists()
        if store_made and found and found[0].read_bytes().count(b"\n") >= 50:
            break
        assert proc.poll() is None, "the run ended before the store could be deleted"
        time.sleep(0.05)
    (tmp_path / "mlflow.db").unlink()  # while simulate runs
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1
    db = tmp_path / "mlflow.db"
    assert f"the MLflow database {db} was deleted or moved while the run was going" in out
    assert "stage 'simulate' finished" in out and "stage 'simulate' failed" not in out
    assert "re-run the same command" in out
    assert "[SQL:" not in out + err and "Traceback" not in err


def _has_experiment(db: Path) -> bool:
    """The writer finished creating the store (schema and experiment): deleting it earlier
    would test a half-made store, not one deleted under a running writer."""
    import sqlite3

    if not db.exists():
        return False
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.1) as con:
            return con.execute("SELECT count(*) FROM experiments").fetchone()[0] > 1
    except sqlite3.Error:
        return False


def test_a_db_deleted_under_the_background_writer_keeps_the_rows_and_names_the_file(tmp_path):
    # The default: MLflow records from the writer process, which opens the store on its own
    # schedule (after importing MLflow, often once simulate is done). Delete the store as
    # soon as the writer has it, while the stages still run: a budget of 4000 rows keeps them
    # running well past the writer's start.
    proc = subprocess.Popen(
        [WAI_EXP, "+experiment=rl_round", "simulate.budget=4000"],
        cwd=tmp_path,
        env=dict(os.environ), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    db = tmp_path / "mlflow.db"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if list(tmp_path.glob("outputs/*/*/tracking.log")) and _has_experiment(db):
            break
        assert proc.poll() is None, "the run ended before the writer opened the store"
        time.sleep(0.05)
    else:
        pytest.fail("the writer never opened the store")
    db.unlink()  # the writer holds the store open
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, out + err
    assert f"the MLflow database {db} was deleted or moved while the run was going" in out
    assert "stage 'simulate' failed" not in out
    assert "re-run the same command" in out
    assert "[SQL:" not in out + err and "Traceback" not in err
    # The rows survive: simulate's finished rows are in the run folder, whole.
    assert "MLflow run: none (tracking=none)" not in out  # tracking was on; it failed
    [run_dir] = {p.parent for p in tmp_path.glob("outputs/*/*/tracking.log")}
    rows = (run_dir / "simulate" / "rows.jsonl").read_text().splitlines()
    assert len(rows) == 4000 and all(r.startswith("{") and r.endswith("}") for r in rows)
    # The writer said what happened in the run's own log too, without the SQL dump.
    log = (run_dir / "tracking.log").read_text()
    assert "deleted or moved" in log and "[SQL:" not in log


def test_a_read_only_mlflow_db_exits_2_naming_the_file_before_any_work(tmp_path):
    first = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "simulate.budget=8"], cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    db = tmp_path / "mlflow.db"
    # Read-only even for root (the test may run as root, for whom chmod is no barrier).
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not permitted here; cannot make a file read-only for root")
    try:
        runs_before = sorted((tmp_path / "outputs").glob("*/*"))
        res = subprocess.run(
            [WAI_EXP, "+experiment=rl_round", "simulate.budget=9"], cwd=tmp_path,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        subprocess.run(["chattr", "-i", str(db)], capture_output=True)
    assert res.returncode == 2, res.stderr
    assert f"the MLflow database {db} is read-only" in res.stderr
    assert "[SQL:" not in res.stderr and "Traceback" not in res.stderr
    assert sorted((tmp_path / "outputs").glob("*/*")) == runs_before  # nothing written


def _writer_pid(pid: int) -> int | None:
    """The tracking writer among the children of wai-exp process ``pid``, if started."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    for child in map(int, children):
        with contextlib.suppress(OSError):
            if b"wai_exp.tracking.background" in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
    return None


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc for the child")
def test_a_killed_tracking_writer_is_named_not_read_as_a_moved_database(tmp_path):
    """Issue 25 item 6: killing the writer read as 'the MLflow database was deleted or moved'
    (it had not created the store yet). Now the run names the writer process and the signal."""
    proc = subprocess.Popen(
        [WAI_EXP, "+experiment=rl_round", "simulate.budget=4000"],
        cwd=tmp_path,
        env=dict(os.environ), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    writer = None
    while writer is None and time.monotonic() < deadline:
        # Once simulate streams rows, the run's tracker has its writer (started before it).
        found = list((tmp_path / "outputs/.cache").glob("simulate-*/partial.jsonl"))
        if found and found[0].read_bytes().count(b"\n") >= 50:
            writer = _writer_pid(proc.pid)
        assert proc.poll() is None, "the run ended before its writer was seen"
        time.sleep(0.02)
    assert writer is not None, "no tracking writer started"
    os.kill(writer, signal.SIGKILL)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, out + err
    assert f"the tracking writer process (pid {writer}) is gone (killed by signal SIGKILL)" in out
    assert "deleted or moved" not in out + err and "tracking store failed" not in out
    assert "re-run the same command" in out and "Traceback" not in err
    [run_dir] = [p for p in (tmp_path / "outputs").glob("*/*") if (p / "simulate").is_dir()]
    assert len((run_dir / "simulate/rows.jsonl").read_text().splitlines()) == 4000
