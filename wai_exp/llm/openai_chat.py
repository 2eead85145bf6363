"""OpenAI-compatible chat completions (``openai:``, ``vllm:``, ``ollama:``, any ``/v1`` server)."""

from __future__ import annotations

import json
from typing import Any

from wai_exp.llm.http import BackendError, encode_json, post_json
from wai_exp.llm.turn import ChatBackend, Completion, Transcript


def _encode(value: Any) -> bytes:
    try:
        return encode_json(value)
    except (TypeError, ValueError) as exc:
        raise BackendError(f"the chat request cannot be sent as JSON: {exc}") from exc


def _text_of(content: Any) -> str:
    """The reply text of a message's ``content``: a string, or the ``text`` of its text
    parts joined (Mistral and some gateways answer in parts); "" for null."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text") or "")
            for part in content
            if isinstance(part, dict) and part.get("type", "text") == "text"
        )
    return "" if content is None else str(content)


class OpenAIChat(ChatBackend):
    """One model behind ``{base_url}/chat/completions``."""

    PATH = "/chat/completions"
    #: Takes ``response_format`` (``wai_exp.llm.structured``).
    accepts_response_format = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The encoded request without its messages, for the last (tools, sampling, logprobs)
        # seen: a run sends one tool list and one sampling on every call, and encoding the
        # tools' schemas again each time costs a tenth of a call's CPU.
        self._head: tuple[Any, dict[str, Any], bool, bytes] | None = None

    def request_body(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        sampling: dict[str, Any],
        *,
        logprobs: bool = False,
    ) -> bytes:
        """The JSON body of one chat completion: ``sampling``, the served model, the tools
        (with ``tool_choice: auto``), the logprob options, then ``messages``. The part before
        ``messages`` is encoded once per tool list (by identity: a caller must not change a
        tool list in place between calls) and sampling (by value); a ``Transcript``'s messages
        are each encoded once across its calls. Raises ``BackendError`` for what JSON
        cannot hold."""
        head = self._head
        if head is None or head[0] is not tools or head[2] != logprobs or head[1] != sampling:
            fixed: dict[str, Any] = {**sampling, "model": self.model}
            if tools:
                fixed["tools"] = tools
                fixed["tool_choice"] = "auto"
            if logprobs:
                # OpenAI and vLLM honour logprobs alone; llama.cpp returns null unless
                # top_logprobs >= 1 is sent too. One alternative per token is the least it takes.
                fixed["logprobs"] = True
                fixed["top_logprobs"] = 1
            fixed.pop("messages", None)
            head = (tools, dict(sampling), logprobs, _encode(fixed)[:-1] + b',"messages":')
            self._head = head
        if isinstance(messages, Transcript):  # a rollout's: earlier turns encoded already
            return head[3] + messages.json_bytes(_encode) + b"}"
        return head[3] + _encode(messages) + b"}"

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        sampling: dict[str, Any],
        *,
        logprobs: bool = False,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """One assistant turn; ``token_logprobs`` is None when ``logprobs`` was not asked or
        the server returned none. ``sampling`` never overrides the served model;
        ``response_format`` is sent as given (an error naming it is not retried). Raises
        ``BackendError`` on a failed call or a malformed answer."""
        final = None
        if response_format is not None:
            from wai_exp.llm.structured import refusal_response

            # part of the request's fixed head, like sampling (one schema per caller)
            sampling = {**sampling, "response_format": response_format}
            final = refusal_response
        body = await post_json(
            self.client,
            self.url,
            self.request_body(messages, tools, sampling, logprobs=logprobs),
            headers=self.headers,
            policy=self.policy,
            final=final,
        )
        try:
            choice = body["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise BackendError(
                f"no choices in the answer from {self.url}: {str(body)[:200]}"
            ) from exc
        if not isinstance(message, dict):
            raise BackendError(f"no message in the answer from {self.url}: {str(body)[:200]}")
        calls = []
        raw_calls = message.get("tool_calls")
        for i, call in enumerate(raw_calls if isinstance(raw_calls, list) else []):
            if not isinstance(call, dict):
                continue
            fn = call.get("function") or {}
            raw = fn.get("arguments") or "{}"
            try:
                # strict=False: small models put raw newlines inside JSON strings.
                args = json.loads(raw, strict=False) if isinstance(raw, str) else dict(raw)
                if isinstance(args, str) and args.lstrip().startswith("{"):
                    # encoded twice (some gateways): the JSON string of the JSON object
                    args = json.loads(args, strict=False)
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
            content=_text_of(message.get("content")),
            tool_calls=calls,
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
            truncated=choice.get("finish_reason") == "length",
            model=body.get("model") or self.model,
            token_logprobs=token_logprobs,
        )
