"""Row-v1 steps on the wire: the reader takes them back into the very steps they were
written from, and reads the spec's grouping (``turn``) and the turn's own numbers."""

from __future__ import annotations

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from wai_exp.rows.jsonl import read_rows
from wai_exp.rows.reader import read_steps
from wai_exp.rows.wire import from_wire, to_wire, wire_steps
from wai_exp.score.diagnose.logprobs import row_logprob

PROMPT = "Please check orders ORD-1 and ORD-2."
REPLY = "Both orders are on the way."


def _tool(cid: str, order: str, **extra: object) -> dict:
    return {
        "tool": "lookup_order",
        "id": cid,
        "arguments": {"order_id": order},
        "result": {"order_id": order, "status": "shipped"},
        "status": "ok",
        "fault": None,
        **extra,
    }


def test_steps_sharing_a_turn_are_one_assistant_message_with_its_calls() -> None:
    # One model call that looked up two orders, then the reply: four row-v1 steps.
    row = {
        "prompt": PROMPT,
        "steps": [
            {"text": "Let me look both up.", "turn": 1},
            _tool("c1", "ORD-1", turn=1),
            _tool("c2", "ORD-2", turn=1),
            {"text": REPLY, "turn": 2},
        ],
    }
    _, steps = read_steps(row)
    assert [s["kind"] for s in steps] == ["assistant", "tool", "tool", "assistant"]
    assert steps[0]["content"] == "Let me look both up."
    assert [c["id"] for c in steps[0]["tool_calls"]] == ["c1", "c2"]
    assert [s["tool_call_id"] for s in steps[1:3]] == ["c1", "c2"]
    assert all("turn" not in s for s in steps)
    # Without ``turn`` (another tool's row-v1 file) every tool step is its own model call.
    loose = {
        "prompt": PROMPT,
        "steps": [{k: v for k, v in s.items() if k != "turn"} for s in row["steps"]],
    }
    assert [s["kind"] for s in read_steps(loose)[1]].count("assistant") == 4


def test_a_turn_opening_tool_step_gives_its_logprob_to_the_model_call() -> None:
    # The spec puts a turn's logprob and token count on its tool step.
    row = {
        "prompt": PROMPT,
        "reward": 1.0,
        "steps": [
            _tool("c1", "ORD-1", logprob=-3.5, n_tokens=7, truncated=False),
            {"text": REPLY, "logprob": -1.5, "n_tokens": 5},
        ],
        "final_text": REPLY,
    }
    _, steps = read_steps(row)
    assert steps[0]["kind"] == "assistant" and steps[0]["logprob"] == -3.5
    assert steps[0]["n_tokens"] == 7 and steps[0]["truncated"] is False
    assert "logprob" not in steps[1]
    # The rollout's logprob sums both turns (-1.5 alone when the first one's was lost).
    assert row_logprob(row) == (-5.0, 12.0)


def test_an_unanswered_call_and_an_uncalled_answer_read_back_as_written() -> None:
    row = {
        "prompt": PROMPT,
        "steps": [
            {
                "tool": "lookup_order",
                "id": "c1",
                "arguments": {"order_id": "ORD-1"},
                "turn": 1,
                "answered": False,
            },
            _tool("c9", "ORD-2", called=False),
        ],
    }
    _, steps = read_steps(row)
    assert [s["kind"] for s in steps] == ["assistant", "tool"]
    assert [c["id"] for c in steps[0]["tool_calls"]] == ["c1"]
    assert steps[1]["tool_call_id"] == "c9"
    assert "called" not in steps[1] and "answered" not in steps[0]


def test_a_rows_file_in_row_v1_reads_into_the_steps_every_stage_works_on(tmp_path) -> None:
    line = {
        "prompt": PROMPT,
        "scenario_id": "s",
        "steps": [_tool("c1", "ORD-1", turn=1), {"text": REPLY, "turn": 2}],
    }
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (row,) = read_rows(path)
    assert [s["kind"] for s in row["steps"]] == ["assistant", "tool", "assistant"]
    assert row["steps"][1]["result"] == {"order_id": "ORD-1", "status": "shipped"}


# ---- the round trip, on steps of every form the internal shape takes -------------------

