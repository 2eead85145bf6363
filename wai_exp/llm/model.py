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
* retries: a ``RetryPolicy`` (tenacity, jittered backoff, ``Retry-After`` honoured);
* the gate (``gate``, set by a run through ``wai_exp.llm.concurrency.ServerLimits``): the
  server's adaptive in-flight limit. With one, a call waits for a slot before its timeout
  starts, and an HTTP 429/503/529 is waited out outside the slot (``Retry-After``
  honoured, as long as the gate's ``wait_bound`` allows) instead of ending the call after
  three tries.
"""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from wai_exp.llm.providers import PROVIDERS, chat_backend, parse_model_spec
from wai_exp.llm.turn import BackendError, CompletionTimeout

if TYPE_CHECKING:
    import httpx

    from wai_exp.llm.concurrency import AdaptiveLimit
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
        #: the server's adaptive in-flight limit (``ServerLimits.attach``); None: no gate
        self.gate: AdaptiveLimit | None = None
        #: ``start() -> token`` / ``done(token)`` around each call sent (after the gate):
        #: the agent's ``CallTimes``, read by the progress line's warnings
        self.observer: Any = None
        # loop -> (client, chat backend); weak: a finished loop's entry goes with it
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, ChatBackend]
        ] = weakref.WeakKeyDictionary()

    @property
    def kind(self) -> str:
        """The API the provider speaks: ``openai`` or ``anthropic``."""
        return self.provider.kind

    def url(self, path: str) -> str:
        """``path`` (``/completions``) under the spec's base URL, its query kept."""
        from wai_exp.llm.http import endpoint_url

        return endpoint_url(self.spec.base_url, path)

    def _entry(self) -> tuple[httpx.AsyncClient, ChatBackend]:
        loop = asyncio.get_running_loop()
        entry = self._per_loop.get(loop)
        if entry is None or entry[0].is_closed:
            import httpx

            from wai_exp.llm.http import async_client

            client = async_client(
                timeout=httpx.Timeout(self.timeout or None), transport=self.transport
            )
            policy = self.retry
            if self.gate is not None:  # the gate waits out 429/503 itself, outside the slot
                import dataclasses

                policy = dataclasses.replace(policy, throttles=False)
            chat = chat_backend(self.spec, client, api_key=self.api_key, policy=policy)
            entry = self._per_loop[loop] = (client, chat)
        return entry

    def client(self) -> httpx.AsyncClient:
        """The running loop's client (built on first use). Raises ``RuntimeError`` outside
        a running loop."""
        return self._entry()[0]

    def chat(self) -> ChatBackend:
        """The running loop's chat backend (Anthropic Messages or OpenAI-compatible)."""
        return self._entry()[1]

    def late(self, what: str = "", detail: str = "") -> CompletionTimeout:
        """The ``CompletionTimeout`` for a call that outlasted ``timeout``; ``what`` follows
        the model's name (``" turn 3"``), ``detail`` (why, when known) the limit."""
        said = f"{self.name} did not answer{what} within timeout={self.timeout:g} s"
        return CompletionTimeout(
            f"{said}: {detail}" if detail else said, limit_s=self.timeout, detail=detail
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

        def call() -> Awaitable[Any]:
            chat = self.chat()
            if structured is not None:
                return structured.complete(
                    chat, messages, sampling or {}, schema=schema, max_string_chars=max_string_chars
                )
            if logprobs:
                return chat.complete(messages, tools or [], sampling or {}, logprobs=True)
            return chat.complete(messages, tools or [], sampling or {})

        return await self.gated(call)

    async def post_json(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` to ``path`` under the base URL with the provider's auth headers,
        retried per the policy and bounded by ``timeout``; the decoded JSON object. Raises
        ``BackendError`` / ``CompletionTimeout``."""
        from wai_exp.llm.http import post_json

        def call() -> Awaitable[Any]:
            client, chat = self._entry()
            return post_json(
                client, self.url(path), payload, headers=chat.headers, policy=chat.policy
            )

        return await self.gated(call)

    async def gated(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """``call()`` bounded by ``timeout``, through the gate when there is one: it waits
        for a slot, then its timeout starts; a 429/503/529 releases the slot, waits
        (``Retry-After`` honoured) and tries again while ``gate.wait_bound`` allows; a
        timeout of a call sent behind others is tried again (``QUEUED_TIMEOUT_RETRIES``):
        the wait was our queue's. Raises ``BackendError`` / ``CompletionTimeout``; past the
        bound, a ``BackendError`` naming ``gate.wait_knob``."""
        gate = self.gate
        if gate is None:
            return await self._sent(call)
        try:
            return await self._admitted(gate, call)
        except BackendError as exc:
            if not _gate_retries(exc):
                raise
            first = exc
        return await self._retried(gate, call, first)

    async def _retried(
        self, gate: AdaptiveLimit, call: Callable[[], Awaitable[Any]], first: BackendError
    ) -> Any:
        """The tries after ``first`` failed in a way the gate waits out (tenacity's loop;
        the first try ran outside it, as ``post_json``'s does)."""
        import tenacity

        from wai_exp.llm.concurrency import QUEUED_TIMEOUT_RETRIES

        requeues = 0
        resend = False  # the last try timed out: its own abandoned try is no queue of ours

        def stop(state: Any) -> bool:
            nonlocal requeues
            exc = state.outcome.exception()
            if _throttled(exc):
                if _down(exc) and not gate.answered_any():
                    # 503 from a server that never answered: down, not busy. The ordinary
                    # tries, then the rollout is lost (the dead-agent stop can then end a
                    # run against a server that is not up) instead of ten minutes of waits.
                    return bool(state.attempt_number > self.retry.retries)
                return bool(state.idle_for + state.upcoming_sleep > gate.wait_bound)
            requeues += 1
            return requeues > QUEUED_TIMEOUT_RETRIES

        def before_sleep(state: Any) -> None:
            nonlocal resend
            resend = not _throttled(state.outcome.exception())
            if resend:
                gate.requeued()
            else:
                gate.waited(state.upcoming_sleep)

        failed: BackendError | None = first
        async for attempt in tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(_gate_retries),
            wait=_throttle_wait,
            stop=stop,
            before_sleep=before_sleep,
            retry_error_callback=partial_error(self, gate),
        ):
            with attempt:
                if failed is not None:
                    replay, failed = failed, None
                    raise replay
                return await self._admitted(gate, call, resend=resend)
        raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover

    async def _admitted(
        self, gate: AdaptiveLimit, call: Callable[[], Awaitable[Any]], *, resend: bool = False
    ) -> Any:
        """One try (``resend``: the last one timed out; ``AdaptiveLimit.acquire``): wait for
        a slot, send, give the slot back with what the try showed. A
        timeout the gate says to send again is marked ``sent_behind``; one that shows the
        server hung (``AdaptiveLimit.release``), and any call made after, raises the
        hung-server ``CompletionTimeout`` (``unanswered``)."""
        from wai_exp.llm.concurrency import ServerUnanswered

        try:
            admission = await gate.acquire(resend=resend)
        except ServerUnanswered as hung:
            raise self.unanswered(gate, hung) from hung
        try:
            result = await self._sent(call)
        except BackendError as exc:
            if not _timed_out(exc):
                gate.release(admission, throttled=_throttled(exc))
                raise
            fate = gate.release(admission, latency=time.monotonic() - admission.t0, timed_out=True)
            if fate == "hung" and gate.unanswered is not None:
                raise self.unanswered(gate, gate.unanswered) from exc
            # sent behind calls of ours (or to a server that may be cold): the lowered
            # limit keeps the next try here
            exc.sent_behind = fate == "requeue"  # type: ignore[attr-defined]  # read back by getattr in the resend check
            raise
        except BaseException:
            gate.release(admission)
            raise
        gate.release(admission, latency=time.monotonic() - admission.t0)
        return result

    def unanswered(self, gate: AdaptiveLimit, hung: Exception) -> CompletionTimeout:
        """The hung-server error: the server answered none of the run's calls over two
        timeouts, the second of a call sent alone."""
        from wai_exp.llm.concurrency import ServerUnanswered
        from wai_exp.llm.http import server_host

        n = hung.timeouts if isinstance(hung, ServerUnanswered) else 0
        host = server_host(self.spec.base_url)
        return self.late(
            detail=f"the server at {host} has answered none of this run's calls ({n} timed "
            "out, the last one sent alone after an earlier one had): it is hung, or its "
            "first answer takes longer than the timeout"
        )

    async def _sent(self, call: Callable[[], Awaitable[Any]]) -> Any:
        observer = self.observer
        token = observer.start() if observer is not None else None
        try:
            return await self.bounded(call())
        finally:
            if observer is not None:
                observer.done(token)

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


def _throttled(exc: BaseException | None) -> bool:
    from wai_exp.llm.concurrency import THROTTLE_STATUSES

    return isinstance(exc, BackendError) and getattr(exc, "status", None) in THROTTLE_STATUSES


def _down(exc: BaseException | None) -> bool:
    """A throttle that may also mean "not up" (503, Anthropic's 529), unlike a 429's quota."""
    return getattr(exc, "status", None) in (503, 529)


def _timed_out(exc: BaseException) -> bool:
    """A completion past its limit: ours (``CompletionTimeout``) or the client's read limit."""
    import httpx

    return isinstance(exc, CompletionTimeout) or isinstance(
        exc.__cause__, httpx.ReadTimeout | httpx.WriteTimeout
    )


def _gate_retries(exc: BaseException) -> bool:
    """A failure the gate tries again: a throttle, or a timeout of a call sent behind others."""
    return _throttled(exc) or bool(getattr(exc, "sent_behind", False))


def _throttle_wait(state: Any) -> float:
    """Seconds before the next try: none after a timeout behind others (the gate holds
    the call now); after a throttle the server's ``Retry-After`` plus up to a quarter more,
    else equal-jitter exponential backoff from 1 s to 60 s."""
    exc = state.outcome.exception()
    if not _throttled(exc):
        return 0.0
    after = getattr(exc, "retry_after", None)
    if after is not None:
        floor = max(float(after), 0.0)
        return floor + random.uniform(0.0, floor / 4)
    top = min(2.0 ** (state.attempt_number - 1), 60.0)
    return top / 2 + random.uniform(0.0, top / 2)


def partial_error(model: Model, gate: AdaptiveLimit) -> Callable[[Any], Any]:
    """tenacity's ``retry_error_callback``: past the wait bound, a ``BackendError`` naming
    the knob; after the last requeue, the timeout itself."""

    def give_up(state: Any) -> Any:
        exc = state.outcome.exception()
        if not _throttled(exc) or (_down(exc) and not gate.answered_any()):
            raise exc  # not a wait that ran out: the server's own error says what happened
        waited = state.idle_for
        raise BackendError(
            f"{model.name} kept answering HTTP {exc.status} (rate limited or out of slots): "
            f"waited {waited:.0f} s over {state.attempt_number} tries, and the next wait "
            f"({state.upcoming_sleep:.0f} s) would pass {gate.wait_knob}={gate.wait_bound:g} s; "
            f"raise {gate.wait_knob}, or ask the provider for a larger quota",
            status=exc.status,
        ) from exc

    return give_up
