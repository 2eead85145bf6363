"""Adaptive concurrency: how many model calls one server is sent at once.

Why the limit is on calls, here, and not on the engine's rollouts: ``knobs.concurrency``
bounds rollouts in flight, but what queues at a server is calls. A rollout makes several
in a row (the agent's turns, the model-played person's answers) and the model writer sends
its own to the same server from its thread. A limit on rollouts cannot shrink under the
rollouts already running, whose calls already sit in the server's queue using up their
timeouts; a limit on calls can, and a call waiting here for a slot has not started its
timeout (``Model`` starts it at admission). So a one-slot server (llama.cpp, a small vLLM)
is sent about one call at a time while the engine keeps ``knobs.concurrency`` rollouts
open, and the agent, the person and the writer on that server share its slots
(``ServerLimits`` keeps one ``AdaptiveLimit`` per base URL).

The controller is AIMD, as TCP's: start at the configured concurrency; halve on HTTP 429 /
503 / 529 and on measured queueing (the median latency of the last calls over the best
median seen, past ``QUEUE_FACTOR``); add one slot after a window of calls answered within
``KEEP_UP_FACTOR`` of the best, never past the start. A signal from a call sent before the
last change is ignored (that call saw the old limit), so 32 calls refused by one 429 halve
the limit once. Waiting callers are admitted oldest rollout first (``CALL_PRIORITY``), so at
one slot rollouts finish one after another instead of all advancing a turn at a time.

A server that has answered nothing yet may be cold (its first answer, a prefill on a busy
machine, outlasts the timeout) or hung. A timeout there is sent again, like any timeout
behind our own calls, and the limit drops to 1; the server is taken as hung only when a
call sent alone (nothing else of ours in flight from its send to its timeout, no backlog)
after an earlier timeout also times out. Then that call and every call waiting at the gate
fail at once (``ServerUnanswered``), as does any call made later: a hung server ends its
calls within about two timeouts, not one timeout per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import statistics
import threading
import time
from collections import deque
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

#: Statuses that say "too many requests": a rate limit, a server out of slots, Anthropic's
#: overload. The caller waits and tries again; the limit halves.
THROTTLE_STATUSES = frozenset({429, 503, 529})
#: Completed calls per measurement window.
WINDOW = 5
#: A window's median latency over the best window's median past which calls are queueing.
QUEUE_FACTOR = 2.0
#: At or under this ratio the server keeps up: one more slot.
KEEP_UP_FACTOR = 1.5
#: A call that timed out behind other calls of ours is sent again (at most this many times):
#: the wait was our own queue's, which the lowered limit now keeps here. A server does not
#: drop a request its client stopped waiting for, so after a burst of timeouts it still
#: works through the abandoned ones (``AdaptiveLimit.backlog_until``): tries sent into that
#: backlog time out too, hence more than a couple. A resend's own abandoned try is no such
#: backlog (``AdaptiveLimit._admit``): a call slower than the timeout on its own is not sent
#: again for it.
QUEUED_TIMEOUT_RETRIES = 8

#: Who goes first when calls wait for a slot: the lower value (the engine sets each
#: rollout's start time, so the oldest rollout's next turn goes first). Unset: arrival time.
CALL_PRIORITY: ContextVar[float | None] = ContextVar("wai_exp_call_priority", default=None)


class ServerUnanswered(Exception):
    """The gate's verdict on a server that answered none of the run's calls over two
    timeouts, the second of a call sent alone: every call waiting for it, and every later
    one, fails at once. ``timeouts`` is how many calls had timed out there."""

    def __init__(self, timeouts: int) -> None:
        super().__init__(f"the server answered none of {timeouts} calls that timed out")
        self.timeouts = timeouts


@dataclass(frozen=True)
class Admission:
    """One call let through: when, with how many in flight (itself included), under which
    version of the limit (``epoch``), and whether calls of ours the server was still
    working through were ahead of it (``behind``: in flight, or timed out and abandoned).
    ``seq`` numbers it among the calls admitted and ``timeouts_before`` counts the calls
    that had timed out before it: together they tell a call sent alone after a timeout."""

    t0: float
    in_flight: int
    epoch: int
    behind: bool
    seq: int = 0
    timeouts_before: int = 0


@dataclass
class LimitStats:
    """What a run reports about one server's limit."""

    start: int
    min: int
    max: int
    #: time-weighted mean of the limit over the run
    weighted: float = 0.0
    seconds: float = 0.0
    backoffs: dict[str, int] = field(default_factory=lambda: {"rate_limit": 0, "queueing": 0})
    climbs: int = 0
    #: rate-limit waits (HTTP 429/503/529) and their seconds, summed over calls
    waits: int = 0
    wait_s: float = 0.0
    #: calls sent again after a timeout caused by our own queue
    requeued: int = 0
    #: calls admitted, and the most in flight at once
    calls: int = 0
    peak_in_flight: int = 0


