"""The model-played person (``user_model=<spec>``) against a real HTTP server on 127.0.0.1
whose answers the test scripts: it answers follow-ups from the situation's facts, walks away
when it says LEAVE, samples at the named default temperature unless ``user_temperature`` is
set, and the row names it. Plus the turn cap's own ``ended_by`` and patience offline."""

from __future__ import annotations

import json
import re
import threading

import pytest

import wai_exp as wai
from tests.support.scripted_server import chat_reply, scripted_server

LEAVE_WORD = "pin"  # the scripted person leaves when asked for their loyalty PIN


class PersonServer:
    """Plays the person: reads its facts from the system prompt, answers with the order id
    or the email it holds, and answers LEAVE when asked for a PIN."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, path, headers, body):
        with self.lock:
            self.requests.append(body)
        system = body["messages"][0]["content"]
        facts = json.loads(re.search(r"Your facts: (\{.*?\})\n", system).group(1))
        question = body["messages"][-1]["content"].lower()
        if LEAVE_WORD in question:
            return 200, chat_reply("LEAVE")
        if "email" in question and "email" in facts:
            return 200, chat_reply(f"sure thing, it is {facts['email']}")
        if "order_id" in facts:
            return 200, chat_reply(f"oh right, my order is {facts['order_id']}")
        return 200, chat_reply("I honestly have no idea, sorry")


def test_a_model_user_answers_follow_ups_and_the_row_names_it():
    person = PersonServer()
    with scripted_server(person) as url:
        data = wai.simulate(
            budget=40, seed=3, user_model=f"vllm:person-bot@{url}",
            advanced={"patience": "endless"},
        )  # fmt: skip
    followed = [r for r in data.rows if any(s["kind"] == "user" for s in r["steps"])]
    assert followed, "the scripted agent asks on vague asks; some rows must have follow-ups"
    for r in followed:
        lines = [s["content"] for s in r["steps"] if s["kind"] == "user"]
        # Every line is the model's, not a template's, and carries a fact the person holds.
        assert all(line.startswith(("oh right", "sure thing", "I honestly")) for line in lines)
        assert r["user_model"] == "vllm:person-bot"
    assert all("user_model" not in r for r in data.rows if r not in followed)
    assert data.report()["user_model"] == "vllm:person-bot"
    assert data.metadata["user_model"] == "vllm:person-bot"
    # One request per follow-up line, at the named default temperature of a follow-up.
    n_lines = sum(1 for r in followed for s in r["steps"] if s["kind"] == "user")
    assert len(person.requests) == n_lines
    assert {b["temperature"] for b in person.requests} == {0.475}
    assert all(b["model"] == "person-bot" and "tools" not in b for b in person.requests)
    # The agent is the scripted agent, so no same_model warning.
    assert data.degraded == []


async def _asks_for_pin(prompt, *, tools, system_prompt, world, sampling):
    """Asks the order number, then a PIN nobody could know: the model person leaves."""
    steps = []
    for question in ("What is your order number?", "And your loyalty PIN?"):
        steps.append({"kind": "assistant", "content": question, "tool_calls": []})
        answer = await world.aask_user(question)
        if answer is None:
            return {"steps": steps, "final_text": question, "model_version": "asker"}
        steps.append({"kind": "user", "content": answer})
    return {"steps": steps, "final_text": "done", "model_version": "asker"}


async def _asks_forever(prompt, *, tools, system_prompt, world, sampling):
    steps = []
    for _ in range(10):
        question = "Could you give me the order number?"
        steps.append({"kind": "assistant", "content": question, "tool_calls": []})
        answer = await world.aask_user(question)
        if answer is None:
            return {"steps": steps, "final_text": question, "model_version": "asker"}
        steps.append({"kind": "user", "content": answer})
    return {"steps": steps, "final_text": "done", "model_version": "asker"}


def test_the_model_user_walks_away_when_asked_what_it_cannot_know():
    person = PersonServer()
    with scripted_server(person) as url:
        data = wai.simulate(
            _asks_for_pin, budget=6, seed=0, user_model=f"vllm:person-bot@{url}",
            advanced={"patience": "endless", "user_temperature": 0.2},
        )  # fmt: skip
    assert len(data.rows) == 6
    for r in data.rows:
        assert r["ended_by"] == "user_left"
        assert [s["kind"] for s in r["steps"]] == ["assistant", "user", "assistant"]
        assert r["final_text"] == "And your loyalty PIN?"
    assert data.search["ended_on_question"] == 6
    # user_temperature pins every line's temperature; the person saw the earlier exchange.
    assert {b["temperature"] for b in person.requests} == {0.2}
    second = [b for b in person.requests if "PIN" in b["messages"][-1]["content"]]
    assert second and all(len(b["messages"]) == 4 for b in second)


def test_the_turn_cap_is_max_turns_not_walking_away():
    person = PersonServer()
    with scripted_server(person) as url:
        data = wai.simulate(
            _asks_forever, budget=4, seed=0, user_model=f"vllm:person-bot@{url}",
            advanced={"patience": "endless", "avg_turns": 6},
        )  # fmt: skip
    for r in data.rows:
        # 6 // 2 = 3 lines of the person: the ask and two answers; the third question waits.
        assert sum(s["kind"] == "user" for s in r["steps"]) == 2
        assert r["ended_by"] == "max_turns"
    assert data.search["ended_on_question"] == 0
    # Every row ended on an unanswered question: the report says the follow-ups starved.
    assert data.search["followups_missed"] == 4 and data.search["followups_starved"] is False
    # The template person caps the same way.
    offline = wai.simulate(_asks_forever, budget=4, seed=0,
                           advanced={"patience": "endless", "avg_turns": 6})  # fmt: skip
    assert {r["ended_by"] for r in offline.rows} == {"max_turns"}
    # followups_starved needs followup_starved_min missed rows that are also rows / divisor.
    starved = wai.simulate(_asks_forever, budget=8, seed=0,
                           advanced={"patience": "endless", "avg_turns": 6})  # fmt: skip
    assert starved.search["followups_starved"] is True
    assert any(w.startswith("followups_starved") for w in starved.warnings)
    fine = wai.simulate(_asks_forever, budget=8, seed=0,
                        advanced={"patience": "endless", "avg_turns": 6, "followup_starved_min": 9})  # fmt: skip
    assert fine.search["followups_starved"] is False


def test_a_failing_user_model_loses_the_rollout_with_its_error():
    with scripted_server(lambda p, h, b: (400, {"error": {"message": "bad model"}})) as url:
        data = wai.simulate(
            _asks_for_pin, budget=2, seed=0, user_model=f"vllm:person-bot@{url}",
            advanced={"concurrency": 1, "dead_agent_errors": 2},
        )  # fmt: skip
    assert data.rows == [] and data.lost
    assert "HTTP 400" in data.lost[0]["error"]


def test_patience_changes_offline_rows_and_bad_specs_fail_before_work():
    def user_lines(patience):
        d = wai.simulate(budget=150, seed=0, advanced={"patience": patience})
        return [s["content"] for r in d.rows for s in r["steps"] if s["kind"] == "user"]

    normal, short, endless = user_lines("normal"), user_lines("short"), user_lines("endless")
    assert len(normal) >= 10
    assert normal != short and normal != endless and short != endless
    with pytest.raises(ValueError, match="user_model='gpt-4' is not a model spec"):
        wai.simulate(budget=1, user_model="gpt-4")


class ShopServer:
    """One model for both jobs, like a user's own server: as the agent (tools offered) it
    asks for the order number once, then closes; as the person (no tools, the person's
    system prompt) it answers with the order id from its facts."""

    def __init__(self) -> None:
        self.person: list[tuple[dict, dict]] = []
        self.lock = threading.Lock()

    def __call__(self, path, headers, body):
        if "tools" not in body:
            with self.lock:
                self.person.append((headers, body))
            system = body["messages"][0]["content"]
            facts = json.loads(re.search(r"Your facts: (\{.*?\})\n", system).group(1))
            return 200, chat_reply(f"my order is {facts.get('order_id', 'unknown')}")
        answered = sum(1 for m in body["messages"] if m["role"] == "user") > 1
        return 200, chat_reply(
            "Thanks, that is all done." if answered else "What is your order number?"
        )


def test_user_model_none_is_the_agents_own_model_on_a_model_backend():
    from wai_exp.simulate.agents.model_agent import ModelAgent

    server = ShopServer()
    with scripted_server(server) as url:
        agent = ModelAgent(f"vllm:shop-bot@{url}", api_key="sk-agent-key-123")
        data = wai.simulate(agent, budget=4, seed=0, advanced={"concurrency": 2})
        # The agent's model played the person: its lines, on the agent's server and key.
        assert len(server.person) == 4
        # header names are case-insensitive (the aiohttp transport sends them lower-cased)
        auth = {{k.lower(): v for k, v in h.items()}.get("authorization") for h, _ in server.person}
        assert auth == {"Bearer sk-agent-key-123"}
        assert {b["model"] for _, b in server.person} == {"shop-bot"}
        for r in data.rows:
            lines = [s["content"] for s in r["steps"] if s["kind"] == "user"]
            assert lines and all(line.startswith("my order is") for line in lines)
            assert r["user_model"] == "vllm:shop-bot"
        assert data.metadata["user_model"] == "vllm:shop-bot"
        assert data.report()["user_model"] == "vllm:shop-bot"
        assert data.degraded == ["same_model"]
        [warning] = [w for w in data.warnings if w.startswith("same_model")]
        assert "played the user" in warning and "user_model=" in warning
        assert warning.count(". ") == 0 and warning.endswith(".")  # one sentence
        assert "sk-agent-key-123" not in json.dumps([data.rows, data.warnings, data.report()])

        # user_model=False keeps the template person; so does a callable agent.
        before = len(server.person)
        template = wai.simulate(agent, budget=2, seed=0, user_model=False)
        assert len(server.person) == before
        assert all(r["user_model"] == "template" for r in template.rows)
        assert template.degraded == [] and template.report()["user_model"] == "template"
    own = wai.simulate(_asks_for_pin, budget=4, seed=0, advanced={"patience": "endless"})
    assert {r.get("user_model") for r in own.rows} == {"template"} and own.degraded == []


def test_an_agent_out_of_its_own_turns_while_calling_tools_missed_no_follow_up():
    # SmolLM2 at agent.max_turns=4 called tools four times and stopped: ended_by max_turns,
    # last step a tool answer. The report told 10 of 13 such rows "ended on the agent's
    # question with nobody answering" and advised more patience.
    from types import SimpleNamespace

    from wai_exp.simulate.report import followups, row_facts

    tool_v1 = {"tool": "search_orders", "arguments": {}, "result": [], "status": "ok"}
    tool_internal = {"kind": "tool", "content": "[]"}
    question = {"text": "What is your order number?", "turn": 2}
    rows = [
        *({"ended_by": "max_turns", "steps": [question, tool_v1]} for _ in range(5)),
        *({"ended_by": "max_turns", "steps": [tool_internal]} for _ in range(5)),
        {"ended_by": "max_turns", "steps": [tool_v1, question]},
        {"ended_by": "user_left", "steps": [{"kind": "assistant", "content": "PIN?"}]},
    ]
    facts = row_facts(rows)
    cfg = SimpleNamespace(knobs=SimpleNamespace(followup_starved_min=2, followup_starved_divisor=4))
    got = followups(cfg, facts.ended_by, facts.ends_on_tool)
    assert got == {"followups_missed": 2, "followups_starved": False}
