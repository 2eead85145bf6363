"""Calibration of compare_runs: false positives under the null, power at holdout_size's n.

Each replication builds two graded row sets on the same tasks and runs ``compare_runs``:

* null: the same agent on both arms, 40 tasks, k=4, task difficulties spread uniformly over
  [0.2, 0.8] (around 0.5), fresh difficulties per replication. A verdict other than
  ``no_difference_detected`` is a false positive; the target is at most 5%.
* power: the same design with every task gaining +0.15, at the task count
  ``holdout_size(0.15, base=0.5, k=4)`` promises for it (42). Target: the gain detected
  (``b_better``) in at least 80% of replications. Two more layouts are reported without a
  target, at ``holdout_size(0.15)``'s default n (38, base 0.6): difficulties uniform on
  [0.35, 0.85], and every task at exactly 0.6 (the binomial model's own assumption, where
  pairing buys nothing). holdout_size's closed form uses normal quantiles (a known-variance
  test), while the test compare_runs runs has t-like tails, so on the flat layout the
  promised n gives about 77% power rather than 80%.

The same null replications also go through ``delta_report`` (before = arm a, after = arm b):
a target verdict other than ``no_change_detected`` (``moved``, ``moved_unreplicated``,
``regressed``) is a false positive, target at most 5%. Its pass@1 interval is the one
``compare_runs`` computes (same resample machinery, same seed), so the two rates should be
equal replication by replication; the share of replications where their verdicts agree is
reported beside it.

For contrast the null is also run with the plain percentile interval (no studentizing, no
continuity correction), computed from the same primitives: what the default method fixes.

Run: ``python experiments/bench/run.py calibration`` (WAI_CALIBRATION_REPS overrides the
replication count, default 3000).
"""

from __future__ import annotations

import os
import time

import numpy as np

from wai_exp.score.stats.delta import delta_report
from wai_exp.score.stats.power import holdout_size
from wai_exp.score.stats.resample import bootstrap_mean, wilson_interval
from wai_exp.score.stats.stats import compare_runs

K = 4
NULL_TASKS = 40
EFFECT = 0.15
SEED = 20261130


def _reps() -> int:
    return int(os.environ.get("WAI_CALIBRATION_REPS", "3000"))


def _rows(passes: np.ndarray, k: int) -> list[dict]:
    """Graded rows for one arm: task i has ``passes[i]`` rewards of 1 out of ``k``."""
    rows: list[dict] = []
    for i, c in enumerate(passes.tolist()):
        sid = f"t{i}"
        rows.extend({"scenario_id": sid, "reward": 1.0 if j < c else 0.0} for j in range(k))
    return rows


