"""What ``world=mcp`` adds per tool call over the mock world, at ``concurrency=32``.

How the rows are built: the notes server of the tests (``tests/support/mcp_notes_server.py``,
the ``mcp`` package's server API, over stdio) lists its tools; a spec holds the four an agent
calls (``create_note``, ``get_note``, ``delete_note``, ``list_notes``) with the server's own
schemas. Each arm is one ``simulate(spec=that spec, budget=N, seed=0, fault_rate=0,
simulator=False, advanced={"concurrency": 32, ...})``: the mock world (the template world
answering those tools) or ``world=mcp`` over the server, with no reset or state tool so the
32 rollouts share it at once. The same spec, seed and writer give both arms the same asks,
and ``fault_rate=0`` sends every call to the world. Two agents:

* the scripted agent (offline): its rollouts never overlap, so a call's cost is paid in line;
* a model agent (``vllm:``) over a scripted OpenAI-compatible stub on 127.0.0.1 that calls
  ``create_note`` on turn 1 and answers on turn 2, so 32 rollouts are in flight at once.

Overhead per call = (MCP arm wall - mock arm wall) / tool calls the server answered, with
the MCP arm's wall taken less its server's start and stop (timed in the same run: a fixed
cost per stage, reported beside it). ``call_tool`` latency is what
one call took as the agent saw it (``McpServer.call``, p50 / p95), queueing included. Best
(lowest) of 3 runs per arm; wall clock on a shared 2-core machine.

Run: ``python experiments/bench/run.py mcp``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.support: the notes server and the scripted stub

SERVER = "python -m tests.support.mcp_notes_server"
AGENT_TOOLS = ("create_note", "get_note", "delete_note", "list_notes")
CONCURRENCY = 32


def _options(**extra):
    from wai_exp.simulate.world import WorldOptions

    return WorldOptions(kind="mcp", command=SERVER, cwd=str(REPO), **extra)


def _spec(folder: Path) -> Path:
    """The notes server's agent tools as a spec file (the server's own schemas)."""
    from wai_exp.simulate.mcp_world import McpServer

    server = McpServer(_options())
    try:
        tools = [t for t in server.tools if t["function"]["name"] in AGENT_TOOLS]
    finally:
        server.close()
    path = folder / "notes.json"
    spec = {"name": "notes", "system_prompt": "You keep the person's notes.", "tools": tools}
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


class _Timed:
    """Times every ``McpServer.call`` (the agent's view of one ``call_tool``) and the server's
    start and stop, which the per-call overhead leaves out."""

    def __enter__(self) -> _Timed:
        from wai_exp.simulate import mcp_world

        cls = self.cls = mcp_world.McpServer
        self.saved = (cls.call, cls.__init__, cls.close)
        self.latencies: list[float] = []
        self.lifecycle_s = 0.0
        lock = threading.Lock()
        call, init, close = self.saved

        def timed(fn, into_latencies):
            def run(*args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    dt = time.perf_counter() - t0
                    with lock:
                        if into_latencies:
                            self.latencies.append(dt)
                        else:
                            self.lifecycle_s += dt

            return run

        cls.call, cls.__init__, cls.close = (
            timed(call, True),
            timed(init, False),
            timed(close, False),
        )
        return self

    def __exit__(self, *exc) -> None:
        self.cls.call, self.cls.__init__, self.cls.close = self.saved


def _stub(path, headers, body):
    from tests.support.scripted_server import chat_reply

    if not any(m.get("role") == "tool" for m in body.get("messages", ())):
        args = json.dumps({"title": "bench note", "body": "a note the model made"})
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "create_note", "arguments": args},
        }
        return 200, chat_reply("", [call])
    return 200, chat_reply("Saved.")


def _arm(spec: Path, world: str, agent, budget: int) -> dict:
    """One simulate(): its wall seconds less the MCP server's start and stop, the tool calls
    the world answered, and each call_tool's latency."""
    from wai_exp.simulate.engine import simulate

    advanced: dict = {"concurrency": CONCURRENCY}
    if world == "mcp":
        advanced["world"] = {"kind": "mcp", "command": SERVER, "cwd": str(REPO)}
    with _Timed() as timed:
        t0 = time.perf_counter()
        data = simulate(
            agent=agent, spec=str(spec), budget=budget, seed=0, fault_rate=0,
            simulator=False, advanced=advanced,
        )  # fmt: skip
        wall = time.perf_counter() - t0
    calls = sum(
        1
        for r in data.rows
        for s in r["steps"]
        if s.get("kind") == "tool" and s.get("status") != "invalid"
    )
    return {"s": wall - timed.lifecycle_s, "lifecycle_s": timed.lifecycle_s, "calls": calls,
            "latencies": list(timed.latencies)}  # fmt: skip


def _compare(spec: Path, agent, budget: int, label: str) -> list[dict]:
    runs = {w: [_arm(spec, w, agent, budget) for _ in range(3)] for w in ("mock", "mcp")}
    mock = min(runs["mock"], key=lambda r: r["s"])
    mcp = min(runs["mcp"], key=lambda r: r["s"])
    lat = sorted(x for r in runs["mcp"] for x in r["latencies"])
    per_call_ms = 1000 * (mcp["s"] - mock["s"]) / max(1, mcp["calls"])
    common = {"budget": budget, "concurrency": CONCURRENCY, "tool_calls_mcp": mcp["calls"],
              "tool_calls_mock": mock["calls"], "mock_s": round(mock["s"], 3),
              "mcp_s_less_server_start_stop": round(mcp["s"], 3),
              "server_start_stop_s": round(mcp["lifecycle_s"], 3)}  # fmt: skip
    return [
        {"name": f"world=mcp overhead per tool call, {label}", "value": round(per_call_ms, 3),
         "unit": "ms", **common},
        {"name": f"call_tool latency p50, {label}", "unit": "ms",
         "value": round(1000 * lat[len(lat) // 2], 3) if lat else None},
        {"name": f"call_tool latency p95, {label}", "unit": "ms",
         "value": round(1000 * lat[int(len(lat) * 0.95)], 3) if lat else None},
    ]  # fmt: skip


def bench_mcp_overhead() -> list[dict]:
    from tests.support.scripted_server import scripted_server

    with tempfile.TemporaryDirectory() as tmp:
        spec = _spec(Path(tmp))
        _arm(spec, "mock", None, 20)  # imports and first-call costs out of the timing
        out = _compare(spec, None, 400, "scripted agent, 400 rollouts")
        with scripted_server(_stub) as url:
            out += _compare(spec, f"vllm:stub@{url}", 200, "model agent (stub), 200 rollouts")
    return out


if __name__ == "__main__":
    results = bench_mcp_overhead()
    print(f"{'measure':<62} {'value':>9}")
    for res in results:
        print(f"{res['name']:<62} {res['value']:>9.3f} {res['unit']}")
    print(json.dumps(results[0]), json.dumps(results[3]), sep="\n")
