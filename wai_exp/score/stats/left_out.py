"""The tasks a pass@1 headline leaves out because none of their rows has a 0/1 grade, and
the summaries' rule that says each fix once.

``pass_at`` groups only 0/1-graded rows, so a task whose every row is unjudged (a judge
error, a record the world did not hold, a partial reward) drops out of "over N tasks" with
no word. ``ungraded_tasks_line`` is that word: how many, of how many, why, and the fix.
An adaptive run's headline reads each task's fixed first batch, so there a task is left out
when its first batch has no 0/1-graded row, whatever the rows added after it hold.
Tasks that lost every rollout have no row and are said by the lost block's own sentence
(``wai_exp.simulate.lost.lost_sentence``), so they are not counted here."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.score.stats.passat import (
    ADAPTIVE_REASONS,
    BASIS_NOTE_HEAD,
    PLAN_NOT_SERVED_FIX,
    Ungraded,
)
from wai_exp.score.stats.row_facts import as_rows, row_facts

#: What a summary says where it would give the plan-not-served fix a second time.
FIX_SAID_ABOVE = "see the fix above"


def _added(reason: Any) -> bool:
    """Whether a row (or lost rollout) with this ``selection_reason`` was added by an
    adaptive policy after its task's first batch."""
    return isinstance(reason, str) and reason in ADAPTIVE_REASONS


def first_batch_mask(
    rows: Sequence[Mapping[str, Any]], lost: Mapping[str, Any] | None = None
) -> np.ndarray | None:
    """Which rows are their task's first batch, when pass@1 reads only that (an adaptive
    policy added rows to some task, ``pass_at``'s rule); None when it reads every row."""
    added = np.array([_added(row.get("selection_reason")) for row in rows], dtype=bool)
    lost_added = bool(lost and lost.get("counted")) and any(
        _added(r) for reasons in ((lost or {}).get("by_task") or {}).values() for r in reasons
    )
    return ~added if added.any() or lost_added else None


def scored_tasks(
    keys: Sequence[str],
    binary: np.ndarray,
    lost: Mapping[str, Any] | None,
    on_basis: np.ndarray | None = None,
) -> set[str]:
    """The task keys pass@k scores: those with a 0/1-graded row on the basis (``on_basis``,
    each task's first batch; None: every row), and those whose lost rollouts it counts as
    failures (``lost["counted"]``), a first-batch one under that basis."""
    on = [True] * len(keys) if on_basis is None else on_basis.tolist()
    graded = {k for k, b, o in zip(keys, binary.tolist(), on, strict=True) if o and b == b}
    if lost and lost.get("counted"):
        graded |= {
            str(task)
            for task, reasons in (lost.get("by_task") or {}).items()
            if on_basis is None or not all(map(_added, reasons or [None]))
        }
    return graded


def ungraded_tasks_line(
    rows: Sequence[Mapping[str, Any]] | Any, lost: Mapping[str, Any] | None = None
) -> str | None:
    """One line for the tasks left out of pass@1, pass^k and pass@k because none of their
    rows on pass@1's basis has a 0/1 grade, with why and the fix (``Ungraded.fixes``); None
    when there are none. ``lost`` is the run's lost block
    (``wai_exp.simulate.lost.lost_summary``): its tasks count in the total, and a left-out
    task that also lost rollouts says so."""
    row_list = as_rows(rows)
    facts = row_facts(row_list)
    keys = [str(k) for k in facts.keys]
    first = first_batch_mask(row_list, lost)
    scored = scored_tasks(keys, facts.binary, lost, first)
    left = set(keys) - scored
    if not left:
        return None
    lost_tasks = {str(k) for k in (lost or {}).get("by_task") or ()}
    among = np.array([k in left for k in keys], dtype=bool)
    if first is not None:
        among &= first
    n, total = len(left), len(set(keys) | lost_tasks)
    its = "its" if n == 1 else "their"
    rows_of = f"{its} first-batch rows" if first is not None else f"{its} rows"
    line = (
        f"left out: {n} of {counted(total, 'task')} {'is' if n == 1 else 'are'} not in pass@1, "
        f"pass^k or pass@k (over {counted(len(scored), 'task')}): none of {rows_of} has a "
        "0/1 grade"
    )
    if first is not None and (later := len(left & scored_tasks(keys, facts.binary, None))):
        line += (
            f" ({'it' if n == 1 else f'{later} of them'} {'has' if later == 1 else 'have'} "
            "0/1 grades only on rows an "
            "adaptive policy added, which pass@1 leaves out: they skew the rates)"
        )
    if (also := len(left & lost_tasks)) and not (lost or {}).get("counted"):
        who = "it" if n == 1 else f"{also} of them"
        line += f" ({who} also lost rollouts, not counted as failures: simulate.lost_as=excluded)"
    n_rows = int(among.sum())
    if not n_rows:
        return line
    said = counted(n_rows, "first-batch row" if first is not None else "row")
    return f"{line}; of {its} {said}, {_fixes(row_list, facts, among)}"


def _fixes(rows: list[Any], facts: Any, among: np.ndarray) -> str:
    """``Ungraded.fixes`` of the left-out rows, opening with a count when it has none."""
    fixes = Ungraded.of(rows, facts, among).fixes()
    if fixes[:1].isdigit():
        return fixes
    n = int(among.sum())
    return f"{'1 is' if n == 1 else f'{n} are'} unjudged: {fixes}"


def k_way_note(report: Mapping[str, Any]) -> str:
    """A graded stage's ``note`` as the summaries print it beside pass^k and pass@k: the
    clause counting the tasks with no graded first-batch row is left to the left-out line
    (``ungraded_tasks_line``) when the report has one, so it is said once."""
    note = str(report.get("note") or "")
    if not report.get("ungraded_tasks_line"):
        return note
    return re.sub(re.escape(BASIS_NOTE_HEAD) + r"; [^;]*(; |$)", "", note)


def fix_said_once(text: str) -> str:
    """``text`` with the plan-not-served fix (``PLAN_NOT_SERVED_FIX``) given where it first
    appears and pointed back to after: a world=mcp run's summary gave it in the grade
    warning, the left-out line and the pass^k note."""
    seen = False

    def once(match: re.Match[str]) -> str:
        nonlocal seen
        if not seen:
            seen = True
            return match.group(0)
        first = FIX_SAID_ABOVE[0].upper() if match.group(0)[0].isupper() else FIX_SAID_ABOVE[0]
        return first + FIX_SAID_ABOVE[1:]

    return re.sub(re.escape(PLAN_NOT_SERVED_FIX), once, text, flags=re.IGNORECASE)
