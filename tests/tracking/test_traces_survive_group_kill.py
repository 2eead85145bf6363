"""Issue 23 §2/§3: the run's records and traces are in when ``wai-exp`` returns.

CI, Slurm and Ray end the whole process group when the command returns. The MLflow writer
used to upload the rollout traces after the command had returned, so a SIGTERM (then
SIGKILL) to the group right then left the run FINISHED with 0 traces. Now the run is either
complete or not FINISHED (the next start marks it KILLED, saying why).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def _client(start: Path):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{start / 'mlflow.db'}")


def test_killing_the_process_group_as_wai_exp_returns_loses_no_traces(start_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    began = time.time()
    proc = subprocess.Popen(
        [
            WAI_EXP,
            "+experiment=eval",
            "simulate.budget=40",
            "cache.enabled=false",
            f"tracking.uri=sqlite:///{start_dir / 'mlflow.db'}",
            f"hydra.run.dir={start_dir / 'run'}",
        ],  # fmt: skip
        cwd=start_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a CI job or a Slurm step has
    )
    out, err = proc.communicate(timeout=600)
    # What a CI runner or Slurm does when the job's command has returned: end the group.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        if sig == signal.SIGTERM:
            time.sleep(0.5)
    assert proc.returncode == 0, err[-3000:]

    client = _client(start_dir)
    [run] = client.search_runs([client.get_experiment_by_name("eval").experiment_id])
    traces = client.search_traces(
        locations=[run.info.experiment_id], run_id=run.info.run_id, max_results=500
    )
    # Never FINISHED with data silently missing.
    assert run.info.status != "FINISHED" or len(traces) > 0, (run.info.status, len(traces))
    # The command waits for its records, so the run is complete.
    assert run.info.status == "FINISHED" and len(traces) > 0, (run.info.status, len(traces))
    # §3: MLflow's start time is the command's, not the moment the writer reached the store.
    assert run.info.start_time <= (began + 1.0) * 1000, (run.info.start_time, began)
