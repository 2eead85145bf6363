"""Sweeps that scale out: Hydra launchers (joblib, submitit_local, a local Ray instance) picked
on the command line, and a team MLflow server on PostgreSQL. Each sweep runs the console script as a user would and then reads MLflow:
one parent holding the swept keys and the per-value table, every child nested and FINISHED.

The PostgreSQL test needs a server: `.ci/run` installs and starts one
(scripts/start-test-services.sh) and exports WAI_EXP_TEST_POSTGRES_URI. Outside CI the test
skips, saying so, when that variable is unset; under CI=true it fails instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import pytest

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
MLFLOW = str(Path(sys.executable).parent / "mlflow")
#: Two skills x two seeds: a per-value table with two rows, each over two replicates.
SWEEP = ["-m", "+experiment=eval", "simulate.budget=40", "agent.skill=0.6,0.9", "seed=0,1"]


def _sweep(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [WAI_EXP, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
    )
    proc.wall_s = time.perf_counter() - t0  # type: ignore[attr-defined]
    sys.stderr.write(f"sweep {' '.join(args)}: {proc.wall_s:.1f} s\n")  # type: ignore[attr-defined]
    return proc


def _runs(uri: str, experiment: str):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {uri}"
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("wai.sweep") == "parent"]
    assert len(parents) == 1, [r.info.run_name for r in runs]
    parent = parents[0]
    kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    return client, parent, kids, runs


def _check_sweep(
    proc, uri: str, experiment: str, n_jobs: int, values: list[str], *, table_last: bool = True
):
    assert proc.returncode == 0, proc.stderr[-4000:]
    client, parent, kids, runs = _runs(uri, experiment)
    assert len(kids) == n_jobs and len(runs) == n_jobs + 1  # every child nested, no stray run
    assert {k.info.status for k in kids} == {"FINISHED"} and parent.info.status == "FINISHED"
    # Issue 23 §2: the launcher ends each job's processes when the job returns (under Ray all
    # 4 children had 0 traces): a FINISHED child has its rollout traces.
    for k in kids:
        traces = client.search_traces(
            locations=[k.info.experiment_id], run_id=k.info.run_id, max_results=5
        )
        assert traces, f"child {k.info.run_name} is FINISHED with no traces"
    assert parent.data.params["agent.skill"] == ",".join(values)
    # each child named by its swept value first (MLflow shows ~20 characters of the name)
    named = {k.info.run_name.split(" · ")[0].split()[0] for k in kids}
    assert named == {f"skill={v}" for v in values}, [k.info.run_name for k in kids]
    assert all(k.info.run_name.endswith(" · eval simulate.budget=40") for k in kids)
    table = parent.data.tags["mlflow.note.content"]
    for v in values:
        assert f"| {v} |" in table  # the per-value table, one row per swept skill
    arts = {a.path for a in client.list_artifacts(parent.info.run_id, "sweep")}
    assert {"sweep/per_value.csv", "sweep/pass_at_1_by_value.png"} <= arts
    # The terminal ends with the table and the parent's id (``table_last=False``: Ray
    # forwards its workers' output to the terminal late, so job lines may follow it).
    lines = proc.stdout.strip().splitlines()
    # (under the table: task sets, a paired delta and the seeds needed per adjacent pair)
    tail = lines[-(3 * len(values) + 6) :] if table_last else lines
    assert any(line.startswith("agent.skill") and "pass@1" in line for line in tail)
    assert f"MLflow parent run: {parent.info.run_id}" in proc.stdout
    return client, parent, kids


@pytest.mark.slow
def test_joblib_sweep_from_the_command_line(tmp_path):
    proc = _sweep(tmp_path, *SWEEP, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    uri = f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    _, parent, kids = _check_sweep(proc, uri, "eval", 4, ["0.6", "0.9"])
    # Jobs differing only by seed are replicates: the parent measures their spread.
    assert "run_std" in parent.data.metrics
    # loky reuses its workers: each worker process imports MLflow for its first job only.
    by_pid = Counter(k.data.tags["wai.process"].split(":")[0] for k in kids)
    assert len(by_pid) <= 2 and sum(by_pid.values()) == 4
    cold = Counter(
        k.data.tags["wai.process"].split(":")[0]
        for k in kids
        if k.data.tags["wai.mlflow_preloaded"] == "false"
    )
    assert all(n == 1 for n in cold.values()), cold


@pytest.mark.slow
def test_submitit_local_sweep_from_the_command_line(tmp_path):
    proc = _sweep(
        tmp_path,
        "-m",
        "+experiment=eval",
        "simulate.budget=40",
        "agent.skill=0.6,0.9",
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
    )
    uri = f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    _, parent, _ = _check_sweep(proc, uri, "eval", 2, ["0.6", "0.9"])
    # A skill sweep has no replicates: no noise floor, the reason instead.
    assert "run_std" not in parent.data.metrics
    assert "no replicates" in parent.data.tags["mlflow.note.content"]


@pytest.mark.slow
def test_ray_sweep_from_the_command_line(tmp_path):
    # A local Ray instance (no dashboard: nobody looks at it, and it is the slowest part
    # of Ray's start on a small machine); the jobs run in Ray worker processes.
    proc = _sweep(
        tmp_path,
        "-m",
        "+experiment=eval",
        "simulate.budget=40",
        "agent.skill=0.6,0.9",
        "hydra/launcher=ray",
        "+hydra.launcher.ray.init.include_dashboard=false",
        "+hydra.launcher.ray.init.num_cpus=2",
        timeout=900,
    )
    uri = f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    _, parent, kids = _check_sweep(proc, uri, "eval", 2, ["0.6", "0.9"], table_last=False)
    assert "run_std" not in parent.data.metrics  # a skill sweep: no replicates
    # The jobs ran as Ray tasks: Ray prefixes their output with the task and worker pid.
    ray_pids = set(re.findall(r"\(_run_job pid=(\d+)\)", proc.stdout + proc.stderr))
    assert ray_pids and {k.data.tags["wai.pid"] for k in kids} <= ray_pids


def test_an_unknown_launcher_is_hydras_error_not_ours(tmp_path):
    proc = _sweep(tmp_path, "-m", "+experiment=eval", "hydra/launcher=nosuch", timeout=120)
    assert proc.returncode != 0
    assert "unknown key 'hydra/launcher'" not in proc.stderr
    assert "nosuch" in proc.stderr


def _stop(server: subprocess.Popen) -> None:
    """End the server and every process it started (it runs in its own session)."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=15)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgres_server(tmp_path):
    """A real `mlflow server` on 127.0.0.1 with a PostgreSQL backend store."""
    pg = os.environ.get("WAI_EXP_TEST_POSTGRES_URI")
    if not pg:
        if os.environ.get("CI"):
            pytest.fail("CI=true but WAI_EXP_TEST_POSTGRES_URI is unset: .ci/run starts PostgreSQL")
        pytest.skip(
            'no PostgreSQL: run `eval "$(bash scripts/start-test-services.sh)"` (as root) to '
            "install and start one, as .ci/run does"
        )
    port = _free_port()
    log = (tmp_path / "mlflow-server.log").open("w")
    server = subprocess.Popen(
        [MLFLOW, "server", "--backend-store-uri", pg, "--artifacts-destination",
         str(tmp_path / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        "mlflow server did not start:\n"
                        + (tmp_path / "mlflow-server.log").read_text()
                    ) from None
                time.sleep(0.5)
        yield url
    finally:
        _stop(server)
        log.close()


@pytest.mark.slow
def test_four_job_sweep_against_a_tracking_server_on_postgresql(tmp_path, postgres_server):
    experiment = f"pg-sweep-{uuid.uuid4().hex[:8]}"
    proc = _sweep(
        tmp_path,
        *SWEEP,
        "tracking=mlflow_server",
        f"tracking.uri={postgres_server}",
        f"tracking.experiment={experiment}",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
    )
    client, parent, kids = _check_sweep(proc, postgres_server, experiment, 4, ["0.6", "0.9"])
    # Artifacts went through the server's artifact proxy, not to a local folder.
    assert client.list_artifacts(kids[0].info.run_id, "evaluate")
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()
