"""pass@1, pass^k and pass@k from the same graded groups.

Rows group under ``task_key`` (a task is a situation, not a string). Only binary ``reward``
(or ``qwen_reward``) rows count; partial and unjudged rows are skipped. From each task's
``n`` graded repeats with ``c`` passes:

* pass@1 is the task's pass rate ``c / n``, averaged over every task: the headline, since the
  agent runs once in production;
* pass^k, "all k repeats pass" (reliability), is the unbiased ``C(c, k) / C(n, k)``;
* pass@k, "at least one of k passes", is the unbiased ``1 - C(n - c, k) / C(n, k)``
  (Chen et al. 2021, arXiv:2107.03374); ``pass@k - pass@1`` is the headroom a grouped RL
  update has to learn from.

Each carries a bootstrap interval over tasks (``None`` under three groups). Under
``resample.SMALL_EVAL_TASKS`` (30) tasks a bootstrap of a rate is erratic, and the interval
is the Wilson interval sized by the tasks' spread instead (``resample.wilson_design_effect``;
pass@1's ``ci_method`` says ``"wilson_deff"``). When every task has the same value the
bootstrap cannot vary; the interval is then Wilson over tasks (``resample.wilson_over_tasks``:
0 of 6 tasks gives [0, 0.39], not [0, 0]) and the note says so. Below ``min_k`` repeats the
k-way numbers are ``None`` with a note instead of a number too noisy to act on.

An adaptive run (``repeat_policy: split``, the rl default) adds rollouts to a task only
where its first ones disagreed. Whether a task got more rows then depends on its own
outcomes, so the mean over all its rows is pulled toward 0 and 1 (at p = 0.7 with 4 + 4
rollouts it reads 0.733). When any row is such an extension (``selection_reason`` in
``ADAPTIVE_REASONS``), pass@1, pass^k, pass@k and their intervals are read from the fixed
first batch of every task instead, which is unbiased, and the printed line says so.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.rows.keys import task_key
from wai_exp.rows.reader import STEP_KINDS, read_steps, spoken
from wai_exp.score.stats.resample import (
    BootstrapResult,
    TaskGroups,
    _special,
    group_values,
    rate_interval,
)

# as_rows and row_dicts live with the row facts (hack_scan reads them without this module).
from wai_exp.score.stats.row_facts import as_rows, row_dicts, row_facts

#: A row as a function that hands back some of its rows keeps it (a dict stays a dict).
RowT = TypeVar("RowT", bound=Mapping[str, Any])

__all__ = [
    "ADAPTIVE_REASONS",
    "first_batch",
    "lost_rows",
    "MIN_CI_GROUPS",
    "N_BOOT",
    "PassAt",
    "ROLLOUTS_PER_TASK",
    "as_rows",
    "pass_at",
    "pass_k_estimates",
    "per_run_k",
    "row_dicts",
    "run_config",
    "task_estimates",
    "TaskEstimates",
]

#: The smallest k tau-bench and tau2-bench report a pass^k on (arXiv:2406.12045, 2506.07982).
ROLLOUTS_PER_TASK = 4
#: Fewer groups than this and a task bootstrap is not an interval worth printing.
MIN_CI_GROUPS = 3
#: Bootstrap resamples behind every pass_at interval (seeded, so the line is reproducible).
N_BOOT = 2000
_SEED = 0
#: ``selection_reason`` of rollouts a policy added after a task's first batch because of
#: what that batch showed (a split group, a verify pass): a rate over them is biased.
ADAPTIVE_REASONS = frozenset({"group_split", "verify"})
#: How the note under an adaptive run's numbers opens when some tasks have no graded
#: first-batch row (the summaries leave that clause to their left-out line).
BASIS_NOTE_HEAD = "pass@1 reads the first batch of each task"
#: ``ended_by`` values that mean the model ran out of its token budget.
_TOKEN_CAP_ENDINGS = frozenset({"max_tokens", "length", "token_cap", "truncated"})


def pass_k_estimates(n: Any, c: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-group unbiased ``(pass^k, pass@k)`` for ``n`` repeats with ``c`` passes.

    ``pass^k = C(c, k) / C(n, k)`` and ``pass@k = 1 - C(n - c, k) / C(n, k)``, vectorized
    over groups. Whole counts (what graded groups hold) take the binomials from
    ``math.comb`` once per distinct ``(n, c)`` pair and each ratio exactly rounded, which is
    ``scipy.special.comb``'s answer bit for bit wherever its product stays below 2**53 (every
    group size a run has) and never overflows; other inputs use ``scipy.special.comb``.
    Groups with ``n < k`` give NaN. Raises ``ValueError`` for ``k < 1`` or ``c > n``.
    """
    nn = np.asarray(n, dtype=float)
    cc = np.asarray(c, dtype=float)
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}")
    if np.any(cc > nn) or np.any(cc < 0):
        raise ValueError("passes c must satisfy 0 <= c <= n for every group")
    nn, cc = np.broadcast_arrays(nn, cc)
    short = nn < k
    whole = np.isfinite(nn).all() and (nn == np.floor(nn)).all() and (cc == np.floor(cc)).all()
    if whole and int(k) == k:
        # Few distinct (n, c) pairs (a run has a handful of group sizes): exact binomials per
        # pair instead of importing scipy.special, most of publish_gate's import time.
        kk = int(k)
        pairs, inv = np.unique(np.stack([nn.ravel(), cc.ravel()]), axis=1, return_inverse=True)
        pow_u = np.full(pairs.shape[1], np.nan)
        at_u = np.full(pairs.shape[1], np.nan)
        for j, (n_j, c_j) in enumerate(pairs.T.astype(np.int64).tolist()):
            if n_j < kk:
                continue
            total = math.comb(n_j, kk)
            pow_u[j] = float(Fraction(math.comb(c_j, kk), total))
            at_u[j] = 1.0 - float(Fraction(math.comb(n_j - c_j, kk), total))
        inv = np.asarray(inv).reshape(nn.shape)
        pow_k, at_k = pow_u[inv], at_u[inv]
    else:
        special = _special()  # a count that is not whole: scipy's general binomial
        total = special.comb(nn, k)
        with np.errstate(divide="ignore", invalid="ignore"):
            pow_k = special.comb(cc, k) / total
            at_k = 1.0 - special.comb(nn - cc, k) / total
    pow_k = np.array(pow_k, dtype=float)
    at_k = np.array(at_k, dtype=float)
    pow_k[short] = np.nan
    at_k[short] = np.nan
    return pow_k, at_k


