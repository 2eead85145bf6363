"""The run report ``SimulationData.report()`` returns: what was asked, what ran, why it
stopped, and the search statistics (tier mix, coverage, mixed rate, mutations)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from wai_exp.config.knobs import TIER_MIX_ALPHA, Knobs, knobs_read, patience_table
from wai_exp.domain.secrets import redact
from wai_exp.simulate.ids import prompt_sha
from wai_exp.simulate.lost import lost_summary
from wai_exp.simulate.modes import Config
from wai_exp.simulate.run_health import BOTH_TIMEOUTS
from wai_exp.simulate.tasks import split_of

if TYPE_CHECKING:  # the engine imports this module
    from wai_exp.simulate.engine import Engine

#: The ``advanced`` knobs this engine reads: every knob whose ``reads`` label in the knob
#: table is not ``model_writer``/``unread``. ``report()["knobs_not_read"]`` lists the rest
#: so no one mistakes a recorded value for one that shaped the run.
KNOBS_READ = knobs_read()


def knobs_read_by(engine: Engine) -> frozenset[str]:
    """The knobs this run read: ``KNOBS_READ``, plus the ``model_writer`` ones when a model
    writer wrote the situations."""
    if engine.writer is None:
        return KNOBS_READ
    from wai_exp.config.knobs import KNOBS

    return KNOBS_READ | {k.name for k in KNOBS if k.reads == "model_writer"}


class RowFacts(NamedTuple):
    """What the report reads of a run's rows, one list per field in row order, taken in one
    pass (``row_facts``) that the report's blocks then count. A pass over every row per
    block cost ~0.4 s at the end of a 23,000-row run against a local server (under load);
    one pass and counts over these lists, about half that."""

    arm: list[Any]
    #: (scenario_id, phrasing_index, eval_run): the repeat group a row belongs to
    group: list[tuple[Any, Any, Any]]
    reward: list[Any]
    signature: list[Any]
    ended_by: list[Any]
    ended_by_raw: list[Any]
    dims: list[Mapping[str, Any]]
    usage: list[Mapping[str, Any]]
    model_version: list[Any]
    user_model: list[Any]
    label_source: list[Any]
    #: the conversation's last step is a tool call's answer (the agent's own loop ran out),
    #: not a line of text: a ``max_turns`` row that ends so left no question unanswered
    ends_on_tool: list[bool]


def row_facts(rows: Sequence[Mapping[str, Any]]) -> RowFacts:
    """The ``RowFacts`` of ``rows`` (missing fields read as None, missing mappings as {})."""
    if not rows:
        return RowFacts(*([] for _ in RowFacts._fields))
    return RowFacts(*map(list, zip(*map(_facts_of, rows), strict=True)))


def _facts_of(r: Mapping[str, Any]) -> tuple[Any, ...]:
    get = r.get
    return (
        get("arm"),
        (get("scenario_id"), get("phrasing_index"), (get("lineage") or {}).get("eval_run")),
        get("reward"),
        get("behavior_signature"),
        get("ended_by"),
        get("ended_by_raw"),
        get("scenario_dimensions") or {},
        get("usage") or {},
        get("model_version"),
        get("user_model"),
        get("label_source"),
        _ends_on_tool(get("steps")),
    )


def _ends_on_tool(steps: Any) -> bool:
    """Whether ``steps`` (internal or row-v1) end on a tool step."""
    if not isinstance(steps, list) or not steps or not isinstance(steps[-1], Mapping):
        return False
    last = steps[-1]
    return last.get("kind") == "tool" or ("kind" not in last and "tool" in last)


def _fresh_task_tiers(facts: RowFacts) -> dict[Any, str]:
    """The tier of each task the writer drew afresh in the first run: the draws
    ``hard_share`` governs. A task's k repeats are one draw, and a failing row's siblings
    (the mutation arm) follow their parent's cell, not the mix."""
    tiers: dict[Any, str] = {}
    for arm, (sid, _, eval_run), dims in zip(facts.arm, facts.group, facts.dims, strict=True):
        if arm != "fresh" or eval_run:
            continue
        tier = dims.get("tier")
        if tier is not None:
            tiers.setdefault(sid, str(tier))
    return tiers


