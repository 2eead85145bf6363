"""One stage's rollouts on several processes: ``simulate.workers`` and ``simulate.cluster``.

The parent keeps everything that decides *which* rollouts run: the planner, the stop rules
(``budget``, ``time_budget``, ``situations``, ``until``, the dead-agent stop), the adaptive
allocation (``split``/``verify``, ``grader=`` verdicts), landing in plan order, the partial
file, the progress line and the report. Only running a planned rollout moves: each plan is
sent to the shard that owns its situation (a stable hash of ``scenario_id`` modulo the
shard count) and its outcome streams back. A rollout's row depends only on its plan (its
seed is a hash of the seed, the situation, the phrasing, the rollout index and the run), and
the planner reads only rows landed before in plan order, so the rows are the same at any
worker count, byte for byte once ``timing`` is removed.

A shard is a local process (``cluster: local``: ``python -m wai_exp.simulate.shards``,
spoken to over its stdin/stdout with length-prefixed pickles, from the parent's event loop)
or a Ray actor (``cluster: ray``, on ``ray.address``). Each shard builds its own agent,
world and judge from a picklable ``setup`` (the pipeline's config, re-read in the worker),
so nothing unpicklable (HTTP clients, open servers) crosses a process boundary.

A shard that dies (SIGKILL, OOM) fails the rollouts it had in flight with ``WorkerDied``,
naming it; the engine lets the other shards' rollouts land (their rows reach the partial
file) and stops the stage, so the same command resumes with the same rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import resource
import signal
import struct
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from wai_exp.llm.http import send_requests_first
from wai_exp.rows.jsonl import StringSharer
from wai_exp.simulate.ids import stable_hash
from wai_exp.simulate.tasks import Plan

#: Where a stage's shards run.
CLUSTERS = ("local", "ray")

_HEADER = struct.Struct("!I")


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


class WorkerDied(RuntimeError):
    """A shard process ended while rollouts were in flight on it."""

    def __init__(self, index: int, detail: str, in_flight: int) -> None:
        self.index, self.detail, self.in_flight = index, detail, in_flight
        super().__init__(
            f"simulate worker {index} ({detail}) died with {in_flight} rollouts in flight; "
            "the rows that landed are kept in the stage's partial.jsonl: run the same command "
            "to resume (finished rows are reused, not re-run)"
        )


def _queue(outbox: list[bytes], write: Callable[[bytes], Any], frame: bytes) -> None:
    """Queue ``frame``; the frames queued in one pass of the event loop go out in one write
    (a write per frame cost a system call per rollout each way: a third of the parent's
    time with the offline agent)."""
    if not outbox:
        asyncio.get_running_loop().call_soon(_flush, outbox, write)
    outbox.append(frame)


def _flush(outbox: list[bytes], write: Callable[[bytes], Any]) -> None:
    if not outbox:
        return
    data = b"".join(outbox)
    outbox.clear()
    with contextlib.suppress(ConnectionError, RuntimeError):
        write(data)  # may fail when the other side is gone: its reader reports that


def same_arguments(agent: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A ``setup`` for a Python caller: ``functools.partial(same_arguments, agent, kwargs)``
    with a picklable agent (a model spec string, a module-level function) and kwargs."""
    return agent, dict(kwargs)


def shard_of(scenario_id: str, n: int) -> int:
    """The shard that owns a situation: all its rollouts run on one shard."""
    return stable_hash(scenario_id) % n


#: a ``Plan``'s fields after its task, in order (what ``_LocalShard._wire`` sends)
_PLAN_FIELDS = ("rollout_index", "eval_run", "seed", "rollout_id", "reason")


def _slim(plan: Any) -> Any:
    """The plan without its task's landed rows (a shard never reads them; shipping them
    would grow each message with the group)."""
    return replace(plan, task=replace(plan.task, landed=[]))


# ---- the parent's side ---------------------------------------------------------------------


