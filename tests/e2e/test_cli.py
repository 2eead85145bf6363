"""The installed ``wai-exp`` console script, run as a user runs it: a subprocess in a fresh
directory."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
SMALL = ["+experiment=rl_round", "simulate.budget=200"]


def wai(
    cwd: Path, *args: str, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [WAI_EXP, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def run_dirs(cwd: Path) -> list[Path]:
    return sorted(
        p for p in (cwd / "outputs").glob("*/*") if p.is_dir() and not p.parent.name.startswith(".")
    )


def test_rl_round_records_in_mlflow_and_an_identical_rerun_is_cached(tmp_path):
    first = wai(tmp_path, *SMALL)
    assert first.returncode == 0, first.stderr
    out = first.stdout
    assert (
        "pass@1: " in out
        and "95% CI [" in out
        and "rows kept: " in out
        and "publish gate: passed" in out
    )
    # rl_round adds rollouts where a group split: the headline reads the fixed first batch
    assert re.search(
        r"^pass@1: [0-9.]+ .*, from the fixed first batch of every task \(pass\^k and pass@k too\)$",
        out,
        re.M,
    )
    assert "mlflow ui --backend-store-uri sqlite:///" + str(tmp_path.resolve() / "mlflow.db") in out
    [run1] = run_dirs(tmp_path)
    for stage in ("simulate", "grade", "optimize", "publish_gate"):
        for name in ("rows.jsonl", "report.json", "report.txt"):
            assert (run1 / stage / name).is_file(), f"{stage}/{name}"
    assert (run1 / ".hydra" / "config.yaml").is_file()
    run_id = json.loads((run1 / "run.json").read_text())["run_id"]
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        status = db.execute("select status from runs where run_uuid = ?", (run_id,)).fetchone()[0]
        params = db.execute("select count(*) from params where run_uuid = ?", (run_id,)).fetchone()[
            0
        ]
        gate = db.execute(
            "select value from tags where run_uuid = ? and key = 'gate_verdict'", (run_id,)
        ).fetchone()
    assert status == "FINISHED" and params > 50 and gate == ("passed",)

    time.sleep(1.1)  # a new run folder (they are named to the second)
    second = wai(tmp_path, *SMALL)
    assert second.returncode == 0, second.stderr
    assert second.stderr.count("cached, reusing") == 4
    # Only publish runs again: its files are written into each run's own folder.
    assert "running" not in second.stderr.replace("publish: running", "")
    assert (run_dirs(tmp_path)[-1] / "publish" / "train.parquet").is_file()
    run2 = [d for d in run_dirs(tmp_path) if d != run1][0]
    assert (run2 / "optimize/rows.jsonl").read_bytes() == (
        run1 / "optimize/rows.jsonl"
    ).read_bytes()


def test_typo_in_a_knob_exits_2_naming_the_right_key_and_writes_nothing(tmp_path):
    res = wai(tmp_path, "+experiment=rl_round", "knobs.concurency=4")
    assert res.returncode == 2
    assert "concurency" in res.stderr and "Did you mean 'concurrency'?" in res.stderr
    assert "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []  # no run folder, no MLflow store


def test_knob_out_of_bounds_exits_2_before_tracking_starts(tmp_path):
    res = wai(tmp_path, "+experiment=rl_round", "knobs.concurrency=0")
    assert res.returncode == 2
    assert "knobs.concurrency=0 is below the floor 1" in res.stderr and "default 32" in res.stderr
    # nothing written: no MLflow store, and the folder Hydra made for the run is removed
    assert list(tmp_path.iterdir()) == []


def test_wrong_type_exits_2_naming_the_type(tmp_path):
    res = wai(tmp_path, "+experiment=rl_round", "simulate.budget=lots", "tracking=none")
    assert res.returncode == 2 and "simulate.budget = 'lots': expected an integer" in res.stderr


@pytest.mark.parametrize("run_dir", ["outputs/x", "."])
def test_a_refused_run_never_removes_the_folder_it_was_started_in(tmp_path, run_dir):
    """A refused run removes the run folder Hydra made for it; with hydra.run.dir=outputs/x
    or hydra.run.dir=. that climb reached the (empty) working folder and deleted it."""
    project = tmp_path / "project"
    project.mkdir()
    res = wai(project, "+experiment=rl_round", "simulate.budget=lots", f"hydra.run.dir={run_dir}")
    assert res.returncode == 2, res.stderr
    assert project.is_dir()
    assert not (project / "outputs").exists()


def test_help_lists_groups_presets_and_examples(tmp_path):
    res = wai(tmp_path, "--help")
    assert res.returncode == 0
    for text in (
        "experiment: ",
        "rl_round",
        "sft_round",
        "next_round",
        "agent: ",
        "scripted",
        "judge: ",
        "tracking: ",
        "wai-exp -m +experiment=eval_variance seed=0,1,2",
        "mlflow ui --backend-store-uri",
        "--config-dir DIR",
        "--cfg job|hydra|all",
        "--multirun",
        "130 interrupted (Ctrl-C), 143 SIGTERM",
        "3 the publish gate refused",
    ):
        assert text in res.stdout, text
    assert list(tmp_path.iterdir()) == []
    # The presets line names every preset the package ships, read from the files.
    line = res.stdout.split("Presets (+experiment=NAME)", 1)[1].split("\n")[2]
    shipped = sorted(p.stem for p in (Path(__file__).parents[2] / "conf/experiment").glob("*.yaml"))
    assert "preference_round" in shipped
    assert sorted(n.strip() for n in line.split(",")) == shipped


def test_killed_mid_simulate_then_rerun_completes_without_duplicates(tmp_path):
    # (6000 rows: at 3000 a loaded machine could let the whole run finish between two polls)
    args = [
        "+experiment=rl_round",
        "simulate.budget=6000",
        "tracking=none",
        "simulate.reproducible=true",
    ]
    proc = subprocess.Popen(
        [WAI_EXP, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    partial = None
    while time.monotonic() < deadline:
        found = list((tmp_path / "outputs/.cache").glob("simulate-*/partial.jsonl"))
        if found and found[0].stat().st_size > 0 and found[0].read_text().count("\n") >= 100:
            partial = found[0]
            break
        assert proc.poll() is None, "the run ended before it could be killed; raise the budget"
        time.sleep(0.05)
    assert partial is not None
    proc.send_signal(signal.SIGKILL)  # no clean-up at all
    proc.wait(timeout=30)
    assert not list((tmp_path / "outputs/.cache").glob("simulate-*/COMPLETE"))
    streamed = partial.read_text().count("\n")
    assert 100 <= streamed < 6000

    res = wai(tmp_path, *args)
    assert res.returncode == 0, res.stderr
    assert "resuming from streamed rows" in res.stderr
    run = max(run_dirs(tmp_path))
    ids = [
        json.loads(line)["rollout_id"]
        for line in (run / "simulate/rows.jsonl").read_text().splitlines()
    ]
    assert len(ids) == 6000 and len(set(ids)) == 6000
    report = json.loads((run / "simulate/report.json").read_text())
    assert report["resumed_rows"] >= streamed - 1  # a torn last line may be redone, never doubled


JUDGE = '''
def always_pass(row):
    """Every rollout passes: every ask is unanimous, so RL has nothing to learn."""
    return {"score": 1, "reason": "always"}
'''

PIPELINE = """\
# no optimize step: the gate sees the unanimous rows as they are
stages:
  simulate: {kind: simulate}
  grade: {kind: grade, needs: [simulate]}
  publish_gate: {kind: publish_gate, needs: [grade]}
