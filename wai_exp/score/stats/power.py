"""How many paired tasks a holdout needs, and the smallest gain a holdout can prove.

Models the test ``delta_report`` / ``compare_runs`` run: each task's pass rate over ``k``
rollouts per side, the delta as the mean of the paired per-task differences, the interval a
bootstrap over tasks. The two-sided power calculation then gives

    n = ((z_{1 - alpha/2} + z_power) * sd / effect) ** 2, rounded up,

with ``sd`` the standard deviation of one task's paired difference (rlhf-book ch. 16).
``n_tasks`` is that formula, the spec's number (14 tasks, 54 concentrated, for a trait at
0 -> 0.127, k=4).

Small-sample correction, and where it goes. The formula's quantiles are those of a test
that knows ``sd``; the test ``compare_runs`` / ``delta_report`` run estimates it from the
same ``n`` tasks, so its tails are Student t at ``n - 1`` df and at the formula's ``n`` the
promised power is short when ``n`` is small. The calibration study
(experiments/bench/bench_calibration.py) measures that shortfall cell by cell
(``MEASURED_POWER``). The correction is applied only where the spec leaves the quantile
open, so no number the spec states moves:

* ``n_tasks_t``: the fixed point ``n = ((t_{1-alpha/2, n-1} + t_{power, n-1}) sd / effect)^2``
  iterated up from ``n_tasks`` (and ``n_tasks_concentrated_t``), the count at which a test
  that reads its sd off the same tasks has the promised power. It is a second answer beside
  the spec's, named in ``notes`` whenever it differs, not the headline;
* ``half_width``: the band on the delta at ``n_tasks`` uses the t quantile at ``n - 1`` df,
  the quantile the verdict's interval (the t-expanded bootstrap) actually uses.

``detectable_effect`` is ``holdout_size`` solved for the effect, so it keeps the normal
quantiles and ``holdout_size(detectable_effect(n))["n_tasks"] == n``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special as _sp  # not scipy.stats: 0.6 s to import for two quantiles

from wai_exp.domain.plurals import counted
from wai_exp.score.stats.passat import as_rows
from wai_exp.score.stats.resample import reward_groups

__all__ = [
    "FIXED_POINT_STEPS",
    "MEASURED_POWER",
    "MEASURED_POWER_SOURCE",
    "MIN_HOLDOUT_TASKS",
    "detectable_effect",
    "difficulty_layout",
    "holdout_size",
    "layout_from_rates",
    "measured_power",
    "true_spread",
]

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
    return float(_sp.ndtri(1.0 - alpha / 2.0)), float(_sp.ndtri(power))


#: Where ``MEASURED_POWER`` comes from, named on every line that quotes it.
MEASURED_POWER_SOURCE = (
    "experiments/bench/bench_calibration.py, 3,000 replications per cell, base 0.5, "
    "compare_runs' verdict at holdout_size's n_tasks, the closed form (run 2026-12-01)"
)
#: The power the calibration study measured at ``holdout_size(effect, base=0.5, k=k)``'s
#: ``n_tasks`` (the spec's closed form), keyed ``(k, difficulty, effect)`` with
#: ``difficulty`` "equal" (every task at 0.5) or "spread" (uniform on [0.2, 0.8]):
#: ``(power, ci95 low, ci95 high)``, the interval Wilson over replications. On equal
#: difficulties it is short of the nominal 80% where n is small (75% at 12 tasks, 76% at
#: 23): the formula's normal quantiles assume a known sd and the verdict estimates it from
#: the same tasks; ``n_tasks_t`` is the count that closes the gap. Baked from the study's run
#: (``MEASURED_POWER_SOURCE``); rerun it and update these when the verdict or the sizing
#: changes (tests/score/stats/test_calibration.py checks one cell against a fresh slice).
MEASURED_POWER: dict[tuple[int, str, float], tuple[float, float, float]] = {  # fmt: skip
    (1, "equal", 0.05): (0.7903, 0.7754, 0.8045),
    (1, "spread", 0.05): (0.8483, 0.8351, 0.8607),
    (4, "equal", 0.05): (0.7940, 0.7792, 0.8081),
    (4, "spread", 0.05): (0.8470, 0.8337, 0.8594),
    (8, "equal", 0.05): (0.8020, 0.7874, 0.8159),
    (8, "spread", 0.05): (0.8480, 0.8347, 0.8604),
    (1, "equal", 0.10): (0.7897, 0.7747, 0.8039),
    (1, "spread", 0.10): (0.8370, 0.8234, 0.8498),
    (4, "equal", 0.10): (0.7943, 0.7795, 0.8084),
    (4, "spread", 0.10): (0.8490, 0.8357, 0.8614),
    (8, "equal", 0.10): (0.8020, 0.7874, 0.8159),
    (8, "spread", 0.10): (0.8397, 0.8261, 0.8524),
    (1, "equal", 0.15): (0.7750, 0.7597, 0.7896),
    (1, "spread", 0.15): (0.8423, 0.8289, 0.8549),
    (4, "equal", 0.15): (0.7893, 0.7744, 0.8036),
    (4, "spread", 0.15): (0.8277, 0.8137, 0.8408),
    (8, "equal", 0.15): (0.7720, 0.7566, 0.7867),
    (8, "spread", 0.15): (0.8093, 0.7949, 0.8230),
    (1, "equal", 0.20): (0.7737, 0.7583, 0.7883),
    (1, "spread", 0.20): (0.8197, 0.8055, 0.8330),
    (4, "equal", 0.20): (0.7610, 0.7454, 0.7759),
    (4, "spread", 0.20): (0.8250, 0.8110, 0.8382),
    (8, "equal", 0.20): (0.7510, 0.7352, 0.7661),
    (8, "spread", 0.20): (0.7977, 0.7829, 0.8117),
}
#: A before side whose true per-task spread (binomial noise taken out) is under this sd
#: reads as the study's "equal" layout. The layouts have sd 0 and 0.17; the cut sits at
#: half the "spread" layout's variance (sqrt(0.03 / 2)), because the spread read off a few
#: dozen tasks at k=4 is itself noisy (its variance has a standard error near 0.013 there).
EQUAL_SPREAD_MAX = 0.12


def difficulty_layout(spread: float | None) -> str:
    """``"equal"`` or ``"spread"``: which of the study's layouts a true task spread is near."""
    return "equal" if spread is None or spread < EQUAL_SPREAD_MAX else "spread"


