"""The rest of simulate's documented surface (shared/seeds/simulate-parameters.md), through the
public API: grade=, rank, from_row/to_row, data.search/stopped_because/metadata, the
documented row fields, current_rollout inside execute=, and edge values of the knobs."""

from __future__ import annotations

import asyncio

import wai_exp as wai
from wai_exp.simulate.agents import current_rollout


def _tool_steps(rows):
    return [s for r in rows for s in r["steps"] if s.get("kind") == "tool"]


# ---------------------------------------------------------------------------------------
# current_rollout inside execute=
# ---------------------------------------------------------------------------------------


def test_execute_reads_current_rollout_by_attribute_as_the_spec_names_it():
    seen = []

    def my_world(name, arguments):
        # Spec style: the prompt and rollout index of the rollout being answered.
        seen.append((current_rollout.prompt, current_rollout.rollout_index))
        prompt, index = current_rollout.get()  # the (prompt, rollout index) pair
        assert (prompt, index) == seen[-1]
        return {"found": False, "asked": current_rollout.prompt[:10]}

    data = wai.simulate(budget=24, seed=4, repeats=3, execute=my_world)
    steps = _tool_steps(data.rows)
    assert steps and seen
    assert all(s["status"] == "ok" for s in steps), [s["result"] for s in steps][:3]
    asked = {(r["prompt"], r["rollout_index"]) for r in data.rows}
    assert set(seen) <= asked
    assert {i for _, i in seen} >= {0, 1}  # repeats of one ask are told apart
    assert getattr(current_rollout, "prompt", None) is None  # nothing outside a rollout


def test_concurrent_async_rollouts_each_see_their_own_rollout():
    seen = []

    async def agent(prompt, *, tools, system_prompt, world, sampling):
        await asyncio.sleep((world.seed % 5) / 2000)  # interleave the rollouts
        world.execute("lookup_order", {"order_id": "A-1"}, call_id="c1")
        await asyncio.sleep((world.seed % 3) / 2000)
        world.execute("lookup_order", {"order_id": "A-2"}, call_id="c2")
        return {"final_text": "done", "model_version": "m"}

    def my_world(name, arguments):
        seen.append((current_rollout.seed, current_rollout.prompt, current_rollout.rollout_index))
        return {"ok": True}

    data = wai.simulate(
        agent, budget=30, seed=2, repeats=2, execute=my_world, advanced={"concurrency": 8}
    )
    by_seed = {r["seed"]: (r["prompt"], r["rollout_index"]) for r in data.rows}
    assert len(seen) == 2 * len(data.rows)
    for seed, prompt, index in seen:
        assert by_seed[seed] == (prompt, index)


# ---------------------------------------------------------------------------------------
# Edge values
# ---------------------------------------------------------------------------------------


def _failing_traces():
    return wai.simulate(
        budget=40,
        seed=1,
        grader=lambda r: 0.0 if r["scenario_dimensions"]["tool"] == "issue_refund" else 1.0,
    ).rows


def test_failing_seeds_cap_zero_means_no_seed_asks_and_a_cap_bounds_them():
    traces = _failing_traces()
    none = wai.simulate(budget=30, seed=2, traces=traces, advanced={"failing_seeds_cap": 0})
    assert none.report()["seeds"] == 0
    assert not [r for r in none.rows if r["arm"] == "seed"]
    assert none.report()["traces_info"]["failing"] > 0  # the failures still aim the grid
    two = wai.simulate(budget=30, seed=2, traces=traces, advanced={"failing_seeds_cap": 2})
    assert two.report()["seeds"] == 2
    assert {r["arm"] for r in two.rows} >= {"seed"}
    default = wai.simulate(budget=30, seed=2, traces=traces)
    assert default.report()["seeds"] == min(40, default.report()["traces_info"]["failing"])
