"""Shared statistics primitives: task grouping, bootstrap, sign-flip test, Wilson, t quantiles.

Every report in ``wai_exp.score`` counts tasks, never rows (rlhf-book ch. 16): rows are grouped
by ``task_key`` into per-task arrays once (``factorize``: the sorted distinct keys and the
inverse ``np.unique`` would give, then one ``np.bincount`` for counts and one for sums), and
every interval is a bootstrap over those task values.

Resampling follows scipy's discipline:

* randomness comes only from an explicit ``numpy.random.Generator`` (``seed`` may be an int
  or a Generator), never the global NumPy RNG, so the same seed gives the same numbers in
  any process;
* resamples are drawn as whole matrices, ``batch`` rows at a time, and the stream is
  consumed the same way whatever ``batch`` is, so the result does not depend on it;
* when the data have few distinct values (pass rates at a fixed k take at most k + 1
  values, their paired differences at most 2k + 1), a resample is drawn as its count
  matrix over the distinct values (``Generator.multinomial``). That is exactly the
  distribution of an index-matrix resample (the counts are its sufficient statistic) at
  O(B * distinct) instead of O(B * n), which is what keeps 10,000 tasks under 0.2 s.
* many metrics on the same tasks (``bootstrap_columns``: a (tasks x metrics) matrix, NaN
  where a task lacks a metric) share one resample; ``bootstrap_mean`` and
  ``paired_bootstrap`` are its one-column case, so there is one implementation. The first
  column is drawn from the caller's stream exactly as it would be alone, the rest from a
  spawned child stream, so a metric's interval does not depend on what rides along with it.

Intervals. The plain percentile bootstrap of a mean is anti-conservative at small task
counts: its spread is the plug-in ``s_n / sqrt(n)`` and it has normal, not t, tails. The
default ``method="studentized"`` is the bootstrap-t interval (Efron & Tibshirani 1993,
ch. 12): each resample's mean is standardized by its own standard error, so the interval
carries t-like tails at small n and the skew of a rate near 0 or 1. Pass rates sit on a
lattice (multiples of 1/k), so their mean is a discrete statistic whose bootstrap endpoints
are atoms; ``continuity=True`` widens each end by half the lattice step of the mean, the
usual continuity correction (on by default for one-sample intervals). The paired verdicts
of compare_runs and delta_report leave it off (``stats.VERDICT_CONTINUITY``): the
calibration study (experiments/bench/bench_calibration.py) measured it costing
false positives below the nominal 5% (4.1% on 42 equal-difficulty tasks at k=4) and power
below the promised 80%. When every value is the same no resample can differ, and with
``bounds`` the interval is ``wilson_over_tasks`` instead of a zero-width claim.
``"expanded"`` (Hesterberg 2015: percentile widened by ``sqrt(n/(n-1)) t_{n-1}/z``),
``"percentile"`` and ``"bca"`` are available for comparison.

Small evals. Under ``SMALL_EVAL_TASKS`` tasks a bootstrap of a rate is erratic: on 10 tasks
at 3 repeats, the bootstrap-t read ``[0.006, 0.644]`` around 0.467 (resamples that happen to
hold one repeated rate have almost no spread, so their t is huge), and on 3 of 10 tasks
passing every time the expanded percentile gave ``[0, 0.715]``. ``rate_interval`` then gives
``wilson_design_effect``: the Wilson interval with the tasks' own spread as its effective
size. experiments/bench/bench_small_eval.py measures both on 108 cells (3 to 29 tasks, 1 to 8
repeats, six difficulty layouts): the Wilson form's coverage was at least 92.9% (the
bootstrap-t's 91.1%), under 95% in 12 cells (the bootstrap-t's 15), and its intervals were
10% narrower on average (0.67x to 1.32x the bootstrap-t's width).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal, cast, get_args

import numpy as np

from wai_exp.rows.keys import task_key

# The closed-form pieces (the normal quantile, the Wilson interval, the interval type) live
# in a small module too, so a report that needs only a Wilson interval skips this one.
from wai_exp.score.stats.intervals import (
    Interval,
    _check_level,
    _special,
    wilson_interval,
    wilson_score,
    z_quantile,
)

# The per-row readers live in a small module of their own so that checks which only read
# rewards and keys (hack_scan, dedupe) do not import this one; re-exported here.
from wai_exp.score.stats.readers import (
    UNJUDGED_STATUSES,
    binary_reward,
    factorize,
    numeric_reward,
    reward_under,
)

__all__ = [
    "BootstrapResult",
    "DEFAULT_BATCH_ELEMENTS",
    "Interval",
    "METHODS",
    "PermutationResult",
    "Seed",
    "TaskGroups",
    "SMALL_EVAL_TASKS",
    "UNJUDGED_STATUSES",
    "WILSON_DESIGN_EFFECT",
    "WILSON_TASKS",
    "Z_95",
    "as_generator",
    "binary_reward",
    "bootstrap_columns",
    "bootstrap_mean",
    "bootstrap_mean_distribution",
    "factorize",
    "group_values",
    "lattice_step",
    "marker_groups",
    "marker_value",
    "noise_band",
    "numeric_reward",
    "reward_under",
    "paired_bootstrap",
    "paired_boundary_interval",
    "paired_boundary_words",
    "rate_interval",
    "reward_groups",
    "sign_flip_test",
    "t_quantile",
    "two_proportion_p",
    "unpaired_bootstrap",
    "welch_p",
    "wilson_ci",
    "wilson_design_effect",
    "wilson_interval",
    "wilson_over_tasks",
    "z_quantile",
]

Seed = int | np.random.Generator | None
Method = Literal["studentized", "expanded", "percentile", "bca"]
METHODS: tuple[str, ...] = get_args(Method)

#: The two-sided 95% normal quantile as the reference docs write it (``1.96 x floor``).
Z_95 = 1.96
#: Resample matrices are processed in chunks of about this many elements (batch x n), so
#: memory stays near 16 MB whatever n_resamples is.
DEFAULT_BATCH_ELEMENTS = 2_000_000
#: Blocks of a multi-column resample are smaller: the count matrix and its passes stay in
#: cache, and ``W @ values`` stays under the size where OpenBLAS starts threads (measured at
#: 2,000 tasks x 10 columns: 0.04 s CPU at 60k elements, 0.10 s at 250k, 0.22 s at 500k).
_REFINE_BATCH_ELEMENTS = 60_000


def as_generator(seed: Seed) -> np.random.Generator:
    """A ``numpy.random.Generator`` from an int seed (or the Generator itself, used as is).

    ``None`` gives a fresh unseeded generator; every public default in wai-exp is an int, so
    that only happens when a caller asks for it.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise TypeError(f"seed must be an int or a numpy.random.Generator, got {seed!r}")
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------------------
# Quantiles and closed-form intervals
# --------------------------------------------------------------------------------------


