"""The simulate engine: ``simulate()`` draws situations, runs the agent against the mock
world, and returns every rollout as a schema-v1 row.

Scheduling is round-based and deterministic. Each round the planner decides which rollouts
to run from what has landed in earlier rounds only, the round runs (sync agents are called
in the loop, async agents in a pool of ``concurrency`` coroutines, never a thread per
rollout), and its rows are added in plan order. Every per-rollout seed is a stable hash of
``(seed, scenario_id, phrasing, rollout_index, eval_run)``. So the same seed gives the same
rows, byte for byte once ``timing`` is removed, at any concurrency and in any process.

The modes and their presets are one table, ``MODE_PRESETS``; every other number the engine
uses is an ``advanced`` knob (``wai_exp.config.knobs``).
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import inspect
import json
import math
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wai_exp.config.knobs import patience_table, resolve_knobs
from wai_exp.rows.model import SCHEMA_VERSION, messages_from_steps
from wai_exp.rows.scrub import NEVER_SHIPPED, scrub
from wai_exp.simulate.data import SimulationData

# ---------------------------------------------------------------------------------------
# Modes
# ---------------------------------------------------------------------------------------

#: What each ``mode`` presets when the parameter is not passed. ``phrasings`` = n (asks per
#: situation), ``repeats`` = k (rollouts per ask), ``repeat_policy``: ``fixed`` gives every
#: ask k rollouts, ``split`` starts each ask with ``k // 2`` and extends to k only where the
#: group split (rewards with ``grader=``, else behaviour signatures), ``verify`` gives one
#: rollout and re-rolls to k when the run's explore share falls under
#: ``adaptive_verify_explore_floor``.
#:
#: Why these values (all "convention, untested" unless stated):
#: * explore: breadth first: one phrasing, one rollout, unique situations.
#: * sft: three phrasings of each situation so a fine-tune sees paraphrases of one ask; one
#:   rollout each (selection picks among situations, not repeats).
#: * rl: k=8 because a grouped update (GRPO-style) learns only from groups that split and a
#:   group of 8 splits on any ask whose pass rate is between ~10% and ~90% with high
#:   probability; fault_rate 0.8 so fault handling (what splits most) shows up in most asks;
#:   hard_share 0.5 because the hard tiers are where groups split.
#: * adaptive: explore that re-rolls an ask (k=2) when new behaviour stops showing up.
MODE_PRESETS: dict[str, dict[str, Any]] = {
    "explore": {
        "phrasings": 1,
        "repeats": 1,
        "repeat_policy": "fixed",
        "unique": True,
        "fault_rate": 0.5,
        "hard_share": 0.3,
    },
    "sft": {
        "phrasings": 3,
        "repeats": 1,
        "repeat_policy": "fixed",
        "unique": False,
        "fault_rate": 0.5,
        "hard_share": 0.3,
    },
    "rl": {
        "phrasings": 1,
        "repeats": 8,
        "repeat_policy": "split",
        "unique": False,
        "fault_rate": 0.8,
        "hard_share": 0.5,
    },
    "adaptive": {
        "phrasings": 1,
        "repeats": 2,
        "repeat_policy": "verify",
        "unique": True,
        "fault_rate": 0.5,
        "hard_share": 0.3,
    },
}
REPEAT_POLICIES = ("fixed", "split", "verify")

#: The ``advanced`` knobs this engine reads. The rest steer parts the reference's engine has
#: and this offline one does not (a model writer's waves and restarts, the behaviour-gap
#: search, embedders); ``report()["knobs_not_read"]`` lists them so no one mistakes a
#: recorded value for one that shaped the run.
KNOBS_READ = frozenset(
    {
        "seed", "concurrency", "avg_turns", "patience", "user_temperature", "world", "pass_threshold",
        "mutate_graded_failures", "smoothing_alpha", "allocation_gain", "allocation_tool_weight",
        "allocation_condition_weight", "adaptive_verify_explore_floor", "tier_mix_min_rows",
        "tier_mix_tolerance", "stop_grace", "empty_rounds_to_stop", "dead_agent_errors",
        "dead_agent_budget_multiple", "closing_margin", "closing_window_rollouts", "writer_buffer_cap",
        "failing_seeds_cap", "select_oversample", "writer_context_parents", "progress_every_s",
        "progress_every_rows", "flush_report_rows", "flush_report_s",
    }
)  # fmt: skip
UNTIL = ("compute", "saturation")

#: Backends a model-spec string can name (``<backend>:<model>``).
MODEL_BACKENDS = ("openai", "vllm", "ollama", "anthropic")

_ALIASES = {
    "phrasings": "requests_per_situation",
    "n": "requests_per_situation",
    "repeats": "rollouts_per_request",
    "unique": "unique_situations",
    "policy": "system_prompt",
    "risk": "fault_rate",
}


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------


def stable_hash(*parts: Any, bits: int = 63) -> int:
    """A process-independent integer hash of ``parts`` (``hash()`` is salted per process)."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") >> (64 - bits)


def _short_hash(*parts: Any, n: int = 16) -> str:
    text = "\x1f".join(str(p) for p in parts).encode()
    return hashlib.blake2b(text, digest_size=16).hexdigest()[:n]


def prompt_sha(system_prompt: str | None) -> str:
    """sha256 hex of the system prompt ("" hashes as the empty string)."""
    return hashlib.sha256((system_prompt or "").encode()).hexdigest()


