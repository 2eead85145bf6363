"""MlflowTracker against a real (temporary, pre-migrated) SQLite store, read back with
MlflowClient: what a user finds in the MLflow UI after a run."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from wai_exp.tracking import (
    NullTracker,
    TrackingConfigError,
    make_tracker,
    resolve_tracking_uri,
)

#: These tests check the tracker itself, in this process (test_background.py covers the writer).
IN_PROCESS = {"background": False}


def _client(start: Path):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{start / 'mlflow.db'}")


def _artifacts(client, run_id: str, path: str | None = None) -> set[str]:
    out: set[str] = set()
    for item in client.list_artifacts(run_id, path):
        if item.is_dir:
            out |= _artifacts(client, run_id, item.path)
        else:
            out.add(item.path)
    return out


def _config() -> dict:
    return {
        "seed": 0,
        "name": "wai-exp",
        "simulate": {"mode": "rl", "budget": 200, "fault_rate": None},
        "agent": {"kind": "scripted", "api_key": "sk-do-not-leak", "system_prompt": "p" * 7000},
        "pipeline": {"stages": ["simulate", "grade"]},
        # >100 leaves, so params need more than one request.
        "knobs": {f"k{i}": i for i in range(150)},
    }


def test_full_run_is_recorded(start_dir, tmp_path, graded_rows, write_jsonl):
    tracker = make_tracker({"kind": "mlflow", "background": False}, start_dir)
    run_dir = tmp_path / "outputs" / "run1"
    tracker.start(
        _config(), ["+experiment=rl_round", "seed=0"], run_dir, "rl_round", "abc123def456"
    )
    sim_rows = write_jsonl(
        run_dir / "simulate" / "rows.jsonl", [{"scenario_id": "t1", "prompt": "q"}]
    )
    tracker.log_stage(
        "simulate",
        kind="simulate",
        report={"rows": 1},
        text="1 row",
        rows_path=sim_rows,
        metrics={"rows_out": 1},
        seconds=0.5,
        cached=True,
    )
    # Any file name works: the artifact is always <stage>/rows.jsonl.gz.
    grade_rows = write_jsonl(run_dir / "grade" / "graded.jsonl", graded_rows)
    report = {"pass_at_1": 2 / 3, "ci95": [0.5, 1.0], "k": 4, "pass_at_k": 1.0, "n": float("nan")}
    tracker.log_stage(
        "grade",
        kind="grade",
        report=report,
        text="pass@1 0.667 [0.500..1.000]",
        rows_path=grade_rows,
        metrics={
            "pass_at_1": 2 / 3,
            "pass_at_1_ci_lo": 0.5,
            "pass_at_1_ci_hi": 1.0,
            "pass_pow_k": None,
        },
        seconds=1.25,
        cached=False,
    )
    # A selection stage's rows are graded too, but it gets no plots (not a grading stage).
    tracker.log_stage(
        "optimize",
        kind="optimize",
        report={"rows_kept": 10},
        text="kept 10",
        rows_path=grade_rows,
        metrics={"rows_kept": 10},
        seconds=0.1,
        cached=False,
    )
    tracker.set_tags({"gate_verdict": "passed", "stopped_because": "budget", "ok": True})
    tracker.finish("FINISHED")

    client = _client(start_dir)
    run = client.get_run(tracker.run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "rl_round seed=0"  # the preset, then what the user changed

    params = run.data.params
    assert params["simulate.budget"] == "200"
    assert params["simulate.fault_rate"] == "null"
    assert params["pipeline.stages.1"] == "grade"
    assert params["knobs.k149"] == "149"
    assert params["agent.api_key"] == "***redacted***"
    assert len(params["agent.system_prompt"]) == 6000
    assert len(params) >= 150 + 8

    m = run.data.metrics
    assert m["grade.pass_at_1"] == pytest.approx(2 / 3)
    assert m["grade.pass_at_1_ci_lo"] == 0.5 and m["grade.pass_at_1_ci_hi"] == 1.0
    assert m["grade.seconds"] == 1.25 and m["simulate.seconds"] == 0.5
    assert m["simulate.rows_out"] == 1
    assert "grade.pass_pow_k" not in m  # unmeasured is not 0 ...

    tags = run.data.tags
    assert tags["grade.unmeasured"] == "pass_pow_k"  # ... it is named instead
    assert tags["preset"] == "rl_round" and tags["config_hash"] == "abc123def456"
    assert tags["wai.version"] == __import__("wai_exp").__version__
    # start_dir is no checkout: the commit is the one the config and code come from, if any
    assert tags.get("mlflow.source.git.commit") != "unknown"
    assert ("mlflow.source.git.commit" in tags) != ("wai.git_commit" in tags)
    note = tags["mlflow.note.content"]
    assert "rl_round" in note and "seed=0" in note
    # The description states the answer: pass@1 with its interval, the unmeasured k-way
    # numbers as unmeasured, the gate verdict and the rows kept of the rows made.
    assert "pass@1 0.667 (95% CI 0.500–1.000)" in note
    assert "pass^k and pass@k: not measured" in note
    assert "**Publish gate: PASSED**" in note
    assert "**Rows kept:** 10 of 1 made (optimize)" in note
    # Headline metrics under short names, beside the per-stage ones.
    assert m["pass_at_1"] == pytest.approx(2 / 3) and m["pass_at_1_ci_lo"] == 0.5
    assert m["rows_kept"] == 10 and m["rows_made"] == 1 and "pass_pow_k" not in m
    assert tags["simulate.cached"] == "true" and tags["grade.cached"] == "false"
    assert tags["gate_verdict"] == "passed" and tags["ok"] == "true"
    assert "mlflow.parentRunId" not in tags

    arts = _artifacts(client, tracker.run_id)
    assert {
        "config.yaml",
        "overrides.yaml",
        "simulate/report.json",
        "simulate/report.txt",
        "simulate/rows.jsonl.gz",
        "grade/report.json",
        "grade/report.txt",
        "grade/rows.jsonl.gz",
        "grade/pass_rate_hist.png",
        "grade/pass_at_k.png",
    } <= arts
    assert not any(a.startswith("simulate/") and a.endswith(".png") for a in arts)
    assert not any(a.startswith("optimize/") and a.endswith(".png") for a in arts)

    # Artifacts live next to the database, and no file store appeared anywhere.
    art_root = start_dir / "mlartifacts"
    assert art_root.is_dir()
    local = Path(run.info.artifact_uri.removeprefix("file://"))
    assert art_root in local.parents
    assert json.loads((local / "grade" / "report.json").read_text())["n"] is None  # NaN -> null
    config_text = (local / "config.yaml").read_text()
    assert "sk-do-not-leak" not in config_text and "p" * 7000 in config_text
    # The rows are stored gzipped: gunzip gives the stage's file byte for byte, under the
    # name rows.jsonl whatever the file was called.
    stored = (local / "grade" / "rows.jsonl.gz").read_bytes()
    assert gzip.decompress(stored) == grade_rows.read_bytes()
    assert len(stored) < grade_rows.stat().st_size
    assert b"rows.jsonl\x00" in stored[:40] and not any(a.endswith("/rows.jsonl") for a in arts)
    assert not (start_dir / "mlruns").exists()
    assert not (Path.cwd() / "mlruns").exists()

    # The rows are a dataset input of the run, in the stage's context.
    contexts = {
        t.value for d in run.inputs.dataset_inputs for t in d.tags if t.key == "mlflow.data.context"
    }
    assert contexts == {"simulate", "grade", "optimize"}

    assert tracker.ui_command.startswith(
        f"mlflow ui --backend-store-uri sqlite:///{start_dir.resolve()}/mlflow.db"
    )
    assert f"/runs/{tracker.run_id}" in tracker.ui_command
    assert tracker.run_id in tracker.summary


def test_a_grading_stage_that_measured_no_headline_gets_no_plots(
    start_dir, tmp_path, graded_rows, write_jsonl
):
    """A failed grade keeps its rows and report, but no plot: its histogram drew the rates
    of the rows it got to (a mean per-task rate where pass@1 is "not measured")."""
    tracker = make_tracker({**IN_PROCESS, "plots": True, "traces": 0}, start_dir)
    tracker.start({}, [], tmp_path / "run", "eval", "h")
    rows = write_jsonl(tmp_path / "run" / "graded.jsonl", graded_rows)
    why = "grade_b failed: the judge could not score 64 of 80 rows"
    tracker.log_stage("grade_a", kind="grade", report={"k": 4, "pass_at_1": 2 / 3},
                      rows_path=rows, metrics={"pass_at_1": 2 / 3})  # fmt: skip
    tracker.log_stage("grade_b", kind="grade",
                      report={"k": 4, "pass_at_1": None, "headline_not_measured": why},
                      rows_path=rows, metrics={"unjudged": 64.0})  # fmt: skip
    tracker.finish("FAILED")
    arts = _artifacts(_client(start_dir), tracker.run_id)
    assert "grade_a/pass_rate_hist.png" in arts  # the same rows, measured: plotted
    assert {"grade_b/report.json", "grade_b/rows.jsonl.gz"} <= arts
    assert not [a for a in arts if a.startswith("grade_b/") and a.endswith(".png")], arts


def test_failed_run_keeps_the_error(start_dir, tmp_path):
    tracker = make_tracker({"kind": "mlflow", "plots": False, "background": False}, start_dir)
    tracker.start({"seed": 1}, [], tmp_path / "run", None, "h")
    try:
        raise ValueError("judge endpoint refused the request")
    except ValueError as e:
        err = e
    tracker.finish("failed", error=err)
    tracker.finish("FINISHED")  # a second finish changes nothing

    client = _client(start_dir)
    run = client.get_run(tracker.run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags["wai.error"] == "ValueError: judge endpoint refused the request"
    text = Path(client.download_artifacts(tracker.run_id, "error.txt", str(tmp_path))).read_text()
    assert "Traceback" in text and "judge endpoint refused" in text
    with pytest.raises(RuntimeError, match="already ended"):
        tracker.log_stage("grade", kind="grade")


def test_unknown_status_is_refused(start_dir, tmp_path):
    tracker = make_tracker(IN_PROCESS, start_dir)
    tracker.start({}, [], tmp_path, None, "h")
    with pytest.raises(ValueError, match="FINISHED"):
        tracker.finish("DONE")
    tracker.finish("KILLED")
    assert _client(start_dir).get_run(tracker.run_id).info.status == "KILLED"


def test_logging_before_start_says_what_to_do(start_dir):
    tracker = make_tracker(IN_PROCESS, start_dir)
    with pytest.raises(RuntimeError, match="start"):
        tracker.set_tags({"a": 1})


def test_git_commit_tag_comes_from_the_start_dir(start_dir, tmp_path):
    def git(*args):
        return subprocess.run(
            ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
            cwd=start_dir,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q")
    (start_dir / "f.txt").write_text("x")
    git("add", "f.txt")
    git("commit", "-qm", "init")
    sha = git("rev-parse", "HEAD")
    tracker = make_tracker(IN_PROCESS, start_dir)
    tracker.start({}, [], tmp_path, "eval", "h")
    tracker.finish("FINISHED")
    tags = _client(start_dir).get_run(tracker.run_id).data.tags
    assert tags["mlflow.source.git.commit"] == sha
    assert tags["wai.git_dirty"] == "false"


def test_explicit_parent_nests_the_run(start_dir, tmp_path):
    client = _client(start_dir)
    from wai_exp.tracking.mlflow_tracker import prepare_store

    uri = f"sqlite:///{start_dir.resolve()}/mlflow.db"
    exp = prepare_store(uri, "wai-exp")
    parent = client.create_run(exp, run_name="parent")
    tracker = make_tracker(IN_PROCESS, start_dir)
    tracker.parent_run_id = parent.info.run_id
    tracker.start({}, [], tmp_path, None, "h")
    tracker.finish("FINISHED")
    child = client.get_run(tracker.run_id)
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id


def test_stale_parent_from_env_is_ignored(start_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WAI_EXP_MLFLOW_PARENT_RUN_ID", "0123456789abcdef0123456789abcdef")
    tracker = make_tracker(IN_PROCESS, start_dir)
    tracker.start({}, [], tmp_path, None, "h")
    tracker.finish("FINISHED")
    assert "mlflow.parentRunId" not in _client(start_dir).get_run(tracker.run_id).data.tags


def test_atexit_guard_marks_an_unfinished_run_failed(start_dir, tmp_path):
    """What the interpreter runs at exit when finish() never came (a real crashing process is
    covered end to end in test_callbacks' crashing-sweep test)."""
    tracker = make_tracker(IN_PROCESS, start_dir)
    tracker.start({"seed": 0}, [], tmp_path, "rl_round", "h")
    tracker._atexit()
    run = _client(start_dir).get_run(tracker.run_id)
    assert run.info.status == "FAILED"
    assert "exited before the run finished" in run.data.tags["wai.error"]
    tracker._atexit()  # idempotent
    finished = make_tracker(IN_PROCESS, start_dir)
    finished.start({}, [], tmp_path, None, "h")
    finished.finish("FINISHED")
    finished._atexit()  # a finished run is left alone
    assert _client(start_dir).get_run(finished.run_id).info.status == "FINISHED"


def test_tracking_none_records_nothing(tmp_path):
    tracker = make_tracker({"kind": "none"}, tmp_path)
    assert isinstance(tracker, NullTracker)
    tracker.start({"a": 1}, [], tmp_path, None, "h")
    tracker.log_stage("grade", kind="grade", metrics={"pass_at_1": 1.0})
    tracker.set_tags({"x": 1})
    tracker.finish("FINISHED")
    assert tracker.run_id is None and tracker.ui_command is None
    assert "tracking off" in tracker.summary
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        ({"kind": "wandb"}, "tracking.kind"),
        ({"kind": "mlflow", "urii": "x"}, "valid keys"),
        ({"uri": "file:///tmp/mlruns"}, "file store"),
        ({"uri": "./mlruns"}, "file store"),
        ({"plots": "yes"}, "tracking.plots"),
        ({"experiment": ""}, "tracking.experiment"),
    ],
)
def test_bad_tracking_config_names_the_fix(cfg, match, tmp_path):
    with pytest.raises(TrackingConfigError, match=match):
        make_tracker(cfg, tmp_path)


