"""The runner in-process, tracking off: files, cache reuse, resume without duplicates,
a gate refusal recorded as a result, a failure recorded as FAILED."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from wai_exp.pipeline.registry import StageResult, register
from wai_exp.pipeline.runner import EXIT_FAILED, EXIT_INTERRUPTED, run_pipeline, summarize
from wai_exp.rows.jsonl import RowAppender, read_rows
from wai_exp.score.select.publish_gate import PublishGateError

CALLS: Counter[str] = Counter()
#: rows after which the streaming stage raises (simulating a kill), None = never
CRASH = {"after": None}


@register("t_rows", reads=("seed",))
def _rows(ctx, params, inputs):
    CALLS["t_rows"] += 1
    n = int(params.get("n", 6))
    rows = [
        {
            "rollout_id": f"r{i}",
            "scenario_id": f"s{i // 2}",
            "reward": (i + ctx.seed) % 2,
            "privileged": {"reference": "answer key"},
        }
        for i in range(n)
    ]
    return StageResult(rows=rows, report={"n": n}, text=f"{n} rows", metrics={"rows": float(n)})


@register("t_keep", reads=())
def _keep(ctx, params, inputs):
    CALLS["t_keep"] += 1
    rows = next(iter(inputs.values())).rows
    kept = [r for r in rows if r["reward"] == 1]
    return StageResult(
        rows=kept,
        report={"kept": len(kept)},
        text="kept",
        metrics={"rows_in": float(len(rows)), "rows_kept": float(len(kept))},
    )


@register("t_gate", reads=())
def _gate(ctx, params, inputs):
    CALLS["t_gate"] += 1
    if params.get("refuse"):
        err = PublishGateError("no mixed group: every ask is unanimous")
        err.report = {"verdict": "refused", "reasons": ["no mixed group"]}
        raise err
    return StageResult(
        rows=next(iter(inputs.values())).rows,
        report={"verdict": "passed"},
        text="passed",
        metrics={"gate_passed": 1.0},
        tags={"gate_verdict": "passed"},
    )


@register("t_boom", reads=())
def _boom(ctx, params, inputs):
    raise RuntimeError("the judge server is down")


@register("t_stream", reads=("seed",))
def _stream(ctx, params, inputs):
    """Like simulate: streams finished rows to the partial file, resumes from it."""
    done = (
        {r["rollout_id"]: r for r in read_rows(ctx.partial_path)}
        if ctx.partial_path.exists()
        else {}
    )
    CALLS["t_stream_resumed"] = len(done)
    rows = []
    with RowAppender(ctx.partial_path) as app:
        for i in range(int(params.get("n", 10))):
            rid = f"r{i}"
            if rid in done:
                rows.append(done[rid])
                continue
            if CRASH["after"] is not None and CALLS["t_stream_new"] >= CRASH["after"]:
                raise KeyboardInterrupt
            row = {"rollout_id": rid, "value": i * ctx.seed}
            CALLS["t_stream_new"] += 1
            app.append(row)
            rows.append(row)
    return StageResult(rows=rows, report={"n": len(rows)}, text="", metrics={})


class Recorder:
    run_id = "run-123"
    ui_command = "mlflow ui --backend-store-uri sqlite:////x/mlflow.db"

    def __init__(self):
        self.events = []

    def start(self, **kw):
        self.events.append(("start", kw["preset"], kw["config_hash"]))

    def log_stage(self, name, **kw):
        self.events.append(("stage", name, kw["cached"], dict(kw["metrics"])))

    def set_tags(self, tags):
        self.events.append(("tags", dict(tags)))

    def finish(self, status, error=None):
        self.events.append(("finish", status, error))


def config(stages, seed=0, **extra):
    return {
        "seed": seed,
        "name": "t",
        "tracking": {"kind": "none"},
        "pipeline": {"stages": stages, "refusal_exit_code": 3},
        **extra,
    }


ROUND = {
    "src": {"kind": "t_rows"},
    "keep": {"kind": "t_keep", "needs": ["src"]},
    "gate": {"kind": "t_gate", "needs": ["keep"]},
}


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()
    CRASH["after"] = None


def run(cfg, tmp_path, run_name, tracker=None):
    stream = io.StringIO()
    out = run_pipeline(
        cfg,
        run_dir=tmp_path / "outputs" / run_name,
        start_dir=tmp_path,
        tracker=tracker,
        stream=stream,
    )
    return out, stream.getvalue()


def test_every_stage_writes_its_files_and_privileged_never_lands(tmp_path):
    out, log = run(config(ROUND), tmp_path, "r1")
    assert out.status == "passed" and out.exit_code == 0 and out.gate == "passed"
    for stage in ROUND:
        folder = tmp_path / "outputs" / "r1" / stage
        assert {p.name for p in folder.iterdir()} == {
            "rows.jsonl",
            "report.json",
            "report.txt",
            "metrics.json",
        }
    rows = read_rows(tmp_path / "outputs/r1/src/rows.jsonl")
    assert len(rows) == 6 and all("privileged" not in r for r in rows)
    assert json.loads((tmp_path / "outputs/r1/keep/metrics.json").read_text()) == {
        "rows_in": 6.0,
        "rows_kept": 3.0,
    }
    run_json = json.loads((tmp_path / "outputs/r1/run.json").read_text())
    assert run_json["status"] == "passed" and set(run_json["stages"]) == set(ROUND)
    timings = json.loads((tmp_path / "outputs/r1/timings.json").read_text())
    assert set(timings["stages"]) == set(ROUND) and timings["wall_s"] >= timings["compute_s"]
    # the cache lives outside the timestamped run folder
    entries = [
        p for p in (tmp_path / "outputs/.cache").iterdir() if p.is_dir() and p.name != "objects"
    ]
    assert sorted(p.name.split("-")[0] for p in entries) == ["gate", "keep", "src"]


def test_identical_rerun_reuses_every_stage_and_says_so(tmp_path):
    run(config(ROUND), tmp_path, "r1")
    calls = dict(CALLS)
    rec = Recorder()
    out, log = run(config(ROUND), tmp_path, "r2", tracker=rec)
    assert dict(CALLS) == calls  # nothing recomputed
    assert [s.status for s in out.stages] == ["cached", "cached", "cached"]
    assert log.count("cached, reusing") == 3
    assert [e[2] for e in rec.events if e[0] == "stage"] == [True, True, True]
    for stage in ROUND:
        a = (tmp_path / "outputs/r1" / stage / "rows.jsonl").read_bytes()
        assert (tmp_path / "outputs/r2" / stage / "rows.jsonl").read_bytes() == a
    assert out.gate == "passed"  # the verdict survives the cache (it rides in the marker)


def test_tracker_gets_rows_in_out_and_dropped_for_every_stage(tmp_path):
    @register("t_summary", reads=())
    def _summary(ctx, params, inputs):  # a report: reads rows, writes none
        return StageResult(rows=[], report={}, text="", metrics={"mean": 0.5})

    stages = {**ROUND, "summary": {"kind": "t_summary", "needs": ["gate"]}}
    for name in ("r1", "r2"):  # the second run is all cached: the same counts
        rec = Recorder()
        run(config(stages), tmp_path, name, tracker=rec)
        logged = {e[1]: e[3] for e in rec.events if e[0] == "stage"}
        # the source stage has no input: rows out only
        assert logged["src"] == {"rows": 6.0, "rows_out": 6.0}
        # a filter: 6 in, 3 out; its own rows_kept is kept, dropped is filled in
        assert logged["keep"] == {
            "rows_in": 6.0, "rows_kept": 3.0, "rows_out": 3.0, "rows_dropped": 3.0,
        }  # fmt: skip
        assert logged["gate"] == {
            "gate_passed": 1.0, "rows_in": 3.0, "rows_out": 3.0, "rows_dropped": 0.0,
        }  # fmt: skip
        # a report that writes no rows dropped nothing: no rows_dropped
        assert logged["summary"] == {"mean": 0.5, "rows_in": 3.0, "rows_out": 0.0}
    # the stage's own metrics file is untouched
    assert json.loads((tmp_path / "outputs/r1/keep/metrics.json").read_text()) == {
        "rows_in": 6.0,
        "rows_kept": 3.0,
    }


def test_a_cached_stage_records_the_seconds_it_took_when_computed_not_zero(tmp_path):
    class Timed(Recorder):
        def log_stage(self, name, **kw):
            self.events.append(("stage", name, kw["cached"], kw["seconds"]))

    first, second = Timed(), Timed()
    run(config(ROUND), tmp_path, "r1", tracker=first)
    out, _ = run(config(ROUND), tmp_path, "r2", tracker=second)
    assert [s.compute_s for s in out.stages] == [0.0, 0.0, 0.0]  # nothing ran this time
    for stage in ROUND:
        [(_, _, cached, seconds)] = [e for e in second.events if e[:2] == ("stage", stage)]
        marker = json.loads(
            next((tmp_path / "outputs/.cache").glob(f"{stage}-*/COMPLETE")).read_text()
        )
        assert cached is True and seconds == marker["seconds"]
        [(_, _, _, ran)] = [e for e in first.events if e[:2] == ("stage", stage)]
        assert seconds == round(ran, 3)


def test_changing_what_a_stage_reads_reruns_it_and_its_dependants(tmp_path):
    run(config(ROUND), tmp_path, "r1")
    out, _ = run(config(ROUND, seed=1), tmp_path, "r2")
    assert [s.status for s in out.stages] == ["ran", "ran", "ran"]
    # a section no stage reads (name) changes nothing
    out, _ = run({**config(ROUND), "name": "renamed"}, tmp_path, "r3")
    assert [s.status for s in out.stages] == ["cached", "cached", "cached"]


def test_cache_disabled_recomputes(tmp_path):
    run(config(ROUND), tmp_path, "r1")
    out, _ = run(config(ROUND, cache={"enabled": False, "dir": None}), tmp_path, "r2")
    assert [s.status for s in out.stages] == ["ran", "ran", "ran"]


def test_gate_refusal_is_a_recorded_result(tmp_path):
    stages = {
        **ROUND,
        "gate": {"kind": "t_gate", "needs": ["keep"], "params": {"refuse": True}},
        "after": {"kind": "t_keep", "needs": ["gate"]},
        "side": {"kind": "t_keep", "needs": ["src"]},
    }
    rec = Recorder()
    out, log = run(config(stages), tmp_path, "r1", tracker=rec)
    assert out.status == "refused" and out.exit_code == 3 and out.gate == "refused"
    assert "unanimous" in out.gate_reason
    statuses = {s.name: s.status for s in out.stages}
    assert statuses == {
        "src": "ran",
        "keep": "ran",
        "gate": "refused",
        "after": "skipped",
        "side": "ran",
    }
    report = json.loads((tmp_path / "outputs/r1/gate/report.json").read_text())
    assert report["verdict"] == "refused" and report["reasons"] == ["no mixed group"]
    assert len(read_rows(tmp_path / "outputs/r1/gate/rows.jsonl")) == 3  # the refused rows are kept
    assert (
        "tags",
        {"gate_verdict": "refused", "gate_reason": "no mixed group: every ask is unanimous"},
    ) in rec.events
    assert rec.events[-1] == ("finish", "FINISHED", None)
    assert "publish gate: REFUSED" in summarize(out)
    # a rerun reuses the refusal and still exits with the refusal status
    out2, _ = run(config(stages), tmp_path, "r2")
    assert out2.exit_code == 3 and out2.stage("gate").status == "refused"


def test_refusal_exit_code_is_configurable(tmp_path):
    stages = {**ROUND, "gate": {"kind": "t_gate", "needs": ["keep"], "params": {"refuse": True}}}
    cfg = config(stages)
    cfg["pipeline"]["refusal_exit_code"] = 0
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "refused" and out.exit_code == 0


def test_failure_marks_the_tracker_failed_with_the_reason(tmp_path):
    rec = Recorder()
    out, _ = run(
        config({"src": {"kind": "t_rows"}, "judge": {"kind": "t_boom", "needs": ["src"]}}),
        tmp_path,
        "r1",
        tracker=rec,
    )
    assert out.status == "failed" and out.exit_code == EXIT_FAILED
    status, error = rec.events[-1][1:]
    assert status == "FAILED" and "judge" in error and "the judge server is down" in error
    assert "RuntimeError" in (tmp_path / "outputs/r1/error.log").read_text()
    assert out.stage("judge").status == "failed"
    # the finished stage before it is cached; the failed one is not
    out2, _ = run(config({"src": {"kind": "t_rows"}}), tmp_path, "r2")
    assert out2.stage("src").status == "cached"


def test_interrupted_stage_resumes_without_duplicates(tmp_path):
    stages = {"sim": {"kind": "t_stream", "params": {"n": 10}}}
    CRASH["after"] = 4
    rec = Recorder()
    out, _ = run(config(stages, seed=3), tmp_path, "r1", tracker=rec)
    assert out.status == "interrupted" and out.exit_code == EXIT_INTERRUPTED
    assert rec.events[-1][1] == "KILLED"
    assert not (tmp_path / "outputs/r1/sim/rows.jsonl").exists()
    CRASH["after"] = None
    out, log = run(config(stages, seed=3), tmp_path, "r2")
    assert out.status == "passed" and CALLS["t_stream_resumed"] == 4
    assert "resuming" in log
    rows = read_rows(tmp_path / "outputs/r2/sim/rows.jsonl")
    ids = [r["rollout_id"] for r in rows]
    assert ids == [f"r{i}" for i in range(10)] and len(set(ids)) == 10
    assert [r["value"] for r in rows] == [3 * i for i in range(10)]
    assert CALLS["t_stream_new"] == 10  # 4 before the kill + 6 after: no row made twice


def test_user_stage_by_target(tmp_path):
    stages = {
        "src": {"kind": "t_rows"},
        "mine": {"_target_": f"{__name__}:_keep", "needs": ["src"]},
    }
    out, _ = run(config(stages), tmp_path, "r1")
    assert out.stage("mine").status == "ran" and len(out.stage("mine").result.rows) == 3


def test_summary_names_unmeasured_numbers(tmp_path):
    out, _ = run(config({"src": {"kind": "t_rows"}}), tmp_path, "r1", tracker=Recorder())
    text = summarize(out)
    assert "pass@1: not measured" in text and "rows kept: not measured" in text
    assert "publish gate: not run" in text
    assert "MLflow run: run-123" in text and "mlflow ui --backend-store-uri" in text
    assert str(Path(tmp_path / "outputs/r1").resolve()) in text


def test_a_stage_of_one_row_is_counted_in_the_singular(tmp_path):
    out, log = run(config({"src": {"kind": "t_rows", "params": {"n": 1}}}), tmp_path, "r1")
    assert out.status == "passed"
    assert re.search(r"src: done in \d+\.\d s \(1 row\)", log), log
    [line] = [x for x in summarize(out).splitlines() if x.strip().startswith("src ")]
    assert line.split()[2:4] == ["1", "row"], line


def test_summary_of_a_run_that_stopped_before_grading_says_why_numbers_are_missing(tmp_path):
    stages = {
        "src": {"kind": "t_rows"},
        "boom": {"kind": "t_boom", "needs": ["src"]},
        "keep": {"kind": "optimize", "needs": ["boom"]},
    }
    out, _ = run(config(stages), tmp_path, "r1")
    text = summarize(out)
    assert out.status == "failed" and "FAILED" in text
    # the pipeline has a selection stage; it just never finished
    assert "rows kept: not measured (keep did not finish)" in text
    assert "pass@1: not measured (no grading stage in this pipeline)" in text
    assert "the judge server is down" in text


# ---- the real stages -----------------------------------------------------------------


def composed(*overrides):
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module(version_base="1.3", config_module="wai_exp.conf"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)


def _without_timing(rows):
    return [{k: v for k, v in r.items() if k != "timing"} for r in rows]


def test_real_rl_round_in_process(tmp_path):
    cfg = composed("+experiment=rl_round", "simulate.budget=160", "tracking=none")
    out, log = run(cfg, tmp_path, "r1")
    assert out.status == "passed", out.error
    grade = out.stage("grade").result
    assert 0.0 <= grade.metrics["pass_at_1"] <= 1.0
    assert (
        grade.metrics["pass_at_1_ci_lo"]
        <= grade.metrics["pass_at_1"]
        <= grade.metrics["pass_at_1_ci_hi"]
    )
    assert grade.metrics["rows_in"] == 160 and grade.report["judge"]["name"] == "task_checklist"
    graded = read_rows(tmp_path / "outputs/r1/grade/rows.jsonl")
    assert len(graded) == 160 and all("privileged" not in r for r in graded)
    assert all(r.get("judge_status") for r in graded)
    kept = out.stage("optimize").result
    assert kept.metrics["rows_kept"] == len(read_rows(tmp_path / "outputs/r1/optimize/rows.jsonl"))
    assert out.gate == "passed"
    text = summarize(out)
    assert "pass@1: " in text and "95% CI [" in text and "rows kept: " in text


def test_killed_simulate_resumes_with_the_same_rows_and_no_duplicates(tmp_path, monkeypatch):
    from wai_exp.pipeline.stages import simulate as sim_stage

    cfg = composed(
        "+experiment=rl_round", "simulate.budget=120", "tracking=none", "simulate.reproducible=true"
    )
    cfg["pipeline"]["stages"] = {"simulate": {"kind": "simulate"}}
    # the uninterrupted reference, with its own cache
    ref_out, _ = run(cfg, tmp_path / "ref", "r")
    reference = read_rows(tmp_path / "ref/outputs/r/simulate/rows.jsonl")
    assert len(reference) == 120

    real_append = sim_stage.RowAppender.append
    count = {"n": 0}

    def dying_append(self, row):
        if count["n"] == 50:
            raise KeyboardInterrupt  # the process is killed after 50 finished rows
        count["n"] += 1
        real_append(self, row)

    monkeypatch.setattr(sim_stage.RowAppender, "append", dying_append)
    out, _ = run(cfg, tmp_path / "job", "r1")
    assert out.status == "interrupted"
    monkeypatch.setattr(sim_stage.RowAppender, "append", real_append)
    out, log = run(cfg, tmp_path / "job", "r2")
    assert out.status == "passed" and "resuming" in log
    assert out.stage("simulate").result.metrics["rows_resumed"] == 50
    rows = read_rows(tmp_path / "job/outputs/r2/simulate/rows.jsonl")
    ids = [r["rollout_id"] for r in rows]
    assert len(ids) == len(set(ids)) == 120
    assert _without_timing(rows) == _without_timing(reference)


@pytest.mark.parametrize(
    ("preset", "stage", "metric"),
    [
        ("eval", "evaluate", "pass_at_1"),
        ("explore", "by_stance", "mean"),
        ("next_round", "next_round", "kept"),
        ("sft_round", "optimize", "rows_kept"),
    ],
)
def test_other_presets_run_in_process(tmp_path, preset, stage, metric):
    cfg = composed(f"+experiment={preset}", "simulate.budget=96", "tracking=none")
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "passed", out.error
    result = out.stage(stage).result
    assert metric in result.metrics
    if preset == "eval":
        rows = read_rows(tmp_path / "outputs/r1/evaluate/rows.jsonl")
        assert {r["lineage"]["source"] for r in rows} == {"eval"}
        assert "pass_pow_k" in result.metrics  # repeat_policy fixed: every task has its k
    if preset == "explore":
        assert set(result.report["groups"]) <= {"direct", "vague", "adversarial", "boundary"}
        n = sum(int(g["n_rows"]) for g in result.report["groups"].values())
        assert n == 96
    if preset == "next_round":
        m = result.metrics
        assert (
            m["kept"] + m["dropped_solved"] + m["dropped_unsolved"]
            == out.stage("grade").result.metrics["n_groups"]
        )
        assert len(result.rows) == m["kept"]


def test_a_tracking_store_that_refuses_is_a_clean_failure(tmp_path):
    class Broken(Recorder):
        def start(self, **kw):
            raise OSError("database is locked")

    rec = Broken()
    out, _ = run(config(ROUND), tmp_path, "r1", tracker=rec)
    assert out.status == "failed" and out.exit_code == EXIT_FAILED
    assert out.error == "tracking could not start: OSError: database is locked"
    assert CALLS["t_rows"] == 0 and rec.events == []  # nothing ran, nothing to mark


def test_editing_user_code_invalidates_the_stages_that_call_it(tmp_path, monkeypatch):
    import sys

    pkg = tmp_path / "mycode"
    pkg.mkdir()
    (pkg / "mystage.py").write_text(
        "from wai_exp.pipeline.registry import StageResult\n"
        "def run(ctx, params, inputs):\n    return StageResult(rows=[{'v': 1}])\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    stages = {"src": {"kind": "t_rows"}, "mine": {"_target_": "mystage:run", "needs": ["src"]}}
    out, _ = run(config(stages), tmp_path, "r1")
    assert out.stage("mine").status == "ran"
    out, _ = run(config(stages), tmp_path, "r2")
    assert out.stage("mine").status == "cached"
    (pkg / "mystage.py").write_text(
        "from wai_exp.pipeline.registry import StageResult\n"
        "def run(ctx, params, inputs):\n    return StageResult(rows=[{'v': 2}])\n"
    )
    sys.modules.pop("mystage", None)
    out, _ = run(config(stages), tmp_path, "r3")
    assert out.stage("src").status == "cached" and out.stage("mine").status == "ran"
    assert out.stage("mine").result.rows == [{"v": 2}]


def test_a_file_a_user_stage_reads_at_run_time_is_checked_before_reuse(tmp_path, monkeypatch):
    import sys

    from wai_exp.pipeline.runner import summarize

    pkg = tmp_path / "mycode"
    pkg.mkdir()
    (pkg / "notes.txt").write_text("one")
    (pkg / "readstage.py").write_text(
        "from pathlib import Path\n"
        "from wai_exp.pipeline.registry import StageResult\n"
        "def run(ctx, params, inputs):\n"
        "    text = (Path(__file__).parent / 'notes.txt').read_text()\n"
        "    return StageResult(rows=[{'v': text}])\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    stages = {"src": {"kind": "t_rows"}, "mine": {"_target_": "readstage:run", "needs": ["src"]}}
    try:
        out, _ = run(config(stages), tmp_path, "r1")
        assert out.stage("mine").status == "ran"
        out, _ = run(config(stages), tmp_path, "r2")
        assert out.stage("mine").status == "cached"
        (pkg / "notes.txt").write_text("two")
        out, log = run(config(stages), tmp_path, "r3")
        assert out.stage("src").status == "cached" and out.stage("mine").status == "ran"
        assert list(out.stage("mine").result.rows) == [{"v": "two"}]
        assert "notes.txt, which the stage read, has changed" in log
        assert "notes.txt" in summarize(out)
        out, _ = run(config(stages), tmp_path, "r4")
        assert out.stage("mine").status == "cached"
    finally:
        sys.modules.pop("readstage", None)


def test_progress_line_redraws_in_place_on_a_terminal():
    from wai_exp.pipeline.runner import ProgressLine

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    line = ProgressLine("simulate", tty)
    line({"done": 5, "total": 10, "unit": "rows"})
    line({"done": 6, "total": 10, "unit": "rows"})  # within 0.1 s: not redrawn
    line.close()
    text = tty.getvalue()
    assert text.count("\r\x1b[2K") == 2 and "simulate  5/10 rows" in text and "6/10" not in text
    log = io.StringIO()
    quiet = ProgressLine("grade", log)
    quiet({"done": 1, "total": 10})
    quiet.close()
    assert log.getvalue() == ""  # a log gets no line for a stage that ends within seconds


def test_progress_pace_waits_for_three_items_then_gives_rate_and_time_left():
    """'1/600 rows judged 0.2/s' read like the stage's pace; it was its warm-up."""
    from wai_exp.pipeline.runner import _pace

    # before it: how long the stage has run, never a number that reads as a rate
    assert _pace(0, 8, 130.0) == "  running 2m10s; rate after the first 3 rows"
    assert _pace(1, 600, 5.0, "rows judged") == "  running 5s; rate after the first 3 rows judged"
    assert _pace(10, 600, 50.0) == "  1 per 5.0 s  ~49m10s left"
    assert _pace(300, 600, 100.0) == "  3.0/s  ~1m40s left"
    assert _pace(600, 600, 100.0) == "  6.0/s"
    assert _pace(20, None, 4.0) == "  5.0/s"
    assert _pace(10, 100000, 1.0) == "  10.0/s  ~2h46m left"


