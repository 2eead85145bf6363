"""``world=``: what an agent acts through. It answers tool calls and plays the person, and
leads to nothing else.

The rollout's ``RolloutWorld`` knows the task's answer key: the situation's grid cell
(``dims``: ``world_state``, ``tool_condition``, ``stance``, ``rule``), the seeded records, the
fault plan, the situation the privileged block is written from. An agent handed that object
can read the answer off it instead of earning it. An agent is handed an ``AgentWorld``
instead: ``execute(name, arguments)`` (a copy of the tool step the row records, so an agent
that edits what it got back edits no record; ``aexecute`` for async agents),
``ask_user(question)`` / ``aask_user`` (the person's line, or None once they left),
``ended_by`` (why the person stopped answering), and the rollout's identity, ``seed`` (as
``current_rollout.seed``) and the declared ``tools``.

Why this holds for a user's callable, and not just by convention: the facade holds no
reference, direct or indirect, to the world. Its one private slot is a ``_Channel``: a lock,
a flag and a ``queue.SimpleQueue`` of requests. A request carries only what the agent
supplied (tool name, arguments, question, its own ``contextvars`` context) and a reply box
of its own. A ``WorldServer`` on an engine thread takes requests off that queue, answers each
from the world and puts the answer in the reply box. The server holds the world and the
queue; nothing the agent holds points at the server. So following attributes, ``__dict__``,
slots, closures, bound ``__self__``, ``__wrapped__``, ``functools.partial`` arguments or
``gc.get_referents`` from anything an agent is given never reaches the world, the
situation, the records, the fault plan or the privileged block
(``tests/simulate/agents/test_context_reach.py`` walks it for every agent shape). A method
of the facade is a plain function of this module: no closure over an engine object. An
error raised while answering comes back with its traceback and chain cut, since a
traceback's frames hold the world. What an answer carries is what the agent observed:
a tool step's ``status`` and ``fault`` restate its ``result`` (a timeout, an error, a
garbled answer), they say nothing about calls not yet made.

What it is not: a sandbox. Code in the same interpreter can ask the interpreter for any
object (``gc.get_objects()``, ``sys._getframe().f_back``); an agent that must be kept from
doing that has to run in a process of its own. The guarantee is about what the agent is
given: an agent (or a model writing one) that explores it finds what a deployed agent would
see, never the answer.

Our own agents (the scripted agent, the model backends) get the same facade over a direct
port (``AgentWorld.direct``): they are engine code, read to use only this API, and a thread
hop per tool call would slow the scripted agent's thousands of rollouts a second for
nothing. The scripted agent decides from the ask, the person's answers and tool results
only (``agents/scripted.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["AgentWorld", "WorldServer"]

#: What a request may ask of the world, and how the server answers it.
_KINDS = ("execute", "ask_user", "ended_by")


class _Closed(RuntimeError):
    """A call on a rollout's world after that rollout ended."""


class _Channel:
    """The agent's side of the line to a ``WorldServer``: requests go in, answers come back
    in the request's own reply box. Holds no engine object."""

    __slots__ = ("_lock", "_open", "_requests", "_in_flight")

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._open = True
        #: tool calls asked and not yet answered
        self._in_flight = 0

    def _put(self, kind: str, args: tuple[Any, ...], reply: Callable[[Any], None]) -> None:
        # Under the lock, so no request lands behind the server's stop sentinel (it would
        # wait for an answer forever).
        with self._lock:
            if not self._open:
                raise _Closed(
                    "this rollout is over: its world answers no more calls (keep no world= "
                    "object past the call it was handed to)"
                )
            # A tool call made while another was unanswered (asyncio.gather over aexecute)
            # did not see that one's result: the row records them as one parallel turn.
            parallel = False
            if kind == "execute":
                parallel = self._in_flight > 0
                self._in_flight += 1
            self._requests.put((kind, args, contextvars.copy_context(), reply, parallel))

    def _answered(self, kind: str) -> None:
        if kind == "execute":
            with self._lock:
                self._in_flight -= 1

    def call(self, kind: str, args: tuple[Any, ...]) -> Any:
        """Ask the world, wait for the answer (any thread). Raises what answering raised."""
        box: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self._put(kind, args, box.put)
        ok, value = box.get()
        self._answered(kind)
        if not ok:
            raise value
        return value

    async def acall(self, kind: str, args: tuple[Any, ...]) -> Any:
        """``call`` for a coroutine: the loop keeps running while the world answers."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[bool, Any]] = loop.create_future()

        def settle(answer: tuple[bool, Any]) -> None:
            if not fut.done():
                fut.set_result(answer)

        def reply(answer: tuple[bool, Any]) -> None:
            # A closed loop (RuntimeError) has nobody waiting for this answer.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, answer)

        self._put(kind, args, reply)
        try:
            ok, value = await fut
        finally:
            self._answered(kind)
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """Refuse new requests; the server answers those already queued, then stops."""
        with self._lock:
            if self._open:
                self._open = False
                self._requests.put(None)


class _Direct:
    """A port straight onto the world, for the engine's own agents (see the module doc)."""

    __slots__ = ("_world",)

    def __init__(self, world: Any) -> None:
        self._world = world

    def call(self, kind: str, args: tuple[Any, ...]) -> Any:
        return _answer(self._world, kind, args)

    async def acall(self, kind: str, args: tuple[Any, ...]) -> Any:
        if kind in ("ask_user", "execute"):
            # A world whose answers wait on I/O (world=mcp) answers without blocking the loop.
            ours = getattr(self._world, "a" + kind, None)
            if ours is not None:
                if kind == "execute":
                    name, arguments, call_id = args
                    return await ours(name, arguments, call_id=call_id)
                return await ours(*args)
        return _answer(self._world, kind, args)


