"""What MLflow tracking adds to the default ``rl_round`` (``python experiments/bench/run.py
tracking``; target: at most 1.5 s of wall time over ``tracking=none`` on a quiet machine).

Each variant runs ``wai-exp +experiment=rl_round cache.enabled=false`` (the default budget of
1000 rows from the scripted agent: the real product command, real rows) in one folder whose
MLflow store already exists, alternating the variants ``REPEATS`` times (env
``WAI_BENCH_REPEATS``, default 5) and taking medians:

- ``tracking=none``: the reference;
- ``tracking.background=false``: MLflow in the wai-exp process (import, store, artifacts,
  plots, dataset inputs on the critical path);
- default tracking: the writer process (wai_exp/tracking/background.py) imports MLflow and
  records while the stages compute; a stage's rollout traces are written from when the stage
  is recorded, and the command waits for what is left of them at the end (issue 23 §2: a
  process group ended at return lost them). ``tracking.log`` in each run folder says when
  the writer was done with each step, counted from the command's start.

``bench_compare_recording`` (target: recording adds < 2 s) times ``wai-exp compare A B``
with and without ``--no-record`` on two 80-row arms, interleaved: the wall until the command
returns and until the verdict line is printed (the answer comes before the recording).

Per variant it reports:

- **wall**: until the command returns (what the user waits for);
- **CPU**: user + system seconds of the command and every process it started, the writer
  included even when it outlives the command (this process makes itself their child
  subreaper, Linux only, and reaps them). On a machine shared by other jobs, CPU seconds
  move much less with the load than wall seconds do;
- for the writer, **drained**: seconds from the command's start until the writer has exited
  (its traces are in the store). The next run waits for it, so runs never overlap.

``load`` is the 1-minute load average at the start and at the end.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
REPEATS = int(os.environ.get("WAI_BENCH_REPEATS", "5"))
BASE = ["+experiment=rl_round", "cache.enabled=false"]
VARIANTS = {
    "none": ["tracking=none"],
    "in_process": ["tracking.background=false"],
    "background": [],
}
PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> bool:
    """Orphaned descendants (the tracking writer) become this process's children, so their
    CPU time reaches RUSAGE_CHILDREN once reaped. False where prctl is missing."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return False


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(args: list[str], cwd: Path) -> dict[str, float]:
    """One run: its wall time, its CPU seconds (descendants included) and the seconds until
    every descendant has exited."""
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [WAI_EXP, *BASE, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    out, err = proc.communicate(timeout=900)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"wai-exp {' '.join(args)} exited {proc.returncode}: {err[-2000:]}")
    # Reap the descendants that outlived the command (the writer finishing its traces).
    while True:
        try:
            os.wait4(-1, 0)
        except ChildProcessError:
            break
    drained = time.perf_counter() - t0
    return {"wall": wall, "cpu": _children_cpu() - cpu0, "drained": drained}


def bench_tracking_overhead() -> list[dict]:
    subreaper = _become_subreaper()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        cwd = Path(tmp)
        _run([], cwd)  # create the store and warm the OS file cache
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in VARIANTS}
        for _ in range(REPEATS):
            for name, args in VARIANTS.items():
                runs[name].append(_run(args, cwd))
    load1 = os.getloadavg()[0]

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    where = f"median of {REPEATS}, load {load0:.1f}->{load1:.1f}"
    cpu_note = "" if subreaper else " (writer CPU not counted: no prctl)"
    out = [
        {"name": f"rl_round wall, tracking=none ({where})",
         "value": round(med("none", "wall"), 2), "unit": "s"},
        {"name": f"rl_round CPU, tracking=none ({where})",
         "value": round(med("none", "cpu"), 2), "unit": "cpu-s"},
    ]  # fmt: skip
    for name in ("in_process", "background"):
        out.append(
            {
                "name": f"rl_round tracking overhead, {name} (median wall − none)",
                "value": round(med(name, "wall") - med("none", "wall"), 2),
                "unit": "s",
                "target": 1.5 if name == "background" else None,
                "better": "lower",
                "walls": [round(r["wall"], 2) for r in runs[name]],
                "none_walls": [round(r["wall"], 2) for r in runs["none"]],
            }
        )
        out.append(
            {
                "name": f"rl_round tracking CPU, {name} (median CPU − none){cpu_note}",
                "value": round(med(name, "cpu") - med("none", "cpu"), 2),
                "unit": "cpu-s",
                "better": "lower",
                "cpus": [round(r["cpu"], 2) for r in runs[name]],
            }
        )
    out.append(
        {
            "name": "rl_round background writer drained (traces in), from start",
            "value": round(med("background", "drained"), 2),
            "unit": "s",
            "better": "lower",
            "drains": [round(r["drained"], 2) for r in runs["background"]],
        }
    )
    return out


def _compare(cwd: Path, *extra: str) -> dict[str, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [WAI_EXP, "compare", "a.jsonl", "b.jsonl", *extra], cwd=cwd, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    answer = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if answer is None and " -> " in line and "delta" in line:
            answer = time.perf_counter() - t0
    proc.wait(timeout=900)
    wall = time.perf_counter() - t0
    return {"wall": wall, "answer": answer if answer is not None else wall}


def bench_compare_recording() -> list[dict]:
    import random

    from wai_exp.rows.jsonl import write_rows

    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        cwd = Path(tmp)
        for name, p in (("a", 0.4), ("b", 0.55)):
            rng = random.Random(name)
            write_rows(cwd / f"{name}.jsonl", [
                {"scenario_id": f"t{t}", "prompt": f"ask {t}", "reward": float(rng.random() < p),
                 "final_text": "done", "policy_version": name}
                for t in range(20) for _ in range(4)
            ])  # fmt: skip
        _compare(cwd)  # create the store
        runs: dict[str, list[dict[str, float]]] = {"no_record": [], "record": []}
        for _ in range(max(3, REPEATS)):
            runs["no_record"].append(_compare(cwd, "--no-record"))
            runs["record"].append(_compare(cwd))
    load1 = os.getloadavg()[0]

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    where = f"median of {len(runs['record'])}, load {load0:.1f}->{load1:.1f}"
    return [
        {"name": f"compare wall, --no-record ({where})",
         "value": round(med("no_record", "wall"), 2), "unit": "s"},
        {"name": "compare recording overhead (median wall record - no-record)",
         "value": round(med("record", "wall") - med("no_record", "wall"), 2), "unit": "s",
         "target": 2.0, "better": "lower",
         "walls": [round(r["wall"], 2) for r in runs["record"]],
         "no_record_walls": [round(r["wall"], 2) for r in runs["no_record"]]},
        {"name": "compare with recording: seconds until the verdict is printed",
         "value": round(med("record", "answer"), 2), "unit": "s", "target": 2.0,
         "better": "lower"},
    ]  # fmt: skip


if __name__ == "__main__":
    for row in bench_tracking_overhead():
        print(row)
