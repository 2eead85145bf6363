"""Selection: whole mixed groups for RL (``select_for_rl``), diverse correct demonstrations for
SFT (``select_for_sft``).

``select_for_rl`` runs, in this order: the ``prior`` round's difficulty filter, the difficulty
band on the pass rate it stamps, the row gates (``filter_rl_rows``), ``dedupe_groups``, the
truncation policy and the unanimous trim, then takes whole asks round-robin across fault kinds
(and, within a kind, across pass rates) until ``target`` rows. Every group statistic is a numpy group-by, so a
100k-row pool costs a few Python passes over the rows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_exp.domain.gc_tuning import without_gc
from wai_exp.rows.keys import task_key

# is_truncated lives in grade/length (length_report reads it too); re-exported here.
# is_truncated lives in grade/length: length_report reads it too, and grade/ sits below select/.
from wai_exp.score.grade.length import is_truncated
from wai_exp.score.grade.repeats import normalized_reply, row_signature
from wai_exp.score.select.hygiene import dedupe_positions
from wai_exp.score.select.optimize import (
    group_signal,
    is_incomplete_junk,
    junk_positions,
    next_round,
    partial_rewards,
    signal_from_stats,
)
from wai_exp.score.select.trim import (
    binary_rewards,
    check_band,
    group_stats,
    put_calibration,
    unanimous_keep_mask,
)
from wai_exp.score.stats.readers import reward_under
from wai_exp.score.stats.row_facts import as_rows, row_facts, shares_row_facts

#: Above this verifier false-negative rate (audit_grades' fn_rate) the selection warns and
#: the audit says to fix the verifier before training (audit_grades reads it from here).
FN_WARN = 0.10

TRUNCATED_MODES = ("drop", "keep", "penalize")
ORDERS = ("spread", "middle")
SFT_RULES = ("top_per_prompt", "top_k_overall", "random_per_prompt", "random_k_overall")
#: The fewest repeats the k-way numbers (pass^k, pass@k) are reported on (``pass_at``'s min_k).
KWAY_MIN_K = 4


def fault_kind(row: dict[str, Any]) -> str:
    """The situation kind a rollout exercised, for the round-robin: the fired fault's mode,
    else the planned fault's mode (``timeout``, ``error``, ``malformed``), else the world
    state (``miss`` for a missing record, ``already-done``), else ``no-fault``."""
    faults = row.get("faults") or {}
    fired = faults.get("fired") or ()
    if fired and fired[-1].get("mode"):
        return str(fired[-1]["mode"])
    planned = faults.get("planned") or {}
    if planned.get("mode"):
        return str(planned["mode"])
    state = row.get("world_state") or (row.get("scenario_dimensions") or {}).get("world_state")
    if state == "missing":
        return "miss"
    if state == "already_done":
        return "already-done"
    return "no-fault"


def _kway_available(k: np.ndarray) -> bool:
    """Whether ``pass_at``'s default rule would report pass^k on groups of these sizes: k is the
    smallest group of two or more graded repeats, and the k-way numbers need k >= KWAY_MIN_K."""
    grouped = k[k >= 2]
    return bool(grouped.size) and int(grouped.min()) >= KWAY_MIN_K


def _spread(asks: list[int], rate: np.ndarray) -> list[int]:
    """Round-robin across distinct pass rates (lowest first), arrival order within one."""
    buckets: dict[float, list[int]] = defaultdict(list)
    for g in asks:
        buckets[round(float(rate[g]), 6)].append(g)
    queues = [buckets[r] for r in sorted(buckets)]
    out: list[int] = []
    depth = 0
    while len(out) < len(asks):
        for q in queues:
            if depth < len(q):
                out.append(q[depth])
        depth += 1
    return out


def _round_robin(groups: dict[str, list[int]]) -> list[int]:
    out: list[int] = []
    queues = [groups[k] for k in sorted(groups)]
    depth = 0
    total = sum(len(q) for q in queues)
    while len(out) < total:
        for q in queues:
            if depth < len(q):
                out.append(q[depth])
        depth += 1
    return out


def _stamped_rates(
    rows: Sequence[dict[str, Any]],
    keys: Sequence[str],
    arrival: Any,
    arrival_index: dict[str, int],
) -> np.ndarray:
    """Per arrival ask, the pass rate its rows will be stamped with: the rate over the rows
    as they arrived, unless a row carries a stamp that counts more repeats (that stamp's
    rate stays, as ``put_calibration`` keeps it). NaN for an ask with no 0/1 reward."""
    rate = np.where(arrival.k > 0, arrival.pass_rate, np.nan).astype(float)
    best_k = arrival.k.astype(float).copy()
    for row, key in zip(rows, keys, strict=True):
        carried = row.get("calibration")
        if not isinstance(carried, dict):
            continue
        k, r = carried.get("k"), carried.get("pass_rate")
        if not isinstance(k, int | float) or not isinstance(r, int | float):
            continue
        g = arrival_index[key]
        if k > best_k[g]:
            best_k[g], rate[g] = k, float(r)
    return rate


def _band_on_stamped(
    pool: list[int],
    ask_of: np.ndarray,
    stamped: np.ndarray,
    ask_in_band: np.ndarray,
    lo: float,
    hi: float,
) -> tuple[list[int], dict[str, Any]]:
    """The positions in ``pool`` whose ask (``ask_of[position]``) has its stamped rate
    inside ``[lo, hi]``, and the counts (``trim_out_of_band``'s report keys, measured on the
    stamped rate). Asks stamped unanimous (rate 0 or 1) are left for the unanimous trim to
    count, as there; ranking never selects them, their stamped rate being outside any band
    that can mix."""
    at = np.asarray(pool, dtype=np.intp)
    groups = ask_of[at]
    unanimous = (stamped == 0.0) | (stamped == 1.0)
    drop = ~ask_in_band & ~unanimous
    kept = at[~drop[groups]].tolist() if len(pool) else []
    present = np.unique(groups)
    rate = stamped[present]
    measured = ~np.isnan(rate) & ~unanimous[present]
    report = {
        "rows_in": len(pool),
        "rows_kept": len(kept),
        "rows_dropped": len(pool) - len(kept),
        "asks_in": int(present.size),
        "asks_kept": int((~drop[present]).sum()),
        "asks_dropped_too_easy": int((measured & (rate > hi + 1e-9)).sum()),
        "asks_dropped_too_hard": int((measured & (rate < lo - 1e-9)).sum()),
        "asks_unanimous_left": int(unanimous[present].sum()),
        "asks_unmeasured": int(np.isnan(rate).sum()),
        "band": [lo, hi],
        "measured_on": "the stamped pass rate (rows as they arrived), before dedupe",
    }
    return kept, report


def _check_target(target: int) -> None:
    if not isinstance(target, int | np.integer) or isinstance(target, bool) or target < 1:
        raise ValueError(
            f"target must be a positive integer number of rows (got {target!r}); 1000 is the default."
        )


@without_gc
@shares_row_facts
def select_for_rl(
    rows: Sequence[dict[str, Any]],
    target: int = 1000,
    lo: float = 0.2,
    hi: float = 0.8,
    enforce_band: bool = True,
    has_tools: bool = True,
    dedupe: bool = True,
    drop_truncated: bool = True,
    endorsed: Sequence[str] = (),
    truncated: str = "drop",
    order: str = "spread",
    prior: Sequence[dict[str, Any]] | None = None,
    audit: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Whole mixed groups up to roughly ``target`` rows; groups never split.

    Steps, in order:

    1. ``calibration`` is measured per ask on the rows *as they arrived* (binary rewards):
       that pass rate over the k repeats the grader saw is the task's difficulty. A carried
       stamp that counts more repeats keeps its rate (``put_calibration``). This *stamped*
       rate is the one every later step reads: the band, the ranking and the report.
    2. ``prior`` (the previous round's graded rollouts): asks it solves above ``hi`` or below
       ``lo`` are dropped before anything else; asks it never saw are kept (``next_round``).
    3. (``enforce_band``) the difficulty band ``[lo, hi]`` on the stamped rate: asks outside
       it go before dedupe, so no selected row is stamped ``in_band: false``.
    4. Row gates (``filter_rl_rows`` with ``has_tools``): error, empty and unjudged rows go;
       then ``dedupe``: repeat trajectories within an ask go (``dedupe_groups``).
    5. ``truncated`` rollouts (cut at the token cap): ``"drop"`` removes them;
       ``"keep"`` (``drop_truncated=False`` is its old spelling) returns them as copies with
       ``overlong=True`` riding with their ask without deciding it (the ask is judged, trimmed
       and ranked exactly as under ``"drop"``, and riders do not count toward ``target``, so
       ``"keep"`` never returns fewer rows); ``"penalize"`` returns them as copies with
       ``reward`` 0 and the judged score under ``reward_before_penalty``, and that 0 counts.
    6. The unanimous trim on what is left: an ask must still mix after dedupe to carry a
       contrast. With ``enforce_band=False`` out-of-band mixed asks are kept but ranked after
       every in-band one (their stamp says ``band_enforced: false``). Asks left with fewer
       than two graded rollouts cannot mix and are not selected.
    7. The remaining asks are taken round-robin across fault kinds (``fault_kind``), kinds in
       name order; within a kind ``order="spread"`` round-robins across stamped pass rates (no
       preference for 50%), ``order="middle"`` takes the closest to 50% first. Whole asks are
       added until ``target`` rows; the last may overshoot.

    Selected rows are the input dicts (or the copies of step 5) with ``calibration`` stamped
    in place from step 1; a carried stamp with more repeats is kept. Returns
    ``(rows, report)``; the report holds each step's counts, ``fault_kinds``, the selection's
    ``group_signal``, ``hack_scan`` (with ``endorsed``) and ``correlations`` (the pooled scan),
    and ``hygiene_warnings``: the ``audit`` verifier false-negative rate above ``FN_WARN``,
    lost k-way numbers, judge label noise, a reward hack, correlations, a shortfall. Raises
    ``ValueError`` for an unknown ``truncated``/``order``, a bad band or target.
    """
    lo, hi, truncated = _check_rl_args(target, lo, hi, truncated, order, drop_truncated)
    rows = as_rows(rows)
    warnings: list[str] = []

    # 1. Calibration on the rows as they arrived.
    arr = _Arrival.measure(rows, truncated, lo, hi)
    # 2. Prior round.
    pool, prior_block = _prior_pool(rows, arr.keys, prior, lo, hi)
    # 3. The band, on the rate the rows will be stamped with; 4. row gates, then duplicates.
    pool, band_report, gate_report, dedupe_report = _gated_pool(
        rows, arr, pool, lo, hi, enforce_band, has_tools, dedupe, warnings
    )
    # 5. Truncation.
    dec = _Deciding.split(rows, arr.keys, pool, truncated)
    # 6. The deciding rows must still mix after dedupe; 7. rank asks and take whole groups.
    take = _Take.rank(rows, arr, dec, lo, hi, enforce_band, order, target)
    picked, selected_kinds = _pick(take, dec.riders)
    selected = [row for row, _ in picked]
    # 8. Calibration stamp from step 1, in place.
    n_carried = _stamp_picked(picked, rows, arr, lo, hi, enforce_band)

    # 9. Report.
    kway_after, scan, correlations = _selection_checks(selected, arr, audit, endorsed, warnings)
    rates_sel = np.array([take.rate_of[g] for g in take.chosen], dtype=float)
    report = {
        "rows_in": len(rows),
        "asks_in": arr.stats.n_groups,
        "rows_out": len(selected),
        "rows_counted": take.counted,
        "asks_out": len(take.chosen),
        "target": target,
        "overshoot": max(0, take.counted - target),
        "shortfall": max(0, target - take.counted),
        "band": [lo, hi],
        "enforce_band": enforce_band,
        "order": order,
        "truncated": dec.truncation,
        "has_tools": has_tools,
        "prior": prior_block,
        "gates": gate_report,
        "dedupe": dedupe_report,
        "unanimous": take.unanimous_report,
        "out_of_band": band_report,
        "asks_mixed_out_of_band_ranked_last": take.ranked_last(enforce_band),
        "asks_unmixable": take.singles,
        "fault_kinds": {
            k: {"available": take.available_kinds[k], "selected": selected_kinds.get(k, 0)}
            for k in sorted(take.available_kinds)
        },
        "pass_rates": _rate_summary(rates_sel),
        "group_signal": group_signal(selected, lo=lo, hi=hi),
        "calibration": {
            "measured_on": arr.measured_on,
            "rows_stamped": len(selected),
            "n_carried": n_carried,
            "kway_before": arr.kway_before,
            "kway_after": kway_after,
        },
        "hack_scan": scan,
        "correlations": correlations,
        "hygiene_warnings": warnings,
    }
    _closing_notes(report, rows, arr, take, lo, hi)
    return selected, report