def layout_from_rates(rates: np.ndarray, counts: np.ndarray) -> str:
    """The study's layout a before side's task rates show: ``"spread"`` only when shown.

    ``"spread"`` needs the noise-corrected spread (``true_spread``) past ``EQUAL_SPREAD_MAX``
    and its variance past twice the standard error of the observed variance
    (``var * sqrt(2 / (n - 1))``); anything less reads ``"equal"``. Binomial noise alone
    spreads the rates of equal tasks (at k=4 and 42 tasks a cut on the observed spread
    alone reads 18% of equal holdouts as spread, 28% at 12 tasks), and the "spread" cells measured several points
    more power, so the doubtful case quotes the lower, equal-difficulty figure. Tasks with
    a single rollout carry no within-task noise estimate, so at k=1 it is always
    ``"equal"``.
    """
    spread = true_spread(rates, counts)
    if spread is None:
        return "equal"
    keep = counts >= 2
    n = int(np.count_nonzero(keep))
    se = float(np.var(rates[keep], ddof=1)) * math.sqrt(2.0 / (n - 1))
    return "spread" if spread * spread > max(EQUAL_SPREAD_MAX**2, 2.0 * se) else "equal"


def measured_power(
    k: int,
    spread: float | None,
    effect: float,
    n_tasks: int | None = None,
    layout: str | None = None,
) -> dict[str, Any] | None:
    """The study's measured power in the cell nearest to this case, or None.

    Returns ``power``, ``ci95``, the cell's ``k``, ``difficulty``, ``effect`` and
    ``n_tasks``, and ``source`` (``MEASURED_POWER_SOURCE``). The nearest k is taken on the
    grid (k = 1, 4, 8). Within it the cell is the one whose holdout size is nearest to
    ``n_tasks`` (by ratio) when it is given, else the nearest effect: the shortfall against
    the nominal power comes from estimating the sd off few tasks, so the size is what
    decides it. A holdout under ``MEASURED_MIN_SHARE`` of the grid's smallest size at that k
    is outside the study: ``power`` and ``ci95`` are ``None`` and ``note`` says so rather
    than quote a larger holdout's power. A case off the grid otherwise gets the closest
    measurement, not an extrapolation, and the cell is named so a reader can tell.
    ``layout`` ("equal" / "spread", e.g. from ``layout_from_rates``) overrides the one
    ``spread`` implies.
    """
    if not MEASURED_POWER:
        return None
    if layout is None:
        layout = difficulty_layout(spread)
    elif layout not in ("equal", "spread"):
        raise ValueError(f"layout must be 'equal' or 'spread'; got {layout!r}")
    ks = sorted({key[0] for key in MEASURED_POWER})
    effects = sorted({key[2] for key in MEASURED_POWER})
    k_near = min(ks, key=lambda v: (abs(v - k), v))
    sizes = {e: _grid_n(e, k_near) for e in effects}
    if n_tasks is not None and n_tasks > 0:
        e_near = min(effects, key=lambda v: (abs(math.log(sizes[v] / n_tasks)), v))
    else:
        e_near = min(effects, key=lambda v: (abs(v - effect), v))
    got = MEASURED_POWER.get((k_near, layout, e_near))
    if got is None:
        return None
    out: dict[str, Any] = {
        "power": got[0],
        "ci95": [got[1], got[2]],
        "k": k_near,
        "difficulty": layout,
        "effect": e_near,
        "n_tasks": sizes[e_near],
        "source": MEASURED_POWER_SOURCE,
        "note": None,
    }
    smallest = min(sizes.values())
    if n_tasks is not None and n_tasks < MEASURED_MIN_SHARE * smallest:
        out.update(
            power=None,
            ci95=None,
            note=(
                f"{n_tasks} tasks is below the calibration study's smallest holdout with "
                f"{counted(k_near, 'row')} per task ({smallest} tasks): not measured, and the "
                "power falls further short of nominal as the holdout shrinks"
            ),
        )
    return out


