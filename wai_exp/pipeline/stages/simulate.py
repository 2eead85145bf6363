"""Stage ``simulate``: run ``simulate()`` with the config's agent, world, knobs and seed.

Crash safety: every finished row is appended (flushed) to the stage's ``partial.jsonl`` in its
cache entry through ``simulate(on_row=...)``. When a run dies mid-stage (a crash, Ctrl-C, a
kill), re-running the identical command finds that file at the same cache key and passes its
rows as ``simulate(done_rows=...)``: the engine skips them by ``rollout_id`` and produces the
rest, so the stage completes with the same rows and no duplicates. The file is read as bytes
(``wai_exp.rows.partial``): a torn tail is cut off and counted, a row that no longer matches
the hash recorded when it landed is simulated again, and a file damaged mid-way is refused
before any work, naming the lines to delete. A row the disk refuses to store (a full disk)
stops the stage, naming the disk, instead of counting every later rollout as lost.

Params (``pipeline.stages.<name>.params``) override single keys of the ``simulate`` section,
and ``params.agent`` is laid over the ``agent`` section, so one pipeline can simulate two arms
(e.g. two skills) side by side; a ``params.agent`` naming another ``kind`` replaces the section
(``wai_exp.config.arms.arm_agent``). ``params.tasks_from: <stage>`` pins the task set to an upstream
simulate stage's rows (``simulate(tasks=...)``: same situations and prompts, its k), and
``params.seed_offset: N`` draws this stage's rollouts under ``seed + N``, so a second arm answers
the same tasks with its own draws.

Report: ``data.report()`` plus ``declared_tools``, ``resumed_rows`` and ``resume`` (what the
resume did with the partial file). Metrics: ``rows``,
``rows_resumed``, ``rollouts_lost``, ``situations``.
"""

from __future__ import annotations

import functools
import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from wai_exp.config.arms import arm_agent, resolved_arm_agent
from wai_exp.domain.plurals import counted
from wai_exp.pipeline import reads
from wai_exp.pipeline.registry import StageContext, StageResult, import_object, register
from wai_exp.pipeline.server_code import server_code
from wai_exp.rows.jsonl import RowAppender
from wai_exp.rows.keys import task_key
from wai_exp.rows.model import NOT_EXECUTED
from wai_exp.rows.partial import read_partial

#: simulate-section keys passed to simulate() as they are (None = leave the engine's default).
PASSED = (
    "mode",
    "budget",
    "situations",
    "repeats",
    "phrasings",
    "repeat_policy",
    "unique_situations",
    "fault_rate",
    "hard_share",
    "runs",
    "reproducible",
    "time_budget",
    "until",
    "timeout",
    "logprobs",
    "simulator",
    "user_model",
    "sampling",
    "writer_structured_output",
    "lost_as",
)


def llm_grade_value(config: dict[str, Any], params: dict[str, Any] | None = None) -> Any:
    """What ``simulate(llm_grade=)`` gets: ``simulate.llm_grade`` as a spec string when it
    names one; for ``true``, ``judge.model`` when the judge is a model judge with a model,
    else ``WAI_EXP_JUDGE`` (resolved here, so the stage's cache key can carry it); False
    when off. Never raises (the engine validates the spec)."""
    import os

    sim = {**(config.get("simulate") or {}), **(params or {})}
    value = sim.get("llm_grade")
    if value is not True:
        return value or False
    from wai_exp.domain.judges import is_model_judge

    judge = config.get("judge") or {}
    if is_model_judge(judge) and judge.get("model"):
        return str(judge["model"])
    return os.environ.get("WAI_EXP_JUDGE") or True


