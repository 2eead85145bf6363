"""The knob table tells the truth: every knob set to a non-default value moves the rows
exactly where its ``reads`` label says it does, and leaves them identical where it says
it does not. One case per knob, parametrized over the table; small budgets keep it fast."""

from __future__ import annotations

import asyncio
import functools
import json
import time

import pytest

import wai_exp as wai
from tests.support.specs import STATUS_TOOL
from wai_exp.config.knobs import KNOBS, NOT_READ_LABELS, READERS, knob_defaults
from wai_exp.simulate.agents import ScriptedAgent

#: Non-default values that matter for the knob's reader (the generic rule covers the rest).
PROBES = {
    "seed": 1,
    "avg_turns": 2,
    "patience": "endless",
    "user_temperature": 2.0,
    "world": {"exists_share": 0.0},
    "pass_threshold": 0.95,
    "mutate_graded_failures": False,
    "smoothing_alpha": 3.0,
    "allocation_gain": 0.0,
    "allocation_tool_weight": 0.0,
    "allocation_condition_weight": 1.0,
    "adaptive_verify_explore_floor": 1.0,
    "stop_grace": 0.0,
    "empty_rounds_to_stop": 1,
    "saturation_window": 10,
    "saturation_growth": 0.5,
    "dead_agent_errors": 2,
    "dead_agent_budget_multiple": 0.0,
    "closing_margin": 1000.0,
    "closing_window_rollouts": 1,
    "writer_buffer_cap": 5,
    "failing_seeds_cap": 0,
    "select_oversample": 1,
    "writer_context_parents": 0,
    "concurrency": 1,
    "writer_temperature": 0.2,
    "embedder": "hash",  # the only embedder: checked for "identical" with the default
    "progress_every_rows": 1,
    "progress_every_s": 0.0,
    "flush_report_rows": 1,
    "flush_report_s": 0.0,
    "offline_bounce_limit": 0,
    "offline_bounce_stride": 5,
}


def _probe(k):
    if k.name in PROBES:
        return PROBES[k.name]
    if k.type == "int":
        return k.default + 1 if k.hi is None or k.default + 1 <= k.hi else k.default - 1
    if k.type == "float":
        up = k.default * 2 + 0.05
        return up if k.hi is None or up <= k.hi else (k.default + (k.lo or 0.0)) / 2
    raise AssertionError(f"no probe value for {k.name} ({k.type}); add one to PROBES")


# ---- the agents and inputs each reader needs -----------------------------------------


def _grader(row):
    # Fails asks the tool faults do not already mark, so graded failures are their own parents.
    return 0.2 if row["scenario_dimensions"]["tool"] == "issue_refund" else 0.9


_SCRIPTED = ScriptedAgent()


async def _scripted(prompt, *, tools, system_prompt, world, sampling):
    return await _SCRIPTED(
        prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling
    )


async def _chatty(prompt, *, tools, system_prompt, world, sampling):
    """Asks the person to confirm up to three times, then answers as the scripted agent: a
    run where the person's patience, turn limit and temperature all show."""
    steps = []
    for _ in range(3):
        question = "Can you confirm you want me to go ahead?"
        steps.append({"kind": "assistant", "content": question, "tool_calls": []})
        answer = world.ask_user(question)
        if answer is None:
            return {"steps": steps, "final_text": question, "model_version": "chatty"}
        steps.append({"kind": "user", "content": answer})
    out = await _scripted(
        prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling
    )
    return {**out, "steps": steps + list(out["steps"])}


@functools.cache
def _traces():
    rows = wai.simulate(mode="rl", budget=40, seed=7, grader=_grader).rows
    return tuple(json.dumps(r) for r in rows)


class _SlowFirst:
    """``slow`` slow rollouts, then fast ones: the clock's median moves with the window."""

    def __init__(self, slow=3):
        self.calls = 0
        self.slow = slow

    async def __call__(self, prompt, *, tools, system_prompt, world, sampling):
        self.calls += 1
        if self.calls <= self.slow:
            time.sleep(0.15)  # blocking on purpose: the rollout's own wall time
        return await _scripted(
            prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling
        )