def _num(name: str, value: Any, lo: float, hi: float | None, *, integer: bool = False) -> Any:
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type:
        want = "an int" if integer else "a number"
        raise ValueError(f"{name} must be {want}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and math.isnan(value):
        raise ValueError(f"{name} is NaN; give a number")
    if value < lo or (hi is not None and value > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name}={value!r} is out of range; it must be {rng}")
    return value


def _callable_name(fn: Any) -> str:
    if fn is None:
        return "none"
    name = getattr(fn, "name", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return str(name)


# ---------------------------------------------------------------------------------------
# Tasks and plans
# ---------------------------------------------------------------------------------------


@dataclass
class _Task:
    """One ask: a situation's phrasing, and the rollouts planned and landed for it."""

    order: int
    situation: Any
    phrasing_index: int
    prompt: str
    writer_model: str
    k: int
    replayed_from: str | None = None
    writer_lineage: dict[str, Any] | None = None
    #: how the ask entered the run: "fresh" (writer draw), "mutation" (a failing row's
    #: sibling), "seed" (a failing ask mined from traces=), "replay" (tasks= or runs=N)
    arm: str = "fresh"
    opened: int = 0
    landed: list[dict[str, Any]] = field(default_factory=list)
    lost: int = 0
    decided: bool = False

    @property
    def scenario_id(self) -> str:
        return str(self.situation.scenario_id)

    @property
    def resolved(self) -> int:
        return len(self.landed) + self.lost


@dataclass
class _Plan:
    task: _Task
    repeat: int
    rollout_index: int
    eval_run: int
    seed: int
    rollout_id: str
    reason: str


class _SituationSource:
    """Tasks in a fixed order: drawn lazily from the writer, or a replayed list."""

    def __init__(
        self,
        *,
        writer: Any = None,
        replay: list[_Task] | None = None,
        phrasings: int,
        k: int,
        max_situations: int | None,
        batch: int,
        aim: Callable[[list[Any], int], list[Any]] | None = None,
        oversample: int = 1,
        writer_params: dict[str, Any] | None = None,
        seeds: list[_Task] | None = None,
        mutator: Callable[[int], list[tuple[Any, dict[str, Any]]]] | None = None,
    ) -> None:
        self.writer = writer
        self.mutator = mutator
        self.writer_params = dict(writer_params or {})
        self.seeds = list(seeds or [])
        self.replay = replay
        self.phrasings = phrasings
        self.k = k
        self.max_situations = max_situations
        self.batch = batch
        self.aim = aim
        self.oversample = oversample
        self.situations_drawn = 0
        self.tasks: list[_Task] = []
        self._pos = 0
        self.exhausted_by = "situations_exhausted" if replay is None else "tasks_exhausted"

    def next_task(self) -> _Task | None:
        """The next unopened task, or None when the source has run out."""
        if self.replay is not None:
            if self._pos >= len(self.replay):
                return None
            task = self.replay[self._pos]
            self._pos += 1
            self.tasks.append(task)
            return task
        if self.seeds:
            # Failing asks mined from traces= run first.
            task = self.seeds.pop(0)
            task.order = len(self.tasks)
            self.tasks.append(task)
            self._pos += 1
            return task
        if self._pos >= len(self.tasks) and not self._draw():
            return None
        task = self.tasks[self._pos]
        self._pos += 1
        return task

    def _draw(self) -> bool:
        want = self.batch
        if self.max_situations is not None:
            want = min(want, self.max_situations - self.situations_drawn)
            if want <= 0:
                return False
        # Mutations of the failing rows' asks come first, then fresh draws fill the batch.
        drawn: list[tuple[Any, dict[str, Any]]] = self.mutator(want) if self.mutator else []
        plain = want - len(drawn)
        if plain > 0:
            base = int(getattr(self.writer, "drawn", 0))
            if self.aim is not None:
                # Draw more than needed and keep the share that matches the hot trace regions.
                pool = self.writer.next_batch(plain * self.oversample)
            else:
                pool = self.writer.next_batch(plain)
            # The writer's draw index of each situation: with the writer's own parameters it
            # is all a replay needs to rebuild the situation (entities included) without
            # writing the world's records onto the row.
            index = {id(sit): base + i for i, sit in enumerate(pool)}
            kept = self.aim(pool, plain) if self.aim is not None else pool
            drawn += [(sit, {**self.writer_params, "index": index[id(sit)]}) for sit in kept]
        if not drawn:
            return False
        for sit, lineage in drawn:
            self.situations_drawn += 1
            for p, text in enumerate(tuple(sit.phrasings)[: self.phrasings]):
                self.tasks.append(
                    _Task(
                        len(self.tasks),
                        sit,
                        p,
                        str(text),
                        "template",
                        self.k,
                        writer_lineage=lineage,
                        arm="mutation" if "focus" in lineage else "fresh",
                    )
                )
        return True


# ---------------------------------------------------------------------------------------
# Resolved parameters
# ---------------------------------------------------------------------------------------


@dataclass
class _Config:
    mode: str
    phrasings: int
    repeats: int
    repeats_given: bool
    repeat_policy: str
    unique: bool
    fault_rate: float
    hard_share: float
    budget: int
    runs: int
    situations: int | None
    time_budget: float | None
    until: str
    seed: int
    reproducible: bool
    knobs: dict[str, Any]
    timeout: float
    logprobs: Any
    sampling: dict[str, Any] | None
    grade: bool


# ---------------------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------------------


class _Engine:
    def __init__(
        self,
        cfg: _Config,
        *,
        agent: Any,
        agent_model: str,
        agent_is_backend: bool,
        tools: list[dict[str, Any]],
        system_prompt: str | None,
        world_cls: Any,
        world_options: Any,
        world_kwargs: dict[str, Any],
        execute: Callable[..., Any] | None,
        grader: Any,
        user_model: str | None,
        done_rows: dict[str, dict[str, Any]],
        on_row: Callable[[dict[str, Any]], Any] | None,
        progress: Callable[[dict[str, Any]], Any] | None,
        run_id: str,
    ) -> None:
        self.cfg = cfg
        self.agent = agent
        self.agent_model = agent_model
        self.agent_is_backend = agent_is_backend
        self.agent_async = _is_async_callable(agent)
        self.tools = tools
        self.tool_names = [t["function"]["name"] for t in tools]
        self.system_prompt = system_prompt
        self.sp_sha = prompt_sha(system_prompt)
        self.sp_head = (system_prompt or "")[:120]
        self.sp_chars = len(system_prompt or "")
        self.policy_version = f"{agent_model}@{self.sp_sha[:12]}"
        self.world_cls = world_cls
        self.world_options = world_options
        self.world_kwargs = world_kwargs
        self.execute = execute
        self.grader = grader
        self.grader_name = None if grader is None else _callable_name(grader)
        self.grader_async = grader is not None and _is_async_callable(grader)
        self.user_model = user_model
        self.done_rows = done_rows
        self.on_row = on_row
        self.progress = progress
        self.run_id = run_id
        self.knobs = cfg.knobs
        self.thr = float(cfg.knobs["pass_threshold"])
        self.rows: list[dict[str, Any]] = []
        self.lost: list[dict[str, Any]] = []
        self.lost_by: Counter[str] = Counter()
        self.abandoned = 0
        self.reused = 0
        self.new_rows = 0
        self.warnings: list[str] = []
        self.durations: deque[float] = deque(maxlen=int(cfg.knobs["closing_window_rollouts"]))
        self.coverage: set[tuple[Any, ...]] = set()
        self.novel_rows = 0
        self.t0 = time.monotonic()
        self.deadline = None if not cfg.time_budget else self.t0 + float(cfg.time_budget)
        self._last_progress_t = self.t0
        self._last_progress_rows = 0
        self._signature = _optional("wai_exp.score.grading", "behavior_signature")
        self._privileged = _optional("wai_exp.score.checklist", "privileged_context")
        self._conduct = _optional("wai_exp.score.grading", "conduct_grade") if cfg.grade else None
        self._normalize = (
            _optional("wai_exp.score.judging", "normalize_judge_result") if grader else None
        )
        self._current = _optional("wai_exp.simulate.agents", "current_rollout")
        self._context = _optional("wai_exp.simulate.agents", "RolloutContext") or dict
        if self._signature is None:
            self.warnings.append(
                "behavior_signature is unavailable (wai_exp.score.grading missing); rows carry None."
            )
        self.stop_reason: str | None = None
        self._live_rows = 0  # rows landed in this call so far, updated as each lands
        self._live_lost = 0
        self.per_run: list[dict[str, Any]] = []
        # Mutation parents: (focus, kind) of rows that failed (a fired tool fault, or a
        # graded failure when mutate_graded_failures is on). The next writer batch draws a
        # sibling ask in the same cell (tool x tool_condition) for each.
        mutate = cfg.knobs["mutate_graded_failures"]
        self.mutate_graded = grader is not None if mutate is None else bool(mutate)
        self.parents: deque[tuple[dict[str, Any], str]] = deque(
            maxlen=max(0, int(cfg.knobs["writer_context_parents"]))
        )
        self.mutating = False  # on while a run draws fresh situations (not under replay)
        self.mutation_aims: Counter[str] = Counter()
        self.mutation_kinds: Counter[str] = Counter()
        self.make_writer: Callable[..., Any] | None = None
        self.writer_params: dict[str, Any] = {}

    # ---- seeds and ids ------------------------------------------------------------------
    def _plan(self, task: _Task, eval_run: int, reason: str) -> _Plan:
        repeat = task.opened
        task.opened += 1
        # rollout_index is unique within a scenario: phrasing p owns indices p*k .. p*k+k-1.
        rollout_index = task.phrasing_index * self.cfg.repeats + repeat
        seed = stable_hash(
            self.cfg.seed, task.scenario_id, task.phrasing_index, rollout_index, eval_run
        )
        rid = "r-" + _short_hash(
            self.run_id, task.scenario_id, task.phrasing_index, rollout_index, eval_run
        )
        return _Plan(task, repeat, rollout_index, eval_run, seed, rid, reason)

    # ---- stop rules ---------------------------------------------------------------------
    def _dead(self) -> bool:
        """An agent that raises on every call is called off (``dead_agent_errors``), and one
        that loses more than ``dead_agent_budget_multiple`` x budget rollouts in all too.
        Reads live counters, so it also stops a round midway."""
        lost = self._live_lost
        if self._live_rows == 0 and lost >= int(self.knobs["dead_agent_errors"]):
            return True
        return lost >= max(
            int(self.knobs["dead_agent_errors"]),
            self.knobs["dead_agent_budget_multiple"] * self.cfg.budget * self.cfg.runs,
        )

    def _clock_out(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _closing(self) -> bool:
        """Under a clock: too little time left to open a new group."""
        if self.deadline is None or not self.durations:
            return False
        left = self.deadline - time.monotonic()
        return left < float(self.knobs["closing_margin"]) * statistics.median(self.durations)

    # ---- one run ------------------------------------------------------------------------
    async def run(self, source: _SituationSource, eval_run: int) -> dict[str, Any]:
        cfg = self.cfg
        policy = cfg.repeat_policy
        budget = cfg.budget
        landed = 0
        run_rows_start = len(self.rows)
        open_tasks: list[_Task] = []  # tasks with rollouts still to decide or plan
        # Rounds are sized by a knob, not by concurrency, so the allocation (which reads
        # only earlier rounds) does not depend on how many rollouts run at once.
        round_cap = max(1, int(self.knobs["writer_buffer_cap"]))
        k0_split = max(2, cfg.repeats // 2) if policy == "split" else 1
        quiet_rounds = 0
        stop: str | None = None
        while True:
            if landed >= budget:
                stop = "budget"
                break
            if self._clock_out():
                stop = "time_budget"
                break
            if self._dead():
                stop = "dead_agent"
                break
            capacity = min(budget - landed, round_cap)
            plans: list[_Plan] = []
            # 1) finish what is open: fixed groups short of k, asks whose first rollouts have
            #    all landed (extend or close them), extensions still short of k.
            still_open: list[_Task] = []
            first = cfg.repeats if policy == "fixed" else k0_split
            for task in open_tasks:
                if policy != "fixed" and not task.decided and task.opened < min(first, task.k):
                    # A first batch the last round's capacity cut short: top it up first.
                    while task.opened < min(first, task.k) and len(plans) < capacity:
                        plans.append(self._plan(task, eval_run, "initial"))
                    still_open.append(task)
                    continue
                if policy != "fixed" and not task.decided and task.resolved >= task.opened:
                    task.decided = True
                    if not self._wants_more(task, policy):
                        task.k = task.opened  # closed: no more rollouts for this ask
                if policy == "fixed" or task.decided:
                    reason = "fixed" if policy == "fixed" else task_reason(policy)
                    while task.opened < task.k and len(plans) < capacity:
                        plans.append(self._plan(task, eval_run, reason))
                    if task.opened < task.k:
                        still_open.append(task)
                else:
                    still_open.append(task)
            open_tasks = still_open
            # 2) open new asks with what is left of this round (not when the clock is closing).
            #    Under an allocating policy every open ask holds back room for its possible
            #    extension to k, so a split seen in the last rounds is never cut by the budget;
            #    only when nothing is held back does a last, shorter group fill the budget.
            closing = self._closing()
            reserve = 0 if policy == "fixed" else sum(t.k - t.opened for t in open_tasks)
            while len(plans) < capacity and not closing:
                left = budget - landed - len(plans) - reserve
                if policy != "fixed" and left < cfg.repeats and not (reserve == 0 and not plans):
                    break
                task = source.next_task()
                if task is None:
                    break
                n0 = min(first, task.k)
                while task.opened < n0 and len(plans) < capacity:
                    plans.append(
                        self._plan(task, eval_run, "fixed" if policy == "fixed" else "initial")
                    )
                open_tasks.append(task)
                if policy != "fixed":
                    reserve += task.k - task.opened
            if not plans:
                stop = "time_budget" if closing else source.exhausted_by
                break
            new_keys = await self._run_round(plans, eval_run)
            landed = len(self.rows) - run_rows_start
            if cfg.until == "saturation":
                quiet_rounds = 0 if new_keys else quiet_rounds + 1
                if quiet_rounds >= int(self.knobs["empty_rounds_to_stop"]):
                    stop = "saturation"
                    break
        self.per_run.append(
            {
                "eval_run": eval_run,
                "rows": landed,
                "stopped_because": stop,
                "asks": len(source.tasks),
            }
        )
        self.stop_reason = stop
        return {"tasks": source.tasks, "stopped_because": stop}

    def _note_parent(self, row: dict[str, Any]) -> None:
        dims = row.get("scenario_dimensions") or {}
        fired = (row.get("faults") or {}).get("fired")
        reward = row.get("reward")
        if fired:
            kind = "tool_fault"
        elif self.mutate_graded and reward is not None and reward < self.thr:
            kind = "graded_failure"
        else:
            return
        focus = {"tool": dims.get("tool"), "tool_condition": dims.get("tool_condition")}
        self.parents.append((focus, kind))

    def take_mutations(self, limit: int) -> list[tuple[Any, dict[str, Any]]]:
        """Sibling situations for the pending parents (at most ``limit``), with the writer
        lineage that rebuilds each one: a writer of its own seed drawing once with the focus."""
        out: list[tuple[Any, dict[str, Any]]] = []
        while self.parents and len(out) < limit and self.make_writer is not None:
            focus, kind = self.parents.popleft()
            mseed = stable_hash(self.cfg.seed, "mutation", sum(self.mutation_kinds.values()))
            sit = self.make_writer(mseed, unique=False).next_situation(focus=focus)
            lineage = {
                **self.writer_params,
                "seed": mseed,
                "unique": False,
                "index": 0,
                "focus": focus,
                "parent": kind,
            }
            self.mutation_kinds[kind] += 1
            self.mutation_aims[f"{focus['tool']}/{focus['tool_condition']}"] += 1
            out.append((sit, lineage))
        return out

    def _wants_more(self, task: _Task, policy: str) -> bool:
        if policy == "split":
            if not task.landed:
                return False
            if self.grader is not None:
                rewards = [r.get("reward") for r in task.landed if r.get("reward") is not None]
                if rewards:
                    return any(x >= self.thr for x in rewards) and any(
                        x < self.thr for x in rewards
                    )
            sigs = {r.get("behavior_signature") for r in task.landed}
            return len(sigs) > 1
        if policy == "verify":
            total = len(self.rows)
            share = self.novel_rows / total if total else 1.0
            return share < float(self.knobs["adaptive_verify_explore_floor"])
        return False

    # ---- one round ----------------------------------------------------------------------
    async def _run_round(self, plans: list[_Plan], eval_run: int) -> int:
        results: list[dict[str, Any] | None] = [None] * len(plans)
        todo: list[int] = []
        for i, plan in enumerate(plans):
            done = self.done_rows.get(plan.rollout_id)
            if done is not None:
                results[i] = self._reuse(done)
            else:
                todo.append(i)
        if todo:
            if self.agent_async:
                await self._run_async(plans, todo, results)
            else:
                for i in todo:
                    if self._clock_out() or self._dead():
                        break
                    results[i] = await self._rollout(plans[i])
        new_keys = 0
        for plan, res in zip(plans, results, strict=True):
            task = plan.task
            if res is None:
                # Not run (stop mid-round): the slot is given back.
                task.opened -= 1 if task.opened > task.resolved else 0
                continue
            if "row" not in res:
                task.lost += 1
                self.lost.append(res["lost"])
                self.lost_by[res["lost"]["error_type"]] += 1
                continue
            row = res["row"]
            task.landed.append(row)
            self.rows.append(row)
            if self.mutating and self.parents.maxlen:
                self._note_parent(row)
            dims = row.get("scenario_dimensions") or {}
            key = (
                dims.get("stance"),
                dims.get("world_state"),
                dims.get("tool_condition"),
                row.get("behavior_signature"),
            )
            if key not in self.coverage:
                self.coverage.add(key)
                self.novel_rows += 1
                new_keys += 1
            self._maybe_progress()
        return new_keys

    async def _run_async(self, plans: list[_Plan], todo: list[int], results: list[Any]) -> None:
        queue = deque(todo)
        conc = max(1, int(self.knobs["concurrency"]))

        async def worker() -> None:
            while queue:
                if self._clock_out() or self._dead():
                    return
                i = queue.popleft()
                results[i] = await self._rollout(plans[i])

        tasks = [asyncio.ensure_future(worker()) for _ in range(min(conc, len(todo)))]
        if self.deadline is None:
            await asyncio.gather(*tasks)
            return
        timeout = max(0.0, self.deadline - time.monotonic()) + float(self.knobs["stop_grace"])
        done, pending = await asyncio.wait(tasks, timeout=timeout)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            self.abandoned += len(pending)
            self.warnings.append(
                f"{len(pending)} rollouts were still running {self.knobs['stop_grace']}s after the "
                "time budget ran out and were abandoned (advanced stop_grace)."
            )
        for t in done:
            t.result()

    # ---- one rollout --------------------------------------------------------------------
    def _world(self, plan: _Plan) -> Any:
        sit = plan.task.situation
        return self.world_cls(
            sit,
            self.tools,
            fault_rate=self.cfg.fault_rate,
            options=self.world_options,
            seed=plan.seed,
            **self.world_kwargs,
        )

    async def _rollout(self, plan: _Plan) -> dict[str, Any]:
        task = plan.task
        t_start = time.monotonic()
        token = None
        world = None
        try:
            world = self._world(plan)
            if self._current is not None:
                token = self._current.set(
                    self._context(
                        prompt=task.prompt,
                        rollout_index=plan.rollout_index,
                        scenario_id=task.scenario_id,
                        seed=plan.seed,
                    )
                )
            out = self.agent(
                task.prompt,
                tools=self.tools,
                system_prompt=self.system_prompt,
                world=world,
                sampling=self.cfg.sampling,
            )
            if inspect.isawaitable(out):
                out = (
                    await asyncio.wait_for(out, timeout=self.cfg.timeout)
                    if self.cfg.timeout
                    else await out
                )
            if not isinstance(out, Mapping):
                raise TypeError(
                    f"the agent returned {type(out).__name__}; it must return a dict with steps and final_text"
                )
        except Exception as exc:  # noqa: BLE001 - a lost rollout is data, not a crash
            self._live_lost += 1
            etype = "timeout" if isinstance(exc, asyncio.TimeoutError) else type(exc).__name__
            return {
                "lost": {
                    "rollout_id": plan.rollout_id,
                    "scenario_id": task.scenario_id,
                    "prompt": task.prompt,
                    "rollout_index": plan.rollout_index,
                    "eval_run": plan.eval_run,
                    "error_type": etype,
                    "error": f"{etype}: {exc}"[:2000],
                }
            }
        finally:
            if token is not None:
                self._current.reset(token)
        seconds = time.monotonic() - t_start
        self.durations.append(seconds)
        row = self._row(plan, out, world, seconds)
        if self.grader is not None:
            await self._grade(row)
        self.new_rows += 1
        self._live_rows += 1
        if self.on_row is not None:
            self.on_row(row)
        return {"row": row}

    def _row(
        self, plan: _Plan, out: Mapping[str, Any], world: Any, seconds: float
    ) -> dict[str, Any]:
        task = plan.task
        sit = task.situation
        dims = dict(sit.dims)
        steps = out.get("steps") or list(getattr(world, "steps", []) or [])
        # Scrubbed before messages are rebuilt from them: a privileged block inside a tool
        # result must not reach the transcript as text either.
        steps = list(steps)
        steps = scrub(steps) if _carries_never_shipped(steps) else [dict(x) for x in steps]
        steps = _complete_steps(steps, str(out.get("final_text") or ""))
        if self.execute is not None:
            faults = {"planned": None, "rate": 0.0, "fired": []}
        else:
            faults = _faults_of(world, dims, self.cfg.fault_rate)
        final_text = str(out.get("final_text") or "")
        user_turns = any(s.get("kind") == "user" for s in steps)
        model_version = out.get("model_version") or self.agent_model
        sampling = out.get("sampling")
        if sampling is None and not self.agent_is_backend:
            sampling = self.cfg.sampling
        usage = out.get("usage")
        if usage is None:
            usage = _usage_from_steps(steps)
        row: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "prompt": task.prompt,
            "messages": messages_from_steps(self.system_prompt, task.prompt, steps),
            "steps": steps,
            "final_text": final_text,
            "scenario_id": task.scenario_id,
            "phrasing_index": task.phrasing_index,
            "rollout_index": plan.rollout_index,
            "rollout_id": plan.rollout_id,
            "mode": self.cfg.mode,
            "world_state": dims.get("world_state"),
            "faults": faults,
            "sampling": dict(sampling) if sampling is not None else None,
            "policy_version": f"{model_version}@{self.sp_sha[:12]}",
            "model_version": model_version,
            "writer_model": task.writer_model,
            "user_model": (self.user_model or "template") if user_turns else None,
            "lineage": {
                "run_id": self.run_id,
                "source": "simulate",
                "system_prompt_sha": self.sp_sha,
                "system_prompt_head": self.sp_head,
                "system_prompt_chars": self.sp_chars,
                "eval_run": plan.eval_run,
                "replayed": task.replayed_from is not None or plan.eval_run > 0,
                "replayed_from_run": task.replayed_from
                if task.replayed_from is not None
                else (self.run_id if plan.eval_run > 0 else None),
                "writer": dict(task.writer_lineage) if task.writer_lineage else None,
            },
            "markers": {},
            "scenario_dimensions": dims,
            "behavior_signature": None,
            "arm": task.arm,
            "selection_reason": plan.reason,
            "seed": plan.seed,
            "ended_by": str(out.get("ended_by") or getattr(world, "ended_by", None) or "final"),
            "usage": usage,
            "error": out.get("error"),
            "timing": {"rollout_s": round(seconds, 6)},
        }
        if self._signature is not None:
            row["behavior_signature"] = self._signature(row)
        if self._conduct is not None:
            row["conduct"] = self._conduct(row, self.tool_names)
        if self._privileged is not None:
            row["privileged"] = self._privileged(dims, faults)
        return row

    def _reuse(self, done: dict[str, Any]) -> dict[str, Any]:
        row = dict(done)
        if self._privileged is not None and "privileged" not in row:
            row["privileged"] = self._privileged(
                row.get("scenario_dimensions") or {}, row.get("faults")
            )
        self.reused += 1
        self._live_rows += 1
        return {"row": row}

    async def _grade(self, row: dict[str, Any]) -> None:
        """Run ``grader=`` on the landed row; a judge error leaves it unjudged (never a fail)."""
        meta: dict[str, Any] | None = None
        markers: Mapping[str, Any] | None = None
        try:
            verdict = self.grader(row)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if self._normalize is not None:
                norm = self._normalize(verdict)
                reward, reason, status = (
                    norm.get("reward"),
                    norm.get("reason"),
                    str(norm.get("judge_status") or "ok"),
                )
                meta, markers = norm.get("judge_meta"), norm.get("markers")
            else:
                reward, reason, status = _normalize_verdict(verdict)
        except Exception as exc:  # noqa: BLE001 - a judge error is an unjudged row, never a failure
            reward, reason, status = None, f"{type(exc).__name__}: {exc}"[:500], "error"
        row["reward"] = reward
        row["reason"] = reason
        row["judge_name"] = self.grader_name
        row["judge_status"] = status
        if meta is not None:
            row["judge_meta"] = meta
        if markers:
            row["markers"] = {**row["markers"], **dict(markers)}

    def _maybe_progress(self) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        n = len(self.rows)
        if n - self._last_progress_rows >= int(
            self.knobs["progress_every_rows"]
        ) or now - self._last_progress_t >= float(self.knobs["progress_every_s"]):
            self._emit_progress(now)

    def _emit_progress(self, now: float | None = None) -> None:
        if self.progress is None:
            return
        now = time.monotonic() if now is None else now
        n = len(self.rows)
        elapsed = now - self.t0
        self._last_progress_t, self._last_progress_rows = now, n
        self.progress(
            {
                "done": n,
                "budget": self.cfg.budget * self.cfg.runs,
                "budget_per_run": self.cfg.budget,
                "rows_per_s": n / elapsed if elapsed > 0 else None,
                "elapsed_s": elapsed,
                "lost": len(self.lost),
                "reused": self.reused,
            }
        )


def task_reason(policy: str) -> str:
    return {"split": "group_split", "verify": "verify"}.get(policy, policy)


def _faults_of(world: Any, dims: Mapping[str, Any], rate: float) -> dict[str, Any]:
    """The row's ``faults``: what the world planned, the rate it fired at, what fired."""
    if hasattr(world, "fault_plan"):
        planned = world.fault_plan
        rate = getattr(world, "fault_rate", rate)
    else:
        cond = dims.get("tool_condition")
        planned = {"tool": dims.get("tool"), "mode": cond} if cond and cond != "ok" else None
    fired = [dict(f) for f in (getattr(world, "fired", None) or [])]
    return {"planned": dict(planned) if planned else None, "rate": float(rate), "fired": fired}


_CONTAINERS = (dict, list, tuple)


def _carries_never_shipped(value: Any) -> bool:
    """True when a ``privileged``/``vector`` key sits anywhere in ``value``.

    A read-only walk with an explicit stack (half the cost of ``scrub``'s rebuild): most
    rows carry neither key, and only those that do pay for the deep copy.
    """
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        v = pop()
        if isinstance(v, dict):
            for k in v:
                if k in NEVER_SHIPPED:
                    return True
            for x in v.values():
                if isinstance(x, _CONTAINERS):
                    push(x)
        elif isinstance(v, list | tuple):
            for x in v:
                if isinstance(x, _CONTAINERS):
                    push(x)
    return False


def _complete_steps(steps: list[dict[str, Any]], final_text: str) -> list[dict[str, Any]]:
    """Steps that rebuild a valid chat transcript.

    An agent that only called ``world.execute`` returns no assistant steps; the world's
    record then holds tool steps with no assistant turn that requested them. Each run of such
    tool steps gets the assistant turn that called them, and a final reply missing from the
    steps is appended as the last assistant turn. Well-formed steps come back unchanged.
    """
    out: list[dict[str, Any]] = []
    called: set[Any] = set()
    orphans: list[dict[str, Any]] = []

    def flush() -> None:
        if orphans:
            calls = [
                {
                    "id": t.get("tool_call_id"),
                    "name": t.get("name"),
                    "arguments": t.get("arguments") or {},
                }
                for t in orphans
            ]
            out.append({"kind": "assistant", "content": "", "tool_calls": calls})
            out.extend(orphans)
            orphans.clear()

    for step in steps:
        kind = step.get("kind")
        if kind == "tool" and step.get("tool_call_id") not in called:
            orphans.append(step)
            continue
        flush()
        if kind == "assistant":
            called.update(c.get("id") for c in step.get("tool_calls") or [])
        out.append(step)
    flush()
    if final_text:
        last = out[-1] if out else None
        if not (
            last
            and last.get("kind") == "assistant"
            and not last.get("tool_calls")
            and last.get("content") == final_text
        ):
            out.append({"kind": "assistant", "content": final_text, "tool_calls": []})
    return out


def _usage_from_steps(steps: list[dict[str, Any]]) -> dict[str, int] | None:
    inp = [s.get("input_tokens") for s in steps if s.get("input_tokens") is not None]
    outp = [s.get("output_tokens") for s in steps if s.get("output_tokens") is not None]
    if not inp and not outp:
        return None
    return {"input_tokens": int(sum(inp)), "output_tokens": int(sum(outp))}


def _normalize_verdict(verdict: Any) -> tuple[float | None, str | None, str]:
    """(reward, reason, status) from a judge's return when ``score.judging`` is not built."""
    if verdict is None:
        return None, None, "abstain"
    if isinstance(verdict, bool):
        return float(verdict), None, "ok"
    if isinstance(verdict, int | float):
        r = float(verdict)
        if math.isnan(r) or not 0.0 <= r <= 1.0:
            return None, f"reward {verdict!r} is outside [0, 1]", "invalid_result"
        return r, None, "ok"
    if isinstance(verdict, Mapping):
        reward, _, status = _normalize_verdict(verdict.get("reward", verdict.get("score")))
        return reward, verdict.get("reason"), status
    if isinstance(verdict, tuple) and len(verdict) == 2:
        reward, _, status = _normalize_verdict(verdict[0])
        return reward, str(verdict[1]), status
    return None, f"unreadable verdict {type(verdict).__name__}", "invalid_result"


def _is_async_callable(fn: Any) -> bool:
    call = type(fn).__call__ if not inspect.isfunction(fn) and not inspect.ismethod(fn) else None
    return inspect.iscoroutinefunction(fn) or (
        call is not None and inspect.iscoroutinefunction(call)
    )


def _optional(module: str, name: str) -> Any:
    """``module.name`` if it can be imported, else None (a part not built yet is skipped)."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


# ---------------------------------------------------------------------------------------
# Inputs: agent, spec, tasks, traces
# ---------------------------------------------------------------------------------------


def _resolve_agent(
    agent: Any, *, timeout: float, sampling: dict[str, Any] | None, logprobs: Any, avg_turns: int
) -> tuple[Any, str, bool]:
    """(callable, model name, is a model backend)."""
    if agent is None or agent == "scripted":
        from wai_exp.simulate.agents.scripted import ScriptedAgent

        agent = ScriptedAgent()
    scripted_cls = _optional("wai_exp.simulate.agents.scripted", "ScriptedAgent")
    if scripted_cls is not None and isinstance(agent, scripted_cls):
        # Pure and fast: call its synchronous ``run`` in the loop instead of awaiting a
        # coroutine per rollout (same rollout, no scheduling overhead).
        scripted = agent

        def run_scripted(
            prompt: str, *, tools: Any, system_prompt: Any, world: Any, sampling: Any
        ) -> dict[str, Any]:
            return scripted.run(prompt, tools=tools, world=world)

        return run_scripted, str(scripted.model_version), False
    if isinstance(agent, str):
        backend = agent.split(":", 1)[0] if ":" in agent else ""
        if backend not in MODEL_BACKENDS:
            raise ValueError(
                f"agent={agent!r} is not a model spec: use <backend>:<model>[@<url>] with backend one of "
                f"{list(MODEL_BACKENDS)}, 'scripted', a callable, or None for the built-in scripted agent"
            )
        resolver = _optional("wai_exp.simulate.agents", "resolve_agent")
        if resolver is not None:
            a = resolver(
                agent, timeout=timeout, sampling=sampling, logprobs=logprobs, max_turns=avg_turns
            )
        else:
            cls = _optional("wai_exp.simulate.agents.model_agent", "ModelAgent")
            if cls is None:
                raise ValueError(
                    f"agent={agent!r}: no model backend is installed in wai_exp.simulate.agents"
                )
            a = cls(
                agent, timeout=timeout, sampling=sampling, logprobs=logprobs, max_turns=avg_turns
            )
        return a, str(getattr(a, "model_version", agent)), True
    if not callable(agent):
        raise ValueError(
            f"agent must be a callable, a model spec string or None, got {type(agent).__name__}"
        )
    name = getattr(agent, "model_version", None) or _callable_name(agent)
    backend_cls = _optional("wai_exp.simulate.agents.model_agent", "ModelAgent")
    return agent, str(name), backend_cls is not None and isinstance(agent, backend_cls)


def _load_rows_source(source: Any, what: str) -> list[dict[str, Any]]:
    """Rows from a SimulationData, a list of rows, a JSONL path or a run/stage directory."""
    from wai_exp.rows.jsonl import read_rows

    if isinstance(source, SimulationData):
        return [dict(r) for r in source.trajectories]
    if hasattr(source, "trajectories"):
        return [dict(r) for r in source.trajectories]
    if isinstance(source, str | Path):
        path = Path(source).expanduser()
        if path.is_dir():
            candidates = [path / "rows.jsonl", path / "simulate" / "rows.jsonl"]
            found = [c for c in candidates if c.is_file()]
            if not found:
                found = sorted(path.glob("*/rows.jsonl"))
                sims = [c for c in found if "simulate" in c.parent.name]
                found = sims or found
            if not found:
                raise ValueError(
                    f"{what}={str(source)!r}: no rows.jsonl in that directory or its stage folders"
                )
            if len(found) > 1:
                raise ValueError(
                    f"{what}={str(source)!r}: several stage folders hold rows ({[str(f) for f in found]}); pass one path"
                )
            path = found[0]
        if not path.is_file():
            raise ValueError(f"{what}={str(source)!r} is neither a JSONL file nor a run directory")
        return read_rows(path)
    if isinstance(source, Sequence) and not isinstance(source, str | bytes):
        rows = list(source)
        if not all(isinstance(r, Mapping) for r in rows):
            raise ValueError(
                f"{what} must be row dicts, a JSONL path, a run directory or a SimulationData"
            )
        return [dict(r) for r in rows]
    raise ValueError(
        f"{what} must be row dicts, a JSONL path, a run directory or a SimulationData, got {type(source).__name__}"
    )


def _writer_key(params: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        params.get("seed"),
        params.get("hard_share"),
        params.get("phrasings"),
        params.get("unique"),
        json.dumps(params.get("focus"), sort_keys=True) if params.get("focus") else None,
    )


def _regenerate(
    rows: list[dict[str, Any]], *, tools: Any, system_prompt: Any, options: Any, what: str
) -> dict[str, Any]:
    """``{scenario_id: Situation}`` rebuilt by re-running the template writer each row names.

    The writer is deterministic in its seed and draw order, so drawing up to a row's recorded
    index (``lineage.writer.index``) gives back the very situation, entities included. Raises
    ``ValueError`` when a row carries no writer lineage or the rebuilt ask differs (other
    tools, system prompt or world options than the run that wrote it).
    """
    from wai_exp.simulate.writer import TemplateWriter

    wanted: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        params = (r.get("lineage") or {}).get("writer")
        if not isinstance(params, Mapping) or params.get("index") is None:
            raise ValueError(
                f"{what}: row {r.get('rollout_id') or r.get('scenario_id')!r} has no lineage.writer "
                "(it was not written by this engine's template writer), so its situation cannot be rebuilt"
            )
        entry = wanted.setdefault(_writer_key(params), {"params": params, "ids": {}})
        entry["ids"][str(r["scenario_id"])] = int(params["index"])
    out: dict[str, Any] = {}
    for entry in wanted.values():
        p = entry["params"]
        writer = TemplateWriter(
            tools, system_prompt, seed=int(p["seed"]), hard_share=float(p["hard_share"]),
            phrasings=int(p["phrasings"]), unique=bool(p["unique"]), options=options,
        )  # fmt: skip
        # A mutation was drawn once, with its parent's focus, by a writer of its own seed.
        drawn = writer.next_batch(max(entry["ids"].values()) + 1, focus=p.get("focus") or None)
        for sid, idx in entry["ids"].items():
            sit = drawn[idx]
            if str(sit.scenario_id) != sid:
                raise ValueError(
                    f"{what}: situation {sid} could not be rebuilt (the writer now draws {sit.scenario_id} "
                    "at its index); replay under the tools, system prompt and advanced.world of the original run"
                )
            out[sid] = sit
    return out


def _replay_tasks(
    rows: list[dict[str, Any]],
    *,
    k_override: int | None,
    tools: Any,
    system_prompt: Any,
    options: Any,
    what: str = "tasks",
) -> tuple[list[_Task], int]:
    """The task set of a previous run: one task per (scenario, phrasing) in first-seen order.

    Returns the tasks and the pinned run's k (its largest group: a split-allocated run
    extends to k only where groups split, so its largest group is the k it ran under).
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("scenario_id") is None or r.get("prompt") is None:
            raise ValueError(
                f"{what}: every row needs scenario_id and prompt (rows written by simulate have both)"
            )
        groups.setdefault((str(r["scenario_id"]), str(r["prompt"])), []).append(r)
    if not groups:
        raise ValueError(f"{what} holds no rows; pass a run that produced rows")
    # k is counted within one eval run: a pinned run made with runs=N holds N copies of each
    # group, and replaying it must not multiply k by N.
    per_run: dict[tuple[str, str, Any], int] = {}
    for key, g in groups.items():
        for r in g:
            run_key = (*key, (r.get("lineage") or {}).get("eval_run"))
            per_run[run_key] = per_run.get(run_key, 0) + 1
    k_orig = max(per_run.values())
    k = k_override if k_override is not None else k_orig
    situations = _regenerate(
        [g[0] for g in groups.values()],
        tools=tools,
        system_prompt=system_prompt,
        options=options,
        what=what,
    )
    tasks: list[_Task] = []
    for (sid, prompt), g in groups.items():
        first = g[0]
        sit = situations[sid]
        p_index = int(first.get("phrasing_index") or 0)
        if p_index >= len(sit.phrasings) or sit.phrasings[p_index] != prompt:
            raise ValueError(
                f"{what}: the rebuilt ask of {sid} differs from the row's prompt; replay under the original spec"
            )
        lineage = first.get("lineage") or {}
        tasks.append(
            _Task(
                order=len(tasks),
                situation=sit,
                phrasing_index=p_index,
                prompt=prompt,
                writer_model=str(first.get("writer_model") or "template"),
                k=k,
                replayed_from=str(lineage.get("run_id") or "unknown"),
                arm="replay",
                writer_lineage=dict(lineage.get("writer") or {}),
            )
        )
    return tasks, k_orig


def _trace_aim(
    rows: list[dict[str, Any]], knobs: Mapping[str, Any], seed: int
) -> tuple[Callable[[list[Any], int], list[Any]], dict[str, Any]]:
    """Aim the grid at the trace regions that failed: a weighted draw over candidates."""
    import numpy as np

    thr = float(knobs["pass_threshold"])
    failing = []
    for r in rows:
        reward = r.get("reward")
        fired = ((r.get("faults") or {}).get("fired")) or []
        if (reward is not None and reward < thr) or fired:
            failing.append(r)
    failing = failing[: int(knobs["failing_seeds_cap"])] if knobs["failing_seeds_cap"] else failing
    regions: Counter[tuple[Any, Any]] = Counter()
    for r in failing:
        d = r.get("scenario_dimensions") or {}
        regions[(d.get("tool"), d.get("tool_condition"))] += 1
    total = sum(regions.values())
    share = {k: v / total for k, v in regions.items()} if total else {}
    gain = float(knobs["allocation_gain"])
    wt, wc = float(knobs["allocation_tool_weight"]), float(knobs["allocation_condition_weight"])
    rng = np.random.default_rng(stable_hash(seed, "trace-aim"))

    def aim(pool: list[Any], want: int) -> list[Any]:
        if not share or len(pool) <= want:
            return pool[:want]
        weights = np.ones(len(pool))
        for i, sit in enumerate(pool):
            d = sit.dims
            best = 0.0
            for (tool, cond), s in share.items():
                match = wt * (d.get("tool") == tool) + wc * (d.get("tool_condition") == cond)
                best = max(best, match * s)
            weights[i] = 1.0 + gain * best
        idx = rng.choice(len(pool), size=want, replace=False, p=weights / weights.sum())
        return [pool[i] for i in sorted(idx)]

    info = {
        "traces": len(rows),
        "failing": len(failing),
        "failing_rows": failing,
        "hot_regions": [
            {"tool": t, "tool_condition": c, "rows": n} for (t, c), n in regions.most_common()
        ],
    }
    return aim, info


# ---------------------------------------------------------------------------------------
# simulate()
# ---------------------------------------------------------------------------------------

_PARAMS = (
    "agent", "spec", "tools", "system_prompt", "situations", "traces", "tasks", "runs", "grader", "execute",
    "requests_per_situation", "rollouts_per_request", "repeat_policy", "unique_situations", "mode", "fault_rate",
    "hard_share", "reproducible", "budget", "time_budget", "until", "logprobs", "sampling", "simulator",
    "user_model", "timeout", "grade", "llm_grade", "output", "advanced", "seed", "done_rows", "on_row", "progress",
)  # fmt: skip


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
    llm_grade: bool = False,
    output: str | Path | None = None,
    advanced: dict[str, Any] | None = None,
    seed: int | None = None,
    done_rows: Iterable[Mapping[str, Any]] | None = None,
    on_row: Callable[[dict[str, Any]], Any] | None = None,
    progress: Callable[[dict[str, Any]], Any] | None = None,
    **aliases: Any,
) -> SimulationData:
    """Run the agent over drawn situations and return every rollout as a row.

    Offline defaults: ``agent=None`` is the built-in scripted agent, ``simulator=False``
    the template writer, ``spec=None`` the shipped ``support_desk`` spec. See
    ``shared/seeds/simulate-parameters.md`` for every parameter; ``MODE_PRESETS`` for what
    each mode presets. Aliases: ``phrasings=``/``n=``, ``repeats=``, ``unique=``,
    ``policy=`` (system prompt), ``risk=`` (fault rate).

    ``budget`` caps rows per run; lost rollouts do not count, so a flaky agent still yields
    ``budget`` rows unless a stop rule fires first. ``report()["stopped_because"]`` is one of
    ``budget``, ``situations_exhausted`` (``situations=N``), ``tasks_exhausted`` (a replayed
    task set ran out), ``time_budget``, ``saturation`` (``until="saturation"``) or
    ``dead_agent``. Scheduling is always round-synchronous, so without a clock the same
    seed gives the same rows at any concurrency (``reproducible=`` is recorded; a clock
    with ``reproducible=True`` is refused). Hooks for the pipeline: ``done_rows`` (rows a
    crashed attempt finished, reused by ``rollout_id``), ``on_row(row)`` (once per newly
    finished row), ``progress(dict)``.

    Returns a ``SimulationData``: ``.trajectories`` (rows with ``privileged`` in memory),
    ``.rows`` (scrubbed), ``.report()``. Raises ``ValueError`` for an unknown parameter or
    knob (naming the closest), a value out of range, two spellings of one parameter, or an
    input that cannot be read. An exception inside the agent never escapes: that rollout is
    lost and recorded (``data.lost``, ``report()["rollouts_lost_by"]``).
    """
    given = {
        "requests_per_situation": requests_per_situation,
        "rollouts_per_request": rollouts_per_request,
        "unique_situations": unique_situations,
        "system_prompt": system_prompt,
        "fault_rate": fault_rate,
    }
    for alias, value in aliases.items():
        target = _ALIASES.get(alias)
        if target is None:
            valid = sorted(set(_PARAMS) | set(_ALIASES))
            close = difflib.get_close_matches(alias, valid, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"simulate() got an unknown parameter {alias!r}.{hint} Valid parameters: {', '.join(valid)}"
            )
        if given[target] is not None:
            raise ValueError(
                f"{alias}= and {target}= (or another alias of it) are two spellings of one parameter; pass one"
            )
        given[target] = value
    requests_per_situation = given["requests_per_situation"]
    rollouts_per_request = given["rollouts_per_request"]
    unique_situations = given["unique_situations"]
    system_prompt = given["system_prompt"]
    fault_rate = given["fault_rate"]

    t_start = time.monotonic()
    if mode not in MODE_PRESETS:
        close = difflib.get_close_matches(str(mode), list(MODE_PRESETS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"mode={mode!r} is not a mode.{hint} Modes: {list(MODE_PRESETS)}")
    preset = MODE_PRESETS[mode]
    knobs = resolve_knobs(advanced)
    if seed is not None:
        if advanced and "seed" in advanced and advanced["seed"] != seed:
            raise ValueError(
                f"seed={seed} and advanced['seed']={advanced['seed']} disagree; pass one"
            )
        knobs["seed"] = _num("seed", seed, 0, None, integer=True)
    run_seed = int(knobs["seed"])
    if until not in UNTIL:
        raise ValueError(f"until={until!r}: use one of {list(UNTIL)}")
    if llm_grade:
        raise ValueError(
            "llm_grade=True needs an LLM judge and none ships offline; pass grader=<your judge> or grade "
            "after with wai_exp.run_judge(data, judge)"
        )
    if knobs["mutate_graded_failures"] is True and grader is None:
        raise ValueError(
            "advanced mutate_graded_failures=True needs grader=; pass a grader or drop the knob"
        )
    if simulator not in (False, None, "template"):
        raise ValueError(
            f"simulator={simulator!r}: only the built-in template writer (simulator=False) is available; "
            "model writers are not shipped in wai-exp"
        )
    if user_model not in (None, False, "template"):
        raise ValueError(
            f"user_model={user_model!r}: the simulated person is played by the world's template user; "
            "model-played users are not shipped. Pass None."
        )
    if logprobs not in (None, True, False, "tokens"):
        raise ValueError(f"logprobs={logprobs!r}: use None, True or 'tokens'")
    budget = _num("budget", budget, 1, None, integer=True)
    runs = _num("runs", runs, 1, None, integer=True)
    if situations is not None:
        situations = _num("situations", situations, 1, None, integer=True)
    if time_budget is not None:
        time_budget = _num("time_budget", time_budget, 0, None)
    time_budget = float(time_budget) if time_budget else None
    if reproducible and time_budget:
        raise ValueError(
            "reproducible=True needs the clock off: drop time_budget (a clock decides which rows land)"
        )
    timeout = _num("timeout", timeout, 0, None)
    phrasings = _num(
        "requests_per_situation",
        requests_per_situation if requests_per_situation is not None else preset["phrasings"],
        1,
        None,
        integer=True,
    )
    repeats_given = rollouts_per_request is not None
    repeats = _num(
        "rollouts_per_request",
        rollouts_per_request if repeats_given else preset["repeats"],
        1,
        None,
        integer=True,
    )
    policy = repeat_policy if repeat_policy is not None else preset["repeat_policy"]
    if policy == "adaptive":
        policy = "split"  # the reference's name for the rl default
    if policy not in REPEAT_POLICIES:
        raise ValueError(
            f"repeat_policy={policy!r}: use one of {list(REPEAT_POLICIES)} ('adaptive' = 'split')"
        )
    unique = bool(preset["unique"] if unique_situations is None else unique_situations)
    fr = float(
        _num("fault_rate", fault_rate if fault_rate is not None else preset["fault_rate"], 0.0, 1.0)
    )
    hs = float(
        _num("hard_share", hard_share if hard_share is not None else preset["hard_share"], 0.0, 1.0)
    )
    if sampling is not None and not isinstance(sampling, Mapping):
        raise ValueError(
            f"sampling must be a dict like {{'temperature': 0.7, 'max_tokens': 1024, 'model': 'my-model'}}, got {type(sampling).__name__}"
        )

    # Spec: tools + system prompt.
    from wai_exp.simulate.spec import load_agent_spec, normalize_tools

    if spec is None and tools is None and system_prompt is None:
        loaded = load_agent_spec(None)
        spec_name, tool_list, sp = loaded.name, list(loaded.tools), loaded.system_prompt
    elif spec is not None:
        loaded = load_agent_spec(spec)
        spec_name = loaded.name
        tool_list = normalize_tools(tools) if tools is not None else list(loaded.tools)
        sp = system_prompt if system_prompt is not None else loaded.system_prompt
    else:
        spec_name = "inline"
        tool_list = (
            normalize_tools(tools) if tools is not None else list(load_agent_spec(None).tools)
        )
        sp = system_prompt if system_prompt is not None else load_agent_spec(None).system_prompt
    if not tool_list:
        raise ValueError("the agent has no tools: pass tools=[...] or a spec with tools")

    # World options, validated before any rollout.
    from wai_exp.simulate import world as world_mod

    world_options = _world_options(world_mod, knobs["world"])
    world_kwargs = _world_kwargs(world_mod.RolloutWorld, knobs)
    world_cls = world_mod.RolloutWorld
    if execute is not None:
        if not callable(execute):
            raise ValueError("execute must be a callable execute(tool_name, arguments) -> result")
        world_cls = _user_exec_world(world_cls, execute)

    # Two arms that differ only in the agent's settings (a scripted agent's skills) must not
    # share rollout ids, so the run id hashes the agent's full description where it has one.
    scripted_cls = _optional("wai_exp.simulate.agents.scripted", "ScriptedAgent")
    agent_identity = (
        repr(agent) if scripted_cls is not None and isinstance(agent, scripted_cls) else None
    )
    agent_fn, agent_model, is_backend = _resolve_agent(
        agent,
        timeout=float(timeout),
        sampling=dict(sampling) if sampling else None,
        logprobs=logprobs,
        avg_turns=int(knobs["avg_turns"]),
    )
    if agent_identity is None:
        default = agent is None or agent == "scripted"
        agent_identity = (
            repr(scripted_cls()) if default and scripted_cls is not None else agent_model
        )
    warnings: list[str] = []
    if logprobs and not is_backend:
        warnings.append(
            "logprobs= is recorded by model backends only; this agent is a callable, so no logprob was captured."
        )

    # Tasks to replay, traces to aim at.
    replay: list[_Task] | None = None
    tasks_info: dict[str, Any] = {"tasks": 0}
    if tasks is not None:
        task_rows = _load_rows_source(tasks, "tasks")
        replay, k_orig = _replay_tasks(
            task_rows,
            k_override=repeats if repeats_given else None,
            tools=tool_list,
            system_prompt=sp,
            options=world_options,
        )
        if not repeats_given:
            repeats = k_orig
        if repeat_policy is None:
            policy = "fixed"  # a replay measures the same asks again: every ask gets k
        tasks_info = {"tasks": len(replay), "task_rows": len(task_rows), "k_pinned": k_orig}
    aim = None
    trace_info: dict[str, Any] = {"traces": 0}
    seed_tasks: list[_Task] = []
    if traces is not None:
        trace_rows = _load_rows_source(traces, "traces")
        aim, trace_info = _trace_aim(trace_rows, knobs, run_seed)
        failing = trace_info.pop("failing_rows")
        # The failing asks themselves seed the run (writer_model "seed"), one task per ask.
        rebuildable = [
            r
            for r in failing
            if ((r.get("lineage") or {}).get("writer") or {}).get("index") is not None
        ]
        if rebuildable:
            try:
                seed_tasks, _ = _replay_tasks(
                    rebuildable,
                    k_override=repeats,
                    tools=tool_list,
                    system_prompt=sp,
                    options=world_options,
                    what="traces",
                )
            except ValueError as exc:
                warnings.append(f"traces=: failing asks could not seed the run ({exc})")
                seed_tasks = []
            for t in seed_tasks:
                t.writer_model, t.replayed_from, t.arm = "seed", None, "seed"
        if len(rebuildable) < len(failing):
            warnings.append(
                f"traces=: {len(failing) - len(rebuildable)} failing rows carry no writer lineage; they aim the grid "
                "but cannot be replayed as seed asks"
            )
        trace_info["seeds"] = len(seed_tasks)

    cfg = _Config(
        mode=mode,
        phrasings=phrasings,
        repeats=repeats,
        repeats_given=repeats_given,
        repeat_policy=policy,
        unique=unique,
        fault_rate=fr,
        hard_share=hs,
        budget=budget,
        runs=runs,
        situations=situations,
        time_budget=time_budget,
        until=until,
        seed=run_seed,
        reproducible=bool(reproducible),
        knobs=knobs,
        timeout=float(timeout),
        logprobs=logprobs,
        sampling=dict(sampling) if sampling is not None else None,
        grade=bool(grade),
    )
    run_id = "sim-" + _short_hash(
        run_seed, mode, phrasings, repeats, policy, unique, fr, hs, prompt_sha(sp), json.dumps(tool_list, sort_keys=True),
        agent_identity, situations, [(t.scenario_id, t.prompt) for t in replay] if replay else None,
        json.dumps(_world_dump(world_options), sort_keys=True), n=12,
    )  # fmt: skip
    done_map: dict[str, dict[str, Any]] = {}
    for r in done_rows or ():
        rid = r.get("rollout_id")
        if rid:
            done_map[str(rid)] = dict(r)

    engine = _Engine(
        cfg,
        agent=agent_fn,
        agent_model=agent_model,
        agent_is_backend=is_backend,
        tools=tool_list,
        system_prompt=sp,
        world_cls=world_cls,
        world_options=world_options,
        world_kwargs=world_kwargs,
        execute=execute,
        grader=grader,
        user_model=None if user_model in (None, False) else str(user_model),
        done_rows=done_map,
        on_row=on_row,
        progress=progress,
        run_id=run_id,
    )
    engine.warnings.extend(warnings)
    stream = _Stream(Path(output), knobs) if output is not None else None
    if stream is not None:
        user_on_row = on_row

        def stream_row(row: dict[str, Any]) -> None:
            stream.add(row)
            if user_on_row is not None:
                user_on_row(row)

        engine.on_row = stream_row

    def make_writer(writer_seed: int, unique: bool = unique) -> Any:
        from wai_exp.simulate.writer import TemplateWriter

        return TemplateWriter(
            tool_list,
            sp,
            seed=writer_seed,
            hard_share=hs,
            phrasings=phrasings,
            unique=unique,
            options=world_options,
        )

    engine.make_writer = make_writer
    engine.writer_params = {
        "seed": run_seed,
        "hard_share": hs,
        "phrasings": phrasings,
        "unique": unique,
    }

    # The template writer's batch: the buffer the reference's writer keeps ahead of rollouts.
    batch = max(
        1,
        int(knobs["writer_buffer_cap"])
        // max(1, phrasings * (repeats if policy == "fixed" else max(1, repeats // 2))),
    )
    per_run_tiers: list[Counter[str]] = []

    async def main() -> None:
        try:
            first_tasks: list[_Task] | None = None
            for eval_run in range(runs):
                if eval_run == 0:
                    if replay is not None:
                        src = _SituationSource(
                            replay=replay,
                            phrasings=phrasings,
                            k=repeats,
                            max_situations=None,
                            batch=batch,
                        )
                    else:
                        src = _SituationSource(
                            writer=make_writer(run_seed),
                            phrasings=phrasings,
                            k=repeats,
                            max_situations=situations,
                            batch=batch,
                            aim=aim,
                            oversample=int(knobs["select_oversample"]),
                            writer_params={
                                "seed": run_seed,
                                "hard_share": hs,
                                "phrasings": phrasings,
                                "unique": unique,
                            },
                            seeds=seed_tasks,
                            mutator=engine.take_mutations,
                        )
                else:
                    # Later runs replay the asks the first run opened, with fresh rollout seeds.
                    assert first_tasks is not None
                    again = [
                        _Task(
                            t.order,
                            t.situation,
                            t.phrasing_index,
                            t.prompt,
                            t.writer_model,
                            repeats,
                            replayed_from=t.replayed_from,
                            writer_lineage=t.writer_lineage,
                            arm="replay",
                        )  # fmt: skip
                        for t in first_tasks
                    ]
                    src = _SituationSource(
                        replay=again,
                        phrasings=phrasings,
                        k=repeats,
                        max_situations=None,
                        batch=batch,
                    )
                    src.exhausted_by = "tasks_exhausted"
                before = len(engine.rows)
                engine.mutating = src.writer is not None
                result = await engine.run(src, eval_run)
                per_run_tiers.append(
                    Counter(
                        str((r.get("scenario_dimensions") or {}).get("tier"))
                        for r in engine.rows[before:]
                    )
                )
                if eval_run == 0:
                    first_tasks = [t for t in result["tasks"] if t.opened > 0]
                if engine.stop_reason in ("dead_agent", "time_budget"):
                    break
        finally:
            closer = getattr(agent_fn, "aclose", None)
            if closer is not None:
                res = closer()
                if inspect.isawaitable(res):
                    await res

    try:
        asyncio.run(main())
    except BaseException:
        if stream is not None:
            stream.close(remove=False)  # keep the finished rows on disk for a resume
        raise
    engine._emit_progress()
    elapsed = time.monotonic() - t_start

    # ---- report -------------------------------------------------------------------------
    rows = engine.rows
    tier_counts: Counter[str] = Counter()
    for c in per_run_tiers:
        tier_counts.update(c)
    from wai_exp.simulate.dimensions import DIMENSION_KEYS, HARD_TIERS

    n_rows = len(rows)
    hard_rows = sum(v for k, v in tier_counts.items() if k in HARD_TIERS)
    drawn_hard = hard_rows / n_rows if n_rows else None
    tier_mix: dict[str, Any] = {
        "counts": dict(sorted(tier_counts.items())),
        "hard_share_asked": hs,
        "hard_share_drawn": drawn_hard,
    }
    if runs > 1:
        tier_mix["per_run"] = [dict(sorted(c.items())) for c in per_run_tiers]
    if (
        drawn_hard is not None
        and n_rows >= int(knobs["tier_mix_min_rows"])
        and drawn_hard < hs - float(knobs["tier_mix_tolerance"])
    ):
        engine.warnings.append(
            f"the drawn hard share {drawn_hard:.2f} is more than {knobs['tier_mix_tolerance']} below hard_share={hs} "
            "(advanced tier_mix_tolerance)"
        )
    ended_on_question = sum(1 for r in rows if r.get("ended_by") == "user_left")
    world_dump = _world_dump(world_options)
    p_second, p_later = patience_table(knobs["patience"])
    graded = [r for r in rows if r.get("reward") is not None]
    group_sizes = Counter(
        (r["scenario_id"], r.get("phrasing_index"), r["lineage"]["eval_run"]) for r in rows
    )
    report: dict[str, Any] = {
        "mode": mode,
        "budget": budget,
        "budget_total": budget * runs,
        "budget_per_run": budget,
        "runs": runs,
        "seed": run_seed,
        "phrasings": phrasings,
        "repeats": repeats,
        "repeat_policy": policy,
        "strategy": policy,
        "unique_situations": unique,
        "hard_share": hs,
        "fault_rate": fr,
        "situations": situations,
        "time_budget": time_budget,
        "until": until,
        "reproducible": bool(reproducible),
        "dimensions": list(DIMENSION_KEYS),
        "arm_weights": None,
        "arm_weights_note": (
            "no arm weights: each writer batch is the pending mutations of failing rows (at most "
            "writer_context_parents), then fresh draws; seeds from traces= run first"
        ),
        "arms": dict(sorted(Counter(str(r.get("arm")) for r in rows).items())),
        "tasks": tasks_info["tasks"],
        "tasks_info": tasks_info,
        "traces": trace_info["traces"],
        "traces_info": trace_info,
        "seeds": trace_info.get("seeds", 0),
        "grader": engine.grader_name,
        "simulator": "template",
        "writer_model": "template" if replay is None else sorted({t.writer_model for t in replay}),
        "agent_model": _agent_model_of(rows, agent_model),
        "user_model": "template" if any(r.get("user_model") for r in rows) else None,
        "spec": spec_name,
        "tools": [t["function"]["name"] for t in tool_list],
        "system_prompt_sha": prompt_sha(sp),
        "sampling": cfg.sampling,
        "timeout": float(timeout),
        "logprobs": logprobs,
        "turn_limits": {
            "avg_turns": int(knobs["avg_turns"]),
            "max_user_turns": int(knobs["avg_turns"]) // 2,
        },
        "knobs": _jsonable(knobs),
        "patience": {
            "level": knobs["patience"] if isinstance(knobs["patience"], str) else "table",
            "second": p_second,
            "later": p_later,
        },
        "user_temperature": knobs["user_temperature"],
        "world": world_dump,
        "world_note": (
            f"report['fault_rate'] ({fr}) is this run's rate; world['default_fault_rate'] "
            f"({world_dump.get('default_fault_rate')}) is the rate a fault plan with no rate of its own fires at"
        ),
        "stopped_because": engine.stop_reason,
        "stopped_because_per_run": [p["stopped_because"] for p in engine.per_run],
        "per_run": engine.per_run,
        "rows": n_rows,
        "rows_new": engine.new_rows,
        "rows_reused": engine.reused,
        "rows_graded": len(graded),
        "rollouts_lost": len(engine.lost),
        "rollouts_lost_by": dict(sorted(engine.lost_by.items())),
        "rollouts_abandoned": engine.abandoned,
        "scenarios": len({r["scenario_id"] for r in rows}),
        "group_sizes": dict(sorted(Counter(group_sizes.values()).items())),
        "search": {
            "tier_mix": tier_mix,
            "ended_on_question": ended_on_question,
            "coverage": len(engine.coverage),
            "mixed_rate": _mixed_rate(rows, float(knobs["smoothing_alpha"]), engine.thr),
            "dimension_counts": {
                key: dict(
                    sorted(
                        Counter(
                            str((r.get("scenario_dimensions") or {}).get(key)) for r in rows
                        ).items()
                    )
                )
                for key in DIMENSION_KEYS
            },
            "mutation_aims": dict(sorted(engine.mutation_aims.items())),
            "mutation_parents": dict(sorted(engine.mutation_kinds.items())),
            "mutate_graded_failures": engine.mutate_graded,
        },
        "knobs_not_read": sorted(set(knobs) - KNOBS_READ),
        "knobs_not_read_note": (
            "recorded and validated, but this offline engine has no part they steer "
            "(model-writer waves, tokens and restarts; the behaviour-gap search; the embedder)"
        ),
        "timings": {"total_s": elapsed, "rows_per_s": n_rows / elapsed if elapsed > 0 else None},
        "run_id": run_id,
    }
    if engine.stop_reason == "dead_agent":
        engine.warnings.append(
            f"the agent was called off after {len(engine.lost)} lost rollouts "
            f"({dict(engine.lost_by)}); first error: {engine.lost[0]['error'] if engine.lost else '?'}"
        )
    metadata = {
        "run_id": run_id,
        "model_version": report["agent_model"],
        "writer_model": report["writer_model"],
        "user_model": report["user_model"],
        "system_prompt_sha": prompt_sha(sp),
    }
    data = SimulationData(
        rows,
        tools=tool_list,
        system_prompt=sp,
        report=report,
        metadata=metadata,
        warnings=engine.warnings,
        degraded=[],
        lost=engine.lost,
    )
    if output is not None:
        data.save(output)
    if stream is not None:
        stream.close(remove=True)
    return data


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _init_params(cls: Any) -> set[str]:
    try:
        return set(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return set()


def _world_kwargs(world_cls: Any, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """The person-model knobs, passed to the world when its constructor takes them."""
    accepted = _init_params(world_cls)
    candidates = {
        "patience": knobs["patience"],
        "avg_turns": int(knobs["avg_turns"]),
        "user_temperature": knobs["user_temperature"],
    }
    return {k: v for k, v in candidates.items() if k in accepted}


def _user_exec_world(world_cls: Any, execute: Callable[[str, dict[str, Any]], Any]) -> Any:
    """A world whose tool calls go to the user's ``execute``: no fault schedule, the simulated
    person (``ask_user``) still answers questions."""

    class UserExecWorld(world_cls):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["fault_rate"] = 0.0
            super().__init__(*args, **kwargs)
            self._user_calls = 0

        def execute(
            self,
            name: str,
            arguments: Mapping[str, Any] | None = None,
            *,
            call_id: str | None = None,
        ) -> dict[str, Any]:
            self._user_calls += 1
            args = dict(arguments) if isinstance(arguments, Mapping) else {"_raw": arguments}
            step: dict[str, Any] = {
                "kind": "tool",
                "tool_call_id": call_id or f"call_{self._user_calls}",
                "name": name,
                "arguments": args,
                "result": None,
                "status": "ok",
                "fault": None,
            }
            try:
                step["result"] = execute(name, dict(args))
            except Exception as exc:  # noqa: BLE001 - the user's world failing is a tool error
                step["result"] = {"error": type(exc).__name__, "message": str(exc)}
                step["status"] = "error"
            self.steps.append(step)
            return step

    UserExecWorld.__name__ = f"UserExec{world_cls.__name__}"
    return UserExecWorld


def _world_options(world_mod: Any, overrides: Mapping[str, Any]) -> Any:
    """``WorldOptions(**overrides)``; a typo is a ValueError naming the fields."""
    opts_cls = world_mod.WorldOptions
    fields = sorted(getattr(opts_cls, "model_fields", {}))
    unknown = [k for k in overrides if fields and k not in fields]
    if unknown:
        close = difflib.get_close_matches(unknown[0], fields, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"advanced['world'] has unknown field {unknown[0]!r}.{hint} WorldOptions fields: {', '.join(fields)}"
        )
    try:
        return opts_cls(**dict(overrides))
    except Exception as exc:  # pydantic ValidationError: name the field and the fix
        raise ValueError(f"advanced['world'] is invalid: {exc}") from exc


def _world_dump(options: Any) -> dict[str, Any]:
    """The resolved ``WorldOptions`` as plain JSON (fault builders by mode name only)."""
    if not hasattr(options, "model_dump"):
        return dict(options or {})
    out = options.model_dump(mode="python", exclude={"fault_builders"})
    out = json.loads(json.dumps(out, default=list))
    out["fault_builders"] = sorted(getattr(options, "fault_builders", {}) or {})
    return out


def _agent_model_of(rows: list[dict[str, Any]], fallback: str) -> str:
    """The model the rows say answered (what the agent reported), else the agent's name."""
    versions = sorted({str(r.get("model_version")) for r in rows if r.get("model_version")})
    if len(versions) == 1:
        return versions[0]
    return ", ".join(versions) if versions else fallback


def _mixed_rate(rows: list[dict[str, Any]], alpha: float, thr: float) -> dict[str, Any]:
    """Share of repeat groups (same ask, same run, 2+ rollouts) that split, Laplace-smoothed
    ``(mixed + a) / (groups + 2a)``. A group splits on reward when graded, else on behaviour
    signature."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        key = (
            r.get("scenario_id"),
            r.get("phrasing_index"),
            (r.get("lineage") or {}).get("eval_run"),
        )
        groups.setdefault(key, []).append(r)
    n = mixed = 0
    for g in groups.values():
        if len(g) < 2:
            continue
        n += 1
        rewards = [r["reward"] for r in g if r.get("reward") is not None]
        if rewards:
            mixed += any(x >= thr for x in rewards) and any(x < thr for x in rewards)
        else:
            mixed += len({r.get("behavior_signature") for r in g}) > 1
    return {
        "groups": n,
        "mixed": mixed,
        "raw": mixed / n if n else None,
        "smoothed": (mixed + alpha) / (n + 2 * alpha) if n or alpha else None,
        "alpha": alpha,
    }


class _Stream:
    """Rows streamed to ``<output>.partial`` while the run goes, flushed every
    ``flush_report_rows`` rows or ``flush_report_s`` seconds, so a crash loses at most that
    much; the complete file is then written atomically under ``output``."""

    def __init__(self, output: Path, knobs: Mapping[str, Any]) -> None:
        from wai_exp.rows.jsonl import dumps_row

        self._dumps = dumps_row
        self.path = output.with_name(output.name + ".partial")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("w", encoding="utf-8")
        self._pending: list[str] = []
        self._every_rows = int(knobs["flush_report_rows"])
        self._every_s = float(knobs["flush_report_s"])
        self._last = time.monotonic()

    def add(self, row: dict[str, Any]) -> None:
        self._pending.append(self._dumps(row) + "\n")
        now = time.monotonic()
        if len(self._pending) >= self._every_rows or now - self._last >= self._every_s:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        if self._pending:
            self._fh.write("".join(self._pending))
            self._fh.flush()
            self._pending.clear()
        self._last = time.monotonic() if now is None else now

    def close(self, *, remove: bool) -> None:
        self.flush()
        self._fh.close()
        if remove:
            self.path.unlink(missing_ok=True)
