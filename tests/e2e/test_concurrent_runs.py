"""Runs started at the same moment in one folder never share a run folder."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def test_four_runs_started_at_once_share_store_and_cache_but_not_a_folder(tmp_path):
    args = [WAI_EXP, "+experiment=rl_round", "simulate.budget=40"]
    procs = [
        subprocess.Popen(args, cwd=tmp_path, env=dict(os.environ), text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]  # fmt: skip
    results = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
    dirs = sorted(
        d for d in (tmp_path / "outputs").glob("*/*") if not d.parent.name.startswith(".")
    )
    assert len(dirs) == 4, dirs
    records = [json.loads((d / "run.json").read_text()) for d in dirs]
    run_ids = {r["run_id"] for r in records}
    assert len(run_ids) == 4 and all(r["status"] == "passed" for r in records)
    for d in dirs:  # each folder holds exactly one run's files
        assert (d / "simulate" / "rows.jsonl").is_file() and (
            d / ".hydra" / "overrides.yaml"
        ).is_file()
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        rows = db.execute(
            "select r.run_uuid, r.status, t.value from runs r join tags t "
            "on t.run_uuid = r.run_uuid and t.key = 'wai.run_dir'"
        ).fetchall()
    assert {r[0] for r in rows} == run_ids
    assert all(status == "FINISHED" for _, status, _ in rows)
    assert sorted(Path(v) for _, _, v in rows) == [d.resolve() for d in dirs]
