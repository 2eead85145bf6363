"""Lost rollouts in the headline: how many each task category lost, and how they count.

A lost rollout (the agent raised, timed out, or its row could not be built) leaves no row.
It still spends its slot of the budget, so the task mix is the one planned; what it does to
pass@1 / pass^k / pass@k is ``lost_as``:

* ``"failure"`` (the default): a failed repeat of its task (reward 0). An agent that crashes
  on every refund ask scores 0 on those asks instead of having them leave the score.
* ``"excluded"``: left out, as an unjudged row is; a task that lost every rollout is then
  not in the score at all, and the summary names its category.

A task's category is the tool its ask is about (``scenario_dimensions["tool"]``).

* ``lost_summary``: the report block (``report()["lost"]``).
* ``lost_sentence``: that block in one line, for the summary and the MLflow description.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.domain.plurals import counted

#: What a lost rollout is in pass@1 / pass^k / pass@k (``simulate.lost_as``).
LOST_AS = ("failure", "excluded")

#: The category of an ask whose situation names no tool (a replayed row from another tool).
UNKNOWN = "unknown"


def check_lost_as(value: Any) -> str:
    """``value`` when it is one of ``LOST_AS``; raises ``ValueError`` naming both."""
    if value not in LOST_AS:
        raise ValueError(
            f"lost_as={value!r} is not one of {', '.join(LOST_AS)}: 'failure' counts a lost "
            "rollout as a failed repeat of its task, 'excluded' leaves it out of pass@k"
        )
    return str(value)


def category_of(dims: Mapping[str, Any] | None) -> str:
    """A task's category: the tool its ask is about, ``"unknown"`` when none is named."""
    tool = (dims or {}).get("tool") if isinstance(dims, Mapping) else None
    return str(tool) if tool else UNKNOWN


def lost_summary(
    dims: Sequence[Mapping[str, Any] | None],
    scenario_ids: Sequence[Any],
    lost: Sequence[Mapping[str, Any]],
    lost_as: str,
) -> dict[str, Any]:
    """The ``lost`` report block of a run's rows, given as each row's
    ``scenario_dimensions`` and ``scenario_id``, and its ``lost`` records.

    ``lost_as``; ``rollouts`` (lost) of ``attempted`` (rows + lost); ``by_category``:
    ``{category: {"lost": n, "attempted": m}}`` for every category attempted;
    ``all_lost``: the categories that lost every rollout; ``tasks_all_lost``: how many
    tasks have no row at all; ``by_task``: ``{task key: the selection_reason of each lost
    rollout}`` (what ``pass_at(lost=)`` reads); ``counted``: whether pass@k counts them
    (``lost_as == "failure"``)."""
    attempted = Counter(map(category_of, dims))
    lost_n: Counter[str] = Counter()
    by_task: dict[str, list[str | None]] = {}
    for rec in lost:
        cat = str(rec.get("category") or UNKNOWN)
        lost_n[cat] += 1
        attempted[cat] += 1
        by_task.setdefault(str(rec.get("scenario_id")), []).append(rec.get("selection_reason"))
    by_category = {
        cat: {"lost": lost_n[cat], "attempted": attempted[cat]} for cat in sorted(attempted)
    }
    return {
        "lost_as": lost_as,
        "counted": lost_as == "failure",
        "rollouts": sum(lost_n.values()),
        "attempted": sum(attempted.values()),
        "by_category": by_category,
        "all_lost": sorted(c for c, n in lost_n.items() if n == attempted[c]),
        "tasks_all_lost": len(set(by_task) - set(map(str, scenario_ids))),
        "by_task": by_task,
    }


def category_words(block: Mapping[str, Any]) -> str:
    """``"issue_refund 44 of 60, cancel_order 2 of 48"``: the categories that lost any,
    most lost first."""
    cats = block.get("by_category") or {}
    hit = sorted((c for c, v in cats.items() if v.get("lost")), key=lambda c: -cats[c]["lost"])
    return ", ".join(f"{c} {cats[c]['lost']} of {cats[c]['attempted']}" for c in hit)


def all_lost_words(block: Mapping[str, Any]) -> str:
    """``"every rollout of issue_refund asks was lost"``, or ``""``."""
    names = list(block.get("all_lost") or ())
    if not names:
        return ""
    return f"every rollout of {', '.join(names)} asks was lost"


def lost_sentence(block: Mapping[str, Any] | None) -> str | None:
    """The ``lost`` block in one line, or None when nothing was lost: how many of how many,
    per category, and which way pass@k counted them (``simulate.lost_as``)."""
    if not block or not block.get("rollouts"):
        return None
    gone = int(block.get("tasks_all_lost") or 0)
    one = gone == 1
    if block.get("counted"):
        how, tail = "counted as failures in", "scores 0" if one else "score 0"
    else:
        how, tail = "left out of", f"{'is' if one else 'are'} not in the score"
    line = (
        f"lost: {block['rollouts']} of {block['attempted']} rollouts "
        f"(by task category: {category_words(block)}), {how} pass@1, pass^k and pass@k "
        f"(simulate.lost_as={block.get('lost_as')})"
    )
    if gone:
        line += f"; {counted(gone, 'task')} lost every rollout and {tail}"
    if words := all_lost_words(block):
        line += f"; {words}"
    return line