def _check_rl_args(
    target: int, lo: float, hi: float, truncated: str, order: str, drop_truncated: bool
) -> tuple[float, float, str]:
    """The checked band and the truncation mode (``drop_truncated=False`` is ``"keep"``'s
    old spelling). Raises ``ValueError`` naming the bad argument."""
    _check_target(target)
    lo, hi = check_band(lo, hi)
    if truncated not in TRUNCATED_MODES:
        raise ValueError(f"truncated must be one of {TRUNCATED_MODES} (got {truncated!r})")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS} (got {order!r})")
    if not drop_truncated and truncated == "drop":
        truncated = "keep"
    return lo, hi, truncated


def _gated_pool(
    rows: list[dict[str, Any]],
    arr: _Arrival,
    pool: list[int],
    lo: float,
    hi: float,
    enforce_band: bool,
    has_tools: bool,
    dedupe: bool,
    warnings: list[str],
) -> tuple[list[int], dict[str, Any] | None, dict[str, Any], dict[str, Any] | None]:
    """Steps 3 and 4: the band on the stamped rate (before dedupe, so no selected row is
    stamped out of band), the row gates, then duplicates; the pool and each step's report."""
    band_report: dict[str, Any] | None = None
    if enforce_band:
        pool, band_report = _band_on_stamped(pool, arr.ask_of, arr.stamped, arr.ask_in_band, lo, hi)
    keep, gate_report = junk_positions([rows[i] for i in pool], has_tools=has_tools)
    pool = [pool[j] for j in keep]
    dedupe_report: dict[str, Any] | None = None
    if dedupe:
        pool, dedupe_report = _dedupe_pool(rows, arr.keys, pool, warnings)
    return pool, band_report, gate_report, dedupe_report


