"""OpenAI-compatible chat completions (``openai:``, ``vllm:``, ``ollama:``, any ``/v1`` server)."""

from __future__ import annotations

import json
from typing import Any

from wai_exp.llm.http import BackendError, post_json
from wai_exp.llm.turn import ChatBackend, Completion


class OpenAIChat(ChatBackend):
    """One model behind ``{base_url}/chat/completions``."""

    PATH = "/chat/completions"

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        sampling: dict[str, Any],
        *,
        logprobs: bool = False,
    ) -> Completion:
        """One assistant turn; ``token_logprobs`` is None when ``logprobs`` was not asked or
        the server returned none. ``sampling`` never overrides the served model. Raises
        ``BackendError`` on a failed call or a malformed answer."""
        payload: dict[str, Any] = {**sampling, "model": self.model, "messages": messages}
        if tools:
            payload["tools"] = tools
            payload["tool_choice"] = "auto"
        if logprobs:
            # OpenAI and vLLM honour logprobs alone; llama.cpp returns null unless
            # top_logprobs >= 1 is sent too. One alternative per token is the least it takes.
            payload["logprobs"] = True
            payload["top_logprobs"] = 1
        body = await post_json(
            self.client, self.url, payload, headers=self.headers, policy=self.policy
        )
        try:
            choice = body["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise BackendError(
                f"no choices in the answer from {self.url}: {str(body)[:200]}"
            ) from exc
        calls = []
        for i, call in enumerate(message.get("tool_calls") or []):
            fn = call.get("function") or {}
            raw = fn.get("arguments") or "{}"
            try:
                # strict=False: small models put raw newlines inside JSON strings.
                args = json.loads(raw, strict=False) if isinstance(raw, str) else dict(raw)
            except (ValueError, TypeError):  # not JSON, or not a mapping: keep it as said
                args = {"_unparsed": raw if isinstance(raw, str) else repr(raw)}
            calls.append(
                {
                    "id": call.get("id") or f"call_{i}",
                    "name": fn.get("name", ""),
                    "arguments": args if isinstance(args, dict) else {"value": args},
                }
            )
        usage = body.get("usage") or {}
        token_logprobs = None
        lp = choice.get("logprobs")
        if isinstance(lp, dict) and lp.get("content"):
            token_logprobs = [
                float(t["logprob"]) for t in lp["content"] if isinstance(t, dict) and "logprob" in t
            ] or None
        return Completion(
            content=message.get("content") or "",
            tool_calls=calls,
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
            truncated=choice.get("finish_reason") == "length",
            model=body.get("model") or self.model,
            token_logprobs=token_logprobs,
        )
