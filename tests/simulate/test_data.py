"""SimulationData: rows vs trajectories, save/output, report, pass_at."""

from __future__ import annotations

import json

from wai_exp.rows.jsonl import read_rows
from wai_exp.simulate.agents.scripted import ORDER_RE
from wai_exp.simulate.data import RowList, SimulationData
from wai_exp.simulate.engine import simulate


def _order_id(prompt):
    """The order number in the ask, as a deployed agent would read it (None if none)."""
    m = ORDER_RE.search(prompt)
    return m.group(0) if m else None


def desk_agent(prompt, *, tools, system_prompt, world, sampling):
    """Deterministic in the world's seed: looks the order up, then acts or declines."""
    import random

    rng = random.Random(world.seed)
    oid = _order_id(prompt)
    steps = []
    if oid and rng.random() < 0.7:
        call = {"id": "c1", "name": "lookup_order", "arguments": {"order_id": oid}}
        steps += [{"kind": "assistant", "content": "", "tool_calls": [call]}]
        steps.append(world.execute("lookup_order", {"order_id": oid}, call_id="c1"))
    final = "I can't help with that." if rng.random() < 0.5 else "Done: it went through."
    steps.append({"kind": "assistant", "content": final, "tool_calls": []})
    return {"steps": steps, "final_text": final, "model_version": "desk-agent"}


def _data(**kw):
    return simulate(desk_agent, budget=20, seed=1, **kw)


def test_rows_are_scrubbed_copies_and_callable():
    data = _data()
    assert isinstance(data.rows, RowList)
    assert data.rows() == data.rows
    assert len(data) == len(data.rows) == 20
    for traj, row in zip(data.trajectories, data.rows, strict=True):
        assert "privileged" in traj
        assert "privileged" not in row
        assert {k: v for k, v in traj.items() if k != "privileged"} == row
        assert row is not traj
    data.rows[0]["prompt"] = "changed"  # a copy: the trajectory is untouched
    assert data.trajectories[0]["prompt"] != "changed"


def test_save_and_output_write_the_same_rows(tmp_path):
    out = tmp_path / "out" / "rows.jsonl"
    data = _data(output=out)
    assert read_rows(out) == json.loads(json.dumps(data.rows))
    meta = json.loads((tmp_path / "out" / "rows.meta.json").read_text())
    assert meta["metadata"]["writer_model"] == "template"
    assert meta["report"]["rows"] == 20
    again = data.save(tmp_path / "again.jsonl")
    assert again.read_text() == out.read_text()


def test_report_is_a_copy_and_system_prompts_are_kept():
    data = _data()
    rep = data.report()
    rep["mode"] = "changed"
    assert data.report()["mode"] == "explore"
    assert data.system_prompts == [data.system_prompt]
    assert data.metadata["system_prompt_sha"] == data.rows[0]["lineage"]["system_prompt_sha"]
    assert data.tools and data.tools[0]["type"] == "function"
    assert "SimulationData(20 rows" in repr(data)


def test_pass_at_needs_grades():
    data = _data()
    assert data.pass_at is None
    assert any("pass_at is None" in w for w in data.warnings)

    def judge(row):
        return 1.0 if "Done" in row["final_text"] else 0.0

    graded = simulate(desk_agent, mode="rl", repeat_policy="fixed", budget=64, seed=1, grader=judge)
    assert graded.graded
    pa = graded.pass_at
    rewards = [r["reward"] for r in graded.rows]
    # pass@1 is the mean of per-task pass rates; every task has k=8 rows here, so it is the
    # plain mean of the rewards.
    assert abs(pa.pass_at_1 - sum(rewards) / len(rewards)) < 1e-9


def test_lost_records_ride_along():
    def sometimes(prompt, *, tools, system_prompt, world, sampling):
        if world.seed % 3 == 0:
            raise ValueError("bad")
        return desk_agent(
            prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling
        )

    data = simulate(sometimes, budget=15, seed=0)
    assert len(data.rows) + len(data.lost) == 15
    assert data.lost and all(
        set(x) >= {"rollout_id", "scenario_id", "error", "error_type"} for x in data.lost
    )
    assert isinstance(data, SimulationData)
