"""The console script's fixed cost per process: what every command, and every e2e test's
``wai-exp`` subprocess, pays before and around its stages.

Run with the suite (``python experiments/bench/run.py startup``) or alone, with more
repeats, niced on a shared machine::

    nice -n 19 python experiments/bench/bench_startup.py --repeats 7
    nice -n 19 python experiments/bench/bench_startup.py --repeats 7 --against /tmp/base

``--against`` measures another checkout (say ``main`` before a change) in turn with this one,
command by command, so both see the same load.

Each command runs in a fresh temporary folder (a first run computes its stages; the
``cached`` rows run the same command again, so every stage is reused). CPU is user + system
of the wai-exp process and of every process it started: a tracked run's writer and plot
processes exit just after it, so the bench adopts them (Linux's child subreaper; where that
is missing, a tracked run shows its wall time only). CPU is what a command costs a machine
whose cores are all busy, as CI's are. Values are medians.

``imports`` is ``python -X importtime`` over the same command run through
``wai_exp.cli.main``: the sum of the top-level imports' cumulative times (wall clock, so it
grows with the machine's load). ``modules loaded`` counts ``sys.modules`` at the end, the
same on a busy machine, and names the heavy libraries among them (``HEAVY``).
"""

from __future__ import annotations

import argparse
import os
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


def _adopt_orphans() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux's child subreaper):
    a tracked run's writer and plot processes exit just after the wai-exp process, and
    their CPU then counts here too. False where that cannot be set."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _reap_orphans(timeout: float = 120.0) -> None:
    """Wait for every adopted descendant to exit (their CPU joins ``RUSAGE_CHILDREN``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def _timed(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds of one ``wai-exp ARGS`` and the CPU seconds of it and of every process
    it started (once adopted: ``_adopt_orphans``). Raises when it fails."""
    c0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [WAI_EXP, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    wall = time.perf_counter() - t0
    _reap_orphans()
    cpu = _children_cpu() - c0
    if done.returncode != 0:
        raise RuntimeError(
            f"wai-exp {' '.join(args)} exited {done.returncode}: {done.stderr[-800:]}"
        )
    return wall, cpu


def _medians(
    args: list[str], repeats: int, cached: bool, envs: list[dict[str, str]]
) -> list[tuple[float, float]]:
    """Median wall and CPU over ``repeats`` runs in each environment (one per checkout
    measured, taken in turn so a change of the machine's load falls on all of them), each
    run in a fresh folder (``cached``: the second of two identical runs there)."""
    walls: list[list[float]] = [[] for _ in envs]
    cpus: list[list[float]] = [[] for _ in envs]
    for _ in range(repeats):
        for i, env in enumerate(envs):
            with tempfile.TemporaryDirectory() as tmp:
                if cached:
                    _timed(args, Path(tmp), env)
                    time.sleep(1.1)  # a new run folder
                wall, cpu = _timed(args, Path(tmp), env)
            walls[i].append(wall)
            cpus[i].append(cpu)
    return [(statistics.median(w), statistics.median(c)) for w, c in zip(walls, cpus, strict=True)]


def _imports(args: list[str], env: dict[str, str]) -> tuple[float, int, list[str]]:
    """Milliseconds of imports (the sum of the top-level imports' cumulative times), the
    number of modules loaded (unlike a time, the same on a busy machine) and the heavy
    libraries among them, for ``wai-exp ARGS`` run in one interpreter."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", _IMPORTED, ",".join(HEAVY), *args],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        _reap_orphans()  # a tracked run's writer: not counted in the next command's CPU
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


def measure(repeats: int, against: Path | None = None) -> list[dict]:
    """One result per command and measure (wall, CPU, imports, modules), for this checkout
    and, when given, for the one at ``against`` (its folder holding ``wai_exp`` goes first
    on ``PYTHONPATH``), the two measured in turn."""
    trees = [("", dict(os.environ))]
    if against is not None:
        trees = [("this: ", trees[0][1]), ("against: ", {**os.environ, "PYTHONPATH": str(against)})]
    envs = [env for _, env in trees]
    every = _adopt_orphans()
    results = []
    for label, args, cached in COMMANDS:
        medians = _medians(args, repeats, cached, envs)
        for (tree, env), (wall, cpu) in zip(trees, medians, strict=True):
            name = f"{tree}{label}"
            results.append(_row(f"{name}: wall (median of {repeats})", wall, "s"))
            if every or "MLflow" not in label:
                results.append(_row(f"{name}: CPU, all processes (median of {repeats})", cpu, "s"))
            if not cached:
                seen = [_imports(args, env) for _ in range(repeats)]
                ms = statistics.median(m for m, _, _ in seen)
                results.append(_row(f"{name}: imports (median of {repeats})", ms, "ms"))
                row = _row(f"{name}: modules loaded", seen[-1][1], "")
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
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout's folder (e.g. `git worktree add --detach /tmp/base main`), "
        "measured in turn with this one",
    )
    opts = parser.parse_args()
    for res in measure(opts.repeats, opts.against):
        extra = f"  [{' '.join(res['heavy'])}]" if "heavy" in res else ""
        print(f"{res['name']:<75} {res['value']:>9.3f} {res['unit']}{extra}", flush=True)
