"""``wai-exp compare`` and its MLflow record, from the console script.

- Bad input (exit 2) started the tracking writer first, which then spent 1-2 s of CPU
  importing MLflow after the command had exited. Now every input is read and checked
  before the writer starts.
- ``--tracking-uri sqlite:///rel.db`` failed ("relative path can't be expressed as a file
  URI"). A relative path now resolves against the folder the command ran from, as
  ``wai-exp``'s ``tracking.uri`` does.
- A writer killed after it created the compare run left that run RUNNING forever beside
  the complete one the command then recorded itself. Now the half-run ends FAILED, saying
  why and naming the complete run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from wai_exp.rows.jsonl import write_rows

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
WRITER_MODULE = b"wai_exp.tracking.background"


def _arms(folder: Path) -> None:
    for name, p, seed in (("a", 0.3, 1), ("b", 0.7, 2)):
        rng = np.random.default_rng(seed)
        rows = [
            {"scenario_id": f"t{t}", "reward": float(rng.random() < p), "final_text": "done",
             "policy_version": name}
            for t in range(40)
            for _ in range(4)
        ]  # fmt: skip
        write_rows(folder / f"{name}.jsonl", rows)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    return {**env, **extra}


def _group_members(pgid: int) -> list[bytes]:
    """Command lines of the processes still in process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        # field 5 (the process group) comes after the command name in parentheses
        if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
            found.append(cmdline)
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="reads /proc")
@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (["a.jsonl", "missing.jsonl"], "pass a run dir"),
        (["a.jsonl", "b.jsonl", "--target", "marker:nope"], "name one of the shared markers"),
        (["a.jsonl", "b.jsonl", "--tracking-uri", "file:./mlruns"], "a sqlite:///<path>.db URI"),
    ],
)
def test_bad_input_exits_two_before_the_tracking_writer_starts(
    tmp_path: Path, args: list[str], fix: str
) -> None:
    _arms(tmp_path)
    proc = subprocess.Popen(
        [WAI_EXP, "compare", *args], cwd=tmp_path, env=_env(), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: a writer it started stays in it
    )  # fmt: skip
    out, err = proc.communicate(timeout=300)
    # The writer, had it started, still imports MLflow now (it exits only after that).
    left = _group_members(proc.pid)
    assert proc.returncode == 2, out + err
    assert fix in err, err
    assert not [c for c in left if WRITER_MODULE in c], left
    assert not (tmp_path / "mlflow.db").exists()


def test_a_relative_sqlite_uri_records_in_the_folder_the_command_ran_from(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    _arms(tmp_path)
    (tmp_path / "stores").mkdir()
    res = subprocess.run(
        [WAI_EXP, "compare", "a.jsonl", "b.jsonl", "--tracking-uri", "sqlite:///stores/rel.db"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode in (0, 1), res.stdout + res.stderr
    assert "not logged to MLflow" not in res.stderr, res.stderr
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'stores' / 'rel.db'}")
    [cmp] = client.search_runs([client.get_experiment_by_name("compare").experiment_id])
    assert f"MLflow run: {cmp.info.run_id}" in res.stdout
    assert cmp.info.status == "FINISHED"
    assert {"report.json", "report.txt", "delta.png"} <= {
        a.path for a in client.list_artifacts(cmp.info.run_id)
    }
    assert not (tmp_path / "mlflow.db").exists()


#: Loaded by every Python process of the command (PYTHONPATH); in the tracking writer only,
#: it SIGKILLs the writer once the compare run exists, as it logs the run's first metrics.
_KILL_WRITER_MID_RECORD = textwrap.dedent(
    """
    import os, signal, sys

    if "wai_exp.tracking.background" in getattr(sys, "orig_argv", []):
        from mlflow.tracking import client as _client

        _log_batch = _client.MlflowClient.log_batch

        def _killed(self, *args, **kwargs):
            if any(getattr(t, "key", "") == "wai.compare.ok" for t in kwargs.get("tags") or ()):
                os.kill(os.getpid(), signal.SIGKILL)
            return _log_batch(self, *args, **kwargs)

        _client.MlflowClient.log_batch = _killed
    """
)


def test_a_writer_killed_mid_record_leaves_no_running_compare_run(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    _arms(tmp_path)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_KILL_WRITER_MID_RECORD)
    path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
    res = subprocess.run(
        [WAI_EXP, "compare", "a.jsonl", "b.jsonl"], cwd=tmp_path, env=_env(PYTHONPATH=path),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode in (0, 1), res.stdout + res.stderr
    assert "not logged to MLflow" not in res.stderr, res.stderr
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("compare").experiment_id])
    by_status = {r.info.status: r for r in runs}
    assert sorted(by_status) == ["FAILED", "FINISHED"], [r.info.status for r in runs]
    complete, half = by_status["FINISHED"], by_status["FAILED"]
    assert f"MLflow run: {complete.info.run_id}" in res.stdout
    why = half.data.tags["wai.error"]
    writer = half.data.tags["wai.writer_pid"]
    assert f"the tracking writer process (pid {writer}) is gone (killed by signal SIGKILL)" in why
    assert f"the complete record is run {complete.info.run_id}" in why
    assert {"report.json", "report.txt", "delta.png"} <= {
        a.path for a in client.list_artifacts(complete.info.run_id)
    }