class _LocalShard:
    """One worker process and the rollouts in flight on it."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.proc: asyncio.subprocess.Process | None = None
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.next_id = 0
        self.reader: asyncio.Task[None] | None = None
        self.died: WorkerDied | None = None
        #: the worker's peak resident memory, MB, as it reported it on a clean exit
        self.peak_rss_mb: float | None = None
        #: the worker's own model-server limits (``ServerLimits.summary()``), likewise
        self.limits: dict[str, Any] | None = None
        #: frames not yet written: one write per loop pass, not one per plan
        self.outbox: list[bytes] = []
        #: the tasks sent so far: ``id(task)`` -> (its number on this pipe, the task, kept
        #: so that its id is not reused). A task goes once; its next rollouts name it.
        self.tasks: dict[int, tuple[int, Any]] = {}

    async def start(self, init: bytes) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "wai_exp.simulate.shards",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert self.proc.stdin is not None
        self.proc.stdin.write(_HEADER.pack(len(init)) + init)
        ready = await self._read()
        if ready is None or ready[0] != "ready":
            detail = ready[1] if ready else await self._detail()
            raise RuntimeError(f"simulate worker {self.index} could not start: {detail}")
        self.reader = asyncio.ensure_future(self._read_loop())

    async def _read(self) -> Any:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            head = await self.proc.stdout.readexactly(_HEADER.size)
            return pickle.loads(await self.proc.stdout.readexactly(_HEADER.unpack(head)[0]))
        except (asyncio.IncompleteReadError, ConnectionError):
            return None

    async def _detail(self) -> str:
        assert self.proc is not None
        code = await self.proc.wait()
        pid = self.proc.pid
        if code < 0:
            return f"pid {pid}, killed by {signal.Signals(-code).name}"
        return f"pid {pid}, exit status {code}"

    async def _read_loop(self) -> None:
        while True:
            msg = await self._read()
            if msg is None:
                break
            if msg[0] == "bye":
                self.peak_rss_mb, self.limits = msg[1], msg[2]
                continue
            fut = self.waiting.pop(msg[0], None)
            if fut is not None and not fut.done():
                if msg[1] == "ok":
                    fut.set_result(msg[2])
                else:
                    fut.set_exception(RuntimeError(f"simulate worker {self.index}: {msg[2]}"))
        self.died = WorkerDied(self.index, await self._detail(), len(self.waiting))
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(self.died)
        self.waiting.clear()

    async def run(self, plan: Any) -> Any:
        if self.died is not None:
            raise self.died
        assert self.proc is not None and self.proc.stdin is not None
        rid, self.next_id = self.next_id, self.next_id + 1
        fut = asyncio.get_running_loop().create_future()
        self.waiting[rid] = fut
        body = pickle.dumps((rid, *self._wire(plan)), protocol=pickle.HIGHEST_PROTOCOL)
        _queue(self.outbox, self.proc.stdin.write, _HEADER.pack(len(body)) + body)
        return await fut

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
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()  # the worker exits at EOF
            await asyncio.wait_for(proc.wait(), timeout=2.0)
            if self.reader is not None:
                await asyncio.wait_for(self.reader, timeout=2.0)  # its last frame: "bye"
        except (TimeoutError, ConnectionError, RuntimeError):
            proc.kill()
            await proc.wait()
        if self.reader is not None:
            self.reader.cancel()


class _RayShard:
    """One Ray actor; its async ``run`` runs many rollouts at once."""

    def __init__(self, index: int, actor: Any) -> None:
        self.index, self.actor = index, actor

    async def run(self, plan: Any) -> Any:
        import ray

        try:
            return await self.actor.run.remote(_slim(plan))
        except ray.exceptions.RayActorError as exc:
            raise WorkerDied(self.index, f"Ray actor: {type(exc).__name__}", 1) from exc

    async def close(self) -> None:
        import ray

        ray.kill(self.actor)


class ShardedRunner:
    """A ``RolloutRunner`` whose ``run`` sends the plan to the shard owning its situation;
    every other attribute (``reuse``, ``lost_record``, ``run_id``, ``grader`` ...) is the
    parent's own runner's, so the engine cannot tell the difference."""

    def __init__(self, local: Any, spec: ShardSpec) -> None:
        self._local = local
        self._spec = spec
        self._shards: list[Any] = []
        self._own_ray = False  # this stage started a local Ray: it stops it too
        self._share = StringSharer()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._local, name)

    async def start(self) -> None:
        """Start every shard (raises when one cannot start)."""
        init = (self._spec.setup, self._local.cfg, self._local.run_id)
        n = max(1, self._spec.workers)
        if self._spec.cluster == "ray":
            self._shards, self._own_ray = _ray_shards(n, init, self._spec.ray_address)
            return
        blob = pickle.dumps(init, protocol=pickle.HIGHEST_PROTOCOL)
        shards = [_LocalShard(i) for i in range(n)]
        self._shards = shards
        await asyncio.gather(*(s.start(blob) for s in shards))

    async def run(self, plan: Any) -> Any:
        out = await self._shards[shard_of(plan.task.scenario_id, len(self._shards))].run(plan)
        if out.row is not None:
            # An unpickled row owns a copy of every key: shared, it costs half the memory
            # the parent holds for it to the end of the stage.
            out.row = self._share(out.row)
        return out

    def peak_rss_mb(self) -> list[float | None]:
        """Each local worker's peak resident memory in MB (None: not reported)."""
        return [getattr(s, "peak_rss_mb", None) for s in self._shards]

    def server_limits(self) -> list[dict[str, Any] | None]:
        """Each worker's own model-server limits as it reported them on a clean exit
        (``ServerLimits.summary()``; ``{}``: it called no model server; None: it did not
        report, a Ray actor or a worker that died)."""
        return [getattr(s, "limits", None) for s in self._shards]

    async def aclose(self) -> None:
        await asyncio.gather(*(s.close() for s in self._shards), return_exceptions=True)
        if self._own_ray:
            import ray

            ray.shutdown()