def tier_mix(
    cfg: Config,
    per_run_tiers: list[Counter[str]],
    rows: Sequence[Mapping[str, Any]],
    facts: RowFacts | None = None,
) -> tuple[dict[str, Any], str | None]:
    """``report["search"]["tier_mix"]`` and a warning when the hard share of the freshly
    drawn tasks fell more than ``tier_mix_tolerance`` under ``hard_share`` and a fair draw of
    that many tasks would fall that short less than ``TIER_MIX_ALPHA`` of the time (None
    otherwise). ``facts``: the rows' ``row_facts`` when the caller has them."""
    from wai_exp.domain.dimensions import HARD_TIERS

    knobs, hs = cfg.knobs, cfg.hard_share
    tier_counts: Counter[str] = Counter()
    for c in per_run_tiers:
        tier_counts.update(c)
    n_rows = len(rows)
    hard_rows = sum(v for k, v in tier_counts.items() if k in HARD_TIERS)
    drawn_hard = hard_rows / n_rows if n_rows else None
    fresh = _fresh_task_tiers(facts if facts is not None else row_facts(rows))
    hard_tasks = sum(t in HARD_TIERS for t in fresh.values())
    mix: dict[str, Any] = {
        "counts": dict(sorted(tier_counts.items())),
        "hard_share_asked": hs,
        "hard_share_drawn": drawn_hard,
        "fresh_tasks": len(fresh),
        "hard_share_drawn_tasks": hard_tasks / len(fresh) if fresh else None,
    }
    if cfg.runs > 1:
        mix["per_run"] = [dict(sorted(c.items())) for c in per_run_tiers]
    warning = None
    share = mix["hard_share_drawn_tasks"]
    if share is None or n_rows < knobs.tier_mix_min_rows or share >= hs - knobs.tier_mix_tolerance:
        return mix, warning
    # Imported only here: scipy's import (0.3-0.4 s) was the end of every simulate stage.
    from scipy.special import bdtr  # binomial lower tail

    chance = float(bdtr(hard_tasks, len(fresh), hs))
    mix["shortfall_chance"] = chance
    if chance < TIER_MIX_ALPHA:
        warning = (
            f"the drawn hard share {share:.2f} ({hard_tasks} of {len(fresh)} freshly drawn "
            f"tasks) is more than {knobs.tier_mix_tolerance} below hard_share={hs}, further "
            f"than a fair draw falls {TIER_MIX_ALPHA:.0%} of the time (p={chance:.3f}; "
            "advanced tier_mix_tolerance)"
        )
    return mix, warning


def build_report(
    cfg: Config,
    engine: Engine,
    *,
    facts: RowFacts,
    mix: dict[str, Any],
    inputs: Mapping[str, Any],
    world: dict[str, Any],
    elapsed: float,
) -> dict[str, Any]:
    """The report dict of a finished run.

    ``engine`` is the scheduler after the run (rows, counters, stop reasons), ``facts`` its
    rows' ``row_facts``; ``inputs`` holds what the run was given: ``tasks_info``,
    ``trace_info``, ``replay`` (the pinned tasks or None), ``agent_model``, ``spec_name``,
    ``tools``, ``system_prompt``, ``run_id``; ``world`` is the dumped ``WorldOptions``.
    """
    from wai_exp.domain.dimensions import DIMENSION_KEYS

    n_rows = len(engine.rows)
    return {
        **_parameters(cfg),
        "dimensions": list(DIMENSION_KEYS),
        "arm_weights": None,
        "arm_weights_note": (
            "no arm weights: each writer batch is the pending mutations of failing rows (at most "
            "writer_context_parents), then fresh draws; seeds from traces= run first"
        ),
        "arms": dict(sorted(Counter(map(str, facts.arm)).items())),
        **_sources(cfg, engine, inputs, facts),
        **_person_and_world(cfg, world),
        **_outcome(engine, facts),
        **token_totals(cfg, engine.rows, facts.usage),
        **model_concurrency(engine),
        "search": _search(cfg, engine, mix, DIMENSION_KEYS, facts),
        "grade": grade_entry(cfg, engine, facts),
        "knobs_not_read": sorted(set(Knobs.model_fields) - knobs_read_by(engine)),
        "knobs_not_read_note": (
            "recorded and validated, but nothing in this run read them"
            + (
                ""
                if engine.writer is not None
                else ": the model writer's knobs (waves, tokens, restarts, dedupe, the "
                "behaviour-gap search) are read only under simulator=<model spec>"
            )
            + "; the knob table's 'read by' column says which part reads each"
        ),
        "writer": engine.writer.report() if engine.writer is not None else None,
        "timings": {"total_s": elapsed, "rows_per_s": n_rows / elapsed if elapsed > 0 else None},
        "run_id": inputs["run_id"],
        # processes (or Ray actors) the rollouts ran on; planning and stops stayed here
        "workers": engine.shard_count,
        "workers_peak_rss_mb": engine.shard_rss_mb,
        # where the rollouts ran: a sync agent's go to the workers while they keep up
        "workers_rollouts": engine.shard_rollouts,
    }


