"""A base URL with a query string (``http://host:port/v1?api_key=K``, how some gateways take
their key): every request goes to the endpoint's path under the base URL's path with the query
kept, as a real server on 127.0.0.1 receives it. Joined as text, the path landed after the
query (``/v1?api_key=K/chat/completions``), which such a server answers with 404."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

import pytest

import wai_exp as wai
from tests.llm.test_http import NO_WAIT
from tests.support.scripted_server import chat_reply
from wai_exp.domain.providers import PROVIDERS
from wai_exp.llm.model import Model

#: the query as the gateway takes it, a value with escaped "+", "/" and "=" included
QUERY = "api_key=gw-key-1&sig=a%2Bb%2Fc%3D"
#: what a server reads from it ("/" may arrive escaped or not: a query reads it the same)
PARAMS = parse_qsl(QUERY)

ANSWERS: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": chat_reply("hello"),
    "/v1/messages": {"content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn"},
    "/v1/completions": {"choices": [{"text": "hello"}]},
    "/v1/models": {"data": []},
}


@contextmanager
def gateway() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """A server that answers only the known endpoints with ``QUERY``'s parameters (404 for
    any other path or query); yields its base URL and the (method, path, parameters) of
    every request."""
    seen: list[tuple[str, str, list[tuple[str, str]]]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            path, _, query = self.path.partition("?")
            seen.append((self.command, path, parse_qsl(query)))
            payload = ANSWERS.get(path) if parse_qsl(query) == PARAMS else None
            data = json.dumps(payload or {"error": f"no route {self.path}"}).encode()
            self.send_response(200 if payload else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer  # noqa: N815 - http.server's naming

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("slash", ["", "/"])
def test_every_provider_posts_to_its_path_with_the_query_kept(provider, slash):
    kind = PROVIDERS[provider].kind
    endpoint = "/v1/messages" if kind == "anthropic" else "/v1/chat/completions"
    with gateway() as (url, seen):
        model = Model(f"{provider}:m@{url}{slash}?{QUERY}", api_key="k", retry=NO_WAIT, timeout=10)

        async def once() -> str:
            try:
                return (await model.complete([{"role": "user", "content": "hi"}])).content
            finally:
                await model.aclose()

        assert asyncio.run(once()) == "hello"
    assert seen == [("POST", endpoint, PARAMS)]


def test_a_raw_completion_posts_to_its_path_with_the_query_kept():
    with gateway() as (url, seen):
        model = Model(f"vllm:m@{url}?{QUERY}", retry=NO_WAIT, timeout=10)

        async def once() -> dict[str, Any]:
            try:
                return await model.post_json("/completions", {"prompt": "hi"})
            finally:
                await model.aclose()

        assert asyncio.run(once())["choices"][0]["text"] == "hello"
    assert seen == [("POST", "/v1/completions", PARAMS)]


def test_the_writers_first_touch_asks_for_models_with_the_query_kept():
    def agent(prompt, *, tools, system_prompt, world, sampling):
        return {"final_text": "ok"}

    with gateway() as (url, seen):
        wai.simulate(
            agent, budget=2, simulator=f"vllm:w@{url}?{QUERY}",
            advanced={"hosted_touch_s": 5.0},
        )  # fmt: skip
    assert seen[0] == ("GET", "/v1/models", PARAMS)


def test_the_server_named_in_a_hung_servers_error_is_its_host_alone():
    from wai_exp.llm.http import server_host

    assert server_host(f"http://u:pw@127.0.0.1:8011?{QUERY}") == "127.0.0.1:8011"
    assert server_host("https://api.example.com/v1") == "api.example.com"
