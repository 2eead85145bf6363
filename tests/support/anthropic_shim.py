"""A real Anthropic-Messages-shaped server on 127.0.0.1 for the ``anthropic:`` backend's
integration test. It translates each ``POST /v1/messages`` into an OpenAI chat call to a
local llama-cpp server and translates the answer back, so the backend speaks real HTTP to a
real model without any key or outside network.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


def _to_openai(body: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": body["system"]})
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            messages.append({"role": m["role"], "content": content})
            continue
        text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
        uses = [b for b in content if b.get("type") == "tool_use"]
        results = [b for b in content if b.get("type") == "tool_result"]
        if uses:
            messages.append(
                {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [
                        {
                            "id": u["id"],
                            "type": "function",
                            "function": {"name": u["name"], "arguments": json.dumps(u["input"])},
                        }
                        for u in uses
                    ],
                }
            )
        elif results:
            for r in results:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": r["tool_use_id"],
                        "content": r["content"]
                        if isinstance(r["content"], str)
                        else json.dumps(r["content"]),
                    }
                )
        else:
            messages.append({"role": m["role"], "content": text})
    payload: dict[str, Any] = {
        "model": body["model"],
        "messages": messages,
        "max_tokens": body.get("max_tokens", 256),
        "temperature": body.get("temperature", 0),
    }
    if body.get("tools"):
        payload["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t["input_schema"],
                },
            }
            for t in body["tools"]
        ]
        payload["tool_choice"] = "auto"
    return payload


def _to_anthropic(answer: dict[str, Any], model: str) -> dict[str, Any]:
    msg = answer["choices"][0]["message"]
    blocks: list[dict[str, Any]] = []
    if msg.get("content"):
        blocks.append({"type": "text", "text": msg["content"]})
    for call in msg.get("tool_calls") or []:
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": call["function"]["name"],
                "input": json.loads(call["function"]["arguments"] or "{}", strict=False),
            }
        )
    usage = answer.get("usage") or {}
    stop = {"length": "max_tokens", "tool_calls": "tool_use"}.get(
        answer["choices"][0].get("finish_reason"), "end_turn"
    )
    return {
        "id": answer.get("id", "msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "usage": {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
        },
    }


def serve(upstream: str) -> tuple[ThreadingHTTPServer, str]:
    """Start the shim in a daemon thread; returns (server, base_url)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if self.path != "/v1/messages" or self.headers.get("anthropic-version") is None:
                self.send_response(400)
                self.end_headers()
                self.wfile.write(
                    b'{"type":"error","error":{"message":"bad path or missing anthropic-version"}}'
                )
                return
            try:
                answer = httpx.post(
                    upstream.rstrip("/") + "/chat/completions", json=_to_openai(body), timeout=300
                ).json()
                out = json.dumps(_to_anthropic(answer, body["model"])).encode()
                status = 200
            except Exception as exc:  # answer like a real API would, not by dropping the socket
                out = json.dumps(
                    {"type": "error", "error": {"type": "api_error", "message": repr(exc)}}
                ).encode()
                status = 500
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"
