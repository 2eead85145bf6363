"""A simulate arm whose ``params.agent`` names another agent kind, through the console script.

The delta preset runs the scripted agent on both arms. An after arm of ``kind: callable``
passed the check before any work, ran simulate_before and grade_before, then failed
simulate_after on the scripted section's skill/skills/spread/model_version (exit 1). The arm
is a whole agent of its own kind: it runs, and when it lacks a key of its kind, or names a
target that does not import, the run is refused before any stage (exit 2).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.e2e.test_cli import wai

AGENT = """
from wai_exp.simulate.agents.scripted import ScriptedAgent

_inner = ScriptedAgent()


def answer(prompt, *, tools, system_prompt, world, sampling):
    return _inner.run(prompt, tools=tools, world=world)
"""

ARM = "pipeline.stages.simulate_after.params.agent"


def run(tmp_path, *arm):
    (tmp_path / "my_agent.py").write_text(AGENT)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    return wai(
        tmp_path,
        "+experiment=delta",
        "simulate.budget=16",
        "simulate.runs=1",
        "tracking=none",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"~{ARM}.skill",
        f"~{ARM}.model_version",
        f"+{ARM}.kind=callable",
        *arm,
        env={"PYTHONPATH": path},
    )


def test_a_callable_arm_over_the_scripted_agent_runs(tmp_path):
    res = run(tmp_path, f"+{ARM}.target=my_agent:answer")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    report = json.loads((tmp_path / "run" / "compare" / "report.json").read_text())
    assert report["n_unpaired_tasks"] == 0


def test_a_callable_arm_without_its_target_is_refused_before_any_work(tmp_path):
    res = run(tmp_path, f"+{ARM}.factory=false")
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-3000:]
    assert f"{ARM}.target: required" in res.stderr
    assert "replaces the agent section" in res.stderr
    assert not (tmp_path / "run" / "simulate_before").exists()


def test_a_callable_arm_whose_target_does_not_import_is_refused_before_any_work(tmp_path):
    res = run(tmp_path, f"+{ARM}.target=my_agent:nope")
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-3000:]
    assert f"{ARM}.target: 'my_agent:nope'" in res.stderr
    assert not (tmp_path / "run" / "simulate_before").exists()


TWO_AGENTS = """
from desk_agent import answer as careful  # noqa: F401


def says_done(message):
    return "Done, all sorted."
"""
BEFORE = "pipeline.stages.simulate_before.params.agent"


def test_two_agents_of_your_own_compared_by_the_delta_preset(tmp_path):
    # docs/RECIPES.md's command: drop each arm's scripted keys, write the arm whole
    (tmp_path / "agents.py").write_text(TWO_AGENTS)
    own_agent = Path(__file__).resolve().parents[2] / "experiments" / "own_agent"
    paths = (str(tmp_path), str(own_agent), os.environ.get("PYTHONPATH"))
    res = wai(
        tmp_path, "+experiment=delta", "simulate.budget=40", "tracking=none",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"~{BEFORE}", f"+{BEFORE}={{kind: callable, target: agents:says_done}}",
        f"~{ARM}", f"+{ARM}={{kind: callable, target: agents:careful}}",
        env={"PYTHONPATH": os.pathsep.join(p for p in paths if p)},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    run = tmp_path / "run"
    for stage, agent in (("simulate_before", "says_done"), ("simulate_after", "answer")):
        rows = (run / stage / "rows.jsonl").read_text().splitlines()
        assert {json.loads(r)["model_version"] for r in rows} == {agent}, stage
    report = json.loads((run / "compare" / "report.json").read_text())
    assert report["n_unpaired_tasks"] == 0 and report["n_paired_tasks"] == 10
    assert "compare: PASS: pass_at_1" in res.stderr + res.stdout
