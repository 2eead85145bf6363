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


def test_timeouts_at_a_server_that_never_answered_are_final_not_tried_again():
    # A hung server: four calls sent together all time out once and fail, as they always
    # did; sending them again (as for a queue of ours) would only multiply the wait.
    release, seen, lock = threading.Event(), [], threading.Lock()

    def hang(path, headers, body):
        with lock:
            seen.append(path)
        release.wait(10)
        return 500, {"error": {"message": "too late"}}

    with scripted_server(hang) as url:
        model = Model(f"vllm:m@{url}", timeout=1)
        ServerLimits(4).attach(model)

        async def one():
            try:
                await model.complete([{"role": "user", "content": "hi"}])
            except TimeoutError as exc:
                return exc
            finally:
                await model.aclose()

        async def go():
            return await asyncio.gather(*(one() for _ in range(4)))

        t0 = time.monotonic()
        errors = asyncio.run(go())
        wall = time.monotonic() - t0
        release.set()
    assert all(isinstance(e, TimeoutError) for e in errors)
    assert len(seen) == 4 and wall < 3
