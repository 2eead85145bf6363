"""Memory and disk at scale (``python experiments/bench/run.py memory``).

``bench_rl_round_memory`` runs the product command ``wai-exp +experiment=rl_round
simulate.budget=N`` with the default tracking (the MLflow writer process, a SQLite store in
the folder) in a fresh folder, for N = 20,000 and 100,000 (override with
``WAI_BENCH_BUDGETS=20000,50000``), and reports for each:

* the peak RSS of **every process** the command starts: the wai-exp process, the tracking
  writer (which the command does not wait for: it logs the traces after wai-exp exits) and
  any other child. A wrapper process makes itself the child subreaper (Linux ``prctl``), so
  the writer, orphaned when wai-exp exits, becomes its child; it reaps each process with
  ``wait4``, whose ``ru_maxrss`` is that process's own peak (with the peaks of children it
  waited for folded in as a max). The **sum of the peaks** is the headline: an upper bound
  of what the processes held at one moment (target: under 1.5 GB at 100,000 rows). The
  wrapper also samples the sum of every live descendant's RSS every 0.1 s (``/proc``): the
  largest such sum is the simultaneous peak it saw (a lower bound: it can miss a spike);
* the bytes on disk: every ``rows.jsonl`` under the run folder, the rows artifacts in
  ``mlartifacts`` (the MLflow store's copy), and everything under the cache;
* an identical re-run, every stage cached: wall time and the sum of peaks.

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

# Runs ``argv`` as a child and reaps it and every orphan that lands on this process (the
# subreaper), printing one JSON line: per process its peak RSS (wait4) and what it was.
_WRAPPER = r"""
import ctypes, json, os, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
subreaper = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
me = os.getpid()
names, sampled, stop = {}, [0], threading.Event()

