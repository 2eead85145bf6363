"""A published RL record read as an environment task: checked, and its situation rebuilt.

A task is one record of a published RL dataset (a line of ``train.jsonl``, a row of
``train.parquet``, or the ``verl`` / ``openrlhf`` shapes of the same record). What the world
needs comes from the record's ``situation`` block (``wai_exp.rows.export.situation_of``); the
world's records are rebuilt by the same replay code ``simulate(tasks=...)`` uses
(``wai_exp.simulate.replay``), never by a second world.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wai_exp.rows.export import SITUATION_VERSION, no_tools_fix

#: The fields of ``situation`` a world cannot be rebuilt without.
REQUIRED = ("prompt", "scenario_dimensions", "seed")
_REPUBLISH = (
    "publish it again with this wai-exp (`wai-exp +experiment=rl_round`, or your preset with "
    "selection=rl) and pass a record of the new publish/train.jsonl or train.parquet"
)


class EnvError(ValueError):
    """A task or message the environment cannot play; the message names the fix."""


@dataclass(frozen=True)
class ReplayGaps:
    """Why ``reset`` cannot play a record (``replay_gaps``): the situation's required
    fields it lacks, the world it was made against when that is not the mock world, and
    whether it declares no tools (the world answers only declared tools)."""

    missing: tuple[str, ...] = ()
    world: str | None = None
    no_tools: bool = False

    def __bool__(self) -> bool:
        return bool(self.missing) or self.world is not None or self.no_tools

    @property
    def tools_only(self) -> bool:
        """No tools is the only gap: the record plays once it is given its tools (with
        another gap too, ``reset`` names that one, which tools would not fix)."""
        return self.no_tools and not self.missing and self.world is None


#: Why a record with no tools cannot be played (what publish refuses before then).
NO_TOOLS_WHY = (
    "the world answers only declared tools, so every call the policy makes would be refused. "
    "The rows it was published from carry no `tools` and the publishing run named no agent "
    "spec to give them (simulate.rows without simulate.spec)"
)


def no_tools_refusal(record: Mapping[str, Any]) -> str:
    """Why ``record`` (with no tools) cannot be played, and the fix: the shipped spec whose
    system prompt the record opens with, when one does; else what to pass instead."""
    from wai_exp.simulate.spec import builtin_spec_of, builtin_specs

    sha = record_prompt_sha(record)
    spec = builtin_spec_of(sha)
    if spec:
        which = ""
    elif sha:
        shipped = ", ".join(builtin_specs())
        which = f"; the record's system prompt is none of the shipped specs' ({shipped})"
    else:
        which = "; the record has no system prompt to tell the spec by"
    return (
        f"the record has no `tools`: {NO_TOOLS_WHY}{which}; to publish them again, "
        f"{no_tools_fix(spec)}"
    )


def record_prompt_sha(record: Mapping[str, Any]) -> str | None:
    """``prompt_sha`` of the system message the record's prompt opens with, else the
    record's own ``lineage.system_prompt_sha``; None when it has neither."""
    from wai_exp.simulate.ids import prompt_sha

    try:
        prompt = _json(record.get("prompt"), "prompt")
    except EnvError:
        prompt = None
    first = prompt[0] if isinstance(prompt, list) and prompt else None
    if isinstance(first, Mapping) and first.get("role") == "system" and first.get("content"):
        return prompt_sha(str(first["content"]))
    lineage = record.get("lineage")
    sha = lineage.get("system_prompt_sha") if isinstance(lineage, Mapping) else None
    return sha if isinstance(sha, str) and sha else None


#: ``world_kind`` of a situation whose tool calls the user's own ``simulate.execute`` answered.
EXECUTE_WORLD = "execute"


@dataclass(frozen=True)
class OtherWorld:
    """How a message names a world ``wai_exp.env`` does not play (``other_world``)."""

    made_against: str  # what the records were made against
    holder: str  # where the records the tasks name live
    instead: str  # a run whose records the env can replay


