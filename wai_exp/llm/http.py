"""The one place HTTP failures are classified and retried, for every model backend.

Backends share one ``httpx.AsyncClient`` per agent; a request is retried a bounded number of
times on 408/409/429/5xx and on transport errors, honouring ``Retry-After``. Anything else
is a ``BackendError`` that the engine keeps on the lost rollout.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from dataclasses import dataclass
from typing import Any

import httpx

#: Statuses worth another try: timeouts, conflicts from a busy server, rate limits, server faults.
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class BackendError(RuntimeError):
    """A model call failed for good. ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff: ``base_s * 2**attempt`` capped at ``max_s``."""

    retries: int = 3
    base_s: float = 0.5
    max_s: float = 20.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_s)
        return min(self.base_s * (2**attempt), self.max_s)


DEFAULT_RETRY = RetryPolicy()


def retry_after_seconds(response: httpx.Response) -> float | None:
    """Seconds the server asked us to wait (``Retry-After`` as seconds or an HTTP date), or None."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return None if parsed is None else max(parsed.timestamp() - time.time(), 0.0)


def classify(exc: BaseException) -> BackendError:
    """Map a low-level exception to a ``BackendError`` saying whether a retry may help."""
    if isinstance(exc, BackendError):
        return exc
    if isinstance(exc, httpx.TimeoutException):
        return BackendError(f"model call timed out ({type(exc).__name__})", retryable=True)
    if isinstance(exc, httpx.TransportError):
        return BackendError(f"could not reach the model server: {exc!r}", retryable=True)
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        body = exc.response.text[:300]
        return BackendError(
            f"HTTP {status} from {exc.request.url}: {body}",
            status=status,
            retryable=status in RETRYABLE_STATUSES,
        )
    return BackendError(f"{type(exc).__name__}: {exc}")


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    payload: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
    policy: RetryPolicy | None = None,
) -> dict[str, Any]:
    """POST ``payload`` and return the decoded JSON body.

    Retries per ``policy``; raises ``BackendError`` when the call fails for good or the body
    is not JSON.
    """
    policy = policy or DEFAULT_RETRY
    attempt = 0
    while True:
        retry_after: float | None = None
        try:
            response = await client.post(url, json=payload, headers=headers)
            if response.status_code >= 400:
                retry_after = retry_after_seconds(response)
                response.raise_for_status()
            try:
                return response.json()
            except ValueError as exc:
                raise BackendError(
                    f"model server at {url} answered with non-JSON: {response.text[:200]!r}"
                ) from exc
        except Exception as exc:  # noqa: BLE001 - classified below, re-raised when final
            err = classify(exc)
            if not err.retryable or attempt >= policy.retries:
                raise err from exc
        await asyncio.sleep(policy.delay(attempt, retry_after))
        attempt += 1