class AdaptiveLimit:
    """The in-flight limit of one server and the gate calls wait at. Safe from several
    threads and event loops at once (the engine's loop, the writer's thread).

    ``adaptive=False`` keeps the limit at ``start`` (rate-limit waits still apply).
    ``wait_bound`` is the most seconds one call may spend in rate-limit waits, and
    ``wait_knob`` the setting that says so (named by the error past it)."""

    def __init__(
        self,
        start: int,
        *,
        adaptive: bool = True,
        wait_bound: float = 600.0,
        wait_knob: str = "knobs.rate_limit_wait",
    ) -> None:
        self.start = max(1, int(start))
        self.adaptive = adaptive
        self.wait_bound = float(wait_bound)
        self.wait_knob = wait_knob
        self.limit = float(self.start)
        self.in_flight = 0
        self.epoch = 0
        #: best window median latency (s): the server's speed with no queue of ours
        self.baseline: float | None = None
        self._lock = threading.Lock()
        # (priority, arrival, loop, future, resend after a timeout)
        self._waiters: list[
            tuple[float, int, asyncio.AbstractEventLoop, asyncio.Future[Any], bool]
        ] = []
        self._seq = 0
        self._window: list[tuple[float, int]] = []  # (latency, in flight at admission)
        #: when answered calls came back (the server's recent pace)
        self._answered: deque[float] = deque(maxlen=4096)
        self._fastest: float | None = None
        #: when the server is estimated to be through the calls we abandoned at a timeout
        #: (each one costs it about the baseline latency; it does not know we left)
        self.backlog_until = 0.0
        #: calls that timed out here, and the verdict once the server is taken as hung
        self._timeouts = 0
        self.unanswered: ServerUnanswered | None = None
        self._t_changed = time.monotonic()
        self.stats = LimitStats(start=self.start, min=self.start, max=self.start)

    @property
    def slots(self) -> int:
        """Calls let through at once now."""
        return max(1, int(self.limit))

    # ---- the gate ---------------------------------------------------------------------
    async def acquire(self, *, resend: bool = False) -> Admission:
        """Wait for a slot (lowest ``CALL_PRIORITY`` first); the admission to ``release``.
        ``resend``: the call's last try timed out here (its own abandoned try is not a
        queue of ours it waits behind: :meth:`_admit`). Raises ``ServerUnanswered`` once
        the server is taken as hung."""
        now = time.monotonic()
        priority = CALL_PRIORITY.get()
        with self._lock:
            if self.unanswered is not None:
                raise ServerUnanswered(self.unanswered.timeouts)
            if self.in_flight < self.slots and not self._waiters:
                return self._admit(now, resend=resend)
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[Any] = loop.create_future()
            self._seq += 1
            key = priority if priority is not None else now
            heapq.heappush(self._waiters, (key, self._seq, loop, waiter, resend))
            self._wake()  # free slots behind cancelled waiters go to the first one left
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())  # admitted as it was cancelled: give it back
            raise

    def release(
        self,
        admission: Admission,
        *,
        latency: float | None = None,
        throttled: bool = False,
        timed_out: bool = False,
    ) -> str | None:
        """The call is back: answered after ``latency`` seconds, ``throttled`` (a 429/503),
        ``timed_out`` after ``latency`` seconds, or none of these (another failure). For a
        timeout, what becomes of the call: ``"requeue"`` (it waited behind calls of ours, or
        the server may be cold: send it again), ``"final"`` (sent alone to a server that
        answers: it was just slow) or ``"hung"`` (the server is taken as hung: the waiting
        calls have failed with ``ServerUnanswered``)."""
        fate = None
        with self._lock:
            self.in_flight -= 1
            if throttled:
                self._decrease(admission, "rate_limit")
            elif timed_out and latency is not None:
                fate = self._timed_out(admission, latency)
            elif latency is not None:
                self._answered.append(admission.t0 + latency)
                self._fastest = latency if self._fastest is None else min(self._fastest, latency)
                self._observe(admission, latency)
            self._wake()
        return fate

    def _admit(self, now: float, *, resend: bool = False) -> Admission:
        """Let one call through (under the lock). It is ``behind`` with other calls of ours
        in flight, or while the server is estimated to work through abandoned ones. A
        resend's own abandoned try (one ``service`` of that estimate) does not count: a call
        slower than the timeout on its own would otherwise count as queued again at each
        resend and wait ``QUEUED_TIMEOUT_RETRIES + 1`` timeouts before it fails."""
        self.in_flight += 1
        self.stats.calls += 1
        self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.in_flight)
        own = self._service() if resend else 0.0
        behind = self.in_flight > 1 or self.backlog_until - now > own
        return Admission(now, self.in_flight, self.epoch, behind, self.stats.calls, self._timeouts)

    def answered_any(self) -> bool:
        """True once the server has answered a call through this gate (a 503 from one that
        never has says it is down, not busy)."""
        with self._lock:
            return bool(self._answered)

    def _wake(self) -> None:
        """Let waiters through while slots are free (under the lock); once the server is
        taken as hung, fail them all."""
        if self.unanswered is not None:
            waiters, self._waiters = self._waiters, []
            for _, _, loop, waiter, _ in waiters:
                with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                    loop.call_soon_threadsafe(_fail, waiter, ServerUnanswered(self._timeouts))
            return
        while self._waiters and self.in_flight < self.slots:
            _, _, loop, waiter, resend = heapq.heappop(self._waiters)
            if waiter.cancelled():
                continue
            admission = self._admit(time.monotonic(), resend=resend)
            try:
                loop.call_soon_threadsafe(self._hand, waiter, admission)
            except RuntimeError:  # its loop is closed: nobody to hand the slot to
                self.in_flight -= 1

    def _hand(self, waiter: asyncio.Future[Any], admission: Admission) -> None:
        if waiter.done():  # cancelled meanwhile: the slot goes to the next
            self.release(admission)
        else:
            waiter.set_result(admission)

    # ---- the controller (under the lock) ----------------------------------------------
    def _observe(self, admission: Admission, latency: float) -> None:
        if admission.epoch != self.epoch:
            return  # sent under an earlier limit: says nothing about this one
        self._window.append((latency, admission.in_flight))
        if len(self._window) < WINDOW:
            return
        median = statistics.median(x for x, _ in self._window)
        alone = max(n for _, n in self._window) <= 1
        self._window.clear()
        if self.baseline is None or median < self.baseline or alone:
            # A window with no call beside it is the server's own speed, even when slower
            # than the best seen (the machine got busier): it replaces the baseline.
            self.baseline = median
            self._climb()  # the server kept up with this many: try one more
            return
        ratio = median / self.baseline if self.baseline > 0 else 1.0
        if ratio > QUEUE_FACTOR and admission.in_flight > 1:
            self._decrease(admission, "queueing")
        elif ratio <= KEEP_UP_FACTOR:
            self._climb()

    def _timed_out(self, admission: Admission, latency: float) -> str:
        """A call ran out its timeout; its fate (``release``). Sent behind others: the
        clearest queueing signal. The server answered ``k`` calls of ours while this one
        waited, so more than ``k`` in flight cannot all be answered in a timeout: the limit
        drops to at most that (and at least halves). The abandoned call stays in the
        server's backlog. At a server that has answered nothing, a call sent alone after an
        earlier timeout is the proof it is hung (or slower than the timeout even with no
        queue of ours); any other timeout there is sent again."""
        now = admission.t0 + latency
        self.backlog_until = max(self.backlog_until, now) + self._service()
        self._timeouts += 1
        if admission.behind:
            answered = sum(1 for t in self._answered if t >= admission.t0)
            self._decrease(admission, "queueing", to=max(1.0, min(self.limit / 2, answered)))
            return "requeue"
        if self._answered:
            return "final"  # alone at a server that answers: this call was just slow
        alone = self.stats.calls == admission.seq  # nothing else of ours sent meanwhile
        if alone and admission.timeouts_before:
            self.unanswered = ServerUnanswered(self._timeouts)
            return "hung"
        return "requeue"

    def _service(self) -> float:
        """Seconds the server is estimated to spend on one call of ours (its best median,
        else its fastest answer; 0 before any answer)."""
        return self.baseline or self._fastest or 0.0

    def _decrease(self, admission: Admission, why: str, *, to: float | None = None) -> None:
        if not self.adaptive or admission.epoch != self.epoch or self.limit <= 1:
            return
        self._set(max(1.0, self.limit / 2) if to is None else to)
        self.stats.backoffs[why] += 1

    def _climb(self) -> None:
        if not self.adaptive or self.limit >= self.start:
            return
        self._set(min(float(self.start), self.limit + 1))
        self.stats.climbs += 1

    def _set(self, limit: float) -> None:
        now = time.monotonic()
        self.stats.weighted += self.slots * (now - self._t_changed)
        self.stats.seconds += now - self._t_changed
        self._t_changed = now
        self.limit = limit
        self.epoch += 1
        self._window.clear()
        self.stats.min = min(self.stats.min, self.slots)
        self.stats.max = max(self.stats.max, self.slots)

    # ---- what callers count -----------------------------------------------------------
    def waited(self, seconds: float) -> None:
        """A rate-limit wait of ``seconds`` (one call's)."""
        with self._lock:
            self.stats.waits += 1
            self.stats.wait_s += seconds

    def requeued(self) -> None:
        with self._lock:
            self.stats.requeued += 1

    def summary(self) -> dict[str, Any]:
        """The limit over the run: start, min, max, final, typical (time-weighted mean),
        backoffs by cause, climbs, and the rate-limit waits."""
        with self._lock:
            s = self.stats
            span = s.seconds + (time.monotonic() - self._t_changed)
            weighted = s.weighted + self.slots * (time.monotonic() - self._t_changed)
            return {
                "adaptive": self.adaptive,
                "start": s.start,
                "min": s.min,
                "max": s.max,
                "final": self.slots,
                "typical": round(weighted / span, 2) if span > 0 else float(self.slots),
                "backoffs": dict(s.backoffs),
                "climbs": s.climbs,
                "calls": s.calls,
                "peak_in_flight": s.peak_in_flight,
                "baseline_latency_s": round(self.baseline, 3) if self.baseline else None,
                "requeued_after_timeout": s.requeued,
                "rate_limit_waits": s.waits,
                "rate_limit_wait_s": round(s.wait_s, 2),
                "rate_limit_wait_bound_s": self.wait_bound,
            }


