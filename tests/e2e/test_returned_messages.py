"""An agent that acts through ``world.execute`` and returns its reply as a str, as one
OpenAI assistant message, as a list of messages, or as the whole transcript: the console
script gives every shape the same tool steps and the same pass@1. A transcript whose tool
calls are not the calls it made is refused before grading, naming both.

Old code: a returned message (dict or list) replaced the world's record, so every row lost
its lookups and writes (the world still counted the writes in ``world_changes``) and the
judge failed the rows for never looking the record up."""

from __future__ import annotations

import json

from tests.e2e.test_cli import wai
from wai_exp.rows.jsonl import read_rows

SHAPES = '''
import json
import re


def _act(message, world):
    """Look the order up, cancel when asked and allowed; (the steps, the reply)."""
    found = re.search(r"ORD-\\d{5}", message)
    if not found:
        return [], "Could you give me your order number (like ORD-12345)?"
    oid = found.group()
    looked = world.execute("lookup_order", {"order_id": oid})
    record = looked.get("result")
    if looked.get("status") != "ok" or not isinstance(record, dict) or record.get("error"):
        return [looked], f"I could not look up {oid} just now; nothing was changed."
    if "cancel" not in message.lower():
        return [looked], f"Order {oid} is {record.get('status')}, total {record.get('total')}."
    if record.get("status") in ("cancelled", "shipped", "delivered"):
        return [looked], f"Order {oid} is {record.get('status')}, so I can't cancel it."
    done = world.execute("cancel_order", {"order_id": oid, "reason": "customer request"})
    if done.get("status") != "ok":
        return [looked, done], f"I tried to cancel {oid}; it did not go through, nothing changed."
    return [looked, done], f"Done: order {oid} is cancelled."


def as_str(message, *, world):
    return _act(message, world)[1]


def as_dict(message, *, world):
    return {"role": "assistant", "content": _act(message, world)[1]}


def as_list(message, *, world):
    return [
        {"role": "system", "content": "You help with orders."},
        {"role": "user", "content": message},
        {"role": "assistant", "content": _act(message, world)[1]},
    ]


def as_transcript(message, *, world):
    steps, reply = _act(message, world)
    messages = [{"role": "user", "content": message}]
    for i, step in enumerate(steps):
        call = {"name": step["name"], "arguments": json.dumps(step["arguments"])}
        messages += [
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": f"c{i}", "type": "function", "function": call}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps(step["result"])},
        ]
    return messages + [{"role": "assistant", "content": reply}]


def invented(message, *, world):
    """The calls and their results made up, none through world.execute."""
    call = {"name": "issue_refund", "arguments": '{"order_id": "ORD-10001", "amount": 50.0}'}
    return [
        {"role": "user", "content": message},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "x", "type": "function", "function": call}]},
        {"role": "tool", "tool_call_id": "x", "content": '{"refunded": 50.0}'},
        {"role": "assistant", "content": "Refunded 50.0."},
    ]


def other_calls(message, *, world):
    _act(message, world)
    call = {"name": "search_orders", "arguments": '{"email": "a@example.com"}'}
    return [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "x", "type": "function", "function": call}]},
        {"role": "tool", "tool_call_id": "x", "content": "[]"},
        {"role": "assistant", "content": "Nothing found."},
    ]
'''


def run(tmp_path, target):
    """One eval run of ``shapes:<target>`` (the module found in the folder wai-exp runs
    from): (exit status, output, simulate rows, evaluate rows, pass@1 or None)."""
    (tmp_path / "shapes.py").write_text(SHAPES)
    res = wai(
        tmp_path, "+experiment=eval", "agent=callable", f"agent.target=shapes:{target}",
        "simulate.budget=60", "tracking=none", f"hydra.run.dir=out_{target}",
    )  # fmt: skip
    folder = tmp_path / f"out_{target}"
    metrics = folder / "evaluate/metrics.json"
    p1 = json.loads(metrics.read_text())["pass_at_1"] if metrics.exists() else None
    sim = folder / "simulate/rows.jsonl"
    evaluated = folder / "evaluate/rows.jsonl"
    return (
        res.returncode,
        res.stdout + res.stderr,
        read_rows(sim) if sim.exists() else [],
        read_rows(evaluated) if evaluated.exists() else [],
        p1,
    )


def key(row):
    """A rollout across runs (the rollout id also hashes the agent's name)."""
    return row["scenario_id"], row["rollout_index"]


def tool_steps(row):
    return [
        (s["name"], s["arguments"], s["result"], s["status"])
        for s in row["steps"]
        if s["kind"] == "tool"
    ]


def test_every_return_shape_keeps_the_world_execute_steps_and_the_same_pass_at_1(tmp_path):
    code, out, base, graded, p1 = run(tmp_path, "as_str")
    assert code == 0 and p1 is not None, out[-2000:]
    by_key = {key(r): r for r in base}
    # the agent really acted: lookups on most rows, a cancel on some
    assert sum(1 for r in base if tool_steps(r)) >= 20
    assert any(len(tool_steps(r)) == 2 for r in base)
    rewards = {key(r): r["reward"] for r in graded}
    assert len(rewards) == len(base) == 60
    for target in ("as_dict", "as_list", "as_transcript"):
        code, out, rows, graded_here, p1_here = run(tmp_path, target)
        assert code == 0, out[-2000:]
        assert p1_here == p1, (target, p1_here, p1)
        assert {key(r): r["reward"] for r in graded_here} == rewards, target
        assert len(rows) == len(base)
        for row in rows:
            same = by_key[key(row)]
            assert tool_steps(row) == tool_steps(same), target
            assert row["final_text"] == same["final_text"]
            assert row["world_changes"] == same["world_changes"]
            if target != "as_transcript":  # the reply alone: the very row a str gives
                assert row["steps"] == same["steps"] and row["messages"] == same["messages"]
    # the transcript keeps its own turns: one assistant turn per call, paired by its ids
    row = next(r for r in rows if len(tool_steps(r)) == 2)
    assert [s["kind"] for s in row["steps"]] == ["assistant", "tool"] * 2 + ["assistant"]
    assert [s["tool_call_id"] for s in row["steps"] if s["kind"] == "tool"] == ["c0", "c1"]


def test_a_transcript_whose_tool_calls_are_not_the_calls_made_is_refused_naming_both(
    tmp_path,
):
    code, out, _, graded, p1 = run(tmp_path, "other_calls")
    assert code == 1 and not graded and p1 is None, out[-2000:]
    assert "TrajectoryConflict" in out
    assert "the tool calls returned (search_orders) are not the world.execute calls made" in out
    assert "(lookup_order" in out and "return the reply alone" in out


def test_tool_steps_the_world_never_executed_are_marked_and_counted(tmp_path):
    code, out, rows, graded, p1 = run(tmp_path, "invented")
    assert code == 0 and p1 is not None, out[-2000:]
    assert len(rows) == 60
    for row in rows:
        [step] = [s for s in row["steps"] if s["kind"] == "tool"]
        assert (step["name"], step["source"]) == ("issue_refund", "agent")
        assert row["world_changes"] == []
    on_disk = json.loads((tmp_path / "out_invented/simulate/rows.jsonl").read_text().split("\n")[0])
    assert [s.get("source") for s in on_disk["steps"] if "tool" in s] == ["agent"]
    assert "60 of 60 rows hold 60 tool steps the world never executed" in out
    assert "publish leaves these rows out of training data" in out
