"""What a run's MLflow record says at a glance: its name, its markdown description, its
headline metrics and which knobs become params. Pure functions over plain data (no MLflow).

- :func:`run_name`: the preset, then the overrides the user typed (``eval agent.skill=0.6
  seed=1``), with long values shortened and bookkeeping overrides (tracking, cache, hydra,
  the preset pick itself) left out.
- :func:`headline_metrics`: short, readable metric names for the answer (``pass_at_1``,
  ``pass_at_1_ci_lo`` ... ``floor`` ... ``rows_kept``), taken from the stage metrics.
- :func:`describe_run`: the markdown for ``mlflow.note.content``: pass@1 with its interval,
  the floor beside it (a do-nothing agent on the same tasks) and whether pass@1 clears it, pass^k and pass@k, the gate verdict with failed and not-run checks, rows kept of rows made,
  and every stage's warnings. A number that was not measured is said to be unmeasured.
- :func:`split_knobs`: engine knobs that differ from the knob table's default (the params),
  apart from the full table (an artifact).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.domain.numbers import finite_float
from wai_exp.domain.plurals import counted

__all__ = [
    "DELTA_HEADLINE_KEYS",
    "HEADLINE_KEYS",
    "StageNote",
    "describe_run",
    "headline_metrics",
    "headline_stage",
    "keeps_rows",
    "run_headline",
    "run_name",
    "shorten_override",
    "split_knobs",
    "too_few_tasks",
]

#: Override keys that say where or how a run is recorded, not what it computes.
_BOOKKEEPING = ("tracking", "cache", "hydra", "name")
#: Longest value kept whole in a run name; longer ones keep their head and an ellipsis.
MAX_VALUE_CHARS = 24
#: A server value (model spec and host) keeps more: the host is what tells two runs apart.
MAX_SERVER_CHARS = 48
#: Longest run name; further overrides are counted ("+3 more").
MAX_NAME_CHARS = 120

#: Headline metric name -> the stage metric it copies, in the order they are logged.
HEADLINE_KEYS: tuple[tuple[str, str], ...] = (
    ("pass_at_1", "pass_at_1"),
    ("pass_at_1_ci_lo", "pass_at_1_ci_lo"),
    ("pass_at_1_ci_hi", "pass_at_1_ci_hi"),
    ("floor", "floor"),
    ("floor_ci_lo", "floor_ci_lo"),
    ("floor_ci_hi", "floor_ci_hi"),
    ("pass_pow_k", "pass_pow_k"),
    ("pass_pow_k_ci_lo", "pass_pow_k_ci_lo"),
    ("pass_pow_k_ci_hi", "pass_pow_k_ci_hi"),
    ("pass_at_k", "pass_at_k"),
    ("pass_at_k_ci_lo", "pass_at_k_ci_lo"),
    ("pass_at_k_ci_hi", "pass_at_k_ci_hi"),
)

#: A before/after run's headline: the compare stage's delta and its interval lead, then the
#: two arms (so the runs table shows the change, never the baseline's score as the run's).
DELTA_HEADLINE_KEYS: tuple[tuple[str, str], ...] = (
    ("delta", "delta"),
    ("delta_ci_lo", "delta_ci_lo"),
    ("delta_ci_hi", "delta_ci_hi"),
    ("delta_before", "before"),
    ("delta_after", "after"),
    ("delta_p_value", "p_value"),
    ("delta_n_paired_tasks", "n_paired_tasks"),
)


def shorten_override(override: str) -> str | None:
    """One override as it reads in a run name, or None when it is bookkeeping.

    ``+experiment=eval`` (the preset, named first anyway), ``tracking.*``, ``cache.*``,
    ``hydra.*``/``hydra/launcher=...`` and ``name=`` are left out. A leading ``+``/``++``
    goes; a path value keeps its last part; a value longer than 24 characters keeps its head
    and ``…``. Never raises.
    """
    text = str(override).strip()
    body = text.lstrip("+~")
    key, sep, value = body.partition("=")
    root = key.split(".", 1)[0].split("/", 1)[0]
    if not sep:
        return text or None  # a deletion (~key) is something the user changed
    if key == "experiment" or root in _BOOKKEEPING:
        return None
    if "://" in value and "," not in value:
        # A server: its model and host tell two runs apart ("…/v1" named every one "v1").
        value, limit = _server_name(value), MAX_SERVER_CHARS
    elif "/" in value and "," not in value:
        value, limit = value.rstrip("/").rsplit("/", 1)[-1] or value, MAX_VALUE_CHARS
    else:
        limit = MAX_VALUE_CHARS
    if len(value) > limit:
        value = value[: limit - 1] + "…"
    return f"{key}={value}"


def _server_name(value: str) -> str:
    """``vllm:smollm2@http://10.0.0.5:8000/v1`` → ``vllm:smollm2@10.0.0.5:8000``;
    ``https://api.example.com/v1`` → ``api.example.com``: the model spec and the host, with
    no scheme, path, user or query (where a key could sit)."""
    from urllib.parse import urlsplit

    spec, at, url = value.rpartition("@") if "@" in value.split("://", 1)[0] else ("", "", value)
    try:
        host = urlsplit(url).netloc.rsplit("@", 1)[-1] or url
    except ValueError:
        host = url
    return f"{spec}{at}{host}"


def run_name(
    preset: str | None,
    overrides: Sequence[str],
    *,
    prefix: str = "",
    swept: Sequence[str] = (),
) -> str:
    """``[prefix ]<preset> <override> ...`` (e.g. ``eval agent.skill=0.6 seed=1``).

    ``preset`` None names the run ``run``. Overrides keep the order typed; past 120
    characters the rest are counted as ``+N more``. A sweep child names the ``swept`` keys'
    values first, by the key's last part (``skill=0.6 seed=1 · eval simulate.budget=40``):
    MLflow's runs table shows about the first 20 characters of a nested run's name, and
    those must tell the children apart. Never raises.
    """
    parts = [p for p in (shorten_override(o) for o in overrides) if p]
    lead = _swept_parts(parts, swept)
    parts = [p for p in parts if p not in lead]
    head = " ".join(x for x in (prefix, preset or "run") if x)
    if lead:
        head = f"{' '.join(lead.values())} · {head}"
    name = head
    for i, part in enumerate(parts):
        more = len(parts) - i
        if len(name) + 1 + len(part) > MAX_NAME_CHARS - (len(f" +{more} more") if more > 1 else 0):
            return f"{name} +{more} more"
        name = f"{name} {part}"
    return name


def _swept_parts(parts: Sequence[str], swept: Sequence[str]) -> dict[str, str]:
    """``{override part: its short form}`` for the parts that set a swept key, in the order
    typed; the short form keeps the key's last dotted part unless two swept keys share it."""
    keyed = {p: p.partition("=")[0].lstrip("+~") for p in parts}
    mine = {p: k for p, k in keyed.items() if k in set(swept)}
    lasts = [k.rsplit(".", 1)[-1] for k in mine.values()]
    out: dict[str, str] = {}
    for part, key in mine.items():
        last = key.rsplit(".", 1)[-1]
        out[part] = part if lasts.count(last) > 1 else last + part[len(key) :]
    return out


