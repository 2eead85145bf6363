"""eval_variance and delta presets with tracking ON: what a user reads back from MLflow.

The stage adapters hand their numbers to the tracker; these tests read the MLflow run back
with ``MlflowClient`` (the embedded sqlite store in the start folder), and check that
``wai-exp compare`` prints the same block from a run directory and from the MLflow run id.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

WAI_EXP = shutil.which("wai-exp") or str(Path(sys.executable).parent / "wai-exp")


def _wai(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HYDRA_FULL_ERROR": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [WAI_EXP, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _run(tmp_path: Path, *args: str) -> tuple[Path, str, str]:
    proc = _wai(tmp_path, *args, f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    found = re.search(r"MLflow run: ([0-9a-f]{32})", proc.stdout)
    assert found, proc.stdout[-2000:]
    return tmp_path / "run", found.group(1), proc.stdout


def _client(tmp_path: Path):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}")


@pytest.mark.slow
def test_eval_variance_preset_logs_run_std_and_the_noise_band(tmp_path: Path) -> None:
    run_dir, run_id, out = _run(tmp_path, "+experiment=eval_variance")
    report = json.loads((run_dir / "eval_variance" / "report.json").read_text())
    m = _client(tmp_path).get_run(run_id).data.metrics
    assert m["eval_variance.run_std"] == pytest.approx(report["run_std"])
    assert m["eval_variance.noise_band"] == pytest.approx(report["noise_band"])
    # Seed 0's three runs land on one mean (144 of 200 rows each) while most tasks moved:
    # run_std 0, far below the spread the rollouts alone give a re-run. The band, the
    # interval and the word use that spread; before, they read +-0, [0, 0] and "stable".
    floor = report["rollout_std"]
    assert report["run_std"] < 1e-9 and floor > 0.01
    assert m["eval_variance.noise_band"] == pytest.approx(1.96 * 2**0.5 * floor)
    assert m["eval_variance.run_std_ci_lo"] < floor < m["eval_variance.run_std_ci_hi"]
    assert report["stability"] != "stable"
    assert "the runs agreed by chance" in out
    assert m["eval_variance.n_runs"] == 3.0
    arts = {a.path for a in _client(tmp_path).list_artifacts(run_id, "eval_variance")}
    assert {"eval_variance/report.json", "eval_variance/report.txt"} <= arts
    # the run summary leads with the stage's headline, once
    assert "eval_variance: eval_variance on pass_at_1: run_std " in out


@pytest.mark.slow
def test_delta_preset_logs_the_delta_and_compare_reads_it_back(tmp_path: Path) -> None:
    run_dir, run_id, out = _run(tmp_path, "+experiment=delta")
    report = json.loads((run_dir / "compare" / "report.json").read_text())
    run = _client(tmp_path).get_run(run_id)
    m = run.data.metrics
    assert report["target_verdict"] == "moved" and report["headline_verdict"] == "PASS"
    assert m["compare.delta"] == pytest.approx(report["target_delta"])
    assert m["compare.delta_ci_lo"] == pytest.approx(report["target_ci95"][0])
    assert m["compare.delta_ci_hi"] == pytest.approx(report["target_ci95"][1])
    assert m["compare.delta_ci_lo"] > 0 and m["compare.ok"] == 1.0
    assert m["compare.noise_band"] == pytest.approx(report["noise_band"])
    assert run.data.tags["delta_verdict"] == "PASS"
    assert "compare: PASS: pass_at_1 " in out  # the verdict is in the closing summary

    # The same block from the run directory and from the MLflow run id.
    uri = f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    by_dir = _wai(tmp_path, "compare", f"{run_dir}:grade_before", f"{run_dir}:grade_after")
    by_id = _wai(
        tmp_path,
        "compare",
        f"{run_id}:grade_before",
        f"{run_id}:grade_after",
        "--tracking-uri",
        uri,
    )
    assert by_dir.returncode == 0 and by_id.returncode == 0, by_id.stderr[-2000:]

    def block(text: str) -> list[str]:
        # The "before:/after:" source lines differ, and each compare records its own MLflow run.
        skip = ("before:", "after:", "MLflow run:")
        return [ln for ln in text.splitlines() if not ln.startswith(skip)]

    assert block(by_dir.stdout) == block(by_id.stdout)
    assert block(by_dir.stdout)[0].startswith("PASS: pass_at_1")