_text = st.text(max_size=8)
_key = st.sampled_from(["note", "latency_ms", "cached", "source"])
_extra = st.dictionaries(_key, st.one_of(st.integers(), _text, st.booleans()), max_size=2)
_meta = st.fixed_dictionaries(
    {},
    optional={
        "input_tokens": st.integers(0, 99),
        "output_tokens": st.integers(0, 99),
        "logprob": st.floats(-50, 0),
        "n_tokens": st.integers(1, 40),
        "truncated": st.booleans(),
        "logprobs_missing": st.just(True),
    },
)
_args = st.dictionaries(st.sampled_from(["order_id", "email", "reason"]), _text, max_size=2)
_status = st.sampled_from(
    [("ok", None), ("error", "error"), ("timeout", "timeout"), ("invalid", None)]
)


@st.composite
def _steps(draw: st.DrawFn) -> list[dict]:
    steps: list[dict] = []
    n = 0
    for _ in range(draw(st.integers(0, 4))):
        form = draw(st.sampled_from(["reply", "calls", "user", "orphan"]))
        if form == "user":
            steps.append({"kind": "user", "content": draw(_text), **draw(_extra)})
            continue
        if form == "orphan":
            n += 1
            status, fault = draw(_status)
            steps.append(
                {
                    "kind": "tool",
                    "tool_call_id": f"o{n}",
                    "name": "lookup_order",
                    "arguments": draw(_args),
                    "result": draw(_text),
                    "status": status,
                    "fault": fault,
                }
            )
            continue
        assistant = {
            "kind": "assistant",
            "content": draw(_text),
            "tool_calls": [],
            **draw(_meta),
            **draw(_extra),
        }
        steps.append(assistant)
        if form == "reply":
            continue
        answers = []
        for _ in range(draw(st.integers(1, 3))):
            n += 1
            call = {
                "id": f"c{n}",
                "name": draw(st.sampled_from(["lookup_order", "issue_refund"])),
                "arguments": draw(_args),
            }
            assistant["tool_calls"].append(call)
            if draw(st.booleans()) or not answers:
                status, fault = draw(_status)
                answers.append(
                    {
                        "kind": "tool",
                        "tool_call_id": call["id"],
                        "name": call["name"],
                        "arguments": dict(call["arguments"]),
                        "result": draw(st.one_of(_text, st.none(), _args)),
                        "status": status,
                        "fault": fault,
                        **draw(_extra | _meta),
                    }
                )
        if draw(st.booleans()):
            answers.reverse()  # answered out of order
        steps.extend(answers)
    return steps


@settings(max_examples=300, deadline=None)
@given(_steps())
def test_any_internal_steps_come_back_exactly_from_the_wire(steps: list[dict]) -> None:
    row = {"prompt": PROMPT, "scenario_id": "s", "steps": steps}
    wire = json.loads(json.dumps(to_wire(row)))
    assert all("kind" not in s for s in wire["steps"]), wire["steps"]
    assert from_wire(copy.deepcopy(wire)) == row


def test_a_step_with_a_key_the_wire_reserves_is_kept_in_the_internal_shape() -> None:
    odd = {"kind": "user", "content": "hi", "tool": "not a tool name"}
    assert wire_steps([odd]) == [odd]
    row = {"prompt": PROMPT, "steps": [odd]}
    assert from_wire(json.loads(json.dumps(to_wire(row)))) == row


def test_a_judge_that_gave_no_reward_is_missing_reward_on_the_wire_and_abstain_in_memory(
    tmp_path,
) -> None:
    import jsonschema

    from wai_exp import simulate
    from wai_exp.rows.jsonl import dumps_row, write_rows
    from wai_exp.rows.model import row_json_schema
    from wai_exp.score.judges.judging import run_judge

    rows = simulate(budget=4, seed=1, mode="rl").trajectories
    unjudged = list(run_judge(rows, lambda row: None).rows)  # the judge abstains
    assert {r["judge_status"] for r in unjudged} == {"abstain"}
    validator = jsonschema.Draft202012Validator(row_json_schema())
    for row in unjudged:
        line = json.loads(dumps_row(row))
        assert line["judge_status"] == "missing_reward"
        assert not list(validator.iter_errors(line))
    write_rows(tmp_path / "r.jsonl", unjudged)
    back = read_rows(tmp_path / "r.jsonl")
    assert [r["judge_status"] for r in back] == ["abstain"] * len(unjudged)
