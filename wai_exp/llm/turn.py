"""What one model call returns, whatever the backend."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from wai_exp.llm.http import RetryPolicy


@dataclass
class Completion:
    """One assistant turn: text, tool calls (``{"id", "name", "arguments": dict}``), usage."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    truncated: bool = False
    model: str = ""
    token_logprobs: list[float] | None = None


class Transcript(list):
    """A rollout's chat messages that only grow: messages are appended, never changed or
    removed. A backend may keep each message's JSON between the calls of one rollout
    (``json_bytes``) instead of encoding the whole conversation again on every turn."""

    __slots__ = ("_encoded",)

    def __init__(self, messages: Any = ()) -> None:
        super().__init__(messages)
        self._encoded: list[bytes] = []

    def json_bytes(self, encode: Callable[[Any], bytes]) -> bytes:
        """The messages as one JSON array, each message encoded by ``encode`` once (what
        ``encode(list(self))`` gives for compact JSON). Raises what ``encode`` raises."""
        encoded = self._encoded
        if len(encoded) > len(self):  # the promise was broken: start again
            encoded.clear()
        for message in self[len(encoded) :]:
            encoded.append(encode(message))
        return b"[" + b",".join(encoded) + b"]"


class BackendError(RuntimeError):
    """A model call failed for good. ``status`` is the HTTP status when there was one."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        #: seconds the server's ``Retry-After`` asked for, when it sent one
        self.retry_after = retry_after


#: How servers say a request does not fit the model's context: OpenAI, vLLM and
#: llama-cpp-python ("maximum context length", "context_length_exceeded"), llama.cpp's own
#: server ("exceeds the available context size"), others ("exceed context window",
#: "prompt is too long").
_CONTEXT_FULL = re.compile(
    r"context[_ ]length|context window|context size|prompt is too long|too many tokens", re.I
)


def context_overflow(exc: BaseException | str) -> bool:
    """True for an HTTP 400 that says the request outgrew the model's context window (a
    ``BackendError``, or the text of a lost rollout's error)."""
    if isinstance(exc, BaseException):
        if getattr(exc, "status", None) != 400:
            return False
        exc = str(exc)
    return "400" in exc and bool(_CONTEXT_FULL.search(exc))


class CompletionTimeout(TimeoutError, BackendError):
    """One model completion took longer than its limit. ``limit_s`` is the limit, ``turn``
    the 1-based agent turn it was waiting on; the message names both. ``detail`` says why,
    when more is known than the limit (a server taken as hung). A ``TimeoutError`` (the
    engine counts the rollout lost to a timeout) and a ``BackendError`` (a judge that turns
    failed calls into a verdict's reason catches it with the others)."""

    def __init__(
        self, message: str, *, limit_s: float, turn: int | None = None, detail: str = ""
    ) -> None:
        TimeoutError.__init__(self, message)
        self.status, self.retryable, self.retry_after = None, False, None
        self.limit_s = limit_s
        self.turn = turn
        self.detail = detail


class ChatBackend:
    """One model behind ``{base_url}{PATH}``: what every backend holds. Subclasses set
    ``PATH`` and ``auth_headers`` and implement ``complete``."""

    PATH = ""
    #: True when ``complete`` sends ``response_format`` to the server (a structured reply).
    accepts_response_format = False

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        from wai_exp.llm.http import DEFAULT_RETRY, endpoint_url

        self.client = client
        self.url = endpoint_url(base_url, self.PATH)
        self.model = model
        self.headers = self.auth_headers(api_key)
        self.policy = policy or DEFAULT_RETRY

    @staticmethod
    def auth_headers(api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        sampling: dict[str, Any],
        *,
        logprobs: bool = False,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """One assistant turn. ``response_format`` is given only to a backend that
        ``accepts_response_format``. Raises ``BackendError``."""
        raise NotImplementedError