def build_agent(agent_cfg: dict[str, Any], seed: int, timeout: float | None = None) -> Any:
    """The agent callable an ``agent`` config section describes; a model agent's limit per
    completion is the tighter of ``agent.timeout`` and ``timeout`` (``simulate.timeout``).

    Raises ``ValueError`` for a callable target that cannot be imported or an unknown kind.
    """
    from wai_exp.config import models

    kind = agent_cfg.get("kind", "scripted")
    if kind == "scripted":
        from wai_exp.simulate.agents.scripted import ScriptedAgent

        scripted = models.ScriptedAgent.model_validate({**agent_cfg, "kind": kind})
        skills = {k: v for k, v in scripted.skills.model_dump().items() if v is not None}
        return ScriptedAgent(
            skill=scripted.skill,
            skills=skills,
            model_version=scripted.model_version,
            spread=scripted.spread,
        )
    if kind == "callable":
        import inspect

        own = models.CallableAgent.model_validate(agent_cfg)
        target = import_object(own.target, "agent.target")
        if own.factory or inspect.isclass(target):
            # A class is never the agent itself (calling it builds an instance): like a
            # factory, it is called with agent.kwargs and the instance answers.
            return target(**own.kwargs)
        if not callable(target):
            raise ValueError(f"agent.target {own.target!r} is not callable")
        return target
    from wai_exp.llm.providers import PROVIDERS

    if kind in PROVIDERS:
        from wai_exp.simulate.agents.model_agent import ModelAgent
        from wai_exp.simulate.run_health import binding_timeout_knob

        served = models.ModelAgentConfig.model_validate(agent_cfg)
        spec = f"{kind}:{served.model}"
        if served.base_url:
            spec += f"@{served.base_url}"
        # agent.timeout and simulate.timeout both mean seconds per completion: the
        # tighter one is the limit, so neither is silently ignored; equal, both must rise.
        limits = [served.timeout, timeout]
        return ModelAgent(
            spec,
            api_key=served.api_key,
            timeout=min(float(t) for t in limits if t),
            timeout_knob=binding_timeout_knob(served.timeout, timeout),
            max_turns=int(served.max_turns),
            sampling={"temperature": served.temperature, "max_tokens": served.max_tokens},
        )
    raise ValueError(
        f"agent.kind {kind!r} is not one of scripted, callable, {', '.join(PROVIDERS)}"
    )


def grader_section(config: dict[str, Any], params: dict[str, Any] | None = None) -> dict | None:
    """The judge section ``simulate.grader`` names (None when unset): a judge's name reads
    the run's ``judge`` section when that is the same kind (so ``judge.model`` and the rest
    apply), else the shipped ``conf/judge/<name>.yaml`` (a registered judge without one:
    ``{kind: <name>}``); ``{_target_: ...}`` is a callable
    judge; a mapping with ``kind`` is a judge section as given."""
    sim = {**(config.get("simulate") or {}), **(params or {})}
    value = sim.get("grader")
    if value is None:
        return None
    if isinstance(value, str):
        judge = dict(config.get("judge") or {})
        if judge.get("kind") == value:
            return judge
        from importlib import resources

        from omegaconf import OmegaConf

        shipped = resources.files("wai_exp.conf") / "judge" / f"{value}.yaml"
        if not shipped.is_file():  # a judge you registered: its section is its kind
            return {"kind": value}
        text = shipped.read_text()
        loaded = OmegaConf.to_container(OmegaConf.create(text), resolve=True)
        return dict(loaded) if isinstance(loaded, dict) else None
    value = dict(value)
    if "_target_" in value:
        return {"kind": "callable", "target": value["_target_"], "name": value.get("name"),
                "version": value.get("version")}  # fmt: skip
    return value


class NamedGrader:
    """A judge under its configured name (the rows' ``judge_name``); its ``model`` and, for
    a model judge, its ``acall`` (awaited on the rollout loop) read through."""

    def __init__(self, judge: Any, name: str) -> None:
        self.judge = judge
        self.name = name
        self.model = getattr(judge, "model", None)
        if callable(getattr(judge, "acall", None)):
            self.acall = judge.acall

    def __call__(self, row: dict[str, Any]) -> Any:
        return self.judge(row)


def build_grader(section: dict[str, Any], tools: list[str], policy: str) -> NamedGrader:
    """The judge a grader section describes (``grade.resolve_judge``), under its name.
    Raises ``ValueError`` as ``resolve_judge`` does (a target that cannot be imported, a
    model judge with no model or key)."""
    from wai_exp.pipeline.stages.grade import resolve_judge

    try:
        judge, name = resolve_judge(section, tools or None, policy)
    except ValueError as exc:  # name the key the user wrote, not the judge group's
        raise ValueError(
            "simulate.grader: " + str(exc).replace("judge.target", "_target_")
        ) from None
    return NamedGrader(judge, str(name))


def _max_lost_share(ctx: StageContext, params: dict[str, Any]) -> float:
    from wai_exp.config.models import SimulateConfig

    return ctx.section(SimulateConfig, "simulate", params).max_lost_share


