"""Issue 23 §3, tracking that stalls the terminal: what the user waits for, and for how long.

- ``wai-exp compare``'s MLflow run starts when the command did (it was created seconds
  later, after MLflow's import, so its Duration read the recording, not the command);
- a wait on the tracking store longer than 2 s shows a line saying what for, and then one
  every 5 s (``compare`` said so once, then nothing until the store answered or failed);
- a new SQLite store starts from a migrated, empty schema kept in the user's cache: MLflow
  ran its schema migrations one by one on every first run in a folder (5 s of a quiet core).
"""

from __future__ import annotations

import io
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from wai_exp.rows.jsonl import write_rows

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def _arms(folder: Path) -> None:
    for name, p, seed in (("a", 0.4, 1), ("b", 0.55, 2)):
        rng = np.random.default_rng(seed)
        write_rows(folder / f"{name}.jsonl", [
            {"scenario_id": f"t{t}", "prompt": f"ask {t}", "reward": float(rng.random() < p),
             "final_text": "done", "policy_version": name}
            for t in range(20) for _ in range(4)
        ])  # fmt: skip


def _compare(folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAI_EXP, "compare", "a.jsonl", "b.jsonl", *extra],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=300,
    )  # fmt: skip


def test_a_compare_run_starts_when_the_command_did(start_dir: Path) -> None:
    from mlflow import MlflowClient

    _arms(start_dir)
    began = time.time()
    res = _compare(start_dir, "--tracking-uri", f"sqlite:///{start_dir / 'mlflow.db'}")
    assert "MLflow run:" in res.stdout, res.stdout
    run_id = res.stdout.split("MLflow run:")[1].split()[0]
    run = MlflowClient(tracking_uri=f"sqlite:///{start_dir / 'mlflow.db'}").get_run(run_id)
    # Before: the run began when the store was reached, after importing MLflow (2-10 s on).
    # Now it is the command's start; 2 s of slack for the interpreter's start on a loaded
    # machine (1.06 s was seen with the suite and other jobs sharing 2 cores).
    assert began * 1000 - 2000 <= run.info.start_time <= (began + 2.0) * 1000, (
        run.info.start_time - began * 1000
    )
    assert run.info.end_time >= run.info.start_time


def test_a_compare_waiting_on_its_store_says_so_every_few_seconds(tmp_path: Path) -> None:
    _arms(tmp_path)
    # A tracking server that accepts connections and never answers: wai-exp gives up on it
    # after its 5 s health check, and the user waits that long.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        res = _compare(tmp_path, "--tracking-uri", f"http://127.0.0.1:{silent.getsockname()[1]}")
    finally:
        silent.close()
    lines = res.stdout.splitlines()
    said = [i for i, x in enumerate(lines) if x.startswith("[tracking] recording the comparison")]
    failed = next(i for i, x in enumerate(lines) if "not logged to MLflow" in x)
    # Before: one line as recording began, then silence until the store failed.
    assert said and said[0] < failed, res.stdout
    assert lines[said[0]].endswith("(2 s)..."), lines[said[0]]


def test_progress_lines_come_after_the_quiet_wait_and_stop_with_it() -> None:
    from wai_exp.tracking.progress import progress_while

    quick = io.StringIO()
    with progress_while("writing", quiet_s=0.5, every_s=0.2, stream=quick):
        pass
    assert quick.getvalue() == ""  # a short wait says nothing
    slow = io.StringIO()
    with progress_while("writing", quiet_s=0.2, every_s=0.2, stream=slow):
        time.sleep(0.9)
    lines = slow.getvalue().splitlines()
    assert 2 <= len(lines) <= 5 and all(x.startswith("[tracking] writing (") for x in lines)
    time.sleep(0.4)
    assert slow.getvalue().splitlines() == lines  # nothing once the wait is over


def _revision(db: Path) -> str:
    with sqlite3.connect(db) as con:
        return con.execute("select version_num from alembic_version").fetchone()[0]


def test_a_new_store_starts_from_the_migrated_schema_in_the_cache(tmp_path, monkeypatch):
    import mlflow
    from mlflow import MlflowClient

    from wai_exp.tracking import mlflow_tracker

    cache = tmp_path / "cache"
    monkeypatch.setenv(mlflow_tracker.SCHEMA_CACHE_ENV, str(cache))
    monkeypatch.setattr(mlflow_tracker, "_prepared", {})
    stores = []
    for name in ("one", "two"):
        db = tmp_path / name / "mlflow.db"
        exp_id = mlflow_tracker.prepare_store(f"sqlite:///{db}", "wai-exp")
        client = MlflowClient(tracking_uri=f"sqlite:///{db}")
        run = client.create_run(exp_id)
        client.set_terminated(run.info.run_id)
        assert client.get_run(run.info.run_id).info.status == "FINISHED"
        # MLflow's own default experiment, in this store's folder (not the template's)
        default = client.get_experiment("0")
        assert default.name == "Default", default
        stores.append(db)
    [template] = cache.glob("wai-exp/mlflow-*-schema.db")
    assert template.name == f"mlflow-{mlflow.__version__}-schema.db"
    assert _revision(stores[0]) == _revision(stores[1]) == _revision(template)
    with sqlite3.connect(template) as con:  # the template holds a schema, never a run
        assert con.execute("select count(*) from experiments").fetchone()[0] == 0
        assert con.execute("select count(*) from runs").fetchone()[0] == 0


def test_without_a_writable_cache_a_new_store_is_migrated_in_place(tmp_path, monkeypatch):
    from wai_exp.tracking import mlflow_tracker

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would go")
    monkeypatch.setenv(mlflow_tracker.SCHEMA_CACHE_ENV, str(blocked))
    monkeypatch.setattr(mlflow_tracker, "_prepared", {})
    db = tmp_path / "s" / "mlflow.db"
    assert mlflow_tracker.prepare_store(f"sqlite:///{db}", "wai-exp")
    assert _revision(db)
    assert not list(tmp_path.glob("s/*.tmp"))


def test_the_commands_start_is_when_its_process_started_to_the_tick() -> None:
    """MLflow's start time (and so its Duration) is the process's start: after the moment
    it was launched and before its first line ran. Read from the boot time in whole
    seconds (psutil), it was up to a second early."""
    script = (
        "import time; first = time.time()\n"
        "from wai_exp.tracking.orphans import command_start_ms\n"
        "print(command_start_ms(), int(first * 1000))\n"
    )
    for _ in range(3):
        launched = int(time.time() * 1000)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        start, first = map(int, out.stdout.split())
        # one clock tick (10 ms) of rounding either way
        assert launched - 10 <= start <= first + 10, (launched, start, first)
