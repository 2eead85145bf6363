"""Settings and fixtures every test process shares (xdist workers included)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_configure() -> None:
    # An `mlflow server` / `mlflow ui` started by a test (the UI test, the PostgreSQL sweep)
    # would otherwise start MLflow's job runner: seven huey consumer processes, each importing
    # mlflow (about 25 s of CPU on 2 cores) for GenAI jobs wai-exp never submits.
    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty SQLite MLflow store, made once per process: copy it to where a test's store
    goes. MLflow creates its schema on first use (2-5 s); a copy opens in milliseconds and
    holds what that first use makes (shared/NOTES-hydra-mlflow.md). It starts, as a new
    store in a run does, from the migrated schema kept in the user's cache (made once per
    MLflow version; test_tracking_waits checks it is MLflow's newest revision), so no test
    process runs the migrations; MLflow's first use then adds its Default experiment."""
    from mlflow import MlflowClient

    from wai_exp.tracking.mlflow_tracker import seed_sqlite_store

    folder = tmp_path_factory.mktemp("mlflow-template")
    db = folder / "mlflow.db"
    seed_sqlite_store(db)  # left to MLflow's migrations where no template can be kept
    MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    return db
