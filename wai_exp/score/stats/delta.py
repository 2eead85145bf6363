"""Did training move the behavior, and did anything else slip? ``delta_report``.

One paired comparison of ``after`` against ``before`` over tasks (``task_key``), on pass@1
and every marker both sides carry. The rows are read once per side into a (rows x metrics)
value matrix and grouped into per-task means with ``np.bincount``. Every interval then
comes from ``resample.bootstrap_columns``, the implementation ``paired_bootstrap`` and so
``compare_runs`` use, with its settings (the expanded percentile interval, clipped to the
delta's possible range, no lattice continuity correction: ``stats.VERDICT_METHOD`` says why;
when every paired difference is the same the bootstrap cannot vary and the interval is
``resample.paired_boundary_interval``): metrics present on the same paired
tasks share one resample matrix, and pass@1 draws first from ``seed``'s stream, so on the
same paired tasks and seed its interval, p-value and verdict are ``compare_runs``'.

Verdicts, in the order a reader needs them:

* per metric: ``improved`` / ``regressed`` (interval at ``1 - alpha`` excludes zero),
  ``no_change`` (it covers zero), ``within_noise`` (the delta is inside the eval's own
  re-run band, whatever the task interval says), ``insufficient_data``; printed (and
  plotted) as ``up, unreplicated`` / ``down, unreplicated`` when there is no re-run floor
  (``verdict_words``), so a line never says more than an ``INCONCLUSIVE`` headline;
* the target's: ``moved``, ``no_change_detected``, ``within_eval_noise``,
  ``moved_unreplicated`` (up or down on one run per side with no re-run floor: one
  evaluation is a draw, so a drop there is no more confirmed than a gain), ``regressed``;
* ``headline_verdict``: ``PASS`` / ``NO DIFFERENCE`` (the interval holds zero) /
  ``REAL ON THESE TASKS, WITHIN RE-RUN NOISE`` (the interval excludes zero, the delta is
  inside the re-run band) / ``NOT COMPARABLE (causes)`` / ``FAIL`` /
  ``INCONCLUSIVE (1 eval run a side: rerun to confirm)`` (``moved_unreplicated``, either
  way) / ``NOT MEASURED (...)``, and ``ok`` (the gate).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.rows.keys import prompt_mismatch, task_key
from wai_exp.score.stats.passat import RowT, as_rows, first_batch, lost_rows, run_config_with_keys
from wai_exp.score.stats.resample import (
    as_generator,
    binary_reward,
    bootstrap_columns,
    factorize,
    marker_value,
    noise_band,
    paired_bootstrap,
    paired_boundary_interval,
    paired_boundary_words,
    sign_flip_test,
    t_quantile,
    two_proportion_p,
    z_quantile,
)
from wai_exp.score.stats.stats import VERDICT_CONTINUITY, VERDICT_METHOD, adaptive_note

__all__ = [
    "ANSWERED_GAP_POINTS",
    "ANSWERED_P_MAX",
    "CEILING_MIN_TASKS_WITH_ROOM",
    "CEILING_PASS_RATE",
    "PASS_AT_1",
    "SITUATIONS_MIN_PAIRED_SHARE",
    "delta_report",
    "format_delta_report",
    "paired_headline",
    "verdict_words",
]

PASS_AT_1 = "pass_at_1"
#: The before side already passes this share (its pass rate): little room left to improve.
CEILING_PASS_RATE = 0.9
#: Fewer paired tasks than this (and under half) not already passed every time: a ceiling.
#: 20 tasks with room is about the least a paired bootstrap can read a gain off; below it a
#: real improvement has too few tasks to show on.
CEILING_MIN_TASKS_WITH_ROOM = 20
#: Answered shares this far apart (with no re-run band to compare with) make the arms
#: not comparable when the gap is also significant.
ANSWERED_GAP_POINTS = 0.1
#: p-value under which the answered-share gap is significant (two-proportion z test).
ANSWERED_P_MAX = 0.01
#: Fewer than this share of tasks on both sides: the arms drew different situations.
SITUATIONS_MIN_PAIRED_SHARE = 0.5
#: Settings compared across sides (``run_config`` keys); a disagreement is a warning.
COMPARED_SETTINGS: tuple[str, ...] = ("k", "temperature", "max_tokens", "judge_version")
#: A compared setting's name in a warning, where its key alone would mislead: ``k`` is rows
#: per task (every run's repeats under ``runs=N``), not a pass^k's k.
_SETTING_WORDS = {"k": "rows per task (config k)"}
#: Writers that are not a model: template situations, seeds, replays of either.
_NON_MODEL_WRITERS = frozenset({"", "template", "templates", "seeds", "seed", "offline"})

#: The fixes the warnings name, as a Python caller writes them, and as a ``wai-exp`` user
#: types them (``delta_report(cli=True)``): one table, so each phrase has both forms.
PIN_TASKS = "simulate(tasks=...)"
RERUN_EACH = "simulate(tasks=..., runs=3)"
RUN_STD = "run_std=eval_variance(...)['run_std_by_metric']"
RUN_STD_OF = "eval_variance(...)['run_std_by_metric']"
RUN_STD_RUNS = "run_std_runs=eval_variance(...)['n_runs']"
N_RUNS = "eval_variance(...)['n_runs']"
LOST_BY = "data.report()['rollouts_lost_by']"
BALANCE = "balance_rollouts=True"
CLI_FIXES: tuple[tuple[str, str], ...] = (
    (f"{RUN_STD} with {RUN_STD_RUNS}", "--run-std-from <eval_variance report.json>"),
    (PIN_TASKS, "simulate.tasks=<before run>/simulate/rows.jsonl"),
    (RERUN_EACH, "simulate.tasks=<before run>/simulate/rows.jsonl simulate.runs=3"),
    (RUN_STD, "--run-std-from <eval_variance report.json>"),
    (RUN_STD_OF, "--run-std-from <eval_variance report.json>"),
    (RUN_STD_RUNS, "--run-std-runs N (--run-std-from reads it)"),
    (N_RUNS, "the eval_variance report's n_runs (--run-std-from reads it)"),
    (LOST_BY, "'rollouts_lost_by' in the run's simulate/report.json"),
    (BALANCE, "--balance-rollouts"),
)


def cli_words(text: str) -> str:
    """``text`` with each Python-API fix it names in the form ``wai-exp compare`` takes."""
    for python, cli in CLI_FIXES:
        text = text.replace(python, cli)
    return text


def _metric_name(metric: str) -> str:
    if not isinstance(metric, str) or not metric:
        raise ValueError(f"a metric is 'pass_at_1' or a marker name; got {metric!r}")
    return metric[len("marker:") :] if metric.startswith("marker:") else metric


def _lineage(row: Mapping[str, Any]) -> Mapping[str, Any]:
    lin = row.get("lineage")
    # type() first: an abc isinstance check per row is measurable at 30,000 rows
    return lin if type(lin) is dict or isinstance(lin, Mapping) else {}


_PLAIN_NUMBERS = (int, float)
#: Marker value types converted in bulk (bool is a number here, as in ``marker_value``).
_NUMBER_OR_NONE = frozenset(
    {int, float, bool, type(None), np.float64, np.float32, np.int64, np.int32, np.bool_}
)


def _reward_or_nan(row: Mapping[str, Any]) -> float:
    r = binary_reward(row)
    return math.nan if r is None else r


class _Side:
    """One arm read once: task keys, rewards, marker dicts and eval runs per row.

    ``build(metrics)`` then turns them into the (rows x metrics) value matrix (NaN = the
    row has no value for that metric).
    """

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.rows = rows
        # One comprehension per field: no per-row statement overhead (measured 2x faster
        # than one loop filling every field at 16,000 rows).
        sids = [row.get("scenario_id") for row in rows]
        keys = [
            sid if type(sid) is str and sid else task_key(row)
            for sid, row in zip(sids, rows, strict=True)
        ]
        # Fast path for the common graded row; anything unusual goes through the rule.
        rewards = np.array(
            [
                v
                if (st is None or st == "ok") and type(v) in _PLAIN_NUMBERS and (v == 0 or v == 1)
                else _reward_or_nan(row)
                for v, st, row in zip(
                    [row.get("reward") for row in rows],
                    [row.get("judge_status") for row in rows],
                    rows,
                    strict=True,
                )
            ],
            dtype=float,
        ).reshape(-1)
        mks = [
            mk if mk and (type(mk) is dict or isinstance(mk, Mapping)) else None
            for mk in [row.get("markers") for row in rows]
        ]
        runs = [
            lin.get("eval_run")
            if type(lin) is dict
            else (None if lin is None else _lineage(row).get("eval_run"))
            for lin, row in zip([row.get("lineage") for row in rows], rows, strict=True)
        ]
        self.keys, self.rewards, self.mks, self.runs = keys, rewards, mks, runs
        labelled = sorted({r for r in runs if r is not None}, key=str)
        self.run_labels = labelled
        self.n_runs = max(len(labelled), 1)
        self.values = np.zeros((len(rows), 0))

    def marker_names(self) -> set[str]:
        names: set[Any] = set().union(*(m for m in self.mks if m is not None))
        return {str(k) for k in names}

    def build(self, metrics: list[str]) -> None:
        n = len(self.rows)
        vals = np.full((n, len(metrics)), np.nan)
        if PASS_AT_1 in metrics:
            vals[:, metrics.index(PASS_AT_1)] = self.rewards
        names = [m for m in metrics if m != PASS_AT_1]
        if names and n:
            raw = _marker_rows(self.mks, names)
            cols = [j for j, m in enumerate(metrics) if m != PASS_AT_1]
            vals[:, cols] = _marker_matrix(self.rows, raw, names)
        self.values = vals


def _marker_rows(mks: list[Mapping[str, Any] | None], names: list[str]) -> list[Any]:
    """Per row, the values of ``names`` (None where absent).

    Rows usually carry every marker, so one C-level ``itemgetter`` call per row does it;
    a row missing one falls back to ``.get`` per name.
    """
    none_row = (None,) * len(names)
    get = itemgetter(*names)
    out: list[Any] = []
    append = out.append
    single = len(names) == 1
    for mk in mks:
        if mk is None:
            append(none_row)
            continue
        try:
            v = get(mk)
            append((v,) if single else v)
        except KeyError:
            append(tuple(mk.get(m) for m in names))
    return out


def _marker_matrix(
    rows: Sequence[Mapping[str, Any]], raw: list[Any], names: list[str]
) -> np.ndarray:
    """(rows x markers) floats, NaN where a row lacks the marker.

    When every value is a plain number or None the whole matrix converts in one call (None
    becomes NaN). Anything else (a string, even "0.5", a dict) sends it through
    ``marker_value`` per cell, which treats those as absent.
    """
    if set(map(type, chain.from_iterable(raw))) <= _NUMBER_OR_NONE:
        return np.array(raw, dtype=float).reshape(len(raw), len(names))
    return np.array([[_mv(row, m) for m in names] for row in rows], dtype=float)


def _mv(row: Mapping[str, Any], name: str) -> float:
    v = marker_value(row, name)
    return math.nan if v is None else v


def _task_means(
    task_idx: np.ndarray, values: np.ndarray, n_tasks: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-task (counts, means) for every metric column; NaN means "no value"."""
    ok = ~np.isnan(values)
    n_metrics = values.shape[1]
    counts = np.zeros((n_tasks, n_metrics))
    sums = np.zeros((n_tasks, n_metrics))
    for j in range(n_metrics):  # one bincount per metric column, never per row
        m = ok[:, j]
        counts[:, j] = np.bincount(task_idx[m], minlength=n_tasks)
        sums[:, j] = np.bincount(task_idx[m], weights=values[m, j], minlength=n_tasks)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return counts, means


