"""Model calls per second against a local OpenAI-compatible server that answers after 50 ms.

Issue 9 item 7: at ``concurrency`` C the ideal is ``C / 0.050`` calls per second (640 at 32,
2,560 at 128); wai-exp must reach 85% of it. One run measures, side by side, per C:

* ``server alone``: a lean raw-asyncio client (one keep-alive socket per worker, no HTTP
  library) against the stub: the ceiling this machine reaches at that moment;
* ``aiohttp alone``: a bare ``aiohttp.ClientSession`` posting the same body: the transport
  under the seam without httpx, the floor any httpx-API client over it can reach;
* ``httpx``: ``wai_exp.llm.http.async_client`` (the one transport seam) posting the same
  body, without the engine;
* ``wai-exp``: ``wai_exp.simulate(agent="vllm:stub@http://127.0.0.1:<port>/v1")`` end to end
  (writer, world, rows), counted at the server;
* ``workers=2``: the same with its rollouts on two processes, the stage's own and one worker
  (``simulate.workers``, issue 22); its CPU ms per call adds the worker's CPU to the stage's.
  ``prestarted``: the worker process is started 2 s before the cell's clock, as the console
  script starts it while MLflow starts its run (``shards.prestart``); otherwise it starts
  with the stage, and the stage runs its rollouts alone for the 0.5-1 s the worker imports.

The stub (``serve``) is raw asyncio in its own process: it reads each request's body, waits
exactly ``delay`` seconds (``loop.call_later``) and answers a chat completion. Its answers
make rollouts that look real: from the hash of the ask it either calls a tool of the
request's own tool list with the order number or email the ask names (0, 1 or 2 tool turns)
or answers in text; every final reply names the ask's order and a running counter, so no two
replies are the same and rollouts have 1 to 3 model calls.

The machine is shared (2 cores, ~9 agents), so absolute rates are load-bound: every cell
carries the 1-minute load average when it ran and the ratio to the server-alone ceiling
measured next to it. Run it alone with ``nice``::

    nice python experiments/bench/bench_throughput.py --duration 20 --concurrency 32 128

``--repeat N`` runs every cell N times, in turn, and ends with each cell's median and range:
this VM's rate drifts by several points between runs minutes apart, so one cell is one draw.

``python experiments/bench/run.py throughput`` runs the same with ``WAI_BENCH_THROUGHPUT_S``
seconds per cell (default 20).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing as mp
import os
import random
import re
import socket
import sys
import threading
import time
from typing import Any

DELAY_S = 0.050

_ID = re.compile(r"ORD-\d+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


# ---- the stub server -------------------------------------------------------------------
def _answer(body: bytes, n: int) -> dict[str, Any]:
    """The chat completion the stub sends for one request body (``n``: its running count)."""
    try:
        req = json.loads(body)
    except ValueError:
        req = {}
    messages = req.get("messages") or []
    tools = [t.get("function", {}).get("name") for t in req.get("tools") or []]
    ask = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    h = int.from_bytes(hashlib.blake2b(ask.encode(), digest_size=4).digest(), "big")
    tool_turns = sum(1 for m in messages if m.get("role") == "tool")
    order = (_ID.findall(ask) or ["ORD-10482"])[0]
    email = (_EMAIL.findall(ask) or ["maria.chen@example.com"])[0]
    wanted = h % 3  # 0, 1 or 2 tool turns before the reply
    if tools and tool_turns < wanted:
        if tool_turns == 0 and "lookup_order" in tools:
            name, args = "lookup_order", {"order_id": order}
        elif "lookup_account" in tools:
            name, args = "lookup_account", {"email": email}
        else:
            name, args = tools[h % len(tools)], {}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            ],
        }
        finish = "tool_calls"
    else:
        message = {
            "role": "assistant",
            "content": f"I looked into {order} for you (after {tool_turns} lookups); "
            f"reference {n}: nothing was changed yet.",
        }
        finish = "stop"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "model": req.get("model") or "stub",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 40 + 3 * len(messages), "completion_tokens": 12 + h % 20},
    }


class _StubProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive: reads ``Content-Length`` bodies, answers each after the delay."""

    count = 0  # requests taken, all connections
    in_flight = 0  # taken and not yet answered
    peak = 0  # the most in flight at once since the last /stats?reset

    def __init__(self, delay: float, jitter: float = 0.0, rng: random.Random | None = None) -> None:
        self.delay, self.jitter = delay, jitter
        self.rng = rng or random.Random(0)
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
            end = head_end + 4 + length
            if len(self.buf) < end:
                return
            path = head.split(" ", 2)[1] if " " in head else ""
            body, self.buf = self.buf[head_end + 4 : end], self.buf[end:]
            cls = _StubProtocol
            if "/stats" in path:
                stats = {"count": cls.count, "peak_in_flight": cls.peak}
                if path.endswith("reset"):
                    cls.peak = cls.in_flight
                self._send(json.dumps(stats).encode(), answered=False)
            else:
                cls.count += 1
                cls.in_flight += 1
                cls.peak = max(cls.peak, cls.in_flight)
                payload = json.dumps(_answer(body, _StubProtocol.count)).encode()
                wait = self.delay + (
                    self.rng.uniform(-self.jitter, self.jitter) if self.jitter else 0.0
                )
                asyncio.get_running_loop().call_later(wait, self._send, payload)

    def _send(self, payload: bytes, answered: bool = True) -> None:
        if answered:
            _StubProtocol.in_flight -= 1
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(payload)).encode()
            + b"\r\n\r\n"
            + payload
        )


