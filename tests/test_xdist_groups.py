"""The suite runs on two xdist workers with ``--dist loadgroup`` (pyproject's addopts), and
the tests of one ``xdist_group`` must share a worker: the real-model modules each start a
llama.cpp server that needs the cores, the crash-resume and worker tests kill processes, the
MLflow UI tests drive one Chromium. pytest-xdist groups a test by renaming it
``<nodeid>@<group>``; under pytest 9.2 that rename does nothing, and the groups spread over
both workers without a word (two model servers at once)."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.xdist_group("grouping_check")


def test_a_grouped_test_is_scheduled_with_its_group(request: pytest.FixtureRequest) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER") or not request.config.getvalue("loadgroup"):
        pytest.skip("checks xdist's loadgroup scheduling; run with the suite's default -n 2")
    assert request.node.nodeid.endswith("@grouping_check"), (
        f"{request.node.nodeid}: xdist_group is not applied, so grouped tests may run at once "
        "on both workers; pin pytest to a version pytest-xdist supports (pyproject.toml)"
    )