def _parameters(cfg: Config) -> dict[str, Any]:
    """The resolved parameters the run ran under."""
    return {
        "mode": cfg.mode,
        "budget": cfg.budget,
        "budget_total": cfg.budget * cfg.runs,
        "budget_per_run": cfg.budget,
        "runs": cfg.runs,
        "seed": cfg.seed,
        "phrasings": cfg.phrasings,
        "repeats": cfg.repeats,
        "repeat_policy": cfg.repeat_policy,
        "strategy": cfg.repeat_policy,
        "unique_situations": cfg.unique,
        "hard_share": cfg.hard_share,
        "fault_rate": cfg.fault_rate,
        "situations": cfg.situations,
        "time_budget": cfg.time_budget,
        "until": cfg.until,
        "reproducible": cfg.reproducible,
        "lost_as": cfg.lost_as,
    }


def _sources(
    cfg: Config, engine: Engine, inputs: Mapping[str, Any], facts: RowFacts
) -> dict[str, Any]:
    """Where asks came from and who answered, wrote and judged them."""
    replay = inputs["replay"]
    tasks_info, trace_info = inputs["tasks_info"], inputs["trace_info"]
    return {
        "tasks": tasks_info["tasks"],
        "tasks_info": tasks_info,
        "traces": trace_info["traces"],
        "traces_info": trace_info,
        "seeds": trace_info.get("seeds", 0),
        "grader": engine.runner.grader_name,
        "simulator": engine.writer.writer_model if engine.writer is not None else "template",
        "writer_model": (
            sorted({t.writer_model for t in replay})
            if replay is not None
            else engine.writer.writer_model
            if engine.writer is not None
            else "template"
        ),
        "agent_model": agent_model_of(facts.model_version, inputs["agent_model"]),
        "user_model": engine.runner.user_model if any(facts.user_model) else None,
        "user_model_configured": engine.runner.user_model,
        **_spec(inputs, engine),
        "tools": [t["function"]["name"] for t in inputs["tools"]],
        "system_prompt_sha": prompt_sha(inputs["system_prompt"]),
        "sampling": cfg.sampling,
        "timeout": cfg.timeout,
        "completion_timeouts": completion_timeouts(cfg, engine),
        "logprobs": cfg.logprobs,
    }


def _spec(inputs: Mapping[str, Any], engine: Engine) -> dict[str, Any]:
    """``spec``: the name of the spec the tools came from; on a ``world=mcp`` run given no
    spec (the generic MCP system prompt, the server's tools) None, and ``spec_note`` names
    the server as a record shows it: the shipped desk's name ``resolve_spec`` fell back to
    describes tools the run never offered."""
    setup = engine.runner.world_setup
    if getattr(setup, "server", None) is None:
        return {"spec": inputs["spec_name"]}
    from wai_exp.simulate.mcp_world import MCP_SYSTEM_PROMPT, server_setting

    if inputs["system_prompt"] != MCP_SYSTEM_PROMPT:
        return {"spec": inputs["spec_name"]}
    return {
        "spec": None,
        "spec_note": (
            f"no spec: the tools are those the MCP server ({server_setting(setup.options)}) "
            "lists, under the generic MCP system prompt; simulate.spec narrows and describes them"
        ),
    }


