"""A sweep's results per swept value: which keys were swept, the per-value table, and the
re-run spread over replicate jobs only. Pure functions over child-run data (no MLflow).

A child is ``{"run_id", "run_name", "status", "overrides": [str], "metrics": {name: value}}``.
Keys that differ between children are the swept keys. ``seed`` and ``replicate`` (with or
without a ``+``, and ``knobs.seed``) are replicate keys: jobs that differ only in them are
re-runs of one configuration, and only their spread is a re-run spread (``run_std``, the noise
band). A sweep over ``agent.skill`` gets a mean and interval per skill, never a noise floor:
the spread between skills is the effect being measured.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.domain.numbers import finite_float

__all__ = [
    "REPLICATE_KEYS",
    "format_table",
    "parse_overrides",
    "per_value_table",
    "replicate_spread",
    "swept_keys",
    "table_csv",
    "table_markdown",
]

REPLICATE_KEYS = frozenset({"seed", "replicate", "knobs.seed"})
#: The headline metric and its interval bounds, as the tracker logs them.
HEADLINE = "pass_at_1"


def parse_overrides(overrides: Sequence[str] | str) -> dict[str, str]:
    """``{key: value}`` from overrides (a list, or one space-joined string); a leading
    ``+``/``++`` is dropped from the key; deletions (``~key``) are skipped."""
    items = overrides.split() if isinstance(overrides, str) else list(overrides)
    out: dict[str, str] = {}
    for item in items:
        text = str(item).strip()
        if not text or text.startswith("~") or "=" not in text:
            continue
        key, _, value = text.lstrip("+").partition("=")
        out[key] = value
    return out


def swept_keys(children: Sequence[Mapping[str, Any]]) -> list[str]:
    """The override keys whose value is not the same in every child, in first-seen order."""
    parsed = [parse_overrides(c.get("overrides") or []) for c in children]
    keys: list[str] = []
    for p in parsed:
        keys.extend(k for k in p if k not in keys)
    return [k for k in keys if len({p.get(k) for p in parsed}) > 1]


def _sort_key(value: str) -> tuple[int, float, str]:
    f = _num_text(value)
    return (0, f, "") if f is not None else (1, 0.0, value)


def _num_text(value: str) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def per_value_table(
    children: Sequence[Mapping[str, Any]], *, metric: str = HEADLINE
) -> dict[str, Any]:
    """One row per combination of the non-replicate swept keys' values.

    Returns ``{"swept", "value_keys", "replicate_keys", "rows"}``; each row holds the values
    (``values``: {key: value}), ``n_runs``, ``mean`` of ``metric`` over its finished runs,
    ``ci_lo``/``ci_hi`` and ``interval`` (how the interval was made: a t interval over the
    re-runs when there are two or more, else the one run's own 95% interval from its
    ``<metric>_ci_lo``/``_ci_hi`` metrics), ``pass_pow_k``/``pass_at_k``/``rows_kept`` means,
    and the run names. A combination whose runs all lack the metric has ``mean`` None.
    Only FINISHED children count. Never raises on odd inputs.
    """
    from scipy import stats

    done = [c for c in children if c.get("status", "FINISHED") == "FINISHED"]
    swept = swept_keys(children)
    value_keys = [k for k in swept if k not in REPLICATE_KEYS]
    replicate = [k for k in swept if k in REPLICATE_KEYS]
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for c in done:
        p = parse_overrides(c.get("overrides") or [])
        groups.setdefault(tuple(p.get(k, "") for k in value_keys), []).append(c)
    rows = []
    for combo in sorted(groups, key=lambda t: tuple(_sort_key(v) for v in t)):
        runs = groups[combo]
        vals = [v for v in (finite_float(r["metrics"].get(metric)) for r in runs) if v is not None]
        row: dict[str, Any] = {
            "values": dict(zip(value_keys, combo, strict=True)),
            "n_runs": len(runs),
            "n_measured": len(vals),
            "mean": None,
            "ci_lo": None,
            "ci_hi": None,
            "interval": "not measured",
            "runs": [str(r.get("run_name") or r.get("run_id")) for r in runs],
            "run_ids": [str(r.get("run_id")) for r in runs],
        }
        if len(vals) >= 2:
            mean = sum(vals) / len(vals)
            sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
            half = float(stats.t.ppf(0.975, len(vals) - 1)) * sd / math.sqrt(len(vals))
            row.update(
                mean=mean,
                ci_lo=max(0.0, mean - half),
                ci_hi=min(1.0, mean + half),
                interval=f"95% t interval over {len(vals)} re-runs",
            )
        elif len(vals) == 1:
            m = next(
                r["metrics"] for r in runs if finite_float(r["metrics"].get(metric)) is not None
            )
            lo, hi = finite_float(m.get(f"{metric}_ci_lo")), finite_float(m.get(f"{metric}_ci_hi"))
            row.update(
                mean=vals[0],
                ci_lo=lo,
                ci_hi=hi,
                interval="95% interval of the one run"
                if lo is not None
                else "one run, no interval",
            )
        for extra in ("pass_pow_k", "pass_at_k", "rows_kept"):
            xs = [v for v in (finite_float(r["metrics"].get(extra)) for r in runs) if v is not None]
            row[extra] = sum(xs) / len(xs) if xs else None
        rows.append(row)
    return {"swept": swept, "value_keys": value_keys, "replicate_keys": replicate, "rows": rows}


def replicate_spread(
    children: Sequence[Mapping[str, Any]], *, metric: str = HEADLINE
) -> dict[str, Any]:
    """The re-run spread of ``metric`` over jobs that differ only by replicate keys.

    Children are grouped by every swept key that is not a replicate key; each group with two
    or more measured runs contributes its within-group variance, pooled with its degrees of
    freedom. Returns ``{"run_std", "df", "n_groups", "n_runs", "noise_band", "noise_band_t",
    "note"}``; ``run_std`` and the bands are None (with the reason in ``note``) when no
    group has two replicates: then nothing in the sweep measures re-run noise.
    """
    from wai_exp.score.stats.resample import noise_band

    table = per_value_table(children, metric=metric)
    done = [c for c in children if c.get("status", "FINISHED") == "FINISHED"]
    groups: dict[tuple[str, ...], list[float]] = {}
    for c in done:
        p = parse_overrides(c.get("overrides") or [])
        v = finite_float(c["metrics"].get(metric))
        if v is not None:
            groups.setdefault(tuple(p.get(k, "") for k in table["value_keys"]), []).append(v)
    ss, df, used, n_runs = 0.0, 0, 0, 0
    for vals in groups.values():
        if len(vals) < 2:
            continue
        mean = sum(vals) / len(vals)
        ss += sum((v - mean) ** 2 for v in vals)
        df += len(vals) - 1
        used += 1
        n_runs += len(vals)
    out: dict[str, Any] = {
        "metric": metric,
        "run_std": None,
        "df": df,
        "n_groups": used,
        "n_runs": n_runs,
        "noise_band": None,
        "noise_band_t": None,
        "note": None,
    }
    if df == 0:
        out["note"] = (
            "no replicates: no two jobs differ only by seed/replicate, so this sweep measures "
            "no re-run noise (sweep seed=0,1,2 alongside the key for a floor)"
        )
        return out
    sd = math.sqrt(ss / df)
    out.update(run_std=sd, noise_band=noise_band(sd), noise_band_t=noise_band(sd, df=df))
    out["note"] = f"pooled over {used} configuration(s), {n_runs} runs that differ only by " + (
        ", ".join(table["replicate_keys"]) or "replicate"
    )
    return out


def _cell(v: Any, digits: int = 3) -> str:
    f = finite_float(v)
    if f is None:
        return "—" if v is None else str(v)
    return f"{f:.{digits}f}" if not float(f).is_integer() or digits == 0 else f"{f:g}"


def _ci(row: Mapping[str, Any]) -> str:
    lo, hi = finite_float(row.get("ci_lo")), finite_float(row.get("ci_hi"))
    return "not measured" if lo is None or hi is None else f"{lo:.3f}–{hi:.3f}"


def table_markdown(table: Mapping[str, Any]) -> str:
    """The per-value table as a markdown table (for the parent run's description)."""
    keys = table["value_keys"] or ["(all jobs)"]
    head = [*keys, "runs", "pass@1", "95% CI", "pass^k", "pass@k", "rows kept"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in table["rows"]:
        vals = [row["values"].get(k, "") for k in table["value_keys"]] or ["all"]
        lines.append(
            "| "
            + " | ".join(
                [
                    *vals,
                    str(row["n_runs"]),
                    _cell(row["mean"]),
                    _ci(row),
                    _cell(row["pass_pow_k"]),
                    _cell(row["pass_at_k"]),
                    _cell(row["rows_kept"], 0) if row["rows_kept"] is not None else "—",
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def format_table(table: Mapping[str, Any]) -> str:
    """The per-value table as fixed-width text for the terminal."""
    keys = table["value_keys"] or ["jobs"]
    head = [*keys, "runs", "pass@1", "95% CI", "pass^k", "pass@k", "rows kept"]
    body = []
    for row in table["rows"]:
        vals = [row["values"].get(k, "") for k in table["value_keys"]] or ["all"]
        body.append(
            [
                *vals,
                str(row["n_runs"]),
                _cell(row["mean"]),
                _ci(row),
                _cell(row["pass_pow_k"]),
                _cell(row["pass_at_k"]),
                "—" if row["rows_kept"] is None else f"{row['rows_kept']:.0f}",
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r) for r in [head, *body])


def table_csv(table: Mapping[str, Any]) -> str:
    """The per-value table as CSV: the value keys, then n_runs, pass_at_1 (mean), ci_lo,
    ci_hi, interval, pass_pow_k, pass_at_k, rows_kept, run_ids (space-separated)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    keys = table["value_keys"]
    w.writerow(
        [*keys, "n_runs", "pass_at_1", "ci_lo", "ci_hi", "interval", "pass_pow_k", "pass_at_k",
         "rows_kept", "run_ids"]
    )  # fmt: skip
    for row in table["rows"]:
        w.writerow(
            [
                *(row["values"].get(k, "") for k in keys),
                row["n_runs"],
                *("" if row[k] is None else repr(row[k]) for k in ("mean", "ci_lo", "ci_hi")),
                row["interval"],
                *("" if row[k] is None else repr(row[k]) for k in ("pass_pow_k", "pass_at_k", "rows_kept")),
                " ".join(row["run_ids"]),
            ]
        )  # fmt: skip
    return buf.getvalue()