def t_quantile(df: float, level: float = 0.95) -> float:
    """The two-sided Student t quantile for ``level`` at ``df`` degrees of freedom.

    ``t_quantile(2)`` is 4.303, ``t_quantile(29)`` 2.045. Raises ``ValueError`` when ``df`` is
    not positive (a spread from one run has no degrees of freedom).
    """
    level = _check_level(level)
    if not df > 0:
        raise ValueError(f"df must be positive (runs - 1 for a re-run spread); got {df!r}")
    return float(_special().stdtrit(df, 0.5 + level / 2.0))


def noise_band(
    floor: float | None,
    n_a: int = 1,
    n_b: int = 1,
    df: float | None = None,
    *,
    alpha: float = 0.05,
) -> float | None:
    """How far a delta moves from re-running the eval alone: the re-run band.

    ``floor * sqrt(1/n_a + 1/n_b) * q``: the delta is a mean of ``n_a`` runs against a mean of
    ``n_b``, each run with spread ``floor``. ``q`` is 1.96 (at ``alpha=0.05``; the normal
    quantile otherwise) when ``floor`` is taken as the eval's spread, and the two-sided t
    quantile at ``df`` when ``floor`` was estimated from re-runs (``df = runs - 1``; three
    re-runs give 4.30, not 1.96). Returns ``None`` when ``floor`` is ``None`` (nothing
    measured) and raises ``ValueError`` on a negative floor or a non-positive run count.
    """
    if floor is None:
        return None
    floor = float(floor)
    if not floor >= 0.0:
        raise ValueError(f"floor must be a non-negative standard deviation; got {floor!r}")
    if n_a < 1 or n_b < 1:
        raise ValueError(f"n_a and n_b count runs per side and must be >= 1; got {n_a}, {n_b}")
    level = 1.0 - float(alpha)
    if df is None:
        q = Z_95 if math.isclose(alpha, 0.05) else z_quantile(level)
    else:
        q = t_quantile(df, level)
    return floor * math.sqrt(1.0 / n_a + 1.0 / n_b) * q


#: ``BootstrapResult.method`` when every task had the same value: the bootstrap cannot vary,
#: so the interval is ``wilson_over_tasks`` instead.
WILSON_TASKS = "wilson_tasks"


def wilson_over_tasks(
    mean: float, n: int, level: float = 0.95, bounds: tuple[float, float] = (0.0, 1.0)
) -> Interval:
    """The Wilson score interval for a mean of ``n`` task values that lie in ``bounds``.

    For the boundary case a task bootstrap cannot see: when every task has the same value
    every resample does too, and the bootstrap's zero-width interval claims a certainty
    ``n`` tasks do not give (6 tasks that all failed are far from proof of a 0% rate). The
    mean is rescaled to [0, 1] and treated as ``n`` Bernoulli trials: a value in [0, 1] with
    mean m has variance at most m(1 - m), so this is the conservative score interval, and
    at 0 of n it is Wilson's [0, z^2 / (n + z^2)] (0.39 at n=6). Raises ``ValueError`` for
    ``n < 1`` or empty ``bounds``.
    """
    lo_b, hi_b = float(bounds[0]), float(bounds[1])
    if n < 1 or not hi_b > lo_b:
        raise ValueError(f"need n >= 1 and bounds low < high; got n={n}, bounds={bounds}")
    p = min(max((float(mean) - lo_b) / (hi_b - lo_b), 0.0), 1.0)
    low, high = wilson_score(p, n, level)
    return Interval(lo_b + low * (hi_b - lo_b), lo_b + high * (hi_b - lo_b))


#: ``rate_interval``'s method below ``SMALL_EVAL_TASKS`` tasks (``wilson_design_effect``).
WILSON_DESIGN_EFFECT = "wilson_deff"
#: Fewer tasks than this and a rate's interval is ``wilson_design_effect``, not a bootstrap.
SMALL_EVAL_TASKS = 30


def wilson_design_effect(values: Any, n_trials: int, level: float = 0.95) -> Interval:
    """The Wilson interval on the mean of task values in [0, 1], sized by their spread.

    Tasks are clusters of rows, so ``n`` tasks with ``k`` rows each are worth fewer than
    ``n * k`` independent trials: the effective size is ``m (1 - m) / (s^2 / n)`` (Kish's
    design effect with ``s`` the sample sd of the task values), at most ``n_trials`` (the
    rows behind them), shrunk by ``(z / t_{n-1})^2`` because ``s`` is itself read off ``n``
    tasks (Korn & Graubard 1998). Values that are all 0 or 1 give ``n - 1`` before that
    shrink. Raises ``ValueError`` under two values, when every value is the same
    (``wilson_over_tasks`` answers that), or on a value outside [0, 1].
    """
    arr = _as_1d(values, "values")
    n = arr.size
    if n < 2 or arr.min() == arr.max():
        raise ValueError("need two or more task values that are not all equal")
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ValueError("values must be rates in [0, 1]")
    level = _check_level(level)
    mean = float(arr.mean())
    se2 = float(arr.var(ddof=1)) / n
    n_eff = min(mean * (1.0 - mean) / se2, float(max(n_trials, n)))
    n_eff *= (z_quantile(level) / t_quantile(n - 1, level)) ** 2
    return wilson_score(mean, n_eff, level)