def completion_timeouts(cfg: Config, engine: Engine) -> dict[str, Any]:
    """What bounded each completion, per job (``agent``, ``writer``, ``user``): ``seconds``
    (None: no limit) and ``set_by``. ``report["timeout"]`` is the ``timeout=`` parameter;
    a model backend with a limit of its own (``agent.timeout`` on the command line, the
    ``ModelAgent``'s ``timeout``) is bounded by that one instead, and says so here."""
    runner = engine.runner

    def limit(seconds: Any) -> float | None:
        return float(seconds) if seconds else None

    sim = limit(cfg.timeout)
    if runner.agent_is_backend:
        own = limit(getattr(runner.agent, "timeout", None))
        if engine.timeout_knob() == BOTH_TIMEOUTS:
            agent = {"seconds": own, "set_by": f"{BOTH_TIMEOUTS}, equal (each model completion)"}
        elif own == sim:
            agent = {"seconds": own, "set_by": "simulate.timeout (each model completion)"}
        else:
            agent = {
                "seconds": own,
                "set_by": f"the model backend's own timeout (agent.timeout), not simulate.timeout={cfg.timeout:g}",
            }
        # the one knob to raise: advice that names the other changes nothing
        agent["knob"] = engine.timeout_knob()
    elif _awaited(runner.agent):
        agent = {"seconds": sim, "set_by": "simulate.timeout (the callable's one call)"}
    else:
        agent = {"seconds": None, "set_by": "none: the scripted agent runs in process"}
    out: dict[str, Any] = {"agent": agent}
    if engine.writer is not None:
        out["writer"] = {"seconds": sim, "set_by": "simulate.timeout (each writer wave)"}
    person = runner.world_setup.kwargs.get("user")
    if person is not None:
        out["user"] = {"seconds": sim, "set_by": "simulate.timeout (each line of the person)"}
    return out


def _awaited(fn: Any) -> bool:
    """A user's callable (wrapped to be awaited, so ``timeout=`` bounds its call)."""
    from wai_exp.simulate.agent_setup import UserAgent, is_async_callable

    return isinstance(fn, UserAgent) or is_async_callable(fn)


def _person_and_world(cfg: Config, world: dict[str, Any]) -> dict[str, Any]:
    """Turn limits, knobs, the simulated person's patience and the world options."""
    knobs, fr = cfg.knobs, cfg.fault_rate
    p_second, p_later = patience_table(knobs.patience)
    return {
        "turn_limits": {
            "avg_turns": knobs.avg_turns,
            "max_user_turns": knobs.avg_turns // 2,
        },
        # redacted: a world=mcp server's env values and headers are registered secrets
        "knobs": redact(_jsonable(dict(knobs)), keys=False),
        "patience": {
            "level": knobs.patience if isinstance(knobs.patience, str) else "table",
            "second": p_second,
            "later": p_later,
        },
        "user_temperature": knobs.user_temperature,
        "world": redact(world, keys=False),
        "world_note": (
            f"report['fault_rate'] ({fr}) is this run's rate; world['default_fault_rate'] "
            f"({world.get('default_fault_rate')}) is the rate a fault plan with no rate of its own fires at"
        ),
    }


def _outcome(engine: Engine, facts: RowFacts) -> dict[str, Any]:
    """Why the run stopped and what landed, was reused, graded or lost."""
    group_sizes = Counter(facts.group)
    scenario_ids = [g[0] for g in facts.group]
    return {
        "stopped_because": engine.stop_reason,
        "stopped_because_per_run": [p["stopped_because"] for p in engine.per_run],
        # until="saturation": the plateau the stop read (rows, coverage, new keys in the
        # window, the window and growth knobs); None when it did not fire
        "saturation": engine.plateau,
        "per_run": engine.per_run,
        "rows": len(facts.group),
        "rows_new": engine.new_rows,
        "rows_reused": engine.reused,
        "rows_graded": sum(x is not None for x in facts.reward),
        "rollouts_lost": len(engine.lost),
        "rollouts_lost_by": dict(sorted(engine.lost_by.items())),
        # per task category, and how pass@k counts them (simulate.lost_as)
        "lost": lost_summary(facts.dims, scenario_ids, engine.lost, engine.cfg.lost_as),
        "rollouts_abandoned": engine.abandoned,
        # rows whose conversation outgrew the model's context window (ended_by truncated)
        "rollouts_cut_at_context": facts.ended_by_raw.count("context_full"),
        "scenarios": len(set(scenario_ids)),
        "group_sizes": dict(sorted(Counter(group_sizes.values()).items())),
    }


