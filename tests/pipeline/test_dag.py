"""The pipeline config as a DAG: needs are checked, cycles named, order is topological."""

import pytest

from wai_exp.pipeline.dag import PipelineError, plan


def names(stages):
    return [s.name for s in plan(stages)]


def test_rl_round_runs_in_dependency_order():
    stages = {
        "publish_gate": {"kind": "publish_gate", "needs": ["optimize"]},
        "optimize": {"kind": "optimize", "needs": ["grade"]},
        "simulate": {"kind": "simulate"},
        "grade": {"kind": "grade", "needs": ["simulate"]},
    }
    assert names(stages) == ["simulate", "grade", "optimize", "publish_gate"]


def test_independent_stages_keep_config_order():
    stages = {
        "b": {"kind": "simulate"},
        "a": {"kind": "simulate"},
        "cmp": {"kind": "compare", "needs": ["a", "b"]},
    }
    assert names(stages) == ["b", "a", "cmp"]


def test_a_need_may_be_a_single_string_and_params_are_kept():
    [s, g] = plan(
        {"s": {"kind": "simulate"}, "g": {"kind": "grade", "needs": "s", "params": {"k": 4}}}
    )
    assert g.needs == ("s",) and g.params == {"k": 4} and s.needs == ()


def test_missing_need_names_the_closest_stage():
    with pytest.raises(PipelineError) as err:
        plan({"simulate": {"kind": "simulate"}, "grade": {"kind": "grade", "needs": ["simulat"]}})
    msg = str(err.value)
    assert "'grade' needs 'simulat'" in msg and "Did you mean 'simulate'?" in msg
    assert "Stages: simulate, grade" in msg


def test_cycle_is_named():
    stages = {
        "a": {"kind": "simulate", "needs": ["c"]},
        "b": {"kind": "grade", "needs": ["a"]},
        "c": {"kind": "grade", "needs": ["b"]},
        "d": {"kind": "simulate"},
    }
    with pytest.raises(PipelineError) as err:
        plan(stages)
    msg = str(err.value)
    assert "cycle" in msg
    cycle = msg.split(": ", 1)[1].split(" -> ")
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}


def test_self_need_is_an_error():
    with pytest.raises(PipelineError, match="needs itself"):
        plan({"a": {"kind": "simulate", "needs": ["a"]}})


def test_stage_without_kind_or_target_is_an_error():
    with pytest.raises(PipelineError, match="neither `kind:` nor `_target_:`"):
        plan({"a": {"needs": []}})


def test_empty_pipeline_is_an_error():
    with pytest.raises(PipelineError, match="no stages"):
        plan({})
