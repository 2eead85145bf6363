"""The user's own agent in every shape the spec allows, sync or async, through the public
``wai_exp.simulate``: signatures dispatched once, any return shape made a row, blocking
code run on a bounded thread pool."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

import wai_exp
from wai_exp.simulate.agents import current_rollout


def run(agent, budget=6, **kw):
    kw.setdefault("advanced", {})
    return wai_exp.simulate(agent=agent, budget=budget, simulator=False, **kw)


def test_message_only_callable_returning_a_str_gives_rows():
    def agent(message):
        return f"I looked into it: {message[:30]}"

    data = run(agent)
    assert len(data.rows) == 6
    assert not any("dead_agent" in w for w in data.warnings), data.warnings
    for row in data.rows:
        assert row["final_text"].startswith("I looked into it: ")
        assert row["final_text"][len("I looked into it: ") :] == row["prompt"][:30]
        assert row["messages"][-1] == {"role": "assistant", "content": row["final_text"]}


def test_message_and_context_callable_receives_the_whole_contract():
    seen = []

    def agent(message, **context):
        seen.append(sorted(context))
        names = [t["function"]["name"] for t in context["tools"]]
        return {"final_text": "tools: " + ",".join(names)}

    data = run(agent)
    assert len(data.rows) == 6
    assert seen and all(s == ["sampling", "system_prompt", "tools", "world"] for s in seen)
    assert data.rows[0]["final_text"].startswith("tools: ")


def test_subset_of_keywords_gets_exactly_those():
    got = []

    def agent(prompt, *, tools):
        got.append(len(tools))
        return "done"

    assert len(run(agent).rows) == 6 and all(n > 0 for n in got)


def test_keyword_contract_with_world_calls_tools_and_keeps_rollout_context():
    seen = []

    def agent(prompt, *, tools, system_prompt, world, sampling):
        seen.append((current_rollout.prompt == prompt, sampling))
        name = tools[0]["function"]["name"]
        world.execute(name, {})
        return {"final_text": "checked"}

    data = run(agent, sampling={"temperature": 0.2, "max_tokens": 64, "model": "mine"})
    assert len(data.rows) == 6
    assert all(ok and s["model"] == "mine" for ok, s in seen)
    assert all(any(s["kind"] == "tool" for s in r["steps"]) for r in data.rows)
    assert data.rows[0]["sampling"] == {"temperature": 0.2, "max_tokens": 64, "model": "mine"}


def test_openai_messages_trajectory_becomes_steps():
    def agent(message):
        return {
            "messages": [
                {"role": "user", "content": message},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "lookup_order", "arguments": '{"order_id": "A1"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
                {"role": "assistant", "content": "Your order shipped."},
            ]
        }  # fmt: skip

    data = run(agent)
    assert len(data.rows) == 6
    row = data.rows[0]
    kinds = [s["kind"] for s in row["steps"]]
    assert kinds == ["assistant", "tool", "assistant"]
    assert row["steps"][1]["name"] == "lookup_order"
    assert row["final_text"] == "Your order shipped."  # taken from the last reply


def test_async_message_only_callable():
    async def agent(message):
        await asyncio.sleep(0)
        return "async reply"

    data = run(agent)
    assert [r["final_text"] for r in data.rows] == ["async reply"] * 6


def test_callable_object_with_message_only_call():
    class Agent:
        model_version = "my-agent-v3"

        def __call__(self, message):
            return "object reply"

    data = run(Agent())
    assert len(data.rows) == 6 and data.rows[0]["model_version"] == "my-agent-v3"


def test_unreadable_return_loses_the_rollout_with_a_clear_error():
    data = run(lambda message: 42, budget=3)
    report = data.report()
    assert not data.rows and report["stopped_because"] == "dead_agent"
    assert set(report["rollouts_lost_by"]) == {"TypeError"}
    assert any("the agent returned int" in w for w in data.warnings), data.warnings


def test_one_assistant_message_returned_as_a_dict_is_the_reply():
    # what an OpenAI client's ``choices[0].message`` looks like, as a dict
    data = run(lambda message: {"role": "assistant", "content": "dict reply"})
    assert [r["final_text"] for r in data.rows] == ["dict reply"] * 6


def test_a_dict_with_no_reply_key_loses_the_rollout_naming_the_keys():
    # {"reply": ...} used to land as an empty reply: a row graded on nothing, exit 0
    data = run(lambda message: {"reply": "hello"}, budget=3)
    report = data.report()
    assert not data.rows and set(report["rollouts_lost_by"]) == {"TypeError"}
    said = next(w for w in data.warnings if "the agent returned a dict" in w)
    assert "['reply']" in said and "final_text" in said, said


def test_signature_that_cannot_take_the_message_fails_before_work():
    def agent(*, tools):
        return "x"

    with pytest.raises(ValueError, match="must take the message first"):
        run(agent)


def test_an_agent_taking_only_keywords_fails_before_work():
    # agent(**kw) was taken as "any context by name" and failed every rollout at run time
    def agent(**kw):
        return "x"

    with pytest.raises(ValueError, match="must take the message first"):
        run(agent)

    def needs(message, customer_id):
        return "x"

    with pytest.raises(ValueError, match="requires customer_id"):
        run(needs)


def _counting_agent(limit_box):
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def agent(message):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.05)  # a blocking client (requests, the sync OpenAI SDK)
        with lock:
            state["now"] -= 1
        return "ok"

    return agent, state


@pytest.mark.parametrize("concurrency", [4, 16])
def test_sync_callables_run_in_parallel_bounded_by_concurrency(concurrency):
    agent, state = _counting_agent(None)
    data = run(agent, budget=40, advanced={"concurrency": concurrency})
    assert len(data.rows) == 40
    assert 1 < state["max"] <= concurrency


def test_concurrency_one_runs_one_call_at_a_time():
    agent, state = _counting_agent(None)
    data = run(agent, budget=8, advanced={"concurrency": 1})
    assert len(data.rows) == 8 and state["max"] == 1


def test_threaded_sync_agent_gives_the_same_rows_for_a_seed():
    def agent(message):
        time.sleep(0.001 * (hash(message) % 5))
        return f"reply to {current_rollout.scenario_id}"

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "timing"} for r in rows]

    a = run(agent, budget=20, advanced={"concurrency": 8, "seed": 3})
    b = run(agent, budget=20, advanced={"concurrency": 8, "seed": 3})
    assert strip(a.rows) == strip(b.rows)


class _Desk:
    """An agent class: each instance answers with its own settings."""

    def __init__(self, skill: float) -> None:
        self.skill = skill

    def __call__(self, message: str) -> str:
        return f"skill {self.skill}: {message[:20]}"


def test_two_instances_of_one_agent_class_do_not_share_rollout_ids():
    """The run id hashed a callable's name only: a class agent at two settings
    (``+agent.kwargs.skill=0.6,0.9``) gave both runs the same rollout ids, and compare took
    the two for one run's rows. The same settings still give the same ids."""
    ids = {skill: [r["rollout_id"] for r in run(_Desk(skill)).rows] for skill in (0.6, 0.9)}
    assert not set(ids[0.6]) & set(ids[0.9])
    assert [r["rollout_id"] for r in run(_Desk(0.6)).rows] == ids[0.6]


