"""Did the agent say what only the teacher was told?

Every simulated row is born with a ``privileged`` block (``privileged_context``): the
``hidden_state`` the world knows and the ask does not say, and the ``reference`` the checklist
expects. A judge may read it; the student must never see it. If the agent's own text quotes
that block, the block reached the policy somewhere (a prompt template, a replayed transcript, a
training file that was not scrubbed) and every score on those rows is inflated.

``leak_report`` looks for verbatim quotes (case- and whitespace-insensitive) of each block
string in the same row's final reply and assistant turns. Only the row's *own* block is
searched: an agent that discovers a fact through a tool and restates it in its own words is
not a leak, and one sentence shared by two rows' blocks would otherwise be counted twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from wai_exp.rows.reader import read_steps
from wai_exp.rows.rowlist import RowList
from wai_exp.score.stats.resample import wilson_interval

#: Rows listed in ``leaked``; the counts cover every row.
MAX_LEAKED = 20
#: Longest needle quoted back in the report (the count is exact; the text is for reading).
NEEDLE_CHARS = 200
#: Block keys searched for, in the order a leak is attributed when several match.
LEAK_FIELDS = ("reference", "principle", "hidden_state")
#: Characters trimmed off both ends of a needle: a quote that drops the final full stop
#: or the surrounding quotation marks is still the same quote.
_EDGE = " \t\n.,;:!?\"'`()[]"


def _norm(text: str) -> str:
    """Lower-cased, whitespace runs collapsed to one space."""
    return " ".join(text.lower().split())


def _strings(value: Any, path: str) -> Iterable[tuple[str, str]]:
    """Every string inside ``value`` (dicts and lists walked) as ``(path, text)``."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def _needles(block: Mapping[str, Any], min_len: int) -> list[tuple[str, str, str]]:
    """``(field, original text, normalized needle)`` for every block string of at least
    ``min_len`` characters once trimmed; shorter strings (``"yes"``, an id) match by chance."""
    out: list[tuple[str, str, str]] = []
    for name in LEAK_FIELDS:
        if name not in block:
            continue
        for path, text in _strings(block[name], name):
            needle = _norm(text).strip(_EDGE)
            if len(needle) >= min_len:
                out.append((path, text, needle))
    return out


