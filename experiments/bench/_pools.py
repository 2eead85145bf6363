"""Shared pieces of the ``bench_*.py`` files: the graded pool and the best-of timer.

Not a benchmark itself (``run.py`` loads ``bench_*.py`` only); the bench files import it as
``_pools`` because ``run.py``'s folder is first on ``sys.path`` when it runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np


def best_of(fn: Callable[[], Any], repeats: int = 3) -> float:
    """The fastest of ``repeats`` wall-clock timings of ``fn()``, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def graded_pool(
    n_tasks: int = 12_500,
    k: int = 8,
    seed: int = 0,
    *,
    extra: Callable[[np.random.Generator], Callable[[int, int], dict[str, Any]]] | None = None,
) -> list[dict]:
    """Graded rows: ``n_tasks`` tasks x ``k`` repeats, each task with its own pass
    probability (Beta(0.7, 0.7), so every pass-rate band is well populated) and about 5% of
    rows unjudged (``reward`` and ``judge_status`` None).

    ``extra(rng)``, when given, is called once after those draws (so the base rows do not
    depend on it) and returns ``fields(t, j) -> dict`` merged into row ``(t, j)``.
    """
    rng = np.random.default_rng(seed)
    p = rng.beta(0.7, 0.7, n_tasks)
    passed = rng.random((n_tasks, k)) < p[:, None]
    unjudged = rng.random((n_tasks, k)) < 0.05
    fields = extra(rng) if extra is not None else None
    rows = []
    for t in range(n_tasks):
        for j in range(k):
            row = {
                "scenario_id": f"s{t:05d}",
                "rollout_id": f"s{t:05d}-{j}",
                "reward": None if unjudged[t, j] else int(passed[t, j]),
                "judge_status": None if unjudged[t, j] else "ok",
            }
            if fields is not None:
                row.update(fields(t, j))
            rows.append(row)
    return rows