def _ray_shards(n: int, init: tuple[Any, ...], address: str | None) -> tuple[list[_RayShard], bool]:
    """``n`` actors on the Ray cluster at ``address`` (None: a local Ray this call starts,
    unless this process is connected already), and whether this call started Ray."""
    import ray

    own = not ray.is_initialized()
    if own:
        ray.init(address=address, log_to_driver=False)
    actor_cls = ray.remote(_RayWorker)
    return [_RayShard(i, actor_cls.remote(*init)) for i in range(n)], own


# ---- the shard's side ----------------------------------------------------------------------


class _RayWorker:
    """The Ray actor: builds its runner once, then runs plans (async: many at once)."""

    def __init__(self, setup: Callable[[], Any], cfg: Any, run_id: str) -> None:
        from wai_exp.simulate.engine import shard_runner

        self.runner = shard_runner(setup, cfg, run_id)

    async def run(self, plan: Any) -> Any:
        return await self.runner.run(plan)


async def _serve(inp: asyncio.StreamReader, out: asyncio.StreamWriter) -> None:
    async def read() -> Any:
        head = await inp.readexactly(_HEADER.size)
        return pickle.loads(await inp.readexactly(_HEADER.unpack(head)[0]))

    outbox: list[bytes] = []

    def send(msg: Any) -> None:
        body = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        _queue(outbox, out.write, _HEADER.pack(len(body)) + body)

    setup, cfg, run_id = await read()
    try:
        from wai_exp.simulate.engine import shard_runner

        runner = shard_runner(setup, cfg, run_id)
    except Exception:  # noqa: BLE001 - the parent says why the worker could not start
        send(("error", traceback.format_exc(limit=5)))
        _flush(outbox, out.write)
        await out.drain()
        return
    send(("ready",))

    async def one(rid: int, plan: Any) -> None:
        try:
            send((rid, "ok", await runner.run(plan)))
        except Exception as exc:  # noqa: BLE001 - the engine re-raises it for that rollout
            send((rid, "error", f"{type(exc).__name__}: {exc}"))

    running: set[asyncio.Task[None]] = set()
    tasks: dict[int, Any] = {}  # the tasks the parent sent, by their number
    try:
        while True:
            try:
                rid, tid, new_task, *fields = await read()
            except asyncio.IncompleteReadError:
                break  # the parent closed our stdin (or died): stop
            if new_task is not None:
                tasks[tid] = new_task
            task = asyncio.ensure_future(one(rid, Plan(tasks[tid], *fields)))
            running.add(task)
            task.add_done_callback(running.discard)
            if out.transport.get_write_buffer_size() > 1 << 20:
                await out.drain()
    finally:
        for task in running:
            task.cancel()
        closer = getattr(runner.agent, "aclose", None)
        if closer is not None:
            res = closer()
            if asyncio.iscoroutine(res):
                await res
        runner.world_setup.close()
        limits = getattr(runner, "server_limits", None)  # the parent reports them
        send(("bye", _peak_rss_mb(), (limits.summary() if limits is not None else None) or {}))
        _flush(outbox, out.write)  # now: the loop is about to end


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
    await _serve(inp, out)
    await out.drain()


if __name__ == "__main__":
    # Ctrl-C reaches the whole process group: the parent stops its workers itself (closing
    # their stdin, then killing), so a worker never dies of it mid-write.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from wai_exp.domain.gc_tuning import fewer_gc_passes

    with fewer_gc_passes():
        asyncio.run(_worker_main())
