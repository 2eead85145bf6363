"""Calibration of the paired verdict: false positives under a null, power at holdout_size's n.

The grid (issue 12): effects 0.05, 0.10, 0.15, 0.20; k = 1, 4, 8 rollouts per task per arm;
two difficulty layouts, every task at 0.5 ("equal", the binomial model's own assumption,
where pairing buys nothing) and task difficulties drawn uniform on [0.2, 0.8] ("spread",
sd 0.17 around 0.5, fresh per replication). For each cell the task count is
``holdout_size(effect, base=0.5, k=k)["n_tasks"]`` and

* null: the same agent on both arms at that n. A verdict other than
  ``no_difference_detected`` is a false positive; nominal is 5% (target band [4%, 5.5%]);
* power: every task gains ``effect`` on arm b. The share of ``b_better`` verdicts is the
  power; nominal is the 80% holdout_size promises (target at least 78.5%, 80% less the
  study's noise at 3,000 replications).

How the rows are built: each replication draws each task's pass count per arm as
Binomial(k, p_task) (all replications of a cell in one batched numpy draw), i.e. k graded
0/1 rows per task per arm. The verdict is the one ``compare_runs`` computes on those rows
(``verdicts``): the bootstrap resamples of every replication are drawn in one batched
multinomial over the lattice the paired differences sit on, and each interval then comes
from ``resample._interval_from_moments``, the code compare_runs' and delta_report's
intervals go through, with compare_runs' settings (``n_boot=2000``, level 0.95,
``stats.VERDICT_METHOD``, clipped to the delta's possible range, continuity as
``stats.VERDICT_CONTINUITY``). Building row dicts and calling compare_runs per replication
measures the same thing about 30x slower; ``tests/score/stats/test_calibration.py`` checks
the batched verdicts against compare_runs on rows.

``study(reps, n_key, continuity, method)`` runs the grid at ``holdout_size``'s headline
``n_tasks`` (the spec's closed form) with today's verdict. Two earlier states are kept for
the record: ``n_key="n_tasks_t"`` (the t-quantile count, which was the headline for a while:
the "before" table of the second pass on issue 12) and ``n_key="n_tasks"``,
``continuity=True``, ``method="studentized"`` (the verdict before issue 12: "original").
Each share carries its Wilson 95% interval over replications.

Run: ``nice python experiments/bench/run.py calibration`` (WAI_CALIBRATION_REPS overrides
the replication count, default 3000), or ``nice python experiments/bench/bench_calibration.py
[reps] [now|t|original] [seed] [cells]`` to print the table (``seed`` replaces ``SEED`` for
a second look at a cell that missed; ``cells`` is a comma list such as ``0.20/8/equal``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

from wai_exp.score.stats.power import holdout_size
from wai_exp.score.stats.resample import (
    _interval_from_moments,
    paired_boundary_interval,
    wilson_interval,
)
from wai_exp.score.stats.stats import VERDICT_CONTINUITY, VERDICT_METHOD

EFFECTS = (0.05, 0.10, 0.15, 0.20)
KS = (1, 4, 8)
DIFFICULTIES = ("equal", "spread")
BASE = 0.5
SPREAD = 0.3  # half-width of the uniform difficulty draw around BASE
N_BOOT = 2000
SEED = 20261201


def _reps() -> int:
    return int(os.environ.get("WAI_CALIBRATION_REPS", "3000"))


def _difficulties(rng: np.random.Generator, layout: str, reps: int, n: int) -> np.ndarray:
    if layout == "equal":
        return np.full((reps, n), BASE)
    return BASE + rng.uniform(-SPREAD, SPREAD, size=(reps, n))


def _bounds(ra: np.ndarray, rb: np.ndarray) -> tuple[float, float]:
    # compare_runs clips to b's smallest row value minus a's largest (and vice versa); with
    # 0/1 rows a row value of 0 exists on a side unless every task there passed every time.
    b_min = 0.0 if rb.min() < 1.0 else 1.0
    b_max = 1.0 if rb.max() > 0.0 else 0.0
    a_min = 0.0 if ra.min() < 1.0 else 1.0
    a_max = 1.0 if ra.max() > 0.0 else 0.0
    return b_min - a_max, b_max - a_min


def _resample_moments(
    d: np.ndarray, k: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(reps x N_BOOT) bootstrap means and plug-in variances of each row of ``d``.

    Paired differences of pass rates over k rollouts sit on the lattice j/k, j in -k..k,
    so each replication's resample is its count vector over those 2k + 1 values, drawn
    Multinomial(n, counts/n): the distribution of an index-matrix resample, and the draw
    ``resample`` itself makes when a sample has few distinct values. All replications of a
    block are drawn in one call.
    """
    reps, n = d.shape
    grid = np.arange(-k, k + 1) / k
    codes = np.rint(d * k).astype(int) + k
    counts = np.stack([np.bincount(row, minlength=2 * k + 1) for row in codes])
    draws = rng.multinomial(n, counts / n, size=(N_BOOT, reps)).astype(float)
    means = draws @ grid / n
    variances = np.maximum(draws @ (grid * grid) / n - means * means, 0.0)
    return means.T, variances.T