#: A holdout smaller than this share of the study's smallest one at its k is not given that
#: cell's measured power (the shortfall grows as n shrinks, so it would flatter the case).
MEASURED_MIN_SHARE = 0.8


def _grid_n(effect: float, k: int) -> int:
    """The study's holdout size for a cell: ``holdout_size(effect, base=0.5, k=k)``."""
    sd = _model_sd(0.5, effect, k)
    z_a, z_p = _z(0.05, 0.8)
    return max(_n_for(sd, effect, z_a + z_p), MIN_HOLDOUT_TASKS)


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


def true_spread(rates: np.ndarray, counts: np.ndarray) -> float | None:
    """sd of the tasks' true pass rates: observed variance minus binomial sampling noise.

    ``E[p_hat(1 - p_hat)] = p(1 - p)(n - 1)/n``, so each task's sampling variance
    ``p(1 - p)/n`` is estimated without bias by ``p_hat(1 - p_hat)/(n - 1)``. Only tasks
    with two or more rollouts can have that noise taken out, so the spread is read off
    those; ``None`` when fewer than two tasks have them (at k=1 the spread of difficulty
    cannot be told from rollout noise).
    """
    multi = counts >= 2
    if int(np.count_nonzero(multi)) < 2:
        return None
    r, c = rates[multi], counts[multi]
    noise = float(np.mean(r * (1 - r) / (c - 1)))
    return math.sqrt(max(float(np.var(r, ddof=1)) - noise, 0.0))


def _quantile_sum(alpha: float, power: float, df: float | None) -> float:
    """``q_{1-alpha/2} + q_power``: normal quantiles (``df=None``) or Student t at ``df``."""
    if df is None:
        return float(_sp.ndtri(1.0 - alpha / 2.0) + _sp.ndtri(power))
    return float(_sp.stdtrit(df, 1.0 - alpha / 2.0) + _sp.stdtrit(df, power))


def _n_with_t_tails(sd: float, effect: float, alpha: float, power: float, n: int) -> int:
    """The smallest ``m >= n`` with ``m >= ((t_{1-alpha/2,m-1} + t_{power,m-1}) sd / effect)^2``.

    Stepped up one task at a time from the closed form's ``n``: the right side falls as m
    grows, and the correction is a few tasks, so this is the least fixed point (jumping to
    the right side's value can overshoot it).
    """
    if sd <= 0:
        return n
    m = n
    while _n_for(sd, effect, _quantile_sum(alpha, power, max(m - 1, 1))) > m:
        m += 1
    return m


