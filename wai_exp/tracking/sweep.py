"""A sweep's results per swept value: which keys were swept, the per-value table, and the
re-run spread over replicate jobs only. Pure functions over child-run data (no MLflow).

A child is ``{"run_id", "run_name", "status", "overrides": [str], "metrics": {name: value}}``,
optionally with ``"tasks": {task key: pass rate}`` (its graded stage's per-task means): then
the table says how many tasks each value measured and shares with the others, and
:func:`paired_deltas` compares adjacent values over the tasks they share.
Keys that differ between children are the swept keys. ``seed`` and ``replicate`` (with or
without a ``+``, and ``knobs.seed``) are replicate keys: jobs that differ only in them are
re-runs of one configuration, and only their spread is a re-run spread (``run_std``, the noise
band). A sweep over ``agent.skill`` gets a mean and interval per skill, never a noise floor:
the spread between skills is the effect being measured.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from wai_exp.domain.numbers import finite_float
from wai_exp.domain.plurals import counted

__all__ = [
    "PIN_KNOB",
    "PIN_OVERRIDE",
    "REPLICATE_KEYS",
    "as_parent_typed",
    "as_typed",
    "drew_own_tasks",
    "format_table",
    "override_list",
    "paired_deltas",
    "parent_metrics",
    "parse_overrides",
    "pinned_by",
    "per_value_table",
    "planned_jobs",
    "same_value",
    "seeds_needed",
    "spread_label",
    "spread_line",
    "summary_lines",
    "sweep_answer",
    "replicate_spread",
    "swept_keys",
    "table_csv",
    "table_markdown",
    "table_notes",
    "unpinned",
]

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
REPLICATE_KEYS = frozenset({"seed", "replicate", "knobs.seed"})
#: The knob a sweep with ``sweep.tasks=same`` sets to 0 on every job so every value draws
#: the same asks per seed (``commands.sweep_check.pin_tasks``): failing rows steer nothing.
PIN_KNOB = "knobs.writer_context_parents"
#: That override as the sweep adds it.
PIN_OVERRIDE = f"{PIN_KNOB}=0"
#: The headline metric and its interval bounds, as the tracker logs them.
HEADLINE = "pass_at_1"
#: How a value's interval over its re-runs is named (``seeds_needed`` sizes only these).
T_INTERVAL = "95% t interval"
#: The k-way metrics a row carries with their intervals, and how the table heads them.
K_WAY = ("pass_pow_k", "pass_at_k")


def parse_overrides(overrides: Sequence[str] | str) -> dict[str, str]:
    """``{key: value}`` from overrides (a list, or one space-joined string); a leading
    ``+``/``++`` is dropped from the key; deletions (``~key``) are skipped."""
    items = overrides.split() if isinstance(overrides, str) else list(overrides)
    out: dict[str, str] = {}
    for item in items:
        text = str(item).strip()
        if not text or text.startswith("~") or "=" not in text:
            continue
        key, _, value = text.lstrip("+").partition("=")
        out[key] = value
    return out


#: A backslash escape Hydra's sweeper writes into a job's unquoted string value (its
#: grammar's ESC characters), when it writes each job's overrides back as text.
_HYDRA_ESCAPE = re.compile(r"\\([\\()\[\]{}:=, \t])")


def as_typed(overrides: Any, *, from_sweeper: bool = False) -> list[str]:
    """The override strings as the user typed them. Iterating an OmegaConf ListConfig
    resolves each ``${...}`` in it (``agent.model=${oc.env:MODEL}`` read as its value, and an
    unset variable raised), so it is copied unresolved. ``from_sweeper``: a multirun job's
    overrides, which Hydra's sweeper wrote back with every special character of a string value
    escaped (``http\\://h``, ``$\\{oc.env\\:X\\}``); those escapes are undone."""
    if type(overrides).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        overrides = OmegaConf.to_container(overrides, resolve=False)
    items = [str(o) for o in overrides or []]
    return [unescaped(o) for o in items] if from_sweeper else items


def unescaped(override: str) -> str:
    """``override`` with Hydra's escapes in its value undone (``a=http\\://h`` ->
    ``a=http://h``); a quoted value is Hydra's as typed and kept."""
    key, eq, value = override.partition("=")
    if not eq or value[:1] in ("'", '"'):
        return override
    return key + "=" + _HYDRA_ESCAPE.sub(r"\1", value)


def _canonical(value: str | None) -> str | None:
    """A value as Hydra reads it, for comparing two spellings: escapes undone, ``False`` and
    ``false`` one, ``0.50`` and ``0.5`` one."""
    if value is None:
        return None
    text = unescaped(f"={value}")[1:]
    if text.lower() in ("true", "false", "null"):
        return text.lower()
    number = _num_text(text)
    return repr(number) if number is not None else text


def same_value(a: str | None, b: str | None) -> bool:
    """Whether two override values are one value however they were spelled."""
    return _canonical(a) == _canonical(b)


def as_parent_typed(overrides: Sequence[str], parent: Sequence[str]) -> list[str]:
    """A sweep job's ``overrides`` with each one that sets a key to the value the sweep's
    command line (``parent``) gave it written as typed there (``seed=1`` stays, Hydra's
    ``tracking.plots=False`` becomes the typed ``tracking.plots=false``)."""
    typed = {
        text.partition("=")[0]: text for text in parent if "=" in text and not text.startswith("~")
    }
    out = []
    for text in overrides:
        key, _, value = text.partition("=")
        mine = typed.get(key)
        out.append(mine if mine is not None and same_value(mine.partition("=")[2], value) else text)
    return out


def override_list(tags: Mapping[str, str]) -> list[str]:
    """A run's overrides as the list it was started with (``wai.override_list``), else the
    space-joined ``wai.overrides`` split on spaces."""
    raw = tags.get("wai.override_list")
    if raw:
        with contextlib.suppress(ValueError, TypeError):
            items = json.loads(raw)
            if isinstance(items, list):
                return [str(x) for x in items]
    return [x for x in tags.get("wai.overrides", "").split() if x]


def unpinned(overrides: Sequence[str]) -> list[str]:
    """``overrides`` without the sweep's ``PIN_OVERRIDE``: run names show what tells a sweep's
    runs apart, and the pin is the same on every one (tags and descriptions keep it)."""
    return [o for o in overrides if str(o).strip() != PIN_OVERRIDE]


def pinned_by(overrides: Sequence[str] | str) -> str | None:
    """``PIN_KNOB`` when the sweep's overrides set it to 0 (its asks follow the seed, not
    the agent), else None."""
    value = parse_overrides(overrides).get(PIN_KNOB)
    return PIN_KNOB if value is not None and _num_text(value) == 0 else None


def swept_keys(children: Sequence[Mapping[str, Any]]) -> list[str]:
    """The override keys whose value is not the same in every child, in first-seen order."""
    parsed = [parse_overrides(c.get("overrides") or []) for c in children]
    keys: list[str] = []
    for p in parsed:
        keys.extend(k for k in p if k not in keys)
    return [k for k in keys if len({p.get(k) for p in parsed}) > 1]


def _sort_key(value: str) -> tuple[int, float, str]:
    f = _num_text(value)
    return (0, f, "") if f is not None else (1, 0.0, value)


def _num_text(value: str) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def per_value_table(
    children: Sequence[Mapping[str, Any]], *, metric: str = HEADLINE
) -> dict[str, Any]:
    """One row per combination of the non-replicate swept keys' values.

    Returns ``{"swept", "value_keys", "replicate_keys", "rows"}``; each row holds the values
    (``values``: {key: value}), ``n_runs``, ``mean`` of ``metric`` over its finished runs,
    ``ci_lo``/``ci_hi`` and ``interval`` (how the interval was made: a t interval over the
    re-runs when there are two or more, else the one run's own 95% interval from its
    ``<metric>_ci_lo``/``_ci_hi`` metrics), ``pass_pow_k``/``pass_at_k``/``rows_kept`` means,
    and the run names. A combination whose runs all lack the metric has ``mean`` None.
    Only FINISHED children count. Never raises on odd inputs.
    """
    from scipy import stats

    done = [c for c in children if c.get("status", "FINISHED") == "FINISHED"]
    swept = swept_keys(children)
    value_keys = [k for k in swept if k not in REPLICATE_KEYS]
    replicate = [k for k in swept if k in REPLICATE_KEYS]
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for c in done:
        p = parse_overrides(c.get("overrides") or [])
        groups.setdefault(tuple(p.get(k, "") for k in value_keys), []).append(c)
    rows = []
    task_sets = {combo: _task_set(runs) for combo, runs in groups.items()}
    for combo in sorted(groups, key=lambda t: tuple(_sort_key(v) for v in t)):
        runs = groups[combo]
        vals = [v for v in (finite_float(r["metrics"].get(metric)) for r in runs) if v is not None]
        row: dict[str, Any] = {
            "values": dict(zip(value_keys, combo, strict=True)),
            "n_runs": len(runs),
            "n_measured": len(vals),
            "mean": None,
            "ci_lo": None,
            "ci_hi": None,
            "interval": "not measured",
            "runs": [str(r.get("run_name") or r.get("run_id")) for r in runs],
            "run_ids": [str(r.get("run_id")) for r in runs],
            "sd": None,
            **_task_counts(combo, task_sets),
        }
        if len(vals) >= 2:
            mean = sum(vals) / len(vals)
            sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
            half = float(stats.t.ppf(0.975, len(vals) - 1)) * sd / math.sqrt(len(vals))
            row.update(
                sd=sd,
                mean=mean,
                ci_lo=max(0.0, mean - half),
                ci_hi=min(1.0, mean + half),
                interval=f"{T_INTERVAL} over {len(vals)} re-runs",
            )
            row.update(_over_tasks(runs))
        elif len(vals) == 1:
            m = next(
                r["metrics"] for r in runs if finite_float(r["metrics"].get(metric)) is not None
            )
            lo, hi = finite_float(m.get(f"{metric}_ci_lo")), finite_float(m.get(f"{metric}_ci_hi"))
            row.update(
                mean=vals[0],
                ci_lo=lo,
                ci_hi=hi,
                interval="95% interval of the one run"
                if lo is not None
                else "one run, no interval",
            )
        for name in K_WAY:
            row.update(_k_way(runs, name))
        xs = [
            v for v in (finite_float(r["metrics"].get("rows_kept")) for r in runs) if v is not None
        ]
        row["rows_kept"] = sum(xs) / len(xs) if xs else None
        rows.append(row)
    shared = _intersection([t for t in task_sets.values() if t is not None])
    return {
        "swept": swept,
        "value_keys": value_keys,
        "replicate_keys": replicate,
        "rows": rows,
        "shared_tasks": None if shared is None or len(task_sets) < 2 else len(shared),
        "nested": _nested([t for t in task_sets.values() if t is not None]),
    }


def _k_way(runs: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any]:
    """A value's ``name`` (``pass_pow_k`` or ``pass_at_k``) with its 95% interval: the one
    run's own, or over the tasks its runs measured (each task's estimate averaged over the
    runs: the way pass@1 pools seeds), else a t interval over the re-runs. ``<name>_why``
    says why the number or its interval is not measured; ``k`` is the runs' k."""
    out: dict[str, Any] = {name: None, f"{name}_ci_lo": None, f"{name}_ci_hi": None}
    ks = sorted({int(r["k"]) for r in runs if finite_float(r.get("k")) is not None})
    out["k"] = ks[0] if len(ks) == 1 else None
    vals = [v for v in (finite_float(r["metrics"].get(name)) for r in runs) if v is not None]
    if not vals:
        said = next((str(r["k_note"]) for r in runs if r.get("k_note")), None)
        return {**out, f"{name}_why": said or "no run measured it"}
    if len(ks) > 1:
        return {**out, f"{name}_why": f"its runs drew different k ({', '.join(map(str, ks))})"}
    if len(vals) == 1:
        m = next(r["metrics"] for r in runs if finite_float(r["metrics"].get(name)) is not None)
        lo, hi = finite_float(m.get(f"{name}_ci_lo")), finite_float(m.get(f"{name}_ci_hi"))
        why = None if lo is not None and hi is not None else "its one run recorded none"
        return {**out, name: vals[0], f"{name}_ci_lo": lo, f"{name}_ci_hi": hi, f"{name}_why": why}
    return {**out, **_k_way_pooled(runs, name, vals)}


def _k_way_pooled(
    runs: Sequence[Mapping[str, Any]], name: str, vals: Sequence[float]
) -> dict[str, Any]:
    """Two or more runs of one value: over their tasks when every run recorded its per-task
    estimates (``tasks_<name>``), else the mean of the runs with a t interval over them."""
    from wai_exp.score.stats.resample import rate_interval

    field = f"tasks_{name}"
    if all(isinstance(r.get(field), Mapping) for r in runs):
        means = _task_means(runs, field)
        if not means:
            return {name: None, f"{name}_why": "no task had k graded repeats"}
        mean = sum(means.values()) / len(means)
        if len(means) < _min_tasks():
            return {name: mean, f"{name}_why": _few_tasks(len(means))}
        # A task's estimate is one number however many rows it read, as a single run counts it.
        res = rate_interval(list(means.values()), len(means))
        if res.interval is not None:
            lo, hi = (float(x) for x in res.interval)
            return {name: float(res.estimate), f"{name}_ci_lo": lo, f"{name}_ci_hi": hi,
                    f"{name}_why": None}  # fmt: skip
    from scipy import stats

    mean = sum(vals) / len(vals)
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
    half = float(stats.t.ppf(0.975, len(vals) - 1)) * sd / math.sqrt(len(vals))
    return {
        name: mean,
        f"{name}_ci_lo": max(0.0, mean - half),
        f"{name}_ci_hi": min(1.0, mean + half),
        f"{name}_why": None,
    }


def _min_tasks() -> int:
    """Fewest tasks a rate's interval is computed over, as a single run's report has it."""
    from wai_exp.score.stats.passat import MIN_CI_GROUPS

    return MIN_CI_GROUPS


def _few_tasks(n: int) -> str:
    return (
        f"an interval over {counted(n, 'task')} measures nothing (it needs >= "
        f"{_min_tasks()}): run more tasks"
    )


def _nested(sets: Sequence[set[str]]) -> bool:
    """Whether each task set holds every smaller one: the values drew the same asks and
    opened fewer or more of them (an allocating policy spends the budget on extensions)."""
    ordered = sorted(sets, key=len)
    return all(a <= b for a, b in zip(ordered, ordered[1:], strict=False))


def _over_tasks(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A value's pass@1 over its tasks, the runs' per-task rates pooled, with the 95%
    interval over those tasks (a single run's method, ``rate_interval``), when every one of its
    finished runs recorded its tasks; else {} (the t interval over the re-runs stays).

    Why: a t interval over 2 seeds has 1 degree of freedom (0.000–1.000 for a 0.4 pass@1);
    the tasks the seeds measured are what the estimate rests on."""
    from wai_exp.score.stats.resample import rate_interval

    if not runs or any(not isinstance(r.get("tasks"), Mapping) for r in runs):
        return {}
    means = _task_means(runs)
    if len(means) < 2:
        return {}
    # Each run's rate of a task rests on at least one row: a floor on the rows behind them.
    measured = sum(len(r["tasks"]) for r in runs)
    res = rate_interval(list(means.values()), measured)
    if res.interval is None:
        return {}
    lo, hi = (float(x) for x in res.interval)
    return {
        "mean": float(res.estimate),
        "ci_lo": lo,
        "ci_hi": hi,
        "interval": f"95% interval over {len(means)} tasks (seeds pooled per task)",
    }


def _task_set(runs: Sequence[Mapping[str, Any]]) -> set[str] | None:
    """The tasks a value's finished runs measured (their union), None when no run says."""
    sets = [set(r["tasks"]) for r in runs if isinstance(r.get("tasks"), Mapping)]
    return set().union(*sets) if sets else None


def _intersection(sets: Sequence[set[str]]) -> set[str] | None:
    return set.intersection(*sets) if sets else None


def _task_counts(
    combo: tuple[str, ...], task_sets: Mapping[tuple[str, ...], set[str] | None]
) -> dict[str, int | None]:
    """``n_tasks`` (the value's tasks) and ``n_shared`` (those every other value measured
    too); None when the runs did not say which tasks they measured."""
    mine = task_sets.get(combo)
    if mine is None:
        return {"n_tasks": None, "n_shared": None}
    others = [t for c, t in task_sets.items() if c != combo]
    known = [t for t in others if t is not None]
    if len(known) < len(others):
        return {"n_tasks": len(mine), "n_shared": None}
    return {"n_tasks": len(mine), "n_shared": len(mine.intersection(*known))}


def _task_means(runs: Sequence[Mapping[str, Any]], field: str = "tasks") -> dict[str, float]:
    """Per task, its pass rate (or the estimate ``field`` holds) averaged over the value's
    runs that measured it."""
    acc: dict[str, list[float]] = {}
    for r in runs:
        for task, v in (r.get(field) or {}).items():
            if (f := finite_float(v)) is not None:
                acc.setdefault(str(task), []).append(f)
    return {t: sum(v) / len(v) for t, v in acc.items()}


def paired_deltas(children: Sequence[Mapping[str, Any]], *, seed: int = 0) -> list[dict[str, Any]]:
    """Each swept value against the one before it, paired over the tasks both measured.

    Per task, a value's pass rate is averaged over its finished re-runs; the delta is the
    mean over shared tasks of (this value - previous value), with compare's 95% paired
    interval over those tasks (``stats.paired_task_interval``; ``note`` says when every
    task moved by the same amount and the bootstrap could not vary). ``verdict`` is
    ``compare``'s headline word for it (``delta.paired_headline``: the earlier value as
    before, each value's finished runs as its eval runs). Entries are ``{"values", "vs",
    "n_shared", "delta", "ci_lo", "ci_hi", "n_runs", "verdict", "note"}`` (``n_runs``:
    ``[earlier, this]``); [] when the children carry no per-task data or fewer than two
    values were swept.
    """
    import numpy as np

    from wai_exp.score.stats.delta import paired_headline
    from wai_exp.score.stats.stats import paired_task_interval

    table = per_value_table(children)
    keys = table["value_keys"]
    if not keys or len(table["rows"]) < 2:
        return []
    done = [c for c in children if c.get("status", "FINISHED") == "FINISHED"]
    by_combo: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for c in done:
        p = parse_overrides(c.get("overrides") or [])
        by_combo.setdefault(tuple(p.get(k, "") for k in keys), []).append(c)
    out: list[dict[str, Any]] = []
    prev: dict[str, Any] | None = None
    for row in table["rows"]:
        means = _task_means(by_combo.get(tuple(row["values"][k] for k in keys), []))
        if not means:
            return []
        if prev is not None:
            shared = sorted(set(means) & set(prev["means"]))
            entry: dict[str, Any] = {
                "values": row["values"],
                "vs": prev["values"],
                "n_shared": len(shared),
                "delta": None,
                "ci_lo": None,
                "ci_hi": None,
                "n_runs": [prev["n_runs"], row["n_measured"]],
                "verdict": None,
                "note": None,
            }
            if len(shared) < 2:
                entry["note"] = f"{counted(len(shared), 'shared task')}: no paired interval"
            else:
                a = np.array([prev["means"][t] for t in shared])
                b = np.array([means[t] for t in shared])
                iv, _, entry["note"] = paired_task_interval(a, b, seed=seed)
                entry["delta"] = float((b - a).mean())
                if iv is not None:
                    entry["ci_lo"], entry["ci_hi"] = float(iv.low), float(iv.high)
            ci = None if entry["ci_lo"] is None else (entry["ci_lo"], entry["ci_hi"])
            entry["verdict"] = paired_headline(entry["delta"], ci, *entry["n_runs"])
            out.append(entry)
        prev = {"values": row["values"], "means": means, "n_runs": row["n_measured"]}
    return out


def sweep_answer(jobs: Sequence[Mapping[str, Any]], overrides: Sequence[str]) -> dict[str, Any]:
    """The sweep's answer from its jobs (children as the module docstring has them):
    ``per_value`` (the table), ``spread`` (the re-run spread over replicates), ``paired``
    (deltas between adjacent values) and ``notes`` (the lines under the table). Whatever
    recorded the jobs (MLflow child runs, or only their run folders), this is the one path
    from jobs to the table and the words under it."""
    per_value = per_value_table(jobs)
    paired = paired_deltas(jobs)
    notes = table_notes(per_value, paired, seeds_needed(per_value), pinned=pinned_by(overrides))
    return {
        "per_value": per_value,
        "spread": replicate_spread(jobs),
        "paired": paired,
        "notes": notes,
    }


def planned_jobs(config: Any) -> list[list[str]] | None:
    """The override list of every job the basic sweeper will launch for ``config`` (the
    composed multirun config), in its order; None for another sweeper."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    sweeper = OmegaConf.select(config, "hydra.sweeper._target_")
    if sweeper != BASIC_SWEEPER:
        return None
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    arguments = [f"{k}={v}" for k, v in dict(params).items()]
    task = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    assert isinstance(task, list)  # hydra.overrides.task is a list of override strings
    arguments += [str(a) for a in task]
    parsed = OverridesParser.create().parse_overrides(arguments)
    [jobs] = BasicSweeper.split_arguments(parsed, None)
    return [list(job) for job in jobs]


def summary_lines(
    answer: Mapping[str, Any], n_jobs: int, n_finished: int, error: str | None = None
) -> list[str]:
    """The sweep's summary for the terminal: how many jobs finished, what was swept, the
    table, the lines under it and the re-run spread (or why it was not measured). With no
    job (Hydra stopped the sweep before its first one) only that and ``error``."""
    per_value = answer["per_value"]
    if not n_jobs:  # no job, no table; what was swept is read off the jobs
        return ["wai-exp sweep: no job ran", *([f"error: {error}"] if error else [])]
    return [
        f"wai-exp sweep: {n_finished} of {n_jobs} jobs finished; "
        f"swept: {', '.join(per_value['swept']) or 'nothing'}",
        *([f"error: {error}"] if error else []),
        format_table(per_value),
        *answer["notes"],
        spread_line(answer["spread"]),
    ]


def drew_own_tasks(task_sets: Iterable[Iterable[Any]]) -> bool:
    """Whether replicates ran on different tasks (each seed wrote its own asks, unpinned):
    their spread then holds task sampling, and their pooled rows are one run a task."""
    return len({frozenset(map(str, tasks)) for tasks in task_sets}) > 1


def spread_line(spread: Mapping[str, Any], *, markdown: bool = False) -> str:
    """The replicate spread in one line, as the terminal and (``markdown``: the label in
    bold, the band's t quantile added) the parent run's description say it: what it measured
    (``spread_label``), then ``run_std`` and the noise band, or "not measured" and why."""
    label = spread_label(spread)
    if spread.get("run_std") is None:
        body = f"not measured ({spread.get('note') or 'no reason recorded'})"
    else:
        body = f"run_std {spread['run_std']:.3f}, noise band ±{spread['noise_band']:.3f}"
        if markdown:
            body += f" (±{spread['noise_band_t']:.3f} with the t quantile, df {spread['df']})"
    return f"**{label[0].upper()}{label[1:]}**: {body}" if markdown else f"{label}: {body}"


def spread_label(spread: Mapping[str, Any]) -> str:
    """What the replicate spread measured: a re-run spread, unmeasured when no two jobs
    differ only by replicate. Replicates that drew different tasks (each seed writes its
    own asks) spread by task sampling as well as re-run noise: calling that a re-run floor
    would tell a deterministic agent its eval moves on a re-run."""
    if spread.get("run_std") is None:
        return "re-run spread"
    if spread.get("tasks_differ"):
        return (
            "seed-to-seed spread (each replicate drew its own tasks: task sampling and re-run "
            "noise together, not a same-task re-run floor; +experiment=eval_variance measures "
            "that)"
        )
    return "re-run spread (replicates only)"


def seeds_needed(table: Mapping[str, Any]) -> list[dict[str, Any]]:
    """How many re-runs (seeds) per value the table needs to tell adjacent values apart.

    For adjacent rows whose t intervals over re-runs overlap (rows with an interval over
    tasks are left to the paired deltas), with the re-run sd pooled over the two values
    (rows with two or more re-runs), the smallest ``n`` per value at which the two t intervals
    the table prints (``t(0.975, n-1) * sd / sqrt(n)`` each side) no longer overlap for the
    observed gap, if the sd and the gap stay as measured. Entries: ``{"values", "vs", "gap", "sd", "n_now", "n_needed"}``
    (``n_needed`` None when the gap is 0 or no re-run sd was measured).
    """
    rows = table["rows"]
    out: list[dict[str, Any]] = []
    for before, row in zip(rows, rows[1:], strict=False):
        bounds = [finite_float(r.get(k)) for r in (before, row) for k in ("ci_lo", "ci_hi")]
        if row["mean"] is None or before["mean"] is None:
            continue
        if not all(str(r.get("interval")).startswith(T_INTERVAL) for r in (before, row)):
            continue  # intervals over tasks: the paired deltas say what separates them
        lo0, hi0, lo1, hi1 = bounds
        if lo0 is None or hi0 is None or lo1 is None or hi1 is None:
            continue
        if hi0 < lo1 or hi1 < lo0:
            continue  # the intervals already separate the two values
        sds = [(r["sd"], r["n_measured"]) for r in (before, row) if r.get("sd") is not None]
        df = sum(n - 1 for _, n in sds)
        sd = math.sqrt(sum(s * s * (n - 1) for s, n in sds) / df) if df else None
        gap = abs(row["mean"] - before["mean"])
        n_needed = _separating_n(sd, gap) if sd and gap > 0 else None
        out.append(
            {
                "values": row["values"],
                "vs": before["values"],
                "gap": gap,
                "sd": sd,
                "n_now": min(before["n_measured"], row["n_measured"]),
                "n_needed": n_needed,
            }
        )
    return out


def _separating_n(sd: float, gap: float, most: int = 10_000) -> int | None:
    """Smallest n >= 2 with ``2 * t(0.975, n-1) * sd / sqrt(n) < gap``; None past ``most``."""
    from scipy import stats

    for n in range(2, most + 1):
        if 2 * float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n) < gap:
            return n
    return None


def _value_label(values: Mapping[str, Any]) -> str:
    return ",".join(f"{k}:{v}" for k, v in values.items()) or "all"


def parent_metrics(
    table: Mapping[str, Any], paired: Sequence[Mapping[str, Any]] = ()
) -> dict[str, float]:
    """The sweep parent's metrics: per value ``pass_at_1/<key>:<value>`` with ``_ci_lo``/
    ``_ci_hi``, ``n_tasks``/``n_shared`` when known, and per adjacent pair
    ``delta/<key>:<value> vs <value>`` with its paired interval. Metric first, so a metric's
    values sort together in the UI; unmeasured values are left out, never 0."""
    from wai_exp.tracking.params import sanitize_key

    out: dict[str, float] = {}
    for row in table["rows"]:
        label = _value_label(row["values"])
        for name, key in (
            ("pass_at_1", "mean"), ("pass_at_1_ci_lo", "ci_lo"), ("pass_at_1_ci_hi", "ci_hi"),
            ("n_tasks", "n_tasks"), ("n_shared_tasks", "n_shared"),
        ):  # fmt: skip
            if (v := finite_float(row.get(key))) is not None:
                out[sanitize_key(f"{name}/{label}")] = v
    for d in paired:
        label = f"{_value_label(d['values'])} vs {','.join(map(str, d['vs'].values()))}"
        for name, key in (("delta", "delta"), ("delta_ci_lo", "ci_lo"), ("delta_ci_hi", "ci_hi")):
            if (v := finite_float(d.get(key))) is not None:
                out[sanitize_key(f"{name}/{label}")] = v
    return out


def replicate_spread(
    children: Sequence[Mapping[str, Any]], *, metric: str = HEADLINE
) -> dict[str, Any]:
    """The re-run spread of ``metric`` over jobs that differ only by replicate keys.

    Children are grouped by every swept key that is not a replicate key; each group with two
    or more measured runs contributes its within-group variance, pooled with its degrees of
    freedom. Returns ``{"run_std", "df", "n_groups", "n_runs", "noise_band", "noise_band_t",
    "note"}``; ``run_std`` and the bands are None (with the reason in ``note``) when no
    group has two replicates: then nothing in the sweep measures re-run noise.
    """
    from wai_exp.score.stats.resample import noise_band

    table = per_value_table(children, metric=metric)
    done = [c for c in children if c.get("status", "FINISHED") == "FINISHED"]
    groups: dict[tuple[str, ...], list[float]] = {}
    task_sets: dict[tuple[str, ...], list[Iterable[str]]] = {}
    for c in done:
        p = parse_overrides(c.get("overrides") or [])
        v = finite_float(c["metrics"].get(metric))
        if v is not None:
            group = tuple(p.get(k, "") for k in table["value_keys"])
            groups.setdefault(group, []).append(v)
            if c.get("tasks"):
                task_sets.setdefault(group, []).append(c["tasks"])
    ss, df, used, n_runs = 0.0, 0, 0, 0
    for vals in groups.values():
        if len(vals) < 2:
            continue
        mean = sum(vals) / len(vals)
        ss += sum((v - mean) ** 2 for v in vals)
        df += len(vals) - 1
        used += 1
        n_runs += len(vals)
    out: dict[str, Any] = {
        "metric": metric,
        "run_std": None,
        "df": df,
        "n_groups": used,
        "n_runs": n_runs,
        "noise_band": None,
        "noise_band_t": None,
        "note": None,
        "tasks_differ": any(map(drew_own_tasks, task_sets.values())),
    }
    if df == 0:
        out["note"] = (
            "no replicates: no two jobs differ only by seed/replicate, so this sweep measures "
            "no re-run noise (sweep seed=0,1,2 alongside the key for a floor)"
        )
        return out
    sd = math.sqrt(ss / df)
    out.update(run_std=sd, noise_band=noise_band(sd), noise_band_t=noise_band(sd, df=df))
    out["note"] = (
        f"pooled over {counted(used, 'configuration')}, {n_runs} runs that differ only by "
        + (", ".join(table["replicate_keys"]) or "replicate")
    )
    return out


def _cell(v: Any, digits: int = 3) -> str:
    f = finite_float(v)
    if f is None:
        return "—" if v is None else str(v)
    return f"{f:.{digits}f}" if not float(f).is_integer() or digits == 0 else f"{f:g}"


def _ci(row: Mapping[str, Any], name: str | None = None) -> str:
    """A row's interval on pass@1, or on ``name`` (``pass_pow_k``/``pass_at_k``)."""
    pre = f"{name}_" if name else ""
    lo, hi = finite_float(row.get(f"{pre}ci_lo")), finite_float(row.get(f"{pre}ci_hi"))
    return "not measured" if lo is None or hi is None else f"{lo:.3f}–{hi:.3f}"


def _tasks_head(table: Mapping[str, Any]) -> list[str]:
    known = any(r.get("n_tasks") is not None for r in table["rows"])
    return ["tasks (shared)"] if known and len(table["rows"]) > 1 else []


def _tasks_cell(table: Mapping[str, Any], row: Mapping[str, Any]) -> list[str]:
    """``100 (75 shared)``: the value's tasks and how many every other value measured too."""
    if not _tasks_head(table):
        return []
    if row.get("n_tasks") is None:
        return ["not recorded"]
    shared = "?" if row.get("n_shared") is None else row["n_shared"]
    return [f"{row['n_tasks']} ({shared} shared)"]


def table_notes(
    table: Mapping[str, Any],
    paired: Sequence[Mapping[str, Any]] = (),
    needed: Sequence[Mapping[str, Any]] = (),
    pinned: str | None = None,
) -> list[str]:
    """The lines under the table: whether the values were measured on the same tasks (and,
    ``pinned`` being the knob the sweep set to 0, why), the paired deltas between adjacent
    values with ``compare``'s verdict word, and how many seeds would separate the ones whose
    intervals overlap."""
    lines: list[str] = []
    rows = table["rows"]
    n_tasks = {r.get("n_tasks") for r in rows}
    shared = table.get("shared_tasks")
    differ = shared is not None and (len(n_tasks) > 1 or shared != next(iter(n_tasks)))
    if differ and pinned and table.get("nested"):
        sizes = sorted(int(n) for n in n_tasks if n is not None)
        lines.append(
            f"same asks, different allocation: every value drew the same asks in the same order "
            f"({pinned}=0), and the budget opened {sizes[0]}–{sizes[-1]} of them per value "
            "(an allocating repeat policy gives asks whose outcomes split more rollouts, so "
            f"fewer asks fit); the values are paired over the {shared} every value opened, "
            "each task by its fixed first batch"
        )
    elif differ:
        lines.append(
            f"task sets differ: {shared} tasks are shared by every value; each value's "
            "pass@1 is over its own tasks, so read the gaps between values through the "
            "paired deltas over the shared tasks"
        )
    elif shared is not None and shared:
        lines.append(
            f"same tasks: every value ran the same {shared} tasks"
            + (f" ({pinned}=0: failing rows did not steer later asks)" if pinned else "")
            + ", so the values are compared task by task"
        )
    for d in paired:
        what = f"{_value_label(d['values'])} vs {','.join(map(str, d['vs'].values()))}"
        if d.get("delta") is None:
            lines.append(f"paired delta {what}: {d.get('note')}")
            continue
        ci = (
            f"{d['ci_lo']:+.3f} to {d['ci_hi']:+.3f}"
            if d.get("ci_lo") is not None
            else "no interval"
        )
        pooled = ", seeds pooled per task" if max(d.get("n_runs") or [1]) > 1 else ""
        lines.append(
            f"paired delta {what}: {d['delta']:+.3f} (95% CI {ci} over {d['n_shared']} paired "
            f"tasks{pooled}): {d.get('verdict')}"
        )
    lines += _unmeasured_lines(table)
    for n in needed:
        what = f"{_value_label(n['values'])} vs {','.join(map(str, n['vs'].values()))}"
        if n.get("n_needed") is None:
            lines.append(f"seed intervals of {what} overlap; no re-run sd to size more seeds")
        else:
            lines.append(
                f"seed intervals of {what} overlap: about {n['n_needed']} seeds per value "
                f"(now {n['n_now']}) would separate a gap of {n['gap']:.3f} at re-run sd "
                f"{n['sd']:.3f}"
            )
    return lines


def _k_label(table: Mapping[str, Any], name: str) -> str:
    """``pass^4`` when every row drew one k, else ``pass^k``."""
    ks = {r.get("k") for r in table["rows"] if r.get(name) is not None}
    k = next(iter(ks)) if len(ks) == 1 and None not in ks else "k"
    return ("pass^" if name == "pass_pow_k" else "pass@") + str(k)


def _head(table: Mapping[str, Any]) -> list[str]:
    keys = table["value_keys"] or ["jobs"]
    head = [*keys, "runs", "pass@1", "95% CI", *_tasks_head(table)]
    for name in K_WAY:
        head += [_k_label(table, name), "95% CI"]
    return [*head, "rows kept"]


def _cells(table: Mapping[str, Any], row: Mapping[str, Any]) -> list[str]:
    """One row of the per-value table: each pass metric beside its interval."""
    vals = [str(row["values"].get(k, "")) for k in table["value_keys"]] or ["all"]
    cells = [*vals, str(row["n_runs"]), _cell(row["mean"]), _ci(row), *_tasks_cell(table, row)]
    for name in K_WAY:
        cells += [_cell(row.get(name)), _ci(row, name)]
    kept = row.get("rows_kept")
    return [*cells, "—" if kept is None else f"{kept:.0f}"]


def _unmeasured_lines(table: Mapping[str, Any]) -> list[str]:
    """Why a k-way number or its interval is missing from the table, per value."""
    lines = []
    for row in table["rows"]:
        for name in K_WAY:
            why = row.get(f"{name}_why")
            if why and row.get("mean") is not None:
                what = "interval not measured" if row.get(name) is not None else "not measured"
                lines.append(
                    f"{_k_label(table, name)} of {_value_label(row['values'])}: {what} ({why})"
                )
    return lines


def table_markdown(table: Mapping[str, Any]) -> str:
    """The per-value table as a markdown table (for the parent run's description)."""
    head = _head(table)
    if not table["value_keys"]:
        head[0] = "(all jobs)"
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cells(table, row)) + " |" for row in table["rows"]]
    return "\n".join(lines)


def format_table(table: Mapping[str, Any]) -> str:
    """The per-value table as fixed-width text for the terminal."""
    head = _head(table)
    body = [_cells(table, row) for row in table["rows"]]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r).rstrip() for r in [head, *body])


