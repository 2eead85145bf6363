"""Anthropic Messages API (``anthropic:``), translated to and from the OpenAI-shaped turn."""

from __future__ import annotations

import json
from typing import Any

from wai_exp.llm.http import BackendError, post_json
from wai_exp.llm.turn import ChatBackend, Completion

API_VERSION = "2023-06-01"


def to_anthropic(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(system, messages, tools) in Anthropic shape from an OpenAI-shaped transcript."""
    system = "\n\n".join(
        m["content"] for m in messages if m["role"] == "system" and m.get("content")
    )
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "system":
            continue
        if role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m.get("content") or "",
            }
            # Tool results travel as a user turn; consecutive results share one.
            if (
                out
                and out[-1]["role"] == "user"
                and isinstance(out[-1]["content"], list)
                and out[-1]["content"]
                and out[-1]["content"][0].get("type") == "tool_result"
            ):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"]})
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": fn["name"],
                        "input": json.loads(fn["arguments"] or "{}"),
                    }
                )
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]})
        else:
            out.append({"role": "user", "content": m.get("content") or ""})
    a_tools = [
        {
            "name": t["function"]["name"],
            "description": t["function"].get("description", ""),
            "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}},
        }
        for t in tools
    ]
    return system, out, a_tools


class AnthropicChat(ChatBackend):
    """One model behind ``{base_url}/messages``."""

    PATH = "/messages"

    @staticmethod
    def auth_headers(api_key: str | None) -> dict[str, str]:
        return {"anthropic-version": API_VERSION, **({"x-api-key": api_key} if api_key else {})}

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        sampling: dict[str, Any],
        *,
        logprobs: bool = False,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """One assistant turn. Raises ``BackendError`` on a failed call or a malformed answer.
        ``response_format`` is never given (``accepts_response_format`` is False)."""
        system, a_messages, a_tools = to_anthropic(messages, tools)
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": a_messages,
            "max_tokens": sampling.get("max_tokens", 1024),
        }
        if "temperature" in sampling:
            payload["temperature"] = sampling["temperature"]
        if system:
            payload["system"] = system
        if a_tools:
            payload["tools"] = a_tools
        body = await post_json(
            self.client, self.url, payload, headers=self.headers, policy=self.policy
        )
        if not isinstance(body.get("content"), list):
            raise BackendError(
                f"no content blocks in the answer from {self.url}: {str(body)[:200]}"
            )
        blocks = [b for b in body["content"] if isinstance(b, dict)]
        text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
        calls: list[dict[str, Any]] = [
            {
                "id": b.get("id") or f"toolu_{i}",
                "name": b.get("name") or "",
                "arguments": b.get("input") if isinstance(b.get("input"), dict) else {},
            }
            for i, b in enumerate(blocks)
            if b.get("type") == "tool_use"
        ]
        usage = body.get("usage") or {}
        return Completion(
            content=text,
            tool_calls=calls,
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
            truncated=body.get("stop_reason") == "max_tokens",
            model=body.get("model") or self.model,
        )
