"""Benchmarks for the optimize and publish_gate stages on a realistic 100k-row graded pool.

12,500 asks x 8 repeats, support-desk shaped rows: an assistant turn with a tool call, the
tool result (sometimes a fault), a final reply, ``faults``, ``world_state``, markers and a
``behavior_signature`` as simulate stamps it. Each ask has its own pass probability, so about
half the asks are mixed, the rest unanimous, the way the scripted agent's default skill lands.

Run: ``python experiments/bench/run.py optimize``.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

TOOLS = ("lookup_order", "issue_refund", "cancel_order", "lookup_account", "search_orders")
STATES = ("exists", "exists", "exists", "missing", "already_done")
MODES = (None, None, "timeout", "error", "malformed")


def make_pool(n_asks: int = 12_500, k: int = 8, seed: int = 0) -> list[dict]:
    """Graded rows: ``n_asks`` asks x ``k`` repeats with steps and a behavior signature."""
    rng = np.random.default_rng(seed)
    p_ask = rng.beta(0.7, 0.7, n_asks)
    rows: list[dict] = []
    for a in range(n_asks):
        tool = TOOLS[a % len(TOOLS)]
        state = STATES[(a // 5) % len(STATES)]
        mode = MODES[(a // 25) % len(MODES)]
        order_id = f"ORD-{10000 + a}"
        prompt = f"Hi, please {tool.replace('_', ' ')} for order {order_id}, thanks (case {a})."
        for j in range(k):
            passed = rng.random() < p_ask[a]
            fired = mode is not None and rng.random() < 0.5
            call = {"id": f"c{a}-{j}", "name": tool, "arguments": {"order_id": order_id}}
            steps = [
                {"kind": "assistant", "content": "", "tool_calls": [call]},
                {
                    "kind": "tool",
                    "tool_call_id": call["id"],
                    "name": tool,
                    "arguments": call["arguments"],
                    "result": {"error": mode} if fired else {"order_id": order_id, "status": "ok"},
                    "status": mode if fired else "ok",
                    "fault": mode if fired else None,
                },
            ]
            if not passed and j % 2:
                extra = {
                    "id": f"x{a}-{j}",
                    "name": "lookup_account",
                    "arguments": {"email": "a@example.com"},
                }
                steps.append({"kind": "assistant", "content": "", "tool_calls": [extra]})
                steps.append(
                    {"kind": "tool", "tool_call_id": extra["id"], "name": extra["name"],
                     "arguments": extra["arguments"], "result": {}, "status": "ok", "fault": None}
                )  # fmt: skip
            final = (
                f"Done: {tool.replace('_', ' ')} went through for {order_id}."
                if passed
                else f"I could not complete that for {order_id}; variant {j % 3}."
            )
            steps.append({"kind": "assistant", "content": final, "tool_calls": []})
            sig = hashlib.sha1(f"{tool}|{passed}|{j % 3}|{fired}".encode()).hexdigest()[:16]
            rows.append(
                {
                    "schema_version": "1",
                    "prompt": prompt,
                    "scenario_id": f"s{a:05d}",
                    "rollout_index": j,
                    "rollout_id": f"s{a:05d}-{j}",
                    "mode": "rl",
                    "steps": steps,
                    "final_text": final,
                    "world_state": state,
                    "faults": {
                        "planned": {"tool": tool, "mode": mode} if mode else None,
                        "rate": 0.5 if mode else 0.0,
                        "fired": [{"tool": tool, "mode": mode, "step": 1}] if fired else [],
                    },
                    "markers": {"hedging": float(rng.random() < 0.2)},
                    "behavior_signature": sig,
                    "policy_version": "scripted@abc123",
                    "model_version": "scripted",
                    "reward": 1.0 if passed else 0.0,
                    "judge_status": "ok",
                    "ended_by": "final",
                }
            )
    return rows


def _timed(label: str, goal: float, fn, *args, **kwargs) -> list[dict]:
    """Wall and CPU seconds of one call. On the shared 2-core box other jobs inflate wall
    time; CPU time is what this process spent, so both are reported."""
    c0, w0 = time.process_time(), time.perf_counter()
    fn(*args, **kwargs)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return [
        {"name": f"{label} (wall)", "value": wall, "unit": "s", "target": goal, "better": "lower"},
        {"name": f"{label} (cpu)", "value": cpu, "unit": "s", "target": goal, "better": "lower"},
    ]


def bench_select_for_rl_100k() -> list[dict]:
    from wai_exp.score.select.select import select_for_rl

    rows = make_pool()
    return _timed("select_for_rl on 100,000 graded rows", 3.0, select_for_rl, rows, target=1000)


def bench_publish_gate_100k() -> list[dict]:
    from wai_exp.score.select.publish_gate import publish_gate

    rows = make_pool(seed=1)
    return _timed(
        "publish_gate on 100,000 graded rows",
        3.0,
        publish_gate,
        rows,
        mode="rl",
        endorsed=("lookup_order",),
    )


def bench_hack_scan_100k() -> list[dict]:
    from wai_exp.score.diagnose.hack_scan import hack_scan

    rows = make_pool(seed=2)
    return _timed(
        "hack_scan on 100,000 graded rows", 2.0, hack_scan, rows, endorsed=("lookup_order",)
    )
