"""One rollout: build its world, call the agent, and turn what came back into a schema-v1 row
(steps scrubbed and completed, faults, usage, lineage, behaviour signature, the in-memory
``privileged`` block), graded when ``grader=`` is given.

An exception inside the agent is a lost rollout (``Outcome.lost``), never a crash; a judge
error leaves the row unjudged.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wai_exp.llm.concurrency import CALL_PRIORITY
from wai_exp.rows.export import PERSON_KNOBS, world_dials
from wai_exp.rows.model import SCHEMA_VERSION, ended_by_term, messages_from_steps
from wai_exp.rows.reader import read_steps
from wai_exp.rows.scrub import carries_never_shipped, scrub
from wai_exp.rows.text import repair_row
from wai_exp.simulate.agent_setup import ResolvedAgent, UserAgent, callable_name
from wai_exp.simulate.agent_world import PARALLEL, AgentWorld
from wai_exp.simulate.ids import prompt_sha
from wai_exp.simulate.lost import category_of
from wai_exp.simulate.modes import Config
from wai_exp.simulate.tasks import Plan
from wai_exp.simulate.world import HUMAN_TOOL_NAMES
from wai_exp.simulate.world_setup import WorldSetup


@dataclass
class Outcome:
    """A finished rollout: its ``row`` and wall seconds, or the ``lost`` record (no row)."""

    row: dict[str, Any] | None = None
    lost: dict[str, Any] | None = None
    seconds: float = 0.0


class RolloutRunner:
    """Runs single rollouts for one ``simulate()`` call; holds nothing that changes per
    rollout, so concurrent rollouts share it safely."""

    def __init__(
        self,
        cfg: Config,
        *,
        agent: ResolvedAgent,
        tools: list[dict[str, Any]],
        system_prompt: str | None,
        world: WorldSetup,
        user_execute: bool,
        grader: Any,
        run_id: str,
        llm_grader: Any = None,
    ) -> None:
        from wai_exp.score.grade.checklist import privileged_context
        from wai_exp.score.grade.grading import behavior_signature, conduct_grade
        from wai_exp.simulate.agents import RolloutContext, current_rollout

        self.cfg = cfg
        self.agent = agent.fn
        self.agent_model = agent.model
        self.agent_is_backend = agent.is_backend
        self.tools = tools
        self.tool_names = [t["function"]["name"] for t in tools]
        self.system_prompt = system_prompt
        self.sp_sha = prompt_sha(system_prompt)
        self.sp_head = (system_prompt or "")[:120]
        self.sp_chars = len(system_prompt or "")
        self.world_setup = world
        #: with ``execute=`` the user's world answers tools: no fault schedule to record
        self.user_execute = user_execute
        # What a row says it was played against, so a later run reading it (simulate.rows)
        # publishes it under this world, not its own. A fault builder (a callable, from the
        # Python API) by its name. One dict the run's rows share, read-only: a copy per row
        # held ~2.5 KB of it (250 MB of the stage's memory at 100,000 rl_round rows).
        self.world_dials = json.loads(
            json.dumps(
                world_dials(
                    cfg.knobs.world, {k: getattr(cfg.knobs, k) for k in PERSON_KNOBS}, user_execute
                ),
                sort_keys=True,
                default=callable_name,
            )
        )
        self.grader = grader
        self.grader_name = None if grader is None else callable_name(grader)
        model = getattr(grader, "model", None)
        #: the judge's model when ``grader=`` is model-backed (``judge_meta.model``)
        self.grader_model = model if isinstance(model, str) else None
        self.run_id = run_id
        #: ``simulate(llm_grade=...)``: stamps ``llm_reward`` beside the reward
        self.llm_grader = llm_grader
        #: who played the person in follow-ups: the user model's name, else the template
        self.user_model = "template"
        if cfg.user_model:
            from wai_exp.simulate.model_calls import model_name

            self.user_model = model_name(cfg.user_model)
        #: in a ``simulate.workers`` worker: its own model-server limits (``ServerLimits``),
        #: reported to the stage's process when the worker exits
        self.server_limits: Any = None
        self._signature = behavior_signature
        self._privileged = privileged_context
        self._conduct = conduct_grade if cfg.grade else None
        self._normalize: Any = None
        if grader is not None:
            from wai_exp.score.judges.judging import normalize_judge_result

            self._normalize = normalize_judge_result
        self._current = current_rollout
        self._context = RolloutContext
        #: a user's callable (``UserAgent``) wraps the world itself; our own agents get
        #: the direct facade
        self._serves_world = isinstance(agent.fn, UserAgent)
        self._facade = AgentWorld.direct
        #: world=mcp with a reset or state tool: one rollout at a time holds its server, from
        #: the reset to the state read, so no rollout starts in (or records) another's state
        self.exclusive = world.exclusive and cfg.knobs.concurrency > 1
        #: the rollouts that waited for the server: only an agent that yields mid-rollout (a
        #: model backend, a user's callable) overlaps; the scripted agent's run is atomic
        self.serialized = self.exclusive and (agent.is_backend or self._serves_world)
        self._turn: asyncio.Lock | None = None

    async def run(self, plan: Plan) -> Outcome:
        """Run ``plan``'s rollout; an agent error or timeout comes back as ``Outcome.lost``."""
        if not self.exclusive:
            return await self._run(plan)
        if self._turn is None:  # made on the running loop
            self._turn = asyncio.Lock()
        async with self._turn:
            return await self._run(plan)

    async def _run(self, plan: Plan) -> Outcome:
        task = plan.task
        t_start = time.monotonic()
        token = None
        world = None
        # The oldest rollout's next model call goes first when calls wait for a slot at the
        # server's adaptive limit, so rollouts finish rather than all advance a turn.
        priority = CALL_PRIORITY.set(t_start)
        try:
            world = self._world(plan)
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
                # Never the world itself: it holds the answer key (``agent_world``). A
                # user's callable gets a facade its ``UserAgent`` serves across threads.
                world=world if self._serves_world else self._facade(world),
                sampling=self.cfg.sampling,
            )
            if inspect.isawaitable(out):
                if self.cfg.timeout and not self.agent_is_backend:
                    # A model backend bounds each of its completions itself (the spec's
                    # limit is per completion); a callable's one call is its completion.
                    try:
                        out = await asyncio.wait_for(out, timeout=self.cfg.timeout)
                    except TimeoutError as exc:
                        raise TimeoutError(
                            f"the agent did not return within timeout={self.cfg.timeout:g} s"
                        ) from exc
                else:
                    out = await out
            if not isinstance(out, Mapping):
                raise TypeError(
                    f"the agent returned {type(out).__name__}; it must return a dict with steps and final_text"
                )
            if out.get("steps"):
                # Steps in any shape the row reader accepts become internal steps; an
                # unreadable shape loses the rollout with the reader's message.
                steps = read_steps({"prompt": task.prompt, "steps": out["steps"]})[1]
                out = {**out, "steps": steps}
        except Exception as exc:  # noqa: BLE001 - a lost rollout is data, not a crash
            return Outcome(lost=self.lost_record(plan, exc))
        finally:
            CALL_PRIORITY.reset(priority)
            if token is not None:
                self._current.reset(token)
        seconds = time.monotonic() - t_start
        try:
            # Text from the model or a tool made writable here, at the edge: one lone
            # surrogate must not fail the row writer (and the stage) hours later.
            row = repair_row(self.row(plan, out, world, seconds))
            if self.grader is not None:
                await self.grade(row)
            if self.llm_grader is not None:
                await self.llm_grader.grade(row)
        except Exception as exc:  # noqa: BLE001 - one odd rollout is lost, never the stage
            return Outcome(lost=self.lost_record(plan, exc, "building the row"))
        return Outcome(row=row, seconds=seconds)

    def lost_record(self, plan: Plan, exc: BaseException, during: str = "") -> dict[str, Any]:
        """The record of a lost rollout: which one, the error type and message."""
        etype = "timeout" if isinstance(exc, asyncio.TimeoutError) else type(exc).__name__
        where = f" ({during})" if during else ""
        record = {
            "rollout_id": plan.rollout_id,
            "scenario_id": plan.task.scenario_id,
            "prompt": plan.task.prompt,
            "rollout_index": plan.rollout_index,
            "eval_run": plan.eval_run,
            # the ask's category and why it was planned: how pass@k counts it (lost.py)
            "category": category_of(getattr(plan.task.situation, "dims", None)),
            "selection_reason": plan.reason,
            "error_type": etype,
            "error": f"{etype}{where}: {exc}"[:2000],
        }
        status = getattr(exc, "status", None)
        if isinstance(status, int):
            record["status"] = status  # the HTTP status a model server answered with
        return record

    def _world(self, plan: Plan) -> Any:
        ws = self.world_setup
        rate = plan.task.fault_rate
        return ws.cls(
            plan.task.situation,
            self.tools,
            fault_rate=self.cfg.fault_rate if rate is None else rate,
            options=ws.options,
            seed=plan.seed,
            **ws.kwargs,
        )

    def row(self, plan: Plan, out: Mapping[str, Any], world: Any, seconds: float) -> dict[str, Any]:
        """The schema-v1 row of a finished rollout (``privileged`` included, in memory)."""
        task = plan.task
        dims = dict(task.situation.dims)
        final_text = str(out.get("final_text") or "")
        steps = _clean_steps(
            out.get("steps") or list(getattr(world, "steps", []) or []), final_text
        )
        if self.user_execute:
            faults: dict[str, Any] = {"planned": None, "rate": 0.0, "fired": []}
        else:
            faults = faults_of(world, dims, self.cfg.fault_rate)
        # The person took part: a follow-up line, or an answer to a human tool (ask_user ...).
        user_turns = any(
            s.get("kind") == "user"
            or (s.get("kind") == "tool" and s.get("name") in HUMAN_TOOL_NAMES)
            for s in steps
        )
        model_version = out.get("model_version") or self.agent_model
        sampling = out.get("sampling")
        if sampling is None and not self.agent_is_backend:
            sampling = self.cfg.sampling
        usage = out.get("usage")
        if usage is None:
            usage = usage_from_steps(steps)
        scored = [s for s in steps if s.get("kind") == "assistant" and s.get("logprob") is not None]
        raw_end = out.get("ended_by") or getattr(world, "ended_by", None)
        ended_by = ended_by_term(raw_end)
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
            # A world that observes its own state says so (world=mcp); else the plan's.
            "world_state": (
                world.observed_state()
                if hasattr(world, "observed_state")
                else dims.get("world_state")
            ),
            "faults": faults,
            # What the mock world recorded as changed (None: a user's own world, unseen).
            "world_changes": _world_changes(world, self.user_execute),
            "sampling": dict(sampling) if sampling is not None else None,
            # An agent may name its policy (weights plus what sets its moves); else its model.
            "policy_version": f"{out.get('policy_version') or model_version}@{self.sp_sha[:12]}",
            "model_version": model_version,
            "writer_model": task.writer_model,
            "lineage": self._lineage(plan),
            "markers": {},
            "scenario_dimensions": dims,
            "behavior_signature": None,
            "arm": task.arm,
            "selection_reason": plan.reason,
            "seed": plan.seed,
            "ended_by": ended_by,
            "usage": usage,
            "error": out.get("error"),
            "timing": {"rollout_s": round(seconds, 6)},
        }
        if scored:
            # Row totals over the turns that carry one: what a trainer's importance ratio reads.
            row["logprob"] = float(sum(float(s["logprob"]) for s in scored))
            row["n_tokens"] = int(sum(int(s.get("n_tokens") or 0) for s in scored))
        if user_turns:
            # Absent, not null, when the agent took a single message (the reference's Output).
            row["user_model"] = self.user_model
        if raw_end is not None and str(raw_end) != ended_by:
            row["ended_by_raw"] = str(raw_end)  # what the agent said, before the vocabulary
        if self.world_setup.server is not None:
            # A world=mcp server's tools are named by no spec: the row keeps them, so
            # publish offers the policy the tools it was played with, not the shipped desk's.
            row["tools"] = [dict(t) for t in self.tools]
        row["behavior_signature"] = self._signature(row)
        if self._conduct is not None:
            verdict = self._conduct(row, self.tool_names)
            stamp_verdict(
                row,
                reward=verdict["reward"],
                reason=verdict["reason"],
                status="ok",
                judge_name="conduct_grade",
                meta={"checks": verdict["checks"], "flags": verdict["flags"]},
                label_source="conduct",
            )
        row["privileged"] = self._privileged(dims, faults)
        return row

    def _lineage(self, plan: Plan) -> dict[str, Any]:
        task = plan.task
        if task.replayed_from is not None:
            replayed_from: str | None = task.replayed_from
        else:
            replayed_from = self.run_id if plan.eval_run > 0 else None
        return {
            "run_id": self.run_id,
            "source": "simulate",
            "system_prompt_sha": self.sp_sha,
            "system_prompt_head": self.sp_head,
            "system_prompt_chars": self.sp_chars,
            "eval_run": plan.eval_run,
            "replayed": task.replayed_from is not None or plan.eval_run > 0,
            "replayed_from_run": replayed_from,
            "writer": dict(task.writer_lineage) if task.writer_lineage else None,
            "world": self.world_dials,
        }

    def reuse(self, done: dict[str, Any]) -> dict[str, Any]:
        """A row a crashed attempt finished (``done_rows``), with ``privileged`` rebuilt."""
        row = dict(done)
        if "privileged" not in row:
            row["privileged"] = self._privileged(
                row.get("scenario_dimensions") or {}, row.get("faults")
            )
        return row

    async def grade(self, row: dict[str, Any]) -> None:
        """Run ``grader=`` on the landed row; a judge error leaves it unjudged (never a fail)."""
        meta: dict[str, Any] | None = None
        markers: Mapping[str, Any] | None = None
        try:
            # A model judge's ``acall`` awaits its HTTP call on this loop, not blocking it.
            acall = getattr(self.grader, "acall", None)
            verdict = acall(row) if inspect.iscoroutinefunction(acall) else self.grader(row)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            norm = self._normalize(verdict)
            reward, reason = norm.get("reward"), norm.get("reason")
            status = str(norm.get("judge_status") or "ok")
            meta, markers = norm.get("judge_meta"), norm.get("markers")
        except Exception as exc:  # noqa: BLE001 - a judge error is an unjudged row, never a failure
            reward, reason, status = None, f"{type(exc).__name__}: {exc}"[:500], "error"
        full_meta: dict[str, Any] = {"model": self.grader_model, "version": None}
        full_meta.update(meta or {})
        stamp_verdict(
            row,
            reward=reward,
            reason=reason,
            status=status,
            judge_name=self.grader_name,
            meta=full_meta,
            label_source=label_source_of(full_meta),
        )
        if markers:
            row["markers"] = {**row["markers"], **dict(markers)}


