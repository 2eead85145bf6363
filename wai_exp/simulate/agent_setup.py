"""Who answers: ``simulate(agent=...)`` resolved into a callable, the model name rows carry,
and the identity the run id hashes."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import inspect
import json
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wai_exp.rows.model import NOT_EXECUTED

#: What the engine offers an agent beside the message. A callable takes any subset of these
#: by name, or all of them through ``**context``.
CONTEXT_KEYS = ("tools", "system_prompt", "world", "sampling")


@dataclass
class ResolvedAgent:
    """``fn(prompt, *, tools, system_prompt, world, sampling) -> dict`` (sync or async) and
    what the engine records about it."""

    fn: Any
    model: str
    #: a model-server backend (it records its own sampling and logprobs)
    is_backend: bool
    #: what the run id hashes: two arms that differ only in the agent's settings (a scripted
    #: agent's skills) must not share rollout ids
    identity: str
    warnings: list[str] = field(default_factory=list)


def resolve_agent(
    agent: Any,
    *,
    timeout: float,
    sampling: dict[str, Any] | None,
    logprobs: Any,
    avg_turns: int,
    concurrency: int = 32,
) -> ResolvedAgent:
    """``agent=None``/``"scripted"`` is the built-in scripted agent, a ``<backend>:<model>``
    string a ``ModelAgent``, a callable wrapped by ``UserAgent`` (any shape the spec allows,
    sync ones each on a thread of their own, at most ``concurrency`` at once).

    Raises ``ValueError`` for a string that is not a model spec, a value that is not
    callable, or a callable whose signature cannot take the message.
    """
    from wai_exp.simulate.agents.scripted import ScriptedAgent

    if isinstance(agent, ScriptedAgent):
        identity = repr(agent)
    elif agent is None or agent == "scripted":
        identity = repr(ScriptedAgent())
    else:
        identity = None
    fn, model, is_backend = _callable_of(
        agent, timeout=timeout, logprobs=logprobs, avg_turns=avg_turns
    )
    if not is_backend and not isinstance(agent, ScriptedAgent) and agent not in (None, "scripted"):
        identity = callable_identity(agent, model)
        fn = UserAgent(fn, concurrency=concurrency)
    resolved = ResolvedAgent(fn, model, is_backend, identity if identity is not None else model)
    if logprobs and not is_backend:
        resolved.warnings.append(
            "logprobs= is recorded by model backends only; this agent is a callable, so no logprob was captured."
        )
    if sampling and is_backend:
        own = {k: fn.sampling.get(k) for k in ("temperature", "max_tokens")}
        resolved.warnings.append(
            f"sampling={sampling} was ignored: it says how your own callable agent samples, and "
            f"the model backend {model} samples and records its own ({own}); set the agent's "
            "temperature/max_tokens instead (agent.temperature=... on the command line)"
        )
    return resolved


def _callable_of(
    agent: Any, *, timeout: float, logprobs: Any, avg_turns: int
) -> tuple[Any, str, bool]:
    """(callable, model name, is a model backend). A ``ModelAgent`` built here, or passed in
    with no ``logprobs`` of its own, records logprobs as ``simulate(logprobs=)`` asks."""
    from wai_exp.simulate.agents.scripted import ScriptedAgent

    if agent is None or agent == "scripted":
        agent = ScriptedAgent()
    if isinstance(agent, ScriptedAgent):
        # Pure and fast: call its synchronous ``run`` in the loop instead of awaiting a
        # coroutine per rollout (same rollout, no scheduling overhead).
        scripted = agent

        def run_scripted(
            prompt: str, *, tools: Any, system_prompt: Any, world: Any, sampling: Any
        ) -> dict[str, Any]:
            return scripted.run(prompt, tools=tools, world=world)

        return run_scripted, str(scripted.model_version), False
    # Imported only here: the backends pull in httpx.
    from wai_exp.llm.providers import PROVIDERS, is_model_spec
    from wai_exp.simulate.agents.model_agent import ModelAgent

    if isinstance(agent, str):
        if not is_model_spec(agent):
            raise ValueError(
                f"agent={agent!r} is not a model spec: use <backend>:<model>[@<url>] with backend one of "
                f"{list(PROVIDERS)}, 'scripted', a callable, or None for the built-in scripted agent"
            )
        a = ModelAgent(agent, timeout=timeout, logprobs=logprobs, max_turns=avg_turns)
        return a, str(getattr(a, "model_version", agent)), True
    if not callable(agent):
        raise ValueError(
            f"agent must be a callable, a model spec string or None, got {type(agent).__name__}"
        )
    if inspect.isclass(agent):
        # Calling a class builds an instance: every rollout would be lost to "the agent
        # returned <class>". Said before any work, with the fix.
        raise ValueError(
            f"agent={agent.__name__} is a class; pass an instance (agent={agent.__name__}()), "
            "whose __call__(message, ...) answers"
        )
    name = getattr(agent, "model_version", None) or callable_name(agent)
    if isinstance(agent, ModelAgent) and logprobs and agent.logprobs is None:
        agent.logprobs = logprobs  # the CLI builds the agent from agent.*, logprobs from simulate.*
    return agent, str(name), isinstance(agent, ModelAgent)


def callable_identity(agent: Any, name: str) -> str:
    """What the run id hashes for a user's callable: its name, the file that defines it and
    an instance's plain settings, so two agents of one name (a class at two ``kwargs``, a
    function before and after an edit) do not share rollout ids. Only what reads the same in
    every process goes in: a setting that is not plain data counts by its type's name."""
    owner = getattr(agent, "__self__", None) if inspect.ismethod(agent) else agent
    code = agent if inspect.isroutine(agent) else type(agent)
    try:
        source = Path(inspect.getsourcefile(code) or "").read_bytes()
    except (OSError, TypeError):
        source = b""
    settings = None if inspect.isroutine(owner) else _plain(getattr(owner, "__dict__", None))
    digest = hashlib.sha256(source + json.dumps(settings, sort_keys=True).encode()).hexdigest()
    return f"{name}#{digest[:16]}"


