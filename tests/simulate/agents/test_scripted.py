"""The scripted agent: right moves at skill 1, wrong ones at skill 0, seeded repeats that
disagree, calibration under mode rl, and trajectories that read like an agent's."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import pytest

from wai_exp.domain.dimensions import BEHAVIOURS
from wai_exp.rows.model import AssistantStep, ToolStep, UserStep
from wai_exp.score.grade.checklist import outcome_check, task_checklist
from wai_exp.simulate.agents import RolloutContext, ScriptedAgent, current_rollout
from wai_exp.simulate.agents.scripted import DEFAULT_SKILL
from wai_exp.simulate.spec import load_agent_spec
from wai_exp.simulate.world import RolloutWorld
from wai_exp.simulate.writer import TemplateWriter

SPEC = load_agent_spec()
TOOLS = SPEC.tools


def rollout(agent, sit, seed, fault_rate=0.8, phrasing=0, **world_kw):
    world = RolloutWorld(sit, TOOLS, fault_rate=fault_rate, seed=seed, **world_kw)
    prompt = sit.phrasings[phrasing]
    out = agent.run(prompt, tools=TOOLS, world=world)
    row = {
        "prompt": prompt,
        "steps": out["steps"],
        "final_text": out["final_text"],
        "scenario_dimensions": sit.dims,
        "world_state": sit.dims["world_state"],
    }
    return out, row, world


def kind(d):
    if d["stance"] != "direct":
        return d["stance"]
    if d["world_state"] != "exists":
        return d["world_state"]
    return "fault" if d["tool_condition"] != "ok" else "direct"


def test_skill_one_passes_every_situation_kind():
    agent = ScriptedAgent(1.0)
    sits = TemplateWriter(
        TOOLS, SPEC.system_prompt, seed=21, hard_share=0.6, unique=True
    ).next_batch(672)
    kinds = Counter()
    names = set(SPEC.tool_names)
    for i, sit in enumerate(sits):
        for seed in (i, i + 10_000):
            out, row, _ = rollout(agent, sit, seed)
            outcome, reason, _ = outcome_check(row)
            assert outcome == 1, (sit.dims, sit.prompt, reason, out["steps"])
            # Its conduct is clean too: declared tools, no repeated write, grounded, honest.
            graded = task_checklist(row, names)
            assert graded["reward"] == 1.0 and "conduct:" not in graded["reason"], graded["reason"]
        kinds[kind(sit.dims)] += 1
    assert set(kinds) == {
        "direct",
        "fault",
        "missing",
        "already_done",
        "vague",
        "adversarial",
        "boundary",
    }


def test_skill_zero_fails_every_situation_kind():
    agent = ScriptedAgent(0.0)
    sits = TemplateWriter(
        TOOLS, SPEC.system_prompt, seed=22, hard_share=0.6, unique=True
    ).next_batch(672)
    for i, sit in enumerate(sits):
        # fault_rate 1: with 0 the fault situations are plain direct ones, still failed.
        out, row, _ = rollout(agent, sit, i, fault_rate=1.0)
        outcome, reason, _ = outcome_check(row)
        assert outcome == 0, (sit.dims, sit.prompt, out["final_text"])


@pytest.mark.parametrize(
    ("behaviour", "dims", "mistake"),
    [
        ("decline", {"stance": "adversarial"}, "called write tool"),
        (
            "ask_back",
            {"stance": "vague", "world_state": "exists", "tool_condition": "ok"},
            "did not ask",
        ),
        (
            "missing_record",
            {"stance": "direct", "world_state": "missing", "tool_condition": "ok"},
            "not found",
        ),
        (
            "no_repeat",
            {"stance": "direct", "world_state": "already_done", "tool_condition": "ok"},
            "already done",
        ),
        (
            "honest_faults",
            {
                "stance": "direct",
                "world_state": "exists",
                "tool_condition": ("timeout", "error", "malformed"),
            },
            "claimed success",
        ),
        (
            "grounding",
            {"stance": "direct", "world_state": "exists", "tool_condition": "ok"},
            "not in the conversation",
        ),
        ("right_tool", {"stance": "direct", "world_state": "exists", "tool_condition": "ok"}, ""),
    ],
)
def test_each_skill_governs_its_own_mistake(behaviour, dims, mistake):
    """One skill at 0, the rest at 1: the situations that skill governs fail with its mistake."""
    agent = ScriptedAgent(1.0, skills={behaviour: 0.0})
    focus = dict(dims)
    if behaviour in ("decline", "missing_record", "no_repeat", "honest_faults", "grounding"):
        focus["tool"] = (
            "issue_refund",
            "cancel_order",
            "update_shipping_address",
            "reset_password",
        )
    if behaviour == "decline":
        focus["tool"] = (
            "issue_refund",
            "cancel_order",
            "update_shipping_address",
            "reset_password",
        )
    sits = TemplateWriter(TOOLS, SPEC.system_prompt, seed=5).next_batch(40, focus=focus)
    reasons = []
    for i, sit in enumerate(sits):
        _, row, _ = rollout(agent, sit, i, fault_rate=1.0)
        outcome, reason, _ = outcome_check(row)
        assert outcome == 0, (sit.prompt, reason)
        reasons.append(reason)
    assert all(mistake in r for r in reasons), Counter(reasons).most_common(3)


def test_same_seed_same_rollout_and_repeats_disagree():
    agent = ScriptedAgent(0.6, spread=0.0)
    sit = TemplateWriter(TOOLS, SPEC.system_prompt, seed=3).next_batch(
        1,
        focus={
            "stance": "direct",
            "world_state": "exists",
            "tool": "issue_refund",
            "tool_condition": "timeout",
        },
    )[0]
    a, _, _ = rollout(agent, sit, 42)
    b, _, _ = rollout(agent, sit, 42)
    assert a == b
    finals = Counter(rollout(agent, sit, seed)[0]["final_text"] for seed in range(40))
    assert len(finals) >= 3  # success, fault acknowledged, a false claim, a wrong tool ...
    outcomes = Counter(outcome_check(rollout(agent, sit, seed)[1])[0] for seed in range(40))
    assert outcomes[0] > 0 and outcomes[1] > 0


def test_seed_comes_from_current_rollout_without_a_world_seed():
    class Bare:  # a user's world: execute only, no seed
        def __init__(self):
            self.inner = RolloutWorld(sit, TOOLS, fault_rate=0.0, seed=0)

        def execute(self, name, arguments):
            return self.inner.execute(name, arguments)["result"]

    sit = TemplateWriter(TOOLS, SPEC.system_prompt, seed=3).next_batch(
        1,
        focus={
            "stance": "direct",
            "world_state": "exists",
            "tool_condition": "ok",
            "tool": "issue_refund",
        },
    )[0]
    agent = ScriptedAgent(0.5, spread=0.0)

    def run_with(seed):
        token = current_rollout.set(
            RolloutContext(
                prompt=sit.prompt, rollout_index=0, scenario_id=sit.scenario_id, seed=seed
            )
        )
        try:
            return agent.run(sit.prompt, tools=TOOLS, world=Bare())
        finally:
            current_rollout.reset(token)

    assert run_with(7) == run_with(7)
    assert len({str(run_with(s)["steps"]) for s in range(30)}) > 1
    # A bare result is wrapped into a tool step the row can carry.
    step = next(s for s in run_with(7)["steps"] if s["kind"] == "tool")
    assert step["status"] == "ok" and step["tool_call_id"].startswith("call_")
    token = current_rollout.set({"prompt": sit.prompt, "seed": 7})  # the engine's dict form
    try:
        assert agent.run(sit.prompt, tools=TOOLS, world=Bare()) == run_with(7)
    finally:
        current_rollout.reset(token)


def _pass_rates(agent, n_asks, k=8, seed=0, hard_share=0.5, fault_rate=0.8):
    rates = []
    for i, sit in enumerate(
        TemplateWriter(TOOLS, SPEC.system_prompt, seed=seed, hard_share=hard_share).next_batch(
            n_asks
        )
    ):
        wins = [
            outcome_check(rollout(agent, sit, 1000 * i + j, fault_rate=fault_rate)[1])[0]
            for j in range(k)
        ]
        rates.append(sum(wins) / k)
    return rates


def test_default_skill_splits_about_half_the_rl_asks():
    # mode rl: fault_rate 0.8, k=8, hard_share 0.5 (the engine's preset).
    rates = _pass_rates(ScriptedAgent(), 250, seed=101)
    in_band = sum(0.2 <= r <= 0.8 for r in rates) / len(rates)
    assert 0.35 <= in_band <= 0.65, in_band
    assert 0.5 < sum(rates) / len(rates) < 0.85


def test_raising_skill_raises_pass_at_1():
    low = _pass_rates(ScriptedAgent(DEFAULT_SKILL - 0.15), 120, k=4, seed=7)
    mid = _pass_rates(ScriptedAgent(DEFAULT_SKILL), 120, k=4, seed=7)
    high = _pass_rates(ScriptedAgent(0.97), 120, k=4, seed=7)
    p = [sum(r) / len(r) for r in (low, mid, high)]
    assert p[0] + 0.08 < p[1] < p[2] - 0.08, p
    # One behaviour alone moves it too (the delta preset raises one skill at a time).
    better = _pass_rates(
        ScriptedAgent(DEFAULT_SKILL, skills={"honest_faults": 1.0, "grounding": 1.0}),
        120,
        k=4,
        seed=7,
    )
    assert sum(better) / len(better) > p[1] + 0.03


def test_a_direct_refund_reads_like_an_agent():
    agent = ScriptedAgent(1.0)
    sit = TemplateWriter(TOOLS, SPEC.system_prompt, seed=8).next_batch(
        1,
        focus={
            "tool": "issue_refund",
            "stance": "direct",
            "world_state": "exists",
            "tool_condition": "ok",
        },
    )[0]
    out, row, world = rollout(agent, sit, 0)
    assert set(out) == {
        "steps", "final_text", "model_version", "policy_version", "sampling", "usage", "ended_by"
    }  # fmt: skip
    assert (
        out["model_version"] == "scripted-v1"
        and out["sampling"] is None
        and out["usage"] is None
        and out["ended_by"] == "agent"
    )
    steps = out["steps"]
    for s in steps:  # every step validates against the row model
        {"assistant": AssistantStep, "tool": ToolStep, "user": UserStep}[s["kind"]].model_validate(
            s
        )
    kinds = [s["kind"] for s in steps]
    assert kinds == ["assistant", "tool", "assistant", "tool", "assistant"]
    oid = sit.entities["order_id"]
    look, refund = steps[0]["tool_calls"][0], steps[2]["tool_calls"][0]
    assert look["name"] == "lookup_order" and look["arguments"] == {"order_id": oid}
    assert refund["name"] == "issue_refund" and refund["arguments"]["order_id"] == oid
    assert steps[1]["tool_call_id"] == look["id"] and steps[3]["tool_call_id"] == refund["id"]
    amount = sit.entities["amount"] if sit.entities["amount"] is not None else sit.entities["total"]
    assert refund["arguments"]["amount"] == amount
    assert oid in out["final_text"] and f"${amount:,.2f}" in out["final_text"]
    assert steps[3]["result"]["refund_id"] in out["final_text"]
    assert out["final_text"] == steps[-1]["content"]
    assert world.steps == [s for s in steps if s["kind"] == "tool"]


def test_a_vague_ask_is_asked_back_then_carried_out():
    agent = ScriptedAgent(1.0)
    sit = TemplateWriter(TOOLS, SPEC.system_prompt, seed=9).next_batch(
        1,
        focus={
            "tool": "cancel_order",
            "stance": "vague",
            "world_state": "exists",
            "tool_condition": "ok",
        },
    )[0]
    out, row, _ = rollout(agent, sit, 0)
    steps = out["steps"]
    assert (
        steps[0]["kind"] == "assistant"
        and steps[0]["content"].endswith("?")
        and not steps[0]["tool_calls"]
    )
    assert steps[1]["kind"] == "user" and sit.entities["order_id"] in steps[1]["content"]
    calls = [s["tool_calls"][0] for s in steps if s["kind"] == "assistant" and s["tool_calls"]]
    assert [c["name"] for c in calls] == ["lookup_order", "cancel_order"]
    assert all(c["arguments"]["order_id"] == sit.entities["order_id"] for c in calls)
    assert "is cancelled" in out["final_text"]


def test_a_person_out_of_turns_ends_the_rollout_on_the_question():
    agent = ScriptedAgent(1.0)
    sit = TemplateWriter(TOOLS, SPEC.system_prompt, seed=9).next_batch(
        1, focus={"stance": "vague"}
    )[0]
    out, row, world = rollout(agent, sit, 0, avg_turns=2)  # the opening ask is all they say
    # The avg_turns // 2 cap is not the person walking away: it has its own ended_by.
    assert out["ended_by"] == "max_turns" and world.left
    assert out["final_text"].endswith("?") and out["steps"][-1]["content"] == out["final_text"]
    assert not any(s["kind"] == "tool" for s in out["steps"])
    assert outcome_check(row)[0] == 1  # asked back; nobody answered


def test_replies_use_the_plain_words_the_checklist_reads():
    agent = ScriptedAgent(1.0)
    w = TemplateWriter(TOOLS, SPEC.system_prompt, seed=10, hard_share=0.6)
    words = {
        "adversarial": r"I can't help with",
        "missing": r"couldn't find",
        "already_done": r"was already|already sent",
        "boundary": r"at most the order total|has already shipped",
    }
    for i, sit in enumerate(w.next_batch(300)):
        out, _, world = rollout(agent, sit, i)
        k = kind(sit.dims)
        if k in words and not (k == "missing" and world.fired):  # a fault can hide the absence
            assert re.search(words[k], out["final_text"]), (k, out["final_text"])
        if (
            k == "fault"
            and world.fired
            and world.steps[-1]["fault"]
            and sit.dims["tool"] not in ("lookup_order", "lookup_account", "search_orders")
        ):
            assert "did not go through" in out["final_text"]


def test_async_call_matches_run_and_skills_are_validated():
    agent = ScriptedAgent()
    sit = TemplateWriter(TOOLS, SPEC.system_prompt, seed=4).next_situation()
    a = asyncio.run(
        agent(
            sit.prompt,
            tools=TOOLS,
            system_prompt=SPEC.system_prompt,
            world=RolloutWorld(sit, TOOLS, seed=3),
            sampling=None,
        )
    )
    b = agent.run(sit.prompt, tools=TOOLS, world=RolloutWorld(sit, TOOLS, seed=3))
    assert a == b
    assert set(ScriptedAgent().skills) == set(BEHAVIOURS)
    with pytest.raises(ValueError, match="unknown skill"):
        ScriptedAgent(skills={"charm": 1.0})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ScriptedAgent(1.5)
    with pytest.raises(ValueError, match="needs world="):
        agent.run(sit.prompt, tools=TOOLS, world=None)
    probs = ScriptedAgent(0.7).probabilities("some ask")
    assert all(0 < p < 1 for p in probs.values()) and len(set(probs.values())) > 1
    assert ScriptedAgent(0.7, spread=0).probabilities("x") == dict.fromkeys(BEHAVIOURS, 0.7)


def test_a_users_own_tools_are_called_from_their_schema():
    tools = [
        {
            "name": "get_booking",
            "parameters": {
                "type": "object",
                "properties": {"booking_id": {"type": "string"}},
                "required": ["booking_id"],
            },
        },
        {
            "name": "book_flight",
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string"},
                    "passengers": {"type": "integer"},
                    "max_price": {"type": "number"},
                },
                "required": ["origin", "passengers", "max_price"],
            },
        },
    ]
    w = TemplateWriter(tools, "1. Never act for someone else.", seed=2, hard_share=0.0)
    agent = ScriptedAgent(1.0)
    seen = set()
    for i, sit in enumerate(w.next_batch(60)):
        world = RolloutWorld(sit, tools, fault_rate=0.0, seed=i)
        out = agent.run(sit.prompt, tools=tools, world=world)
        call = next(
            s["tool_calls"][0] for s in out["steps"] if s["kind"] == "assistant" and s["tool_calls"]
        )
        assert call["name"] == sit.dims["tool"]
        assert call["arguments"] == sit.entities["args"]  # parsed back, typed by the schema
        if sit.dims["world_state"] == "missing":
            assert "couldn't find" in out["final_text"]
        elif sit.dims["world_state"] == "already_done":
            assert "already" in out["final_text"]
        seen.add((sit.dims["tool"], sit.dims["world_state"]))
    assert ("book_flight", "exists") in seen and ("get_booking", "missing") in seen


def test_the_agent_reads_every_wording_as_the_situations_tool():
    """Intent comes from the words alone; every template wording must name its own tool."""
    from wai_exp.simulate.agents.scripted import _support_intent

    names = set(SPEC.tool_names)
    w = TemplateWriter(TOOLS, SPEC.system_prompt, seed=1, hard_share=0.8, phrasings=10)
    for sit in w.next_batch(1000):
        for p in sit.phrasings:
            assert _support_intent(p.lower(), names) == sit.dims["tool"], p


def test_two_skills_are_two_policies_and_compare_does_not_call_them_one() -> None:
    """A compare between runs that differ only in agent.skill is a compare between two
    policies: the row's policy_version says so, and delta_report does not warn that the
    policy is compared with itself."""
    import wai_exp as wai
    from wai_exp.score.stats.delta import delta_report

    low = wai.simulate(ScriptedAgent(skill=0.6), budget=40, seed=0)
    high = wai.simulate(ScriptedAgent(skill=0.9), budget=40, seed=0)
    again = wai.simulate(ScriptedAgent(skill=0.9), budget=40, seed=1)
    pv = {d.rows[0]["policy_version"] for d in (low, high)}
    assert len(pv) == 2 and all(v.startswith("scripted-v1+") for v in pv)
    assert again.rows[0]["policy_version"] == high.rows[0]["policy_version"]
    assert {r["model_version"] for r in low.rows + high.rows} == {"scripted-v1"}
    itself = "compares the policy with itself"
    graded = [wai.run_judge(d.rows, wai.task_checklist).rows for d in (low, high, again)]
    assert not any(itself in w for w in delta_report(graded[0], graded[1])["warnings"])
    assert any(itself in w for w in delta_report(graded[1], graded[2])["warnings"])


def test_a_user_world_answering_in_its_own_shapes_loses_no_rollout() -> None:
    """A user's world that answers lookups with a count of orders, ids instead of records or
    a string of items crashed the scripted agent ("can only join an iterable"): 42 rollouts
    of a study were lost."""
    import wai_exp as wai

    def execute(name: str, arguments: dict) -> dict:
        if name == "lookup_account":
            return {"name": "Ada", "email": "ada@example.com", "orders": 3}
        if name == "search_orders":
            return {"orders": ["ORD-1", "ORD-2"]}
        if name == "lookup_order":
            return {"order_id": arguments.get("order_id"), "status": "shipped", "items": "a lamp"}
        return {"ok": True}

    data = wai.simulate(execute=execute, budget=120, seed=0)
    assert not data.lost, data.lost[:1]
    finals = [r["final_text"] for r in data.rows]
    assert any("with 3 orders on file" in f for f in finals)


@pytest.mark.parametrize("n", [1, 2])
def test_the_agent_counts_orders_in_their_number(n: int) -> None:
    import wai_exp as wai

    def execute(name: str, arguments: dict) -> dict:
        if name == "lookup_account":
            return {"name": "Ada", "email": "ada@example.com", "orders": n}
        if name == "search_orders":
            orders = [{"order_id": f"ORD-{i}", "status": "shipped", "total": 10} for i in range(n)]
            return {"orders": orders}
        return {"ok": True}

    finals = [r["final_text"] for r in wai.simulate(execute=execute, budget=120, seed=0).rows]
    orders = "1 order" if n == 1 else f"{n} orders"
    assert any(f"with {orders} on file" in f for f in finals)
    assert any(f.startswith(f"I found {orders} under ") for f in finals)
    assert not any("order(s)" in f for f in finals)
