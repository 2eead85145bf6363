"""Asks taken from earlier rows: ``tasks=`` (replay a run's asks), ``traces=`` (seed the run
with failing asks and aim fresh draws at their regions) and ``runs=N`` (later runs replay the
first run's asks).

A replayed ask is a pinned situation (``pinned.py``): the row's ask, grid cell and faults,
under whatever system prompt this run has, from rows any tool wrote. The world's records come
from the writer's draw again when the row's ``lineage.writer`` still gives its prompt, else
from the row itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wai_exp.config.knobs import Knobs
from wai_exp.simulate.ids import stable_hash
from wai_exp.simulate.tasks import Task


def load_rows_source(source: Any, what: str) -> list[dict[str, Any]]:
    """Rows from a SimulationData (anything with ``.trajectories``), a list of row dicts, a
    JSONL path, or a run/stage directory holding one ``rows.jsonl``.

    ``tasks=`` and ``traces=`` files, and ``tasks=`` dicts, go through the one row reader (``rows.load.load_rows`` for a file,
    ``read_row`` for each listed dict), so rows any tool wrote (row-v1 steps, OpenAI / TRL
    ``messages``, τ-bench ``traj``) come in with their prompt and steps. Raises
    ``ValueError`` naming ``what`` when the source cannot be read, a directory holds no rows
    or several stage folders do.
    """
    from wai_exp.rows.load import load_rows, read_row

    if hasattr(source, "trajectories"):
        return [dict(r) for r in source.trajectories]
    if isinstance(source, str | Path):
        # Files of tasks and traces alike: one error per bad line (an array, a number,
        # binary bytes, a row with no ask) naming the line and the fix.
        return load_rows(_rows_path(source, what), param=f"simulate.{what}")[0]
    if isinstance(source, Sequence) and not isinstance(source, str | bytes):
        rows = list(source)
        if not all(isinstance(r, Mapping) for r in rows):
            raise ValueError(
                f"{what} must be row dicts, a JSONL path, a run directory or a SimulationData"
            )
        if what == "tasks":
            return [read_row(dict(r), f"{what}[{i}]") for i, r in enumerate(rows)]
        return [dict(r) for r in rows]
    raise ValueError(
        f"{what} must be row dicts, a JSONL path, a run directory or a SimulationData, got {type(source).__name__}"
    )


def _rows_path(source: str | Path, what: str) -> Path:
    """The JSONL file ``source`` names: itself, or the one rows.jsonl of a run directory."""
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
    return path


def model_written(plan_sit: Any, params: Mapping[str, Any], dims: Mapping[str, Any]) -> Any:
    """The situation a model writer made of the plan's draw ``plan_sit``: the row's cell (as
    relabelled by the writer), the plan's facts, the written asks (``params["asks"]``)."""
    from wai_exp.simulate.model_writer import _content_id
    from wai_exp.simulate.writer import Situation

    asks = [str(a) for a in params["asks"]]
    return Situation(
        scenario_id=_content_id(dict(dims), plan_sit.entities, asks, str(params["model"])),
        dims=dict(dims),
        phrasings=tuple(asks),
        entities=dict(plan_sit.entities),
    )


def replay_tasks(
    rows: list[dict[str, Any]],
    *,
    k_override: int | None,
    tools: Any,
    options: Any,
    what: str = "tasks",
) -> tuple[list[Task], int, Counter[str]]:
    """The task set of earlier rows: one task per (task, prompt) in first-seen order, each
    a pinned situation (``pinned.py``): the row's ask, cell and faults, whatever the system
    prompt of this run, and whoever wrote the rows.

    Returns the tasks, the pinned run's k (its largest group: a split-allocated run extends
    to k only where groups split, so its largest group is the k it ran under) and how many
    tasks took their world's facts from the writer's draw and how many from the row
    (``{"writer": n, "row": m}``). Raises ``ValueError`` for a row without an ask or no rows.
    """
    from wai_exp.simulate.pinned import pinned_key, pinned_situation, recorded_faults, redraw
    from wai_exp.simulate.writer import TemplateWriter

    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("prompt") is None or str(r.get("prompt")) == "":
            rid = r.get("rollout_id") or r.get("scenario_id")
            raise ValueError(
                f"{what}: row {rid!r} has no ask (no prompt and no user turn in its messages); "
                "every pinned task needs the ask it replays"
            )
        groups.setdefault((pinned_key(r), str(r["prompt"])), []).append(r)
    if not groups:
        raise ValueError(f"{what} holds no rows; pass a run that produced rows")
    # k is counted within one eval run: a pinned run made with runs=N holds N copies of each
    # group, and replaying it must not multiply k by N.
    per_run: Counter[tuple[str, str, Any]] = Counter()
    for key, g in groups.items():
        for r in g:
            per_run[(*key, (r.get("lineage") or {}).get("eval_run"))] += 1
    k_orig = max(per_run.values())
    k = k_override if k_override is not None else k_orig
    firsts = [g[0] for g in groups.values()]
    drawn = redraw(firsts, tools=tools, options=options)
    # One template writer over this run's tools: each row-built task reseeds it.
    base = TemplateWriter(tools, None, options=options)
    sources: Counter[str] = Counter()
    tasks: list[Task] = []
    for i, first in enumerate(firsts):
        sit, source = pinned_situation(first, drawn.get(i), base=base)
        sources[source] += 1
        lineage = first.get("lineage") or {}
        writer = lineage.get("writer") if isinstance(lineage.get("writer"), Mapping) else None
        _, rate = recorded_faults(first)
        tasks.append(
            Task(
                situation=sit,
                phrasing_index=int(first.get("phrasing_index") or 0),
                prompt=str(first["prompt"]),
                # Who wrote the ask: the original writer, or "pinned" for a row that says not.
                writer_model=str(first.get("writer_model") or ("template" if writer else "pinned")),
                k=k,
                replayed_from=str(lineage.get("run_id") or "unknown"),
                arm="replay",
                writer_lineage=dict(writer) if source == "writer" and writer else None,
                fault_rate=rate,
            )
        )
    return tasks, k_orig, sources


