"""Rollouts refused together by a rate limit come back spread out, not on the same tick.

32 model-agent rollouts run at once against a real HTTP server on 127.0.0.1 that answers
each rollout's first request with 429 and its second with a reply. The server records when
each request arrives; a rollout's retry delay is the time between its two requests. Before,
every rollout waited exactly ``base_s`` (or exactly ``Retry-After``), so all 32 retries
landed on the server within a few milliseconds of one another."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections import Counter

from tests.support.scripted_server import chat_reply, scripted_server
from wai_exp.llm.http import RetryPolicy
from wai_exp.simulate.agents.model_agent import ModelAgent

N = 32


class RateLimitedOnce:
    """429 (with ``headers``) to each prompt's first request, a reply to the next."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers
        self.arrivals: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def __call__(self, path, headers, body):
        prompt = body["messages"][-1]["content"]
        with self.lock:
            times = self.arrivals.setdefault(prompt, [])
            times.append(time.monotonic())
            first = len(times) == 1
        if first:
            return 429, {"error": "rate limited"}, self.headers
        return 200, chat_reply("done")

    def delays(self) -> list[float]:
        assert all(len(t) == 2 for t in self.arrivals.values()), self.arrivals
        return [t[1] - t[0] for t in self.arrivals.values()]


def run_rollouts(server: RateLimitedOnce, policy: RetryPolicy) -> list[float]:
    async def go(url: str) -> None:
        agent = ModelAgent(f"vllm:m@{url}", retry=policy, timeout=30)
        try:
            rows = await asyncio.gather(
                *(agent(f"task {i}", tools=[], system_prompt=None, world=None) for i in range(N))
            )
        finally:
            await agent.aclose()
        assert all(r["final_text"] == "done" for r in rows)

    with scripted_server(server) as url:
        asyncio.run(go(url))
    delays = server.delays()
    assert len(delays) == N
    return delays


def largest_tick(delays: list[float], tick_s: float) -> int:
    """How many retries share the busiest ``tick_s`` window."""
    return max(Counter(int(d / tick_s) for d in delays).values())


def test_32_rollouts_refused_by_429_retry_spread_over_the_backoff():
    delays = run_rollouts(RateLimitedOnce({}), RetryPolicy(retries=2, base_s=2.0, max_s=20.0))
    # The first wait is drawn from [base_s/2, base_s]: never sooner than half the backoff.
    assert min(delays) >= 1.0
    assert max(delays) <= 2.0 + 1.0  # the draw's top plus a loaded machine's lag
    # Spread: a uniform draw over 1 s has a 0.29 s standard deviation; the same wait for
    # everyone had a few milliseconds of scheduling noise.
    assert statistics.pstdev(delays) > 0.15, delays
    # Old code: 32 of 32 in one 50 ms tick. Half is the bound: a starved event loop fires
    # late timers together, so a loaded CI machine bunches some draws.
    assert largest_tick(delays, 0.05) <= N // 2, sorted(delays)


def test_retry_after_is_a_floor_and_the_retries_after_it_are_spread():
    delays = run_rollouts(
        RateLimitedOnce({"Retry-After": "1"}), RetryPolicy(retries=2, base_s=30.0, max_s=20.0)
    )
    assert min(delays) >= 1.0  # the server's wish is honoured
    assert max(delays) <= 1.25 + 1.0  # and base_s=30 is not: Retry-After replaces the backoff
    assert statistics.pstdev(delays) > 0.03, delays  # drawn over [1, 1.25] s
    assert largest_tick(delays, 0.02) <= N // 2, sorted(delays)  # old code: 24 of 32
