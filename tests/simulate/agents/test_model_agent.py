"""Model backends against an injected httpx transport: protocol, loop, retries, errors."""

import asyncio
import json

import httpx
import pytest

from tests.support.fake_world import TableWorld
from wai_exp.llm.http import BackendError, RetryPolicy
from wai_exp.llm.providers import is_model_spec, parse_model_spec
from wai_exp.simulate.agents.model_agent import ModelAgent

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    }
]
NO_WAIT = RetryPolicy(retries=2, base_s=0.0, max_s=0.0)


def openai_answer(content="", calls=(), finish="stop"):
    return {
        "model": "m",
        "choices": [
            {
                "finish_reason": finish,
                "message": {
                    "role": "assistant",
                    "content": content or None,
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": n, "arguments": json.dumps(a)},
                        }
                        for i, (n, a) in enumerate(calls)
                    ]
                    or None,
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


def run(agent, world, prompt="Where is ORD-1?"):
    return asyncio.run(agent(prompt, tools=TOOLS, system_prompt="You help.", world=world))


def test_spec_parsing_defaults_and_explicit_urls():
    assert parse_model_spec("openai:gpt-4.1-mini").base_url.startswith("https://api.openai.com")
    s = parse_model_spec("vllm:Qwen/Qwen3-4B@http://gpu:8000/v1")
    assert (s.provider, s.model, s.base_url) == ("vllm", "Qwen/Qwen3-4B", "http://gpu:8000/v1")
    assert parse_model_spec("ollama:llama3").base_url == "http://127.0.0.1:11434/v1"
    assert is_model_spec("anthropic:claude") and not is_model_spec("scripted")
    with pytest.raises(ValueError, match="provider one of"):
        parse_model_spec("mystery:model")


def test_openai_loop_runs_tools_then_answers():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        assert request.url.path == "/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer k"
        if len(seen) == 1:
            return httpx.Response(
                200,
                json=openai_answer(
                    calls=[("lookup_order", {"order_id": "ORD-1"})], finish="tool_calls"
                ),
            )
        return httpx.Response(200, json=openai_answer("ORD-1 has shipped."))

    agent = ModelAgent(
        "vllm:m@http://h/v1", api_key="k", transport=httpx.MockTransport(handler), retry=NO_WAIT
    )
    world = TableWorld({"lookup_order": {"status": "shipped"}})
    out = run(agent, world)
    assert world.calls == [("lookup_order", {"order_id": "ORD-1"})]
    assert [s["kind"] for s in out["steps"]] == ["assistant", "tool", "assistant"]
    assert out["final_text"] == "ORD-1 has shipped." and out["ended_by"] == "agent"
    assert out["usage"] == {"input_tokens": 20, "output_tokens": 10}
    assert out["sampling"]["model"] == "m" and out["model_version"] == "vllm:m"
    # The second request carries the tool result and an assistant turn with content "" (not null).
    second = seen[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2]["content"] == "" and second[3]["tool_call_id"] == "c0"
    assert seen[0]["tool_choice"] == "auto" and seen[0]["tools"] == TOOLS


def test_question_gets_the_persons_answer_and_walk_away_ends_the_rollout():
    answers = iter([openai_answer("Which order?"), openai_answer("Thanks, which item?")])
    agent = ModelAgent(
        "openai:m",
        api_key="k",
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=next(answers))),
        retry=NO_WAIT,
    )
    world = TableWorld(user_answers=["ORD-7", None])
    out = run(agent, world)
    assert [s["kind"] for s in out["steps"]] == ["assistant", "user", "assistant"]
    assert out["ended_by"] == "user_left"
    assert world.questions == ["Which order?", "Thanks, which item?"]


def test_rate_limit_is_retried_then_succeeds():
    calls = []

    def handler(request):
        calls.append(1)
        if len(calls) < 3:
            return httpx.Response(429, headers={"retry-after": "0"}, json={"error": "slow down"})
        return httpx.Response(200, json=openai_answer("done"))

    agent = ModelAgent(
        "openai:m", api_key="k", transport=httpx.MockTransport(handler), retry=NO_WAIT
    )
    assert run(agent, TableWorld())["final_text"] == "done"
    assert len(calls) == 3


def test_client_error_is_not_retried_and_says_what_failed():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(401, json={"error": "bad key"})

    agent = ModelAgent(
        "openai:m", api_key="k", transport=httpx.MockTransport(handler), retry=NO_WAIT
    )
    with pytest.raises(BackendError, match="HTTP 401") as info:
        run(agent, TableWorld())
    assert info.value.status == 401 and len(calls) == 1


def test_persistent_server_errors_give_up_after_the_retry_budget():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(503, text="overloaded")

    agent = ModelAgent(
        "openai:m", api_key="k", transport=httpx.MockTransport(handler), retry=NO_WAIT
    )
    with pytest.raises(BackendError, match="503"):
        run(agent, TableWorld())
    assert len(calls) == 3  # first try + 2 retries


def test_connect_errors_are_mapped_and_retried():
    calls = []

    def handler(request):
        calls.append(1)
        raise httpx.ConnectError("refused", request=request)

    agent = ModelAgent(
        "openai:m", api_key="k", transport=httpx.MockTransport(handler), retry=NO_WAIT
    )
    with pytest.raises(BackendError, match="could not reach"):
        run(agent, TableWorld())
    assert len(calls) == 3


def test_anthropic_protocol_shape_and_tool_loop():
    seen = []

    def handler(request):
        body = json.loads(request.content)
        seen.append(body)
        assert request.url.path == "/v1/messages"
        assert request.headers["anthropic-version"] and request.headers["x-api-key"] == "k"
        if len(seen) == 1:
            return httpx.Response(
                200,
                json={
                    "model": "claude-x",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "tu1",
                            "name": "lookup_order",
                            "input": {"order_id": "ORD-1"},
                        }
                    ],
                    "stop_reason": "tool_use",
                    "usage": {"input_tokens": 7, "output_tokens": 3},
                },
            )
        return httpx.Response(
            200,
            json={
                "model": "claude-x",
                "content": [{"type": "text", "text": "Shipped."}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 9, "output_tokens": 2},
            },
        )

    agent = ModelAgent(
        "anthropic:claude-x@http://h/v1",
        api_key="k",
        transport=httpx.MockTransport(handler),
        retry=NO_WAIT,
    )
    out = run(agent, TableWorld({"lookup_order": {"status": "shipped"}}))
    assert out["final_text"] == "Shipped."
    assert seen[0]["system"] == "You help." and seen[0]["tools"][0]["input_schema"]["required"] == [
        "order_id"
    ]
    follow = seen[1]["messages"]
    assert follow[1]["content"][0]["type"] == "tool_use"
    assert follow[2]["role"] == "user" and follow[2]["content"][0]["type"] == "tool_result"
    assert out["usage"] == {"input_tokens": 16, "output_tokens": 5}


def test_logprobs_are_summed_per_turn_when_asked():
    answer = openai_answer("ok")
    answer["choices"][0]["logprobs"] = {"content": [{"logprob": -0.5}, {"logprob": -1.0}]}
    agent = ModelAgent(
        "openai:m",
        api_key="k",
        logprobs="tokens",
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=answer)),
        retry=NO_WAIT,
    )
    step = run(agent, TableWorld())["steps"][0]
    assert (
        step["logprob"] == pytest.approx(-1.5)
        and step["n_tokens"] == 2
        and step["token_logprobs"] == [-0.5, -1.0]
    )
