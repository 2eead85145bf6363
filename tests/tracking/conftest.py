"""Shared fixtures: a start folder holding a copy of the session's migrated SQLite MLflow
store (``migrated_db``, tests/conftest.py), and graded rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest


@pytest.fixture
def start_dir(tmp_path: Path, migrated_db: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh 'folder where wai-exp was started' holding a copy of the migrated store.

    The process also runs from a different folder, so a relative path anywhere would show.
    """
    start = tmp_path / "start"
    start.mkdir()
    shutil.copyfile(migrated_db, start / "mlflow.db")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("WAI_EXP_MLFLOW_PARENT_RUN_ID", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.delenv("WAI_EXP_START_DIR", raising=False)
    return start


@pytest.fixture
def graded_rows() -> list[dict]:
    """Three tasks: t1 passes 2 of 4, t2 4 of 4, t3 1 of 2; plus an unjudged and a partial row."""
    rows = []
    for key, rewards in {"t1": [1, 0, 1, 0], "t2": [1, 1, 1, 1], "t3": [1, 0]}.items():
        for i, r in enumerate(rewards):
            rows.append(
                {
                    "scenario_id": key,
                    "rollout_index": i,
                    "prompt": f"ask {key}",
                    "reward": r,
                    "steps": [{"kind": "assistant", "text": "hi"}],
                    "lineage": {"run_id": "r1", "source": "grade"},
                }
            )
    rows.append({"scenario_id": "t4", "rollout_index": 0, "prompt": "x", "reward": None})
    rows.append({"scenario_id": "t5", "rollout_index": 0, "prompt": "y", "reward": 0.5})
    return rows


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def write_jsonl():
    """``write_jsonl(path, rows) -> path``: rows as a JSONL file."""
    return _write_jsonl