def serve(sock: socket.socket, delay: float = DELAY_S, jitter: float = 0.0) -> None:
    """Serve the stub on an already bound, listening ``sock`` until killed. With ``jitter``
    each answer waits ``delay`` +- up to ``jitter`` seconds (uniform, seeded: same mean)."""
    rng = random.Random(0)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _StubProtocol(delay, jitter, rng), sock=sock, backlog=4096
        )
        async with server:
            await server.serve_forever()

    asyncio.run(main())


class Stub:
    """The stub in its own process: ``with Stub() as url: ...`` (``url`` ends in ``/v1``)."""

    def __init__(self, delay: float = DELAY_S, jitter: float = 0.0) -> None:
        self.delay, self.jitter = delay, jitter

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4096)
        self.port = self.sock.getsockname()[1]
        self.proc = mp.get_context("fork").Process(
            target=serve, args=(self.sock, self.delay, self.jitter)
        )
        self.proc.start()
        return f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc: Any) -> None:
        self.proc.terminate()
        self.proc.join(5)
        self.sock.close()

    def stats(self, reset: bool = False) -> dict[str, int]:
        """``count`` (requests taken so far) and ``peak_in_flight`` (since the last reset)."""
        path = b"/stats?reset" if reset else b"/stats"
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            s.sendall(b"GET " + path + b" HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
            data = b""
            while b"}" not in data:
                data += s.recv(4096)
        return json.loads(data.split(b"\r\n\r\n", 1)[1])

    def count(self) -> int:
        return self.stats()["count"]


# ---- the clients -----------------------------------------------------------------------
_BODY = json.dumps(
    {
        "model": "stub",
        "messages": [{"role": "user", "content": "Where is my order ORD-10482?"}],
        "temperature": 0.7,
    }
).encode()


async def _raw_client(port: int, concurrency: int, duration: float) -> int:
    """Calls answered in ``duration`` s by ``concurrency`` keep-alive sockets, no HTTP library."""
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: "
        + str(len(_BODY)).encode()
        + b"\r\n\r\n"
        + _BODY
    )
    done = 0
    stop = time.monotonic() + duration

    async def worker() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.monotonic() < stop:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            i = head.lower().find(b"content-length:")
            length = int(head[i + 15 : head.find(b"\r\n", i)])
            await reader.readexactly(length)
            done += 1
        writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


