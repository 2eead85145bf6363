"""``wai-exp compare`` of two seed sweeps' MLflow parents, through the console script.

Each job of an unpinned ``seed=0,1`` sweep writes its own asks, so a parent's pooled rows
are one evaluation run per task, however many jobs it pooled. The arm's source line said
"2 replicate runs pooled" above a verdict and warnings that say one eval run a side, which
read as a contradiction; and MLflow drew a progress bar on stderr for each of the
children's artifact downloads, burying compare's own lines.
"""

from __future__ import annotations

import re

import pytest

from tests.e2e.test_cli import wai


def _parent(tmp_path, skill: str) -> str:
    res = wai(
        tmp_path,
        "-m",
        "+experiment=eval",
        f"agent.skill={skill}",
        "seed=0,1",
        "simulate.budget=40",
        "tracking.background=false",
        f"hydra.sweep.dir=sweep-{skill}",
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    found = re.search(r"MLflow parent run: ([0-9a-f]{32})", res.stdout)
    assert found, res.stdout[-2000:]
    return found[1]


@pytest.mark.slow
def test_compare_of_seed_sweeps_says_each_seed_drew_its_own_tasks_and_draws_no_bars(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.delenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", raising=False)
    before, after = _parent(tmp_path, "0.5"), _parent(tmp_path, "0.95")
    res = wai(tmp_path, "compare", before, after)
    assert res.returncode in (0, 1), res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"before: mlflow sweep {before}: 2 seeds, each on its own tasks, pooled"
    assert lines[1] == f"after:  mlflow sweep {after}: 2 seeds, each on its own tasks, pooled"
    assert "replicate runs pooled" not in res.stdout
    # MLflow's bars are gone; compare's own progress line is still there.
    assert "Downloading artifacts" not in res.stderr, res.stderr[-2000:]
    assert "recording the comparison in MLflow (--no-record skips this)" in res.stderr
