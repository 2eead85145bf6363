"""What a researcher sees in MLflow for a before/after run and for a sweep's parent, through
the installed console script with tracking to a sqlite store in a temp folder (issue 23 §4, §5)."""

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
    proc = subprocess.run(
        [WAI_EXP, *args, "tracking.background=false"],
        cwd=tmp_path,  # the default store is ./mlflow.db: the temp folder's
        env={**os.environ, "HYDRA_FULL_ERROR": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    return proc


def _client(tmp_path: Path):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}")


@pytest.mark.slow
def test_delta_run_headline_and_description_are_the_delta(tmp_path: Path) -> None:
    proc = _wai(
        tmp_path,
        "+experiment=delta",
        "simulate.budget=40",
        "simulate.runs=2",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    run_id = re.search(r"MLflow run: ([0-9a-f]{32})", proc.stdout)
    assert run_id, proc.stdout[-2000:]
    run = _client(tmp_path).get_run(run_id.group(1))
    report = json.loads((tmp_path / "run" / "compare" / "report.json").read_text())
    m = run.data.metrics
    # the run-level headline is the delta with its interval, not the before arm's pass@1
    assert "pass_at_1" not in m
    assert m["delta"] == pytest.approx(report["target_delta"])
    assert [m["delta_ci_lo"], m["delta_ci_hi"]] == pytest.approx(report["target_ci95"])
    assert m["delta_before"] == pytest.approx(m["grade_before.pass_at_1"])
    assert m["delta_after"] == pytest.approx(m["grade_after.pass_at_1"])
    # the description leads with the verdict word, the delta and its interval
    note = run.data.tags["mlflow.note.content"]
    first = note.splitlines()[0]
    verdict = report["headline_verdict"]
    lo, hi = report["target_ci95"]
    assert first.startswith(f"### {verdict}: delta pass@1 {report['target_delta']:+.3f}")
    assert f"95% CI {lo:.3f}–{hi:.3f}" in first


@pytest.fixture(scope="module")
def skill_sweep(tmp_path_factory: pytest.TempPathFactory):
    """The README's sweep, run once for the two tests that read it (each ran its own, 28 s
    of the suite's time): (folder, sweep folder, the finished process)."""
    tmp_path = tmp_path_factory.mktemp("skill_sweep")
    sweep = tmp_path / "sweep"
    proc = _wai(
        tmp_path,
        "-m",
        "+experiment=eval",
        "agent.skill=0.6,0.9",
        "seed=0,1",
        "simulate.budget=240",
        f"hydra.sweep.dir={sweep}",
    )
    return tmp_path, sweep, proc


@pytest.mark.slow
@pytest.mark.xdist_group("skill_sweep")  # one worker runs the shared sweep once
def test_skill_sweep_parent_has_per_value_metrics_and_paired_deltas(skill_sweep) -> None:
    tmp_path, _, proc = skill_sweep
    parent_id = re.search(r"MLflow parent run: ([0-9a-f]{32})", proc.stdout)
    assert parent_id, proc.stdout[-2000:]
    client = _client(tmp_path)
    parent = client.get_run(parent_id.group(1))
    m = parent.data.metrics
    kids = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
    )
    by_skill: dict[str, list[float]] = {}
    for kid in kids:
        skill = next(o for o in json.loads(kid.data.tags["wai.override_list"]) if "skill" in o)
        by_skill.setdefault(skill.split("=")[1], []).append(kid.data.metrics["pass_at_1"])
    # the parent reads per value in the runs table (it had 0 metrics beside the noise band)
    for skill, vals in by_skill.items():
        assert m[f"pass_at_1/agent.skill:{skill}"] == pytest.approx(sum(vals) / len(vals))
        assert f"pass_at_1_ci_lo/agent.skill:{skill}" in m
    # both values ran on the same seeds' tasks: the paired delta uses every one of them
    n = m["n_tasks/agent.skill:0.6"]
    assert n == m["n_shared_tasks/agent.skill:0.9"] == m["n_tasks/agent.skill:0.9"]
    lo, d, hi = (m[f"{k}/agent.skill:0.9 vs 0.6"] for k in ("delta_ci_lo", "delta", "delta_ci_hi"))
    assert lo <= d <= hi
    # the terminal table says the tasks, the paired delta and the seeds the t intervals need
    assert f"{n:.0f} ({n:.0f} shared)" in proc.stdout
    assert f"paired delta agent.skill:0.9 vs 0.6: {d:+.3f}" in proc.stdout
    assert re.search(
        rf"{re.escape(f'{d:+.3f}')} \(95% CI .*\): (PASS|FAIL|NO DIFFERENCE)", proc.stdout
    )
    assert "paired delta" in parent.data.tags["mlflow.note.content"]


#: compare's verdict for a paired delta whose interval excludes zero (2 runs a value) or not.
_VERDICTS = {"up": "PASS", "down": "FAIL", "zero": "NO DIFFERENCE"}
_PAIRED = re.compile(
    r"paired delta agent\.skill:0\.9 vs 0\.6: (?P<d>[+-][0-9.]+) \(95% CI (?P<lo>[+-][0-9.]+) to "
    r"(?P<hi>[+-][0-9.]+) over (?P<n>\d+) paired tasks, seeds pooled per task\): (?P<word>[A-Z ]+)$",
    re.M,
)


def _job_tasks(sweep: Path) -> dict[tuple[str, str], dict[str, float]]:
    """(skill, seed) -> per-task pass rate, read from each job's graded rows."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for job in sorted(p for p in sweep.iterdir() if (p / ".hydra").is_dir()):
        over = dict(o.split("=", 1) for o in _overrides(job))
        rewards: dict[str, list[float]] = {}
        for line in (job / "evaluate" / "rows.jsonl").read_text().splitlines():
            row = json.loads(line)
            rewards.setdefault(row["scenario_id"], []).append(float(row["reward"]))
        out[(over["agent.skill"], over["seed"])] = {t: sum(v) / len(v) for t, v in rewards.items()}
    return out


def _overrides(job: Path) -> list[str]:
    import yaml

    return [str(o) for o in yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text())]


@pytest.mark.slow
@pytest.mark.xdist_group("skill_sweep")
def test_skill_sweep_measures_every_value_on_the_same_tasks(skill_sweep) -> None:
    """The README's sweep: before, a job's failing rows steered its later asks, so the two
    skills shared 56 of 60 tasks a seed here (75/75/82 of 100 at the default budget) and
    the table could only pair over those; now every value runs the same tasks per seed and
    the paired delta is over all of them, worded as compare words it."""
    tmp_path, sweep, proc = skill_sweep
    jobs = _job_tasks(sweep)
    assert len(jobs) == 4
    for seed in ("0", "1"):
        low, high = jobs[("0.6", seed)], jobs[("0.9", seed)]
        assert len(low) == 60 and set(low) == set(high), (seed, len(set(low) & set(high)))
    # each child re-runs alone as it ran: the pin is in its own overrides
    assert all("knobs.writer_context_parents=0" in _overrides(j) for j in sweep.iterdir()
               if (j / ".hydra").is_dir())  # fmt: skip
    assert "every value runs the same tasks per seed" in proc.stderr
    parent_id = re.search(r"MLflow parent run: ([0-9a-f]{32})", proc.stdout)
    assert parent_id, proc.stdout[-2000:]
    client = _client(tmp_path)
    parent = client.get_run(parent_id.group(1))
    kids = client.search_runs(
        [parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    # the pin is recorded on every child, and left out of the names (it tells none apart)
    assert all("knobs.writer_context_parents=0" in k.data.tags["wai.override_list"] for k in kids)
    names = [parent.info.run_name, *(k.info.run_name for k in kids)]
    assert len(kids) == 4 and not any("writer_context_parents" in n for n in names), names
    out = proc.stdout
    assert "120 (120 shared)" in out and "same tasks: every value ran the same 120 tasks" in out
    m = _PAIRED.search(out)
    assert m, out[-2000:]
    d, lo, hi = (float(m[k]) for k in ("d", "lo", "hi"))
    assert int(m["n"]) == 120 and lo <= d <= hi
    # the delta is over tasks: per task, the value's seeds pooled, 0.9 minus 0.6
    diffs = [
        jobs[("0.9", s)][t] - jobs[("0.6", s)][t] for s in ("0", "1") for t in jobs[("0.6", s)]
    ]
    assert d == pytest.approx(sum(diffs) / len(diffs), abs=5e-4)
    side = "up" if lo > 0 else "down" if hi < 0 else "zero"
    assert m["word"] == _VERDICTS[side]
