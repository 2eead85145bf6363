"""Model backends through ``wai_exp.simulate`` against real servers on 127.0.0.1 that answer
with the quirks real servers have: tool calls without ids (or all with one id, as TGI gives
them), answers cut at the token cap, Anthropic text blocks holding null."""

from __future__ import annotations

import json

import wai_exp
from tests.support.scripted_server import chat_reply, scripted_server


def _tool_turn(body) -> int:
    return sum(1 for m in body.get("messages", ()) if m.get("role") == "tool")


def _two_lookups(ids):
    """An OpenAI-compatible server that calls lookup_order on two turns in a row with the
    tool-call ids ``ids(turn)`` gives (None: no id at all), then answers."""
    seen: list[dict] = []

    def answer(path, headers, body):
        seen.append(body)
        turn = _tool_turn(body)
        if turn < 2:
            call = {"type": "function",
                    "function": {"name": "lookup_order", "arguments": {"order_id": f"ORD-{turn}"}}}  # fmt: skip
            if ids(turn) is not None:
                call["id"] = ids(turn)
            reply = chat_reply(None, [call])
            reply["choices"][0]["message"]["content"] = None
            return 200, reply
        return 200, chat_reply("Nothing was changed yet.")

    return answer, seen


def _assert_ids_pair_up(row):
    calls = [c["id"] for m in row["messages"] for c in m.get("tool_calls") or ()]
    replies = [m["tool_call_id"] for m in row["messages"] if m["role"] == "tool"]
    assert len(calls) == 2 and len(set(calls)) == 2, calls
    assert replies == calls


def test_tool_calls_without_ids_get_ids_unique_within_the_rollout():
    answer, seen = _two_lookups(lambda turn: None)
    with scripted_server(answer) as url:
        data = wai_exp.simulate(agent=f"vllm:m@{url}", simulator=False, budget=2)
    assert len(data.rows) == 2, data.lost
    for row in data.rows:
        _assert_ids_pair_up(row)
    # and the server was sent back the same, distinct ids on the last turn
    last = seen[-1]["messages"]
    sent = [c["id"] for m in last for c in m.get("tool_calls") or ()]
    assert len(set(sent)) == 2 and sent == [m["tool_call_id"] for m in last if m["role"] == "tool"]


def test_a_server_giving_every_tool_call_the_same_id_still_pairs_each_reply_with_its_call():
    answer, _ = _two_lookups(lambda turn: "0")
    with scripted_server(answer) as url:
        data = wai_exp.simulate(agent=f"vllm:m@{url}", simulator=False, budget=2)
    assert len(data.rows) == 2, data.lost
    for row in data.rows:
        _assert_ids_pair_up(row)
        assert row["messages"][2]["tool_calls"][0]["id"] == "0"  # a first use is kept


def test_a_final_answer_cut_at_the_token_cap_ends_the_row_as_truncated():
    def answer(path, headers, body):
        reply = chat_reply("Nothing was chan")
        reply["choices"][0]["finish_reason"] = "length"
        return 200, reply

    with scripted_server(answer) as url:
        data = wai_exp.simulate(agent=f"vllm:m@{url}", simulator=False, budget=2)
    assert [r["ended_by"] for r in data.rows] == ["truncated", "truncated"]
    assert all(r["steps"][-1]["truncated"] is True for r in data.rows)


def _anthropic_message(content, stop="end_turn"):
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": content, "stop_reason": stop,
            "usage": {"input_tokens": 3, "output_tokens": 2}}  # fmt: skip


def test_anthropic_tool_uses_without_ids_and_text_blocks_holding_null():
    def answer(path, headers, body):
        results = sum(
            1 for m in body["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"
        )  # fmt: skip
        if results < 2:
            use = {"type": "tool_use", "name": "lookup_order", "input": {"order_id": "ORD-1"}}
            return 200, _anthropic_message([{"type": "text", "text": None}, use], "tool_use")
        return 200, _anthropic_message([{"type": "text", "text": "Nothing was changed yet."}])

    with scripted_server(answer) as url:
        data = wai_exp.simulate(agent=f"anthropic:claude-x@{url}", simulator=False, budget=2)
    assert len(data.rows) == 2, data.lost
    for row in data.rows:
        _assert_ids_pair_up(row)
        assert row["final_text"] == "Nothing was changed yet."
        assert json.loads(row["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {
            "order_id": "ORD-1"
        }


def test_tool_arguments_encoded_twice_are_read_as_the_object():
    answer, _ = _two_lookups(lambda turn: f"c{turn}")

    def twice(path, headers, body):
        status, reply = answer(path, headers, body)
        for call in reply["choices"][0]["message"].get("tool_calls") or ():
            call["function"]["arguments"] = json.dumps(json.dumps(call["function"]["arguments"]))
        return status, reply

    with scripted_server(twice) as url:
        data = wai_exp.simulate(agent=f"vllm:m@{url}", simulator=False, budget=2)
    tools = [s for s in data.rows[0]["steps"] if s["kind"] == "tool"]
    assert [t["arguments"] for t in tools] == [{"order_id": "ORD-0"}, {"order_id": "ORD-1"}]
    assert all(t["status"] != "invalid" for t in tools)
