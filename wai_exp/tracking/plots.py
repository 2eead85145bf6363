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

from wai_exp.score.stats.resample import binary_reward, reward_groups

__all__ = [
    "TaskCounts",
    "binary_reward",
    "pass_at_k_curve",
    "pass_at_k_figure",
    "pass_rate_histogram",
    "stage_figures",
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
    from wai_exp.score.stats.passat import pass_k_estimates

    ks = np.arange(1, int(multi.max()) + 1)
    # One call per k (k runs to the largest repeat count, a handful): the estimators are
    # pass_at's own, NaN for tasks shorter than k, so each k averages the tasks that have k.
    pairs = [pass_k_estimates(n, c, int(k)) for k in ks]
    pow_k = np.column_stack([pow_ for pow_, _ in pairs])
    at_k = np.column_stack([at for _, at in pairs])
    n_groups = (n[:, None] >= ks[None, :]).sum(axis=0)
    return {
        "k": ks,
        "pass_at_k": np.nansum(at_k, axis=0) / n_groups,
        "pass_pow_k": np.nansum(pow_k, axis=0) / n_groups,
        "n_groups": n_groups,
    }


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


def pass_rate_histogram(rows: Iterable[Mapping[str, Any]], *, title: str = "") -> Figure | None:
    """Histogram of per-task pass rates (tasks on x in 10 bins over [0, 1]), or None.

    None when no row carries a binary reward: there is nothing graded to plot.
    """
    counts = task_counts(rows)
    if not counts.keys:
        return None  # before importing matplotlib: ungraded stages pay nothing
    from matplotlib.figure import Figure

    rates = counts.rates
    fig = Figure(figsize=(6, 4), dpi=100)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.13, top=0.9)
    ax = fig.add_subplot()
    ax.hist(rates, bins=np.linspace(0.0, 1.0, 11), edgecolor="black")
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("per-task pass rate")
    ax.set_ylabel("tasks")
    mean = float(rates.mean())
    ax.axvline(mean, color="red", linestyle="--", label=f"pass@1 = {mean:.3f}")
    ax.legend()
    ax.set_title(title or f"pass rate over {len(counts.keys)} tasks ({int(counts.n.sum())} rows)")
    return fig


def pass_at_k_figure(
    rows: Iterable[Mapping[str, Any]],
    report: Mapping[str, Any] | None = None,
    *,
    title: str = "",
) -> Figure | None:
    """pass@k and pass^k against k, or None when there are no k-way numbers.

    None when no task has two graded repeats, or when ``report`` says the k-way numbers are
    missing (``pass_at_k`` present and None, as ``pass_at`` does below ``min_k`` repeats:
    a curve would show what the report withheld as too noisy). The report's ``k`` is marked.
    """
    found, value = _find(report, "pass_at_k")
    if found and value is None:
        return None
    curve = pass_at_k_curve(task_counts(rows))
    if curve["k"].size < 2:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), dpi=100)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.13, top=0.9)
    ax = fig.add_subplot()
    ax.plot(curve["k"], curve["pass_at_k"], marker="o", label="pass@k (any of k passes)")
    ax.plot(curve["k"], curve["pass_pow_k"], marker="s", label="pass^k (all k pass)")
    found_k, k = _find(report, "k")
    if found_k and isinstance(k, (int, float)) and not isinstance(k, bool):
        ax.axvline(float(k), color="grey", linestyle=":", label=f"reported k = {k}")
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("k")
    ax.set_ylabel("rate over tasks with >= k graded rows")
    ax.set_xticks(curve["k"])
    ax.legend()
    ax.set_title(title or f"pass@k curve ({int(curve['n_groups'][0])} tasks at k=1)")
    return fig


def stage_figures(
    stage: str, rows: Iterable[Mapping[str, Any]], report: Mapping[str, Any] | None = None
) -> dict[str, Figure]:
    """``{artifact file name: Figure}`` for one stage; empty when its rows carry no grades."""
    rows = list(rows)
    out: dict[str, Figure] = {}
    hist = pass_rate_histogram(rows, title=f"{stage}: per-task pass rate")
    if hist is None:
        return out
    out["pass_rate_hist.png"] = hist
    curve = pass_at_k_figure(rows, report, title=f"{stage}: pass@k / pass^k")
    if curve is not None:
        out["pass_at_k.png"] = curve
    return out