def verdicts(
    ra: np.ndarray,
    rb: np.ndarray,
    k: int,
    continuity: bool,
    rng: np.random.Generator,
    method: str = VERDICT_METHOD,
) -> np.ndarray:
    """+1 (b better), -1 (a better) or 0 per replication; rows of ra / rb are replications.

    The resamples are drawn in batches (``_resample_moments``); each replication's interval
    is then computed by resample's own ``_interval_from_moments``, the code every paired
    interval in compare_runs and delta_report goes through, with compare_runs' settings
    (``N_BOOT``, level 0.95, ``VERDICT_METHOD``, clipped to the delta's possible range). A
    replication whose paired differences are all equal gets compare_runs' interval for
    that case (``paired_boundary_interval``).
    """
    d = rb - ra
    out = np.zeros(d.shape[0], dtype=int)
    block = max(1, 200_000 // (N_BOOT * (2 * k + 1)) * 10)
    for start in range(0, d.shape[0], block):
        stop = min(start + block, d.shape[0])
        means, variances = _resample_moments(d[start:stop], k, rng)
        for i, r in enumerate(range(start, stop)):
            row = d[r]
            if row.min() == row.max():
                iv = paired_boundary_interval(float(ra[r].mean()), float(rb[r].mean()), row.size)
            else:
                iv = _interval_from_moments(
                    row, means[i], variances[i], N_BOOT, 0.95, method, continuity,
                    _bounds(ra[r], rb[r]),
                ).interval  # fmt: skip
            if iv is not None:
                out[r] = 1 if iv.low > 0 else (-1 if iv.high < 0 else 0)
    return out


def _share(hits: int, reps: int) -> dict[str, Any]:
    ci = wilson_interval(hits, reps)
    assert ci is not None
    return {"value": hits / reps, "ci95": [round(ci.low, 4), round(ci.high, 4)]}


def cell(
    effect: float,
    k: int,
    layout: str,
    reps: int,
    n_key: str = "n_tasks",
    continuity: bool = VERDICT_CONTINUITY,
    method: str = VERDICT_METHOD,
    seed: int = SEED,
) -> dict[str, Any]:
    """One grid cell: the null false-positive rate and the power at holdout_size's n."""
    n = int(holdout_size(effect, base=BASE, k=k)[n_key])
    index = EFFECTS.index(effect) * 100 + KS.index(k) * 10 + DIFFICULTIES.index(layout)
    rng = np.random.default_rng([seed, index])
    t0 = time.perf_counter()
    p = _difficulties(rng, layout, reps, n)
    null = verdicts(rng.binomial(k, p) / k, rng.binomial(k, p) / k, k, continuity, rng, method)
    p = _difficulties(rng, layout, reps, n)
    gain = verdicts(
        rng.binomial(k, p) / k, rng.binomial(k, np.minimum(p + effect, 1.0)) / k, k,
        continuity, rng, method,
    )  # fmt: skip
    return {
        "effect": effect, "k": k, "difficulty": layout, "n_tasks": n, "reps": reps,
        "fpr": _share(int(np.count_nonzero(null != 0)), reps),
        "power": _share(int(np.count_nonzero(gain == 1)), reps),
        "seconds": round(time.perf_counter() - t0, 1),
    }  # fmt: skip


def study(
    reps: int | None = None,
    n_key: str = "n_tasks",
    continuity: bool = VERDICT_CONTINUITY,
    method: str = VERDICT_METHOD,
    seed: int = SEED,
    only: set[tuple[float, int, str]] | None = None,
) -> list[dict[str, Any]]:
    """Every cell of the grid (effects x k x difficulty), in that order, or those in ``only``."""
    reps = reps or _reps()
    cells = []
    for e in EFFECTS:
        for k in KS:
            for layout in DIFFICULTIES:
                if only is not None and (e, k, layout) not in only:
                    continue
                cells.append(cell(e, k, layout, reps, n_key, continuity, method, seed))
                print(format_table(cells[-1:]).splitlines()[1], file=sys.stderr, flush=True)
    return cells


def format_table(cells: list[dict[str, Any]]) -> str:
    lines = ["effect  k  difficulty  n     FPR [95% CI]            power [95% CI]"]
    for c in cells:
        f, p = c["fpr"], c["power"]
        lines.append(
            f"{c['effect']:.2f}  {c['k']:>2}  {c['difficulty']:<10}  {c['n_tasks']:<4}  "
            f"{f['value']:.3f} [{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}]  "
            f"{p['value']:.3f} [{p['ci95'][0]:.3f}, {p['ci95'][1]:.3f}]"
        )
    return "\n".join(lines)


def bench_calibration_grid() -> list[dict]:
    out: list[dict] = []
    for c in study():
        label = (
            f"{c['effect']:.2f} k={c['k']} {c['difficulty']} n={c['n_tasks']} ({c['reps']} reps)"
        )
        out.append({
            "name": f"false positives, null, {label}", "value": c["fpr"]["value"],
            "ci95": c["fpr"]["ci95"], "unit": "share", "target": 0.055, "better": "lower",
            "seconds": c["seconds"],
        })  # fmt: skip
        out.append({
            "name": f"power at holdout_size's n, {label}", "value": c["power"]["value"],
            "ci95": c["power"]["ci95"], "unit": "share", "target": 0.785, "better": "higher",
        })  # fmt: skip
    return out


if __name__ == "__main__":
    n_reps = int(sys.argv[1]) if len(sys.argv) > 1 else _reps()
    state = sys.argv[2] if len(sys.argv) > 2 else "now"
    run_seed = int(sys.argv[3]) if len(sys.argv) > 3 else SEED
    chosen = None
    if len(sys.argv) > 4:
        chosen = set()
        for item in sys.argv[4].split(","):
            e_s, k_s, layout_s = item.split("/")
            chosen.add((float(e_s), int(k_s), layout_s))
    if state == "t":
        cells = study(n_reps, n_key="n_tasks_t", seed=run_seed, only=chosen)
    elif state == "original":
        cells = study(n_reps, continuity=True, method="studentized", seed=run_seed, only=chosen)
    else:
        cells = study(n_reps, seed=run_seed, only=chosen)
    print(format_table(cells))
    # The literal score/stats/power.py bakes as MEASURED_POWER (the power column).
    print("MEASURED_POWER = {")
    for c in cells:
        lo, hi = c["power"]["ci95"]
        key = f"({c['k']}, {c['difficulty']!r}, {c['effect']:.2f})"
        print(f"    {key}: ({c['power']['value']:.4f}, {lo:.4f}, {hi:.4f}),")
    print("}")
