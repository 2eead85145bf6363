"""A tracking store that fails says which file and what to do, never a SQL dump, and never
blames the stage that had finished."""

from __future__ import annotations

import os
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
