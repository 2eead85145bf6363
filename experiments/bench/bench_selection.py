"""Selection speed, import included: select_for_rl, publish_gate, build_preference_pairs on
100,000 graded rows, hack_scan on 3,200 rows at ``n_perm=100``.

How the rows are built (``make_pool``): 12,500 support-desk asks x 8 repeats. Each ask has its
own pass probability (Beta(0.7, 0.7)), its own tool and order id, a world state and a planned
fault mode. Each rollout makes 1 to 3 tool calls drawn per row (a lookup, sometimes a second
tool, sometimes a retry after a fault), with tool results that carry per-row values, and ends
in a reply written from the rollout's own facts (an amount, a ticket number, one of several
phrasings), so replies are distinct. One row in fifty repeats an earlier sibling's trajectory
and reply exactly, the way a sampled agent sometimes does, so ``dedupe_groups`` has work. The
rows carry no ``behavior_signature``, as rows another tool wrote do not: dedupe has to compute
what it needs. About 5% of rows are unjudged.

Each timing runs in a fresh interpreter that has the rows unpickled already, then imports the
function (``from wai_exp... import``, timed) and calls it once: "import included" means that
import cost is in the number, because it is in every CLI run. Best of 3 processes. The
package's bytecode is written first, as an installed package has it: this machine sets
``PYTHONDONTWRITEBYTECODE=1``, under which every child would otherwise compile each module
it imports from source.

Run: ``python experiments/bench/run.py selection``.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

TOOLS = ("lookup_order", "issue_refund", "cancel_order", "lookup_account", "search_orders")
STATES = ("exists", "exists", "exists", "missing", "already_done")
MODES = (None, None, "timeout", "error", "malformed")
OPENERS = ("Done", "All set", "Sorted", "Finished", "That's complete", "Good news")
SORRY = ("I could not", "Unfortunately I was unable to", "Sorry, I wasn't able to", "I couldn't")


def _call(cid: str, name: str, args: dict, result: dict, fault: str | None) -> list[dict]:
    return [
        {"kind": "assistant", "content": "", "tool_calls": [{"id": cid, "name": name, "arguments": args}]},
        {"kind": "tool", "tool_call_id": cid, "name": name, "arguments": args, "result": result,
         "status": fault or "ok", "fault": fault},
    ]  # fmt: skip


def make_pool(n_asks: int = 12_500, k: int = 8, seed: int = 0) -> list[dict]:
    """Graded rows, ``n_asks`` x ``k``, distinct replies and varied steps (module docstring)."""
    rng = np.random.default_rng(seed)
    p_ask = rng.beta(0.7, 0.7, n_asks)
    rows: list[dict] = []
    for a in range(n_asks):
        tool = TOOLS[a % len(TOOLS)]
        state = STATES[(a // 5) % len(STATES)]
        mode = MODES[(a // 25) % len(MODES)]
        order_id = f"ORD-{10000 + a}"
        prompt = f"Hi, please {tool.replace('_', ' ')} for order {order_id}, thanks (case {a})."
        siblings: list[dict] = []
        for j in range(k):
            passed = bool(rng.random() < p_ask[a])
            if siblings and rng.random() < 0.02:
                twin = siblings[int(rng.integers(len(siblings)))]
                row = {**twin, "rollout_id": f"s{a:05d}-{j}", "rollout_index": j}
                rows.append(row)
                continue
            fired = mode is not None and bool(rng.random() < 0.5)
            total = round(float(rng.uniform(5, 400)), 2)
            ticket = int(rng.integers(100_000, 999_999))
            steps = _call(f"c{a}-{j}-0", "lookup_order", {"order_id": order_id},
                          {"order_id": order_id, "total": total, "status": "delivered"}, None)  # fmt: skip
            if tool != "lookup_order":
                steps += _call(f"c{a}-{j}-1", tool, {"order_id": order_id, "amount": total},
                               {"error": mode} if fired else {"ok": True, "ticket": ticket},
                               mode if fired else None)  # fmt: skip
                if fired and rng.random() < 0.5:
                    steps += _call(f"c{a}-{j}-2", tool, {"order_id": order_id, "amount": total},
                                   {"ok": True, "ticket": ticket}, None)  # fmt: skip
            if not passed and rng.random() < 0.4:
                steps += _call(f"c{a}-{j}-3", "lookup_account", {"email": f"user{a}@example.com"},
                               {"tier": "standard"}, None)  # fmt: skip
            if passed:
                final = (
                    f"{OPENERS[int(rng.integers(len(OPENERS)))]}: {tool.replace('_', ' ')} for "
                    f"{order_id} (${total:.2f}), reference T{ticket}."
                )
            else:
                final = (
                    f"{SORRY[int(rng.integers(len(SORRY)))]} {tool.replace('_', ' ')} {order_id}; "
                    f"the system said {mode or 'nothing useful'} (ref T{ticket})."
                )
            steps.append({"kind": "assistant", "content": final, "tool_calls": []})
            unjudged = bool(rng.random() < 0.05)
            row = {
                "schema_version": "1",
                "prompt": prompt,
                "messages": [{"role": "user", "content": prompt}],
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
                "policy_version": "scripted@abc123",
                "model_version": "scripted",
                "reward": None if unjudged else (1.0 if passed else 0.0),
                "judge_status": None if unjudged else "ok",
                "ended_by": "final",
            }
            siblings.append(row)
            rows.append(row)
    return rows


CALLS = {
    "select_for_rl": (
        "from wai_exp.score.select.select import select_for_rl as f",
        "f(rows, target=1000)",
    ),
    "publish_gate": (
        "from wai_exp.score.select.publish_gate import publish_gate as f",
        "f(rows, mode='rl', endorsed=('lookup_order',))",
    ),
    "build_preference_pairs": (
        "from wai_exp.score.select.preference import build_preference_pairs as f",
        "f(rows)",
    ),
    "hack_scan": (
        "from wai_exp.score.diagnose.hack_scan import hack_scan as f",
        "f(rows, endorsed=('lookup_order',), n_perm=100)",
    ),
}

CHILD = """
import pickle, sys, time
rows = pickle.load(open(sys.argv[1], 'rb'))
t0 = time.perf_counter(); c0 = time.process_time()
{imp}
t1 = time.perf_counter()
{call}
t2 = time.perf_counter(); c2 = time.process_time()
print(t2 - t0, t1 - t0, c2 - c0)
"""

_POOLS: dict[tuple[int, int], Path] = {}
_TMP = tempfile.TemporaryDirectory(prefix="wai-bench-selection-")


def _pool_file(n_asks: int, seed: int) -> Path:
    if (n_asks, seed) not in _POOLS:
        path = Path(_TMP.name) / f"pool-{n_asks}-{seed}.pkl"
        path.write_bytes(pickle.dumps(make_pool(n_asks, seed=seed), protocol=5))
        _POOLS[(n_asks, seed)] = path
    return _POOLS[(n_asks, seed)]


def _compile_package() -> None:
    """Write the package's bytecode once, as an installed package has it.

    A child reads ``__pycache__`` even under ``PYTHONDONTWRITEBYTECODE`` (which only stops
    writing); without this every child would compile every module it imports from source,
    a cost no installed CLI pays after its first run."""
    import compileall

    compileall.compile_dir(str(ROOT / "wai_exp"), quiet=1)


def time_call(
    name: str, n_asks: int, seed: int = 0, repeats: int = 3
) -> tuple[float, float, float]:
    """Best-of-``repeats`` (wall incl. import, import alone, cpu incl. import), in seconds,
    each in a fresh interpreter, with the package's bytecode already written."""
    _compile_package()
    imp, call = CALLS[name]
    src = CHILD.format(imp=imp, call=call)
    best: tuple[float, float, float] | None = None
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", src, str(_pool_file(n_asks, seed))],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        wall, imp_s, cpu = (float(x) for x in out.stdout.split()[-3:])
        if best is None or wall < best[0]:
            best = (wall, imp_s, cpu)
    assert best is not None
    return best


