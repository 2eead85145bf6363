"""Does the judge agree with labels you trust?

``judge_agreement(rows)`` compares each row's judge ``reward`` with a trusted label: a key
on the same rows (``gold_reward``, filled by hand-labelling a sample) or a second list of
scored rows (another judge pass, which is *model* gold). Only exact 0/1 on both sides
count; partial scores and unjudged rows are skipped and counted, never guessed.

The number that matters most is ``pass_when_gold_fail``: the gold failures the judge
passed, which a training run would learn as successes. Intervals: Wilson for the rates,
a seeded multinomial bootstrap over the four confusion cells for kappa.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.score.stats.resample import wilson_ci

#: Fewer compared rows than this and the report says the sample is below the floor.
GOLD_FLOOR = 50
#: Bootstrap draws for kappa's interval (multinomial over the 4 cells: cheap).
KAPPA_RESAMPLES = 2000
#: Seed of kappa's bootstrap, so the same labels always give the same interval.
KAPPA_SEED = 0
#: ``gold_kind`` / ``label_source`` values that mean a person labelled the row.
HUMAN_KINDS = frozenset({"human", "person", "annotator", "expert", "hand"})
#: Values that mean a model produced the label.
MODEL_KINDS = frozenset({"model", "judge", "llm", "ai"})


def binary_label(value: Any) -> int | None:
    """1 or 0 for an exact binary label (``True``/``False`` included), else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and (value == 0 or value == 1):
        return int(value)
    return None


def _kind_of(row: Mapping[str, Any]) -> str:
    for key in ("gold_kind", "label_source"):
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            low = value.strip().lower()
            if low in HUMAN_KINDS:
                return "human"
            if low in MODEL_KINDS:
                return "model"
    return "unknown"