def _answer(world: Any, kind: str, args: tuple[Any, ...]) -> Any:
    """What the world says to one request."""
    if kind == "execute":
        name, arguments, call_id = args
        if call_id is None:
            return world.execute(name, arguments)
        return world.execute(name, arguments, call_id=call_id)
    if kind == "ask_user":
        asker = getattr(world, "ask_user", None)
        return None if asker is None else asker(*args)
    return getattr(world, "ended_by", None)


class AgentWorld:
    """The world as an agent may see it (module doc): ``execute``, ``ask_user``,
    ``aask_user``, ``ended_by``, ``seed`` and ``tools``."""

    __slots__ = ("_port", "seed", "tools")

    def __init__(self, port: Any, *, seed: int | None, tools: Any) -> None:
        self._port = port
        #: the rollout's seed (``current_rollout.seed``)
        self.seed = seed
        #: the declared tools, as passed in ``tools=``
        self.tools = tools

    @classmethod
    def direct(cls, world: Any) -> AgentWorld:
        """The facade over ``world`` for the engine's own agents (no thread hop)."""
        return cls(_Direct(world), seed=getattr(world, "seed", None), tools=world.tools)

    def execute(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> dict[str, Any]:
        """Answer one tool call: the ``tool`` step (``tool_call_id``, ``name``,
        ``arguments``, ``result``, ``status``, ``fault``) the row records; a user's callable
        gets a copy of it (``WorldServer``), so editing it changes no record. Never raises
        for a bad call: an unknown tool or arguments off the schema come back as an error
        result."""
        return self._port.call("execute", (name, arguments, call_id))

    async def aexecute(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> dict[str, Any]:
        """``execute`` for async agents: the loop runs on while the world answers (a real
        MCP server's ``call_tool``)."""
        return await self._port.acall("execute", (name, arguments, call_id))

    def ask_user(self, question: str) -> str | None:
        """The person's answer to ``question``, or None once they walked away or ran out of
        turns (``ended_by`` says which)."""
        return self._port.call("ask_user", (question,))

    async def aask_user(self, question: str) -> str | None:
        """``ask_user`` for async agents: the loop runs on while the person answers."""
        return await self._port.acall("ask_user", (question,))

    @property
    def ended_by(self) -> str | None:
        """``"user_left"`` or ``"max_turns"`` once the person stopped answering, else None."""
        return self._port.call("ended_by", ())

    def __repr__(self) -> str:
        return f"AgentWorld(seed={self.seed!r}, tools={len(self.tools or ())})"


class WorldServer:
    """Serves one rollout's world to a user's agent across a ``_Channel`` (module doc).

    ``submit`` runs a callable on an engine thread (``agent_setup._Workers.submit``); the
    server occupies one such thread from construction until ``close``. ``facade`` is what the
    agent is handed."""

    def __init__(self, world: Any, submit: Callable[[Callable[[], None]], None]) -> None:
        channel = _Channel()
        self._channel = channel
        self.facade = AgentWorld(channel, seed=getattr(world, "seed", None), tools=world.tools)
        # The serving loop gets the world and the queue as arguments: neither is reachable
        # from the channel or the facade.
        requests = channel._requests
        submit(lambda: _serve(world, requests))

    def close(self) -> None:
        """End the rollout's line: later calls on the facade raise, the thread is freed
        once the calls already made are answered."""
        self._channel.close()


def _serve(world: Any, requests: queue.SimpleQueue[Any]) -> None:
    """Answer requests until the stop sentinel. Each answer runs in the caller's context
    (``current_rollout`` reads the same inside an ``execute=`` world)."""
    while (request := requests.get()) is not None:
        kind, args, ctx, reply, parallel = request
        try:
            if kind not in _KINDS:
                raise ValueError(f"unknown world request {kind!r}")
            value = ctx.run(_answer, world, kind, args)
            if parallel:
                _mark_parallel(world, value)
            # The world keeps the step it recorded, which grading reads; the agent gets its
            # own copy, so nothing it does with the answer edits the row.
            answer: tuple[bool, Any] = (True, _copied(value) if kind == "execute" else value)
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            answer = (False, _detached(exc))
        del request, args, ctx
        reply(answer)
        del reply, answer


#: The key on a world-recorded tool step made while an earlier call was unanswered;
#: ``rollout.complete_steps`` reads (and drops) it.
PARALLEL = "_parallel_with_previous"


def _mark_parallel(world: Any, step: Any) -> None:
    """Mark the world's record of ``step`` (not the dict the agent is handed)."""
    steps = getattr(world, "steps", None)
    if not isinstance(steps, list):
        return
    for i in range(len(steps) - 1, -1, -1):
        if steps[i] is step:
            steps[i] = {**step, PARALLEL: True}
            return


_IMMUTABLE = (str, int, float, bool, type(None), bytes)


def _copied(value: Any) -> Any:
    """A copy of an answer sharing no mutable part with it. Tool steps are JSON shapes, so
    dicts and lists are rebuilt by hand (about a third of ``copy.deepcopy``'s cost);
    anything else a world answers with goes through ``deepcopy``."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    if isinstance(value, _IMMUTABLE):
        return value
    return copy.deepcopy(value)


def _detached(exc: BaseException) -> BaseException:
    """``exc`` without its traceback and chain: their frames hold the world."""
    exc.__traceback__ = None
    exc.__cause__ = exc.__context__ = None
    exc.__suppress_context__ = True
    return exc
