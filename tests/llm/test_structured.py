"""Structured output (``response_format``) against real servers on 127.0.0.1 whose answers
the test scripts: what each mode sends, and how a refusal steps down (a 400 from an
OpenAI-style server, llama-cpp-python's 500 naming ``response_format``) exactly once."""

import asyncio
import threading

import pytest

from tests.support.scripted_server import chat_reply, scripted_server
from wai_exp.llm.http import BackendError, RetryPolicy, async_client
from wai_exp.llm.openai_chat import OpenAIChat
from wai_exp.llm.structured import StructuredOutput

RETRY = RetryPolicy(retries=2, base_s=0.0, max_s=0.0)
SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "enum": [1, 0]}},
    "required": ["score"],
    "additionalProperties": False,
}


class Server:
    """Accepts only the ``response_format`` types in ``accepts`` (None = no response_format
    at all); refuses the others as ``refuse(type)`` says. Records every request body."""

    def __init__(self, accepts, refuse):
        self.accepts = set(accepts)
        self.refuse = refuse
        self.seen: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, path, headers, body):
        with self.lock:
            self.seen.append(body)
        kind = (body.get("response_format") or {}).get("type")
        if kind in self.accepts:
            return 200, chat_reply('{"score": 1}')
        return self.refuse(kind)

    def forms(self):
        return [(b.get("response_format") or {}).get("type") for b in self.seen]


def openai_400(kind):
    return 400, {"error": {"message": f"Invalid parameter: 'response_format' of type {kind!r}"}}


def llama_cpp_500(kind):
    # what llama-cpp-python 0.3.36 answers to type json_schema (seen against the real server)
    return 500, {
        "error": {
            "message": "1 validation error: {'type': 'literal_error', 'loc': ('body', "
            "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"}"
        }
    }


def run(structured, url, calls=1):
    async def go():
        async with async_client(timeout=10.0) as client:
            backend = OpenAIChat(client, url, "m", policy=RETRY)
            out = []
            for _ in range(calls):
                out.append(
                    await structured.complete(
                        backend, [{"role": "user", "content": "grade"}], {"temperature": 0}
                    )
                )
            return out

    return asyncio.run(go())


def test_auto_sends_the_json_schema_strictly_and_keeps_it_when_accepted():
    server = Server({"json_schema"}, openai_400)
    structured = StructuredOutput("auto", "verdict", SCHEMA)
    with scripted_server(server) as url:
        [(done, form)] = run(structured, url)
    assert form == "json_schema" and done.content == '{"score": 1}'
    assert server.seen[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": SCHEMA, "strict": True},
    }
    assert structured.meta(form) == {"structured_output": "json_schema"}


def test_llama_cpp_refusing_json_schema_with_a_500_gets_json_object_without_retries():
    server = Server({"json_object"}, llama_cpp_500)
    structured = StructuredOutput("auto", "verdict", SCHEMA)
    with scripted_server(server) as url:
        results = run(structured, url, calls=3)
    # one refused request (not retried like a server fault), then json_object for good
    assert server.forms() == ["json_schema", "json_object", "json_object", "json_object"]
    assert server.seen[1]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert [form for _, form in results] == ["json_object"] * 3
    meta = structured.meta("json_object")
    assert meta["structured_output"] == "json_object"
    assert "json_schema refused (HTTP 500" in meta["structured_output_fallback"]
    assert meta["structured_output_fallback"].endswith("now sending json_object")


def test_a_server_refusing_every_form_with_400_is_asked_plainly_once_and_for_good():
    server = Server({None}, openai_400)
    structured = StructuredOutput("json_schema", "verdict", SCHEMA)
    with scripted_server(server) as url:
        results = run(structured, url, calls=2)
    # an explicit mode falls back straight to no response_format: one retry, remembered
    assert server.forms() == ["json_schema", None, None]
    assert [form for _, form in results] == [None, None]
    assert structured.meta(None)["structured_output"] == "off"
    assert "HTTP 400" in structured.meta(None)["structured_output_fallback"]


def test_off_sends_no_response_format():
    server = Server({None}, openai_400)
    with scripted_server(server) as url:
        [(_, form)] = run(StructuredOutput("off", "verdict", SCHEMA), url)
    assert form is None and "response_format" not in server.seen[0]


def test_a_400_that_is_not_about_response_format_fails_and_moves_nothing():
    server = Server(set(), lambda kind: (400, {"error": {"message": "prompt is too long"}}))
    structured = StructuredOutput("auto", "verdict", SCHEMA)
    with scripted_server(server) as url, pytest.raises(BackendError, match="HTTP 400"):
        run(structured, url)
    # every form was tried once, none answered: the next call starts from json_schema again
    assert server.forms() == ["json_schema", "json_object", None]
    assert structured.form == "json_schema" and structured.fallback is None


def test_an_unknown_mode_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="auto, json_schema, json_object, off"):
        StructuredOutput("grammar", "verdict", SCHEMA)


def test_a_refusal_quoting_the_credential_back_keeps_it_out_of_the_note():
    key = "sk-test-structured-0123456789abcdef"

    def quoting_400(kind):
        # some servers echo the request's headers into their error text
        return 400, {"error": {"message": f"response_format {kind!r} refused for Bearer {key}"}}

    server = Server({None}, quoting_400)
    structured = StructuredOutput("json_schema", "verdict", SCHEMA)

    async def go():
        async with async_client(timeout=10.0) as client:
            backend = OpenAIChat(client, url, "m", api_key=key, policy=RETRY)
            return await structured.complete(backend, [{"role": "user", "content": "g"}], {})

    with scripted_server(server) as url:
        asyncio.run(go())
    note = structured.meta(None)["structured_output_fallback"]
    assert "HTTP 400" in note and key not in note