def test_uris_are_made_absolute_against_the_start_dir(tmp_path):
    assert resolve_tracking_uri(None, tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert (
        resolve_tracking_uri("sqlite:///sub/x.db", tmp_path)
        == f"sqlite:///{tmp_path.resolve()}/sub/x.db"
    )
    assert resolve_tracking_uri("sqlite:////abs/x.db", tmp_path) == "sqlite:////abs/x.db"
    assert resolve_tracking_uri("http://10.0.0.2:5000", tmp_path) == "http://10.0.0.2:5000"
    server = make_tracker({"uri": "http://10.0.0.2:5000"}, tmp_path)
    assert server.uri == "http://10.0.0.2:5000"


def test_dataset_schema_is_flat_and_typed(graded_rows):
    from wai_exp.tracking.mlflow_tracker import rows_dataset

    ds = rows_dataset(graded_rows, name="grade-rows", source="file:///runs/grade/rows.jsonl.gz",
                      digest="abc123")  # fmt: skip
    cols = {c["name"]: c for c in json.loads(ds.schema)["mlflow_colspec"]}
    assert cols["reward"] == {"type": "double", "name": "reward", "required": False}  # a null
    assert cols["rollout_index"]["type"] == "double" and cols["rollout_index"]["required"]
    assert cols["scenario_id"] == {"type": "string", "name": "scenario_id", "required": True}
    assert cols["steps"]["type"] == "string" and not cols["steps"]["required"]  # rows lack it
    assert json.loads(ds.profile) == {"num_rows": len(graded_rows),
                                      "num_elements": len(graded_rows) * len(cols)}  # fmt: skip
    assert (ds.digest, ds.source_type) == ("abc123", "local")
    assert json.loads(ds.source) == {"uri": "file:///runs/grade/rows.jsonl.gz"}
    assert rows_dataset([], name="x", source=None) is None


def test_a_dataset_input_needs_no_pandas(graded_rows, monkeypatch):
    from wai_exp.tracking.mlflow_tracker import rows_dataset

    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises ImportError
    ds = rows_dataset(graded_rows, name="grade-rows", source=None)
    assert ds is not None and len(ds.digest) <= 36
    # The same rows give the same digest; other rows another.
    assert rows_dataset(graded_rows, name="g", source=None).digest == ds.digest
    assert rows_dataset(graded_rows[:-1], name="g", source=None).digest != ds.digest


def test_a_dead_tracking_server_fails_fast_with_the_fix(tmp_path):
    import socket

    from wai_exp.tracking.mlflow_tracker import TrackingError

    with socket.socket() as sock:  # a port nothing listens on once the socket closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    tracker = make_tracker({**IN_PROCESS, "uri": f"http://127.0.0.1:{port}"}, tmp_path)
    with pytest.raises(TrackingError, match="tracking=mlflow"):
        tracker.start({}, [], tmp_path, None, "h")
    assert tracker.run_id is None


def test_a_deleted_experiment_is_reported_not_recreated(start_dir, tmp_path):
    from wai_exp.tracking.mlflow_tracker import TrackingError

    client = _client(start_dir)
    exp_id = client.create_experiment("gone")
    client.delete_experiment(exp_id)
    tracker = make_tracker({**IN_PROCESS, "experiment": "gone"}, start_dir)
    with pytest.raises(TrackingError, match="restore"):
        tracker.start({}, [], tmp_path, None, "h")


@pytest.mark.slow
def test_parallel_jobs_on_a_fresh_sqlite_file_all_land(tmp_path):
    """MLflow migrates a new SQLite file without a lock; parallel first users corrupt it
    ("duplicate column", "table ... already exists"; 0 of 4 plain mlflow.start_run jobs
    landed when measured). The tracker creates schema and experiment under a file lock."""
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from wai_exp.tracking import make_tracker
        d, i = Path(sys.argv[1]), sys.argv[2]
        t = make_tracker({}, d)
        t.start({"i": i, "knobs": {f"k{j}": j for j in range(150)}}, [], d / i, "x", "h")
        t.log_stage("grade", kind="grade", metrics={"pass_at_1": 0.5})
        t.finish("FINISHED")
        """
    )
    start = tmp_path / "fresh"
    start.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(start), str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    errors = [p.communicate(timeout=180)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(e[-2000:] for e in errors)
    client = _client(start)
    runs = client.search_runs([client.get_experiment_by_name("wai-exp").experiment_id])
    assert len(runs) == 3
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert all(len(r.data.params) == 151 for r in runs)


def test_in_memory_rows_with_privileged_never_reach_the_dataset(tmp_path):
    from wai_exp.tracking.mlflow_tracker import rows_dataset

    rows = [
        {"scenario_id": f"s{i}", "reward": i % 2, "privileged": {"reference": "KEY"},
         "vector": [0.1, 0.2]}
        for i in range(1005)
    ]  # fmt: skip
    ds = rows_dataset(rows, name="grade-rows", source=None)
    assert ds is not None
    names = [c["name"] for c in json.loads(ds.schema)["mlflow_colspec"]]
    assert names == ["scenario_id", "reward"]
    assert "KEY" not in ds.schema + ds.profile + ds.source + ds.name
    assert json.loads(ds.profile)["num_rows"] == len(rows)  # every row, not a sample


def test_rollouts_become_traces_with_spans_and_the_reward_as_an_assessment(start_dir, tmp_path):
    steps = [
        {"kind": "assistant", "content": "looking it up",
         "tool_calls": [{"id": "c1", "name": "lookup_order", "arguments": {"order_id": "A1"}}]},
        {"kind": "tool", "name": "lookup_order", "arguments": {"order_id": "A1"},
         "result": {"status": "shipped"}, "status": "ok", "fault": None},
        {"kind": "assistant", "content": "It shipped.", "tool_calls": []},
    ]  # fmt: skip
    rows = [
        {"rollout_id": f"r{i}", "scenario_id": f"s{i}", "prompt": f"where is A{i}?",
         "steps": steps, "final_text": "It shipped.", "reward": float(i % 2),
         "reason": "checked" if i % 2 else "wrong tool", "judge_name": "task_checklist"}
        for i in range(6)
    ]  # fmt: skip
    tracker = make_tracker(
        {**IN_PROCESS, "traces": 4, "plots": False, "log_rows": False}, start_dir
    )
    tracker.start({}, [], tmp_path / "run", "eval", "h")
    tracker.log_stage("grade", kind="grade", report={}, metrics={"pass_at_1": 0.5}, rows=rows,
                      rows_path=None)  # fmt: skip
    tracker.finish("FINISHED")
    client = _client(start_dir)
    traces = client.search_traces(
        locations=[tracker.experiment_id], run_id=tracker.run_id, max_results=50
    )
    assert len(traces) == 4  # the cap
    rewards = sorted(t.info.tags["wai.reward"] for t in traces)
    assert rewards == ["0.0", "0.0", "1.0", "1.0"]  # failing and passing in equal shares
    t = traces[0]
    names = sorted(s.name for s in t.data.spans)
    assert names == ["agent turn 1", "agent turn 2", f"grade rollout {t.info.tags['wai.scenario_id']}",
                     "tool lookup_order"]  # fmt: skip
    [fb] = [a for a in t.info.assessments if a.name == "reward"]
    assert fb.value == float(t.info.tags["wai.reward"]) and fb.rationale in (
        "checked",
        "wrong tool",
    )
    assert fb.source.source_id == "task_checklist"


def _sorted_sample(rows: list[dict], cap: int, seed: str) -> list[dict]:
    """The trace sample as a full sort of every row picks it (the rule sample_rollouts keeps)."""
    import hashlib

    def order(r):
        key = f"{seed}:{r.get('rollout_id') or r.get('scenario_id')}:{r.get('rollout_index')}"
        return hashlib.sha256(key.encode()).hexdigest()

    failing = sorted(
        (r for r in rows if r.get("reward") is not None and r["reward"] < 1), key=order
    )
    passing = sorted(
        (r for r in rows if r.get("reward") is not None and r["reward"] >= 1), key=order
    )
    other = sorted((r for r in rows if r.get("reward") is None), key=order)
    take_f = min(len(failing), max(cap // 2, cap - len(passing)))
    picked = failing[:take_f] + passing[: min(len(passing), cap - take_f)]
    return picked + other[: cap - len(picked)]


@pytest.mark.parametrize("cap", [1, 4, 7, 50])
def test_the_trace_sample_streams_and_picks_what_a_full_sort_picks(cap):
    from wai_exp.tracking.traces import sample_rollouts

    rows = [
        {"rollout_id": f"r{i % 37}", "rollout_index": i, "reward": [0.0, 1.0, None, 0.5][i % 4]}
        for i in range(200)
    ] + [{"rollout_id": "r1", "rollout_index": 1, "reward": 0.0, "twin": True}]  # a tied hash
    got = sample_rollouts(iter(rows), cap, seed="grade")  # a one-pass iterator is enough
    assert got == _sorted_sample(rows, cap, "grade")
    assert sample_rollouts(got, cap, seed="grade") == got  # the writer samples the sample again
    assert sample_rollouts(rows[:3], cap, seed="grade") == _sorted_sample(rows[:3], cap, "grade")


def test_a_stage_file_is_streamed_not_held_and_only_the_trace_sample_waits(start_dir, tmp_path):
    """The writer records a stage from its rows file (rows=None): the schema, the plots and
    the trace sample stream the file, and the job left waiting for the run's end holds the
    sample, not the stage's rows (a 100,000-row run held 1.4 GB in the writer)."""
    import tracemalloc

    from wai_exp.rows.jsonl import write_rows

    rows = [
        {"rollout_id": f"r{i}", "scenario_id": f"t{i // 4}", "rollout_index": i % 4,
         "reward": float(i % 3 == 0), "final_text": f"{i} " + "x" * 4000}
        for i in range(3000)
    ]  # fmt: skip
    path = tmp_path / "run" / "grade" / "rows.jsonl"
    write_rows(path, rows)
    size = path.stat().st_size
    # Plots are off here: rendering a PNG costs the same ~10 MB whatever the rows; the rows'
    # part of the plots (per-task counts) is measured below.
    tracker = make_tracker({**IN_PROCESS, "traces": 6, "plots": False}, start_dir)
    jobs: list = []
    tracker.start({}, [], tmp_path / "run", "eval", "h")
    tracker.trace_sink = jobs.append

    def peak_of(call) -> int:
        tracemalloc.start()
        try:
            call()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak = peak_of(lambda: tracker.log_stage("grade", kind="grade", report={"k": 4},
                                             rows_path=path, metrics={"pass_at_1": 0.33}))  # fmt: skip
    tracker.finish("FINISHED")
    assert peak < size / 3, f"peak {peak / 1e6:.1f} MB while logging a {size / 1e6:.1f} MB file"
    [job] = jobs
    assert job[4] == _sorted_sample(rows, 6, "grade")
    assert {"grade/rows.jsonl.gz"} <= _artifacts(_client(start_dir), tracker.run_id, "grade")
    from wai_exp.tracking.mlflow_tracker import FileRows
    from wai_exp.tracking.plots import stage_figures

    stage_figures("warm-up", rows[:40], {"k": 4})  # matplotlib's imports and font cache
    figures: dict = {}
    peak = peak_of(lambda: figures.update(stage_figures("grade", FileRows(path), {"k": 4})))
    assert {"pass_rate_hist.png", "pass_at_k.png"} <= set(figures)
    assert peak < size / 3, f"plots: peak {peak / 1e6:.1f} MB over a {size / 1e6:.1f} MB file"
    run = _client(start_dir).get_run(tracker.run_id)
    [ds] = run.inputs.dataset_inputs
    assert json.loads(ds.dataset.profile)["num_rows"] == 3000
    assert json.loads(ds.dataset.source)["uri"].endswith("/grade/rows.jsonl.gz")


def _kinds_config(*kinds: str) -> dict:
    return {"seed": 0, "pipeline": {"stages": {k: {"kind": k} for k in kinds}}}


def test_the_headline_and_the_training_dataset_are_logged_first(start_dir, tmp_path, graded_rows,
                                                                  write_jsonl):  # fmt: skip
    """Issue 23 §6: MLflow lists a run's metrics and inputs in the order they were first
    logged; the run page led with rows_made and simulate.*, and its dataset box with
    "simulate-rows +4" (the published training set last)."""
    tracker = make_tracker(IN_PROCESS, start_dir)
    run_dir = tmp_path / "run"
    tracker.start(_kinds_config("simulate", "grade", "publish"), [], run_dir, "rl_round", "h")
    rows = write_jsonl(run_dir / "rows.jsonl", graded_rows)
    tracker.log_stage("simulate", kind="simulate", rows_path=rows, metrics={"rows_out": 3})
    tracker.log_stage("grade", kind="grade", rows_path=rows,
                      metrics={"pass_at_1": 0.5, "pass_at_1_ci_lo": 0.2, "pass_at_1_ci_hi": 0.8})  # fmt: skip
    published = write_jsonl(run_dir / "publish" / "train.jsonl", [{"prompt": "q"}])
    report = {"dataset": {"name": "rl_round-rl", "digest": "d" * 40, "files": [str(published)],
                          "source": str(published)}}  # fmt: skip
    tracker.log_stage("publish", kind="publish", report=report, rows_path=published,
                      metrics={"records": 1})  # fmt: skip
    tracker.finish("FINISHED")
    run = _client(start_dir).get_run(tracker.run_id)
    assert list(run.data.metrics)[:4] == ["pass_at_1", "pass_at_1_ci_lo", "pass_at_1_ci_hi",
                                          "rows_made"]  # fmt: skip
    assert {"simulate.rows_out", "grade.pass_at_1", "publish.records"} <= set(run.data.metrics)
    assert [d.dataset.name for d in run.inputs.dataset_inputs] == [
        "rl_round-rl", "simulate-rows", "grade-rows",
    ]  # fmt: skip


def test_metrics_held_for_a_headline_that_never_came_are_written_at_the_end(start_dir, tmp_path):
    tracker = make_tracker(IN_PROCESS, start_dir)
    tracker.start(_kinds_config("simulate", "grade", "publish"), [], tmp_path, "rl_round", "h")
    tracker.log_stage("simulate", kind="simulate", metrics={"rows_out": 3}, seconds=0.5)
    client = _client(start_dir)
    assert "simulate.rows_out" not in client.get_run(tracker.run_id).data.metrics  # held
    tracker.finish("FAILED", error="grade: the judge refused")
    run = client.get_run(tracker.run_id)
    assert run.data.metrics["simulate.rows_out"] == 3 and run.data.metrics["rows_made"] == 3


def test_a_tracking_servers_hint_is_its_link_alone_and_a_database_store_names_the_command() -> None:
    # the summary prints "open it:  <hint>": a server's hint read "open it:  open http://..."
    from wai_exp.tracking.mlflow_tracker import ui_hint

    hint = ui_hint("http://127.0.0.1:5001/", "3", "abc")
    assert hint == "http://127.0.0.1:5001/#/experiments/3/runs/abc?workflowType=machine_learning"
    assert ui_hint("sqlite:///mlflow.db").startswith("mlflow ui --backend-store-uri ")
