"""Benchmarks for grading (run via ``python experiments/bench/run.py grading``)."""

from __future__ import annotations

import random
import time
from typing import Any

STANCES = ("direct", "vague", "adversarial", "boundary")
WORLDS = ("exists", "missing", "already_done")
CONDITIONS = ("ok", "timeout", "error", "malformed")


def _call(
    cid: str, name: str, args: dict[str, Any], result: Any, fault: str | None
) -> list[dict[str, Any]]:
    return [
        {
            "kind": "assistant",
            "content": "",
            "tool_calls": [{"id": cid, "name": name, "arguments": args}],
        },
        {
            "kind": "tool",
            "tool_call_id": cid,
            "name": name,
            "arguments": args,
            "result": result,
            "status": fault or "ok",
            "fault": fault,
        },
    ]


def synthetic_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Support-desk-shaped rollouts over the whole grid: a lookup, sometimes a refund
    (faulted at the situation's fault mode half the time), and one of a few replies."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        order = f"ORD-{10000 + i}"
        dims = {
            "tool": "issue_refund",
            "stance": rng.choice(STANCES),
            "world_state": rng.choice(WORLDS),
            "tool_condition": rng.choice(CONDITIONS),
            "history": "fresh",
            "rule": "R2",
            "tier": "standard",
        }
        total = round(rng.uniform(10, 200), 2)
        steps = _call(
            "c1",
            "lookup_order",
            {"order_id": order},
            {"order_id": order, "total": total, "status": "delivered"},
            None,
        )
        fault = (
            dims["tool_condition"]
            if dims["tool_condition"] != "ok" and rng.random() < 0.5
            else None
        )
        if rng.random() < 0.6:
            steps += _call(
                "c2",
                "issue_refund",
                {"order_id": order, "amount": total, "reason": "arrived damaged"},
                {"error": fault}
                if fault
                else {"ok": True, "refund_id": f"RF-{i:06d}", "amount": total},
                fault,
            )
        final = rng.choice(
            (
                f"I've refunded ${total:.2f} to your card.",
                "Sorry, the refund didn't go through because the system timed out.",
                "I couldn't find an order with that number.",
                "That order was already refunded.",
                "I can't do that for another customer's order.",
                "Could you share your order number?",
            )
        )
        rows.append(
            {
                "prompt": f"Please refund {order}, it arrived damaged.",
                "steps": steps,
                "final_text": final,
                "scenario_id": f"s{i // 4}",
                "rollout_index": i % 4,
                "rollout_id": f"r{i}",
                "scenario_dimensions": dims,
                "world_state": dims["world_state"],
                "model_version": "scripted",
                "lineage": {"run_id": "bench"},
            }
        )
    return rows


def bench_run_judge_checklist() -> list[dict]:
    """Wall-clock rows/s, and rows per CPU-second of this process (the inline path is one
    thread, so the CPU figure is what the code costs on a shared, loaded machine)."""
    from wai_exp.score.grade.checklist import task_checklist
    from wai_exp.score.judges.judging import run_judge

    rows = synthetic_rows(10_000)
    run_judge(rows[:200], task_checklist)  # warm imports
    c0, t0 = time.process_time(), time.perf_counter()
    scored = run_judge(rows, task_checklist)
    cpu, dt = time.process_time() - c0, time.perf_counter() - t0
    assert scored.counts.get("ok") == len(rows), scored.counts
    return [
        {
            "name": "run_judge(task_checklist) on 10,000 rows (wall)",
            "value": len(rows) / dt,
            "unit": "rows/s",
            "target": 5000.0,
            "better": "higher",
        },
        {
            "name": "run_judge(task_checklist) on 10,000 rows (CPU)",
            "value": len(rows) / cpu,
            "unit": "rows/cpu-s",
            "target": 5000.0,
            "better": "higher",
        },
    ]


def bench_behavior_signature() -> dict:
    from wai_exp.score.grade.grading import behavior_signature

    rows = synthetic_rows(10_000, seed=1)
    t0 = time.perf_counter()
    for row in rows:
        behavior_signature(row)
    dt = time.perf_counter() - t0
    return {
        "name": "behavior_signature per row (10,000 rows)",
        "value": dt / len(rows) * 1e6,
        "unit": "us",
        "target": 100.0,
        "better": "lower",
    }


def bench_reply_vocabulary_distinct() -> dict:
    """The honesty rule's reading of a reply (``claims_success`` + ``acknowledges_fault``)
    on 30,000 distinct replies: the scripted agent's final replies of a real rl run, each
    made distinct with its own ticket number, so no cache answers (the worst case; model
    replies rarely repeat). CPU time of this process."""
    from wai_exp.domain import replies
    from wai_exp.simulate.engine import simulate

    texts = [r["final_text"] for r in simulate(mode="rl", budget=600, seed=0).rows]
    sample = [f"{texts[i % len(texts)]} Ticket T-{i:06d}." for i in range(30_000)]
    c0 = time.process_time()
    for text in sample:
        replies.claims_success(text)
        replies.acknowledges_fault(text)
    cpu = time.process_time() - c0
    return {
        "name": "reply vocabulary on 30,000 distinct replies (CPU)",
        "value": len(sample) / cpu,
        "unit": "replies/cpu-s",
        "target": 5000.0,
        "better": "higher",
    }
