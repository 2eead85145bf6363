"""Real signals sent to the console script: one Ctrl-C stops the run promptly; a SIGKILLed
run does not stay RUNNING in MLflow."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def _start(cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [WAI_EXP, "+experiment=rl_round", *args], cwd=cwd, env=dict(os.environ), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _rows(cwd: Path) -> int:
    found = list((cwd / "outputs/.cache").glob("simulate-*/partial.jsonl"))
    return found[0].read_bytes().count(b"\n") if found else 0


def _wait_for_rows(proc: subprocess.Popen, cwd: Path, n: int) -> int:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        got = _rows(cwd)
        if got >= n:
            return got
        assert proc.poll() is None, "the run ended before it could be stopped; raise the budget"
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} rows streamed in 180 s")


def _runs(cwd: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(cwd / "mlflow.db") as db:
        return db.execute(
            "select r.run_uuid, r.status, t.value from runs r left join tags t "
            "on t.run_uuid = r.run_uuid and t.key = 'wai.error' order by r.start_time"
        ).fetchall()


def test_one_sigint_stops_launching_keeps_the_rows_and_marks_the_run_killed(tmp_path):
    budget = 20000  # minutes of rollouts: the run must not wait for them
    proc = _start(tmp_path, f"simulate.budget={budget}")
    at_signal = _wait_for_rows(proc, tmp_path, 200)
    proc.send_signal(signal.SIGINT)  # once
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    kept = _rows(tmp_path)
    assert at_signal <= kept < budget // 2  # finished rows kept; no new rollouts launched
    assert "interrupted during stage 'simulate'; re-run the same command to resume" in out
    assert "finished rows kept in outputs/.cache/simulate-" in out  # where the resume starts
    [(_, status, error)] = _runs(tmp_path)
    assert status == "KILLED" and "interrupted" in error


def test_a_sigkilled_run_is_marked_killed_with_the_reason_by_the_next_start(tmp_path):
    proc = _start(tmp_path, "simulate.budget=5000")
    _wait_for_rows(proc, tmp_path, 50)
    proc.send_signal(signal.SIGKILL)  # no clean-up at all
    proc.wait(timeout=30)
    # Nothing in the killed process could end it. Its tracking writer (a process of its own)
    # may still be creating the run, and then ends it as it reads end-of-file; else the next
    # start does.
    deadline = time.monotonic() + 120
    while True:
        try:
            [(killed_id, status, why)] = _runs(tmp_path)
            break
        except (sqlite3.OperationalError, ValueError):
            assert time.monotonic() < deadline, "the killed run never reached the store"
            time.sleep(0.5)
    assert status in ("RUNNING", "KILLED"), why
    nxt = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "simulate.budget=40"], cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert nxt.returncode == 0, nxt.stderr
    runs = {run_id: (status, error) for run_id, status, error in _runs(tmp_path)}
    status, error = runs[killed_id]
    assert status == "KILLED", error
    assert f"pid {proc.pid}" in error and "is gone" in error
    assert sorted(s for s, _ in runs.values()) == ["FINISHED", "KILLED"]
