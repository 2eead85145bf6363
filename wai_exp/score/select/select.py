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
from collections.abc import Sequence
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
    from wai_exp.score.diagnose.hack_scan import hack_scan, pooled_correlations

    _check_target(target)
    lo, hi = check_band(lo, hi)
    if truncated not in TRUNCATED_MODES:
        raise ValueError(f"truncated must be one of {TRUNCATED_MODES} (got {truncated!r})")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS} (got {order!r})")
    if not drop_truncated and truncated == "drop":
        truncated = "keep"
    rows = as_rows(rows)
    warnings: list[str] = []

    # 1. Calibration on the rows as they arrived (keys and rewards from row_facts, read once
    # and shared with the later steps' group_stats). Every later step tracks rows by their
    # position in ``rows``: a row's task key, ask and 0/1 reward are array look-ups.
    keys = row_facts(rows).keys
    judged = binary_rewards(rows)
    arrival_binary = judged.copy()
    if truncated == "penalize":
        # The penalty is part of the reward: a cut rollout is a failure in the stamped rate
        # too, or an ask would be selected at 3 of 4 and stamped 4 of 4, outside the band.
        cut = np.fromiter((is_truncated(r) for r in rows), dtype=bool, count=len(rows))
        arrival_binary[cut & np.isfinite(arrival_binary)] = 0.0
    arrival = group_stats(rows, binary=arrival_binary)
    ask_of = np.asarray(arrival.inv, dtype=np.intp)  # each row's ask, in arrival.keys order
    measured_on = "rows as they arrived, before dedupe and trims" + (
        " (cut rollouts counted as failures, truncated='penalize')"
        if truncated == "penalize"
        else ""
    )
    arrival_index = {k: g for g, k in enumerate(arrival.keys)}
    kway_before = _kway_available(arrival.k)
    stamped = _stamped_rates(rows, keys, arrival, arrival_index)
    eps = 1e-9
    ask_in_band = (stamped >= lo - eps) & (stamped <= hi + eps)  # NaN (unmeasured): False

    # 2. Prior round.
    prior_block: dict[str, Any] | None = None
    pool = list(range(len(rows)))
    if prior is not None:
        firsts = {}
        for row, key in zip(rows, keys, strict=True):
            firsts.setdefault(key, row)
        nr = next_round(prior, tasks=list(firsts.values()), lo=lo, hi=hi)
        rates = nr["pass_rates"]
        drop_keys = {k for k, r in rates.items() if r > hi + eps or r < lo - eps}
        pool = [i for i, k in enumerate(keys) if k not in drop_keys]
        prior_block = {
            "kept": nr["kept"],
            "dropped_solved": nr["dropped_solved"],
            "dropped_unsolved": nr["dropped_unsolved"],
            "unknown": nr["unknown"],
            "rows_dropped": len(rows) - len(pool),
            "from_policy": nr["from_policy"],
        }

    # 3. The band, on the rate the rows will be stamped with; only then dedupe (step 4).
    band_report: dict[str, Any] | None = None
    if enforce_band:
        pool, band_report = _band_on_stamped(pool, ask_of, stamped, ask_in_band, lo, hi)

    # 4. Row gates.
    keep, gate_report = junk_positions([rows[i] for i in pool], has_tools=has_tools)
    pool = [pool[j] for j in keep]

    # 4b. Duplicates.
    dedupe_report: dict[str, Any] | None = None
    if dedupe:
        dropped, dedupe_report = dedupe_positions(
            [rows[i] for i in pool], asks=[keys[i] for i in pool]
        )
        if dropped:
            pool = [i for j, i in enumerate(pool) if j not in dropped]
        if dedupe_report["reward_disagreements"]:
            warnings.append(
                f"{dedupe_report['reward_disagreements']} identical trajectories were scored "
                f"differently by the judge (label noise); asks: {', '.join(dedupe_report['disagreement_asks'][:5])}"
            )

    # 5. Truncation. ``deciding`` holds the rows (or penalized copies) that decide their ask,
    # ``d_src`` the position of the row each came from.
    deciding: list[dict[str, Any]] = []
    d_src: list[int] = []
    penalized: list[bool] = []
    riders: dict[str, list[tuple[dict[str, Any], int]]] = defaultdict(list)
    n_trunc = 0
    for i in pool:
        row = rows[i]
        if not is_truncated(row):
            deciding.append(row)
            d_src.append(i)
            penalized.append(False)
            continue
        n_trunc += 1
        if truncated == "drop":
            continue
        if truncated == "keep":
            riders[keys[i]].append(({**row, "overlong": True}, i))
        else:
            copy = {
                **row,
                "overlong": True,
                "reward": 0.0,
                "reward_before_penalty": row.get("reward"),
            }
            deciding.append(copy)
            d_src.append(i)
            penalized.append(True)
    truncation = {
        "mode": truncated,
        "rows_truncated": n_trunc,
        "dropped": n_trunc if truncated == "drop" else 0,
        "kept_overlong": n_trunc if truncated == "keep" else 0,
        "penalized": n_trunc if truncated == "penalize" else 0,
    }

    # 6. The deciding rows must still mix after dedupe (trim_unanimous_groups, on the keys
    # and rewards read in step 1).
    src = np.asarray(d_src, dtype=np.intp)
    d_keys = [keys[i] for i in d_src]
    d_bin = judged[src]
    d_bin[np.asarray(penalized, dtype=bool) & np.isfinite(d_bin)] = 0.0  # a graded cut row fails
    keep_row, unanimous_report = unanimous_keep_mask(deciding, 2, keys=d_keys, binary=d_bin)
    surv = np.flatnonzero(keep_row).tolist()
    survivors = [deciding[j] for j in surv]
    s_src = [d_src[j] for j in surv]

    # 7. Rank asks and take whole groups.
    stats = group_stats(survivors, keys=[d_keys[j] for j in surv], binary=d_bin[surv])
    members: list[list[tuple[dict[str, Any], int]]] = [[] for _ in range(stats.n_groups)]
    kinds_rows: list[Counter[str]] = [Counter() for _ in range(stats.n_groups)]
    for row, i, g in zip(survivors, s_src, stats.inv.tolist(), strict=True):
        members[g].append((row, i))
        kinds_rows[g][fault_kind(rows[i])] += 1
    mixed = (stats.k >= 2) & (stats.n_pass > 0) & (stats.n_pass < stats.k)
    # Every ranking reads the stamped rate of the ask, not its rate among the survivors.
    rate_of = stamped[[arrival_index[k] for k in stats.keys]] if stats.n_groups else np.zeros(0)
    in_band = mixed & (rate_of >= lo - eps) & (rate_of <= hi + eps)
    singles = int((stats.k < 2).sum())
    ask_kind = [c.most_common(1)[0][0] if c else "no-fault" for c in kinds_rows]
    arrival_order = [int(g) for g in stats.arrival_order()]
    tiers = [[g for g in arrival_order if in_band[g]]]
    if not enforce_band:
        tiers.append([g for g in arrival_order if mixed[g] and not in_band[g]])
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
    chosen: list[int] = []
    counted = 0
    for g in sequence:
        if counted >= target:
            break
        chosen.append(g)
        counted += len(members[g])
    picked: list[tuple[dict[str, Any], int]] = []
    selected_kinds: Counter[str] = Counter()
    for g in chosen:
        selected_kinds[ask_kind[g]] += 1
        picked.extend(members[g])
        picked.extend(riders.get(stats.keys[g], ()))
    selected = [row for row, _ in picked]

    # 8. Calibration stamp from step 1, in place.
    n_carried = 0
    for row, i in picked:
        src_row = rows[i]
        g = int(ask_of[i])
        k = int(arrival.k[g])
        rate = float(arrival.pass_rate[g]) if k else None
        stamp = {
            "pass_rate": rate,
            "k": k,
            "n": k,  # row-v1's name for the rollouts the rate is over
            "n_pass": int(arrival.n_pass[g]),
            "band": [lo, hi],
            "in_band": None if rate is None else bool(lo - eps <= rate <= hi + eps),
            "band_enforced": enforce_band,
            "measured_on": measured_on,
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
                None if kept_rate is None else bool(lo - eps <= float(kept_rate) <= hi + eps)
            )
        if src_row is not row:
            row["calibration"] = src_row["calibration"]

    # 9. Report.
    sel_stats = group_stats(selected) if selected else None
    kway_after = _kway_available(sel_stats.k) if sel_stats is not None else False
    if kway_before and not kway_after:
        warnings.append(
            f"the k-way reliability numbers (pass^k, pass@k) were available on the rows as they "
            f"arrived (k >= {KWAY_MIN_K}) but do not survive the prune: report them from the "
            f"graded rows, not from this selection"
        )
    if audit:
        fn_rate = audit.get("fn_rate")
        fn_warn = float(audit.get("fn_warn", FN_WARN))
        if isinstance(fn_rate, int | float) and fn_rate > fn_warn:
            warnings.append(
                f"the verifier rejects right answers {fn_rate:.0%} of the time (audit fn_rate above "
                f"FN_WARN {fn_warn:.0%}): fix the verifier before training on this selection"
            )
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
    if counted < target:
        warnings.append(
            f"only {counted} rows in {len(chosen)} usable asks for target {target}: simulate more "
            f"asks or widen the band"
        )
    rates_sel = np.array([rate_of[g] for g in chosen], dtype=float)
    report = {
        "rows_in": len(rows),
        "asks_in": arrival.n_groups,
        "rows_out": len(selected),
        "rows_counted": counted,
        "asks_out": len(chosen),
        "target": target,
        "overshoot": max(0, counted - target),
        "shortfall": max(0, target - counted),
        "band": [lo, hi],
        "enforce_band": enforce_band,
        "order": order,
        "truncated": truncation,
        "has_tools": has_tools,
        "prior": prior_block,
        "gates": gate_report,
        "dedupe": dedupe_report,
        "unanimous": unanimous_report,
        "out_of_band": band_report,
        "asks_mixed_out_of_band_ranked_last": 0 if enforce_band else int((mixed & ~in_band).sum()),
        "asks_unmixable": singles,
        "fault_kinds": {
            k: {"available": available_kinds[k], "selected": selected_kinds.get(k, 0)}
            for k in sorted(available_kinds)
        },
        "pass_rates": {
            "min": float(rates_sel.min()) if rates_sel.size else None,
            "median": float(np.median(rates_sel)) if rates_sel.size else None,
            "max": float(rates_sel.max()) if rates_sel.size else None,
        },
        "group_signal": group_signal(selected, lo=lo, hi=hi),
        "calibration": {
            "measured_on": measured_on,
            "rows_stamped": len(selected),
            "n_carried": n_carried,
            "kway_before": kway_before,
            "kway_after": kway_after,
        },
        "hack_scan": scan,
        "correlations": correlations,
        "hygiene_warnings": warnings,
    }
    return selected, report


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
    junk = low = dups = 0
    seen: set[tuple[str, str, str]] = set()
    pool: list[tuple[int, dict[str, Any], str, str, float]] = []  # (index, row, ask, sig, reward)
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
    rng = np.random.default_rng(seed)
    picked: list[tuple[int, dict[str, Any], str, str, float]] = []
    if select in ("top_per_prompt", "random_per_prompt"):
        by_ask: dict[str, list[tuple[int, dict[str, Any], str, str, float]]] = defaultdict(list)
        for item in pool:
            by_ask[item[2]].append(item)
        if select == "top_per_prompt":
            used: Counter[str] = Counter()
            per_prompt = []
            for items in by_ask.values():
                best = max(it[4] for it in items)
                top = [it for it in items if it[4] == best]
                choice = min(top, key=lambda it: (used[it[3]], it[0]))
                used[choice[3]] += 1
                per_prompt.append(choice)
            by_sig: dict[str, list[tuple[int, dict[str, Any], str, str, float]]] = defaultdict(list)
            for it in per_prompt:
                by_sig[it[3]].append(it)
            # Round-robin: one of each signature (most common first, arrival within), then repeats.
            queues = sorted(by_sig.values(), key=lambda q: (-len(q), q[0][0]))
            depth = 0
            while len(picked) < min(quota, len(per_prompt)):
                for q in queues:
                    if depth < len(q) and len(picked) < quota:
                        picked.append(q[depth])
                depth += 1
        else:
            per_prompt = [items[int(rng.integers(len(items)))] for items in by_ask.values()]
            perm = rng.permutation(len(per_prompt))
            picked = [per_prompt[j] for j in perm[:quota]]
    elif select == "top_k_overall":
        picked = sorted(pool, key=lambda it: (-it[4], it[0]))[:quota]
    else:
        perm = rng.permutation(len(pool))
        picked = [pool[j] for j in perm[:quota]]
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
    if len(picked) < quota:
        report["note"] = f"{len(picked)} rows for target {quota}: " + (
            "one per prompt at most under this rule; use select='top_k_overall' for more"
            if select.endswith("per_prompt")
            else "not enough qualifying rows; lower min_reward or simulate more"
        )
    return [it[1] for it in picked], report
