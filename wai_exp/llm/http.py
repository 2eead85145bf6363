"""The one place model HTTP clients are built and their failures classified and retried.

``async_client`` builds the ``httpx.AsyncClient`` every backend shares (one per agent and
event loop); its transport is aiohttp's, through ``httpx-aiohttp``. A request is retried a
bounded number of times on 408/409/429/5xx, on connection failures and on a connect timeout,
honouring ``Retry-After``; a read or write timeout is not retried (see ``classify``).
Anything else is a ``BackendError`` that the engine keeps on the lost rollout.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import email.utils
import functools
import json
import logging
import random
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from wai_exp.llm.concurrency import THROTTLE_STATUSES
from wai_exp.llm.turn import BackendError

if TYPE_CHECKING:
    from httpx_aiohttp import AiohttpTransport

#: Statuses worth another try: timeouts, conflicts from a busy server, rate limits, server faults.
# 529 is Anthropic's "overloaded_error": a busy server, like a 503.
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def async_client(
    *, timeout: float | httpx.Timeout, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """The ``httpx.AsyncClient`` model calls go through: ``transport`` when given (tests,
    custom backends), else an aiohttp transport with no connection cap of its own (the
    caller's concurrency bounds the requests in flight; idle connections are kept alive).
    It keeps no cookie a response sets (model APIs set none a client should send back).

    Why not httpx's own transport: against a local server answering after 50 ms, httpcore
    spent 4.4 ms of CPU per call at 32 in flight (its pool re-checks every pooled connection
    on each request, and a missing ``sniffio`` is re-imported on each lock), capping a run at
    24% of the ideal rate at concurrency 32 and 3.5% at 128; over aiohttp's pool the same
    call cost 0.6-0.7 ms through httpx's ``send``, and 0.4 ms through ``post_json``'s direct
    route (``_ModelClient.direct_route``), of which a bare aiohttp session takes 0.33 ms
    (experiments/bench/bench_throughput.py measures all three). The API stays httpx.
    Must be called where it is used: the aiohttp session is opened on first request, in the
    running loop, and closed by ``aclose()``. Never raises.
    """
    if transport is None:
        transport = _aiohttp_transport_class()(client=_aiohttp_session, verify=_ssl_context())
    return _ModelClient(timeout=timeout, transport=transport)


def warm_up() -> None:
    """Do now what a process's first model call would do: import aiohttp and load the TLS
    trust store (0.15-0.2 s of CPU). A process with time to spare before its first call (a
    prestarted simulate worker) calls it; otherwise the first call does it, while every
    rollout started with it waits. Never raises: a failure shows on the first call."""
    with contextlib.suppress(Exception):
        _aiohttp_transport_class()
        _ssl_context()


def _environment_proxied() -> bool:
    """True when a proxy variable is set: httpx (``trust_env``) then mounts a proxy
    transport, which the direct route would go around. urllib's reading, as httpx's."""
    import urllib.request

    return any(k in ("http", "https", "all") for k in urllib.request.getproxies())


class _SetCookieIgnored(httpx.Cookies):
    """A client's cookies that a response's ``Set-Cookie`` never adds to. httpx parses every
    response through ``http.cookiejar`` (a urllib request built per call: 0.05 ms, a tenth
    of a model call's CPU in this process) to keep cookies model APIs do not set."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


class _ModelClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` whose cookie jar ignores ``Set-Cookie`` (cookies given to the
    client or a request are still sent), and that ``post_json`` can send through without
    httpx's per-request pipeline (``direct_route``).

    Only httpx's public API is read: the transport is the one this client was built with
    (an injected transport, the seam httpx's ``MockTransport`` uses), and the client's
    ``auth``, ``event_hooks``, ``params``, ``cookies``, ``headers``, ``timeout`` and
    ``is_closed`` are its public properties. ``tests/llm/test_httpx_seam.py`` fails when
    httpx stops sending what this relies on."""

    def __init__(self, *, transport: httpx.AsyncBaseTransport, **kwargs: Any) -> None:
        cookies = kwargs.pop("cookies", None)
        super().__init__(transport=transport, **kwargs)
        self.cookies = cookies  # through the setter below: the jar that keeps nothing
        #: the transport the direct route sends on: this client's own aiohttp transport,
        #: unless a proxy from the environment (or a test's transport) carries requests
        self.direct_transport: Any = (
            transport
            if isinstance(transport, _aiohttp_transport_class())
            and not (self.trust_env and _environment_proxied())
            else None
        )
        self._routes: dict[tuple[str, tuple[tuple[str, str], ...]], _Route | None] = {}

    @property
    def cookies(self) -> httpx.Cookies:
        return self._model_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._model_cookies = _SetCookieIgnored(cookies)

    def direct_route(self, url: str, headers: dict[str, str]) -> _Route | None:
        """The ``_Route`` that POSTs ``headers`` to ``url`` straight to the aiohttp transport,
        or None when httpx's own ``send`` must carry the request: another transport (a test's,
        a proxy from the environment), credentials in the URL, the client closed or
        given auth, cookies, query params or event hooks. Checked on every call, so a
        client changed after its first request is sent the way httpx would send it."""
        hooks = self.event_hooks
        if (
            self.direct_transport is None
            or self.is_closed
            or self.auth is not None
            or hooks["request"]
            or hooks["response"]
            or self.params
            or self.cookies
        ):
            return None
        key = (url, tuple(headers.items()))
        route = self._routes.get(key, _UNBUILT)
        if route is _UNBUILT or (route is not None and route.client_headers != self.headers.raw):
            route = self._routes[key] = _Route.build(self, url, headers)
        return route


_UNBUILT: Any = object()
_HTTPX_LOG = logging.getLogger("httpx")


class _Sent:
    """One answer from the aiohttp transport, its body read whole."""

    __slots__ = ("status", "headers", "reason", "body", "encoded")

    def __init__(
        self, status: int, headers: Any, reason: str | None, body: bytes, encoded: bool
    ) -> None:
        self.status, self.headers, self.reason, self.body = status, headers, reason, body
        self.encoded = encoded  # a Content-Encoding httpx must decode

    @property
    def plain(self) -> bool:
        """A 2xx answer whose body is the JSON as sent (no Content-Encoding to undo)."""
        return 200 <= self.status < 300 and not self.encoded

    def response(self, request: httpx.Request) -> httpx.Response:
        """The ``httpx.Response`` httpx-aiohttp would build (its body decoded by httpx)."""
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if self.reason:
            extensions["reason_phrase"] = self.reason.encode()
        return httpx.Response(
            self.status,
            headers=self.headers,
            content=self.body,
            request=request,
            extensions=extensions,
        )


class _Route:
    """POSTs from one ``_ModelClient`` to one URL with one set of extra headers, sent by its
    aiohttp transport without httpx's per-request pipeline (URL merge, header merge, a
    ``Request`` and its stream, the auth and redirect generators, a ``Response`` and its
    decoders): a third of a model call's CPU at 128 in flight. The request on the wire is
    the one httpx would send (the same headers in the same order, built by httpx once) and
    the client's timeout is read on every call."""

    __slots__ = ("client", "transport", "target", "aio_url", "extra", "head", "client_headers")
    client: _ModelClient
    transport: (
        Any  # the client's transport class (built on first use, see _aiohttp_transport_class)
    )
    target: httpx.URL
    aio_url: Any  # a yarl.URL (aiohttp's; imported on first use)
    extra: dict[str, str]
    head: list[tuple[str, str]]
    client_headers: list[tuple[bytes, bytes]]

    @classmethod
    def build(cls, client: _ModelClient, url: str, headers: dict[str, str]) -> _Route | None:
        """The route, or None when httpx would send this request differently than a plain
        POST over the client's own aiohttp transport (see ``direct_route``)."""
        target = _parsed_url(url)
        transport = client.direct_transport
        if (
            transport is None
            or target.userinfo
            or not target.is_absolute_url
            or any(k.lower() in ("content-length", "transfer-encoding") for k in headers)
        ):
            return None
        from yarl import URL

        route = cls()
        route.client, route.transport, route.target, route.extra = (
            client,
            transport,
            target,
            headers,
        )
        route.aio_url = URL(str(target))  # what aiohttp parses the str to, once
        sample = client.build_request("POST", target, content=b"{}", headers=headers)
        raw = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in sample.headers.raw]
        if raw[-1][0].lower() != "content-length":  # httpx puts it last for a bytes body
            return None
        route.head = raw[:-1]
        route.client_headers = client.headers.raw
        return route

    async def post(self, content: bytes) -> _Sent:
        """POST ``content`` (non-empty JSON bytes). Raises httpx's exceptions for aiohttp's."""
        limits = self.client.timeout
        try:
            sent = await self.transport.send_bytes(
                "POST",
                self.aio_url,
                [*self.head, ("Content-Length", str(len(content)))],
                content,
                _client_timeout(limits.connect, limits.read, limits.pool),
            )
        except httpx.RequestError as exc:
            exc.request = self._request(content)  # as httpx's send() sets it
            raise
        if _HTTPX_LOG.isEnabledFor(logging.INFO):  # the line httpx logs for each request
            _HTTPX_LOG.info(
                'HTTP Request: %s %s "%s %d %s"', "POST", self.target, "HTTP/1.1", sent.status,
                sent.reason or httpx.codes.get_reason_phrase(sent.status),
            )  # fmt: skip
        return sent

    def _request(self, content: bytes) -> httpx.Request:
        return self.client.build_request("POST", self.target, content=content, headers=self.extra)

    def response(self, sent: _Sent, content: bytes) -> httpx.Response:
        """``sent`` as the ``httpx.Response`` (with its request) that ``client.post`` returns."""
        return sent.response(self._request(content))


@functools.cache
def _aiohttp_transport_class() -> type[AiohttpTransport]:
    """``httpx_aiohttp.AiohttpTransport`` that reads each answer whole and drops a URL's
    ``user:password@`` (httpx has already sent it as Basic auth; aiohttp refuses a request
    carrying both). Built on first use: importing aiohttp costs a third of a second."""
    from aiohttp import ClientSession
    from httpx_aiohttp import AiohttpTransport
    from httpx_aiohttp.transport import map_aiohttp_exceptions

    class Transport(AiohttpTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            """The answer with its body read (an ``httpx.Response`` built from bytes).

            A model call is never streamed, so the body is read here in one piece instead
            of through httpx's stream of chunks (aread -> decoders -> chunker -> aiohttp's
            chunk iterator), which cost a tenth of a call's CPU. Content-Encoding is still
            decoded by httpx. A request whose body is a stream goes the library's way.
            Raises httpx's exceptions for aiohttp's (the library's own mapping)."""
            url = request.url
            if url.userinfo:
                url = url.copy_with(userinfo=b"")
            if not isinstance(request.stream, httpx.ByteStream):
                request.url = url
                return await super().handle_async_request(request)
            limits = request.extensions.get("timeout", {})
            sent = await self.send_bytes(
                request.method,
                str(url),
                [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
                request.content or None,
                _client_timeout(limits.get("connect"), limits.get("read"), limits.get("pool")),
                request.extensions.get("sni_hostname"),
            )
            return sent.response(request)

        async def send_bytes(
            self,
            method: str,
            url: Any,
            headers: list[tuple[str, str]],
            data: bytes | None,
            timeout: Any,
            server_hostname: str | None = None,
        ) -> _Sent:
            """One request sent as given (``headers`` verbatim, no redirect, no compression,
            the body not decoded), its answer read whole. Raises httpx's exceptions for
            aiohttp's (the library's own mapping)."""
            if not isinstance(self.client, ClientSession):
                self.client = self.get_client()
            with map_aiohttp_exceptions():
                async with self.client.request(
                    method,
                    url,
                    headers=headers,
                    data=data,
                    allow_redirects=False,
                    auto_decompress=False,
                    compress=False,
                    timeout=timeout,
                    server_hostname=server_hostname,
                ) as response:
                    body = await response.read()
            return _Sent(
                response.status,
                response.raw_headers,
                response.reason,
                body,
                "Content-Encoding" in response.headers,
            )

    return Transport


@functools.lru_cache(maxsize=64)
def _client_timeout(connect: float | None, read: float | None, pool: float | None) -> Any:
    """aiohttp's timeout for httpx's limits (as httpx-aiohttp maps them), built once each."""
    from aiohttp import ClientTimeout

    return ClientTimeout(sock_connect=connect, sock_read=read, connect=pool)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # httpx's trust store (certifi), so https verifies as it did on httpx's own transport.
    # Built once per process: loading the store costs ~170 ms on a busy machine.
    return httpx.create_ssl_context()


def _aiohttp_session() -> Any:
    """A session verifying TLS like httpx, with no connection cap and no cookie jar (model
    APIs set no cookie we should send back)."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, ssl=_ssl_context())
    return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())


@dataclass(frozen=True)
class RetryPolicy:
    """Up to ``retries`` more tries of a call that failed in a way another try may cure
    (``BackendError.retryable``), waiting between them with jittered exponential backoff.

    The n-th wait (n from 0) is drawn from ``[b/2, b]`` with ``b = min(base_s * 2**n,
    max_s)`` ("equal jitter"): callers that failed together (32 rollouts refused by one
    429) come back spread over half the interval instead of on the same tick, and none
    comes back sooner than half the backoff. A ``Retry-After`` the server sent is a floor:
    the wait is that many seconds (at most ``max_s``) plus up to a quarter more, drawn.
    The waits come from tenacity (``retrying``)."""

    retries: int = 3
    base_s: float = 0.5
    max_s: float = 20.0
    #: retry HTTP 429/503/529 here; False when the caller waits them out itself (an
    #: adaptive limit, ``wai_exp.llm.concurrency``: the wait must not hold a slot or run
    #: inside the completion's timeout)
    throttles: bool = True

    def retries_for(self, exc: BaseException) -> bool:
        """True when this policy tries ``exc``'s call again."""
        if not _retryable(exc):
            return False
        return self.throttles or getattr(exc, "status", None) not in THROTTLE_STATUSES

    def retrying(self) -> Any:
        """A ``tenacity.AsyncRetrying`` for one call under this policy: it retries a
        retryable ``BackendError`` and re-raises the last error when the tries run out."""
        import tenacity

        half = self.base_s / 2
        backoff: tenacity.wait.wait_base = tenacity.wait_exponential(
            multiplier=half, max=self.max_s / 2
        )
        backoff += tenacity.wait_random_exponential(multiplier=half, max=self.max_s / 2)
        return tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.retries + 1),
            retry=tenacity.retry_if_exception(self.retries_for),
            wait=_RetryAfterOr(backoff, self.max_s),
            reraise=True,
        )


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, BackendError) and exc.retryable


class _RetryAfterOr:
    """tenacity wait: the server's ``Retry-After`` (capped at ``max_s``) plus up to a
    quarter more, drawn, when the last error carried one; else ``backoff``'s wait."""

    def __init__(self, backoff: Any, max_s: float) -> None:
        self.backoff, self.max_s = backoff, max_s

    def __call__(self, retry_state: Any) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        after = getattr(exc, "retry_after", None)
        if after is None:
            return float(self.backoff(retry_state))
        floor = min(max(float(after), 0.0), self.max_s)
        return floor + random.uniform(0.0, floor / 4)


DEFAULT_RETRY = RetryPolicy()


def retry_after_seconds(response: httpx.Response) -> float | None:
    """Seconds the server asked us to wait (``Retry-After`` as seconds or an HTTP date), or None."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # neither seconds nor a date ("soon"): the policy's own backoff applies
    if parsed.tzinfo is None:  # a date without a zone is GMT (RFC 9110)
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return max(parsed.timestamp() - time.time(), 0.0)


def classify(exc: BaseException) -> BackendError:
    """Map a low-level exception to a ``BackendError`` saying whether a retry may help.

    Timeouts: only a connect timeout is retried. A read (or write) timeout means the request
    reached the server, which is still working on it: a model server does not cancel a
    generation because the client stopped waiting, so on a one-request-at-a-time server
    (llama.cpp with one slot, a busy vLLM) the retry queues behind the very request it
    replaces, waits the full timeout again and makes every other rollout wait too. No client
    can tell whether the server has room for it, so a read timeout is final and its message
    names the limit's kind; a connect timeout (the request never left) is retried like a
    refused connection.
    """
    if isinstance(exc, BackendError):
        return exc
    cause = _aiohttp_cause(exc)
    if isinstance(exc, httpx.ConnectTimeout) and cause is not None and not cause[1]:
        # httpx-aiohttp maps every aiohttp connection error (refused, reset, closed by the
        # server) to ConnectTimeout; only a real timeout may be worded as one.
        return BackendError(f"could not reach the model server: {cause[0]}", retryable=True)
    if isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)):
        return BackendError(
            f"model call timed out connecting to the server ({type(exc).__name__})",
            retryable=True,
        )
    if isinstance(exc, httpx.TimeoutException):
        return BackendError(
            f"model call timed out waiting for the server's answer ({type(exc).__name__}); "
            "not retried: the server is still working on the request",
            retryable=False,
        )
    if isinstance(exc, httpx.TransportError):
        return BackendError(f"could not reach the model server: {exc!r}", retryable=True)
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        body = exc.response.text[:300]
        return BackendError(
            f"HTTP {status} from {exc.request.url}: {body}",
            status=status,
            retryable=status in RETRYABLE_STATUSES,
            retry_after=retry_after_seconds(exc.response),
        )
    return BackendError(f"{type(exc).__name__}: {exc}")


def _aiohttp_cause(exc: BaseException) -> tuple[str, bool] | None:
    """``(description, is_timeout)`` of the aiohttp error behind ``exc``, or None."""
    cause = exc.__cause__
    if cause is None or not type(cause).__module__.startswith("aiohttp"):
        return None
    return f"{type(cause).__name__}: {cause}", isinstance(cause, asyncio.TimeoutError)


def encode_json(payload: Any) -> bytes:
    """``payload`` as the JSON bytes httpx's ``json=`` sends (UTF-8, no spaces, no NaN).
    Raises ``ValueError`` / ``TypeError`` for what JSON cannot hold."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


_JSON_HEADERS = {"Content-Type": "application/json"}


def endpoint_url(base_url: str, path: str) -> str:
    """``path`` (``/chat/completions``) under ``base_url``'s path, its query kept:
    ``http://h/v1?api_key=K`` -> ``http://h/v1/chat/completions?api_key=K``. Joined on the
    raw path, so an escaped character in it (``%2F``) stays escaped. A URL httpx cannot
    parse is joined as text: sending to it raises ``post_json``'s error naming it."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        return base_url.rstrip("/") + path
    joined = url.raw_path.split(b"?", 1)[0].rstrip(b"/") + path.encode("ascii")
    query = b"?" + url.query if url.query else b""
    return str(url.copy_with(raw_path=joined + query))


def server_host(base_url: str) -> str:
    """``host[:port]`` of ``base_url``: no user, password, path or query."""
    try:
        return httpx.URL(base_url).netloc.decode("ascii")
    except httpx.InvalidURL:
        return base_url.split("//", 1)[-1].split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]


@functools.lru_cache(maxsize=256)
def _parsed_url(url: str) -> httpx.URL:
    # httpx parses a str URL on every request; a backend posts to one URL all run long.
    return httpx.URL(url)


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    payload: dict[str, Any] | bytes,
    *,
    headers: dict[str, str] | None = None,
    policy: RetryPolicy | None = None,
    final: Callable[[int, str], bool] | None = None,
) -> dict[str, Any]:
    """POST ``payload`` (a dict, or its JSON already encoded as bytes) and return the
    decoded JSON body.

    Retries per ``policy``, except an error response for which ``final(status, body)`` is
    True (a server refusing a request option: another try gets the same answer). Raises
    ``BackendError`` when the call fails for good or the body is not a JSON object (or
    ``payload`` cannot be encoded as JSON).
    """
    policy = policy or DEFAULT_RETRY
    try:
        content = payload if isinstance(payload, bytes) else encode_json(payload)
        target = _parsed_url(url)
    except (TypeError, ValueError, httpx.InvalidURL) as exc:
        raise BackendError(f"the request to {url} cannot be sent: {exc}") from exc
    if headers and not any(k.lower() == "content-type" for k in headers):
        headers = {**_JSON_HEADERS, **headers}
    headers = headers or _JSON_HEADERS
    failed: BackendError | None
    try:
        return await _post_once(client, url, target, content, headers, final)
    except Exception as exc:  # noqa: BLE001 - classified; retried below or re-raised
        failed = _classified(exc)
        if not policy.retries_for(failed) or policy.retries < 1:
            raise failed  # noqa: B904 - _classified keeps exc as the cause
    # The first try runs outside tenacity (a loop of its own costs 47 us a call, a tenth of a
    # model call's CPU); its failure is replayed as tenacity's first attempt, so the waits
    # and the count of tries are tenacity's.
    async for attempt in policy.retrying():
        with attempt:
            if failed is not None:
                replay, failed = failed, None
                raise replay
            try:
                return await _post_once(client, url, target, content, headers, final)
            except Exception as exc:  # noqa: BLE001 - classified; tenacity retries or re-raises
                raise _classified(exc)  # noqa: B904 - _classified keeps exc as the cause
    raise AssertionError("unreachable: tenacity returns or re-raises")  # pragma: no cover


def _classified(exc: BaseException) -> BackendError:
    """``classify(exc)`` with the original kept as its cause (as ``raise ... from``)."""
    err = classify(exc)
    if err is not exc and err.__cause__ is None:
        err.__cause__ = exc
    return err


async def _post_once(
    client: httpx.AsyncClient,
    url: str,
    target: httpx.URL,
    content: bytes,
    headers: dict[str, str],
    final: Callable[[int, str], bool] | None,
) -> dict[str, Any]:
    """One POST and its decoded JSON object. Raises httpx's errors or ``BackendError``."""
    route = None
    if content and isinstance(client, _ModelClient):
        route = client.direct_route(url, headers)
    if route is not None:
        sent = await route.post(content)
        if sent.plain:
            try:
                decoded = json.loads(sent.body)
            except ValueError:
                decoded = None
            if isinstance(decoded, dict):
                return decoded
            # not JSON, or not an object: worded below from the response, as on httpx's path
        response = route.response(sent, content)
    else:
        response = await client.post(target, content=content, headers=headers)
    if response.status_code >= 400:
        if final is not None and final(response.status_code, response.text):
            err = classify(httpx.HTTPStatusError("", request=response.request, response=response))
            err.retryable = False
            raise err
        response.raise_for_status()
    try:
        body = response.json()
    except ValueError as exc:
        raise BackendError(
            f"model server at {url} answered with non-JSON: {response.text[:200]!r}"
        ) from exc
    if not isinstance(body, dict):
        raise BackendError(
            f"model server at {url} answered with JSON that is not a JSON object: "
            f"{response.text[:200]!r}"
        )
    return body
