"""Stage ``grade``: judge the upstream rows with the configured judge, report pass@k.

The judge sees each row with its ``privileged`` block rebuilt by
``privileged_context(scenario_dimensions, faults)``: the block never reaches disk, so rows
read back from a cache or a previous run would otherwise reach the judge without it.

Report: ``pass_at(...).to_dict()`` plus the judge's name and version, its warnings, and the
counts. Metrics: ``pass_at_1`` (+ ``_ci_lo``/``_ci_hi``), ``pass_pow_k``, ``pass_at_k`` (each
with bounds when measured), ``headroom``, ``n_groups``, ``rows_in``, ``unjudged``. A number
that could not be measured is left out of the metrics; the report's ``note`` says why.

Rollouts the upstream simulate stage lost left no row; its report's ``lost`` block names
their tasks. Under ``simulate.lost_as=failure`` (the default) each is a failed repeat of its
task in pass@1 / pass^k / pass@k; the report keeps the block under ``lost`` (with
``by_task``, which ``compare`` reads to count them the same way) and the
sentence the summary and the MLflow description print under ``lost_line`` (metric
``rollouts_lost``). The rows stay the judged rows only: nothing lost reaches a dataset.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wai_exp.config.models import JudgeConfig, PassAtOptions
from wai_exp.pipeline.registry import StageContext, StageResult, import_object, input_rows, register
from wai_exp.pipeline.stored_rows import RowSink, StoredRows
from wai_exp.rows.keys import without_fields
from wai_exp.score.grade.checklist import conduct_only_note, conduct_only_rows
from wai_exp.simulate.lost import lost_sentence

if TYPE_CHECKING:  # passat imports numpy; the stage imports it when it grades
    from wai_exp.score.stats.passat import PassAt

#: Environment variable naming the judge model when ``judge.model`` is null.
JUDGE_ENV = "WAI_EXP_JUDGE"


def judge_model_spec(judge_cfg: dict[str, Any]) -> str:
    """The judge's model spec: ``judge.model``, else ``WAI_EXP_JUDGE``. Raises
    ``ValueError`` naming both fixes when neither is set, or the spec's problem when it is
    not ``<provider>:<model>[@<url>]``."""
    import os

    from wai_exp.llm.providers import parse_model_spec

    spec = judge_cfg.get("model") or os.environ.get(JUDGE_ENV) or None
    kind = judge_cfg.get("kind")
    if not spec:
        raise ValueError(
            f"judge={kind} needs a model: pass judge.model=vllm:<model>@http://<host>:8000/v1 "
            f"(or openai:<model>, ollama:<model>, anthropic:<model>), or export {JUDGE_ENV}=<spec>"
        )
    try:
        parse_model_spec(str(spec))
    except ValueError as exc:
        raise ValueError(
            f"judge.model: {exc}; e.g. judge.model=vllm:<model>@http://host:8000/v1"
        ) from None
    return str(spec)


def judge_api_key(judge_cfg: dict[str, Any]) -> str | None:
    """The key from the variable ``judge.api_key_env`` names, or None (the provider's own
    variable is then read by the HTTP layer). Raises ``ValueError`` when the named variable
    is unset, naming it (never a value)."""
    import os

    name = judge_cfg.get("api_key_env")
    if not name:
        return None
    value = os.environ.get(str(name))
    if not value:
        raise ValueError(
            f"judge.api_key_env names {name}, which is not set: export {name}=<key>, or set "
            "judge.api_key_env=null to use the provider's own key variable"
        )
    return value


def model_call_settings(
    judge_cfg: dict[str, Any], declared_tools: list[str] | None, policy: str = ""
) -> dict[str, Any]:
    """What every model judge is called with, from a ``judge`` section. Raises
    ``ValueError`` as ``judge_model_spec`` and ``judge_api_key`` do."""
    typed = JudgeConfig.model_validate(judge_cfg)
    return {
        "spec": judge_model_spec(judge_cfg),
        "api_key": judge_api_key(judge_cfg),
        "prompt": typed.prompt,
        "policy": policy,
        "tools": declared_tools or None,
        "timeout": typed.request_timeout,
        "temperature": typed.temperature,
        "structured_output": typed.structured_output,
    }


def resolve_judge(
    judge_cfg: dict[str, Any], declared_tools: list[str] | None, policy: str = ""
) -> tuple[Callable[..., Any], str]:
    """(judge callable taking one row, its name) for a ``judge`` config section: the
    registered kind's builder (``wai_exp.domain.judges``) makes it. Its name is
    ``judge.name``, else the judge's own (the function's name, a model judge's
    ``judge_name``), else ``judge.target``, else the kind.

    Raises ``ValueError`` for a kind nothing registered, or as the builder does: a
    ``kind: callable`` naming nothing importable or not callable, a model judge with no
    model, a bad spec or a missing key variable.
    """
    from wai_exp.domain.judges import judge_kind

    kind = str(judge_cfg.get("kind") or "checklist")
    judge = judge_kind(kind).builder()(judge_cfg, declared_tools, policy)
    own = _own_name(judge) or judge_cfg.get("target")
    return judge, str(judge_cfg.get("name") or own or kind)


def _own_name(judge: Any) -> str | None:
    """A judge's own name: a function's ``__name__`` (through ``functools.partial``), a model
    judge's ``judge_name``."""
    for obj in (judge, getattr(judge, "func", None)):
        name = getattr(obj, "__name__", None) or getattr(obj, "judge_name", None)
        if name:
            return str(name)
    return None