#: Rates within this of a band edge are in the band (float noise on k-way rates).
_EPS = 1e-9


@dataclass
class _Arrival:
    """Step 1: calibration on the rows as they arrived. Keys and rewards come from
    row_facts, read once and shared with the later steps' group_stats; every later step
    tracks rows by their position in ``rows``, so a row's task key, ask and 0/1 reward are
    array look-ups."""

    keys: list[Any]
    #: each row's 0/1 reward (NaN: unjudged)
    judged: np.ndarray
    stats: Any
    #: each row's ask, in ``stats.keys`` order
    ask_of: np.ndarray
    index: dict[Any, int]
    measured_on: str
    kway_before: bool
    #: each ask's stamped rate (a carried stamp's, else the arrival rate)
    stamped: np.ndarray
    ask_in_band: np.ndarray

    @classmethod
    def measure(cls, rows: list[dict[str, Any]], truncated: str, lo: float, hi: float) -> _Arrival:
        keys = row_facts(rows).keys
        judged = binary_rewards(rows)
        arrival_binary = judged.copy()
        if truncated == "penalize":
            # The penalty is part of the reward: a cut rollout is a failure in the stamped
            # rate too, or an ask would be selected at 3 of 4 and stamped 4 of 4, outside
            # the band.
            cut = np.fromiter((is_truncated(r) for r in rows), dtype=bool, count=len(rows))
            arrival_binary[cut & np.isfinite(arrival_binary)] = 0.0
        arrival = group_stats(rows, binary=arrival_binary)
        measured_on = "rows as they arrived, before dedupe and trims" + (
            " (cut rollouts counted as failures, truncated='penalize')"
            if truncated == "penalize"
            else ""
        )
        index = {k: g for g, k in enumerate(arrival.keys)}
        stamped = _stamped_rates(rows, keys, arrival, index)
        ask_in_band = (stamped >= lo - _EPS) & (stamped <= hi + _EPS)  # NaN (unmeasured): False
        return cls(
            keys, judged, arrival, np.asarray(arrival.inv, dtype=np.intp), index, measured_on,
            _kway_available(arrival.k), stamped, ask_in_band,
        )  # fmt: skip