def _fmt(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}" + ("" if ci is None else f" [{ci[0]:.2f}..{ci[1]:.2f}]")


@dataclass
class PassAt:
    """pass@1 / pass^k / pass@k over graded groups (see the module docstring).

    Attributes and how ``str()`` prints them: ``k`` (``k=4``), ``pass_at_1`` (``pass@1``, mean
    per-task pass rate, the headline), ``pass_pow_k`` (``pass^4``: all k repeats pass),
    ``pass_at_k`` (``pass@4``: at least one of k passes), ``headroom`` (property, pass@k minus
    pass@1), ``ci95`` / ``pass_pow_k_ci95`` / ``pass_at_k_ci95`` (``[lo..hi]``, task
    bootstrap, ``None`` under three groups), ``n_groups`` (``N groups``: the tasks pass@1
    reads, under an adaptive run those with a graded first-batch row), and not printed:
    ``n_rows`` (graded rows), ``pass_at_1_basis`` (``"all_rows"``, or ``"first_batch"`` for
    an adaptive run, printed beside pass@1), ``n_rows_pass_at_1`` (graded rows pass@1 and
    its interval read), ``n_groups_at_k`` (tasks the k-way numbers used),
    ``n_groups_imputed`` (short unanimous tasks counted in), ``n_lost`` (lost rollouts counted
    as failed repeats of their task, ``lost=``; not in ``n_rows``), ``per_task`` (``{task key:
    pass rate}`` on pass@1's basis: its values are what pass@1 averages), ``note`` (printed last: why a number is missing and the fix) and ``config``
    (``run_config``: how the rows were made; its token-cap share is printed when nonzero).
    """

    k: int
    pass_at_1: float | None
    pass_pow_k: float | None
    pass_at_k: float | None
    n_groups: int
    n_rows: int
    n_groups_at_k: int = 0
    n_groups_imputed: int = 0
    per_task: dict[str, float] = field(default_factory=dict)
    note: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    ci95: tuple[float, float] | None = None
    pass_pow_k_ci95: tuple[float, float] | None = None
    pass_at_k_ci95: tuple[float, float] | None = None
    pass_at_1_basis: str = "all_rows"
    n_rows_pass_at_1: int | None = None
    #: Lost rollouts (no row) counted as failed repeats of their task (``pass_at(lost=)``).
    n_lost: int = 0
    #: How ``ci95`` was computed: ``"bootstrap"`` (over tasks), ``"wilson_deff"`` (under
    #: ``SMALL_EVAL_TASKS`` tasks: Wilson sized by the tasks' spread), ``"wilson_tasks"``
    #: (every task at the same rate, so the bootstrap cannot vary) or ``None`` (no interval).
    ci_method: str | None = None

    @property
    def headroom(self) -> float | None:
        """pass@k minus pass@1: what a grouped update can learn; ``None`` when either is."""
        if self.pass_at_k is None or self.pass_at_1 is None:
            return None
        return self.pass_at_k - self.pass_at_1

    def __str__(self) -> str:
        k = self.k
        first = f"pass@1 {_fmt(self.pass_at_1, self.ci95)}"
        if self.pass_at_1_basis == "first_batch":
            added = self.n_rows - (self.n_rows_pass_at_1 or 0)
            first += (
                f" (from the fixed first batch of every task, {self.n_rows_pass_at_1} rows, as "
                f"pass^{k} and pass@{k} are; the {added} added where a group split are left "
                "out: they skew the rates)"
            )
        parts = [
            first,
            f"pass^{k} (pass_pow_k) {_fmt(self.pass_pow_k, self.pass_pow_k_ci95)}",
            f"pass@{k} {_fmt(self.pass_at_k, self.pass_at_k_ci95)}",
        ]
        headroom = self.headroom
        tail = f"({self.n_groups} groups, k={k})"
        if self.n_lost:
            tail = (
                f"({self.n_groups} groups, k={k}, {self.n_lost} lost rollouts counted as failures)"
            )
        parts.append(("headroom n/a " if headroom is None else f"headroom {headroom:.2f} ") + tail)
        cap = self.config.get("token_cap_share") if self.config else None
        if cap:
            parts.append(f"token cap hit on {cap:.0%} of rows")
        line = " | ".join(parts)
        return f"{line} | {self.note}" if self.note else line

    def to_dict(self) -> dict[str, Any]:
        """Every field under its attribute name, intervals as lists, ``headroom`` added."""

        def as_list(ci: tuple[float, float] | None) -> list[float] | None:
            return None if ci is None else [float(ci[0]), float(ci[1])]

        return {
            "k": self.k,
            "pass_at_1": self.pass_at_1,
            "pass_pow_k": self.pass_pow_k,
            "pass_at_k": self.pass_at_k,
            "headroom": self.headroom,
            "n_groups": self.n_groups,
            "n_rows": self.n_rows,
            "n_groups_at_k": self.n_groups_at_k,
            "n_groups_imputed": self.n_groups_imputed,
            "n_lost": self.n_lost,
            "per_task": dict(self.per_task),
            "note": self.note,
            "config": dict(self.config),
            "ci95": as_list(self.ci95),
            "pass_pow_k_ci95": as_list(self.pass_pow_k_ci95),
            "pass_at_k_ci95": as_list(self.pass_at_k_ci95),
            "pass_at_1_basis": self.pass_at_1_basis,
            "n_rows_pass_at_1": self.n_rows_pass_at_1,
            "ci_method": self.ci_method,
        }


