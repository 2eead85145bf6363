"""Plots for graded stages: pure functions from rows/report to a matplotlib ``Figure``.

Figures are built with ``matplotlib.figure.Figure`` directly, never through ``pyplot``: no
global figure registry to leak, no GUI backend picked up from the user's environment, and
``savefig`` renders with Agg. The numbers behind each plot come from functions here that
return arrays, so tests check the numbers rather than pixels.

A row counts when ``score.resample.binary_reward`` says it is a pass or a fail (``reward``, else
``qwen_reward``, is 0 or 1 and the judge returned a verdict): partial and unjudged rows are
skipped, the rule ``pass_at`` uses, and the pass@k/pass^k estimators are ``pass_at``'s own
(``score.passat.pass_k_estimates``), so a plot never disagrees with the report beside it.
Rows group by ``task_key``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from wai_exp.domain.numbers import finite_float
from wai_exp.score.stats.resample import binary_reward, reward_groups

__all__ = [
    "TaskCounts",
    "binary_reward",
    "delta_figure",
    "headline_figure",
    "pass_at_k_curve",
    "pass_at_k_figure",
    "pass_rate_histogram",
    "stage_figures",
    "sweep_figure",
    "task_counts",
]

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class TaskCounts:
    """Per-task binary outcomes: ``keys[i]`` has ``n[i]`` graded rows, ``c[i]`` of them passing."""

    keys: list[str]
    n: np.ndarray
    c: np.ndarray

    @property
    def rates(self) -> np.ndarray:
        """Per-task pass rate ``c / n``."""
        return self.c / self.n if len(self.n) else np.zeros(0)


def task_counts(rows: Iterable[Mapping[str, Any]]) -> TaskCounts:
    """Group the binary-graded rows by ``task_key``; tasks with no binary row are absent.

    The group-by is ``score.resample.reward_groups`` (keys sorted), so the tasks and counts are
    the ones ``pass_at`` reports. Never raises on row dicts.
    """
    groups = reward_groups(rows)
    n = groups.counts.astype(np.int64)
    c = groups.sums.round().astype(np.int64)
    return TaskCounts(list(groups.keys), n, c)


def pass_at_k_curve(counts: TaskCounts) -> dict[str, np.ndarray]:
    """pass@k and pass^k for k = 1 .. the largest group with two or more graded repeats.

    Per task, with ``n`` graded rows and ``c`` passes, the unbiased estimators are
    ``pass@k = 1 - C(n-c, k) / C(n, k)`` and ``pass^k = C(c, k) / C(n, k)``; each k averages
    over the tasks with at least k rows (shorter tasks are left out, as in ``pass_at``).
    Returns arrays ``k``, ``pass_at_k``, ``pass_pow_k``, ``n_groups``; all empty when no task
    has two graded repeats.
    """
    n, c = counts.n.astype(float), counts.c.astype(float)
    multi = n[n >= 2]
    if multi.size == 0:
        empty = np.zeros(0)
        return {"k": empty, "pass_at_k": empty, "pass_pow_k": empty, "n_groups": empty}
    ks = np.arange(1, int(multi.max()) + 1)
    at_k, pow_k = _per_task_k(n, c, ks)
    n_groups = (n[:, None] >= ks[None, :]).sum(axis=0)
    return {
        "k": ks,
        "pass_at_k": np.nansum(at_k, axis=0) / n_groups,
        "pass_pow_k": np.nansum(pow_k, axis=0) / n_groups,
        "n_groups": n_groups,
    }


def _per_task_k(n: np.ndarray, c: np.ndarray, ks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pass@k, pass^k) per task (rows) and k (columns), NaN where a task has fewer than k
    rows: pass_at's own estimators, one call per k (a handful)."""
    from wai_exp.score.stats.passat import pass_k_estimates

    pairs = [pass_k_estimates(n, c, int(k)) for k in ks]
    return (
        np.column_stack([at for _, at in pairs]),
        np.column_stack([pow_ for pow_, _ in pairs]),
    )


#: Bootstrap draws over tasks for the curve's 95% bands (a plot, not a verdict).
CURVE_BOOTSTRAP = 1000


