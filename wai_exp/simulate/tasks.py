"""Asks and where they come from: a ``Task`` is one ask (a situation's phrasing) with its
rollouts, a ``Plan`` one rollout of it, a ``SituationSource`` the asks of a run in a fixed
order, and ``MutationQueue`` the sibling asks of rows that failed."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from wai_exp.simulate.ids import stable_hash


@dataclass
class Task:
    """One ask: a situation's phrasing, and the rollouts planned and landed for it."""

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
    #: the rate the ask's planned fault fires at, as a replayed row recorded it; None: the
    #: run's ``fault_rate``
    fault_rate: float | None = None
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
class Plan:
    """One rollout to run: its ask, ids and seed, and why the planner chose it."""

    task: Task
    rollout_index: int
    eval_run: int
    seed: int
    rollout_id: str
    reason: str


class SituationSource:
    """Tasks in a fixed order: drawn lazily from the writer, or a replayed list.

    A drawing source serves the ``seeds`` first (failing asks mined from ``traces=``), then
    writer batches of ``batch`` situations: fresh draws (``aim``-ed at hot trace regions when
    given). The ``mutator``'s siblings of failing rows jump the queue: each ask opened takes
    a pending sibling first, so a failure that lands steers the very next ask (the engine
    plans continuously, and a batch may have been drawn long before the failure landed).
    """

    def __init__(
        self,
        *,
        writer: Any = None,
        replay: list[Task] | None = None,
        phrasings: int,
        k: int,
        max_situations: int | None,
        batch: int,
        aim: Callable[[list[Any], int], list[Any]] | None = None,
        oversample: int = 1,
        writer_params: dict[str, Any] | None = None,
        seeds: list[Task] | None = None,
        mutator: Callable[[int], list[tuple[Any, dict[str, Any]]]] | None = None,
        unique: bool = False,
        bounce: Callable[[int], Any] | None = None,
        bounce_limit: int = 0,
        bounce_stride: int = 1,
    ) -> None:
        self.writer = writer
        #: unique situations only: a template draw that repeats a situation already drawn in
        #: this run (same cell, facts and words) is rejected, and a short batch bounces
        self.unique = unique
        self.bounce = bounce
        self.bounce_limit = bounce_limit
        self.bounce_stride = bounce_stride
        self._bouncers: dict[int, Any] = {}
        self._seen: set[str] = set()
        #: template rounds: repeats rejected, extra rounds tried, short batches accepted
        self.stats: Counter[str] = Counter()
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
        self.tasks: list[Task] = []
        self._pos = 0
        self.exhausted_by = "situations_exhausted" if replay is None else "tasks_exhausted"

    def may_block(self) -> bool:
        """Whether ``next_task`` may wait on a model writer: no drawn task is left and the
        writer's pool is empty, so the draw waits for a wave to come back."""
        if self.replay is not None or self.seeds or self._pos < len(self.tasks):
            return False
        may_block = getattr(self.writer, "may_block", None)
        return bool(may_block is not None and may_block())

    def poll_writer(self) -> None:
        """Collect what a model writer has written, launching waves when none is in flight
        (never waits)."""
        self.writer.poll()

    def wait_for_writer(self) -> bool:
        """Block until a model writer's oldest wave is back; False when none is in flight or
        the clock ran out. Changes no state, so the engine runs it in a thread."""
        return bool(self.writer.wait_for_wave())

    def next_task(self) -> Task | None:
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
            self.tasks.append(task)
            self._pos += 1
            return task
        if self.mutator is not None and self._room():
            # A sibling of a failing row goes ahead of the fresh asks already drawn.
            for sit, lineage in self.mutator(1):
                self.tasks[self._pos : self._pos] = self._tasks_for(sit, lineage)
        if self._pos >= len(self.tasks) and not self._draw():
            return None
        task = self.tasks[self._pos]
        self._pos += 1
        return task

    def _room(self) -> bool:
        return self.max_situations is None or self.situations_drawn < self.max_situations

    def _tasks_for(self, sit: Any, lineage: dict[str, Any]) -> list[Task]:
        """The tasks (one per phrasing) of one drawn situation."""
        self.situations_drawn += 1
        return [
            Task(
                sit,
                p,
                str(text),
                str(lineage.get("model") or "template"),
                self.k,
                writer_lineage=lineage,
                arm="mutation" if "focus" in lineage else "fresh",
            )
            for p, text in enumerate(tuple(sit.phrasings)[: self.phrasings])
        ]

    def _draw(self) -> bool:
        want = self.batch
        if self.max_situations is not None:
            want = min(want, self.max_situations - self.situations_drawn)
            if want <= 0:
                return False
        drawn: list[tuple[Any, dict[str, Any]]] = []
        plain = want
        if plain > 0 and hasattr(self.writer, "take"):
            # A model writer hands out what it wrote with its own lineage (model, wave, asks).
            pairs = self.writer.take(plain * (self.oversample if self.aim is not None else 1))
            if self.aim is not None:
                by_id = {id(sit): lin for sit, lin in pairs}
                pairs = [(sit, by_id[id(sit)]) for sit in self.aim([p[0] for p in pairs], plain)]
            drawn += pairs
            if not drawn and getattr(self.writer, "stop_reason", None):
                self.exhausted_by = str(self.writer.stop_reason)
        elif plain > 0:
            drawn += self._template_round(self.writer, self.writer_params, plain)
            bounced = 0
            while len(drawn) < plain and self.bounce is not None and bounced < self.bounce_limit:
                # A batch short of repeats: another template round, from a writer whose seed
                # steps by the stride, before the short batch is accepted.
                bounced += 1
                writer, params = self._bouncer(bounced)
                drawn += self._template_round(writer, params, plain - len(drawn))
            self.stats["bounce_rounds"] += bounced
            if len(drawn) < plain:
                self.stats["short_batches_accepted"] += 1
        if not drawn:
            return False
        for sit, lineage in drawn:
            self.tasks.extend(self._tasks_for(sit, lineage))
        return True

    def _template_round(
        self, writer: Any, params: dict[str, Any], want: int
    ) -> list[tuple[Any, dict[str, Any]]]:
        """Up to ``want`` situations of one template round, each with the lineage that
        rebuilds it (``params`` plus the writer's draw index); under ``unique`` a repeat of a
        situation this run already drew is rejected (counted in ``stats``)."""
        base = int(getattr(writer, "drawn", 0))
        # Draw more than needed under traces= and keep the share that matches the hot regions.
        pool = writer.next_batch(want * self.oversample if self.aim is not None else want)
        # The writer's draw index of each situation: with the writer's own parameters it is
        # all a replay needs to rebuild the situation (entities included) without writing the
        # world's records onto the row.
        index = {id(sit): base + i for i, sit in enumerate(pool)}
        if self.unique:
            fresh, keys = [], set()
            for sit in pool:
                key = _content_key(sit.scenario_id)
                if key in self._seen or key in keys:
                    self.stats["repeats_rejected"] += 1
                else:
                    fresh.append(sit)
                    keys.add(key)
            pool = fresh
        kept = self.aim(pool, want) if self.aim is not None else pool[:want]
        if self.unique:
            self._seen.update(_content_key(sit.scenario_id) for sit in kept)
        return [(sit, {**params, "index": index[id(sit)]}) for sit in kept]

    def _bouncer(self, j: int) -> tuple[Any, dict[str, Any]]:
        """The writer of bounce round ``j`` (seed + j x stride) and its lineage parameters;
        kept for the run, so a later short batch draws on where it left off."""
        seed = int(self.writer_params.get("seed", 0)) + j * self.bounce_stride
        if j not in self._bouncers:
            assert self.bounce is not None
            self._bouncers[j] = self.bounce(seed)
        return self._bouncers[j], {**self.writer_params, "seed": seed}


