"""Confidence intervals over tasks, paired run comparison, and re-run variance.

Every number here is a mean over tasks (``task_key``), never rows, with a task-bootstrap
interval from ``wai_exp.score.stats.resample`` (seeded, batched; studentized bootstrap-t
for one-sample means). The paired verdicts of ``compare_runs`` read the expanded percentile
interval without the lattice continuity correction (``VERDICT_METHOD``,
``VERDICT_CONTINUITY``): the calibration study, ``experiments/bench/bench_calibration.py``,
measured their false positives near the nominal 5% that way, and their power at
``holdout_size``'s n short of 80% only on small holdouts of equal difficulty. ``metric`` is ``"pass_at_1"`` (binary ``reward``,
partial and unjudged rows skipped) or a marker name read from ``row["markers"]`` (a
``"marker:"`` prefix is accepted and ignored).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.rows.keys import prompt_mismatch, task_key
from wai_exp.score.stats.passat import ADAPTIVE_REASONS, as_rows, first_batch
from wai_exp.score.stats.resample import (
    Interval,
    Method,
    TaskGroups,
    as_generator,
    binary_reward,
    bootstrap_mean,
    factorize,
    marker_groups,
    noise_band,
    paired_bootstrap,
    paired_boundary_interval,
    paired_boundary_words,
    reward_groups,
    sign_flip_test,
    t_quantile,
    unpaired_bootstrap,
    welch_p,
)

__all__ = [
    "MIN_CI_TASKS",
    "MIN_PAIRED",
    "MIN_RUNS_FOR_DISTRIBUTION",
    "NO_SIGNAL",
    "PASS_AT_1",
    "STABILITY_BANDS",
    "VERDICT_CONTINUITY",
    "VERDICT_METHOD",
    "compare_runs",
    "eval_variance",
    "marker_names",
    "marker_summary",
    "metric_groups",
    "metric_summary",
    "noise_band",
    "paired_task_interval",
    "rollout_std",
    "run_intervals",
    "stability",
]

PASS_AT_1 = "pass_at_1"
#: Below this many tasks a task bootstrap is not an interval (matches pass_at's 3 groups).
MIN_CI_TASKS = 3
#: compare_runs' default: fewer shared tasks than this and the comparison is unpaired.
MIN_PAIRED = 5
#: Fewer re-runs than this is a difference, not a distribution.
MIN_RUNS_FOR_DISTRIBUTION = 3
#: The bootstrap interval a verdict reads (compare_runs, delta_report): the percentile
#: interval expanded by ``sqrt(n/(n-1)) t_{n-1}/z`` (Hesterberg 2015), without the lattice
#: continuity correction. The calibration study (experiments/bench/bench_calibration.py)
#: measured the alternative, bootstrap-t with the continuity correction, at
#: 3.1-5.8% false positives and 70-81% power at holdout_size's closed-form n; the
#: correction widened an interval whose small-n tails were already t-like, and at small n
#: the bootstrap-t's own tails are heavier than t (resamples with little spread give huge
#: t values), which cost 1.5-4 points of power against the expanded interval at the same
#: false-positive rate (2,000 replications per cell, equal difficulty, 14 to 93 tasks).
#: At holdout_size's n_tasks (the spec's closed form), 3,000 replications per cell over the
#: 24-cell grid measured false positives at 4.3-6.2% and power at 75.1-80.2% on equal
#: difficulties, 79.8-84.9% with spread (power.MEASURED_POWER has each cell); at the
#: t-quantile count ``n_tasks_t``, 4.1-5.7% and 77.2-81.5% / 83-87%. The sign-flip
#: permutation p-value (computed exactly on the lattice, plain or mid-p) deciding instead
#: would not close the small-n gap: mid-p measured within a point of this interval, the
#: plain exact test 1-6 points below it (experiments/bench/calibration_alternatives.py).
#: The gap is the price of estimating the sd from the same tasks; only a test that reads
#: the variance off the rollouts reaches 80% at the closed-form n, and it answers whether b
#: beats a on these tasks rather than on tasks drawn like them, so it is not the verdict.
VERDICT_METHOD: Method = "expanded"
#: Whether a verdict's interval widens each end by half the lattice step of the mean: off,
#: see ``VERDICT_METHOD`` (on, it held false positives near 4% and cost power).
VERDICT_CONTINUITY = False
#: ``eval_variance``'s ``stability`` when every run sits at 0 (or 1) on every task: the runs
#: agree because nothing can vary, not because the eval is stable.
NO_SIGNAL = "no_signal"
#: Bands for a re-run standard deviation, in points (100 x a rate), upper bound exclusive.
#: Olmo 3 reports each eval's spread over repeated runs in points and treats a benchmark
#: that moves by under half a point as one a small delta can be read on, and one that moves
#: by several points as unusable for small deltas. These cut-offs are ours, in that spirit:
#: under 0.5 "stable", under 1.5 "moderate", under 3 "noisy", else "unstable".
STABILITY_BANDS: tuple[tuple[float, str], ...] = (
    (0.5, "stable"),
    (1.5, "moderate"),
    (3.0, "noisy"),
    (math.inf, "unstable"),
)


def _metric_name(metric: str) -> str:
    if not isinstance(metric, str) or not metric:
        raise ValueError(f"metric must be 'pass_at_1' or a marker name; got {metric!r}")
    return metric[len("marker:") :] if metric.startswith("marker:") else metric


def metric_groups(rows: Sequence[Mapping[str, Any]] | Any, metric: str = PASS_AT_1) -> TaskGroups:
    """Per-task values of ``metric`` over ``rows`` (a row list or anything with ``.rows``)."""
    name = _metric_name(metric)
    row_list = as_rows(rows)
    return reward_groups(row_list) if name == PASS_AT_1 else marker_groups(row_list, name)


def _summary_from_groups(
    groups: TaskGroups, metric: str, n_boot: int, seed: int | np.random.Generator
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "mean": None,
        "ci95": None,
        "n_tasks": groups.n_tasks,
        "n_rows": groups.n_rows,
        "n_rows_at_1": int(np.count_nonzero(groups.values == 1.0)),
        "n_rows_at_0": int(np.count_nonzero(groups.values == 0.0)),
        "degenerate": False,
    }
    if groups.n_tasks == 0:
        what = "binary reward" if metric == PASS_AT_1 else f"marker {metric!r}"
        out["note"] = (
            f"no row carries a {what} ({groups.n_skipped} rows without one): nothing measured"
        )
        return out
    means = groups.means
    out["mean"] = float(means.mean())
    first = groups.values[0]
    if groups.n_rows > 0 and bool(np.all(groups.values == first)):
        out["degenerate"] = True
        out["warning"] = (
            f"every one of the {groups.n_rows} rows scored {float(first):g} on {metric}: it has "
            "not been shown to come out any other way (a marker whose key never matches looks "
            "the same), so no interval is given and it cannot guard must_not_regress"
        )
        return out
    if groups.n_tasks < MIN_CI_TASKS:
        out["note"] = (
            f"{metric} is on {counted(groups.n_tasks, 'task')}; an interval needs at least "
            f"{MIN_CI_TASKS} tasks, so ci95 is None"
        )
        return out
    # A mean of task means cannot leave the range of the row values; clip to it.
    bounds = (float(groups.values.min()), float(groups.values.max()))
    res = bootstrap_mean(means, n_resamples=n_boot, seed=seed, bounds=bounds)
    if res.interval is not None:
        out["ci95"] = res.interval.as_list()
    return out


def metric_summary(
    rows: Sequence[dict] | Any,
    metric: str = PASS_AT_1,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Mean over tasks with a task-bootstrap 95% interval.

    Returns ``mean``, ``ci95`` (``[lo, hi]``), ``n_tasks``, ``n_rows``, ``n_rows_at_1``,
    ``n_rows_at_0``, ``degenerate``, and ``note`` or ``warning`` when there is one. ``ci95``
    is ``None`` (with a note naming the task count) below ``MIN_CI_TASKS`` tasks, and when
    every row scored the same value (``degenerate``, with a warning: an unfireable marker and
    an always-true one look alike). With no row carrying the metric ``mean`` is ``None``.
    Rows an adaptive policy added (``first_batch``) are left out, and ``note`` counts them.
    """
    name = _metric_name(metric)
    kept, n_added = first_batch(as_rows(rows))
    out = _summary_from_groups(metric_groups(kept, name), name, n_boot, seed)
    if n_added:
        note = adaptive_note(n_added)
        out["note"] = f"{out['note']}; {note}" if out.get("note") else note
    return out


