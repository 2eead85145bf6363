"""The floor beside pass@1 from the console script: what a do-nothing agent (no tool call,
one polite refusal) scores on the run's own tasks under its judge, with its interval, in
the summary, the MLflow metrics and the run's description; "not measured", never a 0,
when it was not measured."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

from tests.e2e.test_cli import run_dirs, wai
from tests.support.scripted_server import chat_reply, scripted_server

REFUSER = """
def answer(message):
    return "I'm sorry, I can't help with that."
"""
NUM = r"([0-9]\.[0-9]{3})"


def refuser_run(tmp_path: Path, *extra: str):
    (tmp_path / "refuser.py").write_text(REFUSER)
    return wai(
        tmp_path, "+experiment=eval", "agent=callable", "agent.target=refuser:answer", *extra,
        env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip


def mlflow_record(tmp_path: Path) -> tuple[dict[str, float], str]:
    [run] = run_dirs(tmp_path)
    run_id = json.loads((run / "run.json").read_text())["run_id"]
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        metrics = dict(
            db.execute("select key, value from metrics where run_uuid = ?", (run_id,)).fetchall()
        )
        [note] = db.execute(
            "select value from tags where run_uuid = ? and key = 'mlflow.note.content'", (run_id,)
        ).fetchone()
    return metrics, note


def test_a_refuse_everything_agent_is_shown_at_the_floor_in_summary_metrics_and_description(
    tmp_path: Path,
) -> None:
    res = refuser_run(tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    # The case: pass@1 0.180 for an agent that does nothing but refuse...
    pass1 = re.search(rf"^pass@1: {NUM}  95% CI \[{NUM}, {NUM}\] over (\d+) tasks", out, re.M)
    assert pass1, out
    assert float(pass1.group(1)) > 0.1
    # ... and right below it the floor: the same number, the same interval, and the words.
    floor = re.search(rf"^  floor: {NUM}  95% CI \[{NUM}, {NUM}\] \(a do-nothing agent", out, re.M)
    assert floor, out
    assert floor.groups() == pass1.groups()[:3]
    assert re.search(
        rf"^  at the floor: pass@1 - floor \+0\.000 .*every one of the {pass1.group(4)} tasks$",
        out,
        re.M,
    ), out
    metrics, note = mlflow_record(tmp_path)
    for name in ("floor", "floor_ci_lo", "floor_ci_hi"):
        assert metrics[name] == metrics[name.replace("floor", "pass_at_1")], name
    assert metrics["evaluate.floor_gap"] == 0.0
    assert f"**floor** {pass1.group(1)} (95% CI {pass1.group(2)}–{pass1.group(3)})" in note
    assert "**at the floor:" in note
    report = json.loads((run_dirs(tmp_path)[0] / "evaluate" / "report.json").read_text())
    assert report["floor"]["verdict"] == "at"
    assert "at the floor" in (run_dirs(tmp_path)[0] / "evaluate" / "report.txt").read_text()


def test_the_offline_agent_is_above_its_floor(tmp_path: Path) -> None:
    res = wai(tmp_path, "+experiment=eval", "simulate.budget=200", "tracking=none")
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(rf"^  floor: {NUM}  95% CI \[", res.stdout, re.M), res.stdout
    assert re.search(
        r"^  above the floor: pass@1 - floor \+0\.[0-9]{3} \(95% CI \+", res.stdout, re.M
    )


def test_a_floor_switched_off_or_under_given_rewards_is_not_measured_and_never_zero(
    tmp_path: Path,
) -> None:
    res = refuser_run(tmp_path, "judge.floor=false")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "\n  floor: not measured (judge.floor=false)\n" in res.stdout
    metrics, note = mlflow_record(tmp_path)
    assert not [k for k in metrics if "floor" in k]
    assert "**floor** not measured (judge.floor=false)" in note

    [run] = run_dirs(tmp_path)
    rows = run / "evaluate" / "rows.jsonl"
    res = wai(
        tmp_path, "+experiment=eval", f"simulate.rows={rows}", "judge=given", "tracking=none",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert "  floor: not measured (judge=given keeps each row's own reward" in res.stdout


def test_a_model_judge_measures_the_floor_only_when_asked_one_call_per_task(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    lock = threading.Lock()

    def answer(path: str, headers: dict[str, str], body: dict[str, Any]):
        with lock:
            calls.append(body["messages"][-1]["content"])
        return 200, chat_reply(json.dumps({"score": 0, "reason": "scripted"}))

    with scripted_server(answer) as url:
        common = ("judge=llm", f"judge.model=vllm:scripted-judge@{url}", "simulate.budget=12")
        res = wai(tmp_path, *common, "tracking=none", env={"WAI_EXP_JUDGE": ""})
        assert res.returncode == 0, res.stdout + res.stderr
        assert len(calls) == 12  # the rows, and no call for the floor
        assert re.search(
            r"^  floor: not measured \(judge=llm is a model judge: the floor costs one more "
            r"judge call per task \(about \d+\); judge\.floor=true measures it\)$",
            res.stdout,
            re.M,
        ), res.stdout
        calls.clear()
        res = wai(tmp_path, *common, "judge.floor=true", "tracking=none")
        assert res.returncode == 0, res.stdout + res.stderr
    run = run_dirs(tmp_path)[-1]
    report = json.loads((run / "grade" / "report.json").read_text())
    n_tasks = report["n_groups"]
    assert len(calls) == 12 + n_tasks
    assert sum("I'm sorry, I can't help with that." in c for c in calls) >= n_tasks
    assert report["floor"]["floor"] == 0.0 and report["floor"]["n_tasks"] == n_tasks
    assert re.search(r"^  floor: 0\.000  95% CI \[0\.000, 0\.[0-9]{3}\]", res.stdout, re.M)


def test_tasks_that_lost_every_rollout_are_named_beside_the_floor(tmp_path: Path) -> None:
    """pass@1 keeps a lost rollout's task as a failure; a task that lost every rollout left
    no ask for the do-nothing agent to answer, and the floor line says it covers fewer."""
    (tmp_path / "crasher.py").write_text(
        "def answer(message):\n"
        "    if 'refund' in message.lower():\n"
        "        raise RuntimeError('boom')\n"
        "    return \"I'm sorry, I can't help with that.\"\n"
    )
    res = wai(
        tmp_path, "+experiment=eval", "agent=callable", "agent.target=crasher:answer",
        "simulate.budget=200", "tracking=none", env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    n = re.search(r"^pass@1: .* over (\d+) tasks", res.stdout, re.M).group(1)
    line = re.search(r"^  floor: .*$", res.stdout, re.M).group(0)
    assert re.search(rf"the same judge on \d+ of the {n} tasks; \d+ tasks? lost every", line)
    # the gap is paired over those fewer tasks, and says so: it is not pass@1 minus the floor
    on = re.search(rf"the same judge on (\d+) of the {n} tasks", line).group(1)
    assert re.search(
        rf"^  \w.* floor: pass@1 - floor .* over {on} paired tasks; ", res.stdout, re.M
    )
