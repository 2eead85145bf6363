"""Settings every test process shares (xdist workers included)."""

from __future__ import annotations

import os


def pytest_configure() -> None:
    # An `mlflow server` / `mlflow ui` started by a test (the UI test, the PostgreSQL sweep)
    # would otherwise start MLflow's job runner: seven huey consumer processes, each importing
    # mlflow (about 25 s of CPU on 2 cores) for GenAI jobs wai-exp never submits.
    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