#: The k-way columns of the CSV: each metric, then its interval's bounds.
_K_WAY_COLUMNS = tuple(f"{n}{end}" for n in K_WAY for end in ("", "_ci_lo", "_ci_hi"))


def table_csv(table: Mapping[str, Any]) -> str:
    """The per-value table as CSV: the value keys, then n_runs, pass_at_1 (mean), ci_lo,
    ci_hi, interval, n_tasks, n_shared, k, pass_pow_k and pass_at_k each with its ci_lo and
    ci_hi, rows_kept, run_ids (space-separated)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    keys = table["value_keys"]
    w.writerow(
        [*keys, "n_runs", "pass_at_1", "ci_lo", "ci_hi", "interval", "n_tasks", "n_shared",
         "k", *_K_WAY_COLUMNS, "rows_kept", "run_ids"]
    )  # fmt: skip
    for row in table["rows"]:
        w.writerow(
            [
                *(row["values"].get(k, "") for k in keys),
                row["n_runs"],
                *("" if row[k] is None else repr(row[k]) for k in ("mean", "ci_lo", "ci_hi")),
                row["interval"],
                *("" if row.get(k) is None else row[k] for k in ("n_tasks", "n_shared")),
                "" if row.get("k") is None else row["k"],
                *("" if row.get(k) is None else repr(row[k]) for k in (*_K_WAY_COLUMNS, "rows_kept")),
                " ".join(row["run_ids"]),
            ]
        )  # fmt: skip
    return buf.getvalue()
