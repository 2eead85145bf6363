"""``arm_agent``: the agent a simulate arm runs, read the same by the check and the stage."""

from __future__ import annotations

from wai_exp.config.arms import arm_agent, resolved_arm_agent, switches_kind

SCRIPTED = {"kind": "scripted", "skill": 0.85, "spread": 1.5, "model_version": "scripted-v1"}


def test_an_arm_of_the_sections_kind_changes_only_its_own_keys():
    merged = arm_agent(SCRIPTED, {"skill": 0.5})
    assert merged == {**SCRIPTED, "skill": 0.5}
    assert not switches_kind(SCRIPTED, {"skill": 0.5, "kind": "scripted"})


def test_an_arm_of_another_kind_replaces_the_section():
    arm = {"kind": "callable", "target": "my_agent:answer"}
    assert switches_kind(SCRIPTED, arm)
    assert arm_agent(SCRIPTED, arm) == arm  # no skill/spread/model_version carried over


def test_a_providers_key_does_not_reach_another_provider():
    openai = {"kind": "openai", "model": "gpt-4o-mini", "api_key": "sk-test"}
    assert "api_key" not in arm_agent(openai, {"kind": "vllm", "model": "m"})


def test_a_section_without_a_kind_is_the_scripted_agent():
    assert not switches_kind({"skill": 0.5}, {"kind": "scripted"})
    assert switches_kind(None, {"kind": "callable", "target": "a:b"})
    assert arm_agent({"skill": 0.5}, {"kind": "scripted"}) == {"skill": 0.5, "kind": "scripted"}


def test_no_arm_is_the_section_and_the_inputs_are_not_changed():
    section = dict(SCRIPTED)
    assert arm_agent(section, None) == SCRIPTED
    arm_agent(section, {"skill": 0.1})["spread"] = 0.0
    assert section == SCRIPTED


def test_the_resolved_agent_is_its_model_with_every_default_filled_in():
    written = resolved_arm_agent(SCRIPTED, {"kind": "callable", "target": "a:b", "kwargs": {}})
    assert written == resolved_arm_agent(None, {"kind": "callable", "target": "a:b"})
    assert written == {"kind": "callable", "target": "a:b", "factory": False, "kwargs": {}}
    one = resolved_arm_agent({"kind": "scripted", "skill": 1}, None)
    assert one == resolved_arm_agent({}, {"skill": 1.0})  # no kind: scripted
    assert one["skills"]["grounding"] is None and one["spread"] == 1.5


def test_an_agent_its_model_refuses_is_resolved_as_merged():
    # the check before any work refuses it; the key must still differ from a valid agent's
    assert resolved_arm_agent(SCRIPTED, {"skill": 7}) == {**SCRIPTED, "skill": 7}
    assert resolved_arm_agent(None, {"kind": "nope"}) == {"kind": "nope"}
