"""Rollouts on worker processes (``simulate(shards=...)``, issue 22): the same rows as one
process, and the end of the budget planned the same way whichever rollout finishes first."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from tests.support.memory import held_bytes
from wai_exp.simulate.engine import simulate
from wai_exp.simulate.shards import ShardSpec, local_shares, shard_of

KW = {"mode": "rl", "budget": 200, "seed": 0}


@pytest.fixture(autouse=True)
def _collect_after():
    """Free each test's event loops, pipes and processes here, not in a later test: their
    finalizers run Python code, and CPython 3.11.7 raises "AST constructor recursion depth
    mismatch" when a collection runs one while ``compile`` builds an AST (seen in
    test_engine's hypothesis test, 2 of 16 runs after this file in one xdist worker)."""
    import gc

    yield
    gc.collect()


def setup(kwargs: dict) -> tuple[None, dict]:
    """The built-in scripted agent and ``kwargs``, inside a worker."""
    return None, dict(kwargs)


def _rows(data) -> list[str]:
    out = []
    for row in data.rows:
        row = dict(row)
        row.pop("timing", None)
        out.append(json.dumps(row, sort_keys=True, default=str))
    return out


def test_two_workers_give_the_rows_of_one_process_to_the_last_group():
    # budget=200 under rl ends on a short last group: the planner used to open it on a
    # second pass between landings, which only a pool with many rollouts in flight makes.
    one = simulate(**KW)
    two = simulate(shards=ShardSpec(workers=2, setup=functools.partial(setup, KW)), **KW)
    assert len(_rows(two)) == 200
    assert _rows(two) == _rows(one)
    assert two.report()["workers"] == 2 and one.report()["workers"] == 1
    # each process says how much memory it peaked at (the 1.5 GB target is per process)
    peaks = two.report()["workers_peak_rss_mb"]
    assert list(peaks) == ["stage", "worker 1"] and 0 < peaks["worker 1"] < 1536
    assert peaks["stage"] > 0


def test_a_situation_has_one_shard_and_the_stage_takes_half_a_workers_share():
    assert {shard_of("s-1", (1, 2, 2)) for _ in range(5)} == {shard_of("s-1", (1, 2, 2))}
    owners = [shard_of(f"s-{i}", local_shares(2)) for i in range(3000)]
    # the stage's own process (shard 0) also plans and lands: a third of the situations
    assert 0.3 < owners.count(0) / len(owners) < 0.37 and set(owners) == {0, 1}
    assert [shard_of(f"s-{i}", (0, 1)) for i in range(20)] == [1] * 20  # a zero share: none


def announcing_setup(flag: str, kwargs: dict) -> tuple[None, dict]:
    """A worker's setup that leaves ``flag`` behind: the worker is about to say it started."""
    from pathlib import Path

    Path(flag).write_text("started")
    return None, dict(kwargs)


def _holding_first_landing(flag: str):
    """An ``on_row`` that holds the stage's first landing until the worker has built its
    agent (up to 20 s): a short run otherwise ends before a worker has imported anything,
    and every rollout runs in the stage (``test_the_stage_runs_a_starting_worker...``)."""
    import time
    from pathlib import Path

    held: list[bool] = []

    def landed(row: dict) -> None:
        if held:
            return
        held.append(True)
        deadline = time.monotonic() + 20
        while not Path(flag).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)  # its "ready" frame, read once the stage's loop runs again

    return landed


def _two_with_a_started_worker(tmp_path, kw: dict):
    flag = str(tmp_path / "worker-started")
    return simulate(
        shards=ShardSpec(workers=2, setup=functools.partial(announcing_setup, flag, kw)),
        on_row=_holding_first_landing(flag),
        **kw,
    )