def _match_keys(row: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    keys: list[tuple[Any, ...]] = []
    if row.get("rollout_id"):
        keys.append(("rollout_id", row["rollout_id"]))
    if row.get("scenario_id") is not None and row.get("rollout_index") is not None:
        keys.append(("scenario", row["scenario_id"], row["rollout_index"]))
    if row.get("prompt") is not None:
        keys.append(("text", row.get("prompt"), row.get("final_text") or ""))
    return keys


def cohen_kappa(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Cohen's kappa from confusion counts (judge x gold), elementwise; NaN when the
    chance agreement is 1 (both sides constant)."""
    n = a + b + c + d
    with np.errstate(divide="ignore", invalid="ignore"):
        po = (a + d) / n
        pj = (a + b) / n
        pg = (a + c) / n
        pe = pj * pg + (1 - pj) * (1 - pg)
        return np.where(np.isclose(pe, 1.0), np.nan, (po - pe) / (1 - pe))


def kappa_interval(a: int, b: int, c: int, d: int) -> list[float] | None:
    """95% interval of Cohen's kappa from the four confusion cells: a seeded multinomial
    bootstrap (``KAPPA_RESAMPLES`` draws, ``KAPPA_SEED``) over the cells, 2.5/97.5%
    quantiles of the defined resampled kappas. ``None`` when no draw has a defined kappa;
    raises ``ValueError`` when the cells sum to 0 (nothing to resample)."""
    n = a + b + c + d
    if n <= 0:
        raise ValueError(f"kappa_interval needs at least one compared row; got cells {a, b, c, d}")
    rng = np.random.default_rng(KAPPA_SEED)
    cells = rng.multinomial(n, np.array([a, b, c, d], dtype=float) / n, size=KAPPA_RESAMPLES)
    ks = cohen_kappa(cells[:, 0], cells[:, 1], cells[:, 2], cells[:, 3])
    ks = ks[~np.isnan(ks)]
    if not ks.size:
        return None
    return [float(np.quantile(ks, 0.025)), float(np.quantile(ks, 0.975))]


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def _pairs_on_key(
    rows: list[dict], gold: str, reward: str
) -> tuple[list[tuple[int, int]], Counter[str], Counter[str]]:
    """(judge, gold) label pairs with the gold label under ``gold`` on the same rows; the
    gold kinds and why the other rows were skipped."""
    skipped: Counter[str] = Counter()
    pairs: list[tuple[int, int]] = []
    kinds: Counter[str] = Counter()
    for row in rows:
        if gold not in row or row.get(gold) is None:
            skipped["no_gold"] += 1
            continue
        g = binary_label(row.get(gold))
        if g is None:
            skipped["gold_not_binary"] += 1
            continue
        j = binary_label(row.get(reward))
        if j is None:
            skipped["reward_not_binary" if row.get(reward) is not None else "unjudged"] += 1
            continue
        pairs.append((j, g))
        kinds[_kind_of(row)] += 1
    return pairs, kinds, skipped


def _pairs_across(
    rows: list[dict], gold: Sequence[Any], reward: str
) -> tuple[list[tuple[int, int]], Counter[str], Counter[str]]:
    """(judge, gold) label pairs with the gold label the matching row of another scoring
    pass carries (model gold); the kinds and why the other rows were skipped."""
    skipped: Counter[str] = Counter()
    pairs: list[tuple[int, int]] = []
    kinds: Counter[str] = Counter()
    index: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    for grow in gold:
        if not isinstance(grow, Mapping):
            raise TypeError("gold as a list must hold row dicts from another scoring pass")
        for key in _match_keys(grow):
            index.setdefault(key, grow)
    for row in rows:
        match = next((index[k] for k in _match_keys(row) if k in index), None)
        if match is None:
            skipped["unmatched"] += 1
            continue
        g = binary_label(match.get(reward))
        if g is None:
            skipped["gold_not_binary" if match.get(reward) is not None else "gold_unjudged"] += 1
            continue
        j = binary_label(row.get(reward))
        if j is None:
            skipped["reward_not_binary" if row.get(reward) is not None else "unjudged"] += 1
            continue
        pairs.append((j, g))
        kinds["model"] += 1
    return pairs, kinds, skipped


def _kappa(
    a: int, b: int, c: int, d: int, warnings: list[str]
) -> tuple[float | None, list[float] | None]:
    """Cohen's kappa and its interval over the 2x2 counts (None when undefined)."""
    if not a + b + c + d:
        return None, None
    k = float(cohen_kappa(np.array([a]), np.array([b]), np.array([c]), np.array([d]))[0])
    if math.isnan(k):
        warnings.append(
            "kappa is undefined: the judge and the gold label are each constant on these "
            "rows, so there is no chance-corrected agreement to measure"
        )
        return None, None
    return k, kappa_interval(a, b, c, d)


def _provenance_warnings(gold_kind: str, kinds: Counter[str]) -> list[str]:
    """Why gold labels nobody can say a person gave do not measure the judge."""
    out: list[str] = []
    if gold_kind == "model" or kinds.get("model"):
        out.append(
            "the gold labels come from a model (a second judge pass), not a person: this "
            "measures the judge against another judge; pass allow_model_gold=True to accept it"
        )
    if kinds.get("unknown"):
        one = kinds["unknown"] == 1
        out.append(
            f"{counted(kinds['unknown'], 'gold label')} {'has' if one else 'have'} no gold_kind "
            f"record, so nobody can say a person gave {'it' if one else 'them'}; set "
            "gold_kind='human' when attaching hand labels"
        )
    return out


def judge_agreement(
    rows: Sequence[dict],
    gold: str | Sequence[dict] = "gold_reward",
    reward: str = "reward",
    allow_model_gold: bool = False,
) -> dict[str, Any]:
    """Agreement between the judge's ``reward`` and a trusted label.

    ``gold`` is a key on the same rows (default ``gold_reward``; its provenance is read
    from ``gold_kind`` or ``label_source``: human / model / unknown) or a second row list
    from another scoring pass (model gold), matched by ``rollout_id``, then
    ``scenario_id`` + ``rollout_index``, then ``prompt`` + ``final_text``; its label is
    that row's ``reward`` key. A ``ScoredData`` is accepted for either list.

    Returns ``n`` (rows compared), ``agreement`` and ``agreement_ci95`` (Wilson),
    ``kappa`` and ``kappa_ci95`` (Cohen; None when either side is constant), ``confusion``
    (``judge_pass_gold_pass``, ``judge_pass_gold_fail``, ``judge_fail_gold_pass``,
    ``judge_fail_gold_fail``), ``pass_when_gold_fail`` (+ ``_ci95``; None without gold
    failures), ``fail_when_gold_pass`` (+ ``_ci95``), ``judge_pass_rate``,
    ``gold_pass_rate``, ``gold_kind`` (``human``, ``model``, ``unknown``, or ``mixed``),
    ``gold_kinds`` (counts), ``skipped`` (why rows did not count), ``ok`` (rows were
    compared and the labels are a person's, or ``allow_model_gold``) and ``warnings``.
    Raises ``TypeError`` when ``gold`` is neither a key nor a list of rows.
    """
    if not isinstance(gold, str | Sequence) and isinstance(getattr(gold, "rows", None), list):
        gold = gold.rows  # a ScoredData from another scoring pass
    rows = list(rows)
    if isinstance(gold, str):
        pairs, kinds, skipped = _pairs_on_key(rows, gold, reward)
        gold_source = f"key {gold!r}"
    elif isinstance(gold, Sequence) and not isinstance(gold, bytes):
        pairs, kinds, skipped = _pairs_across(rows, gold, reward)
        gold_source = "a second scoring pass"
    else:
        raise TypeError(
            f"gold must be a row key (e.g. 'gold_reward') or a list of scored rows, got {type(gold).__name__}"
        )

    a = sum(1 for j, g in pairs if j == 1 and g == 1)
    b = sum(1 for j, g in pairs if j == 1 and g == 0)
    c = sum(1 for j, g in pairs if j == 0 and g == 1)
    d = sum(1 for j, g in pairs if j == 0 and g == 0)
    n = a + b + c + d
    warnings: list[str] = []

    kappa, kappa_ci = _kappa(a, b, c, d, warnings)
    gold_kind = "unknown" if not kinds else next(iter(kinds)) if len(kinds) == 1 else "mixed"

    ok = n > 0 and (gold_kind == "human" or allow_model_gold)
    if n == 0:
        warnings.append(
            f"no row had both a binary judge reward and a binary gold label from {gold_source}; "
            "nothing was compared (hand-label a sample into gold_reward)"
        )
    elif n < GOLD_FLOOR:
        warnings.append(
            f"only {n} rows compared, below the floor of {GOLD_FLOOR} gold rows: the rates "
            "below are too wide to trust; label more"
        )
    if n and gold_kind != "human" and not allow_model_gold:
        warnings += _provenance_warnings(gold_kind, kinds)
    if skipped:
        warnings.append(
            "skipped (not guessed): " + ", ".join(f"{k}={v}" for k, v in sorted(skipped.items()))
        )

    return {
        "n": n,
        "agreement": _rate(a + d, n),
        "agreement_ci95": wilson_ci(a + d, n),
        "kappa": kappa,
        "kappa_ci95": kappa_ci,
        "confusion": {
            "judge_pass_gold_pass": a,
            "judge_pass_gold_fail": b,
            "judge_fail_gold_pass": c,
            "judge_fail_gold_fail": d,
        },
        "pass_when_gold_fail": _rate(b, b + d),
        "pass_when_gold_fail_ci95": wilson_ci(b, b + d),
        "fail_when_gold_pass": _rate(c, a + c),
        "fail_when_gold_pass_ci95": wilson_ci(c, a + c),
        "judge_pass_rate": _rate(a + b, n),
        "gold_pass_rate": _rate(a + c, n),
        "gold_kind": gold_kind,
        "gold_kinds": dict(kinds),
        "skipped": dict(skipped),
        "ok": ok,
        "warnings": warnings,
    }
