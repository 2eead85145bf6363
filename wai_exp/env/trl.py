"""TRL's ``GRPOTrainer`` on ``wai_exp.env``: its ``environment_factory`` and the judge's reward.

    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer
    from wai_exp.env.trl import environment_factory, judge_reward

    ds = load_dataset("json", data_files="run/publish/train.jsonl", split="train")
    GRPOTrainer(model, reward_funcs=judge_reward, train_dataset=ds,
                environment_factory=environment_factory(ds), args=GRPOConfig(...)).train()

``environment_factory(records)`` returns an environment class with one method per tool of the
published records (TRL reads each method's signature and docstring into the tool schema it
renders into the prompt, so the policy sees the same schemas ``simulate``'s agent saw: name,
description, each parameter's type, description and ``enum``, and which are required; a
limit TRL's schema has no field for, ``minimum``/``maximum``, lengths, ``pattern``,
``format``, is said in words in the parameter's description).
TRL builds one instance per rollout and calls ``reset(**row)`` with the dataset row: the
instance opens a ``wai_exp.env`` episode of that record. Each tool call the policy makes is
one ``Episode.step`` (TRL calls tools one at a time), answered by the record's mock world,
faults included. ``judge_reward`` (a reward function TRL passes ``environments`` to) plays
the policy's last reply as its final turn and returns the judge's reward (``task_checklist``
unless ``environment_factory(judge=...)``).

What TRL's loop cannot do: the simulated person answers only when the rollout goes on after
the policy's words, and TRL ends a rollout at the first reply without a tool call, so a
question the policy asks is judged as its last turn (``ended_by`` is ``agent``).
"""

from __future__ import annotations

import inspect
import json
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from wai_exp.env.episode import MAX_TURNS, Episode, reset
from wai_exp.env.task import EnvError

#: JSON Schema types as the Python hints ``transformers.utils.get_json_schema`` reads back.
_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
#: Method names TRL reserves on an environment (not offered as tools).
_RESERVED = ("reset", "get_reward")


def _tools_of(source: Any) -> list[dict[str, Any]]:
    """The one tool set of ``source``: a list of tool schemas, or published RL records (a
    ``datasets.Dataset``, a list of dicts) that all declare the same tools."""
    if isinstance(source, Mapping):
        source = [source]
    items = list(source["tools"]) if _is_dataset(source) else list(source)
    if items and all(isinstance(t, Mapping) and "function" in t for t in items):
        return [dict(t) for t in items]
    sets: dict[str, list[dict[str, Any]]] = {}
    for record in items:
        tools = record.get("tools") if isinstance(record, Mapping) else record
        if isinstance(tools, str):
            tools = json.loads(tools)
        if not isinstance(tools, list) or not tools:
            raise EnvError("environment_factory takes RL records with `tools` (or a tool list)")
        sets.setdefault(json.dumps(tools, sort_keys=True, default=str), tools)
    if len(sets) != 1:
        raise EnvError(
            f"these records declare {len(sets)} different tool sets; one environment class "
            "offers one set: split the dataset by `tools` and pass TRL a dict "
            "{name: environment_factory(part)} with an `environment` column naming the part"
        )
    return [dict(t) for t in next(iter(sets.values()))]


def _is_dataset(source: Any) -> bool:
    return hasattr(source, "column_names") and "tools" in getattr(source, "column_names", ())


