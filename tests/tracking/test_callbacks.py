"""The sweep callback: a parent run on the launching side, children nested under it, the
aggregate (eval_variance across seeds) on the parent, and no RUNNING parent left behind."""

from __future__ import annotations

import json
import math
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra.core.utils import JobStatus
from omegaconf import OmegaConf

from wai_exp.tracking import PARENT_RUN_ENV, make_tracker
from wai_exp.tracking.callbacks import (
    MlflowSweepCallback,
    aggregate_metrics,
    run_table_csv,
    summarize,
)

CALLBACK = "wai_exp.tracking.callbacks.MlflowSweepCallback"


def _client(start: Path):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{start.resolve() / 'mlflow.db'}")


def _sweep_cfg(start: Path, tracking: dict | None = None):
    return OmegaConf.create(
        {
            "seed": 0,
            "tracking": tracking or {"kind": "mlflow", "experiment": "wai-exp"},
            "hydra": {
                "runtime": {"cwd": str(start), "choices": {"experiment": "eval_variance"}},
                "sweep": {"dir": "multirun/2026-11-30/06-00-00"},
                "overrides": {"task": ["+experiment=eval_variance", "seed=0,1,2"]},
            },
        }
    )


def _job(cb, cfg, start, seed: int, pass_at_1: float, tmp_path: Path) -> str:
    """One in-process job, as the basic launcher runs it: hooks around a tracked run."""
    cb.on_job_start(cfg, task_function=None)
    assert os.environ[PARENT_RUN_ENV] == cb.parent_run_id
    tracker = make_tracker(OmegaConf.to_container(cfg.tracking), start)
    tracker.start({"seed": seed}, [f"seed={seed}"], tmp_path / str(seed), "eval_variance", "h")
    tracker.log_stage(
        "grade",
        kind="grade",
        metrics={"pass_at_1": pass_at_1, "pass_at_1_ci_lo": pass_at_1 - 0.1, "rows_kept": 10},
        seconds=1.0,
    )
    tracker.finish("FINISHED")
    cb.on_job_end(cfg, job_return=SimpleNamespace(status=JobStatus.COMPLETED))
    assert PARENT_RUN_ENV not in os.environ  # nothing after the job nests by accident
    return tracker.run_id