def _result(label: str, target: float, name: str, n_asks: int) -> list[dict]:
    wall, imp_s, cpu = time_call(name, n_asks)
    return [
        {"name": f"{label} (wall, import incl.)", "value": round(wall, 4), "unit": "s",
         "target": target, "better": "lower"},
        {"name": f"{label} (import alone)", "value": round(imp_s, 4), "unit": "s"},
        {"name": f"{label} (cpu, import incl.)", "value": round(cpu, 4), "unit": "s"},
    ]  # fmt: skip


def bench_select_for_rl() -> list[dict]:
    return _result("select_for_rl, 100,000 distinct rows", 1.5, "select_for_rl", 12_500)


def bench_publish_gate() -> list[dict]:
    return _result("publish_gate, 100,000 distinct rows", 1.5, "publish_gate", 12_500)


def bench_build_preference_pairs() -> list[dict]:
    return _result(
        "build_preference_pairs, 100,000 distinct rows", 0.5, "build_preference_pairs", 12_500
    )


def bench_hack_scan_3200() -> list[dict]:
    return _result("hack_scan, 3,200 rows, n_perm=100", 0.1, "hack_scan", 400)


if __name__ == "__main__":
    for name, n in (("select_for_rl", 12_500), ("publish_gate", 12_500),
                    ("build_preference_pairs", 12_500), ("hack_scan", 400)):  # fmt: skip
        print(name, *(f"{x:.3f}" for x in time_call(name, n)))
