"""from_row / to_row: a row split into Task, Rollout, Judgment and Marker and flattened back,
exactly, for rows simulate wrote, rows other tools wrote, and rows from before the stamp."""

from __future__ import annotations

import json

import pytest

import wai_exp as wai
from wai_exp.rows.schema import Judgment, Marker, Rollout, Task


def test_every_simulated_row_round_trips_exactly_in_memory_and_on_disk(tmp_path):
    def judge(row):
        return {"reward": float(bool(row["steps"])), "markers": {"called_a_tool": 1.0}}

    data = wai.simulate(mode="rl", budget=30, seed=5, grader=judge)
    data.save(tmp_path / "rows.jsonl")
    on_disk = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    for row in [*data.trajectories, *on_disk]:
        parts = wai.from_row(row)
        assert wai.to_row(*parts) == row
        assert wai.to_row(parts) == row
    task, rollout, judgment, markers, version = wai.from_row(on_disk[0])
    assert isinstance(task, Task) and isinstance(rollout, Rollout)
    assert isinstance(judgment, Judgment) and judgment.label_source == "judge"
    assert version == "1" and task.prompt == on_disk[0]["prompt"]
    assert markers and all(isinstance(m, Marker) for m in markers)
    assert {m.name: m.value for m in markers} == on_disk[0]["markers"]
    assert rollout.steps == on_disk[0]["steps"]


def test_absent_keys_stay_absent_and_unknown_keys_survive():
    row = {
        "schema_version": "1",
        "prompt": "Where is my order?",
        "scenario_id": "s-1",
        "steps": [],
        "final_text": "It shipped.",
        "reward": None,  # present and null is not the same as absent
        "my_tool_score": {"nested": [1, 2]},
        "_private": 3,
        "json": "a key named like a method",
    }
    parts = wai.from_row(row)
    assert "user_model" not in wai.to_row(*parts)
    assert "markers" not in wai.to_row(*parts) and parts.markers is None
    assert wai.to_row(*parts) == row
    parts.rollout.steps.append({"kind": "user", "content": "x"})
    assert row["steps"] == []  # parts are copies: editing one never edits the row


def test_a_row_written_before_the_stamp_loads_by_shape():
    old = {
        "messages": [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": "Refund order A-12, please."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "issue_refund", "arguments": '{"order_id": "A-12"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "name": "issue_refund", "content": "ok"},
            {"role": "assistant", "content": "Your refund for A-12 is on its way."},
        ],
        "score": 1,
    }
    task, rollout, judgment, markers, version = wai.from_row(old)
    assert version == "0"
    assert task.prompt == "Refund order A-12, please."
    assert rollout.final_text == "Your refund for A-12 is on its way."
    kinds = [s["kind"] for s in rollout.steps]
    assert kinds == ["assistant", "tool", "assistant"]
    assert rollout.steps[0]["tool_calls"][0]["arguments"] == {"order_id": "A-12"}
    assert judgment.reward == 1.0
    assert wai.to_row(task, rollout, judgment, markers) == old  # nothing added on the way back


def test_an_unknown_version_and_a_non_row_are_refused():
    with pytest.raises(ValueError, match="schema_version"):
        wai.from_row({"schema_version": "7", "prompt": "p"})
    with pytest.raises(TypeError, match="row dict"):
        wai.from_row(["not", "a", "row"])