def headline_metrics(
    stage_metrics: Mapping[str, Any],
    keys: Sequence[tuple[str, str]] = HEADLINE_KEYS,
) -> dict[str, float]:
    """The stage's answer under short names (``keys``: :data:`HEADLINE_KEYS` for a graded
    stage, :data:`DELTA_HEADLINE_KEYS` for a compare stage), in logging order; a metric the
    stage did not measure is absent, never 0."""
    out: dict[str, float] = {}
    for short, key in keys:
        v = finite_float(stage_metrics.get(key))
        if v is not None:
            out[short] = v
    return out


def headline_stage(kind: str, values: Mapping[str, Any], delta_run: bool) -> bool:
    """Whether a stage's metrics hold the run's answer: a before/after run's (``delta_run``,
    one with a compare stage) is its compare stage's delta, any other run's a pass@1."""
    keys = DELTA_HEADLINE_KEYS if delta_run else HEADLINE_KEYS
    return keys[0][1] in values and (kind == "compare") == delta_run


def keeps_rows(kind: str, values: Mapping[str, Any]) -> bool:
    """Whether a stage's ``rows_kept`` is the run's rows kept (simulate's counts rows made)."""
    return kind == "optimize" or ("rows_kept" in values and kind != "simulate")


def run_headline(stages: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, float]:
    """The run's answer under short names, as the tracker logs it on the run, from its
    stages' ``(kind, metrics)`` in pipeline order: the first headline stage's (see
    :func:`headline_stage`) and the last selecting stage's ``rows_kept``."""
    delta_run = any(kind == "compare" for kind, _ in stages)
    keys = DELTA_HEADLINE_KEYS if delta_run else HEADLINE_KEYS
    first = next((v for kind, v in stages if headline_stage(kind, v, delta_run)), None)
    out = headline_metrics(first, keys) if first is not None else {}
    for kind, values in stages:
        kept = finite_float(values.get("rows_kept"))
        if keeps_rows(kind, values) and kept is not None:
            out["rows_kept"] = kept
    return out


