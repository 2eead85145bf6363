"""One episode: the mock world, the simulated person and the judge, driven turn by turn.

``reset(task)`` rebuilds a published RL record's situation (``task.py``) and opens an
``Episode``: the policy's ``prompt`` messages, its ``tools`` and an ``id``. Each
``episode.step(assistant_message)`` plays one policy turn the way ``simulate``'s model agent
loop does (``simulate/agents/model_agent.py``): tool calls are answered by the rollout's
``RolloutWorld`` (faults fire as planned, at the recorded rate, from the recorded seed); a
reply that ends in a question is answered by the person (the template person, or a model one
via ``astep``); any other reply, the person walking away, or the turn cap ends the episode,
and the judge (``task_checklist`` by default) scores the row ``simulate`` would have written.

Nothing is shared between episodes but read-only setup (caches guarded by a lock), so any
number run side by side, on threads or on one asyncio loop.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wai_exp.env.task import EnvError, TaskCache, TaskSpec, read_task, row_of

if TYPE_CHECKING:
    from wai_exp.config.knobs import Knobs
from wai_exp.rows.model import step_messages

#: Policy turns before an episode is cut (``ended_by="max_turns"``), as the model agent's loop.
MAX_TURNS = 12
_TASKS = TaskCache()
_RUNNERS = TaskCache(size=64)
_IDS = itertools.count(1)
#: Seconds a model-played person's line may take (retries included) before the step fails.
USER_TIMEOUT = 60.0


@dataclass
class StepResult:
    """What one ``step`` gives back: the environment's messages (tool answers or the
    person's line, OpenAI chat shape), whether the episode is over, and once it is, the
    judge's ``reward`` and ``reason``. ``info`` holds ``turn``, ``ended_by``, ``judge``,
    the judge's ``checks`` and the faults that fired."""

    messages: list[dict[str, Any]]
    done: bool
    reward: float | None = None
    reason: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


def _world_knobs(dials: Mapping[str, Any] | None) -> Knobs:
    """The knobs ``simulate.world_setup.resolve_world`` reads, from ``situation.world``
    (the knobs' defaults where the record does not say)."""
    from wai_exp.config.knobs import validated_knobs

    dials = dials or {}
    given = {
        k: dials[k]
        for k in ("patience", "avg_turns", "user_temperature")
        if dials.get(k) is not None
    }
    return validated_knobs({**given, "world": dict(dials.get("options") or {})})


def _runner(spec: TaskSpec, policy: str, user_model: str | None = None) -> Any:
    """The ``RolloutRunner`` that builds this task's world and row, as ``simulate`` does;
    with ``user_model`` (a model spec) a model plays the person, as ``simulate(user_model=)``
    (one ``ModelUser`` per runner: its client is per event loop, so episodes share it)."""
    from wai_exp.simulate.agent_setup import ResolvedAgent
    from wai_exp.simulate.modes import resolve_config
    from wai_exp.simulate.rollout import RolloutRunner
    from wai_exp.simulate.world_setup import resolve_world

    dials = spec.situation.get("world")
    if user_model:
        from wai_exp.simulate.model_calls import check_model_spec

        try:
            check_model_spec(user_model, "user_model")
        except ValueError as exc:
            raise EnvError(str(exc)) from exc
    knobs = _world_knobs(dials)
    try:
        world = resolve_world(knobs, None)
    except ValueError as exc:
        raise EnvError(
            f"the record's situation.world is not a world this wai-exp builds: {exc}"
        ) from exc
    cfg = resolve_config(
        mode="rl", advanced=None, seed=None, until="compute", llm_grade=False, has_grader=True,
        simulator=False, user_model=user_model, logprobs=None, budget=1, runs=1, situations=None,
        time_budget=None, reproducible=True, timeout=0, requests_per_situation=None,
        rollouts_per_request=None, repeat_policy=None, unique_situations=None, fault_rate=None,
        hard_share=None, sampling=None, grade=False,
    )  # fmt: skip
    if user_model:
        from wai_exp.simulate.model_user import ModelUser

        person = ModelUser(user_model, temperature=knobs.user_temperature, timeout=USER_TIMEOUT)
        world.kwargs["user"] = person
    agent = ResolvedAgent(fn=None, model=policy, is_backend=True, identity=f"env:{policy}")
    return RolloutRunner(
        cfg, agent=agent, tools=spec.tools, system_prompt=spec.system_prompt, world=world,
        user_execute=False, grader=None, run_id="env",
    )  # fmt: skip


