"""Benchmark build_preference_pairs on a 100k-row graded pool.

12,500 tasks x 8 repeats, each task with its own pass probability (Beta(0.7, 0.7)), reply
lengths drawn per row, one unjudged row in twenty. The cost is the per-row pass for the
score, task key and reply length, one lexsort, then a small numpy greedy per mixed task.

Run: ``python experiments/bench/run.py preference``.
"""

from __future__ import annotations

import numpy as np
from _pools import best_of, graded_pool


def make_rows(n_tasks: int = 12_500, k: int = 8, seed: int = 0) -> list[dict]:
    """Graded rows: ``n_tasks`` tasks x ``k`` repeats; about 5% unjudged; reply lengths
    drawn per row."""

    def extra(rng: np.random.Generator):
        chars = rng.integers(20, 400, (n_tasks, k))
        return lambda t, j: {
            "prompt": f"ask {t}",
            "final_text": "x" * int(chars[t, j]),
            "model_version": "policy-v1",
            "lineage": {"run_id": "bench"},
        }

    return graded_pool(n_tasks, k, seed, extra=extra)


def bench_preference() -> list[dict]:
    from wai_exp.score.select.preference import build_preference_pairs

    rows = make_rows()
    return [
        {
            "name": "build_preference_pairs on 100,000 rows (12,500 tasks)",
            "value": round(best_of(lambda: build_preference_pairs(rows)), 4),
            "unit": "s",
            "target": 1.0,
            "better": "lower",
        },
        {
            "name": "build_preference_pairs, 4 pairs per task, on 100,000 rows",
            "value": round(
                best_of(lambda: build_preference_pairs(rows, max_pairs_per_prompt=4)), 4
            ),
            "unit": "s",
            "target": 1.5,
            "better": "lower",
        },
    ]
