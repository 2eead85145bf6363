"""Benchmarks for the offline simulate domain: the template writer and the scripted agent
in its mock world (run via ``python experiments/bench/run.py writer``).

The engine's offline target is 2,000 rows/s overall, so each part here must be well under
500 microseconds a row: a situation is written once per k rollouts (k=8 under rl), and a
rollout is one ``RolloutWorld`` plus one ``ScriptedAgent`` call.
"""

from __future__ import annotations

import time


def _spec():
    from wai_exp.simulate.spec import load_agent_spec

    return load_agent_spec()


def bench_writer_situations() -> list[dict]:
    from wai_exp.simulate.writer import TemplateWriter

    spec = _spec()
    out = []
    for phrasings in (1, 3):
        w = TemplateWriter(
            spec.tools, spec.system_prompt, seed=0, hard_share=0.5, phrasings=phrasings
        )
        w.next_batch(200)  # warm-up
        n = 20_000
        t0 = time.perf_counter()
        w.next_batch(n)
        dt = time.perf_counter() - t0
        out.append(
            {
                "name": f"template writer, situations/s (phrasings={phrasings})",
                "value": n / dt,
                "unit": "1/s",
                "target": 10_000.0,
                "better": "higher",
            }
        )
    return out


def bench_scripted_agent() -> list[dict]:
    from wai_exp.simulate.agents.scripted import ScriptedAgent
    from wai_exp.simulate.world import RolloutWorld
    from wai_exp.simulate.writer import TemplateWriter

    spec = _spec()
    sits = TemplateWriter(spec.tools, spec.system_prompt, seed=0, hard_share=0.5).next_batch(1250)
    agent = ScriptedAgent()
    k = 8
    t0 = time.perf_counter()
    n = 0
    for i, sit in enumerate(sits):
        for j in range(k):
            world = RolloutWorld(sit, spec.tools, fault_rate=0.8, seed=i * k + j)
            agent.run(sit.prompt, tools=spec.tools, world=world)
            n += 1
    dt = time.perf_counter() - t0
    out = [
        {
            "name": "RolloutWorld + ScriptedAgent, rollouts/s (rl: k=8, fault 0.8)",
            "value": n / dt,
            "unit": "1/s",
            "target": 5_000.0,
            "better": "higher",
        }
    ]
    try:
        from wai_exp.score.grade.checklist import outcome_check
    except ImportError:
        return out
    t0 = time.perf_counter()
    rates = []
    for i, sit in enumerate(sits[:400]):
        wins = 0
        for j in range(k):
            world = RolloutWorld(sit, spec.tools, fault_rate=0.8, seed=i * k + j)
            res = agent.run(sit.prompt, tools=spec.tools, world=world)
            row = {
                "prompt": sit.prompt,
                "steps": res["steps"],
                "final_text": res["final_text"],
                "scenario_dimensions": sit.dims,
            }
            wins += outcome_check(row)[0] or 0
        rates.append(wins / k)
    out.append(
        {
            "name": "default scripted agent: rl asks with 8-sample pass rate in [0.2, 0.8]",
            "value": sum(0.2 <= r <= 0.8 for r in rates) / len(rates),
            "unit": "share",
            "target": 0.35,
            "better": "higher",
        }
    )
    out.append(
        {
            "name": "default scripted agent: pass@1 under rl (checklist outcome)",
            "value": sum(rates) / len(rates),
            "unit": "share",
            "target": None,
            "better": "higher",
            "seconds": time.perf_counter() - t0,
        }
    )
    return out