class StageNote:
    """What the description needs from one finished stage (filled by the tracker)."""

    def __init__(
        self,
        name: str,
        kind: str,
        metrics: Mapping[str, Any] | None,
        report: Mapping[str, Any] | None,
        cached: bool = False,
    ) -> None:
        self.name = name
        self.kind = kind
        self.metrics = dict(metrics or {})
        self.report = dict(report or {}) if isinstance(report, Mapping) else {}
        self.cached = cached


def _fmt(v: float | None, digits: int = 3) -> str:
    return "not measured" if v is None else f"{v:.{digits}f}"


def too_few_tasks(n_tasks: Any) -> str | None:
    """Why a rate has no interval when the run has too few tasks for one, and what to do;
    None when it has enough (or does not say how many)."""
    from wai_exp.score.stats.passat import MIN_CI_GROUPS

    if not isinstance(n_tasks, int) or n_tasks >= MIN_CI_GROUPS:
        return None
    tasks = f"{n_tasks} task" + ("" if n_tasks == 1 else "s")
    return (
        f"{tasks}; an interval is over tasks, and fewer than {MIN_CI_GROUPS} give no spread "
        "between tasks to size it by, so it would measure nothing; run more tasks: a larger "
        "simulate.budget (rows = tasks x repeats), or more situations in simulate.tasks / "
        "simulate.rows"
    )


def _interval(lo: Any, hi: Any) -> str:
    lo, hi = finite_float(lo), finite_float(hi)
    if lo is None or hi is None:
        return "interval not measured"
    return f"95% CI {lo:.3f}–{hi:.3f}"


def _floor_lines(m: Mapping[str, Any], floor: Any, n_tasks: Any) -> list[str]:
    """The floor (a do-nothing agent on the same tasks and judge) with its interval and the
    words its gap's interval supports; "not measured" with the reason, never a 0."""
    if not isinstance(floor, Mapping):
        return []
    value = finite_float(m.get("floor"))
    if value is None:
        return [f"**floor** not measured ({floor.get('note') or 'no reason recorded'})"]
    from wai_exp.score.judges.floor import floor_scope

    return [
        f"**floor** {_fmt(value)} ({_interval(m.get('floor_ci_lo'), m.get('floor_ci_hi'))}): "
        "a do-nothing agent (no tool call, one polite refusal), the same judge on "
        f"{floor_scope(floor, n_tasks)} — **{floor.get('words')}**",
    ]


def _delta_lines(stage: StageNote) -> list[str]:
    """A compare stage's answer, first in the description: the delta with its interval and
    the verdict word, then the two arms it compares; [] for any other stage."""
    r = stage.report
    verdict = r.get("headline_verdict")
    if not verdict:
        return []
    m = stage.metrics
    target = str(r.get("target") or "pass_at_1").replace("pass_at_1", "pass@1")
    delta = finite_float(m.get("delta"))
    shown = "not measured" if delta is None else f"{delta:+.3f}"
    given = r.get("arms")
    arms: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    n = r.get("n_paired_tasks")
    return [
        f"### {verdict}: delta {target} {shown} "
        f"({_interval(m.get('delta_ci_lo'), m.get('delta_ci_hi'))})"
        + (f" over {n} paired tasks" if isinstance(n, int) else ""),
        f"{target} {_fmt(finite_float(m.get('before')))} ({arms.get('before', 'before')}) → "
        f"{_fmt(finite_float(m.get('after')))} ({arms.get('after', 'after')}); "
        f"{r.get('target_verdict') or 'no target verdict'} ({stage.name})",
        "",
    ]


def _gate_lines(
    gate: StageNote | None, verdict: str | None, reason: str | None, planned: Sequence[str]
) -> list[str]:
    if gate is None and verdict is None:
        if "publish_gate" in planned:
            return ["**Publish gate:** not run (the run ended before it)"]
        return ["**Publish gate:** not run in this pipeline"]
    report = gate.report if gate is not None else {}
    word = str(verdict or report.get("verdict") or "not run").upper()
    checks = report.get("checks")
    if not isinstance(checks, Mapping):
        checks = {}
    failed = [k for k, ok in checks.items() if ok is False]
    not_run = [k for k, ok in checks.items() if ok is None]
    passed = [k for k, ok in checks.items() if ok is True]
    line = f"**Publish gate: {word}**"
    why = reason or "; ".join(str(r) for r in report.get("reasons") or [])
    if why and word != "PASSED":
        line += f" — {why}"
    out = [line]
    detail = []
    if failed:
        detail.append("failed checks: " + ", ".join(failed))
    if not_run:
        detail.append("checks not run: " + ", ".join(not_run))
    if passed:
        detail.append("passed: " + ", ".join(passed))
    if detail:
        out.append("- " + "; ".join(detail))
    return out


