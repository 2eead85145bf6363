"""Issue 18.1: a lost rollout must not change the task mix behind the headline.

An agent that raises on every refund ask, run from the console script: its lost rollouts
keep their tasks' slots (the run answers the same asks a working agent answers with the same
seed), count as failures in pass@1 / pass^k / pass@k by default (``simulate.lost_as``), and
the summary, the MLflow description and the reports say how many each task category lost.
"""

from __future__ import annotations

import json

from tests.e2e.test_cli import run_dirs, wai

AGENTS = '''
import re

from wai_exp.simulate.agents.scripted import ScriptedAgent

_inner = ScriptedAgent()


def working(prompt, *, tools, system_prompt, world, sampling):
    return _inner.run(prompt, tools=tools, world=world)


def no_refunds(prompt, *, tools, system_prompt, world, sampling):
    """Raises on every ask that says "refund"."""
    if "refund" in prompt.lower():
        raise RuntimeError("the refund service is down")
    return working(prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling)


def no_money_back(prompt, *, tools, system_prompt, world, sampling):
    """Raises on every refund ask, however it is worded: the whole issue_refund category."""
    if re.search(r"refund|back for order", prompt, re.I):
        raise RuntimeError("the refund service is down")
    return working(prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling)
'''

EVAL = ("+experiment=eval", "simulate.budget=200")


def run(tmp_path, name, target, *extra, tracking="none", preset=EVAL):
    """``wai-exp`` with ``agent.target=agents:<target>`` in its own folder ``name``."""
    cwd = tmp_path / name
    cwd.mkdir()
    (cwd / "agents.py").write_text(AGENTS)
    args = [*preset, "agent=callable", f"agent.target=agents:{target}", *extra]
    if tracking == "none":
        args.append("tracking=none")
    res = wai(cwd, *args, env={"PYTHONPATH": str(cwd)})
    [folder] = run_dirs(cwd)
    return res, folder


def report(folder, stage):
    return json.loads((folder / stage / "report.json").read_text())


def rows(folder, stage):
    text = (folder / stage / "rows.jsonl").read_text().splitlines()
    return [json.loads(line) for line in text if line.strip()]


def test_an_agent_that_crashes_on_refunds_is_scored_on_the_same_tasks_with_them_as_failures(
    tmp_path,
):
    ok, ok_dir = run(tmp_path, "working", "working")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    res, folder = run(tmp_path, "no_refunds", "no_refunds")
    assert res.returncode == 0, res.stdout + res.stderr
    sim, ev = report(folder, "simulate"), report(folder, "evaluate")
    lost = sim["rollouts_lost"]
    asked = sum("refund" in r["prompt"].lower() for r in rows(ok_dir, "simulate"))
    # Every refund ask the working agent got was attempted and lost: none was replaced.
    assert lost == asked > 0
    assert sim["rows"] + lost == 200
    graded = rows(folder, "evaluate")
    assert not any("refund" in r["prompt"].lower() for r in graded)
    # The same tasks behind the headline, the lost ones at 0.
    theirs = report(ok_dir, "evaluate")
    assert set(ev["per_task"]) == set(theirs["per_task"]) and ev["n_groups"] == 50
    gone = set(ev["per_task"]) - {r["scenario_id"] for r in graded}
    assert gone and all(ev["per_task"][t] == 0.0 for t in gone)
    assert ev["n_lost"] == lost and ev["lost"]["lost_as"] == "failure"
    assert ev["pass_at_1"] < theirs["pass_at_1"]
    # Per category, in the summary and the reports.
    refunds = sim["lost"]["by_category"]["issue_refund"]
    assert refunds["lost"] == lost and refunds["attempted"] > lost
    line = f"lost: {lost} of 200 rollouts (by task category: issue_refund {lost} of "
    assert line in res.stdout
    assert "counted as failures in pass@1, pass^k and pass@k (simulate.lost_as=failure)" in (
        res.stdout
    )
    assert f"{len(gone)} tasks lost every rollout and score 0" in res.stdout
    assert line in (folder / "evaluate" / "report.txt").read_text()


