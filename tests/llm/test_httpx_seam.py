"""What ``wai_exp.llm.http`` still relies on in httpx, checked so an httpx release that
moves it fails here (not as a silent slowdown or a changed request on the wire).

The fast path (``_ModelClient.direct_route``) sends a model call on the client's own
aiohttp transport with the headers httpx builds; the client's jar ignores ``Set-Cookie``
through the public ``cookies`` property. Both read httpx's public API only."""

from __future__ import annotations

import asyncio
import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

import wai_exp.llm.http as http
from tests.support.scripted_server import chat_reply, scripted_server
from wai_exp.llm.http import RetryPolicy, async_client, post_json

ROOT = Path(__file__).resolve().parents[2]
NO_WAIT = RetryPolicy(retries=0, base_s=0.0, max_s=0.0)


def pinned(name: str) -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(r for r in map(Requirement, deps) if r.name == name)


def test_httpx_and_httpx_aiohttp_are_pinned_and_the_installed_ones_fit():
    for name in ("httpx", "httpx-aiohttp"):
        req = pinned(name)
        assert any(s.operator == "<" for s in req.specifier), f"{name} needs an upper bound"
        assert req.specifier.contains(metadata.version(name)), (name, metadata.version(name))


def test_the_model_layer_reads_no_private_httpx_name():
    source = (ROOT / "wai_exp" / "llm" / "http.py").read_text()
    assert not re.findall(r"httpx\._\w+", source)
    # the client's private attributes (httpx's own: _transport, _auth, _mounts, _state ...)
    assert not re.findall(r"client\._(?!model_cookies|routes)\w+", source)


def run(url: str, *, hook: bool = False, calls: int = 3) -> tuple[int, int]:
    """(calls sent by the direct route, cookies the client kept)."""
    sent = 0
    original = http._Route.post

    async def counted(self, content):
        nonlocal sent
        sent += 1
        return await original(self, content)

    async def noop(request):
        return None

    async def go() -> int:
        async with async_client(timeout=10.0) as client:
            if hook:
                client.event_hooks = {"request": [noop]}  # httpx's own send() from here on
            for _ in range(calls):
                body = await post_json(
                    client, url + "/chat/completions", {"model": "m"}, policy=NO_WAIT
                )
                assert body["choices"][0]["message"]["content"] == "hi"
            return len(client.cookies)

    http._Route.post = counted
    try:
        kept = asyncio.run(go())
    finally:
        http._Route.post = original
    return sent, kept


def answer(path, headers, body):
    return 200, chat_reply("hi"), {"Set-Cookie": "session=abc; Path=/"}


def test_the_default_client_sends_model_calls_by_the_direct_route():
    # If httpx changed how it builds a POST's headers, the route would quietly step back
    # to httpx's pipeline (a third of a call's CPU at 128 in flight): this fails instead.
    with scripted_server(answer) as url:
        sent, kept = run(url)
    assert sent == 3 and kept == 0


def test_on_httpx_own_path_set_cookie_is_still_not_kept():
    # httpx extracts a response's cookies through the public ``cookies`` property; if it
    # wrote its private jar instead, the session cookie would be kept and sent back.
    with scripted_server(answer) as url:
        sent, kept = run(url, hook=True)
    assert sent == 0 and kept == 0
