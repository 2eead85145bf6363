"""wai-exp's UI app: MLflow's server whose UI page records "model training" as the browser's
view when it has none; every other response passes through untouched."""

from __future__ import annotations

import asyncio

from wai_exp.tracking.ui_app import SCRIPT, VIEW_KEY, DefaultViewApp

PAGE = b"<!doctype html><html><head><title>MLflow</title><script defer src=main.js></script></head></html>"


def _serve(body: bytes, content_type: bytes, *, method="GET", chunks=1, encoding=None):
    """What the middleware sends for an inner app answering ``body``."""

    async def inner(scope, receive, send):
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        if encoding:
            headers.append((b"content-encoding", encoding))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        step = max(1, len(body) // chunks)
        parts = [body[i : i + step] for i in range(0, len(body), step)] or [b""]
        for i, part in enumerate(parts):
            await send(
                {"type": "http.response.body", "body": part, "more_body": i < len(parts) - 1}
            )

    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request"}

    scope = {"type": "http", "method": method, "path": "/"}
    asyncio.run(DefaultViewApp(inner)(scope, receive, send))
    body_out = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = dict(sent[0]["headers"])
    return body_out, headers


def test_the_ui_page_sets_the_model_training_view_before_mlflows_bundle_reads_it():
    body, headers = _serve(PAGE, b"text/html; charset=utf-8", chunks=3)
    assert body.startswith(b"<!doctype html><html><head>" + SCRIPT)
    assert body.index(SCRIPT) < body.index(b"main.js")
    assert int(headers[b"content-length"]) == len(body)
    # Only when the browser has no choice yet: a user's switch to GenAI is kept.
    assert f"localStorage.getItem('{VIEW_KEY}')===null".encode() in SCRIPT
    assert b"machine_learning" in SCRIPT


def test_api_answers_compressed_pages_and_posts_pass_through_unchanged():
    api = b'{"experiments": []}'
    assert _serve(api, b"application/json") == (api, {b"content-type": b"application/json",
                                                      b"content-length": str(len(api)).encode()})  # fmt: skip
    assert _serve(PAGE, b"text/html", encoding=b"gzip")[0] == PAGE
    assert _serve(PAGE, b"text/html", method="POST")[0] == PAGE
