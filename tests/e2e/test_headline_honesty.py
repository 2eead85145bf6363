"""The closing summary and the MLflow run say what a run measured: a failed grading stage
reports no pass@1, and the warnings that change what the headline means reach the terminal."""

from __future__ import annotations

import json
import re
import sqlite3
import uuid

import pytest

from tests.e2e.test_cli import run_dirs, wai
from tests.e2e.test_launchers import postgres_server  # noqa: F401 - a fixture, found by name

PCT_JUDGE = """
import zlib

def pct(row):
    # rates 0-100, outside the reward contract: a 100 is no verdict, a 0 reads as a fail
    return 0 if zlib.crc32(row["rollout_id"].encode()) % 5 == 0 else 100
"""

FLAKY_JUDGE = """
import zlib

def flaky(row):
    h = zlib.crc32(row["rollout_id"].encode())
    if h % 6 == 0:  # a judge service that fails now and then, under max_error_share
        raise ConnectionError("judge service unavailable")
    return float(h % 5 != 0)
"""

QUICK_MLFLOW = ("tracking.plots=false", "tracking.traces=0", "tracking.log_rows=false",
                "tracking.background=false")  # fmt: skip


def test_a_failed_grade_reports_pass_at_1_not_measured_and_logs_no_rate(tmp_path):
    (tmp_path / "userjudge.py").write_text(PCT_JUDGE)
    res = wai(tmp_path, "+experiment=eval", "judge=callable", "judge.target=userjudge:pct",
              "simulate.budget=80", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}",
              *QUICK_MLFLOW)  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert (
        "pass@1: not measured (evaluate failed: the judge could not score 64 of 80 rows, more "
        "than judge.max_error_share=0.25)\n" in out
    )
    # Before: "pass@1: 0.000 95% CI [...]" from the only rows it read (its 0 answers).
    assert not re.search(r"pass@1[^:\n]*: \d", out) and "floor:" not in out
    with sqlite3.connect(tmp_path / "m.db") as db:
        [(run_id, status)] = db.execute("select run_uuid, status from runs").fetchall()
        metrics = dict(
            db.execute("select key, value from latest_metrics where run_uuid=?", (run_id,))
        )
        [(note,)] = db.execute(
            "select value from tags where key='mlflow.note.content' and run_uuid=?", (run_id,)
        ).fetchall()
    assert status == "FAILED"
    rates = ("pass_at", "pass_pow", "floor", "headroom")
    assert not [k for k in metrics if k.split(".")[-1].startswith(rates)], metrics
    assert metrics["evaluate.unjudged"] == 64.0  # what it did count stays
    assert "### pass@1 not measured (evaluate failed: the judge could not score 64" in note
    assert "### pass@1 0" not in note
    [run] = run_dirs(tmp_path)
    assert "pass_at_1" not in json.loads((run / "evaluate" / "metrics.json").read_text())
    report = (run / "evaluate" / "report.txt").read_text()
    assert report.startswith("pass@1: not measured (evaluate failed: the judge could not score")
    # report.json keeps the keys, as null, beside the reason: a script reads no 0.000 there
    saved = json.loads((run / "evaluate" / "report.json").read_text())
    nulls = ("pass_at_1", "ci95", "pass_pow_k", "pass_at_k", "pass_at_k_ci95", "floor",
             "headroom", "per_task")  # fmt: skip
    assert {k: saved[k] for k in nulls} == dict.fromkeys(nulls), saved
    assert saved["headline_not_measured"].startswith("evaluate failed: the judge could not")
    assert saved["unjudged"] == 64 and saved["n_rows"] == 16  # counts of what it read stay
    # and compare refuses the stage instead of printing a delta over the rows it got to
    res = wai(tmp_path, "compare", str(run), str(run), "--no-record")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "that stage failed, so its pass@1 was not measured (evaluate failed:" in res.stderr
    assert "pass_at_1 0.000" not in res.stdout


