"""One stage's rollouts on several processes: ``simulate.workers`` and ``simulate.cluster``.

The parent keeps everything that decides *which* rollouts run: the planner, the stop rules
(``budget``, ``time_budget``, ``situations``, ``until``, the dead-agent stop), the adaptive
allocation (``split``/``verify``, ``grader=`` verdicts), landing in plan order, the partial
file, the progress line and the report. Only running a planned rollout moves: each plan is
sent to the shard that owns its situation (a stable hash of ``scenario_id``, weighted by
each shard's share; the stage's own process while a worker is still starting) and its
outcome streams back. A rollout's row depends only on its plan (its
seed is a hash of the seed, the situation, the phrasing, the rollout index and the run), and
the planner reads only rows landed before in plan order, so the rows are the same at any
worker count, byte for byte once ``timing`` is removed.

Locally (``cluster: local``) the stage's own process is shard 0 and runs a share of the
rollouts itself, on its own runner; ``workers - 1`` worker processes (``python -m
wai_exp.simulate.shards``) run the rest, spoken to over their stdin/stdout in frames (one
length-prefixed list of messages per pass of the event loop: pickled to a worker, marshalled
from it, ``_FrameCodec``), from the parent's event loop. A parent that only planned,
received and landed spent two thirds of the CPU a row that one process spends making it, so
two workers beside it ran slower than one process. On Ray
(``cluster: ray``, on ``ray.address``) every shard is an actor. Each shard builds its own agent,
world and judge from a picklable ``setup`` (the pipeline's config, re-read in the worker),
so nothing unpicklable (HTTP clients, open servers) crosses a process boundary.

A shard that dies (SIGKILL, OOM) fails the rollouts it had in flight with ``WorkerDied``,
naming it; the engine lets the other shards' rollouts land (their rows reach the partial
file) and stops the stage, so the same command resumes with the same rows.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import marshal
import os
import pickle
import resource
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from wai_exp.llm.loop import send_requests_first
from wai_exp.rows.jsonl import StringSharer
from wai_exp.simulate.ids import stable_hash
from wai_exp.simulate.rollout import Outcome
from wai_exp.simulate.tasks import Plan

#: Where a stage's shards run.
CLUSTERS = ("local", "ray")

_HEADER = struct.Struct("!I")
#: Every pickled frame's protocol, both ways.
_PROTOCOL = pickle.HIGHEST_PROTOCOL


#: At most this many messages to a frame: a worker running a sync agent finishes a whole
#: frame of plans in one pass of its loop, and held every result to the pass's end while the
#: parent sat idle; a frame of 8 goes back as soon as it is full, and the parent lands,
#: plans and sends more while the worker runs the rest (offline 3,270 -> 3,490 rows/s).
_FRAME_MAX = 8

#: How often a shard's early warning (a hung or queueing model server) reaches the stage: the
#: progress line's "no model call has come back for N s" counts seconds.
_HEALTH_EVERY_S = 1.0

#: How long a run whose rows are all in waits for a worker none of them reached to say
#: whether it started (``ShardedRunner.raise_start_failure``).
_START_WAIT_S = 30.0


@dataclass(frozen=True)
class ShardSpec:
    """How many shards and where. ``setup()`` (picklable: a module-level function or a
    ``functools.partial`` of one) returns ``(agent, simulate kwargs)`` inside a shard."""

    workers: int
    setup: Callable[[], tuple[Any, dict[str, Any]]]
    cluster: str = "local"
    ray_address: str | None = None

    @property
    def active(self) -> bool:
        """Whether rollouts leave the parent process at all."""
        return self.workers > 1 or self.cluster == "ray"


class WorkerNotStarted(RuntimeError):
    """A worker process could not build its runner (its setup raised, or it exited)."""


class WorkerDied(RuntimeError):
    """A shard process ended while rollouts were in flight on it."""

    def __init__(self, index: int, detail: str, in_flight: int) -> None:
        self.index, self.detail, self.in_flight = index, detail, in_flight
        super().__init__(
            f"simulate worker {index} ({detail}) died with {in_flight} rollouts in flight; "
            "the rollouts other processes had finished landed first"
        )


class _Outbox:
    """Messages to the other side of a pipe. The messages queued in one pass of the event
    loop go out as one frame: one encoded list, one write (at most ``_FRAME_MAX`` messages).
    A write per message cost a system call per rollout each way; and one encoding over a
    frame's rows writes each key and shared text once (the system prompt in ``messages``, a
    situation's hidden state), so decoding a row takes half the time it took alone.
    ``encode`` turns a frame's messages into its body (a pickle; ``_FrameCodec.encode`` on a
    worker)."""

    def __init__(
        self,
        write: Callable[[bytes], Any],
        unpicklable: Callable[[Any, Exception], Any],
        encode: Callable[[list[Any]], bytes] | None = None,
    ) -> None:
        self._write = write
        #: what goes instead of a message that cannot be pickled (None: nothing)
        self._unpicklable = unpicklable
        self._encode = encode or _pickled
        self._msgs: list[Any] = []

    def put(self, msg: Any) -> None:
        if not self._msgs:
            asyncio.get_running_loop().call_soon(self.flush)
        self._msgs.append(msg)
        if len(self._msgs) >= _FRAME_MAX:
            self.flush()

    def flush(self) -> None:
        msgs, self._msgs = self._msgs, []
        if not msgs:
            return
        try:
            body = self._encode(msgs)
        except Exception:  # noqa: BLE001 - one message's fault: find it, send the rest
            body = self._encode([m for m in map(self._picklable, msgs) if m is not None])
        with contextlib.suppress(ConnectionError, RuntimeError):
            # fails when the other side is gone: its reader reports that
            self._write(_HEADER.pack(len(body)) + body)

    def _picklable(self, msg: Any) -> Any:
        try:
            pickle.dumps(msg, protocol=_PROTOCOL)  # nothing else: encoding has effects
        except Exception as exc:  # noqa: BLE001 - whatever pickle raises, that message fails
            return self._unpicklable(msg, exc)
        return msg


def _pickled(msgs: list[Any]) -> bytes:
    return pickle.dumps(msgs, protocol=_PROTOCOL)


class _FrameCodec:
    """A worker's frames to the stage: ``marshal`` when every message in the frame allows
    it, else pickle (a user's own type in a row: a ``str`` or ``dict`` subclass). The
    stage unmarshals a frame of rows in about two thirds of the time unpickling took
    (no memo, no class lookups), and the worker encodes it faster too.

    Strings the worker's rows share (keys, the system prompt in ``messages``, tool names)
    must arrive shared, or each row in the stage owns a copy of every one (at 100,000 rows
    the system prompt alone is some 200 MB). ``marshal`` writes a string interned in the
    worker as interned, and loading interns it again, so every row's copy is the stage's
    one object. The worker interns, in place, the strings its sampled rows share
    (``_shared_strings``): it looks into the first row it sends and one in every
    ``_SAMPLE_EVERY`` after, ``_SAMPLES`` rows in all, since what its rows share shows in
    the first few. Rows of a pickled frame are rebuilt on shared strings in the stage
    (``StringSharer``), as a Ray actor's are."""

    def __init__(self, sample: Callable[[Any], Any] = lambda msg: None) -> None:
        #: what of a message to look into for shared strings (None: nothing)
        self._sample = sample
        self._seen = 0  # messages looked at for a sample

    def encode(self, msgs: list[Any]) -> bytes:
        """A frame's body: its kind (one byte), then ``msgs`` marshalled or pickled."""
        self._intern_shared(msgs)
        try:
            return _MARSHALLED + marshal.dumps(msgs)
        except ValueError:  # an object marshal does not take
            return _PICKLED + pickle.dumps(msgs, protocol=_PROTOCOL)

    def _intern_shared(self, msgs: list[Any]) -> None:
        found: dict[int, str] = {}
        for msg in msgs:
            if self._seen >= _SAMPLE_EVERY * _SAMPLES:
                break
            value = self._sample(msg)
            if value is None:
                continue
            if self._seen % _SAMPLE_EVERY == 0:
                _shared_strings(value, found)
            self._seen += 1
        for text in found.values():
            sys.intern(text)  # in place, unless an equal string was interned before


def _decoder(share: Callable[[Any], Any]) -> Callable[[bytes], list[Any]]:
    """What reads a worker's frame body in the stage; ``share`` rebuilds a pickled frame's
    rows on shared strings (a marshalled frame's arrive shared: ``_FrameCodec``)."""

    def decode(body: bytes) -> list[Any]:
        data = memoryview(body)[1:]
        if body[:1] == _MARSHALLED:
            msgs: list[Any] = marshal.loads(data)
            return msgs
        msgs = pickle.loads(data)
        return [_shared_msg(msg, share) for msg in msgs]

    return decode


def _shared_msg(msg: tuple[Any, ...], share: Callable[[Any], Any]) -> tuple[Any, ...]:
    row = _row_of(msg)
    return msg if row is None else (*msg[:2], share(row), *msg[3:])


_MARSHALLED, _PICKLED = b"m", b"p"
#: The worker looks into the first row it sends and one in every ``_SAMPLE_EVERY`` after,
#: ``_SAMPLES`` rows in all (``_FrameCodec``).
_SAMPLE_EVERY = 32
_SAMPLES = 64
#: A string with more references than this in the worker is shared by its rows (a key, the
#: system prompt, a tool's name); a reply, an id or an argument has two or three.
_SHARED_REFS = 16


def _shared_strings(value: Any, found: dict[int, str]) -> None:
    """Add to ``found`` (by ``id``) the strings in ``value`` (keys too, any depth) that look
    shared: 2 characters or more, referenced from more than ``_SHARED_REFS`` places."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            if len(item) > 1 and sys.getrefcount(item) > _SHARED_REFS:
                found[id(item)] = item
        elif kind is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)


async def _read_frame(
    stream: asyncio.StreamReader, decode: Callable[[bytes], list[Any]] = pickle.loads
) -> list[Any]:
    """The next frame's messages (``asyncio.IncompleteReadError`` at the end of the pipe)."""
    head = await stream.readexactly(_HEADER.size)
    msgs: list[Any] = decode(await stream.readexactly(_HEADER.unpack(head)[0]))
    return msgs


def _check_picklable(init: tuple[Any, ...]) -> None:
    """Refuse, naming the fix, a setup that cannot reach a worker process (its agent or
    keyword arguments hold a closure, a lambda, a lock or an open client)."""
    try:
        pickle.dumps(init, protocol=_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - whatever pickle raises, the setup cannot go
        raise TypeError(
            f"simulate workers: the shards' setup cannot be sent to a worker process "
            f"({type(exc).__name__}: {exc}). Each worker builds its own agent from the setup, "
            "so the agent must be picklable: a model spec string, or a function or class "
            "defined at a module's top level (not a lambda, a closure or an object holding a "
            "lock or an open client; build those inside the agent on its first call)"
        ) from exc


def same_arguments(agent: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A ``setup`` for a Python caller: ``functools.partial(same_arguments, agent, kwargs)``
    with a picklable agent (a model spec string, a module-level function) and kwargs."""
    return agent, dict(kwargs)


def shard_of(scenario_id: str, shares: Sequence[int]) -> int:
    """The shard that owns a situation (all its rollouts run there): shard ``i`` owns
    ``shares[i]`` of every ``sum(shares)`` situations, by a stable hash of the id."""
    slot = stable_hash(scenario_id) % sum(shares)
    for index, share in enumerate(shares):
        if slot < share:
            return index
        slot -= share
    raise AssertionError("unreachable: slot < sum(shares)")


#: Rollouts the stage keeps for itself when its workers run a sync agent: the workers'
#: queues hold the rest of ``knobs.concurrency`` (``worker_backlog``).
_STAGE_SLOTS = 2


def worker_backlog(concurrency: int, workers: int) -> int:
    """Each local worker's queue at most when the agent is sync: ``concurrency`` less the
    stage's ``_STAGE_SLOTS``, split over the workers (at least one each)."""
    return max(1, -(-(concurrency - _STAGE_SLOTS) // max(1, workers - 1)))


def local_shares(workers: int) -> tuple[int, ...]:
    """Each local shard's share of the situations an async agent's rollouts are hashed by
    (a sync agent's go by queue: ``ShardedRunner._least_queued``): the stage's own process
    (shard 0) runs rollouts too, as one of the ``workers``, and takes half a worker's share
    because it also plans, lands, stops and reports for all of them. Over HTTP at c=128 an
    even split measured within the spread of this one (workers-crossing-2026-12-06.md)."""
    return (1, *(2,) * (workers - 1))


#: a ``Plan``'s fields after its task, in order (what ``_LocalShard._wire`` sends)
_PLAN_FIELDS = ("rollout_index", "eval_run", "seed", "rollout_id", "reason")


def _shared(out: Any, share: StringSharer) -> Any:
    """``out`` (an ``Outcome`` from a Ray actor) with its row rebuilt on the stage's shared
    strings: Ray unpickles each result alone, so each row owns a copy of every key and text
    the stage's own rows share (a local worker's rows share them through ``_FrameCodec``)."""
    if out.row is not None:
        out.row = share(out.row)
    return out


def _slim(plan: Any) -> Any:
    """The plan without its task's landed rows (a shard never reads them; shipping them
    would grow each message with the group)."""
    return replace(plan, task=replace(plan.task, landed=[]))


# ---- the parent's side ---------------------------------------------------------------------


class _Process:
    """A worker process (``python -m wai_exp.simulate.shards``) and its pipes. Started with
    ``subprocess`` rather than asyncio's, so that it can start before the stage's event loop
    exists (``prestart``) and be taken up by that loop once it runs (``pipes``)."""

    def __init__(self, *, spare: bool = False) -> None:
        # Its own process group: a terminal's Ctrl-C reaches the stage alone, which closes
        # the worker's stdin (it exits at EOF) instead of interrupting it mid-write, or a
        # spare mid-import with a traceback on the terminal.
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "wai_exp.simulate.shards", *([_SPARE_ARG] if spare else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, process_group=0,
        )  # fmt: skip
        #: what a spare was started under: a stage takes it only if they still hold
        self.cwd, self.env = os.getcwd(), dict(os.environ)
        #: when it must have exited once its stage closed it (``reap``)
        self.exit_by = 0.0

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    async def pipes(
        self,
    ) -> tuple[asyncio.StreamReader, asyncio.ReadTransport, asyncio.WriteTransport]:
        """Its stdout as a stream (and that stream's transport) and its stdin as a
        transport, on the running loop."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 30)
        protocol = asyncio.StreamReaderProtocol(reader)
        stdout, _ = await loop.connect_read_pipe(lambda: protocol, self.popen.stdout)
        writer, _ = await loop.connect_write_pipe(asyncio.Protocol, self.popen.stdin)
        return reader, stdout, writer

    async def wait(self, timeout: float | None = None) -> int:
        """Its exit status (negative: the signal that ended it), waited for in a thread."""
        return await asyncio.wait_for(asyncio.to_thread(self.popen.wait), timeout)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.popen.kill()

    def reap(self) -> None:
        """Wait for its exit in a thread of its own, killing it if it has not exited within
        ``_EXIT_WAIT_S`` (an agent's thread that holds its interpreter open). A worker that
        said goodbye takes 0.2-0.4 s to tear its interpreter down: the stage writes its
        report meanwhile instead of waiting. Not in the event loop's executor, whose
        shutdown would wait for it all the same."""
        self.exit_by = time.monotonic() + _EXIT_WAIT_S
        _CLOSING.add(self)
        threading.Thread(target=self.wait_or_kill, daemon=True).start()

    def wait_or_kill(self) -> None:
        """Wait for its exit until ``exit_by`` (``reap``), then kill it."""
        try:
            self.popen.wait(max(0.0, self.exit_by - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            self.popen.wait()
        finally:
            _CLOSING.discard(self)

    def discard(self) -> None:
        """End a spare no stage took, at once: it has done nothing but import, and waiting
        for it to read its stdin's end could hold the stage's loop while it imports."""
        self.kill()
        self.popen.wait()
        for pipe in (self.popen.stdin, self.popen.stdout):
            if pipe is not None:
                pipe.close()


#: what a worker started ahead of its stage is told (``prestart``): it has time to spare
_SPARE_ARG = "--spare"
#: worker processes started ahead of their stage (``prestart``), oldest first
_SPARES: list[_Process] = []
#: worker processes closed by their stage and not yet exited (``_Process.reap``)
_CLOSING: set[_Process] = set()
#: How long a closed worker may take to exit before it is killed.
_EXIT_WAIT_S = 2.0


def prestart(workers: int) -> None:
    """Start the ``workers - 1`` worker processes of a stage to come now. Each imports all
    it needs (0.3-1 s of CPU) and waits for its setup, so the stage finds it ready; until a
    worker is ready the stage runs its rollouts itself. The pipeline calls this before it
    starts tracking (MLflow takes a second or more to start a run). A spare no stage takes
    ends with this process (``atexit``), or at once if this process dies (its stdin closes)."""
    atexit.unregister(_close_spares)  # once, however many stages prestart
    atexit.register(_close_spares)
    while len(_SPARES) < workers - 1:
        _SPARES.append(_Process(spare=True))


def _take_spare() -> _Process | None:
    """The oldest spare still running under this folder and environment (one started
    under another would import another folder's modules or miss a key set since)."""
    while True:
        try:
            proc = _SPARES.pop(0)
        except IndexError:  # none left (stages in parallel threads take them too)
            return None
        if proc.returncode is None and proc.cwd == os.getcwd() and proc.env == os.environ:
            return proc
        proc.discard()


def wait_for_closed_workers() -> None:
    """Wait until every worker a stage of this process closed has exited, killing any still
    running when its ``_EXIT_WAIT_S`` is up: what a worker does at its exit is then done
    (an agent's own exit handlers; the stage cache's record of the modules it imported,
    ``pipeline/reads.spool``, which the stage reads once its rows are in)."""
    for proc in list(_CLOSING):
        proc.wait_or_kill()


def _close_spares() -> None:
    """At exit: end the spares no stage took, and let the closed workers still exiting
    finish (``wait_for_closed_workers``): none outlives the stage's process."""
    while _SPARES:
        _SPARES.pop().discard()
    wait_for_closed_workers()


class _LocalShard:
    """One worker process and the rollouts in flight on it."""

    def __init__(self, index: int) -> None:
        self.index = index
        #: reads the worker's frames (``_FrameCodec``)
        self.decode = _decoder(StringSharer())
        self.proc: _Process | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stdout_transport: asyncio.ReadTransport | None = None
        self.stdin: asyncio.WriteTransport | None = None
        self.outbox: _Outbox | None = None
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.next_id = 0
        self.reader: asyncio.Task[None] | None = None
        #: makes the error every rollout here fails with once the worker is gone
        #: (``WorkerDied``, ``WorkerNotStarted``)
        self.died: Callable[[], Exception] | None = None
        #: set once the worker said whether it started (or ended before it could)
        self.answered = asyncio.Event()
        #: set once the worker sent its last frame ("bye"), or its results ended otherwise
        self.finished = asyncio.Event()
        #: the worker's peak resident memory, MB, as it reported it on a clean exit
        self.peak_rss_mb: float | None = None
        #: the worker's own model-server limits (``ServerLimits.summary()``), likewise
        self.limits: dict[str, Any] | None = None
        #: the early warning its agent's model calls gave last (``_HealthReport``)
        self.health: str | None = None
        #: the tasks sent so far: ``id(task)`` -> (its number on this pipe, the task, kept
        #: so that its id is not reused). A task goes once; its next rollouts name it.
        self.tasks: dict[int, tuple[int, Any]] = {}

    async def start(self, init: Any) -> None:
        """Take a spare worker process (``prestart``) or start one, and send it its setup,
        without waiting for it (a worker takes 0.3-1 s to import and build its agent:
        ``starting``). Raises when ``init`` cannot be pickled (a closure for an agent),
        before any work."""
        _check_picklable(init)
        self.proc = _take_spare() or _Process()
        self.stdout, self.stdout_transport, self.stdin = await self.proc.pipes()
        self.outbox = _Outbox(self.stdin.write, self._unsendable)
        self.outbox.put(init)
        self.outbox.flush()  # alone in the first frame, which the worker reads as its setup
        self.reader = asyncio.ensure_future(self._read_loop())

    @property
    def starting(self) -> bool:
        """Whether the worker has not yet said that it started (or could not)."""
        return not self.answered.is_set()

    def _unsendable(self, msg: Any, exc: Exception) -> None:
        """A plan that cannot be pickled fails its own rollout, not the pipe."""
        fut = self.waiting.pop(msg[0], None)
        if fut is not None and not fut.done():
            fut.set_exception(
                RuntimeError(f"the plan cannot be sent to worker {self.index}: {exc}")
            )

    async def _read(self) -> list[Any]:
        """The worker's next frame ([] once its stdout closed)."""
        assert self.stdout is not None
        try:
            return await _read_frame(self.stdout, self.decode)
        except (asyncio.IncompleteReadError, ConnectionError):
            return []

    async def _detail(self) -> str:
        assert self.proc is not None
        code = await self.proc.wait()
        pid = self.proc.pid
        if code < 0:
            return f"pid {pid}, killed by {signal.Signals(-code).name}"
        return f"pid {pid}, exit status {code}"

    async def _read_loop(self) -> None:
        try:
            await self._receive()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - no rollout of this worker may wait forever
            text = f"simulate worker {self.index}: reading its results failed: {exc!r}"
            self._fail(lambda: RuntimeError(text))
        finally:
            self.answered.set()
            self.finished.set()

    async def _receive(self) -> None:
        first = await self._read()
        if not first or first[0][0] != "ready":
            detail = first[0][1] if first else await self._detail()
            text = f"simulate worker {self.index} could not start: {detail}"
            self._fail(lambda: WorkerNotStarted(text))
            return
        self.answered.set()
        msgs = first[1:]
        while True:
            for msg in msgs:
                self._deliver(msg)
            msgs = await self._read()
            if not msgs:
                break
        if self.finished.is_set() and not self.waiting:
            return  # it said goodbye with nothing owed: a clean end (``reap`` waits for it)
        detail, in_flight = await self._detail(), len(self.waiting)
        self._fail(lambda: WorkerDied(self.index, detail, in_flight))

    def _fail(self, error: Callable[[], Exception]) -> None:
        """Fail the rollouts in flight here, and every later one, each with its own
        ``error()`` (one exception raised in many tasks gathers all their frames)."""
        self.died = error
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(error())
        self.waiting.clear()

    async def start_failure(self, wait_s: float) -> Exception | None:
        """Why the worker could not start (None: it started, or has not said within
        ``wait_s`` seconds, a slow start the run no longer needs)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.answered.wait(), wait_s)
        failure = self.died() if self.died is not None else None
        return failure if isinstance(failure, WorkerNotStarted) else None

    def _deliver(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "bye":
            self.peak_rss_mb, self.limits = msg[1], msg[2]
            self.finished.set()
            return
        if msg[0] == "health":
            self.health = msg[1]
            return
        fut = self.waiting.pop(msg[0], None)
        if fut is None or fut.done():
            return
        if msg[1] != "ok":
            fut.set_exception(RuntimeError(f"simulate worker {self.index}: {msg[2]}"))
            return
        fut.set_result(Outcome(row=msg[2], lost=msg[3], seconds=msg[4]))

    def launch(self, plan: Any) -> asyncio.Future[Any]:
        """Send ``plan`` to the worker: the future its outcome is set on."""
        fut = asyncio.get_running_loop().create_future()
        if self.died is not None:
            fut.set_exception(self.died())
            return fut
        assert self.outbox is not None
        rid, self.next_id = self.next_id, self.next_id + 1
        self.waiting[rid] = fut
        self.outbox.put((rid, *self._wire(plan)))
        return fut

    def _wire(self, plan: Any) -> tuple[Any, ...]:
        """``plan`` as it crosses the pipe: its task's number, the task itself only the
        first time (an rl ask's k rollouts shipped its situation k times: most of the
        parent's cost per rollout offline), then the plan's own fields."""
        known = self.tasks.get(id(plan.task))
        if known is None:
            known = self.tasks[id(plan.task)] = (len(self.tasks), plan.task)
            task = _slim(plan).task
        else:
            task = None
        return (known[0], task, *(getattr(plan, f) for f in _PLAN_FIELDS))

    async def close(self) -> None:
        """Close the worker's stdin (it exits at EOF) and wait for its last frame ("bye":
        its peak memory and model-server limits, for the report); its exit is waited for
        in the background (``_Process.reap``)."""
        proc = self.proc
        if proc is None:
            return
        try:
            if proc.returncode is None:
                assert self.stdin is not None
                self.stdin.close()
                await asyncio.wait_for(self.finished.wait(), timeout=_EXIT_WAIT_S)
        except (TimeoutError, ConnectionError, RuntimeError):
            proc.kill()
        finally:
            if self.stdin is not None:
                self.stdin.close()
            if self.reader is not None:
                self.reader.cancel()
            if self.stdout_transport is not None:
                self.stdout_transport.close()
            proc.reap()


class _RayShard:
    """One Ray actor; its async ``run`` runs many rollouts at once."""

    def __init__(self, index: int, actor: Any, share: StringSharer) -> None:
        self.index, self.actor, self.share = index, actor, share
        #: the early warning its agent's model calls gave when last asked (``ShardedRunner``)
        self.health: str | None = None
        #: the actor's peak resident memory, MB, asked for as it closes (None: no answer)
        self.peak_rss_mb: float | None = None

    def launch(self, plan: Any) -> Awaitable[Any]:
        return self._run(plan)

    async def _run(self, plan: Any) -> Any:
        import ray

        try:
            out = await self.actor.run.remote(_slim(plan))
        except ray.exceptions.RayActorError as exc:
            if exc.actor_init_failed:  # its setup raised (the agent's module, its config)
                text = f"simulate worker {self.index} (a Ray actor) could not start: {exc}"
                raise WorkerNotStarted(text + _missing_module_fix(str(exc))) from exc
            raise WorkerDied(self.index, f"Ray actor: {type(exc).__name__}", 1) from exc
        return _shared(out, self.share)

    async def close(self) -> None:
        import ray

        with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
            self.peak_rss_mb = await asyncio.wait_for(self.actor.peak_rss_mb.remote(), 5.0)
        ray.kill(self.actor)


def _missing_module_fix(error: str) -> str:
    """The fix for a Ray actor that could not import wai-exp or the agent's code: the
    cluster's nodes import them from their own Python, not this machine's."""
    if "No module named" not in error:
        return ""
    return (
        "; every node of the Ray cluster imports wai-exp and your agent's modules from its "
        "own Python environment: install them there (the same versions as here), or run "
        "with simulate.cluster=local"
    )


class _StageShard:
    """The stage's own process as shard 0: its share runs on the stage's own runner, with
    nothing pickled or piped."""

    index = 0

    def __init__(self, runner: Any) -> None:
        self.runner = runner

    def launch(self, plan: Any) -> Awaitable[Any]:
        return self.runner.run(plan)

    async def close(self) -> None:
        return None


class ShardedRunner:
    """A ``RolloutRunner`` whose ``run`` sends the plan to the shard owning its situation;
    every other attribute (``reuse``, ``lost_record``, ``run_id``, ``grader`` ...) is the
    parent's own runner's, so the engine cannot tell the difference.

    Locally the stage's process is shard 0 and ``workers - 1`` worker processes are the
    rest (``local_shares``); on Ray every shard is an actor and the stage only plans."""

    def __init__(self, local: Any, spec: ShardSpec, *, backlog: int | None = None) -> None:
        self._local = local
        self._spec = spec
        #: a sync agent's rollouts on local workers: each worker's queue at most (None: an
        #: async agent's, or on Ray: each situation on its shard by hash; ``worker_backlog``)
        self._backlog = backlog
        self._shards: list[Any] = []
        self._shares: tuple[int, ...] = ()
        #: rollouts sent to each shard, by its index (0: the stage's own process)
        self._sent: Counter[int] = Counter()
        self._own_ray = False  # this stage started a local Ray: it stops it too
        self._health_poll: asyncio.Task[None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._local, name)

    async def start(self) -> None:
        """Start every shard: the worker processes are spawned and sent their setup, not
        waited for (``_LocalShard.start``); Ray actors are created."""
        init = (self._spec.setup, self._local.cfg, self._local.run_id)
        n = max(1, self._spec.workers)
        if self._spec.cluster == "ray":
            share = StringSharer()  # one memo: the actors' rows share with each other too
            self._shards, self._own_ray = _ray_shards(n, init, self._spec.ray_address, share)
            self._shares = (1,) * n
            self._health_poll = asyncio.ensure_future(self._poll_ray_health())
            return
        workers = [_LocalShard(i) for i in range(1, n)]
        self._shards = [_StageShard(self._local), *workers]
        self._shares = local_shares(n)
        await asyncio.gather(*(s.start(init) for s in workers))

    def launch(self, plan: Any) -> Awaitable[Any]:
        """Start ``plan``'s rollout where it is routed: a local worker's future (no task:
        ``Engine.launch``), else a coroutine."""
        shard = self._route(plan)
        self._sent[shard.index] += 1
        return shard.launch(plan)

    async def run(self, plan: Any) -> Any:
        # The RolloutRunner interface this stands in for: without it ``__getattr__`` would
        # hand out the stage's own runner's ``run``, and a caller's rollouts would not move.
        return await self.launch(plan)

    def _route(self, plan: Any) -> Any:
        """The shard that runs ``plan``. A row depends only on its plan, so where it runs
        changes when it lands, never what it is."""
        if self._backlog is not None:
            return self._least_queued(self._backlog)
        shard = self._shards[shard_of(plan.task.scenario_id, self._shares)]
        if isinstance(shard, _LocalShard) and shard.starting:
            # A plan sent to a worker still importing would wait there, its slot held:
            # offline the window fills with them at once and the stage idles for the
            # worker's ~0.4 s start. A row depends only on its plan: the stage runs it.
            shard = self._shards[0]
        return shard

    def _least_queued(self, backlog: int) -> Any:
        """For a sync agent: the started worker with the fewest rollouts queued, while that
        is under ``backlog``; else the stage's own process. A worker runs a sync agent's
        rollouts one after another, so what it has in flight is its queue: the stage runs
        a rollout only when every worker has a full queue, and so takes as much as its
        planning and landing leave it time for (a fixed third left it the bottleneck
        offline, its workers idle a sixth of the time)."""
        best: _LocalShard | None = None
        for shard in self._shards[1:]:
            if not shard.starting and (best is None or len(shard.waiting) < len(best.waiting)):
                best = shard
        return best if best is not None and len(best.waiting) < backlog else self._shards[0]

    async def raise_start_failure(self) -> None:
        """Raise why a worker could not start even when no rollout of its share ran (a
        small budget can end before one reaches it): the run asked for that worker. One
        still starting after ``_START_WAIT_S`` more seconds is not waited for."""
        for shard in self._processes():
            if isinstance(shard, _LocalShard) and (
                failure := await shard.start_failure(_START_WAIT_S)
            ):
                raise failure

    def shard_warnings(self) -> list[str]:
        """The early warnings the shards' own model calls give (``engine.agent_warning``),
        each naming its shard: the stage's progress line and report show them beside its
        own (on Ray the stage makes no calls; a hung server showed nothing but "0/4 rows")."""
        return [f"worker {s.index}: {s.health}" for s in self._processes() if s.health]

    async def _poll_ray_health(self) -> None:
        """Ask each Ray actor for its early warning every ``_HEALTH_EVERY_S`` (a local
        worker sends its own: ``_HealthReport``)."""
        import ray

        while True:
            await asyncio.sleep(_HEALTH_EVERY_S)
            for shard in self._processes():
                with contextlib.suppress(ray.exceptions.RayError):
                    shard.health = await shard.actor.health.remote()

    def _processes(self) -> list[Any]:
        """The shards that are processes of their own (local workers, Ray actors)."""
        return [s for s in self._shards if not isinstance(s, _StageShard)]

    def peak_rss_mb(self) -> dict[str, float | None]:
        """Peak resident memory in MB of the stage's own process (``stage``: its peak so
        far, earlier stages of the same process included) and of each worker or Ray actor
        (``worker 1`` ...; None: it did not report, it died)."""
        workers = {f"worker {s.index}": s.peak_rss_mb for s in self._processes()}
        return {"stage": _peak_rss_mb(), **workers}

    def rollouts_by_process(self) -> dict[str, int]:
        """Rollouts each process was given, by name (``stage``: the stage's own process,
        absent on Ray, where it runs none; ``worker 1`` ...)."""
        return {
            "stage" if isinstance(s, _StageShard) else f"worker {s.index}": self._sent[s.index]
            for s in self._shards
        }

    def server_limits(self) -> dict[str, dict[str, Any] | None]:
        """Each worker's own model-server limits as it reported them on a clean exit
        (``ServerLimits.summary()``; ``{}``: it called no model server; None: it did not
        report, a Ray actor or a worker that died), by name as in ``peak_rss_mb``. The
        stage's own process reports its limits itself (``Engine.server_limits``)."""
        return {f"worker {s.index}": getattr(s, "limits", None) for s in self._processes()}

    async def aclose(self) -> None:
        if self._health_poll is not None:
            self._health_poll.cancel()
        await asyncio.gather(*(s.close() for s in self._shards), return_exceptions=True)
        if self._own_ray:
            import ray

            ray.shutdown()


def _ray_shards(
    n: int, init: tuple[Any, ...], address: str | None, share: StringSharer
) -> tuple[list[_RayShard], bool]:
    """``n`` actors on the Ray cluster at ``address`` (None: a local Ray this call starts,
    unless this process is connected already), and whether this call started Ray."""
    import ray

    own = not ray.is_initialized()
    if own:
        ray.init(address=address, log_to_driver=False)
    actor_cls = ray.remote(_RayWorker)
    return [_RayShard(i, actor_cls.remote(*init), share) for i in range(1, n + 1)], own


# ---- the shard's side ----------------------------------------------------------------------


class _RayWorker:
    """The Ray actor: builds its runner once, then runs plans (async: many at once)."""

    def __init__(self, setup: Callable[[], Any], cfg: Any, run_id: str) -> None:
        from wai_exp.simulate.engine import shard_runner

        self.runner = shard_runner(setup, cfg, run_id)
        self.cfg = cfg

    async def run(self, plan: Any) -> Any:
        return await self.runner.run(plan)

    def health(self) -> str | None:
        from wai_exp.simulate.engine import agent_warning

        return agent_warning(self.runner, self.cfg)

    def peak_rss_mb(self) -> float:
        return _peak_rss_mb()


def _row_of(msg: tuple[Any, ...]) -> Any:
    """The row a worker's message carries (None: it carries none): an ``Outcome`` crosses
    as ``(rid, "ok", row, lost, seconds)``, which ``marshal`` takes."""
    return msg[2] if len(msg) > 2 and msg[1] == "ok" else None


def _unsendable(msg: Any, exc: Exception) -> Any:
    """A rollout whose outcome cannot be pickled (an agent's own object in its row) is lost
    with the reason; the pipe and the other rollouts go on."""
    if not isinstance(msg[0], int):
        return None
    why = f"{type(exc).__name__}: {exc}"
    return (msg[0], "error", f"its outcome cannot be sent to the stage's process ({why})")


class _HealthReport:
    """A worker's early warning (``engine.agent_warning``: its agent's calls to a hung,
    slow or one-at-a-time model server), sent to the stage whenever it changes."""

    def __init__(self, runner: Any, cfg: Any, outbox: _Outbox) -> None:
        self.runner, self.cfg, self.outbox = runner, cfg, outbox
        self.said: str | None = None

    def check(self) -> None:
        from wai_exp.simulate.engine import agent_warning

        warning = agent_warning(self.runner, self.cfg)
        if warning != self.said:
            self.outbox.put(("health", warning))
            self.said = warning

    async def every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            self.check()


async def _serve(
    inp: asyncio.StreamReader, out: asyncio.StreamWriter, *, spare: bool = False
) -> None:
    outbox = _Outbox(out.write, _unsendable, _FrameCodec(sample=_row_of).encode)
    try:
        # before the setup arrives: a spare (``prestart``) waits with all of this done, its
        # model transport included (a model agent's first calls wait on it otherwise)
        from wai_exp.simulate.engine import shard_runner

        if spare:
            from wai_exp.llm.http import warm_up  # here: a run with no HTTP agent never loads httpx

            warm_up()

        try:
            ((setup, cfg, run_id),) = await _read_frame(inp)
        except asyncio.IncompleteReadError:
            return  # a spare no stage took: its parent closed our stdin
        runner = shard_runner(setup, cfg, run_id)
    except Exception:  # noqa: BLE001 - the parent says why the worker could not start
        # the innermost frames: where the user's agent module or setup failed
        outbox.put(("error", traceback.format_exc(limit=-8)))
        outbox.flush()
        await out.drain()
        return
    outbox.put(("ready",))
    health = _HealthReport(runner, cfg, outbox)
    reporter = asyncio.ensure_future(health.every(_HEALTH_EVERY_S))

    async def one(rid: int, plan: Any) -> None:
        try:
            done = await runner.run(plan)
            outbox.put((rid, "ok", done.row, done.lost, done.seconds))
        except Exception as exc:  # noqa: BLE001 - the engine re-raises it for that rollout
            outbox.put((rid, "error", f"{type(exc).__name__}: {exc}"))

    running: set[asyncio.Task[None]] = set()
    tasks: dict[int, Any] = {}  # the tasks the parent sent, by their number
    try:
        while True:
            try:
                plans = await _read_frame(inp)
            except asyncio.IncompleteReadError:
                break  # the parent closed our stdin (or died): stop
            for rid, tid, new_task, *fields in plans:
                if new_task is not None:
                    tasks[tid] = new_task
                task = asyncio.ensure_future(one(rid, Plan(tasks[tid], *fields)))
                running.add(task)
                task.add_done_callback(running.discard)
            if out.transport.get_write_buffer_size() > 1 << 20:
                await out.drain()
    finally:
        reporter.cancel()
        health.check()  # what the run's end reports
        for task in running:
            task.cancel()
        closer = getattr(runner.agent, "aclose", None)
        if closer is not None:
            res = closer()
            if asyncio.iscoroutine(res):
                await res
        runner.world_setup.close()
        limits = getattr(runner, "server_limits", None)  # the parent reports them
        summary = (limits.summary() if limits is not None else None) or {}
        outbox.put(("bye", _peak_rss_mb(), summary))
        outbox.flush()  # now: the loop is about to end


def _peak_rss_mb() -> float:
    """This worker's own peak resident memory in MB. Linux keeps ``ru_maxrss`` across exec,
    so a worker started from a large parent reports the parent's peak; the process's own
    high-water mark (``VmHWM``) is read instead where /proc has it."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


async def _worker_main() -> None:
    # Frames go to a private copy of stdout; anything the agent prints goes to stderr.
    frames = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    loop = asyncio.get_running_loop()
    send_requests_first(loop)  # the worker's model calls, as in one process
    inp = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(inp), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, frames)
    out = asyncio.StreamWriter(transport, protocol, None, loop)
    await _serve(inp, out, spare=_SPARE_ARG in sys.argv[1:])
    await out.drain()


if __name__ == "__main__":
    # A SIGINT sent to the worker itself (its group is its own: ``_Process``) is ignored
    # too: the parent stops its workers (closing their stdin, then killing), so a worker
    # never dies of it mid-write.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from wai_exp.domain.gc_tuning import fewer_gc_passes

    with fewer_gc_passes():
        asyncio.run(_worker_main())