def _agent_texts(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(where, normalized text)`` for the final reply and every assistant turn."""
    texts: list[tuple[str, str]] = []
    final = row.get("final_text")
    if isinstance(final, str) and final:
        texts.append(("final_text", _norm(final)))
    for i, step in enumerate(read_steps(row)[1]):
        if step.get("kind") != "assistant":
            continue
        content = step.get("content")
        if isinstance(content, str) and content:
            texts.append((f"steps[{i}]", _norm(content)))
    return texts


def _first_hit(
    needles: list[tuple[str, str, str]], texts: list[tuple[str, str]]
) -> tuple[str, str, str] | None:
    """``(field, original text, where)`` of the first needle found in any text, else None."""
    for field, text, needle in needles:
        for where, said in texts:
            if needle in said:
                return field, text, where
    return None


def _resolve(rows: Any) -> tuple[list[Any], str, bool]:
    """``(row list, source, came_from_export)``.

    ``source`` names what was read: ``"trajectories"`` for a ``SimulationData`` (or anything
    with ``.trajectories``), ``"rows"`` for an object whose ``.rows`` was read, ``"list"``
    otherwise. ``came_from_export`` is True for a ``RowList`` (the type of ``data.rows``)
    and for an object that offered only ``.rows``.
    """
    if rows is None:
        raise ValueError("leak_report got None: pass the SimulationData or data.trajectories")
    if isinstance(rows, Mapping):
        raise TypeError("leak_report got a single row dict; pass a list of rows (e.g. [row])")
    if isinstance(rows, str | bytes):
        raise TypeError("leak_report got a string; pass the SimulationData or a list of rows")
    trajectories = getattr(rows, "trajectories", None)
    if trajectories is not None:
        return list(trajectories), "trajectories", False
    # data.rows / data.rows() is a RowList (a list subclass that is also callable)
    if isinstance(rows, RowList):
        return list(rows), "rows", True
    if not isinstance(rows, list | tuple):
        exported = getattr(rows, "rows", None)
        if exported is not None:
            if callable(exported) and not isinstance(exported, list):
                exported = exported()
            return list(exported), "rows", True
    try:
        return list(rows), "list", False
    except TypeError:
        raise TypeError(
            f"leak_report cannot read rows from {type(rows).__name__}: pass the "
            "SimulationData, data.trajectories, or a list of row dicts"
        ) from None


def _looks_exported(rows: list[Any]) -> bool:
    """True when rows carry what ``privileged_context`` is built from (``scenario_dimensions``
    or a fault plan) but no block: simulate stamps the block on every such row, so its
    absence means something scrubbed it (``data.rows``, a saved JSONL)."""
    return any(
        isinstance(r, Mapping)
        and "privileged" not in r
        and (r.get("scenario_dimensions") or (r.get("faults") or {}).get("planned"))
        for r in rows
    )


def leak_report(rows: Any, min_len: int = 12) -> dict[str, Any]:
    """Which rows quote their own ``privileged`` block in the agent's text.

    ``rows`` is a ``SimulationData`` (its ``.trajectories`` are read: they still carry the
    block), ``data.trajectories``, or any list of row dicts. Every row carrying a
    ``privileged`` dict is searched: each string under ``reference``, ``principle`` and
    ``hidden_state`` (nested dicts/lists walked) of at least ``min_len`` characters is looked
    for, case- and whitespace-insensitively, in ``final_text`` and in every assistant step's
    ``content``. ``rows`` is not mutated.

    Returns a dict: ``n_rows``; ``n_with_block`` (rows carrying a ``privileged`` dict);
    ``n_checked`` (rows with at least one needle of ``min_len`` characters); ``n_leaked``;
    ``rate`` (``n_leaked / n_checked``, ``None`` when nothing was checked) with ``rate_ci``
    (95% Wilson ``[lo, hi]``, ``None`` likewise); ``checked`` (False when no row carried the
    block: every count is then vacuous); ``by_field`` (leaked rows per first-matching field);
    ``leaked`` (up to ``MAX_LEAKED`` rows: ``scenario_id``, ``rollout_index``,
    ``rollout_id``, ``field``, ``where``, ``needle``); ``source`` (``"trajectories"``,
    ``"rows"`` or ``"list"``); ``scrubbed_export`` (True when the rows look like the scrubbed
    export, so ``data.trajectories`` should be passed instead); ``min_len``; ``summary``.

    Raises ``ValueError`` for ``min_len < 1`` or ``rows=None``, ``TypeError`` for a single row
    dict, a string, or an object it cannot read rows from.
    """
    if not isinstance(min_len, int) or isinstance(min_len, bool) or min_len < 1:
        raise ValueError(f"min_len must be a positive int (got {min_len!r}); the default is 12")
    row_list, source, from_export = _resolve(rows)
    n_with_block = 0
    n_checked = 0
    n_leaked = 0
    by_field: dict[str, int] = {}
    leaked: list[dict[str, Any]] = []
    for row in row_list:
        if not isinstance(row, Mapping):
            raise TypeError(
                f"leak_report: every row must be a dict (got {type(row).__name__}); "
                "pass the SimulationData or data.trajectories"
            )
        block = row.get("privileged")
        if not isinstance(block, Mapping):
            continue
        n_with_block += 1
        needles = _needles(block, min_len)
        if not needles:
            continue
        n_checked += 1
        hit = _first_hit(needles, _agent_texts(row))
        if hit is None:
            continue
        n_leaked += 1
        field, text, where = hit
        top = field.split(".", 1)[0].split("[", 1)[0]
        by_field[top] = by_field.get(top, 0) + 1
        if len(leaked) < MAX_LEAKED:
            leaked.append(
                {
                    "scenario_id": row.get("scenario_id"),
                    "rollout_index": row.get("rollout_index"),
                    "rollout_id": row.get("rollout_id"),
                    "field": field,
                    "where": where,
                    "needle": text if len(text) <= NEEDLE_CHARS else text[:NEEDLE_CHARS] + "...",
                }
            )

    checked = n_with_block > 0
    scrubbed_export = not checked and bool(row_list) and (from_export or _looks_exported(row_list))
    rate: float | None = n_leaked / n_checked if n_checked else None
    ci = wilson_interval(n_leaked, n_checked) if n_checked else None
    rate_ci = ci.as_list() if ci is not None else None
    summary = _summary(
        len(row_list), n_with_block, n_checked, n_leaked, rate, rate_ci, scrubbed_export, min_len
    )
    return {
        "n_rows": len(row_list),
        "n_with_block": n_with_block,
        "n_checked": n_checked,
        "n_leaked": n_leaked,
        "rate": rate,
        "rate_ci": rate_ci,
        "checked": checked,
        "by_field": by_field,
        "leaked": leaked,
        "source": source,
        "scrubbed_export": scrubbed_export,
        "min_len": min_len,
        "summary": summary,
    }


def _summary(
    n_rows: int,
    n_with_block: int,
    n_checked: int,
    n_leaked: int,
    rate: float | None,
    rate_ci: list[float] | None,
    scrubbed_export: bool,
    min_len: int,
) -> str:
    if n_rows == 0:
        return "Nothing checked: no rows were given."
    if n_with_block == 0:
        if scrubbed_export:
            return (
                f"Nothing checked (vacuous): none of the {n_rows} rows carries `privileged`. "
                "They look like the scrubbed export (data.rows / data.rows() / a saved JSONL), "
                "which drops the block at any depth; pass data.trajectories (or the "
                "SimulationData itself) instead."
            )
        return (
            f"Nothing checked (vacuous): none of the {n_rows} rows carries a `privileged` "
            "block, so there is no answer key to look for."
        )
    if n_checked == 0:
        return (
            f"Nothing checked: {n_with_block} rows carry `privileged` but no block string is "
            f"at least {min_len} characters long; lower min_len to check shorter ones."
        )
    assert rate is not None and rate_ci is not None
    lo, hi = rate_ci
    head = (
        f"{n_leaked} of {n_checked} checked rows quote their own privileged block "
        f"(rate {rate:.1%}, 95% CI {lo:.1%}-{hi:.1%})"
    )
    if n_leaked:
        return head + ": the answer key reached the agent; do not trust scores on these rows."
    return head + "."


def format_leak_report(report: Mapping[str, Any]) -> str:
    """The report as text, one line per fact, the summary first.

    Returns the lines joined with newlines (no trailing newline). Raises ``KeyError`` naming
    the missing key when ``report`` is not a ``leak_report`` result.
    """
    missing = [k for k in ("summary", "n_rows", "n_checked", "n_leaked") if k not in report]
    if missing:
        raise KeyError(f"format_leak_report needs a leak_report() result; missing keys: {missing}")
    lines = [str(report["summary"])]
    lines.append(f"rows: {report['n_rows']}")
    if "n_with_block" in report:
        lines.append(f"rows carrying privileged: {report['n_with_block']}")
    lines.append(f"rows checked: {report['n_checked']}")
    lines.append(f"rows leaked: {report['n_leaked']}")
    rate, ci = report.get("rate"), report.get("rate_ci")
    if rate is None:
        lines.append("leak rate: not measured (no row was checked)")
    elif ci:
        lines.append(f"leak rate: {rate:.4f} (95% CI {ci[0]:.4f}-{ci[1]:.4f})")
    else:
        lines.append(f"leak rate: {rate:.4f}")
    for field, count in sorted((report.get("by_field") or {}).items()):
        lines.append(f"leaked via {field}: {count}")
    for item in report.get("leaked") or ():
        lines.append(
            f"leak: scenario {item.get('scenario_id')} rollout {item.get('rollout_index')} "
            f"{item.get('field')} in {item.get('where', 'reply')}: {item.get('needle')!r}"
        )
    shown = len(report.get("leaked") or ())
    if report["n_leaked"] > shown:
        lines.append(f"... {report['n_leaked'] - shown} more leaked rows not listed")
    return "\n".join(lines)