async def _aiohttp_client(url: str, concurrency: int, duration: float) -> int:
    """Calls answered in ``duration`` s by a bare ``aiohttp.ClientSession`` posting the same
    body: the transport under ``wai_exp.llm.http`` without httpx on top (its floor)."""
    import aiohttp

    done = 0
    stop = time.monotonic() + duration
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < stop:
                async with session.post(
                    url + "/chat/completions", data=_BODY, headers=headers
                ) as r:
                    json.loads(await r.read())
                done += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


async def _httpx_client(url: str, concurrency: int, duration: float) -> int:
    """Calls answered in ``duration`` s through ``wai_exp.llm.http`` (client + ``post_json``)."""
    from wai_exp.llm.http import async_client, post_json

    payload = json.loads(_BODY)
    done = 0
    stop = time.monotonic() + duration
    async with async_client(timeout=30.0) as client:

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < stop:
                await post_json(client, url + "/chat/completions", payload)
                done += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done


class _Sampler(threading.Thread):
    """Reads the stub's request count every 0.25 s into ``samples`` as ``(t, count)``."""

    def __init__(self, stub: Stub, samples: list[tuple[float, int]]) -> None:
        super().__init__(daemon=True)
        self.stub, self.samples, self.done = stub, samples, threading.Event()
        self.t0 = time.perf_counter()

    def run(self) -> None:
        while not self.done.wait(0.25):
            self.samples.append((time.perf_counter() - self.t0, self.stub.count()))


def _steady(samples: list[tuple[float, int]], wall: float) -> float | None:
    inside = [(t, n) for t, n in samples if 2.0 <= t <= wall - 1.0]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _cpu() -> float:
    """CPU seconds of this process and of its children it has waited for (the workers of
    ``simulate.workers``; the stub is waited for only after the last cell)."""
    import resource

    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def _timed(fn: Any) -> tuple[float, float, float, Any]:
    """``(wall_s, cpu_s, load_before, result)`` of ``fn()``: CPU of this process and its
    workers."""
    load = _load()
    t0, c0 = time.perf_counter(), _cpu()
    result = fn()
    return time.perf_counter() - t0, _cpu() - c0, load, result