def _rate_interval(values: np.ndarray, n_trials: int) -> BootstrapResult | None:
    if values.size < MIN_CI_GROUPS:
        return None
    return rate_interval(values, n_trials, n_resamples=N_BOOT, seed=_SEED)


def _interval(res: BootstrapResult | None) -> tuple[float, float] | None:
    return None if res is None or res.interval is None else (res.interval.low, res.interval.high)


def _ci_method(res: BootstrapResult | None) -> str | None:
    if res is None or res.interval is None:
        return None
    return res.method if res.method.startswith("wilson") else "bootstrap"


def _boundary_note(named: list[tuple[str, np.ndarray]]) -> str | None:
    # Same value on every task: the bootstrap gave way to the Wilson interval over tasks.
    flat = [(name, v) for name, v in named if v.size >= MIN_CI_GROUPS and v.min() == v.max()]
    if not flat:
        return None
    n = flat[0][1].size
    return (
        f"{', '.join(name for name, _ in flat)}: every task has the same value, so a task "
        f"bootstrap cannot vary; the interval is Wilson over the {n} tasks"
    )


def _default_k(counts: np.ndarray) -> int | None:
    repeated = counts[counts >= 2]
    return int(repeated.min()) if repeated.size else None


def lost_rows(lost: Mapping[str, Sequence[str | None]] | None) -> list[dict[str, Any]]:
    """A lost rollout as a failed repeat of its task: one reward-0 row under the task's key
    (with the lost rollout's ``selection_reason``, so an adaptive run's first batch still
    knows it) per entry of ``lost`` (``{task key: [selection_reason, ...]}``)."""
    return [
        {"scenario_id": key, "reward": 0.0, "selection_reason": reason}
        for key, reasons in (lost or {}).items()
        for reason in reasons
    ]


def _basis_groups(
    groups: TaskGroups,
    keys: list[Any],
    binary: np.ndarray,
    extension: list[bool],
    notes: list[str],
) -> tuple[TaskGroups, str]:
    """The groups pass@1, pass^k and pass@k read, and their basis: each task's first batch
    when an adaptive policy extended some tasks, else every graded row. A task gets more
    rows only where its first ones split, so counts over all its rows are skewed toward a
    split: pass^k and pass@k too, not pass@1 alone (at p = 0.5, 4 then 8 rows when the 4
    split, C(c, 4) / C(n, 4) over all rows averages about 0.105 where p^4 is 0.0625)."""
    if not any(extension):
        return groups, "all_rows"
    picked = [
        (key, b)
        for key, b, ext in zip(keys, binary.tolist(), extension, strict=True)
        if b == b and not ext  # NaN: not binary-graded
    ]
    first = group_values([k for k, _ in picked], np.fromiter((b for _, b in picked), float))
    if first.n_tasks < groups.n_tasks:
        n_out = groups.n_tasks - first.n_tasks
        one = n_out == 1
        notes.append(
            f"{BASIS_NOTE_HEAD}; {counted(n_out, 'task')} "
            f"{'has' if one else 'have'} no graded first-batch row and {'is' if one else 'are'} "
            "left out of it"
        )
    return first, "first_batch"