def _degenerate(what: str) -> str:
    return (
        f"DEGENERATE: {what}; a measurement that cannot vary says nothing about the spread a "
        "holdout will see, so the size is the floor MIN_HOLDOUT_TASKS, not a promise of power"
    )


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

    ``n_tasks`` is the closed form with normal quantiles, the spec's number. ``n_tasks_t``
    is the small-sample answer beside it (module docstring): the formula's quantiles assume
    a known sd, the test that reads the holdout estimates it from the same tasks, and the
    calibration study measured the closed form's count short of the promised power at small
    n on tasks of equal difficulty (``MEASURED_POWER``); a note names ``n_tasks_t`` whenever
    it differs. The observed spread of ``before``'s rates includes binomial noise (``p_i(1 - p_i)/k``
    per task), so ``base_spread`` is the spread with that noise taken out; the note names
    both and gives the ratio on each, since the formula on the raw spread over-states what
    pairing buys (rates {0.3, 0.7} at k=10: observed 0.20 -> 1.20x, true 0.13 -> 1.08x).

    Returns ``n_tasks`` (the closed form, never below ``MIN_HOLDOUT_TASKS``; ``None`` on a
    saturated base), ``n_tasks_t`` (t quantiles at ``n - 1`` df), the inputs, ``task_std``
    (the sd used), ``sd_source``, ``half_width`` (the 95% band on the delta at ``n_tasks``,
    t quantile), ``n_tasks_concentrated`` and ``n_tasks_concentrated_t``,
    ``base_spread``, ``variance_ratio``, ``n_paired`` and ``notes``; every key is present on
    every path (``None`` where it does not apply). A measurement that cannot vary (an sd of
    0 from rows or ``task_std``, ``before`` whose every rollout scored the same) and a
    saturated base (1.0: nothing left to gain) add a note starting ``DEGENERATE:``; the
    saturated base returns ``n_tasks=None`` instead of raising. Raises ``ValueError`` for a
    non-positive effect, a base outside [0, 1], ``base + effect`` past 1, ``k < 1``, or
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
    n_conc_t: int | None = None

    if before is not None:
        gb = reward_groups(as_rows(before))
        if gb.n_tasks == 0:
            notes.append("before has no binary-graded rows; base and k stay as given")
        else:
            base, k, base_spread, variance_ratio = _read_before(gb, notes)
        if after is not None:
            sd, n_paired = _paired_sd(gb, reward_groups(as_rows(after)), notes)
            source = "rows" if sd is not None else source
    elif after is not None:
        raise ValueError("after= needs before= (the two graded arms on the same tasks)")

    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive number of rollouts per task; got {k!r}")
    if not 0.0 <= base <= 1.0:
        raise ValueError(f"base must be a pass rate in [0, 1]; got {base!r}")
    if base >= 1.0:
        # Saturated: nothing is left to gain. Not an input error (rows from a solved
        # holdout arrive here), so the answer says so instead of raising.
        where = "before passes every task every time" if before is not None else "base is 1.0"
        notes.append(
            f"DEGENERATE: {where}: no gain is possible on these tasks, so no "
            "holdout size proves one; size the holdout on harder tasks"
        )
        return _result(None, None, effect, base, k, power, alpha, None, source, None, None,
                       None, base_spread, variance_ratio, n_paired, notes)  # fmt: skip
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
        if sd == 0.0:
            notes.append(_degenerate("task_std is 0"))
    if sd is None:
        sd, n_conc, n_conc_t = _modelled_sd(base, effect, k, alpha, power, z_a + z_p, notes)
    n_z, n_t = _counts(sd, effect, alpha, power, z_a + z_p, notes)
    half = float(_sp.stdtrit(max(n_z - 1, 1), 1.0 - alpha / 2.0)) * sd / math.sqrt(n_z)
    return _result(n_z, n_t, effect, base, k, power, alpha, sd, source, half, n_conc, n_conc_t,
                   base_spread, variance_ratio, n_paired, notes)  # fmt: skip


