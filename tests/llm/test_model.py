"""``wai_exp.llm.model.Model``: the one model object every caller holds, against a real
HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.scripted_server import chat_reply, scripted_server
from wai_exp.llm.http import BackendError, RetryPolicy
from wai_exp.llm.model import Model
from wai_exp.llm.turn import CompletionTimeout
from wai_exp.score.judges.pairwise import pairwise_judge
from wai_exp.simulate.agents.model_agent import ModelAgent

NO_WAIT = RetryPolicy(retries=0, base_s=0.0, max_s=0.0)
HI = [{"role": "user", "content": "hi"}]


def reply(path, headers, body):
    return 200, chat_reply("hello")


def slow(path, headers, body):
    time.sleep(1.5)
    return 200, chat_reply("late")


def test_one_agent_serves_rollouts_on_successive_event_loops():
    # The engine runs each simulate() call on a loop of its own. A client opened on one loop
    # cannot send on the next; was: the agent kept its first loop's client and the second
    # run's rollouts failed.
    with scripted_server(reply) as url:
        agent = ModelAgent(f"vllm:m@{url}", retry=NO_WAIT, timeout=10)
        for _ in range(2):
            row = asyncio.run(agent("hi", tools=[], system_prompt=None, world=None))
            assert row["final_text"] == "hello"


def test_a_client_per_loop_closed_by_aclose():
    with scripted_server(reply) as url:
        model = Model(f"vllm:m@{url}", timeout=10, retry=NO_WAIT)

        async def once() -> str:
            done = await model.complete(HI, [], {"max_tokens": 4})
            assert model.open_clients() >= 1
            await model.aclose()
            return done.content

        assert asyncio.run(once()) == "hello"
        assert asyncio.run(once()) == "hello"
        assert model.open_clients() == 0


def test_the_timeout_bounds_the_completion_and_names_model_and_limit():
    with scripted_server(slow) as url:
        model = Model(f"vllm:m@{url}", timeout=0.5, retry=NO_WAIT)

        async def once() -> None:
            try:
                await model.complete(HI, [], {})
            finally:
                await model.aclose()

        with pytest.raises(CompletionTimeout) as err:
            asyncio.run(once())
    assert "vllm:m did not answer within timeout=0.5 s" in str(err.value)
    assert isinstance(err.value, TimeoutError) and isinstance(err.value, BackendError)


def test_a_judge_past_its_timeout_gives_no_winner_with_the_reason():
    with scripted_server(slow) as url:
        judge = pairwise_judge(f"vllm:m@{url}", timeout=0.5, structured_output="off")
        verdict = judge({"prompt": "p", "final_text": "a"}, {"prompt": "p", "final_text": "b"})
    assert verdict["winner"] is None
    assert "did not answer within timeout=0.5 s" in verdict["reason"]