def rate_interval(
    values: Any, n_trials: int, *, n_resamples: int = 2000, seed: Seed = 0, level: float = 0.95
) -> BootstrapResult:
    """The interval on a mean of per-task rates in [0, 1]: what pass@1 and pass^k print.

    A task bootstrap (``bootstrap_mean`` with bounds (0, 1)) from ``SMALL_EVAL_TASKS``
    tasks up; below, ``wilson_design_effect`` over the ``n_trials`` rows behind the values
    (``method`` says which). Every value equal: ``wilson_over_tasks``, as ``bootstrap_mean``.
    """
    arr = _as_1d(values, "values")
    if arr.size >= SMALL_EVAL_TASKS or arr.size < 2 or arr.min() == arr.max():
        return bootstrap_mean(arr, n_resamples=n_resamples, seed=seed, level=level, bounds=(0, 1))
    iv = wilson_design_effect(arr, n_trials, level)
    return BootstrapResult(
        float(arr.mean()), iv, None, int(arr.size), 0, level, WILSON_DESIGN_EFFECT
    )


def paired_boundary_interval(
    mean_a: float, mean_b: float, n: int, level: float = 0.95, n_b: int | None = None
) -> Interval:
    """An interval on ``mean_b - mean_a`` (two pass rates over the same ``n`` tasks) for when
    every paired difference is the same value and the bootstrap cannot vary.

    Every difference 0 (two arms that agree task by task, a run against itself): the share
    of tasks on which the arms can differ is at most ``w``, Wilson's upper bound for 0 of
    ``n``, and no task differs by more than 1, so the interval is ``[-w, w]`` (0.278 at 10
    tasks, 0.026 at 141). Otherwise Newcombe's hybrid score interval from each arm's
    ``wilson_over_tasks`` interval: ``d - sqrt((b - l_b)^2 + (u_a - a)^2)`` to
    ``d + sqrt((u_b - b)^2 + (a - l_a)^2)``, which ignores the pairing and is wide, the
    honest size when every task moved by the same amount. ``n_b`` is b's task count when
    the two sides are not paired (default ``n``; always Newcombe). Raises ``ValueError``
    for ``n < 1``.
    """
    if n_b is None and mean_a == mean_b:
        if n < 1:
            raise ValueError(f"need n >= 1; got n={n}")
        w = wilson_score(0.0, n, level).high
        return Interval(-w, w)
    la, ua = wilson_over_tasks(mean_a, n, level)
    lb, ub = wilson_over_tasks(mean_b, n if n_b is None else n_b, level)
    d = float(mean_b) - float(mean_a)
    low = d - math.sqrt((mean_b - lb) ** 2 + (ua - mean_a) ** 2)
    high = d + math.sqrt((ub - mean_b) ** 2 + (mean_a - la) ** 2)
    return Interval(max(low, -1.0), min(high, 1.0))


def paired_boundary_words(diff: float, n: int) -> str:
    """What ``paired_boundary_interval`` did when all ``n`` paired differences are ``diff``,
    in a note's words."""
    head = f"every one of the {n} paired differences is {float(diff):+g}, so the bootstrap "
    if diff == 0:
        return head + (
            "cannot vary: ci95 is +-(Wilson's upper bound on the share of tasks that could "
            f"differ when none of {n} did)"
        )
    return (
        head
        + "cannot vary: ci95 is Newcombe's interval from each side's Wilson interval over tasks"
    )


def wilson_ci(successes: int, n: int, level: float = 0.95) -> list[float] | None:
    """``wilson_interval`` as a ``[low, high]`` list of floats (the shape reports store), or
    ``None`` for ``n == 0``; raises ``ValueError`` as ``wilson_interval`` does."""
    iv = wilson_interval(successes, n, level)
    return None if iv is None else iv.as_list()


# --------------------------------------------------------------------------------------
# Rows -> per-task arrays
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskGroups:
    """Per-task aggregates of one value per row.

    ``keys`` are the task keys in sorted order; ``counts[i]``, ``sums[i]`` and ``means[i]``
    belong to ``keys[i]``. ``row_task[j]`` is the task index of the j-th kept row and
    ``values[j]`` its value. ``n_skipped`` counts rows that had no usable value.
    """

    keys: tuple[str, ...]
    counts: np.ndarray
    sums: np.ndarray
    row_task: np.ndarray = field(repr=False)
    values: np.ndarray = field(repr=False)
    n_skipped: int = 0

    @property
    def n_tasks(self) -> int:
        return len(self.keys)

    @property
    def n_rows(self) -> int:
        return int(self.values.size)

    @property
    def means(self) -> np.ndarray:
        """Per-task mean value (a task's pass rate, for rewards)."""
        return self.sums / np.maximum(self.counts, 1)

    def per_task(self) -> dict[str, float]:
        """``{task key: mean}`` as plain floats."""
        return dict(zip(self.keys, self.means.tolist(), strict=True))

    def index(self) -> dict[str, int]:
        """``{task key: position in keys}``."""
        return {k: i for i, k in enumerate(self.keys)}


def two_proportion_p(x1: int, n1: int, x2: int, n2: int) -> float | None:
    """Two-sided p of the pooled two-proportion z test of ``x1/n1`` against ``x2/n2``.

    Returns None when either count is 0 (undefined) and 1.0 when the pooled rate is 0 or 1
    (no variance: nothing can differ). Never raises on non-negative counts.
    """
    if n1 == 0 or n2 == 0:
        return None
    pooled = (x1 + x2) / (n1 + n2)
    var = pooled * (1 - pooled) * (1 / n1 + 1 / n2)
    if var <= 0:
        return 1.0
    z = (x1 / n1 - x2 / n2) / math.sqrt(var)
    return math.erfc(abs(z) / math.sqrt(2))


def welch_p(a: np.ndarray, b: np.ndarray) -> float | None:
    """Two-sided Welch t-test p-value for ``mean(b) != mean(a)`` (unequal variances).

    Returns None when it is undefined: fewer than two values on a side, or no spread on
    either. Never raises on 1-D float arrays.
    """
    if a.size < 2 or b.size < 2:
        return None
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    se2 = va + vb
    if se2 <= 0:
        return None
    df = se2**2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    t = (float(b.mean()) - float(a.mean())) / math.sqrt(se2)
    return float(2.0 * _special().stdtr(df, -abs(t)))