def _judge_failure(
    report: dict[str, Any],
    lost: list[dict[str, Any]],
    *,
    max_lost_share: float,
    total_rows: int | None = None,
) -> None:
    """Mark ``report`` failed (``failed_because``, ``failure_summary``) when the run stopped
    for a failure, lost more than ``max_lost_share`` of the rollouts it attempted (the rows
    that did land are then a biased sample: lost rollouts are rarely random), or its model
    writer gave up before a single row landed (``total_rows``, resumed rows included)."""
    from wai_exp.simulate.run_health import failure_summary

    rows = int(report.get("rows_new") or 0)
    stopped = str(report.get("stopped_because"))
    writer = report.get("writer")
    reason = None
    if stopped in ("dead_agent", "agent_failed"):
        reason = stopped
    elif (
        stopped == "writer_exhausted"
        and (rows if total_rows is None else total_rows) == 0
        and isinstance(writer, dict)
        and "waves" in writer  # a model writer's report (the template writer has none)
    ):
        reason = "writer_exhausted"
    elif lost and len(lost) > max_lost_share * (len(lost) + rows):
        reason = "lost_rollouts"
    if reason is None:
        return
    report["failed_because"] = reason
    report["max_lost_share"] = max_lost_share
    report["failure_summary"] = failure_summary(
        reason,
        rows=rows,
        lost=lost,
        max_lost_share=max_lost_share,
        writer=writer if isinstance(writer, dict) else None,
        block=report.get("lost") if isinstance(report.get("lost"), dict) else None,
        timeout_knob=((report.get("completion_timeouts") or {}).get("agent") or {}).get("knob"),
    )


def _who_did_which_job(report: dict[str, Any]) -> str:
    """One line naming the three models of the run: who answered, who wrote the situations
    (the template writer offline, else the writer's model) and who played the person."""
    writer = report.get("simulator")
    person = report.get("user_model_configured")
    return (
        f"models: agent {report.get('agent_model')}; situations written by "
        + (
            "the template writer (simulate.simulator=false)"
            if writer == "template"
            else str(writer)
        )
        + "; the person in follow-ups played by "
        + ("the template person" if person in (None, "template") else str(person))
    )


def _replayed(info: dict[str, Any]) -> str:
    """One line on a pinned task set (``tasks=``): how many asks, where their worlds'
    records came from, and which fault rates they ran at."""
    facts = info.get("facts_from") or {}
    rate = info.get("fault_rate")
    return (
        f"replayed {info.get('tasks')} pinned tasks from {info.get('task_rows')} rows "
        f"(their run's k: {info.get('k_pinned')}): the world's records drawn again by the "
        f"writer for {facts.get('writer', 0)}, rebuilt from the rows for {facts.get('row', 0)}; "
        + (
            "fault rates as recorded"
            if rate == "as recorded"
            else f"fault rate {rate} (simulate.fault_rate)"
        )
    )


def _resolve_path(value: str | None, start_dir: Path) -> str | None:
    if value is None:
        return None
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else start_dir / p)


def resume_rows(partial: Path) -> list[dict[str, Any]]:
    """Rows a previous attempt finished (``read_partial``: each as it was written, first copy
    of each ``rollout_id``; a torn tail and changed rows are left out). Raises
    ``PartialRowsDamaged`` naming the lines to delete when the file is damaged mid-way."""
    return read_partial(partial).rows


class KwargsSource(Protocol):
    """What ``simulate_kwargs`` and ``rows_file`` read of a stage context: a ``StageContext``,
    a worker's ``_ShardContext``, the input check's context before any stage exists."""

    @property
    def config(self) -> dict[str, Any]: ...

    @property
    def seed(self) -> int: ...

    @property
    def start_dir(self) -> Path: ...