def model_concurrency(engine: Engine) -> dict[str, Any]:
    """``model_concurrency``: per model server (host:port, never the URL's credentials),
    the adaptive in-flight limit its calls ran at (start, min, max, final, typical = the
    time-weighted mean), its backoffs and the rate-limit waits (count, seconds summed over
    calls); None with a note when no model server was called. Under ``simulate.workers``
    each process (the stage's and each worker) had its own limit: a server's numbers are
    summed over the processes that called it (``processes``), each one's own under
    ``per_worker``."""
    parent = engine.server_limits.summary() if engine.server_limits is not None else None
    note = None
    if engine.shard_limits is not None:
        limits, note = _over_processes(parent, engine.shard_limits)
    else:
        limits = {url: {**s, "processes": 1} for url, s in (parent or {}).items()}
    if not limits:
        return {
            "model_concurrency": None,
            "model_concurrency_note": note
            or "not measured: no model server was called "
            "(the agent is not a model backend and no model writer or person ran)",
        }
    from urllib.parse import urlsplit

    servers = []
    for url, summary in limits.items():
        parts = urlsplit(url)
        host = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
        servers.append({"server": host, **summary})
    return {"model_concurrency": servers, **({"model_concurrency_note": note} if note else {})}


def _over_processes(
    parent: dict[str, Any] | None, workers: dict[str, dict[str, Any] | None]
) -> tuple[dict[str, Any], str | None]:
    """Per server URL, the limits of the processes that called it, summed
    (``concurrency.summed``): each worker's (by name), and the stage's own (``parent``: its
    share of the rollouts and the model writer's calls). A worker that did not report (a Ray
    actor, one that died) is named in the note."""
    from wai_exp.llm.concurrency import summed

    by_url: dict[str, dict[str, dict[str, Any]]] = {}
    for name, limits in [("parent", parent), *workers.items()]:
        for url, summary in (limits or {}).items():
            if summary["calls"]:
                by_url.setdefault(url, {})[name] = summary
    silent = [name for name, w in workers.items() if w is None]
    note = (
        f"not measured for {', '.join(silent)}: a worker reports its limits when it exits "
        "cleanly (a Ray actor does not, nor a worker that died)"
        if silent and parent is not None  # parent: the run has a model server
        else None
    )
    return {url: summed(per) for url, per in by_url.items()}, note


def concurrency_lines(report: Mapping[str, Any]) -> list[str]:
    """The summary's words for ``report["model_concurrency"]``, one line per server."""
    lines = []
    for s in report.get("model_concurrency") or ():
        backoffs = s["backoffs"]
        ran = (
            f"stayed at {s['start']}"
            if s["min"] == s["start"]
            else f"backed off to {s['min']} (typical {s['typical']:g}, final {s['final']})"
        )
        waits = (
            f"{s['rate_limit_waits']} rate-limit waits, {s['rate_limit_wait_s']:g} s summed over calls"
            if s["rate_limit_waits"]
            else "no rate-limit wait"
        )
        where = s["server"]
        if s.get("processes", 1) > 1:
            each = ", ".join(
                f"{w['process']} {w['start']}->{w['min']} (final {w['final']})"
                for w in s["per_worker"]
            )
            where += f" (summed over {s['processes']} processes, each with its own limit: {each})"
        lines.append(
            f"model calls to {where}: concurrency started at {s['start']}, {ran}; "
            f"backoffs: {backoffs['queueing']} on queueing, {backoffs['rate_limit']} on "
            f"HTTP 429/503; {waits}"
        )
    return lines