def _fail(waiter: asyncio.Future[Any], exc: BaseException) -> None:
    if not waiter.done():
        waiter.set_exception(exc)


class ServerLimits:
    """One ``AdaptiveLimit`` per server (base URL) for one run: every model of the run
    attached here (``attach``) shares its server's limit."""

    def __init__(
        self,
        start: int,
        *,
        adaptive: bool = True,
        wait_bound: float = 600.0,
        wait_knob: str = "knobs.rate_limit_wait",
    ) -> None:
        self.start, self.adaptive = start, adaptive
        self.wait_bound, self.wait_knob = wait_bound, wait_knob
        self.by_server: dict[str, AdaptiveLimit] = {}
        self._lock = threading.Lock()

    def for_url(self, url: str) -> AdaptiveLimit:
        with self._lock:
            limit = self.by_server.get(url)
            if limit is None:
                limit = self.by_server[url] = AdaptiveLimit(
                    self.start,
                    adaptive=self.adaptive,
                    wait_bound=self.wait_bound,
                    wait_knob=self.wait_knob,
                )
            return limit

    def attach(self, model: Any) -> None:
        """Send ``model``'s calls (a ``wai_exp.llm.model.Model``) through its server's limit."""
        model.gate = self.for_url(model.spec.base_url.rstrip("/"))

    def summary(self) -> dict[str, Any] | None:
        """Per server URL, ``AdaptiveLimit.summary()``; None when no model was attached."""
        with self._lock:
            limits = dict(self.by_server)
        return {url: limit.summary() for url, limit in limits.items()} or None