# ---- independent stages side by side (pipeline.max_parallel) ------------------------

import threading  # noqa: E402

MEET: dict[str, threading.Event] = {}


@register("t_meet", reads=())
def _meet(ctx, params, inputs):
    """Signals its own event, then waits (a bounded time) for its partner's: both can only
    see each other when they run at the same time."""
    MEET[params["me"]].set()
    met = MEET[params["partner"]].wait(timeout=3)
    return StageResult(rows=[{"met": met}], report={"met": met}, metrics={"met": float(met)})


@register("t_join", reads=())
def _join(ctx, params, inputs):
    rows = [r for res in inputs.values() for r in res.rows]
    return StageResult(rows=rows, report={"n": len(rows)})


def meet_stages():
    MEET.clear()
    MEET["a"], MEET["b"] = threading.Event(), threading.Event()
    return {
        "a": {"kind": "t_meet", "params": {"me": "a", "partner": "b"}},
        "b": {"kind": "t_meet", "params": {"me": "b", "partner": "a"}},
        "both": {"kind": "t_join", "needs": ["a", "b"]},
    }


def test_independent_stages_run_side_by_side_when_allowed(tmp_path):
    cfg = config(meet_stages())
    cfg["pipeline"]["max_parallel"] = 2
    rec = Recorder()
    out, _ = run(cfg, tmp_path, "r1", tracker=rec)
    assert out.status == "passed"
    assert out.stage("a").result.report["met"] and out.stage("b").result.report["met"]
    assert [s.name for s in out.stages] == ["a", "b", "both"]  # config order in the summary
    assert [e[1] for e in rec.events if e[0] == "stage"][-1] == "both"  # recorded after its needs


