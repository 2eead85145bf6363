"""Argument grounding: did every tool argument come from the conversation?

Four public names (reference section ``grounding``):

* ``ungrounded_arguments(row, ignore_keys=(), allow=(), min_len=3)``: the string arguments
  of the rollout's calls found nowhere the call could draw on, as ``{"tool","key","value"}``.
* ``argument_grounding(row, **kwargs)``: 1.0 when that list is empty, else 0.0.
* ``grounding_report(rows, **kwargs)``: shares over a row set, with task-bootstrap intervals,
  and the most common invented values by tool and key.
* ``mark_grounding(rows, **kwargs)``: copies of the rows with ``markers["argument_grounding"]``.

What counts is the reference's wording: a string argument is grounded when its text (case-
and whitespace-insensitive, on whole-token edges) appears in the context the call could
draw on, the person's turns and the tool results before the call; the agent's own earlier
text never counts. Every string argument counts, free text too (``reason: "customer
asked"``): the default ``ignore_keys=()`` skips nothing, and ``ignore_keys=("reason",)`` is
how a reviewer says a key is free text by design. Matching is grading's own
(``wai_exp.score.grade.grading.provenance``: classes ``given`` and ``tool`` are grounded).
This is stricter than ``conduct_grade``'s ``grounded`` check, which fails only invented
*identifiers* (a value with a digit or ``@``): with ``min_len=0`` and no filters, every
argument conduct calls invented is listed here, not the other way round. Numbers are never listed (a computed amount is
legitimate), and values nested inside lists or objects are not inspected.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.score.grade import grading

__all__ = [
    "GROUNDING_MARKER",
    "TOP_INVENTED",
    "argument_grounding",
    "grounding_report",
    "mark_grounding",
    "ungrounded_arguments",
]

#: The marker ``mark_grounding`` stamps (read by ``marker_summary`` and ``delta_report``).
GROUNDING_MARKER = "argument_grounding"
#: How many invented values ``grounding_report`` lists per (tool, key), most common first.
TOP_INVENTED = 5
#: Provenance classes of a string found in the context (``grading.provenance``); ``empty``
#: is a blank string, nothing to ground.
_GROUNDED = frozenset({"given", "tool", "empty"})
#: Internal marker on ``grounding_report``'s private copies: the rollout made a tool call.
_ANY_CALL = "_grounding_any_call"


def _norm(value: str) -> str:
    # The same normalisation grading's provenance matches on (case- and space-insensitive),
    # so an allowed value matches whatever spelling grading would have matched.
    return " ".join(value.lower().split())


def _names(value: Any, param: str, example: str) -> frozenset[str]:
    if isinstance(value, str | bytes):
        # A bare string would silently become a set of its characters.
        raise TypeError(
            f"{param} must be a sequence of strings, not a single string {value!r}; "
            f"write {param}=({example!r},)"
        )
    try:
        items = list(value or ())
    except TypeError:
        raise TypeError(
            f"{param} must be a sequence of strings; got {type(value).__name__}"
        ) from None
    bad = [item for item in items if not isinstance(item, str)]
    if bad:
        raise TypeError(f"{param} must hold strings only; got {bad[:3]!r}")
    return frozenset(items)


def _check_row(row: Any) -> Mapping[str, Any]:
    if not isinstance(row, Mapping):
        raise TypeError(
            f"row must be a row dict (with steps or messages); got {type(row).__name__}. "
            "For a row list use grounding_report or mark_grounding."
        )
    return row


def _check_min_len(min_len: Any) -> int:
    if isinstance(min_len, bool) or not isinstance(min_len, int) or min_len < 0:
        raise ValueError(f"min_len must be an integer >= 0 (characters); got {min_len!r}")
    return min_len


def ungrounded_arguments(
    row: Mapping[str, Any],
    ignore_keys: Sequence[str] = (),
    allow: Sequence[str] = (),
    min_len: int = 3,
) -> list[dict[str, str]]:
    """The string arguments of the rollout's tool calls that appear nowhere in the context
    the call could draw on (the person's turns and the tool results before the call).
    Free text counts like any other string unless its key is in ``ignore_keys``.

    Returns ``[{"tool", "key", "value"}]`` in call order, one entry per offending argument
    of each call (an id invented twice is listed twice). ``ignore_keys`` skips argument
    names that are free text by design (a note, a message body); ``allow`` lists values
    that are legal without appearing in the conversation (an enum, a default), matched
    case- and whitespace-insensitively; a string shorter than ``min_len`` characters (after
    trimming) is skipped. A rollout with no calls returns ``[]``; a malformed step is
    ignored, as in ``conduct_grade``. Raises ``TypeError`` when ``row`` is not a dict or
    ``ignore_keys``/``allow`` is a bare string, ``ValueError`` for a negative ``min_len``.
    """
    row = _check_row(row)
    ignored = _names(ignore_keys, "ignore_keys", "note")
    allowed = {_norm(v) for v in _names(allow, "allow", "standard")}
    min_len = _check_min_len(min_len)
    out: list[dict[str, str]] = []
    for call in grading.tool_calls(row):
        args = call["arguments"]
        for key, cls in grading.call_provenance(call).items():
            value = args.get(key)
            if not isinstance(value, str) or cls in _GROUNDED:
                continue
            if key in ignored or len(value.strip()) < min_len or _norm(value) in allowed:
                continue
            out.append({"tool": str(call["name"]), "key": key, "value": value})
    return out


def argument_grounding(row: Mapping[str, Any], **kwargs: Any) -> float:
    """1.0 when every string argument of every tool call is grounded in the conversation (a
    rollout with no calls is grounded), else 0.0. Keyword arguments are those of
    ``ungrounded_arguments`` (and fail the same way)."""
    return 0.0 if ungrounded_arguments(row, **kwargs) else 1.0


def _has_call(row: Mapping[str, Any]) -> bool:
    return bool(grading.tool_calls(row))


def _rows(rows: Any) -> list[dict[str, Any]]:
    from wai_exp.score.stats.passat import row_dicts  # lazy: passat imports scipy

    return row_dicts(rows)


def _stamp(row: Mapping[str, Any], value: float, extra: Mapping[str, float] | None = None) -> dict:
    copy = dict(row)
    markers = row.get("markers")
    # A fresh markers dict, so stamping the copy never writes through to the input row.
    copy["markers"] = {**(markers if isinstance(markers, Mapping) else {}), **(extra or {})}
    copy["markers"][GROUNDING_MARKER] = value
    return copy


def mark_grounding(rows: Sequence[dict], **kwargs: Any) -> list[dict]:
    """Copies of ``rows`` with ``markers["argument_grounding"]`` stamped (1.0 grounded, 0.0
    not), so ``marker_summary``, ``delta_report`` and the run page read it. The input rows
    and their ``markers`` dicts are left untouched; other markers are kept. ``rows`` may be a
    row list or anything with ``.rows``. Keyword arguments are those of
    ``ungrounded_arguments``; raises ``TypeError`` when an item is not a row dict."""
    return [_stamp(row, argument_grounding(row, **kwargs)) for row in _rows(rows)]


def _share(rows: list[dict], name: str, what: str) -> dict[str, Any]:
    from wai_exp.score.stats.stats import metric_summary  # lazy: scipy

    summary = metric_summary(rows, name)
    out = {
        "share": summary["mean"],
        "ci95": summary["ci95"],
        "n_rows": summary["n_rows"],
        "n_tasks": summary["n_tasks"],
    }
    note = summary.get("note") or summary.get("warning")
    if note:
        # stats words the note after the marker's name; the reader knows it by what it means.
        out["note"] = note.replace(repr(name), what).replace(name, what)
    return out


def grounding_report(rows: Sequence[dict], **kwargs: Any) -> dict[str, Any]:
    """Over a row set: the share of rollouts with every argument grounded, the share with
    any call at all, and the most common invented values by tool and key, for a reviewer.

    Shares are means over tasks (``task_key``) of the per-rollout 0/1 value, with a
    task-bootstrap 95% interval from ``metric_summary`` (the number ``marker_summary`` gives
    for ``mark_grounding``'s marker on the same rows). Each share is
    ``{"share", "ci95", "n_rows", "n_tasks"}`` plus ``note`` when the interval is withheld
    (fewer than 3 tasks, or every rollout alike) or nothing was measured (``share`` None).
    Returns ``n_rows``; ``grounded`` (no-call rollouts count as grounded); ``any_call``;
    ``grounded_with_calls`` (the grounded share among rollouts that called a tool, which
    no-call rollouts cannot inflate); ``n_ungrounded_rows``; ``invented``, one entry per
    (tool, key) with ``{"tool", "key", "count", "rows", "values": [{"value", "count"}]}``
    (at most ``TOP_INVENTED`` values, most common first; ``count`` counts arguments,
    ``rows`` rollouts), ordered by count; ``settings`` (the filters used); and ``note`` when
    there are no rows. Keyword arguments are those of ``ungrounded_arguments``.
    """
    row_list = _rows(rows)
    settings = {
        "ignore_keys": sorted(_names(kwargs.get("ignore_keys", ()), "ignore_keys", "note")),
        "allow": sorted(_names(kwargs.get("allow", ()), "allow", "standard")),
        "min_len": _check_min_len(kwargs.get("min_len", 3)),
    }
    unknown = sorted(set(kwargs) - set(settings))
    if unknown:
        raise TypeError(
            f"unknown keyword argument(s) {unknown}; grounding_report takes "
            f"{sorted(settings)} (those of ungrounded_arguments)"
        )
    out: dict[str, Any] = {"n_rows": len(row_list), "settings": settings}
    if not row_list:
        empty = {"share": None, "ci95": None, "n_rows": 0, "n_tasks": 0}
        out.update(
            grounded=dict(empty),
            any_call=dict(empty),
            grounded_with_calls=dict(empty),
            n_ungrounded_rows=0,
            invented=[],
            note="no rows: nothing measured",
        )
        return out

    marked: list[dict] = []
    counts: dict[tuple[str, str], Counter[str]] = {}
    rows_hit: Counter[tuple[str, str]] = Counter()
    n_bad = 0
    for row in row_list:
        found = ungrounded_arguments(row, **kwargs)
        has_call = 1.0 if found or _has_call(row) else 0.0
        marked.append(_stamp(row, 0.0 if found else 1.0, {_ANY_CALL: has_call}))
        if found:
            n_bad += 1
        for pair in {(f["tool"], f["key"]) for f in found}:
            rows_hit[pair] += 1
        for f in found:
            counts.setdefault((f["tool"], f["key"]), Counter())[f["value"]] += 1

    with_calls = [r for r in marked if r["markers"][_ANY_CALL] == 1.0]
    out["grounded"] = _share(marked, GROUNDING_MARKER, "argument grounding")
    out["any_call"] = _share(marked, _ANY_CALL, "any tool call")
    if with_calls:
        out["grounded_with_calls"] = _share(
            with_calls, GROUNDING_MARKER, "argument grounding (rollouts with calls)"
        )
    else:
        out["grounded_with_calls"] = {
            "share": None,
            "ci95": None,
            "n_rows": 0,
            "n_tasks": 0,
            "note": "no rollout called a tool: grounding among calls was not measured",
        }
    out["n_ungrounded_rows"] = n_bad
    invented: list[dict[str, Any]] = [
        {
            "tool": tool,
            "key": key,
            "count": sum(values.values()),
            "rows": rows_hit[(tool, key)],
            # most_common breaks ties by first appearance: stable for a given row order.
            "values": [{"value": v, "count": c} for v, c in values.most_common(TOP_INVENTED)],
        }
        for (tool, key), values in counts.items()
    ]
    invented.sort(key=lambda e: (-e["count"], e["tool"], e["key"]))
    out["invented"] = invented
    return out