@dataclass
class _KWay:
    """pass^k and pass@k over the groups with k graded repeats (None when withheld)."""

    k: int
    pow_k: float | None = None
    at_k: float | None = None
    pow_ci: tuple[float, float] | None = None
    at_ci: tuple[float, float] | None = None
    n_at_k: int = 0
    n_imputed: int = 0
    #: the per-group estimates behind each number, for the boundary note
    flat: list[tuple[str, np.ndarray]] = field(default_factory=list)
    #: each counted task's pass^k and pass@k, by task key (``task_estimates``)
    tasks_pow: dict[str, float] = field(default_factory=dict)
    tasks_at: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        groups: TaskGroups,
        k: int | None,
        min_k: int,
        unanimous_short: bool,
        notes: list[str],
        rows_per_task: np.ndarray | None = None,
        ungraded: Ungraded | None = None,
    ) -> _KWay:
        """``rows_per_task``: each task's rows, graded or not (aligned with ``groups.keys``),
        so a k that rows without a 0/1 grade shrank is named as such, with the fix for why
        they have none (``ungraded``)."""
        counts, passes = groups.counts, groups.sums
        default_k = _default_k(counts)
        out = cls(int(k) if k is not None else (default_k if default_k is not None else 1))
        use_k = out.k
        if k is None and default_k is None:
            notes.append(
                "every task has one graded rollout: pass^k and pass@k need repeats; "
                f"simulate with repeats>={min_k}"
            )
            return out
        if use_k < min_k:
            why = f"k={use_k} is below min_k={min_k}: pass^k and pass@k are withheld as too noisy "
            shrunk = (
                _shrunk_note(counts, rows_per_task, use_k, min_k, ungraded) if k is None else None
            )
            notes.append(
                why + f"to act on; {shrunk}"
                if shrunk
                else why + f"to act on; simulate with repeats>={min_k} (or pass min_k={use_k} "
                "to accept it)"
            )
            return out
        pk, ak = pass_k_estimates(counts, passes, use_k)
        eligible = counts >= use_k
        if unanimous_short:
            short_unanimous = ~eligible & ((passes == 0) | (passes == counts))
            pk = np.where(short_unanimous, groups.means, pk)
            ak = np.where(short_unanimous, groups.means, ak)
            out.n_imputed = int(short_unanimous.sum())
            eligible = eligible | short_unanimous
        out.n_at_k = int(eligible.sum())
        left_out = groups.n_tasks - out.n_at_k
        if left_out:
            notes.append(
                f"k={use_k} left out {left_out} of {groups.n_tasks} groups with fewer than "
                f"{use_k} graded repeats (pass@1 still averages them)"
            )
        if out.n_at_k == 0:
            notes.append(
                f"no group has {use_k} graded repeats; pass k= smaller or re-run with more"
            )
            return out
        pk_e, ak_e = pk[eligible], ak[eligible]
        out.pow_k, out.at_k = float(pk_e.mean()), float(ak_e.mean())
        # A task's pass^k or pass@k is one number however many rows it read: n trials at most.
        pow_res, at_res = _rate_interval(pk_e, pk_e.size), _rate_interval(ak_e, ak_e.size)
        out.pow_ci, out.at_ci = _interval(pow_res), _interval(at_res)
        out.flat = [(f"pass^{use_k}", pk_e), (f"pass@{use_k}", ak_e)]
        counted = [key for key, e in zip(groups.keys, eligible.tolist(), strict=True) if e]
        out.tasks_pow = dict(zip(counted, pk_e.tolist(), strict=True))
        out.tasks_at = dict(zip(counted, ak_e.tolist(), strict=True))
        return out


def _rows_per_task(facts: Any, groups: TaskGroups, on_basis: np.ndarray) -> np.ndarray:
    """Each graded task's rows on the basis (``on_basis``), graded or not, in
    ``groups.keys`` order."""
    all_keys, all_task = facts.subgroups(on_basis)
    totals = dict(
        zip(all_keys, np.bincount(all_task, minlength=len(all_keys)).tolist(), strict=True)
    )
    return np.array([totals[key] for key in groups.keys], dtype=float)


#: The fix for rows a rule judge left unjudged because the world answered "not found" for
#: the record their task was planned on: the same rows graded again are unjudged again.
PLAN_NOT_SERVED_FIX = (
    "give the identifying argument an enum of the ids your world holds (the asks then name "
    "them; a search's query: examples of what it holds; a list: a world.reset_tool that "
    "leaves records in it), or replay with simulate.tasks= only tasks your world can serve"
)