def _run_metric_means(side: _Side, task_idx: np.ndarray, n_tasks: int) -> np.ndarray:
    """(runs x metrics): each eval run's metric, a mean over that run's tasks."""
    labels = side.run_labels
    pos = {lab: i for i, lab in enumerate(labels)}
    run_idx = np.array([pos.get(r, -1) for r in side.runs], dtype=np.int64)
    keep = run_idx >= 0
    n_runs = len(labels)
    combined = run_idx[keep] * n_tasks + task_idx[keep]
    _, means = _task_means(combined, side.values[keep], n_runs * n_tasks)
    means = means.reshape(n_runs, n_tasks, -1)
    with np.errstate(invalid="ignore"):
        return np.nanmean(means, axis=1) if means.size else np.zeros((n_runs, 0))


def _metric_bounds(sb: _Side, sa: _Side) -> list[tuple[float, float] | None]:
    """Per metric, the range a paired mean delta can take: compare_runs' clip.

    ``after - before`` per task can be no lower than the after side's smallest row value
    minus the before side's largest, and no higher than the reverse.
    """
    out: list[tuple[float, float] | None] = []
    for j in range(sb.values.shape[1]):
        vb, va = sb.values[:, j], sa.values[:, j]
        vb, va = vb[~np.isnan(vb)], va[~np.isnan(va)]
        out.append(
            (float(va.min() - vb.max()), float(va.max() - vb.min()))
            if vb.size and va.size
            else None
        )
    return out


def _intervals_and_pvalues(
    diffs: np.ndarray,
    bounds: list[tuple[float, float] | None],
    n_boot: int,
    seed: int,
    level: float,
) -> tuple[list[list[float] | None], list[float | None]]:
    """Every metric's interval and sign-flip p-value, by the shared resample machinery.

    ``diffs`` is (tasks x metrics), ``after - before`` per paired task, NaN where the metric
    does not pair. ``bootstrap_columns`` gives each metric the interval ``paired_bootstrap``
    would (``VERDICT_METHOD``, ``VERDICT_CONTINUITY``, clipped to ``bounds``) from one resample
    matrix shared by the metrics on the same tasks. Column 0 (pass@1) draws first from
    ``seed``'s stream and its sign-flip test follows on that stream, which is exactly what
    ``compare_runs`` does: on the same paired tasks and seed the two agree on interval,
    p-value and verdict.
    """
    rng = as_generator(seed)
    boots = bootstrap_columns(
        diffs, n_resamples=n_boot, level=level, seed=rng, bounds=bounds,
        method=VERDICT_METHOD, continuity=VERDICT_CONTINUITY,
    )  # fmt: skip
    cis = [None if b is None or b.interval is None else b.interval.as_list() for b in boots]
    pvals: list[float | None] = []
    for j in range(diffs.shape[1]):  # one test per metric, each vectorized over resamples
        d = diffs[:, j]
        d = d[~np.isnan(d)]
        pvals.append(sign_flip_test(d, n_resamples=n_boot, seed=rng).pvalue if d.size else None)
    return cis, pvals


def _writer(value: Any) -> str:
    w = "" if value is None else str(value)
    # Situations nobody's model wrote compare as one writer: nothing there moves with weights.
    if w.lower() in _NON_MODEL_WRITERS or w.lower().startswith(("template", "seeds")):
        return "template"
    return w


def _group_of(by: str | Callable[[dict], Any]) -> Callable[[dict[str, Any]], Any]:
    if callable(by):
        return by
    if not isinstance(by, str) or not by:
        raise ValueError(f"by must be a row key, a marker name or a callable; got {by!r}")

    def get(row: Mapping[str, Any]) -> Any:
        if by in row:
            return row[by]
        markers = row.get("markers")
        if isinstance(markers, Mapping) and by in markers:
            return markers[by]
        cur: Any = row
        for part in by.split("."):  # dotted path, e.g. scenario_dimensions.tier
            if not isinstance(cur, Mapping) or part not in cur:
                return None
            cur = cur[part]
        return cur

    return get