def fixed_population_curve(counts: TaskCounts, k_max: int, seed: int = 0) -> dict[str, Any]:
    """pass@k and pass^k for k = 1 .. ``k_max`` over one task population, the tasks with at
    least ``k_max`` graded rows, each with a 95% percentile bootstrap band over those tasks.

    One population for every k: averaging each k over the tasks that reach it makes the
    curve jump where short tasks drop out, a change of tasks and not of k. Returns ``k``,
    ``pass_at_k``, ``pass_pow_k`` and their ``*_lo``/``*_hi`` arrays, and ``n_tasks``
    (0, with empty arrays, when no task reaches ``k_max``)."""
    n, c = counts.n.astype(float), counts.c.astype(float)
    keep = n >= k_max
    ks = np.arange(1, k_max + 1)
    out: dict[str, Any] = {"k": ks, "n_tasks": int(keep.sum())}
    if not keep.any():
        return {"k": np.zeros(0), "n_tasks": 0}
    at_k, pow_k = _per_task_k(n[keep], c[keep], ks)
    both = np.concatenate([at_k, pow_k], axis=1)  # (tasks, 2k): one resample for both curves
    boot = _bootstrap_means(both, np.random.default_rng(seed))
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
    mean = both.mean(axis=0)
    kk = len(ks)
    for j, name in enumerate(("pass_at_k", "pass_pow_k")):
        cols = slice(j * kk, (j + 1) * kk)
        out[name], out[f"{name}_lo"], out[f"{name}_hi"] = mean[cols], lo[cols], hi[cols]
    return out