def measure(
    concurrency: int,
    duration: float,
    delay: float = DELAY_S,
    jitter: float = 0.0,
    only: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The cells at one concurrency, each ``duration`` seconds, in one stub process
    (``only``: the cells whose label contains one of these words; server alone always)."""
    ideal = concurrency / delay
    out: list[dict[str, Any]] = []
    import wai_exp.simulate.shards  # noqa: F401 - the package's import is not a cell's time

    with Stub(delay, jitter) as url:
        stub = Stub.__new__(Stub)
        stub.port = int(url.rsplit(":", 1)[1].split("/")[0])
        time.sleep(0.3)
        cells: list[tuple[str, Any]] = [
            ("server alone (raw asyncio client)", lambda: asyncio.run(_raw_client(stub.port, concurrency, duration))),
            ("aiohttp alone (the transport's floor)", lambda: asyncio.run(_aiohttp_client(url, concurrency, duration))),
            ("wai_exp.llm.http client", lambda: asyncio.run(_httpx_client(url, concurrency, duration))),
            ("wai_exp.simulate(agent='vllm:...')", lambda: _simulate(url, concurrency, duration)),
            ("wai_exp.simulate(..., workers=2)", lambda: _simulate(url, concurrency, duration, 2)),
            ("wai_exp.simulate(..., workers=2, prestarted)", lambda: _simulate(url, concurrency, duration, 2)),
        ]  # fmt: skip
        if only:
            cells = [c for c in cells if c[0].startswith("server") or any(w in c[0] for w in only)]
        ceiling = None
        for label, fn in cells:
            if label.endswith("prestarted)"):
                from wai_exp.simulate.shards import prestart

                prestart(2)
                time.sleep(2.0)
            before = stub.stats(reset=True)["count"]
            samples: list[tuple[float, int]] = []
            sampler = _Sampler(stub, samples)
            sampler.start()
            try:
                wall, cpu, load, result = _timed(fn)
            finally:
                sampler.done.set()
                sampler.join()
            after = stub.stats()
            calls = after["count"] - before
            rate = calls / wall
            steady = _steady(samples, wall)
            if ceiling is None:
                ceiling = rate
            out.append(
                {
                    "name": f"{label} c={concurrency}",
                    "value": round(rate, 1),
                    "unit": "calls/s",
                    "target": round(0.85 * ideal, 1) if label.startswith("wai_exp.simulate") else None,
                    "better": "higher",
                    "concurrency": concurrency,
                    "ideal": ideal,
                    "pct_of_ideal": round(100 * rate / ideal, 1),
                    "pct_of_server_alone": round(100 * rate / ceiling, 1),
                    "calls": calls,
                    # Calls/s between 2 s after the start and 1 s before the end: without
                    # start-up (imports, the TLS store, the first writer batch) and drain.
                    "steady_per_s": None if steady is None else round(steady, 1),
                    "steady_pct_of_ideal": None if steady is None else round(100 * steady / ideal, 1),
                    "peak_in_flight": after["peak_in_flight"],
                    # simulate's calls adapt their concurrency to the server (AIMD): on a
                    # loaded machine slow answers read as queueing and lower it, so the
                    # cell may not have run at c (report.json: model_concurrency.typical).
                    # Under workers=2 each process has its own limit, summed here (256 at
                    # c=128), while the rollouts in flight stay capped at c across both.
                    "calls_in_flight_typical": _typical(result),
                    # What each call spends outside the server, between its answer and the
                    # next request on that slot (steady rate): c / rate - delay. Set beside
                    # CPU ms/call, the rest is waiting (for the loop, for a core).
                    "client_ms_per_call": None if not steady else round(1000 * (concurrency / steady - delay), 1),
                    "wall_s": round(wall, 2),
                    "cpu_over_wall": round(cpu / wall, 2),
                    # Load-independent: what one call costs this process (the stub's own
                    # CPU is not in it). 1000 / this is the most calls one free core gives.
                    "cpu_ms_per_call": round(1000 * cpu / calls, 3) if calls else None,
                    "load_1m": load,
                }
            )  # fmt: skip
    return out


def _typical(report: Any) -> float | None:
    """The typical model concurrency a ``simulate`` report records (None: not a report)."""
    if not isinstance(report, dict) or not report.get("model_concurrency"):
        return None
    return report["model_concurrency"][0].get("typical")


def _simulate(url: str, concurrency: int, duration: float, workers: int = 1) -> dict[str, Any]:
    """``simulate()`` against the stub for ``duration`` s; ``workers`` > 1 shards its
    rollouts over that many processes (``simulate.workers``; ``concurrency`` stays global)."""
    import functools

    from wai_exp import simulate
    from wai_exp.simulate.shards import ShardSpec, same_arguments

    kwargs: dict[str, Any] = {
        "budget": 10**6,
        "time_budget": duration,
        "seed": 0,
        "advanced": {"concurrency": concurrency},
    }
    agent = f"vllm:stub@{url}"
    setup = functools.partial(same_arguments, agent, kwargs)
    data = simulate(agent=agent, shards=ShardSpec(workers=workers, setup=setup), **kwargs)
    rep = data.report()
    # Rollouts still running when the clock ran out (abandoned after stop_grace) are not
    # the stub's fault; any other loss is. ``len(data)``, not ``data.rows``: the rows'
    # scrubbed copies take 1.3 s at 22,000 rows, which are not the stage's calls.
    if not len(data) or set(rep.get("rollouts_lost_by") or {}) - {"abandoned"}:
        raise RuntimeError(
            f"simulate against the stub lost rollouts: {rep.get('rollouts_lost_by')}"
        )
    return rep


def bench_model_calls_per_second() -> list[dict[str, Any]]:
    """Calls/s at concurrency 32 and 128: server alone, aiohttp alone, the HTTP client,
    simulate() on one process and on two (``simulate.workers=2``)."""
    duration = float(os.environ.get("WAI_BENCH_THROUGHPUT_S", "20"))
    return [r for c in (32, 128) for r in measure(c, duration)]


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| cell | c | ideal/s | achieved/s | % of ideal | % of server alone | steady/s "
        "| steady % of ideal | client ms/call | CPU/wall | CPU ms/call | peak in flight | calls' limit (all processes) | load 1m |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name'].rsplit(' c=', 1)[0]} | {r['concurrency']} | {r['ideal']:.0f} | "
            f"{r['value']:.0f} | {r['pct_of_ideal']}% | {r['pct_of_server_alone']}% | "
            f"{r['steady_per_s']} | {r['steady_pct_of_ideal']}% | {r['client_ms_per_call']} | "
            f"{r['cpu_over_wall']} | {r['cpu_ms_per_call']} | {r['peak_in_flight']} | "
            f"{r['calls_in_flight_typical'] or ''} | "
            f"{r['load_1m']} |"
        )
    return "\n".join(lines)


def _spread(rounds: list[list[dict[str, Any]]]) -> str:
    """Per cell, the median and range of % of ideal (over the cell, and steady) across
    ``rounds``: on a VM whose rate drifts between runs minutes apart, one cell is one draw."""
    import statistics

    by_name: dict[str, list[dict[str, Any]]] = {}
    for rows in rounds:
        for r in rows:
            by_name.setdefault(r["name"], []).append(r)
    lines = [
        f"Across {len(rounds)} rounds (cells run in turn, each round in its own stub):",
        "",
        "| cell | c | rounds | % of ideal: median (min-max) | steady %: median (min-max) "
        "| CPU ms/call: median | rounds >= 85% |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rs in by_name.items():
        pct = [r["pct_of_ideal"] for r in rs]
        steady = [r["steady_pct_of_ideal"] for r in rs if r["steady_pct_of_ideal"] is not None]
        cpu = [r["cpu_ms_per_call"] for r in rs if r["cpu_ms_per_call"] is not None]
        lines.append(
            f"| {name.rsplit(' c=', 1)[0]} | {rs[0]['concurrency']} | {len(rs)} | {_median_range(pct)} "
            f"| {_median_range(steady)} | {f'{statistics.median(cpu):.3f}' if cpu else 'not measured'} "
            f"| {sum(p >= 85.0 for p in pct)} of {len(pct)} |"
        )  # fmt: skip
    return "\n".join(lines)


def _median_range(values: list[float]) -> str:
    import statistics

    if not values:
        return "not measured"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--duration", type=float, default=20.0, help="seconds per cell")
    p.add_argument("--concurrency", type=int, nargs="+", default=[32, 128])
    p.add_argument("--delay", type=float, default=DELAY_S)
    p.add_argument("--jitter", type=float, default=0.0, help="answer after delay +- jitter s")
    p.add_argument("--only", nargs="*", help="cells to run besides server alone: e.g. simulate")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of every cell, then each cell's median and range",
    )
    a = p.parse_args()
    print(f"load average (1, 5, 15 min) before: {os.getloadavg()}", flush=True)
    rounds = []
    for _ in range(a.repeat):
        rows = [r for c in a.concurrency for r in measure(c, a.duration, a.delay, a.jitter, a.only)]
        print(_table(rows), flush=True)
        rounds.append(rows)
    if a.repeat > 1:
        print(_spread(rounds))
    sys.exit(0)