def group_values(keys: Sequence[str], values: Sequence[float | None] | np.ndarray) -> TaskGroups:
    """Group per-row ``values`` by per-row task ``keys`` (strings); ``None``/NaN values are skipped.

    Per-task counts and sums come from one ``np.bincount`` each over the key codes. Raises
    ``ValueError`` when the two sequences differ in length.
    """
    if len(keys) != len(values):
        raise ValueError(f"keys and values must align: {len(keys)} keys, {len(values)} values")
    if isinstance(values, np.ndarray):
        vals = values.astype(float, copy=False)
    else:
        vals = np.fromiter(
            (np.nan if v is None else v for v in values), dtype=float, count=len(values)
        )
    ok = ~np.isnan(vals)
    n_skipped = int(vals.size - ok.sum())
    if not ok.any():
        empty = np.zeros(0)
        return TaskGroups((), empty, empty, np.zeros(0, dtype=np.intp), empty, n_skipped)
    if n_skipped:
        keys = [k for k, keep in zip(keys, ok.tolist(), strict=True) if keep]
        vals = vals[ok]
    uniq, inverse = factorize(keys)
    counts = np.bincount(inverse, minlength=len(uniq)).astype(float)
    sums = np.bincount(inverse, weights=vals, minlength=len(uniq))
    return TaskGroups(uniq, counts, sums, inverse, vals, n_skipped)


def marker_value(row: Mapping[str, Any], name: str) -> float | None:
    """``row["markers"][name]`` as a float, or ``None`` when absent, non-numeric or NaN."""
    markers = row.get("markers")
    if not isinstance(markers, Mapping):
        return None
    value = markers.get(name)
    if value is None or isinstance(value, str):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def _rows_to_groups(
    rows: Iterable[Mapping[str, Any]], value: Callable[[Mapping[str, Any]], Any]
) -> TaskGroups:
    # The one per-row pass: each row's value, and the key of the rows that have one. The
    # rows are not kept: a file's rows can stream through.
    keys: list[str] = []
    vals: list[Any] = []
    skipped = 0
    for row in rows:
        v = value(row)
        if v is None:
            skipped += 1
            continue
        keys.append(task_key(row))
        vals.append(v)
    kept = np.fromiter(vals, dtype=float, count=len(keys))
    groups = group_values(keys, kept)
    return TaskGroups(
        groups.keys, groups.counts, groups.sums, groups.row_task, groups.values, skipped
    )


def reward_groups(rows: Iterable[Mapping[str, Any]]) -> TaskGroups:
    """Binary rewards grouped by ``task_key``; partial and unjudged rows are skipped."""
    return _rows_to_groups(rows, binary_reward)


def marker_groups(rows: Iterable[Mapping[str, Any]], name: str) -> TaskGroups:
    """Marker ``name`` grouped by ``task_key``; rows without the marker are skipped."""
    return _rows_to_groups(rows, lambda row: marker_value(row, name))


# --------------------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------------------


def _as_1d(x: Any, name: str = "x") -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be one-dimensional (one value per task); got shape {arr.shape}"
        )
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN; drop tasks without a value before resampling")
    return arr