@pytest.mark.slow
def test_a_failed_grade_draws_no_plot_on_a_tracking_server(tmp_path, postgres_server):  # noqa: F811
    """A team server on PostgreSQL gets the failed stage's report and rows, and no plot: its
    histogram drew a mean per-task rate of 0.000 over the judge's 0 answers, the number the
    run says it did not measure."""
    from mlflow import MlflowClient

    (tmp_path / "userjudge.py").write_text(PCT_JUDGE)
    experiment = f"failed-grade-{uuid.uuid4().hex[:8]}"
    res = wai(tmp_path, "+experiment=eval", "judge=callable", "judge.target=userjudge:pct",
              "simulate.budget=80", "tracking=mlflow_server", f"tracking.uri={postgres_server}",
              f"tracking.experiment={experiment}", "tracking.traces=0")  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "pass@1: not measured (evaluate failed: the judge could not score 64 of 80" in res.stdout
    client = MlflowClient(postgres_server)
    exp = client.get_experiment_by_name(experiment)
    [run] = client.search_runs([exp.experiment_id])
    assert run.info.status == "FAILED"
    names = {a.path for stage in ("simulate", "evaluate") for a in client.list_artifacts(
        run.info.run_id, stage)}  # fmt: skip
    assert {"evaluate/report.json", "evaluate/rows.jsonl.gz", "simulate/report.json"} <= names
    assert not [n for n in names if n.endswith(".png")], names


def test_given_rewards_on_another_scale_fail_the_grade_with_pass_at_1_not_measured(tmp_path):
    rows = [
        {"messages": [{"role": "user", "content": f"What is the weather in city {t}?"},
                      {"role": "assistant", "content": "Sunny."}],
         "reward": 10 if (t + rep) % 2 else 0}
        for t in range(8) for rep in range(4)
    ]  # fmt: skip
    (tmp_path / "rew10.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = wai(tmp_path, "+experiment=eval", "judge=given", "simulate.rows=rew10.jsonl",
              "tracking=none")  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "pass@1: not measured (evaluate failed: the judge could not score 16 of 32 rows" in (out)
    assert not re.search(r"pass@1[^:\n]*: \d", out)


def test_the_scale_the_refusal_names_parses_on_the_command_line(tmp_path):
    """The fix is typed as the refusal writes it, with the rows' own range (0-10) put in.
    Old text: judge.scale=(lo, hi), which the override grammar cannot read (exit 2)."""
    rows = [
        {"messages": [{"role": "user", "content": f"What is the weather in city {t}?"},
                      {"role": "assistant", "content": "Sunny."}],
         "reward": 10 if (t + rep) % 2 else 0}
        for t in range(8) for rep in range(4)
    ]  # fmt: skip
    (tmp_path / "rew10.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ("+experiment=eval", "judge=given", "simulate.rows=rew10.jsonl", "tracking=none")
    res = wai(tmp_path, *base)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    named = re.search(r"(judge\.scale=\S+) \(", out)
    assert named, out
    assert "(lo, hi)" not in out  # Python's tuple, which no override reads
    fix = named.group(1).replace("lo", "0").replace("hi", "10")
    res = wai(tmp_path, *base, fix)
    out = res.stdout + res.stderr
    assert res.returncode == 0, (fix, out)
    assert re.search(r"pass@1[^:\n]*: 0\.", out), out


def test_unjudged_rows_are_warned_about_and_named_as_what_shrank_k(tmp_path):
    (tmp_path / "userjudge.py").write_text(FLAKY_JUDGE)
    res = wai(tmp_path, "+experiment=eval", "judge=callable", "judge.target=userjudge:flaky",
              "simulate.budget=80", "tracking=none")  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    [run] = run_dirs(tmp_path)
    report = json.loads((run / "evaluate" / "report.json").read_text())
    n = report["judge_status"]["error"]
    assert 0 < n <= 20 and report["k"] == 3  # 4 repeats simulated; errors left some tasks 3
    assert f"warning (evaluate): rows the judge did not score (error={n})" in out
    # Before: "simulate with repeats>=4", though it did simulate 4 repeats.
    assert "repeats>=4" not in out
    assert f"{n} rows with no 0/1 grade (unjudged, or a partial reward) left" in out
    assert "pass k=4 to read pass^4 and pass@4 over the" in out


def test_an_interval_not_measured_over_too_few_tasks_says_why_and_what_to_do(tmp_path):
    """'pass@1: 1.000  interval not measured over 1 tasks' gave no reason; the floor line
    beside it did ('needs >= 3 tasks')."""
    res = wai(tmp_path, "+experiment=eval", "tracking=none", "simulate.budget=4")
    assert res.returncode == 0, res.stdout + res.stderr
    [head] = [line for line in res.stdout.splitlines() if line.startswith("pass@1:")]
    assert head.startswith("pass@1: 1.000  interval not measured: 1 task;"), head
    assert "fewer than 3 give no spread between tasks" in head and "over 1 tasks" not in head
    assert "run more tasks: a larger simulate.budget" in head
    [k_way] = [line for line in res.stdout.splitlines() if line.startswith("  pass^4:")]
    assert k_way == "  pass^4: 1.000  pass@4: 1.000  (intervals not measured, as for pass@1)"
