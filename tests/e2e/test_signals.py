"""Real signals sent to the console script: one Ctrl-C stops the run promptly; a SIGKILLed
run does not stay RUNNING in MLflow.

The runs use the default tracking (the embedded SQLite store, written by the tracking writer
process). A stopped run returns without waiting on that writer for long, so its MLflow run
may be ended a few seconds after the command returned: the tests wait for that end.
A signal "to the group" is what a terminal's Ctrl-C, timeout(1), Slurm and systemd send: it
reaches the writer as well."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
#: A liveness bound on a stop, not a speed target: it returns in seconds, where it waited on
#: MLflow for minutes (or for good) before.
RETURNS_WITHIN_S = 30


def _start(cwd: Path, *args: str) -> subprocess.Popen:
    # Its own process group, so a test can signal the whole group as a terminal does.
    return subprocess.Popen(
        [WAI_EXP, "+experiment=rl_round", *args], cwd=cwd, env=dict(os.environ), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
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
    # Read-only: a plain connect would create an empty mlflow.db under a writer making it.
    db = sqlite3.connect(f"file:{cwd / 'mlflow.db'}?mode=ro", uri=True)
    try:
        return db.execute(
            "select r.run_uuid, r.status, t.value from runs r left join tags t "
            "on t.run_uuid = r.run_uuid and t.key = 'wai.error' order by r.start_time"
        ).fetchall()
    finally:
        db.close()


def _ended_runs(cwd: Path, n: int = 1) -> list[tuple[str, str, str | None]]:
    """The store's runs once ``n`` exist and none is RUNNING (the writer may still be
    recording a stopped run's end after the command returned)."""
    deadline = time.monotonic() + 120
    runs: list[tuple[str, str, str | None]] = []
    while time.monotonic() < deadline:
        with contextlib.suppress(sqlite3.Error):
            runs = _runs(cwd)
            if len(runs) >= n and all(status != "RUNNING" for _, status, _ in runs):
                return runs
        time.sleep(0.25)
    raise AssertionError(f"the runs never ended: {runs}")