def _prior_pool(
    rows: list[dict[str, Any]],
    keys: list[Any],
    prior: Sequence[dict[str, Any]] | None,
    lo: float,
    hi: float,
) -> tuple[list[int], dict[str, Any] | None]:
    """Step 2: the row positions left after dropping asks the previous round solved above
    ``hi`` or below ``lo``, and the report block (None without ``prior``)."""
    if prior is None:
        return list(range(len(rows))), None
    firsts: dict[Any, dict[str, Any]] = {}
    for row, key in zip(rows, keys, strict=True):
        firsts.setdefault(key, row)
    nr = next_round(prior, tasks=list(firsts.values()), lo=lo, hi=hi)
    rates = nr["pass_rates"]
    drop_keys = {k for k, r in rates.items() if r > hi + _EPS or r < lo - _EPS}
    pool = [i for i, k in enumerate(keys) if k not in drop_keys]
    return pool, {
        "kept": nr["kept"],
        "dropped_solved": nr["dropped_solved"],
        "dropped_unsolved": nr["dropped_unsolved"],
        "unknown": nr["unknown"],
        "rows_dropped": len(rows) - len(pool),
        "from_policy": nr["from_policy"],
    }


def _dedupe_pool(
    rows: list[dict[str, Any]], keys: list[Any], pool: list[int], warnings: list[str]
) -> tuple[list[int], dict[str, Any]]:
    """Step 4b: repeat trajectories within an ask go; label noise is a warning."""
    dropped, dedupe_report = dedupe_positions([rows[i] for i in pool], asks=[keys[i] for i in pool])
    if dropped:
        pool = [i for j, i in enumerate(pool) if j not in dropped]
    if dedupe_report["reward_disagreements"]:
        warnings.append(
            f"{dedupe_report['reward_disagreements']} identical trajectories were scored "
            f"differently by the judge (label noise); asks: {', '.join(dedupe_report['disagreement_asks'][:5])}"
        )
    return pool, dedupe_report


@dataclass
class _Deciding:
    """Step 5: the rows (or penalized copies) that decide their ask, the position of the
    row each came from, and the ``truncated="keep"`` riders per ask."""

    rows: list[dict[str, Any]]
    src: list[int]
    penalized: list[bool]
    riders: dict[Any, list[tuple[dict[str, Any], int]]]
    truncation: dict[str, Any]

    @classmethod
    def split(
        cls, rows: list[dict[str, Any]], keys: list[Any], pool: list[int], truncated: str
    ) -> _Deciding:
        out = cls([], [], [], defaultdict(list), {})
        n_trunc = 0
        for i in pool:
            row = rows[i]
            if not is_truncated(row):
                out.rows.append(row)
                out.src.append(i)
                out.penalized.append(False)
                continue
            n_trunc += 1
            if truncated == "drop":
                continue
            if truncated == "keep":
                out.riders[keys[i]].append(({**row, "overlong": True}, i))
            else:
                copy = {
                    **row,
                    "overlong": True,
                    "reward": 0.0,
                    "reward_before_penalty": row.get("reward"),
                }
                out.rows.append(copy)
                out.src.append(i)
                out.penalized.append(True)
        out.truncation = {
            "mode": truncated,
            "rows_truncated": n_trunc,
            "dropped": n_trunc if truncated == "drop" else 0,
            "kept_overlong": n_trunc if truncated == "keep" else 0,
            "penalized": n_trunc if truncated == "penalize" else 0,
        }
        return out


