"""``reset(task, user_model=<spec>)``: a model plays the person in an episode (the template
person by default), against a real HTTP server on 127.0.0.1 scripted by the test."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.support.scripted_server import chat_reply, scripted_server
from wai_exp.env import EnvError, reset

QUESTION = {"role": "assistant", "content": "Could you tell me your order number?"}


class Person:
    """Answers every question with one line of its own, and counts the requests."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, path, headers, body):
        with self.lock:
            self.requests.append(body)
        return 200, chat_reply("oh right, let me find it for you")


def _asks(records):
    """A record whose ask leaves something to ask for (the person has a line to give)."""
    return next(r for r in records if r["reward_model"]["ground_truth"].get("ask_back"))


def test_the_template_person_answers_by_default(run):
    _, records = run
    ep = reset(_asks(records))
    said = ep.step(QUESTION)
    assert said.messages[0]["role"] == "user" and "oh right" not in said.messages[0]["content"]
    ep.step({"role": "assistant", "content": "Thanks, done."})
    assert ep.row["user_model"] == "template"


def test_a_model_plays_the_person_when_configured(run):
    _, records = run
    person = Person()
    with scripted_server(person) as url:
        ep = reset(_asks(records), user_model=f"vllm:person-bot@{url}")
        said = ep.step(QUESTION)
        assert said.messages == [{"role": "user", "content": "oh right, let me find it for you"}]
        # The model saw the agent's question; on a loop, astep awaits its line the same way.
        assert person.requests[-1]["messages"][-1]["content"] == QUESTION["content"]
        ep2 = reset(_asks(records), user_model=f"vllm:person-bot@{url}")
        heard = asyncio.run(ep2.astep(QUESTION))
        assert heard.messages[0]["content"] == "oh right, let me find it for you"
        done = ep.step({"role": "assistant", "content": "Thanks, done."})
    assert done.done and ep.row["user_model"] == "vllm:person-bot"
    assert len(person.requests) == 2


def test_a_user_model_that_is_not_a_spec_is_refused(run):
    _, records = run
    with pytest.raises(EnvError, match="user_model="):
        reset(_asks(records), user_model="not a spec")