def _read_before(gb: Any, notes: list[str]) -> tuple[float, int, float | None, float | None]:
    """``(base, k, base_spread, variance_ratio)`` read off ``before``'s graded groups, with a
    note on how much pairing buys when tasks differ in difficulty."""
    base = float(gb.means.mean())
    multi = gb.counts[gb.counts >= 2]
    k = int(np.median(multi)) if multi.size else 1
    base_spread = true_spread(gb.means, gb.counts)
    variance_ratio: float | None = None
    pq = base * (1.0 - base)
    if gb.n_rows and bool(np.all(gb.values == gb.values[0])) and base < 1.0:
        notes.append(
            _degenerate(
                f"every one of before's {gb.n_rows} rollouts scored "
                f"{float(gb.values[0]):g}, so its spread over tasks is unmeasured"
            )
        )
    if base_spread is not None and pq > 0 and base_spread**2 < pq:
        variance_ratio = 1.0 / (1.0 - base_spread**2 / pq)
        raw = float(np.std(gb.means, ddof=1))
        raw_ratio = 1.0 / (1.0 - raw**2 / pq) if raw**2 < pq else None
        raw_s = "" if raw_ratio is None else f" -> {raw_ratio:.2f}x"
        notes.append(
            f"tasks differ in difficulty (spread {base_spread:.2f} around {base:.2f}): "
            f"pairing keeps each task's own variance, so the independent-arms model "
            f"asks for {variance_ratio:.2f}x the tasks pairing needs, from "
            f"1 / (1 - spread^2 / (p(1-p))) on the true spread: the observed rates "
            f"spread {raw:.2f}{raw_s}, of which binomial noise at k={k} is "
            f"sqrt(mean p_i(1-p_i)/(k-1)), taken out first"
        )
    return base, k, base_spread, variance_ratio


def _paired_sd(gb: Any, ga: Any, notes: list[str]) -> tuple[float | None, int]:
    """The sd of the per-task differences over the tasks both arms graded (None under two)
    and how many tasks pair."""
    ib, ia = gb.index(), ga.index()
    shared = sorted(set(ib) & set(ia))
    n_paired = len(shared)
    if n_paired < 2:
        notes.append(
            f"before and after share {counted(n_paired, 'task')}; an sd needs at least 2, so "
            "it falls back to task_std or the model"
        )
        return None, n_paired
    d = ga.means[[ia[t] for t in shared]] - gb.means[[ib[t] for t in shared]]
    sd = float(np.std(d, ddof=1))
    if n_paired < 10:
        notes.append(f"sd read off only {n_paired} paired tasks: it is rough")
    if sd == 0.0:
        notes.append(
            _degenerate(
                f"every one of the {n_paired} paired differences is "
                f"{float(d[0]):+g}, so the measured sd is 0"
            )
        )
    return sd, n_paired


def _modelled_sd(
    base: float, effect: float, k: int, alpha: float, power: float, z: float, notes: list[str]
) -> tuple[float, int | None, int | None]:
    """The binomial model's sd, and the counts if the fewest tasks carried the gain."""
    sd = _model_sd(base, effect, k)
    n_conc: int | None = None
    n_conc_t: int | None = None
    csd = _concentrated_sd(base, effect, k)
    if csd is not None:
        n_conc = max(_n_for(csd, effect, z), MIN_HOLDOUT_TASKS)
        n_conc_t = _n_with_t_tails(csd, effect, alpha, power, n_conc)
    # The count recommended is the one the verdict's test reaches power at (t tails);
    # the spec's closed-form count is named beside it.
    conc = (
        f"{n_conc_t} tasks to reach {power:.0%} power under the test the verdict runs "
        f"(n_tasks_concentrated_t; the closed form's n_tasks_concentrated is {n_conc})"
        if n_conc_t is not None and n_conc_t != n_conc
        else f"{n_conc} tasks (n_tasks_concentrated)"
        if n_conc is not None
        else "more tasks than this (no task can carry the gain alone)"
    )
    notes.append(
        "sd from the binomial model: assumes the gain is spread evenly over tasks and the "
        f"arms are independent; if a few tasks carry it you need {conc}. Pass before= "
        "and after= from a previous eval to measure it"
    )
    if sd == 0.0:
        notes.append(_degenerate(f"the model gives sd 0 (base {base:g} -> {base + effect:g})"))
    return sd, n_conc, n_conc_t