def test_stages_run_one_at_a_time_by_default(tmp_path):
    out, _ = run(config(meet_stages()), tmp_path, "r1")
    assert out.status == "passed"
    assert not out.stage("a").result.report["met"]  # b had not started while a waited


def test_a_failing_parallel_stage_fails_the_run_naming_it(tmp_path):
    stages = {
        "src": {"kind": "t_rows"},
        "boom": {"kind": "t_boom", "needs": ["src"]},
        "ok": {"kind": "t_keep", "needs": ["src"]},
    }
    cfg = config(stages)
    cfg["pipeline"]["max_parallel"] = 3
    rec = Recorder()
    out, _ = run(cfg, tmp_path, "r1", tracker=rec)
    assert out.status == "failed" and out.error.startswith("stage 'boom' failed: RuntimeError")
    assert rec.events[-1][1] == "FAILED"


def _abstain(row):
    return None  # the judge declines every row


def test_summary_of_a_grade_with_no_row_judged_says_so_not_that_it_did_not_finish(tmp_path):
    stages = {"src": {"kind": "t_rows"}, "grade": {"kind": "grade", "needs": ["src"]}}
    judge = {"kind": "callable", "target": f"{__name__}:_abstain"}
    out, _ = run(config(stages, judge=judge), tmp_path, "r1")
    text = summarize(out)
    assert out.stage("grade").status == "ran"
    assert "pass@1: not measured (grade: no binary-graded rows" in text
    assert "did not finish" not in text.split("rows kept")[0]


