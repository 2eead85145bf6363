"""The delta and eval_variance presets end to end, through the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

WAI_EXP = shutil.which("wai-exp") or str(Path(sys.executable).parent / "wai-exp")


def _run(tmp_path: Path, *args: str) -> Path:
    env = {**os.environ, "HYDRA_FULL_ERROR": "1"}
    proc = subprocess.run(
        [WAI_EXP, *args, "tracking=none", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    return tmp_path / "run"


@pytest.mark.slow
def test_delta_preset_pairs_every_task_and_passes(tmp_path: Path) -> None:
    run = _run(tmp_path, "+experiment=delta")
    report = json.loads((run / "compare" / "report.json").read_text())
    # both arms drew the same situations: everything pairs, nothing "not comparable"
    assert report["n_unpaired_tasks"] == 0 and report["not_comparable"] == []
    assert report["eval_runs"] == {"before": 3, "after": 3}
    assert report["floor_source"] == "pooled"
    assert report["headline_verdict"] == "PASS" and report["target_ci95"][0] > 0
    assert report["verdict"]["moved"] is True
    # the compare command reads the same run dir's stages back
    proc = subprocess.run(
        [WAI_EXP, "compare", str(run / "grade_before"), str(run / "grade_after")],
        cwd=tmp_path,  # compare logs to ./mlflow.db: keep it out of the checkout
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "PASS: pass_at_1" in proc.stdout
    # 4 repeats x 3 runs per task: pass@1's power rests on 12 rows per task, not a pass^12
    sizing = next(x for x in proc.stdout.splitlines() if x.startswith("sizing:"))
    assert " paired tasks with 12 rows per task (3 eval runs pooled) detect " in sizing
    assert "k=12" not in proc.stdout and "k=8" not in proc.stdout


@pytest.mark.slow
def test_delta_preset_with_the_same_agent_on_both_arms_detects_no_change(tmp_path: Path) -> None:
    # The after arm answers the same pinned tasks with its own draws (seed_offset), so the
    # two arms differ by re-run noise only.
    after = "pipeline.stages.simulate_after.params.agent"
    run = _run(
        tmp_path,
        "+experiment=delta",
        f"{after}.skill=0.5",
        f"{after}.model_version=scripted-skill-0.50",
    )
    report = json.loads((run / "compare" / "report.json").read_text())
    assert report["n_unpaired_tasks"] == 0
    assert report["verdict"]["target"] in {"no_change_detected", "within_eval_noise"}
    assert report["verdict"]["moved"] is False and report["ok"] is True


@pytest.mark.slow
def test_eval_variance_preset_measures_a_floor(tmp_path: Path) -> None:
    run = _run(tmp_path, "+experiment=eval_variance")
    report = json.loads((run / "eval_variance" / "report.json").read_text())
    assert report["n_runs"] == 3 and report["run_std"] is not None
    assert "pass_at_1" in report["run_std_by_metric"]


def test_eval_variance_reports_one_runs_pass_pow_k_over_the_pooled_runs(tmp_path: Path) -> None:
    """4 repeats x 3 runs printed pass^12, comparable with no single run's pass^4. k is one
    run's repeats; each task's 12 rows stay pooled, an unbiased pass^4 (checked by hand)."""
    import math

    proc = subprocess.run(
        [WAI_EXP, "+experiment=eval_variance", "tracking=none", f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("  pass^")]
    assert line.startswith("  pass^4: ") and "pass@4: " in line and "pass^12" not in line, line
    assert "(k=4, one run's repeats; each task's rows from the 3 runs are pooled" in line
    report = json.loads((tmp_path / "run" / "grade" / "report.json").read_text())
    assert report["k"] == 4
    by_task: dict[str, list[int]] = {}
    for raw in (tmp_path / "run" / "grade" / "rows.jsonl").read_text().splitlines():
        row = json.loads(raw)
        by_task.setdefault(row["scenario_id"], []).append(int(row["reward"]))
    assert {len(v) for v in by_task.values()} == {12}
    by_hand = sum(math.comb(sum(v), 4) / math.comb(12, 4) for v in by_task.values()) / len(by_task)
    assert report["pass_pow_k"] == pytest.approx(by_hand)
    assert f"pass^4: {by_hand:.3f}" in line
