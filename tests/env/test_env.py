"""``wai_exp.env``: a published RL record played as an online environment.

The records come from a real offline run (``simulate`` → ``task_checklist`` →
``rl_records`` with the run's world dials, as the publish stage calls it). The proof that the
environment is simulate's world and not a second one: every recorded rollout, its assistant
turns played again through ``reset``/``step``, gets the tool answers, the person's lines
and the reward its row got."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from wai_exp.env import EnvError, reset
from wai_exp.rows.export import SITUATION_FIELDS
from wai_exp.rows.model import step_messages
from wai_exp.rows.reader import read_steps
from wai_exp.score.grade.checklist import privileged_context


def sit(record):
    return record["reward_model"]["ground_truth"]["situation"]


def with_situation(record, situation):
    """``record`` with its ground truth's situation replaced (None: left out)."""
    truth = {k: v for k, v in record["reward_model"]["ground_truth"].items() if k != "situation"}
    if situation is not None:
        truth["situation"] = situation
    return {**record, "reward_model": {**record["reward_model"], "ground_truth": truth}}


def _row_of(rows, record):
    s = sit(record)
    return next(r for r in rows if r["scenario_id"] == s["scenario_id"] and r["seed"] == s["seed"])


def _replay(record, row):
    """The row's assistant turns played through the environment: ``(episode, environment
    messages, the row's own environment messages)``."""
    steps = read_steps(row)[1]
    episode = reset(record)
    got = []
    for msg in step_messages(steps):
        if msg["role"] == "assistant" and not episode.done:
            got += episode.step(msg).messages
    if not episode.done:
        episode.finish()
    want = [m for m in step_messages(steps) if m["role"] != "assistant"]
    return episode, got, want


def test_an_rl_record_carries_what_reset_needs_and_never_the_answer_key(run):
    rows, records = run
    assert records
    for record in records:
        s = sit(record)
        row = _row_of(rows, record)
        assert set(s) == set(SITUATION_FIELDS)
        assert s["prompt"] == row["prompt"] == record["prompt"][-1]["content"]
        assert s["scenario_dimensions"] == row["scenario_dimensions"]
        assert s["world_state"] == row["world_state"]
        assert s["faults"] == {"planned": row["faults"]["planned"], "rate": row["faults"]["rate"]}
        assert s["lineage"]["writer"] == row["lineage"]["writer"]
        assert s["world"] == row["lineage"]["world"]  # the world the row was played in
        text = json.dumps(record)
        assert "privileged" not in text and "hidden_state" not in text
        reference = privileged_context(row["scenario_dimensions"], row["faults"]).get("reference")
        assert reference is None or reference not in text


def test_recorded_rollouts_replay_to_the_same_answers_person_faults_and_reward(run):
    rows, records = run
    same_reward = same_text = fired = 0
    for record in records:
        row = _row_of(rows, record)
        episode, got, want = _replay(record, row)
        same_reward += episode.row["reward"] == row["reward"]
        # A malformed fault cuts the JSON of the arguments as given; the replay's arguments
        # come back through a JSON round trip (keys sorted), so only those texts may differ.
        malformed = {s["tool_call_id"] for s in episode.steps if s.get("status") == "malformed"}
        same_text += [m["role"] for m in got] == [m["role"] for m in want] and all(
            a == b or a.get("tool_call_id") in malformed for a, b in zip(got, want, strict=True)
        )
        fired += bool(episode.row["faults"]["fired"])
        assert episode.row["faults"]["fired"] == row["faults"]["fired"]
    assert same_reward == len(records)
    assert same_text == len(records)
    assert fired > 0  # faults fire in the environment as they did in simulate


def test_a_question_gets_the_persons_answer_and_a_closing_reply_gets_the_judges_reward(run):
    _, records = run
    record = next(r for r in records if sit(r)["scenario_dimensions"]["stance"] == "vague")
    episode = reset(record)
    assert [m["role"] for m in episode.prompt] == ["system", "user"]
    assert {t["function"]["name"] for t in episode.tools} >= {"lookup_order"}
    assert episode.id.startswith("ep-")
    asked = episode.step({"role": "assistant", "content": "Which order number is it?"})
    assert not asked.done and asked.messages[0]["role"] == "user" and asked.messages[0]["content"]
    looked = episode.step(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": {"order_id": "ORD-1"}},
                }
            ],
        }
    )
    assert looked.messages[0]["role"] == "tool" and not looked.done
    end = episode.step({"role": "assistant", "content": "Done."})
    assert end.done and end.reward in (0.0, 1.0) and end.reason
    assert end.info["judge"] == "task_checklist" and end.info["ended_by"] == "agent"
    assert "privileged" not in episode.row


