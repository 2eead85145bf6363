"""``tasks=`` replays a task set under any system prompt, and rows any tool wrote: each
replayed ask is the ask, its world and its faults as the row recorded them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import wai_exp as wai
from wai_exp.domain.tools import is_write_tool
from wai_exp.rows.reader import read_steps
from wai_exp.simulate.world_setup import resolve_spec

ORDER = re.compile(r"\b[A-Z]{2,6}-\d{3,12}\b")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def probe(prompt, *, tools, system_prompt, world, sampling):
    """Looks up every record the ask names (and cancels the order when asked to): the
    tool answers on the row are what the world holds for this ask."""
    for oid in ORDER.findall(prompt):
        world.execute("lookup_order", {"order_id": oid})
    for email in EMAIL.findall(prompt):
        world.execute("lookup_account", {"email": email})
    if "cancel" in prompt.lower():
        for oid in ORDER.findall(prompt):
            world.execute("cancel_order", {"order_id": oid, "reason": "ordered by mistake"})
    return {"final_text": f"policy seen: {(system_prompt or '')[:40]}"}


def _answers(row):
    steps = read_steps(row)[1]  # whatever step shape the rows are written in
    return [(s["name"], s["arguments"], s["result"]) for s in steps if s["kind"] == "tool"]


def _desk_prompt() -> str:
    return resolve_spec(None, None, None)[2]


def _without_rule(prompt: str, number: int) -> str:
    kept = [line for line in prompt.splitlines() if not line.startswith(f"{number}. ")]
    assert len(kept) == len(prompt.splitlines()) - 1
    return "\n".join(kept)


@pytest.fixture(scope="module")
def first():
    # fault_rate 0: the probe's answers are the world's records, never a fault's text
    return wai.simulate(
        probe, mode="rl", repeat_policy="fixed", repeats=2, budget=48, seed=11, fault_rate=0
    )


@pytest.mark.parametrize(
    "new_prompt",
    [_without_rule(_desk_prompt(), 4), _without_rule(_desk_prompt(), 1), "You are terse."],
    ids=["drops the other-customer rule", "drops the look-up rule", "no policy at all"],
)
def test_a_task_set_replays_under_a_new_system_prompt_with_the_same_asks_and_worlds(
    first, new_prompt
):
    # Was: ValueError "situation sit-... could not be rebuilt (the writer now draws ...)".
    again = wai.simulate(probe, tasks=first.rows, system_prompt=new_prompt, seed=12)
    orig = {(r["scenario_id"], r["prompt"]): r for r in first.rows}
    assert {(r["scenario_id"], r["prompt"]) for r in again.rows} == set(orig)
    assert len(again.rows) == len(first.rows)
    for r in again.rows:
        before = orig[(r["scenario_id"], r["prompt"])]
        # the ask's cell and fault plan as recorded, and the very records it is about
        assert r["scenario_dimensions"] == before["scenario_dimensions"]
        assert r["faults"]["planned"] == before["faults"]["planned"]
        assert _answers(r) == _answers(before)
        # ... under the new prompt, which the agent saw and the row names
        assert r["messages"][0] == {"role": "system", "content": new_prompt}
        assert r["lineage"]["system_prompt_head"] == new_prompt[:120]
        assert r["final_text"] == f"policy seen: {new_prompt[:40]}"
        assert r["lineage"]["replayed"] is True
    assert again.report()["tasks_info"]["facts_from"] == {"writer": len(orig), "row": 0}


# Rows another tool wrote, by hand: the reference engine's flat row (row-v1 steps, top-level
# stance / world_state, faults as a plan), an OpenAI chat line with no ids at all, and a
# row whose record is missing.
FOREIGN = [
    {
        "schema_version": "1",
        "scenario_id": "ref-0001",
        "prompt": "Where is my order NW-48213? It still hasn't arrived.",
        "stance": "direct",
        "tier": "standard",
        "world_state": "exists",
        "steps": [
            {
                "tool": "lookup_order",
                "arguments": {"order_id": "NW-48213"},
                "result": {
                    "order_id": "NW-48213",
                    "status": "shipped",
                    "total": 84.5,
                    "items": [{"product": "cast iron skillet", "qty": 1, "price": 84.5}],
                    "email": "dana.reyes@example.org",
                    "shipping_address": "12 Elm Street, Springfield",
                },
            },
            {"text": "Your order NW-48213 has shipped."},
        ],
        "final_text": "Your order NW-48213 has shipped.",
        "reward": 1,
    },
    {
        "messages": [
            {"role": "system", "content": "You are a helpful agent."},
            {"role": "user", "content": "Please cancel order NW-77120; I ordered it by mistake."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {
                            "name": "cancel_order",
                            "arguments": '{"order_id": "NW-77120"}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"error": "internal_error"}'},
            {"role": "assistant", "content": "Sorry, the cancellation did not go through."},
        ],
        "scenario_dimensions": {
            "tool": "cancel_order",
            "stance": "direct",
            "world_state": "exists",
        },
        "faults": {"planned": {"tool": "cancel_order", "mode": "error"}, "rate": 1.0},
    },
    {
        "task_id": "ref-0003",
        "prompt": "Can you check the status of order NW-55555?",
        "steps": [{"text": "I could not find that order."}],
        "final_text": "I could not find that order.",
        "scenario_dimensions": {
            "tool": "lookup_order",
            "stance": "direct",
            "world_state": "missing",
        },
    },
]
ASKS = [
    "Where is my order NW-48213? It still hasn't arrived.",
    "Please cancel order NW-77120; I ordered it by mistake.",
    "Can you check the status of order NW-55555?",
]


def _check_foreign_replay(data) -> None:
    rows = {r["prompt"]: r for r in data.rows}
    assert set(rows) == set(ASKS)
    # 1: the record the ask names holds what the other tool's lookup showed
    (name, args, result), *_ = _answers(rows[ASKS[0]])
    assert (name, args) == ("lookup_order", {"order_id": "NW-48213"})
    assert result["status"] == "shipped" and result["total"] == 84.5
    assert result["email"] == "dana.reyes@example.org"
    assert result["shipping_address"] == "12 Elm Street, Springfield"
    assert rows[ASKS[0]]["scenario_id"] == "ref-0001"  # pairs with the original by task
    assert rows[ASKS[0]]["scenario_dimensions"]["world_state"] == "exists"
    # 2: the planned fault fires at the recorded rate (1.0): the cancel fails, as recorded
    cancel = rows[ASKS[1]]
    assert cancel["faults"]["planned"] == {"tool": "cancel_order", "mode": "error"}
    assert cancel["faults"]["rate"] == 1.0
    assert [f["tool"] for f in cancel["faults"]["fired"]] == ["cancel_order"]
    assert _answers(cancel)[0][2]["order_id"] == "NW-77120"  # the lookup found the order
    # 3: the missing record is missing
    assert _answers(rows[ASKS[2]])[0][2]["error"] == "not_found"
    assert rows[ASKS[2]]["scenario_id"] == "ref-0003"
    assert {r["writer_model"] for r in data.rows} == {"pinned"}
    assert {r["arm"] for r in data.rows} == {"replay"}
    assert data.report()["tasks_info"]["facts_from"] == {"writer": 0, "row": 3}


def test_rows_another_tool_wrote_replay_from_a_file(tmp_path: Path):
    # Was: ValueError "tasks: every row needs scenario_id and prompt" (then "has no
    # lineage.writer (it was not written by this engine's template writer)").
    path = tmp_path / "theirs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in FOREIGN))
    data = wai.simulate(probe, tasks=str(path), system_prompt="You are terse.", seed=1)
    _check_foreign_replay(data)


def test_rows_another_tool_wrote_replay_from_a_list():
    _check_foreign_replay(wai.simulate(probe, tasks=FOREIGN, seed=1))


def test_a_passed_fault_rate_replaces_the_recorded_one():
    data = wai.simulate(probe, tasks=FOREIGN, seed=1, fault_rate=0)
    cancel = next(r for r in data.rows if r["prompt"] == ASKS[1])
    assert cancel["faults"]["rate"] == 0.0 and cancel["faults"]["fired"] == []
    assert data.report()["tasks_info"]["fault_rate"] == 0.0


def test_a_foreign_replay_is_the_same_world_every_time():
    # The records are the row's, whatever the run's seed (a fault's text is the rollout's).
    a = wai.simulate(probe, tasks=FOREIGN, seed=1)
    b = wai.simulate(probe, tasks=FOREIGN, seed=2)
    lookups = [[x for x in _answers(r) if x[0].startswith("lookup")] for r in a.rows]
    assert lookups == [[x for x in _answers(r) if x[0].startswith("lookup")] for r in b.rows]


def test_a_row_without_an_ask_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"tasks\[1\].*no ask|user turn"):
        wai.simulate(
            probe, tasks=[FOREIGN[0], {"messages": [{"role": "assistant", "content": "hi"}]}]
        )


def _reads(row) -> dict:
    """The answers a row's agent read before it changed anything: the world it found."""
    out: dict = {}
    for name, args, result in _answers(row):
        if is_write_tool(name):
            break
        if isinstance(result, dict) and not result.get("error"):
            out.setdefault((name, json.dumps(args, sort_keys=True)), result)
    return out


def test_rows_without_writer_lineage_rebuild_the_world_the_agent_found():
    # Our own rows with lineage dropped stand for rows another tool wrote: the records are
    # rebuilt from the ask and the recorded answers alone (never from what the agent's own
    # write left behind), so every lookup the replay repeats reads what the original read.
    first = wai.simulate(mode="rl", repeat_policy="fixed", repeats=1, budget=160, seed=31)
    theirs = [{**r, "lineage": {}} for r in first.rows]
    again = wai.simulate(tasks=theirs, system_prompt="You are terse.", seed=32)
    assert again.report()["tasks_info"]["facts_from"] == {"writer": 0, "row": 160}
    orig = {r["scenario_id"]: r for r in first.rows}
    same = total = 0
    for r in again.rows:
        a, b = _reads(orig[r["scenario_id"]]), _reads(r)
        for key in a.keys() & b.keys():
            total += 1
            same += a[key] == b[key]
    assert total >= 40 and same == total, (same, total)
