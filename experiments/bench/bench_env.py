"""Benchmark ``wai_exp.env``: CPU per step on the offline world, and 64 episodes at once.

The tasks are the RL records of an offline rl run (``simulate`` then ``rl_records``, as the
publish stage makes them). Each episode plays a fixed policy: look the order up, update it
(the task's own write tool, so faults fire where planned), ask the person a question, then
close. CPU time is ``time.process_time`` (this process, all threads), so the numbers are the
environment's own cost, not the shared machine's wall clock.

* step: a turn that does not end the episode (tool answers, the person's line);
* closing step: the turn that ends it (the row ``simulate`` would write, then ``task_checklist``);
* reset: a record already opened once (a GRPO group's next member) and a first open.

Run: ``python experiments/bench/run.py env``.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time


def _records(budget: int = 400) -> list[dict]:
    import wai_exp as wai
    from wai_exp.config.knobs import knob_defaults
    from wai_exp.rows.export import rl_records
    from wai_exp.simulate.spec import load_agent_spec

    spec = load_agent_spec(None)
    knobs = knob_defaults()
    world = {
        "options": wai.WorldOptions().model_dump(mode="json", exclude={"fault_builders"}),
        **{k: knobs[k] for k in ("patience", "avg_turns", "user_temperature")},
    }
    rows = wai.simulate(mode="rl", budget=budget, seed=0).rows
    return rl_records(rows, spec.tools, spec.system_prompt, world)[0]


def _policy(record: dict) -> list[dict]:
    ask = record["prompt"][-1]["content"]
    order = (re.findall(r"ORD-\d+", ask) or ["ORD-10000"])[0]
    tool = record["reward_model"]["ground_truth"]["target_tool"] or "lookup_order"

    def call(name: str, args: dict) -> dict:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": f"c-{name}", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        }

    return [
        call("lookup_order", {"order_id": order}),
        call(tool, {"order_id": order}),
        {"role": "assistant", "content": "Could you confirm the order number?"},
        {"role": "assistant", "content": "Thanks, that is all done."},
    ]


def bench_env() -> list[dict]:
    from wai_exp.env import reset

    records = _records()
    for record in records:  # warm the task cache: the reset of a GRPO group's next member
        reset(record)
    step_cpu: list[float] = []
    close_cpu: list[float] = []
    reset_cpu: list[float] = []
    for _ in range(5):
        for record in records:
            t0 = time.process_time()
            ep = reset(record)
            reset_cpu.append(time.process_time() - t0)
            for msg in _policy(record):
                if ep.done:
                    break
                t0 = time.process_time()
                res = ep.step(msg)
                (close_cpu if res.done else step_cpu).append(time.process_time() - t0)
    # A first open rebuilds the situation (the writer's draw again).
    from wai_exp.env import episode as episode_mod

    episode_mod._TASKS._items.clear()
    t0 = time.process_time()
    for record in records:
        reset(record)
    cold = (time.process_time() - t0) / len(records)

    tasks = [records[i % len(records)] for i in range(64)]

    async def play(record: dict) -> float | None:
        ep = reset(record)
        res = None
        for msg in _policy(record):
            if ep.done:
                break
            res = await ep.astep(msg)
            await asyncio.sleep(0)
        return res.reward if res else None

    async def main() -> list:
        return await asyncio.gather(*(play(r) for r in tasks))

    t0, c0 = time.perf_counter(), time.process_time()
    asyncio.run(main())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0

    def ms(values: list[float]) -> float:
        return round(1000 * sum(values) / len(values), 4)

    return [
        {
            "name": f"env step, mean CPU over {len(step_cpu)} steps (tool answers / person's line)",
            "value": ms(step_cpu),
            "unit": "ms",
            "target": 1.0,
            "better": "lower",
        },
        {
            "name": f"env step, p99 CPU over {len(step_cpu)} steps",
            "value": round(1000 * statistics.quantiles(step_cpu, n=100)[98], 4),
            "unit": "ms",
            "target": 1.0,
            "better": "lower",
        },
        {
            "name": f"env closing step (row + task_checklist), mean CPU over {len(close_cpu)}",
            "value": ms(close_cpu),
            "unit": "ms",
            "better": "lower",
        },
        {
            "name": f"env reset of an opened record, mean CPU over {len(reset_cpu)}",
            "value": ms(reset_cpu),
            "unit": "ms",
            "better": "lower",
        },
        {
            "name": f"env reset, first open (situation redrawn), mean CPU over {len(records)}",
            "value": round(1000 * cold, 4),
            "unit": "ms",
            "better": "lower",
        },
        {
            "name": "64 concurrent episodes on one asyncio loop, wall (4 turns each)",
            "value": round(1000 * wall, 2),
            "unit": "ms",
            "better": "lower",
            "cpu_ms": round(1000 * cpu, 2),
        },
    ]
