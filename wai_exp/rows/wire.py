"""The row on the wire: steps as the spec's row-v1 contract writes them (``row-v1.json``).

In memory the engine and every judge work on internal steps (``rows.model``); every file,
MLflow artifact and stream line carries row-v1 steps instead. ``to_wire(row)`` maps one
row's steps out (``rows.jsonl.dumps_row`` calls it for every row written) and ``from_wire``
maps them back (``iter_rows`` and the resume reader call it for every row read). For the
steps our engine writes the round trip is exact, so a row graded from its file grades
as the row in memory did. The mapping (docs/ROWS.md says it for users):

* ``{"kind": "user", "content": c}`` -> ``{"user": c}``;
* an assistant turn without tool calls -> ``{"text": content, "turn": n, ...}``, its
  ``logprob`` / ``n_tokens`` / ``truncated`` / token counts alongside;
* an assistant turn with tool calls -> one ``{"tool": name, "id", "arguments", "result",
  "status", "fault", "turn": n}`` step per call, carrying the answer that followed it. Words
  the agent said beside the calls come first as ``{"text": ..., "turn": n}`` (the schema
  lets a step be a tool step or a text step, not both); with no words the turn's token
  counts and logprob ride on its first tool step, as the spec places them;
* a call with no answer carries ``"answered": false``; an answer with no call in the
  transcript ``"called": false``.

``turn`` numbers the agent's model calls from 1: steps with the same ``turn`` are one
assistant message with several tool calls. A step this mapping cannot carry exactly (an
extra key that is a row-v1 word, a tool call with keys besides id/name/arguments, a
non-text content) is written as it is, in the internal shape, which the reader still reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.rows.reader import ASSISTANT_META, RowShapeError, _is_internal, read_steps

__all__ = ["from_wire", "to_wire", "wire_steps"]

#: Keys no carried extra may use: they mean something to the reader of a row-v1 step.
_RESERVED = frozenset(
    {"kind", "role", "tool", "text", "user", "turn", "answered", "called", "id", "error"}
)
_ASSISTANT_OWN = frozenset({"kind", "content", "tool_calls"})
_TOOL_OWN = frozenset({"kind", "tool_call_id", "name", "arguments", "result", "status", "fault"})
_CALL_KEYS = frozenset({"id", "name", "arguments"})


def _extras(step: Mapping[str, Any], own: frozenset[str]) -> dict[str, Any] | None:
    """The step's keys besides its own fields, or None when one of them is a row-v1 word."""
    extra = {k: v for k, v in step.items() if k not in own}
    return None if _RESERVED.intersection(extra) else extra


def _answer(step: Mapping[str, Any]) -> dict[str, Any] | None:
    """The row-v1 fields of a tool answer (without ``tool``/``id``/``arguments``), or None
    when they would not read back as this step."""
    status, fault = step.get("status"), step.get("fault")
    if not isinstance(status, str) or not (fault is None or (isinstance(fault, str) and fault)):
        return None
    extra = _extras(step, _TOOL_OWN)
    if extra is None:
        return None
    return {**extra, "result": step.get("result"), "status": status, "fault": fault}


def _orphan(step: Mapping[str, Any]) -> dict[str, Any] | None:
    """A tool answer whose call the transcript does not hold."""
    call_id, name, args = step.get("tool_call_id"), step.get("name"), step.get("arguments")
    answer = _answer(step)
    if answer is None or not (isinstance(call_id, str) and call_id and isinstance(name, str)):
        return None
    if not isinstance(args, dict):
        return None
    return {"tool": name, "id": call_id, "arguments": args, "called": False, **answer}


