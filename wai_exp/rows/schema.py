"""A row as four objects: ``Task`` (the situation), ``Rollout`` (one episode), ``Judgment``
(a scorer's verdict) and ``Marker`` (one behaviour measurement).

``from_row(row)`` splits a row into them and ``to_row(...)`` flattens them back; the round
trip is exact: every key the row had comes back with the same value, no key is added, and
a key the row did not have stays absent (``user_model`` on a single-message row). Keys
this module does not know ride on the ``Rollout`` as extras.

Rows written before the ``schema_version`` stamp are version 0 and load by shape: what the
objects read (``task.prompt``, ``rollout.steps``, ``rollout.final_text``,
``judgment.reward``) is taken from the fields the row does have (``messages``, a ``score``
number, ...), without adding those fields back on ``to_row``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from wai_exp.rows.model import SCHEMA_VERSION

__all__ = [
    "JUDGMENT_FIELDS",
    "Judgment",
    "Marker",
    "Rollout",
    "RowParts",
    "TASK_FIELDS",
    "Task",
    "from_row",
    "row_version",
    "to_row",
]

#: Row keys that describe the situation, whoever answered it.
TASK_FIELDS = (
    "prompt",
    "scenario_id",
    "task_id",
    "phrasing_index",
    "scenario_dimensions",
    "world_state",
    "writer_model",
    "arm",
    "privileged",
)

#: Row keys a scorer writes: the verdict, who gave it, and second-pass scores.
JUDGMENT_FIELDS = (
    "reward",
    "reason",
    "judge_name",
    "judge_status",
    "judge_meta",
    "label_source",
    "calibration",
    "llm_reward",
    "llm_judge",
    "checks",
    "flags",
    "quality",
    "quality_reason",
    "quality_scores",
)


class _Part(BaseModel):
    # Presence is what makes the round trip exact: only the keys the row had are "set", and
    # only set keys are flattened back (``model_dump(exclude_unset=True)``).
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    def fields(self) -> dict[str, Any]:
        """The keys this part carries from its row, with their values (deep copies)."""
        return copy.deepcopy(
            {k: getattr(self, k) for k in self.model_fields_set if k in type(self).model_fields}
            | dict(self.__pydantic_extra__ or {})
        )


class Task(_Part):
    """The situation: the ask, its id and the grid cell it was drawn from."""

    prompt: Any = None
    scenario_id: Any = None
    task_id: Any = None
    phrasing_index: Any = None
    scenario_dimensions: Any = None
    world_state: Any = None
    writer_model: Any = None
    arm: Any = None
    privileged: Any = None


class Rollout(_Part):
    """One episode: the transcript, how it was sampled and run, and its lineage. Keys no
    other part claims are kept here as extras."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    schema_version: Any = None
    messages: Any = None
    steps: Any = None
    final_text: Any = None
    rollout_index: Any = None
    rollout_id: Any = None


class Judgment(_Part):
    """A scorer's verdict on one rollout, with who gave it (``judge_meta``, ``label_source``)."""

    reward: Any = None
    reason: Any = None
    judge_name: Any = None
    judge_status: Any = None
    judge_meta: Any = None
    label_source: Any = None
    calibration: Any = None
    llm_reward: Any = None
    checks: Any = None
    flags: Any = None
    quality: Any = None
    quality_reason: Any = None
    quality_scores: Any = None