def _with_tools(fn: Callable[..., Any], declared_tools: list[str] | None) -> Callable[..., Any]:
    # The checklist/conduct rules flag calls to tools the agent was never given.
    return functools.partial(fn, declared_tools=set(declared_tools)) if declared_tools else fn


def build_checklist(section: dict[str, Any], tools: list[str] | None, policy: str) -> Any:
    """``judge=checklist``: ``task_checklist``."""
    from wai_exp.score.grade.checklist import task_checklist

    return _with_tools(task_checklist, tools)


def build_conduct(section: dict[str, Any], tools: list[str] | None, policy: str) -> Any:
    """``judge=conduct``: ``conduct_grade``."""
    from wai_exp.score.grade.grading import conduct_grade

    return _with_tools(conduct_grade, tools)


def build_given(section: dict[str, Any], tools: list[str] | None, policy: str) -> Any:
    """``judge=given``: the reward each row already carries."""
    from wai_exp.score.grade.given import given_reward

    return given_reward


def build_callable(section: dict[str, Any], tools: list[str] | None, policy: str) -> Any:
    """``judge=callable``: the function ``judge.target`` names."""
    target = section.get("target")
    fn = import_object(str(target), "judge.target")
    if not callable(fn):
        raise ValueError(f"judge.target {target!r} is not callable")
    return fn


def build_llm(section: dict[str, Any], tools: list[str] | None, policy: str) -> Any:
    """``judge=llm``: ``grade_llm``, a model's pass/fail per row."""
    from wai_exp.score.judges.llm_judge import grade_llm

    common = model_call_settings(section, tools, policy)
    return grade_llm(**common, max_tokens=int(section.get("max_tokens", 256)))


def build_rubric_llm(section: dict[str, Any], tools: list[str] | None, policy: str) -> Any:
    """``judge=rubric_llm``: ``rubric_judge`` over ``judge.rubric`` (null = each row's own).
    Raises ``ValueError`` for a malformed rubric."""
    from wai_exp.score.judges.rubric import Rubric, rubric_judge

    rubric = section.get("rubric")
    common = model_call_settings(section, tools, policy)
    return rubric_judge(Rubric.from_value(rubric) if rubric else None, **common)


def build_pairwise(section: dict[str, Any], tools: list[str] | None, policy: str) -> Any:
    """``judge=pairwise``: the rows are graded by its ``pointwise`` judge (the compare stage
    asks the model which arm is better)."""
    from wai_exp.domain.judges import grading_kind

    judge, _ = resolve_judge({**section, "kind": grading_kind(section)}, tools, policy)
    return judge