def other_world(kind: str) -> OtherWorld:
    """The words for records made against world ``kind`` (a ``world_kind`` that is not
    ``mock``): the user's MCP server, or the user's own ``simulate.execute`` backend."""
    if kind == EXECUTE_WORLD:
        return OtherWorld(
            "your own backend (simulate.execute)", "your backend", "a run without simulate.execute"
        )
    return OtherWorld(
        f"your tool server (world={kind})", "your server", "a run with the default world"
    )


def world_kind(situation: Mapping[str, Any]) -> str:
    """The kind of world a situation's rollouts were played against: ``world.kind``, or
    ``execute`` when the user's own ``simulate.execute`` answered the tool calls (the mock
    world's options are still recorded then, but no mock world served a call)."""
    dials = situation.get("world")
    if isinstance(dials, Mapping) and dials.get(EXECUTE_WORLD):
        return EXECUTE_WORLD
    options = dials.get("options") if isinstance(dials, Mapping) else None
    kind = options.get("kind") if isinstance(options, Mapping) else None
    return str(kind or "mock")


def replay_gaps(situation: Any, tools: Any) -> ReplayGaps:
    """What keeps ``reset`` from playing a record with ``situation`` and ``tools`` (falsy
    when nothing does): the ``REQUIRED`` fields the situation lacks (rows another tool
    wrote), its world when that is not the mock world (``world=mcp`` or
    ``simulate.execute``: the records live on the user's server or backend, which
    ``wai_exp.env`` does not drive; the mock world it plays instead answers with records of
    its own), and no tools (rows that carry none, published with no agent spec to give
    them: every call the policy makes would be refused). Publish and its check before any
    work count records by the same rule."""
    no_tools = not (isinstance(tools, list) and tools)
    if not isinstance(situation, Mapping):
        return ReplayGaps(missing=REQUIRED, no_tools=no_tools)
    kind = world_kind(situation)
    return ReplayGaps(
        missing=tuple(k for k in REQUIRED if situation.get(k) in (None, "")),
        world=None if kind == "mock" else kind,
        no_tools=no_tools,
    )


@dataclass(frozen=True)
class TaskSpec:
    """What ``reset`` read off a record: the policy's prompt and tools, the situation and
    the reward facts."""

    prompt: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    situation: dict[str, Any]
    ground_truth: dict[str, Any]
    task_key: str

    @property
    def system_prompt(self) -> str | None:
        first = self.prompt[0] if self.prompt else {}
        return str(first.get("content") or "") if first.get("role") == "system" else None