@dataclass
class _Take:
    """Steps 6 and 7: the asks that still mix, ranked, and the whole groups taken."""

    stats: Any
    members: list[list[tuple[dict[str, Any], int]]]
    ask_kind: list[str]
    rate_of: np.ndarray
    mixed: np.ndarray
    in_band: np.ndarray
    singles: int
    available_kinds: Counter[str]
    chosen: list[int]
    counted: int
    unanimous_report: dict[str, Any]

    def ranked_last(self, enforce_band: bool) -> int:
        """Mixed asks outside the band, ranked after every in-band one (none when enforced)."""
        return 0 if enforce_band else int((self.mixed & ~self.in_band).sum())

    @classmethod
    def rank(
        cls,
        rows: list[dict[str, Any]],
        arr: _Arrival,
        dec: _Deciding,
        lo: float,
        hi: float,
        enforce_band: bool,
        order: str,
        target: int,
    ) -> _Take:
        # 6. trim_unanimous_groups, on the keys and rewards read in step 1.
        src = np.asarray(dec.src, dtype=np.intp)
        d_keys = [arr.keys[i] for i in dec.src]
        d_bin = arr.judged[src]
        # a graded cut row fails
        d_bin[np.asarray(dec.penalized, dtype=bool) & np.isfinite(d_bin)] = 0.0
        keep_row, unanimous_report = unanimous_keep_mask(dec.rows, 2, keys=d_keys, binary=d_bin)
        surv = np.flatnonzero(keep_row).tolist()
        survivors = [dec.rows[j] for j in surv]
        s_src = [dec.src[j] for j in surv]
        # 7.
        stats = group_stats(survivors, keys=[d_keys[j] for j in surv], binary=d_bin[surv])
        members: list[list[tuple[dict[str, Any], int]]] = [[] for _ in range(stats.n_groups)]
        kinds_rows: list[Counter[str]] = [Counter() for _ in range(stats.n_groups)]
        for row, i, g in zip(survivors, s_src, stats.inv.tolist(), strict=True):
            members[g].append((row, i))
            kinds_rows[g][fault_kind(rows[i])] += 1
        mixed = (stats.k >= 2) & (stats.n_pass > 0) & (stats.n_pass < stats.k)
        # Every ranking reads the stamped rate of the ask, not its rate among the survivors.
        rate_of = arr.stamped[[arr.index[k] for k in stats.keys]] if stats.n_groups else np.zeros(0)
        in_band = mixed & (rate_of >= lo - _EPS) & (rate_of <= hi + _EPS)
        ask_kind = [c.most_common(1)[0][0] if c else "no-fault" for c in kinds_rows]
        arrival_order = [int(g) for g in stats.arrival_order()]
        tiers = [[g for g in arrival_order if in_band[g]]]
        if not enforce_band:
            tiers.append([g for g in arrival_order if mixed[g] and not in_band[g]])
        sequence, available_kinds = _sequence(tiers, ask_kind, rate_of, order)
        chosen: list[int] = []
        counted = 0
        for g in sequence:
            if counted >= target:
                break
            chosen.append(g)
            counted += len(members[g])
        return cls(
            stats, members, ask_kind, rate_of, mixed, in_band, int((stats.k < 2).sum()),
            available_kinds, chosen, counted, unanimous_report,
        )  # fmt: skip


def _pick(
    take: _Take, riders: dict[Any, list[tuple[dict[str, Any], int]]]
) -> tuple[list[tuple[dict[str, Any], int]], Counter[str]]:
    """The chosen asks' rows (with their riders) and how many asks of each kind were taken."""
    picked: list[tuple[dict[str, Any], int]] = []
    selected_kinds: Counter[str] = Counter()
    for g in take.chosen:
        selected_kinds[take.ask_kind[g]] += 1
        picked.extend(take.members[g])
        picked.extend(riders.get(take.stats.keys[g], ()))
    return picked, selected_kinds


def _sequence(
    tiers: list[list[int]], ask_kind: list[str], rate_of: np.ndarray, order: str
) -> tuple[list[int], Counter[str]]:
    """The asks in the order they are taken: tier by tier, round-robin across fault kinds,
    within a kind by ``order``; and how many asks of each kind were available."""
    sequence: list[int] = []
    available_kinds: Counter[str] = Counter()
    for tier in tiers:
        by_kind: dict[str, list[int]] = defaultdict(list)
        for g in tier:
            by_kind[ask_kind[g]].append(g)
            available_kinds[ask_kind[g]] += 1
        for kind, asks in by_kind.items():
            if order == "spread":
                by_kind[kind] = _spread(asks, rate_of)
            else:
                by_kind[kind] = sorted(asks, key=lambda g: abs(float(rate_of[g]) - 0.5))
        sequence.extend(_round_robin(by_kind))
    return sequence, available_kinds


