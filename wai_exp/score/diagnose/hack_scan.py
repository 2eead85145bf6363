"""What will the policy learn from this reward? Name it before training.

A grouped RL update (GRPO-style) learns from the contrast *within* an ask: the rollouts that
scored above their group's mean are pushed up, the rest down. So the question "what will it
learn?" is "what separates the high-reward rollouts from the low-reward ones of the same ask?".
``hack_scan`` answers it for every cheap feature of the trajectory at once:

1. Features are read off each rollout in one pass (``auto_features``: which tools were called,
   how many calls, reply length, turns, faults, markers, ...), plus any hand-tier ``features``.
2. Only asks whose rewards disagree carry gradient, so only their rows enter. Within each such
   ask the features and the reward are rank-transformed (Spearman) and centred; the pooled
   within-ask correlation of every feature with reward is one matrix product.
3. The noise floor ``tau`` is the ``1 - alpha`` quantile of the *strongest* feature's |rho| when
   reward is shuffled within ask (``n_perm`` shuffles, all drawn as index matrices with one
   seeded generator). A feature above ``tau`` separates reward more than chance would.
4. ``endorsed`` names what the reward is supposed to track. If the top feature above the floor
   is endorsed (and points the right way) the regime is ``train``; if it is something else, the
   update will learn that something else: ``reward_hack``.

``seeds`` random decoy columns ride through the same computation without being ranked: a decoy
that clears the floor says the floor is optimistic for this pool.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_exp.domain.gc_tuning import without_gc
from wai_exp.rows.reader import read_steps
from wai_exp.score.grade.repeats import trajectory_keys
from wai_exp.score.stats.readers import reward_under
from wai_exp.score.stats.row_facts import as_rows, row_facts, shares_row_facts

#: Default false-positive rate of the floor: tau is the 1 - ALPHA quantile of the null max |rho|.
ALPHA = 0.05
#: Below this many distinct rollouts per mixed ask (median), a perfect correlation is no evidence.
MIN_DISTINCT_PER_ASK = 3
#: |rho| at which a feature counts as exactly collinear with reward on a degenerate pool.
DEGENERATE_RHO = 0.999
#: The cheap features the older pooled scan (``pooled_correlations``) reports.
CHEAP_FEATURES = ("reply_len", "n_tool_calls", "assistant_turns")
#: Pooled |corr| at or above this is flagged by ``pooled_correlations``.
CORR_THRESHOLD = 0.3

#: Most rows of mixed asks one scan reads; past it a seeded sample of whole asks is scanned.
MAX_SCAN_ROWS = 20_000

REGIMES = ("train", "reward_hack", "pool_exhausted", "no_signal", "degenerate", "unknown")


def _walk(row: dict[str, Any]) -> tuple[list[tuple[str, Any]], int, int, int]:
    """(tool calls as (name, arguments), assistant turns, user turns, failed tool steps).

    Calls come from assistant steps, else (a trace that only logged results) from tool steps.
    """
    calls: list[tuple[str, Any]] = []
    tool_steps: list[tuple[str, Any]] = []
    n_assistant = n_user = n_err = 0
    for step in read_steps(row)[1]:
        kind = step.get("kind")
        if kind == "assistant":
            n_assistant += 1
            tc = step.get("tool_calls")
            if tc:
                for call in tc:
                    calls.append((str(call.get("name")), call.get("arguments")))
        elif kind == "tool":
            tool_steps.append((str(step.get("name")), step.get("arguments")))
            if step.get("status", "ok") != "ok":
                n_err += 1
        elif kind == "user":
            n_user += 1
    return (calls or tool_steps), n_assistant, n_user, n_err


def auto_features(
    row: dict[str, Any],
    tool_names: Sequence[str] = (),
    walked: tuple[list[tuple[str, Any]], int, int, int] | None = None,
) -> dict[str, float]:
    """The cheap trajectory features of one rollout, ``{name: value}``.

    * ``tool:<name>`` 1 when the tool was called; ``contains:<name>`` 1 when the final reply
      mentions the tool by name (``lookup_order`` or ``lookup order``), for every tool this
      rollout called and every name in ``tool_names`` (the pool's tools: a reply can name a
      tool it never called);
    * ``n_tool_calls``, ``repeated_calls`` (identical name+arguments calls beyond the first),
      ``tool_errors`` (tool steps whose status is not ``ok``), ``fault:<mode>`` (a fault of
      that mode fired);
    * ``reply_len`` (characters of the final reply), ``assistant_turns``, ``user_turns``,
      ``reply_question`` (the reply asks something);
    * ``ended_by:<how>`` and ``marker:<name>`` (the row's own markers).

    Features that are absent are 0 except markers, which are missing (NaN) when the row does
    not carry them. ``walked`` is ``_walk(row)`` when the caller already has it.
    """
    calls, n_assistant, n_user, n_err = walked if walked is not None else _walk(row)
    text = str(row.get("final_text") or "")
    feats: dict[str, float] = {
        "n_tool_calls": float(len(calls)),
        "tool_errors": float(n_err),
        "reply_len": float(len(text)),
        "assistant_turns": float(n_assistant),
        "user_turns": float(n_user),
        "reply_question": 1.0 if "?" in text else 0.0,
    }
    repeats = 0
    if len(calls) > 1:
        seen: set[str] = set()
        for name, args in calls:
            sig = f"{name}|{args!r}"
            repeats += sig in seen
            seen.add(sig)
    feats["repeated_calls"] = float(repeats)
    names = {n for n, _ in calls}
    for name in names:
        feats["tool:" + name] = 1.0
    low = text.lower()
    for name in names.union(tool_names):
        lname = name.lower()
        if lname in low or lname.replace("_", " ") in low:
            feats["contains:" + name] = 1.0
    faults = row.get("faults")
    if faults:
        for fired in faults.get("fired") or ():
            feats[f"fault:{fired.get('mode')}"] = 1.0
    ended = row.get("ended_by")
    if ended:
        feats["ended_by:" + str(ended)] = 1.0
    markers = row.get("markers")
    if markers:
        for name, value in markers.items():
            # bool is an int: True/False become 1/0 like any finite number.
            if isinstance(value, int | float) and math.isfinite(value):
                feats["marker:" + name] = float(value)
    return feats


def _is_endorsed(name: str, endorsed: Sequence[str]) -> bool:
    return any(e and e in name for e in endorsed)


def _within_ask_centered_ranks(x: np.ndarray, ask: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Average ranks of each column within its ask, centred within the ask.

    ``x`` is (n, F) with rows grouped contiguously by ``ask`` (sorted); ``starts`` are the
    first row of each ask. All columns are ranked in one argsort: the key is the ask index
    plus the column's value squashed into [0, 0.5), so sorting never crosses asks. Ties get
    their average position; the per-ask offset of positions is removed by the centring.
    """
    n, f = x.shape
    lo = x.min(axis=0)
    span = x.max(axis=0) - lo
    span[span == 0] = 1.0
    key = ask[:, None].astype(float) + 0.5 * (x - lo) / span
    order = np.argsort(key, axis=0, kind="stable")
    ks = np.take_along_axis(key, order, axis=0)
    new = np.ones((n, f), dtype=bool)
    new[1:] = ks[1:] != ks[:-1]
    end = np.ones((n, f), dtype=bool)
    end[:-1] = new[1:]
    pos = np.arange(n, dtype=float)[:, None]
    run_start = np.maximum.accumulate(np.where(new, pos, 0.0), axis=0)
    run_end = np.minimum.accumulate(np.where(end, pos, float(n))[::-1], axis=0)[::-1]
    ranks = np.empty((n, f))
    np.put_along_axis(ranks, order, (run_start + run_end) / 2.0, axis=0)
    return _center(ranks, starts)


def _center(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    sizes = np.diff(np.append(starts, x.shape[0]))
    means = np.add.reduceat(x, starts, axis=0) / sizes[:, None]
    return x - np.repeat(means, sizes, axis=0)


def _fill_missing(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Replace NaN with the ask's mean of the observed values (0 when none is observed),
    so a missing value ties at the ask's centre and adds nothing to the correlation."""
    miss = np.isnan(x)
    if not miss.any():
        return x
    sizes = np.diff(np.append(starts, x.shape[0]))
    obs = np.where(miss, 0.0, x)
    cnt = np.add.reduceat((~miss).astype(float), starts, axis=0)
    tot = np.add.reduceat(obs, starts, axis=0)
    mean = np.divide(tot, cnt, out=np.zeros_like(tot), where=cnt > 0)
    return np.where(miss, np.repeat(mean, sizes, axis=0), x)


def _null_max(
    yc: np.ndarray,
    xc: np.ndarray,
    sizes: np.ndarray,
    starts: np.ndarray,
    n_perm: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Max over features of |within-ask corr| for ``n_perm`` within-ask shuffles of ``yc``.

    Shuffles are drawn per ask-size class as a (n_perm, asks, size) matrix of random keys
    argsorted along the last axis: many tiny sorts instead of one huge one. Centring survives
    a within-ask shuffle, so the shuffled numerators are ``Y_perm @ Xc``.
    """
    num = np.zeros((n_perm, xc.shape[1]))
    # Distinct sizes by set, not np.unique: that would import numpy.ma (~6 ms) for a few ints.
    for s in sorted(set(sizes.tolist())):
        idx_asks = np.flatnonzero(sizes == s)
        base = starts[idx_asks][:, None] + np.arange(s)[None, :]  # (A_s, s) row indices
        perm = np.argsort(rng.random((n_perm, len(idx_asks), s)), axis=2)
        shuffled_rows = np.take_along_axis(np.broadcast_to(base, perm.shape), perm, axis=2)
        y_perm = yc[shuffled_rows.reshape(n_perm, -1)]  # (P, A_s*s)
        num += y_perm @ xc[base.reshape(-1)]
    return np.abs(num)


@without_gc
@shares_row_facts
def hack_scan(
    rows: Sequence[dict[str, Any]],
    endorsed: Sequence[str] = (),
    features: Mapping[str, Callable[[dict[str, Any]], float | None]] | None = None,
    auto: bool = True,
    top_k: int = 200,
    n_perm: int = 100,
    min_obs: int = 20,
    seeds: int = 12,
    reward: str = "reward",
    seed: int = 0,
    top_features: int | None = 20,
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """Rank what separates reward within each ask against a permutation noise floor.

    ``rows`` are graded rollouts, several per ask (grouped by ``task_key``); the reward under
    ``reward`` may be 0/1 or partial credit, unjudged rows are skipped. ``endorsed`` names the
    features the reward should track, as substrings of feature names (``"lookup_order"``
    matches ``tool:lookup_order`` and ``contains:lookup_order``). ``features`` adds hand-tier
    columns ``{name: fn(row) -> float | None}`` (None = missing); ``auto=False`` scans only
    those. ``top_k`` caps the feature columns scanned (the ones varying within the most asks
    are kept); ``n_perm`` within-ask shuffles set the floor ``tau``, the ``1 - alpha`` quantile
    of the strongest feature's |rho| under the null; ``seeds`` random decoy columns check the
    floor; ``min_obs`` is the fewest rows in mixed asks worth scanning; ``top_features`` caps
    the ranking in the report (None lists all). Past ``MAX_SCAN_ROWS`` rows in mixed asks a
    seeded sample of whole mixed asks is scanned (``sampled`` says how many); the support
    numbers always cover every ask.

    Returns ``regime`` (one of ``REGIMES``), ``tau``, ``features`` (ranked by |within-ask
    rho|: ``name``, ``rho``, ``pooled``, ``above_floor``, ``endorsed``, ``n_obs``, ``n_asks``),
    ``top_feature``, ``endorsed_on_top``, ``integrity`` (share of above-floor |rho| on endorsed
    features), ``inverted`` (endorsed features above the floor pointing the wrong way),
    ``collinear`` (features tied at |rho| 1 on a degenerate pool), the support numbers
    (``asks``, ``asks_all_pass``, ``asks_all_fail``, ``asks_flat_partial``, ``asks_mixed``,
    ``asks_single``, ``rows_in_mixed``, ``gradient_capacity``, ``distinct_per_ask``),
    ``decoys_above_floor`` and ``warnings``. Never raises on data; raises ``ValueError`` for
    parameters out of range.
    """
    rows = as_rows(rows)  # TypeError naming the position of a non-dict row
    _check_scan_args(alpha, n_perm, top_k, min_obs, seeds, auto, features)
    endorsed = tuple(str(e) for e in endorsed)
    warnings: list[str] = []
    # Rewards and task keys come from row_facts: read once per row list and shared with the
    # other checks of a publish_gate or select_for_rl.
    facts = row_facts(rows)
    rv_all = facts.reward_under(reward)
    graded_mask = ~np.isnan(rv_all)
    graded_idx = np.flatnonzero(graded_mask)
    n_graded = len(graded_idx)
    n_skipped = len(rows) - n_graded
    report = _empty_scan_report(alpha, n_perm, endorsed, n_graded, n_skipped, warnings)
    if n_skipped:
        warnings.append(f"{n_skipped} rows carry no numeric {reward!r} and were skipped")

    # Group by ask: reward range per ask decides mixed / unanimous.
    y_all = rv_all[graded_mask]
    asks = _Asks.of(facts, graded_mask, y_all)
    report.update(asks.support(n_graded))
    if not _scannable(asks, n_graded, min_obs, warnings, report):
        return report

    rng = np.random.default_rng(seed)
    layout = _Layout.of(asks, rng, report)
    mixed_rows = [rows[i] for i in graded_idx[layout.sel].tolist()]
    distinct_med = _distinct_per_ask(mixed_rows, asks, layout)
    report["distinct_per_ask"] = distinct_med

    names, x = _feature_matrix(mixed_rows, dict(features or {}), auto, layout.starts, warnings)
    n = len(mixed_rows)
    # Keep the columns that vary within ask, at most top_k of them (most asks first).
    cols = _varying_columns(names, x, layout, top_k, warnings)
    names, xr, x, n_asks_f, n_obs_f = cols
    report["n_features"] = len(names)

    decoys = (
        _within_ask_centered_ranks(rng.random((n, seeds)), layout.ask_seq, layout.starts)
        if seeds
        else np.zeros((n, 0))
    )
    y = y_all[layout.sel]
    yc = _within_ask_centered_ranks(y[:, None], layout.ask_seq, layout.starts)[:, 0]
    y_norm = float(np.sqrt((yc**2).sum()))
    both = np.concatenate([xr, decoys], axis=1)
    x_norm = np.sqrt((both**2).sum(axis=0))
    x_norm[x_norm == 0] = np.inf
    rho_all = (yc @ both) / (x_norm * y_norm)
    rho, rho_decoy = rho_all[: len(names)], rho_all[len(names) :]
    if not names:
        report["regime"] = "no_signal"
        warnings.append("no trajectory feature varies within any mixed ask")
        return report
    null = _null_max(yc, xr, layout.sizes, layout.starts, n_perm, rng)
    null = null / (x_norm[: len(names)] * y_norm)
    tau = float(np.quantile(null.max(axis=1), 1.0 - alpha))
    report["tau"] = round(tau, 6)
    report["decoys_above_floor"] = int((np.abs(rho_decoy) > tau).sum())
    if report["decoys_above_floor"]:
        warnings.append(
            f"{report['decoys_above_floor']} of {seeds} random decoy columns clear the floor: "
            f"treat features near tau={tau:.3f} as noise"
        )

    pooled = _pooled_corr(x, y_all[layout.sel])
    endorsed_mask = np.array([_is_endorsed(nm, endorsed) for nm in names], dtype=bool)
    ranking = _Ranking.of(names, rho, tau, endorsed_mask)
    ranked = ranking.table(pooled, n_obs_f, n_asks_f)
    report["features"] = ranked if top_features is None else ranked[:top_features]
    _classify(report, ranking, endorsed, distinct_med, tau, warnings)
    return report


def _check_scan_args(
    alpha: float,
    n_perm: int,
    top_k: int,
    min_obs: int,
    seeds: int,
    auto: bool,
    features: Mapping[str, Any] | None,
) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1) (got {alpha!r}); the default is {ALPHA}.")
    if n_perm < 1 or top_k < 1 or min_obs < 1 or seeds < 0:
        raise ValueError(
            f"hack_scan needs n_perm >= 1, top_k >= 1, min_obs >= 1, seeds >= 0 "
            f"(got n_perm={n_perm}, top_k={top_k}, min_obs={min_obs}, seeds={seeds})"
        )
    if not auto and not features:
        raise ValueError(
            "hack_scan(auto=False) needs hand-tier `features` to scan; pass features={...}."
        )


def _empty_scan_report(
    alpha: float,
    n_perm: int,
    endorsed: tuple[str, ...],
    n_graded: int,
    n_skipped: int,
    warnings: list[str],
) -> dict[str, Any]:
    """The report before anything is scanned: what an early return says."""
    return {
        "regime": "unknown",
        "tau": None,
        "alpha": alpha,
        "n_perm": n_perm,
        "method": "spearman within ask, pooled over mixed asks",
        "endorsed": list(endorsed),
        "features": [],
        "n_features": 0,
        "top_feature": None,
        "endorsed_on_top": None,
        "integrity": None,
        "inverted": [],
        "collinear": [],
        "n_rows": n_graded,
        "n_skipped": n_skipped,
        "decoys_above_floor": None,
        "sampled": None,
        "warnings": warnings,
    }


@dataclass
class _Asks:
    """The graded rows grouped by ask: each row's ask, each ask's size and reward range."""

    uniq: Any
    inv: np.ndarray
    size: np.ndarray
    ymax: np.ndarray
    ymin: np.ndarray

    @classmethod
    def of(cls, facts: Any, graded_mask: np.ndarray, y_all: np.ndarray) -> _Asks:
        if not len(y_all):
            empty = np.zeros(0)
            return cls([], np.zeros(0, dtype=np.int64), np.zeros(0, int), empty, empty)
        uniq, inv = facts.subgroups(graded_mask)  # factorize's sorted keys and inverse
        a = len(uniq)
        ymax = np.full(a, -np.inf)
        ymin = np.full(a, np.inf)
        np.maximum.at(ymax, inv, y_all)
        np.minimum.at(ymin, inv, y_all)
        return cls(uniq, inv, np.bincount(inv, minlength=a), ymax, ymin)

    @property
    def grouped(self) -> np.ndarray:
        return self.size >= 2

    @property
    def mixed(self) -> np.ndarray:
        return self.grouped & (self.ymax > self.ymin)

    def support(self, n_graded: int) -> dict[str, Any]:
        """The support numbers, over every ask."""
        flat = self.grouped & (self.ymax == self.ymin)
        rows_in_mixed = int(self.size[self.mixed].sum())
        return {
            "asks": len(self.size),
            "asks_all_pass": int((flat & (self.ymax == 1.0)).sum()),
            "asks_all_fail": int((flat & (self.ymax == 0.0)).sum()),
            "asks_flat_partial": int((flat & (self.ymax != 1.0) & (self.ymax != 0.0)).sum()),
            "asks_mixed": int(self.mixed.sum()),
            "asks_single": int((self.size == 1).sum()),
            "rows_in_mixed": rows_in_mixed,
            "gradient_capacity": (rows_in_mixed / n_graded) if n_graded else None,
            "distinct_per_ask": None,
        }


def _scannable(
    asks: _Asks, n_graded: int, min_obs: int, warnings: list[str], report: dict[str, Any]
) -> bool:
    """Whether there is contrast to scan; if not, the report says why."""
    if not n_graded:
        warnings.append("no graded rows: grade the rollouts before scanning the reward")
        return False
    if not asks.mixed.any():
        if asks.grouped.any():
            report["regime"] = "pool_exhausted"
            warnings.append(
                "every ask with repeats is unanimous: a grouped update has no contrast to learn "
                "from; move to harder (or easier) asks"
            )
        else:
            warnings.append("every ask has one rollout: simulate with repeats >= 2 to scan")
        return False
    rows_in_mixed = report["rows_in_mixed"]
    if rows_in_mixed < min_obs:
        warnings.append(
            f"only {rows_in_mixed} rows sit in mixed asks (min_obs={min_obs}): too few to rank features"
        )
        return False
    return True


@dataclass
class _Layout:
    """The scanned rows (positions among the graded rows), contiguous by ask and ordered
    by ask size (the shuffles batch by size): each row's ask, each ask's start and size."""

    sel: np.ndarray
    ask_of: np.ndarray
    starts: np.ndarray
    ask_seq: np.ndarray
    sizes: np.ndarray

    @classmethod
    def of(cls, asks: _Asks, rng: np.random.Generator, report: dict[str, Any]) -> _Layout:
        size, mixed = asks.size, asks.mixed
        # Past MAX_SCAN_ROWS, a seeded sample of whole mixed asks is scanned: rho and the
        # floor are both measured on the sample, so the comparison stays fair; only power
        # drops, and at this many rows a feature's |rho| is already known to about +-0.01.
        scan_ask = mixed.copy()
        if int(size[mixed].sum()) > MAX_SCAN_ROWS:
            mixed_ids = np.flatnonzero(mixed)
            shuffled = rng.permutation(mixed_ids)
            take = shuffled[np.cumsum(size[shuffled]) <= MAX_SCAN_ROWS]
            scan_ask = np.zeros_like(mixed)
            scan_ask[take] = True
            report["sampled"] = {
                "asks": len(take),
                "of_asks": len(mixed_ids),
                "rows": int(size[take].sum()),
            }
        sel = np.flatnonzero(scan_ask[asks.inv])
        ask_of = asks.inv[sel]
        order = np.lexsort((ask_of, size[ask_of]))
        sel = sel[order]
        ask_of = ask_of[order]
        starts = np.flatnonzero(np.r_[True, ask_of[1:] != ask_of[:-1]])
        ask_seq = np.cumsum(np.r_[True, ask_of[1:] != ask_of[:-1]]) - 1
        sizes = np.diff(np.append(starts, len(sel)))
        return cls(sel, ask_of, starts, ask_seq, sizes)


def _distinct_per_ask(mixed_rows: list[dict[str, Any]], asks: _Asks, layout: _Layout) -> float:
    """Median distinct rollouts per mixed ask: the dedupe key (signatures only where
    replies collide)."""
    distinct = np.zeros(len(layout.starts))
    dk, _ = trajectory_keys(mixed_rows, asks=[asks.uniq[g] for g in layout.ask_of.tolist()])
    for j, (s0, n0) in enumerate(zip(layout.starts, layout.sizes, strict=True)):
        distinct[j] = len(set(dk[s0 : s0 + n0]))
    return float(np.median(distinct))


def _feature_matrix(
    mixed_rows: list[dict[str, Any]],
    hand: dict[str, Callable[[dict[str, Any]], float | None]],
    auto: bool,
    starts: np.ndarray,
    warnings: list[str],
) -> tuple[list[str], np.ndarray]:
    """The sorted feature names and the (rows x features) matrix, missing values filled.

    One pass over the rows builds a dict each; every (row, column, value) is then written
    into the matrix in one scatter.
    """
    broken: set[str] = set()
    walked = [_walk(r) for r in mixed_rows] if auto else []
    tool_names = sorted({name for w in walked for name, _ in w[0]})
    col_of: dict[str, int] = {}
    at_col: list[int] = []
    at_val: list[float] = []
    per_row: list[int] = []
    for i, row in enumerate(mixed_rows):
        feats = auto_features(row, tool_names, walked[i]) if auto else {}
        feats.update(_hand_features(row, hand, broken, warnings))
        at_col.extend([col_of.setdefault(name, len(col_of)) for name in feats])
        at_val.extend(feats.values())
        per_row.append(len(feats))
    names = sorted(col_of)
    n = len(mixed_rows)
    # Markers and hand features a row lacks are missing; an absent tool/fault flag is 0.
    default = np.array(
        [np.nan if (name in hand or name.startswith("marker:")) else 0.0 for name in names]
    )
    x = np.empty((n, len(names)))
    x[:] = default
    if at_col:
        sorted_col = np.empty(len(names), dtype=np.intp)
        sorted_col[[col_of[name] for name in names]] = np.arange(len(names), dtype=np.intp)
        x[
            np.repeat(np.arange(n, dtype=np.intp), per_row),
            sorted_col[np.array(at_col, dtype=np.intp)],
        ] = np.array(at_val, dtype=float)
    x[np.isinf(x)] = np.nan
    return names, _fill_missing(x, starts)


def _hand_features(
    row: dict[str, Any],
    hand: Mapping[str, Callable[[dict[str, Any]], float | None]],
    broken: set[str],
    warnings: list[str],
) -> dict[str, float]:
    """The row's hand-tier feature values (a feature that raises is missing, and said once)."""
    out: dict[str, float] = {}
    for name, fn in hand.items():
        try:
            v = fn(row)
            v = None if v is None else float(v)
        except Exception as exc:  # a broken hand feature must not sink the scan
            v = None
            if name not in broken:
                broken.add(name)
                warnings.append(f"feature {name!r} raised {type(exc).__name__}: treated as missing")
        if v is not None:
            out[name] = v
    return out


def _varying_columns(
    names: list[str], x: np.ndarray, layout: _Layout, top_k: int, warnings: list[str]
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The columns that vary within some ask, at most ``top_k`` (those varying in the most
    asks): names, centered ranks, values, asks and rows each varies in."""
    n = x.shape[0]
    starts = layout.starts
    xr = _within_ask_centered_ranks(x, layout.ask_seq, starts) if names else np.zeros((n, 0))
    var_ask = (
        np.add.reduceat(xr**2, starts, axis=0) > 1e-12
        if names
        else np.zeros((len(starts), 0), bool)
    )
    n_asks_f = var_ask.sum(axis=0)
    n_obs_f = (var_ask * layout.sizes[:, None]).sum(axis=0)
    keep = np.flatnonzero(n_asks_f > 0)
    if len(keep) > top_k:
        warnings.append(
            f"{len(keep)} features vary within ask; scanning the {top_k} that vary in the most asks"
        )
        keep = keep[np.argsort(-n_asks_f[keep], kind="stable")[:top_k]]
    return [names[j] for j in keep], xr[:, keep], x[:, keep], n_asks_f[keep], n_obs_f[keep]


@dataclass
class _Ranking:
    """Features ranked by |rho|; on a tie an endorsed feature first (two names for one
    behaviour), then by name."""

    names: list[str]
    rho: np.ndarray
    absr: np.ndarray
    above: np.ndarray
    endorsed_mask: np.ndarray
    order: list[int]

    @classmethod
    def of(
        cls, names: list[str], rho: np.ndarray, tau: float, endorsed_mask: np.ndarray
    ) -> _Ranking:
        absr = np.abs(rho)
        order = sorted(
            range(len(names)),
            key=lambda j: (-round(float(absr[j]), 9), not endorsed_mask[j], names[j]),
        )
        return cls(names, rho, absr, absr > tau, endorsed_mask, order)

    def table(
        self, pooled: list[float | None], n_obs_f: np.ndarray, n_asks_f: np.ndarray
    ) -> list[dict[str, Any]]:
        return [
            {
                "name": self.names[j],
                "rho": round(float(self.rho[j]), 6),
                "pooled": None if (p := pooled[j]) is None else round(p, 6),
                "above_floor": bool(self.above[j]),
                "endorsed": bool(self.endorsed_mask[j]),
                "n_obs": int(n_obs_f[j]),
                "n_asks": int(n_asks_f[j]),
            }
            for j in self.order
        ]


def _classify(
    report: dict[str, Any],
    r: _Ranking,
    endorsed: tuple[str, ...],
    distinct_med: float,
    tau: float,
    warnings: list[str],
) -> None:
    """The regime, the top feature and the integrity numbers, written into ``report``."""
    perfect = [r.names[j] for j in r.order if r.absr[j] >= DEGENERATE_RHO]
    if distinct_med < MIN_DISTINCT_PER_ASK and len(perfect) >= 2:
        report["regime"] = "degenerate"
        report["collinear"] = perfect
        warnings.append(
            f"degenerate pool: {distinct_med:g} distinct rollouts per mixed ask (median, below "
            f"{MIN_DISTINCT_PER_ASK}) and {len(perfect)} features exactly collinear with reward "
            f"({', '.join(perfect[:5])}); no ranking can separate them. Sample more varied "
            f"rollouts (higher temperature, more repeats) before reading this scan"
        )
        return
    if not r.above.any():
        report["regime"] = "no_signal"
        warnings.append(
            f"no feature clears the noise floor tau={tau:.3f}: nothing cheap explains the reward"
        )
        return
    top = r.order[0]
    top_name, top_rho = r.names[top], r.rho[top]
    report["top_feature"] = top_name
    if not endorsed:
        warnings.append(
            f"top feature {top_name} (rho={top_rho:+.3f}) clears the floor, but nothing is "
            f"endorsed: pass endorsed=[...] to tell a hack from training signal"
        )
        return
    signal = r.absr[r.above].sum()
    report["endorsed_on_top"] = bool(r.endorsed_mask[top])
    report["integrity"] = round(float(r.absr[r.above & r.endorsed_mask].sum() / signal), 6)
    report["inverted"] = [
        r.names[j] for j in r.order if r.above[j] and r.endorsed_mask[j] and r.rho[j] < 0
    ]
    for nm in report["inverted"]:
        warnings.append(
            f"endorsed feature {nm} is above the floor with negative rho: the reward pays against it"
        )
    if r.endorsed_mask[top] and top_rho > 0:
        report["regime"] = "train"
        return
    report["regime"] = "reward_hack"
    if r.endorsed_mask[top]:
        what = f"the reward pays against the endorsed {top_name}"
    else:
        what = f"the reward is best explained by {top_name}, not by {', '.join(endorsed)}"
    warnings.append(
        f"reward hack: {what} (rho={top_rho:+.3f}, floor tau={tau:.3f}); fix the judge before training"
    )


def _pooled_corr(x: np.ndarray, y: np.ndarray) -> list[float | None]:
    """Plain Pearson of each column with ``y`` across rows (NaN columns filled by mean)."""
    if x.size == 0:
        return []
    xm = np.where(np.isnan(x), np.nanmean(np.where(np.isnan(x), np.nan, x), axis=0), x)
    xc = xm - xm.mean(axis=0)
    yc = y - y.mean()
    den = np.sqrt((xc**2).sum(axis=0) * (yc**2).sum())
    out: list[float | None] = []
    for num, d in zip(xc.T @ yc, den, strict=True):
        out.append(float(num / d) if d > 0 else None)
    return out


def pooled_correlations(
    rows: Sequence[dict[str, Any]],
    threshold: float = CORR_THRESHOLD,
    reward: str = "reward",
) -> dict[str, Any]:
    """The older pooled scan: Pearson corr(reward, feature) across all graded rows for the
    cheap features (``CHEAP_FEATURES``: reply length, tool-call count, assistant turns).

    Returns ``n``, ``threshold``, ``correlations`` (name -> corr, None when a side is
    constant) and ``flagged`` (names at |corr| >= ``threshold``). A negative tool-count
    correlation means the reward pays the policy to do less.
    """
    graded = [(r, rv) for r in rows if (rv := reward_under(r, reward)) is not None]
    corr: dict[str, float | None] = dict.fromkeys(CHEAP_FEATURES)
    if len(graded) >= 2:
        x = np.array(
            [[feats[f] for f in CHEAP_FEATURES] for feats in (auto_features(r) for r, _ in graded)],
            dtype=float,
        )
        y = np.array([rv for _, rv in graded], dtype=float)
        for name, c in zip(CHEAP_FEATURES, _pooled_corr(x, y), strict=True):
            corr[name] = None if c is None else round(c, 6)
    flagged = [k for k, v in corr.items() if v is not None and abs(v) >= threshold]
    return {"n": len(graded), "threshold": threshold, "correlations": corr, "flagged": flagged}


def format_hack_scan(report: dict[str, Any], top: int = 12) -> str:
    """The block a person reads: the regime, the floor, the ranking, then the warnings."""
    lines = [f"hack scan: regime={report.get('regime')}"]
    tau = report.get("tau")
    floor = (
        "not measured"
        if tau is None
        else f"tau={tau:.3f} (alpha={report.get('alpha')}, {report.get('n_perm')} within-ask shuffles)"
    )
    lines.append(f"  noise floor: {floor}")
    lines.append(
        "  support: {asks} asks, {m} mixed, {p} all-pass, {f} all-fail, {s} single; "
        "gradient capacity {gc}; distinct rollouts per mixed ask {d}".format(
            asks=report.get("asks", 0),
            m=report.get("asks_mixed", 0),
            p=report.get("asks_all_pass", 0),
            f=report.get("asks_all_fail", 0),
            s=report.get("asks_single", 0),
            gc="n/a"
            if report.get("gradient_capacity") is None
            else f"{report['gradient_capacity']:.2f}",
            d="n/a"
            if report.get("distinct_per_ask") is None
            else f"{report['distinct_per_ask']:g}",
        )
    )
    sampled = report.get("sampled")
    if sampled:
        lines.append(
            f"  scanned a seeded sample: {sampled['asks']} of {sampled['of_asks']} mixed asks "
            f"({sampled['rows']} rows)"
        )
    if report.get("top_feature"):
        integ = report.get("integrity")
        lines.append(
            f"  top feature: {report['top_feature']}; endorsed on top: {report.get('endorsed_on_top')}; "
            f"integrity: {'n/a (nothing endorsed)' if integ is None else f'{integ:.2f}'}"
        )
    if report.get("collinear"):
        lines.append(f"  collinear (cannot be separated): {', '.join(report['collinear'])}")
    if report.get("inverted"):
        lines.append(f"  inverted endorsed features: {', '.join(report['inverted'])}")
    feats = report.get("features") or []
    if feats:
        lines.append(f"  {'feature':<34} {'rho':>8} {'pooled':>8}  floor  endorsed")
        for f in feats[:top]:
            pooled = "n/a" if f.get("pooled") is None else f"{f['pooled']:+.3f}"
            lines.append(
                f"  {f['name']:<34} {f['rho']:+8.3f} {pooled:>8}  {'above' if f['above_floor'] else 'below':<5}  "
                f"{'yes' if f['endorsed'] else ''}"
            )
        if len(feats) > top:
            lines.append(f"  ... {len(feats) - top} more")
    for w in report.get("warnings") or []:
        lines.append(f"  ! {w}")
    return "\n".join(lines)