def test_lost_as_excluded_leaves_them_out_and_says_so(tmp_path):
    fail, fail_dir = run(tmp_path, "failure", "no_refunds")
    excl, excl_dir = run(tmp_path, "excluded", "no_refunds", "simulate.lost_as=excluded")
    assert fail.returncode == excl.returncode == 0, excl.stdout + excl.stderr
    f, e = report(fail_dir, "evaluate"), report(excl_dir, "evaluate")
    gone = report(excl_dir, "simulate")["lost"]["tasks_all_lost"]
    assert gone > 0
    assert f["n_groups"] == 50 and e["n_groups"] == 50 - gone
    assert e["n_lost"] == 0 and f["n_lost"] > 0
    assert e["pass_at_1"] > f["pass_at_1"]
    assert "left out of pass@1, pass^k and pass@k (simulate.lost_as=excluded)" in excl.stdout
    assert f"{gone} tasks lost every rollout and are not in the score" in excl.stdout
    # Same rows either way: how they are counted is not how they are run.
    assert len(rows(fail_dir, "simulate")) == len(rows(excl_dir, "simulate"))


def test_a_bad_lost_as_is_refused_before_any_work(tmp_path):
    res = wai(tmp_path, *EVAL, "simulate.lost_as=skip", "tracking=none")
    assert res.returncode == 2
    assert "simulate.lost_as" in res.stderr and "'failure' or 'excluded'" in res.stderr
    assert not run_dirs(tmp_path)


def test_a_category_that_lost_every_rollout_is_named_and_the_lost_share_stop_still_applies(
    tmp_path,
):
    stop, folder = run(tmp_path, "stop", "no_money_back")
    assert stop.returncode == 1, stop.stdout + stop.stderr
    sim = report(folder, "simulate")
    assert sim["failed_because"] == "lost_rollouts" and sim["lost"]["all_lost"] == ["issue_refund"]
    assert "more than simulate.max_lost_share=0.25" in stop.stdout
    assert "every rollout of issue_refund asks was lost" in stop.stdout
    # Accepting the share: the run goes on, and the summary and the MLflow description name it.
    res, folder = run(
        tmp_path, "go", "no_money_back", "simulate.max_lost_share=0.5", tracking="mlflow"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "every rollout of issue_refund asks was lost" in res.stdout
    from mlflow import MlflowClient

    run_id = json.loads((folder / "run.json").read_text())["run_id"]
    uri = f"sqlite:///{(tmp_path / 'go' / 'mlflow.db').resolve()}"
    mlflow_run = MlflowClient(tracking_uri=uri).get_run(run_id)
    note = mlflow_run.data.tags["mlflow.note.content"]
    lost = report(folder, "simulate")["rollouts_lost"]
    assert f"lost: {lost} of 200 rollouts (by task category: issue_refund {lost} of {lost})" in note
    assert "counted as failures" in note and "every rollout of issue_refund asks was lost" in note
    assert mlflow_run.data.metrics["evaluate.rollouts_lost"] == lost


def test_lost_rollouts_never_reach_the_training_data(tmp_path):
    res, folder = run(
        tmp_path, "rl", "no_refunds", "simulate.max_lost_share=0.5",
        preset=("+experiment=rl_round", "simulate.budget=200"),
    )  # fmt: skip
    assert res.returncode in (0, 3), res.stdout + res.stderr
    lost = report(folder, "simulate")["rollouts_lost"]
    assert lost > 0 and report(folder, "grade")["n_lost"] == lost
    # The graded rows are the judged rows only; nothing downstream selects a lost rollout.
    assert len(rows(folder, "grade")) == len(rows(folder, "simulate"))
    for stage in ("grade", "optimize"):
        assert not any("refund" in r["prompt"].lower() for r in rows(folder, stage))