def _verdicts(
    p_a: np.ndarray, p_b: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """compare_runs verdict per replication (rows of p_a / p_b are replications)."""
    # All binomial draws for all replications at once; only compare_runs runs per replication.
    ca = rng.binomial(K, p_a)
    cb = rng.binomial(K, p_b)
    out = []
    t0 = time.perf_counter()
    for r in range(ca.shape[0]):
        res = compare_runs(_rows(ca[r], K), _rows(cb[r], K), seed=r)
        out.append(res["verdict"])
    return np.asarray(out), time.perf_counter() - t0


def null_false_positive_rate(reps: int | None = None, method: str = "compare_runs") -> float:
    """Share of null replications where a difference is reported."""
    reps = reps or _reps()
    rng = np.random.default_rng(SEED)
    p = rng.uniform(0.2, 0.8, size=(reps, NULL_TASKS))
    if method == "compare_runs":
        verdicts, _ = _verdicts(p, p, rng)
        return float(np.mean(verdicts != "no_difference_detected"))
    # Plain percentile interval on the same paired differences, for contrast.
    ca, cb = rng.binomial(K, p), rng.binomial(K, p)
    hits = 0
    for r in range(reps):
        ci = bootstrap_mean(
            (cb[r] - ca[r]) / K, seed=r, method="percentile", continuity=False
        ).interval
        hits += int(ci.low > 0 or ci.high < 0)
    return hits / reps


#: delta_report's target verdict -> compare_runs' verdict (before = a, after = b).
_SAME_CALL = {
    "no_change_detected": "no_difference_detected",
    "moved": "b_better",
    "moved_unreplicated": "b_better",
    "regressed": "a_better",
}


def delta_null_false_positive_rate(reps: int | None = None) -> tuple[float, float, float]:
    """delta_report on the null replications of ``null_false_positive_rate``.

    Same draws (same SEED, same order) and the same per-replication seed. Returns (share of
    replications whose target verdict is not ``no_change_detected``, share where the
    verdict says what compare_runs' says, seconds spent in delta_report).
    """
    reps = reps or _reps()
    rng = np.random.default_rng(SEED)
    p = rng.uniform(0.2, 0.8, size=(reps, NULL_TASKS))
    ca, cb = rng.binomial(K, p), rng.binomial(K, p)
    hits = agree = 0
    secs = 0.0
    for r in range(reps):
        before, after = _rows(ca[r], K), _rows(cb[r], K)
        t0 = time.perf_counter()
        verdict = delta_report(before, after, seed=r)["target_verdict"]
        secs += time.perf_counter() - t0
        hits += int(verdict != "no_change_detected")
        agree += int(_SAME_CALL.get(verdict) == compare_runs(before, after, seed=r)["verdict"])
    return hits / reps, agree / reps, secs


def detection_rate(
    base: float, spread: float, reps: int | None = None, seed: int = SEED + 1
) -> tuple[float, int]:
    """Share of replications detecting +EFFECT at holdout_size's n for ``base`` (b_better).

    Task difficulties are uniform on ``base +- spread``.
    """
    reps = reps or _reps()
    n = holdout_size(EFFECT, base=base, k=K)["n_tasks"]
    rng = np.random.default_rng(seed)
    p = base + rng.uniform(-spread, spread, size=(reps, n))
    verdicts, _ = _verdicts(p, p + EFFECT, rng)
    return float(np.mean(verdicts == "b_better")), n


def _ci(share: float, reps: int) -> list[float]:
    """Wilson 95% interval on a share measured over ``reps`` replications."""
    ci = wilson_interval(round(share * reps), reps)
    assert ci is not None
    return [round(ci.low, 4), round(ci.high, 4)]


def bench_null_false_positive_rate() -> list[dict]:
    reps = _reps()
    t0 = time.perf_counter()
    fpr = null_false_positive_rate(reps)
    secs = time.perf_counter() - t0
    plain = null_false_positive_rate(reps, method="percentile")
    delta_fpr, agree, delta_secs = delta_null_false_positive_rate(reps)
    return [
        {
            "name": f"compare_runs false positives, null, 40 tasks k=4 ({reps} reps)",
            "value": fpr, "ci95": _ci(fpr, reps), "unit": "share", "target": 0.05,
            "better": "lower", "seconds": round(secs, 2),
        },
        {
            "name": f"delta_report false positives, same null ({reps} reps)",
            "value": delta_fpr, "ci95": _ci(delta_fpr, reps), "unit": "share", "target": 0.05,
            "better": "lower", "seconds": round(delta_secs, 2),
        },
        {
            "name": f"delta_report verdict agrees with compare_runs ({reps} reps)",
            "value": agree, "unit": "share", "target": 1.0, "better": "higher",
        },
        {
            "name": f"plain percentile interval, same null ({reps} reps, contrast)",
            "value": plain, "ci95": _ci(plain, reps), "unit": "share", "target": None,
            "better": "lower",
        },
    ]  # fmt: skip


def bench_detection_at_holdout_size() -> list[dict]:
    reps = _reps()
    main_rate, n_main = detection_rate(0.5, 0.3, reps)
    spread_rate, n = detection_rate(0.6, 0.25, reps, seed=SEED + 2)
    flat_rate, _ = detection_rate(0.6, 0.0, reps, seed=SEED + 3)
    return [
        {
            "name": f"detect +0.15 at holdout_size n={n_main}, difficulty 0.2..0.8 ({reps} reps)",
            "value": main_rate, "unit": "share", "target": 0.80, "better": "higher",
        },
        {
            "name": f"detect +0.15 at holdout_size n={n}, difficulty 0.35..0.85 ({reps} reps)",
            "value": spread_rate, "unit": "share", "target": None, "better": "higher",
        },
        {
            "name": f"detect +0.15 at holdout_size n={n}, every task at 0.6 ({reps} reps)",
            "value": flat_rate, "unit": "share", "target": None, "better": "higher",
        },
    ]  # fmt: skip


if __name__ == "__main__":
    for fn in (bench_null_false_positive_rate, bench_detection_at_holdout_size):
        for res in fn():
            print(res)