def token_totals(
    cfg: Config, rows: list[dict[str, Any]], usage: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``usage``: input and output tokens summed over the rows whose server reported them
    (None when none did: unmeasured, not 0), from each row's ``usage`` (``RowFacts``);
    ``logprobs_captured`` under ``logprobs=``: agent turns, and those the server returned
    logprobs for."""
    inp = [u.get("input_tokens") for u in usage]
    out = [u.get("output_tokens") for u in usage]
    counted = [i for i, o in zip(inp, out, strict=True) if i is not None or o is not None]
    totals = None
    if counted:
        totals = {
            "input_tokens": int(sum(v for v in inp if v is not None)),
            "output_tokens": int(sum(v for v in out if v is not None)),
            "rows_counted": len(counted),
        }
    result: dict[str, Any] = {"usage": totals}
    if cfg.logprobs:
        turns = [s for r in rows for s in r.get("steps") or () if s.get("kind") == "assistant"]
        result["logprobs_captured"] = {
            "turns": len(turns),
            "turns_with_logprob": sum(1 for s in turns if s.get("logprob") is not None),
            "turns_server_returned_none": sum(1 for s in turns if s.get("logprobs_missing")),
            "rows_with_logprob": sum(1 for r in rows if r.get("logprob") is not None),
        }
    return result


def _search(
    cfg: Config, engine: Engine, mix: dict[str, Any], dimension_keys: Any, facts: RowFacts
) -> dict[str, Any]:
    return {
        "tier_mix": mix,
        "ended_on_question": facts.ended_by.count("user_left"),
        **followups(cfg, facts.ended_by, facts.ends_on_tool),
        **idle_on_verdicts(cfg, engine),
        "coverage": len(engine.coverage),
        "mixed_rate": mixed_rate(facts, cfg.knobs.smoothing_alpha, engine.thr),
        "dimension_counts": dimension_counts(facts.dims, dimension_keys),
        # Under unique_situations a template draw repeating one of the run's situations is
        # rejected; a batch short of them bounces (offline_bounce_limit rounds, seeds
        # offline_bounce_stride apart) before it is accepted short.
        "template_rounds": None if engine.writer is not None else dict(engine.draw_stats),
        "mutation_aims": dict(sorted(engine.mutations.aims.items())),
        "mutation_parents": dict(sorted(engine.mutations.kinds.items())),
        "mutate_graded_failures": engine.mutations.mutate_graded,
    }


def dimension_counts(
    dims: Sequence[Mapping[str, Any]], keys: Sequence[str]
) -> dict[str, dict[str, int]]:
    """Rows per value of each scenario dimension in ``keys`` (values as text, in order), from
    each row's ``scenario_dimensions`` (``RowFacts.dims``), each read once."""
    try:  # a run's rows share a few hundred combinations: each is made text once
        combos = Counter(tuple(map(d.get, keys)) for d in dims)
    except TypeError:  # an unhashable value (a row another tool wrote): its text, row by row
        combos = Counter(tuple(str(d.get(key)) for key in keys) for d in dims)
    counts: dict[str, Counter[str]] = {key: Counter() for key in keys}
    for combo, n in combos.items():
        for key, value in zip(keys, combo, strict=True):
            counts[key][str(value)] += n
    return {key: dict(sorted(c.items())) for key, c in counts.items()}


def followups(
    cfg: Config, ended_by: Sequence[Any], ends_on_tool: Sequence[bool] = ()
) -> dict[str, Any]:
    """``followups_missed``: rows that ended on the agent's question with nobody answering
    (the person walked away, or was out of turns), from each row's ``ended_by``;
    ``followups_starved`` when those are at least ``followup_starved_min`` and at least
    rows / ``followup_starved_divisor``. A ``max_turns`` row whose last step is a tool call
    (``ends_on_tool``) ran out of the agent's own turns while calling tools: it asked
    nothing, and more patience would not have answered it."""
    on_tool = list(ends_on_tool) or [False] * len(ended_by)
    missed = ended_by.count("user_left") + sum(
        e == "max_turns" and not t for e, t in zip(ended_by, on_tool, strict=True)
    )
    knobs = cfg.knobs
    starved = missed >= knobs.followup_starved_min and missed >= len(ended_by) / int(
        knobs.followup_starved_divisor
    )
    return {"followups_missed": missed, "followups_starved": bool(ended_by) and starved}


def idle_on_verdicts(cfg: Config, engine: Engine) -> dict[str, Any]:
    """``idle_on_verdicts``: the share of an rl pool's rollout-slot time (``repeat_policy=
    "split"``) that sat free because its open asks waited for their first rollouts and
    verdicts before they could grow to k, and nothing else could open (None under another
    policy, or before any slot time); ``idle_on_verdicts_note``, the add-situations note,
    when that share is over ``idle_judge_share`` (None otherwise)."""
    share = None
    if cfg.repeat_policy == "split" and engine.pool_slot_s > 0:
        share = round(min(1.0, engine.idle_slot_s / engine.pool_slot_s), 4)
    limit = cfg.knobs.idle_judge_share
    note = None
    if share is not None and share > limit:
        if cfg.situations is not None:
            fix = f"raise situations= (now {cfg.situations})"
        elif engine.replayed:
            fix = "replay a larger task set (tasks=)"
        else:
            fix = "raise advanced writer_buffer_waves, which bounds how many asks are open at once"
        note = (
            f"idle_on_verdicts: the rl pool sat idle on {share:.0%} of its rollout-slot time "
            f"(over advanced idle_judge_share={limit:g}) while its open asks waited for their "
            f"first rollouts and verdicts before they could grow to k; add situations so more "
            f"asks run at once: {fix}"
        )
    return {"idle_on_verdicts": share, "idle_on_verdicts_note": note}


def grade_entry(cfg: Config, engine: Engine, facts: RowFacts) -> dict[str, Any] | None:
    """``report["grade"]``: who graded the rows as they landed (``grade=`` or ``grader=``)
    and the verdict counts; None when neither was given. Counts only: pass@1 with its
    interval is ``data.pass_at``."""
    runner = engine.runner
    if cfg.grade is None and runner.grader is None:
        return None
    thr = engine.thr
    judged = [x for x in facts.reward if isinstance(x, int | float)]
    return {
        "by": "grade" if cfg.grade is not None else "grader",
        "kind": cfg.grade,
        "judge_name": "conduct_grade" if cfg.grade is not None else runner.grader_name,
        "judge_model": None if cfg.grade is not None else runner.grader_model,
        "label_source": "conduct" if cfg.grade is not None else _label_source(facts.label_source),
        "rows_graded": len(judged),
        "unjudged": len(facts.reward) - len(judged),
        "passed": sum(1 for x in judged if x >= thr),
        "failed": sum(1 for x in judged if x < thr),
        "pass_threshold": thr,
        "note": "verdict counts only; pass@1 with its interval is data.pass_at",
    }


def _label_source(sources: Sequence[Any]) -> str | None:
    kinds = sorted({str(s) for s in sources if s})
    return ", ".join(kinds) if kinds else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def agent_model_of(model_versions: Sequence[Any], fallback: str) -> str:
    """The model the rows say answered (each row's ``model_version``: what the agent
    reported), else the agent's name."""
    versions = sorted({str(v) for v in model_versions if v})
    if len(versions) == 1:
        return versions[0]
    return ", ".join(versions) if versions else fallback


def mixed_rate(facts: RowFacts, alpha: float, thr: float) -> dict[str, Any]:
    """Share of repeat groups (same ask, same run, 2+ rollouts) that split, Laplace-smoothed
    ``(mixed + a) / (groups + 2a)``. A group splits on reward when graded, else on behaviour
    signature (``tasks.split_of``)."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, key in enumerate(facts.group):
        groups.setdefault(key, []).append(i)
    rewards, signatures = facts.reward, facts.signature
    n = mixed = 0
    for g in groups.values():
        if len(g) < 2:
            continue
        n += 1
        mixed += split_of([rewards[i] for i in g], [signatures[i] for i in g], thr)
    return {
        "groups": n,
        "mixed": mixed,
        "raw": mixed / n if n else None,
        "smoothed": (mixed + alpha) / (n + 2 * alpha) if n or alpha else None,
        "alpha": alpha,
    }