def test_rows_from_workers_cost_the_parent_no_more_memory_than_its_own(tmp_path):
    # A row unpickled from a worker had its own copy of every key and short value: the
    # parent held about twice what one process holds for the same rows (rl_round at
    # budget=100000 peaked at 1.88 GB with workers=2), which the 1.5 GB target rules out.
    kw = {**KW, "budget": 600}
    one = simulate(**kw)
    two = _two_with_a_started_worker(tmp_path, kw)
    assert _rows(two) == _rows(one)
    # most rows crossed from the worker, so twice the memory a row would show here
    assert two.report()["workers_rollouts"]["worker 1"] >= 200
    own, shipped = held_bytes(list(one.trajectories)), held_bytes(list(two.trajectories))
    assert shipped <= 1.15 * own, (shipped, own)


def test_a_sync_agents_rollouts_go_to_the_worker_and_the_stage_takes_what_is_left(tmp_path):
    # A fixed third of the situations on the stage's process left it the bottleneck
    # offline (it also plans and lands every row) with its worker idle a sixth of the time.
    kw = {**KW, "budget": 600}
    report = _two_with_a_started_worker(tmp_path, kw).report()
    ran = report["workers_rollouts"]
    assert set(ran) == {"stage", "worker 1"} and sum(ran.values()) == 600
    # how much the stage takes depends on how fast each process runs (the policy itself:
    # the next test); a started worker that keeps up takes a share of them
    assert ran["worker 1"] >= 100, ran


class _Queue:
    """A worker as the router sees it: started or not, and its rollouts in flight."""

    def __init__(self, index: int, queued: int, starting: bool = False) -> None:
        self.index, self.waiting, self.starting = index, dict.fromkeys(range(queued)), starting


def _routed(*workers: _Queue, backlog: int = 30) -> int:
    from wai_exp.simulate.shards import ShardedRunner, _StageShard

    runner = ShardedRunner(None, ShardSpec(workers=len(workers) + 1, setup=list), backlog=backlog)
    runner._shards = [_StageShard(None), *workers]
    return runner._route(None).index


def test_a_sync_agents_rollout_goes_to_the_least_queued_started_worker_until_all_are_full():
    assert _routed(_Queue(1, 0)) == 1
    assert _routed(_Queue(1, 29)) == 1
    assert _routed(_Queue(1, 30)) == 0  # its queue is full: the stage runs it
    assert _routed(_Queue(1, 0, starting=True)) == 0  # still importing: the stage runs it
    assert _routed(_Queue(1, 12), _Queue(2, 3), backlog=15) == 2
    assert _routed(_Queue(1, 15), _Queue(2, 15), backlog=15) == 0
    assert _routed(_Queue(1, 0, starting=True), _Queue(2, 14), backlog=15) == 2


def test_a_worker_queue_is_the_concurrency_less_the_stages_slots_split_over_the_workers():
    from wai_exp.simulate.shards import worker_backlog

    assert worker_backlog(32, 2) == 30
    assert worker_backlog(32, 3) == 15
    assert worker_backlog(2, 2) == 1 and worker_backlog(1, 4) == 1  # never zero


def test_three_processes_give_the_rows_of_one():
    one = simulate(**KW)
    three = simulate(shards=ShardSpec(workers=3, setup=functools.partial(setup, KW)), **KW)
    assert _rows(three) == _rows(one)
    assert list(three.report()["workers_peak_rss_mb"]) == ["stage", "worker 1", "worker 2"]


