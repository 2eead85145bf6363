"""A simulate stage's cache key holds the agent its arm runs (``config.arms.arm_agent``,
validated, defaults filled in), not the raw ``agent`` section and the raw ``params.agent``:
a key the arm's agent never reads reuses the stage, a key it reads recomputes it."""

from __future__ import annotations

import io
import textwrap

import pytest

from wai_exp.pipeline.runner import run_pipeline

SCRIPTED = {"kind": "scripted", "skill": 0.85, "spread": 1.5, "model_version": "scripted-v1"}
CALLABLE = {"kind": "callable", "target": "arm_key_agent:Answer", "factory": False, "kwargs": {}}


@pytest.fixture(autouse=True, scope="module")
def _agent_module(tmp_path_factory):
    # One file for the module's tests: the run remembers, per module name, the file it read
    # and its mtime, so a file written again for each test would read as "changed".
    folder = tmp_path_factory.mktemp("agent")
    (folder / "arm_key_agent.py").write_text(
        textwrap.dedent(
            """
            class Answer:
                def __init__(self, text="done"):
                    self.text = text

                def __call__(self, message):
                    return self.text


            def other(message):
                return "other"
            """
        )
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(folder))
        yield


def config(section, arm):
    params = {"agent": arm} if arm is not None else {}
    return {
        "seed": 0,
        "name": "t",
        "tracking": {"kind": "none"},
        "simulate": {"budget": 8, "repeats": 2},
        "agent": section,
        "pipeline": {"stages": {"sim": {"kind": "simulate", "params": params}}},
    }


def status(tmp_path, name, section, arm):
    out = run_pipeline(
        config(section, arm),
        run_dir=tmp_path / "outputs" / name,
        start_dir=tmp_path,
        stream=io.StringIO(),
    )
    assert out.status == "passed", out.error
    return out.stage("sim").status


# (section, arm) of the first run, then of the second, and whether the second reuses the first
CASES = {
    "callable arm, the scripted section's skill changed": (
        (SCRIPTED, {"kind": "callable", "target": "arm_key_agent:Answer"}),
        ({**SCRIPTED, "skill": 0.3}, {"kind": "callable", "target": "arm_key_agent:Answer"}),
        "cached",
    ),
    "callable arm, its target changed": (
        (SCRIPTED, {"kind": "callable", "target": "arm_key_agent:Answer"}),
        (SCRIPTED, {"kind": "callable", "target": "arm_key_agent:other"}),
        "ran",
    ),
    "callable arm, a kwarg changed": (
        (SCRIPTED, {"kind": "callable", "target": "arm_key_agent:Answer"}),
        (SCRIPTED, {"kind": "callable", "target": "arm_key_agent:Answer", "kwargs": {"text": "x"}}),
        "ran",
    ),
    "callable arm, its defaults written out": (
        (SCRIPTED, {"kind": "callable", "target": "arm_key_agent:Answer"}),
        (SCRIPTED, {**CALLABLE, "kwargs": {}}),
        "cached",
    ),
    "scripted arm, the callable section's target changed": (
        (CALLABLE, {"kind": "scripted", "skill": 0.3}),
        ({**CALLABLE, "target": "arm_key_agent:other"}, {"kind": "scripted", "skill": 0.3}),
        "cached",
    ),
    "scripted arm, its skill changed": (
        (CALLABLE, {"kind": "scripted", "skill": 0.3}),
        (CALLABLE, {"kind": "scripted", "skill": 0.6}),
        "ran",
    ),
    "scripted arm over a scripted section, a key the arm sets changed in the section": (
        (SCRIPTED, {"skill": 0.3}),
        ({**SCRIPTED, "skill": 0.5}, {"skill": 0.3}),
        "cached",
    ),
    "scripted arm over a scripted section, a key it inherits changed": (
        (SCRIPTED, {"skill": 0.3}),
        ({**SCRIPTED, "spread": 0.0}, {"skill": 0.3}),
        "ran",
    ),
    "no arm, the arm's agent written as the section": (
        (SCRIPTED, {"skill": 0.3}),
        ({**SCRIPTED, "skill": 0.3}, None),
        "cached",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_key_follows_the_agent_the_arm_runs(tmp_path, case):
    first, second, expected = CASES[case]
    assert status(tmp_path, "r1", *first) == "ran"
    assert status(tmp_path, "r2", *second) == expected