def simulate_kwargs(ctx: KwargsSource, params: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``simulate()`` (without the agent and the resume hooks)."""
    own = ("agent", "tasks_from", "seed_offset", "max_lost_share", "rows", *SHARD_KEYS)
    sim = {**ctx.config.get("simulate", {}), **{k: v for k, v in params.items() if k not in own}}
    kwargs: dict[str, Any] = {k: sim[k] for k in PASSED if sim.get(k) is not None}
    seed = ctx.seed + int(params.get("seed_offset") or 0)
    kwargs["seed"] = seed
    llm_grade = llm_grade_value(ctx.config, params)
    if llm_grade:
        kwargs["llm_grade"] = llm_grade
    advanced = dict(ctx.config.get("knobs") or {})
    advanced["seed"] = seed
    advanced["world"] = dict(ctx.config.get("world") or {})
    kwargs["advanced"] = advanced
    if sim.get("spec"):
        kwargs["spec"] = _resolve_path(sim["spec"], ctx.start_dir)
    for key in ("tasks", "traces"):
        if sim.get(key):
            kwargs[key] = _resolve_path(sim[key], ctx.start_dir)
    if sim.get("execute"):
        kwargs["execute"] = import_object(str(sim["execute"]), "simulate.execute")
    if sim.get("grade"):
        kwargs["grade"] = sim["grade"]
    if sim.get("output"):
        kwargs["output"] = _resolve_path(sim["output"], ctx.start_dir)
    section = grader_section(ctx.config, params)
    if section is not None:
        from wai_exp.simulate.world_setup import resolve_spec

        _, tools, policy = resolve_spec(kwargs.get("spec"), None, None)
        names = [(t.get("function") or t).get("name") for t in tools]
        kwargs["grader"] = build_grader(section, [n for n in names if n], policy or "")
    return kwargs


#: simulate-section keys that say where rollouts run, never what they are (not in the key).
SHARD_KEYS = ("workers", "cluster", "ray")


@dataclass(frozen=True)
class _ShardContext:
    """What ``simulate_kwargs`` reads of a ``StageContext``, picklable for a worker, and
    where the worker spools what it reads (``reads.spool``) unless it is the stage's own
    process (``stage_pid``)."""

    config: dict[str, Any]
    seed: int
    start_dir: Path
    reads_dir: Path | None = None
    stage_pid: int = 0


def shard_setup(
    shard_ctx: _ShardContext, params: dict[str, Any], tasks: list[dict[str, Any]] | None
) -> tuple[Any, dict[str, Any]]:
    """``(agent, simulate kwargs)`` inside a worker process: the stage's own, rebuilt from
    its config (a judge, an HTTP client never cross a process boundary). What the worker
    reads from here on is spooled for the stage's cache record: an agent's prompt or data
    file read only in a worker is an input of the stage too."""
    if shard_ctx.reads_dir is not None and os.getpid() != shard_ctx.stage_pid:
        reads.spool(shard_ctx.reads_dir / f"{socket.gethostname()}-{os.getpid()}.jsonl")
    kwargs = simulate_kwargs(shard_ctx, params)
    if tasks is not None:
        kwargs["tasks"] = tasks
    agent_cfg = arm_agent(shard_ctx.config.get("agent"), params.get("agent"))
    return build_agent(agent_cfg, kwargs["seed"], kwargs.get("timeout")), kwargs


def _where(config: Mapping[str, Any], params: dict[str, Any]) -> tuple[dict[str, Any], int, str]:
    """The stage's simulate section (its params over the config's), and where its rollouts
    run: ``simulate.workers`` and ``simulate.cluster``."""
    sim = {**(config.get("simulate") or {}), **params}
    return sim, int(sim.get("workers") or 1), str(sim.get("cluster") or "local")


def shard_spec(
    ctx: StageContext, params: dict[str, Any], tasks: list[dict[str, Any]] | None
) -> Any:
    """The stage's ``ShardSpec`` (``simulate.workers``, ``simulate.cluster``,
    ``simulate.ray.address``), or None when its rollouts run in this process."""
    from wai_exp.simulate.shards import ShardSpec

    sim, workers, cluster = _where(ctx.config, params)
    if workers <= 1 and cluster == "local":
        return None
    config = json.loads(json.dumps(ctx.config, default=str))  # plain data, for pickling
    shard_ctx = _ShardContext(
        config, ctx.seed, Path(ctx.start_dir), Path(ctx.partial_path).parent / reads.SPOOL_DIR,
        os.getpid(),
    )  # fmt: skip
    setup = functools.partial(shard_setup, shard_ctx, dict(params), tasks)
    address = (sim.get("ray") or {}).get("address")
    return ShardSpec(workers=workers, setup=setup, cluster=cluster, ray_address=address)


def prestart_workers(config: Mapping[str, Any], params: dict[str, Any]) -> None:
    """Start the stage's local worker processes now (``simulate.workers`` > 1), while the
    run's tracking starts: the stage then finds them ready instead of running their share
    itself for the 0.3-1 s each takes to import (``wai_exp.simulate.shards.prestart``)."""
    sim, workers, cluster = _where(config, params)
    if workers > 1 and cluster == "local" and not sim.get("rows"):
        from wai_exp.simulate.shards import prestart

        prestart(workers)


def rows_file(ctx: KwargsSource, params: dict[str, Any]) -> str | None:
    """The path ``simulate.rows`` (or the stage's ``params.rows``) names, made absolute
    against the start folder; None when the stage simulates."""
    sim = {**(ctx.config.get("simulate") or {}), **params}
    return _resolve_path(sim["rows"], ctx.start_dir) if sim.get("rows") else None


def key_sections(sections: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The config sections a simulate stage's cache key is made of: all it reads, except
    that a stage reading ``simulate.rows`` depends on that file alone (its bytes enter the
    key as a file digest), so changing the agent, the world, the knobs or the seed does not
    re-read and re-grade the same rows; that ``agent`` is the agent the stage runs, its
    ``params.agent`` over the section, validated with its defaults
    (``resolved_arm_agent``), so a key of the section the arm's agent never reads changes
    nothing; and that the ``judge`` section counts only as the judge section a
    ``simulate.grader`` resolves to (``grader_section``), under ``grader``."""
    sim = {**(sections.get("simulate") or {}), **params}
    if sim.get("rows"):
        return {"simulate": {"rows": sim["rows"]}}
    sections = {**sections, "agent": resolved_arm_agent(sections.get("agent"), params.get("agent"))}
    # The stage reads ``judge`` only through a grader named by kind (its model, its rubric
    # ...): what the grader resolves to enters the key, and the judge section otherwise not.
    own = {k: v for k, v in sections.items() if k != "judge"}
    if isinstance(own.get("simulate"), dict):  # where rollouts ran never changes the rows
        own["simulate"] = {k: v for k, v in own["simulate"].items() if k not in SHARD_KEYS}
    if sim.get("grader") is not None:
        own["grader"] = grader_section(sections, params)
    return own


def key_params(params: dict[str, Any]) -> dict[str, Any]:
    """The stage's params but ``agent``, which enters the key as the agent the stage runs
    (``key_sections``)."""
    return {k: v for k, v in params.items() if k != "agent"}


def read_given_rows(ctx: StageContext, path: str) -> StageResult:
    """The stage's result for ``simulate.rows``: the file's rows (``rows.load.load_rows``),
    nothing simulated. Report: ``source: "rows"``, the file's read report under
    ``rows_file``, ``declared_tools`` (the tools the rows declare) and ``stopped_because:
    "rows_read"``. Raises ``RowsFileError`` naming the line and the fix."""
    from wai_exp.rows.load import load_rows

    rows, info = load_rows(path)
    report = {
        "source": "rows",
        "mode": "rows",
        "rows_file": info,
        "rows_new": len(rows),
        "declared_tools": info["tools"],
        "stopped_because": "rows_read",
        "warnings": info["warnings"],
    }
    shapes = ", ".join(f"{n} from {k}" for k, n in info["shapes"].items())
    lines = [f"{ctx.name}: read {len(rows)} rows from {path} ({shapes}); nothing simulated"]
    lines += [f"warning: {w}" for w in info["warnings"]]
    metrics = {"rows": float(len(rows)), "situations": float(len({task_key(r) for r in rows}))}
    return StageResult(
        rows=rows,
        report=report,
        text="\n".join(lines) + "\n",
        metrics=metrics,
        tags={"stopped_because": "rows_read"},
    )


def _tool_answers(report: dict[str, Any], metrics: dict[str, float]) -> str | None:
    """world=mcp: the report line saying where the tool answers came from, each count also
    a metric (``tool_answers_<source>``); None for another world. The tool steps the agent
    wrote itself (``rows.model.NOT_EXECUTED``) never reached the server either."""
    answers = report.get("tool_answers")
    if not answers:
        return None
    own = answers.get(NOT_EXECUTED, 0)
    metrics.update({f"tool_answers_{source}": float(n) for source, n in answers.items()})
    return (
        f"tool answers: {answers['server']} from the MCP server, {answers['injected']} "
        f"injected faults (never sent to it), {answers['engine']} refused before it "
        "(unknown tool or arguments off the schema)"
        + (f", {own} written by the agent itself (never sent to it)" if own else "")
    )


def key_deps(config: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """What a simulate stage's key holds beyond its sections: the judge model
    ``simulate.llm_grade=true`` resolves to (``judge.model``, ``WAI_EXP_JUDGE``), which no
    section the key is made of holds, so a changed judge never reuses rows it did not grade;
    and a ``world.command`` server's Python code (``server_code``), so an edited server
    never reuses the answers of the old one. Nothing for a stage reading ``simulate.rows``."""
    sim = config.get("simulate") or {}
    if {**sim, **params}.get("rows"):
        return {}
    out: dict[str, Any] = {}
    if sim.get("llm_grade"):
        out["llm_grade"] = str(llm_grade_value(config, params))
    server = server_code(config.get("world"))
    if isinstance(server, dict):
        out["world_code"] = server
    return out


def never_reused(config: dict[str, Any], params: dict[str, Any]) -> str | None:
    """Why this simulate stage's answers cannot be checked against a cache entry (a
    ``world.url`` server, a ``world.command`` whose code is not a file wai-exp can check),
    so it runs every time; None when its key covers what it depends on."""
    sim = config.get("simulate") or {}
    if {**sim, **params}.get("rows"):
        return None
    server = server_code(config.get("world"))
    return server if isinstance(server, str) else None


def reused_note(config: dict[str, Any], params: dict[str, Any]) -> str | None:
    """For a reused stage whose ``world.command`` server's code is in its key: that what
    the server reads at run time is not (it runs in its own process, unrecorded)."""
    sim = config.get("simulate") or {}
    if {**sim, **params}.get("rows"):
        return None
    if not isinstance(server_code(config.get("world")), dict):
        return None
    return (
        "the MCP server's code was checked, but not what it reads at run time (a data file "
        "it opens, a module it loads by name)"
    )


def _unchecked_resume(ctx: StageContext, params: dict[str, Any], rows: int) -> list[str]:
    """A warning when rows an interrupted attempt streamed were resumed from a server whose
    answers no key can check (``never_reused``): they may not be what it answers now."""
    why = never_reused(ctx.config, params) if rows else None
    if why is None:
        return []
    try:
        shown = os.path.relpath(ctx.partial_path, ctx.start_dir)
    except ValueError:
        shown = str(ctx.partial_path)
    return [
        f"{counted(rows, 'row')} {'was' if rows == 1 else 'were'} resumed from {shown}, "
        f"streamed by an interrupted attempt: {why}, "
        "so wai-exp cannot check that they still match its answers; to start afresh, delete "
        f"{shown} and run the same command"
    ]


@register(
    "simulate",
    reads=("simulate", "agent", "world", "knobs", "seed", "judge"),
    key_sections=key_sections,
    key_params=key_params,
    key_deps=key_deps,
    never_reused=never_reused,
    reused_note=reused_note,
    headline="rollouts",
    prepare=prestart_workers,
)
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """Simulate rollouts, streaming each finished row to the partial file; with
    ``simulate.rows`` set, read that file's rows instead (``read_given_rows``)."""
    from wai_exp.simulate.engine import simulate
    from wai_exp.simulate.report import concurrency_lines

    given = rows_file(ctx, params)
    if given is not None:
        return read_given_rows(ctx, given)
    kwargs = simulate_kwargs(ctx, params)
    pinned = params.get("tasks_from")
    if pinned:
        if pinned not in inputs:
            raise ValueError(
                f"{ctx.name}: params.tasks_from={pinned!r} must name a stage in its needs "
                f"(needs: {sorted(inputs)}); add it to pipeline.stages.{ctx.name}.needs"
            )
        kwargs["tasks"] = list(inputs[pinned].rows)
    # Before the agent is built: a damaged partial file is refused before any work.
    resume = read_partial(ctx.partial_path)
    resume.repair()  # the next append starts after the last row reused
    done = resume.rows
    agent_cfg = arm_agent(ctx.config.get("agent"), params.get("agent"))
    agent = build_agent(agent_cfg, kwargs["seed"], kwargs.get("timeout"))
    budget = kwargs.get("budget")

    def progress(info: dict[str, Any]) -> None:
        n = info.get("rows", info.get("done", info.get("n_rows")))
        ctx.progress(
            {"done": n if n is not None else 0, "total": info.get("budget", budget), "unit": "rows",
             "note": info.get("note")}
        )  # fmt: skip

    with RowAppender(ctx.partial_path) as appender:
        try:
            data = simulate(
                agent=agent, done_rows=done, on_row=appender.append, progress=progress,
                shards=shard_spec(ctx, params, kwargs.get("tasks") if pinned else None),
                **kwargs,
            )  # fmt: skip
        finally:
            from wai_exp.simulate.shards import wait_for_closed_workers

            # simulate() returns without waiting for its workers' exit (0.2-0.4 s of
            # teardown, overlapped with its report); what they spool for the cache record
            # at exit must be in before the runner reads it.
            wait_for_closed_workers()
    # The engine's own rows, not ``data.rows`` (a scrubbed copy of every row): the runner
    # scrubs each row as it writes it, so the stage never holds two copies.
    rows = data.trajectories
    report = data.report()
    tools = getattr(data, "tools", None) or []
    report["declared_tools"] = sorted(
        {(t.get("function") or t).get("name") for t in tools if isinstance(t, dict)} - {None}
    )
    report["resumed_rows"] = len(done)
    report["resume"] = {
        "rows_reused": len(done), "torn_tail_bytes": resume.torn_bytes,
        "torn_tail_pieces": resume.torn_pieces, "rows_changed_not_reused": len(resume.changed),
        "notes": resume.notes(),
    }  # fmt: skip
    metrics = {
        "rows": float(len(rows)),
        "rows_resumed": float(len(done)),
        "situations": float(len({r.get("scenario_id") for r in rows})),
    }
    lost = report.get("rollouts_lost")
    if isinstance(lost, int | float):
        metrics["rollouts_lost"] = float(lost)
    usage = report.get("usage")
    if usage:  # what the model calls cost, as the server counted it (absent: not reported)
        metrics["usage_input_tokens"] = float(usage["input_tokens"])
        metrics["usage_output_tokens"] = float(usage["output_tokens"])
    _judge_failure(
        report, data.lost, max_lost_share=_max_lost_share(ctx, params), total_rows=len(rows)
    )
    stopped = report.get("stopped_because")
    lines = [
        f"{ctx.name}: {len(rows)} rows ({len(done)} resumed from an interrupted attempt), "
        f"mode {report.get('mode', kwargs.get('mode'))}, stopped because {stopped}",
    ]
    lines.append(_who_did_which_job(report))
    if report.get("tasks"):
        lines.append(_replayed(report.get("tasks_info") or {}))
    bound = (report.get("completion_timeouts") or {}).get("agent") or {}
    if "own timeout" in str(bound.get("set_by")):
        lines.append(
            f"each agent completion was bounded by {bound['seconds']} s: {bound['set_by']}"
        )
    lines += concurrency_lines(report)
    for server in (report.get("model_concurrency") or [])[:1]:  # the agent's server
        metrics["model_concurrency_min"] = float(server["min"])
        metrics["model_concurrency_typical"] = float(server["typical"])
        metrics["rate_limit_waits"] = float(server["rate_limit_waits"])
        metrics["rate_limit_wait_s"] = float(server["rate_limit_wait_s"])
    if answers := _tool_answers(report, metrics):  # world=mcp
        lines.append(answers)
    if claimed := report.get("rows_with_unexecuted_tool_steps"):
        metrics["rows_with_unexecuted_tool_steps"] = float(claimed)
    if report.get("failure_summary"):
        lines.append(report["failure_summary"])
    warnings = resume.notes() + _unchecked_resume(ctx, params, len(done))
    warnings += list(getattr(data, "warnings", []))
    lines += [f"warning: {w}" for w in warnings]
    if warnings:  # for the run's description and the closing summary
        report["warnings"] = warnings
    tags = {"stopped_because": str(stopped)} if stopped is not None else {}
    json.dumps(report, default=str)  # fail here, not half-way through writing, on an odd report
    return StageResult(
        rows=rows, report=report, text="\n".join(lines) + "\n", metrics=metrics, tags=tags
    )
