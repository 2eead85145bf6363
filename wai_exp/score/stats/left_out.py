"""The tasks a pass@1 headline leaves out because none of their rows has a 0/1 grade.

``pass_at`` groups only 0/1-graded rows, so a task whose every row is unjudged (a judge
error, a record the world did not hold, a partial reward) drops out of "over N tasks" with
no word. ``ungraded_tasks_line`` is that word: how many, of how many, why, and the fix.
Tasks that lost every rollout have no row and are said by the lost block's own sentence
(``wai_exp.simulate.lost.lost_sentence``), so they are not counted here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.score.stats.passat import Ungraded
from wai_exp.score.stats.row_facts import as_rows, row_facts


def scored_tasks(
    keys: Sequence[str], binary: np.ndarray, lost: Mapping[str, Any] | None
) -> set[str]:
    """The task keys pass@k scores: those with a 0/1-graded row, and those whose lost
    rollouts it counts as failures (``lost["counted"]``)."""
    graded = {k for k, b in zip(keys, binary.tolist(), strict=True) if b == b}  # NaN: no grade
    if lost and lost.get("counted"):
        graded |= set(map(str, lost.get("by_task") or ()))
    return graded


def ungraded_tasks_line(
    rows: Sequence[Mapping[str, Any]] | Any, lost: Mapping[str, Any] | None = None
) -> str | None:
    """One line for the tasks left out of pass@1, pass^k and pass@k because none of their
    rows has a 0/1 grade, with why and the fix (``Ungraded.fixes``); None when there are
    none. ``lost`` is the run's lost block (``wai_exp.simulate.lost.lost_summary``): its
    tasks count in the total, and a left-out task that also lost rollouts says so."""
    row_list = as_rows(rows)
    facts = row_facts(row_list)
    keys = [str(k) for k in facts.keys]
    scored = scored_tasks(keys, facts.binary, lost)
    left = set(keys) - scored
    if not left:
        return None
    lost_tasks = {str(k) for k in (lost or {}).get("by_task") or ()}
    among = np.array([k in left for k in keys], dtype=bool)
    n, total = len(left), len(set(keys) | lost_tasks)
    its = "its" if n == 1 else "their"
    line = (
        f"left out: {n} of {counted(total, 'task')} {'is' if n == 1 else 'are'} not in pass@1, "
        f"pass^k or pass@k (over {counted(len(scored), 'task')}): none of {its} rows has a "
        "0/1 grade"
    )
    if also := len(left & lost_tasks):
        who = "it" if n == 1 else f"{also} of them"
        line += f" ({who} also lost rollouts, not counted as failures: simulate.lost_as=excluded)"
    return f"{line}; of {its} {counted(int(among.sum()), 'row')}, {_fixes(row_list, facts, among)}"


def _fixes(rows: list[Any], facts: Any, among: np.ndarray) -> str:
    """``Ungraded.fixes`` of the left-out rows, opening with a count when it has none."""
    fixes = Ungraded.of(rows, facts, among).fixes()
    if fixes[:1].isdigit():
        return fixes
    n = int(among.sum())
    return f"{'1 is' if n == 1 else f'{n} are'} unjudged: {fixes}"