def adaptive_note(n_added: int) -> str:
    """The words for rows ``first_batch`` left out of a per-task mean."""
    one = n_added == 1
    return (
        f"{counted(n_added, 'row')} an adaptive policy added (selection_reason "
        f"{'/'.join(sorted(ADAPTIVE_REASONS))}) {'is' if one else 'are'} left out: "
        f"{'it is' if one else 'they are'} drawn where a task's outcomes split and would skew "
        "its rate, so each task reads its fixed first batch"
    )


def marker_names(rows: Sequence[dict] | Any) -> list[str]:
    """Sorted names of every numeric marker any row carries in ``row["markers"]``."""
    names: set[str] = set()
    for row in as_rows(rows):
        markers = row.get("markers")
        if isinstance(markers, Mapping):
            for key, value in markers.items():
                if isinstance(value, (int, float)) and not isinstance(value, str):
                    names.add(str(key))
    return sorted(names)


def marker_summary(
    rows: Sequence[dict] | Any,
    names: Sequence[str] | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """``metric_summary`` for every marker on the rows (or only ``names``), keyed by name."""
    row_list = as_rows(rows)
    chosen = marker_names(row_list) if names is None else [_metric_name(n) for n in names]
    return {
        name: _summary_from_groups(marker_groups(row_list, name), name, n_boot, seed)
        for name in chosen
    }


# --------------------------------------------------------------------------------------
# compare_runs
# --------------------------------------------------------------------------------------


def _verdict(interval: list[float] | None) -> str:
    if interval is None:
        return "no_difference_detected"
    if interval[0] > 0:
        return "b_better"
    if interval[1] < 0:
        return "a_better"
    return "no_difference_detected"


def _delta_bounds(ga: TaskGroups, gb: TaskGroups) -> tuple[float, float]:
    # b - a can be no lower than b's smallest row value minus a's largest, and vice versa.
    lo = float(gb.values.min() - ga.values.max())
    hi = float(gb.values.max() - ga.values.min())
    return lo, hi


def paired_task_interval(
    a: np.ndarray,
    b: np.ndarray,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: Any = 0,
    bounds: tuple[float, float] = (-1.0, 1.0),
) -> tuple[Interval | None, str, str | None]:
    """The verdict's interval on ``mean(b - a)`` over paired task rates, its method and note.

    The paired bootstrap a verdict reads (``VERDICT_METHOD``, ``VERDICT_CONTINUITY``,
    clipped to ``bounds``), or, when every paired difference is the same and no resample
    can differ, ``paired_boundary_interval`` with a note saying so. ``compare_runs``, the
    floor's gap and a sweep's paired deltas all answer "did it move" with this.
    """
    boot = paired_bootstrap(
        a, b, n_resamples=n_boot, level=level, seed=seed, bounds=bounds,
        method=VERDICT_METHOD, continuity=VERDICT_CONTINUITY,
    )  # fmt: skip
    d = b - a
    if d.size and d.min() == d.max():
        iv = paired_boundary_interval(float(a.mean()), float(b.mean()), d.size, level)
        return iv, "paired_boundary", paired_boundary_words(float(d[0]), d.size)
    return boot.interval, "paired_bootstrap", None


def _paired(
    ga: Any,
    gb: Any,
    idx: tuple[dict[Any, int], dict[Any, int]],
    shared: list[Any],
    n_boot: int,
    rng: Any,
    level: float,
    out: dict[str, Any],
    notes: list[str],
) -> None:
    """The paired comparison over the shared tasks: bootstrap interval, sign-flip p."""
    a_idx, b_idx = idx
    ma = ga.means[[a_idx[k] for k in shared]]
    mb = gb.means[[b_idx[k] for k in shared]]
    interval, method, note = paired_task_interval(
        ma, mb, n_boot=n_boot, level=level, seed=rng, bounds=_delta_bounds(ga, gb)
    )
    perm = sign_flip_test(mb - ma, n_resamples=n_boot, seed=rng)
    if note:
        notes.append(note)
    out.update(
        mean_a=float(ma.mean()),
        mean_b=float(mb.mean()),
        delta=float((mb - ma).mean()),
        ci95=None if interval is None else interval.as_list(),
        p_value=perm.pvalue,
        p_exact=perm.exact,
        paired=True,
        method=method,
    )


def _unpaired(
    ga: Any,
    gb: Any,
    name: str,
    n_shared: int,
    min_paired: int,
    n_boot: int,
    rng: Any,
    level: float,
    out: dict[str, Any],
    notes: list[str],
) -> None:
    """Too few shared tasks: unpaired task means, Welch's p."""
    out["method"] = "unpaired_bootstrap"
    notes.append(
        f"only {counted(n_shared, 'shared task')} (< min_paired={min_paired}): compared unpaired "
        "task means, which ignores per-task difficulty and is much less precise; evaluate "
        "both runs on the same tasks"
    )
    if ga.n_tasks == 0 or gb.n_tasks == 0:
        empty = "a" if ga.n_tasks == 0 else "b"
        notes.append(f"run {empty} has no task with a {name} value: nothing to compare")
    else:
        ma, mb = ga.means, gb.means
        boot = unpaired_bootstrap(
            ma, mb, n_resamples=n_boot, level=level, seed=rng, bounds=_delta_bounds(ga, gb)
        )
        interval = boot.interval
        if interval is not None and ma.min() == ma.max() and mb.min() == mb.max():
            interval = paired_boundary_interval(
                float(ma.mean()), float(mb.mean()), ma.size, level, n_b=mb.size
            )
            out["method"] = "unpaired_boundary"
            notes.append(
                "every task on each side has the same value, so the bootstrap cannot vary: "
                "ci95 is Newcombe's interval from each run's Wilson interval over tasks"
            )
        out.update(
            mean_a=float(ma.mean()),
            mean_b=float(mb.mean()),
            delta=boot.estimate,
            ci95=None if interval is None else interval.as_list(),
        )
        p = welch_p(ma, mb)
        if p is not None:
            out["p_value"], out["p_exact"] = p, False
        if boot.interval is None:
            notes.append("each side needs at least 2 tasks for an interval")


def _prompt_check(
    a: Sequence[dict], b: Sequence[dict], out: dict[str, Any], notes: list[str]
) -> None:
    """Paired tasks must ask the same thing on both sides, else ``not_comparable``."""
    prompts = prompt_mismatch(a, b)
    out["prompt_mismatch"] = prompts
    out["not_comparable"] = []
    if prompts["n_mismatched"] and out["paired"]:
        ex = prompts["examples"][0]
        out["not_comparable"].append(
            f"prompts: {prompts['n_mismatched']} of {prompts['n_checked']} paired tasks carry "
            f"different prompts in a and b (task {ex['task']}: {ex['a']!r} vs {ex['b']!r}); "
            "one task id names two different asks, so the paired delta compares different "
            "questions. Run b on a's tasks (simulate(tasks=...))"
        )
        out["verdict"] = "not_comparable"
        notes.append(out["not_comparable"][0])


def compare_runs(
    a: Sequence[dict] | Any,
    b: Sequence[dict] | Any,
    metric: str = PASS_AT_1,
    n_boot: int = 2000,
    seed: int = 0,
    min_paired: int = MIN_PAIRED,
    level: float = 0.95,
) -> dict[str, Any]:
    """Is run ``b`` different from run ``a`` on ``metric``?

    Tasks both runs saw are compared as paired differences (b minus a per task). ``ci95`` is
    a ``level`` bootstrap interval over those pairs (the expanded percentile interval,
    without the lattice continuity correction: ``VERDICT_METHOD`` says why; over the grid of
    experiments/bench/bench_calibration.py it measured false positives near the nominal 5%
    and, at ``holdout_size``'s n, power at 80% on large holdouts and with spread
    difficulties but down to 75% on small equal-difficulty ones, ``MEASURED_POWER``),
    ``p_value`` a two-sided sign-flip permutation test (exact when the nonzero pairs are
    few enough to enumerate within ``n_boot`` patterns). With fewer than ``min_paired``
    shared tasks it falls back to unpaired task means (Welch t p-value) and ``note`` says so.
    ``verdict`` is ``"b_better"`` / ``"a_better"`` when the interval excludes zero, else
    ``"no_difference_detected"`` (the interval covers zero, not "the runs are equal").
    Tasks on one side only are dropped from a paired comparison and counted in the note;
    ``paired_share`` is the shared fraction of every task either run saw. Paired tasks
    must ask the same thing on both sides: ``prompt_mismatch`` counts those whose prompt
    sets differ, and any such task makes the verdict ``"not_comparable"`` with the cause
    in ``not_comparable`` (empty when the runs compare). Each task reads its fixed first
    batch: rows an adaptive policy added (``first_batch``) are left out and counted in the
    note. Raises
    ``ValueError`` when ``level`` is outside (0, 1) or ``min_paired < 1``.
    """
    name = _metric_name(metric)
    if min_paired < 1:
        raise ValueError(f"min_paired must be >= 1; got {min_paired}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95; got {level!r}")
    a, b = as_rows(a), as_rows(b)
    (a_kept, a_added), (b_kept, b_added) = first_batch(a), first_batch(b)
    ga, gb = metric_groups(a_kept, name), metric_groups(b_kept, name)
    a_idx, b_idx = ga.index(), gb.index()
    shared = sorted(set(a_idx) & set(b_idx))
    union = len(set(a_idx) | set(b_idx))
    only_a, only_b = ga.n_tasks - len(shared), gb.n_tasks - len(shared)
    out: dict[str, Any] = {
        "metric": name,
        "mean_a": None,
        "mean_b": None,
        "delta": None,
        "ci95": None,
        "level": level,
        "p_value": None,
        "p_exact": None,
        "paired": False,
        "n_paired": len(shared),
        "n_tasks_a": ga.n_tasks,
        "n_tasks_b": gb.n_tasks,
        "n_only_a": only_a,
        "n_only_b": only_b,
        "paired_share": (len(shared) / union) if union else None,
        "verdict": "no_difference_detected",
        "method": None,
        "note": "",
    }
    notes: list[str] = [
        f"run {side}: {adaptive_note(n)}" for side, n in (("a", a_added), ("b", b_added)) if n
    ]
    rng = as_generator(seed)
    if len(shared) >= min_paired:
        _paired(ga, gb, (a_idx, b_idx), shared, n_boot, rng, level, out, notes)
        if only_a or only_b:
            n_one_side = only_a + only_b
            notes.append(
                f"{counted(n_one_side, 'task')} on one side only ({only_a} in a, {only_b} in b) "
                f"{'was' if n_one_side == 1 else 'were'} dropped: the verdict covers "
                f"{len(shared)} of {union} tasks "
                f"(paired_share {len(shared) / union:.0%})"
            )
    else:
        _unpaired(ga, gb, name, len(shared), min_paired, n_boot, rng, level, out, notes)
    out["verdict"] = _verdict(out["ci95"])
    _prompt_check(a, b, out, notes)
    out["note"] = "; ".join(notes)
    return out


# --------------------------------------------------------------------------------------
# eval_variance
# --------------------------------------------------------------------------------------


def stability(run_std: float | None) -> str | None:
    """The ``STABILITY_BANDS`` label for a re-run standard deviation given as a rate."""
    if run_std is None:
        return None
    points = 100.0 * run_std
    for upper, label in STABILITY_BANDS:
        if points < upper:
            return label
    return STABILITY_BANDS[-1][1]


def _run_label(row: Mapping[str, Any], by: str | None) -> Any:
    lineage = row.get("lineage")
    lineage = lineage if isinstance(lineage, Mapping) else {}
    if by is not None:
        value = row.get(by)
        return lineage.get(by) if value is None else value
    value = lineage.get("eval_run")
    return lineage.get("scoring_run_id") if value is None else value


def _split_runs(
    rows: Sequence[Mapping[str, Any]], by: str | None
) -> tuple[list[Any], list[list], int]:
    """(run labels, each run's rows, stray rows left out). Rows that name no run are not a
    run of their own: when other rows do name theirs, the strays are left out and counted;
    when no row names one, all of them are the one run."""
    buckets: dict[Any, list] = {}
    for row in rows:
        buckets.setdefault(_run_label(row, by), []).append(row)
    stray = 0
    if None in buckets and len(buckets) > 1:
        stray = len(buckets.pop(None))
    labels = sorted(buckets, key=_label_order)
    return labels, [buckets[label] for label in labels], stray


def _label_order(label: Any) -> tuple[int, Any]:
    # Run numbers sort numerically, ids as text, unlabeled rows last.
    if isinstance(label, (int, np.integer)) and not isinstance(label, bool):
        return (0, int(label))
    return (2, "") if label is None else (1, str(label))


def _mean_of_task_means(codes: np.ndarray, values: np.ndarray, n_tasks: int) -> float | None:
    counts = np.bincount(codes, minlength=n_tasks)
    sums = np.bincount(codes, weights=values, minlength=n_tasks)
    has = counts > 0
    return float((sums[has] / counts[has]).mean()) if has.any() else None


def _run_means(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """pass@1 and every marker's task mean for one run.

    Task keys are factorized once per run; each metric is then two ``np.bincount`` calls
    over the rows that carry it.
    """
    uniq, codes = factorize([task_key(row) for row in rows])
    n_tasks = len(uniq)
    rewards = [binary_reward(row) for row in rows]
    means: dict[str, float] = {}
    graded = np.fromiter((r is not None for r in rewards), dtype=bool, count=len(rewards))
    if graded.any():
        vals = np.fromiter((r for r in rewards if r is not None), dtype=float)
        got = _mean_of_task_means(codes[graded], vals, n_tasks)
        if got is not None:
            means[PASS_AT_1] = got
    cols: dict[str, tuple[list[int], list[float]]] = {}
    for i, markers in enumerate([row.get("markers") for row in rows]):
        if not markers or not isinstance(markers, Mapping):
            continue
        for name, value in markers.items():
            # Numbers only (bools count as 0/1); NaN is "not measured" (NaN != NaN).
            if value is None or isinstance(value, str) or value != value:
                continue
            col = cols.get(name)
            if col is None:
                col = cols[name] = ([], [])
            col[0].append(i)
            col[1].append(float(value))
    for name, (idx, col_values) in cols.items():
        got = _mean_of_task_means(
            codes[np.asarray(idx, dtype=np.intp)], np.asarray(col_values), n_tasks
        )
        if got is not None:
            means[str(name)] = got
    return means


def rollout_std(run_rows: Sequence[Sequence[Mapping[str, Any]]]) -> float | None:
    """The sd of a run's pass@1 that its rollouts' own noise predicts, from the rows.

    Each task's rows are draws at its rate, estimated pooled over every run (unbiased:
    ``c (n - c) / (n (n - 1))`` from ``n`` rows with ``c`` passes); a run's pass@1 is a mean
    of task rates over its ``k`` rows each, so its variance is ``sum(p (1 - p) / k) / T^2``
    over its ``T`` tasks, averaged over runs. A re-run on the same tasks moves at least this
    much, so a measured spread below it (three runs that land on one number by chance) is
    not the eval's stability. ``None`` when no row has a binary reward.
    """
    per_run: list[tuple[np.ndarray, np.ndarray]] = []
    keys: list[str] = []
    for rows in run_rows:
        graded = [(task_key(r), b) for r in rows if (b := binary_reward(r)) is not None]
        per_run.append(
            (np.array([k for k, _ in graded], dtype=object), np.array([b for _, b in graded]))
        )
        keys += [k for k, _ in graded]
    if not keys:
        return None
    uniq, _ = factorize(keys)
    index = {k: i for i, k in enumerate(uniq)}
    n_all = np.zeros(len(uniq))
    c_all = np.zeros(len(uniq))
    counts = []
    for run_keys, vals in per_run:
        codes = np.fromiter((index[k] for k in run_keys), dtype=np.intp, count=len(run_keys))
        n = np.bincount(codes, minlength=len(uniq)).astype(float)
        n_all += n
        c_all += np.bincount(codes, weights=vals, minlength=len(uniq))
        counts.append(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        var_task = np.where(n_all > 1, c_all * (n_all - c_all) / (n_all * (n_all - 1)), 0.0)
    variances = []
    for n in counts:
        seen = n > 0
        if seen.any():
            variances.append(float((var_task[seen] / n[seen]).sum()) / int(seen.sum()) ** 2)
    return math.sqrt(float(np.mean(variances))) if variances else None


def _chdtri(df: int, p: float) -> float:
    """The chi-square quantile with upper tail ``p`` at ``df`` degrees of freedom. scipy is
    imported here, not with the module: only re-run variance (``runs=N``) needs it, and every
    run's summary imports this module for its intervals (about 0.15 s of CPU a process).
    ``scipy.special``, not ``scipy.stats``: that costs about 0.6 s more."""
    from scipy import special

    return float(special.chdtri(df, p))


def _implausibly_low(run_std: float, floor: float, n_runs: int) -> bool:
    """Whether ``n_runs`` runs spread less than the rollouts' own ``floor`` sd allows at the
    2.5% level: ``(n - 1) s^2 / floor^2`` under the chi-square's lower 2.5% point."""
    df = n_runs - 1
    return run_std * run_std * df < floor * floor * _chdtri(df, 0.975)


def _stray_note(n_stray: int, n_rows: int, where: str) -> str:
    one = n_stray == 1
    return (
        f"{n_stray} of {counted(n_rows, 'row')} {'names' if one else 'name'} no run ({where}) "
        f"and {'is' if one else 'are'} left out: {'it is' if one else 'they are'} not a re-run "
        f"of {'its' if one else 'their'} own. Stamp {'it' if one else 'them'}, or pass each "
        "re-run as its own argument"
    )


def _run_count_note(n_runs: int) -> str:
    """What ``n_runs`` re-runs can say about the spread, and the fix."""
    if n_runs < 2:
        return (
            f"{counted(n_runs, 'run')}: a spread needs at least two, so run_std is None; re-run "
            "the eval (simulate(runs=3)) to measure it"
        )
    if n_runs < MIN_RUNS_FOR_DISTRIBUTION:
        return (
            f"{n_runs} runs is a difference, not a distribution: run_std is rough; use 3 or "
            f"more runs and pass run_std_runs={n_runs} to delta_report so its band uses the t "
            "quantile"
        )
    return (
        f"run_std from {n_runs} runs is itself an estimate: pass run_std_runs={n_runs} to "
        f"delta_report so its band uses the t quantile at df={n_runs - 1}"
    )


def _chance_floor(
    run_std: float | None,
    run_rows: Sequence[Sequence[Mapping[str, Any]]],
    n_runs: int,
    notes: list[str],
) -> float | None:
    """``rollout_std`` when the runs spread far less than it (a note says so), else None.

    Re-runs that agree far more than their own rollouts allow are a chance, not a stable
    eval: the floor a delta reads, and the stability word, take the spread the rollouts give.
    """
    floor = rollout_std(run_rows)
    if run_std is None or floor is None or not _implausibly_low(run_std, floor, n_runs):
        return None
    notes.append(
        f"run_std {run_std:.4f} over {n_runs} runs is far below the {floor:.4f} that the "
        "rollouts' own noise gives a re-run (each task's rate redrawn over its rows; "
        "p < 0.025): the runs agreed by chance; run_std_by_metric, the band, the interval "
        f"and the stability word use {floor:.4f}"
    )
    return floor


def eval_variance(
    *runs: Sequence[dict] | Any,
    metric: str = PASS_AT_1,
    by: str | None = None,
) -> dict[str, Any]:
    """How much an evaluation moves when the same model is evaluated again.

    Pass each re-run's rows as its own argument, or one row list whose rows say which run
    they belong to: ``by`` (a top-level or lineage key) when given, else
    ``lineage.eval_run``, else ``lineage.scoring_run_id``. Each run's ``metric`` is a mean
    over its tasks. Returns ``runs`` (labels), ``means`` (per run), ``mean``, ``run_std`` (the
    sample sd over runs, ``None`` below two), ``noise_band`` (``noise_band(run_std)`` =
    1.96 x sqrt(2) x run_std: what a one-run-per-side delta moves on its own),
    ``run_std_by_metric`` (the same sd for pass@1 and every marker every run carries, for
    ``delta_report(run_std=)``), ``n_runs`` (pass as ``delta_report(run_std_runs=)``),
    ``n_stray_rows`` (rows of a single list that name no run while others do: left out, and
    a note says how many; when no row names a run they are the one run),
    ``stability`` (``STABILITY_BANDS`` label of run_std in points; ``NO_SIGNAL`` when every
    run scored 0, or every run 1, on every task), ``stability_points``, ``rollout_std``
    (pass@1 only, else ``None``: the sd the rollouts' own noise gives a re-run,
    ``rollout_std()``, set when the measured ``run_std`` is far below it (under the
    chi-square's 2.5% point): the runs agreed by chance, and pass@1's ``run_std_by_metric``,
    ``noise_band``, ``stability`` and ``run_intervals`` use it, with a note) and
    ``notes``. Raises ``ValueError`` when no rows are given.
    """
    name = _metric_name(metric)
    notes: list[str] = []
    if not runs:
        raise ValueError("eval_variance needs rows: pass each re-run as an argument, or one list")
    n_stray = 0
    if len(runs) == 1:
        rows = as_rows(runs[0])
        labels, run_rows, n_stray = _split_runs(rows, by)
        if n_stray:
            where = f"key {by!r}" if by else "lineage.eval_run or lineage.scoring_run_id"
            notes.append(_stray_note(n_stray, len(rows), where))
        if len(run_rows) == 1:
            where = f"key {by!r}" if by else "lineage.eval_run or lineage.scoring_run_id"
            notes.append(
                f"the rows name one run ({where}): pass each re-run as its own argument, or "
                "simulate(runs=3) so rows carry lineage.eval_run"
            )
    else:
        labels = list(range(len(runs)))
        run_rows = [as_rows(r) for r in runs]
    per_run = [_run_means(r) for r in run_rows]
    means = [m.get(name) for m in per_run]
    measured = [m for m in means if m is not None]
    missing = len(means) - len(measured)
    if missing:
        one = missing == 1
        notes.append(
            f"{counted(missing, 'run')} {'carries' if one else 'carry'} no {name} value and "
            f"{'is' if one else 'are'} left out"
        )
    n_runs = len(measured)

    def sd(values: list[float]) -> float | None:
        return float(np.std(values, ddof=1)) if len(values) >= 2 else None

    run_std = sd(measured)
    shared = set(per_run[0]) if per_run else set()
    for m in per_run[1:]:
        shared &= set(m)
    # pass@1 first, then every marker all runs carry; a metric some run lacks has no floor.
    by_metric: dict[str, float | None] = {
        PASS_AT_1: sd([m[PASS_AT_1] for m in per_run if PASS_AT_1 in m])
    }
    for metric_name in sorted(shared - {PASS_AT_1}):
        by_metric[metric_name] = sd([m[metric_name] for m in per_run])
    notes.append(_run_count_note(n_runs))
    floor = _chance_floor(run_std, run_rows, n_runs, notes) if name == PASS_AT_1 else None
    if floor is not None:
        by_metric[PASS_AT_1] = floor
    label = stability(run_std if floor is None else floor)
    if run_std == 0.0 and measured and all(m in (0.0, 1.0) for m in measured):
        # Every row of every run at the same end of the scale: the runs agree because nothing
        # can vary, which says nothing about how far a re-run would move a real pass rate.
        label = NO_SIGNAL
        notes.append(
            f"every run scored {measured[0]:g} on {name} on every task: that is no signal, "
            "not stability; run_std 0 here cannot floor a delta. Evaluate on tasks the model "
            "sometimes passes"
        )
    return {
        "metric": name,
        "runs": labels,
        "means": means,
        "mean": float(np.mean(measured)) if measured else None,
        "run_std": run_std,
        "rollout_std": floor,
        "noise_band": noise_band(run_std if floor is None else floor),
        "run_std_by_metric": by_metric,
        "n_runs": n_runs,
        "n_stray_rows": n_stray,
        "stability": label,
        "stability_points": None if run_std is None else 100.0 * run_std,
        # JSON has no infinity: the last band is open-ended (upper bound None).
        "stability_bands": [
            [None if math.isinf(upper) else upper, label] for upper, label in STABILITY_BANDS
        ],
        "notes": notes,
    }


def run_intervals(report: Mapping[str, Any]) -> tuple[list[float] | None, list[float] | None]:
    """95% intervals ``(mean_ci95, run_std_ci95)`` for an ``eval_variance`` report.

    The first is on the runs' mean (t over the run means), the second on ``run_std``
    (chi-square on the sample variance; both from ``rollout_std`` when the report set it).
    With ``n`` runs the sd has ``n - 1`` degrees of freedom, so from three runs its interval
    is wide (about 0.52x to 6.3x the estimate): the honest size of "rough". Returns ``(None, None)`` below two runs, when ``run_std`` is
    None or when some run has no mean. Never raises on a report ``eval_variance`` returned.
    """
    sd, n = report.get("run_std"), int(report.get("n_runs") or 0)
    if sd is not None and (floor := report.get("rollout_std")) is not None:
        sd = max(sd, floor)  # far below what rollouts alone give a re-run: agreed by chance
    means = [m for m in report.get("means", []) if m is not None]
    if sd is None or n < 2 or len(means) != n:
        return None, None
    df = n - 1
    center = float(sum(means) / n)
    half = t_quantile(df) * sd / n**0.5
    lo = sd * (df / _chdtri(df, 0.025)) ** 0.5
    hi = sd * (df / _chdtri(df, 0.975)) ** 0.5
    return [center - half, center + half], [lo, hi]
