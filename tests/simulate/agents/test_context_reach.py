"""Nothing an agent is handed leads to the task's answer: for every agent shape, everything
reachable from its arguments (and ``current_rollout``) is walked (``reach.Walk``), before and
after it used the world, and none of the row's hidden values is there: not the world, the
situation or its ``dims`` (world_state, tool_condition, stance, rule), not the fault plan,
the seeded records or the privileged block."""

from __future__ import annotations

import functools
import re

import pytest

import wai_exp
from tests.simulate.agents.reach import Walk
from wai_exp.simulate.agents import current_rollout

ORDER_RE = re.compile(r"\b[A-Z]{2,6}-\d{3,12}\b")


def _look(record, handed):
    ctx = current_rollout.get()
    walk = Walk({**handed, "current_rollout": ctx})
    record.append(((ctx.prompt, ctx.rollout_index), walk))


def _use(world, prompt):
    """What a working agent does with the world: a lookup and a question to the person."""
    m = ORDER_RE.search(prompt)
    world.execute("lookup_order", {"order_id": m.group(0) if m else "ORD-00000"})
    return world.ask_user("Could you give me your order number?")


def string_agent(record):
    def agent(message, **context):
        _look(record, {"message": message, **context})
        _use(context["world"], message)
        _look(record, {"message": message, **context})
        return "I looked into it."

    return agent


def messages_agent(record):
    def agent(prompt, *, tools, system_prompt, world, sampling):
        handed = dict(prompt=prompt, tools=tools, system_prompt=system_prompt, world=world,
                      sampling=sampling)  # fmt: skip
        _look(record, handed)
        answer = _use(world, prompt)
        _look(record, handed)
        return [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": "Could you give me your order number?"},
            {"role": "user", "content": answer or ""},
            {"role": "assistant", "content": "Thanks, done."},
        ]

    return agent


class Desk:
    """An agent as a class, built with its own keyword arguments (``agent.kwargs``)."""

    def __init__(self, record, greeting="Hello"):
        self.record = record
        self.greeting = greeting

    def __call__(self, message, **context):
        _look(self.record, {"message": message, **context})
        _use(context["world"], message)
        _look(self.record, {"message": message, **context})
        return f"{self.greeting}, done."


def async_agent(record):
    async def agent(message, **context):
        _look(record, {"message": message, **context})
        world = context["world"]
        world.execute("lookup_order", {"order_id": "ORD-00000"})
        await world.aask_user("What is your order number?")
        _look(record, {"message": message, **context})
        return "async: done"

    return agent


def partial_agent(record):
    def agent(message, *, style, world, tools):
        _look(record, {"message": message, "world": world, "tools": tools})
        _use(world, message)
        _look(record, {"message": message, "world": world, "tools": tools})
        return style

    return functools.partial(agent, style="terse")


SHAPES = {
    "string callable": string_agent,
    "messages callable": messages_agent,
    "class built with kwargs": lambda record: Desk(record, greeting="Hi"),
    "async": async_agent,
    "functools.partial": partial_agent,
}


def _hidden(traj):
    """The row's answer key: what no agent may reach."""
    dims = traj.get("scenario_dimensions") or {}
    priv = traj.get("privileged") or {}
    out = {
        "scenario_dimensions": dims,
        "fault plan": (traj.get("faults") or {}).get("planned"),
        "privileged": priv,
        "hidden_state": priv.get("hidden_state"),
        "reference": priv.get("reference"),
    }
    for key in ("world_state", "tool_condition", "stance", "rule"):
        out[key] = dims.get(key)
    return out


@pytest.mark.parametrize("own_world", [False, True], ids=["mock world", "execute= world"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_no_agent_shape_can_reach_the_answer_key(shape, own_world):
    record: list = []
    kw = {"execute": lambda name, args: {"ok": True, "name": name}} if own_world else {}
    data = wai_exp.simulate(
        agent=SHAPES[shape](record), budget=8, seed=3, simulator=False, fault_rate=0.5, **kw
    )
    assert len(data.trajectories) == 8, data.warnings
    by_rollout = {(t["prompt"], t["rollout_index"]): t for t in data.trajectories}
    assert len(record) == 16  # every call walked before and after it used the world
    leaks = []
    for key, walk in record:
        leaks += walk.hits(_hidden(by_rollout[key]))
    assert not leaks, f"{len(leaks)} paths to the answer key, e.g. {leaks[:5]}"
    # The walk is real: it reaches what the agent was given, tools and all.
    strings = record[0][1].strings()
    assert data.trajectories[0]["prompt"] in {k[0] for k, _ in record}
    assert "lookup_order" in strings


def test_the_walk_finds_the_answer_key_when_it_is_handed_over():
    """The check can fail: a world object, a closure over it, a bound method of it, a
    partial over its dims and a weak reference to it are each caught."""
    import weakref

    from wai_exp.simulate.world import RolloutWorld
    from wai_exp.simulate.writer import Situation

    dims = {"tool": "issue_refund", "world_state": "already_done", "tool_condition": "error",
            "stance": "direct", "rule": "R7"}  # fmt: skip
    sit = Situation("sit-1", dims, ("Refund ORD-12345 please",), {"order_id": "ORD-12345"})
    world = RolloutWorld(sit, [{"name": "issue_refund", "parameters": {}}], seed=1)

    def closure():
        return world

    hidden = {"world_state": "already_done", "scenario_dimensions": dims}
    for handed in (
        world,
        closure,
        world.execute,
        functools.partial(print, dict(dims)),
        weakref.ref(world),
        functools.wraps(print)(lambda: None).__class__,  # a plain function type: no hit
    ):
        hits = Walk({"world": handed}).hits(hidden)
        if isinstance(handed, type):
            assert not hits, hits
        else:
            assert hits, handed
