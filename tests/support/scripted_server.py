"""A real HTTP server on 127.0.0.1 whose answers a test scripts: ``answer(path, headers,
body) -> (status, payload)`` or ``(status, payload, extra_headers)``, where ``payload`` is a
dict (sent as JSON) or raw ``bytes``. Used by the fault tests (a 401 that quotes the key, odd
model replies, 429 with ``Retry-After``, a slow answer from a one-request-at-a-time server)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str, dict[str, str], dict[str, Any]], tuple[int, Any]]


@contextmanager
def scripted_server(answer: Answer, *, serial: bool = False) -> Iterator[str]:
    """Serve ``answer`` on a free port; yields the base URL ``http://127.0.0.1:<port>/v1``.

    ``serial=True`` answers one request at a time, in arrival order, like llama.cpp with one
    slot: a request that comes while another is being answered waits behind it."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            status, payload, *extra = answer(self.path, dict(self.headers), body)
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (extra[0] if extra else {}).items():
                self.send_header(name, value)
            self.end_headers()
            # The client may have stopped waiting (a timeout under test): nothing to answer.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    # A listen backlog like a real server's (http.server's is 5): 32 rollouts connecting at
    # once would otherwise have their SYNs dropped and retried a second later.
    base = HTTPServer if serial else ThreadingHTTPServer
    server_cls = type("ScriptedServer", (base,), {"request_queue_size": 128})
    server = server_cls(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def echo_401(path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
    """What real providers do on a bad key: a 401 whose message quotes the credential."""
    auth = headers.get("Authorization") or headers.get("authorization") or ""
    key = headers.get("x-api-key") or ""
    return 401, {
        "error": {
            "message": f"Incorrect API key provided: {auth}{key}. Request to {path}",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }


def chat_reply(content: str, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An OpenAI chat-completions answer carrying ``content`` (and tool calls)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
