"""What MLflow tracking adds to the default ``rl_round`` (``python experiments/bench/run.py
tracking``; target: at most 1.5 s over ``tracking=none`` on a quiet machine).

Each variant runs ``wai-exp +experiment=rl_round cache.enabled=false`` (the default budget of
1000 rows from the scripted agent: the real product command, real rows) in one folder whose
MLflow store already exists, alternating the variants ``REPEATS`` times and taking each one's
median wall time:

- ``tracking=none``: the reference;
- ``tracking.background=false``: MLflow in the wai-exp process (import, store, artifacts,
  plots, dataset inputs on the critical path);
- default tracking: the writer process (wai_exp/tracking/background.py) imports MLflow and
  records while the stages compute.

The machine is shared by several agents; the median of alternated runs damps their load but
does not remove it. ``load`` reports the 1-minute load average at the start.
"""

from __future__ import annotations

import os
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


def _wall(args: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    res = subprocess.run([WAI_EXP, *BASE, *args], cwd=cwd, capture_output=True, text=True,
                         timeout=900)  # fmt: skip
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(
            f"wai-exp {' '.join(args)} exited {res.returncode}: {res.stderr[-2000:]}"
        )
    return wall


def bench_tracking_overhead() -> list[dict]:
    load = os.getloadavg()[0]
    # Writers may still be logging traces when the last command returns: ignore leftovers.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        cwd = Path(tmp)
        _wall([], cwd)  # create the store and warm the OS file cache
        walls: dict[str, list[float]] = {k: [] for k in VARIANTS}
        for _ in range(REPEATS):
            for name, args in VARIANTS.items():
                walls[name].append(_wall(args, cwd))
    med = {k: statistics.median(v) for k, v in walls.items()}
    out = [
        {
            "name": f"rl_round wall, tracking=none (median of {REPEATS}, load {load:.1f})",
            "value": round(med["none"], 2),
            "unit": "s",
        }
    ]
    for name in ("in_process", "background"):
        out.append(
            {
                "name": f"rl_round tracking overhead, {name} (median wall − none)",
                "value": round(med[name] - med["none"], 2),
                "unit": "s",
                "target": 1.5 if name == "background" else None,
                "better": "lower",
                "walls": [round(w, 2) for w in walls[name]],
            }
        )
    return out


if __name__ == "__main__":
    for row in bench_tracking_overhead():
        print(row)