@pytest.mark.parametrize("cache", ["true", "false"])
def test_a_stage_that_fails_mid_run_says_how_to_resume_only_where_its_rows_are_kept(
    tmp_path, monkeypatch, cache
):
    # A simulate worker that died said "run the same command to resume" from inside the
    # engine, also with cache.enabled=false, where the next run simulates every row again.
    from wai_exp.simulate import engine

    cfg = composed("+experiment=rl_round", "simulate.budget=120", "tracking=none",
                   f"cache.enabled={cache}")  # fmt: skip
    cfg["pipeline"]["stages"] = {"simulate": {"kind": "simulate"}}
    real_land = engine.Engine._land
    count = {"n": 0}

    def failing_land(self, plan, res):
        count["n"] += 1
        if count["n"] > 50:
            raise RuntimeError("a worker went away")
        return real_land(self, plan, res)

    monkeypatch.setattr(engine.Engine, "_land", failing_land)
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "failed" and "RuntimeError: a worker went away" in out.error
    if cache == "true":
        assert "; re-run the same command to resume (" in out.error, out.error
        assert "finished rows kept in" in out.error
    else:
        assert "resume" not in out.error, out.error


def test_a_full_disk_stops_simulate_naming_it_not_as_lost_rollouts(tmp_path, monkeypatch):
    """Issue 25 item 6: every row write failing on a full cache disk read as '1882 lost'
    rollouts of the agent. Now the run stops at the first failed write, naming the disk."""
    import errno

    from wai_exp.pipeline.stages import simulate as sim_stage

    cfg = composed("+experiment=rl_round", "simulate.budget=120", "tracking=none")
    cfg["pipeline"]["stages"] = {"simulate": {"kind": "simulate"}}
    real_append = sim_stage.RowAppender.append
    count = {"n": 0}

    class FullDisk:
        """The partial file once the disk is full: every write is refused (ENOSPC)."""

        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.fh, name)

    def filling_append(self, row):
        if count["n"] == 50:
            self._fh = FullDisk(self._fh)
        count["n"] += 1
        real_append(self, row)

    monkeypatch.setattr(sim_stage.RowAppender, "append", filling_append)
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "failed" and out.exit_code == EXIT_FAILED
    entry = next((tmp_path / "outputs/.cache").glob("simulate-*/"))
    assert f"the disk is full at {entry} (ENOSPC)" in out.error
    assert "re-run the same command to resume (50 finished rows kept in" in out.error
    assert "lost" not in out.error and "dead_agent" not in out.error
    monkeypatch.setattr(sim_stage.RowAppender, "append", real_append)  # space freed
    out, log = run(cfg, tmp_path, "r2")
    assert out.status == "passed", out.error
    assert out.stage("simulate").result.metrics["rows_resumed"] == 50