async def _slow_async(prompt, *, tools, system_prompt, world, sampling):
    await asyncio.sleep(0.4)
    return {"final_text": "done", "model_version": "slow"}


class _Flaky:
    """Raises on its first three calls, then on every second one."""

    def __init__(self):
        self.calls = 0

    async def __call__(self, prompt, *, tools, system_prompt, world, sampling):
        self.calls += 1
        if self.calls <= 3 or self.calls % 2 == 0:
            raise RuntimeError("backend down")
        return await _scripted(
            prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling
        )


async def _async_scripted(prompt, *, tools, system_prompt, world, sampling):
    await asyncio.sleep((world.seed % 5) / 5000)  # finish out of plan order
    return await _scripted(
        prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling
    )


def _plain():
    # Small rounds, so later writer batches (and mutations) happen inside the budget.
    return {"mode": "rl", "budget": 40, "seed": 0, "advanced": {"writer_buffer_cap": 8}}


#: Per label: the simulate() call the knob's reader acts in (same call with and without it).
SCENARIOS = {
    "rows": _plain,
    "rows_follow_ups": lambda: {
        "agent": _chatty,
        "mode": "rl",
        "budget": 60,
        "seed": 0,
        "advanced": {"writer_buffer_cap": 8},
    },
    "rows_grader": lambda: {**_plain(), "grader": _grader, "advanced": {"writer_buffer_cap": 8}},
    "rows_traces": lambda: {
        "budget": 30,
        "seed": 2,
        "traces": [json.loads(r) for r in _traces()],
    },
    "rows_adaptive": lambda: {"mode": "adaptive", "budget": 60, "seed": 0},
    "rows_saturation": lambda: {
        "mode": "rl",
        "budget": 120,
        "seed": 0,
        "until": "saturation",
        "advanced": {"writer_buffer_cap": 4},
    },
    "rows_failing_agent": lambda: {
        "agent": _Flaky(),
        "budget": 20,
        "seed": 0,
        "advanced": {"concurrency": 1},
    },
    "rows_repeats": lambda: {
        "tools": [STATUS_TOOL],
        "system_prompt": "R1. Be kind.",
        "budget": 500,
        "seed": 0,
        "advanced": {"world": {"first_names": ["Ann"], "last_names": ["Lee"]}},
    },
    "schedule": lambda: {"agent": _async_scripted, "budget": 40, "seed": 0, "mode": "rl"},
    "report": _plain,
    "progress": lambda: {**_plain(), "progress": lambda info: None},
    "tick": lambda: {**_plain(), "progress": lambda info: None},
    "output": _plain,
    "model_writer": _plain,
    "model_calls": _plain,
    "unread": _plain,
}


def _lookahead_bound():
    return {
        "mode": "rl",
        "budget": 60,
        "seed": 0,
        "advanced": {"writer_buffer_cap": 8, "concurrency": 1},
    }