class LockedAgent:
    """A user's agent object holding a lock (as an HTTP client or a cache does)."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.RLock()

    def __call__(self, message: str) -> str:
        with self.lock:
            return "I cannot help with that."


@pytest.mark.parametrize("kind", ["lambda setup", "agent holding a lock"])
def test_a_setup_that_cannot_be_pickled_is_refused_before_any_work_naming_the_fix(kind: str):
    from wai_exp.simulate.shards import same_arguments

    agent = LockedAgent()
    setup = (
        (lambda: (None, {}))
        if kind == "lambda setup"
        else functools.partial(same_arguments, agent, KW)
    )
    seen: list[dict] = []
    with pytest.raises(TypeError) as err:
        simulate(agent, shards=ShardSpec(workers=2, setup=setup), on_row=seen.append, **KW)
    said = str(err.value)
    assert said.startswith("simulate workers: the shards' setup cannot be sent"), said
    assert "RLock" in said or "lambda" in said, said  # pickle's own reason, kept
    assert "module's top level" in said  # and the fix
    assert seen == []


def test_a_message_that_cannot_be_pickled_is_swapped_and_the_frame_still_goes():
    import asyncio
    import pickle

    from wai_exp.simulate.shards import _HEADER, _Outbox, _unsendable

    async def main() -> list:
        sent: list[bytes] = []
        outbox = _Outbox(sent.append, _unsendable)
        outbox.put((1, "ok", "a row"))
        outbox.put((2, "ok", lambda: None))  # an agent's own object in a rollout's outcome
        outbox.put((3, "ok", "another row"))
        outbox.flush()
        outbox.put((4, "ok", "later"))  # the pipe goes on
        outbox.flush()
        return [pickle.loads(frame[_HEADER.size :]) for frame in sent]

    first, second = asyncio.run(main())
    assert [m[0] for m in first] == [1, 2, 3] and first[0][1] == first[2][1] == "ok"
    assert first[1][1] == "error" and "cannot be sent to the stage" in first[1][2]
    assert second == [(4, "ok", "later")]


def broken_setup() -> tuple[None, dict]:
    """A worker's setup that cannot build its agent (a module the worker cannot import)."""
    raise ModuleNotFoundError("No module named 'my_agents'")


def _error_of_run(**kwargs) -> str:
    """The run's error as text (nothing of the failed run stays referenced)."""
    try:
        simulate(shards=ShardSpec(workers=2, setup=broken_setup), **kwargs)
    except Exception as exc:  # noqa: BLE001 - the test reads what it says
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def test_a_worker_that_cannot_start_fails_the_run_naming_why(caplog):
    import gc

    # The stage's own share starts at once; the worker's first rollout reports its failure.
    said = _error_of_run(**KW)
    assert said.startswith("WorkerNotStarted: simulate worker 1 could not start"), said
    assert "No module named 'my_agents'" in said
    # The other rollouts that failed with it are not logged later, one by one, by whatever
    # collection frees them ("Task exception was never retrieved").
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    # A budget that ends before any rollout reaches the worker still says so: the one
    # situation of this run is the stage's own.
    tiny = {"mode": "explore", "budget": 1, "seed": 3}
    [row] = simulate(**tiny).rows
    assert shard_of(row["scenario_id"], local_shares(2)) == 0
    said = _error_of_run(**tiny)
    assert said.startswith("WorkerNotStarted") and "my_agents" in said, said


def _codec() -> tuple[Any, Any]:
    """A worker's frame encoder and the stage's decoder."""
    from wai_exp.rows.jsonl import StringSharer
    from wai_exp.simulate.shards import _decoder, _FrameCodec, _row_of

    return _FrameCodec(sample=_row_of).encode, _decoder(StringSharer())


def test_rows_a_worker_sends_over_many_frames_come_back_equal_and_sharing_their_keys():
    rows = simulate(**{**KW, "budget": 120}).trajectories
    encode, decode = _codec()
    frames = [
        [(i, "ok", row, None, 0.5) for i, row in enumerate(rows[start : start + 8], start)]
        for start in range(0, len(rows), 8)
    ]
    bodies = [encode(frame) for frame in frames]
    got = [decode(body) for body in bodies]

    assert {body[:1] for body in bodies} == {b"m"}  # rows of plain types go by marshal
    assert [msg[2] for frame in got for msg in frame] == rows
    assert all(msg[3:] == (None, 0.5) for frame in got for msg in frame)
    first, last = got[0][0][2], got[-1][-1][2]
    # each key a later frame's row holds is the object the first frame's row holds (as the
    # rows of one process share it), not a copy of its own
    shared = [k for k in last if k in first]
    assert len(shared) > 20
    same = {k: next(x for x in first if x == k) for k in shared}
    assert all(k is same[k] for k in shared)