def test_three_job_sweep_nests_children_and_aggregates(start_dir, tmp_path):
    cfg = _sweep_cfg(start_dir)
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    assert cb.parent_run_id
    marker = start_dir / "multirun/2026-11-30/06-00-00/.wai_mlflow_parent.json"
    assert json.loads(marker.read_text())["run_id"] == cb.parent_run_id

    children = [_job(cb, cfg, start_dir, s, v, tmp_path) for s, v in enumerate([0.5, 0.6, 0.7])]
    cb.on_multirun_end(cfg)

    client = _client(start_dir)
    for run_id in children:
        assert client.get_run(run_id).data.tags["mlflow.parentRunId"] == cb.parent_run_id
    parent = client.get_run(cb.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["preset"] == "eval_variance"
    assert parent.data.tags["wai.sweep.n_jobs"] == "3"
    m = parent.data.metrics
    # 0.5, 0.6, 0.7: mean 0.6; squared deviations .01 + 0 + .01 over n-1 = 2 -> sd 0.1.
    assert m["grade.pass_at_1.mean"] == pytest.approx(0.6)
    assert m["grade.pass_at_1.sd"] == pytest.approx(0.1)
    assert m["grade.pass_at_1.n"] == 3
    assert m["grade.pass_at_1.run_std"] == pytest.approx(0.1)
    assert m["grade.pass_at_1.noise_band"] == pytest.approx(1.96 * math.sqrt(2) * 0.1)
    # t(0.975, df=2) = 4.302653: a spread estimated from 3 runs gives a wider band.
    assert m["grade.pass_at_1.noise_band_t"] == pytest.approx(4.302653 * math.sqrt(2) * 0.1)
    assert m["grade.rows_kept.mean"] == 10 and m["grade.rows_kept.sd"] == 0
    assert "grade.pass_at_1_ci_lo.run_std" not in m  # the re-run spread is pass@1's alone

    table = json.loads(
        Path(
            client.download_artifacts(cb.parent_run_id, "sweep/runs.json", str(tmp_path))
        ).read_text()
    )
    assert [row["run_id"] for row in table] == children
    assert [row["overrides"] for row in table] == ["seed=0", "seed=1", "seed=2"]
    csv_text = Path(
        client.download_artifacts(cb.parent_run_id, "sweep/runs.csv", str(tmp_path))
    ).read_text()
    header = csv_text.splitlines()[0].split(",")
    assert header[:4] == ["run_id", "run_name", "status", "overrides"]
    assert "grade.pass_at_1" in header and "grade.seconds" not in header
    assert len(csv_text.strip().splitlines()) == 4
    # The atexit hook is now a no-op: the parent stays FINISHED.
    cb._atexit()
    assert client.get_run(cb.parent_run_id).info.status == "FINISHED"


def test_failed_sweep_leaves_no_running_parent(start_dir, tmp_path):
    cfg = _sweep_cfg(start_dir)
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    _job(cb, cfg, start_dir, 0, 0.5, tmp_path)
    cb.on_job_end(cfg, job_return=SimpleNamespace(status=JobStatus.FAILED))
    # Hydra skips on_multirun_end after a failed job; the process then exits.
    cb._atexit()
    parent = _client(start_dir).get_run(cb.parent_run_id)
    assert parent.info.status == "FAILED"
    assert "1 of 2 jobs failed" in parent.data.tags["wai.error"]


def test_a_failed_job_still_leaves_the_finished_jobs_aggregated_on_the_parent(
    start_dir, tmp_path, capsys
):
    cfg = _sweep_cfg(start_dir)
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    _job(cb, cfg, start_dir, 0, 0.5, tmp_path)
    _job(cb, cfg, start_dir, 1, 0.7, tmp_path)
    # the third job's run fails with its reason, as the runner ends a failed stage
    cb.on_job_start(cfg, task_function=None)
    tracker = make_tracker(OmegaConf.to_container(cfg.tracking), start_dir)
    tracker.start({"seed": 2}, ["seed=2"], tmp_path / "2", "eval_variance", "h")
    tracker.finish("FAILED", "stage 'simulate' failed: the agent was called off (dead_agent)")
    cb.on_job_end(cfg, job_return=SimpleNamespace(status=JobStatus.FAILED))
    cb._atexit()  # Hydra skipped on_multirun_end

    parent = _client(start_dir).get_run(cb.parent_run_id)
    assert parent.info.status == "FAILED"
    error = parent.data.tags["wai.error"]
    assert "1 of 3 jobs failed" in error and "seed=2" in error and "dead_agent" in error
    m = parent.data.metrics
    assert m["grade.pass_at_1.mean"] == pytest.approx(0.6) and m["grade.pass_at_1.n"] == 2
    assert parent.data.tags["wai.sweep.n_finished"] == "2"
    assert parent.data.tags["wai.sweep.n_not_finished"] == "1"
    out = capsys.readouterr().out
    assert "wai-exp sweep: 2 of 3 jobs finished" in out and "seed=2" in out
    assert cb.parent_run_id in out


def test_a_worker_without_the_callbacks_state_reads_the_sweep_folder(start_dir, tmp_path):
    cfg = _sweep_cfg(start_dir)
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    # joblib/submitit pickle the callback with its state ...
    assert pickle.loads(pickle.dumps(cb)).parent_run_id == cb.parent_run_id
    # ... a fresh instance (e.g. re-instantiated on a remote worker) finds the parent file.
    fresh = MlflowSweepCallback()
    fresh.on_job_start(cfg, task_function=None)
    try:
        assert os.environ[PARENT_RUN_ENV] == cb.parent_run_id
    finally:
        fresh.on_job_end(cfg, job_return=None)
    cb.on_multirun_end(cfg)


def test_tracking_none_creates_no_parent(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _sweep_cfg(tmp_path, tracking={"kind": "none"})
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    cb.on_job_start(cfg, task_function=None)
    assert cb.parent_run_id is None and PARENT_RUN_ENV not in os.environ
    cb.on_multirun_end(cfg)
    assert not (tmp_path / "mlflow.db").exists()


def test_summaries_by_hand():
    assert summarize([1.0, 3.0]) == {"mean": 2.0, "sd": pytest.approx(math.sqrt(2)), "n": 2}
    one = summarize([0.4])
    assert one["sd"] is None and "one run" in one["note"]
    agg = aggregate_metrics([{"grade.pass_at_1": 0.4, "x": 1.0}, {"x": 3.0}])
    assert agg["grade.pass_at_1"]["run_std"] is None  # unmeasured, not 0
    assert agg["grade.pass_at_1"]["noise_band"] is None
    assert agg["x"]["n"] == 2
    with pytest.raises(ValueError):
        summarize([])
    csv_text = run_table_csv(
        [
            {
                "run_id": "a",
                "run_name": "n",
                "status": "FINISHED",
                "overrides": "seed=0",
                "metrics": {"grade.pass_at_1": 0.5, "grade.seconds": 2.0},
            }
        ]
    )
    assert csv_text.splitlines() == [
        "run_id,run_name,status,overrides,grade.pass_at_1",
        "a,n,FINISHED,seed=0,0.5",
    ]


APP = textwrap.dedent(
    """
    from pathlib import Path

    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from wai_exp.tracking import make_tracker


    @hydra.main(version_base="1.3", config_path=".", config_name="app")
    def main(cfg):
        hc = HydraConfig.get()
        t = make_tracker(cfg.tracking, Path.cwd())
        t.start(OmegaConf.to_container(cfg, resolve=True), list(hc.overrides.task),
                Path(hc.runtime.output_dir), "eval_variance", "h")
        if cfg.seed == 9:
            raise RuntimeError("job crashed before finish()")
        t.log_stage("grade", kind="grade", metrics={"pass_at_1": [0.5, 0.6, 0.7][cfg.seed]})
        t.finish("FINISHED")


    main()
    """
)
APP_YAML = textwrap.dedent(
    f"""
    defaults:
      - tracking: mlflow
      - _self_
    seed: 0
    hydra:
      searchpath: [pkg://wai_exp.conf]
      job_logging: {{root: {{level: WARNING}}}}
      callbacks:
        mlflow_sweep:
          _target_: {CALLBACK}
    """
)


def _hydra_sweep(start: Path, seeds: str) -> subprocess.CompletedProcess:
    (start / "app.py").write_text(APP)
    (start / "app.yaml").write_text(APP_YAML)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "WAI_EXP_"))}
    return subprocess.run(
        [sys.executable, "app.py", "-m", f"seed={seeds}"],
        cwd=start,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_real_hydra_multirun_nests_jobs_under_an_aggregating_parent(start_dir):
    proc = _hydra_sweep(start_dir, "0,1,2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = _client(start_dir)
    runs = client.search_runs(
        [client.get_experiment_by_name("wai-exp").experiment_id], order_by=["start_time ASC"]
    )
    parents = [r for r in runs if r.data.tags.get("wai.sweep") == "parent"]
    assert len(parents) == 1
    parent = parents[0]
    kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(kids) == 3
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["grade.pass_at_1.mean"] == pytest.approx(0.6)
    assert parent.data.metrics["grade.pass_at_1.sd"] == pytest.approx(0.1)
    assert not (start_dir / "mlruns").exists()


@pytest.mark.slow
def test_real_hydra_multirun_with_a_crashing_job_ends_every_run(start_dir):
    proc = _hydra_sweep(start_dir, "0,9")
    assert proc.returncode != 0
    assert "job crashed before finish()" in proc.stderr
    client = _client(start_dir)
    runs = client.search_runs([client.get_experiment_by_name("wai-exp").experiment_id])
    assert len(runs) == 3  # the parent and two children
    assert {r.info.status for r in runs if r.data.tags.get("wai.sweep") == "parent"} == {"FAILED"}
    by_overrides = {r.data.tags.get("wai.overrides"): r.info.status for r in runs}
    assert by_overrides["seed=0"] == "FINISHED"
    assert by_overrides["seed=9"] == "FAILED"  # the tracker's atexit guard
    assert "RUNNING" not in {r.info.status for r in runs}


def test_parent_file_is_ignored_for_another_store(start_dir, tmp_path):
    """A job whose tracker writes elsewhere must not nest under a parent it cannot see."""
    cfg = _sweep_cfg(start_dir)
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copyfile(start_dir / "mlflow.db", other / "mlflow.db")
    tracker = make_tracker({}, other)
    run_dir = start_dir / "multirun/2026-11-30/06-00-00/0"
    tracker.start({}, [], run_dir, None, "h")
    tracker.finish("FINISHED")
    assert "mlflow.parentRunId" not in _client(other).get_run(tracker.run_id).data.tags
    cb.on_multirun_end(cfg)


def test_parent_store_follows_the_recorded_start_dir(start_dir, tmp_path, monkeypatch):
    """The CLI records where the command was typed (WAI_EXP_START_DIR); the parent's store
    is there, the same store the jobs' trackers resolve, whatever Hydra's cwd says."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("WAI_EXP_START_DIR", str(start_dir))
    cfg = _sweep_cfg(elsewhere)
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    assert cb.uri == f"sqlite:///{start_dir.resolve()}/mlflow.db"
    assert not (elsewhere / "mlflow.db").exists()
    assert (elsewhere / "multirun/2026-11-30/06-00-00/.wai_mlflow_parent.json").is_file()
    cb.on_multirun_end(cfg)
    assert _client(start_dir).get_run(cb.parent_run_id).info.status == "FINISHED"


def test_the_parent_records_the_overrides_as_typed_not_resolved(start_dir, monkeypatch):
    """``${...}`` in an override is what the user typed: the parent's ``wai.overrides`` keeps
    it (a variable's value is not copied into the record, and an unset one does not stop
    the sweep here)."""
    monkeypatch.setenv("UNIT_SWEEP_MODEL", "model-from-env")
    monkeypatch.delenv("UNIT_SWEEP_UNSET", raising=False)
    typed = ["+experiment=eval_variance", "seed=0,1", "agent.model=${oc.env:UNIT_SWEEP_MODEL}",
             "simulate.repeats=${seed}", "judge.model=${oc.env:UNIT_SWEEP_UNSET,vllm:j}"]  # fmt: skip
    cfg = _sweep_cfg(start_dir)
    cfg.hydra.overrides.task = typed
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    tags = _client(start_dir).get_run(cb.parent_run_id).data.tags
    assert tags["wai.overrides"] == " ".join(typed)
    assert cb.overrides == typed
    cb.on_multirun_end(cfg)


def test_when_the_summary_itself_fails_the_parent_counts_failed_jobs_in_their_number(
    start_dir, monkeypatch
):
    """The last resort of the atexit hook (finalize raised): the parent still ends FAILED,
    its tag counting the jobs that failed in this process."""
    cfg = _sweep_cfg(start_dir)
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)

    def broken(*args, **kwargs):
        raise RuntimeError("the store went away mid-summary")

    monkeypatch.setattr(cb, "finalize", broken)
    for n_failed, jobs in ((1, "1 job"), (2, "2 jobs")):
        cb.on_job_end(cfg, job_return=SimpleNamespace(status=JobStatus.FAILED))
        cb._ended = False  # the hook runs once a process; here once a count
        cb._atexit()
        parent = _client(start_dir).get_run(cb.parent_run_id)
        assert cb.jobs_failed == n_failed and parent.info.status == "FAILED"
        assert parent.data.tags["wai.error"] == (
            f"the sweep ended before on_multirun_end ({jobs} failed in this process); see "
            "the child runs and the Hydra log"
        )


def test_a_second_sweep_in_one_process_opens_a_store_made_again_at_the_same_path(
    start_dir, migrated_db, monkeypatch
):
    """Two sweeps in one process, the store deleted and made again at the same path between
    them (``rm mlflow.db`` in a notebook; pytest's tmp folders, whose names repeat once a
    passed test's folder is removed). The second parent run was inserted through MLflow's
    cached connection to the deleted file: "attempt to write a readonly database". The
    callback keeps no state between sweeps; the first one ending through the last-resort
    branch is where this was first seen, not its cause."""
    cfg = _sweep_cfg(start_dir)
    first = MlflowSweepCallback()
    first.on_multirun_start(cfg)
    monkeypatch.setattr(first, "finalize", lambda *a, **k: 1 / 0)  # the last-resort branch
    first._atexit()
    assert _client(start_dir).get_run(first.parent_run_id).info.status == "FAILED"
    (start_dir / "mlflow.db").unlink()
    shutil.copyfile(migrated_db, start_dir / "mlflow.db")
    second = MlflowSweepCallback()
    second.on_multirun_start(cfg)
    second.on_multirun_end(cfg)
    runs = _client(start_dir).search_runs(
        [second.experiment_id], filter_string="tags.`wai.sweep` = 'parent'"
    )
    assert [r.info.run_id for r in runs] == [second.parent_run_id]  # only the new store's
    assert runs[0].info.status == "FINISHED"


@pytest.mark.parametrize("tracking", ["mlflow", "none"])
def test_a_sweep_hydra_stopped_before_its_first_job_says_how_many_were_planned(
    start_dir, capsys, tracking
):
    """Hydra's launcher raised before any job (a config only the job's composition refuses):
    the summary read "0 of 0 jobs finished ... error: 0 of 0 jobs failed" under an empty
    table, as if the sweep had planned nothing."""
    cfg = _sweep_cfg(start_dir, {"kind": tracking, "experiment": "wai-exp"})
    cfg.hydra.sweeper = {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"}
    cb = MlflowSweepCallback()
    cb.on_multirun_start(cfg)
    cb._atexit()  # Hydra skips on_multirun_end when its launcher raises
    out = capsys.readouterr().out
    error = (
        "error: Hydra stopped the sweep before the first of 3 planned jobs started; Hydra's "
        "error, printed with this summary, says why"
    )
    assert out.startswith(f"wai-exp sweep: no job ran\n{error}\n"), out
    assert "0 of 0" not in out and "pass@1" not in out
    if tracking == "mlflow":
        parent = _client(start_dir).get_run(cb.parent_run_id)
        assert parent.info.status == "FAILED"
        assert parent.data.tags["wai.error"] == error.removeprefix("error: ")
