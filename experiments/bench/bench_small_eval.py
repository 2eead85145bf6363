"""Coverage of pass@1's interval on small evals: the task bootstrap against Wilson's.

The question: on 3 to 30 tasks, does the 95% interval pass@1 prints hold the agent's true
pass rate 95% of the time, and how wide is it? Two intervals, on the same simulated evals:

* ``bootstrap``: ``bootstrap_mean(rates, bounds=(0, 1))``, the studentized task bootstrap
  with the continuity correction (pass@1's interval at every size before this study, and
  still from ``resample.SMALL_EVAL_TASKS`` tasks up);
* ``rate_interval``: what pass@1 prints now (``resample.rate_interval``): under 30 tasks the
  Wilson interval sized by the tasks' spread (``wilson_design_effect``).

How the rows are built: each replication draws ``n`` task difficulties from a layout (every
task at 0.15, 0.5 or 0.9; uniform on [0.2, 0.8]; Beta(0.3, 0.3), most tasks near 0 or 1;
Beta(2, 0.5), mostly easy), then each task's passes out of ``k`` repeats as
Binomial(k, p_task): ``k`` graded 0/1 rows a task, as pass_at reads them. The truth is the
layout's mean difficulty (the rate over tasks drawn like these), which the interval over
tasks claims to cover. Evals where every task has the same rate get ``wilson_over_tasks``
under both, as pass_at gives them.

Run: ``nice python experiments/bench/bench_small_eval.py [reps]`` (default 1500) prints
the table; ``python experiments/bench/run.py small_eval`` reports the worst cell.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable

import numpy as np

from wai_exp.score.stats.resample import bootstrap_mean, rate_interval

NS = (3, 5, 10, 15, 20, 29)
KS = (1, 4, 8)
SEED = 20261206
Layout = Callable[[np.random.Generator, int], np.ndarray]
LAYOUTS: dict[str, tuple[Layout, float]] = {
    "every task 0.5": (lambda r, n: np.full(n, 0.5), 0.5),
    "every task 0.15": (lambda r, n: np.full(n, 0.15), 0.15),
    "every task 0.9": (lambda r, n: np.full(n, 0.9), 0.9),
    "uniform 0.2-0.8": (lambda r, n: r.uniform(0.2, 0.8, n), 0.5),
    "beta(0.3, 0.3)": (lambda r, n: r.beta(0.3, 0.3, n), 0.5),
    "beta(2, 0.5)": (lambda r, n: r.beta(2.0, 0.5, n), 0.8),
}


def _intervals(rates: np.ndarray, k: int) -> tuple[tuple[float, float], tuple[float, float]]:
    old = bootstrap_mean(rates, bounds=(0.0, 1.0)).interval
    new = rate_interval(rates, rates.size * k).interval
    assert old is not None and new is not None
    return (old.low, old.high), (new.low, new.high)


def cell(layout: str, n: int, k: int, reps: int, rng: np.random.Generator) -> dict[str, float]:
    """Coverage (%) and mean width of both intervals over ``reps`` simulated evals."""
    draw, truth = LAYOUTS[layout]
    hits = np.zeros(2)
    widths = np.zeros(2)
    for _ in range(reps):
        rates = rng.binomial(k, draw(rng, n)) / k
        for j, (lo, hi) in enumerate(_intervals(rates, k)):
            hits[j] += lo <= truth <= hi
            widths[j] += hi - lo
    cov, wid = 100 * hits / reps, widths / reps
    return {"boot_cov": cov[0], "boot_width": wid[0], "new_cov": cov[1], "new_width": wid[1]}


Cell = tuple[str, int, int, dict[str, float]]


def study(reps: int) -> list[Cell]:
    rng = np.random.default_rng(SEED)
    return [
        (lay, n, k, cell(lay, n, k, reps, rng)) for lay, n, k in itertools.product(LAYOUTS, NS, KS)
    ]


def bench_small_eval_coverage() -> list[dict[str, object]]:
    stats = [c[3] for c in study(300)]
    worst = min(s["new_cov"] for s in stats)
    ratio = float(np.mean([s["new_width"] / s["boot_width"] for s in stats]))
    return [
        {
            "name": f"pass@1 interval coverage, worst of {len(stats)} cells (3-29 tasks)",
            "value": round(worst, 1),
            "unit": "%",
            # nominal 95; 5 all-or-nothing tasks cannot do better than 92.9 either way
            "target": 92.0,
            "better": "higher",
        },
        {
            "name": "its mean width against the task bootstrap's",
            "value": round(ratio, 3),
            "unit": "x",
            "target": 1.0,
            "better": "lower",
        },
    ]


def main(argv: list[str]) -> None:
    reps = int(argv[0]) if argv else 1500
    print(f"{reps} simulated evals per cell; coverage % and mean width of the 95% interval")
    print("| layout | tasks | k | bootstrap cov | width | rate_interval cov | width |")
    print("|---|---|---|---|---|---|---|")
    for lay, n, k, c in study(reps):
        print(
            f"| {lay} | {n} | {k} | {c['boot_cov']:.1f} | {c['boot_width']:.3f} | "
            f"{c['new_cov']:.1f} | {c['new_width']:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