def _writer_pid(proc: subprocess.Popen) -> int:
    """The pid of the run's tracking writer (a child process of ``wai-exp``)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):
                fields = stat.read_text().rsplit(")", 1)[-1].split()
                cmd = (stat.parent / "cmdline").read_bytes()
                if int(fields[1]) == proc.pid and b"wai_exp.tracking.background" in cmd:
                    return int(stat.parent.name)
        assert proc.poll() is None, "the run ended before its tracking writer was found"
        time.sleep(0.1)
    raise AssertionError("no tracking writer process found")


def _wait_until_recorded(proc: subprocess.Popen, cwd: Path) -> None:
    """Until the writer has created the run and logged its start (the last file it logs),
    so a writer stopped after this holds no store lock."""
    deadline = time.monotonic() + 180
    while not list(cwd.glob("mlartifacts/*/artifacts/overrides.yaml")):
        assert proc.poll() is None, "the run ended before it could be stopped; raise the budget"
        assert time.monotonic() < deadline, "the tracking writer never created the run"
        time.sleep(0.1)
    time.sleep(0.5)


class _Stderr:
    """Reads a process's stderr as it comes, so a test can wait for a line."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.text = ""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            with self._lock:
                self.text += line

    def wait_for(self, needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            assert time.monotonic() < deadline, f"{needle!r} not printed; stderr:\n{self.text}"
            time.sleep(0.05)

    def all(self) -> str:
        self._thread.join(timeout=30)
        return self.text


@contextlib.contextmanager
def _cleanup(proc: subprocess.Popen, *pids: int):
    try:
        yield
    finally:
        for pid in pids:  # a stopped writer, continued so it can exit
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


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
    [(_, status, error)] = _ended_runs(tmp_path)
    assert status == "KILLED" and "interrupted" in error


def test_ctrl_c_to_the_group_says_at_once_what_it_saves_and_the_run_ends_killed(tmp_path):
    proc = _start(tmp_path, "simulate.budget=20000")
    with _cleanup(proc):
        _wait_for_rows(proc, tmp_path, 200)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the writer gets it too
        out, err = proc.communicate(timeout=RETURNS_WITHIN_S)
    assert proc.returncode == 130, err
    assert "wai-exp: Ctrl-C during stage 'simulate': stopping; saving what finished" in err
    assert "finished rows kept in outputs/.cache/simulate-" in err
    assert "ending the MLflow run KILLED" in err or "ending MLflow run " in err
    assert "Traceback" not in err
    [(_, status, error)] = _ended_runs(tmp_path)
    assert status == "KILLED"
    assert error.startswith("interrupted during stage 'simulate'; re-run the same command")


def test_a_stop_does_not_wait_on_a_starved_tracking_writer_which_ends_the_run_later(tmp_path):
    """The tracking writer gets no CPU (stopped: a machine under load, a slow store). The
    command still returns, saying the writer ends the run; the next run in the store leaves
    that run to the writer (not 'killed by SIGKILL, the OOM killer'); the writer, once it
    runs again, ends it KILLED with the reason."""
    proc = _start(tmp_path, "simulate.budget=20000")
    writer = _writer_pid(proc)
    with _cleanup(proc, writer):
        _wait_until_recorded(proc, tmp_path)
        _wait_for_rows(proc, tmp_path, 200)
        os.kill(writer, signal.SIGSTOP)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=RETURNS_WITHIN_S)
        assert proc.returncode == 130, err
        assert "finished rows kept in outputs/.cache/simulate-" in err
        assert f"the tracking writer (pid {writer}) is still recording it and ends it KILLED" in out
        [(old_id, status, _)] = _runs(tmp_path)
        assert status == "RUNNING"  # nothing recorded it yet
        nxt = subprocess.run(
            [WAI_EXP, "+experiment=rl_round", "simulate.budget=40"], cwd=tmp_path,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert nxt.returncode == 0, nxt.stderr
        # Its process is gone but its writer lives: left to the writer, not reaped as OOM.
        assert dict((r, (st, e)) for r, st, e in _runs(tmp_path))[old_id] == ("RUNNING", None)
        os.kill(writer, signal.SIGCONT)
        runs = {run_id: (status, error) for run_id, status, error in _ended_runs(tmp_path, 2)}
    status, error = runs.pop(old_id)
    assert status == "KILLED"
    assert error.startswith("interrupted during stage 'simulate'; re-run the same command")
    assert [s for s, _ in runs.values()] == ["FINISHED"]


def test_a_second_ctrl_c_exits_at_once_with_one_line_and_no_traceback(tmp_path):
    proc = _start(tmp_path, "simulate.budget=20000")
    writer = _writer_pid(proc)
    stderr = _Stderr(proc)
    with _cleanup(proc, writer):
        _wait_until_recorded(proc, tmp_path)
        _wait_for_rows(proc, tmp_path, 200)
        os.kill(writer, signal.SIGSTOP)  # the first Ctrl-C then waits on the writer
        os.killpg(proc.pid, signal.SIGINT)
        stderr.wait_for("Ctrl-C again exits at once", RETURNS_WITHIN_S)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=RETURNS_WITHIN_S)
        err = stderr.all()
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err
        [line] = [ln for ln in err.splitlines() if "again" in ln and "exits at once" not in ln]
        assert line.startswith("wai-exp: Ctrl-C again: exiting now; the finished rows stay")
        assert f"the tracking writer (pid {writer}) still ends MLflow run " in line
        os.kill(writer, signal.SIGCONT)
        [(_, status, error)] = _ended_runs(tmp_path)
    assert status == "KILLED" and error.startswith("interrupted during stage 'simulate'")


def test_sigterm_to_the_group_ends_the_run_killed_and_no_later_run_relabels_it(tmp_path):
    """timeout(1), Slurm and systemd signal the whole process group, the tracking writer
    included."""
    proc = _start(tmp_path, "simulate.budget=20000")
    with _cleanup(proc):
        _wait_for_rows(proc, tmp_path, 200)
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=RETURNS_WITHIN_S)
    assert proc.returncode == 143, err  # 128 + SIGTERM, as a shell reports it
    assert "wai-exp: SIGTERM during stage 'simulate': stopping; saving what finished" in err
    assert "could not mark" not in err and "Traceback" not in err
    assert "interrupted by SIGTERM during stage 'simulate'" in out
    [(killed_id, status, error)] = _ended_runs(tmp_path)
    assert status == "KILLED"
    assert error.startswith("interrupted by SIGTERM during stage 'simulate'; re-run")
    nxt = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "simulate.budget=40"], cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert nxt.returncode == 0, nxt.stderr
    runs = {run_id: (status, error) for run_id, status, error in _ended_runs(tmp_path, 2)}
    assert runs[killed_id] == ("KILLED", error)  # not relabelled "killed by SIGKILL, OOM"


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
