"""``simulate.cluster: ray`` through the console script (issue 22): the stage's shards run as
Ray actors on a local Ray instance the stage starts (``ray.init()`` with no address) and stops,
and the rows are the ones one process gives."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_workers import rows, wai

pytest.importorskip("ray")
# Ray's startup is slow on a small machine: one worker of the run keeps the Ray tests.
pytestmark = pytest.mark.xdist_group("ray")


def test_the_stage_runs_its_shards_on_a_local_ray_with_the_same_rows(tmp_path):
    (tmp_path / "ray").mkdir()
    (tmp_path / "one").mkdir()
    res = wai(tmp_path / "ray", "r", "simulate.budget=200", "simulate.workers=2",
              "simulate.cluster=ray")  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    one = wai(tmp_path / "one", "r", "simulate.budget=200")
    assert one.returncode == 0, one.stdout + one.stderr
    assert rows(tmp_path / "ray", "r") == rows(tmp_path / "one", "r")
    report = json.loads((tmp_path / "ray/outputs/r/simulate/report.json").read_text())
    assert report["workers"] == 2 and report["rows_new"] == 200
