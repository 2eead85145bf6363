"""Asks taken from earlier rows: ``tasks=`` (replay a run's asks), ``traces=`` (seed the run
with failing asks and aim fresh draws at their regions) and ``runs=N`` (later runs replay the
first run's asks).

A row does not carry its situation's world records; it carries ``lineage.writer`` (the
template writer's parameters and draw index), and the writer is deterministic, so the
situation is rebuilt by drawing again.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wai_exp.simulate.ids import stable_hash
from wai_exp.simulate.tasks import Task


def load_rows_source(source: Any, what: str) -> list[dict[str, Any]]:
    """Rows from a SimulationData (anything with ``.trajectories``), a list of row dicts, a
    JSONL path, or a run/stage directory holding one ``rows.jsonl``.

    Raises ``ValueError`` naming ``what`` when the source cannot be read, a directory holds
    no rows or several stage folders do.
    """
    from wai_exp.rows.jsonl import read_rows

    if hasattr(source, "trajectories"):
        return [dict(r) for r in source.trajectories]
    if isinstance(source, str | Path):
        path = _rows_path(source, what)
        rows = read_rows(path)
        if not rows:
            raise ValueError(
                f"{what}={str(source)!r}: {path} holds no rows (empty, or one torn line); "
                "pass the rows.jsonl of a run that produced rows"
            )
        return rows
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


def _writer_key(params: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        params.get("seed"),
        params.get("hard_share"),
        params.get("phrasings"),
        params.get("unique"),
        json.dumps(params.get("focus"), sort_keys=True) if params.get("focus") else None,
    )


def regenerate(
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
        entry = wanted.setdefault(_writer_key(params), {"params": params, "ids": {}, "written": {}})
        entry["ids"][str(r["scenario_id"])] = int(params["index"])
        if params.get("model") and params.get("asks"):
            entry["written"][str(r["scenario_id"])] = (
                params,
                dict(r.get("scenario_dimensions") or {}),
            )
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
            written = entry["written"].get(sid)
            if written is not None:
                # A model wrote the words: the plan's draw gives the facts, the row the rest.
                sit = _model_written(sit, written)
            if str(sit.scenario_id) != sid:
                raise ValueError(
                    f"{what}: situation {sid} could not be rebuilt (the writer now draws {sit.scenario_id} "
                    "at its index); replay under the tools, system prompt and advanced.world of the original run"
                )
            out[sid] = sit
    return out


def _model_written(plan_sit: Any, written: tuple[Mapping[str, Any], dict[str, Any]]) -> Any:
    """The situation a model writer made of the plan's draw ``plan_sit``: the row's cell (as
    relabelled by the writer), the plan's facts, the written asks; its id is recomputed, so
    a draw that no longer matches is caught by the caller."""
    from wai_exp.simulate.model_writer import _content_id
    from wai_exp.simulate.writer import Situation

    params, dims = written
    asks = [str(a) for a in params["asks"]]
    return Situation(
        scenario_id=_content_id(dims, plan_sit.entities, asks, str(params["model"])),
        dims=dims,
        phrasings=tuple(asks),
        entities=dict(plan_sit.entities),
    )


def replay_tasks(
    rows: list[dict[str, Any]],
    *,
    k_override: int | None,
    tools: Any,
    system_prompt: Any,
    options: Any,
    what: str = "tasks",
) -> tuple[list[Task], int]:
    """The task set of a previous run: one task per (scenario, phrasing) in first-seen order.

    Returns the tasks and the pinned run's k (its largest group: a split-allocated run
    extends to k only where groups split, so its largest group is the k it ran under).
    Raises ``ValueError`` for rows without ``scenario_id``/``prompt``, no rows, or asks that
    cannot be rebuilt.
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
    per_run: Counter[tuple[str, str, Any]] = Counter()
    for key, g in groups.items():
        for r in g:
            per_run[(*key, (r.get("lineage") or {}).get("eval_run"))] += 1
    k_orig = max(per_run.values())
    k = k_override if k_override is not None else k_orig
    situations = regenerate(
        [g[0] for g in groups.values()],
        tools=tools,
        system_prompt=system_prompt,
        options=options,
        what=what,
    )
    tasks: list[Task] = []
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
            Task(
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


def pinned_tasks(
    source: Any, *, k_override: int | None, tools: Any, system_prompt: Any, options: Any
) -> tuple[list[Task], dict[str, Any]]:
    """``tasks=``: the asks of the run ``source`` names, and what the report says of them
    (``tasks``, ``task_rows``, ``k_pinned``). Raises ``ValueError`` as ``replay_tasks``."""
    rows = load_rows_source(source, "tasks")
    try:
        tasks, k_orig = replay_tasks(
            rows, k_override=k_override, tools=tools, system_prompt=system_prompt, options=options
        )
    except ValueError as exc:
        if isinstance(source, str | Path):  # name the file the rows came from
            raise ValueError(f"tasks={str(source)!r}: {exc}") from exc
        raise
    return tasks, {"tasks": len(tasks), "task_rows": len(rows), "k_pinned": k_orig}


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
        )
        for t in first
    ]


def trace_seeds(
    source: Any,
    knobs: Mapping[str, Any],
    seed: int,
    *,
    k: int,
    tools: Any,
    system_prompt: Any,
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
    cap = int(knobs["failing_seeds_cap"])
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
            seeds, _ = replay_tasks(
                rebuildable,
                k_override=k,
                tools=tools,
                system_prompt=system_prompt,
                options=options,
                what="traces",
            )
        except ValueError as exc:
            warnings.append(f"traces=: failing asks could not seed the run ({exc})")
            seeds = []
        for t in seeds:
            t.writer_model, t.replayed_from, t.arm = "seed", None, "seed"
    if len(rebuildable) < len(failing):
        warnings.append(
            f"traces=: {len(failing) - len(rebuildable)} failing rows carry no writer lineage; they aim the grid "
            "but cannot be replayed as seed asks"
        )
    info["seeds"] = len(seeds)
    return aim, info, seeds, warnings


def trace_aim(
    rows: list[dict[str, Any]], knobs: Mapping[str, Any], seed: int
) -> tuple[Callable[[list[Any], int], list[Any]], dict[str, Any]]:
    """Aim the grid at the trace regions that failed: a weighted draw over candidates.

    Returns ``aim(pool, want)`` (``want`` situations of ``pool``, in pool order, drawn with
    weight ``1 + allocation_gain x`` the best match to a failing region's share) and the
    report's ``traces_info`` (with ``failing_rows`` for the caller to pop).
    """
    import numpy as np

    thr = float(knobs["pass_threshold"])
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