def _content_key(scenario_id: str) -> str:
    """A template situation's content hash: its id without the ``-2``/``-3`` suffix one
    writer gives an exact repeat of its own draws."""
    return "-".join(str(scenario_id).split("-")[:2])


class MutationQueue:
    """Rows that failed (a fired tool fault, or a graded failure when ``mutate_graded`` is
    on) become parents; each gives the next ask opened, a sibling in the same cell
    (``tool`` x ``tool_condition``). At most ``maxlen`` parents wait (the oldest drop)."""

    def __init__(
        self,
        *,
        maxlen: int,
        mutate_graded: bool,
        threshold: float,
        seed: int,
        make_writer: Callable[..., Any],
        writer_params: dict[str, Any],
    ) -> None:
        self.parents: deque[tuple[dict[str, Any], str]] = deque(maxlen=max(0, maxlen))
        self.mutate_graded = mutate_graded
        self.thr = threshold
        self.seed = seed
        self.make_writer = make_writer
        self.writer_params = writer_params
        self.aims: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        #: called with every landed row first (a model writer's behaviour-gap search)
        self.observer: Callable[[dict[str, Any]], Any] | None = None

    def note(self, row: dict[str, Any]) -> None:
        """Queue ``row``'s cell as a parent when the row failed (and show the row to the
        observer, when there is one)."""
        if self.observer is not None:
            self.observer(row)
        if not self.parents.maxlen:
            return
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

    def take(self, limit: int) -> list[tuple[Any, dict[str, Any]]]:
        """Sibling situations for the pending parents (at most ``limit``), with the writer
        lineage that rebuilds each one: a writer of its own seed drawing once with the focus."""
        out: list[tuple[Any, dict[str, Any]]] = []
        while self.parents and len(out) < limit:
            focus, kind = self.parents.popleft()
            mseed = stable_hash(self.seed, "mutation", sum(self.kinds.values()))
            writer = self.make_writer(mseed, unique=False)
            if hasattr(writer, "take"):
                # A model writer writes the sibling itself, with its own lineage.
                pairs = writer.take(1, focus=focus)
                if not pairs:
                    # Still being written: the parent waits for a later ask.
                    self.parents.appendleft((focus, kind))
                    break
                sit, lineage = pairs[0][0], {**pairs[0][1], "focus": focus, "parent": kind}
            else:
                sit = writer.next_situation(focus=focus)
                lineage = {
                    **self.writer_params,
                    "seed": mseed,
                    "unique": False,
                    "index": 0,
                    "focus": focus,
                    "parent": kind,
                }
            self.kinds[kind] += 1
            self.aims[f"{focus['tool']}/{focus['tool_condition']}"] += 1
            out.append((sit, lineage))
        return out


def group_split(rows: list[dict[str, Any]], thr: float, *, by_reward: bool = True) -> bool:
    """True when a repeat group split: rewards on both sides of ``thr`` when any row is
    graded (and ``by_reward``), else more than one behaviour signature."""
    return split_of(
        [r.get("reward") for r in rows],
        [r.get("behavior_signature") for r in rows],
        thr,
        by_reward=by_reward,
    )


def split_of(
    rewards: Sequence[Any], signatures: Sequence[Any], thr: float, *, by_reward: bool = True
) -> bool:
    """``group_split`` of a group given as its rows' rewards (None: unjudged) and behaviour
    signatures."""
    if by_reward:
        judged = [x for x in rewards if x is not None]
        if judged:
            return any(x >= thr for x in judged) and any(x < thr for x in judged)
    return len(set(signatures)) > 1