@dataclass(frozen=True)
class Ungraded:
    """Rows with no 0/1 grade, by why: each reason has its own fix, and only ``other``
    (a judge error, no verdict) is fixed by grading the rows again."""

    unserved: int = 0  # judge_meta.plan_not_served: the world did not hold the planned record
    unknown_words: int = 0  # judge_meta.unknown_grid_words: a situation the judge cannot read
    partial: int = 0  # a reward that is neither 0 nor 1
    other: int = 0

    @classmethod
    def of(
        cls, rows: Sequence[Mapping[str, Any]], facts: Any, among: np.ndarray | None = None
    ) -> Ungraded:
        """Count ``rows`` (aligned with the first ``len(rows)`` of ``facts``) by why; with
        ``among``, only the rows it marks."""
        why: Counter[str] = Counter()
        reward = facts.reward_under("reward")
        unjudged = np.isnan(facts.binary[: len(rows)])
        if among is not None:
            unjudged &= among[: len(rows)]
        for i in np.flatnonzero(unjudged).tolist():
            meta = rows[i].get("judge_meta")
            meta = meta if isinstance(meta, Mapping) else {}
            if meta.get("plan_not_served"):
                why["unserved"] += 1
            elif meta.get("unknown_grid_words"):
                why["unknown_words"] += 1
            else:
                why["partial" if reward[i] == reward[i] else "other"] += 1
        return cls(**why)

    def fixes(self) -> str:
        """The fix for each reason present; ``grade those rows again`` alone when every row
        is unjudged for a reason grading again can change."""
        parts = []
        if self.unserved:
            parts.append(
                f"{_are(self.unserved)} unjudged because the world answered not found (or nothing) for the "
                "record the ask names (judge_meta.plan_not_served), which grading again does "
                f"not change: {PLAN_NOT_SERVED_FIX}"
            )
        if self.unknown_words:
            parts.append(
                f"{_are(self.unknown_words)} unjudged for grid words the judge does not "
                "understand (judge_meta.unknown_grid_words; docs/DOMAIN.md lists the ones it "
                "does)"
            )
        if self.partial:
            parts.append(
                f"{self.partial} {'carries' if self.partial == 1 else 'carry'} a partial "
                "reward: have the judge return 0/1 (a threshold on its score)"
            )
        if self.other:
            parts.append(f"{_are(self.other)} unjudged: grade those rows again" if parts else
                         "grade those rows again")  # fmt: skip
        return "; ".join(parts)


def _are(n: int) -> str:
    return f"{n} {'is' if n == 1 else 'are'}"


def _shrunk_note(
    counts: np.ndarray,
    rows_per_task: np.ndarray | None,
    use_k: int,
    min_k: int,
    ungraded: Ungraded | None = None,
) -> str | None:
    """The fix when the default k fell below ``min_k`` because some tasks' rows went
    ungraded (a judge error, an out-of-range reward), not because too few were simulated;
    None when the smallest group is short for want of rows."""
    if rows_per_task is None:
        return None
    missing = rows_per_task - counts
    at_k = counts == use_k
    if not (missing[at_k] > 0).any() or rows_per_task[at_k].max() < min_k:
        return None
    short = missing > 0
    full = int((counts >= min_k).sum())
    skip = (
        f"pass k={min_k} to read pass^{min_k} and pass@{min_k} over the {full} tasks with "
        f"at least {min_k} graded repeats, or "
        if full
        else ""
    )
    fixes = (ungraded or Ungraded(other=1)).fixes()
    return (
        f"k defaults to the fewest graded repeats of any task, and {int(missing.sum())} rows "
        f"with no 0/1 grade (unjudged, or a partial reward) left {int(short.sum())} of "
        f"{counts.size} tasks short of the rows they were simulated with: {fixes}; or "
        f"{skip}pass min_k={use_k} to accept k={use_k}"
    )


def _no_binary_note(ungraded: Ungraded, skipped: int) -> str:
    """Why no row counts for pass@k, and the fix: rows never graded, graded with partial
    scores (a judge's 0.9 / 0.1), or left unjudged by a rule judge for a reason of the
    world's (``Ungraded.fixes``), which "grade the rows" would not fix."""
    if ungraded.unserved or ungraded.unknown_words:
        return f"no binary-graded rows: of {skipped} rows, {ungraded.fixes()}"
    if ungraded.partial:
        return (
            f"no binary-graded rows: {ungraded.partial} of {skipped} rows carry a partial "
            "reward (not 0 or 1), and pass@k counts a row only as passed or failed: have the "
            "judge return 0/1 (a threshold on its score) to read pass@k, or read the mean reward"
        )
    return (
        f"no binary-graded rows ({skipped} rows unjudged or partial): grade the rows "
        "(run_judge / data.grade) before reading pass@k"
    )