def _plain(value: Any) -> Any:
    """``value`` as JSON data: numbers, text, lists and dicts kept, anything else its type's
    name (its repr may carry a memory address or an unordered set)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return type(value).__qualname__


def callable_name(fn: Any) -> str:
    """A name for an agent or grader: its ``name``, ``__name__``, else its type's name."""
    if fn is None:
        return "none"
    name = getattr(fn, "name", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return str(name)


def is_async_callable(fn: Any) -> bool:
    """True for a coroutine function or an object whose ``__call__`` is one."""
    call = type(fn).__call__ if not inspect.isfunction(fn) and not inspect.ismethod(fn) else None
    return inspect.iscoroutinefunction(fn) or (
        call is not None and inspect.iscoroutinefunction(call)
    )


class UserAgent:
    """The user's own callable behind the engine's keyword contract.

    Its signature is read once: ``agent(message)``, ``agent(message, **context)`` and any
    subset of the keywords in ``CONTEXT_KEYS`` all work, and each call passes only what the
    callable takes. A sync callable runs on a thread per call, as many at once as the
    engine runs rollouts (``concurrency``; blocking user code must not hold the event loop);
    an async one is awaited in the loop. What it returns
    becomes a trajectory dict: a ``str`` is the final reply; a dict with ``steps`` or
    ``messages`` in any shape ``rows.reader.read_steps`` accepts gives internal steps, read
    beside the world's record of its ``world.execute`` calls (``steps_beside_recorded``).

    Awaiting a call raises ``TypeError`` for any other return type, ``RowShapeError`` for
    steps no shape reads, and whatever the callable raised.
    """

    def __init__(self, fn: Any, *, concurrency: int) -> None:
        self.fn = fn
        self.keys, self.all_context = context_keys(fn)
        self.is_async = is_async_callable(fn)
        self.concurrency = max(1, int(concurrency))
        self._workers: _Workers | None = None
        from wai_exp.simulate.run_health import CallTimes

        #: recent calls, read by the progress line's early warnings
        self.call_times = CallTimes()

    async def __call__(
        self, prompt: str, *, tools: Any, system_prompt: Any, world: Any, sampling: Any
    ) -> dict[str, Any]:
        offered = {"tools": tools, "system_prompt": system_prompt, "world": world,
                   "sampling": sampling}  # fmt: skip
        kwargs = offered if self.all_context else {k: offered[k] for k in self.keys}
        server = None
        if kwargs.get("world") is not None:
            # The agent acts through a facade that leads nowhere near the world's answer
            # key (``agent_world``); the world itself is served on an engine thread.
            from wai_exp.simulate.agent_world import WorldServer

            server = WorldServer(world, self._pool().submit)
            kwargs["world"] = server.facade
        token = self.call_times.start()
        try:
            out = await self._call(prompt, kwargs)
        finally:
            self.call_times.done(token)
            if server is not None:
                server.close()
        # Read once the call returned: every world.execute it made has been answered.
        return trajectory_of(prompt, out, recorded=getattr(world, "steps", None) or ())

    def _pool(self) -> _Workers:
        if self._workers is None:
            self._workers = _Workers()
        return self._workers

    async def _call(self, prompt: str, kwargs: dict[str, Any]) -> Any:
        if self.is_async:
            out = await self.fn(prompt, **kwargs)
        else:
            out = await self._in_thread(prompt, kwargs)
            if inspect.isawaitable(out):  # a sync wrapper that hands back a coroutine
                out = await out
        return out

    async def _in_thread(self, prompt: str, kwargs: dict[str, Any]) -> Any:
        """The sync call on one of this agent's worker threads (``_Workers``), so blocking
        user code never holds the event loop. Raises what the call raised."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        # The thread sees this rollout's context (``current_rollout``), as to_thread does.
        ctx = contextvars.copy_context()

        def settle(value: Any, exc: BaseException | None) -> None:
            if done.cancelled():  # the rollout gave up on it (timeout): nothing to hand back
                return
            if exc is None:
                done.set_result(value)
            else:
                done.set_exception(exc)

        def work() -> None:
            value, error = None, None
            try:
                value = ctx.run(self.fn, prompt, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting rollout
                error = exc
            # An abandoned call may return after the run ended and its loop closed.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, value, error)

        self._pool().submit(work)
        return await done

    async def aclose(self) -> None:
        """Let the worker threads go (one still in a call ends after it) and close the
        user's agent when it has an ``aclose``/``close``."""
        if self._workers is not None:
            self._workers.close()
            self._workers = None
        closer = getattr(self.fn, "aclose", None)
        if closer is not None:
            result = closer()
            if inspect.isawaitable(result):
                await result


class _Workers:
    """Daemon threads that run sync agent calls; a call never waits for a thread.

    Not a fixed pool of ``concurrency`` threads: a call that hangs past the timeout is
    abandoned by its rollout but keeps its thread, and behind it the rollouts after it
    queued and timed out without ever being called. Here a call with no idle thread starts
    a new one, so the calls in flight are bounded by the engine (at most ``concurrency``
    rollouts at once) plus the abandoned ones; idle threads are reused, so a fast agent
    pays no thread start per call. Daemon threads never hold the process at exit on a call
    that never returns."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` on an idle thread, else on a new one."""
        with self._lock:
            spawn = self._idle == 0
            if spawn:
                self._threads += 1
            else:
                self._idle -= 1  # that thread takes this job (or another queued one)
        if spawn:
            threading.Thread(target=self._work, name="wai-exp-agent", daemon=True).start()
        self._jobs.put(job)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()  # never raises: the job hands its result or error to its rollout
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """Let every thread end once it is done with its call."""
        with self._lock:
            n, self._threads = self._threads, 0
        for _ in range(n):
            self._jobs.put(None)


def context_keys(fn: Any) -> tuple[tuple[str, ...], bool]:
    """(the context keywords ``fn`` takes by name, whether it takes them all via ``**``).

    Raises ``ValueError`` when ``fn`` cannot take the message positionally or requires an
    argument the engine never passes."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return CONTEXT_KEYS, True  # a builtin with no signature: offer the whole contract
    params = list(sig.parameters.values())
    P = inspect.Parameter
    positional = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    if not positional and not any(p.kind is P.VAR_POSITIONAL for p in params):
        # agent(**kw) too: the message goes first, by position, so it would fail every call
        raise ValueError(
            f"agent {callable_name(fn)}{sig} takes no positional argument; it must take the "
            "message first: agent(message), agent(message, **context) or "
            "agent(message, *, tools, system_prompt, world, sampling)"
        )
    if any(p.kind is P.VAR_KEYWORD for p in params):
        return CONTEXT_KEYS, True
    rest = positional[1:] + [p for p in params if p.kind is P.KEYWORD_ONLY]
    takes = tuple(p.name for p in rest if p.name in CONTEXT_KEYS)
    unknown = [p.name for p in rest if p.name not in CONTEXT_KEYS and p.default is P.empty]
    if unknown:
        raise ValueError(
            f"agent {callable_name(fn)}{sig} requires {', '.join(unknown)}, which the engine "
            f"never passes; it passes the message and any of {', '.join(CONTEXT_KEYS)} by name"
        )
    return takes, False


#: The keys a dict an agent returns must have one of to be read as its trajectory.
_TRAJECTORY_KEYS = frozenset({"final_text", "steps", "messages"})


class TrajectoryConflict(ValueError):
    """The steps an agent returned and the ``world.execute`` calls it made disagree."""


def trajectory_of(
    prompt: str, out: Any, *, recorded: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """What an agent returned, as a trajectory dict: a ``str`` is the final reply; a list of
    OpenAI-style messages (or of steps), or a dict's ``steps`` (else ``messages``), are read
    into internal steps, and ``final_text`` defaults to the last assistant reply.

    ``recorded`` is what the world recorded while the agent ran (``world.execute`` and
    ``ask_user``); ``steps_beside_recorded`` says which of the two the row's steps are.
    Raises ``TypeError`` for any other type, ``RowShapeError`` for steps no shape reads,
    ``TrajectoryConflict`` for returned steps that contradict the world's record."""
    from wai_exp.rows.reader import read_steps

    if isinstance(out, str):
        return {"final_text": out}
    if (
        isinstance(out, Mapping)
        and out.get("role") == "assistant"
        and not _TRAJECTORY_KEYS & set(out)
    ):
        out = [out]  # one OpenAI message (``choices[0].message``): the reply it carries
    if isinstance(out, list | tuple) and out and all(isinstance(m, Mapping) for m in out):
        # A bare transcript: OpenAI-style messages (role/content/tool_calls), else steps.
        out = {"messages" if "role" in out[0] else "steps": list(out)}
    if not isinstance(out, Mapping):
        raise TypeError(
            f"the agent returned {type(out).__name__}; it must return the reply as a str, a "
            "list of messages, or a dict with steps (or messages) and final_text"
        )
    if not _TRAJECTORY_KEYS & set(out):
        # Read as a trajectory, such a dict is an empty reply: a row the judge fails (or
        # passes) for a plumbing slip, not for what the agent said.
        raise TypeError(
            f"the agent returned a dict with keys {sorted(map(str, out))[:8]}, none of "
            f"{sorted(_TRAJECTORY_KEYS)}; return the reply as a str, a list of messages, one "
            "assistant message ({'role': 'assistant', 'content': ...}), or a dict with steps "
            "(or messages) and final_text"
        )
    out = dict(out)
    if out.get("steps") or out.get("messages"):
        source = {"prompt": prompt, "steps": out.get("steps"), "messages": out.get("messages")}
        steps = read_steps(source)[1]
        out["steps"] = steps
        if out.get("final_text") is None:
            last = next((s for s in reversed(steps) if s.get("kind") == "assistant"), None)
            if last is not None and not last.get("tool_calls"):
                out["final_text"] = str(last.get("content") or "")
        # Every returned tool step is the agent's word until the world's record vouches
        # for it: ``steps_beside_recorded`` puts the record in place of calls it made.
        steps = claimed(steps)
        kept = steps_beside_recorded(steps, list(recorded)) if recorded else steps
        if kept is None:
            del out["steps"]  # the engine reads the world's record, as for a str reply
        else:
            out["steps"] = kept
    return out


def claimed(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``steps`` with each tool step marked ``source: NOT_EXECUTED``: what the agent says a
    tool answered, which a judge or a trainer reading the row must not take for a tool's
    answer."""
    return [{**s, "source": NOT_EXECUTED} if s.get("kind") == "tool" else s for s in steps]


def _tool_activity(steps: Sequence[Mapping[str, Any]]) -> bool:
    return any(s.get("kind") == "tool" or s.get("tool_calls") for s in steps)


def _call_of(step: Mapping[str, Any]) -> tuple[Any, Any]:
    return step.get("name"), step.get("arguments") or {}


def steps_beside_recorded(
    returned: list[dict[str, Any]], recorded: list[Mapping[str, Any]]
) -> list[dict[str, Any]] | None:
    """The row's steps when the agent both returned steps and acted through the world:
    None means the world's record (the engine reads it), else the steps to keep.

    - Returned steps with no tool call carry the reply: the world's record holds the
      calls and the person's answers, and the reply follows them, the row a str reply
      gets. Assistant turns before the reply are not placed among the calls (nothing
      says where they fell); a dialogue with no call made is kept as returned.
    - Returned tool calls beside no recorded call are the agent's own transcript: kept,
      each tool step still marked as the agent's claim (``claimed``).
    - Returned tool calls that are the recorded calls (same tools, same arguments, same
      order) are one trajectory told twice: the returned turns are kept, each tool step
      read from the world's record (its result, status and fault: what the checklist and
      the fault count read), under the returned call id its assistant turn names.
    - Anything else is two different trajectories, and the row cannot hold both: refused.
    """
    made = [s for s in recorded if s.get("kind") == "tool"]
    if not _tool_activity(returned):
        turns = [s for s in returned if s.get("kind") in ("assistant", "user")]
        if not made and len(turns) > 1:
            return returned  # a dialogue through ask_user alone: its turns are the record
        return None
    if not made:
        return returned
    said = [s for s in returned if s.get("kind") == "tool"]
    if [_call_of(s) for s in said] != [_call_of(s) for s in made]:
        raise TrajectoryConflict(
            f"the tool calls returned ({_names(said)}) are not the world.execute calls made "
            f"({_names(made)}); {_FIX}"
        )
    twins = iter(made)
    return [
        {**next(twins), "tool_call_id": s.get("tool_call_id")} if s.get("kind") == "tool" else s
        for s in returned
    ]


#: What a conflict's message tells the user to return instead (kept short: the run's closing
#: summary quotes the first error whole only up to about 300 characters).
_FIX = (
    "return the reply alone (a str or one assistant message), or the transcript whose "
    "tool calls are those world.execute calls, in order"
)


def _names(steps: Sequence[Mapping[str, Any]]) -> str:
    names = [str(s.get("name")) for s in steps[:5]]
    return ", ".join(names) + (", ..." if len(steps) > 5 else "") if names else "none"