def _batch_rows(
    batch: int | None, width: int, n_resamples: int, elements: int = DEFAULT_BATCH_ELEMENTS
) -> int:
    if batch is None:
        return max(1, min(n_resamples, elements // max(width, 1)))
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"batch must be a positive integer or None; got {batch!r}")
    return int(batch)


def _distinct(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values and their counts, in order of first appearance.

    First-appearance order (not sorted order) makes a resample of ``-x`` the mirror image of
    the same-seed resample of ``x``, so a paired comparison of (a, b) is exactly the negative
    of (b, a).
    """
    uniq, first, counts = np.unique(arr, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    return uniq[order], counts[order]


def _spawn(rng: np.random.Generator) -> np.random.Generator:
    """An independent child stream that leaves ``rng``'s own stream where it was."""
    try:
        return rng.spawn(1)[0]
    except (AttributeError, TypeError, ValueError):
        # A Generator built without a SeedSequence cannot spawn: seed the child from it.
        return np.random.default_rng(int(rng.integers(0, 2**63)))


def _resample_moments(
    arr: np.ndarray, n_resamples: int, rng: np.random.Generator, batch: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and plug-in variance of each of ``n_resamples`` bootstrap resamples of ``arr``."""
    means, variances = _resample_columns(arr[:, None], n_resamples, rng, batch, lambda: rng)
    return means[:, 0], variances[:, 0]


def _resample_columns(
    arr: np.ndarray,
    n_resamples: int,
    rng: np.random.Generator,
    batch: int | None,
    refine_rng: Callable[[], np.random.Generator],
) -> tuple[np.ndarray, np.ndarray]:
    """(resamples x columns) means and plug-in variances; every column shares one resample.

    ``arr`` is (tasks x columns), NaN-free. A resample is drawn from ``rng`` exactly as a
    one-column call on ``arr[:, 0]`` would draw it (same stream consumption, same
    arithmetic), so column 0's interval does not depend on which columns ride along:

    * column 0 with few distinct values: the resample is its count matrix over those values
      (``Generator.multinomial``). Columns that are a function of column 0 are read off the
      same counts. Otherwise each resample's count of value ``v`` is split among the tasks
      holding ``v`` (uniform draws from ``refine_rng()``, taken only after every count is
      drawn): conditional on the value counts that is exactly the task-count matrix of an
      index-matrix resample, so the other columns get a proper joint resample.
    * otherwise an index matrix; the other columns use its task-count matrix.
    """
    n, n_cols = arr.shape
    if n_cols > 1:
        # BLAS may round a row of ``W @ values`` differently with the block's row count, so
        # several columns use fixed internal blocks: ``batch`` then changes no number.
        _batch_rows(batch, 1, 1)  # still reject a bad value
        batch = None
    means = np.empty((n_resamples, n_cols))
    variances = np.empty((n_resamples, n_cols))
    first = arr[:, 0]
    rest = arr[:, 1:]
    rest_sq = rest * rest
    uniq, inverse, counts, first_at = _distinct_inverse(first)
    if uniq.size <= n // 2:
        # Count matrix over the distinct values: same distribution as an index matrix.
        probs = counts / n
        sq = uniq * uniq
        rep = rest[first_at]
        functional = n_cols == 1 or np.array_equal(rest, rep[inverse])
        kept = None if functional else np.empty((n_resamples, uniq.size), dtype=np.int64)
        step = _batch_rows(batch, uniq.size, n_resamples)
        for start in range(0, n_resamples, step):
            stop = min(start + step, n_resamples)
            raw = rng.multinomial(n, probs, size=stop - start)
            draws = raw.astype(float)
            m = draws @ uniq / n
            means[start:stop, 0] = m
            variances[start:stop, 0] = draws @ sq / n - m * m
            if kept is not None:
                kept[start:stop] = raw
            elif n_cols > 1:
                mr = draws @ rep / n
                means[start:stop, 1:] = mr
                variances[start:stop, 1:] = draws @ (rep * rep) / n - mr * mr
        if kept is not None:
            _refine(kept, inverse, counts, rest, rest_sq, refine_rng(), batch, means, variances)
    else:
        # Index rows are drawn row by row, so the block size changes no number.
        elements = DEFAULT_BATCH_ELEMENTS if n_cols == 1 else _REFINE_BATCH_ELEMENTS
        step = _batch_rows(batch, n, n_resamples, elements)
        for start in range(0, n_resamples, step):
            stop = min(start + step, n_resamples)
            idx = rng.integers(0, n, size=(stop - start, n), dtype=np.int64)
            sample = np.take(first, idx)
            means[start:stop, 0] = sample.mean(axis=1)
            variances[start:stop, 0] = sample.var(axis=1)
            if n_cols > 1:
                offsets = (np.arange(stop - start, dtype=np.int64) * n)[:, None]
                w = np.bincount((idx + offsets).ravel(), minlength=(stop - start) * n)
                w = w.reshape(stop - start, n).astype(float)
                mr = w @ rest / n
                means[start:stop, 1:] = mr
                variances[start:stop, 1:] = w @ rest_sq / n - mr * mr
    np.maximum(variances, 0.0, out=variances)  # float round-off on constant resamples
    return means, variances


def _distinct_inverse(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``_distinct`` plus each value's position among them and where each first appears."""
    uniq, first, inverse, counts = np.unique(
        arr, return_index=True, return_inverse=True, return_counts=True
    )
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.intp)
    rank[order] = np.arange(order.size, dtype=np.intp)
    return uniq[order], rank[np.asarray(inverse).reshape(-1)], counts[order], first[order]


def _refine(
    kept: np.ndarray,
    inverse: np.ndarray,
    counts: np.ndarray,
    rest: np.ndarray,
    rest_sq: np.ndarray,
    rng: np.random.Generator,
    batch: int | None,
    means: np.ndarray,
    variances: np.ndarray,
) -> None:
    """Split each resample's per-value counts among the tasks holding each value.

    Given that value ``g`` was drawn ``c`` times out of ``n``, which of its ``n_g`` tasks
    those draws hit is ``c`` uniform picks among them: one uniform per draw, ``n`` per
    resample, consumed row by row so the result does not depend on ``batch``.
    """
    n_resamples, n_groups = kept.shape
    n = inverse.size
    # Work in value-grouped task order: the count matrix W and the values are permuted
    # alike, so W @ values is unchanged and no per-draw gather back to task order is needed.
    order = np.argsort(inverse, kind="stable")
    rest, rest_sq = rest[order], rest_sq[order]
    sizes = counts.astype(np.int64)
    starts = np.cumsum(sizes) - sizes
    step = _batch_rows(batch, n, n_resamples, _REFINE_BATCH_ELEMENTS)
    for start in range(0, n_resamples, step):
        stop = min(start + step, n_resamples)
        rows = stop - start
        reps = kept[start:stop].ravel()
        # Per draw: where its value's tasks start (offset by its resample's row) and how
        # many there are; the draws of one resample come in value order.
        base = np.repeat((starts + (np.arange(rows, dtype=np.int64) * n)[:, None]).ravel(), reps)
        size = np.repeat(np.tile(sizes.astype(float), rows), reps)
        # u < 1 and size < 2**52, so floor(u * size) <= size - 1 under round-to-nearest.
        size *= rng.random(rows * n)
        base += size.astype(np.int64)
        w = np.bincount(base, minlength=rows * n).reshape(rows, n).astype(float)
        mr = w @ rest / n
        means[start:stop, 1:] = mr
        variances[start:stop, 1:] = w @ rest_sq / n - mr * mr


def bootstrap_mean_distribution(
    x: Any, n_resamples: int = 2000, seed: Seed = 0, *, batch: int | None = None
) -> np.ndarray:
    """The bootstrap distribution of ``mean(x)``: ``n_resamples`` means of resamples of x.

    Each resample draws ``len(x)`` values with replacement. With few distinct values (at
    most half as many as values) the resample is drawn as its count matrix over the distinct
    values, which has the same distribution as an index matrix; otherwise as an index
    matrix. Either way rows are drawn ``batch`` at a time from one Generator and the result
    does not depend on ``batch``. Raises ``ValueError`` on empty input.
    """
    arr = _as_1d(x)
    if arr.size == 0:
        raise ValueError("cannot bootstrap an empty sample; need at least one task")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1; got {n_resamples}")
    return _resample_moments(arr, n_resamples, as_generator(seed), batch)[0]


def lattice_step(x: Any) -> float:
    """The grid the values of ``x`` sit on (0.25 for pass rates over 4 repeats), or 0.

    Found as the gcd of the distances between distinct values when each is a fraction with
    denominator at most 1000; data with more than 200 distinct values, or off any such grid,
    are treated as continuous (0).
    """
    arr = np.unique(_as_1d(x))
    if arr.size < 2 or arr.size > 200:
        return 0.0
    gaps = arr[1:] - arr[0]
    fracs = [Fraction(float(g)).limit_denominator(1000) for g in gaps]
    if any(abs(float(f) - g) > 1e-9 * max(1.0, abs(g)) for f, g in zip(fracs, gaps, strict=True)):
        return 0.0
    denom = math.lcm(*(f.denominator for f in fracs))
    numer = math.gcd(*(f.numerator * (denom // f.denominator) for f in fracs))
    return numer / denom


@dataclass(frozen=True)
class BootstrapResult:
    """A bootstrap estimate.

    ``estimate`` is the statistic on the data, ``interval`` the ``level`` interval (``None``
    when there are fewer than two values), ``standard_error`` the bootstrap sd, ``n`` the
    number of values (tasks) resampled, ``method`` the interval actually computed (a
    studentized interval whose resamples could not be studentized reports ``"expanded"``).
    """

    estimate: float
    interval: Interval | None
    standard_error: float | None
    n: int
    n_resamples: int
    level: float
    method: str


def _check_method(method: str) -> Method:
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    return cast(Method, method)  # METHODS are Method's values


def _clip(interval: Interval, bounds: tuple[float, float] | None) -> Interval:
    if bounds is None:
        return interval
    lo, hi = bounds
    return Interval(min(max(interval.low, lo), hi), min(max(interval.high, lo), hi))


def _expanded(means: np.ndarray, estimate: float, n: int, level: float) -> tuple[float, float]:
    alpha = 1.0 - level
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    factor = math.sqrt(n / (n - 1)) * t_quantile(n - 1, level) / z_quantile(level)
    return estimate - factor * (estimate - lo), estimate + factor * (hi - estimate)


def _studentized(
    means: np.ndarray, variances: np.ndarray, arr: np.ndarray, level: float
) -> tuple[float, float] | None:
    n = arr.size
    estimate = float(arr.mean())
    se = float(arr.std(ddof=1)) / math.sqrt(n)
    se_star = np.sqrt(variances / (n - 1))  # unbiased sd of the resample / sqrt(n)
    diff = means - estimate
    with np.errstate(divide="ignore", invalid="ignore"):
        # A constant resample has no spread: its t is +-inf (or 0 when it sits on the estimate).
        t_star = np.where(se_star > 0, diff / se_star, np.sign(diff) * np.inf)
    alpha = 1.0 - level
    with np.errstate(invalid="ignore"):  # inf - inf between two infinite order stats
        lo_q, hi_q = np.quantile(t_star, [alpha / 2, 1 - alpha / 2])
    if not (math.isfinite(lo_q) and math.isfinite(hi_q)):
        return None
    return estimate - hi_q * se, estimate - lo_q * se


def _bca(means: np.ndarray, arr: np.ndarray, level: float) -> tuple[float, float]:
    # Bias correction from the share of resamples below the estimate (ties split),
    # acceleration from the jackknife skewness (Efron & Tibshirani 1993, 14.3); the
    # leave-one-out means are (n * mean - x_i) / (n - 1) in closed form.
    estimate = float(arr.mean())
    alpha = 1.0 - level
    below = np.mean(means < estimate) + 0.5 * np.mean(means == estimate)
    below = min(max(below, 1.0 / (means.size + 1)), 1.0 - 1.0 / (means.size + 1))
    z0 = float(_special().ndtri(below))
    jack = (arr.sum() - arr) / (arr.size - 1)
    dev = jack.mean() - jack
    denom = 6.0 * float(np.sum(dev**2)) ** 1.5
    accel = float(np.sum(dev**3)) / denom if denom > 0 else 0.0
    qs = []
    for a in (alpha / 2, 1 - alpha / 2):
        za = float(_special().ndtri(a))
        qs.append(float(_special().ndtr(z0 + (z0 + za) / (1 - accel * (z0 + za)))))
    lo, hi = np.quantile(means, qs)
    return float(lo), float(hi)


def _interval_from_moments(
    arr: np.ndarray,
    means: np.ndarray,
    variances: np.ndarray,
    n_resamples: int,
    level: float,
    method: str,
    continuity: bool,
    bounds: tuple[float, float] | None,
) -> BootstrapResult:
    """The ``level`` interval on ``mean(arr)`` from its resamples' means and variances."""
    n = int(arr.size)
    estimate = float(arr.mean())
    used = method
    if arr.min() == arr.max():
        # Every resample is the same value, but n tasks that agree are not certainty.
        if bounds is not None and bounds[1] > bounds[0]:
            iv = wilson_over_tasks(estimate, n, level, bounds)
            return BootstrapResult(estimate, iv, 0.0, n, n_resamples, level, WILSON_TASKS)
        lo, hi = estimate, estimate
    elif method == "studentized":
        got = _studentized(means, variances, arr, level)
        if got is None:
            used = "expanded"
            got = _expanded(means, estimate, n, level)
        lo, hi = got
    elif method == "expanded":
        lo, hi = _expanded(means, estimate, n, level)
    elif method == "bca":
        lo, hi = _bca(means, arr, level)
    else:
        lo, hi = (float(v) for v in np.quantile(means, [(1 - level) / 2, (1 + level) / 2]))
    if continuity and lo != hi:
        half_step = lattice_step(arr) / (2 * n)
        lo, hi = lo - half_step, hi + half_step
    interval = _clip(Interval(float(lo), float(hi)), bounds)
    return BootstrapResult(
        estimate, interval, float(means.std(ddof=1)), n, n_resamples, level, used
    )


def _column_bounds(
    bounds: tuple[float, float] | Sequence[tuple[float, float] | None] | None, n_cols: int
) -> list[tuple[float, float] | None]:
    if bounds is None:
        return [None] * n_cols
    items: list[Any] = list(bounds)  # as the caller wrote them: one pair, or one per column
    if len(items) == 2:
        lo, hi = items
        if isinstance(lo, (int, float, np.number)) and isinstance(hi, (int, float, np.number)):
            return [(float(lo), float(hi))] * n_cols
    if len(items) != n_cols:
        raise ValueError(
            f"bounds must be one (low, high) pair or one per column ({n_cols}); got {len(items)}"
        )
    return [None if b is None else (float(b[0]), float(b[1])) for b in items]


def bootstrap_columns(
    x: Any,
    *,
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: Seed = 0,
    batch: int | None = None,
    method: Method = "studentized",
    continuity: bool = True,
    bounds: tuple[float, float] | Sequence[tuple[float, float] | None] | None = None,
) -> list[BootstrapResult | None]:
    """Bootstrap interval on the mean of every column of a (tasks x metrics) matrix.

    NaN marks a task without a value for that metric. Each column is the bootstrap of its
    own tasks' values, exactly what ``bootstrap_mean`` does to it (same ``method``,
    ``continuity``, ``bounds``, which may be one pair or one per column), but columns
    present on the same tasks share one resample, so a report over many metrics costs one
    resample matrix, not one per metric. The first column is resampled from ``seed``'s
    stream exactly as ``bootstrap_mean`` would resample it alone, so its interval equals
    ``bootstrap_mean(column 0, seed=seed)`` and a Generator passed as ``seed`` is left in
    the same state; every other draw comes from a child stream spawned off it. ``batch``
    sets the block size of a one-column call; with several columns the blocks are fixed,
    cache-sized ones, so no number depends on ``batch`` either way. Returns one
    ``BootstrapResult`` per column (``None`` for a column with no value at all). Raises
    ``ValueError`` on a matrix that is not two-dimensional, an unknown method or a bad level.
    """
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 2:
        raise ValueError(
            f"x must be a (tasks x metrics) matrix, NaN where a task lacks a metric; got shape "
            f"{arr.shape}"
        )
    method = _check_method(method)
    level = _check_level(level)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1; got {n_resamples}")
    col_bounds = _column_bounds(bounds, arr.shape[1])
    present = ~np.isnan(arr)
    # Columns present on the same tasks share a resample; patterns in first-column order.
    patterns: dict[bytes, list[int]] = {}
    for j in range(arr.shape[1]):
        patterns.setdefault(present[:, j].tobytes(), []).append(j)
    rng = as_generator(seed)
    child: list[np.random.Generator] = []

    def spawned() -> np.random.Generator:
        if not child:
            child.append(_spawn(rng))
        return child[0]

    out: list[BootstrapResult | None] = [None] * arr.shape[1]
    caller_used = False
    for cols in patterns.values():
        sub = arr[present[:, cols[0]]][:, cols]
        n = sub.shape[0]
        if n == 0:
            continue
        if n < 2:
            for c, j in enumerate(cols):
                out[j] = BootstrapResult(float(sub[0, c]), None, None, 1, 0, level, method)
            continue
        # The first pattern that resamples draws from the caller's stream; the rest (and
        # the first one's refinement) from one spawned child, in a fixed order.
        gen = spawned() if caller_used else rng
        caller_used = True
        means, variances = _resample_columns(sub, n_resamples, gen, batch, spawned)
        for c, j in enumerate(cols):
            out[j] = _interval_from_moments(
                sub[:, c], np.ascontiguousarray(means[:, c]),
                np.ascontiguousarray(variances[:, c]), n_resamples, level, method, continuity,
                col_bounds[j],
            )  # fmt: skip
    return out


def bootstrap_mean(
    x: Any,
    *,
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: Seed = 0,
    batch: int | None = None,
    method: Method = "studentized",
    continuity: bool = True,
    bounds: tuple[float, float] | None = None,
) -> BootstrapResult:
    """Bootstrap interval on the mean of ``x`` (one value per task).

    ``method``: ``"studentized"`` (default; bootstrap-t, falling back to ``"expanded"`` when
    too many resamples have no spread to studentize), ``"expanded"`` (the percentile
    interval widened by ``sqrt(n/(n-1)) * t_{n-1}/z``), ``"percentile"`` or ``"bca"``.
    ``continuity`` widens each end by half the lattice step of the mean when the values sit
    on a grid (pass rates do), the continuity correction for a discrete statistic.
    ``bounds`` clips the interval to the metric's range (``(0, 1)`` for a rate). With fewer
    than two values ``interval`` and ``standard_error`` are ``None``. When every value is
    the same no resample can differ: with ``bounds`` the interval is ``wilson_over_tasks``
    (``method="wilson_tasks"``), without them that value, zero width. Raises ``ValueError`` on empty input or an
    unknown method. One column of ``bootstrap_columns``: the same implementation.
    """
    arr = _as_1d(x)
    if arr.size == 0:
        raise ValueError("cannot bootstrap an empty sample; need at least one task")
    res = bootstrap_columns(
        arr[:, None], n_resamples=n_resamples, level=level, seed=seed, batch=batch,
        method=method, continuity=continuity, bounds=bounds,
    )[0]  # fmt: skip
    assert res is not None  # a non-empty NaN-free column always has a result
    return res


def paired_bootstrap(
    a: Any,
    b: Any,
    *,
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: Seed = 0,
    batch: int | None = None,
    method: Method = "studentized",
    continuity: bool = True,
    bounds: tuple[float, float] | None = None,
) -> BootstrapResult:
    """Bootstrap interval on ``mean(b - a)`` over paired tasks (``a[i]`` and ``b[i]`` are one task).

    Resampling tasks keeps each pair together, so the interval carries the covariance the
    pairing buys. ``bounds`` clips it to the difference's possible range. Raises
    ``ValueError`` when the arrays differ in length.
    """
    aa, bb = _as_1d(a, "a"), _as_1d(b, "b")
    if aa.shape != bb.shape:
        raise ValueError(f"paired arrays must align task by task: {aa.size} vs {bb.size} values")
    return bootstrap_mean(
        bb - aa, n_resamples=n_resamples, level=level, seed=seed, batch=batch, method=method,
        continuity=continuity, bounds=bounds,
    )  # fmt: skip


def unpaired_bootstrap(
    a: Any,
    b: Any,
    *,
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: Seed = 0,
    batch: int | None = None,
    bounds: tuple[float, float] | None = None,
) -> BootstrapResult:
    """Bootstrap interval on ``mean(b) - mean(a)`` for independent task sets.

    Each side is resampled on its own from one Generator, the sides taken in an order fixed
    by their contents (so swapping a and b mirrors the interval exactly). The percentile
    interval is widened by the ratio of the unbiased to the plug-in standard error of the
    difference times ``t/z`` at the Welch degrees of freedom (``method="expanded"``).
    ``interval`` is ``None`` when either side has fewer than two values; ``bounds`` clips it.
    """
    aa, bb = _as_1d(a, "a"), _as_1d(b, "b")
    level = _check_level(level)
    if aa.size == 0 or bb.size == 0:
        raise ValueError(f"both sides need at least one task; got {aa.size} and {bb.size}")
    estimate = float(bb.mean() - aa.mean())
    if aa.size < 2 or bb.size < 2:
        return BootstrapResult(
            estimate, None, None, int(min(aa.size, bb.size)), 0, level, "expanded"
        )
    rng = as_generator(seed)
    # Task order within a side means nothing here, so sort; then draw the sides in an order
    # fixed by content, so compare(a, b) is exactly the mirror of compare(b, a).
    aa, bb = np.sort(aa), np.sort(bb)
    key_a, key_b = (aa.size, aa.tobytes()), (bb.size, bb.tobytes())
    first_a = key_a <= key_b
    if first_a:
        ma = bootstrap_mean_distribution(aa, n_resamples, rng, batch=batch)
        mb = bootstrap_mean_distribution(bb, n_resamples, rng, batch=batch)
    else:
        mb = bootstrap_mean_distribution(bb, n_resamples, rng, batch=batch)
        ma = bootstrap_mean_distribution(aa, n_resamples, rng, batch=batch)
    dist = mb - ma
    if key_a == key_b:
        # Same values on both sides: the difference's distribution is symmetric about 0, and
        # pooling the draws with their mirror makes the interval say so exactly.
        dist = np.concatenate([dist, -dist])
    lo, hi = np.quantile(dist, [(1 - level) / 2, (1 + level) / 2])
    va, vb = aa.var(ddof=1) / aa.size, bb.var(ddof=1) / bb.size
    plug = aa.var() / aa.size + bb.var() / bb.size
    unbiased = va + vb
    if plug > 0 and unbiased > 0:
        # Welch-Satterthwaite degrees of freedom for the difference of two means.
        df = unbiased**2 / (va**2 / (aa.size - 1) + vb**2 / (bb.size - 1))
        factor = math.sqrt(unbiased / plug) * t_quantile(df, level) / z_quantile(level)
        lo = estimate - factor * (estimate - lo)
        hi = estimate + factor * (hi - estimate)
    return BootstrapResult(
        estimate, _clip(Interval(float(lo), float(hi)), bounds), float(dist.std(ddof=1)),
        int(min(aa.size, bb.size)), n_resamples, level, "expanded",
    )  # fmt: skip


# --------------------------------------------------------------------------------------
# Sign-flip permutation test
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PermutationResult:
    """A paired sign-flip test of ``mean(d) == 0``.

    ``pvalue`` is two-sided. ``exact`` says every sign pattern was enumerated; otherwise it is
    the +1-adjusted Monte Carlo estimate ``(hits + 1) / (n_resamples + 1)``, never 0.
    ``n_resamples`` is the number of sign patterns evaluated.
    """

    statistic: float
    pvalue: float
    exact: bool
    n_resamples: int


def sign_flip_test(
    d: Any, *, n_resamples: int = 9999, seed: Seed = 0, batch: int | None = None
) -> PermutationResult:
    """Two-sided sign-flip permutation test on paired differences ``d``.

    Under the null each task's difference is as likely to have either sign. Zero differences
    carry no sign and are left out. When ``2 ** m`` (m nonzero differences) is at most
    ``n_resamples`` every pattern is enumerated and the p-value is exact; otherwise signs are
    drawn at random (as per-value binomial counts when values repeat, which has the same
    distribution) and the +1-adjusted estimate is returned. Sums within a relative
    tolerance of the observed one count as ties (as extreme). With no nonzero difference the
    p-value is 1.
    """
    arr = _as_1d(d, "d")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1; got {n_resamples}")
    nz = arr[arr != 0]
    observed = float(nz.sum())
    m = nz.size
    if m == 0:
        return PermutationResult(float(arr.mean()) if arr.size else 0.0, 1.0, True, 1)
    target = abs(observed)
    tol = 1e-9 * max(1.0, float(np.abs(nz).sum()))
    stat = float(arr.mean())
    if m <= 62 and 2**m <= n_resamples:
        patterns = np.arange(2**m, dtype=np.uint64)[:, None]
        bits = (patterns >> np.arange(m, dtype=np.uint64)) & np.uint64(1)
        sums = (1.0 - 2.0 * bits.astype(float)) @ nz
        hits = int(np.count_nonzero(np.abs(sums) >= target - tol))
        return PermutationResult(stat, hits / 2**m, True, 2**m)
    rng = as_generator(seed)
    uniq, counts = _distinct(nz)
    hits = 0
    if uniq.size <= m // 2:
        # Sum of c signs on one value v is v * (2 * Binomial(c, 1/2) - c).
        step = _batch_rows(batch, uniq.size, n_resamples)
        for start in range(0, n_resamples, step):
            stop = min(start + step, n_resamples)
            heads = rng.binomial(counts, 0.5, size=(stop - start, uniq.size))
            sums = (2.0 * heads - counts) @ uniq
            hits += int(np.count_nonzero(np.abs(sums) >= target - tol))
    else:
        words = (m + 63) // 64
        step = _batch_rows(batch, m, n_resamples)
        for start in range(0, n_resamples, step):
            stop = min(start + step, n_resamples)
            # Full-range uint64 words: one generator draw each, no rejection, so the stream
            # is consumed identically whatever the batch size.
            raw = rng.integers(
                0,
                np.iinfo(np.uint64).max,
                size=(stop - start, words),
                dtype=np.uint64,
                endpoint=True,
            )
            drawn = np.unpackbits(raw.view(np.uint8), axis=1, count=m)
            sums = (1.0 - 2.0 * drawn) @ nz
            hits += int(np.count_nonzero(np.abs(sums) >= target - tol))
    return PermutationResult(stat, (hits + 1) / (n_resamples + 1), False, n_resamples)