def _world_changes(world: Any, user_execute: bool) -> list[dict[str, Any]] | None:
    """The mock world's record of changes (copies), or None when the world keeps none."""
    changes = None if user_execute else getattr(world, "changes", None)
    return [dict(c) for c in changes] if isinstance(changes, list) else None


def label_source_of(judge_meta: Mapping[str, Any]) -> str:
    """``"model"`` when the judge names a model (``judge_meta.model``), else ``"judge"``."""
    return "model" if judge_meta.get("model") else "judge"


def stamp_verdict(
    row: dict[str, Any],
    *,
    reward: Any,
    reason: Any,
    status: str,
    judge_name: str | None,
    meta: dict[str, Any],
    label_source: str,
) -> None:
    """Write one verdict onto ``row``: ``reward``, ``reason``, ``judge_name``,
    ``judge_status``, ``judge_meta`` and ``label_source`` (who produced the label)."""
    row["reward"] = reward
    row["reason"] = reason
    row["judge_name"] = judge_name
    row["judge_status"] = status
    row["judge_meta"] = meta
    row["label_source"] = label_source


def _clean_steps(steps: Any, final_text: str) -> list[dict[str, Any]]:
    """Steps scrubbed, then completed into a valid transcript. Scrubbed before ``messages``
    is rebuilt from them: a privileged block inside a tool result must not reach the
    transcript as text either."""
    steps = list(steps)
    steps = scrub(steps) if carries_never_shipped(steps) else [dict(x) for x in steps]
    return complete_steps(steps, final_text)