def _stamp_picked(
    picked: list[tuple[dict[str, Any], int]],
    rows: list[dict[str, Any]],
    arr: _Arrival,
    lo: float,
    hi: float,
    enforce_band: bool,
) -> int:
    """Step 8: stamp step 1's calibration on each picked row's source row, in place (a copy
    shares it); returns how many carried a stamp of their own."""
    n_carried = 0
    for row, i in picked:
        src_row = rows[i]
        g = int(arr.ask_of[i])
        k = int(arr.stats.k[g])
        rate = float(arr.stats.pass_rate[g]) if k else None
        stamp = {
            "pass_rate": rate,
            "k": k,
            "n": k,  # row-v1's name for the rollouts the rate is over
            "n_pass": int(arr.stats.n_pass[g]),
            "band": [lo, hi],
            "in_band": None if rate is None else bool(lo - _EPS <= rate <= hi + _EPS),
            "band_enforced": enforce_band,
            "measured_on": arr.measured_on,
            "source": "select_for_rl",
            "policy": src_row.get("policy_version"),
            "model": src_row.get("model_version"),
        }
        if put_calibration(src_row, stamp):
            n_carried += 1
            # The carried rate stands (step 1 ranked on it); band and verdict are this call's.
            kept_rate = src_row["calibration"].get("pass_rate")
            src_row["calibration"]["band"] = [lo, hi]
            src_row["calibration"]["band_enforced"] = enforce_band
            src_row["calibration"]["in_band"] = (
                None if kept_rate is None else bool(lo - _EPS <= float(kept_rate) <= hi + _EPS)
            )
        if src_row is not row:
            row["calibration"] = src_row["calibration"]
    return n_carried


def _selection_checks(
    selected: list[dict[str, Any]],
    arr: _Arrival,
    audit: dict[str, Any] | None,
    endorsed: Sequence[str],
    warnings: list[str],
) -> tuple[bool, dict[str, Any], dict[str, Any]]:
    """What the selection still carries: whether its k-way numbers survive, the verifier's
    audit, ``hack_scan`` and the pooled correlations, each a warning when it fails."""
    from wai_exp.score.diagnose.hack_scan import hack_scan, pooled_correlations

    sel_stats = group_stats(selected) if selected else None
    kway_after = _kway_available(sel_stats.k) if sel_stats is not None else False
    if arr.kway_before and not kway_after:
        warnings.append(
            f"the k-way reliability numbers (pass^k, pass@k) were available on the rows as they "
            f"arrived (k >= {KWAY_MIN_K}) but do not survive the prune: report them from the "
            f"graded rows, not from this selection"
        )
    warnings += _audit_warnings(audit)
    scan = hack_scan(selected, endorsed=endorsed)
    if scan["regime"] in ("reward_hack", "degenerate"):
        warnings.append(
            f"hack_scan regime {scan['regime']}: "
            + (scan["warnings"][-1] if scan["warnings"] else "")
        )
    correlations = pooled_correlations(selected)
    for name in correlations["flagged"]:
        warnings.append(
            f"reward correlates with {name} across rows (corr {correlations['correlations'][name]:+.2f}): "
            f"a judge that pays for it will be learned"
        )
    return kway_after, scan, correlations


def _closing_notes(
    report: dict[str, Any], rows: list[dict[str, Any]], arr: _Arrival, take: _Take, lo: float,
    hi: float,
) -> None:  # fmt: skip
    """Add ``group_signal_in`` (the rows as they arrived), ``kept_none_because`` (None unless
    the selection is empty) and the shortfall warning to ``report``."""
    signal_in = _arrival_signal(rows, arr, lo, hi)
    why_none = None
    if not report["rows_out"]:
        why_none = _kept_none_because(
            len(rows), signal_in, report["prior"], report["out_of_band"], report["gates"],
            report["dedupe"], lo, hi,
        )  # fmt: skip
    report["group_signal_in"] = signal_in
    report["kept_none_because"] = why_none
    target = report["target"]
    if why_none is not None:  # "widen the band" does not help when, say, no ask mixes
        report["hygiene_warnings"].append(f"no rows for target {target}: {why_none}")
    elif take.counted < target:
        report["hygiene_warnings"].append(
            f"only {take.counted} rows in {len(take.chosen)} usable asks for target {target}: "
            "simulate more asks or widen the band"
        )


