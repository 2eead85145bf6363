"""The training stack's guard for tests that run the trainers' own libraries."""

from __future__ import annotations

import importlib.util
import os

import pytest


def require_training_stack(*modules: str, package: str = "the training stack") -> None:
    """Skip a test module when ``modules`` are not installed; under CI (``CI`` set) fail,
    since .ci/run installs ``.[train]`` and a skipped trainer test would hide a broken
    install."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    if os.environ.get("CI"):
        pytest.fail(
            f"{package} {missing} must be installed in CI (.ci/run installs .[train])",
            pytrace=False,
        )
    pytest.skip(
        f"{package} {missing} not installed: pip install -e '.[train]'", allow_module_level=True
    )