def _fmt_num(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _metric_verdict(delta: float | None, ci: tuple[float, float] | None, band: float | None) -> str:
    if delta is None or ci is None:
        return "insufficient_data"
    if band is not None and abs(delta) <= band:
        return "within_noise"
    if ci[0] > 0:
        return "improved"
    if ci[1] < 0:
        return "regressed"
    return "no_change"


def delta_report(
    before: Sequence[dict],
    after: Sequence[dict],
    target: str | None = None,
    must_not_regress: Sequence[str] = (),
    markers: Sequence[str] | None = None,
    by: str | Callable[[dict], Any] | None = None,
    run_std: float | Mapping[str, float | None] | None = None,
    run_std_runs: int | None = None,
    proxy: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    balance_rollouts: bool = False,
    alpha: float = 0.05,
    power: float = 0.8,
    ceiling_pass_rate: float = CEILING_PASS_RATE,
    answered_gap_points: float = ANSWERED_GAP_POINTS,
    answered_alpha: float = ANSWERED_P_MAX,
    lost: Mapping[str, Mapping[str, Sequence[str | None]] | None] | None = None,
    cli: bool = False,
) -> dict[str, Any]:
    """Compare ``after`` to ``before`` on pass@1 and every shared marker, paired by task.

    Returns a JSON-able dict: ``metrics`` (per metric: ``before``, ``after``, ``delta``,
    ``ci95`` at ``1 - alpha``, ``level``, ``p_value``, ``n_paired``, ``floor``,
    ``noise_band``, ``noise_note``, ``verdict``), ``target``, ``target_delta``,
    ``target_ci95``, ``target_verdict``, ``verdict`` (``moved``, ``no_change_detected``,
    ``within_eval_noise``, ``moved_unreplicated``, ``regressed``, ``over_optimized``,
    ``guards_failed``, ``ok``), ``headline_verdict``, ``ok``, ``n_paired_tasks``,
    ``n_unpaired_tasks``, ``paired_share``, ``prompt_mismatch`` (``rows.keys.prompt_mismatch``:
    paired tasks whose prompt sets differ, a ``prompts`` cause in ``not_comparable``),
    ``not_comparable``, ``ceiling``, ``config``
    (per side), ``answered``, ``writers``, ``run_std``, ``run_std_by_metric``,
    ``noise_band``, ``noise_rule``, ``eval_runs``, ``groups``/``groups_down`` (with ``by``),
    ``balanced``, ``sizing``, ``family_error`` and ``warnings``.

    Each task reads its fixed first batch: rows an adaptive policy added (``first_batch``)
    are left out, with a warning per arm.

    ``lost`` (``{"before": ..., "after": ...}``, each as ``pass_at``'s ``lost``: ``{task key:
    the selection_reason of each lost rollout}``) counts an arm's rollouts that left no row
    as failed repeats of their task in pass@1, as that run's own ``pass_at`` did under
    ``simulate.lost_as=failure``; ``lost_counted`` (given ``lost``) says how many each side
    counted. They carry no marker, setting, reply or prompt, so only pass@1 reads them.
    ``cli=True`` names each fix in a warning as ``wai-exp compare`` takes it (``CLI_FIXES``).

    Raises ``ValueError`` when ``alpha``/``power``/``n_boot``/``run_std_runs`` are out of
    range, when ``target`` or ``proxy`` is on neither side, or when a side has no rows.
    """
    try:
        _check_settings(alpha, power, n_boot, run_std_runs)
    except ValueError as exc:
        raise ValueError(cli_words(str(exc)) if cli else str(exc)) from None
    b_rows, a_rows = _both_sides(before, after)
    level = 1.0 - alpha
    warnings: list[str] = []
    not_comparable: list[str] = []
    names = _Names(
        _metric_name(target) if target is not None else PASS_AT_1,
        _metric_name(proxy) if proxy is not None else None,
        [_metric_name(m) for m in must_not_regress],
    )
    lost_b, lost_a = (lost_rows((lost or {}).get(side)) for side in ("before", "after"))
    arms = _Arms.read(
        (b_rows, lost_b), (a_rows, lost_a), markers, names, balance_rollouts, seed, warnings
    )
    tm, j_target, pair, sb, sa = arms.tm, arms.j_target, arms.pair, arms.sb, arms.sa

    # ---- per-metric deltas, one shared bootstrap, noise floors ---------------------------
    diffs = np.where(tm.paired, tm.a_means - tm.b_means, np.nan)
    intervals, pvalues = _intervals_and_pvalues(diffs, _metric_bounds(sb, sa), n_boot, seed, level)
    floors, floor_source, dfs, n_a, n_b, noise_rule = _floors(
        arms.metrics, run_std, run_std_runs, sb, sa, tm.b_idx, tm.a_idx, tm.n_tasks, warnings,
        alpha,
    )  # fmt: skip
    noise = _Noise(floors, floor_source, dfs, n_a, n_b, alpha, noise_rule, run_std_runs)
    metric_out = {
        m: _metric_entry(j, m, tm, sb, sa, intervals, pvalues, noise, level, warnings)
        for j, m in enumerate(arms.metrics)
    }

    # ---- verdicts on the target, the proxy and the guards --------------------------------
    t = metric_out[names.target]
    verdicts = _verdicts(
        metric_out, names, floor_source == "none", (sb, sa), warnings, not_comparable
    )

    # ---- comparability, groups, sizing ----------------------------------------------------
    comp = _comparability(
        arms, metric_out[PASS_AT_1]["noise_band"], answered_gap_points, answered_alpha,
        warnings, not_comparable,
    )  # fmt: skip
    ceiling = _ceiling(tm.b_means[:, j_target], pair.both, ceiling_pass_rate)
    if ceiling is not None:
        warnings.append(ceiling["reason"])
    groups, groups_down = _by_groups(by, arms, names.target, (n_boot, seed, level), warnings)
    sizing = _k_sizing(arms, t, power, alpha, balance_rollouts, warnings)

    # ---- assemble -----------------------------------------------------------------------
    report = _report(names, arms, metric_out, noise, verdicts, comp, ceiling, sizing)
    if cli:
        warnings = _in_cli_words(warnings, report, sizing["sizing"])
    if lost is not None:
        report["lost_counted"] = {"before": arms.n_lost[0], "after": arms.n_lost[1]}
    return {
        **report,
        "groups": groups,
        "groups_down": groups_down,
        "balanced": arms.balanced,
        "sizing": sizing["sizing"],
        "alpha": alpha,
        "level": level,
        "n_metrics": len(arms.metrics),
        "family_error": 1.0 - (1.0 - alpha) ** len(arms.metrics),
        "n_boot": n_boot,
        "seed": seed,
        "warnings": warnings,
    }


def _by_groups(
    by: str | Callable[[dict], Any] | None,
    arms: _Arms,
    target: str,
    boot: tuple[int, int, float],
    warnings: list[str],
) -> tuple[dict[str, Any] | None, list[str]]:
    """The target compared within each ``by`` group, and the groups that dropped (warned)."""
    if by is None:
        return None, []
    tm = arms.tm
    groups, down = _groups(
        by, arms.b_rows, arms.a_rows, arms.sb, arms.sa, tm.b_idx, tm.a_idx, tm.n_tasks,
        arms.j_target, *boot,
    )  # fmt: skip
    warnings += [_group_down_warning(g, groups[g], target) for g in down]
    return groups, down


def _verdicts(
    metric_out: dict[str, dict[str, Any]],
    names: _Names,
    unreplicated: bool,
    sides: tuple[_Side, _Side],
    warnings: list[str],
    not_comparable: list[str],
) -> _Verdicts:
    """The target's verdict, over-optimization and failed guards; ``not_comparable`` is
    shared, filled by the comparability checks that run after."""
    t = metric_out[names.target]
    target_verdict = _target_verdict(t["verdict"], unreplicated)
    if unreplicated and t["verdict"] in ("improved", "regressed"):
        warnings.append(_unreplicated_warning(names.target, sides[0].n_runs, sides[1].n_runs))
    over = _over_optimized(metric_out, names.target, names.proxy, target_verdict, warnings)
    guards_failed = _guards_failed(metric_out, names.guards, warnings)
    return _Verdicts(target_verdict, over, guards_failed, not_comparable)


def _in_cli_words(warnings: list[str], report: dict[str, Any], sizing: dict[str, Any]) -> list[str]:
    """The warnings in the words a command-line user types; the report's causes and the
    sizing warning rewritten in place."""
    report["not_comparable"] = [cli_words(c) for c in report["not_comparable"]]
    if sizing.get("warning"):
        sizing["warning"] = cli_words(sizing["warning"])
    return [cli_words(w) for w in warnings]


@dataclass
class _Names:
    """The metric names the caller asked about: the target, the proxy and the guards."""

    target: str
    proxy: str | None
    guards: list[str]


@dataclass
class _Arms:
    """Both arms read once: their rows (balanced, first batch), per-row values, the
    compared metrics, per-task means and the pairing over the target."""

    b_rows: list[dict[str, Any]]
    a_rows: list[dict[str, Any]]
    sb: _Side
    sa: _Side
    metrics: list[str]
    tm: _TaskMeans
    j_target: int
    pair: _Pairing
    balanced: Any
    #: (before, after): the lost rollouts read as failed rows, after the first batch
    n_lost: tuple[int, int] = (0, 0)

    @classmethod
    def read(
        cls,
        before: tuple[list[dict[str, Any]], list[dict[str, Any]]],
        after: tuple[list[dict[str, Any]], list[dict[str, Any]]],
        markers: Sequence[str] | None,
        names: _Names,
        balance_rollouts: bool,
        seed: int,
        warnings: list[str],
    ) -> _Arms:
        """Each side is (rows, lost rollouts as reward-0 rows). The lost ones go through
        the balance and the first batch with the rows, then sit after them in the side's
        values: ``b_rows``/``a_rows`` stay the real rows, for every check that reads a
        row's settings, reply, prompt or writer."""
        lost_ids = {id(r) for r in (*before[1], *after[1])}
        b_rows, a_rows = before[0] + before[1], after[0] + after[1]
        balanced = None
        if balance_rollouts:  # before reading values
            b_rows, a_rows, balanced = _balance(b_rows, a_rows, seed)
        # Every metric reads each task's fixed first batch, as pass_at's pass@1 does.
        (b_rows, b_added), (a_rows, a_added) = first_batch(b_rows), first_batch(a_rows)
        warnings += [
            f"{name}: {adaptive_note(n)}"
            for name, n in (("before", b_added), ("after", a_added))
            if n
        ]
        b_rows, b_lost = _split_lost(b_rows, lost_ids)
        a_rows, a_lost = _split_lost(a_rows, lost_ids)
        sb, sa = _Side(b_rows + b_lost), _Side(a_rows + a_lost)
        named = [names.target, names.proxy, *names.guards]
        metrics, marker_list = _metrics(sb, sa, markers, named, warnings)
        tm = _TaskMeans.of(sb, sa, metrics)
        j_target = metrics.index(names.target)
        _check_target(tm, metrics, names.target, names.proxy, marker_list)
        pair = _Pairing.over(tm, j_target, warnings)
        return cls(
            b_rows, a_rows, sb, sa, metrics, tm, j_target, pair, balanced,
            (len(b_lost), len(a_lost)),
        )  # fmt: skip


def _split_lost(
    rows: list[dict[str, Any]], lost_ids: set[int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the real rows, the lost rollouts' rows), each in its order."""
    if not lost_ids:
        return rows, []
    return [r for r in rows if id(r) not in lost_ids], [r for r in rows if id(r) in lost_ids]


@dataclass
class _Verdicts:
    """What the comparison concluded; ``ok`` is the gate."""

    target: str
    over_optimized: bool
    guards_failed: list[str]
    not_comparable: list[str]

    @property
    def regressed(self) -> bool:
        return self.target == "regressed"

    @property
    def ok(self) -> bool:
        return (
            not self.not_comparable
            and not self.guards_failed
            and not self.over_optimized
            and not self.regressed
        )

    def block(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "moved": self.target == "moved",
            "no_change_detected": self.target == "no_change_detected",
            "within_eval_noise": self.target == "within_eval_noise",
            "moved_unreplicated": self.target == "moved_unreplicated",
            "regressed": self.regressed,
            "over_optimized": self.over_optimized,
            "guards_failed": self.guards_failed,
            "ok": self.ok,
        }


@dataclass
class _Comparability:
    """Each arm's settings, answered share, writers and prompt check."""

    configs: dict[str, dict[str, Any]]
    answered: dict[str, Any]
    writers: dict[str, list[str]]
    prompts: dict[str, Any]


def _comparability(
    arms: _Arms,
    pass_noise_band: float | None,
    answered_gap_points: float,
    answered_alpha: float,
    warnings: list[str],
    not_comparable: list[str],
) -> _Comparability:
    """Whether the arms ran under the same settings, answered alike, drew the same
    situations from the same writer and asked the same prompts per task."""
    configs = _configs(arms.b_rows, arms.a_rows, arms.sb, arms.sa, warnings)
    answered = _answered_check(
        configs, arms.b_rows, arms.a_rows, pass_noise_band, answered_gap_points, answered_alpha
    )
    if answered["warning"]:
        warnings.append(answered["warning"])
    if answered["not_comparable"]:
        not_comparable.append(answered["not_comparable"])
    writers = _writers_check(arms.b_rows, arms.a_rows, arms.pair, warnings, not_comparable)
    prompts = prompt_mismatch(arms.b_rows, arms.a_rows)
    if prompts["n_mismatched"]:
        not_comparable.append(_prompts_cause(prompts))
    return _Comparability(configs, answered, writers, prompts)


def _k_sizing(
    arms: _Arms,
    t: Mapping[str, Any],
    power: float,
    alpha: float,
    balance_rollouts: bool,
    warnings: list[str],
) -> dict[str, Any]:
    """k per side over the target's paired tasks, and the sizing (with a warning when the
    arms ran unequal k).

    This k, ``config[side]["k"]`` and ``sizing["k"]`` count rows per task: under ``runs=N``
    every run's repeats of a task (4 repeats x 3 runs = 12). That is what pass@1's power
    depends on; it is not the k of a run's pass^k, so the printed words say rows per task."""
    tm, j, both = arms.tm, arms.j_target, arms.pair.both
    k_b, k_a = _mode_k(tm.b_counts[both, j]), _mode_k(tm.a_counts[both, j])
    t_diffs = tm.a_means[both, j] - tm.b_means[both, j]
    sizing = _sizing(
        arms.pair.n_paired, t, k_b, t_diffs, power, alpha, tm.b_means[both, j],
        tm.b_counts[both, j],
    )  # fmt: skip
    kmin_b, kmin_a = _min_k(tm.b_counts[both, j]), _min_k(tm.a_counts[both, j])
    if k_b is not None and k_a is not None and (k_b != k_a or kmin_b != kmin_a):
        n_short = int((tm.b_counts[both, j] != tm.a_counts[both, j]).sum())
        runs = (arms.sb.n_runs, arms.sa.n_runs)
        sizing["warning"] = _runs_k_warning((k_b, k_a), (kmin_b, kmin_a), runs) or (
            _unequal_k_warning(
                k_b, k_a, kmin_b, kmin_a, n_short, arms.pair.n_paired, balance_rollouts
            )
        )
        warnings.append(sizing["warning"])
    return {
        "sizing": sizing,
        "k": {"before": k_b, "after": k_a},
        "k_min": {"before": kmin_b, "after": kmin_a},
    }


def _report(
    names: _Names,
    arms: _Arms,
    metric_out: dict[str, dict[str, Any]],
    noise: _Noise,
    verdicts: _Verdicts,
    comp: _Comparability,
    ceiling: dict[str, Any] | None,
    sizing: Mapping[str, Any],
) -> dict[str, Any]:
    """The report's head, in the order a reader meets it (``delta_report`` adds the rest)."""
    t = metric_out[names.target]
    return {
        "target": names.target,
        "proxy": names.proxy,
        "must_not_regress": names.guards,
        "metrics": metric_out,
        "target_delta": t["delta"],
        "target_ci95": t["ci95"],
        "target_verdict": verdicts.target,
        "verdict": verdicts.block(),
        "headline_verdict": _headline(
            verdicts.not_comparable,
            verdicts.regressed or bool(verdicts.guards_failed) or verdicts.over_optimized,
            verdicts.target,
            t["ci95"],
            arms.sb.n_runs,
            arms.sa.n_runs,
        ),
        "ok": verdicts.ok,
        "over_optimized": verdicts.over_optimized,
        "n_paired_tasks": arms.pair.n_paired,
        "n_unpaired_tasks": arms.pair.n_unpaired,
        "paired_share": arms.pair.share,
        "prompt_mismatch": comp.prompts,
        "not_comparable": verdicts.not_comparable,
        "ceiling": ceiling,
        "config": comp.configs,
        "answered": {
            k: v for k, v in comp.answered.items() if k not in ("warning", "not_comparable")
        },
        "writers": comp.writers,
        "k": sizing["k"],
        "k_min": sizing["k_min"],
        "run_std": noise.floors.get(names.target),
        "run_std_by_metric": dict(noise.floors) if noise.source != "none" else {},
        "run_std_runs": noise.run_std_runs,
        "noise_band": t["noise_band"],
        "noise_rule": noise.rule,
        "floor_source": noise.source,
        "eval_runs": {"before": arms.sb.n_runs, "after": arms.sa.n_runs},
    }


def _check_settings(alpha: float, power: float, n_boot: int, run_std_runs: int | None) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha={alpha} must be in (0, 1); 0.05 gives 95% intervals")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power={power} must be in (0, 1); the default is 0.8")
    if n_boot < 100:
        raise ValueError(f"n_boot={n_boot} is too few resamples for an interval; use >= 1000")
    if run_std_runs is not None and run_std_runs < 2:
        raise ValueError(
            f"run_std_runs={run_std_runs}: a re-run spread needs at least 2 runs; pass "
            f"{N_RUNS} or leave it None"
        )


def _both_sides(
    before: Sequence[dict], after: Sequence[dict]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    b_rows, a_rows = list(as_rows(before)), list(as_rows(after))
    if not b_rows or not a_rows:
        raise ValueError(
            f"delta_report needs rows on both sides (before: {len(b_rows)}, after: "
            f"{len(a_rows)}); pass the graded rows of each arm"
        )
    return b_rows, a_rows


def _metrics(
    sb: _Side,
    sa: _Side,
    markers: Sequence[str] | None,
    named: list[str | None],
    warnings: list[str],
) -> tuple[list[str], list[str]]:
    """``(metrics, marker_list)``: pass@1 first, then the compared markers (every shared
    one, or ``markers``) and any marker the target, proxy or a guard names."""
    shared_markers = sb.marker_names() & sa.marker_names()
    if markers is None:
        marker_list = sorted(shared_markers)
    else:
        marker_list = [_metric_name(m) for m in markers]
        missing = [m for m in marker_list if m not in shared_markers]
        if missing:
            warnings.append(
                f"marker(s) {', '.join(missing)} are not on both sides: compared where present"
            )
    extra = [m for m in named if m and m != PASS_AT_1 and m not in marker_list]
    metrics = [PASS_AT_1] + [m for m in dict.fromkeys(marker_list + extra) if m != PASS_AT_1]
    return metrics, marker_list


@dataclass
class _TaskMeans:
    """Both arms' per-task counts and means (tasks x metrics) over the union of task keys,
    sorted as ``compare_runs`` pairs them, and each row's task index."""

    b_idx: np.ndarray
    a_idx: np.ndarray
    n_tasks: int
    b_counts: np.ndarray
    b_means: np.ndarray
    a_counts: np.ndarray
    a_means: np.ndarray
    #: tasks x metrics: the metric has a value on both sides of the task
    paired: np.ndarray

    @classmethod
    def of(cls, sb: _Side, sa: _Side, metrics: list[str]) -> _TaskMeans:
        sb.build(metrics)
        sa.build(metrics)
        uniq, inv = factorize(sb.keys + sa.keys)
        n_tasks = len(uniq)
        b_idx, a_idx = inv[: len(sb.keys)], inv[len(sb.keys) :]
        b_counts, b_means = _task_means(b_idx, sb.values, n_tasks)
        a_counts, a_means = _task_means(a_idx, sa.values, n_tasks)
        paired = (b_counts > 0) & (a_counts > 0)
        return cls(b_idx, a_idx, n_tasks, b_counts, b_means, a_counts, a_means, paired)


def _check_target(
    tm: _TaskMeans,
    metrics: list[str],
    target_name: str,
    proxy_name: str | None,
    marker_list: list[str],
) -> None:
    j_target = metrics.index(target_name)
    if not (tm.b_counts[:, j_target] > 0).any() and not (tm.a_counts[:, j_target] > 0).any():
        what = "a binary reward" if target_name == PASS_AT_1 else f"marker {target_name!r}"
        raise ValueError(
            f"target {target_name!r}: no row on either side carries {what}; grade the rows "
            f"first, or name one of the shared markers: {', '.join(marker_list) or '(none)'}"
        )
    for side, counts in (("before", tm.b_counts), ("after", tm.a_counts)):
        if not (counts[:, j_target] > 0).any():
            raise ValueError(
                f"target {target_name!r} is on the other side only: no {side} row carries it. "
                "Grade both arms the same way (or stamp the marker on both) before comparing"
            )
    if proxy_name is not None and not tm.paired[:, metrics.index(proxy_name)].any():
        raise ValueError(
            f"proxy {proxy_name!r} is not on both sides' rows; name a marker both carry: "
            f"{', '.join(marker_list) or '(none)'}"
        )


@dataclass
class _Pairing:
    """The tasks the target pairs on, and what was dropped for being on one side only."""

    both: np.ndarray
    n_paired: int
    n_either: int
    n_unpaired: int
    share: float

    @classmethod
    def over(cls, tm: _TaskMeans, j_target: int, warnings: list[str]) -> _Pairing:
        on_b, on_a = tm.b_counts[:, j_target] > 0, tm.a_counts[:, j_target] > 0
        n_paired = int((on_b & on_a).sum())
        n_either = int((on_b | on_a).sum())
        n_unpaired = n_either - n_paired
        if n_unpaired:
            warnings.append(_unpaired_warning(tm, on_b, on_a, n_unpaired))
        share = n_paired / n_either if n_either else 0.0
        return cls(on_b & on_a, n_paired, n_either, n_unpaired, share)


def _unpaired_warning(tm: _TaskMeans, on_b: np.ndarray, on_a: np.ndarray, n: int) -> str:
    """Why ``n`` tasks measured on one side were dropped: the other side has no row of the
    task, or has rows whose target value is missing (a partial reward or an unjudged row
    carries no pass@1), which a reader must not mistake for an absent task."""
    has_b = np.bincount(tm.b_idx, minlength=tm.n_tasks) > 0
    has_a = np.bincount(tm.a_idx, minlength=tm.n_tasks) > 0
    only_b, only_a = on_b & ~on_a, on_a & ~on_b
    text = (
        f"{counted(n, 'task')} measured on one side only ({int(only_b.sum())} before, "
        f"{int(only_a.sum())} after), dropped from the paired comparison"
    )
    unread_a, unread_b = int((only_b & has_a).sum()), int((only_a & has_b).sum())
    if unread_a or unread_b:
        text += (
            f"; {unread_a + unread_b} of them with rows on the other side too "
            f"({unread_a} after, {unread_b} before), none carrying the target (for pass@1, "
            "a partial reward or an unjudged row carries none: grade both sides with a judge "
            "that returns 0/1)"
        )
    return text


@dataclass
class _Noise:
    """The re-run floors ``_floors`` found, and what a noise band is computed from."""

    floors: Mapping[str, float | None]
    source: str
    dfs: Mapping[str, Any]
    n_a: Any
    n_b: Any
    alpha: float
    rule: Any
    run_std_runs: int | None


def _metric_entry(
    j: int,
    m: str,
    tm: _TaskMeans,
    sb: _Side,
    sa: _Side,
    intervals: list[list[float] | None],
    pvalues: list[float | None],
    noise: _Noise,
    level: float,
    warnings: list[str],
) -> dict[str, Any]:
    """One metric's paired delta, interval, p-value, noise band and verdict."""
    pm = tm.paired[:, j]
    n = int(pm.sum())
    entry: dict[str, Any] = {
        "n_paired": n,
        "n_before_only": int(((tm.b_counts[:, j] > 0) & ~pm).sum()),
        "n_after_only": int(((tm.a_counts[:, j] > 0) & ~pm).sum()),
        "before": float(tm.b_means[pm, j].mean()) if n else None,
        "after": float(tm.a_means[pm, j].mean()) if n else None,
        "delta": None,
        "ci95": None,
        "level": level,
        "p_value": None,
        "floor": noise.floors.get(m),
        "noise_band": None,
        "noise_note": None,
    }
    if n:
        _fill_delta(entry, j, m, pm, tm, sb, sa, intervals[j], pvalues[j], level)
    if noise.source in ("given", "pooled"):
        if noise.floors.get(m) is None:
            entry["noise_note"] = "no_replicate_floor"
            warnings.append(
                f"{m}: no re-run floor for this metric (run_std lacks it); its verdict "
                f"rests on the task interval alone. Pass {RUN_STD_OF} from re-runs that "
                "carry it"
            )
        else:
            entry["noise_band"] = noise_band(
                noise.floors[m], noise.n_a, noise.n_b, noise.dfs.get(m), alpha=noise.alpha
            )
            entry["df"] = noise.dfs.get(m)
    elif n and entry["ci95"] is not None:
        entry["noise_note"] = "unreplicated"
    entry["verdict"] = _metric_verdict(
        entry["delta"], tuple(entry["ci95"]) if entry["ci95"] else None, entry["noise_band"]
    )
    if n < 2 and n:
        entry["note"] = f"{m} pairs on {n} task; an interval needs at least 2"
    return entry


def _fill_delta(
    entry: dict[str, Any],
    j: int,
    m: str,
    pm: np.ndarray,
    tm: _TaskMeans,
    sb: _Side,
    sa: _Side,
    interval: list[float] | None,
    pvalue: float | None,
    level: float,
) -> None:
    """A paired metric's delta, interval and p-value, and the notes on a degenerate one."""
    n = int(pm.sum())
    d = tm.a_means[pm, j] - tm.b_means[pm, j]
    entry["delta"] = float(d.mean())
    entry["ci95"] = interval
    entry["p_value"] = pvalue
    if n >= 2 and d.min() == d.max():
        # No resample can differ; n tasks agreeing is not certainty (compare_runs
        # gives the same interval).
        iv = paired_boundary_interval(
            float(tm.b_means[pm, j].mean()), float(tm.a_means[pm, j].mean()), n, level
        )
        entry["ci95"] = iv.as_list()
        entry["interval_method"] = "paired_boundary"
        entry["interval_note"] = paired_boundary_words(float(d[0]), n)
    vals_b = sb.values[:, j][~np.isnan(sb.values[:, j])]
    vals_a = sa.values[:, j][~np.isnan(sa.values[:, j])]
    both = np.concatenate([vals_b, vals_a])
    if both.size and np.all(both == both[0]):
        entry["degenerate"] = True
        entry["note"] = (
            f"every row on both sides scored {float(both[0]):g} on {m}: it cannot show "
            "a change, and a guard on it cannot fail"
        )


#: The target's verdict from its metric verdict (an improvement with no re-run floor is
#: ``moved_unreplicated``).
_TARGET_VERDICTS = {
    "regressed": "regressed",
    "within_noise": "within_eval_noise",
    "insufficient_data": "insufficient_data",
}


def _target_verdict(metric_verdict: str, unreplicated: bool) -> str:
    # One evaluation a side is a draw, not a distribution, whichever way it moved: a drop
    # there is as unconfirmed as a gain, so both read moved_unreplicated.
    if unreplicated and metric_verdict in ("improved", "regressed"):
        return "moved_unreplicated"
    if metric_verdict == "improved":
        return "moved"
    return _TARGET_VERDICTS.get(metric_verdict, "no_change_detected")


def _unreplicated_warning(target_name: str, n_before: int, n_after: int) -> str:
    return (
        f"{target_name} moved, but with {counted(n_before, 'evaluation run')} before and "
        f"{n_after} after and no run_std there is no re-run floor: one evaluation is a "
        f"draw, not a distribution. Evaluate each arm with runs=3 ({RERUN_EACH}) or pass "
        f"{RUN_STD} with {RUN_STD_RUNS}"
    )


def _over_optimized(
    metric_out: Mapping[str, dict[str, Any]],
    target_name: str,
    proxy_name: str | None,
    target_verdict: str,
    warnings: list[str],
) -> bool:
    """Whether the proxy moved where the target did not, or past the target's interval."""
    if proxy_name is None:
        return False
    if proxy_name == target_name:
        warnings.append(f"proxy and target are both {proxy_name}: over-optimization unchecked")
        return False
    p, t = metric_out[proxy_name], metric_out[target_name]
    proxy_up = p["verdict"] == "improved"
    target_up = target_verdict in ("moved", "moved_unreplicated") and t["verdict"] == "improved"
    above = p["ci95"] is not None and t["ci95"] is not None and p["ci95"][0] > t["ci95"][1]
    over_optimized = (proxy_up and not target_up) or above
    if over_optimized:
        warnings.append(
            f"over-optimized: the proxy {proxy_name} moved "
            f"{_fmt_num(p['delta'], True)} while the target {target_name} moved "
            f"{_fmt_num(t['delta'], True)}; the policy learned something the target "
            "does not credit (rlhf-book ch. 14)"
        )
    return over_optimized


def _guards_failed(
    metric_out: Mapping[str, dict[str, Any]], guard_names: list[str], warnings: list[str]
) -> list[str]:
    """The ``must_not_regress`` metrics that regressed or could not be checked."""
    failed: list[str] = []
    for g in guard_names:
        entry = metric_out.get(g)
        if entry is None or entry["n_paired"] == 0:
            failed.append(g)
            warnings.append(
                f"must_not_regress {g!r} is on neither side's paired tasks: a guard that cannot "
                "be checked fails"
            )
        elif entry["verdict"] == "regressed":
            failed.append(g)
            warnings.append(
                f"must_not_regress {g} regressed: {_fmt_num(entry['delta'], True)} "
                f"[{_fmt_num(entry['ci95'][0], True)}, {_fmt_num(entry['ci95'][1], True)}]"
            )
        elif entry.get("degenerate"):
            warnings.append(f"must_not_regress {g} is degenerate: this guard cannot fail")
    return failed


def _configs(
    b_rows: list[dict[str, Any]],
    a_rows: list[dict[str, Any]],
    sb: _Side,
    sa: _Side,
    warnings: list[str],
) -> dict[str, dict[str, Any]]:
    """Each arm's run settings, and a warning for each one the arms (or an arm's own rows)
    disagree on."""
    # run_config's rule, handed the task keys this report already read (no second pass)
    configs = {
        "before": run_config_with_keys(b_rows, None, sb.keys[: len(b_rows)]),
        "after": run_config_with_keys(a_rows, None, sa.keys[: len(a_rows)]),
    }
    for side, rows, keys in (("before", b_rows, sb.keys), ("after", a_rows, sa.keys)):
        if len(keys) > len(rows):  # lost rollouts counted: they hold their tasks' slots
            configs[side].update(_group_shape(keys))
    configs["before"]["eval_runs"] = sb.n_runs
    configs["after"]["eval_runs"] = sa.n_runs
    cb, ca = configs["before"], configs["after"]
    for key in COMPARED_SETTINGS:
        vb, va = cb.get(key), ca.get(key)
        if vb is not None and va is not None and vb != va:
            warnings.append(
                f"the arms disagree on {_SETTING_WORDS.get(key, key)}: before {vb!r}, after {va!r}"
            )
    for side in ("before", "after"):
        mixed = [m for m in configs[side].get("mixed") or [] if m != "policy_version"]
        if mixed:
            warnings.append(
                f"the {side} rows disagree among themselves on {', '.join(mixed)}: that arm is "
                "a mix of settings, so its rates average over them"
            )
    sha_b, sha_a = cb.get("prompt_sha"), ca.get("prompt_sha")
    if sha_b is not None and sha_a is not None and sha_b != sha_a:
        warnings.append(
            f"system_prompt_sha differs (before {sha_b}, after {sha_a}): the arms ran under "
            "different system prompts, so the delta includes the prompt change"
        )
    pv_b, pv_a = cb.get("policy_version"), ca.get("policy_version")
    if _same_rollouts(b_rows, a_rows):
        warnings.append(
            f"both sides are the same {len(b_rows)} rollouts (the same rollout ids): this "
            "compares a run's rows with themselves, not a re-run and not a trained policy "
            "with its base, so every delta is 0 by construction"
        )
    elif pv_b is not None and pv_b == pv_a:
        warnings.append(
            f"both sides are policy version {pv_b!r}: this compares the policy with itself "
            "(a re-run), not a trained policy with its base"
        )
    return configs


def _group_shape(keys: list[str]) -> dict[str, Any]:
    """``n_tasks`` and ``k`` (the smallest group of two or more, run_config's rule)."""
    sizes = Counter(keys)
    repeated = [n for n in sizes.values() if n >= 2]
    return {"n_tasks": len(sizes), "k": min(repeated) if repeated else None}


def _same_rollouts(b_rows: list[dict[str, Any]], a_rows: list[dict[str, Any]]) -> bool:
    """Both sides hold the same rollouts: every row has a rollout id, the ids agree and so
    do each id's reward and reply. Ids alone can repeat across two agents that the run id
    does not tell apart (two callables of one name), whose answers differ."""
    if len(b_rows) != len(a_rows):
        return False
    ids_b = sorted(str(r.get("rollout_id") or "") for r in b_rows)
    ids_a = sorted(str(r.get("rollout_id") or "") for r in a_rows)
    if not ids_b or "" in ids_b or ids_b != ids_a:
        return False
    answers = {str(r["rollout_id"]): (r.get("reward"), r.get("final_text")) for r in b_rows}
    return all(
        answers[str(r["rollout_id"])] == (r.get("reward"), r.get("final_text")) for r in a_rows
    )


def _writers_check(
    b_rows: list[dict[str, Any]],
    a_rows: list[dict[str, Any]],
    pair: _Pairing,
    warnings: list[str],
    not_comparable: list[str],
) -> dict[str, list[str]]:
    """Each arm's situation writers; arms that drew mostly different situations are not
    comparable, and different writers are worth a warning."""
    writers = {
        "before": sorted({_writer(w) for w in {r.get("writer_model") for r in b_rows}}),
        "after": sorted({_writer(w) for w in {r.get("writer_model") for r in a_rows}}),
    }
    same_writer = writers["before"] == writers["after"]
    if pair.n_unpaired and pair.share < SITUATIONS_MIN_PAIRED_SHARE:
        who = (
            "the same writer"
            if same_writer
            else f"different writers ({', '.join(writers['before'])} vs "
            f"{', '.join(writers['after'])})"
        )
        not_comparable.append(
            f"situations: only {pair.share:.0%} of tasks are on both sides ({pair.n_paired} of "
            f"{pair.n_either}); the arms drew different situation sets from {who}, so the delta "
            "over the few that pair is between two evals. Pin the after arm to the before "
            f"run's tasks ({PIN_TASKS}) or compare per tier with dataset_report"
        )
    elif not same_writer:
        warnings.append(
            f"the arms' situations come from different writers ({', '.join(writers['before'])} "
            f"vs {', '.join(writers['after'])}): rephrased situations can move with the writer"
        )
    return writers


def _prompts_cause(prompts: Mapping[str, Any]) -> str:
    ex = prompts["examples"][0]
    return (
        f"prompts: {prompts['n_mismatched']} of {prompts['n_checked']} paired tasks carry "
        f"different prompts on the two sides (task {ex['task']}: before {ex['a']!r}, after "
        f"{ex['b']!r}); one task id names two different asks, so their delta compares "
        f"different questions. Run the after arm on the before run's tasks ({PIN_TASKS})"
    )


def _group_down_warning(g: str, e: Mapping[str, Any], target_name: str) -> str:
    return (
        f"group {g}: {target_name} dropped {_fmt_num(e['delta'], True)} "
        f"[{_fmt_num(e['ci95'][0], True)}, {_fmt_num(e['ci95'][1], True)}] while the "
        "headline is read over every group"
    )


def _runs_k_warning(
    k: tuple[int, int], kmin: tuple[int | None, int | None], runs: tuple[int, int]
) -> str | None:
    """The unequal-rows warning when the eval runs explain it: every task has the same rows
    per run on both sides (runs=3 x 4 repeats against runs=1 x 4), so nothing was lost and
    the lost-rollout advice would send the user after a cause that is not there. None when
    the runs do not explain the counts."""
    (k_b, k_a), (n_b, n_a) = k, runs
    per_run = {k_b / n_b, k_a / n_a}
    if n_b == n_a or len(per_run) != 1 or kmin != k:
        return None
    return (
        f"unequal rows per task by design: before pools {counted(n_b, 'eval run')} ({k_b} rows "
        f"per task), after {n_a} ({k_a}), {int(k_b / n_b)} a run on both sides: no rollout was "
        "lost, and each task's pass rate is a mean over its own rows, so the paired "
        "interval holds"
    )


def _unequal_k_warning(
    k_b: int, k_a: int, kmin_b: int | None, kmin_a: int | None, n_short: int, n_paired: int,
    balance_rollouts: bool,
) -> str:  # fmt: skip
    # k per side is the usual rows per task; a run that lost rollouts on a minority of tasks
    # keeps that mode, so the fewest rows per paired task is compared as well (the k
    # pass_at would pick): 4 against 2 on a third of the tasks is still unequal. The words
    # say rows per task, not k: under runs=N they pool every run's repeats, and "k=12"
    # reads as a pass^12.
    return (
        f"unequal rows per task: before has {counted(k_b, 'row')} per task (fewest {kmin_b}), after "
        f"{k_a} (fewest {kmin_a}); {n_short} of {n_paired} paired tasks differ. Rows "
        "lost at random only widen the interval; rows lost for a reason (timeouts on hard "
        f"tasks, empty replies on long ones) bias the short arm. Check {LOST_BY} and "
        "re-run the short arm on its short tasks"
        + ("" if balance_rollouts else f" ({BALANCE} trims both to one count)")
    )


#: The headline when the paired interval excludes zero but the delta is inside the eval's
#: own re-run band: the arms differ on these tasks, and re-running the eval moves it as far.
REAL_WITHIN_NOISE = "REAL ON THESE TASKS, WITHIN RE-RUN NOISE"


def _headline(
    not_comparable: list[str],
    failed: bool,
    target_verdict: str,
    target_ci: tuple[float, float] | None,
    n_before: int,
    n_after: int,
) -> str:
    """The verdict in words; ``NO DIFFERENCE`` only for an interval that holds zero."""
    if not_comparable:
        causes = [c.split(":", 1)[0] for c in not_comparable]
        return f"NOT COMPARABLE ({', '.join(causes)})"
    if failed:
        return "FAIL"
    if target_verdict == "moved":
        return "PASS"
    if target_verdict == "moved_unreplicated":
        # The interval excludes zero, but one evaluation a side is a draw, not a
        # distribution: neither PASS, FAIL nor NO DIFFERENCE says what the numbers say.
        return f"INCONCLUSIVE ({_runs_phrase(n_before, n_after)}: rerun to confirm)"
    if target_ci is None:
        return "NOT MEASURED (no interval on the target: too few paired tasks)"
    if target_ci[0] > 0 or target_ci[1] < 0:
        return REAL_WITHIN_NOISE
    return "NO DIFFERENCE"


def paired_headline(
    delta: float | None,
    ci: tuple[float, float] | None,
    n_runs_before: int,
    n_runs_after: int,
) -> str:
    """``delta_report``'s ``headline_verdict`` for one paired delta with no guards and no
    re-run floor on the same tasks: ``NO DIFFERENCE`` (the interval holds zero), ``PASS`` /
    ``FAIL`` (it excludes zero, two or more eval runs a side), ``INCONCLUSIVE (1 eval run a
    side: rerun to confirm)`` (it excludes zero on one run), ``NOT MEASURED (...)`` (no
    interval). For tables that pair two configurations over tasks (a sweep's values), so
    their words are ``compare``'s."""
    unreplicated = min(n_runs_before, n_runs_after) < 2
    target = _target_verdict(_metric_verdict(delta, ci, None), unreplicated)
    return _headline([], target == "regressed", target, ci, n_runs_before, n_runs_after)


def _runs_phrase(n_before: int, n_after: int) -> str:
    """``1 eval run a side`` / ``1 eval run before, 3 after``: the runs behind a move."""
    if n_before == n_after:
        return f"{n_before} eval run{'' if n_before == 1 else 's'} a side"
    return f"{n_before} eval run{'' if n_before == 1 else 's'} before, {n_after} after"


def _mode_k(counts: np.ndarray) -> int | None:
    if counts.size == 0:
        return None
    vals, freq = np.unique(counts.astype(int), return_counts=True)
    return int(vals[np.argmax(freq)])


def _min_k(counts: np.ndarray) -> int | None:
    return int(counts.min()) if counts.size else None


def _balance(
    b_rows: list[RowT], a_rows: list[RowT], seed: int
) -> tuple[list[RowT], list[RowT], dict[str, int]]:
    """Trim every paired task to the rows both sides have, chosen by ``seed``."""
    rng = as_generator(seed)
    keys = np.array([task_key(r) for r in b_rows] + [task_key(r) for r in a_rows], dtype=object)
    uniq, inv = np.unique(keys.astype(str), return_inverse=True)
    nb = len(b_rows)
    cb = np.bincount(inv[:nb], minlength=uniq.size)
    ca = np.bincount(inv[nb:], minlength=uniq.size)
    keep_n = np.where((cb > 0) & (ca > 0), np.minimum(cb, ca), np.maximum(cb, ca))

    def trim(idx: np.ndarray) -> np.ndarray:
        # rank rows within their task in a random order; keep the first keep_n[task]
        order = np.lexsort((rng.random(idx.size), idx))
        sorted_idx = idx[order]
        first = np.searchsorted(sorted_idx, sorted_idx, side="left")
        rank = np.arange(idx.size) - first
        keep = np.zeros(idx.size, dtype=bool)
        keep[order] = rank < keep_n[sorted_idx]
        return keep

    kb, ka = trim(inv[:nb]), trim(inv[nb:])
    new_b = [r for r, k in zip(b_rows, kb, strict=True) if k]
    new_a = [r for r, k in zip(a_rows, ka, strict=True) if k]
    return new_b, new_a, {"before": nb - len(new_b), "after": len(a_rows) - len(new_a)}


def _floors(
    metrics: list[str],
    run_std: float | Mapping[str, float | None] | None,
    run_std_runs: int | None,
    sb: _Side,
    sa: _Side,
    b_idx: np.ndarray,
    a_idx: np.ndarray,
    n_tasks: int,
    warnings: list[str],
    alpha: float,
) -> tuple[dict[str, float | None], str, dict[str, float | None], int, int, str | None]:
    """Each metric's re-run floor, its source, its df (None: 1.96), runs per side, the rule."""
    n_b, n_a = sb.n_runs, sa.n_runs
    level = 1 - alpha
    z = 1.96 if math.isclose(alpha, 0.05) else z_quantile(level)
    if run_std is not None:
        if isinstance(run_std, Mapping):
            given = {_metric_name(str(k)): v for k, v in run_std.items()}
            floors = {m: (None if (g := given.get(m)) is None else float(g)) for m in metrics}
        else:
            floors = {m: float(run_std) for m in metrics}
        bad = [m for m, v in floors.items() if v is not None and not v >= 0]
        if bad:
            raise ValueError(f"run_std for {', '.join(bad)} must be a non-negative sd")
        if run_std_runs is not None:
            df: float | None = run_std_runs - 1
            q = t_quantile(run_std_runs - 1, level)
            rule = (
                f"within_noise when |delta| <= t({level:g}, df={run_std_runs - 1}) = {q:.3f} x "
                f"floor x sqrt(1/{n_b} + 1/{n_a}) (floor given, from {run_std_runs} re-runs)"
            )
        else:
            df = None
            rule = f"within_noise when |delta| <= {z:.2f} x floor x sqrt(1/{n_b} + 1/{n_a})"
            warnings.append(
                "run_std given without run_std_runs: the band uses 1.96 as if the floor were "
                f"the eval's exact spread; pass {RUN_STD_RUNS} so it "
                "uses the t quantile for a floor estimated from few re-runs"
            )
        return floors, "given", {m: df for m in metrics}, n_a, n_b, rule
    if n_b >= 2 and n_a >= 2:
        rb = _run_metric_means(sb, b_idx, n_tasks)
        ra = _run_metric_means(sa, a_idx, n_tasks)
        floors = {}
        dfs: dict[str, float | None] = {}
        for j, m in enumerate(metrics):
            ss, dof = 0.0, 0
            for runs in (rb[:, j], ra[:, j]):
                runs = runs[~np.isnan(runs)]
                if runs.size >= 2:
                    ss += float(((runs - runs.mean()) ** 2).sum())
                    dof += runs.size - 1
            floors[m] = math.sqrt(ss / dof) if dof else None
            dfs[m] = float(dof) if dof else None
        df = float(n_b - 1 + n_a - 1)
        q = t_quantile(df, level)
        rule = (
            f"within_noise when |delta| <= t({level:g}, df={int(df)}) = {q:.3f} x floor x "
            f"sqrt(1/{n_b} + 1/{n_a}); floors pooled over {n_b} + {n_a} eval runs"
        )
        return floors, "pooled", dfs, n_a, n_b, rule
    return {m: None for m in metrics}, "none", {}, n_a, n_b, None


def _answered_check(
    configs: dict[str, dict[str, Any]],
    b_rows: Sequence[Mapping[str, Any]],
    a_rows: Sequence[Mapping[str, Any]],
    band: float | None,
    gap_points: float,
    p_max: float,
) -> dict[str, Any]:
    sb_, sa_ = configs["before"].get("answered_share"), configs["after"].get("answered_share")
    out: dict[str, Any] = {
        "before": sb_,
        "after": sa_,
        "gap": None,
        "p_value": None,
        "warning": None,
        "not_comparable": None,
    }
    if sb_ is None or sa_ is None:
        return out
    nb, na = len(b_rows), len(a_rows)
    xb, xa = round(sb_ * nb), round(sa_ * na)
    p = two_proportion_p(xb, nb, xa, na)
    gap = sa_ - sb_
    out["gap"], out["p_value"] = gap, p
    if p is not None and p < p_max:
        limit = band if band is not None else gap_points
        out["warning"] = (
            f"answered share differs: before {sb_:.1%}, after {sa_:.1%} (gap {gap:+.1%}, "
            f"p={p:.2g}); every rate is conditional on a reply being spoken"
        )
        if abs(gap) > limit:
            out["not_comparable"] = (
                f"answered: the arms reply to different shares of rows ({sb_:.1%} vs "
                f"{sa_:.1%}, p={p:.2g}, gap beyond "
                + ("the re-run band" if band is not None else f"{gap_points:.0%}")
                + "). A reasoning base against a reasoning-suppressed adapter under one shared "
                "max_tokens runs out of budget inside <think> and never answers, so the adapter "
                "wins every row the base did not reply to; give both arms room to answer"
            )
    return out


def _ceiling(before_means: np.ndarray, pair_mask: np.ndarray, rate: float) -> dict[str, Any] | None:
    vals = before_means[pair_mask]
    if vals.size == 0:
        return None
    base = float(vals.mean())
    room = int((vals < 1.0).sum())
    if base >= rate:
        reason = (
            f"ceiling: the before side already passes {base:.0%} (>= {rate:.0%}); there is "
            "little room left for an improvement to show"
        )
    elif room < CEILING_MIN_TASKS_WITH_ROOM and room < 0.5 * vals.size:
        reason = (
            f"ceiling: only {room} of {vals.size} paired tasks are not already passed every "
            "time; there is little room left for an improvement to show"
        )
    else:
        return None
    return {
        "before_rate": base,
        "tasks_with_room": room,
        "n_paired": int(vals.size),
        "reason": reason,
    }


def _groups(
    by: str | Callable[[dict], Any],
    b_rows: Sequence[dict[str, Any]],
    a_rows: Sequence[dict[str, Any]],
    sb: _Side,
    sa: _Side,
    b_idx: np.ndarray,
    a_idx: np.ndarray,
    n_tasks: int,
    j: int,
    n_boot: int,
    seed: int,
    level: float,
) -> tuple[dict[str, Any], list[str]]:
    get = _group_of(by)
    # Lost rollouts (after the rows in a side's values) carry no group: left out here.
    b_idx, a_idx = b_idx[: len(b_rows)], a_idx[: len(a_rows)]
    vals_b, vals_a = sb.values[: len(b_rows)], sa.values[: len(a_rows)]
    raw_b, raw_a = [get(r) for r in b_rows], [get(r) for r in a_rows]
    if isinstance(by, str) and all(v is None for v in (*raw_b, *raw_a)):
        keys = sorted({str(k) for r in (*b_rows, *a_rows) for k in r})
        markers = sorted({str(k) for r in (*b_rows, *a_rows) for k in (r.get("markers") or {})})
        raise ValueError(
            f"by={by!r} names no row key, marker or dotted path of any row, so every row "
            f"would fall in one 'None' group. Row keys: {keys}; markers: {markers or 'none'}; "
            "or a dotted path such as scenario_dimensions.tier"
        )
    gb = np.array([str(v) for v in raw_b], dtype=object)
    ga = np.array([str(v) for v in raw_a], dtype=object)
    out: dict[str, Any] = {}
    down: list[str] = []
    for g in sorted(set(gb.tolist()) | set(ga.tolist())):
        mb, ma = gb == g, ga == g
        cb, meb = _task_means(b_idx[mb], vals_b[mb][:, [j]], n_tasks)
        ca, mea = _task_means(a_idx[ma], vals_a[ma][:, [j]], n_tasks)
        pm = (cb[:, 0] > 0) & (ca[:, 0] > 0)
        n = int(pm.sum())
        entry: dict[str, Any] = {"n_paired": n, "before": None, "after": None, "delta": None}
        entry["ci95"] = None
        if n:
            x, y = meb[pm, 0], mea[pm, 0]
            entry.update(before=float(x.mean()), after=float(y.mean()), delta=float((y - x).mean()))
            if n >= 2:
                # clipped like the headline: to what the group's row values allow
                vb, va = vals_b[mb, j], vals_a[ma, j]
                vb, va = vb[~np.isnan(vb)], va[~np.isnan(va)]
                res = paired_bootstrap(
                    x, y, n_resamples=n_boot, level=level, seed=seed,
                    bounds=(float(va.min() - vb.max()), float(va.max() - vb.min())),
                    method=VERDICT_METHOD, continuity=VERDICT_CONTINUITY,
                )  # fmt: skip
                if (y - x).min() == (y - x).max():
                    iv = paired_boundary_interval(float(x.mean()), float(y.mean()), n, level)
                    entry["ci95"] = iv.as_list()
                elif res.interval is not None:
                    entry["ci95"] = res.interval.as_list()
        ci = entry["ci95"]
        entry["verdict"] = _metric_verdict(entry["delta"], tuple(ci) if ci else None, None)
        if entry["verdict"] == "regressed":
            down.append(g)
        out[g] = entry
    return out, down


def _sizing(
    n_paired: int,
    t: Mapping[str, Any],
    k_b: int | None,
    task_diffs: np.ndarray,
    power: float,
    alpha: float,
    before_rates: np.ndarray | None = None,
    before_counts: np.ndarray | None = None,
) -> dict[str, Any]:
    """The sizing line: what this holdout can detect, and what the observed delta needs.

    The per-task sd is measured off this comparison's own paired differences (the
    quantity ``holdout_size(before=, after=)`` reads off rows), so no row is read twice.
    ``measured_power`` is what the calibration study measured in the grid cell nearest to
    this case (k, the before side's spread of difficulty as ``layout_from_rates`` reads it,
    the holdout size), with its
    interval and source, beside the nominal ``power`` the formula promises; a holdout
    smaller than the study measured gets ``power: None`` and a note instead of a larger
    holdout's number.
    A before side that cannot vary (every rollout the same) gets a ``DEGENERATE:`` note.
    ``n_tasks_t`` and ``n_tasks_for_observed_t`` are the counts the recommendation uses:
    where the verdict's test (its sd read off the same tasks, t quantiles) reaches ``power``
    on ``detectable_effect`` and on the observed delta; ``n_paired_tasks`` and
    ``n_tasks_for_observed`` are the closed form's (normal quantiles, the spec's numbers).
    """
    out: dict[str, Any] = {
        "n_paired_tasks": n_paired,
        "k": k_b,
        "power": power,
        "alpha": alpha,
        "detectable_effect": None,
        "measured_power": None,
        "n_tasks_t": None,
        "n_tasks_for_observed": None,
        "n_tasks_for_observed_t": None,
        "task_std": None,
        "note": None,
        "warning": None,
    }
    base = t["before"]
    if base is None or k_b is None:
        out["note"] = "no paired tasks on the target: nothing to size"
        return out
    from wai_exp.score.stats.power import (
        detectable_effect,
        holdout_size,
        layout_from_rates,
        measured_power,
        true_spread,
    )

    base_rate = min(max(float(base), 0.0), 1.0)
    if base_rate >= 1.0:
        out["note"] = (
            "DEGENERATE: the before side passes every paired task every time: no gain is "
            "possible, so none can be sized"
        )
        return out
    spread = None
    layout = "equal"
    if before_rates is not None and before_counts is not None and before_rates.size >= 2:
        spread = true_spread(before_rates, before_counts)
        layout = layout_from_rates(before_rates, before_counts)
        if before_rates.min() == before_rates.max() and base_rate in (0.0, 1.0):
            out["note"] = (
                f"DEGENERATE: every before rollout scored {base_rate:g}, so the before side "
                "cannot vary; the size rests on the binomial model alone"
            )
    try:
        out["detectable_effect"] = detectable_effect(
            n_paired, base=base_rate, k=max(k_b, 1), power=power, alpha=alpha
        )
        if out["detectable_effect"] is not None:
            out["measured_power"] = measured_power(
                max(k_b, 1), spread, float(out["detectable_effect"]), n_paired, layout
            )
        if out["detectable_effect"] is None:
            out["note"] = f"{n_paired} paired tasks are too few for a power calculation"
        elif out["detectable_effect"] <= 1.0 - base_rate:
            # detectable_effect keeps the closed form (normal quantiles); the verdict reads
            # its sd off the same tasks, so power on that effect takes n_tasks_t tasks.
            out["n_tasks_t"] = holdout_size(
                float(out["detectable_effect"]),
                base=base_rate,
                k=max(k_b, 1),
                power=power,
                alpha=alpha,
            )["n_tasks_t"]
        else:
            # saturation: the smallest provable gain would take the pass rate past 1
            out["note"] = (
                f"the before side is at {base_rate:.3f}: the smallest gain {n_paired} tasks can "
                f"prove ({out['detectable_effect']:+.3f}) exceeds the {1.0 - base_rate:.3f} "
                "left below 1, so no gain on this holdout is provable; use harder tasks"
            )
        delta = t["delta"]
        if delta and task_diffs.size >= 2:
            sd = float(task_diffs.std(ddof=1))
            out["task_std"] = sd
            if sd > 0:
                # With the sd measured, base only bounds the effect. A drop of d from p is a
                # rise of d in the failure rate 1 - p, so a regression is sized from there
                # (sizing it as a gain from p would refuse any drop larger than 1 - p).
                hs = holdout_size(
                    abs(delta),
                    base=base_rate if delta > 0 else 1.0 - base_rate,
                    k=max(k_b, 1),
                    power=power,
                    alpha=alpha,
                    task_std=sd,
                )
                out["n_tasks_for_observed"] = hs.get("n_tasks")
                out["n_tasks_for_observed_t"] = hs.get("n_tasks_t")
    except ValueError as exc:  # e.g. base + effect beyond 1: say so instead of a number
        out["note"] = f"sizing not computed: {exc}"
    return out


def _observed_need(s: dict[str, Any]) -> str:
    """What the observed delta needs, recommending the count the verdict's test reaches
    power at (``n_tasks_for_observed_t``) and naming the closed form's beside it."""
    n_z, n_t = s["n_tasks_for_observed"], s.get("n_tasks_for_observed_t")
    if n_t is None or n_t == n_z:
        return f"the observed delta needs {n_z} tasks for {s['power']:.0%} power"
    return (
        f"the observed delta needs {n_t} tasks for {s['power']:.0%} power under the verdict's "
        f"test (n_tasks_t, t quantiles: it reads its sd off the same tasks; the closed form's "
        f"n_tasks is {n_z})"
    )


def _rows_per_task(k: int, eval_runs: int | None) -> str:
    """The sizing's count in words: pass@1's rows per task, which under ``runs=N`` pools
    every run's repeats (4 x 3 = 12), so it is not a pass^k's k."""
    pooled = f" ({eval_runs} eval runs pooled)" if eval_runs and eval_runs > 1 else ""
    return f"{counted(k, 'row')} per task{pooled}"


#: A per-metric verdict on one evaluation a side with no re-run floor, in words that say
#: what its interval says (the arms differ on these tasks) without the claim the
#: ``INCONCLUSIVE`` headline withholds (that a re-run would find it too).
_UNREPLICATED_WORDS = {"improved": "up, unreplicated", "regressed": "down, unreplicated"}


def verdict_words(verdict: str | None, report: Mapping[str, Any]) -> str:
    """A metric's (or group's) ``verdict`` as a line prints it: ``improved`` / ``regressed``
    read ``up, unreplicated`` / ``down, unreplicated`` when ``report`` has no re-run floor
    (``floor_source`` ``none``: one eval run a side), so no line claims more than the
    headline does."""
    if report.get("floor_source") == "none":
        return _UNREPLICATED_WORDS.get(str(verdict), str(verdict))
    return str(verdict)


def format_delta_report(report: dict[str, Any]) -> str:
    """The block a person reads: the headline, then one line per metric, then warnings.

    The first line is ``headline_verdict`` with the target's delta, interval and verdict;
    ``NOT COMPARABLE:`` lists every cause. Raises ``KeyError`` on a dict that is not a
    ``delta_report`` result.
    """
    t = report["metrics"][report["target"]]
    ci = report["target_ci95"]
    ci_s = f"[{_fmt_num(ci[0], True)}, {_fmt_num(ci[1], True)}]" if ci else "[no interval]"
    level = report.get("level", 0.95)
    lines = [
        f"{report['headline_verdict']}: {report['target']} {_fmt_num(t['before'])} -> "
        f"{_fmt_num(t['after'])}, delta {_fmt_num(report['target_delta'], True)} {ci_s} "
        f"({level:.0%}), {report['target_verdict']} over {report['n_paired_tasks']} paired "
        f"tasks"
    ]
    if report["not_comparable"]:
        lines.append("NOT COMPARABLE: " + " | ".join(report["not_comparable"]))
    # what each arm's lost rollouts are in these numbers (the caller knows where they came from)
    lines += [str(line) for line in report.get("lost_lines") or ()]
    width = max(len(m) for m in report["metrics"])
    for name, m in report["metrics"].items():
        ci = m["ci95"]
        ci_s = f"[{_fmt_num(ci[0], True)}, {_fmt_num(ci[1], True)}]" if ci else "[no interval]"
        extra = ""
        if m.get("noise_band") is not None:
            extra = f"  band +-{m['noise_band']:.3f}"
        elif m.get("noise_note") == "no_replicate_floor":
            extra = "  no_replicate_floor"
        flag = " *" if name == report["target"] else ""
        lines.append(
            f"  {name:<{width}}  {_fmt_num(m['before'])} -> {_fmt_num(m['after'])}  "
            f"{_fmt_num(m['delta'], True)} {ci_s}  {verdict_words(m['verdict'], report)}{extra}  "
            f"(n={m['n_paired']}){flag}"
        )
    if report.get("groups"):
        lines.append(f"groups ({report['target']}):")
        for g, e in report["groups"].items():
            ci = e["ci95"]
            ci_s = f"[{_fmt_num(ci[0], True)}, {_fmt_num(ci[1], True)}]" if ci else "[no interval]"
            lines.append(
                f"  {g}: {_fmt_num(e['delta'], True)} {ci_s} "
                f"{verdict_words(e['verdict'], report)} (n={e['n_paired']})"
            )
    if report.get("noise_rule"):
        lines.append(f"noise: {report['noise_rule']}")
    s = report.get("sizing") or {}
    if s.get("detectable_effect") is not None:
        line = (
            f"sizing: {s['n_paired_tasks']} paired tasks with "
            f"{_rows_per_task(s['k'], (report.get('eval_runs') or {}).get('before'))} detect "
            f"{s['detectable_effect']:+.3f} at {s['power']:.0%} power"
        )
        mp = s.get("measured_power")
        if mp and mp.get("power") is not None:
            line += (
                f" nominal (measured {mp['power']:.1%} [{mp['ci95'][0]:.1%}, "
                f"{mp['ci95'][1]:.1%}] in the calibration study's nearest cell: "
                f"{counted(mp['k'], 'row')} per task, "
                f"{mp['difficulty']} difficulty, {mp['n_tasks']} tasks, effect "
                f"{mp['effect']:.2f}; {mp['source']})"
            )
        elif mp and mp.get("note"):
            line += f" nominal ({mp['note']})"
        else:
            line += " (not measured by the calibration study for this case)"
        if s.get("n_tasks_t") and s["n_tasks_t"] != s["n_paired_tasks"]:
            line += (
                f"; {s['power']:.0%} power on {s['detectable_effect']:+.3f} under the verdict's "
                f"test takes {s['n_tasks_t']} tasks (n_tasks_t; the closed form's n_tasks is "
                f"{s['n_paired_tasks']})"
            )
        if s.get("n_tasks_for_observed"):
            line += "; " + _observed_need(s)
        lines.append(line)
    elif s.get("note"):
        lines.append(f"sizing: {s['note']}")
    if s.get("warning"):
        lines.append(f"warning: {s['warning']}")
    if s.get("detectable_effect") is not None and s.get("note"):
        lines.append(f"sizing note: {s['note']}")
    lines.append(
        f"family error: {report['family_error']:.1%} over {report['n_metrics']} metrics at "
        f"alpha={report['alpha']:g}"
    )
    for w in report["warnings"]:
        if w != s.get("warning"):  # already printed beside the sizing line
            lines.append(f"warning: {w}")
    return "\n".join(lines)