def _my_gate(ctx, params, inputs):
    """A user's own gate: passes its input on and records only its verdict."""
    rows = next(iter(inputs.values())).rows
    return StageResult(rows=rows, report={"verdict": "passed"}, text="my gate: passed\n")


def test_a_users_own_gate_that_passed_is_named_in_the_summary_and_the_card(tmp_path):
    """With ``gate: {_target_: my_gate:run}`` before publish, the closing block said
    ``publish gate: not run`` and the card's header listed publish_gate, a stage that never
    ran."""
    cfg = composed("+experiment=rl_round", "simulate.budget=160", "tracking=none")
    stages = cfg["pipeline"]["stages"]
    del stages["publish_gate"]
    stages["gate"] = {"_target_": f"{__name__}:_my_gate", "needs": ["optimize"]}
    stages["publish"] = {**stages.pop("publish"), "needs": ["gate"]}
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "passed", out.error
    mine = "gate (`tests.pipeline.test_runner:_my_gate`, a stage of your own)"
    assert out.gate == "passed"
    assert (
        f"publish gate: passed, given by stage {mine}; not recorded by the gate: band, row "
        "count, graded count"
    ) in summarize(out).splitlines()
    card = (tmp_path / "outputs/r1/publish/README.md").read_text()
    assert f"optimize (selection mode `rl`), {mine}, publish." in card
    assert "publish_gate" not in card
    assert f"graded count; given by stage {mine}." in card