def _plan(spec: TaskSpec, runner: Any, seed: int | None, episode_id: str) -> Any:
    from wai_exp.simulate.replay import replay_tasks
    from wai_exp.simulate.tasks import Plan

    row = row_of(spec)

    def build() -> Any:
        tasks, _, _ = replay_tasks(
            [row], k_override=1, tools=spec.tools, options=runner.world_setup.options
        )
        return tasks[0]

    key = json.dumps([row, spec.tools, spec.situation.get("world")], sort_keys=True, default=str)
    task = _TASKS.get(key, build)
    task.arm = "env"
    return Plan(
        task=task,
        rollout_index=0,
        eval_run=0,
        seed=int(row["seed"]) if seed is None else int(seed),
        rollout_id=episode_id,
        reason="env",
    )


def _calls_of(message: Mapping[str, Any], turn: int) -> list[dict[str, Any]]:
    """The message's tool calls as steps carry them (``{"id", "name", "arguments"}``):
    OpenAI's ``{"id", "function": {"name", "arguments": JSON string}}``, TRL's arguments as
    an object, or flat ``{"name", "arguments"}``. Arguments that are not JSON reach the
    world as they came, and it answers ``invalid_arguments`` (as in ``simulate``)."""
    from wai_exp.simulate.agents.model_agent import _unique_call_ids

    raw = message.get("tool_calls") or []
    if not isinstance(raw, list | tuple):
        raise EnvError("the assistant message's tool_calls must be a list")
    calls = []
    for call in raw:
        if not isinstance(call, Mapping):
            raise EnvError(f"a tool call must be an object; got {type(call).__name__}")
        fn = call.get("function")
        if not isinstance(fn, Mapping):
            fn = call
        args = fn.get("arguments")
        if isinstance(args, str):
            # A string that is not JSON reaches the world as it came: invalid_arguments.
            with contextlib.suppress(json.JSONDecodeError):
                args = json.loads(args) if args.strip() else {}
        calls.append({"id": call.get("id"), "name": str(fn.get("name") or ""), "arguments": args})
    _unique_call_ids(calls, turn, set())
    return calls


