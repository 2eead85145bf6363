"""A new judge is one registration (``wai_exp.domain.judges.register_judge``): after it,
``judge=<name>`` composes, validates, grades a run and can grade rows as they land; a
name nothing registered is refused naming every registered judge and how to add one."""

from __future__ import annotations

import io

import pytest

from wai_exp.domain import judges as registry
from wai_exp.rows.jsonl import read_rows


def called_a_tool(row, **_):
    """The new judge: a row passes when the agent called any tool."""
    return 1.0 if any(m.get("tool_calls") for m in row.get("messages") or ()) else 0.0


@pytest.fixture
def own_judge(monkeypatch):
    """Registers ``called_a_tool`` (the one place a user touches); unregistered afterwards."""
    monkeypatch.setattr(registry, "JUDGES", dict(registry.JUDGES))

    @registry.register_judge("called_a_tool")
    def build(section, tools, policy):
        return called_a_tool

    return "called_a_tool"


def composed(*overrides):
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module(version_base="1.3", config_module="wai_exp.conf"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)


def test_a_registered_judge_grades_a_run_by_its_name(own_judge, tmp_path):
    from wai_exp.commands.run import config_problem
    from wai_exp.pipeline.runner import run_pipeline

    cfg = composed(
        "+experiment=rl_round", "simulate.budget=48", "tracking=none", "judge=called_a_tool"
    )
    assert config_problem(cfg, tmp_path) is None  # the checks a run makes before work
    out = run_pipeline(cfg, run_dir=tmp_path / "run", start_dir=tmp_path, stream=io.StringIO())
    assert out.status == "passed", out.error
    report = out.stage("grade").result.report
    assert report["judge"]["kind"] == "called_a_tool"
    assert report["judge"]["name"] == "called_a_tool"
    graded = read_rows(tmp_path / "run/grade/rows.jsonl")
    assert len(graded) == 48
    assert [r["reward"] for r in graded] == [called_a_tool(r) for r in graded]
    assert {r["judge_name"] for r in graded} == {"called_a_tool"}


def test_a_registered_judge_grades_rows_as_they_land(own_judge, tmp_path):
    from wai_exp.commands.run import config_problem
    from wai_exp.pipeline.runner import run_pipeline

    cfg = composed("+experiment=rl_round", "simulate.budget=24", "tracking=none",
                   "+simulate.grader=called_a_tool")  # fmt: skip
    assert config_problem(cfg, tmp_path) is None
    out = run_pipeline(cfg, run_dir=tmp_path / "run", start_dir=tmp_path, stream=io.StringIO())
    assert out.status == "passed", out.error
    rows = read_rows(tmp_path / "run/simulate/rows.jsonl")
    assert rows and [r["reward"] for r in rows] == [called_a_tool(r) for r in rows]


def test_a_judge_nothing_registered_is_refused_naming_the_registered_ones_and_the_fix(tmp_path):
    from wai_exp.commands.run import config_problem

    cfg = composed("+experiment=rl_round", "tracking=none", "judge.kind=called_a_tol")
    text = config_problem(cfg, tmp_path) or ""
    assert "judge.kind = 'called_a_tol': not a registered judge" in text
    assert "checklist, conduct, given, llm, pairwise, rubric_llm" in text
    assert "register_judge" in text and "judge=callable" in text


def test_the_suggestion_names_a_registered_judge(own_judge, tmp_path):
    from wai_exp.commands.run import config_problem

    cfg = composed("+experiment=rl_round", "tracking=none", "judge.kind=called_a_tol")
    assert "did you mean 'called_a_tool'" in (config_problem(cfg, tmp_path) or "")


@pytest.mark.parametrize(
    ("kind", "model", "pointwise"),
    [
        ("checklist", False, True),
        ("conduct", False, True),
        ("given", False, False),
        ("callable", False, False),
        ("llm", True, True),
        ("rubric_llm", True, True),
        ("pairwise", True, False),
    ],
)
def test_the_shipped_judges_are_registered_with_what_the_checks_read(kind, model, pointwise):
    found = registry.judge_kind(kind)
    assert (found.model, found.pointwise) == (model, pointwise)


def test_every_shipped_judge_file_names_a_registered_kind():
    from importlib import resources

    folder = resources.files("wai_exp.conf") / "judge"
    shipped = sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))
    assert shipped == registry.judge_names()


def test_pairwise_grades_with_its_pointwise_judge():
    assert registry.grading_kind({"kind": "pairwise", "pointwise": "llm"}) == "llm"
    assert registry.is_model_judge({"kind": "pairwise"}) is True
    assert registry.is_model_judge({"kind": "pairwise"}, grading=True) is False
    assert registry.is_model_judge({"kind": "pairwise", "pointwise": "rubric_llm"}, grading=True)


def test_a_judge_registered_as_not_pointwise_is_refused_as_a_grader_but_not_as_a_judge(
    monkeypatch,
):
    from wai_exp.config.models import JudgeConfig, check_grader

    monkeypatch.setattr(registry, "JUDGES", dict(registry.JUDGES))
    registry.register_judge("whole_run", lambda section, tools, policy: called_a_tool,
                            pointwise=False)  # fmt: skip
    assert JudgeConfig(kind="whole_run").kind == "whole_run"
    with pytest.raises(ValueError, match="cannot grade as rows land"):
        check_grader("whole_run")
    with pytest.raises(ValueError, match="not a registered pointwise judge"):
        JudgeConfig(kind="pairwise", pointwise="whole_run")
