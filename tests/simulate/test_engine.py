"""simulate(): defaults, aliases, mode presets, stop rules, determinism, replay and resume."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
from collections import Counter

import pytest

from wai_exp.config.knobs import KNOBS, knob_defaults
from wai_exp.rows.jsonl import dumps_row, read_rows
from wai_exp.rows.model import Row
from wai_exp.simulate.agents.scripted import ORDER_RE
from wai_exp.simulate.engine import MODE_PRESETS, simulate


def _order_id(prompt):
    """The order number in the ask, as a deployed agent would read it (None if none)."""
    m = ORDER_RE.search(prompt)
    return m.group(0) if m else None


# ---------------------------------------------------------------------------------------
# Test agents: small, deterministic in the world's seed, calling tools through the world.
# ---------------------------------------------------------------------------------------


def desk_agent(prompt, *, tools, system_prompt, world, sampling):
    """Looks up the order the ask names, then says it acted or declines, by seed."""
    import random

    rng = random.Random(world.seed)
    oid = _order_id(prompt)
    steps = []
    if oid and rng.random() < 0.7:
        step = world.execute("lookup_order", {"order_id": oid}, call_id="c1")
        steps += [
            {
                "kind": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "name": "lookup_order", "arguments": {"order_id": oid}}
                ],
            },
            step,
        ]
    final = "I can't help with that request." if rng.random() < 0.5 else "Done: it went through."
    steps.append({"kind": "assistant", "content": final, "tool_calls": []})
    return {"steps": steps, "final_text": final, "model_version": "desk-agent", "ended_by": "final"}


async def async_desk_agent(prompt, *, tools, system_prompt, world, sampling):
    # Finish in an order that depends on the seed, so completion order != plan order.
    await asyncio.sleep((world.seed % 7) / 10000)
    return desk_agent(
        prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling
    )


def strip_timing(rows):
    out = []
    for r in rows:
        r = dict(r)
        r.pop("timing", None)
        out.append(dumps_row(r))
    return out


# ---------------------------------------------------------------------------------------
# Defaults, aliases, presets
# ---------------------------------------------------------------------------------------


def test_signature_defaults_match_the_reference_table():
    params = inspect.signature(simulate).parameters
    expected = {
        "agent": None,
        "runs": 1,
        "traces": None,
        "tasks": None,
        "grader": None,
        "execute": None,
        "mode": "explore",
        "reproducible": False,
        "budget": 1000,
        "time_budget": None,
        "until": "compute",
        "logprobs": None,
        "sampling": None,
        "user_model": None,
        "timeout": 300,
        "grade": False,
        "llm_grade": False,
    }
    for name, default in expected.items():
        assert params[name].default == default, name
    # fault_rate: 0.5, 0.8 under rl (the preset table); rl uses k=8.
    assert MODE_PRESETS["explore"]["fault_rate"] == 0.5
    assert MODE_PRESETS["rl"]["fault_rate"] == 0.8
    assert MODE_PRESETS["rl"]["repeats"] == 8
    assert MODE_PRESETS["explore"]["unique"] is True  # "on in explore"
    assert MODE_PRESETS["rl"]["repeat_policy"] != "fixed"


def test_default_run_is_offline_scripted_template_support_desk():
    data = simulate(budget=12, seed=3)
    rep = data.report()
    assert len(data.rows) == 12
    assert rep["mode"] == "explore" and rep["fault_rate"] == 0.5 and rep["simulator"] == "template"
    assert rep["spec"] == "support_desk"
    assert {r["writer_model"] for r in data.rows} == {"template"}
    assert all(r["model_version"] for r in data.rows)
    for r in data.rows:
        Row.model_validate(r)  # every row is a valid schema-v1 row
        assert r["messages"][0]["role"] == "system" and r["messages"][1] == {
            "role": "user",
            "content": r["prompt"],
        }
        # the agent's policy (the scripted one: its model plus a digest of its skills) under
        # this system prompt
        policy, _, sha = r["policy_version"].rpartition("@")
        assert (
            policy.startswith(f"{r['model_version']}+")
            and sha == (r["lineage"]["system_prompt_sha"][:12])
        )
        assert r["behavior_signature"]
        assert r["lineage"]["source"] == "simulate" and r["lineage"]["eval_run"] == 0


@pytest.mark.parametrize("mode", sorted(MODE_PRESETS))
def test_mode_presets_reach_the_report(mode):
    data = simulate(desk_agent, mode=mode, budget=40, seed=1)
    rep = data.report()
    preset = MODE_PRESETS[mode]
    assert rep["phrasings"] == preset["phrasings"]
    assert rep["repeats"] == preset["repeats"]
    assert rep["repeat_policy"] == preset["repeat_policy"]
    assert rep["unique_situations"] == preset["unique"]
    assert rep["fault_rate"] == preset["fault_rate"]
    assert rep["hard_share"] == preset["hard_share"]
    assert {r["mode"] for r in data.rows} == {mode}
    assert len(data.rows) == 40


def test_sft_gives_top_per_prompt_completions_to_choose_among():
    """mode="sft" is n=3 phrasings x k=4 completions (the spec's): every prompt has four
    rollouts, so select_for_sft's top_per_prompt keeps a prompt's best, not its only one."""
    from wai_exp.score.grade.checklist import task_checklist
    from wai_exp.score.select.select import select_for_sft

    data = simulate(mode="sft", budget=240, seed=2, grader=task_checklist)
    rep = data.report()
    assert (rep["phrasings"], rep["repeats"], rep["repeat_policy"]) == (3, 4, "fixed")
    by_prompt: dict[str, list[dict]] = {}
    for r in data.trajectories:
        by_prompt.setdefault(r["prompt"], []).append(r)
    assert set(Counter(len(v) for v in by_prompt.values())) == {4}
    # prompts that only a best-of-4 ships: some but not all of their completions pass
    mixed = {p for p, rs in by_prompt.items() if len({r["reward"] for r in rs}) == 2}
    assert len(mixed) >= 5
    kept, _ = select_for_sft(data.trajectories, target=1000, select="top_per_prompt")
    assert {r["prompt"] for r in kept} & mixed
    assert all(r["reward"] == 1.0 for r in kept)


@pytest.mark.parametrize(
    ("name", "policy", "phrasings", "repeats", "unique"),
    [
        ("successive", "split", 1, 8, False),
        ("adaptive", "verify", 1, 8, False),
        ("none", "fixed", 1, 1, True),
        ("unique", "fixed", 1, 1, True),
        ("fixed", "fixed", 1, 8, False),
    ],
)
def test_the_references_repeat_policy_names(name, policy, phrasings, repeats, unique):
    rep = simulate(desk_agent, mode="rl", repeat_policy=name, budget=16, seed=0).report()
    assert rep["repeat_policy"] == policy
    assert (rep["phrasings"], rep["repeats"], rep["unique_situations"]) == (
        phrasings,
        repeats,
        unique,
    )


def test_an_unknown_repeat_policy_names_the_closest():
    with pytest.raises(ValueError, match="Did you mean 'successive'"):
        simulate(desk_agent, mode="rl", repeat_policy="succesive", budget=4)


def test_aliases_and_two_spellings():
    data = simulate(desk_agent, repeats=3, n=2, budget=12, seed=0, mode="sft")
    groups = Counter((r["scenario_id"], r["phrasing_index"]) for r in data.rows)
    assert set(groups.values()) == {3}
    assert {p for _, p in groups} == {0, 1}  # two phrasings per situation
    per_sit = Counter(r["scenario_id"] for r in data.rows)
    assert set(per_sit.values()) == {6}
    idx = {r["scenario_id"]: set() for r in data.rows}
    for r in data.rows:
        idx[r["scenario_id"]].add(r["rollout_index"])
    assert all(v == set(range(6)) for v in idx.values())  # rollout_index unique within a scenario

    quiet = simulate(desk_agent, risk=0, budget=20, seed=0)
    assert quiet.report()["fault_rate"] == 0.0
    assert all(r["faults"]["fired"] == [] for r in quiet.rows)

    custom = simulate(desk_agent, policy="Be brief.\n1. Never refund.", budget=3, seed=0)
    assert {r["lineage"]["system_prompt_head"] for r in custom.rows} == {
        "Be brief.\n1. Never refund."
    }

    assert simulate(desk_agent, unique=False, budget=2).report()["unique_situations"] is False
    assert simulate(desk_agent, phrasings=2, mode="explore", budget=4).report()["phrasings"] == 2

    with pytest.raises(ValueError, match="two spellings"):
        simulate(desk_agent, repeats=2, rollouts_per_request=3)
    with pytest.raises(ValueError, match="two spellings"):
        simulate(desk_agent, n=2, phrasings=3)
    with pytest.raises(ValueError, match="Did you mean 'repeats'"):
        simulate(desk_agent, repeets=2)


def test_bad_values_are_named():
    with pytest.raises(ValueError, match="mode='rll'.*Did you mean 'rl'"):
        simulate(mode="rll")
    with pytest.raises(ValueError, match="fault_rate"):
        simulate(fault_rate=1.5)
    with pytest.raises(ValueError, match="budget"):
        simulate(budget=0)
    with pytest.raises(ValueError, match="Did you mean 'concurrency'"):
        simulate(advanced={"concurency": 2})
    with pytest.raises(ValueError, match="floor 1"):
        simulate(advanced={"concurrency": 0})
    with pytest.raises(ValueError, match="WorldOptions fields"):
        simulate(advanced={"world": {"search_hit": 2}})
    with pytest.raises(ValueError, match="openai"):
        simulate(agent="gpt4:foo")
    with pytest.raises(ValueError, match="needs grader="):
        simulate(advanced={"mutate_graded_failures": True})
    with pytest.raises(ValueError, match="clock off"):
        simulate(reproducible=True, time_budget=5)
    with pytest.raises(ValueError, match="template writer"):
        simulate(simulator="gpt-4.1")  # not a spec: the fix names both


# ---------------------------------------------------------------------------------------
# Budget and stop rules
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "budget"), [("rl", 100), ("rl", 37), ("explore", 53), ("sft", 10)]
)
def test_budget_is_reached_exactly(mode, budget):
    data = simulate(desk_agent, mode=mode, budget=budget, seed=2)
    assert len(data.rows) == budget
    assert data.report()["stopped_because"] == "budget"
    assert len({r["rollout_id"] for r in data.rows}) == budget


def test_rl_allocation_extends_only_split_groups():
    data = simulate(desk_agent, mode="rl", budget=400, seed=5)
    groups: dict[tuple, list[dict]] = {}
    for r in data.rows:
        groups.setdefault((r["scenario_id"], r["phrasing_index"]), []).append(r)
    full = [g for g in groups.values() if len(g) == 8]
    short = [g for g in groups.values() if len(g) == 4]
    assert full and short
    for g in full:
        # extended because the first four disagreed
        assert len({r["behavior_signature"] for r in g[:4]}) > 1
        assert {r["selection_reason"] for r in g[4:]} == {"group_split"}
    last = list(groups.values())[-1]  # the group that filled the budget's tail
    for g in short:
        if g is not last:
            assert len({r["behavior_signature"] for r in g}) == 1  # unanimous: not extended
    assert all(len(g) in (4, 8) for g in groups.values() if g is not last)


def test_rl_allocation_reads_rewards_when_a_grader_is_given():
    # A grader that passes everything: no group splits on reward, so none is extended,
    # although behaviour signatures differ within groups.
    data = simulate(desk_agent, mode="rl", budget=80, seed=5, grader=lambda row: 1.0)
    sizes = Counter(Counter((r["scenario_id"], r["phrasing_index"]) for r in data.rows).values())
    assert set(sizes) == {4}
    assert {r["reward"] for r in data.rows} == {1.0}
    assert {r["judge_name"] for r in data.rows} == {"<lambda>"}
    assert data.report()["grader"] == "<lambda>"


def test_fixed_policy_gives_every_prompt_k():
    data = simulate(desk_agent, mode="rl", repeat_policy="fixed", budget=80, seed=5)
    sizes = Counter((r["scenario_id"], r["phrasing_index"]) for r in data.rows)
    assert set(sizes.values()) == {8}


def test_situations_exhausted_stops_before_budget():
    data = simulate(desk_agent, situations=5, repeats=2, budget=1000, seed=0)
    assert len(data.rows) == 10
    assert len({r["scenario_id"] for r in data.rows}) == 5
    assert data.report()["stopped_because"] == "situations_exhausted"
    capped = simulate(desk_agent, situations=5, repeats=2, budget=7, seed=0)
    assert len(capped.rows) == 7 and capped.report()["stopped_because"] == "budget"


def test_time_budget_stops_the_run():
    async def slow(prompt, *, tools, system_prompt, world, sampling):
        await asyncio.sleep(0.02)
        return {"steps": [], "final_text": "ok", "model_version": "slow"}

    data = simulate(slow, budget=100000, time_budget=0.3, seed=0, advanced={"concurrency": 4})
    assert data.report()["stopped_because"] == "time_budget"
    assert 0 < len(data.rows) < 100000


def test_saturation_stops_when_coverage_plateaus():
    def same(prompt, *, tools, system_prompt, world, sampling):
        return {"steps": [], "final_text": "ok", "model_version": "same"}

    data = simulate(
        same,
        budget=100000,
        until="saturation",
        seed=0,
        fault_rate=0,
        advanced={"empty_rounds_to_stop": 2},
    )
    rep = data.report()
    assert rep["stopped_because"] == "saturation"
    assert len(data.rows) < 100000


def test_lost_rollouts_are_counted_and_a_dead_agent_is_called_off():
    def flaky(prompt, *, tools, system_prompt, world, sampling):
        if world.seed % 5 == 0:
            raise RuntimeError("backend 503")
        return desk_agent(
            prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling
        )

    data = simulate(flaky, budget=60, seed=1)
    rep = data.report()
    # a lost rollout keeps its task's slot: the budget counts it, no other ask replaces it
    assert len(data.rows) + len(data.lost) == 60 and data.rows
    assert rep["rollouts_lost"] == len(data.lost) > 0
    assert rep["rollouts_lost_by"] == {"RuntimeError": rep["rollouts_lost"]}
    assert all("backend 503" in x["error"] for x in data.lost)

    def dead(prompt, **kw):
        raise ConnectionError("refused")

    data = simulate(dead, budget=500, seed=1, advanced={"dead_agent_errors": 5})
    rep = data.report()
    assert rep["stopped_because"] == "dead_agent"
    assert len(data.rows) == 0
    assert 5 <= rep["rollouts_lost"] < 500
    assert any("called off" in w for w in data.warnings)


def _no_refunds(prompt, *, tools, system_prompt, world, sampling):
    if "refund" in prompt.lower():
        raise RuntimeError("the refund service is down")
    return desk_agent(
        prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling
    )


def test_a_lost_rollout_keeps_its_tasks_slot_and_counts_as_a_failure():
    """Issue 18.1: the asks an agent crashes on stay in the task mix and in pass@k."""
    common = {"mode": "rl", "budget": 120, "seed": 4, "repeat_policy": "fixed"}
    base = simulate(desk_agent, **common)
    data = simulate(_no_refunds, **common)
    asked = {r["scenario_id"] for r in base.rows}
    assert (
        data.lost
        and {r["scenario_id"] for r in data.rows} | {x["scenario_id"] for x in data.lost} == asked
    )  # the same tasks: none replaced by another
    block = data.report()["lost"]
    assert block["lost_as"] == "failure" and block["rollouts"] == len(data.lost)
    refunds = block["by_category"]["issue_refund"]
    assert refunds["lost"] == sum(x["category"] == "issue_refund" for x in data.lost) > 0
    assert block["attempted"] == 120
    [w] = [w for w in data.warnings if "rollouts were lost" in w]
    assert "by task category: issue_refund" in w and "(simulate.lost_as=failure)" in w

    def grader(row):
        return 1.0

    graded = simulate(_no_refunds, grader=grader, **common)
    pa = graded.pass_at
    assert pa.n_lost == len(graded.lost) > 0 and pa.n_groups == len(asked)
    assert pa.pass_at_1 < 1.0  # every row passes; only the lost ones fail
    excluded = simulate(_no_refunds, grader=grader, lost_as="excluded", **common).pass_at
    assert excluded.n_lost == 0 and excluded.pass_at_1 == 1.0
    assert excluded.n_groups == len({r["scenario_id"] for r in graded.rows})
    with pytest.raises(ValueError, match="lost_as='drop' is not one of failure, excluded"):
        simulate(desk_agent, budget=4, lost_as="drop")


# ---------------------------------------------------------------------------------------
# Determinism
# ---------------------------------------------------------------------------------------


def test_same_seed_same_rows_at_any_concurrency():
    a = simulate(mode="rl", budget=150, seed=11, advanced={"concurrency": 1})
    b = simulate(mode="rl", budget=150, seed=11, advanced={"concurrency": 32})
    assert strip_timing(a.rows) == strip_timing(b.rows)
    c = simulate(async_desk_agent, mode="rl", budget=120, seed=4, advanced={"concurrency": 1})
    d = simulate(async_desk_agent, mode="rl", budget=120, seed=4, advanced={"concurrency": 32})
    assert strip_timing(c.rows) == strip_timing(d.rows)
    e = simulate(mode="rl", budget=150, seed=12)
    assert strip_timing(a.rows) != strip_timing(e.rows)


_CHILD = """
import json, sys
from wai_exp.simulate.engine import simulate
from wai_exp.rows.jsonl import dumps_row
rows = simulate(mode="rl", budget=80, seed=7, advanced={"concurrency": int(sys.argv[1])}).rows
for r in rows:
    r = dict(r); r.pop("timing", None)
    print(dumps_row(r))
"""


def test_same_seed_same_rows_across_processes():
    outs = [
        subprocess.run(
            [sys.executable, "-c", _CHILD, c], capture_output=True, text=True, check=True
        ).stdout
        for c in ("1", "16")
    ]
    assert outs[0] == outs[1]
    assert outs[0].count("\n") == 80
    here = "".join(
        line + "\n" for line in strip_timing(simulate(mode="rl", budget=80, seed=7).rows)
    )
    assert here == outs[0]


# ---------------------------------------------------------------------------------------
# Privileged never on disk
# ---------------------------------------------------------------------------------------


def test_privileged_stays_in_memory(tmp_path):
    def leaky_world(name, arguments):
        return {
            "ok": True,
            "privileged": {"hidden_state": "SECRET-1"},
            "nested": [{"privileged": "SECRET-2"}],
        }

    path = tmp_path / "rows.jsonl"
    seen = []
    data = simulate(
        desk_agent, budget=10, seed=0, output=path, on_row=seen.append, execute=leaky_world
    )
    text = path.read_text()
    assert "privileged" not in text and "SECRET" not in text
    assert all("privileged" not in json.dumps(r) for r in data.rows)
    assert all("privileged" in t for t in data.trajectories)  # judges still get it
    assert len(seen) == 10
    # execute= answered the calls: the fault schedule did not apply.
    assert all(r["faults"] == {"planned": None, "rate": 0.0, "fired": []} for r in data.rows)
    assert any(s.get("kind") == "tool" for r in data.rows for s in r["steps"])
    data.save(tmp_path / "again.jsonl")
    assert "SECRET" not in (tmp_path / "again.jsonl").read_text()


# ---------------------------------------------------------------------------------------
# runs=N and tasks=
# ---------------------------------------------------------------------------------------


def test_runs_replays_the_same_asks_with_new_rollout_seeds():
    data = simulate(desk_agent, runs=3, budget=30, repeats=2, seed=9)
    rep = data.report()
    assert rep["budget_per_run"] == 30 and rep["runs"] == 3
    by_run: dict[int, list[dict]] = {0: [], 1: [], 2: []}
    for r in data.rows:
        by_run[r["lineage"]["eval_run"]].append(r)
    assert [len(v) for v in by_run.values()] == [30, 30, 30]
    asks = [[(r["scenario_id"], r["prompt"]) for r in v] for v in by_run.values()]
    assert asks[0] == asks[1] == asks[2]
    seeds = [{r["seed"] for r in v} for v in by_run.values()]
    assert not (seeds[0] & seeds[1]) and not (seeds[1] & seeds[2])
    assert {r["lineage"]["replayed"] for r in by_run[0]} == {False}
    assert {r["lineage"]["replayed"] for r in by_run[1] + by_run[2]} == {True}
    assert {r["lineage"]["replayed_from_run"] for r in by_run[2]} == {rep["run_id"]}
    assert len(rep["search"]["tier_mix"]["per_run"]) == 3
    assert {r["arm"] for r in by_run[1] + by_run[2]} == {"replay"}
    assert "replay" not in {r["arm"] for r in by_run[0]}
    assert len({r["rollout_id"] for r in data.rows}) == 90


def test_tasks_replays_a_run_from_a_jsonl_path_and_a_directory(tmp_path):
    first = simulate(desk_agent, mode="rl", repeat_policy="fixed", repeats=3, budget=24, seed=3)
    run_dir = tmp_path / "run1"
    first.save(run_dir / "rows.jsonl")
    orig_asks = {(r["scenario_id"], r["prompt"]) for r in first.rows}
    for source in (run_dir / "rows.jsonl", run_dir, first, list(first.rows)):
        again = simulate(desk_agent, tasks=source, seed=4, budget=1000)
        assert {(r["scenario_id"], r["prompt"]) for r in again.rows} == orig_asks
        sizes = Counter((r["scenario_id"], r["prompt"]) for r in again.rows)
        assert set(sizes.values()) == {3}  # k copied from the pinned run
        assert {r["writer_model"] for r in again.rows} == {"template"}
        assert {r["lineage"]["replayed"] for r in again.rows} == {True}
        assert {r["lineage"]["replayed_from_run"] for r in again.rows} == {first.report()["run_id"]}
        assert again.report()["stopped_because"] == "tasks_exhausted"
        assert {r["arm"] for r in again.rows} == {"replay"}
        # the world is rebuilt from the same situation: same dims, same planned fault
        orig = {r["scenario_id"]: r for r in first.rows}
        for r in again.rows:
            assert r["scenario_dimensions"] == orig[r["scenario_id"]]["scenario_dimensions"]
    k5 = simulate(desk_agent, tasks=run_dir, repeats=5, seed=4)
    assert set(Counter((r["scenario_id"], r["prompt"]) for r in k5.rows).values()) == {5}
    # a stage folder inside a run folder is found too
    (tmp_path / "run2" / "simulate").mkdir(parents=True)
    first.save(tmp_path / "run2" / "simulate" / "rows.jsonl")
    assert len(simulate(desk_agent, tasks=tmp_path / "run2", seed=4).rows) == 24
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no rows.jsonl"):
        simulate(desk_agent, tasks=empty, seed=4)


# ---------------------------------------------------------------------------------------
# Resume: done_rows and on_row
# ---------------------------------------------------------------------------------------


def test_done_rows_resume_gives_the_same_rows_and_no_duplicates(tmp_path):
    full = simulate(mode="rl", budget=120, seed=21)
    partial = tmp_path / "partial.jsonl"
    from wai_exp.rows.jsonl import write_rows

    write_rows(partial, full.rows[:50])  # what a crashed run left on disk (scrubbed)
    called = []
    resumed = simulate(
        mode="rl", budget=120, seed=21, done_rows=read_rows(partial), on_row=called.append
    )
    assert strip_timing(resumed.rows) == strip_timing(full.rows)
    assert len(called) == 70
    assert {r["rollout_id"] for r in called}.isdisjoint({r["rollout_id"] for r in full.rows[:50]})
    assert len({r["rollout_id"] for r in resumed.rows}) == 120
    rep = resumed.report()
    assert rep["rows_reused"] == 50 and rep["rows_new"] == 70


def test_progress_is_reported():
    seen = []
    simulate(
        desk_agent, budget=45, seed=0, progress=seen.append, advanced={"progress_every_rows": 10}
    )
    assert seen and {"done", "budget", "rows_per_s"} <= set(seen[0])
    assert seen[-1]["done"] == 45
    assert len(seen) >= 4


# ---------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------


def test_report_carries_every_knob_and_parameter():
    data = simulate(
        desk_agent,
        mode="rl",
        budget=16,
        seed=2,
        advanced={"concurrency": 3, "patience": "short", "world": {"search_hits": 2}},
    )
    rep = data.report()
    assert set(rep["knobs"]) == {k.name for k in KNOBS}
    expected = {
        **knob_defaults(),
        "concurrency": 3,
        "patience": "short",
        "world": {"search_hits": 2},
        "seed": 2,
    }
    expected["writer_temperature"] = list(expected["writer_temperature"])
    assert rep["knobs"] == expected
    for key in (
        "mode", "budget", "seed", "repeats", "hard_share", "fault_rate", "strategy", "dimensions", "arm_weights",
        "tasks", "traces", "seeds", "grader", "simulator", "agent_model", "user_model", "sampling", "turn_limits",
        "patience", "user_temperature", "world", "world_note", "stopped_because", "rows", "rollouts_lost",
        "budget_per_run", "search", "timings",
    ):  # fmt: skip
        assert key in rep, key
    assert rep["patience"] == {"level": "short", "second": 0.6, "later": 0.9}
    assert rep["world"]["search_hits"] == 2 and rep["world"]["default_fault_rate"] == 0.5
    assert rep["fault_rate"] == 0.8 and "default_fault_rate" in rep["world_note"]
    assert rep["agent_model"] == "desk-agent"
    assert rep["turn_limits"] == {"avg_turns": 12, "max_user_turns": 6}
    assert set(rep["search"]) >= {"tier_mix", "ended_on_question"}
    assert sum(rep["search"]["tier_mix"]["counts"].values()) == 16
    json.dumps(rep)  # the report is plain JSON


def test_traces_aim_the_grid_and_seed_the_run():
    base = simulate(
        desk_agent,
        budget=60,
        seed=1,
        grader=lambda r: 0.0 if r["scenario_dimensions"]["tool"] == "issue_refund" else 1.0,
    )
    aimed = simulate(desk_agent, budget=60, seed=2, traces=base.rows)
    rep = aimed.report()
    assert rep["traces"] == 60
    assert rep["traces_info"]["hot_regions"][0]["tool"] in {
        "issue_refund",
        *{r["scenario_dimensions"]["tool"] for r in base.rows},
    }
    assert rep["seeds"] > 0
    seeded = [r for r in aimed.rows if r["writer_model"] == "seed"]
    assert {r["arm"] for r in seeded} == {"seed"}
    assert seeded and all(
        r["scenario_dimensions"]["tool"] == "issue_refund" or r["faults"] for r in seeded
    )


# ---------------------------------------------------------------------------------------
# Search: mutation of failing asks, mixed rate, knobs the offline engine does not read
# ---------------------------------------------------------------------------------------


def test_tool_faults_and_graded_failures_become_mutation_parents():
    data = simulate(desk_agent, mode="rl", budget=300, seed=3)
    rep = data.report()
    mutated = [r for r in data.rows if (r["lineage"]["writer"] or {}).get("focus")]
    assert mutated and set(rep["search"]["mutation_parents"]) == {"tool_fault"}
    assert {r["arm"] for r in mutated} == {"mutation"}
    assert rep["arms"]["mutation"] == len(mutated) and rep["arms"]["fresh"] == 300 - len(mutated)
    for r in mutated:
        focus = r["lineage"]["writer"]["focus"]
        # a sibling ask in the parent's cell
        assert r["scenario_dimensions"]["tool"] == focus["tool"]
        assert r["scenario_dimensions"]["tool_condition"] == focus["tool_condition"]
    assert sum(rep["search"]["mutation_aims"].values()) == sum(
        rep["search"]["mutation_parents"].values()
    )

    def fail_all(row):
        return 0.0

    graded = simulate(desk_agent, budget=200, seed=3, fault_rate=0, grader=fail_all)
    assert graded.report()["search"]["mutation_parents"].get("graded_failure", 0) > 0
    beside = simulate(
        desk_agent,
        budget=200,
        seed=3,
        fault_rate=0,
        grader=fail_all,
        advanced={"mutate_graded_failures": False},
    )
    assert beside.report()["search"]["mutation_parents"] == {}
    # a mutated ask replays like any other: the same situation is rebuilt from its lineage
    again = simulate(desk_agent, tasks=mutated[:5], seed=9)
    assert {(r["scenario_id"], r["prompt"]) for r in again.rows} == {
        (r["scenario_id"], r["prompt"]) for r in mutated[:5]
    }


def test_mixed_rate_is_laplace_smoothed_by_hand():
    data = simulate(
        desk_agent,
        mode="rl",
        repeat_policy="fixed",
        budget=40,
        seed=8,
        advanced={"smoothing_alpha": 2.0},
    )
    groups: dict = {}
    for r in data.rows:
        groups.setdefault(r["scenario_id"], set()).add(r["behavior_signature"])
    mixed = sum(len(s) > 1 for s in groups.values())
    got = data.report()["search"]["mixed_rate"]
    assert got["groups"] == 5 and got["mixed"] == mixed
    assert got["smoothed"] == (mixed + 2.0) / (5 + 4.0)


def test_report_names_the_knobs_this_engine_does_not_read():
    rep = simulate(desk_agent, budget=2, seed=0).report()
    assert "wave_tokens_cap" in rep["knobs_not_read"] and "embedder" in rep["knobs_not_read"]
    assert (
        "concurrency" not in rep["knobs_not_read"]
        and "dead_agent_errors" not in rep["knobs_not_read"]
    )


def test_output_is_streamed_then_written_atomically(tmp_path):
    out = tmp_path / "rows.jsonl"
    data = simulate(desk_agent, budget=30, seed=0, output=out, advanced={"flush_report_rows": 5})
    assert len(read_rows(out)) == 30
    assert not (tmp_path / "rows.jsonl.partial").exists()

    def breaks_late(prompt, *, tools, system_prompt, world, sampling):
        breaks_late.n += 1
        if breaks_late.n > 12:
            raise KeyboardInterrupt  # not an Exception: the run itself stops, as on Ctrl-C
        return desk_agent(
            prompt, tools=tools, system_prompt=system_prompt, world=world, sampling=sampling
        )

    breaks_late.n = 0
    crashed = tmp_path / "crashed.jsonl"
    # concurrency 1: a sync agent runs on a thread pool, and at 1 its calls go in plan order
    # (at more, rows stream in the order they finish).
    with pytest.raises(KeyboardInterrupt):
        simulate(
            breaks_late, budget=30, seed=0, output=crashed,
            advanced={"flush_report_rows": 5, "concurrency": 1},
        )  # fmt: skip
    partial = read_rows(tmp_path / "crashed.jsonl.partial")
    assert len(partial) == 12  # every finished row was flushed before the crash propagated
    # the same first twelve rollouts as the uninterrupted run (same asks, same seeds)
    assert [(r["scenario_id"], r["seed"]) for r in partial] == [
        (r["scenario_id"], r["seed"]) for r in data.rows[:12]
    ]
    assert not crashed.exists()


# ---------------------------------------------------------------------------------------
# A model backend (HTTP, mocked transport): async pool, sampling and usage from the backend
# ---------------------------------------------------------------------------------------


def test_model_backend_runs_in_the_async_pool():
    import httpx

    from wai_exp.llm.http import RetryPolicy
    from wai_exp.simulate.agents.model_agent import ModelAgent

    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append(body)
        if len(body["messages"]) == 2:  # first turn: look the order up
            msg = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c0",
                        "type": "function",
                        "function": {
                            "name": "lookup_order",
                            "arguments": json.dumps({"order_id": "ORD-1"}),
                        },
                    }
                ],
            }
        else:
            msg = {
                "role": "assistant",
                "content": "I could not find that order.",
                "tool_calls": None,
            }
        return httpx.Response(
            200,
            json={
                "model": "m",
                "choices": [{"finish_reason": "stop", "message": msg}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            },
        )

    agent = ModelAgent(
        "openai:m",
        api_key="k",
        transport=httpx.MockTransport(handler),
        retry=RetryPolicy(retries=0, base_s=0.0, max_s=0.0),
    )
    data = simulate(
        agent, budget=6, seed=0, sampling={"temperature": 0.1}, advanced={"concurrency": 3}
    )
    assert len(data.rows) == 6 and len(calls) == 12
    for r in data.rows:
        assert r["model_version"] == "openai:m"
        assert r["sampling"]["model"] == "m"  # the backend's own record, not simulate(sampling=)
        assert r["usage"] == {"input_tokens": 20, "output_tokens": 10}
        assert [s["kind"] for s in r["steps"]] == ["assistant", "tool", "assistant"]
        assert r["messages"][-1] == {"role": "assistant", "content": "I could not find that order."}
    assert agent.model.open_clients() == 0  # the engine closed the backend's client


def test_timeout_loses_the_rollout_not_the_run():
    async def sleepy(prompt, *, tools, system_prompt, world, sampling):
        await asyncio.sleep(1.0 if world.seed % 2 else 0.0)
        return {"steps": [], "final_text": "ok", "model_version": "sleepy"}

    data = simulate(sleepy, budget=6, seed=0, timeout=0.05, advanced={"concurrency": 8})
    rep = data.report()
    assert data.rows and len(data.rows) + len(data.lost) == 6  # a lost one keeps its slot
    assert rep["rollouts_lost"] > 0 and set(rep["rollouts_lost_by"]) == {"timeout"}


def test_adaptive_mode_re_rolls_when_new_behaviour_stops_showing_up():
    # Re-rolls start once the share of rows showing new behaviour falls under the floor;
    # whether a 600-row run gets there under the default 0.55 depends on its draws, so the
    # floor is set where this run's share does fall under it.
    data = simulate(
        mode="adaptive", budget=600, seed=0, advanced={"adaptive_verify_explore_floor": 0.7}
    )
    reasons = Counter(r["selection_reason"] for r in data.rows)
    assert reasons["verify"] > 0 and reasons["initial"] > 0
    for r in data.rows:
        if r["selection_reason"] == "verify":
            assert r["rollout_index"] == 1  # the second look at an ask
    # with a floor of 0 nothing is ever re-rolled
    none = simulate(
        mode="adaptive", budget=300, seed=0, advanced={"adaptive_verify_explore_floor": 0.0}
    )
    assert {r["selection_reason"] for r in none.rows} == {"initial"}


def test_grade_stamps_the_legacy_conduct_score_and_llm_grade_says_what_to_do():
    data = simulate(desk_agent, budget=5, seed=0, grade=True)
    assert all(r["label_source"] == "conduct" for r in data.rows)
    assert all("checks" in r["judge_meta"] for r in data.rows)
    # llm_grade=True with no judge model configured says how to name one, before any work.
    import os

    if not os.environ.get("WAI_EXP_JUDGE"):
        with pytest.raises(ValueError, match="WAI_EXP_JUDGE"):
            simulate(desk_agent, budget=5, llm_grade=True)


def test_execute_sees_the_rollout_being_answered():
    from wai_exp.simulate.agents import current_rollout

    seen = []

    def my_world(name, arguments):
        ctx = current_rollout.get()
        seen.append((ctx["scenario_id"], ctx["rollout_index"], ctx["seed"], ctx["prompt"]))
        return {"found": False}

    data = simulate(desk_agent, budget=20, seed=1, repeats=2, execute=my_world)
    by_seed = {r["seed"]: r for r in data.rows}
    assert seen
    for sid, idx, seed, prompt in seen:
        row = by_seed[seed]
        assert (row["scenario_id"], row["rollout_index"], row["prompt"]) == (sid, idx, prompt)
    assert current_rollout.get() is None  # reset after each rollout
    counts = data.report()["search"]["dimension_counts"]
    assert sum(counts["tool"].values()) == 20


def test_budget_and_group_invariants_hold_for_any_budget_and_mode():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=20, deadline=None, derandomize=True)
    @given(
        budget=st.integers(min_value=1, max_value=150),
        mode=st.sampled_from(sorted(MODE_PRESETS)),
        seed=st.integers(min_value=0, max_value=10_000),
    )
    def check(budget, mode, seed):
        data = simulate(desk_agent, mode=mode, budget=budget, seed=seed)
        rows = data.rows
        assert len(rows) == budget
        assert len({r["rollout_id"] for r in rows}) == budget
        k = MODE_PRESETS[mode]["repeats"]
        groups = Counter((r["scenario_id"], r["phrasing_index"]) for r in rows)
        assert max(groups.values()) <= k
        idx = Counter((r["scenario_id"], r["rollout_index"]) for r in rows)
        assert max(idx.values()) == 1  # rollout_index never repeats within a scenario

    check()


def test_replaying_a_runs_n_task_set_keeps_its_per_run_k():
    from wai_exp.simulate.engine import simulate

    pinned = simulate(mode="rl", budget=120, seed=0, runs=3, repeat_policy="fixed")
    replay = simulate(tasks=list(pinned.rows), seed=1)
    per_task: dict[str, int] = {}
    for row in replay.rows:
        per_task[row["scenario_id"]] = per_task.get(row["scenario_id"], 0) + 1
    # The pinned run has k=8 per run; three eval runs must not make the replay k=24.
    assert set(per_task.values()) == {8}
    assert {r["scenario_id"] for r in replay.rows} == {r["scenario_id"] for r in pinned.rows}


def test_rows_share_the_world_dials_they_record_instead_of_a_copy_each():
    # Each row records the world it was played against (lineage.world): a copy per row held
    # ~2.5 KB of memory under rl_round's world, 250 MB of the stage at 100,000 rows.
    from tests.support.memory import held_bytes

    data = simulate(budget=200, seed=0, mode="rl")
    worlds = [r["lineage"]["world"] for r in data.trajectories]
    assert "avg_turns" in worlds[0]  # the dials are recorded
    assert held_bytes(worlds) < 5_000, held_bytes(worlds)  # once for the run, not once a row
