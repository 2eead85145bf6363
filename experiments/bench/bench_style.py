"""Benchmark style_report / style_markers / refusal_report on a 100k-row graded pool.

12,500 tasks x 8 repeats of ~25-word support replies; about one in six carries a tic from one
of the families, drawn from the stock phrase lists. The cost is the per-row phrase scan (one
compiled alternation per family over the normalized reply); the statistics are per-family
numpy work (task bootstrap via metric_summary, column-wise Pearson).

Run: ``python experiments/bench/run.py style``.
"""

from __future__ import annotations

import numpy as np
from _pools import best_of

_BODY = (
    "Your order {n} was located and the refund of {n} dollars was issued to the card on file; "
    "it should appear within five business days."
)


def make_rows(n_tasks: int = 12_500, k: int = 8, seed: int = 0) -> list[dict]:
    from wai_exp.score.grade.style import STYLE_MARKERS

    rng = np.random.default_rng(seed)
    phrases = [p for plist in STYLE_MARKERS.values() for p in plist]
    n = n_tasks * k
    tic = rng.random(n) < 1 / 6
    pick = rng.integers(0, len(phrases), n)
    reward = (rng.random(n) < np.where(tic, 0.7, 0.5)).astype(int)
    rows = []
    for i in range(n):
        text = _BODY.format(n=i)
        if tic[i]:
            text = f"{phrases[pick[i]].capitalize()}. {text}"
        rows.append({"scenario_id": f"s{i // k:05d}", "final_text": text, "reward": int(reward[i])})
    return rows


def bench_style() -> list[dict]:
    from wai_exp.score.grade.style import refusal_report, style_markers, style_report

    rows = make_rows()
    return [
        {
            "name": "style_report on 100,000 rows (12,500 tasks, 5 families)",
            "value": round(best_of(lambda: style_report(rows)), 4),
            "unit": "s",
            "target": 2.0,
            "better": "lower",
        },
        {
            "name": "style_markers on 100,000 rows",
            "value": round(best_of(lambda: style_markers(rows)), 4),
            "unit": "s",
            "target": 1.5,
            "better": "lower",
        },
        {
            "name": "refusal_report on 100,000 rows",
            "value": round(best_of(lambda: refusal_report(rows)), 4),
            "unit": "s",
            "target": 0.5,
            "better": "lower",
        },
    ]