def _hint(schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the first concrete type
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        # list[<item hint>], built at run time: the item hint is a value, not a static type
        return types.GenericAlias(list, (_hint(schema["items"]),))
    return _TYPES.get(str(kind), str)


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


#: Schema keywords ``get_json_schema`` cannot carry, said in words in the description so
#: the policy still sees the limit a boundary task is graded on.
_LIMIT_WORDS: tuple[tuple[str, str], ...] = (
    ("minimum", "at least {}"),
    ("exclusiveMinimum", "more than {}"),
    ("maximum", "at most {}"),
    ("exclusiveMaximum", "less than {}"),
    ("minLength", "at least {} characters"),
    ("maxLength", "at most {} characters"),
    ("minItems", "at least {} items"),
    ("maxItems", "at most {} items"),
    ("pattern", "matching {}"),
    ("format", "format {}"),
)


def _limits(schema: Mapping[str, Any]) -> str:
    """``schema``'s limits in words (``" (at least 1; at most 4)"``), "" when it has none."""
    said = [
        words.format(schema[key])
        for key, words in _LIMIT_WORDS
        if isinstance(schema.get(key), int | float | str) and not isinstance(schema[key], bool)
    ]
    return f" ({'; '.join(said)})" if said else ""


def _docstring(fn: Mapping[str, Any]) -> str:
    """A Google-style docstring ``get_json_schema`` reads back into ``fn``'s schema."""
    params = (fn.get("parameters") or {}).get("properties") or {}
    lines = [_one_line(fn.get("description")) or str(fn["name"]), ""]
    if params:
        lines.append("Args:")
        for name, schema in params.items():
            desc = (_one_line(schema.get("description")) or name) + _limits(schema)
            if isinstance(schema.get("enum"), list):
                desc += f" (choices: {json.dumps(schema['enum'])})"
            lines.append(f"    {name}: {desc}")
    return "\n".join(lines)


def _method(fn: Mapping[str, Any]) -> Callable[..., str]:
    """The environment method for tool ``fn``: its signature, hints and docstring say the
    tool's schema; calling it plays the call against the episode's world."""
    name = str(fn["name"])
    if not name.isidentifier() or name in _RESERVED or name.startswith("_"):
        raise EnvError(
            f"tool {name!r} cannot be an environment method (TRL calls tools by Python method "
            f"name; {', '.join(_RESERVED)} and _private names are TRL's): rename the tool"
        )
    props = (fn.get("parameters") or {}).get("properties") or {}
    required = [p for p in (fn.get("parameters") or {}).get("required") or () if p in props]
    # The required parameters first, in the schema's order: get_json_schema lists them so.
    order = required + [p for p in props if p not in required]
    params = {p: props[p] for p in order}

    def tool(self: WaiExpEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    hints = {p: _hint(s) for p, s in params.items()}
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = _docstring({**fn, "parameters": {"properties": params}})
    # No return hint: get_json_schema would add a "return" entry the template renders.
    tool.__annotations__ = dict(hints)
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # inspect.signature reads it; typeshed's functions lack it
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [
            inspect.Parameter(
                p,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=hints[p],
                default=inspect.Parameter.empty if p in required else None,
            )
            for p in params
        ]
    )
    return tool


class WaiExpEnvironment:
    """One rollout's environment for TRL (module docstring). ``environment_factory`` makes a
    subclass with one method per tool; ``episode`` is the open ``wai_exp.env`` episode."""

    # Not functions, or _private: TRL offers every public function of the class as a tool.
    tool_names: tuple[str, ...] = ()
    _judge: tuple[Callable[[dict[str, Any]], Any] | None] = (None,)
    seed: int | None = None
    max_turns: int = MAX_TURNS

    def __init__(self) -> None:
        self.episode: Episode | None = None
        self.calls = 0

    def reset(self, **row: Any) -> None:
        """Open an episode of the dataset ``row`` (a published RL record). The prompt is the
        row's own ``prompt`` column, so nothing is appended to it."""
        self.episode = reset(row, seed=self.seed, judge=self._judge[0], max_turns=self.max_turns)
        names = tuple(str((t.get("function") or t).get("name")) for t in self.episode.tools)
        if names != self.tool_names:
            raise EnvError(
                f"this record declares tools {list(names)}, the environment offers "
                f"{list(self.tool_names)}: build environment_factory from this dataset"
            )
        self.calls = 0
        return None

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """Play one tool call as one policy turn; the world's answer is the tool result."""
        if self.episode is None:
            raise EnvError("the environment has no episode: TRL calls reset(**row) first")
        self.calls += 1
        message = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": f"call_{self.calls}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        }
        result = self.episode.step(message)
        return "\n".join(str(m.get("content") or "") for m in result.messages)

    def _finish(self, completion: Any) -> float | None:
        """Play the policy's last reply of ``completion`` (TRL's list of messages) as its
        final turn, end the episode and return the judge's reward (``None`` when the judge
        gave none)."""
        episode = self.episode
        if episode is None:
            raise EnvError("the environment has no episode: TRL calls reset(**row) first")
        if not episode.done:
            last = _final_reply(completion)
            result = episode.step({"role": "assistant", "content": last}) if last else None
            if result is None or not result.done:
                result = episode.finish()
        reward = (episode.row or {}).get("reward")
        return float(reward) if isinstance(reward, int | float) else None


def _final_reply(completion: Any) -> str:
    """The text of the completion's last assistant message without tool calls ("" if the
    rollout was cut while calling)."""
    if isinstance(completion, str):
        return completion
    messages = list(completion or ())
    if messages and isinstance(messages[-1], Mapping):
        last = messages[-1]
        if last.get("role", "assistant") == "assistant" and not last.get("tool_calls"):
            return str(last.get("content") or "")
    return ""


def environment_factory(
    records: Any,
    *,
    judge: Callable[[dict[str, Any]], Any] | None = None,
    seed: int | None = None,
    max_turns: int = MAX_TURNS,
) -> type[WaiExpEnvironment]:
    """An environment class for ``GRPOTrainer(environment_factory=...)`` (module docstring)
    over ``records`` (published RL records, a ``datasets.Dataset`` of them, or their tool
    list). ``judge`` replaces ``task_checklist``; ``seed`` replaces each record's rollout
    seed; ``max_turns`` caps the policy's turns (each tool call is one)."""
    tools = _tools_of(records)
    methods = {m.__name__: m for m in (_method(t.get("function") or t) for t in tools)}
    attrs: dict[str, Any] = {
        **methods,
        "tool_names": tuple(methods),
        "_judge": (judge,),
        "seed": seed,
        "max_turns": int(max_turns),
        "__doc__": WaiExpEnvironment.__doc__,
    }
    return type("WaiExpEnvironment", (WaiExpEnvironment,), attrs)


def judge_reward(
    completions: Iterable[Any], environments: Iterable[Any] | None = None, **_: Any
) -> list[float | None]:
    """TRL reward function: each rollout's judge reward from its environment (module
    docstring). TRL passes ``environments`` when ``environment_factory`` is set."""
    if environments is None:
        raise EnvError(
            "judge_reward needs TRL's environments: pass environment_factory=environment_factory(ds)"
        )
    return [env._finish(c) for c, env in zip(completions, environments, strict=True)]
