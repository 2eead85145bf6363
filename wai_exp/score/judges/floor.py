"""The floor: what a do-nothing agent scores on the same tasks under the same judge.

A pass@1 reads as skill only against what no work at all would score. An agent that
refuses every ask passes every task whose right answer is a refusal (on the support desk,
every adversarial ask: pass@1 0.18), and nothing in that number says so. The floor is that
number, measured: for each graded task one row is written as a do-nothing agent would
answer it (no tool call, one polite refusal, ``FLOOR_REPLY``), built from the task's own
ask and situation (``do_nothing_row``), and put to the judge that graded the run.

* ``floor`` is the floor rows' pass@1, computed as pass@1 is (``pass_at``: the mean over
  tasks and its interval).
* ``gap`` is pass@1 minus the floor over the tasks both have, with a paired task bootstrap
  interval (``delta_report``'s verdict method; ``paired_boundary_interval`` when every
  task's difference is the same and the bootstrap cannot vary), and ``verdict`` says in words
  what that interval says: ``above`` / ``below`` the floor when it excludes 0, ``at`` the
  floor when every task scores the same as the do-nothing reply, ``indistinguishable``
  otherwise.

One row per task: the reply does not vary, so a deterministic judge gives every repeat the
same verdict, and the floor costs one judge call per task (a quarter of the grade at k=4).
Only binary verdicts count, as for pass@1; a floor row the judge did not score is counted in
``n_unjudged``, never as a failure. An unmeasured floor (``unmeasured``) carries the reason
and no number.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wai_exp.domain.plurals import counted
from wai_exp.rows.keys import task_key
from wai_exp.rows.reader import first_user_text, row_messages
from wai_exp.score.stats.passat import (
    MIN_CI_GROUPS,
    N_BOOT,
    as_rows,
    first_batch,
    lost_rows,
    pass_at,
)
from wai_exp.score.stats.readers import binary_reward
from wai_exp.score.stats.resample import reward_groups
from wai_exp.score.stats.stats import paired_task_interval

__all__ = [
    "FLOOR_MODEL",
    "FLOOR_REPLY",
    "Floor",
    "compare_to_floor",
    "do_nothing_row",
    "do_nothing_rows",
    "floor_of",
    "floor_scope",
    "unmeasured_floor",
]

#: The do-nothing agent's one reply: a polite refusal that names no action.
FLOOR_REPLY = "I'm sorry, I can't help with that."
#: ``model_version`` / ``policy_version`` of a do-nothing row.
FLOOR_MODEL = "do-nothing"
#: What a row says about its task rather than its rollout: a do-nothing row keeps these and
#: nothing the agent did (steps, reward, markers, world changes, errors, usage).
TASK_FIELDS: tuple[str, ...] = (
    "schema_version",
    "scenario_id",
    "task_id",
    "prompt",
    "mode",
    "world_state",
    "scenario_dimensions",
    "phrasing_index",
    "writer_model",
    "tools",
    "system_prompt",
    "privileged",
)
_SYSTEM_ROLES = ("system", "developer")
_SEED = 0


def do_nothing_row(row: Mapping[str, Any], reply: str = FLOOR_REPLY) -> dict[str, Any]:
    """The task of ``row`` as a do-nothing agent answers it: the same ask, system prompt and
    situation (``TASK_FIELDS``), then ``reply`` as the one assistant turn with no tool call.

    The fault plan is kept with nothing fired (no tool was called); ``ended_by`` is
    ``agent``. The ask is ``row["prompt"]``, else the first user turn of its transcript.
    Never raises on a row dict; the input is not modified.
    """
    out: dict[str, Any] = {k: row[k] for k in TASK_FIELDS if k in row}
    transcript = row_messages(row)
    prompt = row.get("prompt") if isinstance(row.get("prompt"), str) else None
    if prompt is None:
        prompt = first_user_text(transcript) or ""
    out["prompt"] = prompt
    messages: list[dict[str, Any]] = []
    if isinstance(transcript, list | tuple):
        # The system turns that open the transcript: the policy the judge may read.
        for msg in transcript:
            if not (isinstance(msg, Mapping) and msg.get("role") in _SYSTEM_ROLES):
                break
            messages.append(dict(msg))
    if not messages and isinstance(row.get("system_prompt"), str) and row["system_prompt"]:
        messages.append({"role": "system", "content": row["system_prompt"]})
    messages += [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]
    out["messages"] = messages
    out["steps"] = [{"kind": "assistant", "content": reply, "tool_calls": []}]
    out["final_text"] = reply
    out["ended_by"] = "agent"
    out["world_changes"] = []
    out["markers"] = {}
    faults = row.get("faults")
    out["faults"] = {**faults, "fired": []} if isinstance(faults, Mapping) else None
    out["model_version"] = FLOOR_MODEL
    out["policy_version"] = FLOOR_MODEL
    out["rollout_index"] = 0
    out["rollout_id"] = f"floor-{task_key(row)}"
    return out


def do_nothing_rows(
    rows: Sequence[Mapping[str, Any]] | Any, reply: str = FLOOR_REPLY
) -> list[dict]:
    """One ``do_nothing_row`` per task (``task_key``) of ``rows``, from each task's first row,
    in the order the tasks first appear. Rows with no task key are skipped."""
    seen: set[str] = set()
    out: list[dict] = []
    for row in as_rows(rows):
        key = task_key(row)
        if key == "" or key in seen:
            continue
        seen.add(key)
        out.append(do_nothing_row(row, reply))
    return out


@dataclass
class Floor:
    """A do-nothing agent's pass@1 beside the agent's (see the module docstring).

    ``floor`` / ``ci95`` / ``ci_method`` as ``PassAt``'s pass@1; ``n_tasks`` (tasks the floor
    was measured on), ``n_unjudged`` (floor rows with no binary verdict), ``gap`` /
    ``gap_ci95`` (pass@1 minus floor over ``n_paired`` tasks), ``verdict`` (``above``,
    ``below``, ``at``, ``indistinguishable``, or None when not compared), ``note`` (why a
    number is missing). ``floor`` None means not measured, never 0.
    """

    floor: float | None
    ci95: tuple[float, float] | None = None
    ci_method: str | None = None
    n_tasks: int = 0
    n_unjudged: int = 0
    gap: float | None = None
    gap_ci95: tuple[float, float] | None = None
    n_paired: int = 0
    verdict: str | None = None
    note: str = ""
    reply: str = FLOOR_REPLY

    @property
    def measured(self) -> bool:
        return self.floor is not None

    def words(self) -> str:
        """The verdict in words, matching the gap's interval."""
        if self.floor is None:
            return f"floor not measured ({self.note or 'no reason given'})"
        if self.verdict is None:
            return f"pass@1 not compared with the floor ({self.note or 'no paired task'})"
        gap = f"pass@1 - floor {self.gap:+.3f}" if self.gap is not None else "pass@1 - floor n/a"
        ci = (
            f" (95% CI {self.gap_ci95[0]:+.3f} to {self.gap_ci95[1]:+.3f})"
            if self.gap_ci95 is not None
            else ""
        )
        tail = {
            "at": f"the same score as the do-nothing reply on every one of the {self.n_paired} tasks",
            "above": "the interval excludes 0",
            "below": "a do-nothing reply scores higher; the interval excludes 0",
            "indistinguishable": "the interval includes 0",
        }[self.verdict]
        head = {
            "at": "at the floor",
            "above": "above the floor",
            "below": "BELOW the floor",
            "indistinguishable": "not distinguishable from the floor",
        }[self.verdict]
        # Paired over the tasks both were scored on, which are fewer than pass@1's when a
        # task lost every rollout: say so, or the gap reads as the two headlines' difference.
        return f"{head}: {gap}{ci} over {self.n_paired} paired tasks; {tail}"

    def __str__(self) -> str:
        if self.floor is None:
            return self.words()
        ci = "" if self.ci95 is None else f" [{self.ci95[0]:.2f}..{self.ci95[1]:.2f}]"
        note = f"; {self.note}" if self.note else ""
        return (
            f"floor {self.floor:.2f}{ci} (do-nothing agent: no tool call, one refusal; "
            f"{self.n_tasks} tasks{note}) | {self.words()}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field under its name, intervals as lists, plus ``words``."""

        def as_list(ci: tuple[float, float] | None) -> list[float] | None:
            return None if ci is None else [float(ci[0]), float(ci[1])]

        return {
            "floor": self.floor,
            "ci95": as_list(self.ci95),
            "ci_method": self.ci_method,
            "n_tasks": self.n_tasks,
            "n_unjudged": self.n_unjudged,
            "gap": self.gap,
            "gap_ci95": as_list(self.gap_ci95),
            "n_paired": self.n_paired,
            "verdict": self.verdict,
            "words": self.words(),
            "note": self.note,
            "reply": self.reply,
        }

    def metrics(self) -> dict[str, float]:
        """``floor``, ``floor_ci_lo``/``_hi``, ``floor_gap``, ``floor_gap_ci_lo``/``_hi``: only
        what was measured (an unmeasured floor gives no metric, never a 0)."""
        out: dict[str, float] = {}
        if self.floor is None:
            return out
        out["floor"] = float(self.floor)
        if self.ci95 is not None:
            out["floor_ci_lo"], out["floor_ci_hi"] = float(self.ci95[0]), float(self.ci95[1])
        if self.gap is not None:
            out["floor_gap"] = float(self.gap)
            if self.gap_ci95 is not None:
                out["floor_gap_ci_lo"] = float(self.gap_ci95[0])
                out["floor_gap_ci_hi"] = float(self.gap_ci95[1])
        return out


def floor_scope(floor: Mapping[str, Any], n_tasks: int | None) -> str:
    """Which of pass@1's ``n_tasks`` tasks the floor (a ``Floor.to_dict()``) was measured
    on, in words, then its note when it has one: ``the same tasks``, or ``39 of the 50
    tasks; 11 tasks lost every rollout ...``. Never raises."""
    n = floor.get("n_tasks")
    same = not (isinstance(n, int) and isinstance(n_tasks, int) and n != n_tasks)
    where = "the same tasks" if same else f"{n} of the {n_tasks} tasks"
    note = floor.get("note")
    return where + (f"; {note}" if note else "")


def unmeasured_floor(reason: str) -> Floor:
    """A floor that was not measured, and why (the fix, where there is one)."""
    return Floor(floor=None, note=reason)


#: ``{task key: [selection_reason of each lost rollout]}``, as ``pass_at(lost=)`` takes it.
Lost = Mapping[str, Sequence[str | None]]


def _agent_rates(rows: Sequence[Mapping[str, Any]], lost: Lost | None) -> dict[str, float]:
    """The agent's per-task pass rate as pass@1 reads it: lost rollouts counted as failed
    repeats (``pass_at(lost=)``), an adaptive run's first batch."""
    kept, _ = first_batch([*rows, *lost_rows(lost)])
    return reward_groups(kept).per_task()


def compare_to_floor(
    rows: Sequence[Mapping[str, Any]] | Any,
    floor_rows: Sequence[Mapping[str, Any]] | Any,
    reply: str = FLOOR_REPLY,
    lost: Lost | None = None,
) -> Floor:
    """The floor from graded do-nothing rows (``floor_rows``), compared with the agent's
    graded ``rows`` task by task; ``lost`` counts lost rollouts as the agent's failures, as
    ``pass_at(lost=)`` does. A task that lost every rollout left no row, so no ask to answer:
    the floor and the gap leave it out and the note says how many. Pure; never raises on
    row dicts."""
    row_list = as_rows(rows)
    agent = _agent_rates(row_list, lost)
    scored = as_rows(floor_rows)
    unjudged = sum(1 for r in scored if binary_reward(r) is None)
    pa = pass_at(scored)
    if pa.pass_at_1 is None:
        return Floor(
            floor=None,
            n_unjudged=unjudged,
            note=f"the judge gave none of the {len(scored)} do-nothing rows a pass/fail verdict",
            reply=reply,
        )
    notes: list[str] = []
    with_rows = {task_key(r) for r in row_list}
    all_lost = sum(1 for key in lost or {} if key not in with_rows)
    if all_lost:
        them, counts = (
            ("it", "counts it as a failure")
            if all_lost == 1
            else ("them", "counts them as failures")
        )
        notes.append(
            f"{counted(all_lost, 'task')} lost every rollout and left no ask to answer: the "
            f"floor leaves {them} out (pass@1 {counts})"
        )
    if unjudged:
        notes.append(
            f"{counted(unjudged, 'do-nothing row')} got no verdict and "
            f"{'is' if unjudged == 1 else 'are'} left out"
        )
    if pa.ci95 is None:
        notes.append(f"the floor's interval needs >= {MIN_CI_GROUPS} tasks, has {pa.n_groups}")
    paired = [k for k in pa.per_task if k in agent]
    gap = gap_ci = verdict = None
    if paired:
        a = np.array([pa.per_task[k] for k in paired])
        b = np.array([agent[k] for k in paired])
        diffs = b - a
        gap = float(diffs.mean())
        if len(paired) < MIN_CI_GROUPS:
            notes.append(
                f"the gap's interval needs >= {MIN_CI_GROUPS} paired tasks, has {len(paired)}"
            )
        else:
            iv, _, _ = paired_task_interval(a, b, n_boot=N_BOOT, seed=_SEED)
            if iv is not None:
                gap_ci = (float(iv.low), float(iv.high))
        if not np.any(diffs):
            verdict = "at"
        elif gap_ci is not None:
            verdict = (
                "above" if gap_ci[0] > 0 else "below" if gap_ci[1] < 0 else "indistinguishable"
            )
    else:
        notes.append("no task has both a graded agent row and a graded do-nothing row")
    return Floor(
        floor=float(pa.pass_at_1),
        ci95=pa.ci95,
        ci_method=pa.ci_method,
        n_tasks=pa.n_groups,
        n_unjudged=unjudged,
        gap=None if gap is None or not math.isfinite(gap) else gap,
        gap_ci95=gap_ci,
        n_paired=len(paired),
        verdict=verdict,
        note="; ".join(notes),
        reply=reply,
    )


def floor_of(
    rows: Sequence[Mapping[str, Any]] | Any,
    judge: Any,
    *,
    reply: str = FLOOR_REPLY,
    prepare: Callable[[list[dict]], list[dict]] | None = None,
    lost: Lost | None = None,
    **run_judge_kwargs: Any,
) -> Floor:
    """The floor of graded ``rows``: one ``do_nothing_row`` per task that pass@1 counts (a
    task with a binary verdict), judged by ``judge`` through ``run_judge`` (which takes
    ``run_judge_kwargs``: ``judge_name``, ``concurrency``, ``timeout``, ``scale``, ``tools``
    ...), then ``compare_to_floor`` (with ``lost``). ``prepare`` is applied to the do-nothing rows before
    they are judged (the pipeline adds the teacher's block there, as it does to every row it
    grades). Raises what ``run_judge`` raises for a bad judge."""
    from wai_exp.score.judges.judging import run_judge

    row_list = as_rows(rows)
    counted = [r for r in first_batch(row_list)[0] if binary_reward(r) is not None]
    if not counted:
        return unmeasured_floor("no graded task to measure it on")
    synth = do_nothing_rows(counted, reply)
    if prepare is not None:
        synth = prepare(synth)
    run_judge_kwargs.setdefault("source", "floor")
    scored = run_judge(synth, judge, **run_judge_kwargs)
    return compare_to_floor(row_list, scored.rows, reply, lost)
