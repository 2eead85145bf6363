"""The adaptive in-flight limit of one model server (``wai_exp.llm.concurrency``) and a
``Model`` sending through it against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from tests.support.scripted_server import chat_reply, scripted_server
from wai_exp.llm.concurrency import CALL_PRIORITY, WINDOW, AdaptiveLimit, ServerLimits
from wai_exp.llm.model import Model
from wai_exp.llm.turn import BackendError


def test_a_burst_of_429s_halves_the_limit_once_and_answers_climb_it_back():
    async def go():
        limit = AdaptiveLimit(32)
        burst = [await limit.acquire() for _ in range(32)]
        for admission in burst:  # all refused by one 429 storm
            limit.release(admission, throttled=True)
        assert limit.slots == 16 and limit.stats.backoffs["rate_limit"] == 1
        for _ in range(200):  # the server keeps up: one slot more per window
            admission = await limit.acquire()
            limit.release(admission, latency=0.1)
        assert limit.slots == 32  # back to the configured start, never past it
        summary = limit.summary()
        assert (summary["start"], summary["min"], summary["final"]) == (32, 16, 32)

    asyncio.run(go())


def test_latency_rising_with_calls_in_flight_backs_off():
    async def go():
        limit = AdaptiveLimit(8)
        for _ in range(WINDOW):  # one at a time: the server's own speed
            admission = await limit.acquire()
            limit.release(admission, latency=0.2)
        many = [await limit.acquire() for _ in range(8)]
        for admission in many:  # eight at once, each waiting behind the others
            limit.release(admission, latency=0.2 * admission.in_flight)
        assert limit.slots < 8 and limit.stats.backoffs["queueing"] == 1

    asyncio.run(go())


def test_waiting_calls_go_oldest_rollout_first():
    async def go():
        limit = AdaptiveLimit(1)
        held = await limit.acquire()
        order = []

        async def call(priority):
            CALL_PRIORITY.set(priority)
            admission = await limit.acquire()
            order.append(priority)
            limit.release(admission)

        tasks = [asyncio.create_task(call(p)) for p in (3.0, 1.0, 2.0)]
        await asyncio.sleep(0.01)
        limit.release(held)
        await asyncio.gather(*tasks)
        assert order == [1.0, 2.0, 3.0]

    asyncio.run(go())


def test_a_gated_model_waits_out_more_429s_than_the_retries_and_answers():
    # Four 429s with Retry-After: 1, then an answer. Before: three retries, then the call
    # failed with the 429. Now the waits are counted and the call answers.
    lock, seen = threading.Lock(), []

    def answer(path, headers, body):
        with lock:
            seen.append(path)
            if len(seen) <= 4:
                return 429, {"error": {"message": "slow down"}}, {"Retry-After": "1"}
        return 200, chat_reply("ok")

    with scripted_server(answer) as url:
        model = Model(f"vllm:m@{url}", timeout=5)
        limits = ServerLimits(4, wait_bound=30)
        limits.attach(model)

        async def go():
            try:
                return await model.complete([{"role": "user", "content": "hi"}])
            finally:
                await model.aclose()

        done = asyncio.run(go())
    assert done.content == "ok" and len(seen) == 5
    [summary] = limits.summary().values()
    assert summary["rate_limit_waits"] == 4 and summary["rate_limit_wait_s"] >= 4
    assert summary["backoffs"]["rate_limit"] >= 1


def _gated_calls(url: str, n: int) -> list[Any]:
    """``n`` calls in turn through a gated ``Model``: each its answer or its exception."""
    model = Model(f"vllm:m@{url}", timeout=5)
    ServerLimits(4, wait_bound=600).attach(model)

    async def go() -> list[Any]:
        out: list[Any] = []
        try:
            for _ in range(n):
                try:
                    out.append(await model.complete([{"role": "user", "content": "hi"}]))
                except BackendError as exc:
                    out.append(exc)
        finally:
            await model.aclose()
        return out

    return asyncio.run(go())


def test_503_from_a_server_that_never_answered_is_down_not_waited_out():
    # "upstream is down" from the first call: the ordinary tries (1 + 3), then the call
    # fails with the server's own error, so the dead-agent stop can end the run. Waiting it
    # out under knobs.rate_limit_wait held every call for ten minutes.
    seen: list[str] = []

    def down(path, headers, body):
        seen.append(path)
        return 503, {"error": {"message": "upstream is down"}}

    with scripted_server(down) as url:
        t0 = time.monotonic()
        [failed] = _gated_calls(url, 1)
    assert isinstance(failed, BackendError) and failed.status == 503
    assert "upstream is down" in str(failed) and "rate_limit_wait" not in str(failed)
    assert len(seen) == 4 and time.monotonic() - t0 < 60


def test_503_from_a_server_that_has_answered_is_busy_and_waited_out():
    seen: list[str] = []

    def busy(path, headers, body):
        seen.append(path)
        if 2 <= len(seen) <= 6:  # five 503s: more than the ordinary three retries
            return 503, {"error": {"message": "no free slot"}}, {"Retry-After": "1"}
        return 200, chat_reply("ok")

    with scripted_server(busy) as url:
        first, second = _gated_calls(url, 2)
    assert first.content == "ok" and second.content == "ok" and len(seen) == 7


def _together(url: str, n: int, *, timeout: float) -> tuple[list[Any], float]:
    """``n`` calls sent together through one gated ``Model``: each its answer or its
    ``TimeoutError``, and the wall time."""
    model = Model(f"vllm:m@{url}", timeout=timeout)
    ServerLimits(4).attach(model)

    async def one():
        try:
            return await model.complete([{"role": "user", "content": "hi"}])
        except TimeoutError as exc:
            return exc

    async def go():
        try:
            return await asyncio.gather(*(one() for _ in range(n)))
        finally:
            await model.aclose()

    t0 = time.monotonic()
    out = asyncio.run(go())
    return out, time.monotonic() - t0


def test_a_hung_server_fails_every_call_at_once_after_about_two_timeouts():
    # A hung server: four calls sent together time out (1 s); they may have waited behind
    # each other at a cold server, so they go again one at a time. The first, sent alone,
    # times out too: the server is taken as hung, and it and the three waiting behind it
    # fail at once with the hung-server error (before: one timeout each, final at once;
    # sending them again one by one as a queue of ours would have taken 4 more timeouts).
    release, seen, lock = threading.Event(), [], threading.Lock()

    def hang(path, headers, body):
        with lock:
            seen.append(path)
        release.wait(10)
        return 500, {"error": {"message": "too late"}}

    with scripted_server(hang) as url:
        errors, wall = _together(url, 4, timeout=1)
        release.set()
    assert all(isinstance(e, TimeoutError) for e in errors), errors
    assert all("has answered none of this run's calls" in str(e) for e in errors), errors
    assert len(seen) == 5  # the four, then one sent alone
    assert 2 <= wall < 4  # about 2 x the timeout


def test_a_lone_call_at_a_hung_server_gets_two_timeouts_and_later_calls_fail_at_once():
    # One call alone: its first timeout may be a cold server's, so it goes once more; the
    # second, alone after a timeout, shows the server hung. A call made after that fails
    # at once, without a request (before: each later call waited out its own timeout).
    seen: list[str] = []

    def hang(path, headers, body):
        seen.append(path)
        time.sleep(3)
        return 500, {"error": {"message": "too late"}}

    async def timed(model):
        t0 = time.monotonic()
        try:
            await model.complete([{"role": "user", "content": "hi"}])
        except TimeoutError as exc:
            return exc, time.monotonic() - t0

    async def go(model):
        try:
            return await timed(model), await timed(model)
        finally:
            await model.aclose()

    with scripted_server(hang) as url:
        model = Model(f"vllm:m@{url}", timeout=1)
        ServerLimits(4).attach(model)
        (first, wall), (later, at_once) = asyncio.run(go(model))
    assert isinstance(first, TimeoutError) and 2 <= wall < 3
    assert "has answered none of this run's calls (2 timed out" in str(first)
    assert isinstance(later, TimeoutError) and at_once < 0.5 and len(seen) == 2
    assert "has answered none of this run's calls" in str(later)


def test_a_cold_server_whose_first_answer_outlasts_the_timeout_answers_the_first_wave():
    # One request at a time; the first answer takes 1.5 s (a cold prefill), past the 1-s
    # timeout; later ones are quick. Before: the four calls' timeouts were final (the
    # hung-server rule), all four failed. Now they go again one at a time and answer.
    lock, count = threading.Lock(), [0]

    def cold(path, headers, body):
        with lock:
            count[0] += 1
            first = count[0] == 1
        time.sleep(1.5 if first else 0.01)
        return 200, chat_reply("ok")

    with scripted_server(cold, serial=True) as url:
        done, _ = _together(url, 4, timeout=1)
    assert [getattr(d, "content", d) for d in done] == ["ok"] * 4


def test_a_server_slower_than_the_timeout_fails_each_call_within_three_tries():
    # The server answered (3 quick calls), then answers every call after the timeout + 0.5 s.
    # Four calls go together: the three sent behind another time out behind it, so each is
    # sent again once; after that a resend is behind nothing but its own abandoned try, and
    # its timeout is final. Before, a resend always counted as behind that try and went
    # again up to QUEUED_TIMEOUT_RETRIES (8) times: 9 requests for each of the three calls
    # (about 9 timeouts of waiting each, plus their turns at the one slot left).
    lock, tries = threading.Lock(), {}
    timeout = 1.0

    def slow(path, headers, body):
        tag = body["messages"][0]["content"]
        with lock:
            tries[tag] = tries.get(tag, 0) + 1
        time.sleep(0.01 if tag.startswith("warm") else timeout + 0.5)
        return 200, chat_reply("ok")

    async def go(model):
        for i in range(3):
            await model.complete([{"role": "user", "content": f"warm {i}"}])

        async def one(i):
            try:
                return await model.complete([{"role": "user", "content": f"call {i}"}])
            except TimeoutError as exc:
                return exc

        try:
            return await asyncio.gather(*(one(i) for i in range(4)))
        finally:
            await model.aclose()

    with scripted_server(slow) as url:
        model = Model(f"vllm:m@{url}", timeout=timeout)
        ServerLimits(4).attach(model)
        errors = asyncio.run(go(model))
    assert all(isinstance(e, TimeoutError) for e in errors), errors
    calls = {tag: n for tag, n in tries.items() if tag.startswith("call")}
    assert len(calls) == 4 and max(calls.values()) <= 3, calls
    assert sum(calls.values()) <= 8, calls  # one alone, three resent once, one of them twice