def _counts(
    sd: float, effect: float, alpha: float, power: float, z: float, notes: list[str]
) -> tuple[int, int]:
    """``(n_tasks, n_tasks_t)``: the closed form (never below ``MIN_HOLDOUT_TASKS``) and
    the count at which a t test on the same tasks reaches ``power``."""
    n_z = _n_for(sd, effect, z) if sd > 0 else MIN_HOLDOUT_TASKS
    if n_z < MIN_HOLDOUT_TASKS:
        notes.append(
            f"the formula gives {n_z}; raised to MIN_HOLDOUT_TASKS={MIN_HOLDOUT_TASKS}, the "
            "fewest paired tasks compare_runs pairs"
        )
        n_z = MIN_HOLDOUT_TASKS
    n_t = _n_with_t_tails(sd, effect, alpha, power, n_z)
    if n_t != n_z:
        notes.append(
            f"use {n_t} tasks (n_tasks_t): the count at which the verdict's test, which reads "
            f"its sd off the same tasks (t quantiles at {n_t - 1} df), reaches {power:.0%} "
            f"power. n_tasks {n_z} is the closed form with normal quantiles, which assume a "
            "known sd; the calibration study measured the shortfall at n_tasks "
            "(MEASURED_POWER; delta_report's sizing line quotes it)"
        )
    return n_z, n_t


def _result(
    n: int | None,
    n_t: int | None,
    effect: float,
    base: float,
    k: int,
    power: float,
    alpha: float,
    sd: float | None,
    source: str,
    half: float | None,
    n_conc: int | None,
    n_conc_t: int | None,
    base_spread: float | None,
    variance_ratio: float | None,
    n_paired: int | None,
    notes: list[str],
) -> dict[str, Any]:
    return {
        "n_tasks": n,
        "n_tasks_t": n_t,
        "effect": float(effect),
        "base": float(base),
        "k": int(k),
        "power": float(power),
        "alpha": float(alpha),
        "task_std": sd,
        "sd_source": source,
        "half_width": half,
        "n_tasks_concentrated": n_conc,
        "n_tasks_concentrated_t": n_conc_t,
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

    ``holdout_size`` solved for the effect:
    ``e = (z_{1-alpha/2} + z_power) * sqrt((p(1-p) + q(1-q)) / k) / sqrt(n)`` with
    ``q = min(p + e, 1)``, iterated ``FIXED_POINT_STEPS`` times (the after-side variance
    depends on the effect). The normal quantiles are ``holdout_size``'s own, so
    ``holdout_size(detectable_effect(n))["n_tasks"]`` is ``n``; the power actually measured
    at that size is in ``MEASURED_POWER`` (``delta_report``'s sizing line quotes it), short
    of ``power`` at small n on tasks of equal difficulty. The iteration starts from the largest effect the model allows, not from
    ``q = p``: at ``base=0`` the ``q = p`` start has no variance and would stay at 0, a
    gain of nothing "provable" on any holdout. ``None`` below ``MIN_HOLDOUT_TASKS``, and
    ``None`` with a ``DEGENERATE:`` ``RuntimeWarning`` on a saturated base (1.0: nothing is
    left to gain). A value above ``1 - base`` means no possible gain is provable at that
    size. Raises ``ValueError`` for a base outside [0, 1] or ``k < 1``.
    """
    _z(alpha, power)
    if not 0.0 <= base <= 1.0:
        raise ValueError(f"base must be a pass rate in [0, 1]; got {base!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k!r}")
    if n_tasks < MIN_HOLDOUT_TASKS:
        return None
    if base >= 1.0:
        warnings.warn(
            "DEGENERATE: base 1.0 passes every task every time, so no gain is possible and "
            "none is provable; detectable_effect is None",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    scale = _quantile_sum(alpha, power, None) / math.sqrt(n_tasks)
    # sd(base, e) <= sqrt(0.5 / k) for any base and e (each side's p(1-p) is at most 1/4).
    effect = scale * math.sqrt(0.5 / k)
    for _ in range(FIXED_POINT_STEPS):
        effect = scale * _model_sd(base, effect, k)
    return float(effect)
