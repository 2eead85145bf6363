"""The RL records of one offline run, shared by the environment tests."""

from __future__ import annotations

import pytest

from wai_exp.rows.export import rl_records


@pytest.fixture(scope="session")
def run():
    """``(rows, records)``: an offline rl run's graded rows and its RL records."""
    import wai_exp as wai
    from wai_exp.config.knobs import knob_defaults
    from wai_exp.score.grade.checklist import task_checklist
    from wai_exp.simulate.spec import load_agent_spec

    spec = load_agent_spec(None)
    names = [t["function"]["name"] for t in spec.tools]
    rows = [dict(r) for r in wai.simulate(mode="rl", budget=160, seed=3).rows]
    for row in rows:
        row["reward"] = task_checklist(row, names)["reward"]
    knobs = knob_defaults()
    world = {
        "options": wai.WorldOptions().model_dump(mode="json", exclude={"fault_builders"}),
        **{k: knobs[k] for k in ("patience", "avg_turns", "user_temperature")},
    }
    records, _ = rl_records(rows, spec.tools, spec.system_prompt, world)
    return rows, records
