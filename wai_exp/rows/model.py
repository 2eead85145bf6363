"""The row, schema v1: one rollout, as simulate writes it and grading extends it.

In memory, steps are plain dicts with a ``kind`` discriminator (on disk they are row-v1
steps, ``rows.wire``):

* ``{"kind": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments": dict}]}``
* ``{"kind": "tool", "tool_call_id", "name", "arguments": dict, "result": Any,
  "status": "ok" | <fault mode>, "fault": <fault mode> | None}``
* ``{"kind": "user", "content": str}`` (a follow-up line of the simulated person)

``messages`` is the OpenAI chat transcript rebuilt from the system prompt, ``prompt``
and the steps (see ``messages_from_steps``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION: Final = "1"

#: A tool step's ``source`` when no world executed it: the agent returned the call and its
#: result (its own transcript) without making it through ``world.execute``. Its result is
#: the agent's claim, not a tool's answer. (Other sources: ``server``, ``injected``,
#: ``engine``, ``person``, set by the MCP world.)
NOT_EXECUTED: Final = "agent"


def not_executed(row: Mapping[str, Any]) -> list[str]:
    """The names of ``row``'s tool steps no world executed (``source: NOT_EXECUTED``)."""
    steps = row.get("steps")
    return [
        str(s.get("name") or s.get("tool"))
        for s in (steps if isinstance(steps, list) else ())
        if isinstance(s, Mapping) and s.get("source") == NOT_EXECUTED
    ]


#: ``ended_by``, one vocabulary for every agent kind: the agent gave its reply (``agent``),
#: the simulated person walked away on the agent's question (``user_left``), the turn limit
#: ran out (``max_turns``), the last turn was cut at the token cap or the conversation at the
#: model's context window (``truncated``; ``ended_by_raw`` ``context_full``), or the
#: agent said something else (``other``; its own word is kept in ``ended_by_raw``).
ENDED_BY = ("agent", "user_left", "max_turns", "truncated", "other")

#: Words agents use for the endings above, mapped onto the vocabulary.
_ENDED_BY_SYNONYMS = {
    "agent": "agent",
    "final": "agent",
    "stop": "agent",
    "done": "agent",
    "end_turn": "agent",
    "completed": "agent",
    "assistant": "agent",
    "user_left": "user_left",
    "user_quit": "user_left",
    "walked_away": "user_left",
    "max_turns": "max_turns",
    "turn_limit": "max_turns",
    "max_steps": "max_turns",
    "truncated": "truncated",
    "max_tokens": "truncated",
    "length": "truncated",
    "token_cap": "truncated",
    # the conversation outgrew the model's context window (HTTP 400 after the first turn)
    "context_full": "truncated",
}


def ended_by_term(value: Any) -> str:
    """``value`` as a word of ``ENDED_BY``: None (the agent just returned) is ``agent``, a
    known synonym maps onto its term, anything else is ``other``. Never raises."""
    if value is None:
        return "agent"
    return _ENDED_BY_SYNONYMS.get(str(value).strip().lower(), "other")


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class AssistantStep(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: Literal["assistant"] = "assistant"
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    logprob: float | None = None
    n_tokens: int | None = None
    truncated: bool = False


class ToolStep(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    status: str = "ok"
    fault: str | None = None


class UserStep(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: Literal["user"] = "user"
    content: str


Step = AssistantStep | ToolStep | UserStep


class Row(BaseModel):
    """One rollout. Unknown keys are kept (``extra="allow"``): later stages add their own."""

    model_config = ConfigDict(extra="allow", ser_json_inf_nan="constants")

    schema_version: Literal["1"] = SCHEMA_VERSION
    prompt: str
    messages: list[dict[str, Any]] = Field(default_factory=list)
    steps: list[dict[str, Any]] = Field(default_factory=list)
    final_text: str = ""
    scenario_id: str
    rollout_index: int = 0
    rollout_id: str = ""
    mode: str | None = None
    world_state: str | None = None
    faults: dict[str, Any] | None = None
    # The mock world's record of what each effective write changed (``tool``, ``record``,
    # ``situation_record`` and the change); None when no world kept one (a user's world).
    world_changes: list[dict[str, Any]] | None = None
    sampling: dict[str, Any] | None = None
    policy_version: str | None = None
    model_version: str | None = None
    writer_model: str | None = None
    user_model: str | None = None
    lineage: dict[str, Any] = Field(default_factory=dict)
    markers: dict[str, float] = Field(default_factory=dict)
    scenario_dimensions: dict[str, Any] = Field(default_factory=dict)
    behavior_signature: str | None = None
    arm: str | None = None
    selection_reason: str | None = None
    seed: int | None = None
    ended_by: str | None = None  # a word of ENDED_BY
    usage: dict[str, int] | None = None
    error: str | None = None
    timing: dict[str, float] | None = None
    # Added by grading.
    reward: float | None = None
    reason: str | None = None
    judge_name: str | None = None
    judge_status: str | None = None
    judge_meta: dict[str, Any] | None = None
    #: who produced the label: ``conduct`` (``grade=``), ``judge``, ``model``, or a person
    label_source: str | None = None
    calibration: dict[str, Any] | None = None
    # The teacher's answer key: in memory for judges only, never serialised.
    privileged: dict[str, Any] | None = Field(default=None, exclude=True)


#: Fields that vary between two runs of the same seed (wall-clock only).
TIMING_FIELDS = ("timing",)


def messages_from_steps(
    system_prompt: str | None, prompt: str, steps: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The OpenAI chat transcript for a rollout: system, the ask, then every step in order."""
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": prompt})
    messages.extend(step_messages(steps))
    return messages


def step_messages(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat messages of ``steps`` alone, in order (one per assistant, tool or user step;
    none for another kind): what ``messages_from_steps`` puts after the ask. Each message
    depends on its step only, so a growing rollout can append those of its new steps."""
    messages: list[dict[str, Any]] = []
    for step in steps:
        kind = step.get("kind")
        if kind == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": step.get("content", "")}
            calls = step.get("tool_calls") or []
            if calls:
                msg["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {
                            "name": c["name"],
                            "arguments": json.dumps(c.get("arguments", {}), sort_keys=True),
                        },
                    }
                    for c in calls
                ]
            messages.append(msg)
        elif kind == "tool":
            content = step.get("result")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": step.get("tool_call_id"),
                    "name": step.get("name"),
                    "content": content
                    if isinstance(content, str)
                    else json.dumps(content, sort_keys=True, default=str),
                }
            )
        elif kind == "user":
            messages.append({"role": "user", "content": step.get("content", "")})
    return messages


def row_json_schema() -> dict[str, Any]:
    """The row wire contract, row-v1 (JSON Schema 2020-12, shipped as ``rows/row-v1.json``):
    what every rows file wai-exp writes validates against (``$defs/row``; the published
    training and preference records have their own ``$defs``). A fresh copy on each call."""
    from importlib.resources import files

    return json.loads(files("wai_exp.rows").joinpath("row-v1.json").read_text(encoding="utf-8"))