refusal_exit_code: 3
"""


def test_gate_refusal_exits_3_and_keeps_every_artifact(tmp_path):
    (tmp_path / "userjudge.py").write_text(JUDGE)
    (tmp_path / "myconf/pipeline").mkdir(parents=True)
    (tmp_path / "myconf/pipeline/unanimous.yaml").write_text(PIPELINE)
    res = wai(
        tmp_path,
        "--config-dir",
        "myconf",
        "+experiment=rl_round",
        "pipeline=unanimous",
        "judge=callable",
        "judge.target=userjudge:always_pass",
        "simulate.budget=120",
        "tracking=none",
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert res.returncode == 3, res.stderr
    assert "publish gate: REFUSED" in res.stdout and "no mixed group" in res.stdout
    [run] = run_dirs(tmp_path)
    for stage in ("simulate", "grade", "publish_gate"):
        assert (run / stage / "rows.jsonl").is_file() and (run / stage / "report.json").is_file()
    report = json.loads((run / "publish_gate/report.json").read_text())
    assert report["verdict"] == "refused" and "no mixed group" in report["reason"]
    assert json.loads((run / "run.json").read_text())["status"] == "refused"


def test_gate_refusal_is_a_finished_mlflow_run_tagged_refused_with_every_artifact(tmp_path):
    from mlflow import MlflowClient

    (tmp_path / "userjudge.py").write_text(JUDGE)
    res = wai(
        tmp_path,
        "+experiment=rl_round",  # optimize keeps no unanimous group, so the gate has nothing
        "judge=callable",
        "judge.target=userjudge:always_pass",
        "simulate.budget=120",
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert res.returncode == 3, res.stderr
    [run_dir] = run_dirs(tmp_path)
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}")
    run = client.get_run(run_id)
    # a refusal is a result: the run ends FINISHED, not FAILED, and says why in its tags
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert tags["gate_verdict"] == "refused" and tags["run_status"] == "refused"
    assert tags["gate_reason"] and tags["publish_gate.cached"] == "false"
    assert run.data.metrics["publish_gate.gate_passed"] == 0.0
    assert run.data.metrics["grade.pass_at_1"] == 1.0  # every rollout passed: nothing to learn
    stored = {
        f.path
        for stage in ("simulate", "grade", "optimize", "publish_gate")
        for f in client.list_artifacts(run_id, stage)
    }
    for stage in ("simulate", "grade", "optimize", "publish_gate"):
        assert {f"{stage}/report.json", f"{stage}/report.txt", f"{stage}/rows.jsonl.gz"} <= stored
    got = client.download_artifacts(run_id, "publish_gate/report.json", str(tmp_path / "dl"))
    report = json.loads(Path(got).read_text())
    assert report["verdict"] == "refused" and report["reason"] == tags["gate_reason"]
    assert "publish gate: REFUSED" in res.stdout and run_id in res.stdout


@pytest.mark.parametrize("bad", ["pipeline.stages.grade.needs=[simulat]"])
def test_bad_dag_exits_2_naming_the_stage(tmp_path, bad):
    res = wai(tmp_path, "+experiment=rl_round", bad, "tracking=none")
    assert res.returncode == 2 and "Did you mean 'simulate'?" in res.stderr


def test_sigterm_mid_simulate_marks_the_mlflow_run_killed(tmp_path):
    proc = subprocess.Popen(
        [WAI_EXP, "+experiment=rl_round", "simulate.budget=5000"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = list((tmp_path / "outputs/.cache").glob("simulate-*/partial.jsonl"))
        if found and found[0].read_text().count("\n") >= 50:
            break
        assert proc.poll() is None, "the run ended before it could be stopped; raise the budget"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err  # 128 + SIGTERM
    assert "interrupted by SIGTERM during stage 'simulate'; re-run the same command" in out
    # The tracking writer may record the run's end a few seconds after the command returned.
    deadline = time.monotonic() + 120
    while True:
        with contextlib.suppress(sqlite3.Error):
            db = sqlite3.connect(f"file:{tmp_path / 'mlflow.db'}?mode=ro", uri=True)
            try:
                statuses = db.execute("select status from runs").fetchall()
            finally:
                db.close()
            if statuses and statuses != [("RUNNING",)]:
                break
        assert time.monotonic() < deadline, "the run was never ended"
        time.sleep(0.25)
    assert statuses == [("KILLED",)]


def test_unknown_group_option_exits_2_naming_the_closest(tmp_path):
    res = wai(tmp_path, "+experiment=rl_round", "agent=opnai")
    assert res.returncode == 2 and "Did you mean agent=openai?" in res.stderr
    assert list(tmp_path.iterdir()) == []


FLAKY_JUDGE = """
def flaky(row):
    # a judge service that fails on most rows: an outage, not a verdict
    if sum(map(ord, row["prompt"])) % 4:
        raise ConnectionError("judge service unavailable")
    return 1.0
"""


def test_a_judge_failing_on_most_rows_fails_the_grade_and_the_run_with_its_first_error(tmp_path):
    (tmp_path / "userjudge.py").write_text(FLAKY_JUDGE)
    args = ["+experiment=rl_round", "judge=callable", "judge.target=userjudge:flaky"]
    res = wai(tmp_path, *args, "simulate.budget=40", "tracking=none",
              env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert "stage 'grade' failed: the judge could not score" in res.stderr
    assert "judge.max_error_share=0.25" in res.stderr
    assert "ConnectionError: judge service unavailable" in res.stderr
    [run] = run_dirs(tmp_path)
    assert (run / "grade" / "rows.jsonl").is_file()  # the scored rows are kept
    assert json.loads((run / "run.json").read_text())["status"] == "failed"
    # a higher tolerance is the user's call, and then the run goes on to the gate
    ok = wai(tmp_path, *args, "simulate.budget=40", "tracking=none",
             "judge.max_error_share=1.0", env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
    assert ok.returncode in (0, 3), ok.stderr
