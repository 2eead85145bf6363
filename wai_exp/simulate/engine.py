"""The simulate engine: ``simulate()`` draws situations, runs the agent against the mock
world, and returns every rollout as a schema-v1 row.

Scheduling is a continuous pool and deterministic: up to ``concurrency`` rollouts run at
once (async agents as coroutines; a sync user callable on a pool of ``concurrency``
threads; the built-in scripted agent in the loop, one at a time) and a finished one is
replaced at once. Rollouts land in plan order, and the planner runs after each landing,
reading only rows that landed before in plan order, with a bounded lookahead
(``Engine._lookahead``). Every per-rollout seed is a stable hash of
``(seed, scenario_id, phrasing, rollout_index, eval_run)``. So the same seed gives the same
rows, byte for byte once ``timing`` is removed, whatever finishes first, in any process and
at any concurrency up to ``writer_buffer_cap``.

This module holds the scheduler (``Engine``: the pool, allocation, stop rules) and
``simulate()``, which wires the parts together:

* ``modes``: the mode table and parameter validation -> ``Config``;
* ``world_setup`` / ``agent_setup``: the spec, world and agent a run acts with;
* ``tasks``: asks, planned rollouts, the sources that supply asks, mutations;
* ``replay``: ``tasks=``, ``traces=`` and ``runs=N`` asks rebuilt from earlier rows;
* ``rollout``: one rollout and its row; ``report``: the run report; ``stream``: ``output=``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from wai_exp.domain.gc_tuning import fewer_gc_passes, landed_rows_frozen
from wai_exp.llm.loop import send_requests_first
from wai_exp.rows.model import NOT_EXECUTED, not_executed
from wai_exp.simulate.agent_setup import ResolvedAgent, is_async_callable, resolve_agent
from wai_exp.simulate.data import SimulationData
from wai_exp.simulate.ids import prompt_sha, short_hash, stable_hash
from wai_exp.simulate.llm_grade import resolve_llm_grader
from wai_exp.simulate.modes import MODE_PRESETS, Config
from wai_exp.simulate.params import SimulateParams
from wai_exp.simulate.replay import pinned_tasks, rerun_tasks, trace_seeds
from wai_exp.simulate.report import build_report, row_facts, tier_mix
from wai_exp.simulate.rollout import Outcome, RolloutRunner
from wai_exp.simulate.run_health import (
    binding_timeout_knob,
    cause_of,
    early_warning,
    failure_summary,
    lost_warning,
)
from wai_exp.simulate.shards import (
    ShardedRunner,
    ShardSpec,
    WorkerDied,
    WorkerNotStarted,
    worker_backlog,
)
from wai_exp.simulate.stream import RowStream
from wai_exp.simulate.tasks import MutationQueue, Plan, SituationSource, Task, group_split
from wai_exp.simulate.world_setup import (
    WorldSetup,
    mcp_tools,
    plan_blind,
    plan_not_served,
    resolve_spec,
    resolve_world,
    world_dump,
)

__all__ = ["MODE_PRESETS", "simulate"]

#: ``selection_reason`` of the rollouts a policy adds after an ask's first batch.
_EXTEND_REASON = {"fixed": "fixed", "split": "group_split", "verify": "verify"}


class Plateau:
    """The saturation stop's plateau rule: over the last ``window`` landed rows, coverage
    (distinct ``(stance, world_state, tool_condition, behaviour signature)`` keys) grew by
    less than ``growth`` times what it was before them. A curve that still climbs a little
    (a key every ~80 rows on a one-tool desk) never goes a whole quiet stretch without a new
    key, so "no new key for N rows" alone runs such a world to its budget."""

    def __init__(self, window: int, growth: float) -> None:
        self.window, self.growth = window, growth
        self.recent: deque[int] = deque(maxlen=window)
        self.new = 0
        self.coverage = 0

    def land(self, novel: int, coverage: int) -> bool:
        """Record one landed row (``novel``: it brought a new key); True on a plateau."""
        if len(self.recent) == self.window:
            self.new -= self.recent[0]
        self.recent.append(novel)
        self.new += novel
        self.coverage = coverage
        before = coverage - self.new
        return len(self.recent) == self.window and self.new < self.growth * before

    def record(self, rows: int) -> dict[str, Any]:
        """What the report says about the stop."""
        return {
            "rows": rows,
            "coverage": self.coverage,
            "new_in_window": self.new,
            "window": self.window,
            "growth": self.growth,
        }


class Engine:
    """Schedules one ``simulate()`` call's rollouts in a continuous pool and applies its stop
    rules.

    Reads ``cfg`` and the knobs; runs rollouts through ``runner``; keeps the landed rows,
    the lost rollouts and the counters the report reads.
    """

    def __init__(
        self,
        cfg: Config,
        runner: RolloutRunner,
        *,
        agent_async: bool,
        mutations: MutationQueue,
        done_rows: dict[str, dict[str, Any]],
        on_row: Callable[[dict[str, Any]], Any] | None,
        progress: Callable[[dict[str, Any]], Any] | None,
    ) -> None:
        self.cfg = cfg
        self.knobs = cfg.knobs
        self.runner = runner
        self.agent_async = agent_async
        self.mutations = mutations
        self.done_rows = done_rows
        self.on_row = on_row
        self.progress = progress
        self.thr = cfg.knobs.pass_threshold
        self.rows: list[dict[str, Any]] = []
        self.lost: list[dict[str, Any]] = []
        self.lost_by: Counter[str] = Counter()
        self.abandoned = 0
        self.reused = 0
        self.new_rows = 0
        self.warnings: list[str] = []
        self.durations: deque[float] = deque(maxlen=cfg.knobs.closing_window_rollouts)
        self.coverage: set[tuple[Any, ...]] = set()
        #: what the saturation stop saw when it fired (``report()["saturation"]``)
        self.plateau: dict[str, Any] | None = None
        self.novel_rows = 0
        self.t0 = time.monotonic()
        self.deadline = None if not cfg.time_budget else self.t0 + float(cfg.time_budget)
        self._last_progress_t = self.t0
        self._last_progress_rows = 0
        self.stop_reason: str | None = None
        self._live_rows = 0  # rows landed in this call so far, updated as each lands
        self._live_lost = 0
        self.per_run: list[dict[str, Any]] = []
        self.per_run_tiers: list[Counter[str]] = []
        self.mutating = False  # on while a run draws fresh situations (not under replay)
        self.writer: Any = None  # the model writer of simulator=<spec>, None for the template
        #: processes (or Ray actors) the rollouts ran on; 1 = this one (``shards``)
        self.shard_count = 1
        #: each worker process's peak resident memory in MB by name, known once they stopped
        self.shard_rss_mb: dict[str, float | None] | None = None
        #: rollouts each process was given by name (``ShardedRunner.rollouts_by_process``)
        self.shard_rollouts: dict[str, int] | None = None
        #: each worker process's own model-server limits (``ServerLimits.summary()``) by
        #: name, likewise; None when every rollout ran in this process
        self.shard_limits: dict[str, dict[str, Any] | None] | None = None
        #: the last early warning the progress line gave (slow completions, a serial server)
        self.early_warning: str | None = None
        #: rollout-slot seconds the pool had, and those it sat idle on verdicts (``split``)
        self.pool_slot_s = 0.0
        self.idle_slot_s = 0.0
        self.replayed = False  # a run's asks came from tasks= (a fixed task set)
        #: the template writer's rounds: repeats rejected, bounce rounds, short batches
        self.draw_stats: Counter[str] = Counter(
            dict.fromkeys(("repeats_rejected", "bounce_rounds", "short_batches_accepted"), 0)
        )
        #: the last planning pass stopped on room held for extensions awaiting verdicts
        self.held_for_verdicts = False
        #: the model servers' adaptive in-flight limits (``wai_exp.llm.concurrency``), None
        #: when no model server is called
        self.server_limits: Any = None
        #: called once per row kept (``gc_tuning.landed_rows_frozen``, set by ``simulate``)
        self.row_kept: Callable[[], None] = lambda: None

    # ---- all runs -----------------------------------------------------------------------
    def tick_s(self) -> float:
        """The loop's tick: the longest the loop waits for a rollout before it re-plans,
        re-checks the stop rules and redraws a due progress line. ``collect_wait_s``; under a
        clock it shrinks with the time left, never under ``collect_wait_floor_s`` (so a clock
        nearly or already out is re-checked every floor seconds, not in a busy loop)."""
        tick = self.knobs.collect_wait_s
        if self.deadline is None:
            return tick
        left = self.deadline - time.monotonic()
        return max(self.knobs.collect_wait_floor_s, min(tick, left))

    async def run_all(
        self,
        first: Callable[[], SituationSource],
        rerun: Callable[[list[Task]], SituationSource],
    ) -> None:
        """Run 0 over ``first()``; runs 1..N-1 replay the asks run 0 opened (``rerun``).
        The progress line is redrawn every ``progress_every_s`` meanwhile, rows or not (checked
        on the loop's tick, ``tick_s``)."""
        first_tasks: list[Task] = []
        for eval_run in range(self.cfg.runs):
            # Later runs replay the asks the first run opened, with fresh rollout seeds.
            src = first() if eval_run == 0 else rerun(first_tasks)
            before = len(self.rows)
            self.mutating = src.writer is not None
            self.replayed = self.replayed or (eval_run == 0 and src.replay is not None)
            await self.run(src, eval_run)
            self.per_run_tiers.append(
                Counter(
                    str((r.get("scenario_dimensions") or {}).get("tier"))
                    for r in self.rows[before:]
                )
            )
            if eval_run == 0:
                first_tasks = [t for t in src.tasks if t.opened > 0]
            if self.stop_reason in ("dead_agent", "time_budget"):
                break

    # ---- seeds and ids ------------------------------------------------------------------
    def _plan(self, task: Task, eval_run: int, reason: str) -> Plan:
        repeat = task.opened
        task.opened += 1
        # rollout_index is unique within a scenario: phrasing p owns indices p*k .. p*k+k-1.
        rollout_index = task.phrasing_index * self.cfg.repeats + repeat
        seed = stable_hash(
            self.cfg.seed, task.scenario_id, task.phrasing_index, rollout_index, eval_run
        )
        rid = "r-" + short_hash(
            self.runner.run_id, task.scenario_id, task.phrasing_index, rollout_index, eval_run
        )
        return Plan(task, rollout_index, eval_run, seed, rid, reason)

    # ---- stop rules ---------------------------------------------------------------------
    def _dead(self) -> bool:
        """An agent that raises on every call is called off (``dead_agent_errors``, or a
        whole run's budget lost with no row landed, whichever comes first), and one that
        loses more than ``dead_agent_budget_multiple`` x budget rollouts in all too. Reads
        live counters, so it also stops rollouts that have not started yet."""
        lost = self._live_lost
        first = min(self.knobs.dead_agent_errors, self.cfg.budget)
        if self._live_rows == 0 and lost >= first:
            return True
        return lost >= max(
            self.knobs.dead_agent_errors,
            self.knobs.dead_agent_budget_multiple * self.cfg.budget * self.cfg.runs,
        )

    def _clock_out(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _closing(self) -> bool:
        """Under a clock: too little time left to open a new group."""
        if self.deadline is None or not self.durations:
            return False
        left = self.deadline - time.monotonic()
        return left < self.knobs.closing_margin * statistics.median(self.durations)

    def _stop_before_round(self, landed: int) -> str | None:
        if self._dead():  # first: a budget spent on lost rollouts alone is a dead agent
            return "dead_agent"
        if landed >= self.cfg.budget:
            return "budget"
        if self._clock_out():
            return "time_budget"
        return None

    # ---- one run ------------------------------------------------------------------------
    def _lookahead(self) -> int:
        """Rollouts planned but not landed at most: ``writer_buffer_waves`` x the larger of
        ``writer_buffer_cap`` and ``concurrency``. It is the planner's only dependence on
        concurrency, so rows are identical at any concurrency up to ``writer_buffer_cap``; a
        larger concurrency widens it so the pool never runs dry waiting for the oldest
        rollout to land."""
        k = self.knobs
        width = max(k.writer_buffer_cap, k.concurrency)
        return max(1, k.writer_buffer_waves * width)

    async def run(self, source: SituationSource, eval_run: int) -> None:
        """Plan and run rollouts over ``source`` until a stop rule fires; record the run.

        A continuous pool: up to ``concurrency`` rollouts run at once (one for a sync agent,
        called in the loop) and a finished one is replaced at once. Rollouts land in plan
        order, one at a time, and the planner runs after each landing (and at the start)
        with room for ``_lookahead()`` rollouts not yet landed. So what it decides reads only
        rows that landed before, in plan order: the rows do not depend on timing.
        """
        cfg = self.cfg
        run_rows_start = len(self.rows)
        run_lost_start = len(self.lost)
        open_tasks: list[Task] = []  # tasks with rollouts still to decide or plan
        window = self._lookahead()
        conc = max(1, self.knobs.concurrency) if self.agent_async else 1
        quiet_limit = self.knobs.empty_rounds_to_stop * max(1, self.knobs.writer_buffer_cap)
        plateau = Plateau(self.knobs.saturation_window, self.knobs.saturation_growth)
        pool = _Pool(self, conc)
        t_run = time.monotonic()
        quiet = 0
        # The planner runs at the start and after each landing, never twice on the same
        # landed rows: a second pass between landings (a wake-up from a rollout other than
        # the oldest, a tick) could open a short last group the first pass held back, so
        # the rows would depend on which rollout finished first (the concurrency, the
        # worker count).
        plan_due = True
        stop: str | None = None
        try:
            while True:
                # A lost rollout spends its slot like a row: another ask taking it would
                # change the task mix behind the headline (the crashed-on asks would vanish).
                landed = len(self.rows) - run_rows_start + len(self.lost) - run_lost_start
                if stop is None:
                    stop = self._stop_before_round(landed)
                if stop is None and plan_due:
                    plan_due = False
                    room = min(cfg.budget - landed, window) - len(pool.pending)
                    self.held_for_verdicts = False
                    if room > 0:
                        plans: list[Plan] = []
                        open_tasks = self._continue_open(open_tasks, plans, room, eval_run)
                        closing = self._closing()
                        started = await self._open_new(
                            source, open_tasks, plans, room, landed + len(pool.pending),
                            closing, eval_run, room=window - len(pool.pending), pool=pool,
                        )  # fmt: skip
                        for plan in plans[started:]:
                            pool.add(plan)
                        if not pool.pending:
                            stop = "time_budget" if closing else source.exhausted_by
                if stop is not None:
                    pool.stop(stop)
                    if not pool.pending:
                        break
                pool.start()
                if not pool.head_done():
                    idle = self._idle_slots(pool) if stop is None else 0
                    t_wait = time.monotonic() if idle else 0.0
                    await pool.wait()
                    if idle:
                        self.idle_slot_s += idle * (time.monotonic() - t_wait)
                    if pool.ticked:  # a tick with no landing: a progress line may be due
                        pool.ticked = False
                        self._maybe_progress()
                    continue
                try:
                    plan, outcome = pool.pop()
                except (WorkerDied, WorkerNotStarted):
                    await pool.drain()  # the other shards' rollouts land in the partial file
                    raise
                novel = self._land(plan, outcome)
                plan_due = True
                if cfg.until == "saturation" and outcome is not None:
                    quiet = 0 if novel else quiet + 1
                    flat = outcome.row is not None and plateau.land(novel, len(self.coverage))
                    if (quiet >= quiet_limit or flat) and stop is None:
                        stop = "saturation"
                        self.plateau = plateau.record(len(self.rows) - run_rows_start)
        finally:
            pool.cancel_all()
            self.pool_slot_s += conc * (time.monotonic() - t_run)
            self.draw_stats.update(source.stats)
        self.per_run.append(
            {
                "eval_run": eval_run,
                "rows": len(self.rows) - run_rows_start,
                "stopped_because": stop,
                "asks": len(source.tasks),
            }
        )
        self.stop_reason = stop

    def _idle_slots(self, pool: _Pool) -> int:
        """Free rollout slots the planner could not fill because open asks of an allocating
        rl pool (``split``) hold room for extensions that wait on their first rollouts'
        verdicts, and no other ask could open: the pool is idle on verdicts (0 otherwise; a
        budget nearly spent or a full lookahead is not waiting on verdicts)."""
        if not self.held_for_verdicts or self.cfg.repeat_policy != "split" or pool.waiting:
            return 0
        return max(0, pool.conc - len(pool.running))

    def _first_batch(self) -> int:
        """Rollouts an ask opens with: k under ``fixed``, ``k // 2`` (at least 2) under
        ``split``, one under ``verify``."""
        policy, k = self.cfg.repeat_policy, self.cfg.repeats
        if policy == "fixed":
            return k
        return max(2, k // 2) if policy == "split" else 1

    def _continue_open(
        self, open_tasks: list[Task], plans: list[Plan], capacity: int, eval_run: int
    ) -> list[Task]:
        """Plan what open asks still need (into ``plans``); return the asks still open.

        Fixed groups short of k are topped up; under an allocating policy a first batch cut
        by the lookahead is topped up, an ask whose first rollouts have all landed is
        extended to k or closed (``_wants_more``), and extensions short of k continue.
        """
        policy = self.cfg.repeat_policy
        first = self._first_batch()
        still_open: list[Task] = []
        for task in open_tasks:
            if policy != "fixed" and not task.decided and task.opened < min(first, task.k):
                while task.opened < min(first, task.k) and len(plans) < capacity:
                    plans.append(self._plan(task, eval_run, "initial"))
                still_open.append(task)
                continue
            if policy != "fixed" and not task.decided and task.resolved >= task.opened:
                task.decided = True
                if not self._wants_more(task):
                    task.k = task.opened  # closed: no more rollouts for this ask
            if policy == "fixed" or task.decided:
                while task.opened < task.k and len(plans) < capacity:
                    plans.append(self._plan(task, eval_run, _EXTEND_REASON[policy]))
                if task.opened < task.k:
                    still_open.append(task)
            else:
                still_open.append(task)
        return still_open

    async def _open_new(
        self,
        source: SituationSource,
        open_tasks: list[Task],
        plans: list[Plan],
        capacity: int,
        landed: int,
        closing: bool,
        eval_run: int,
        room: int,
        pool: _Pool,
    ) -> int:
        """Open new asks with what ``capacity`` leaves (none when the clock is closing).
        ``landed`` counts the rollouts planned and not landed yet as landing; ``room`` is
        what the lookahead leaves for new plans and held-back extensions together. Returns
        how many of ``plans`` are already in ``pool`` (started before waiting on a model
        writer); the caller adds the rest.

        Under an allocating policy every open ask holds back room for its possible extension
        to k, so a split seen late is never cut by the budget; only when nothing is held
        back does a last, shorter group fill the budget. A new ask waits while the lookahead
        cannot hold its k, so the asks opened before any row lands stay few enough for the
        rows that land to steer the later ones (mutations, splits).
        """
        policy, repeats = self.cfg.repeat_policy, self.cfg.repeats
        first = self._first_batch()
        reason = "fixed" if policy == "fixed" else "initial"
        reserve = 0 if policy == "fixed" else sum(t.k - t.opened for t in open_tasks)
        self.held_for_verdicts = False
        started = 0
        while len(plans) < capacity and not closing:
            left = self.cfg.budget - landed - len(plans) - reserve
            if policy != "fixed" and left < repeats and not (reserve == 0 and not plans):
                break
            if policy != "fixed" and room - len(plans) - reserve < repeats and (plans or reserve):
                # The room held back for open asks' extensions is what stops a new ask.
                self.held_for_verdicts = reserve > 0
                break
            if source.may_block():
                # A model writer's pool ran dry: what is planned starts now, and the wave is
                # waited for off the loop (``_writer_ready``), at the same point of the plan
                # as a blocking wait, so the rows still do not depend on timing.
                for plan in plans[started:]:
                    pool.add(plan)
                started = len(plans)
                pool.start()
                await _writer_ready(source)
            task = source.next_task()
            if task is None:
                self.held_for_verdicts = reserve > 0  # no ask left while open ones may grow
                break
            n0 = min(first, task.k)
            while task.opened < n0 and len(plans) < capacity:
                plans.append(self._plan(task, eval_run, reason))
            open_tasks.append(task)
            if policy != "fixed":
                reserve += task.k - task.opened
        return started

    def _wants_more(self, task: Task) -> bool:
        """Whether an ask whose first rollouts all landed is extended to k."""
        policy = self.cfg.repeat_policy
        if policy == "split":
            if not task.landed:
                return False
            return group_split(task.landed, self.thr, by_reward=self.runner.grader is not None)
        if policy == "verify":
            total = len(self.rows)
            share = self.novel_rows / total if total else 1.0
            return share < self.knobs.adaptive_verify_explore_floor
        return False

    # ---- landing ------------------------------------------------------------------------
    def _land(self, plan: Plan, res: Outcome | None) -> int:
        """Record one planned rollout's outcome; 1 when its row brought a new coverage key
        ``(stance, world_state, tool_condition, behaviour signature)``."""
        task = plan.task
        if res is None:
            # Not run (a stop gave it back, or the clock abandoned it): the slot is returned.
            task.opened -= 1 if task.opened > task.resolved else 0
            return 0
        if res.row is None:
            assert res.lost is not None
            task.lost += 1
            self.lost.append(res.lost)
            # The summary's words: "HTTP 429", "unreachable", else the error type.
            self.lost_by[cause_of(res.lost)] += 1
            return 0
        row = res.row
        task.landed.append(row)
        self.rows.append(row)
        self.row_kept()
        if self.mutating:
            self.mutations.note(row)
        dims = row.get("scenario_dimensions") or {}
        key = (
            dims.get("stance"),
            dims.get("world_state"),
            dims.get("tool_condition"),
            row.get("behavior_signature"),
        )
        novel = key not in self.coverage
        if novel:
            self.coverage.add(key)
            self.novel_rows += 1
        self._maybe_progress()
        return int(novel)

    def launch(self, plan: Plan) -> asyncio.Future[Outcome]:
        """Start ``plan``'s rollout: a task running it here, or, for a rollout sent to a
        worker process (``ShardedRunner.launch``), the future its outcome is set on. A
        worker's rollout needs no task of its own: a task and its wake-up cost the stage ~7
        µs a row, a sixth of what taking a row from a worker costs it."""
        launch = getattr(self.runner, "launch", None)
        started = launch(plan) if launch is not None else self.runner.run(plan)
        return started if isinstance(started, asyncio.Future) else asyncio.ensure_future(started)

    def ran(self, plan: Plan, out: Outcome) -> Outcome:
        """A finished rollout's outcome as the run counts it: its row goes to ``on_row``
        (a row that cannot be written is lost; a disk that fails stops the run)."""
        if out.row is None:
            self._live_lost += 1
            self._maybe_progress()
            return out
        if self.on_row is not None:
            try:
                self.on_row(out.row)
            except OSError:
                # The disk (full, read-only, over quota) failed, not the rollout: every later
                # row would fail the same way and read as the agent's loss. Stop the run.
                raise
            except Exception as exc:  # noqa: BLE001 - a row that cannot be written is lost
                self._live_lost += 1
                self._maybe_progress()
                return Outcome(lost=self.runner.lost_record(plan, exc, "writing the row"))
        self.durations.append(out.seconds)
        self.new_rows += 1
        self._live_rows += 1
        self._maybe_progress()  # rows count as they land, not when their round ends
        return out

    # ---- progress -----------------------------------------------------------------------
    def _maybe_progress(self) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        n = max(len(self.rows), self._live_rows)
        if (
            n - self._last_progress_rows >= int(self.knobs.progress_every_rows)
            or now - self._last_progress_t >= self.knobs.progress_every_s
        ):
            self.emit_progress(now)

    def timeout_knob(self) -> str | None:
        """The knob that bounds the agent's model completions (``agent.timeout`` when the
        backend's own limit is the tighter, else ``simulate.timeout``); None for an agent
        that is no model backend."""
        return timeout_knob(self.runner, self.cfg)

    def check_health(self) -> str | None:
        """The early warning the agent's recent calls give now, in this process and in each
        shard's (kept in ``early_warning`` for the end of the run), or None. Under
        ``simulate.workers``/``cluster`` most calls, on Ray all, are the shards' own."""
        shards: list[str] = getattr(self.runner, "shard_warnings", list)()
        warning = "; ".join(w for w in (agent_warning(self.runner, self.cfg), *shards) if w)
        if warning:
            self.early_warning = warning
        return warning or None

    def emit_progress(self, now: float | None = None) -> None:
        """Call ``progress(dict)`` with rows done, budget, rate, elapsed, lost and reused."""
        if self.progress is None:
            return
        now = time.monotonic() if now is None else now
        # Live counters: a round's rows count as they land, before the round lands them.
        n = max(len(self.rows), self._live_rows)
        lost = max(len(self.lost), self._live_lost)
        elapsed = now - self.t0
        self._last_progress_t, self._last_progress_rows = now, n
        warning = self.check_health()
        # A model writer's waves: the only sign of life while it writes and nothing lands.
        writing = self.writer.progress() if hasattr(self.writer, "progress") else None
        note = "; ".join(
            x for x in (f"{lost} lost" if lost else "", writing or "", warning or "") if x
        )
        self.progress(
            {
                "done": n,
                "budget": self.cfg.budget * self.cfg.runs,
                "budget_per_run": self.cfg.budget,
                "rows_per_s": n / elapsed if elapsed > 0 else None,
                "elapsed_s": elapsed,
                "lost": lost,
                "reused": self.reused,
                "note": note or None,
            }
        )


class _Slot:
    """One planned rollout in the pool: its plan, its task once started (a task, or the
    future a worker's outcome is set on), its outcome (None: not run, or abandoned) or the
    error it raised."""

    __slots__ = ("plan", "task", "outcome", "error", "done")

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.task: asyncio.Future[Outcome] | None = None
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None
        self.done = False


class _Pool:
    """The rollouts planned and not yet landed, in plan order, with at most ``conc`` of
    them running. ``Engine.run`` adds plans, starts them, waits for the oldest to finish
    and lands it; a stop either drains what is planned (budget, saturation, exhaustion:
    the planned set does not depend on timing) or gives back what has not started (a dead
    agent, the clock; under the clock, running rollouts get ``stop_grace`` seconds)."""

    def __init__(self, engine: Engine, conc: int) -> None:
        self.engine = engine
        self.conc = conc
        self.pending: deque[_Slot] = deque()
        self.waiting: deque[_Slot] = deque()
        self.running: set[asyncio.Future[Outcome]] = set()
        self.wake = asyncio.Event()
        self.stopped: str | None = None
        self.loop = asyncio.get_running_loop()
        if engine.deadline is not None:  # the clock runs out on time even between ticks
            self.loop.call_later(max(0.0, engine.deadline - time.monotonic()), self.wake.set)
        #: set by the loop's tick (``Engine.tick_s``), cleared by the loop that read it
        self.ticked = False
        #: the clock's grace ran out and running rollouts were cancelled (``_abandon``);
        #: ``abandoned`` counts those that ended cancelled
        self.abandoning = False
        self.abandoned = 0
        self._beat = self.loop.call_later(engine.tick_s(), self._tick)

    def _tick(self) -> None:
        # One timer per tick, not one per wait: the hot path (a wait per landing) stays free.
        self.ticked = True
        self.wake.set()
        self._beat = self.loop.call_later(self.engine.tick_s(), self._tick)

    def add(self, plan: Plan) -> None:
        slot = _Slot(plan)
        done = self.engine.done_rows.get(plan.rollout_id)
        if done is not None:  # finished by an earlier attempt: reused, not run
            slot.outcome, slot.done = Outcome(row=self.engine.runner.reuse(done)), True
            self.engine.reused += 1
            self.engine._live_rows += 1
        else:
            self.waiting.append(slot)
        self.pending.append(slot)

    def start(self) -> None:
        """Start waiting rollouts while fewer than ``conc`` run; none once the agent is
        dead or the clock is out (those slots are given back)."""
        eng = self.engine
        while self.waiting and len(self.running) < self.conc:
            if eng._clock_out() or eng._dead():
                self._give_back()
                return
            slot = self.waiting.popleft()
            slot.task = eng.launch(slot.plan)
            self.running.add(slot.task)
            slot.task.add_done_callback(partial(self._finished, slot))

    def _finished(self, slot: _Slot, task: asyncio.Future[Outcome]) -> None:
        """A rollout is back (or was cancelled): the run counts its outcome now
        (``Engine.ran``); an error it raised is raised where it lands (``pop``)."""
        self.running.discard(task)
        if task.cancelled():
            self.abandoned += self.abandoning
        else:
            try:
                slot.outcome = self.engine.ran(slot.plan, task.result())
            except Exception as exc:  # noqa: BLE001 - raised in plan order, by ``pop``
                slot.error = exc
        slot.done = True
        self.wake.set()
        # The freed slot takes the next planned rollout now, not after the run loop wakes:
        # that wake-up is one more pass of the event loop, and a pass waits behind every
        # answer that came back in the same burst (the stub's 50 ms answers come back in
        # bursts), so slots sat empty. Which rollouts run is already planned: only when
        # they start moves, so the rows do not change.
        if self.stopped is None and self.waiting:
            self.start()

    def _give_back(self) -> None:
        while self.waiting:
            self.waiting.popleft().done = True  # outcome None: the slot is given back
        self.wake.set()

    def stop(self, reason: str) -> None:
        if self.stopped is not None:
            return
        self.stopped = reason
        if reason in ("dead_agent", "time_budget"):
            self._give_back()
        if reason == "time_budget" and self.running:
            grace = self.engine.knobs.stop_grace
            left = max(0.0, (self.engine.deadline or time.monotonic()) - time.monotonic())
            asyncio.get_running_loop().call_later(left + grace, self._abandon)

    def _abandon(self) -> None:
        # Counted as each ends cancelled (``_finished``), not here: a rollout that finished
        # in this same pass of the loop, or whose agent's own wait swallowed the
        # cancellation (Python 3.11's ``wait_for``), lands, and is not abandoned as well.
        self.abandoning = True
        for task in list(self.running):
            task.cancel()

    def head_done(self) -> bool:
        return bool(self.pending) and self.pending[0].done

    async def wait(self) -> None:
        await self.wake.wait()
        self.wake.clear()

    def pop(self) -> tuple[Plan, Outcome | None]:
        """The oldest planned rollout and its outcome (None: not run, or abandoned).
        Re-raises an error the rollout itself raised (the runner records agent errors)."""
        slot = self.pending.popleft()
        if slot.error is not None:
            raise slot.error
        return slot.plan, slot.outcome

    async def drain(self) -> None:
        """Start nothing more; wait for the rollouts running now (their rows reach
        ``on_row`` as each finishes), whatever they raise."""
        self._give_back()
        await asyncio.gather(*self.running, return_exceptions=True)

    def cancel_all(self) -> None:
        if self.abandoned:
            self.engine.abandoned += self.abandoned
            self.engine.warnings.append(
                f"{self.abandoned} rollouts were still running {self.engine.knobs.stop_grace}s "
                "after the time budget ran out and were abandoned (advanced stop_grace)."
            )
        self._beat.cancel()
        self.waiting.clear()  # a cancelled rollout's callback must start nothing more
        for task in self.running:
            task.cancel()
        for slot in self.pending:
            # Rollouts that failed and will not land (a worker died under them): the error
            # that ended the run is raised, theirs is seen here (asyncio logs an unseen one
            # from the collector, in the middle of whatever code runs then).
            if slot.task is not None and slot.task.done() and not slot.task.cancelled():
                slot.task.exception()


async def _writer_ready(source: SituationSource) -> None:
    """Wait until a model writer has something written (or gave up, or the clock ran out)
    without holding the event loop: the rollouts in flight keep calling their model, and
    their per-call timeouts stay true, while a thread waits for the wave. Collecting and
    launching stay on the loop, and landing waits for the planner, so what is planned still
    reads only rows landed before: the rows do not depend on timing."""
    while source.may_block():
        source.poll_writer()
        if not source.may_block() or not await asyncio.to_thread(source.wait_for_writer):
            return


# ---------------------------------------------------------------------------------------
# simulate()
# ---------------------------------------------------------------------------------------


def simulate(
    agent: Any = None,
    *,
    spec: Any = None,
    tools: Sequence[Any] | None = None,
    system_prompt: str | None = None,
    situations: int | None = None,
    traces: Any = None,
    tasks: Any = None,
    runs: int = 1,
    grader: Any = None,
    execute: Callable[[str, dict[str, Any]], Any] | None = None,
    requests_per_situation: int | None = None,
    rollouts_per_request: int | None = None,
    repeat_policy: str | None = None,
    unique_situations: bool | None = None,
    mode: str = "explore",
    fault_rate: float | None = None,
    hard_share: float | None = None,
    reproducible: bool = False,
    budget: int = 1000,
    time_budget: float | None = None,
    until: str = "compute",
    logprobs: bool | str | None = None,
    sampling: dict[str, Any] | None = None,
    simulator: Any = False,
    user_model: str | None = None,
    timeout: float = 300,
    grade: bool = False,
    llm_grade: Any = False,
    output: str | Path | None = None,
    advanced: dict[str, Any] | None = None,
    seed: int | None = None,
    done_rows: Iterable[Mapping[str, Any]] | None = None,
    on_row: Callable[[dict[str, Any]], Any] | None = None,
    progress: Callable[[dict[str, Any]], Any] | None = None,
    writer_structured_output: str = "auto",
    lost_as: str = "failure",
    shards: ShardSpec | None = None,
    **aliases: Any,
) -> SimulationData:
    """Run the agent over drawn situations and return every rollout as a row.

    Offline defaults: ``agent=None`` is the built-in scripted agent, ``simulator=False``
    the template writer, ``spec=None`` the shipped ``support_desk`` spec. See
    ``shared/seeds/simulate-parameters.md`` for every parameter; ``MODE_PRESETS`` for what
    each mode presets. Aliases: ``phrasings=``/``n=``, ``repeats=``, ``unique=``,
    ``policy=`` (system prompt), ``risk=`` (fault rate).

    ``budget`` caps rollouts per run, lost ones included: a lost rollout keeps its task's
    slot (no other ask takes it), so the task mix is the one planned whatever the agent
    crashes on. ``lost_as`` (beyond the spec) says what it is in pass@k: ``"failure"`` (the
    default, a failed repeat of its task) or ``"excluded"``; ``report()["lost"]`` counts the
    lost per task category (``wai_exp.simulate.lost``). ``report()["stopped_because"]`` is one of
    ``budget``, ``situations_exhausted`` (``situations=N``), ``tasks_exhausted`` (a replayed
    task set ran out), ``time_budget``, ``saturation`` (``until="saturation"``) or
    ``dead_agent``. Scheduling is deterministic (rows land in plan order and the planner
    reads only landed rows), so without a clock the same seed gives the same rows whatever
    finishes first, at any concurrency up to ``writer_buffer_cap`` (``reproducible=`` is
    recorded; a clock with ``reproducible=True`` is refused). Hooks for the pipeline: ``done_rows`` (rows a
    crashed attempt finished, reused by ``rollout_id``), ``on_row(row)`` (once per newly
    finished row; an ``OSError`` it raises, a full disk, stops the run and is raised, not
    counted as lost rollouts), ``progress(dict)``. ``writer_structured_output`` (``auto``,
    ``json_schema``, ``json_object``, ``off``; beyond the spec) is how a model writer asks
    for its cards' JSON schema through ``response_format``: ``auto`` steps down to the form
    the server takes (``report()["writer"]["structured_output"]`` names it). ``shards``
    (beyond the spec, ``wai_exp.simulate.shards``) also runs rollouts on worker processes or
    Ray actors while this process plans, lands, stops and reports: the same rows.

    Returns a ``SimulationData``: ``.trajectories`` (rows with ``privileged`` in memory),
    ``.rows`` (scrubbed), ``.report()``. Raises ``ValueError`` for an unknown parameter or
    knob (naming the closest), a value out of range, two spellings of one parameter, or an
    input that cannot be read. An exception inside the agent never escapes: that rollout is
    lost and recorded (``data.lost``, ``report()["rollouts_lost_by"]``).
    """
    # The first statement, so locals() is exactly this call's parameters and its aliases.
    params = SimulateParams.from_arguments(locals())
    t_start = time.monotonic()
    inputs = _resolve_inputs(params)
    cfg, world = inputs.cfg, inputs.world
    try:
        resolved = resolve_agent(
            agent,
            timeout=cfg.timeout,
            sampling=dict(cfg.sampling) if cfg.sampling else None,
            logprobs=cfg.logprobs,
            avg_turns=cfg.knobs.avg_turns,
            concurrency=cfg.knobs.concurrency,
        )
        user = _model_user(cfg, world, resolved)
        asks = _earlier_asks(cfg, tasks, traces, inputs.tools, world)
        writer = _model_writer(cfg, inputs.tools, inputs.system_prompt, world, asks)
        run_id = _run_id(
            cfg, inputs.system_prompt, inputs.tools, resolved.identity, asks.replay, world
        )
        llm_grader = resolve_llm_grader(llm_grade, inputs.tools, inputs.system_prompt)
        runner = RolloutRunner(
            cfg, agent=resolved, tools=inputs.tools, system_prompt=inputs.system_prompt,
            world=world, user_execute=execute is not None, grader=grader, run_id=run_id,
            llm_grader=llm_grader,
        )  # fmt: skip
        if user is not None:
            runner.user_model = user.name  # rows name who played the person, the agent's model too
        engine, first = _assemble(
            cfg, runner, resolved, asks, done_rows=done_rows, on_row=on_row, progress=progress,
            writer=writer, shards=shards,
        )  # fmt: skip
        engine.server_limits = server_limits(cfg, resolved, user, writer)
        return _run_to_result(
            engine, first, cfg, resolved, [user, writer, llm_grader], output, on_row,
            lambda: _result(
                cfg, engine, asks, resolved, inputs.spec_name, inputs.tools,
                inputs.system_prompt, world, run_id, time.monotonic() - t_start,
            ),
        )  # fmt: skip
    finally:
        world.close()  # world=mcp: the server stops with the stage


def shard_runner(setup: Callable[[], tuple[Any, dict[str, Any]]], cfg: Config, run_id: str) -> Any:
    """The ``RolloutRunner`` a shard runs its plans with: its own agent, world, person and
    judges, built from ``setup()`` (``(agent, simulate kwargs)``) as ``simulate`` builds
    them, with the parent's resolved ``cfg`` and ``run_id`` (so rows carry the same ids)."""
    agent, kwargs = setup()
    kwargs = {k: v for k, v in kwargs.items() if k not in ("shards", "output")}
    params = SimulateParams.from_call(agent, **kwargs)
    inputs = _resolve_inputs(params)
    resolved = resolve_agent(
        agent, timeout=cfg.timeout, sampling=dict(cfg.sampling) if cfg.sampling else None,
        logprobs=cfg.logprobs, avg_turns=int(cfg.knobs.avg_turns),
        concurrency=int(cfg.knobs.concurrency),
    )  # fmt: skip
    user = _model_user(cfg, inputs.world, resolved)
    limits = server_limits(cfg, resolved, user, None)  # the worker's own
    runner = RolloutRunner(
        cfg, agent=resolved, tools=inputs.tools, system_prompt=inputs.system_prompt,
        world=inputs.world, user_execute=params.execute is not None, grader=params.grader,
        run_id=run_id,
        llm_grader=resolve_llm_grader(params.llm_grade, inputs.tools, inputs.system_prompt),
    )  # fmt: skip
    if user is not None:
        runner.user_model = user.name
    runner.server_limits = limits  # sent back with the worker's last frame, for the report
    return runner


def check_inputs(agent: Any = None, **kwargs: Any) -> None:
    """Everything ``simulate(agent, **kwargs)`` checks before its first rollout, without
    running one: parameters and knobs, the spec file, the ``tasks=``/``traces=`` rows, the
    writer and user models. Raises what ``simulate`` would raise (``ValueError`` naming the
    parameter, or the file and its line), so a run can refuse bad inputs before any work."""
    params = SimulateParams.from_call(agent, **kwargs)
    inputs = _resolve_inputs(params)
    try:
        _earlier_asks(inputs.cfg, params.tasks, params.traces, inputs.tools, inputs.world)
    finally:
        inputs.world.close()


@dataclass
class _Inputs:
    """What ``simulate`` and ``check_inputs`` resolve from the parameters before any work."""

    cfg: Config
    spec_name: str
    tools: list[dict[str, Any]]
    system_prompt: str | None
    #: open (``world=mcp`` started its server): the caller closes it
    world: WorldSetup


def _resolve_inputs(params: SimulateParams) -> _Inputs:
    """The resolved config, the tools and system prompt (a ``world=mcp`` server's when it
    runs one), and the world. Raises ``ValueError`` naming the parameter or file."""
    cfg = params.config()
    spec_name, tools, sp = resolve_spec(params.spec, params.tools, params.system_prompt)
    world = resolve_world(cfg.knobs, params.execute)
    try:
        tools, sp = mcp_tools(world, tools, sp, params.tools_given)
    except BaseException:
        world.close()
        raise
    if world.server is not None and params.system_prompt is not None:
        sp = params.system_prompt
    return _Inputs(cfg, spec_name, tools, sp, world)


def _run_to_result(
    engine: Engine,
    first: Any,
    cfg: Config,
    resolved: ResolvedAgent,
    closers: list[Any],
    output: str | Path | None,
    on_row: Callable[[dict[str, Any]], Any] | None,
    result: Callable[[], SimulationData],
) -> SimulationData:
    """Run the engine (``_drive``), then build its ``result()`` and save it to ``output``.
    The rows stay frozen until the stage has reported and saved them: those only read them,
    and the collector's first full pass once they are handed back walks every one (0.4 s
    at 20,000 rows), which their allocations would otherwise start here."""
    with landed_rows_frozen() as engine.row_kept:
        stream = _drive(engine, first, cfg, resolved, closers, output, on_row)
        data = result()
        if output is not None:
            data.save(output)
        if stream is not None:
            stream.close(remove=True)  # the saved file holds every row now
    engine.row_kept = lambda: None  # the freezes ended with the block
    return data


def _drive(
    engine: Engine,
    first: Any,
    cfg: Config,
    resolved: ResolvedAgent,
    closers: list[Any],
    output: str | Path | None,
    on_row: Callable[[dict[str, Any]], Any] | None,
) -> RowStream | None:
    """Run the engine's loop to its stop, streaming each row to ``output``'s partial file
    (the open stream is returned; on an error it is closed and its rows kept to resume)."""
    stream = RowStream(Path(output), cfg.knobs) if output is not None else None
    if stream is not None:
        engine.on_row = _tee(stream, on_row)
    try:
        with fewer_gc_passes():
            asyncio.run(
                _run_and_close(engine, first, partial(_rerun_source, cfg), resolved, closers)
            )
    except BaseException:
        if stream is not None:
            stream.close(remove=False)  # keep the finished rows on disk for a resume
        raise
    engine.emit_progress()
    return stream


@dataclass
class EarlierAsks:
    """What ``tasks=`` and ``traces=`` contribute to a run (empty when neither is given)."""

    #: the pinned task set of ``tasks=``, run instead of writer draws
    replay: list[Task] | None = None
    tasks_info: dict[str, Any] = field(default_factory=lambda: {"tasks": 0})
    #: ``traces=``: the weighted choice of fresh draws, and the failing asks run first
    aim: Callable[[list[Any], int], list[Any]] | None = None
    trace_info: dict[str, Any] = field(default_factory=lambda: {"traces": 0})
    seeds: list[Task] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _earlier_asks(
    cfg: Config,
    tasks: Any,
    traces: Any,
    tools: list[dict[str, Any]],
    world: WorldSetup,
) -> EarlierAsks:
    """Asks from earlier rows: ``tasks=`` pins the task set (and, unless passed, k and a
    ``fixed`` policy on ``cfg``); ``traces=`` gives seed asks and the aim of fresh draws."""
    out = EarlierAsks()
    if tasks is not None:
        replay, info = pinned_tasks(
            tasks,
            k_override=cfg.repeats if cfg.repeats_given else None,
            tools=tools,
            options=world.options,
        )
        if cfg.fault_rate_given:
            for task in replay:
                task.fault_rate = None  # the caller's fault_rate= is the experiment's change
        info["fault_rate"] = cfg.fault_rate if cfg.fault_rate_given else "as recorded"
        if not cfg.repeats_given:
            cfg.repeats = info["k_pinned"]
        if not cfg.policy_given:
            cfg.repeat_policy = "fixed"  # a replay measures the same asks again: every ask gets k
        out.replay, out.tasks_info = replay, info
    if traces is not None:
        aim, info, seeds, warnings = trace_seeds(
            traces, cfg.knobs, cfg.seed, k=cfg.repeats, tools=tools, options=world.options,
        )  # fmt: skip
        out.aim, out.trace_info, out.seeds, out.warnings = aim, info, seeds, warnings
    return out


def _run_id(
    cfg: Config,
    sp: str | None,
    tools: list[dict[str, Any]],
    agent_identity: str,
    replay: list[Task] | None,
    world: WorldSetup,
) -> str:
    """The run id every rollout id hashes: the same call gives the same ids in any process."""
    return "sim-" + short_hash(
        cfg.seed, cfg.mode, cfg.phrasings, cfg.repeats, cfg.repeat_policy, cfg.unique,
        cfg.fault_rate, cfg.hard_share, prompt_sha(sp), json.dumps(tools, sort_keys=True),
        agent_identity, cfg.situations, [(t.scenario_id, t.prompt) for t in replay] if replay else None,
        json.dumps(world_dump(world.options), sort_keys=True), n=12,
    )  # fmt: skip


def _done_map(done_rows: Iterable[Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """``done_rows`` by ``rollout_id`` (rows without one are ignored)."""
    out: dict[str, dict[str, Any]] = {}
    for r in done_rows or ():
        rid = r.get("rollout_id")
        if rid:
            out[str(rid)] = dict(r)
    return out


def _tee(
    stream: RowStream, on_row: Callable[[dict[str, Any]], Any] | None
) -> Callable[[dict[str, Any]], None]:
    """An ``on_row`` that streams the row to ``output=`` and then calls the caller's hook."""

    def stream_row(row: dict[str, Any]) -> None:
        stream.add(row)
        if on_row is not None:
            on_row(row)

    return stream_row


def _model_writer(
    cfg: Config, tools: list[dict[str, Any]], sp: str | None, world: WorldSetup, asks: Any
) -> Any:
    """The model writer of ``simulator=<spec>`` (None for the template writer, and for a
    ``tasks=`` replay, whose asks were written already). Built before any rollout, so an
    unreachable server fails the call first."""
    if not cfg.simulator or asks.replay is not None:
        return None
    from wai_exp.simulate.model_writer import ModelWriter

    first = cfg.repeats if cfg.repeat_policy == "fixed" else max(1, cfg.repeats // 2)
    return ModelWriter(
        cfg.simulator, tools, sp, seed=cfg.seed, hard_share=cfg.hard_share,
        phrasings=cfg.phrasings, unique=cfg.unique, options=world.options, knobs=cfg.knobs,
        budget=cfg.budget, k=first, timeout=cfg.timeout, time_budget=cfg.time_budget,
        structured_output=cfg.writer_structured_output,
    )  # fmt: skip


def _writer_factory(
    cfg: Config, tools: list[dict[str, Any]], sp: str | None, options: Any, writer: Any = None
) -> tuple[Callable[..., Any], dict[str, Any]]:
    """``make_writer(seed, unique=cfg.unique)`` and the writer parameters rows record in
    ``lineage.writer`` (with the draw index, enough to rebuild a situation). With a model
    ``writer`` every call gives that one writer (its waves and dedupe span the run)."""
    from wai_exp.simulate.writer import TemplateWriter

    first: list[TemplateWriter] = []  # the first template writer: the others reseed it

    def make_writer(writer_seed: int, unique: bool = cfg.unique) -> Any:
        if writer is not None:
            return writer
        if first:
            return first[0].reseeded(writer_seed, unique=unique)
        first.append(
            TemplateWriter(
                tools,
                sp,
                seed=writer_seed,
                hard_share=cfg.hard_share,
                phrasings=cfg.phrasings,
                unique=unique,
                options=options,
            )
        )
        return first[0]

    params = {
        "seed": cfg.seed,
        "hard_share": cfg.hard_share,
        "phrasings": cfg.phrasings,
        "unique": cfg.unique,
    }
    return make_writer, params


def _writer_batch(cfg: Config) -> int:
    """Situations per writer batch: the buffer the reference's writer keeps ahead of
    rollouts (``writer_buffer_cap`` rollouts' worth of first batches)."""
    first = cfg.repeats if cfg.repeat_policy == "fixed" else max(1, cfg.repeats // 2)
    return max(1, cfg.knobs.writer_buffer_cap // max(1, cfg.phrasings * first))


def _assemble(
    cfg: Config,
    runner: RolloutRunner,
    agent: ResolvedAgent,
    asks: EarlierAsks,
    *,
    done_rows: Iterable[Mapping[str, Any]] | None,
    on_row: Callable[[dict[str, Any]], Any] | None,
    progress: Callable[[dict[str, Any]], Any] | None,
    writer: Any = None,
    shards: ShardSpec | None = None,
) -> tuple[Engine, Callable[[], SituationSource]]:
    """The scheduler (with its mutation queue and the setup warnings) and the maker of run
    0's source (called inside the run, so the writer is built where errors are handled).
    With active ``shards`` the engine's runner sends each rollout to the process or actor
    that owns its situation (``shards.ShardedRunner``)."""
    make_writer, writer_params = _writer_factory(
        cfg, runner.tools, runner.system_prompt, runner.world_setup.options, writer
    )
    mutate = cfg.knobs.mutate_graded_failures
    mutations = MutationQueue(
        maxlen=cfg.knobs.writer_context_parents,
        mutate_graded=runner.grader is not None if mutate is None else bool(mutate),
        threshold=cfg.knobs.pass_threshold,
        seed=cfg.seed,
        make_writer=make_writer,
        writer_params=writer_params,
    )
    if writer is not None:
        mutations.observer = writer.observe
    sharded = shards is not None and shards.active
    is_async = is_async_callable(agent.fn)
    if sharded:
        assert shards is not None
        by_queue = not is_async and shards.cluster == "local"  # see ShardedRunner._route
        backlog = worker_backlog(cfg.knobs.concurrency, shards.workers) if by_queue else None
        runner = ShardedRunner(runner, shards, backlog=backlog)  # type: ignore[assignment]  # ShardedRunner stands in for a RolloutRunner (__getattr__)
    engine = Engine(
        cfg, runner,
        # a worker's rollout is awaited, whatever the agent is: the pool runs concurrency
        agent_async=sharded or is_async, mutations=mutations,
        done_rows=_done_map(done_rows), on_row=on_row, progress=progress,
    )  # fmt: skip
    engine.shard_count = max(1, shards.workers) if shards is not None and sharded else 1
    engine.writer = writer
    engine.warnings.extend(agent.warnings + asks.warnings)
    return engine, partial(_first_source, cfg, asks, make_writer, writer_params, mutations)


def _rerun_source(cfg: Config, first_tasks: list[Task]) -> SituationSource:
    """Runs 1..N-1: the asks run 0 opened, replayed with fresh rollout seeds."""
    return SituationSource(
        replay=rerun_tasks(first_tasks, cfg.repeats), phrasings=cfg.phrasings, k=cfg.repeats,
        max_situations=None, batch=_writer_batch(cfg),
    )  # fmt: skip


def _first_source(
    cfg: Config,
    asks: EarlierAsks,
    make_writer: Callable[..., Any],
    writer_params: dict[str, Any],
    mutations: MutationQueue,
) -> SituationSource:
    """Run 0's asks: the pinned ``tasks=`` set, else seeds then writer draws (and mutations)."""
    batch = _writer_batch(cfg)
    if asks.replay is not None:
        return SituationSource(
            replay=asks.replay, phrasings=cfg.phrasings, k=cfg.repeats, max_situations=None,
            batch=batch,
        )  # fmt: skip
    return SituationSource(
        writer=make_writer(cfg.seed),
        phrasings=cfg.phrasings,
        k=cfg.repeats,
        max_situations=cfg.situations,
        batch=batch,
        aim=asks.aim,
        oversample=cfg.knobs.select_oversample,
        writer_params=writer_params,
        seeds=asks.seeds,
        mutator=mutations.take,
        unique=cfg.unique,
        bounce=make_writer,
        bounce_limit=cfg.knobs.offline_bounce_limit,
        bounce_stride=cfg.knobs.offline_bounce_stride,
    )


async def _run_and_close(
    engine: Engine,
    first: Callable[[], SituationSource],
    rerun: Callable[[list[Task]], SituationSource],
    agent: ResolvedAgent,
    parts: Sequence[Any] = (),
) -> None:
    """All runs, then the agent's ``aclose()`` (a backend's HTTP client) whatever happened,
    and the model writer's / model user's clients (``parts``: ``aclose`` then ``close``)."""
    sharded = engine.runner if isinstance(engine.runner, ShardedRunner) else None
    stopping = False
    send_requests_first(asyncio.get_running_loop())  # see there: bursts of answers
    try:
        if sharded is not None:
            await sharded.start()
        await engine.run_all(first, rerun)
        if sharded is not None:
            await sharded.raise_start_failure()
    except (asyncio.CancelledError, KeyboardInterrupt):
        stopping = True  # Ctrl-C or SIGTERM: close without waiting for work nobody will use
        raise
    finally:
        if sharded is not None:
            await sharded.aclose()
            engine.shard_rss_mb = sharded.peak_rss_mb()
            engine.shard_rollouts = sharded.rollouts_by_process()
            engine.shard_limits = sharded.server_limits()
        closer = getattr(agent.fn, "aclose", None)
        if closer is not None:
            res = closer()
            if inspect.isawaitable(res):
                await res
        for part in parts:
            if part is not None:
                await part.aclose()
                if stopping and "stopping" in inspect.signature(part.close).parameters:
                    part.close(stopping=True)
                else:
                    part.close()


def _model_user(cfg: Config, world: WorldSetup, agent: ResolvedAgent) -> Any:
    """The model-played person handed to every rollout's world: ``user_model=<spec>``, or
    with ``user_model=None`` the agent's own model when the agent is a model backend (the
    spec's default: one model answers and plays the person). None for the template person:
    a callable agent (there is no model to use) or ``user_model=False``/``"template"``."""
    from wai_exp.simulate.model_user import ModelUser

    spec, api_key = cfg.user_model, None
    if spec is None and not cfg.user_template:
        own = _agent_model_spec(agent)
        if own is None:
            return None
        spec, api_key = own
    if spec is None:
        return None
    user = ModelUser(
        spec, temperature=cfg.knobs.user_temperature, timeout=cfg.timeout, api_key=api_key
    )
    world.kwargs["user"] = user
    return user


def server_limits(cfg: Config, agent: ResolvedAgent, user: Any, writer: Any) -> Any:
    """The run's adaptive in-flight limits, one per model server, with the agent's, the
    model-played person's and the model writer's calls attached (the agent and the person
    on one server share its slots); None when none of them calls a model server.

    The limit lives on calls, not on the pool's rollouts (``wai_exp.llm.concurrency`` says
    why): the pool keeps ``knobs.concurrency`` rollouts open and each call waits for a slot
    at its server, starting at ``knobs.concurrency`` and adapting."""
    models = [
        getattr(agent.fn, "model", None) if agent.is_backend else None,
        getattr(getattr(user, "caller", None), "model", None),
        getattr(getattr(writer, "caller", None), "model", None),
    ]
    models = [m for m in models if m is not None and hasattr(m, "gate")]
    if not models:
        return None
    from wai_exp.llm.concurrency import ServerLimits

    limits = ServerLimits(int(cfg.knobs.concurrency), wait_bound=float(cfg.knobs.rate_limit_wait))
    for model in models:
        limits.attach(model)
    return limits


def _agent_model_spec(agent: ResolvedAgent) -> tuple[str, str | None] | None:
    """``(spec, api_key)`` of a model-backend agent's own model and server, or None for an
    agent that is not one (the scripted agent, a user's callable)."""
    spec = getattr(agent.fn, "spec", None) if agent.is_backend else None
    if spec is None or not all(hasattr(spec, a) for a in ("provider", "model", "base_url")):
        return None
    return f"{spec.provider}:{spec.model}@{spec.base_url}", getattr(agent.fn, "api_key", None)


def _execute_errors(engine: Engine) -> tuple[int, str] | None:
    """``(count, first error)`` of tool calls the user's ``execute=`` raised on, or None."""
    if not engine.runner.user_execute:
        return None
    failed = [
        s
        for r in engine.rows
        for s in r.get("steps") or ()
        if s.get("kind") == "tool" and s.get("status") == "error"
    ]
    if not failed:
        return None
    res = failed[0].get("result")
    first = f"{res.get('error')}: {res.get('message')}" if isinstance(res, dict) else str(res)
    return len(failed), first[:300]


def _result(
    cfg: Config,
    engine: Engine,
    asks: EarlierAsks,
    agent: ResolvedAgent,
    spec_name: str,
    tools: list[dict[str, Any]],
    sp: str | None,
    world: WorldSetup,
    run_id: str,
    elapsed: float,
) -> SimulationData:
    """The ``SimulationData`` of a finished run: rows, report, metadata and warnings."""
    facts = row_facts(engine.rows)
    mix, mix_warning = tier_mix(cfg, engine.per_run_tiers, engine.rows, facts)
    if mix_warning:
        engine.warnings.append(mix_warning)
    inputs = {
        "replay": asks.replay,
        "tasks_info": asks.tasks_info,
        "trace_info": asks.trace_info,
        "agent_model": agent.model,
        "spec_name": spec_name,
        "tools": tools,
        "system_prompt": sp,
        "run_id": run_id,
    }
    report = build_report(
        cfg, engine, facts=facts, mix=mix, inputs=inputs, world=world_dump(world.options),
        elapsed=elapsed,
    )  # fmt: skip
    if world.server is not None:
        # world=mcp: where the tool answers came from, so a report reader sees how much of
        # the run met the real server and how much met injected faults.
        sources = Counter(
            str(s.get("source"))
            for r in engine.rows
            for s in r.get("steps") or ()
            if s.get("kind") == "tool"
        )
        report["tool_answers"] = {
            k: sources.get(k, 0) for k in ("server", "injected", "engine", "person", NOT_EXECUTED)
        }
    if claimed := _claimed_rows(engine.rows):
        report["rows_with_unexecuted_tool_steps"] = claimed[0]
        engine.warnings.append(claimed[1])
    if exec_errors := _execute_errors(engine):
        # A raise inside the user's execute= reaches the agent as a tool error only; say so
        # once, with the first error, so a bug in the user's world is not read as a fault.
        n, first = exec_errors
        report["execute_errors"] = n
        engine.warnings.append(
            f"execute= raised on {n} tool calls (first: {first}); the agent saw each as a tool error"
        )
    blind = plan_blind(world.options, engine.runner.user_execute)
    if blind and (unserved := plan_not_served(engine.rows, blind)):
        report["plan_not_served"] = unserved  # the closing summary prints it
        engine.warnings.append(unserved)
    _run_warnings(cfg, engine, report)
    metadata = {
        "run_id": run_id,
        # The three models of a run: the agent, the situation writer, the simulated user
        # (who plays it whenever a follow-up comes; rows without one omit user_model).
        "model_version": report["agent_model"],
        "writer_model": report["writer_model"],
        "user_model": engine.runner.user_model,
        "system_prompt_sha": prompt_sha(sp),
    }
    if report["grade"] is not None:  # graded as the rows landed: the judge is named too
        metadata["judge_name"] = report["grade"]["judge_name"]
        metadata["judge_model"] = report["grade"]["judge_model"]
    if report["search"]["followups_starved"]:
        engine.warnings.append(
            f"followups_starved: {report['search']['followups_missed']} of {len(engine.rows)} rows "
            "ended on the agent's question with nobody answering (the person walked away or was "
            "out of turns); raise knobs.patience or knobs.avg_turns, or read these rows as "
            "unfinished conversations"
        )
    if report["search"]["idle_on_verdicts_note"]:
        engine.warnings.append(report["search"]["idle_on_verdicts_note"])
    person = world.kwargs.get("user")  # a model-played person, asked at least once?
    played = person.name if person is not None and person.lines else None
    degraded, same_warning = same_model_jobs(
        cfg, report["agent_model"], agent.model, user_model=played
    )
    if same_warning:
        engine.warnings.append(same_warning)
    return SimulationData(
        engine.rows,
        tools=tools,
        system_prompt=sp,
        report=report,
        metadata=metadata,
        warnings=engine.warnings,
        degraded=degraded,
        lost=engine.lost,
    )


def _run_warnings(cfg: Config, engine: Engine, report: dict[str, Any]) -> None:
    """The warnings a finished run's report calls for (missing logprobs, serialized MCP
    rollouts, the health check, lost rollouts), appended to ``engine.warnings``."""
    captured = report.get("logprobs_captured") or {}
    if captured.get("turns_server_returned_none"):
        engine.warnings.append(
            f"logprobs={cfg.logprobs!r}, but the server returned none on "
            f"{captured['turns_server_returned_none']} of {captured['turns']} agent turns "
            f"({len(engine.rows) - captured['rows_with_logprob']} of {len(engine.rows)} rows have "
            "no logprob total): llama.cpp returns none when tools are offered and Anthropic has "
            "none; those turns carry no logprob (never a 0), so an importance ratio cannot be "
            "formed on them"
        )
    if cut := report.get("rollouts_cut_at_context"):
        engine.warnings.append(
            f"{cut} of {len(engine.rows)} rollouts outgrew the model's context window (the "
            "server answered HTTP 400 after their first turn) and end there, kept as "
            "ended_by=truncated (ended_by_raw=context_full) rather than lost: serve the model "
            "with a longer context (llama.cpp --n_ctx / -c, vLLM --max-model-len), or lower "
            "agent.max_turns or agent.max_tokens"
        )
    if engine.runner.serialized:
        engine.warnings.append(
            f"world=mcp with a reset/state tool: the {len(engine.rows)} rollouts ran one at a time "
            f"against the server (knobs.concurrency={cfg.knobs.concurrency} did not apply), "
            "since rollouts sharing one server at once would start in, and record, each other's "
            "state; for concurrency, run a server without world.reset_tool/state_tool (rollouts "
            "then share its state) or several runs, each with a server of its own"
        )
    if engine.check_health() or engine.early_warning:
        engine.warnings.append(f"while it ran: {engine.early_warning}")
    if engine.stop_reason == "dead_agent":
        engine.warnings.append(
            failure_summary(
                "dead_agent",
                rows=len(engine.rows),
                lost=engine.lost,
                block=report["lost"],
                timeout_knob=engine.timeout_knob(),
            )
        )
    elif engine.lost:
        engine.warnings.append(
            lost_warning(
                engine.lost,
                rows=len(engine.rows),
                block=report["lost"],
                timeout_knob=engine.timeout_knob(),
            )
        )


def timeout_knob(runner: Any, cfg: Config) -> str | None:
    """``Engine.timeout_knob`` for ``runner``'s agent."""
    if not runner.agent_is_backend:
        return None
    named = getattr(runner.agent, "timeout_knob", None)
    if named:
        return str(named)
    own = getattr(runner.agent, "timeout", None)
    # A backend built from a spec string took simulate.timeout as its own limit.
    return "simulate.timeout" if own == cfg.timeout else binding_timeout_knob(own, cfg.timeout)


def agent_warning(runner: Any, cfg: Config) -> str | None:
    """The early warning (``run_health.early_warning``) that ``runner``'s agent's recent
    model calls in this process give now, or None."""
    return early_warning(
        getattr(runner.agent, "call_times", None),
        timeout=getattr(runner.agent, "timeout", None) or cfg.timeout,
        concurrency=cfg.knobs.concurrency,
        knob=timeout_knob(runner, cfg) or "simulate.timeout",
    )


def same_model_jobs(
    cfg: Config,
    agent_model: str,
    configured: str | None = None,
    *,
    user_model: str | None = None,
) -> tuple[list[str], str | None]:
    """``(["same_model"], warning)`` when the agent's model (as the rows report it, or as
    it was configured) also wrote the situations (``cfg.simulator``) or played the user
    (``user_model``: the person's model when it was asked for a line, else None),
    else ``([], None)``: a model writing or playing against its own outputs makes the test
    easier than the world it stands for. The warning is one sentence with the fix."""
    from wai_exp.simulate.model_calls import same_model

    names = [n for n in (agent_model, configured) if n]
    wrote, played = (
        bool(spec) and any(same_model(n, spec) for n in names)
        for spec in (cfg.simulator, user_model)
    )
    if not (wrote or played):
        return [], None
    did = " and ".join(
        job for job, on in (("wrote the situations", wrote), ("played the user", played)) if on
    )
    return ["same_model"], (
        f"same_model: the agent's model ({agent_model}) also {did}, which makes the test easier "
        "than real users are; pass simulator= for the writer and user_model= for the user "
        "(another model spec, or False for the template person) to put those jobs on a "
        "different model."
    )


def _claimed_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """``(rows, warning)`` when rows hold tool steps the world never executed (the agent's
    own transcript, ``rows.model.NOT_EXECUTED``), else None."""
    names = [not_executed(r) for r in rows]
    n = sum(1 for found in names if found)
    if not n:
        return None
    steps = sum(len(found) for found in names)
    return n, (
        f"{n} of {len(rows)} rows hold {steps} tool steps the world never executed (the "
        "agent returned the calls and their results without world.execute; marked "
        f"source={NOT_EXECUTED!r}): their results are the agent's claim, so publish leaves "
        "these rows out of training data; make the calls through world.execute"
    )