def _my_refusing_gate(ctx, params, inputs):
    """A user's own gate that refuses by its verdict, without raising."""
    rows = next(iter(inputs.values())).rows
    return StageResult(rows=rows, report={"verdict": "refused", "reason": "too few rows"})


def test_a_users_own_gate_that_refused_by_its_verdict_is_named_not_said_not_run(tmp_path):
    """A gate of the user's own returned ``{"verdict": "refused"}``: publish published
    nothing, and the closing block said ``publish gate: not run``."""
    cfg = composed("+experiment=rl_round", "simulate.budget=160", "tracking=none")
    stages = cfg["pipeline"]["stages"]
    del stages["publish_gate"]
    stages["gate"] = {"_target_": f"{__name__}:_my_refusing_gate", "needs": ["optimize"]}
    stages["publish"] = {**stages.pop("publish"), "needs": ["gate"]}
    out, _ = run(cfg, tmp_path, "r1")
    assert out.gate == "refused"
    assert (
        "publish gate: REFUSED - stage gate (a stage of your own) returned verdict 'refused': "
        "too few rows"
    ) in summarize(out).splitlines()


def test_next_rounds_kept_rows_are_counted_in_the_closing_block(tmp_path):
    """The closing block said ``rows kept: not measured (no selection stage in this
    pipeline)`` one line after ``next_round: kept 49 tasks``: what next_round wrote, one row
    per kept task, is counted and said in that unit."""
    cfg = composed("+experiment=next_round", "simulate.budget=96", "tracking=none")
    out, _ = run(cfg, tmp_path, "r1")
    assert out.status == "passed", out.error
    written = read_rows(tmp_path / "outputs/r1/next_round/rows.jsonl")
    m = out.stage("next_round").result.metrics
    assert len(written) == m["kept"] + m["unknown"] > 0
    line = next(x for x in summarize(out).splitlines() if x.startswith("rows kept:"))
    assert line == (
        f"rows kept: {len(written)} of 96 (next_round: one row per task it keeps, the next "
        "round's prompt set)"
    )