def _bootstrap_means(per_task: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Column means of ``per_task`` over :data:`CURVE_BOOTSTRAP` resamples of its rows. A
    resample is its row counts (one multinomial draw), so a block of resamples is one matrix
    product; blocks keep a stage of many tasks from holding every draw at once."""
    n_tasks = per_task.shape[0]
    uniform = np.full(n_tasks, 1.0 / n_tasks)
    out = np.empty((CURVE_BOOTSTRAP, per_task.shape[1]))
    block = max(1, min(CURVE_BOOTSTRAP, 100_000 // n_tasks))
    for start in range(0, CURVE_BOOTSTRAP, block):
        stop = min(start + block, CURVE_BOOTSTRAP)
        counts = rng.multinomial(n_tasks, uniform, size=stop - start)
        out[start:stop] = counts @ per_task / n_tasks
    return out


def _curve_k(counts: TaskCounts, report: Mapping[str, Any] | None) -> int | None:
    """The curve's last k: the report's k, else the largest k that half the repeated
    tasks reach (so the population stays most of the tasks)."""
    found, k = _find(report, "k")
    if found and isinstance(k, int) and not isinstance(k, bool) and k >= 2:
        return k
    multi = counts.n[counts.n >= 2]
    if multi.size == 0:
        return None
    return int(np.quantile(multi, 0.5, method="lower"))


def _interval_text(lo: float | None, hi: float | None) -> str:
    return f"[{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else "(no interval)"


def _find(report: Mapping[str, Any] | None, key: str) -> tuple[bool, Any]:
    """``(found, value)`` for ``key`` at the top of ``report`` or one mapping level down."""
    if not isinstance(report, Mapping):
        return False, None
    if key in report:
        return True, report[key]
    for value in report.values():
        if isinstance(value, Mapping) and key in value:
            return True, value[key]
    return False, None


def _as_counts(rows: Iterable[Mapping[str, Any]] | TaskCounts) -> TaskCounts:
    return rows if isinstance(rows, TaskCounts) else task_counts(rows)


def pass_rate_histogram(
    rows: Iterable[Mapping[str, Any]] | TaskCounts,
    *,
    title: str = "",
    band: tuple[float, float] | None = (0.2, 0.8),
    metrics: Mapping[str, Any] | None = None,
) -> Figure | None:
    """Histogram of per-task pass rates (tasks on x in 10 bins over [0, 1]), or None.

    ``band`` (the selection band, default 20–80%) is shaded, with the share of tasks inside
    it in the legend: those are the tasks RL selection keeps. The stage's headline pass@1
    (``metrics``: ``pass_at_1`` and its interval) is the line labelled pass@1, so the plot
    says what the summary says; the mean of the plotted rates, which reads every row (an
    adaptive run's headline reads each task's first batch), is labelled as that. None when
    no row carries a binary reward. ``rows`` may be their ``task_counts``.
    """
    counts = _as_counts(rows)
    if not counts.keys:
        return None  # before importing matplotlib: ungraded stages pay nothing
    from matplotlib.figure import Figure

    rates = counts.rates
    fig = Figure(figsize=(6, 4), dpi=100)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.13, top=0.9)
    ax = fig.add_subplot()
    ax.hist(rates, bins=np.linspace(0.0, 1.0, 11).tolist(), edgecolor="black")
    if band is not None:
        lo, hi = float(band[0]), float(band[1])
        inside = int(((rates >= lo) & (rates <= hi)).sum())
        ax.axvspan(lo, hi, color="tab:green", alpha=0.15,
                   label=f"selection band {lo:.0%}–{hi:.0%}: {inside} of {len(rates)} tasks")  # fmt: skip
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("per-task pass rate")
    ax.set_ylabel("tasks")
    mean = float(rates.mean())
    head = _metric(metrics or {}, "pass_at_1")
    if head is None:
        ax.axvline(mean, color="red", linestyle="--", label=f"mean per-task rate {mean:.3f}")
    else:
        ci_lo = _metric(metrics or {}, "pass_at_1_ci_lo")
        ci_hi = _metric(metrics or {}, "pass_at_1_ci_hi")
        if ci_lo is not None and ci_hi is not None:
            ax.axvspan(ci_lo, ci_hi, color="red", alpha=0.12, lw=0)
        ax.axvline(head, color="red", linestyle="--",
                   label=f"pass@1 {head:.3f} {_interval_text(ci_lo, ci_hi)}")  # fmt: skip
        if abs(mean - head) >= 0.0005:
            ax.axvline(mean, color="0.3", linestyle=":",
                       label=f"mean of these rates (all rows) {mean:.3f}")  # fmt: skip
    ax.legend(fontsize=8)
    ax.set_title(title or f"pass rate over {len(counts.keys)} tasks ({int(counts.n.sum())} rows)")
    return fig


def pass_at_k_figure(
    rows: Iterable[Mapping[str, Any]] | TaskCounts,
    report: Mapping[str, Any] | None = None,
    *,
    title: str = "",
    metrics: Mapping[str, Any] | None = None,
) -> Figure | None:
    """pass@k and pass^k against k, or None when there are no k-way numbers.

    The curves' k=1 point is the mean over all graded rows of these tasks; the run's
    headline pass@1 (``metrics``; from each task's first batch) is drawn beside it with its
    interval and value, so the plot never shows a pass@1 the summary does not.

    None when no task has two graded repeats, or when ``report`` says the k-way numbers are
    missing (``pass_at_k`` present and None, as ``pass_at`` does below ``min_k`` repeats:
    a curve would show what the report withheld as too noisy). The report's ``k`` is marked.
    """
    found, value = _find(report, "pass_at_k")
    if found and value is None:
        return None
    counts = _as_counts(rows)
    k_max = _curve_k(counts, report)
    if k_max is None or k_max < 2:
        return None
    curve = fixed_population_curve(counts, k_max)
    if curve["n_tasks"] == 0:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), dpi=100)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.13, top=0.9)
    ax = fig.add_subplot()
    for name, marker, label in (
        ("pass_at_k", "o", "pass@k (any of k passes)"),
        ("pass_pow_k", "s", "pass^k (all k pass)"),
    ):
        line = ax.plot(curve["k"], curve[name], marker=marker, label=label)[0]
        ax.fill_between(curve["k"], curve[f"{name}_lo"], curve[f"{name}_hi"],
                        color=line.get_color(), alpha=0.15, lw=0)  # fmt: skip
    _headline_at_k1(ax, metrics or {})
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("k")
    ax.set_ylabel("rate (95% band over tasks)")
    ax.set_xticks(curve["k"])
    ax.legend(fontsize=8)
    ax.set_title(
        title or "pass@k / pass^k",
        fontsize=10,
    )
    note = f"the same {curve['n_tasks']} tasks (>= {k_max} graded rows) at every k"
    if _metric(metrics or {}, "pass_at_1") is not None:
        note += "\ncurves: all their rows; headline: each task's first batch"
    ax.text(0.01, 0.99, note, transform=ax.transAxes, fontsize=7, color="0.35", va="top")
    return fig


def _headline_at_k1(ax: Any, metrics: Mapping[str, Any]) -> None:
    """The headline pass@1 with its interval, just right of k=1 (nothing when unmeasured)."""
    head = _metric(metrics, "pass_at_1")
    if head is None:
        return
    lo, hi = _metric(metrics, "pass_at_1_ci_lo"), _metric(metrics, "pass_at_1_ci_hi")
    yerr = None if lo is None or hi is None else [[max(0.0, head - lo)], [max(0.0, hi - head)]]
    ax.errorbar([1.08], [head], yerr=yerr, fmt="D", color="black", capsize=4, markersize=5,
                label=f"pass@1 {head:.3f} {_interval_text(lo, hi)} (headline)")  # fmt: skip


def _bar_with_intervals(
    ax: Any, labels: list[str], values: list[float | None], los: list[Any], his: list[Any]
) -> None:
    """Bars with 95% error bars; an unmeasured value is drawn as a labelled gap, not a 0."""
    xs = np.arange(len(labels))
    for x, v, lo, hi in zip(xs, values, los, his, strict=True):
        if v is None:
            ax.text(x, 0.02, "not\nmeasured", ha="center", va="bottom", fontsize=8)
            continue
        ax.bar(x, v, color="tab:blue", alpha=0.7)
        if lo is not None and hi is not None:
            ax.errorbar(x, v, yerr=[[max(0.0, v - lo)], [max(0.0, hi - v)]], fmt="none",
                        ecolor="black", capsize=6)  # fmt: skip
            ax.text(x, min(1.0, hi) + 0.02, f"{v:.3f}\n[{lo:.3f}, {hi:.3f}]", ha="center",
                    va="bottom", fontsize=8)  # fmt: skip
        else:
            ax.text(x, v + 0.02, f"{v:.3f}\n(no interval)", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs)
    ax.set_xticklabels(labels)
    ax.set_ylim(0.0, 1.2)


def _metric(metrics: Mapping[str, Any], key: str) -> float | None:
    return finite_float(metrics.get(key))


def headline_figure(
    metrics: Mapping[str, Any], report: Mapping[str, Any] | None = None, *, title: str = ""
) -> Figure | None:
    """pass@1, pass^k and pass@k as bars with their 95% intervals, and the floor (a
    do-nothing agent on the same tasks) as a dashed line in its shaded interval when it was
    measured; None when pass@1 was not measured. Values come from the stage metrics
    (``pass_at_1``, ``pass_at_1_ci_lo`` ..., ``floor``, ``floor_ci_lo``/``_hi``)."""
    if _metric(metrics, "pass_at_1") is None:
        return None
    from matplotlib.figure import Figure

    found, k = _find(report, "k")
    kk = k if found and isinstance(k, int) else "k"
    names = ["pass_at_1", "pass_pow_k", "pass_at_k"]
    fig = Figure(figsize=(6, 4), dpi=100)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.13, top=0.88)
    ax = fig.add_subplot()
    _bar_with_intervals(
        ax,
        ["pass@1", f"pass^{kk}", f"pass@{kk}"],
        [_metric(metrics, n) for n in names],
        [_metric(metrics, f"{n}_ci_lo") for n in names],
        [_metric(metrics, f"{n}_ci_hi") for n in names],
    )
    floor = _metric(metrics, "floor")
    if floor is not None:
        # What a do-nothing agent scores on the same tasks: a bar at or inside this band is
        # not skill. Drawn only when measured (an unmeasured floor is no line at 0).
        lo, hi = _metric(metrics, "floor_ci_lo"), _metric(metrics, "floor_ci_hi")
        if lo is not None and hi is not None:
            ax.axhspan(lo, hi, color="0.5", alpha=0.15, lw=0)
        ax.axhline(
            floor, color="0.35", ls="--", lw=1, label=f"floor (do-nothing agent) {floor:.3f}"
        )
        ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.set_ylabel("rate (95% interval)")
    ax.set_title(title or "pass@1 / pass^k / pass@k with 95% intervals")
    return fig


def sweep_figure(table: Mapping[str, Any], *, metric_label: str = "pass@1") -> Figure | None:
    """The headline metric against each swept value, with the per-value intervals
    (``wai_exp.tracking.sweep.per_value_table``); one panel per swept key. None when no
    row has a value."""
    rows = [r for r in table.get("rows", []) if r.get("mean") is not None]
    if not rows:
        return None
    from matplotlib.figure import Figure

    keys = list(table.get("value_keys") or []) or ["jobs"]
    fig = Figure(figsize=(max(6, 4 * len(keys)), 4), dpi=100)
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.15, top=0.85, wspace=0.3)
    for i, key in enumerate(keys, start=1):
        ax = fig.add_subplot(1, len(keys), i)
        labels = [str(r["values"].get(key, "all")) for r in rows]
        means = np.array([r["mean"] for r in rows], dtype=float)
        lo = np.array([np.nan if r["ci_lo"] is None else r["ci_lo"] for r in rows], dtype=float)
        hi = np.array([np.nan if r["ci_hi"] is None else r["ci_hi"] for r in rows], dtype=float)
        try:
            xs = np.array([float(x) for x in labels])
        except ValueError:
            xs = np.arange(len(labels), dtype=float)
            ax.set_xticks(xs)
            ax.set_xticklabels(labels)
        err = np.vstack([np.nan_to_num(means - lo), np.nan_to_num(hi - means)])
        ax.errorbar(xs, means, yerr=err, fmt="o-", capsize=5)
        for x, m, r in zip(xs, means, rows, strict=True):
            ax.annotate(f"{m:.3f} (n={r['n_runs']})", (x, m), textcoords="offset points",
                        xytext=(4, 6), fontsize=8)  # fmt: skip
        ax.set_xlabel(key)
        ax.set_ylabel(f"{metric_label} (95% interval)")
        ax.set_ylim(0.0, 1.05)
    fig.suptitle(f"{metric_label} per swept value")
    return fig


#: A verdict's colour on the delta plot; an unreplicated move keeps its direction's colour,
#: its label (``verdict_words``) says it is one run a side.
_VERDICT_COLORS = {
    "improved": "tab:green",
    "up, unreplicated": "tab:green",
    "regressed": "tab:red",
    "down, unreplicated": "tab:red",
}


def delta_figure(report: Mapping[str, Any], *, title: str = "") -> Figure | None:
    """The paired deltas of a ``delta_report`` (after − before per metric) with their 95%
    intervals, zero marked and the re-run noise band shaded when the report has one. None
    when the report has no measured delta."""
    metrics = report.get("metrics") if isinstance(report, Mapping) else None
    if not isinstance(metrics, Mapping):
        return None
    from wai_exp.score.stats.delta import verdict_words  # loads scipy: only when plotting

    items = []
    for name, m in metrics.items():
        if not isinstance(m, Mapping) or _metric(m, "delta") is None:
            continue
        ci = m.get("ci95") or [None, None]
        items.append((str(name), float(m["delta"]), ci[0], ci[1],
                      verdict_words(m.get("verdict"), report) if m.get("verdict") else None,
                      _metric(m, "noise_band")))  # fmt: skip
    if not items:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 1.6 + 0.5 * len(items)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ys = np.arange(len(items))[::-1]
    for y, (_name, d, lo, hi, verdict, band) in zip(ys, items, strict=True):
        color = _VERDICT_COLORS.get(str(verdict), "tab:grey")
        if lo is not None and hi is not None:
            ax.errorbar(d, y, xerr=[[d - lo], [hi - d]], fmt="o", color=color, capsize=4)
        else:
            ax.plot(d, y, "o", color=color)
        if band is not None:
            ax.fill_betweenx([y - 0.3, y + 0.3], -band, band, color="orange", alpha=0.2)
        ax.annotate(f"{d:+.3f} {verdict or ''}", (d, y), textcoords="offset points",
                    xytext=(0, 7), ha="center", fontsize=8)  # fmt: skip
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels([i[0] for i in items])
    ax.set_xlabel("after − before (paired by task, 95% interval)")
    ax.set_title(
        "\n".join(t for t in (title, str(report.get("headline_verdict") or "")) if t),
        fontsize=10,
    )
    ax.margins(x=0.15)  # the value labels above the points stay inside the axes
    return fig


def stage_figures(
    stage: str,
    rows: Iterable[Mapping[str, Any]],
    report: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    band: tuple[float, float] | None = (0.2, 0.8),
) -> dict[str, Figure]:
    """``{artifact file name: Figure}`` for one stage; empty when its rows carry no grades
    (a ``compare`` stage's report gets its delta plot). ``rows`` are read once (a file's
    rows can stream through: only the per-task counts are kept)."""
    out: dict[str, Figure] = {}
    if (
        isinstance(report, Mapping)
        and isinstance(report.get("metrics"), Mapping)
        and ("headline_verdict" in report)
    ):
        delta = delta_figure(report, title=f"{stage}: paired deltas")
        if delta is not None:
            out["delta.png"] = delta
    counts = task_counts(rows)
    hist = pass_rate_histogram(
        counts, title=f"{stage}: per-task pass rate", band=band, metrics=metrics
    )
    if hist is None:
        return out
    out["pass_rate_hist.png"] = hist
    head = headline_figure(metrics or {}, report, title=f"{stage}: pass@1 / pass^k / pass@k")
    if head is not None:
        out["headline.png"] = head
    curve = pass_at_k_figure(counts, report, title=f"{stage}: pass@k / pass^k", metrics=metrics)
    if curve is not None:
        out["pass_at_k.png"] = curve
    return out
