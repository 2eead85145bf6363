"""The scripted agent on a spec of your own looks the record up before a write when a read
tool takes the write's key, as it does on the desk: at full skill it passes every task
planned on a missing record or an action already done, which the checklist passes only
for an agent that looked and made no write."""

from __future__ import annotations

from tests.simulate.test_observable_states import TOOLS
from wai_exp.score.grade.checklist import task_checklist
from wai_exp.simulate.agents import RolloutContext, ScriptedAgent, current_rollout
from wai_exp.simulate.world import RolloutWorld
from wai_exp.simulate.writer import TemplateWriter


def _graded(sit, seed: int) -> dict:
    world = RolloutWorld(sit, TOOLS, fault_rate=0.0, seed=seed)
    token = current_rollout.set(RolloutContext(prompt=sit.phrasings[0], seed=seed))
    try:
        out = ScriptedAgent(1.0).run(sit.phrasings[0], tools=TOOLS, world=world)
    finally:
        current_rollout.reset(token)
    row = {
        "prompt": sit.phrasings[0],
        "steps": out["steps"],
        "final_text": out["final_text"],
        "scenario_dimensions": sit.dims,
        "world_changes": world.changes,
    }
    return task_checklist(row)


def test_full_skill_passes_missing_and_done_records_on_a_write_it_can_look_up() -> None:
    sits = [
        s
        for s in TemplateWriter(TOOLS, "You are a library desk assistant.", seed=4).next_batch(400)
        if s.dims["tool"] == "renew_loan"
        and s.dims["stance"] == "direct"
        and s.dims["world_state"] in ("missing", "already_done")
        and s.dims["tool_condition"] == "ok"
    ]
    assert {s.dims["world_state"] for s in sits} == {"missing", "already_done"}
    for i, sit in enumerate(sits):
        graded = _graded(sit, i)
        assert graded["reward"] == 1.0, (sit.dims["world_state"], graded["reason"])