#: Knobs whose effect needs a particular run: mutations of faulted asks (the scripted agent
#: in rl mode), or a clock (the row set then depends on it).
KNOB_SCENARIOS = {
    # The plateau is read once a window has landed, and the rows planned by then still land:
    # a short window, well inside the budget.
    "saturation_window": lambda: {
        "mode": "rl",
        "budget": 200,
        "seed": 0,
        "until": "saturation",
        "advanced": {"writer_buffer_cap": 4},
    },
    "saturation_growth": lambda: {
        "mode": "rl",
        "budget": 200,
        "seed": 0,
        "until": "saturation",
        "advanced": {"writer_buffer_cap": 4, "saturation_window": 30},
    },
    # Lost rollouts spend budget slots: the run must lose more than dead_agent_errors (16).
    "dead_agent_budget_multiple": lambda: {**SCENARIOS["rows_failing_agent"](), "budget": 40},
    # The lookahead (waves x max(cap, concurrency)) binds only when it is under the budget.
    "writer_buffer_waves": lambda: _lookahead_bound(),
    "writer_buffer_cap": lambda: _lookahead_bound(),
    "stop_grace": lambda: {
        "agent": _slow_async,
        "budget": 8,
        "seed": 0,
        "time_budget": 0.2,
        "advanced": {"concurrency": 4, "writer_buffer_cap": 4},
    },
    "closing_margin": lambda: {
        "agent": _SlowFirst(),
        "budget": 12,
        "seed": 0,
        "time_budget": 60,
        "advanced": {"writer_buffer_cap": 4, "closing_margin": 1.0, "concurrency": 1},
    },
    # Six slow rollouts keep the default window's median slow until the 8 planned ones
    # (the lookahead) have landed with no group opened: the clock ends the run; a window
    # of one reads the fast rollouts' median and keeps opening groups to the budget.
    "closing_window_rollouts": lambda: {
        "agent": _SlowFirst(slow=6),
        "budget": 12,
        "seed": 0,
        "time_budget": 60,
        "advanced": {"writer_buffer_cap": 4, "closing_margin": 1000.0, "concurrency": 1},
    },
}


def _rows(data):
    return [
        json.dumps({k: v for k, v in r.items() if k != "timing"}, sort_keys=True) for r in data.rows
    ]


def _run(kwargs, knob_name=None, value=None):
    kwargs = dict(kwargs)
    advanced = dict(kwargs.pop("advanced", {}))
    if knob_name == "seed":
        kwargs.pop("seed", None)  # seed= would win over advanced["seed"]
    if knob_name is not None:
        advanced[knob_name] = value
    return wai.simulate(**kwargs, advanced=advanced)


def test_every_knob_has_one_reader_label_and_the_report_agrees():
    assert {k.reads for k in KNOBS} <= set(READERS)
    data = wai.simulate(budget=3, seed=0)
    not_read = {k.name for k in KNOBS if k.reads in NOT_READ_LABELS}
    assert set(data.report()["knobs_not_read"]) == not_read


@pytest.mark.parametrize("k", KNOBS, ids=[k.name for k in KNOBS])
def test_knob_moves_the_rows_exactly_where_its_label_says(k, tmp_path):
    value = _probe(k)
    assert value != knob_defaults()[k.name] or k.name == "embedder"
    make = KNOB_SCENARIOS.get(k.name) or SCENARIOS[k.reads]
    extra = {}
    if k.reads == "output":
        extra = {"output": tmp_path / "out.jsonl"}
    base = _run({**make(), **extra})
    moved = _run({**make(), **extra}, k.name, value)
    assert base.rows, "the scenario must land rows for the comparison to mean anything"
    assert moved.report()["knobs"][k.name] == json.loads(json.dumps(value))  # recorded as given
    if k.reads.startswith("rows"):
        assert _rows(moved) != _rows(base), f"{k.name} is labelled {READERS[k.reads]!r}"
    else:
        assert _rows(moved) == _rows(base), f"{k.name} is labelled {READERS[k.reads]!r}"


def test_report_and_stream_readers_show_where_their_label_says(tmp_path):
    # smoothing_alpha: the report's smoothed mixed rate
    a = wai.simulate(mode="rl", budget=40, seed=0).search["mixed_rate"]
    b = wai.simulate(mode="rl", budget=40, seed=0, advanced={"smoothing_alpha": 3.0})
    assert b.search["mixed_rate"]["smoothed"] != a["smoothed"]
    # progress_every_rows: how many progress lines the callback gets
    lines = {1: [], 10: []}
    for every, seen in lines.items():
        wai.simulate(budget=20, seed=0, progress=seen.append,
                     advanced={"progress_every_rows": every, "progress_every_s": 1e6})  # fmt: skip
    assert len(lines[1]) > len(lines[10])
    # dead_agent_errors: an agent that fails at first is called off sooner
    early = wai.simulate(
        _Flaky(), budget=20, seed=0, advanced={"dead_agent_errors": 2, "concurrency": 1}
    )
    assert early.stopped_because == "dead_agent" and len(early.rows) == 0
