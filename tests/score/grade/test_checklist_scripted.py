"""Integration: the checklist grades the scripted agent's rollouts the way its skills say.

A skill is the chance the agent does the right thing at one decision, so an agent with every
skill at 1.0 must pass ~every situation, one with every skill at 0.0 must fail ~every one,
and zeroing one skill must fail exactly the rule that grades that behaviour.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from wai_exp.domain.dimensions import BEHAVIOURS
from wai_exp.score.grade.checklist import task_checklist
from wai_exp.score.judges.judging import run_judge
from wai_exp.simulate.agents.scripted import ScriptedAgent
from wai_exp.simulate.engine import simulate

RULES = {"adversarial", "vague", "boundary", "missing", "already_done", "fault", "direct"}


def graded(agent: ScriptedAgent, budget: int, seed: int) -> list[dict]:
    data = simulate(agent, budget=budget, seed=seed, hard_share=0.5, fault_rate=0.8)
    scored = run_judge(data, task_checklist)
    assert scored.counts == {"ok": len(scored.rows)}
    return scored.rows


def pass_rate_by_rule(rows: list[dict]) -> dict[str, float]:
    tally: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        tally[row["judge_meta"]["checks"]["rule"]].append(row["reward"])
    return {rule: sum(v) / len(v) for rule, v in tally.items()}


@pytest.mark.parametrize("seed", [0, 1])
def test_perfect_agent_passes_and_hopeless_agent_fails(seed: int) -> None:
    good = graded(ScriptedAgent(skill=1.0), budget=500, seed=seed)
    bad = graded(ScriptedAgent(skill=0.0), budget=500, seed=seed)
    # The grid reached every rule, so the rates below speak for each of them.
    assert {r["judge_meta"]["checks"]["rule"] for r in good} == RULES
    assert sum(r["reward"] for r in good) / len(good) >= 0.98
    assert sum(r["reward"] for r in bad) / len(bad) <= 0.02


#: behaviour zeroed -> (rules that must fail, rules it must leave passing)
ISOLATION = {
    # An invented identifier fails every rule that grades calls (rule 6 on every task): the
    # fault rows (the invented id hit the faulted tool) and the not-found rows whose lookup
    # used one (missing is left out: only some of its rollouts look anything up).
    "grounding": ({"direct", "fault"}, {"adversarial", "already_done", "boundary"}),
    "honest_faults": ({"fault"}, {"adversarial", "already_done", "boundary", "direct", "missing"}),
    "ask_back": (
        {"vague"},
        {"adversarial", "already_done", "boundary", "direct", "fault", "missing"},
    ),
    "decline": (
        {"adversarial", "boundary"},
        {"already_done", "direct", "fault", "missing", "vague"},
    ),
    "no_repeat": ({"already_done"}, {"adversarial", "boundary", "direct", "fault", "missing"}),
    "missing_record": ({"missing"}, {"adversarial", "already_done", "boundary", "direct", "fault"}),
    "right_tool": ({"direct", "boundary"}, {"adversarial"}),
}


def test_isolation_covers_every_behaviour() -> None:
    assert set(ISOLATION) == set(BEHAVIOURS)


@pytest.mark.parametrize("behaviour", sorted(ISOLATION))
def test_zeroing_one_skill_fails_its_rule_only(behaviour: str) -> None:
    skills = dict.fromkeys(BEHAVIOURS, 1.0)
    skills[behaviour] = 0.0
    rates = pass_rate_by_rule(graded(ScriptedAgent(skills=skills), budget=400, seed=5))
    failing, passing = ISOLATION[behaviour]
    for rule in failing:
        assert rates[rule] <= 0.05, (behaviour, rule, rates)
    for rule in passing:
        assert rates.get(rule, 1.0) >= 0.95, (behaviour, rule, rates)
