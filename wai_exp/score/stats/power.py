"""How many paired tasks a holdout needs, and the smallest gain a holdout can prove.

Models the test ``delta_report`` / ``compare_runs`` run: each task's pass rate over ``k``
rollouts per side, the delta as the mean of the paired per-task differences, the interval a
bootstrap over tasks. The two-sided power calculation then gives

    n = ((z_{1 - alpha/2} + z_power) * sd / effect) ** 2, rounded up,

with ``sd`` the standard deviation of one task's paired difference (rlhf-book ch. 16).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats as _st

from wai_exp.score.stats.passat import as_rows
from wai_exp.score.stats.resample import reward_groups

__all__ = ["FIXED_POINT_STEPS", "MIN_HOLDOUT_TASKS", "detectable_effect", "holdout_size"]

#: Fewer paired tasks than this and compare_runs stops pairing (its ``min_paired``), so no
#: holdout is sized below it and ``detectable_effect`` returns None.
MIN_HOLDOUT_TASKS = 5
#: Fixed-point iterations for ``detectable_effect``: the after-side variance depends on the
#: effect; the map is a contraction and settles to 1e-12 well within this many steps.
FIXED_POINT_STEPS = 30


def _z(alpha: float, power: float) -> tuple[float, float]:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), e.g. 0.05; got {alpha!r}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), e.g. 0.8; got {power!r}")
    return float(_st.norm.ppf(1.0 - alpha / 2.0)), float(_st.norm.ppf(power))


def _model_sd(base: float, effect: float, k: int) -> float:
    q = min(base + effect, 1.0)
    return math.sqrt((base * (1.0 - base) + q * (1.0 - q)) / k)


def _concentrated_sd(base: float, effect: float, k: int) -> float | None:
    """sd of a paired difference when the gain sits on the fewest tasks that can carry it.

    A share ``f = effect / (1 - base)`` of tasks goes from ``base`` to 1 (difference
    ``1 - p_hat``: mean ``1 - base``, variance ``base(1 - base)/k``); the rest stay at
    ``base`` on both sides (mean 0, variance ``2 base(1 - base)/k``). The mixture variance
    adds ``f(1 - f)(1 - base)^2`` for the two means.
    """
    if base >= 1.0:
        return None
    if effect > (1.0 - base) + 1e-9:
        return None
    f = min(effect / (1.0 - base), 1.0)
    v = base * (1.0 - base) / k
    return math.sqrt(f * v + (1.0 - f) * 2.0 * v + f * (1.0 - f) * (1.0 - base) ** 2)


def _n_for(sd: float, effect: float, z_sum: float) -> int:
    return max(int(math.ceil((z_sum * sd / effect) ** 2 - 1e-9)), 1)


def _true_spread(rates: np.ndarray, counts: np.ndarray) -> float | None:
    """sd of the tasks' true pass rates: observed variance minus binomial sampling noise.

    ``E[p_hat(1 - p_hat)] = p(1 - p)(n - 1)/n``, so each task's sampling variance
    ``p(1 - p)/n`` is estimated without bias by ``p_hat(1 - p_hat)/(n - 1)``.
    """
    if rates.size < 2:
        return None
    multi = counts >= 2
    noise = float(np.mean(np.where(multi, rates * (1 - rates) / np.maximum(counts - 1, 1), 0.0)))
    return math.sqrt(max(float(np.var(rates, ddof=1)) - noise, 0.0))


def _n_with_t_tails(sd: float, effect: float, alpha: float, power: float, n: int) -> int:
    """The closed form with t quantiles at n - 1 df, iterated up from the normal answer."""
    if sd <= 0:
        return n
    for _ in range(50):
        df = max(n - 1, 1)
        q = float(_st.t.ppf(1.0 - alpha / 2.0, df) + _st.t.ppf(power, df))
        need = _n_for(sd, effect, q)
        if need <= n:
            return n
        n = need
    return n


def holdout_size(
    effect: float,
    base: float = 0.6,
    k: int = 4,
    power: float = 0.8,
    alpha: float = 0.05,
    before: Sequence[dict] | None = None,
    after: Sequence[dict] | None = None,
    task_std: float | None = None,
    rows: Sequence[dict] | None = None,
) -> dict[str, Any]:
    """How many paired tasks a holdout needs to prove a gain of ``effect``.

    ``sd`` (one task's paired-difference standard deviation) comes from, best first:
    ``before`` and ``after`` (graded arms on the same tasks: the sample sd of the per-task
    differences, ``sd_source="rows"``, ``n_paired`` tasks), ``task_std`` (a number you
    measured, ``"given"``), or the binomial model ``sqrt((p(1-p) + q(1-q)) / k)`` with
    ``p = base``, ``q = base + effect`` (``"model"``, which assumes an evenly spread gain and
    independent arms; it also returns ``n_tasks_concentrated``, the count if the fewest tasks
    carried the gain). ``before`` alone (``rows`` is its old name) reads ``base`` and ``k``
    off the data and reports ``base_spread`` (sd of the true per-task pass rates) with the
    ``variance_ratio`` ``1 / (1 - spread^2 / (p(1-p)))`` the model over-asks by.

    Returns ``n_tasks`` (never below ``MIN_HOLDOUT_TASKS``), the inputs, ``task_std`` (the
    sd used), ``sd_source``, ``half_width`` (the 95% band on the delta at that ``n``),
    ``n_tasks_concentrated``, ``base_spread``, ``variance_ratio``, ``n_paired`` and
    ``notes``; every key is present on every path (``None`` where it does not apply).
    Raises ``ValueError`` for a non-positive effect, a base outside [0, 1), ``k < 1``, or
    ``before`` and ``rows`` both given.
    """
    z_a, z_p = _z(alpha, power)
    if rows is not None:
        if before is not None:
            raise ValueError("pass before= (rows= is its old name), not both")
        before = rows
    if not effect > 0:
        raise ValueError(f"effect must be a positive gain in pass rate, e.g. 0.05; got {effect!r}")
    notes: list[str] = []
    n_paired: int | None = None
    base_spread: float | None = None
    variance_ratio: float | None = None
    sd: float | None = None
    source = "model"
    n_conc: int | None = None

    if before is not None:
        gb = reward_groups(as_rows(before))
        if gb.n_tasks == 0:
            notes.append("before has no binary-graded rows; base and k stay as given")
        else:
            base = float(gb.means.mean())
            multi = gb.counts[gb.counts >= 2]
            k = int(np.median(multi)) if multi.size else 1
            base_spread = _true_spread(gb.means, gb.counts)
            pq = base * (1.0 - base)
            if base_spread is not None and pq > 0 and base_spread**2 < pq:
                variance_ratio = 1.0 / (1.0 - base_spread**2 / pq)
                notes.append(
                    f"tasks differ in difficulty (spread {base_spread:.2f} around {base:.2f}): "
                    f"pairing keeps each task's own variance, so the independent-arms model "
                    f"asks for {variance_ratio:.2f}x the tasks pairing needs"
                )
        if after is not None:
            ga = reward_groups(as_rows(after))
            ib, ia = gb.index(), ga.index()
            shared = sorted(set(ib) & set(ia))
            n_paired = len(shared)
            if n_paired >= 2:
                d = ga.means[[ia[t] for t in shared]] - gb.means[[ib[t] for t in shared]]
                sd = float(np.std(d, ddof=1))
                source = "rows"
                if n_paired < 10:
                    notes.append(f"sd read off only {n_paired} paired tasks: it is rough")
            else:
                notes.append(
                    f"before and after share {n_paired} task(s); an sd needs at least 2, so "
                    "it falls back to task_std or the model"
                )
    elif after is not None:
        raise ValueError("after= needs before= (the two graded arms on the same tasks)")

    if before is not None and base >= 1.0:
        raise ValueError(
            "before passes every task every time (base 1.0): no gain is possible on these "
            "tasks, so no holdout size proves one; size the holdout on harder tasks"
        )
    if not 0.0 <= base < 1.0:
        raise ValueError(f"base must be a pass rate in [0, 1); got {base!r}")
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive number of rollouts per task; got {k!r}")
    # saturation: a pass rate cannot pass 1. The tolerance lets a base read off rows
    # (a mean of task means, e.g. 0.7000000000000001) take the gain that reaches exactly 1.
    if base + effect > 1.0 + 1e-9:
        raise ValueError(
            f"base {base:.2f} + effect {effect:.2f} exceeds a pass rate of 1 (saturation): "
            f"the largest possible gain from this base is {1.0 - base:.2f}; pass a smaller effect"
        )

    if sd is None and task_std is not None:
        if not task_std >= 0:
            raise ValueError(f"task_std must be a non-negative sd; got {task_std!r}")
        sd, source = float(task_std), "given"
    if sd is None:
        sd = _model_sd(base, effect, k)
        csd = _concentrated_sd(base, effect, k)
        n_conc = None if csd is None else max(_n_for(csd, effect, z_a + z_p), MIN_HOLDOUT_TASKS)
        notes.append(
            "sd from the binomial model: assumes the gain is spread evenly over tasks and the "
            f"arms are independent; if a few tasks carry it you need {n_conc} tasks "
            "(n_tasks_concentrated). Pass before= and after= from a previous eval to measure it"
        )
    n = _n_for(sd, effect, z_a + z_p) if sd > 0 else MIN_HOLDOUT_TASKS
    if n < MIN_HOLDOUT_TASKS:
        notes.append(
            f"the formula gives {n}; raised to MIN_HOLDOUT_TASKS={MIN_HOLDOUT_TASKS}, the fewest "
            "paired tasks compare_runs pairs"
        )
        n = MIN_HOLDOUT_TASKS
    n_t = _n_with_t_tails(sd, effect, alpha, power, n)
    if n_t - n >= max(2, 0.02 * n):  # a task or two at large n is not worth a note
        notes.append(
            f"the closed form assumes a known sd; the interval compare_runs computes has t "
            f"tails, which at this size need about {n_t} tasks for power {power:g}"
        )
    return {
        "n_tasks": n,
        "effect": float(effect),
        "base": float(base),
        "k": int(k),
        "power": float(power),
        "alpha": float(alpha),
        "task_std": sd,
        "sd_source": source,
        "half_width": z_a * sd / math.sqrt(n),
        "n_tasks_concentrated": n_conc,
        "base_spread": base_spread,
        "variance_ratio": variance_ratio,
        "n_paired": n_paired,
        "notes": notes,
    }


def detectable_effect(
    n_tasks: int,
    base: float = 0.6,
    k: int = 4,
    power: float = 0.8,
    alpha: float = 0.05,
) -> float | None:
    """The smallest gain ``n_tasks`` paired tasks can prove at ``power``.

    ``holdout_size``'s model solved for the effect:
    ``e = (z_{1-alpha/2} + z_power) * sqrt((p(1-p) + q(1-q)) / k) / sqrt(n)`` with
    ``q = min(p + e, 1)``, iterated ``FIXED_POINT_STEPS`` times from the ``q = p`` start
    (the after-side variance depends on the effect). ``None`` below ``MIN_HOLDOUT_TASKS``.
    A value above ``1 - base`` means no possible gain is provable at that size. Raises
    ``ValueError`` for a base outside [0, 1) or ``k < 1``.
    """
    z_a, z_p = _z(alpha, power)
    if not 0.0 <= base < 1.0:
        raise ValueError(f"base must be a pass rate in [0, 1); got {base!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k!r}")
    if n_tasks < MIN_HOLDOUT_TASKS:
        return None
    scale = (z_a + z_p) / math.sqrt(n_tasks)
    effect = scale * _model_sd(base, 0.0, k)
    for _ in range(FIXED_POINT_STEPS):
        effect = scale * _model_sd(base, effect, k)
    return float(effect)