def _json(value: Any, what: str) -> Any:
    """``value`` itself, or parsed when it is the JSON string the Parquet file holds."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise EnvError(f"the record's {what} is a string that is not JSON ({exc})") from exc
    return value


def read_task(task: Any) -> TaskSpec:
    """The ``TaskSpec`` of a published RL record. Raises ``EnvError`` naming the fix for
    anything else: not a dict, an SFT or preference record, a record with no ``situation``
    (published before situation facts were recorded, or by another tool), a situation of
    another version or missing a required field, no prompt or no tools."""
    if not isinstance(task, Mapping):
        raise EnvError(
            "reset() takes one published RL record (a dict: a line of publish/train.jsonl "
            f"or a row of train.parquet); got {type(task).__name__}"
        )
    task = _unwrap(task)
    reward_model = _json(task.get("reward_model"), "reward_model")
    truth = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else None
    truth = _json(truth, "reward_model.ground_truth")
    truth = dict(truth) if isinstance(truth, Mapping) else {}
    if "situation" not in truth:
        if "messages" in task or "chosen" in task:
            raise EnvError(
                "this is an SFT or preference record; reset() plays an RL record: publish the "
                "run with selection=rl (`wai-exp +experiment=rl_round`)"
            )
        raise EnvError(
            "this RL record has no `reward_model.ground_truth.situation` (the ask, world "
            "state, fault plan and seed the world is rebuilt from): it comes from an older "
            f"run, published before wai-exp recorded them, or from another tool; {_REPUBLISH}"
        )
    situation = _json(truth.pop("situation"), "situation")
    if not isinstance(situation, Mapping):
        raise EnvError(
            f"the record's `situation` must be an object; got {type(situation).__name__}"
        )
    if situation.get("version") != SITUATION_VERSION:
        raise EnvError(
            f"the record's situation is version {situation.get('version')!r}; this wai-exp "
            f"plays version {SITUATION_VERSION}: {_REPUBLISH}"
        )
    tools = _json(task.get("tools"), "tools")
    _refuse_gaps(replay_gaps(situation, tools), task)
    prompt = _json(task.get("prompt"), "prompt")
    if not (isinstance(prompt, list) and prompt and all(isinstance(m, Mapping) for m in prompt)):
        raise EnvError("the record has no `prompt` messages (a list of {role, content})")
    return TaskSpec(
        prompt=[
            {"role": str(m.get("role")), "content": str(m.get("content") or "")} for m in prompt
        ],
        tools=[dict(t) for t in tools],
        situation=dict(situation),
        ground_truth=truth,
        task_key=str(task.get("task_key") or situation.get("scenario_id") or ""),
    )


def _refuse_gaps(gaps: ReplayGaps, record: Mapping[str, Any]) -> None:
    """Raise ``EnvError`` naming the fix when ``gaps`` keep ``record``'s world from being
    rebuilt."""
    if gaps.missing:
        raise EnvError(
            f"the record's situation has no {', '.join(repr(k) for k in gaps.missing)}: the "
            "rows it was published from did not record them (rows read from another tool's "
            "file); publish from a wai-exp simulate run instead"
        )
    if gaps.world:
        other = other_world(gaps.world)
        raise EnvError(
            f"this record was made against {other.made_against}; wai_exp.env plays the mock "
            f"world only, and the records the task names live on {other.holder}: play rollouts "
            f"against {other.holder} and score them with a reward function of your own, or "
            f"publish from {other.instead}"
        )
    if gaps.no_tools:  # last: with the gaps above, tools alone would not make it playable
        raise EnvError(no_tools_refusal(record))


def _unwrap(task: Mapping[str, Any]) -> Mapping[str, Any]:
    """The record in the ``rl`` shape, whichever published format it came in: ``verl``
    keeps ``tools`` (and the prompt again) in ``extra_info`` for its reward function;
    ``openrlhf`` keeps everything the reward reads in its one ``label`` column."""
    if "reward_model" not in task and isinstance(task.get("label"), str):
        parsed = _json(task["label"], "label")
        if isinstance(parsed, Mapping):
            return {**task, **parsed}
    extra = _json(task.get("extra_info"), "extra_info")
    if isinstance(extra, Mapping) and not task.get("tools"):
        return {
            **task,
            "tools": extra.get("tools"),
            "prompt": task.get("prompt") or extra.get("prompt"),
            "task_key": extra.get("task_key"),
        }
    return task


def row_of(spec: TaskSpec) -> dict[str, Any]:
    """The situation as the row ``simulate.replay.replay_tasks`` rebuilds a task from."""
    s = spec.situation
    lineage = s.get("lineage")
    if not isinstance(lineage, Mapping):
        lineage = {}
    return {
        "prompt": s["prompt"],
        "scenario_id": s.get("scenario_id") or spec.task_key,
        "scenario_dimensions": dict(s["scenario_dimensions"]),
        "world_state": s.get("world_state"),
        "faults": dict(s.get("faults") or {}),
        "phrasing_index": int(s.get("phrasing_index") or 0),
        "writer_model": s.get("writer_model"),
        "seed": int(s["seed"]),
        "lineage": {"run_id": lineage.get("run_id"), "writer": lineage.get("writer")},
    }


class TaskCache:
    """Rebuilt tasks by their situation, so a GRPO group (the same record reset G times)
    pays the writer's redraw once. Thread-safe; at most ``size`` entries."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, build: Any) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = build()  # outside the lock: another task's build never waits on this one
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value
