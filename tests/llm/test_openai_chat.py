"""The OpenAI-compatible chat request as a real server on 127.0.0.1 receives it: every call
carries its own sampling, tools and messages, although the part before the messages is
encoded once per tool list."""

import asyncio

import pytest

from tests.llm.test_http import NO_WAIT, Script
from tests.support.scripted_server import chat_reply, scripted_server
from wai_exp.llm.http import BackendError, async_client
from wai_exp.llm.openai_chat import OpenAIChat
from wai_exp.llm.turn import Transcript

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look an order up — by its number",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        },
    }
]


def test_each_call_sends_its_own_sampling_tools_and_messages():
    script = Script((200, chat_reply("done")))

    async def go(url):
        async with async_client(timeout=10.0) as client:
            chat = OpenAIChat(client, url, "served-model", api_key="k")
            hot = {"temperature": 0.9, "max_tokens": 64, "model": "not-this-one"}
            await chat.complete([{"role": "user", "content": "où est ORD-1 ?"}], TOOLS, hot)
            await chat.complete([{"role": "user", "content": "second"}], TOOLS, hot)
            hot["temperature"] = 0.1  # the same dict changed in place between calls
            await chat.complete([{"role": "user", "content": "third"}], TOOLS, hot, logprobs=True)
            await chat.complete([{"role": "user", "content": "no tools"}], [], {"seed": 3})

    with scripted_server(script) as url:
        asyncio.run(go(url))
    bodies = [body for _, _, body in script.seen]
    assert [b["messages"][0]["content"] for b in bodies] == [
        "où est ORD-1 ?", "second", "third", "no tools"
    ]  # fmt: skip
    assert all(b["model"] == "served-model" for b in bodies)
    assert [b.get("temperature") for b in bodies] == [0.9, 0.9, 0.1, None]
    assert bodies[0]["tools"] == TOOLS and bodies[0]["tool_choice"] == "auto"
    assert bodies[2]["logprobs"] is True and bodies[2]["top_logprobs"] == 1
    assert "logprobs" not in bodies[1]
    assert "tools" not in bodies[3] and bodies[3]["seed"] == 3
    headers = {k.lower(): v for k, v in script.seen[0][1].items()}
    assert headers["authorization"] == "Bearer k"
    assert headers["content-type"] == "application/json"


def test_a_cookie_the_server_sets_is_never_sent_back():
    script = Script((200, chat_reply("hi"), {"Set-Cookie": "session=abc; Path=/"}))

    async def go(url):
        async with async_client(timeout=10.0) as client:
            chat = OpenAIChat(client, url, "m")
            for _ in range(2):
                await chat.complete([{"role": "user", "content": "hi"}], [], {})
            return len(client.cookies)

    with scripted_server(script) as url:
        kept = asyncio.run(go(url))
    assert kept == 0
    assert all("cookie" not in {k.lower() for k in h} for _, h, _ in script.seen)


def _complete(answer):
    async def go(url):
        async with async_client(timeout=10.0) as client:
            chat = OpenAIChat(client, url, "m", policy=NO_WAIT)
            return await chat.complete([{"role": "user", "content": "hi"}], TOOLS, {})

    with scripted_server(Script((200, answer))) as url:
        return asyncio.run(go(url))


def test_content_given_as_a_list_of_text_parts_is_read_as_its_text():
    # Mistral's and some gateways' answers: content parts, as OpenAI's requests allow.
    parts = [{"type": "text", "text": "Nothing was "}, {"type": "text", "text": "changed."},
             {"type": "image_url", "image_url": {"url": "data:,"}}]  # fmt: skip
    done = _complete({"choices": [{"message": {"role": "assistant", "content": parts}}]})
    assert done.content == "Nothing was changed."


def test_a_choice_whose_message_is_null_is_a_backend_error_naming_the_server():
    with pytest.raises(BackendError, match="no message in the answer from http://127.0.0.1"):
        _complete({"choices": [{"message": None, "finish_reason": "stop"}]})


def test_a_growing_transcript_sends_the_bytes_a_plain_list_does():
    """A rollout's Transcript keeps each message's JSON between turns; what the server gets
    on every turn is what the same messages as a plain list give."""
    script = Script((200, chat_reply("done")))
    turns = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "où est ORD-1 ?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
         "function": {"name": "lookup_order", "arguments": "{\"order_id\": \"ORD-1\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "lookup_order", "content": "{}"},
    ]  # fmt: skip

    async def go(url):
        async with async_client(timeout=10.0) as client:
            chat = OpenAIChat(client, url, "served-model")
            grown = Transcript(turns[:2])
            for n in range(2, len(turns) + 1):
                grown.extend(turns[len(grown) : n])
                await chat.complete(grown, TOOLS, {"temperature": 0.5})
                await chat.complete(list(turns[:n]), TOOLS, {"temperature": 0.5})

    with scripted_server(script) as url:
        asyncio.run(go(url))
    bodies = [body for _, _, body in script.seen]
    assert len(bodies) == 6
    for cached, plain in zip(bodies[::2], bodies[1::2], strict=True):
        assert cached == plain
    assert [len(b["messages"]) for b in bodies[::2]] == [2, 3, 4]