def test_functools_partial_of_sync_and_async_agents():
    import functools

    def sync_agent(message, *, tools, greeting):
        return f"{greeting}: {len(tools)} tools"

    async def async_agent(message, tone, **context):
        await asyncio.sleep(0)
        return {"final_text": f"{tone} {sorted(context)[0]}"}

    a = run(functools.partial(sync_agent, greeting="hi"))
    assert [r["final_text"] for r in a.rows] == [a.rows[0]["final_text"]] * 6
    assert a.rows[0]["final_text"].startswith("hi: ") and not a.rows[0]["final_text"].endswith(
        ": 0 tools"
    )
    b = run(functools.partial(async_agent, tone="calm"))
    assert {r["final_text"] for r in b.rows} == {"calm sampling"}


def test_callable_object_taking_context_and_returning_an_openai_messages_list():
    class Agent:
        def __call__(self, message, **context):
            name = context["tools"][0]["function"]["name"]
            return [
                {"role": "system", "content": "you help"},
                {"role": "user", "content": message},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "t1", "type": "function",
                     "function": {"name": name, "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "t1", "content": "{}"},
                {"role": "assistant", "content": "All set."},
            ]  # fmt: skip

    data = run(Agent())
    assert len(data.rows) == 6
    row = data.rows[0]
    assert [s["kind"] for s in row["steps"]] == ["assistant", "tool", "assistant"]
    assert row["final_text"] == "All set."
    assert row["messages"][-1] == {"role": "assistant", "content": "All set."}


def test_current_rollout_reads_as_the_prompt_and_rollout_index_pair_in_a_thread():
    seen = []

    def agent(message):
        ctx = current_rollout.get()
        prompt, index = ctx
        seen.append((prompt == message, ctx[0] == message, ctx[1] == index, len(ctx),
                     current_rollout.rollout_index == index))  # fmt: skip
        pairs.add((prompt, index))
        return "ok"

    pairs: set = set()
    data = run(agent, budget=8, advanced={"concurrency": 4})
    assert len(data.rows) == 8 and seen and all(s == (True, True, True, 2, True) for s in seen)
    # each thread saw its own rollout, the one its row records
    assert pairs == {(r["prompt"], r["rollout_index"]) for r in data.rows}


def test_a_sync_call_that_hangs_past_the_timeout_does_not_starve_the_calls_after_it():
    # A blocking client that hangs on some asks (a dead socket, no client timeout): each
    # hung call is lost to the timeout, and every other ask still gets a thread and answers.
    release = threading.Event()
    lock = threading.Lock()
    hung: list[str] = []

    def agent(message):
        if len(message) % 3 == 0:
            with lock:
                hung.append(message)
            release.wait(20)
            return "late"
        return "ok"

    try:
        data = run(agent, budget=16, timeout=0.5, advanced={"concurrency": 2})
    finally:
        release.set()
    lost = data.report()["rollouts_lost_by"]
    # a lost rollout keeps its slot of the budget
    assert (
        len(data.rows) + len(data.lost) == 16 and data.report()["stopped_because"] != "dead_agent"
    )
    assert hung and lost == {"timeout": len(hung)}  # only calls that really hung are lost
    [w] = [w for w in data.warnings if "rollouts were lost" in w]
    assert "the agent did not return within timeout=0.5 s" in w and "model completion" not in w


def test_a_class_passed_as_the_agent_is_refused_before_work_naming_the_fix():
    class Desk:
        def __call__(self, message):
            return "ok"

    with pytest.raises(
        ValueError, match=r"agent=Desk is a class; pass an instance \(agent=Desk\(\)\)"
    ):
        run(Desk)
    assert len(run(Desk()).rows) == 6


def _looks_up(world, message):
    """One world.execute call on the ask's order; its recorded step."""
    import re

    found = re.search(r"ORD-\d{5}", message)
    return world.execute("lookup_order", {"order_id": found.group() if found else "ORD-00000"})


@pytest.mark.parametrize(
    "shape",
    [
        lambda reply: reply,
        lambda reply: {"role": "assistant", "content": reply},
        lambda reply: [{"role": "user", "content": "hi"}, {"role": "assistant", "content": reply}],
        lambda reply: {"messages": [{"role": "assistant", "content": reply}]},
        lambda reply: {"steps": [{"kind": "assistant", "content": reply}], "final_text": reply},
    ],
    ids=["str", "message", "message_list", "messages_dict", "steps_dict"],
)
def test_a_reply_returned_beside_world_execute_calls_keeps_the_calls(shape):
    # a returned message used to replace the world's record: every lookup gone from the row
    def agent(message, *, world):
        step = _looks_up(world, message)
        return shape(f"Looked up: {step['status']}")

    rows = run(agent, advanced={"seed": 5}).rows
    assert len(rows) == 6
    for row in rows:
        [tool] = [s for s in row["steps"] if s["kind"] == "tool"]
        assert (
            tool["name"] == "lookup_order" and row["final_text"] == f"Looked up: {tool['status']}"
        )
        assert [s["kind"] for s in row["steps"]] == ["assistant", "tool", "assistant"]
    base = run(lambda m, *, world: f"Looked up: {_looks_up(world, m)['status']}",
               advanced={"seed": 5}).rows  # fmt: skip
    assert [r["steps"] for r in rows] == [r["steps"] for r in base]


def test_a_transcript_of_the_calls_made_takes_each_result_from_the_world():
    # the transcript says every call went fine; the world's record says what happened
    def agent(message, *, world):
        step = _looks_up(world, message)
        call = {"name": "lookup_order", "arguments": json.dumps(step["arguments"])}
        return [
            {"role": "assistant", "content": "Checking.",
             "tool_calls": [{"id": "mine", "type": "function", "function": call}]},
            {"role": "tool", "tool_call_id": "mine", "content": '{"ok": true}'},
            {"role": "assistant", "content": "Done."},
        ]  # fmt: skip

    data = run(agent, budget=24, fault_rate=1.0, advanced={"seed": 2})
    assert len(data.rows) == 24
    statuses = set()
    for row in data.rows:
        kinds = [s["kind"] for s in row["steps"]]
        assert kinds == ["assistant", "tool", "assistant"] and row["final_text"] == "Done."
        tool = row["steps"][1]
        assert tool["tool_call_id"] == "mine" and row["steps"][0]["content"] == "Checking."
        assert tool["result"] != {"ok": True}  # the world's answer, not the agent's retelling
        statuses.add(tool["status"])
    assert statuses - {"ok"}, statuses  # a fault the world fired stays on its step


def test_a_dialogue_returned_beside_world_execute_calls_keeps_the_calls_and_answers():
    # the lookup and the person's answer from the world's record, the reply from the
    # transcript: the row the same agent gets returning the reply as a str
    def act(message, world):
        _looks_up(world, message)
        return world.ask_user("What is your order number?")

    def agent(message, *, world):
        answer = act(message, world)
        return [
            {"role": "assistant", "content": "What is your order number?"},
            {"role": "user", "content": answer or ""},
            {"role": "assistant", "content": "All done."},
        ]

    def as_str(message, *, world):
        act(message, world)
        return "All done."

    rows = run(agent, advanced={"seed": 4}).rows
    assert len(rows) == 6 and all(r["final_text"] == "All done." for r in rows)
    assert all(any(s["kind"] == "tool" for s in r["steps"]) for r in rows)
    assert any(s["kind"] == "user" for r in rows for s in r["steps"])
    base = run(as_str, advanced={"seed": 4}).rows
    assert [r["steps"] for r in rows] == [r["steps"] for r in base]


def test_a_dialogue_returned_beside_ask_user_alone_is_kept():
    # no world.execute call: the returned turns are the only record of where the ask fell
    def agent(message, *, world):
        answer = world.ask_user("What is your order number?") or "(no answer)"
        return [
            {"role": "assistant", "content": "What is your order number?"},
            {"role": "user", "content": answer},
            {"role": "assistant", "content": "Thanks."},
        ]

    rows = run(agent).rows
    assert rows and all(
        [s["kind"] for s in r["steps"]] == ["assistant", "user", "assistant"] for r in rows
    )


def test_a_callable_that_rewrites_its_tool_results_does_not_rewrite_its_row():
    """The row records what the world said: a faulted call the agent turns into a success
    in the dict it got back still reads as faulted, where grading reads it."""
    import re

    def forger(message, *, world, **context):
        found = re.search(r"ORD-[0-9]{5}", message)
        order = found.group() if found else "ORD-00000"
        for name, args in (("lookup_order", {"order_id": order}),
                           ("issue_refund", {"order_id": order, "amount": 1.0, "reason": "x"})):  # fmt: skip
            step = world.execute(name, args)
            step["status"], step["fault"], step["result"] = "ok", None, {"forged": True}
        return "Done: refunded."

    data = run(forger, budget=60, seed=0)
    fired = [(row, f) for row in data.rows for f in row["faults"]["fired"]]
    assert fired, "no fault fired in 60 rollouts: the check below checked nothing"
    for row, f in fired:
        tools = [s for s in row["steps"] if s["kind"] == "tool"]
        assert tools[f["step"]]["status"] == f["mode"], tools[f["step"]]
    assert not any(s.get("result") == {"forged": True} for row in data.rows for s in row["steps"])


def test_the_recipe_names_every_keyword_an_agent_is_offered():
    """RECIPES said "any subset of the keyword contract" and named none of them: a user who
    wrote ``messages=`` learnt the list only from the refusal."""
    from pathlib import Path

    from wai_exp.simulate.agent_setup import CONTEXT_KEYS

    recipes = (Path(__file__).parents[3] / "docs" / "RECIPES.md").read_text(encoding="utf-8")
    paragraph = recipes[recipes.index("**Your own agent or judge.**") :].split("\n- **", 1)[0]
    for key in CONTEXT_KEYS:
        assert f"`{key}`" in paragraph, key
    # Two versions of one class named apart, else compare calls them one policy.
    assert "self.model_version = " in paragraph
