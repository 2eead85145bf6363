"""Stock behavioral markers for the over-optimization signatures (rlhf-book ch. 14).

The presence-polarity view of ``score.grade.style``: each stock marker is 1 when the reply carries
the tic and 0 when it does not. The phrase families are ``style.STYLE_MARKERS`` (the one
source of truth) with the ``no_`` prefix dropped: ``no_hedging`` -> ``hedging``,
``no_refusal_phrases`` -> ``refusal_phrases``.

``behavioral_markers`` and ``mark_rows`` are deprecated (they warn with
``DeprecationWarning``): a presence marker that goes *up* is a regression, which a
``delta_report`` paired comparison reads backwards. Use ``style.style_report`` and
``style.style_markers`` (clean polarity) instead. ``row_markers`` and ``format_markers`` stay
as the quick per-row and dashboard views.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from wai_exp.score.grade import style

_DEPRECATED = (
    "{name} is deprecated: presence polarity (1 = tic present) reads a delta_report paired "
    "comparison backwards; use wai_exp.score.grade.style.{instead} (1.0 = clean)"
)


def stock_markers() -> dict[str, tuple[str, ...]]:
    """``{presence name: phrases}`` read from ``style.STYLE_MARKERS`` at call time."""
    return {name.removeprefix("no_"): phrases for name, phrases in style.STYLE_MARKERS.items()}


def _select(names: Sequence[str] | None) -> dict[str, tuple[str, ...]]:
    stock = stock_markers()
    if names is None:
        return stock
    if isinstance(names, str):
        raise TypeError(f"names must be a list of marker names, got the string {names!r}")
    unknown = [n for n in names if n not in stock]
    if unknown:
        raise ValueError(
            f"unknown stock marker(s) {unknown}; known: {', '.join(sorted(stock))} "
            "(pass extra= to mark_rows for a custom detector)"
        )
    return {n: stock[n] for n in dict.fromkeys(names)}


def _presence(hits: Mapping[str, list[str]]) -> dict[str, int]:
    return {name: int(bool(found)) for name, found in hits.items()}


def row_markers(row: dict, names: Sequence[str] | None = None) -> dict[str, int]:
    """The stock markers for one row's final text: ``{name: 1 if the tic is present else 0}``.

    The text is ``style.reply_text(row)`` (``<think>`` removed, case-folded); a row with no
    reply trips nothing. ``names`` picks stock markers (default all); raises ``ValueError``
    naming an unknown one.
    """
    if not isinstance(row, Mapping):
        raise TypeError(f"row must be a row dict, got {type(row).__name__}")
    return _presence(style.phrase_hits(style.reply_text(row), _select(names)))


def _rows(rows: Any) -> list[dict]:
    from wai_exp.score.stats.passat import row_dicts  # lazy: passat imports scipy

    return row_dicts(rows)


def behavioral_markers(
    rows: Sequence[dict],
    names: Sequence[str] | None = None,
) -> dict[str, float]:
    """Rate of each stock marker over ``rows``: the fraction of rollouts that trip it.

    Every row is in the denominator (a row with no reply trips nothing). Returns ``{}`` for no
    rows: nothing was measured, so no rate is printed as 0. Deprecated (warns): use
    ``style.style_report`` for the clean-polarity view with intervals.
    """
    warnings.warn(
        _DEPRECATED.format(name="behavioral_markers", instead="style_report"),
        DeprecationWarning,
        stacklevel=2,
    )
    chosen = _select(names)
    row_list = _rows(rows)
    if not row_list:
        return {}
    totals = dict.fromkeys(chosen, 0)
    match = style.phrase_matcher(chosen)
    for row in row_list:
        for name, hit in _presence(match(style.reply_text(row))).items():
            totals[name] += hit
    return {name: totals[name] / len(row_list) for name in chosen}


def mark_rows(
    rows: Sequence[dict],
    names: Sequence[str] | None = None,
    extra: dict[str, Callable[[dict], float]] | None = None,
) -> list[dict]:
    """Copies of ``rows`` with the stock markers merged into each row's ``markers`` dict.

    Ready for ``marker_summary`` / ``delta_report``. ``extra`` adds custom named detectors
    ``row -> value`` (a ``None`` or NaN value leaves that marker off the row: unmeasured).
    Existing marker values are kept; stock names (and ``extra`` names) overwrite only
    themselves. The input rows and their ``markers`` dicts are not modified. Raises
    ``ValueError`` when an ``extra`` name is also a chosen stock marker and ``TypeError`` when
    a detector is not callable or returns a non-number. Deprecated (warns): use
    ``style.style_markers``.
    """
    warnings.warn(
        _DEPRECATED.format(name="mark_rows", instead="style_markers"),
        DeprecationWarning,
        stacklevel=2,
    )
    chosen = _select(names)
    extra = dict(extra or {})
    for name, fn in extra.items():
        if name in chosen:
            raise ValueError(
                f"extra detector {name!r} has the name of a stock marker; rename it, or leave "
                f"{name!r} out of names"
            )
        if not callable(fn):
            raise TypeError(f"extra detector {name!r} must be callable row -> value")
    out: list[dict] = []
    match = style.phrase_matcher(chosen)
    for row in _rows(rows):
        copy = dict(row)
        old = row.get("markers")
        # A fresh markers dict, so stamping the copy never writes through to the input row.
        markers = dict(old) if isinstance(old, Mapping) else {}
        markers.update(_presence(match(style.reply_text(row))))
        for name, fn in extra.items():
            value = fn(row)
            if value is None:
                continue
            if isinstance(value, str) or not isinstance(value, int | float):
                raise TypeError(
                    f"extra detector {name!r} returned {value!r}; it must return a number "
                    "(or None for unmeasured)"
                )
            if not math.isnan(float(value)):
                markers[name] = float(value)
        copy["markers"] = markers
        out.append(copy)
    return out


def format_markers(report: dict[str, float]) -> str:
    """One line per marker, highest rate first (ties by name): ``name  rate%``.

    A ``None``/NaN rate prints ``n/a`` at the end instead of 0. An empty report prints one line
    saying nothing was measured.
    """
    if not report:
        return "no markers measured (no rows)"

    def measured(v: Any) -> bool:
        return v is not None and not (isinstance(v, float) and math.isnan(v))

    known = sorted((k for k, v in report.items() if measured(v)), key=lambda k: (-report[k], k))
    missing = sorted(k for k, v in report.items() if not measured(v))
    width = max(len(k) for k in report)
    lines = [f"{k:<{width}}  {100 * float(report[k]):5.1f}%" for k in known]
    lines += [f"{k:<{width}}    n/a" for k in missing]
    return "\n".join(lines)
