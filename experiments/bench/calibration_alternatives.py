"""Which verdict test could reach 80% power at holdout_size's n: the alternatives, measured.

Companion to bench_calibration.py (issue 12). The study there measures compare_runs' own
verdict; this one puts candidate tests side by side on the same kind of draws, at the
spec's ``holdout_size(effect, base=0.5, k=k)["n_tasks"]`` (the closed form), over the same
24-cell grid, to show where the room is and where it is not:

* ``t``: the paired t test over tasks, the large-sample twin of the t-expanded bootstrap
  interval compare_runs reads (the bootstrap itself is what bench_calibration.py runs);
* ``signflip_exact`` / ``signflip_midp``: the sign-flip permutation test the spec names,
  its p-value computed exactly (the paired differences sit on the lattice j/k, so the
  sign-flip distribution is a convolution of binomials, done by FFT), plain and mid-p;
* ``rollout_exchange``: the test that swaps rollouts between the arms within a task
  (conditional on each task's total passes; Cochran-Mantel-Haenszel with tasks as strata).
  It reads the sampling variance off the rollouts, not off the spread of the task
  differences, so its variance is as good as known: this is the test the closed form's
  normal quantiles describe. It answers a different question, though: whether b beats a on
  these tasks, with the task set fixed, where the bootstrap over tasks asks whether it would
  on tasks drawn like these.

How the rows are built: each replication draws each task's pass count per arm as
Binomial(k, p_task), all replications of a cell in one batched numpy draw; "equal" puts
every task at 0.5, "spread" draws difficulties uniform on [0.2, 0.8] per replication; the
power draws add ``effect`` on arm b. Counted as bench_calibration.py counts: a false positive
is a rejection either way under the null, power a rejection with b ahead.

Run: ``nice python experiments/bench/calibration_alternatives.py [reps] [seed]``.
"""

from __future__ import annotations

import sys

import numpy as np
from scipy import special as sp

from wai_exp.score.stats.power import holdout_size

EFFECTS = (0.05, 0.10, 0.15, 0.20)
KS = (1, 4, 8)
TESTS = ("t", "signflip_midp", "signflip_exact", "rollout_exchange")


def signflip_pvalues(codes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided sign-flip p-values (plain, mid-p) for rows of integer differences.

    ``codes`` is (reps x n) of ``k * (b - a)`` in -k..k. Given the |code| counts ``c_j``, the
    flipped sum is ``2 T - M`` with ``T = sum_j j Binomial(c_j, 1/2)`` and ``M = sum_j j c_j``;
    T's pmf is the inverse transform of ``prod_j ((1 + w^j) / 2)^{c_j}`` on the roots of
    unity of a length past ``M``.
    """
    reps, n = codes.shape
    mags = np.abs(codes)
    counts = np.stack([(mags == j).sum(1) for j in range(1, k + 1)], axis=1)
    total = counts @ np.arange(1, k + 1)
    t_obs = np.where(codes > 0, codes, 0).sum(1)
    length = k * n + 1
    w = np.exp(2j * np.pi * np.arange(length) / length)
    factors = np.stack([(1 + w**j) / 2 for j in range(1, k + 1)])
    plain, mid = np.empty(reps), np.empty(reps)
    block = max(1, 2_000_000 // length)
    for start in range(0, reps, block):
        c = counts[start : start + block]
        gen = np.ones((c.shape[0], length), dtype=complex)
        for j in range(k):
            gen *= factors[j][None, :] ** c[:, j][:, None]
        pmf = np.maximum(np.fft.fft(gen, axis=1).real / length, 0.0)
        t = np.arange(length)[None, :]
        m = total[start : start + block][:, None]
        dist = np.abs(2 * t - m)
        obs = np.abs(2 * t_obs[start : start + block] - total[start : start + block])[:, None]
        inside = t <= m
        ge = np.where(inside & (dist >= obs), pmf, 0.0).sum(1)
        eq = np.where(inside & (dist == obs), pmf, 0.0).sum(1)
        plain[start : start + block] = np.minimum(ge, 1.0)
        mid[start : start + block] = ge - 0.5 * eq
    return plain, mid


def rejections(a: np.ndarray, b: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """+1 / -1 / 0 per replication for each test in ``TESTS`` (rows are replications)."""
    n = a.shape[1]
    codes = b - a
    d = codes / k
    mean, sd = d.mean(1), d.std(1, ddof=1)
    sign = np.sign(mean).astype(int)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd > 0, mean / (sd / np.sqrt(n)), 0.0)
    plain, mid = signflip_pvalues(codes, k)
    both = a + b
    expect = both.sum(1) / 2
    if k > 1:
        var = (both * (2 * k - both)).sum(1) / (4 * (2 * k - 1))
    else:
        var = (both * (2 - both)).sum(1) / 4
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, (b.sum(1) - expect) / np.sqrt(var), 0.0)
    rule = {
        "t": np.abs(t) > sp.stdtrit(n - 1, 0.975),
        "signflip_midp": mid <= 0.05,
        "signflip_exact": plain <= 0.05,
        "rollout_exchange": np.abs(z) > sp.ndtri(0.975),
    }
    return {name: np.where(hit, sign, 0) for name, hit in rule.items()}


def grid(reps: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for e in EFFECTS:
        for k in KS:
            n = int(holdout_size(e, base=0.5, k=k)["n_tasks"])
            for layout in ("equal", "spread"):
                row: dict = {"effect": e, "k": k, "difficulty": layout, "n_tasks": n}
                for kind, gain in (("fpr", 0.0), ("power", e)):
                    if layout == "equal":
                        p = np.full((reps, n), 0.5)
                    else:
                        p = 0.5 + rng.uniform(-0.3, 0.3, size=(reps, n))
                    got = rejections(
                        rng.binomial(k, p), rng.binomial(k, np.minimum(p + gain, 1.0)), k
                    )
                    for name, v in got.items():
                        hits = v != 0 if kind == "fpr" else v == 1
                        row[f"{kind}_{name}"] = float(np.mean(hits))
                out.append(row)
                print(format_row(row), flush=True)
    return out


def format_row(r: dict) -> str:
    cols = "  ".join(f"{r[f'fpr_{t}']:.3f}/{r[f'power_{t}']:.3f}" for t in TESTS)
    return f"{r['effect']:.2f}  {r['k']:>2}  {r['difficulty']:<6}  {r['n_tasks']:<5} {cols}"


if __name__ == "__main__":
    n_reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    run_seed = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    print("effect  k  layout  n     " + "  ".join(f"{t} (FPR/power)" for t in TESTS))
    grid(n_reps, run_seed)