def _turn(step: Mapping[str, Any], run: Sequence[Any], turn: int) -> list[dict[str, Any]] | None:
    """Row-v1 steps of one assistant turn and the tool answers right after it, or None when
    the turn cannot be written exactly."""
    content = step.get("content")
    calls = step.get("tool_calls") or []
    meta = _extras(step, _ASSISTANT_OWN)
    if meta is None or not isinstance(content, str | None) or not isinstance(calls, list):
        return None
    content = content or ""
    wire: list[dict[str, Any]] = []
    at = 0  # answers are matched in order; the first that does not fit ends the matching
    for call in calls:
        if not isinstance(call, Mapping) or not _CALL_KEYS.issuperset(call):
            return None
        call_id, name, args = call.get("id"), call.get("name"), call.get("arguments", {})
        if not (isinstance(call_id, str) and call_id and isinstance(name, str)):
            return None
        if not isinstance(args, dict):
            return None
        out: dict[str, Any] = {"tool": name, "id": call_id, "arguments": args, "turn": turn}
        nxt = run[at] if at < len(run) else None
        answer = None
        if (
            isinstance(nxt, Mapping)
            and nxt.get("tool_call_id") == call_id
            and nxt.get("name") == name
            and nxt.get("arguments") == args
        ):
            answer = _answer(nxt)
        if answer is None:
            out["answered"] = False
        else:
            out.update(answer)
            at += 1
        wire.append(out)
    opens = bool(wire) and not content and ASSISTANT_META.issuperset(meta)
    if opens and not ASSISTANT_META.intersection(wire[0]):
        wire[0].update(meta)
    else:
        wire.insert(0, {**meta, "text": content, "turn": turn})
    for rest in run[at:]:
        wire.append(_orphan(rest) or dict(rest))
    return wire


def wire_steps(steps: Sequence[Any]) -> list[Any]:
    """Internal steps as row-v1 steps (module docstring). Steps in any other shape are
    kept as they are. Never raises."""
    out: list[Any] = []
    turn = 0
    i, n = 0, len(steps)
    while i < n:
        step = steps[i]
        kind = step.get("kind") if isinstance(step, Mapping) else None
        if kind == "assistant":
            turn += 1
            j = i + 1
            while j < n and isinstance(steps[j], Mapping) and steps[j].get("kind") == "tool":
                j += 1
            run = steps[i + 1 : j]
            encoded = _turn(step, run, turn)
            out.extend(encoded if encoded is not None else [step, *run])
            i = j
            continue
        if kind == "tool":
            out.append(_orphan(step) or step)
        elif kind == "user":
            content, extra = step.get("content"), _extras(step, frozenset({"kind", "content"}))
            if isinstance(content, str | None) and extra is not None:
                out.append({**extra, "user": content or ""})
            else:
                out.append(step)
        else:
            out.append(step)
        i += 1
    return out


#: Judge statuses named differently on the wire: row-v1 calls a judge that gave no reward
#: ``missing_reward``; in memory it is ``abstain`` (``score.judges.judging``).
_STATUS_OUT = {"abstain": "missing_reward"}
_STATUS_IN = {v: k for k, v in _STATUS_OUT.items()}


def to_wire(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """``row`` with its internal steps written as row-v1 steps and its ``judge_status`` in
    row-v1's words (a shallow copy; ``row`` itself when nothing changes)."""
    steps = row.get("steps")
    internal = (
        steps
        if isinstance(steps, list | tuple)
        and any(isinstance(s, Mapping) and "kind" in s for s in steps)
        else None
    )
    status = row.get("judge_status")
    renamed = _STATUS_OUT.get(status) if isinstance(status, str) else None
    if internal is None and renamed is None:
        return row
    out = dict(row)
    if internal is not None:
        out["steps"] = wire_steps(internal)
    if renamed is not None:
        out["judge_status"] = renamed
    return out


def from_wire(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` (a freshly parsed dict, edited in place) with row-v1 or chat-shaped steps read
    into internal steps, as every stage works on them. A row whose steps no shape reads is
    returned as it is: the judge that reads it names the step."""
    status = row.get("judge_status")
    if isinstance(status, str) and status in _STATUS_IN:
        row["judge_status"] = _STATUS_IN[status]
    steps = row.get("steps")
    if not steps or not isinstance(steps, list) or _is_internal(steps):
        return row
    with contextlib.suppress(RowShapeError):
        row["steps"] = read_steps({"prompt": row.get("prompt"), "steps": steps})[1]
    return row