def faults_of(world: Any, dims: Mapping[str, Any], rate: float) -> dict[str, Any]:
    """The row's ``faults``: what the world planned, the rate it fired at, what fired."""
    if hasattr(world, "fault_plan"):
        planned = world.fault_plan
        rate = getattr(world, "fault_rate", rate)
    else:
        cond = dims.get("tool_condition")
        planned = {"tool": dims.get("tool"), "mode": cond} if cond and cond != "ok" else None
    fired = [dict(f) for f in (getattr(world, "fired", None) or [])]
    return {"planned": dict(planned) if planned else None, "rate": float(rate), "fired": fired}


def complete_steps(steps: list[dict[str, Any]], final_text: str) -> list[dict[str, Any]]:
    """Steps that rebuild a valid chat transcript.

    An agent that only called ``world.execute`` returns no assistant steps; the world's
    record then holds tool steps with no assistant turn that requested them. Each such tool
    step gets an assistant turn of its own: ``world.execute`` hands its answer back before
    the agent can make its next call, so the calls were made one after another, each having
    seen the results before it (the checklist reads calls requested in one assistant turn
    as made together, like a model's parallel tool calls). The exception is a call the
    world's server marked as made while the one before it was unanswered (an async agent's
    ``asyncio.gather`` over ``aexecute``): it joins that call's turn. A final reply missing
    from the steps is appended as the last assistant turn. Well-formed steps come back
    unchanged.
    """
    out: list[dict[str, Any]] = []
    called: set[Any] = set()
    turn: dict[str, Any] | None = None  # the turn made up for the previous step, if any

    for step in steps:
        kind = step.get("kind")
        parallel = bool(step.pop(PARALLEL, False))
        if kind == "tool" and step.get("tool_call_id") not in called:
            call = {
                "id": step.get("tool_call_id"),
                "name": step.get("name"),
                "arguments": step.get("arguments") or {},
            }
            if parallel and turn is not None:
                turn["tool_calls"].append(call)
            else:
                turn = {"kind": "assistant", "content": "", "tool_calls": [call]}
                out.append(turn)
            out.append(step)
            continue
        turn = None
        if kind == "assistant":
            called.update(c.get("id") for c in step.get("tool_calls") or [])
        out.append(step)
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


def usage_from_steps(steps: list[dict[str, Any]]) -> dict[str, int] | None:
    """Token totals summed over the steps that report them, or None when none do."""
    inp = [n for s in steps if (n := s.get("input_tokens")) is not None]
    outp = [n for s in steps if (n := s.get("output_tokens")) is not None]
    if not inp and not outp:
        return None
    return {"input_tokens": int(sum(inp)), "output_tokens": int(sum(outp))}
