"""Benchmark logprob_report, mean_kl and staleness_report on a 100k-row pool.

12,500 tasks x 8 repeats; each row has three assistant steps carrying ``logprob`` and
``n_tokens`` (no row totals, so the per-step sum is exercised), a ``ref_logprob``, a 0/1
reward on 95% of rows and one of three model versions. The cost is the one per-row pass that
reads the totals; the statistics are bincount / quantile / corrcoef over the arrays.

Run: ``python experiments/bench/run.py logprobs``.
"""

from __future__ import annotations

import numpy as np
from _pools import best_of


def make_rows(n_tasks: int = 12_500, k: int = 8, seed: int = 0) -> list[dict]:
    """Rows with step logprobs, a reference logprob, rewards and model versions."""
    rng = np.random.default_rng(seed)
    n = n_tasks * k
    toks = rng.integers(5, 200, size=(n, 3))
    lp = -rng.gamma(2.0, 0.4, size=(n, 3)) * toks
    ref = lp.sum(axis=1) - rng.gamma(2.0, 0.05, size=n) * toks.sum(axis=1)
    reward = rng.random(n) < 0.5
    unjudged = rng.random(n) < 0.05
    version = rng.integers(0, 3, size=n)
    rows = []
    for i in range(n):
        t, j = divmod(i, k)
        rows.append(
            {
                "scenario_id": f"s{t:05d}",
                "rollout_id": f"s{t:05d}-{j}",
                "rollout_index": j,
                "model_version": f"m{version[i]}",
                "reward": None if unjudged[i] else int(reward[i]),
                "ref_logprob": float(ref[i]),
                "steps": [
                    {"kind": "assistant", "logprob": float(lp[i, s]), "n_tokens": int(toks[i, s])}
                    for s in range(3)
                ],
            }
        )
    return rows


def bench_logprobs() -> list[dict]:
    from wai_exp.score.diagnose.logprobs import logprob_report, mean_kl, staleness_report

    rows = make_rows()
    return [
        {
            "name": f"{fn.__name__} on 100,000 rows (12,500 tasks, 3 steps each)",
            "value": round(best_of(lambda fn=fn, kw=kw: fn(rows, **kw)), 4),
            "unit": "s",
            "target": 0.5,
            "better": "lower",
        }
        for fn, kw in (
            (logprob_report, {}),
            (mean_kl, {}),
            (staleness_report, {"base_model": "m2"}),
        )
    ]
