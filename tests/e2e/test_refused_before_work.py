"""Faults and bad inputs that used to be found only after the stages ran (or never) are
refused before any work: exit 2 within seconds, one line naming the key or file and the fix,
no traceback, and nothing left behind (no run folder, no cache entry, no MLflow store).

Issue 18 section 10. Each case ran the whole pipeline on the old code: a dead model server
lost rollouts for seconds to a minute, a store that cannot take the run failed once every
stage had finished, an empty ``MLFLOW_TRACKING_URI`` recorded into a local file instead of
the team server, and trace rows with no asks were dropped without a word.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")

#: case -> (overrides, environment, files to place first, words the refusal must say)
CASES: dict[str, tuple[list[str], dict[str, str], dict[str, bytes], list[str]]] = {
    # Old code: 43 rollouts lost over 7-60 s, then exit 1.
    "an unreachable model server": (
        ["agent=vllm", "agent.model=m", "agent.base_url=http://127.0.0.1:9/v1"],
        {},
        {},
        ["the model server at http://127.0.0.1:9/v1 cannot be reached", "agent.base_url="],
    ),
    "an unreachable model judge": (
        ["judge=llm", "judge.model=vllm:judge@http://127.0.0.1:9/v1"],
        {},
        {},
        ["judge.model: the model server at http://127.0.0.1:9/v1 cannot be reached"],
    ),
    # Old code: every stage ran, then "UnsupportedModelRegistryStoreURIException", exit 1.
    "a tracking URI MLflow has no store for": (
        ["tracking.uri=garbage://x"],
        {},
        {},
        ["tracking.uri='garbage://x': MLflow has no store for 'garbage://'", "sqlite:///"],
    ),
    # Old code: every stage ran, then "(sqlite3.DatabaseError) file is not a database", exit 1.
    "an mlflow.db that is not a database": (
        [],
        {},
        {"mlflow.db": bytes(range(256)) * 8},
        ["mlflow.db is not an SQLite database", "tracking=none"],
    ),
    # Old code: exit 1 from inside simulate, "FileExistsError: [Errno 17] File exists".
    "a cache dir that is a file": (
        ["cache.dir=afile"],
        {},
        {"afile": b"not a folder\n"},
        ["cache.dir: the stage cache at", "afile is a file, not a folder", "cache.dir="],
    ),
    "a cache dir under /proc": (
        ["cache.dir=/proc/wai-exp-cache"],
        {},
        {},
        ["cache.dir: the stage cache at /proc/wai-exp-cache cannot be written", "cache.dir="],
    ),
    # Old code: exit 0, recorded into ./mlflow.db instead of the team server.
    "tracking=mlflow_server with MLFLOW_TRACKING_URI empty": (
        ["tracking=mlflow_server"],
        {"MLFLOW_TRACKING_URI": ""},
        {},
        ["tracking.uri is empty", "MLFLOW_TRACKING_URI"],
    ),
    # Old code: the whole pipeline ran, then the MLflow server could not be reached.
    "tracking=mlflow_server with no server": (
        ["tracking=mlflow_server", "tracking.uri=http://127.0.0.1:9"],
        {},
        {},
        ["the MLflow server at http://127.0.0.1:9 cannot be reached", "tracking=mlflow"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_before_work_with_the_fix_and_nothing_written(tmp_path, case):
    args, env, files, words = CASES[case]
    for rel, data in files.items():
        (tmp_path / rel).write_bytes(data)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    t0 = time.monotonic()
    res = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, **env},
    )  # fmt: skip
    took = time.monotonic() - t0
    assert res.returncode == 2, (res.returncode, res.stdout[-1500:], res.stderr[-1500:])
    for w in words:
        assert w in res.stderr, (w, res.stderr)
    assert "Traceback" not in res.stderr
    assert "simulate" not in res.stdout  # no stage started
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before
    assert took < 60, took  # the probe is one connect, not a minute of lost rollouts


def test_the_offline_default_is_not_probed_and_runs(tmp_path):
    """The scripted agent and the local store reach no server: nothing is probed, and a
    run whose cache dir is missing still makes it."""
    res = subprocess.run(
        [WAI_EXP, "+experiment=rl_round", "simulate.budget=8", "tracking=none",
         "cache.dir=deep/new/cache"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode in (0, 3), res.stderr[-2000:]
    assert any((tmp_path / "deep/new/cache").glob("simulate-*"))