def test_a_worker_frame_with_a_message_that_cannot_be_pickled_still_goes_with_its_rows():
    import asyncio

    from wai_exp.simulate.shards import _HEADER, _Outbox, _unsendable

    row = simulate(**{**KW, "budget": 4}).rows[0]
    encode, decode = _codec()

    async def main() -> list:
        sent: list[bytes] = []
        outbox = _Outbox(sent.append, _unsendable, encode)
        outbox.put((1, "ok", row, None, 0.1))
        outbox.put((2, "ok", {**row, "agent_object": lambda: None}, None, 0.1))
        outbox.flush()
        outbox.put((3, "ok", row, None, 0.1))
        outbox.flush()
        return [decode(frame[_HEADER.size :]) for frame in sent]

    first, second = asyncio.run(main())
    assert first[0][2] == row and first[1][1] == "error" and second[0][2] == row
    assert "cannot be sent" in first[1][2]


def held_setup(gate: str, kwargs: dict) -> tuple[None, dict]:
    """A worker's setup that waits (up to 20 s) for ``gate`` to exist: a worker slow to
    import or to build its agent. It notes whether the gate opened."""
    import time
    from pathlib import Path

    deadline = time.monotonic() + 20
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    Path(gate + ".seen").write_text("open" if Path(gate).exists() else "timed out")
    return None, dict(kwargs)


def test_the_stage_runs_a_starting_workers_rollouts_instead_of_waiting_for_it(tmp_path):
    # Plans sent to a worker still starting waited in its pipe with their slots held; now
    # the stage runs them until the worker says it started. The gate opens only once every
    # row has landed, so the run must finish without the worker.
    gate = str(tmp_path / "gate")
    rows: list[dict] = []

    def landed(row: dict) -> None:
        rows.append(row)
        if len(rows) == KW["budget"]:
            (tmp_path / "gate").touch()

    one = simulate(**KW)
    two = simulate(
        shards=ShardSpec(workers=2, setup=functools.partial(held_setup, gate, KW)),
        on_row=landed,
        **KW,
    )
    assert (tmp_path / "gate.seen").read_text() == "open"
    assert _rows(two) == _rows(one)


class Label(str):
    """A user's own string type in a row (an enum-like label from their agent)."""


@pytest.mark.parametrize("label", [Label("escalate"), "escalate"], ids=["str subclass", "str"])
def test_rows_shaped_by_a_users_agent_cross_to_the_stage_as_they_were(label: str):
    # What a user's agent may leave in its rows: its own str subclass (which marshal does
    # not take: the frame is pickled), int and tuple keys, bytes, a long text shared by
    # every row, equal texts that are separate objects, a string shared with nothing else.
    long_text = "policy " * 1000  # 7,000 characters, one object in every row

    def row(i: int) -> dict:
        return {
            "scenario_id": f"user-{i}",
            "label": label,
            7: ["seven", ("a", "b")],
            ("tool", "lookup"): {"raw": b"\x00\xff", "text": long_text},
            "reply": "".join(["same ", "reply"]),  # equal to every other row's, not shared
            "note\udcff": "lone surrogate kept as it is",
        }

    encode, decode = _codec()
    frames = [
        [(i, "ok", row(i), None, 0.0) for i in range(start, start + 8)] for start in (0, 8, 16)
    ]
    bodies = [encode(frame) for frame in frames]
    got = [decode(body) for body in bodies]

    assert {body[:1] for body in bodies} == {b"p" if type(label) is Label else b"m"}
    rows = [msg[2] for frame in got for msg in frame]
    assert rows == [row(i) for i in range(24)]
    assert all(type(r["label"]) is type(label) for r in rows)
    assert all(r[("tool", "lookup")]["raw"] == b"\x00\xff" for r in rows)
    if type(label) is str:  # marshalled: the long text is one object in the stage too
        assert len({id(r[("tool", "lookup")]["text"]) for r in rows}) == 1