class Marker(BaseModel):
    """One behaviour measurement of a rollout (an entry of the row's ``markers``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    value: Any


class RowParts(NamedTuple):
    """What ``from_row`` returns; ``to_row(*parts)`` and ``to_row(parts)`` both flatten it.

    ``judgment`` is None for a row no scorer has touched; ``markers`` is None when the row
    has no ``markers`` key (``[]`` when it has an empty one); ``version`` is the row's
    schema version (``"0"`` for a row written before the stamp).
    """

    task: Task
    rollout: Rollout
    judgment: Judgment | None
    markers: list[Marker] | None
    version: str


def row_version(row: Mapping[str, Any]) -> str:
    """``"1"`` for a stamped row, ``"0"`` for one written before the stamp. Raises
    ``ValueError`` for a version this package does not know."""
    version = row.get("schema_version")
    if version is None:
        return "0"
    if str(version) != SCHEMA_VERSION:
        raise ValueError(
            f"schema_version={version!r} is not a row version this package reads "
            f"(it reads {SCHEMA_VERSION!r} and unstamped version-0 rows)"
        )
    return SCHEMA_VERSION


def _built(cls: type[_Part], present: dict[str, Any], shaped: Mapping[str, Any]) -> Any:
    """``cls`` holding ``present`` as its set keys, plus values read by shape that are not
    marked set (so they are readable but not flattened back)."""
    part = cls.model_validate(present)
    for key, value in shaped.items():
        if key not in present:
            setattr(part, key, value)
    part.__pydantic_fields_set__ = set(present) & set(cls.model_fields)
    return part


def from_row(row: Mapping[str, Any]) -> RowParts:
    """Split ``row`` into ``RowParts(task, rollout, judgment, markers, version)``.

    Values are deep copies, so editing a part never edits the row. A version-0 row loads by
    shape (module docstring). Raises ``TypeError`` when ``row`` is not a mapping and
    ``ValueError`` for an unknown ``schema_version``.
    """
    if not isinstance(row, Mapping):
        raise TypeError(f"from_row takes one row dict, got {type(row).__name__}")
    version = row_version(row)
    data = copy.deepcopy(dict(row))
    task_in = {k: data.pop(k) for k in TASK_FIELDS if k in data}
    judged_in = {k: data.pop(k) for k in JUDGMENT_FIELDS if k in data}
    markers: list[Marker] | None = None
    if "markers" in data:
        raw = data.pop("markers")
        if isinstance(raw, Mapping):
            markers = [Marker(name=str(k), value=v) for k, v in raw.items()]
        else:  # not a name -> value map: keep it untouched on the rollout
            data["markers"] = raw
    shaped = _by_shape(row)
    task = _built(Task, task_in, {"prompt": shaped["prompt"]})
    rollout = _built(Rollout, data, {"steps": shaped["steps"], "final_text": shaped["final_text"]})
    judgment = None
    if judged_in or shaped["reward"] is not None:
        judgment = _built(Judgment, judged_in, {"reward": shaped["reward"]})
    return RowParts(task, rollout, judgment, markers, version)


def to_row(
    task: Task | RowParts,
    rollout: Rollout | None = None,
    judgment: Judgment | None = None,
    markers: Iterable[Marker] | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """Flatten the parts back into one row dict: ``to_row(*from_row(row)) == row``.

    Takes the parts, or the ``RowParts`` ``from_row`` returned. ``markers=None`` writes no
    ``markers`` key; ``version`` is informational (the row keeps the ``schema_version`` its
    rollout carries). Raises ``TypeError`` when a part is of the wrong type.
    """
    if isinstance(task, RowParts):
        task, rollout, judgment, markers, version = task
    if not isinstance(task, Task) or not isinstance(rollout, Rollout):
        raise TypeError("to_row takes a Task and a Rollout (or the RowParts from_row returned)")
    if judgment is not None and not isinstance(judgment, Judgment):
        raise TypeError(f"judgment must be a Judgment or None, got {type(judgment).__name__}")
    row: dict[str, Any] = {}
    row.update(task.fields())
    row.update(rollout.fields())
    if judgment is not None:
        row.update(judgment.fields())
    if markers is not None:
        row["markers"] = {m.name: copy.deepcopy(m.value) for m in markers}
    return row


# ---- version 0: fields read by shape -------------------------------------------------


def _by_shape(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a row means where it lacks the v1 field: the prompt and final reply from its
    ``messages`` (or a ``response``/``output``/``completion`` string), its steps rebuilt
    from ``messages``, and the reward from a numeric ``score``."""
    messages = row.get("messages")
    if not isinstance(messages, list):
        messages = []
    prompt = row.get("prompt")
    if prompt is None:
        prompt = next(
            (
                m.get("content")
                for m in messages
                if isinstance(m, Mapping) and m.get("role") == "user"
            ),
            None,
        )
    steps = row.get("steps")
    if steps is None and messages:
        steps = _steps_from_messages(messages)
    final_text = row.get("final_text")
    if final_text is None:
        for key in ("response", "output", "completion"):
            if isinstance(row.get(key), str):
                final_text = row[key]
                break
        else:
            final_text = next(
                (
                    m.get("content")
                    for m in reversed(messages)
                    if isinstance(m, Mapping) and m.get("role") == "assistant" and m.get("content")
                ),
                None,
            )
    reward = row.get("reward")
    score = row.get("score")
    if reward is None and isinstance(score, int | float) and not isinstance(score, bool):
        reward = float(score)
    return {"prompt": prompt, "steps": steps, "final_text": final_text, "reward": reward}


def _steps_from_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Row-shaped steps from an OpenAI chat transcript (the first user turn is the ask)."""
    steps: list[dict[str, Any]] = []
    seen_ask = False
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        role = m.get("role")
        if role == "user":
            if seen_ask:
                steps.append({"kind": "user", "content": str(m.get("content") or "")})
            seen_ask = True
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                fn = c.get("function", c) if isinstance(c, Mapping) else {}
                args = fn.get("arguments", {})
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        args = {"_raw": args}
                calls.append({"id": c.get("id"), "name": fn.get("name"), "arguments": args})
            steps.append(
                {"kind": "assistant", "content": str(m.get("content") or ""), "tool_calls": calls}
            )
        elif role == "tool":
            steps.append(
                {
                    "kind": "tool",
                    "tool_call_id": m.get("tool_call_id"),
                    "name": m.get("name"),
                    "arguments": {},
                    "result": m.get("content"),
                    "status": "ok",
                    "fault": None,
                }
            )
    return steps