@dataclass
class _Graded:
    """Rows read into task groups as ``pass_at`` reads them: lost rollouts as failed
    repeats, and the groups every number is read from (each task's first batch when an
    adaptive policy extended some)."""

    row_list: list[dict[str, Any]]
    n_failed: int
    keys: list[Any]
    groups: TaskGroups
    basis_groups: TaskGroups
    basis: str
    extension: list[bool]
    notes: list[str]
    rows_per_task: np.ndarray | None
    ungraded: Ungraded | None = None

    @classmethod
    def read(
        cls,
        rows: Sequence[dict] | Any,
        k: int | None,
        min_k: int,
        lost: Mapping[str, Sequence[str | None]] | None,
    ) -> _Graded:
        row_list = as_rows(rows)
        # The failed rows enter the groups only (run settings are read from the real rows).
        failed = lost_rows(lost)
        n_real = len(row_list)
        if k is not None and (isinstance(k, bool) or int(k) != k or k < 1):
            raise ValueError(
                f"k must be a positive integer draw size or None for the default; got {k!r}"
            )
        if min_k < 1:
            raise ValueError(f"min_k must be >= 1; got {min_k}")
        # Keys, rewards and the key codes come from row_facts (read once per row list,
        # shared with the other checks of a publish_gate); run_config reuses the keys.
        facts = row_facts([*row_list, *failed] if failed else row_list)
        binary = facts.binary
        graded_mask = ~np.isnan(binary)
        values = binary[graded_mask]
        task_keys, row_task = facts.subgroups(graded_mask)
        groups: TaskGroups = TaskGroups(
            task_keys,
            np.bincount(row_task, minlength=len(task_keys)).astype(float),
            np.bincount(row_task, weights=values, minlength=len(task_keys)),
            row_task, values, n_real + len(failed) - values.size,
        )  # fmt: skip
        notes: list[str] = []
        ungraded = Ungraded.of(row_list, facts)
        if groups.n_tasks == 0:
            notes.append(_no_binary_note(ungraded, groups.n_skipped))
            return cls(row_list, len(failed), facts.keys, groups, groups, "all_rows", [], notes,
                       None)  # fmt: skip
        extension = [
            isinstance(r, str) and r in ADAPTIVE_REASONS
            for r in (row.get("selection_reason") for row in (*row_list, *failed))
        ]
        basis_groups, basis = _basis_groups(groups, facts.keys, binary, extension, notes)
        # A first batch's rows left without a grade shrink k as much as any: count them.
        on_basis = ~np.array(extension, dtype=bool)
        per_task = _rows_per_task(facts, basis_groups, on_basis)
        # The note's reasons count the rows its count does: those of the tasks it reads.
        kept = set(basis_groups.keys)
        counted = on_basis & np.array([key in kept for key in facts.keys], dtype=bool)
        return cls(row_list, len(failed), facts.keys, groups, basis_groups, basis, extension,
                   notes, per_task, Ungraded.of(row_list, facts, counted))  # fmt: skip

    def k_way(self, k: int | None, min_k: int, unanimous_short: bool) -> _KWay:
        return _KWay.of(self.basis_groups, k, min_k, unanimous_short, self.notes,
                        self.rows_per_task, self.ungraded)  # fmt: skip


@dataclass(frozen=True)
class TaskEstimates:
    """Each task's numbers behind a ``pass_at`` headline, by task key: ``pass_at_1`` (its
    pass rate on pass@1's basis), ``pass_pow_k`` and ``pass_at_k`` (its unbiased estimate at
    ``k``, for the tasks those numbers count); ``note`` as ``pass_at``'s."""

    k: int
    pass_at_1: dict[str, float]
    pass_pow_k: dict[str, float]
    pass_at_k: dict[str, float]
    note: str = ""


def task_estimates(
    rows: Sequence[dict] | Any,
    k: int | None = None,
    min_k: int = ROLLOUTS_PER_TASK,
    unanimous_short: bool = False,
    lost: Mapping[str, Sequence[str | None]] | None = None,
) -> TaskEstimates:
    """The per-task numbers ``pass_at`` with the same arguments averages: lost rollouts
    count as failed repeats, ``unanimous_short`` imputes, an adaptive run reads its first
    batch. The mean of each dict is that ``pass_at`` number, so pooling tasks over several
    runs (a sweep's value) keeps each run's own rules. Raises as ``pass_at`` does."""
    g = _Graded.read(rows, k, min_k, lost)
    if g.groups.n_tasks == 0:
        return TaskEstimates(int(k if k is not None else min_k), {}, {}, {}, "; ".join(g.notes))
    kw = g.k_way(k, min_k, unanimous_short)
    return TaskEstimates(
        kw.k, g.basis_groups.per_task(), kw.tasks_pow, kw.tasks_at, "; ".join(g.notes)
    )