def _arrival_signal(
    rows: list[dict[str, Any]], arr: _Arrival, lo: float, hi: float
) -> dict[str, Any]:
    """``group_signal`` of the rows as they arrived (the arrival stats of step 1)."""
    partial = 0 if int(arr.stats.k.sum()) else partial_rewards(rows)
    return signal_from_stats(arr.stats, len(rows), lo, hi, partial=partial)


def _kept_none_because(
    n_rows: int,
    signal_in: Mapping[str, Any],
    prior: Mapping[str, Any] | None,
    band: Mapping[str, Any] | None,
    gates: Mapping[str, Any],
    dedupe: Mapping[str, Any] | None,
    lo: float,
    hi: float,
) -> str:
    """Why an RL selection kept no row: the first step, in the order they run, that left no
    ask able to carry a within-ask contrast."""
    if n_rows == 0:
        return "no rows came in"
    if not signal_in["has_signal"]:
        return str(signal_in["note"])
    if prior is not None and prior["rows_dropped"] == n_rows:
        return (
            f"the previous round's rollouts (prior) put every ask outside the band [{lo:g}, "
            f"{hi:g}]: {prior['dropped_solved']} solved, {prior['dropped_unsolved']} never solved"
        )
    if band is not None and band["asks_kept"] == band["asks_unanimous_left"]:
        return (
            f"every ask whose rollouts mix passes and fails has its pass rate outside the band "
            f"[{lo:g}, {hi:g}] ({band['asks_dropped_too_easy']} too easy, "
            f"{band['asks_dropped_too_hard']} too hard): widen selection.band or set "
            "selection.enforce_band=false"
        )
    if gates["rows_kept"] == 0:
        d = gates["dropped"]
        return (
            f"every row is one no trainer should see ({d['error']} lost, {d['empty']} empty, "
            f"{d['unjudged']} unjudged)"
        )
    dup = (dedupe or {}).get("duplicates_dropped", 0)
    return (
        f"no ask still mixes passes and fails once repeated trajectories ({dup} rows) and "
        "truncated rollouts go: an ask needs two different graded rollouts, one passing and "
        "one failing; simulate more repeats per ask"
    )


def _rate_summary(rates: np.ndarray) -> dict[str, float | None]:
    return {
        "min": float(rates.min()) if rates.size else None,
        "median": float(np.median(rates)) if rates.size else None,
        "max": float(rates.max()) if rates.size else None,
    }


def _audit_warnings(audit: dict[str, Any] | None) -> list[str]:
    if not audit:
        return []
    fn_rate = audit.get("fn_rate")
    fn_warn = float(audit.get("fn_warn", FN_WARN))
    if isinstance(fn_rate, int | float) and fn_rate > fn_warn:
        return [
            f"the verifier rejects right answers {fn_rate:.0%} of the time (audit fn_rate above "
            f"FN_WARN {fn_warn:.0%}): fix the verifier before training on this selection"
        ]
    return []


def _sft_none_because(n_rows: int, junk: int, low: int, min_reward: float) -> str:
    """Why an SFT selection kept no row."""
    if n_rows == 0:
        return "no rows came in"
    if low:
        return (
            f"no row reaches min_reward={min_reward:g} (selection.min_reward): {low} rows "
            f"score below it, {junk} are rows no trainer should see (lost, empty or unjudged)"
        )
    return f"every row is one no trainer should see (lost, empty or unjudged): {junk} of {n_rows}"


#: A qualifying SFT row: (index, row, ask, behavior signature, reward).
_SftItem = tuple[int, dict[str, Any], str, str, float]


def _sft_pool(
    rows: list[dict[str, Any]], min_reward: float
) -> tuple[list[_SftItem], int, int, int]:
    """The rows that qualify (not junk, reward at least ``min_reward``, not an exact repeat
    within their ask), and how many were junk, below the reward and repeats."""
    junk = low = dups = 0
    seen: set[tuple[str, str, str]] = set()
    pool: list[_SftItem] = []
    for i, row in enumerate(rows):
        if is_incomplete_junk(row) is not None:
            junk += 1
            continue
        r = reward_under(row)
        if r is None or r < min_reward:
            low += 1
            continue
        ask, sig = task_key(row), row_signature(row)
        dk = (ask, sig, normalized_reply(row))
        if dk in seen:
            dups += 1
            continue
        seen.add(dk)
        pool.append((i, row, ask, sig, r))
    return pool, junk, low, dups


def _sft_pick(
    pool: list[_SftItem], select: str, quota: int, rng: np.random.Generator
) -> list[_SftItem]:
    """Up to ``quota`` of the pool by the ``select`` rule."""
    if select == "top_k_overall":
        return sorted(pool, key=lambda it: (-it[4], it[0]))[:quota]
    if select == "random_k_overall":
        perm = rng.permutation(len(pool))
        return [pool[j] for j in perm[:quota]]
    by_ask: dict[str, list[_SftItem]] = defaultdict(list)
    for item in pool:
        by_ask[item[2]].append(item)
    if select == "random_per_prompt":
        per_prompt = [items[int(rng.integers(len(items)))] for items in by_ask.values()]
        perm = rng.permutation(len(per_prompt))
        return [per_prompt[j] for j in perm[:quota]]
    return _top_per_prompt(by_ask, quota)


