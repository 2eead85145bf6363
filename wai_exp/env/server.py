"""``wai_exp.env`` as an OpenEnv environment server (``openenv-core``'s ``create_app``).

``wai-exp serve-env +experiment=rl_round`` serves the run's published RL records: a client
(``openenv.core.GenericEnvClient`` or any OpenEnv client) resets an episode, optionally
choosing the task (``task=<index or task_key>``; by default the records are taken in turn)
and a ``seed``, gets the prompt messages and tools, then steps the policy's assistant
messages: ``{"message": {"role": "assistant", "content": ..., "tool_calls": [...]}}``. Each
observation holds the environment's ``messages`` (tool answers, the person's line), ``done``,
and at the end the judge's ``reward`` and ``reason``.

A bad message or task is refused by the episode (``EnvError``, naming the fix); OpenEnv
sends it back to that client as an error and the server and the session go on.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from wai_exp.env.episode import Episode, reset
from wai_exp.env.task import EnvError


class AssistantAction(Action):
    """The policy's turn: one assistant message in OpenAI chat shape."""

    message: dict[str, Any] = Field(
        ..., description="{'role': 'assistant', 'content': ..., 'tool_calls': [...]}"
    )


class EnvObservation(Observation):
    """What the environment says: on reset the ``prompt`` and ``tools``; on each step the
    new ``messages`` (tool answers, the person's line); when ``done`` the judge's
    ``reward`` and ``reason``."""

    messages: list[dict[str, Any]] = Field(default_factory=list)
    prompt: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    task_key: str = ""
    reason: str | None = None
    info: dict[str, Any] = Field(default_factory=dict)


class EnvState(State):
    """The session's episode: its task and turn."""

    task_key: str = ""
    turn: int = 0
    done: bool = False


def make_environment(records: Sequence[dict[str, Any]]) -> type[Environment]:
    """An OpenEnv ``Environment`` class over the published RL ``records`` (one instance per
    client session; the records are read-only and shared)."""
    if not records:
        raise EnvError("no RL records to serve: publish a run with selection=rl first")
    tasks = list(records)
    turns = itertools.count()
    lock = threading.Lock()

    def pick(task: Any) -> dict[str, Any]:
        if task is None:
            with lock:
                return tasks[next(turns) % len(tasks)]
        if isinstance(task, int) and not isinstance(task, bool):
            if 0 <= task < len(tasks):
                return tasks[task]
            raise EnvError(f"task={task} is out of range: this server has {len(tasks)} tasks")
        for record in tasks:
            if record.get("task_key") == task:
                return record
        raise EnvError(
            f"task={task!r} is neither an index below {len(tasks)} nor a served task_key"
        )

    class WaiExpEnv(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self.episode: Episode | None = None

        def reset(
            self,
            seed: int | None = None,
            episode_id: str | None = None,
            task: int | str | None = None,
            **_: Any,
        ) -> EnvObservation:
            self.episode = reset(pick(task), seed=seed)
            return EnvObservation(
                prompt=self.episode.prompt,
                tools=self.episode.tools,
                task_key=self.episode.task_key,
                metadata={"episode_id": episode_id or self.episode.id},
            )

        def step(
            self, action: AssistantAction, timeout_s: float | None = None, **_: Any
        ) -> EnvObservation:
            if self.episode is None:
                raise EnvError("no episode: reset first")
            result = self.episode.step(action.message)
            return EnvObservation(
                messages=result.messages,
                done=result.done,
                reward=result.reward,
                reason=result.reason,
                task_key=self.episode.task_key,
                info=result.info,
            )

        @property
        def state(self) -> EnvState:
            ep = self.episode
            if ep is None:
                return EnvState()
            return EnvState(episode_id=ep.id, step_count=ep.turn, task_key=ep.task_key,
                            turn=ep.turn, done=ep.done)  # fmt: skip

    return WaiExpEnv


def make_app(records: Sequence[dict[str, Any]], max_sessions: int = 64) -> Any:
    """The FastAPI app OpenEnv builds for ``records`` (HTTP and WebSocket endpoints)."""
    return create_fastapi_app(
        make_environment(records), AssistantAction, EnvObservation,
        max_concurrent_envs=max_sessions,
    )  # fmt: skip
