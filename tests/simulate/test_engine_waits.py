"""The loop's waits: the tick (``collect_wait_s``) bounds how long the loop waits for a
rollout before it re-plans, re-checks the clock and redraws a due progress line; under a
clock that is out the tick is ``collect_wait_floor_s``; an rl pool that sits idle on verdicts
for more than ``idle_judge_share`` of its slot time gets the add-situations note."""

from __future__ import annotations

import asyncio
import time

import wai_exp as wai


def _lines_while_one_slow_rollout_runs(**advanced):
    seen: list[dict] = []

    def slow(message):
        time.sleep(1.2)
        return "ok"

    wai.simulate(
        agent=slow, budget=1, progress=seen.append,
        advanced={"progress_every_s": 0.0, **advanced},
    )  # fmt: skip
    return [s for s in seen if s["done"] == 0]


def test_the_tick_bounds_how_long_the_loop_waits_before_it_checks_again():
    # progress_every_s=0 asks for a line at every check: the lines count the loop's ticks.
    fine = _lines_while_one_slow_rollout_runs(collect_wait_s=0.05)
    coarse = _lines_while_one_slow_rollout_runs(collect_wait_s=1.0)
    assert len(fine) >= 8, len(fine)
    assert len(coarse) <= 2, len(coarse)


async def _outlasts_the_clock(prompt, *, tools, system_prompt, world, sampling):
    await asyncio.sleep(1.5)
    return {"final_text": "done", "model_version": "slow"}


def _lines_after_the_clock(floor):
    seen: list[dict] = []
    data = wai.simulate(
        agent=_outlasts_the_clock, budget=1, time_budget=0.2, progress=seen.append,
        advanced={"progress_every_s": 0.0, "stop_grace": 1.0, "collect_wait_floor_s": floor},
    )  # fmt: skip
    assert data.stopped_because == "time_budget" and data.report()["rollouts_abandoned"] == 1
    return [s for s in seen if s["elapsed_s"] > 0.25 and s["done"] == 0]


def test_once_the_clock_is_out_the_tick_is_the_floor():
    # The running rollout gets stop_grace (1 s) after the clock: the loop re-checks every
    # floor seconds meanwhile.
    fine = _lines_after_the_clock(0.04)
    coarse = _lines_after_the_clock(0.5)
    assert len(fine) >= 10, len(fine)
    assert len(coarse) <= 3, len(coarse)


async def _slow_agent(prompt, *, tools, system_prompt, world, sampling):
    await asyncio.sleep(0.15)
    return {"final_text": "done", "model_version": "slow"}


def _alternating(row):
    return float(row["rollout_index"] % 2)  # every group splits, so every ask grows to k


def _one_situation(share):
    return wai.simulate(
        agent=_slow_agent, mode="rl", situations=1, budget=40, seed=0, grader=_alternating,
        advanced={"concurrency": 8, "idle_judge_share": share},
    )  # fmt: skip


def test_an_rl_pool_idle_on_verdicts_gets_the_add_situations_note():
    # One situation, k=8 under split: its first 4 rollouts run on 8 slots and the other 4
    # slots wait for their verdicts (a quarter of the run's slot time, or more).
    noted = _one_situation(0.1)
    assert len(noted.rows) == 8
    share = noted.search["idle_on_verdicts"]
    assert 0.15 < share <= 0.75, share
    note = noted.search["idle_on_verdicts_note"]
    assert note and "add situations" in note and "situations= (now 1)" in note
    assert note in noted.warnings
    quiet = _one_situation(0.9)
    assert quiet.search["idle_on_verdicts"] > 0.15
    assert quiet.search["idle_on_verdicts_note"] is None
    assert not any(w.startswith("idle_on_verdicts") for w in quiet.warnings)


def test_a_fixed_pool_has_no_idle_on_verdicts_share():
    data = wai.simulate(budget=5, seed=0)
    assert data.search["idle_on_verdicts"] is None and data.search["idle_on_verdicts_note"] is None