def _top_per_prompt(by_ask: Mapping[str, list[_SftItem]], quota: int) -> list[_SftItem]:
    """Each prompt's best completion (ties to the signature picked least so far), then
    round-robin across signatures so every way of being right appears before repeats."""
    used: Counter[str] = Counter()
    per_prompt = []
    for items in by_ask.values():
        best = max(it[4] for it in items)
        top = [it for it in items if it[4] == best]
        choice = min(top, key=lambda it: (used[it[3]], it[0]))
        used[choice[3]] += 1
        per_prompt.append(choice)
    by_sig: dict[str, list[_SftItem]] = defaultdict(list)
    for it in per_prompt:
        by_sig[it[3]].append(it)
    # Round-robin: one of each signature (most common first, arrival within), then repeats.
    queues = sorted(by_sig.values(), key=lambda q: (-len(q), q[0][0]))
    picked: list[_SftItem] = []
    depth = 0
    while len(picked) < min(quota, len(per_prompt)):
        for q in queues:
            if depth < len(q) and len(picked) < quota:
                picked.append(q[depth])
        depth += 1
    return picked


@without_gc
def select_for_sft(
    rows: Sequence[dict[str, Any]],
    target: int = 1000,
    select: str = "top_per_prompt",
    k: int | None = None,
    min_reward: float = 1.0,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Diverse correct demonstrations, at most ``target`` rows.

    Only rows whose numeric reward reaches ``min_reward`` and that are not junk
    (``is_incomplete_junk``) qualify; exact repeats within an ask (same behavior signature and
    normalized reply) count once. Unanimity is no problem here. ``select`` is the rule:

    * ``"top_per_prompt"``: each prompt's (``task_key``'s) highest-reward completion, ties
      going to the behavior signature picked least so far; then round-robin across behavior
      signatures, so every distinct way of being right appears before any repeats.
    * ``"top_k_overall"``: the ``k`` (default ``target``) highest-reward completions across all
      prompts, several per prompt allowed, ties in arrival order.
    * ``"random_per_prompt"`` / ``"random_k_overall"``: the controls, same counts with seeded
      random picks (``seed``), to check a gain from selection against chance.

    Does not mutate ``rows``. Returns ``(rows, report)`` with ``rows_in``,
    ``completions_per_prompt_mean`` (rows per prompt text) and ``selection_effective`` (more
    than one: something to choose among; else a ``selection_note`` says so), ``qualified``,
    ``dropped_junk``, ``below_min_reward``, ``duplicates``, ``rows_out``, ``prompts_out``,
    ``signatures_out``, ``per_signature`` and the options. Raises ``ValueError`` for an
    unknown ``select`` or a bad ``target``/``k``.
    """
    _check_target(target)
    if select not in SFT_RULES:
        raise ValueError(f"select must be one of {SFT_RULES} (got {select!r})")
    if k is not None and (not isinstance(k, int) or k < 1):
        raise ValueError(f"k must be a positive integer or None (got {k!r})")
    rows = as_rows(rows)
    quota = min(target, k if k is not None else target)
    pool, junk, low, dups = _sft_pool(rows, min_reward)
    picked = _sft_pick(pool, select, quota, np.random.default_rng(seed))
    per_sig = Counter(it[3] for it in picked)
    # Rejection sampling needs several completions of one prompt to choose among: at one
    # each, top_per_prompt is a pass/fail filter and random_per_prompt returns the same rows.
    per_prompt_in = Counter(str(row.get("prompt") or task_key(row)) for row in rows)
    completions = len(rows) / len(per_prompt_in) if per_prompt_in else 0.0
    report = {
        "rows_in": len(rows),
        "completions_per_prompt_mean": completions,
        "selection_effective": completions > 1.0,
        "qualified": len(pool),
        "dropped_junk": junk,
        "below_min_reward": low,
        "duplicates": dups,
        "rows_out": len(picked),
        "prompts_out": len({it[2] for it in picked}),
        "signatures_out": len(per_sig),
        "per_signature": dict(per_sig.most_common()),
        "select": select,
        "target": target,
        "k": k,
        "min_reward": min_reward,
        "seed": seed,
    }
    if rows and completions <= 1.0:
        report["selection_note"] = (
            "one completion per prompt: there is nothing to choose among, so this selection "
            "is a pass/fail filter; simulate more completions per prompt (mode=sft gives 4, "
            "or repeats=)"
        )
    if not picked:
        report["kept_none_because"] = _sft_none_because(len(rows), junk, low, min_reward)
    if len(picked) < quota:
        report["note"] = f"{len(picked)} rows for target {quota}: " + (
            "one per prompt at most under this rule; use select='top_k_overall' for more"
            if select.endswith("per_prompt")
            else "not enough qualifying rows; lower min_reward or simulate more"
        )
    return [it[1] for it in picked], report