class Episode:
    """One rollout in progress (module docstring). ``prompt`` and ``tools`` are what the
    policy sees; ``id`` names it; ``messages`` is the transcript so far; ``row`` is the
    judged row once ``done``."""

    def __init__(
        self,
        spec: TaskSpec,
        *,
        seed: int | None = None,
        judge: Callable[[dict[str, Any]], Any] | None = None,
        policy: str = "policy",
        max_turns: int = MAX_TURNS,
        user_model: str | None = None,
    ) -> None:
        key = json.dumps(
            [spec.tools, spec.system_prompt, spec.situation.get("world"), policy, user_model]
        )
        self._runner = _RUNNERS.get(key, lambda: _runner(spec, policy, user_model))
        self.id = f"ep-{next(_IDS)}"
        self.spec = spec
        self._plan = _plan(spec, self._runner, seed, self.id)
        self.world = self._runner._world(self._plan)
        self.prompt = [dict(m) for m in spec.prompt]
        self.tools = [dict(t) for t in spec.tools]
        self.task_key = spec.task_key
        self.max_turns = int(max_turns)
        self.turn = 0
        self.done = False
        self.steps: list[dict[str, Any]] = []
        self.row: dict[str, Any] | None = None
        self._judge = judge
        self._final = ""
        self._t0 = time.monotonic()

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The transcript so far: the prompt, then every turn in OpenAI chat shape."""
        return [*self.prompt, *step_messages(self.steps)]

    def _take(self, message: Any) -> list[dict[str, Any]]:
        if self.done:
            raise EnvError(f"episode {self.id} is over; call reset(task) for a new one")
        if not isinstance(message, Mapping):
            raise EnvError(
                "step() takes the policy's turn as a message dict "
                "{'role': 'assistant', 'content': ..., 'tool_calls': [...]}; "
                f"got {type(message).__name__}"
            )
        if message.get("role") != "assistant":
            raise EnvError(
                f"step() takes the policy's assistant turn; got role {message.get('role')!r}. "
                "The environment writes the tool answers and the person's lines itself."
            )
        self.turn += 1
        calls = _calls_of(message, self.turn)
        content = message.get("content")
        text = content if isinstance(content, str) else ("" if content is None else str(content))
        self.steps.append({"kind": "assistant", "content": text, "tool_calls": calls})
        return calls

    def step(self, message: Any) -> StepResult:
        """Play one assistant turn (module docstring). Raises ``EnvError`` for a message that
        is not an assistant turn, or after the episode ended."""
        calls = self._take(message)
        if calls:
            return self._tools(calls)
        answer = self._question(self.steps[-1]["content"])
        if answer is _NO_QUESTION:
            return self._end("agent")
        return self._heard(answer)

    async def astep(self, message: Any) -> StepResult:
        """``step`` for an asyncio loop: a model-played person answers on the loop."""
        calls = self._take(message)
        if calls:
            return self._tools(calls)
        text = self.steps[-1]["content"]
        if not self._asks(text):
            return self._end("agent")
        return self._heard(await self.world.aask_user(text))

    def finish(self) -> StepResult:
        """End the episode here and judge it (a trainer that stops the rollout itself)."""
        if self.done:
            raise EnvError(f"episode {self.id} is over; call reset(task) for a new one")
        return self._end("agent" if self._final else "truncated")

    # -- turns --------------------------------------------------------------------------

    def _asks(self, text: str) -> bool:
        self._final = text
        return text.rstrip().endswith("?")

    def _question(self, text: str) -> Any:
        return self.world.ask_user(text) if self._asks(text) else _NO_QUESTION

    def _tools(self, calls: list[dict[str, Any]]) -> StepResult:
        new = []
        for call in calls:
            tool_step = dict(
                self.world.execute(call["name"], call["arguments"], call_id=call["id"])
            )
            tool_step.update(kind="tool", tool_call_id=call["id"], name=call["name"])
            new.append(tool_step)
        self.steps.extend(new)
        said = step_messages(new)
        if self.turn >= self.max_turns:
            return self._end("max_turns", said)
        return StepResult(said, False, info={"turn": self.turn})

    def _heard(self, answer: str | None) -> StepResult:
        if answer is None:
            # The world says why: walked away, or out of their avg_turns // 2 lines.
            return self._end(str(self.world.ended_by or "user_left"))
        user = {"kind": "user", "content": answer}
        self.steps.append(user)
        said = step_messages([user])
        if self.turn >= self.max_turns:
            return self._end("max_turns", said)
        return StepResult(said, False, info={"turn": self.turn})

    def _end(self, ended_by: str, said: list[dict[str, Any]] | None = None) -> StepResult:
        from wai_exp.score.judges.judging import normalize_judge_result

        self.done = True
        out = {"steps": self.steps, "final_text": self._final, "ended_by": ended_by}
        row = self._runner.row(self._plan, out, self.world, time.monotonic() - self._t0)
        judge = self._judge or _checklist(self.tools)
        verdict = judge(row)
        if inspect.isawaitable(verdict):
            raise EnvError("step() takes a synchronous judge; await the judge yourself")
        norm = normalize_judge_result(verdict)
        row.pop("privileged", None)  # the answer key never leaves the episode
        row.update(reward=norm.get("reward"), reason=norm.get("reason"))
        self.row = row
        meta = norm.get("judge_meta") or {}
        return StepResult(
            said or [],
            True,
            reward=norm.get("reward"),
            reason=norm.get("reason"),
            info={
                "turn": self.turn,
                "ended_by": row.get("ended_by"),
                "judge": getattr(judge, "__name__", type(judge).__name__),
                "judge_status": norm.get("judge_status"),
                "checks": meta.get("checks"),
                "faults_fired": list(row["faults"].get("fired") or []),
            },
        )


_NO_QUESTION = object()


def _checklist(tools: list[dict[str, Any]]) -> Callable[[dict[str, Any]], Any]:
    from wai_exp.score.grade.checklist import task_checklist

    names = [str((t.get("function") or t).get("name")) for t in tools]

    def task_checklist_judge(row: dict[str, Any]) -> Any:
        return task_checklist(row, names)

    task_checklist_judge.__name__ = "task_checklist"
    return task_checklist_judge


def reset(
    task: Any,
    *,
    seed: int | None = None,
    judge: Callable[[dict[str, Any]], Any] | None = None,
    policy: str = "policy",
    max_turns: int = MAX_TURNS,
    user_model: str | None = None,
) -> Episode:
    """Open an episode of a published RL record (``task``): ``episode.prompt``,
    ``episode.tools`` and ``episode.id``; play it with ``episode.step(message)``.

    ``seed`` replaces the record's rollout seed (other fault and person draws); ``judge``
    replaces ``task_checklist`` (any judge returning the judge contract); ``policy`` names
    the model on the row; ``user_model`` (a model spec, e.g. ``vllm:<model>@<url>``) has a
    model play the person instead of the template (the world's rules of patience and
    turns still apply; ``astep`` awaits its line on the loop). Raises ``EnvError`` naming
    the fix for a record it cannot play (``task.read_task``)."""
    return Episode(
        read_task(task), seed=seed, judge=judge, policy=policy, max_turns=max_turns,
        user_model=user_model,
    )  # fmt: skip


def step(episode: Episode, message: Any) -> StepResult:
    """``episode.step(message)``."""
    if not isinstance(episode, Episode):
        raise EnvError(f"step() takes the Episode reset() returned; got {type(episode).__name__}")
    return episode.step(message)
