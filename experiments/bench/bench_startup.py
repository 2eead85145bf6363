"""The console script's fixed cost per process: what every command, and every e2e test's
``wai-exp`` subprocess, pays before and around its stages.

Run with the suite (``python experiments/bench/run.py startup``) or alone, with more
repeats, niced on a shared machine::

    nice -n 19 python experiments/bench/bench_startup.py --repeats 7

Each command runs in a fresh temporary folder (a first run computes its stages; the
``cached`` rows run the same command again, so every stage is reused). CPU is user + system
of the process and the children it waited for; a tracked run's writer and plot processes
are not waited for, so only its wall time is shown. Values are medians.

``imports`` is ``python -X importtime`` over the same command run through
``wai_exp.cli.main``: the sum of the top-level imports' cumulative times (wall clock, so it
grows with the machine's load). ``modules loaded`` counts ``sys.modules`` at the end, the
same on a busy machine, and names the heavy libraries among them (``HEAVY``).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
EVAL = ["+experiment=eval", "simulate.budget=4"]
HEAVY = (
    "numpy", "scipy", "pydantic", "hydra", "httpx", "aiohttp", "mlflow", "sqlalchemy",
    "pandas", "pyarrow", "matplotlib", "mcp", "ray", "torch", "transformers", "trl", "datasets",
)  # fmt: skip

_IMPORTED = """
import sys
from wai_exp.cli import main
heavy = set(sys.argv[1].split(","))
try:
    main(sys.argv[2:])
except SystemExit:
    pass
sys.stderr.write(f"MODULES {len(sys.modules)}\\n")
sys.stderr.write("HEAVY " + " ".join(sorted({m.split(".")[0] for m in sys.modules} & heavy)) + "\\n")
"""


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed(args: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one ``wai-exp ARGS``. Raises when it fails."""
    c0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run([WAI_EXP, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if done.returncode != 0:
        raise RuntimeError(
            f"wai-exp {' '.join(args)} exited {done.returncode}: {done.stderr[-800:]}"
        )
    return wall, cpu


def _medians(args: list[str], repeats: int, cached: bool) -> tuple[float, float]:
    """Median wall and CPU over ``repeats`` runs, each in a fresh folder (``cached``: the
    second of two identical runs there)."""
    walls, cpus = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            if cached:
                _timed(args, Path(tmp))
                time.sleep(1.1)  # a new run folder
            wall, cpu = _timed(args, Path(tmp))
        walls.append(wall)
        cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus)


def _imports(args: list[str]) -> tuple[float, int, list[str]]:
    """Milliseconds of imports (the sum of the top-level imports' cumulative times), the
    number of modules loaded (unlike a time, the same on a busy machine) and the heavy
    libraries among them, for ``wai-exp ARGS`` run in one interpreter."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", _IMPORTED, ",".join(HEAVY), *args],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
        )
    total_us = n_modules = 0
    heavy: list[str] = []
    for line in done.stderr.splitlines():
        if line.startswith("MODULES"):
            n_modules = int(line.split()[1])
        elif line.startswith("HEAVY"):
            heavy = line.split()[1:]
        elif line.startswith("import time:") and "self [us]" not in line:
            _, cumulative, name = line.split(":", 1)[1].split("|")
            if not name.startswith("  "):  # top level: one space, nested ones indent more
                total_us += int(cumulative)
    return total_us / 1000, n_modules, heavy


#: (label, arguments, cached) of every command measured.
COMMANDS = [
    ("wai-exp --help", ["--help"], False),
    ("eval budget=4, tracking=none", [*EVAL, "tracking=none"], False),
    ("eval budget=4, tracking=none, cached", [*EVAL, "tracking=none"], True),
    ("eval budget=4, MLflow", EVAL, False),
]


def measure(repeats: int) -> list[dict]:
    """One result per command and measure (wall, CPU, imports)."""
    results = []
    for label, args, cached in COMMANDS:
        wall, cpu = _medians(args, repeats, cached)
        results.append(_row(f"{label}: wall (median of {repeats})", wall, "s"))
        if "MLflow" not in label:
            results.append(_row(f"{label}: CPU (median of {repeats})", cpu, "s"))
        if not cached:
            seen = [_imports(args) for _ in range(repeats)]
            ms = statistics.median(m for m, _, _ in seen)
            results.append(_row(f"{label}: imports (median of {repeats})", ms, "ms"))
            row = _row(f"{label}: modules loaded", seen[-1][1], "")
            row["heavy"] = seen[-1][2]
            results.append(row)
    return results


def _row(name: str, value: float, unit: str) -> dict:
    return {"name": name, "value": round(value, 3), "unit": unit, "target": None, "better": "lower"}


def bench_startup() -> list[dict]:
    return measure(3)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    for res in measure(parser.parse_args().repeats):
        extra = f"  [{' '.join(res['heavy'])}]" if "heavy" in res else ""
        print(f"{res['name']:<56} {res['value']:>9.3f} {res['unit']}{extra}", flush=True)
