"""wai-exp compare: finding the graded rows, the exit status, the printed block."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from wai_exp.commands.compare import EXIT_BAD_INPUT, EXIT_NOT_OK, EXIT_OK, load_arm, main
from wai_exp.rows.jsonl import write_rows


@pytest.fixture(autouse=True)
def _own_store(tmp_path: Path, monkeypatch, migrated_db: Path) -> None:
    """compare logs its report to ./mlflow.db by default: keep that inside the test's folder.
    The store there is a copy of an empty migrated one, so no test waits on MLflow's schema
    creation."""
    shutil.copyfile(migrated_db, tmp_path / "mlflow.db")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def arm(p: float, seed: int, marker: float = 0.5, policy: str = "a") -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {
            "scenario_id": f"t{t}",
            "reward": float(rng.random() < p),
            "final_text": "done",
            "policy_version": policy,
            "markers": {"grounded": float(rng.random() < marker)},
        }
        for t in range(80)
        for _ in range(4)
    ]


def run_dir(root: Path, name: str, rows: list[dict], stage: str = "grade") -> Path:
    d = root / name
    write_rows(d / "simulate" / "rows.jsonl", rows)  # ungraded stage: never chosen
    write_rows(d / stage / "rows.jsonl", rows)
    return d


def test_run_dirs_compare_and_exit_zero_when_ok(tmp_path: Path, capsys) -> None:
    a = run_dir(tmp_path, "a", arm(0.3, 1, policy="a"))
    b = run_dir(tmp_path, "b", arm(0.7, 2, policy="b"))
    assert main([str(a), str(b)]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"before: {a / 'grade' / 'rows.jsonl'}" in out
    assert "pass_at_1" in out and "grounded" in out
    # 0.3 -> 0.7 on one eval run a side: a move, but not yet a replicated one
    assert out.splitlines()[2].startswith("INCONCLUSIVE (1 eval run a side: rerun to confirm)")


def test_failed_guard_exits_one(tmp_path: Path, capsys) -> None:
    a = run_dir(tmp_path, "a", arm(0.3, 1, marker=0.9, policy="a"))
    b = run_dir(tmp_path, "b", arm(0.7, 2, marker=0.3, policy="b"), stage="evaluate")
    assert main([str(a), str(b), "--must-not-regress", "marker:grounded"]) == EXIT_NOT_OK
    assert capsys.readouterr().out.splitlines()[2].startswith("FAIL")


def test_json_output_is_the_report(tmp_path: Path, capsys) -> None:
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    write_rows(a, arm(0.5, 3))
    write_rows(b, arm(0.5, 4))
    code = main([str(a), str(b), "--json", "--by", "grounded"])
    report = json.loads(capsys.readouterr().out)
    assert code == (EXIT_OK if report["ok"] else EXIT_NOT_OK)
    assert report["n_paired_tasks"] == 80 and set(report["groups"]) == {"0.0", "1.0"}
    assert report["sources"] == {"before": str(a), "after": str(b)}


def test_run_dir_with_two_graded_stages_needs_stage(tmp_path: Path, capsys) -> None:
    d = run_dir(tmp_path, "r", arm(0.5, 5), stage="grade_before")
    write_rows(d / "grade_after" / "rows.jsonl", arm(0.6, 6))
    assert main([str(d), str(d)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "grade_after, grade_before" in err and "--stage" in err
    rows, src = load_arm(str(d), stage="grade_after")
    assert src.endswith("grade_after/rows.jsonl") and len(rows) == 320
    # REF:STAGE picks a stage per side, so one run's two arms compare directly
    assert main([f"{d}:grade_before", f"{d}:grade_after"]) in (EXIT_OK, EXIT_NOT_OK)
    out = capsys.readouterr().out
    assert "grade_before/rows.jsonl" in out and "grade_after/rows.jsonl" in out


def test_bad_inputs_exit_two_with_the_fix(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    a = run_dir(tmp_path, "a", arm(0.5, 7))
    assert main(["no-such-run", str(a)]) == EXIT_BAD_INPUT
    assert "--tracking-uri" in capsys.readouterr().err
    assert main([str(a), str(a), "--run-std-from", str(tmp_path / "missing")]) == EXIT_BAD_INPUT
    assert "eval_variance" in capsys.readouterr().err
    assert main([str(a), str(a), "--target", "nope"]) == EXIT_BAD_INPUT
    assert main(["--help"]) == 0
    assert "grade*/evaluate*" in capsys.readouterr().out


def test_run_std_from_an_eval_variance_report(tmp_path: Path, capsys) -> None:
    a = run_dir(tmp_path, "a", arm(0.5, 8, policy="a"))
    b = run_dir(tmp_path, "b", arm(0.55, 9, policy="b"))
    ev = tmp_path / "ev"
    ev.mkdir()
    (ev / "report.json").write_text(
        json.dumps({"run_std_by_metric": {"pass_at_1": 0.05}, "n_runs": 3})
    )
    main([str(a), str(b), "--run-std-from", str(ev), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["run_std"] == 0.05 and report["run_std_runs"] == 3
    assert report["metrics"]["grounded"]["noise_note"] == "no_replicate_floor"
    assert report["noise_band"] == pytest.approx(4.302653 * 0.05 * 2**0.5, rel=1e-5)


@pytest.mark.slow
def test_mlflow_run_ids(tmp_path: Path, capsys) -> None:
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("t", artifact_location=str(tmp_path / "artifacts"))
    ids = []
    for name, rows in (("a", arm(0.3, 10, policy="a")), ("b", arm(0.7, 11, policy="b"))):
        path = tmp_path / name / "rows.jsonl"
        write_rows(path, rows)
        run = client.create_run(exp)
        client.log_artifact(run.info.run_id, str(path), "grade")
        client.log_artifact(run.info.run_id, str(path), "simulate")
        ids.append(run.info.run_id)
    assert main([*ids, "--tracking-uri", uri]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"mlflow run {ids[0]}: grade/rows.jsonl" in out
    assert main([f"{ids[0]}:simulate", f"{ids[1]}:grade", "--tracking-uri", uri]) == EXIT_OK
    assert f"mlflow run {ids[0]}: simulate/rows.jsonl" in capsys.readouterr().out
    assert main([ids[0], "deadbeef", "--tracking-uri", uri]) == EXIT_BAD_INPUT
    assert "not a run in" in capsys.readouterr().err


@pytest.mark.slow
def test_mlflow_run_ids_read_the_gzipped_rows_the_tracker_logs(tmp_path: Path, capsys) -> None:
    """The tracker logs ``<stage>/rows.jsonl.gz``; a run recorded before that holds
    ``rows.jsonl``. Both are read by run id."""
    from mlflow import MlflowClient

    from wai_exp.tracking.mlflow_tracker import ROWS_ARTIFACT, gzip_file

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("t", artifact_location=str(tmp_path / "artifacts"))
    ids = []
    for name, rows, gz in (("a", arm(0.3, 10, policy="a"), True), ("b", arm(0.7, 11, policy="b"), False)):  # fmt: skip
        path = tmp_path / name / "rows.jsonl"
        write_rows(path, rows)
        if gz:
            gzip_file(path, path.with_name(ROWS_ARTIFACT))
            path = path.with_name(ROWS_ARTIFACT)
        run = client.create_run(exp)
        client.log_artifact(run.info.run_id, str(path), "grade")
        ids.append(run.info.run_id)
    assert main([*ids, "--tracking-uri", uri, "--json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["n_paired_tasks"] == 80
    assert report["sources"] == {
        "before": f"mlflow run {ids[0]}: grade/rows.jsonl.gz",
        "after": f"mlflow run {ids[1]}: grade/rows.jsonl",
    }


def test_paired_tasks_that_ask_different_things_are_not_comparable(tmp_path: Path, capsys) -> None:
    # Hand-written rows: one task id, two different asks, on 26 of 29 tasks.
    def lines(offset: int, p: float, seed: int) -> str:
        rng = np.random.default_rng(seed)
        out = []
        for t in range(29):
            ask = f"Where is order ORD-{t + (offset if t < 26 else 0)}?"
            for _ in range(4):
                out.append(
                    json.dumps(
                        {
                            "scenario_id": f"sit-{t}",
                            "prompt": ask,
                            "reward": float(rng.random() < p),
                        }
                    )
                )
        return "\n".join(out) + "\n"

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(lines(0, 0.3, 1))
    b.write_text(lines(500, 0.8, 2))
    assert main([str(a), str(b)]) == EXIT_NOT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[2].startswith("NOT COMPARABLE (prompts")
    assert "26 of 29 paired tasks carry different prompts" in out


def test_compare_logs_its_report_as_a_run_linked_to_both_arms(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    import tempfile

    from mlflow import MlflowClient

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    ids = []
    for name, rows in (("a", arm(0.3, 10, policy="a")), ("b", arm(0.7, 11, policy="b"))):
        path = tmp_path / name / "rows.jsonl"
        write_rows(path, rows)
        run = client.create_run(exp, run_name=f"eval agent.skill={name}")
        client.log_artifact(run.info.run_id, str(path), "grade")
        ids.append(run.info.run_id)
    assert main([*ids, "--tracking-uri", uri]) == EXIT_OK
    out = capsys.readouterr().out
    [cmp] = client.search_runs([client.get_experiment_by_name("compare").experiment_id])
    assert f"MLflow run: {cmp.info.run_id}" in out
    assert cmp.info.run_name == "compare eval agent.skill=a → eval agent.skill=b"
    tags = cmp.data.tags
    assert (
        tags["wai.compare.before_run_id"] == ids[0] and tags["wai.compare.after_run_id"] == ids[1]
    )
    assert tags["mlflow.note.content"].startswith(f"### {tags['wai.compare.verdict']}: pass_at_1 +")
    assert f"runs/{ids[0]})" in tags["mlflow.note.content"]  # a link to each arm
    m = cmp.data.metrics
    assert m["delta_ci_lo"] < m["delta"] < m["delta_ci_hi"] and m["after"] > m["before"]
    arts = {a.path for a in client.list_artifacts(cmp.info.run_id)}
    assert {"report.json", "report.txt", "delta.png"} <= arts
    assert tags.get("mlflow.source.git.commit") != "unknown"
    assert list(scratch.iterdir()) == []  # the rendered plot is removed once logged


def test_compare_records_in_this_process_when_the_writer_cannot_start(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """The writer process records the run (MLflow imported on another core meanwhile);
    when it cannot start, the same run is recorded by the command itself."""
    from mlflow import MlflowClient

    import wai_exp.tracking.background as background

    def refuse() -> None:
        raise OSError("no processes left")

    monkeypatch.setattr(background, "start_writer", refuse)
    a, b = run_dir(tmp_path, "a", arm(0.3, 1)), run_dir(tmp_path, "b", arm(0.7, 2))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main([str(a), str(b), "--tracking-uri", uri]) in (EXIT_OK, EXIT_NOT_OK)
    assert "MLflow run:" in capsys.readouterr().out
    client = MlflowClient(tracking_uri=uri)
    [cmp] = client.search_runs([client.get_experiment_by_name("compare").experiment_id])
    assert cmp.info.status == "FINISHED"
    assert {"report.json", "report.txt", "delta.png"} <= {
        x.path for x in client.list_artifacts(cmp.info.run_id)
    }


def test_compare_records_through_the_writer_process_not_its_own(tmp_path: Path) -> None:
    """MLflow is imported by the tracking writer (on another core, while the answer prints
    and the delta plot renders), never by the command: the recording costs it no import."""
    import subprocess
    import sys

    from mlflow import MlflowClient

    a, b = run_dir(tmp_path, "a", arm(0.3, 1)), run_dir(tmp_path, "b", arm(0.7, 2))
    code = (
        "import sys\nfrom wai_exp.commands.compare import main\n"
        f"main([{str(a)!r}, {str(b)!r}])\nprint('mlflow' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.stdout.splitlines()[-1] == "False", out.stdout + out.stderr
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    [cmp] = client.search_runs([client.get_experiment_by_name("compare").experiment_id])
    assert cmp.info.status == "FINISHED"


def test_a_writer_that_dies_leaves_the_recording_to_the_command(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    from mlflow import MlflowClient

    import wai_exp.tracking.background as background

    real = background.record_compare_in_writer

    def killed_first(record):
        proc = background._shared_writer().proc
        proc.kill()  # the OOM killer, say, while MLflow is imported
        proc.wait()
        return real(record)

    monkeypatch.setattr(background, "record_compare_in_writer", killed_first)
    a, b = run_dir(tmp_path, "a", arm(0.3, 1)), run_dir(tmp_path, "b", arm(0.7, 2))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main([str(a), str(b), "--tracking-uri", uri]) in (EXIT_OK, EXIT_NOT_OK)
    assert "not logged to MLflow" not in capsys.readouterr().err
    client = MlflowClient(tracking_uri=uri)
    [cmp] = client.search_runs([client.get_experiment_by_name("compare").experiment_id])
    assert cmp.info.status == "FINISHED"


def test_no_record_leaves_mlflow_alone(tmp_path: Path, capsys, monkeypatch) -> None:
    bare = tmp_path / "bare"  # a folder with no store in it (the test's own holds one)
    bare.mkdir()
    monkeypatch.chdir(bare)
    a = run_dir(tmp_path, "a", arm(0.3, 1))
    b = run_dir(tmp_path, "b", arm(0.6, 2))
    assert main([str(a), str(b), "--no-record"]) in (EXIT_OK, EXIT_NOT_OK)
    assert not (bare / "mlflow.db").exists()


def test_a_sweep_parent_is_an_arm_only_when_its_jobs_are_replicates(tmp_path: Path, capsys) -> None:
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())

    def parent(keys: str, ps: list[float], run_std: float | None) -> str:
        par = client.create_run(exp, tags={"wai.sweep": "parent", "wai.sweep.keys": keys})
        for i, p in enumerate(ps):
            path = tmp_path / f"{par.info.run_id}-{i}" / "rows.jsonl"
            write_rows(path, arm(p, 20 + i))
            kid = client.create_run(exp, tags={"mlflow.parentRunId": par.info.run_id})
            client.log_artifact(kid.info.run_id, str(path), "grade")
            client.set_terminated(kid.info.run_id, "FINISHED")
        if run_std is not None:
            client.log_metric(par.info.run_id, "run_std", run_std)
        return par.info.run_id

    seeds = parent("seed", [0.5, 0.5], 0.02)
    skills = parent("agent.skill", [0.3, 0.8], None)
    single = run_dir(tmp_path, "one", arm(0.5, 3))
    assert main([seeds, str(single), "--tracking-uri", uri, "--no-record"]) in (
        EXIT_OK,
        EXIT_NOT_OK,
    )
    assert "2 replicate runs pooled" in capsys.readouterr().out
    assert main([skills, str(single), "--tracking-uri", uri]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "sweeps agent.skill" in err and "compare one child run instead" in err
    code = main([str(single), str(single), "--run-std-from", seeds, "--tracking-uri", uri,
                 "--json", "--no-record"])  # fmt: skip
    assert code in (EXIT_OK, EXIT_NOT_OK)
    report = json.loads(capsys.readouterr().out)
    assert (
        report["metrics"]["pass_at_1"]["floor"] is not None
        or report["metrics"]["pass_at_1"]["noise_band"] is not None
    )
    # Seeds draw different situations: that spread is not a same-task re-run floor.
    assert any(
        "differ by seed" in w and "eval_variance" in w and "0.020" in w for w in report["warnings"]
    ), report["warnings"]
    main([str(single), str(single), "--run-std-from", seeds, "--tracking-uri", uri,
          "--no-record"])  # fmt: skip
    assert "holds task-to-task sampling" in capsys.readouterr().out
    replicates = parent("replicate", [0.5, 0.5], 0.02)
    main([str(single), str(single), "--run-std-from", replicates, "--tracking-uri", uri,
          "--json", "--no-record"])  # fmt: skip
    assert not any("differ by" in w for w in json.loads(capsys.readouterr().out)["warnings"])
    assert (
        main([str(single), str(single), "--run-std-from", skills, "--tracking-uri", uri])
        == EXIT_BAD_INPUT
    )
    assert "measured no re-run spread" in capsys.readouterr().err


def test_a_floor_pooled_over_several_configurations_keeps_its_degrees_of_freedom(
    tmp_path: Path, capsys
) -> None:
    """A sweep over two skills at two seeds each pools its run_std over 2 configurations:
    4 runs, df 2 (its parent says the band at df 2). --run-std-from read it as 4 re-runs of
    one configuration, df 3: a band of 0.018 where the parent's was 0.024."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    par = client.create_run(exp, tags={"wai.sweep": "parent", "wai.sweep.keys": "agent.skill,seed"})
    client.log_metric(par.info.run_id, "run_std", 0.02)
    info = tmp_path / "sweep" / "replicates.json"
    info.parent.mkdir()
    info.write_text(json.dumps({"metric": "pass_at_1", "n_runs": 4, "df": 2, "n_groups": 2}))
    client.log_artifact(par.info.run_id, str(info), "sweep")
    single = run_dir(tmp_path, "one", arm(0.5, 3))
    main([str(single), str(single), "--run-std-from", par.info.run_id, "--tracking-uri", uri,
          "--json", "--no-record"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["metrics"]["pass_at_1"]["df"] == 2
    assert any("2 configurations" in w and "df 2" in w for w in report["warnings"]), report


def test_a_sweep_parent_whose_seeds_drew_their_own_tasks_says_so(tmp_path: Path, capsys) -> None:
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())

    def parent(keys: str, n_kids: int) -> str:
        par = client.create_run(exp, tags={"wai.sweep": "parent", "wai.sweep.keys": keys})
        for i in range(n_kids):  # each job's tasks are its own: s0t.., s1t..
            rows = [{**r, "scenario_id": f"s{i}{r['scenario_id']}"} for r in arm(0.5, 30 + i)]
            path = tmp_path / f"{par.info.run_id}-{i}" / "rows.jsonl"
            write_rows(path, rows)
            kid = client.create_run(exp, tags={"mlflow.parentRunId": par.info.run_id})
            client.log_artifact(kid.info.run_id, str(path), "grade")
            client.set_terminated(kid.info.run_id, "FINISHED")
        return par.info.run_id

    single = run_dir(tmp_path, "one", arm(0.5, 3))
    for keys, n_kids, said in (
        ("seed", 3, "3 seeds, each on its own tasks, pooled"),
        ("replicate", 2, "2 replicate runs, each on its own tasks, pooled"),
        ("seed", 1, "1 replicate run pooled"),
    ):
        ref = parent(keys, n_kids)
        main([ref, str(single), "--tracking-uri", uri, "--no-record"])
        out = capsys.readouterr().out
        assert out.splitlines()[0] == f"before: mlflow sweep {ref}: {said}", out


def test_the_advice_recommends_the_count_the_verdicts_test_reaches_power_at(
    tmp_path: Path,
) -> None:
    """A 20-task holdout: the closed form says it detects +0.213 and that the observed delta
    needs 15 tasks; the verdict reads its sd off the same tasks (t tails), where those take
    23 and 17. The console script recommends the t counts and names both."""
    import subprocess
    import sys

    def small(p: float, seed: int, policy: str) -> list[dict]:
        rng = np.random.default_rng(seed)
        return [
            {"scenario_id": f"t{t}", "prompt": f"ask {t}", "reward": float(rng.random() < p),
             "final_text": "done", "policy_version": policy}
            for t in range(20)
            for _ in range(4)
        ]  # fmt: skip

    write_rows(tmp_path / "a.jsonl", small(0.4, 1, "a"))
    write_rows(tmp_path / "b.jsonl", small(0.55, 2, "b"))
    wai = str(Path(sys.executable).parent / "wai-exp")
    out = subprocess.run(
        [wai, "compare", "a.jsonl", "b.jsonl", "--no-record"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    line = next(x for x in out.splitlines() if x.startswith("sizing:"))
    assert "20 paired tasks with 4 rows per task detect +0.213" in line
    assert "takes 23 tasks (n_tasks_t; the closed form's n_tasks is 20)" in line
    assert "the observed delta needs 17 tasks for 80% power under the verdict's test" in line
    assert "the closed form's n_tasks is 15" in line
    rep = json.loads(
        subprocess.run(
            [wai, "compare", "a.jsonl", "b.jsonl", "--no-record", "--json"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, check=True,
        ).stdout
    )  # fmt: skip
    s = rep["sizing"]
    assert (s["n_tasks_t"], s["n_tasks_for_observed"], s["n_tasks_for_observed_t"]) == (23, 15, 17)


def test_bad_input_never_starts_the_tracking_writer(tmp_path: Path, capsys, monkeypatch) -> None:
    """Every input is read and checked (the arms, the floor, the report's own checks)
    before the writer starts: it would import MLflow for seconds after the command ended."""
    import wai_exp.tracking.background as background

    started: list[bool] = []
    monkeypatch.setattr(background, "start_writer", lambda: started.append(True))
    a = run_dir(tmp_path, "a", arm(0.5, 7))
    for bad in (
        ["no-such-run", str(a)],
        [str(a), str(a), "--run-std-from", str(tmp_path / "missing")],
        [str(a), str(a), "--target", "marker:nope"],
        [str(a), str(a), "--tracking-uri", "file:./mlruns"],
    ):
        assert main(bad) == EXIT_BAD_INPUT, bad
        assert "wai-exp compare: " in capsys.readouterr().err
    assert started == []


def test_a_store_error_mid_record_ends_the_run_failed_not_running(
    tmp_path: Path, monkeypatch
) -> None:
    from mlflow import MlflowClient

    from wai_exp.score.stats.delta import delta_report
    from wai_exp.tracking.compare_record import record_compare

    report = delta_report(arm(0.3, 1), arm(0.7, 2), n_boot=200)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(MlflowClient, "log_text", full)
    with pytest.raises(OSError):
        record_compare(report, "text", before="a", after="b", sources=("a", "b"), uri=uri)
    client = MlflowClient(tracking_uri=uri)
    [run] = client.search_runs([client.get_experiment_by_name("compare").experiment_id])
    assert run.info.status == "FAILED"
    assert "No space left on device" in run.data.tags["wai.error"]


def test_a_compare_run_whose_processes_died_is_marked_killed_by_the_next(tmp_path: Path) -> None:
    """Command and writer both killed mid-record (a group SIGKILL): the next compare into
    the store ends the half-run KILLED, saying why (orphans.reap_orphans)."""
    import subprocess
    import sys

    from mlflow import MlflowClient

    from wai_exp.score.stats.delta import delta_report
    from wai_exp.tracking.compare_record import EXPERIMENT, record_compare
    from wai_exp.tracking.orphans import owner_tags

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = {**owner_tags(), "wai.pid": gone.stdout.strip(), "wai.writer_pid": gone.stdout.strip()}
    dead.pop("wai.pid_start", None)
    report = delta_report(arm(0.3, 1), arm(0.7, 2), n_boot=200)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = record_compare(report, "t", before="a", after="b", sources=("a", "b"), uri=uri)
    client = MlflowClient(tracking_uri=uri)
    # made as record_compare makes it: its tags, the arms' among them, all at once
    tags = {**dead, "wai.compare.before": "a", "wai.compare.after": "b"}
    half = client.create_run(first["experiment_id"], tags=tags, run_name="compare a → b")
    record_compare(report, "t", before="a", after="b", sources=("a", "b"), uri=uri)
    run = client.get_run(half.info.run_id)
    assert client.get_experiment_by_name(EXPERIMENT).experiment_id == first["experiment_id"]
    assert run.info.status == "KILLED"
    why = run.data.tags["wai.error"]
    assert f"pid {gone.stdout.strip()}" in why
    # a comparison has no rows to resume from: it is recorded again
    assert "Run the same `wai-exp compare` command again" in why and "resume" not in why, why


def test_the_fixes_printed_are_the_ones_a_cli_user_types(tmp_path: Path, capsys) -> None:
    """A move on one run a side names re-runs and a floor: as overrides and flags, not as
    the Python API's simulate(...) / eval_variance(...)."""
    a = run_dir(tmp_path, "a", arm(0.3, 1, policy="a"))
    b = run_dir(tmp_path, "b", arm(0.7, 2, policy="b"))
    main([str(a), str(b), "--no-record"])
    out = capsys.readouterr().out
    assert "simulate.runs=3" in out and "--run-std-from <eval_variance report.json>" in out
    for python in ("simulate(tasks=", "eval_variance(", "data.report()", "balance_rollouts="):
        assert python not in out
    # rows with no run report behind them: whether they lost rollouts is not known
    assert "before: lost rollouts not known (rows from" in out


def test_a_failed_stage_is_refused_not_compared(tmp_path: Path, capsys) -> None:
    """A grade stage that failed wrote the rows it got to and a report saying pass@1 was not
    measured: compare refuses it (exit 2, naming why) rather than print a delta over them,
    whether the run dir, the stage dir or its rows.jsonl is named."""
    good = run_dir(tmp_path, "good", arm(0.5, 3))
    bad = run_dir(tmp_path, "bad", arm(0.5, 4))
    why = "grade failed: the judge could not score 64 of 80 rows"
    (bad / "grade" / "report.json").write_text(
        json.dumps({"pass_at_1": None, "headline_not_measured": why})
    )
    for ref in (bad, bad / "grade", bad / "grade" / "rows.jsonl"):
        assert main([str(good), str(ref), "--no-record"]) == EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert f"pass@1 was not measured ({why})" in err and "re-run the same command" in err
    assert main([str(good), str(good), "--no-record"]) == EXIT_OK


def test_run_std_from_a_failed_eval_variance_report_is_refused(tmp_path: Path, capsys) -> None:
    a = run_dir(tmp_path, "a", arm(0.5, 8, policy="a"))
    ev = tmp_path / "ev"
    ev.mkdir()
    (ev / "report.json").write_text(
        json.dumps(
            {
                "run_std_by_metric": {"pass_at_1": 0.0},
                "n_runs": 3,
                "headline_not_measured": "eval_variance failed: dead_agent",
            }
        )
    )
    assert main([str(a), str(a), "--run-std-from", str(ev), "--no-record"]) == EXIT_BAD_INPUT
    assert "not measured (eval_variance failed: dead_agent)" in capsys.readouterr().err


def test_the_rerun_advice_for_a_sweep_parent_names_a_child_or_the_sweep_not_a_before_run(
    tmp_path: Path, capsys
) -> None:
    """Two seed sweeps' parents moved 0.30 -> 0.84 on one eval run a side (seen through the
    console: ``-m +experiment=eval agent.skill=0.5|0.95 seed=0,1 simulate.budget=40``), and
    the advice said "simulate.tasks=<before run>/simulate/rows.jsonl simulate.runs=3": a
    sweep parent is several runs, each seed on its own tasks, so there is no before run."""
    uri, parent = _sweep_store(tmp_path)
    swept = "+experiment=eval agent.skill={} seed=0,1 simulate.runs=1"
    before = parent(0.3, swept.format(0.3), (0, 1))
    after = parent(0.85, swept.format(0.85), (0, 1))
    main([before, after, "--tracking-uri", uri, "--no-record"])
    advice = next(x for x in capsys.readouterr().out.splitlines() if "Evaluate each arm" in x)
    assert "<before run>" not in advice
    child = tmp_path / "sweep-0.3" / "0"
    assert (
        f"both arms on the tasks of one child of the before sweep, seed=0: simulate.tasks="
        f"{child}/simulate/rows.jsonl simulate.runs=3; a sweep parent is several runs with no "
        "one task set; or add simulate.runs=3 to each sweep: "
        "wai-exp -m +experiment=eval agent.skill=0.3 seed=0,1 simulate.runs=3; "
        "wai-exp -m +experiment=eval agent.skill=0.85 seed=0,1 simulate.runs=3)"
    ) in advice
    # A plain run before a sweep keeps its own tasks to pin to; the sweep is named.
    own = [{**r, "scenario_id": f"s0{r['scenario_id']}"} for r in arm(0.3, 3)]
    single = run_dir(tmp_path, "one", own)
    main([str(single), after, "--tracking-uri", uri, "--no-record"])
    advice = next(x for x in capsys.readouterr().out.splitlines() if "Evaluate each arm" in x)
    assert (
        "(simulate.tasks=<before run>/simulate/rows.jsonl simulate.runs=3, the after arm as "
        "one run of its sweep's configuration; or add simulate.runs=3 to the after sweep: "
        "wai-exp -m +experiment=eval agent.skill=0.85 seed=0,1 simulate.runs=3)"
    ) in advice


def _sweep_store(tmp_path: Path):
    """An MLflow store, and a maker of seed-sweep parents in it: ``parent(skill, overrides,
    seeds)`` logs one child a seed, each on its own tasks (s0t.., s1t..), and returns the
    parent's id."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())

    def parent(skill: float, overrides: str, seeds: tuple[int, ...]) -> str:
        tags = {"wai.sweep": "parent", "wai.sweep.keys": "seed", "wai.overrides": overrides}
        par = client.create_run(exp, tags=tags)
        for i in seeds:
            rows = [{**r, "scenario_id": f"s{i}{r['scenario_id']}"} for r in arm(skill, 40 + i)]
            folder = tmp_path / f"sweep-{skill}" / str(i)
            write_rows(folder / "grade" / "rows.jsonl", rows)
            kid = client.create_run(
                exp,
                tags={"mlflow.parentRunId": par.info.run_id, "wai.run_dir": str(folder)},
                run_name=f"seed={i} · eval agent.skill={skill}",
            )
            client.log_artifact(kid.info.run_id, str(folder / "grade" / "rows.jsonl"), "grade")
            client.set_terminated(kid.info.run_id, "FINISHED")
        return par.info.run_id

    return uri, parent


def test_the_pinning_advice_of_a_not_comparable_sweep_pair_names_a_child_not_a_before_run(
    tmp_path: Path, capsys
) -> None:
    """Two seed sweeps on different seeds drew different tasks (seen through the console:
    ``-m +experiment=eval agent.skill=0.5 seed=0,1`` against ``agent.skill=0.95 seed=2,3``):
    NOT COMPARABLE said "Pin the after arm to the before run's tasks
    (simulate.tasks=<before run>/simulate/rows.jsonl)", and a sweep parent has no one run."""
    uri, parent = _sweep_store(tmp_path)
    before = parent(0.3, "+experiment=eval agent.skill=0.3 seed=0,1", (0, 1))
    after = parent(0.85, "+experiment=eval agent.skill=0.85 seed=2,3", (2, 3))
    main([before, after, "--tracking-uri", uri, "--no-record"])
    out = capsys.readouterr().out
    cause = next(x for x in out.splitlines() if x.startswith("NOT COMPARABLE: situations"))
    assert "<before run>" not in cause and "the before run's tasks" not in cause
    child = tmp_path / "sweep-0.3" / "0"
    assert (
        "Pin the after arm to one task set (both arms on the tasks of one child of the before "
        f"sweep, seed=0: simulate.tasks={child}/simulate/rows.jsonl; a sweep parent is several "
        "runs with no one task set) or compare per tier with dataset_report"
    ) in cause
    main([before, after, "--tracking-uri", uri, "--no-record", "--json"])
    [cause] = json.loads(capsys.readouterr().out)["not_comparable"]
    assert f"simulate.tasks={child}/simulate/rows.jsonl;" in cause
    # A plain run before a sweep is one task set: its advice names it as before.
    single = run_dir(tmp_path, "one", arm(0.3, 3))
    main([str(single), after, "--tracking-uri", uri, "--no-record"])
    out = capsys.readouterr().out
    assert "Pin the after arm to the before run's tasks (simulate.tasks=<before run>/" in out
