"""Faults and bad inputs that used to be found only after the stages ran (or never) are
refused before any work: exit 2 within seconds, one line naming the key or file and the fix,
no traceback, and nothing left behind (no run folder, no cache entry, no MLflow store).

Issue 18 section 10. Each case ran the whole pipeline on the old code: a dead model server
lost rollouts for seconds to a minute, a store that cannot take the run failed once every
stage had finished, an empty ``MLFLOW_TRACKING_URI`` recorded into a local file instead of
the team server, and trace rows with no asks were dropped without a word.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")

NO_PROMPT = b'{"scenario_id": "s1", "reward": 0.0}\n'
JSON_ARRAY = json.dumps([{"prompt": "where is my order?"}, {"prompt": "refund it"}]).encode()
BINARY = random.Random(18).randbytes(3000)
_ROW = {"messages": [{"role": "user", "content": "where is my order?"},
                     {"role": "assistant", "content": "It ships today."}]}  # fmt: skip
NAN_REWARDS = b"".join(
    json.dumps({**_ROW, "rollout_id": f"r{i}", "reward": float("nan")}).encode() + b"\n"
    for i in range(6)
)


def HUGE() -> bytes:  # noqa: N802 - built when the case runs, not at import
    big = {"messages": [{"role": "user", "content": "x" * (65 << 20)}], "reward": 1.0}
    return json.dumps({**_ROW, "reward": 1.0}).encode() + b"\n" + json.dumps(big).encode() + b"\n"


#: case -> (overrides, environment, files to place first, words the refusal must say)
CASES: dict[str, tuple[list[str], dict[str, str], dict[str, Any], list[str]]] = {
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
    # Old code: ray.init retried the address for minutes (no error after 200 s), inside the
    # simulate stage, its MLflow run open.
    "an unreachable Ray cluster": (
        ["simulate.cluster=ray", "simulate.workers=2", "simulate.ray.address=127.0.0.1:9"],
        {},
        {},
        ["simulate.ray.address: the Ray cluster at 127.0.0.1:9 cannot be reached",
         "ray start --head", "leave simulate.ray.address unset"],
    ),
    "an unreachable Ray client address": (
        ["simulate.cluster=ray", "simulate.ray.address=ray://127.0.0.1:9"],
        {},
        {},
        ["simulate.ray.address: the Ray cluster at ray://127.0.0.1:9 cannot be reached"],
    ),
    # Old code: every stage ran, then "recording in MLflow failed: ... OperationalError".
    "a PostgreSQL store that is down": (
        ["tracking.uri=postgresql+psycopg2://wai:pw-not-shown-4242@127.0.0.1:9/mlflow"],
        {},
        {},
        ["tracking.uri: the MLflow database at postgresql+psycopg2://wai:***redacted***@127.0.0.1:9/mlflow cannot be reached",
         "tracking=mlflow and no tracking.uri"],
    ),
    # Old code: exit 0; the trace rows were read, aimed nothing, and nothing said so.
    "simulate.traces rows without prompts": (
        ["simulate.traces=noprompt.jsonl"],
        {},
        {"noprompt.jsonl": NO_PROMPT},
        ["simulate.traces:", "noprompt.jsonl:1", "hold no transcript", "`prompt`"],
    ),
    # Old code: exit 1 after composing, "AttributeError: 'list' object has no attribute 'get'".
    "a JSON array given as tasks": (
        ["simulate.tasks=rows.json"],
        {},
        {"rows.json": JSON_ARRAY},
        ["simulate.tasks:", "a JSON list, not a row object", "jq -c '.[]'"],
    ),
    "a JSON array given as traces": (
        ["simulate.traces=rows.json"],
        {},
        {"rows.json": JSON_ARRAY},
        ["simulate.traces:", "a JSON list, not a row object", "jq -c '.[]'"],
    ),
    # Old code: "AttributeError: 'int' object has no attribute 'get'", exit 1.
    "numbers as tasks": (
        ["simulate.tasks=nums.jsonl"],
        {},
        {"nums.jsonl": b"1\n2\n3\n"},
        [
            "simulate.tasks:",
            "nums.jsonl:1: a JSON int, not a row object",
            "one JSON object per line",
        ],
    ),
    # Old code: "'utf-8' codec can't decode byte 0x.. in position ..", naming neither file nor fix.
    "a binary file as tasks": (
        ["simulate.tasks=blob.jsonl"],
        {},
        {"blob.jsonl": BINARY},
        ["simulate.tasks:", "blob.jsonl: not UTF-8 text", "point simulate.tasks at"],
    ),
    "a binary file as the agent spec": (
        ["simulate.spec=blob.json"],
        {},
        {"blob.json": BINARY},
        ["simulate.spec:", "blob.json is not UTF-8 text", '{"name", "system_prompt", "tools"}'],
    ),
    # Old code: exit 0 with "pass@1: not measured".
    "every reward NaN under judge=given": (
        ["simulate.rows=nan.jsonl", "judge=given"],
        {},
        {"nan.jsonl": NAN_REWARDS},
        [
            "judge=given reads the rewards in",
            "none of its 6 rows holds a number",
            "judge=checklist",
        ],
    ),
    # A 65 MiB line: read whole (and again by the stage) before; now refused at 64 MiB read.
    "simulate.rows with a huge line": (
        ["simulate.rows=huge.jsonl", "judge=given"],
        {},
        {"huge.jsonl": HUGE},
        ["simulate.rows:", "huge.jsonl:2: a line over 64 MiB", "one row per line"],
    ),
    # Old code: Hydra's "Key 'simulat' is not in struct", exit 1, naming no stage and no fix.
    "an unknown stage name": (
        ["pipeline.stages.simulat.params.budget=8"],
        {},
        {},
        ["no stage 'simulat' in pipeline 'rl_round'", "Did you mean 'simulate'?",
         "+pipeline.stages.simulat.kind=<kind>"],
    ),
    # Old code: Hydra's usage block and "unrecognized arguments: --multrun".
    "a misspelt flag": (["--multrun"], {}, {}, ["unknown option '--multrun'. Did you mean --multirun?"]),
    "a config value written as a flag": (
        ["--simulate.budget=300"],
        {},
        {},
        ["a config value is written without dashes, e.g. simulate.budget=300"],
    ),
    # Old code: "argument --cfg/-c: invalid choice: 'jobb'" after the usage block.
    "a flag value it does not take": (
        ["--cfg", "jobb"],
        {},
        {},
        ["option --cfg takes job | hydra | all, not 'jobb'. Did you mean --cfg job?"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_refused_before_work_with_the_fix_and_nothing_written(tmp_path, case):
    args, env, files, words = CASES[case]
    for rel, data in files.items():
        (tmp_path / rel).write_bytes(data() if callable(data) else data)
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
    assert "pw-not-shown-4242" not in res.stdout + res.stderr
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


def test_a_read_only_working_directory_says_where_it_wrote_and_how_to_point_elsewhere(tmp_path):
    """Old code: Hydra's "PermissionError: [Errno 1] Operation not permitted: 'outputs'"
    traceback, exit 1. Read-only even for root: ``chattr +i`` (chmod is no barrier to root)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["chattr", "+i", str(ro)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not permitted here; cannot make a folder read-only for root")
    try:
        refused = subprocess.run(
            [WAI_EXP, "+experiment=rl_round", "simulate.budget=8"],
            cwd=ro, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        elsewhere = tmp_path / "w"
        moved = subprocess.run(
            [WAI_EXP, "+experiment=rl_round", "simulate.budget=8",
             f"hydra.run.dir={elsewhere}/run", f"cache.dir={elsewhere}/cache",
             f"tracking.uri=sqlite:///{elsewhere}/mlflow.db"],
            cwd=ro, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        subprocess.run(["chattr", "-i", str(ro)], capture_output=True)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert f"cannot write the run folder in {ro / 'outputs'}" in refused.stderr
    for fix in ("hydra.run.dir=", "cache.dir=", "tracking.uri=", "tracking=none"):
        assert fix in refused.stderr
    assert "Traceback" not in refused.stderr
    # What it says works: the same run, pointed elsewhere, runs from the read-only folder.
    assert moved.returncode in (0, 3), moved.stderr[-2000:]
    assert (elsewhere / "run" / "simulate" / "rows.jsonl").is_file()
    assert list(ro.iterdir()) == []


def test_a_sweep_with_one_bad_job_runs_no_job(tmp_path):
    """Old code: job 0 ran all five stages (and opened the MLflow parent run), then job 1
    was refused: exit 1 with a RunFailed traceback."""
    res = subprocess.run(
        [WAI_EXP, "-m", "+experiment=rl_round", "simulate.budget=8,1e12"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 2, (res.stdout[-1500:], res.stderr[-1500:])
    assert "1 job of this sweep would be refused; no job ran" in res.stderr
    assert "job +experiment=rl_round simulate.budget=1000000000000.0:" in res.stderr
    assert "must be <= 10000000" in res.stderr and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []  # no multirun/, no mlflow.db, no cache
