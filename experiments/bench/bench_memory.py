"""Memory and disk at scale (``python experiments/bench/run.py memory``).

``bench_rl_round_memory`` runs the product command ``wai-exp +experiment=rl_round
simulate.budget=N tracking=none`` in a fresh folder, for N = 20,000 and 100,000 (override with
``WAI_BENCH_BUDGETS=20000,50000``), and reports for each:

* the peak RSS of the command (``getrusage(RUSAGE_CHILDREN)`` of a wrapper process that runs
  only that command, so no other child counts);
* the bytes on disk: every ``rows.jsonl`` under the run folder, and everything under the cache
  (rows are stored once: the cache holds no rows file, only their hashes);
* an identical re-run, every stage cached: wall time and peak RSS (it hashes the rows files,
  it does not parse them).

The rows are real engine output: the offline scripted agent against the mock world, so each
row has its own ask, replies and tool steps (distinct prompts, varied step counts, faults).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")

_WRAPPER = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
res = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({
    "rc": res.returncode,
    "wall": time.perf_counter() - t0,
    "peak_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    "stderr": res.stderr[-3000:],
}))
"""


def _measured(args: list[str], cwd: Path) -> dict:
    """Run ``wai-exp args`` under a wrapper of its own; its wall seconds and peak RSS."""
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, WAI_EXP, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if res["rc"] not in (0, 3):  # 3: the gate refused, a finished run all the same
        raise RuntimeError(f"wai-exp {' '.join(args)} exited {res['rc']}: {res['stderr']}")
    return res


def _bytes(paths) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def _budgets() -> list[int]:
    given = os.environ.get("WAI_BENCH_BUDGETS")
    return [int(b) for b in given.split(",")] if given else [20_000, 100_000]


def bench_rl_round_memory() -> list[dict]:
    results: list[dict] = []
    for budget in _budgets():
        with tempfile.TemporaryDirectory() as tmp:
            cwd = Path(tmp)
            base = ["+experiment=rl_round", f"simulate.budget={budget}", "tracking=none"]
            first = _measured([*base, "hydra.run.dir=outputs/first"], cwd)
            again = _measured([*base, "hydra.run.dir=outputs/again"], cwd)
            run_rows = _bytes((cwd / "outputs/first").rglob("rows.jsonl"))
            cache_all = _bytes((cwd / "outputs/.cache").rglob("*"))
            cache_rows = _bytes((cwd / "outputs/.cache").rglob("rows.jsonl"))
            # Which stages the re-run reused and which it ran (publish is never cached: its
            # files are made for the run folder).
            reused = re.findall(r"\] (\w+): cached, reusing", again["stderr"])
            ran = re.findall(r"\] (\w+): running", again["stderr"])
        results += [
            {
                "name": f"rl_round {budget:,} rows: peak RSS",
                "value": round(first["peak_kb"] / 1024, 1),
                "unit": "MB",
                "target": 1500.0 if budget >= 100_000 else None,
                "better": "lower",
                "wall_s_command": round(first["wall"], 1),
            },
            {
                "name": f"  rows.jsonl bytes in the run folder ({budget:,})",
                "value": round(run_rows / 1e6, 1),
                "unit": "MB",
                "target": None,
                "better": "lower",
            },
            {
                "name": f"  cache bytes, of which rows files ({cache_rows / 1e6:.1f} MB)",
                "value": round(cache_all / 1e6, 2),
                "unit": "MB",
                "target": None,
                "better": "lower",
            },
            {
                "name": f"  identical re-run ({len(reused)} stages cached, ran {ran}): wall",
                "value": round(again["wall"], 2),
                "unit": "s",
                "target": None,
                "better": "lower",
            },
            {
                "name": "  identical re-run: peak RSS",
                "value": round(again["peak_kb"] / 1024, 1),
                "unit": "MB",
                "target": None,
                "better": "lower",
            },
        ]
    return results