#: ``AdaptiveLimit.summary()`` fields that add up over processes calling one server
_SUMMED = (
    "start", "min", "max", "final", "typical", "calls", "peak_in_flight", "climbs",
    "requeued_after_timeout", "rate_limit_waits", "rate_limit_wait_s",
)  # fmt: skip


def summed(per_process: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One server's limits over several processes (``{"parent": summary, "worker 1": ...}``), each of
    which had its own (``simulate.workers``): every count and limit summed, so ``start`` is
    what the processes' limits let through together at the start and ``min`` the sum of each
    one's lowest (not one moment's total); the best baseline; each process's own under
    ``per_worker``."""
    summaries = list(per_process.values())
    out: dict[str, Any] = {"adaptive": all(s["adaptive"] for s in summaries)}
    for key in _SUMMED:
        total = sum(s[key] for s in summaries)
        out[key] = round(total, 2) if isinstance(total, float) else total
    out["backoffs"] = {
        why: sum(s["backoffs"].get(why, 0) for s in summaries) for why in summaries[0]["backoffs"]
    }
    baselines = [s["baseline_latency_s"] for s in summaries if s["baseline_latency_s"]]
    out["baseline_latency_s"] = min(baselines) if baselines else None
    out["rate_limit_wait_bound_s"] = summaries[0]["rate_limit_wait_bound_s"]
    out["processes"] = len(summaries)
    out["per_worker"] = [{"process": name, **s} for name, s in per_process.items()]
    return out