@pytest.mark.parametrize(
    "mangle, words",
    [
        (lambda r: with_situation(r, None), "older run"),
        (lambda r: with_situation(r, {**sit(r), "version": 0}), "version 0"),
        (lambda r: with_situation(r, {**sit(r), "seed": None}), "'seed'"),
        (lambda r: {**r, "tools": []}, "no `tools`"),
        (lambda r: {"messages": [], "tools": r["tools"]}, "selection=rl"),
        (lambda r: [r], "got list"),
    ],
)
def test_reset_refuses_a_record_it_cannot_play_naming_the_fix(run, mangle, words):
    with pytest.raises(EnvError, match="(?s).*".join(words.split("|"))) as info:
        reset(mangle(run[1][0]))
    assert words in str(info.value)


def test_step_refuses_a_message_that_is_not_the_assistants_turn(run):
    episode = reset(run[1][0])
    for bad in ({"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}, "hello"):
        with pytest.raises(EnvError, match="assistant"):
            episode.step(bad)
    episode.step({"role": "assistant", "content": "Goodbye."})
    with pytest.raises(EnvError, match="is over; call reset"):
        episode.step({"role": "assistant", "content": "again"})


def test_a_parquet_row_with_json_string_columns_plays_as_the_jsonl_record(run):
    rows, records = run
    record = records[0]
    flat = with_situation({**record, "tools": json.dumps(record["tools"])}, json.dumps(sit(record)))
    a, _, _ = _replay(record, _row_of(rows, record))
    b, _, _ = _replay(flat, _row_of(rows, record))
    assert a.row["reward"] == b.row["reward"] and a.messages == b.messages


def _script(record):
    """A short fixed policy: look the order up, then close."""
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "function": {"name": "lookup_order", "arguments": '{"order_id": "ORD-10000"}'},
                }
            ],
        },
        {"role": "assistant", "content": "I looked it up; nothing more I can do."},
    ]


def test_64_concurrent_episodes_on_one_loop_interleave_and_match_a_sequential_run(run):
    _, records = run
    tasks = [records[i % len(records)] for i in range(64)]
    sequential = []
    for record in tasks:
        ep = reset(record)
        for msg in _script(record):
            res = ep.step(msg)
        sequential.append((res.reward, ep.messages))
    order: list[int] = []

    async def play(i, record):
        ep = reset(record)
        for msg in _script(record):
            res = await ep.astep(msg)
            order.append(i)
            await asyncio.sleep(0)  # a trainer awaiting its model between turns
        return res.reward, ep.messages

    async def main():
        return await asyncio.gather(*(play(i, r) for i, r in enumerate(tasks)))

    assert asyncio.run(main()) == sequential
    # Every episode took its first turn before any took its second: none waited on another.
    assert sorted(order[:64]) == list(range(64))


def test_64_episodes_on_64_threads_run_side_by_side(run):
    _, records = run
    tasks = [records[i % len(records)] for i in range(64)]
    barrier = threading.Barrier(64, timeout=60)
    results: list = [None] * 64

    def play(i):
        ep = reset(tasks[i])
        barrier.wait()  # all 64 episodes open at once
        for msg in _script(tasks[i]):
            res = ep.step(msg)
        results[i] = (res.reward, ep.messages)

    threads = [threading.Thread(target=play, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i, record in enumerate(tasks):
        ep = reset(record)
        for msg in _script(record):
            res = ep.step(msg)
        assert results[i] == (res.reward, ep.messages)


def test_a_record_made_against_an_mcp_server_keeps_no_secret_and_is_refused_by_reset(run):
    from wai_exp.pipeline.stages.publish import world_dials

    config = {
        "world": {"kind": "mcp", "url": "http://127.0.0.1:9/mcp", "env": {"TOKEN": "s3cret-1"},
                  "headers": {"Authorization": "Bearer s3cret-2"}},
        "knobs": {"patience": "normal", "avg_turns": 12, "user_temperature": None},
    }  # fmt: skip
    dials = world_dials(config)
    assert "s3cret" not in json.dumps(dials) and dials["options"]["kind"] == "mcp"
    record = run[1][0]
    with pytest.raises(EnvError, match="world=mcp"):
        reset(with_situation(record, {**sit(record), "world": dials}))