def model_setup(spec: str, kwargs: dict) -> tuple[str, dict]:
    """A worker whose agent is the model at ``spec`` (the stage's may be another)."""
    return spec, dict(kwargs)


async def slow_agent(prompt: str, **_: object) -> str:
    """A user's own agent that takes a fifth of a second a rollout."""
    import asyncio

    await asyncio.sleep(0.2)
    return "I cannot help with that."


def test_a_workers_warning_about_its_model_server_reaches_the_stages_progress_line():
    # Only the worker's agent calls the (hung) model server; the stage's own agent is a
    # callable. The warning the worker's calls give used to stay in the worker: the
    # progress line read only the stage's agent.
    import threading

    from tests.support.scripted_server import scripted_server

    release = threading.Event()

    def hang(path, headers, body):
        release.wait(30)
        return 500, {"error": {"message": "too late"}}

    kw = {"budget": 30, "seed": 0, "timeout": 2.0,
          "advanced": {"concurrency": 2, "progress_every_s": 0.1}}  # fmt: skip
    notes: list[str] = []
    # the worker must be up before the stage's own rollouts (0.2 s each) finish the budget:
    # a cold worker under load took longer, and the stage ran every rollout itself
    _spare_ready()
    with scripted_server(hang) as url:
        setup = functools.partial(model_setup, f"vllm:served-model@{url}", kw)
        try:
            simulate(slow_agent, shards=ShardSpec(workers=2, setup=setup),
                     progress=lambda p: notes.append(p.get("note") or ""), **kw)  # fmt: skip
        except Exception:  # noqa: BLE001 - the worker's rollouts are lost: the run may fail
            pass
        finally:
            release.set()
    said = [n for n in notes if "worker 1: no model call has come back for" in n]
    assert said, notes
    assert "(each is cut off at simulate.timeout=2 s)" in said[0], said[0]


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (or is a zombie) within ``within`` seconds."""
    import time
    from pathlib import Path

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):  # reaped before or while read
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_prestarted_worker_is_the_one_the_stage_takes(monkeypatch):
    import importlib

    shards = importlib.import_module("wai_exp.simulate.shards")
    shards.prestart(2)
    [spare] = shards._SPARES
    started: list[object] = []

    class Counted(shards._Process):
        def __init__(self) -> None:
            started.append(self)
            super().__init__()

    monkeypatch.setattr(shards, "_Process", Counted)
    two = simulate(shards=ShardSpec(workers=2, setup=functools.partial(setup, KW)), **KW)
    assert _rows(two) == _rows(simulate(**KW))
    assert started == [] and shards._SPARES == []  # no process started: it took the spare
    assert _gone(spare.pid)  # and closed it at the stage's end


def test_a_spare_started_in_another_folder_is_not_taken(tmp_path, monkeypatch):
    import importlib

    shards = importlib.import_module("wai_exp.simulate.shards")
    shards.prestart(2)
    [spare] = shards._SPARES
    # its `python -m` would import a user's agent module from the folder it started in
    monkeypatch.chdir(tmp_path)
    from wai_exp.simulate.shards import same_arguments

    two = simulate(
        shards=ShardSpec(workers=2, setup=functools.partial(same_arguments, None, KW)), **KW
    )
    assert len(two.rows) == KW["budget"] and shards._SPARES == []
    assert _gone(spare.pid)


def test_spares_no_stage_took_end_with_their_process():
    import subprocess
    import sys

    script = (
        "import importlib, os, sys\n"
        "shards = importlib.import_module('wai_exp.simulate.shards')\n"
        "shards.prestart(3)\n"
        "print(' '.join(str(p.pid) for p in shards._SPARES), flush=True)\n"
        "if sys.argv[1] == 'crash':\n"
        "    os._exit(1)  # no atexit: the spares see their stdin close\n"
    )
    for how in ("exit", "crash"):
        out = subprocess.run(
            [sys.executable, "-c", script, how], capture_output=True, text=True, timeout=60
        )
        pids = [int(p) for p in out.stdout.split()]
        assert len(pids) == 2, out.stdout + out.stderr
        assert all(_gone(pid) for pid in pids), how
        assert "Traceback" not in out.stderr, out.stderr  # a spare leaves quietly


def test_a_ctrl_c_while_spares_import_leaves_no_traceback_and_no_process():
    # A user's Ctrl-C often comes while MLflow starts its run, when the spares are still
    # importing: the terminal showed each one's KeyboardInterrupt traceback.
    import os
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import importlib, os, time\n"
        "shards = importlib.import_module('wai_exp.simulate.shards')\n"
        "shards.prestart(3)\n"
        "try:\n"
        "    print(' '.join(str(p.pid) for p in shards._SPARES), flush=True)\n"
        "    time.sleep(30)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    time.sleep(0.2)  # the spares are importing (0.3-1 s)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    out, err = proc.communicate(timeout=60)
    assert "interrupted" in out and len(pids) == 2
    assert all(_gone(pid) for pid in pids)
    assert "Traceback" not in err, err


def never_ending_setup(kwargs: dict) -> tuple[None, dict]:
    """A worker whose interpreter cannot end: its agent's module left a thread running that
    never returns (a user's own pool or logger may)."""
    import threading
    import time

    threading.Thread(target=time.sleep, args=(3600,)).start()
    return None, dict(kwargs)


def test_the_stage_reports_without_waiting_for_its_worker_to_exit_and_kills_one_that_cannot():
    # A worker that has said its last frame takes 0.2-0.4 s to tear its interpreter down;
    # the stage waited for it before writing its report, with the other core idle.
    import importlib

    shards = importlib.import_module("wai_exp.simulate.shards")
    before = set(shards._CLOSING)
    two = simulate(
        shards=ShardSpec(workers=2, setup=functools.partial(never_ending_setup, KW)), **KW
    )
    # its last frame came: its peak memory is in the report, yet it has not exited
    assert two.report()["workers_peak_rss_mb"]["worker 1"] > 0
    [worker] = shards._CLOSING - before
    assert worker.returncode is None
    assert _gone(worker.pid, within=shards._EXIT_WAIT_S + 5)  # killed, not left behind


def slow_answer(seconds: float, message: str, **_: object) -> str:
    """A user's sync agent that takes ``seconds`` a rollout."""
    import time

    time.sleep(seconds)
    return "I cannot help with that."


def slow_announcing_setup(flag: str, kwargs: dict) -> tuple[Any, dict]:
    """``announcing_setup`` with ``slow_answer`` at 0.1 s a rollout for its agent."""
    return functools.partial(slow_answer, 0.1), announcing_setup(flag, kwargs)[1]


def _spare_ready() -> None:
    """Start the worker of the next stage and wait (up to 60 s) until it has imported all
    it needs: its event loop waits for its setup. A cold worker under load can take longer
    to start than a short run's clock."""
    import importlib
    import time
    from pathlib import Path

    shards = importlib.import_module("wai_exp.simulate.shards")
    shards.prestart(2)
    wchan = Path(f"/proc/{shards._SPARES[-1].pid}/wchan")
    deadline = time.monotonic() + 60
    while wchan.read_text() != "do_epoll_wait" and time.monotonic() < deadline:
        time.sleep(0.02)


def test_the_clock_abandons_rollouts_still_on_a_worker_and_the_run_ends_with_its_rows(tmp_path):
    flag = str(tmp_path / "worker-started")
    # closing_margin 0: groups open until the clock, so rollouts are queued on the worker
    # when it runs out (with the default the run may drain first, and abandon nothing)
    kw = {**KW, "budget": 10_000, "time_budget": 3.0,
          "advanced": {"stop_grace": 0.05, "closing_margin": 0.0}}  # fmt: skip
    _spare_ready()
    data = simulate(
        functools.partial(slow_answer, 0.1),
        shards=ShardSpec(workers=2, setup=functools.partial(slow_announcing_setup, flag, kw)),
        on_row=_holding_first_landing(flag),
        **kw,
    )
    report = data.report()
    assert report["stopped_because"] == "time_budget"
    assert report["workers_rollouts"]["worker 1"] > 0
    # the worker's queue held more than the grace let finish: those were abandoned, not
    # waited for; every rollout that came back landed, and none counts twice
    assert report["rollouts_abandoned"] > 0
    assert len(data.rows) + report["rollouts_abandoned"] <= sum(report["workers_rollouts"].values())


def flushing_setup(path: str, kwargs: dict) -> tuple[None, dict]:
    """A worker whose agent's module flushes a log at exit, taking half a second."""
    import atexit
    import time
    from pathlib import Path

    def flush() -> None:
        time.sleep(0.5)
        Path(path).write_text("flushed")

    atexit.register(flush)
    return None, dict(kwargs)


def test_a_workers_own_exit_handlers_finish_when_the_stages_process_exits_first(tmp_path):
    # The stage no longer waits for a closed worker to exit; a process that ends right
    # after its stage still gives the worker its exit time before killing it.
    import subprocess
    import sys

    log = tmp_path / "agent.log"
    script = (
        "import functools, importlib\n"
        "from wai_exp.simulate.engine import simulate\n"
        "from wai_exp.simulate.shards import ShardSpec\n"
        "from tests.simulate.test_shards import KW, flushing_setup\n"
        "importlib.import_module('wai_exp.simulate.shards').prestart(2)  # as the console script\n"
        f"setup = functools.partial(flushing_setup, {str(log)!r}, KW)\n"
        "simulate(shards=ShardSpec(workers=2, setup=setup), **KW)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert log.read_text() == "flushed"


def importing_setup(folder: str, kwargs: dict) -> tuple[Any, dict]:
    """A worker whose agent is a user's module that fails as it is imported."""
    import importlib
    import sys

    sys.path.insert(0, folder)
    return importlib.import_module("my_desk").answer, dict(kwargs)


def test_a_worker_whose_agent_module_fails_to_import_names_the_users_file_and_line(tmp_path):
    # The worker sent the outermost frames of its traceback, all wai-exp's own: the user
    # saw "OSError: Address already in use" and nothing of where.
    (tmp_path / "my_desk.py").write_text(
        "import os\n\nraise OSError('Address already in use')\n\n\ndef answer(message):\n"
        "    return 'ok'\n"
    )
    setup = functools.partial(importing_setup, str(tmp_path), KW)
    with pytest.raises(Exception) as err:
        simulate(shards=ShardSpec(workers=2, setup=setup), **KW)
    said = str(err.value)
    assert "could not start" in said and "Address already in use" in said, said
    assert 'my_desk.py", line 3' in said, said


def test_a_spare_loads_its_model_transport_before_its_setup_arrives():
    # A model agent's first calls on a worker waited while it imported aiohttp and read the
    # TLS store (0.15-0.2 s, every rollout started with them waiting): a spare has the time.
    import importlib
    from pathlib import Path

    shards = importlib.import_module("wai_exp.simulate.shards")
    try:
        _spare_ready()
        maps = Path(f"/proc/{shards._SPARES[-1].pid}/maps").read_text()
    finally:
        shards._close_spares()
    assert "/aiohttp/_http_parser" in maps


def test_a_ray_actor_that_cannot_import_wai_exp_names_where_to_install_it() -> None:
    from wai_exp.simulate.shards import _missing_module_fix

    said = _missing_module_fix("ModuleNotFoundError: No module named 'wai_exp'")
    assert "every node of the Ray cluster" in said and "simulate.cluster=local" in said
    assert _missing_module_fix("ValueError: bad agent.kwargs") == ""