def _own_gate_line(stages: Sequence[StageNote]) -> list[str]:
    """Which stage of the user's own gave publish its verdict, read from publish's report: it
    records what it chooses, so a check it did not report is said as not recorded."""
    for s in stages:
        gate = s.report.get("gate") if s.kind == "publish" else None
        if isinstance(gate, Mapping) and gate.get("by"):
            checks = "" if gate.get("checks") else "; its checks: not recorded by the gate"
            return [f"- given by stage {gate['by']}{checks}"]
    return []


def _published_lines(stages: Sequence[StageNote]) -> list[str]:
    """How many records each publish stage wrote (its report's ``records``): a skipped publish
    says why, and a report that holds no count says so rather than a number."""
    out = []
    for s in stages:
        if s.kind != "publish":
            continue
        n = s.report.get("records")
        if s.report.get("skipped"):
            out.append(f"**Records published:** none ({s.name} skipped: {s.report['skipped']})")
        elif isinstance(n, int) and not isinstance(n, bool):
            shape = f"{s.report['shape']} " if s.report.get("shape") else ""
            out.append(f"**Records published:** {counted(n, shape + 'record')} ({s.name})")
        else:
            out.append(f"**Records published:** not recorded ({s.name}'s report holds no count)")
    return out


def _k_way_line(s: StageNote) -> str:
    """pass^k and pass@k with their intervals, or "not measured" and why (the note, less
    what the left-out line above says already: ``k_way_note``)."""
    from wai_exp.score.stats.left_out import k_way_note

    m, k = s.metrics, s.report.get("k")
    kk = k if isinstance(k, int) else "k"
    pow_k, at_k = finite_float(m.get("pass_pow_k")), finite_float(m.get("pass_at_k"))
    if pow_k is None and at_k is None:
        note = k_way_note(s.report) or "not enough repeats per task"
        return f"pass^k and pass@k: not measured ({note})"
    return (
        f"pass^{kk} {_fmt(pow_k)} "
        f"({_interval(m.get('pass_pow_k_ci_lo'), m.get('pass_pow_k_ci_hi'))}) · "
        f"pass@{kk} {_fmt(at_k)} "
        f"({_interval(m.get('pass_at_k_ci_lo'), m.get('pass_at_k_ci_hi'))})"
        + (f" ({s.report['k_basis']})" if s.report.get("k_basis") else "")
    )


def _said(report: Mapping[str, Any], key: str) -> list[str]:
    """``report[key]`` as one line, or none when it is empty or absent."""
    return [str(report[key])] if report.get(key) else []


