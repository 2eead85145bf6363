"""Benchmark curriculum / retire_solved on a 100k-row graded pool.

12,500 tasks x 8 repeats, each task with its own pass probability (Beta(0.7, 0.7), so every
category is well populated), plus one unjudged row in twenty. The cost is the one per-row
pass for ``task_key`` and ``binary_reward``; the split itself is per-task numpy masks.

Run: ``python experiments/bench/run.py curriculum``.
"""

from __future__ import annotations

from _pools import best_of, graded_pool


def make_rows(n_tasks: int = 12_500, k: int = 8, seed: int = 0) -> list[dict]:
    """Graded rows: ``n_tasks`` tasks x ``k`` repeats; about 5% unjudged."""
    return graded_pool(n_tasks, k, seed, extra=lambda rng: lambda t, j: {"rollout_index": j})


def bench_curriculum() -> list[dict]:
    from wai_exp.score.select.curriculum import curriculum, retire_solved

    rows = make_rows()
    return [
        {
            "name": "curriculum on 100,000 rows (12,500 tasks)",
            "value": round(best_of(lambda: curriculum(rows)), 4),
            "unit": "s",
            "target": 0.5,
            "better": "lower",
        },
        {
            "name": "retire_solved on 100,000 rows (12,500 tasks)",
            "value": round(best_of(lambda: retire_solved(rows)), 4),
            "unit": "s",
            "target": 0.3,
            "better": "lower",
        },
    ]