def pass_at(
    rows: Sequence[dict] | Any,
    k: int | None = None,
    min_k: int = ROLLOUTS_PER_TASK,
    unanimous_short: bool = False,
    lost: Mapping[str, Sequence[str | None]] | None = None,
) -> PassAt:
    """pass@1, pass^k and pass@k from graded rows, grouped by task.

    ``rows`` is a row list or anything with ``.rows``. ``k`` defaults to the smallest group of
    two or more graded repeats; groups with fewer than ``k`` are left out of pass^k and pass@k
    (``n_groups_at_k`` counts the groups those numbers used) and the note says how many.
    pass@1 averages every group. Below ``min_k`` the k-way numbers are ``None`` with a note
    naming the fix. ``unanimous_short=True`` counts a unanimous group shorter than ``k`` as if
    it stayed unanimous (its pass^k and pass@k equal its pass rate, 1 or 0;
    ``n_groups_imputed``); mixed short groups still stay out. With no graded row every number
    is ``None`` and the note says so. ``lost`` (``{task key: the selection_reason of each
    lost rollout}``, e.g. ``SimulationData.report()["lost"]["by_task"]``) counts rollouts that
    left no row as failed repeats of their task, so a task the agent crashed on stays in the
    score at 0 instead of leaving it (``n_lost``). Raises ``ValueError`` for ``k < 1`` or
    ``min_k < 1``.
    """
    g = _Graded.read(rows, k, min_k, lost)
    row_list, groups, notes, n_real = g.row_list, g.groups, g.notes, len(g.row_list)
    if groups.n_tasks == 0:
        use_k = k if k is not None else min_k
        return PassAt(
            k=int(use_k), pass_at_1=None, pass_pow_k=None, pass_at_k=None, n_groups=0, n_rows=0,
            note="; ".join(notes),
            config=run_config_with_keys(row_list, int(use_k), g.keys[:n_real]),
        )  # fmt: skip
    rates1, n_rows1 = g.basis_groups.means, g.basis_groups.n_rows
    pass1 = float(rates1.mean()) if rates1.size else None
    res1 = _rate_interval(rates1, n_rows1)
    ci1 = _interval(res1)
    flat: list[tuple[str, np.ndarray]] = [("pass@1", rates1)]
    if g.basis_groups.n_tasks < MIN_CI_GROUPS:
        notes.append(f"intervals need >= {MIN_CI_GROUPS} tasks, have {g.basis_groups.n_tasks}")
    kw = g.k_way(k, min_k, unanimous_short)
    use_k = kw.k
    flat += kw.flat
    boundary = _boundary_note(flat)
    if boundary:
        notes.append(boundary)

    return PassAt(
        k=use_k,
        pass_at_1=pass1,
        pass_pow_k=kw.pow_k,
        pass_at_k=kw.at_k,
        n_groups=g.basis_groups.n_tasks,  # the tasks pass@1 reads: "over N tasks"
        n_rows=groups.n_rows - g.n_failed,
        n_groups_at_k=kw.n_at_k,
        n_groups_imputed=kw.n_imputed,
        per_task=g.basis_groups.per_task(),  # the rates pass@1 averages (the spec's word)
        note="; ".join(notes),
        config=run_config_with_keys(row_list, use_k, g.keys[:n_real]),
        ci95=ci1,
        pass_pow_k_ci95=kw.pow_ci,
        pass_at_k_ci95=kw.at_ci,
        pass_at_1_basis=g.basis,
        n_rows_pass_at_1=n_rows1 - sum(not x for x in g.extension[n_real:]),
        n_lost=g.n_failed,
        ci_method=_ci_method(res1),
    )


def per_run_k(rows: Sequence[Mapping[str, Any]]) -> tuple[int | None, int]:
    """``(k, runs)`` for rows of one eval run several times (``lineage.eval_run``, what
    ``simulate(runs=3)`` stamps): ``k`` is the smallest group of two or more graded repeats
    of a task within one run, the pass^k a single run of the eval measures, and ``runs``
    the number of runs. ``pass_at`` groups a task's rows over every run, so its default k
    would be repeats x runs (pass^12 for 4 repeats and 3 runs), comparable with no
    single run's; ``pass_at(rows, k=k)`` over the pooled rows stays an unbiased pass^k,
    every draw of k from a task's rows being one. ``(None, runs)`` for one run or none."""
    from wai_exp.score.stats.readers import binary_reward

    counts: Counter[tuple[str, Any]] = Counter()
    runs: set[Any] = set()
    for row in rows:
        lineage = row.get("lineage")
        run = lineage.get("eval_run") if isinstance(lineage, Mapping) else None
        if run is None:
            continue
        runs.add(run)
        if binary_reward(row) is not None:
            counts[(str(task_key(row)), run)] += 1
    repeated = [n for n in counts.values() if n >= 2]
    if len(runs) < 2 or not repeated:
        return None, len(runs)
    return min(repeated), len(runs)


def first_batch(rows: list[RowT]) -> tuple[list[RowT], int]:
    """(the rows no adaptive policy added, how many were left out).

    Rows whose ``selection_reason`` is in ``ADAPTIVE_REASONS`` were drawn where a task's
    outcomes split, so a per-task mean over them skews; the fixed first batch does not.
    Returns ``rows`` itself when there is nothing to leave out. Never raises."""
    kept = [
        row
        for row in rows
        if not (type(r := row.get("selection_reason")) is str and r in ADAPTIVE_REASONS)
    ]
    return (rows, 0) if len(kept) == len(rows) else (kept, len(rows) - len(kept))


def _answered(text: Any) -> bool:
    return isinstance(text, str) and bool(spoken(text))