def pinned_tasks(
    source: Any, *, k_override: int | None, tools: Any, options: Any
) -> tuple[list[Task], dict[str, Any]]:
    """``tasks=``: the asks of the rows ``source`` names, and what the report says of them
    (``tasks``, ``task_rows``, ``k_pinned``, ``facts_from``). Raises ``ValueError`` as
    ``replay_tasks``, and as ``rows.load_rows`` for a file it cannot read."""
    rows = load_rows_source(source, "tasks")
    try:
        tasks, k_orig, sources = replay_tasks(
            rows, k_override=k_override, tools=tools, options=options
        )
    except ValueError as exc:
        if isinstance(source, str | Path):  # name the file the rows came from
            raise ValueError(f"tasks={str(source)!r}: {exc}") from exc
        raise
    info = {
        "tasks": len(tasks),
        "task_rows": len(rows),
        "k_pinned": k_orig,
        "facts_from": {"writer": sources["writer"], "row": sources["row"]},
    }
    return tasks, info


def rerun_tasks(first: list[Task], k: int) -> list[Task]:
    """Fresh copies of the asks run 0 opened, for runs 1..N-1 (``arm="replay"``)."""
    return [
        Task(
            t.situation,
            t.phrasing_index,
            t.prompt,
            t.writer_model,
            k,
            replayed_from=t.replayed_from,
            writer_lineage=t.writer_lineage,
            arm="replay",
            fault_rate=t.fault_rate,
        )
        for t in first
    ]


def trace_seeds(
    source: Any,
    knobs: Knobs,
    seed: int,
    *,
    k: int,
    tools: Any,
    options: Any,
) -> tuple[Callable[[list[Any], int], list[Any]], dict[str, Any], list[Task], list[str]]:
    """``traces=``: ``(aim, info, seed tasks, warnings)``.

    The first ``failing_seeds_cap`` failing asks of the traces (0: none) become seed tasks
    (``arm="seed"``, k rollouts each) when their rows carry writer lineage; every failing row
    aims fresh draws (``trace_aim``). A seed
    that cannot be rebuilt is a warning, not an error. Raises ``ValueError`` when the source
    cannot be read.
    """
    rows = load_rows_source(source, "traces")
    aim, info = trace_aim(rows, knobs, seed)
    # The cap bounds the seed asks only (0 = none); every failing row still aims the grid.
    cap = knobs.failing_seeds_cap
    failing = info.pop("failing_rows")[:cap]
    info["failing_seeds_cap"] = cap
    warnings: list[str] = []
    seeds: list[Task] = []
    rebuildable = [
        r
        for r in failing
        if ((r.get("lineage") or {}).get("writer") or {}).get("index") is not None
    ]
    if rebuildable:
        try:
            seeds, _, _ = replay_tasks(
                rebuildable, k_override=k, tools=tools, options=options, what="traces"
            )
        except ValueError as exc:
            warnings.append(f"traces=: failing asks could not seed the run ({exc})")
            seeds = []
        for t in seeds:
            # A seed is a fresh ask of this run at this run's fault rate, not a replay.
            t.writer_model, t.replayed_from, t.arm, t.fault_rate = "seed", None, "seed", None
    if len(rebuildable) < len(failing):
        warnings.append(
            f"traces=: {len(failing) - len(rebuildable)} failing rows carry no writer lineage; they aim the grid "
            "but cannot be replayed as seed asks"
        )
    info["seeds"] = len(seeds)
    return aim, info, seeds, warnings


def trace_aim(
    rows: list[dict[str, Any]], knobs: Knobs, seed: int
) -> tuple[Callable[[list[Any], int], list[Any]], dict[str, Any]]:
    """Aim the grid at the trace regions that failed: a weighted draw over candidates.

    Returns ``aim(pool, want)`` (``want`` situations of ``pool``, in pool order, drawn with
    weight ``1 + allocation_gain x`` the best match to a failing region's share) and the
    report's ``traces_info`` (with ``failing_rows`` for the caller to pop).
    """
    import numpy as np

    thr = knobs.pass_threshold
    failing = []
    for r in rows:
        reward = r.get("reward")
        fired = ((r.get("faults") or {}).get("fired")) or []
        if (reward is not None and reward < thr) or fired:
            failing.append(r)
    regions: Counter[tuple[Any, Any]] = Counter()
    for r in failing:
        d = r.get("scenario_dimensions") or {}
        regions[(d.get("tool"), d.get("tool_condition"))] += 1
    total = sum(regions.values())
    share = {k: v / total for k, v in regions.items()} if total else {}
    gain = knobs.allocation_gain
    wt, wc = knobs.allocation_tool_weight, knobs.allocation_condition_weight
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