def tree():
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], list(kids.get(me, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out

def sample():
    while not stop.wait(0.1):
        total = 0
        for pid in tree():
            try:
                with open(f"/proc/{pid}/status") as fh:
                    status = fh.read()
                if pid not in names:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        names[pid] = fh.read().replace(b"\0", b" ").decode()[:200]
            except OSError:
                continue
            m = [ln for ln in status.splitlines() if ln.startswith("VmRSS:")]
            total += int(m[0].split()[1]) if m else 0
        sampled[0] = max(sampled[0], total)

threading.Thread(target=sample, daemon=True).start()
t0 = time.perf_counter()
with open(sys.argv[1], "w") as err:
    main = __import__("subprocess").Popen(sys.argv[2:], stdout=err, stderr=err)
procs, wall, rc = [], None, None
while True:
    try:
        pid, status, ru = os.wait4(-1, 0)
    except ChildProcessError:
        break
    if pid == main.pid:
        wall, rc = time.perf_counter() - t0, os.waitstatus_to_exitcode(status)
        main.returncode = rc
    procs.append({"pid": pid, "main": pid == main.pid, "cmd": names.get(pid, "?"),
                  "peak_kb": ru.ru_maxrss})
stop.set()
print(json.dumps({"rc": rc, "wall": wall, "drained": time.perf_counter() - t0,
                  "subreaper": subreaper, "procs": procs, "sampled_sum_kb": sampled[0]}))
"""


def _measured(args: list[str], cwd: Path) -> dict:
    """Run ``wai-exp args`` under a wrapper of its own: wall seconds, and each process's peak."""
    log = cwd / f"stderr-{len(list(cwd.glob('stderr-*')))}.txt"
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(log), WAI_EXP, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=7200,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the measuring wrapper failed: {out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["stderr"] = log.read_text(errors="replace")
    if res["rc"] not in (0, 3):  # 3: the gate refused, a finished run all the same
        raise RuntimeError(f"wai-exp {' '.join(args)} exited {res['rc']}: {res['stderr'][-3000:]}")
    main = [p for p in res["procs"] if p["main"]]
    writer = [p for p in res["procs"] if "wai_exp.tracking.background" in p["cmd"]]
    others = [p for p in res["procs"] if not p["main"] and p not in writer]
    res["main_mb"] = sum(p["peak_kb"] for p in main) / 1024
    res["writer_mb"] = sum(p["peak_kb"] for p in writer) / 1024
    res["others_mb"] = sum(p["peak_kb"] for p in others) / 1024
    res["n_others"] = len(others)
    res["sum_mb"] = res["main_mb"] + res["writer_mb"] + res["others_mb"]
    return res


def _bytes(paths) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def _budgets() -> list[int]:
    given = os.environ.get("WAI_BENCH_BUDGETS")
    return [int(b) for b in given.split(",")] if given else [20_000, 100_000]


def _mb(name: str, value: float, target: float | None = None, **extra) -> dict:
    return {"name": name, "value": round(value, 1), "unit": "MB", "target": target,
            "better": "lower", **extra}  # fmt: skip


def bench_rl_round_memory() -> list[dict]:
    results: list[dict] = []
    for budget in _budgets():
        with tempfile.TemporaryDirectory() as tmp:
            cwd = Path(tmp)
            base = ["+experiment=rl_round", f"simulate.budget={budget}"]
            first = _measured([*base, "hydra.run.dir=outputs/first"], cwd)
            # The first run's MLflow copy, before the re-run adds its own.
            artifacts = list((cwd / "mlartifacts").rglob("*"))
            art_rows = _bytes(p for p in artifacts if p.name.startswith("rows.jsonl"))
            art_all = _bytes(artifacts)
            again = _measured([*base, "hydra.run.dir=outputs/again"], cwd)
            run_rows = _bytes((cwd / "outputs/first").rglob("rows.jsonl"))
            cache_all = _bytes((cwd / "outputs/.cache").rglob("*"))
            cache_rows = _bytes((cwd / "outputs/.cache").rglob("rows.jsonl"))
            # Which stages the re-run reused and which it ran (publish is never cached: its
            # files are made for the run folder).
            reused = re.findall(r"\] (\w+): cached, reusing", again["stderr"])
            ran = re.findall(r"\] (\w+): running", again["stderr"])
        n = f"{budget:,}"
        seen = "" if first["subreaper"] else " (no subreaper: the writer is NOT counted)"
        results += [
            _mb(
                f"rl_round {n} rows: peak RSS, all processes (sum of peaks){seen}",
                first["sum_mb"],
                1500.0 if budget >= 100_000 else None,
                wall_s_command=round(first["wall"], 1),
                drained_s=round(first["drained"], 1),
                procs=first["procs"],
            ),
            _mb("  wai-exp process", first["main_mb"]),
            _mb("  tracking writer process", first["writer_mb"]),
            _mb(f"  other children ({first['n_others']})", first["others_mb"]),
            _mb("  largest sampled simultaneous sum (every 0.1 s)", first["sampled_sum_kb"] / 1024),
            {
                "name": "  command wall / all processes exited",
                "value": round(first["wall"], 1),
                "unit": "s",
                "drained_s": round(first["drained"], 1),
            },  # fmt: skip
            _mb(f"  rows.jsonl bytes in the run folder ({n})", run_rows / 1e6),
            _mb(f"  mlartifacts bytes, of which rows ({art_rows / 1e6:.1f} MB)", art_all / 1e6),
            _mb(f"  cache bytes, of which rows files ({cache_rows / 1e6:.1f} MB)", cache_all / 1e6),
            {
                "name": f"  identical re-run ({len(reused)} stages cached, ran {ran}): wall",
                "value": round(again["wall"], 2),
                "unit": "s",
                "better": "lower",
            },  # fmt: skip
            _mb(
                "  identical re-run: peak RSS, all processes (sum of peaks)",
                again["sum_mb"],
                main_mb=round(again["main_mb"], 1),
                writer_mb=round(again["writer_mb"], 1),
            ),
        ]
    return results
