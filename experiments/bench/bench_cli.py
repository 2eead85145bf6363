"""Benchmarks of the console script (run via ``python experiments/bench/run.py cli``).

``bench_rl_round_wall_time`` runs the product command ``wai-exp +experiment=rl_round`` (default
budget, MLflow tracking into a fresh SQLite store) in a temporary folder and splits its wall
time with the runner's own ``timings.json``: stage compute, MLflow tracking, and the rest
(process start, imports, Hydra composition, validation, file writes, cache links). A second,
identical command measures the cached rerun.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    wall, _, res = _timed_cpu(args, cwd)
    return wall, res


def _timed_cpu(args: list[str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds (user + system: what the command costs on an idle machine,
    the 2 shared cores here are rarely idle) and the finished process."""
    c0, t0 = _cpu(), time.perf_counter()
    res = subprocess.run([WAI_EXP, *args], cwd=cwd, capture_output=True, text=True, timeout=900)
    return time.perf_counter() - t0, _cpu() - c0, res


def _latest_timings(cwd: Path) -> dict:
    runs = sorted(p for p in (cwd / "outputs").glob("*/*") if (p / "timings.json").exists())
    return json.loads((runs[-1] / "timings.json").read_text())


def bench_rl_round_wall_time() -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        wall, cpu, res = _timed_cpu(["+experiment=rl_round"], cwd)
        if res.returncode != 0:
            raise RuntimeError(
                f"wai-exp +experiment=rl_round exited {res.returncode}: {res.stderr[-2000:]}"
            )
        t = _latest_timings(cwd)
        rows = t["stages"]["simulate"].get("rows")
        time.sleep(1.1)  # a new run folder
        wall2, res2 = _timed(["+experiment=rl_round"], cwd)
        if res2.returncode != 0:
            raise RuntimeError(f"cached rerun exited {res2.returncode}: {res2.stderr[-2000:]}")
        t2 = _latest_timings(cwd)
    compute = t["compute_s"]
    tracking = t["tracking_s"]
    other = wall - compute - tracking
    per_stage = ", ".join(f"{k} {v['compute_s']:.2f}" for k, v in t["stages"].items())
    return [
        {
            "name": f"rl_round wall time ({rows} rows, MLflow)",
            "value": round(wall, 3),
            "unit": "s",
            "target": 60.0,
            "better": "lower",
        },
        {
            "name": f"  stage compute ({per_stage})",
            "value": round(compute, 3),
            "unit": "s",
            "target": None,
            "better": "lower",
        },
        {
            "name": "  MLflow tracking (start, stages, finish)",
            "value": round(tracking, 3),
            "unit": "s",
            "target": None,
            "better": "lower",
        },
        {
            "name": "  orchestration (process, Hydra, validate, files)",
            "value": round(other, 3),
            "unit": "s",
            "target": 8.0,
            "better": "lower",
        },
        {
            "name": "rl_round CPU time (user + system)",
            "value": round(cpu, 3),
            "unit": "s",
            "target": None,
            "better": "lower",
        },
        {
            "name": "rl_round identical rerun (every stage cached)",
            "value": round(wall2, 3),
            "unit": "s",
            "target": None,
            "better": "lower",
            "tracking_s": t2["tracking_s"],
        },
    ]


def bench_help_startup() -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        _timed(["--help"], cwd)  # warm the file cache once
        runs = [_timed_cpu(["--help"], cwd) for _ in range(3)]
        helps = [r[0] for r in runs]
        help_cpu = [r[1] for r in runs]
        typos = []
        for _ in range(3):
            wall, res = _timed(["+experiment=rl_round", "knobs.concurency=4"], cwd)
            assert res.returncode == 2, res.stderr
            typos.append(wall)
    return [
        {
            "name": "wai-exp --help (median of 3)",
            "value": round(sorted(helps)[1], 3),
            "unit": "s",
            "target": 2.0,
            "better": "lower",
        },
        {
            "name": "wai-exp --help CPU time (median of 3)",
            "value": round(sorted(help_cpu)[1], 3),
            "unit": "s",
            "target": 1.5,
            "better": "lower",
        },
        {
            "name": "typo knobs.concurency=4 -> exit 2 (median of 3)",
            "value": round(sorted(typos)[1], 3),
            "unit": "s",
            "target": 3.0,
            "better": "lower",
        },
    ]
