"""``AgentWorld``: the world an agent is handed answers tool calls and the person exactly as
the rollout's world does, from any thread or coroutine, and leads nowhere near its answer key."""

from __future__ import annotations

import asyncio
import json
import threading
import traceback

import pytest

from tests.simulate.agents.reach import Walk
from wai_exp.simulate.agent_setup import _Workers
from wai_exp.simulate.agent_world import AgentWorld, WorldServer
from wai_exp.simulate.spec import load_agent_spec
from wai_exp.simulate.world import RolloutWorld
from wai_exp.simulate.writer import Situation

DIMS = {"tool": "issue_refund", "stance": "direct", "world_state": "already_done",
        "tool_condition": "error", "rule": "R7"}  # fmt: skip
TOOLS = list(load_agent_spec(None).tools)


def _world(seed=7, fault_rate=1.0):
    sit = Situation(
        "sit-1",
        dict(DIMS),
        ("Please refund ORD-12345, I'm ann@example.com",),
        {"order_id": "ORD-12345", "email": "ann@example.com", "total": 40.0},
    )
    return RolloutWorld(sit, TOOLS, seed=seed, fault_rate=fault_rate)


@pytest.fixture
def pool():
    workers = _Workers()
    yield workers
    workers.close()


def test_served_answers_are_the_worlds_own(pool):
    """Same seed, same calls: the served facade and the world itself answer alike."""
    calls = [("lookup_order", {"order_id": "ORD-12345"}), ("issue_refund", {"order_id": "ORD-12345"}),
             ("issue_refund", {"order_id": "ORD-12345"}), ("nope", {})]  # fmt: skip
    direct = _world()
    server = WorldServer(_world(), pool.submit)
    try:
        for name, args in calls:
            assert server.facade.execute(name, args, call_id="c") == direct.execute(
                name, args, call_id="c"
            )
        assert server.facade.ask_user("What is your order number?") == direct.ask_user(
            "What is your order number?"
        )
        assert server.facade.ended_by == direct.ended_by
        assert server.facade.seed == direct.seed and server.facade.tools is TOOLS
    finally:
        server.close()


def test_the_facade_has_no_door_to_the_answer_key(pool):
    world = _world()
    server = WorldServer(world, pool.submit)
    try:
        facade = server.facade
        facade.execute("lookup_order", {"order_id": "ORD-12345"})
        for name in ("dims", "situation", "entities", "fault_plan", "steps", "fired", "orders"):
            assert not hasattr(facade, name), name
        words = {k: DIMS[k] for k in ("world_state", "tool_condition", "stance", "rule")}
        hidden = {"scenario_dimensions": DIMS, "fault plan": world.fault_plan, **words}
        assert Walk({"world": facade}).hits(hidden) == []
        # ... while the direct facade our own agents get does lead there: the walk sees it.
        assert Walk({"world": AgentWorld.direct(world)}).hits(hidden)
    finally:
        server.close()


def test_an_error_comes_back_without_the_frames_that_hold_the_world(pool):
    class Exploding(RolloutWorld):
        def execute(self, name, arguments=None, *, call_id=None):
            raise KeyError("boom")

    sit = Situation("sit-1", dict(DIMS), ("ask",), {})
    server = WorldServer(Exploding(sit, TOOLS, seed=1), pool.submit)
    try:
        with pytest.raises(KeyError, match="boom") as info:
            server.facade.execute("lookup_order", {"order_id": "x"})
        frames = [f for f, _ in traceback.walk_tb(info.value.__traceback__)]
        assert not any("self" in f.f_locals and isinstance(f.f_locals["self"], RolloutWorld)
                       for f in frames)  # fmt: skip
        assert info.value.__context__ is None and info.value.__cause__ is None
    finally:
        server.close()


def test_a_call_after_the_rollout_ended_is_refused_not_hung(pool):
    server = WorldServer(_world(), pool.submit)
    facade = server.facade
    server.close()
    with pytest.raises(RuntimeError, match="this rollout is over"):
        facade.execute("lookup_order", {"order_id": "ORD-12345"})


def test_calls_from_many_threads_and_a_coroutine_each_get_their_own_answer(pool):
    server = WorldServer(_world(fault_rate=0.0), pool.submit)
    got = {}

    def lookup(i):
        got[i] = server.facade.execute("lookup_order", {"order_id": f"ORD-{i:05d}"})

    threads = [threading.Thread(target=lookup, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    try:
        assert all(got[i]["arguments"]["order_id"] == f"ORD-{i:05d}" for i in range(12))
        assert asyncio.run(server.facade.aask_user("What is your order number?"))
    finally:
        server.close()


REFUND = {"order_id": "ORD-12345", "amount": 40.0, "reason": "damaged"}


def _forge_success(step):
    """What a cheating agent does with a tool step it was handed."""
    step["status"], step["fault"] = "ok", None
    if isinstance(step["result"], dict):
        step["result"]["status"] = "refunded"
    step["result"] = {"status": "refunded", "refund_id": "RF-FORGED"}


def test_editing_an_answer_leaves_the_worlds_record_as_the_world_said_it(pool):
    """The world's steps are what grading reads: an agent that rewrites the faulted refund it
    got back (sync or async, top-level keys or nested result) changes none of them."""
    world = _world()
    server = WorldServer(world, pool.submit)
    try:
        looked = server.facade.execute("lookup_order", {"order_id": "ORD-12345"})
        refund = server.facade.execute("issue_refund", REFUND)
        again = asyncio.run(server.facade.aexecute("issue_refund", REFUND))
    finally:
        server.close()
    said = json.loads(json.dumps(world.steps))
    assert [s["status"] for s in said] == ["ok", "error", "error"], said
    looked["result"]["total"] = 0
    for step in (refund, again):
        _forge_success(step)
    assert world.steps == said
    assert world.steps[0]["result"]["total"] == 40.0
    assert not any("RF-FORGED" in str(s["result"]) for s in world.steps)
