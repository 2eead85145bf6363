"""``Model``: one model on one server, as every caller holds it.

The agent (``ModelAgent``), the writer and simulated person (``ModelCaller``), the judges
(rubric, llm, pairwise) and ``reference_logprobs`` each hold a ``Model``. It owns what they
used to rebuild each in its own way:

* the spec (``provider:model[@url]``, parsed once; the provider from the registry) and
  the key (the provider's variable unless given; registered with the redaction rule);
* the HTTP client, one per event loop: a client is bound to the loop it first sent on
  (its aiohttp session is), and callers run on several (the engine's loop, the writer's
  thread, ``run_judge``'s fresh loop per call);
* the chat backend over that client, one per client, so the encoded tool list is kept
  between an agent's calls;
* the timeout: seconds one completion may take, retries included (0 = none). The client's
  own read limit is the same number. Past it, ``CompletionTimeout`` (a ``TimeoutError`` and
  a ``BackendError``) names the model and the limit;
* retries: a ``RetryPolicy`` (tenacity, jittered backoff, ``Retry-After`` honoured).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Any

from wai_exp.llm.providers import PROVIDERS, chat_backend, parse_model_spec
from wai_exp.llm.turn import CompletionTimeout

if TYPE_CHECKING:
    import httpx

    from wai_exp.llm.http import RetryPolicy
    from wai_exp.llm.turn import ChatBackend


class Model:
    """One model spec, its key, timeout, retry policy and per-loop clients.

    ``transport`` replaces the default aiohttp transport (tests, custom backends). Raises
    ``ValueError`` for a spec that does not parse (naming the registered providers)."""

    def __init__(
        self,
        spec: str,
        *,
        api_key: str | None = None,
        timeout: float = 300.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        from wai_exp.llm.http import DEFAULT_RETRY

        self.spec = parse_model_spec(spec)
        self.provider = PROVIDERS[self.spec.provider]
        #: ``provider:model``, the endpoint left out: how rows and reports name the model
        self.name = f"{self.spec.provider}:{self.spec.model}"
        self.api_key = self.provider.api_key(api_key)
        self.timeout = float(timeout or 0)
        self.retry = retry or DEFAULT_RETRY
        self.transport = transport
        # loop -> (client, chat backend); weak: a finished loop's entry goes with it
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, ChatBackend]
        ] = weakref.WeakKeyDictionary()

    @property
    def kind(self) -> str:
        """The API the provider speaks: ``openai`` or ``anthropic``."""
        return self.provider.kind

    def url(self, path: str) -> str:
        """``path`` (``/completions``) under the spec's base URL."""
        return self.spec.base_url.rstrip("/") + path

    def _entry(self) -> tuple[httpx.AsyncClient, ChatBackend]:
        loop = asyncio.get_running_loop()
        entry = self._per_loop.get(loop)
        if entry is None or entry[0].is_closed:
            import httpx

            from wai_exp.llm.http import async_client

            client = async_client(
                timeout=httpx.Timeout(self.timeout or None), transport=self.transport
            )
            chat = chat_backend(self.spec, client, api_key=self.api_key, policy=self.retry)
            entry = self._per_loop[loop] = (client, chat)
        return entry

    def client(self) -> httpx.AsyncClient:
        """The running loop's client (built on first use). Raises ``RuntimeError`` outside
        a running loop."""
        return self._entry()[0]

    def chat(self) -> ChatBackend:
        """The running loop's chat backend (Anthropic Messages or OpenAI-compatible)."""
        return self._entry()[1]

    def late(self, what: str = "") -> CompletionTimeout:
        """The ``CompletionTimeout`` for a call that outlasted ``timeout``; ``what`` follows
        the model's name (``" turn 3"``)."""
        return CompletionTimeout(
            f"{self.name} did not answer{what} within timeout={self.timeout:g} s",
            limit_s=self.timeout,
        )

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        sampling: dict[str, Any] | None = None,
        *,
        logprobs: bool = False,
        structured: Any = None,
        schema: dict[str, Any] | None = None,
        max_string_chars: int | None = None,
    ) -> Any:
        """One completion on the running loop, bounded by ``timeout``: the ``Completion``,
        or with a ``wai_exp.llm.structured.StructuredOutput`` ``(completion, the
        response_format form it was asked with)``. Raises ``BackendError`` when the call
        fails for good, ``CompletionTimeout`` when it outlasts ``timeout``."""
        chat = self.chat()
        if structured is not None:
            call = structured.complete(
                chat, messages, sampling or {}, schema=schema, max_string_chars=max_string_chars
            )
        elif logprobs:
            call = chat.complete(messages, tools or [], sampling or {}, logprobs=True)
        else:
            call = chat.complete(messages, tools or [], sampling or {})
        return await self.bounded(call)

    async def post_json(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` to ``path`` under the base URL with the provider's auth headers,
        retried per the policy and bounded by ``timeout``; the decoded JSON object. Raises
        ``BackendError`` / ``CompletionTimeout``."""
        from wai_exp.llm.http import post_json

        client, chat = self._entry()
        return await self.bounded(
            post_json(client, self.url(path), payload, headers=chat.headers, policy=self.retry)
        )

    async def bounded(self, call: Any) -> Any:
        """Await ``call`` within ``timeout`` (none at 0); ``CompletionTimeout`` past it."""
        if not self.timeout:
            return await call
        try:
            # asyncio.timeout, not wait_for: the call runs in this task, not a new one each.
            async with asyncio.timeout(self.timeout):
                return await call
        except TimeoutError as exc:
            if isinstance(exc, CompletionTimeout):
                raise
            raise self.late() from exc

    def open_clients(self) -> int:
        """How many of its clients (one per loop) are still open."""
        return sum(not client.is_closed for client, _ in list(self._per_loop.values()))

    async def aclose(self) -> None:
        """Close the running loop's client (safe to call twice, or with none open)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        entry = self._per_loop.pop(loop, None)
        if entry is not None:
            await entry[0].aclose()