def describe_run(
    stages: Sequence[StageNote],
    *,
    preset: str | None,
    overrides: Sequence[str],
    config_hash: str,
    status: str = "FINISHED",
    gate_verdict: str | None = None,
    gate_reason: str | None = None,
    error: str | None = None,
    version: str | None = None,
    planned: Sequence[str] = (),
) -> str:
    """The run's markdown description: the answer first, then how it was made.

    ``stages`` in pipeline order. pass@1 comes from every stage reporting ``pass_at_1`` (one
    line each), with its interval and the k-way numbers, or "not measured" with the reason.
    Rows kept come from the last stage reporting ``rows_kept``, rows made from the
    ``simulate`` stages' ``rows_out``. Warnings are every stage report's ``warnings`` list.
    ``planned`` are the kinds of the pipeline's stages: what is not measured then says
    whether the pipeline has no such stage or the run ended before it finished.
    Never raises on odd inputs.
    """
    from wai_exp.score.stats.left_out import fix_said_once

    out: list[str] = []
    if status != "FINISHED":
        out.append(f"**Run {status}**" + (f": {error}" if error else ""))
        out.append("")
    for s in stages:
        out.extend(_delta_lines(s))
    graded = [s for s in stages if finite_float(s.metrics.get("pass_at_1")) is not None]
    for s in graded:
        m = s.metrics
        where = f" ({s.name})" if len(graded) > 1 else ""
        n = s.report.get("n_groups")
        over = f" over {n} tasks" if isinstance(n, int) else ""
        basis = ""
        if s.report.get("pass_at_1_basis") == "first_batch":
            # An adaptive run: the headline reads each task's fixed first batch (unbiased).
            basis = ", from the fixed first batch of every task (pass^k and pass@k too)"
        ci = _interval(m.get("pass_at_1_ci_lo"), m.get("pass_at_1_ci_hi"))
        if (few := too_few_tasks(n)) and finite_float(m.get("pass_at_1_ci_lo")) is None:
            ci, over = f"interval not measured: {few}", ""
        out.append(f"### pass@1{where} {_fmt(finite_float(m['pass_at_1']))} ({ci}){over}{basis}")
        out += _said(s.report, "ungraded_tasks_line")  # tasks "over N tasks" leaves out
        out.extend(_floor_lines(m, s.report.get("floor"), n))
        out.append(_k_way_line(s))
        if s.report.get("lost_line"):  # what lost rollouts did to these numbers
            out.append(str(s.report["lost_line"]))
        out.append("")
    # A grading stage that failed logs no rates: the runner said why (withhold_rates).
    withheld = [(s.name, str(s.report["headline_not_measured"])) for s in stages
                if s.report.get("headline_not_measured")]  # fmt: skip
    for name, why in withheld:
        where = f" ({name})" if graded else ""
        out += [f"### pass@1{where} not measured ({why})", ""]
    if not graded and not withheld:
        kinds = {s.kind for s in stages}
        why = "no grading stage finished" if kinds else "no stage finished"
        out.append(f"### pass@1 not measured ({why})")
        out.append("")
    gate = next((s for s in reversed(stages) if s.kind == "publish_gate"), None)
    out.extend(_gate_lines(gate, gate_verdict, gate_reason, planned))
    out.extend(_own_gate_line(stages) if gate is None else [])
    out.append("")
    made = sum(
        int(finite_float(s.metrics.get("rows_out")) or 0)
        for s in stages
        if s.kind == "simulate" and finite_float(s.metrics.get("rows_out")) is not None
    )
    any_sim = any(s.kind == "simulate" for s in stages)
    kept = next(
        (s for s in reversed(stages) if finite_float(s.metrics.get("rows_kept")) is not None), None
    )
    if kept is not None:
        of = f" of {made} made" if any_sim else ""
        are = kept.report.get("rows_kept_are")  # a stage that keeps rows in its own unit
        where = f"{kept.name}: {are}" if are else kept.name
        out.append(f"**Rows kept:** {int(kept.metrics['rows_kept'])}{of} ({where})")
    elif any_sim:
        why = (
            "the selection stage did not finish" if "optimize" in planned else "no selection stage"
        )
        out.append(f"**Rows made:** {made}; rows kept: not measured ({why})")
    elif {"simulate", "optimize"} & set(planned):
        out.append(
            "**Rows kept:** not measured (the run ended before simulate or selection finished)"
        )
    else:
        out.append("**Rows kept:** not measured (no simulate or selection stage)")
    out.extend(_published_lines(stages))
    warnings = [
        (s.name, str(w))
        for s in stages
        for w in (s.report.get("warnings") or [])
        if isinstance(s.report.get("warnings"), list)
    ]
    out.append("")
    if warnings:
        out.append(f"**Warnings ({len(warnings)})**")
        out.extend(f"- {name}: {w}" for name, w in warnings[:20])
        if len(warnings) > 20:
            out.append(f"- … {len(warnings) - 20} more in the stages' report.json")
    else:
        out.append("**Warnings:** none")
    out.append("")
    shown = [o for o in overrides if o]
    out.append(
        f"<sub>preset {preset or 'none'} · overrides: {' '.join(shown) or 'none'} · "
        f"config {config_hash[:12]}" + (f" · wai-exp {version}" if version else "") + "</sub>"
    )
    return fix_said_once("\n".join(out)).strip() + "\n"


def split_knobs(
    knobs: Mapping[str, Any], defaults: Mapping[str, Any], *, skip: Sequence[str] = ()
) -> dict[str, Any]:
    """``{knob: value}`` for the knobs whose value differs from ``defaults`` (a knob the table
    does not know counts as set). ``skip`` names knobs logged elsewhere (``seed``, ``world``)."""
    out: dict[str, Any] = {}
    for key, value in knobs.items():
        if key in skip:
            continue
        if key not in defaults or not _same(value, defaults[key]):
            out[key] = value
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return a == b
