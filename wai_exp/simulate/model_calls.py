"""One model spec called by the simulate parts that are not the agent: the situation writer
(``simulator=<spec>``) and the simulated user (``user_model=<spec>``).

Both talk to the server through ``wai_exp.llm`` (providers, the retrying POST, the chat
clients); nothing here speaks HTTP itself. ``ModelCaller`` serves two kinds of callers:

* async code on the engine's loop (``await complete(...)``: an async agent asking the person);
* sync code inside that loop (the scripted agent asking the person, the writer's waves),
  which must not block on its own loop: those calls run on a private event loop in one
  daemon thread (``complete_sync`` / ``submit``), with their own ``httpx.AsyncClient``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

# providers imports no httpx: validating a spec stays cheap; the HTTP parts load on first call.
from wai_exp.llm.providers import PROVIDERS, bare_model, is_model_spec, parse_model_spec

if TYPE_CHECKING:
    from wai_exp.llm.http import RetryPolicy


def check_model_spec(value: Any, what: str) -> str:
    """``value`` when it is a model spec string (``vllm:<model>@<url>``, ``openai:<model>``...).

    Raises ``ValueError`` naming ``what`` (``simulator`` / ``user_model``) and the accepted
    forms otherwise.
    """
    if not is_model_spec(value):
        raise ValueError(
            f"{what}={value!r} is not a model spec; use <provider>:<model>[@<base url>] with provider "
            f"one of {sorted(PROVIDERS)} (e.g. {what}=vllm:Qwen/Qwen3-4B@http://127.0.0.1:8000/v1)"
            + (", or simulator=False for the template writer" if what == "simulator" else "")
        )
    parse_model_spec(value)
    return str(value)


def model_name(spec: str) -> str:
    """``provider:model`` of a spec (the endpoint left out), as rows name models."""
    parsed = parse_model_spec(spec)
    return f"{parsed.provider}:{parsed.model}"


def same_model(a: Any, b: Any) -> bool:
    """True when two model names (specs, ``provider:model`` or bare) name one model."""
    x, y = bare_model(a), bare_model(b)
    return x is not None and x == y


class ModelCaller:
    """Chat completions (no tools) against one model spec: a ``wai_exp.llm.model.Model``
    that sync callers can also reach, through a private loop (``complete_sync``).

    ``timeout`` bounds each completion (seconds; 0 = none). Raises ``ValueError`` for a spec
    that does not parse. Completions raise ``wai_exp.llm.http.BackendError`` when the server
    fails for good, ``CompletionTimeout`` (a ``TimeoutError``) when one takes longer than
    ``timeout``.
    """

    def __init__(
        self,
        spec: str,
        *,
        timeout: float = 300.0,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        from wai_exp.llm.model import Model

        self.model = Model(spec, api_key=api_key, timeout=timeout, retry=retry)
        self.spec = self.model.spec
        self.name = self.model.name
        self.api_key = self.model.api_key
        self.timeout = self.model.timeout
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    async def complete(
        self,
        messages: list[dict[str, Any]],
        sampling: dict[str, Any],
        *,
        structured: Any = None,
        schema: dict[str, Any] | None = None,
        max_string_chars: int | None = None,
    ) -> Any:
        """One completion on the running loop; returns the ``llm.turn.Completion``. With a
        ``wai_exp.llm.structured.StructuredOutput`` it asks for ``schema`` (else the
        structured object's own) through ``response_format`` and returns ``(completion,
        the form it was asked with)`` instead."""
        return await self.model.complete(
            messages,
            [],
            sampling,
            structured=structured,
            schema=schema,
            max_string_chars=max_string_chars,
        )

    # -- the private loop for sync callers ---------------------------------------------
    def _background(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"wai-exp-model-{self.spec.model}", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Run ``coro`` on the private loop; the future holds its result or exception."""
        return asyncio.run_coroutine_threadsafe(coro, self._background())

    def complete_sync(self, messages: list[dict[str, Any]], sampling: dict[str, Any]) -> Any:
        """``complete`` from sync code (blocks the calling thread, never its event loop's
        other calls that live on the private loop)."""
        return self.submit(self.complete(messages, sampling)).result()

    async def aclose(self) -> None:
        """Close the client of the running loop (the engine's, at the end of a run)."""
        await self.model.aclose()

    def close(self, wait_s: float = 1.0) -> None:
        """Close the private loop's client and stop its thread (waits at most ``wait_s``)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return
        # Closing is best effort: the thread is a daemon and dies with the process.
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.aclose(), loop).result(timeout=wait_s)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=wait_s)