def _hit_token_cap(row: Mapping[str, Any]) -> bool:
    ended = row.get("ended_by")
    if isinstance(ended, str) and ended in _TOKEN_CAP_ENDINGS:
        return True
    steps = row.get("steps")
    if type(steps) is list and steps:
        # One pass that both checks the steps are internal (so read_steps would hand back
        # this very list) and looks for the flag: read_steps' own check and a second loop
        # take most of run_config's time on 100,000 rows.
        hit = False
        for step in steps:
            if type(step) is not dict:
                break
            kind = step.get("kind")
            if kind.__class__ is not str or kind not in STEP_KINDS:
                break
            if step.get("truncated"):
                hit = True
        else:
            return hit
    for step in read_steps(row)[1]:  # noqa: SIM110 - a plain loop (speed)
        if step.get("truncated"):
            return True
    return False


def _settle(name: str, values: set[Any], mixed: list[str]) -> Any:
    values.discard(None)
    if not values:
        return None
    if len(values) == 1:
        return next(iter(values))
    mixed.append(name)
    return sorted(values, key=str)


def run_config(rows: Sequence[Mapping[str, Any]] | Any, k: int | None = None) -> dict[str, Any]:
    """How the rows were produced, as one dict a comparison can check.

    Keys: ``n_tasks``, ``n_rows``, ``k`` (given, else the smallest task group of >= 2 rows),
    ``temperature`` and ``max_tokens`` (from ``sampling``), ``policy_version``,
    ``model_version``, ``judge_version`` (``lineage.judge_version``, else ``judge_name``),
    ``prompt_sha`` (``lineage.system_prompt_sha``), ``token_cap_share`` (share of rows that
    hit the token cap: ``ended_by`` says so or an assistant step is ``truncated``) and
    ``answered_share`` (share of rows with a spoken reply once ``<think>`` markup is gone).
    A setting the rows disagree on holds the sorted list of values and is named in ``mixed``.
    """
    row_list = as_rows(rows)
    return run_config_with_keys(row_list, k, [task_key(row) for row in row_list])


def run_config_with_keys(
    row_list: Sequence[Mapping[str, Any]], k: int | None, keys: list[str]
) -> dict[str, Any]:
    """``run_config`` for a caller that already holds each row's task key (``keys[i]`` for
    ``row_list[i]``), so the rows are not keyed a second time."""
    try:
        return _run_config(row_list, k, keys, set)
    except TypeError:
        # A setting holds a list or dict (rows another tool wrote): it is compared, and
        # reported, as its JSON text. The plain sets stay the fast path for every other run.
        return _run_config(row_list, k, keys, _TextSet)


class _TextSet(set):
    """A set that holds an unhashable value as its JSON text (keys sorted)."""

    def add(self, value: Any) -> None:
        try:
            super().add(value)
        except TypeError:
            super().add(json.dumps(value, sort_keys=True, default=str))


def _run_config(
    row_list: Sequence[Mapping[str, Any]], k: int | None, keys: list[str], new_set: type[set]
) -> dict[str, Any]:
    # One loop reading every field of a row while it is in cache: on 100,000 rows the
    # passes are bound by fetching each row dict, so six comprehensions (each fetching
    # every row again) cost more than one loop's per-row statements. Each set is filled in
    # row order.
    temps: set[Any] = new_set()
    caps: set[Any] = new_set()
    policies: set[Any] = new_set()
    models: set[Any] = new_set()
    prompts: set[Any] = new_set()
    judges: set[Any] = new_set()
    n_capped = n_answered = 0
    for r in row_list:
        sampling = r.get("sampling")
        if isinstance(sampling, dict):
            temps.add(sampling.get("temperature"))
            caps.add(sampling.get("max_tokens"))
        policies.add(r.get("policy_version"))
        models.add(r.get("model_version"))
        lin = r.get("lineage")
        if isinstance(lin, dict):
            prompts.add(lin.get("system_prompt_sha"))
            judges.add(lin.get("judge_version") or r.get("judge_name"))
        else:
            judges.add(r.get("judge_name"))
        if _hit_token_cap(r):
            n_capped += 1
        if _answered(r.get("final_text")):
            n_answered += 1
    group_sizes = Counter(keys)
    mixed: list[str] = []
    if k is None:
        repeated = [n for n in group_sizes.values() if n >= 2]
        k = min(repeated) if repeated else None
    n = len(row_list)
    return {
        "n_tasks": len(group_sizes),
        "n_rows": n,
        "k": k,
        "temperature": _settle("temperature", temps, mixed),
        "max_tokens": _settle("max_tokens", caps, mixed),
        "policy_version": _settle("policy_version", policies, mixed),
        "model_version": _settle("model_version", models, mixed),
        "judge_version": _settle("judge_version", judges, mixed),
        "prompt_sha": _settle("prompt_sha", prompts, mixed),
        "token_cap_share": (n_capped / n) if n else None,
        "answered_share": (n_answered / n) if n else None,
        "mixed": mixed,
    }