def _counting(
    judge: Callable[..., Any], total: int, progress: Callable[[dict[str, Any]], None]
) -> Callable[..., Any]:
    """The judge, reporting every finished call to the progress line (thread-safe)."""
    lock = threading.Lock()
    done = [0]

    def tick() -> None:
        with lock:
            done[0] += 1
            n = done[0]
        progress({"done": n, "total": total, "unit": "rows judged"})

    if inspect.iscoroutinefunction(getattr(judge, "acall", None)):
        # A model judge: run_judge awaits its ``acall`` on one loop at ``concurrency``.
        return _CountingModelJudge(judge, tick)

    if inspect.iscoroutinefunction(judge) or inspect.iscoroutinefunction(
        getattr(judge, "func", None)
    ):

        @functools.wraps(judge)
        async def async_judge(row: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            try:
                return await judge(row, *args, **kwargs)
            finally:
                tick()

        return async_judge

    # wraps: run_judge recognises a built-in judge through the wrapper, runs it inline and
    # passes it the keywords it takes (declared_tools), which the wrapper forwards.
    @functools.wraps(judge)
    def sync_judge(row: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return judge(row, *args, **kwargs)
        finally:
            tick()

    return sync_judge


class _CountingModelJudge:
    """A model judge (``grade_llm``, ``rubric_judge``) whose every verdict ticks the
    progress line; ``model``, ``judge_name``, ``version`` and ``meta`` read through."""

    def __init__(self, judge: Any, tick: Callable[[], None]) -> None:
        self._judge = judge
        self._tick = tick
        for attr in ("model", "judge_name", "version", "meta"):
            setattr(self, attr, getattr(judge, attr, None))

    async def acall(self, row: dict[str, Any]) -> Any:
        try:
            return await self._judge.acall(row)
        finally:
            self._tick()

    def __call__(self, row: dict[str, Any]) -> Any:
        try:
            return self._judge(row)
        finally:
            self._tick()


#: Rows judged per batch when the input is read from disk (``run_judge_batched``).
GRADE_BATCH = 4096


def _batches(rows: Any, size: int) -> Any:
    """Lists of up to ``size`` rows from the iterable ``rows``, read as they are needed."""
    it = iter(rows)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def with_privileged(rows: list[dict[str, Any]], *, in_place: bool = False) -> list[dict[str, Any]]:
    """Copies of ``rows`` carrying the teacher's block the judge needs (memory only); with
    ``in_place`` the rows themselves get it (for rows nobody else holds)."""
    from wai_exp.domain.outcome import grid_cell
    from wai_exp.score.grade.checklist import privileged_context

    # grid_cell: the reference engine's rows keep their cell in top-level fields.
    if in_place:
        for r in rows:
            r["privileged"] = privileged_context(grid_cell(r), r.get("faults"))
        return rows
    return [{**r, "privileged": privileged_context(grid_cell(r), r.get("faults"))} for r in rows]


def _bounds(metrics: dict[str, float], name: str, ci: Any) -> None:
    if ci is not None:
        metrics[f"{name}_ci_lo"] = float(ci[0])
        metrics[f"{name}_ci_hi"] = float(ci[1])


def pass_at_metrics(pa: Any) -> dict[str, float]:
    """Flat metrics of a ``PassAt``: only what was measured (None stays out)."""
    m: dict[str, float] = {"n_groups": float(pa.n_groups), "graded_rows": float(pa.n_rows)}
    if pa.pass_at_1 is not None:
        m["pass_at_1"] = float(pa.pass_at_1)
        _bounds(m, "pass_at_1", pa.ci95)
    if pa.pass_pow_k is not None:
        m["pass_pow_k"] = float(pa.pass_pow_k)
        _bounds(m, "pass_pow_k", pa.pass_pow_k_ci95)
    if pa.pass_at_k is not None:
        m["pass_at_k"] = float(pa.pass_at_k)
        _bounds(m, "pass_at_k", pa.pass_at_k_ci95)
    if pa.headroom is not None:
        m["headroom"] = float(pa.headroom)
    return m


def _pass_at(
    graded: list[dict[str, Any]], opts: PassAtOptions, lost: dict[str, Any] | None
) -> tuple[PassAt, str | None]:
    """pass@k of the graded rows as ``judge.pass_at`` asks, and what k is when rows of
    runs=N re-runs set it: one run's repeats over the pooled rows (pass^4 for 4 repeats x 3
    runs, not pass^12, which no single run of the eval measures)."""
    from wai_exp.score.stats.passat import pass_at, per_run_k

    run_k, n_runs = per_run_k(graded) if opts.k is None else (None, 0)
    pa = pass_at(
        graded,
        k=opts.k if run_k is None else run_k,
        min_k=opts.min_k,
        unanimous_short=opts.unanimous_short,
        lost=lost["by_task"] if lost and lost.get("counted") else None,
    )
    if run_k is None or pa.pass_pow_k is None:
        return pa, None
    return pa, (
        f"k={run_k}, one run's repeats; each task's rows from the {n_runs} runs are pooled "
        "into each estimate; judge.pass_at.k= sets another k"
    )


def pass_at_line(pa: Any, report: dict[str, Any]) -> str:
    """``str(pa)`` with its note as the summaries give it (``k_way_note``): the tasks with no
    graded first-batch row are said by the left-out line under it, not here too."""
    from wai_exp.score.stats.left_out import k_way_note

    text, note = str(pa), str(pa.note or "")
    if not note:
        return text
    kept = k_way_note({"note": note, "ungraded_tasks_line": report.get("ungraded_tasks_line")})
    return text.removesuffix(f" | {note}") + (f" | {kept}" if kept else "")


def judge_rows(
    ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult], source: str
) -> StageResult:
    """Shared by ``grade`` and ``evaluate``: judge, then pass@k over the judged rows."""
    from wai_exp.score.judges.judging import unknown_vocabulary_warning
    from wai_exp.score.stats.left_out import fix_said_once, ungraded_tasks_line

    stored = next(iter(inputs.values())).rows if len(inputs) == 1 else None
    # Rows the runner kept on disk are read here in batches, for this stage alone: each
    # batch gets the privileged block in place and is dropped once judged, so grading holds
    # the scored copies and one batch, never two copies of every row.
    batched = source == "grade" and isinstance(stored, StoredRows)
    rows = [] if batched else with_privileged(input_rows(ctx.name, inputs))
    n_in = len(stored) if batched and stored is not None else len(rows)
    cfg = {**ctx.config.get("judge", {}), **params}
    typed = ctx.section(JudgeConfig, "judge", params)
    upstream = next(iter(inputs.values())).report
    declared = upstream.get("declared_tools") if isinstance(upstream, dict) else None
    policy = upstream.get("system_prompt") if isinstance(upstream, dict) else None
    judge, name = resolve_judge(cfg, declared, policy if isinstance(policy, str) else "")
    # A model judge's version is its model and prompt hash unless the config names one.
    version = cfg.get("version") or getattr(judge, "version", None)
    counted = _counting(judge, n_in, ctx.progress)
    common: dict[str, Any] = {
        "judge_name": name,
        "concurrency": typed.concurrency,
        "timeout": typed.timeout,
        "scale": typed.scale,
        "tools": declared or None,
    }
    carried: list[float | None] = []  # the reward each input row came with, in order
    written: StoredRows | None = None
    if source == "eval":
        from wai_exp.score.judges.judging import evaluate

        carried = [_carried(r) for r in rows]
        scored = evaluate(rows, judge=counted, **common)
    elif batched:
        assert isinstance(stored, StoredRows)
        scored, written = _judge_stored(ctx, stored, counted, version, common, carried)
    else:
        from wai_exp.score.judges.judging import run_judge

        carried = [_carried(r) for r in rows]
        scored = run_judge(rows, counted, source="grade", version=version, **common)
    del rows  # the judge returned copies; the inputs can go before pass@k is computed
    # Batched, these are light copies (no transcript): the rows themselves are in `written`.
    graded = list(scored.rows)
    lost = _lost_block(upstream)
    pa, k_basis = _pass_at(graded, typed.pass_at, lost)
    unjudged = sum(1 for r in graded if r.get("reward") is None)
    statuses: dict[str, int] = {}
    for r in graded:
        s = str(r.get("judge_status", "unknown"))
        statuses[s] = statuses.get(s, 0) + 1
    warnings = [str(w) for w in getattr(scored, "warnings", [])]
    replaced = _replaced_rewards(carried, graded, name) if cfg.get("kind") != "given" else None
    if replaced:
        warnings.insert(0, replaced["warning"])
    report = {
        **pa.to_dict(),
        "judge": {
            "kind": cfg.get("kind"),
            "name": name,
            "version": version,
            "model": getattr(judge, "model", None),
            "meta": dict(getattr(judge, "meta", None) or {}) or None,
        },
        "self_judged": bool(getattr(scored, "self_judged", False)),
        "source": source,
        "rows_in": n_in,
        "unjudged": unjudged,
        "judge_status": statuses,
        "warnings": warnings,
        "replaced_rewards": replaced,
        # Rows left unjudged for a grid word no rule knows: the closing summary says so.
        "unknown_vocabulary": unknown_vocabulary_warning(graded),
        "conduct_only_rows": conduct_only_rows(graded),
    }
    if k_basis:
        report["k_basis"] = k_basis
    # what pass@k was asked for, so a reader of these rows (a sweep pooling runs) counts as it did
    report["pass_at_options"] = typed.pass_at.model_dump()
    if lost:
        # by_task kept: a compare of this run counts its lost rollouts as this stage did
        report["lost"] = dict(lost)
        report["lost_line"] = lost_sentence(lost)
    # Tasks with no 0/1-graded row drop out of "over N tasks": the summaries say how many.
    report["ungraded_tasks_line"] = ungraded_tasks_line(graded, lost)
    model = getattr(judge, "model", None)
    who = str(name) + (f" ({model})" if model else "")
    _judge_failure(report, graded, typed.max_error_share, who, model=model is not None)
    floor = stage_floor(cfg, judge, graded, common, lost)
    report["floor"] = floor.to_dict()
    metrics = {
        **pass_at_metrics(pa),
        **floor.metrics(),
        "rows_in": float(n_in),
        "unjudged": float(unjudged),
    }
    if lost:
        metrics["rollouts_lost"] = float(lost["rollouts"])
    lines = [
        f"{ctx.name}: judged {n_in} rows with {name} ({unjudged} unjudged, never counted as failures)",
        pass_at_line(pa, report),
        *([report["ungraded_tasks_line"]] if report["ungraded_tasks_line"] else []),
        str(floor),
    ]
    if report["conduct_only_rows"]:
        lines.append(conduct_only_note(report["conduct_only_rows"], pa.n_rows))
    if lost:
        lines.append(str(report["lost_line"]))
    lines += [f"warning: {w}" for w in warnings]
    return StageResult(
        rows=written if written is not None else graded,
        report=report,
        text=fix_said_once("\n".join(lines)) + "\n",
        metrics=metrics,
    )


#: What grading hands on of each row it wrote to disk: all but the transcript and the
#: teacher's block, which pass@k, the status counts and the warnings never read.
_NOT_KEPT = ("messages", "steps", "traj", "privileged")


def _judge_stored(
    ctx: StageContext,
    stored: StoredRows,
    judge: Any,
    version: str | None,
    common: dict[str, Any],
    carried: list[float | None],
) -> tuple[Any, StoredRows]:
    """Judge rows kept on disk batch by batch, writing each scored row to the stage's file
    as its batch finishes. Returns (the ``ScoredData`` over light copies of the scored
    rows, the file). So grading holds one batch and the light copies, never every scored
    row: on 100,000 simulated rows, about 0.4 GB less at the peak."""
    from wai_exp.score.judges.judging import run_judge_batched, scoring_run_id

    # Each row is final when written, so the run id (a hash of every row's id, in order)
    # is read off the file first.
    run_id = scoring_run_id("grade", common["judge_name"], version, stored.id_stubs())

    def noted(chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
        carried.extend(_carried(r) for r in chunk)
        return with_privileged(chunk, in_place=True)

    batches = (noted(chunk) for chunk in _batches(stored, GRADE_BATCH))
    with RowSink(ctx.stage_dir / "graded.jsonl") as sink:

        def emit(row: dict[str, Any]) -> dict[str, Any]:
            sink.add(row)
            return without_fields(row, _NOT_KEPT)

        scored = run_judge_batched(
            batches, judge, source="grade", version=version, run_id=run_id, emit=emit, **common
        )
        return scored, sink.close()


def _lost_block(upstream: Any) -> dict[str, Any] | None:
    """The upstream simulate stage's ``lost`` block (``simulate/lost.py``) when it lost any
    rollout, else None: a lost rollout left no row, so only that report knows its task."""
    block = upstream.get("lost") if isinstance(upstream, dict) else None
    if not isinstance(block, dict) or not block.get("rollouts"):
        return None
    return block


def _model_judged(cfg: dict[str, Any]) -> bool:
    """The rows are graded by a model over HTTP (``llm``, ``rubric_llm``, or ``pairwise``
    over one of them): every judge call costs money and time."""
    from wai_exp.domain.judges import is_model_judge

    return is_model_judge(cfg, grading=True)


def stage_floor(
    cfg: dict[str, Any],
    judge: Callable[..., Any],
    graded: list[dict[str, Any]],
    common: dict,
    lost: dict[str, Any] | None = None,
) -> Any:
    """The floor beside pass@1 (``wai_exp.score.judges.floor``), as ``judge.floor`` asks:
    ``auto`` measures it unless the judge is a model (one more call per task), ``true``
    always, ``false`` never. ``judge=given`` cannot: a do-nothing reply carries no reward
    of its own. An unmeasured floor says why and how to measure it. ``lost`` is the upstream
    ``lost`` block: when pass@1 counts lost rollouts as failures, so does the gap."""
    from wai_exp.score.judges.floor import floor_of, unmeasured_floor

    # The config was validated before any work; the model reads "no"/"off" as it did then.
    typed = JudgeConfig.model_validate(cfg)
    want, kind = typed.floor, typed.kind
    if want is False:
        return unmeasured_floor("judge.floor=false")
    if kind == "given":
        return unmeasured_floor(
            "judge=given keeps each row's own reward, and a do-nothing reply has none; "
            "grade with a judge (judge=checklist, judge=callable ...) to measure it"
        )
    if want == "auto" and _model_judged(cfg):
        from wai_exp.rows.keys import task_key

        n_tasks = len({task_key(r) for r in graded})
        return unmeasured_floor(
            f"judge={kind} is a model judge: the floor costs one more judge call per task "
            f"(about {n_tasks}); judge.floor=true measures it"
        )
    # Each do-nothing row gets the teacher's block the agent's rows were judged with (memory
    # only), rebuilt from its situation: graded rows need not carry it any more.
    return floor_of(
        graded,
        judge,
        prepare=functools.partial(with_privileged, in_place=True),
        lost=lost["by_task"] if lost and lost.get("counted") else None,
        **common,
    )


def _carried(row: dict[str, Any]) -> float | None:
    """The 0/1 reward a row came with (another tool's grade), or None."""
    from wai_exp.score.stats.readers import binary_reward

    return binary_reward(row) if row.get("reward") is not None else None


def _replaced_rewards(
    carried: list[float | None], graded: list[dict[str, Any]], judge: str
) -> dict[str, Any] | None:
    """When the rows came graded (another tool's 0/1 ``reward``) and this judge graded them
    again: how many, on how many the two disagree, and both pass rates, with a warning that
    names ``judge=given``. None when no row came with a reward. Rows another tool graded are
    usually graded on what this judge cannot see (τ-bench checks the database), so a silent
    replacement would turn their pass rate into a different one."""
    from wai_exp.score.stats.readers import binary_reward

    pairs = [
        (c, g)
        for c, r in zip(carried, graded, strict=False)
        if c is not None and (g := binary_reward(r)) is not None
    ]
    if not pairs:
        return None
    disagree = sum(1 for c, g in pairs if c != g)
    theirs = sum(c for c, _ in pairs) / len(pairs)
    ours = sum(g for _, g in pairs) / len(pairs)
    return {
        "rows": len(pairs),
        "disagree": disagree,
        "carried_pass_rate": theirs,
        "judge_pass_rate": ours,
        "warning": (
            f"{len(pairs)} rows came with a reward of their own and {judge} graded them again: "
            f"it disagrees on {disagree} (their pass rate {theirs:.3f}, this judge's "
            f"{ours:.3f}); judge=given keeps the rows' own reward"
        ),
    }


#: What to do about a judge that answers but never in the verdict's format.
_FORMAT_FIX = (
    "keep judge.structured_output=auto (or json_schema/json_object) on a server that "
    "honours response_format, use another model (judge.model=...), or add a format hint "
    'to judge.prompt (answer only with JSON like {"score": 1, "reason": "..."})'
)

#: The same for a judge that is code (a callable, the rows' own reward).
_CONTRACT_FIX = (
    "return a reward in [0, 1], true/false or PASS/FAIL, or give a judge that rates on "
    "another scale its range, judge.scale=[lo,hi] (quoted for the shell: 'judge.scale=[1,5]')"
)


def _judge_failure(
    report: dict[str, Any],
    graded: list[dict[str, Any]],
    share: float,
    who: str = "unnamed",
    model: bool = True,
) -> None:
    """Mark ``report`` failed (``failed_because="judge_failed"`` and a ``failure_summary`` in
    words, which the runner turns into exit 1) when the judge gave no verdict on more than
    ``share`` of the rows: its calls failed (``error``/``timeout``) or it answered in no form
    a verdict can be read from (``invalid_result``: a model answering prose would otherwise
    leave every row unjudged behind a run that says "done"). Abstentions are the judge
    answering, and do not count. ``who`` names the judge in the words; ``model`` says it is
    a model judge (the fix is then about the answer's format)."""
    from wai_exp.domain.secrets import redact_text

    failed = [r for r in graded if r.get("judge_status") in ("error", "timeout")]
    invalid = [r for r in graded if r.get("judge_status") == "invalid_result"]
    if not graded or len(failed) + len(invalid) <= share * len(graded):
        return
    report["failed_because"] = "judge_failed"
    parts = []
    if failed:
        first = (failed[0].get("judge_meta") or {}).get("error") or "no message"
        parts.append(f"its call failed (error or timeout) on {len(failed)}; first error: {first}")
    if invalid:
        meta = invalid[0].get("judge_meta") or {}
        said = str(meta.get("answer") or meta.get("raw") or "nothing")[:300]
        parts.append(
            f"it answered with no verdict it could be read from (invalid_result) on "
            f"{len(invalid)} ({meta.get('error') or 'no reason'}); first answer: {said!r}; "
            f"fix: {_FORMAT_FIX if model else _CONTRACT_FIX}"
        )
    report["failure_summary"] = redact_text(
        f"the judge could not score {len(failed) + len(invalid)} of {len(graded)} rows, more "
        f"than judge.max_error_share={share:g}; judge: {who}: " + "; ".join(parts)
    )


@register("grade", reads=("judge",), headline="grading")
def run(ctx: StageContext, params: dict[str, Any], inputs: dict[str, StageResult]) -> StageResult:
    """Grade the single input's rows (``run_judge``, lineage source ``grade``)."""
    return judge_rows(ctx, params, inputs, source="grade")
