"""Run a pipeline: stages in topological order, each cached by content, recorded as it ends.

For every stage the runner

1. computes its cache key (kind + own params + the config sections it reads + its inputs' keys);
2. reuses a finished cache entry with that key (and says so), or runs the stage, writing
   ``rows.jsonl`` into ``<run dir>/<stage>/`` (stored in the cache's ``objects/`` by its
   SHA-256), ``report.json``, ``report.txt`` and ``metrics.json`` atomically into the entry
   and the ``COMPLETE`` marker last;
3. places the entry's files into ``<run dir>/<stage>/`` (reflink or copy, never a link) and
   hands them to the tracker.

Outcomes, and the exit status ``wai-exp`` returns for each:

* every stage finished: ``passed`` (0);
* a stage raised ``PublishGateError``: ``refused``, a recorded result, not a crash. The stage's
  report says why, the run is tagged ``gate_verdict=refused``, every artifact is kept, stages
  that need the refused one are skipped, and the exit status is ``pipeline.refusal_exit_code``
  (3 by default, so scripts notice);
* any other exception: ``failed`` (1); the tracker run is marked FAILED with the reason and the
  traceback goes to ``<run dir>/error.log``;
* interrupted (Ctrl-C, or SIGTERM under ``wai-exp``): ``interrupted`` (128 + the signal: 130,
  143); the tracker run is marked KILLED and the stage's streamed rows stay in its cache entry
  for the next run to resume from. The runner says what it keeps at once and waits at most
  ``STOP_WAIT_S`` for a tracking writer; a second signal meanwhile exits at once.

``<run dir>/run.json`` records the outcome and ``<run dir>/timings.json`` the seconds each stage
computed versus what the orchestration around it cost.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from wai_exp.config.models import CacheConfig, PipelineConfig, RootConfig
from wai_exp.domain.plurals import counted
from wai_exp.domain.secrets import redact_overrides, redact_text, register_config_secrets
from wai_exp.pipeline import cache as cache_mod
from wai_exp.pipeline import reads as reads_mod
from wai_exp.pipeline import stop
from wai_exp.pipeline.dag import StageSpec, plan
from wai_exp.pipeline.registry import (
    BUILTIN,
    NOT_COMPUTED_FROM,
    REGISTRY,
    KeyDeps,
    StageContext,
    StageResult,
    resolve,
)
from wai_exp.pipeline.stored_rows import StoredRows, write_rows_recorded
from wai_exp.rows.jsonl import RowsNotWritten, atomic_write_text, write_json
from wai_exp.rows.partial import PartialRowsDamaged
from wai_exp.score.grade.checklist import conduct_only_note
from wai_exp.tracking import NullTracker
from wai_exp.tracking.store_errors import describe_store_error
from wai_exp.tracking.summary import run_headline, too_few_tasks

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
#: Seconds a stopped run waits for the tracking writer to record the run's end; past them
#: the command returns and the writer, which already has the end in its input, finishes it.
STOP_WAIT_S = 5.0


class TrackingFailed(RuntimeError):
    """Recording a finished stage failed (the store, not the stage); ``outcome`` is the stage."""

    def __init__(self, message: str, outcome: StageOutcome | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome


@dataclass
class StageOutcome:
    """What happened to one stage. ``status``: ran | cached | refused | failed | skipped."""

    name: str
    kind: str
    key: str
    status: str
    dir: Path
    compute_s: float = 0.0
    overhead_s: float = 0.0
    result: StageResult | None = None
    error: str | None = None
    cached: bool = False
    #: for a cached stage, the seconds its result took when it was computed (from the entry)
    computed_s: float | None = None
    #: rows the stage's inputs handed it (None for a stage with no inputs)
    rows_in: int | None = None
    #: input rows it left out, for a stage that passes on a subset of them by rollout id
    #: (None for a stage that makes new rows or writes none)
    rows_dropped: int | None = None
    #: why a cache entry at this key was not reused (None: reused, or there was none)
    stale: str | None = None
    #: for a reused stage that runs your code: what its key cannot see (a network service ...)
    unseen: str | None = None


@dataclass
class RunOutcome:
    """The run as a whole. ``status``: passed | refused | failed | interrupted."""

    status: str
    exit_code: int
    run_dir: Path
    stages: list[StageOutcome] = field(default_factory=list)
    wall_s: float = 0.0
    run_id: str | None = None
    ui_command: str | None = None
    error: str | None = None
    gate: str | None = None
    gate_reason: str | None = None
    tracking_s: float = 0.0
    #: tracking was on (a run may still be missing from the store when the store failed)
    tracked: bool = False
    #: every stage the pipeline lists, name -> kind (also those that never got to run)
    planned: dict[str, str] = field(default_factory=dict)
    #: what is still happening to the tracking run after the command returns (a stopped
    #: run whose writer had not recorded its end yet), None when nothing is
    tracking_note: str | None = None

    def stage(self, name: str) -> StageOutcome | None:
        """The outcome of stage ``name``, or None when it never started."""
        return next((s for s in self.stages if s.name == name), None)


class ProgressLine:
    """One updating line on stderr: ``  simulate  312/600 rows  41.0/s``.

    On a terminal it redraws in place (at most ~10 times a second); into a file or pipe it
    prints a plain line every few seconds instead of filling the log with redraws.
    """

    def __init__(self, label: str, stream: TextIO | None = None, *, redraw: bool = True) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        # redraw=False: stages running side by side would fight over one line.
        self.tty = redraw and bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        # Into a log, the first line waits a few seconds: a fast stage then logs nothing but
        # its "done" line.
        self.last = 0.0 if self.tty else self.t0
        self.drawn = False

    def __call__(self, info: Mapping[str, Any]) -> None:
        now = time.perf_counter()
        if now - self.last < (0.1 if self.tty else 5.0):
            return
        self.last = now
        done = info.get("done", info.get("rows", 0)) or 0
        total = info.get("total")
        unit = info.get("unit", "rows")
        text = f"  {self.label}  {done}" + (f"/{total}" if total else "") + f" {unit}"
        text += _pace(done, total, now - self.t0, unit)
        extra = info.get("note")
        if extra:
            text += f"  {extra}"
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn and self.tty:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
        self.drawn = False


#: Finished items before a rate is printed: the first calls of a model stage carry its
#: warm-up and queue, so a rate off one or two of them misstates the stage's pace.
_PACE_MIN_DONE = 3


def _pace(done: int, total: int | None, elapsed: float, unit: str = "rows") -> str:
    """``  4.2/s  ~2m10s left``, ``  1 per 6.5 s  ~1h05m left``, or, before the rate means
    anything, how long the stage has run: ``  running 2m10s; rate after the first 3 rows``
    (a bare "(rate after 3)" beside "0/8 rows" read as a rate of 3)."""
    if done < _PACE_MIN_DONE or elapsed <= 0:
        return f"  running {_duration(elapsed)}; rate after the first {_PACE_MIN_DONE} {unit}"
    rate = done / elapsed
    out = f"  {rate:.1f}/s" if rate >= 1 else f"  1 per {1 / rate:.1f} s"
    if total and done < total:
        out += f"  ~{_duration((total - done) / rate)} left"
    return out


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class _TimedTracker:
    """Forwards to the tracker and adds up the seconds its calls take (``timings.json``
    reports them apart from stage compute, so tracking cost is visible)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if not callable(value):
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        return timed


def config_hash(config: Mapping[str, Any]) -> str:
    """SHA-256 (first 16 hex) of everything that decides results (not tracking, not name)."""
    return cache_mod.content_hash(_computed_sections(config))[:16]


def _is_gate_refusal(exc: BaseException) -> bool:
    from wai_exp.score.select.publish_gate import PublishGateError

    return isinstance(exc, PublishGateError)


def _computed_sections(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config sections results are computed from (not tracking, name or hydra)."""
    return {k: v for k, v in config.items() if k not in NOT_COMPUTED_FROM and k != "hydra"}


def _sections(kind_reads: tuple[str, ...] | None, config: Mapping[str, Any]) -> dict[str, Any]:
    if kind_reads is None:
        return _computed_sections(config)
    return {k: config.get(k) for k in kind_reads}


def _key_params(kind: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The stage params its key is made of: all of them, unless the kind's ``key_params``
    narrows them."""
    narrow = getattr(kind, "key_params", None)
    return narrow(dict(params)) if narrow is not None else params


def stage_deps(
    config: Mapping[str, Any],
    sections: Mapping[str, Any],
    params: Mapping[str, Any],
    target: str | None,
    start_dir: Path,
    key_deps: KeyDeps | None = None,
) -> dict[str, Any]:
    """What enters a stage's key besides its config: the SHA-256 of each file it reads
    (``files``), of each user module it runs or imports (``code``), of wai-exp's own source
    (``wai_exp``), ``cache.salt`` (``salt``) and what the kind's ``key_deps`` hook adds. See
    ``pipeline/deps.py``."""
    from wai_exp.pipeline import deps

    out: dict[str, Any] = {"wai_exp": deps.source_digest()}
    files = deps.input_files(sections, params, start_dir)
    if files:
        out["files"] = files
    code = deps.code_digests(deps.code_targets(sections, params, target))
    if code:
        out["code"] = code
    salt = (config.get("cache") or {}).get("salt")
    if salt:
        out["salt"] = str(salt)
    if key_deps is not None:  # what the kind depends on outside its sections
        out.update(key_deps(dict(config), dict(params)))
    return out


def _hook_says(
    kind: Any, hook_name: str, config: Mapping[str, Any], params: dict[str, Any]
) -> str | None:
    """What the kind's cache hook ``hook_name`` says of this run of it, or None:
    ``never_reused`` (why the stage cannot be checked against a cache entry: it runs, and
    says why as for a stale entry) or ``reused_note`` (what a reused result may not reflect,
    since its key cannot see it)."""
    hook = getattr(kind, hook_name, None)
    return (hook(dict(config), dict(params)) or None) if hook is not None else None


def _cache_note(stale: str | None, never: str | None) -> dict[str, str]:
    """A computed stage's report ``cache``: why an entry at its key was not reused
    (``recomputed_because``) and why its result is never reused (``never_reused``)."""
    out = {"recomputed_because": stale, "never_reused": never}
    return {k: v for k, v in out.items() if v}


def _user_code(sections: Mapping[str, Any], spec: StageSpec) -> list[str]:
    """The user code the stage runs (a callable agent or judge, ``simulate.execute``, a
    ``_target_`` stage), as dotted paths; empty for a stage that runs only wai-exp's code."""
    from wai_exp.pipeline import deps

    return deps.code_targets(sections, spec.params, spec.target)


def _load(entry: Path, hit: cache_mod.Hit) -> StageResult:
    """A reused stage's result. Its rows stay on disk (``StoredRows``): nothing is parsed."""
    rows = hit.info["files"].get(cache_mod.ROWS)
    count = int(rows["lines"]) if rows else 0
    return StageResult(
        rows=StoredRows(hit.rows_path, count),
        report=json.loads((entry / "report.json").read_text()),
        text=(entry / "report.txt").read_text() if (entry / "report.txt").exists() else "",
        metrics=json.loads((entry / "metrics.json").read_text()),
        tags=dict(hit.info.get("tags") or {}),
    )


def _merge_worker_reads(
    recorder: reads_mod.Recorder, spooled: Path, by_process: Mapping[str, int] | None
) -> None:
    """Add what the stage's worker processes read (``reads.spool``) to its own record. A
    worker that ran rollouts and spooled nothing here (a Ray actor on another machine) read
    what the key cannot see: named as unseen (``by_process``: the report's
    ``workers_rollouts``)."""
    found = reads_mod.merge_spools(recorder, spooled)
    ran = sum(1 for name, n in (by_process or {}).items() if name != "stage" and n)
    if ran > found:
        recorder.on_unseen("worker", f"{ran - found} of {ran} worker processes")


def _write(entry: Path, stage_dir: Path, result: StageResult) -> tuple[dict[str, Any], frozenset]:
    """Write the rows once, into the run's stage folder, and the small files into the entry
    (copied to the stage folder). Returns the rows file's record and the rows' ids. Rows a
    stage already wrote to a file of its own (``RowSink``) are moved there, not written again."""
    record, ids = _place_rows(stage_dir / cache_mod.ROWS, result.rows)
    write_json(entry / "report.json", result.report)
    atomic_write_text(
        entry / "report.txt", result.text if result.text.endswith("\n") else result.text + "\n"
    )
    write_json(entry / "metrics.json", {k: float(v) for k, v in result.metrics.items()})
    cache_mod.copy_outputs(entry, stage_dir, cache_mod.ENTRY_FILES)
    return record, ids


def _place_rows(target: Path, rows: Any) -> tuple[dict[str, Any], frozenset]:
    if isinstance(rows, StoredRows) and rows.record is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(rows.path, target)  # a rename, or a copy across file systems
        record = rows.record
        # Now the run folder's file: a later stage handing these rows on must not move it.
        rows.path, rows.record = target, None
        return record, rows.ids or frozenset()
    return write_rows_recorded(target, rows)


def _check_result(name: str, result: Any) -> StageResult:
    if not isinstance(result, StageResult):
        raise TypeError(
            f"stage {name!r} returned {type(result).__name__}; a stage must return "
            "wai_exp.pipeline.registry.StageResult(rows=, report=, text=, metrics=)"
        )
    bad = {
        k: v
        for k, v in result.metrics.items()
        if not isinstance(v, int | float) or isinstance(v, bool)
    }
    if bad:
        raise TypeError(
            f"stage {name!r} returned non-numeric metrics {sorted(bad)}; leave an unmeasured "
            "metric out (and say so in the report) rather than passing None"
        )
    return result


def _refusal(name: str, exc: BaseException, inputs: Mapping[str, StageResult]) -> StageResult:
    reason = str(exc) or type(exc).__name__
    rows = [r for res in inputs.values() for r in res.rows]
    # PublishGateError carries the gate's full report; keep it, so the refusal is as
    # inspectable as a pass.
    carried = getattr(exc, "report", None)
    report = {
        **(carried if isinstance(carried, dict) else {}),
        "verdict": "refused",
        "reason": reason,
    }
    report.setdefault("rows_in", len(rows))
    text = f"publish gate: REFUSED\n{reason}\n"
    return StageResult(
        rows=rows,
        report=report,
        text=text,
        metrics={"gate_passed": 0.0, "rows_in": float(len(rows))},
        tags={"gate_verdict": "refused", "gate_reason": reason[:2000]},
    )


_log = logging.getLogger("wai_exp.pipeline")


def _say(stream: TextIO, text: str) -> None:
    # The terminal line, and the same line in <run dir>/wai-exp.log under Hydra.
    text = redact_text(text)
    stream.write(text + "\n")
    stream.flush()
    _log.info(text)


def run_pipeline(
    config: Mapping[str, Any],
    *,
    run_dir: str | Path,
    start_dir: str | Path,
    tracker: Any | None = None,
    overrides: Sequence[str] = (),
    preset: str | None = None,
    stream: TextIO | None = None,
    typed: RootConfig | None = None,
) -> RunOutcome:
    """Run ``config["pipeline"]`` and return what happened; never calls ``sys.exit``.

    ``config`` is the validated, resolved config as plain containers (its hash keys the
    cache), ``typed`` the ``RootConfig`` that validation returned for it: the runner and the
    stages read their sections from it (``StageContext.section``) instead of re-reading the
    dict. ``start_dir`` is where the user typed the command (the cache root and relative
    paths resolve from it).
    Raises ``PipelineError`` (before anything runs or is recorded) when the DAG is invalid,
    ``UnknownStageKind`` when a stage kind cannot be found.
    """

    t_run = time.perf_counter()
    # Every key in the config is scrubbed from whatever this run writes, also where a server
    # quotes it back in an error body.
    register_config_secrets(config)
    stream = stream if stream is not None else sys.stderr
    run_dir, start_dir = Path(run_dir).resolve(), Path(start_dir).resolve()
    tracker = _TimedTracker(tracker if tracker is not None else NullTracker())
    order = plan(config["pipeline"]["stages"])
    kinds = {spec.name: resolve(spec.kind, spec.target) for spec in order}

    cache_cfg = config.get("cache") or {}
    root = cache_mod.cache_root(cache_cfg, start_dir)
    # The console script passes the RootConfig it validated before any work (``root``);
    # called from Python with plain containers, the sections read here are validated now.
    typed_cache = typed.cache if typed else CacheConfig.model_validate(cache_cfg)
    cache = cache_mod.StageCache(root, enabled=typed_cache.enabled)
    pipeline = typed.pipeline if typed else PipelineConfig.model_validate(config["pipeline"])
    refusal_code = pipeline.refusal_exit_code

    chash = config_hash(config)
    run_dir.mkdir(parents=True, exist_ok=True)
    outcome = RunOutcome(status="passed", exit_code=EXIT_OK, run_dir=run_dir)
    outcome.planned = {spec.name: kinds[spec.name].name for spec in order}
    outcome.tracked = not isinstance(tracker.inner, NullTracker)
    for spec in order:
        if (prepare := kinds[spec.name].prepare) is not None:
            prepare(config, dict(spec.params))
    try:
        tracker.start(
            config=dict(config),
            overrides=list(overrides),
            run_dir=run_dir,
            preset=preset,
            config_hash=chash,
        )
    except Exception as exc:
        # Nothing ran and no tracking run exists to mark; say what the store refused.
        outcome.status, outcome.exit_code = "failed", EXIT_FAILED
        why = describe_store_error(exc, getattr(tracker, "uri", None))
        outcome.error = redact_text(f"tracking could not start: {why}")
        atomic_write_text(run_dir / "error.log", redact_text(traceback.format_exc()))
        outcome.wall_s = time.perf_counter() - t_run
        _write_run_files(outcome, chash, overrides)
        return outcome
    outcome.run_id = getattr(tracker, "run_id", None)
    outcome.ui_command = getattr(tracker, "ui_command", None)
    width = pipeline.max_parallel
    state = _Run(config, cache, run_dir, start_dir, tracker, stream, redraw=width <= 1, root=typed)
    running: set[str] = set()
    if width <= 1:
        outcomes = _sequential(state, order, kinds, running)
    else:
        outcomes = state.run_parallel(order, kinds, width, running)
    try:
        for out in outcomes:
            _record_stage(outcome, out, refusal_code)
        # config order, whatever order parallel stages finished in
        names = [sp.name for sp in order]
        outcome.stages.sort(key=lambda st: names.index(st.name))
        tags = {"run_status": outcome.status}
        if outcome.gate:
            tags["gate_verdict"] = outcome.gate
        try:
            tracker.set_tags(tags)
            tracker.finish("FINISHED")
        except Exception as exc:  # every stage finished; the store is what failed
            why = describe_store_error(exc, getattr(tracker, "uri", None), run_dir)
            raise TrackingFailed(f"every stage finished, but {why}") from exc
    except KeyboardInterrupt:
        stopped = [sp.name for sp in order if sp.name in running]
        _stopped(outcome, stopped, kinds, state, tracker)
    except Exception as exc:
        stopped = [sp.name for sp in order if sp.name in running][:1]
        where = f"stage {stopped[0]!r} " if stopped else ""
        outcome.status, outcome.exit_code = "failed", EXIT_FAILED
        if isinstance(exc, TrackingFailed):
            # The stage finished; recording it did not. Say so, not "stage failed".
            if exc.outcome is not None and not outcome.stage(exc.outcome.name):
                outcome.stages.append(exc.outcome)
            stopped = []
        outcome.error = redact_text(_failure_words(exc, where, state, stopped))
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        atomic_write_text(run_dir / "error.log", redact_text(trace))
        measured = exc.measured if isinstance(exc, StageFailed) else None
        if measured is not None:
            measured.error = outcome.error
            outcome.stages.append(measured)
            _record_failed(tracker, measured)
        _mark(outcome, stopped, "failed", kinds, state, run_dir)
        _safe_finish(tracker, "FAILED", outcome.error)
    # A tracker that records in the background knows its run id once it has finished.
    outcome.run_id = getattr(tracker, "run_id", None) or outcome.run_id
    outcome.ui_command = getattr(tracker, "ui_command", None) or outcome.ui_command
    outcome.wall_s = time.perf_counter() - t_run
    outcome.tracking_s = tracker.seconds
    _write_run_files(outcome, chash, overrides)
    return outcome


def _record_stage(outcome: RunOutcome, out: Any, refusal_code: int) -> None:
    """Add a finished stage to the run's outcome: a refusal ends the run refused (the gate's
    reason kept), a passed gate verdict is the run's unless one was set before."""
    outcome.stages.append(out)
    if out.status == "refused":
        outcome.status, outcome.exit_code = "refused", refusal_code
        outcome.gate, outcome.gate_reason = (
            "refused",
            (out.result.report.get("reason") if out.result else None),
        )
    if out.result and out.result.tags.get("gate_verdict") == "passed" and outcome.gate is None:
        outcome.gate = "passed"
    verdict = out.result.report.get("verdict") if out.result and out.status != "refused" else None
    if outcome.gate is None and isinstance(verdict, str) and verdict != "passed":
        # a gate stage of the user's own that returned a verdict other than passed (publish
        # then publishes nothing): the closing block says so, not "not run"
        why = out.result.report.get("reason") if out.result else None
        outcome.gate = verdict
        outcome.gate_reason = f"stage {out.name} (a stage of your own) returned verdict " + (
            f"{verdict!r}: {why}" if why else repr(verdict)
        )
    if outcome.gate is None and _gate_of_publish(out) is not None:
        # publish ran only on a passed verdict: a user's own gate stage passed
        outcome.gate = "passed"


def _gate_of_publish(out: Any) -> dict[str, Any] | None:
    """The verdict a publish stage read from the gate before it (which stage gave it, and what
    that gate recorded); None for any other stage."""
    gate = out.result.report.get("gate") if out.result and out.kind == "publish" else None
    return gate if isinstance(gate, dict) and gate.get("verdict") == "passed" else None


def _gate_line(outcome: RunOutcome) -> str:
    """The closing block's gate line: a gate stage of the user's own is named with what it
    did not record, since it checks what it checks, not what publish_gate does."""
    if outcome.gate is None:
        return "publish gate: not run"
    if outcome.gate != "passed":
        return f"publish gate: {outcome.gate.upper()} - {outcome.gate_reason}"
    if any(s.kind == "publish_gate" for s in outcome.stages):
        return "publish gate: passed"
    from wai_exp.pipeline.stages.publish import gate_counts

    gate = next((g for s in outcome.stages if (g := _gate_of_publish(s)) is not None), {})
    return f"publish gate: passed, given by stage {gate.get('by') or '?'}; {gate_counts(gate)}"


def _failure_words(exc: BaseException, where: str, state: Any, stopped: list[str]) -> str:
    """The sentence a failed run ends with (redacted by the caller)."""
    if isinstance(exc, TrackingFailed):
        return f"recording in MLflow failed: {exc}"
    if isinstance(exc, StageFailed | PartialRowsDamaged):
        # The stage said why in words; its exception type adds nothing a person acts on.
        return f"{where}failed: {exc}"
    if isinstance(exc, RowsNotWritten):
        # The disk failed, not the stage's work: the rows before it wait for the resume.
        kept = _kept_rows(state, stopped)
        return f"{where}stopped: {exc}, then re-run the same command to resume" + (
            f" ({kept})" if kept else ""
        )
    # A stage that failed mid-run kept its finished rows for the next run (a worker that
    # died, a bug): say so where the cache will reuse them.
    kept = _kept_rows(state, stopped) if state.cache.enabled else ""
    resume = f"; re-run the same command to resume ({kept})" if kept else ""
    return f"{where}failed: {type(exc).__name__}: {exc}{resume}"


def _sequential(
    state: _Run, order: list[StageSpec], kinds: dict[str, Any], running: set[str]
) -> Iterator[StageOutcome]:
    """Yield stage outcomes one stage at a time, in order (``pipeline.max_parallel: 1``)."""
    for i, spec in enumerate(order, start=1):
        running.add(spec.name)
        out = state.stage(spec, kinds[spec.name], f"[{i}/{len(order)}] {spec.name}")
        running.discard(spec.name)
        yield out


def _shown(path: Path, start_dir: Path) -> str:
    """``path`` relative to the folder the run started in (absolute on another drive)."""
    try:
        return os.path.relpath(path, start_dir)
    except ValueError:
        return str(path)


def _kept_rows(state: _Run, stopped: list[str]) -> str:
    """Where the interrupted stages' finished rows wait for the resume, e.g.
    ``312 finished rows kept in outputs/.cache/simulate-ab12/partial.jsonl``; "" if none."""
    parts = []
    for name in stopped:
        key = state.keys.get(name)
        partial = state.cache.entry(name, key) / cache_mod.PARTIAL if key else None
        if partial is None or not partial.is_file():
            continue
        with partial.open("rb") as fh:
            n = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
        try:
            shown = os.path.relpath(partial, state.start_dir)
        except ValueError:
            shown = str(partial)
        parts.append(f"{n} finished rows kept in {shown}")
    return "; ".join(parts)


def _mark(
    outcome: RunOutcome,
    names: list[str],
    status: str,
    kinds: dict[str, Any],
    state: _Run,
    run_dir: Path,
) -> None:
    """List the stages that were running when the run stopped, and why."""
    for name in names:
        if not outcome.stage(name):
            outcome.stages.append(
                StageOutcome(name, kinds[name].name, state.keys.get(name, ""), status, run_dir / name,
                             error=outcome.error)
            )  # fmt: skip


def _stopped(
    outcome: RunOutcome, stopped: list[str], kinds: dict[str, Any], state: _Run, tracker: Any
) -> None:
    """A signal stopped the run: say at once what is kept, end the tracking run KILLED with
    the reason, and return within seconds whatever the store is doing. A second signal
    meanwhile exits at once (:func:`stop.exit_on_next_signal`)."""
    signum = stop.stopped_by()
    name = stop.signal_name(signum)
    writer = getattr(tracker, "writer_pid", None)
    left = {"mlflow": ""}

    def what_is_left() -> str:
        rows = "the finished rows stay in the stage cache (re-run the same command to resume)"
        return f"{rows}{left['mlflow']}"

    with stop.exit_on_next_signal(what_is_left):
        where = f" during stage {', '.join(map(repr, stopped))}" if stopped else ""
        what = "interrupted" if signum == signal.SIGINT else f"interrupted by {name}"
        outcome.status, outcome.exit_code = "interrupted", 128 + signum
        outcome.error = f"{what}{where}; re-run the same command to resume"
        _say(state.stream, f"wai-exp: {name}{where}: stopping; saving what finished")
        kept = _kept_rows(state, stopped)
        if kept:
            outcome.error += f" ({kept})"
            _say(state.stream, f"  {kept}; re-run the same command to resume")
        _mark(outcome, stopped, "interrupted", kinds, state, outcome.run_dir)
        if not outcome.tracked:
            return
        run = getattr(tracker, "run_id", None)
        label = f"MLflow run {run}" if run else "the MLflow run"
        if writer is not None:
            left["mlflow"] = (
                f"; the tracking writer (pid {writer}) still ends {label} KILLED in the background"
            )
            _say(
                state.stream,
                f"  ending {label} KILLED (waiting up to {STOP_WAIT_S:.0f} s for the tracking "
                f"writer; {name} again exits at once)",
            )
        else:
            _say(state.stream, f"  ending {label} KILLED")
        finish_soon = getattr(tracker, "finish_soon", None) if writer is not None else None
        if finish_soon is None:
            _safe_finish(tracker, "KILLED", outcome.error)
            return
        try:
            done = finish_soon("KILLED", outcome.error, wait_s=STOP_WAIT_S)
        except Exception as exc:  # noqa: BLE001 - the run is stopped already; say why
            why = describe_store_error(exc, getattr(tracker, "uri", None))
            _say(state.stream, f"wai-exp: could not mark the tracking run KILLED: {why}")
            # A tracking server in the same process group dies of the same signal: the next
            # run in the store ends this one with the reason run.json keeps (orphans).
            _say(
                state.stream,
                f"  if the run was created, the next run in this store ends it KILLED with this "
                f"reason (from {outcome.run_dir / 'run.json'})",
            )
            return
        if not done:
            outcome.tracking_note = (
                f"the tracking writer (pid {writer}) is still recording it and ends it KILLED "
                f"in the background (its log: {outcome.run_dir / 'tracking.log'})"
            )
            _say(state.stream, f"  {outcome.tracking_note}")


def _record_failed(tracker: Any, out: StageOutcome) -> None:
    """Hand a failed stage's result to the tracker as a finished stage's is (its metrics,
    ``report.json``/``report.txt``: lost by cause, warnings, timeouts, usage; the rows it
    wrote), tagged ``<stage>.status=failed``: the MLflow run then holds what was measured
    before the failure, not only the error. Never raises (the stage's error comes first)."""
    result = out.result
    if result is None:
        return
    try:
        tracker.log_stage(
            out.name, kind=out.kind, report=result.report, text=result.text,
            rows_path=out.dir / cache_mod.ROWS, metrics=row_counts(out), seconds=out.compute_s,
            cached=False, rows=result.rows,
        )  # fmt: skip
        tracker.set_tags({f"{out.name}.status": "failed"})
    except Exception as exc:  # noqa: BLE001 - the stage's failure is the run's answer
        why = describe_store_error(exc, getattr(tracker, "uri", None))
        sys.stderr.write(
            redact_text(f"wai-exp: could not record what stage {out.name!r} measured: {why}\n")
        )


def _safe_finish(tracker: Any, status: str, error: str) -> None:
    # The run already failed; a tracker that cannot record it must not hide the first error.
    try:
        tracker.finish(status, error=error)
    except Exception as exc:  # noqa: BLE001
        why = describe_store_error(exc, getattr(tracker, "uri", None))
        sys.stderr.write(redact_text(f"wai-exp: could not mark the tracking run {status}: {why}\n"))


@dataclass
class _Run:
    """State shared by the stages of one run: keys and results so far, and where to write."""

    config: Mapping[str, Any]
    cache: cache_mod.StageCache
    run_dir: Path
    start_dir: Path
    tracker: Any
    stream: TextIO
    keys: dict[str, str] = field(default_factory=dict)
    #: stage -> a digest of the files its finished entry holds (rows, report, metrics). A
    #: later stage's key holds it with the stage's key: a stage recomputed under the same key
    #: (a file it read had changed) makes every stage that needs it recompute too, where its
    #: key alone let them reuse what they made from the old rows.
    made: dict[str, str] = field(default_factory=dict)
    results: dict[str, StageResult] = field(default_factory=dict)
    #: stage -> why it cannot run (a refused or skipped need)
    blocked: dict[str, str] = field(default_factory=dict)
    #: progress lines redraw in place (off when stages run side by side)
    redraw: bool = True
    #: stage -> its rows on disk, handed to later stages once the tracker has the stage
    stored: dict[str, StoredRows] = field(default_factory=dict)
    #: stage -> rows_in / rows_dropped of a stage just computed
    last_counts: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``config`` as validated before the run (None when run_pipeline was given none)
    root: RootConfig | None = None

    def stage(self, spec: StageSpec, kind: Any, head: str) -> StageOutcome:
        """Run (or reuse, or skip) one stage, place its files, hand them to the tracker."""
        out = self.execute(spec, kind, head)
        self.record(out)
        return out

    def release(self, name: str) -> None:
        """Swap a computed stage's in-memory rows for its file: later stages read them from
        disk, so the run never holds every stage's rows at once."""
        stored = self.stored.pop(name, None)
        result = self.results.get(name)
        if stored is not None and result is not None:
            result.rows = stored

    def execute(self, spec: StageSpec, kind: Any, head: str) -> StageOutcome:
        """Run (or reuse, or skip) one stage and place its files. No tracker calls, so it can
        run in a worker thread; the main thread records the outcome."""
        from wai_exp import __version__

        t0 = time.perf_counter()
        sections = _sections(kind.reads, self.config)
        narrow = getattr(kind, "key_sections", None)
        if narrow is not None:
            sections = narrow(sections, spec.params)
        deps = stage_deps(
            self.config,
            sections,
            spec.params,
            spec.target,
            self.start_dir,
            getattr(kind, "key_deps", None),
        )
        key_inputs = (
            kind.name,
            _key_params(kind, spec.params),
            sections,
            [(n, self.keys[n], self.made.get(n, "")) for n in spec.needs if n in self.keys],
            __version__,
        )
        key = cache_mod.stage_key(*key_inputs, deps=deps)
        self.keys[spec.name] = key
        stage_dir = self.run_dir / spec.name
        why = next((self.blocked[n] for n in spec.needs if n in self.blocked), None)
        if why is not None:
            self.blocked[spec.name] = why
            _say(self.stream, f"{head}: skipped ({why})")
            return StageOutcome(spec.name, kind.name, key, "skipped", stage_dir, error=why)

        entry = self.cache.entry(spec.name, key)
        rel = os.path.relpath(entry, self.start_dir)
        compute_s = 0.0
        hit: cache_mod.Hit | None = None
        waiting = f"{head}: another run is computing it; waiting"
        with self.cache.lock(spec.name, key, on_wait=lambda: _say(self.stream, waiting)):
            # Checked under the lock: a parallel sweep job with the same key may have just
            # finished it, and then this job reuses it instead of computing it twice.
            never = _hook_says(kind, "never_reused", self.config, spec.params)
            stale = None
            if self.cache.enabled and getattr(kind, "cached", True):
                if never is None:
                    record, stale = self.cache.check(spec.name, key)
                    if record is not None:
                        hit, stale = self.cache.place(spec.name, key, record, stage_dir)
                elif self.cache.is_complete(spec.name, key):  # an entry it could have reused
                    stale = f"{never}: its answers are never reused from the cache"
            if hit is None:
                if stale:
                    _say(self.stream, f"{head}: not reusing {rel}: {stale}; recomputing")
                elif never and self.cache.enabled:  # its first run: no entry to speak of
                    _say(
                        self.stream, f"{head}: {never}: its answers are never reused from the cache"
                    )
                parts = cache_mod.key_parts(*key_inputs, deps=deps)
                result, status, compute_s = self.compute(
                    spec, kind, entry, key, head, stale, _user_code(sections, spec),
                    never=never, parts=parts,
                )  # fmt: skip
        computed_s = None
        counts: dict[str, Any] = {}
        unseen = None
        if hit is not None:
            result = _load(entry, hit)
            info = hit.info
            self.made[spec.name] = cache_mod.content_hash(info.get("files") or {})
            if isinstance(info.get("seconds"), int | float):
                computed_s = float(info["seconds"])
            status = "refused" if info.get("status") == "refused" else "cached"
            counts = dict(info.get("counts") or {})
            seconds = info.get("seconds", 0)
            _say(
                self.stream,
                f"{head}: cached, reusing {rel} (key {key[:12]}; computed in {seconds:.1f} s)",
            )
            if _user_code(sections, spec):
                # the reads its key cannot see are then your code's, and yours to know about
                unseen = reads_mod.unseen_note(info.get("reads"))
                if unseen:
                    _say(self.stream, f"{head}: note: {unseen}")
            note = _hook_says(kind, "reused_note", self.config, spec.params)
            if note:
                _say(self.stream, f"{head}: note: {note}; to run it again, delete {rel}")
        else:
            counts = self.last_counts.pop(spec.name, {})
        if status == "refused":
            self.blocked[spec.name] = f"{spec.name} refused"
        self.results[spec.name] = result
        overhead = time.perf_counter() - t0 - compute_s
        return StageOutcome(
            spec.name, kind.name, key, status, stage_dir, compute_s=compute_s, overhead_s=overhead,
            result=result, cached=hit is not None, computed_s=computed_s,
            rows_in=counts.get("rows_in"), rows_dropped=counts.get("rows_dropped"),
            stale=stale if hit is None else None, unseen=unseen,
        )  # fmt: skip

    def record(self, out: StageOutcome) -> None:
        """Hand one stage's outcome to the tracker (main thread only)."""
        t0 = time.perf_counter()
        if out.status == "skipped":
            self.tracker.log_stage(
                out.name, kind=out.kind, report={"skipped": out.error}, text=f"skipped: {out.error}\n",
                rows_path=None, metrics={}, seconds=0.0, cached=False,
            )  # fmt: skip
            return
        result = out.result
        assert result is not None
        # A reused stage computed nothing in this run; its `seconds` metric is what its result
        # took when it was computed (tagged cached), not a 0 that reads as "instant".
        seconds = out.computed_s if out.cached else out.compute_s
        try:
            self.tracker.log_stage(
                out.name, kind=out.kind, report=result.report, text=result.text,
                rows_path=out.dir / "rows.jsonl", metrics=row_counts(out), seconds=seconds,
                cached=out.cached, rows=result.rows,
            )  # fmt: skip
            if result.tags:
                self.tracker.set_tags(dict(result.tags))
        except Exception as exc:  # the stage is done; the store is what failed
            why = describe_store_error(exc, getattr(self.tracker, "uri", None), self.run_dir)
            raise TrackingFailed(f"stage {out.name!r} finished, but {why}", out) from exc
        self.release(out.name)
        out.overhead_s += time.perf_counter() - t0

    def run_parallel(
        self, order: list[StageSpec], kinds: dict[str, Any], width: int, running: set[str]
    ) -> Iterator[StageOutcome]:
        """Yield stage outcomes as they finish, up to ``width`` stages at once, each in a
        daemon thread (so an interrupt never waits for one). ``running`` names the stages in
        flight, for the caller's messages. A stage's exception is re-raised here."""
        import queue
        import threading

        done: queue.Queue[tuple[str, StageOutcome | None, BaseException | None]] = queue.Queue()
        pending = list(order)
        finished: set[str] = set()
        position = {spec.name: i for i, spec in enumerate(order, start=1)}

        def work(spec: StageSpec) -> None:
            head = f"[{position[spec.name]}/{len(order)}] {spec.name}"
            try:
                done.put((spec.name, self.execute(spec, kinds[spec.name], head), None))
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                done.put((spec.name, None, exc))

        while pending or running:
            for spec in list(pending):
                if len(running) >= width:
                    break
                if all(need in finished for need in spec.needs):
                    pending.remove(spec)
                    running.add(spec.name)
                    threading.Thread(
                        target=work, args=(spec,), daemon=True, name=f"stage-{spec.name}"
                    ).start()
            while True:
                try:
                    # A short timeout keeps the main thread responsive to Ctrl-C and SIGTERM.
                    name, out, exc = done.get(timeout=0.2)
                    break
                except queue.Empty:
                    continue
            if exc is not None:
                running.intersection_update({name})  # the failed stage is the one to name
                raise exc
            running.discard(name)
            assert out is not None
            self.record(out)
            finished.add(name)
            yield out

    def _keep_partial_reads(self, stage: str, key: str, recorder: Any, spooled: Path) -> None:
        if recorder is not None:
            _merge_worker_reads(recorder, spooled, None)
            self.cache.keep_partial_reads(stage, key, reads_mod.snapshot(recorder))

    def _resuming(
        self,
        stage: str,
        key: str,
        head: str,
        partial: Path,
        never: str | None,
        parts: Mapping[str, Any] | None,
    ) -> str:
        """What the "running" line adds about the rows an interrupted attempt streamed:
        resumed (and, when what answered them cannot be checked, that they may not match it
        any more, with how to start afresh). Starting afresh while another key's attempt of
        the same command left rows (a file its key hashes changed since), it says so first."""
        resuming = partial.exists()
        if parts is not None:
            other = None if resuming else self.cache.superseded_partial(stage, key, parts)
            if other is not None:
                old, what = other
                _say(
                    self.stream,
                    f"{head}: not resuming from the rows an interrupted attempt streamed to "
                    f"{_shown(old, self.start_dir)}: {what} changed since; starting from the "
                    "first row",
                )
            self.cache.keep_partial_key(stage, key, parts)
        if not resuming:
            return ""
        if never is None:
            return " (resuming from streamed rows)"
        shown = _shown(partial, self.start_dir)
        return (
            f" (resuming from the rows an interrupted attempt streamed to {shown}: {never}, "
            "so wai-exp cannot check that they still match its answers; to start afresh, "
            f"delete {shown} and run the same command)"
        )

    def compute(
        self,
        spec: StageSpec,
        kind: Any,
        entry: Path,
        key: str,
        head: str,
        stale: str | None,
        runs: Sequence[str] = (),
        *,
        never: str | None = None,
        parts: Mapping[str, Any] | None = None,
    ) -> tuple[StageResult, str, float]:
        """Run one stage: rows into the run's stage folder, the rest into its cache entry, the
        marker last. Returns (result, "ran" | "refused", compute seconds). A result whose run
        ended in a failure stop reason raises ``StageFailed`` after its rows are written, and
        gets no marker: it is not a finished stage, so the same command computes it again.
        What it read while it ran (``pipeline/reads.py``; ``runs``: the user code it runs) is
        recorded with it, so a later lookup misses when any of that changed. ``never``: why
        the kind says its result cannot be checked (``never_reused``); ``parts``: what its key
        is made of (``cache.key_parts``)."""
        self.cache.prepare(spec.name, key)
        inputs = {n: self.results[n] for n in spec.needs}
        progress = ProgressLine(spec.name, self.stream, redraw=self.redraw)
        ctx = StageContext(
            name=spec.name, kind=kind.name, config=dict(self.config), run_dir=self.run_dir,
            stage_dir=entry, start_dir=self.start_dir, key=key,
            partial_path=entry / cache_mod.PARTIAL, progress=progress, root=self.root,
        )  # fmt: skip
        dropped = self.cache.drop_stale_partial(spec.name, key)
        if dropped:
            _say(self.stream, f"{head}: not resuming from its streamed rows: {dropped}")
        resumed = self._resuming(spec.name, key, head, ctx.partial_path, never, parts)
        _say(self.stream, f"{head}: running{resumed}")
        tc = time.perf_counter()
        recorder: reads_mod.Recorder | None = None
        spooled = entry / reads_mod.SPOOL_DIR  # what its worker processes read
        shutil.rmtree(spooled, ignore_errors=True)  # an earlier attempt's
        try:
            with reads_mod.record([self.run_dir, self.cache.root], runs) as recorder:
                result = _check_result(spec.name, kind.fn(ctx, dict(spec.params), inputs))
            status = "ran"
        except Exception as exc:
            if not _is_gate_refusal(exc):
                self._keep_partial_reads(spec.name, key, recorder, spooled)
                raise
            result = _refusal(spec.name, exc, inputs)
            status = "refused"
        except BaseException:  # interrupted: the next run resumes, if nothing it read changed
            self._keep_partial_reads(spec.name, key, recorder, spooled)
            raise
        finally:
            progress.close()
        compute_s = time.perf_counter() - tc
        assert recorder is not None  # record() opened it before the stage ran
        _merge_worker_reads(recorder, spooled, result.report.get("workers_rollouts"))
        read = reads_mod.snapshot(recorder)
        if stale or (never and self.cache.enabled):
            # The run says why it did not reuse the entry: on the terminal (above), in the
            # stage's report and its text block.
            result.report["cache"] = _cache_note(stale, never)
            said = (
                f"recomputed, the entry was not reused: {stale}"
                if stale
                else f"never reused: {never}"
            )
            result.text = (result.text.rstrip("\n") + "\n" if result.text else "") + (
                f"cache: {said}\n"
            )
        failure = failure_reason(result)
        if failure is not None:
            withhold_rates(result, spec.name, kind.name, failure)
        stage_dir = self.run_dir / spec.name
        rows_record, ids = _write(entry, stage_dir, result)
        n_rows = int(rows_record["lines"])
        counts = _counts(inputs, ids, n_rows)
        if failure is not None:
            self.cache.keep_partial_reads(spec.name, key, read)
            # What it measured before it failed goes to the tracker with the failure.
            measured = StageOutcome(
                spec.name, kind.name, key, "failed", stage_dir, compute_s=compute_s,
                result=result, rows_in=counts.get("rows_in"), rows_dropped=counts.get("rows_dropped"),
            )  # fmt: skip
            raise StageFailed(
                f"{failure}; its {n_rows} rows are in {stage_dir / cache_mod.ROWS}, it is not "
                "cached, and re-running the same command resumes it",
                measured,
            )
        marker = self.cache.mark_complete(
            spec.name,
            key,
            {
                "stage": spec.name, "kind": kind.name, "status": status,
                "seconds": round(compute_s, 3), "tags": result.tags, "rows": n_rows,
                "counts": counts, "reads": read,
            },
            rows_path=stage_dir / cache_mod.ROWS,
            rows_record=rows_record,
        )  # fmt: skip
        self.made[spec.name] = cache_mod.content_hash(marker["files"])
        self.last_counts[spec.name] = counts
        self.stored[spec.name] = StoredRows(stage_dir / cache_mod.ROWS, n_rows, ids)
        verdict = "REFUSED" if status == "refused" else "done"
        _say(self.stream, f"{head}: {verdict} in {compute_s:.1f} s ({counted(n_rows, 'row')})")
        return result, status, compute_s


class StageFailed(RuntimeError):
    """A stage returned, but its run ended in a failure stop reason (a dead agent ...).
    ``measured`` is the stage with the result it returned (report, metrics, rows so far)."""

    def __init__(self, message: str, measured: StageOutcome | None = None) -> None:
        super().__init__(message)
        self.measured = measured


#: ``stopped_because`` values that mean the stage did not finish its work.
FAILURE_STOPS = frozenset({"dead_agent", "agent_failed", "failed", "error", "crashed"})


def failure_reason(result: StageResult) -> str | None:
    """Why a returned result is not a finished stage, or None. A stage that reports a
    failure stop reason (``stopped_because`` in its tags or report, also per run) failed,
    whatever rows it returned."""
    report = result.report if isinstance(result.report, dict) else {}
    if report.get("failed_because"):
        # The stage said why, in words (simulate: the reason, lost by cause, the first error).
        return str(report.get("failure_summary") or f"it failed: {report['failed_because']}")
    stops = [result.tags.get("stopped_because"), report.get("stopped_because")]
    per_run = report.get("stopped_because_per_run")
    if isinstance(per_run, list):
        stops += per_run
    bad = sorted({str(s) for s in stops if s is not None and str(s) in FAILURE_STOPS})
    if not bad:
        return None
    warnings = [str(w) for w in report.get("warnings") or [] if w][:1]
    detail = f" ({warnings[0]})" if warnings else ""
    return f"the run stopped because {', '.join(bad)}{detail}"


#: Metric names (and their ``_ci_lo``/``_ci_hi``) a failed stage does not report: a rate
#: over the rows it got to reads as measured and sorts as one in a runs table (a judge whose
#: in-range answers were all 0 "measures" pass@1 0.000).
RATE_METRICS = ("pass_at_1", "pass_pow_k", "pass_at_k", "floor", "headroom")


#: Report keys beside the rates that hold pass@1's interval or the per-task rates it averages.
RATE_REPORT_KEYS = ("ci95", "per_task")


def withhold_rates(result: StageResult, stage: str, kind: str, failure: str) -> None:
    """Drop a failed stage's rate metrics, null the same numbers in its report (report.json
    keeps each key, as ``None``) and say why in ``report["headline_not_measured"]``
    (``<stage> failed: <the failure's first clause>``), which the closing summary and the
    MLflow description print as pass@1's reason; its report.txt leads with the same line."""
    rates = [key for key in result.metrics if key.startswith(RATE_METRICS)]
    if not rates and _headline(kind) != "grading":
        return
    for key in rates:
        del result.metrics[key]
    _null_rates(result.report)
    why = f"{stage} failed: {failure.split('; ', 1)[0]}"
    result.report["headline_not_measured"] = why
    result.text = (
        f"pass@1: not measured ({why}); the numbers below read only the rows it scored\n"
        + result.text
    )


def _null_rates(report: dict[str, Any]) -> None:
    """Set the rates in a failed stage's report (and their intervals, the floor block, the
    per-task rates) to None: a reader of report.json, the tracker's copy or a script, then
    cannot take the rows it got to for a measurement. Words (``pass_at_1_basis``) stay."""
    for key, value in report.items():
        if isinstance(value, str):
            continue
        if key.startswith(RATE_METRICS) or key in RATE_REPORT_KEYS:
            report[key] = None


def _counts(inputs: Mapping[str, StageResult], ids: frozenset, n_rows: int) -> dict[str, Any]:
    """``rows_in`` (rows its inputs handed it) and, for a stage that passes on a subset of
    its input rows by ``rollout_id``, ``rows_dropped``; kept in the COMPLETE record so a
    reused stage reports them without reading any rows."""
    if not inputs:
        return {}
    rows_in = sum(len(res.rows) for res in inputs.values())
    out: dict[str, Any] = {"rows_in": rows_in}
    if n_rows and ids:
        given: set[str] = set()
        for res in inputs.values():
            known = getattr(res.rows, "ids", None)
            if known is not None:
                given |= known
            else:
                given |= {str(r.get("rollout_id")) for r in res.rows}
        if ids <= given:
            out["rows_dropped"] = rows_in - n_rows
    return out


def row_counts(out: StageOutcome) -> dict[str, float]:
    """The stage's metrics plus row counts every stage gets in the tracker, so rows in, out and
    dropped are comparable across stages: ``rows_in`` (its inputs' rows; only for a stage with
    inputs), ``rows_out`` (the rows it wrote) and ``rows_dropped`` (``rows_in - rows_out``, only
    for a stage that passes on a subset of its input rows by ``rollout_id``: a report that
    writes no rows, or a stage that makes new rows, dropped nothing). A stage's own metric of
    the same name wins. Reads no rows: the counts come from the writer (or the cache record).
    """
    assert out.result is not None
    metrics = dict(out.result.metrics)
    metrics.setdefault("rows_out", float(len(out.result.rows)))
    if out.rows_in is not None:
        metrics.setdefault("rows_in", float(out.rows_in))
        if out.rows_dropped is not None:
            metrics.setdefault("rows_dropped", float(out.rows_dropped))
    return metrics


def _write_run_files(outcome: RunOutcome, chash: str, overrides: Sequence[str] = ()) -> None:
    compute = sum(s.compute_s for s in outcome.stages)
    timings = {
        "wall_s": round(outcome.wall_s, 4),
        "compute_s": round(compute, 4),
        "overhead_s": round(outcome.wall_s - compute, 4),
        "tracking_s": round(outcome.tracking_s, 4),
        "stages": {
            s.name: {
                "status": s.status,
                "compute_s": round(s.compute_s, 4),
                "overhead_s": round(s.overhead_s, 4),
                "rows": len(s.result.rows) if s.result is not None else None,
            }
            for s in outcome.stages
        },
    }
    try:
        write_json(outcome.run_dir / "timings.json", timings)
        write_json(
            outcome.run_dir / "run.json",
            {
                "status": outcome.status,
                "exit_code": outcome.exit_code,
                "error": outcome.error,
                "gate": outcome.gate,
                "gate_reason": outcome.gate_reason,
                "config_hash": chash,
                "run_id": outcome.run_id,
                "stages": {
                    s.name: {"status": s.status, "key": s.key, "kind": s.kind}
                    for s in outcome.stages
                },
                # What a sweep's table reads of a job when nothing recorded it in MLflow
                # (tracking=none): what the job was asked to run, and its answer.
                "overrides": redact_overrides(list(overrides)),
                "headline": run_headline(
                    [(s.kind, s.result.metrics) for s in outcome.stages if s.result is not None]
                ),
            },
        )
    except OSError as exc:  # the run's own result matters more than its bookkeeping
        sys.stderr.write(f"wai-exp: could not write run.json/timings.json: {exc}\n")


def _k_way_line(m: Mapping[str, Any], report: Mapping[str, Any], few: str | None) -> str:
    """pass^k and pass@k, each with its interval (a bare 0.000 over a handful of tasks reads
    as measured), or why neither has one; under runs=N, what k is."""
    k = report.get("k")
    pow_ci = _fmt_ci(m.get("pass_pow_k_ci_lo"), m.get("pass_pow_k_ci_hi"))
    at_ci = _fmt_ci(m.get("pass_at_k_ci_lo"), m.get("pass_at_k_ci_hi"))
    line = f"  pass^{k}: {m['pass_pow_k']:.3f}  {pow_ci}  pass@{k}: {m['pass_at_k']:.3f}  {at_ci}"
    if few and "pass_pow_k_ci_lo" not in m and "pass_at_k_ci_lo" not in m:
        why = ", as for pass@1" if "pass_at_1_ci_lo" not in m else f": {few}"
        line = f"  pass^{k}: {m['pass_pow_k']:.3f}  pass@{k}: {m['pass_at_k']:.3f}  (intervals not measured{why})"
    if report.get("k_basis"):  # runs=N: what k is, and that the runs are pooled
        line += f"  ({report['k_basis']})"
    return line


def _fmt_ci(lo: Any, hi: Any) -> str:
    if lo is None or hi is None:
        return "interval not measured"
    return f"95% CI [{lo:.3f}, {hi:.3f}]"


def _floor_lines(metrics: dict[str, Any], floor: Any, n_tasks: Any) -> list[str]:
    """The floor beside pass@1 (a do-nothing agent on the same tasks and judge) and what the
    gap's interval says, in words; "not measured" with the reason when it was not."""
    if not isinstance(floor, dict):
        return []  # a stage that never measures one (a user's own stage kind)
    if "floor" not in metrics:
        return [f"  floor: not measured ({floor.get('note') or 'no reason recorded'})"]
    from wai_exp.score.judges.floor import floor_scope

    ci = _fmt_ci(metrics.get("floor_ci_lo"), metrics.get("floor_ci_hi"))
    if floor.get("ci_method") == "wilson_tasks":
        ci += " (Wilson over tasks)"
    return [
        f"  floor: {metrics['floor']:.3f}  {ci} (a do-nothing agent: no tool call, one polite "
        f"refusal; the same judge on {floor_scope(floor, n_tasks)})",
        f"  {floor.get('words')}",
    ]


def _headline(kind: str) -> str | None:
    """The summary line a stage kind's numbers go to (``register(headline=)``), or None for
    a kind that has none (a report-like stage, your own ``_target_``)."""
    if kind not in REGISTRY and kind not in BUILTIN:
        return None
    return resolve(kind).headline


def _missing(outcome: RunOutcome, headline: str) -> str:
    """Why a headline number is absent: the pipeline has no such stage, it did not finish,
    or it finished and its report says why it has no number (no row judged ...)."""
    named = [n for n, k in outcome.planned.items() if _headline(k) == headline]
    if not named:
        return f"no {headline} stage in this pipeline"
    failed = [s.name for s in outcome.stages if s.name in named and s.status == "failed"]
    said = [why for _, why in _not_measured(outcome)]
    if said:
        return "; ".join(said)
    if failed:
        # Its report's note describes rows it never finished (a judge with no verdict leaves
        # rows "unjudged"): the error line is the answer, not that note's advice.
        return f"{', '.join(failed)} failed: the error below says why"
    done = [(s.name, s.result) for s in outcome.stages if s.name in named and s.result is not None]
    notes = [f"{name}: {r.report['note']}" for name, r in done if r.report.get("note")]
    if notes:
        return "; ".join(notes)
    return f"{', '.join(named)} did not finish"


#: Stage warnings the closing summary prints at most; the rest are counted, and every one
#: stays in its stage's report.json (and the MLflow description).
MAX_SUMMARY_WARNINGS = 8


def _lost_line(report: Mapping[str, Any]) -> list[str]:
    """The lost-rollouts warning the stage's line in the summary carries (none for a failed
    stage: its error line says it already)."""
    if report.get("failed_because"):
        return []
    return [str(w) for w in report.get("warnings") or () if "rollouts were lost (" in str(w)][:1]


def _stage_warning_texts(report: Mapping[str, Any]) -> list[str]:
    """A stage's warnings in words: its ``warnings`` list, then what its report keeps apart
    (rewards a rows file carried that the judge disagreed with, vocabulary the checklist did
    not know, a plan the MCP server never saw)."""
    texts = [str(w) for w in report.get("warnings") or () if w]
    replaced = report.get("replaced_rewards")
    if isinstance(replaced, dict) and replaced.get("disagree"):
        texts.append(str(replaced["warning"]))
    texts += [
        str(report[key]) for key in ("unknown_vocabulary", "plan_not_served") if report.get(key)
    ]
    return texts


def _warning_lines(outcome: RunOutcome) -> list[str]:
    """``warning (<stage>): ...`` for every stage warning (unjudged rows, rollouts cut at the
    context window, a torn rows-file line ...): each changes what the numbers below mean, so
    it is on the terminal, not only in report.json. Each text once, none the stage lines or
    the error line show already, at most ``MAX_SUMMARY_WARNINGS``."""
    shown = {w for s in outcome.stages if s.result is not None for w in _lost_line(s.result.report)}
    lines: list[str] = []
    for s in outcome.stages:
        report = s.result.report if s.result is not None else None
        if not isinstance(report, dict):
            continue
        for text in _stage_warning_texts(report):
            if text in shown or (outcome.error and text in outcome.error):
                continue
            shown.add(text)
            lines.append(f"warning ({s.name}): {text}")
    if len(lines) > MAX_SUMMARY_WARNINGS:
        more = len(lines) - MAX_SUMMARY_WARNINGS
        lines = lines[:MAX_SUMMARY_WARNINGS]
        lines.append(f"warning: {more} more in the stages' report.json")
    return lines


def _not_measured(outcome: RunOutcome) -> list[tuple[str, str]]:
    """(stage, why) for each failed stage whose numbers were withheld (``withhold_rates``)."""
    return [
        (s.name, str(s.result.report["headline_not_measured"]))
        for s in outcome.stages
        if s.result is not None and s.result.report.get("headline_not_measured")
    ]


def summarize(outcome: RunOutcome) -> str:
    """The closing block a person reads in the terminal; a fix it would give twice is given
    once (``fix_said_once``)."""
    from wai_exp.score.stats.left_out import fix_said_once, k_way_note

    lines = []
    for s in outcome.stages:
        rows = counted(len(s.result.rows), "row") if s.result is not None else ""
        t = f"{s.compute_s:.1f} s" if s.status in ("ran", "refused") and s.compute_s else ""
        lines.append(f"  {s.name:<16} {s.status:<8} {rows:>11} {t:>8}")
        report = s.result.report if s.result is not None else {}
        lines.extend(f"    {w}" for w in _lost_line(report))
        resume = report.get("resume")
        if isinstance(resume, dict):  # what a resume cut or did not reuse of its partial file
            lines.extend(f"    resume: {n}" for n in resume.get("notes") or ())
        if s.stale:
            lines.append(f"    recomputed: its cache entry was not reused ({s.stale})")
        if s.unseen:
            lines.append(f"    reused, but {s.unseen}")
    head = {
        "passed": "done",
        "refused": "done, publish gate REFUSED",
        "failed": "FAILED",
        "interrupted": "interrupted",
    }[outcome.status]
    out = [f"wai-exp: {head} in {outcome.wall_s:.1f} s", *lines]

    out += _warning_lines(outcome)
    graded_stages = [s for s in outcome.stages if s.result and "pass_at_1" in s.result.metrics]
    for graded in graded_stages:
        res = graded.result
        if res is None:  # graded_stages holds finished stages only
            continue
        m = res.metrics
        n = res.report.get("n_groups")
        over = f" over {n} tasks" if n is not None else ""
        which = f" ({graded.name})" if len(graded_stages) > 1 else ""
        ci = _fmt_ci(m.get("pass_at_1_ci_lo"), m.get("pass_at_1_ci_hi"))
        few = too_few_tasks(n)
        if few and "pass_at_1_ci_lo" not in m:
            ci, over = f"interval not measured: {few}", ""
        # An adaptive run's headline reads each task's fixed first batch: say so.
        first = res.report.get("pass_at_1_basis") == "first_batch"
        basis = (
            ", from the fixed first batch of every task (pass^k and pass@k too)" if first else ""
        )
        if res.report.get("ci_method") == "wilson_tasks":
            # every task at one rate: the bootstrap cannot vary, so say which interval it is
            ci += " (Wilson over tasks: every task has the same rate)"
        out.append(f"pass@1{which}: {m['pass_at_1']:.3f}  {ci}{over}{basis}")
        if left_out := res.report.get("ungraded_tasks_line"):
            out.append(f"  {left_out}")
        if conduct := res.report.get("conduct_only_rows"):
            out.append("  " + conduct_only_note(conduct, int(res.report["n_rows"])))
        out.extend(_floor_lines(m, res.report.get("floor"), n))
        if "pass_pow_k" in m and "pass_at_k" in m:
            out.append(_k_way_line(m, res.report, few))
        else:
            note = k_way_note(res.report) or "not enough repeats per task"
            out.append(f"  pass^k, pass@k: not measured ({note})")
        if res.report.get("lost_line"):  # what lost rollouts did to these numbers
            out.append(f"  {res.report['lost_line']}")
    if graded_stages:
        # A failed grading stage beside one that finished: its pass@1 is not that one's.
        out += [f"pass@1 ({name}): not measured ({why})" for name, why in _not_measured(outcome)]
    else:
        out.append(f"pass@1: not measured ({_missing(outcome, 'grading')})")
    # Report-like stages (compare, eval_variance, report, next_round, user stages) lead with
    # their own headline; show it rather than make the reader open report.txt.
    for st in outcome.stages:
        if st.result and _headline(st.kind) is None and st.result.text.strip():
            first_line = st.result.text.strip().splitlines()[0]
            named = first_line.startswith(f"{st.name}:")  # the stage named itself already
            out.append(first_line if named else f"{st.name}: {first_line}")
    kept = next(
        (s for s in reversed(outcome.stages) if s.result and "rows_kept" in s.result.metrics), None
    )
    if kept is not None and kept.result is not None:
        m = kept.result.metrics
        of = f" of {int(m['rows_in'])}" if "rows_in" in m else ""
        why = kept.result.report.get("kept_none_because") if not m["rows_kept"] else None
        are = kept.result.report.get("rows_kept_are")  # a stage that keeps rows in its unit
        where = f"{kept.name}: {are}" if are else kept.name
        out.append(f"rows kept: {int(m['rows_kept'])}{of} ({where})" + (f": {why}" if why else ""))
    else:
        out.append(f"rows kept: not measured ({_missing(outcome, 'selection')})")
    out.append(_gate_line(outcome))
    if outcome.error:
        out.append(f"error: {redact_text(outcome.error)}")
    out.append(f"run dir: {outcome.run_dir}")
    if outcome.tracking_note:
        out.append(f"MLflow run: {outcome.run_id or 'not created yet'}: {outcome.tracking_note}")
        if outcome.run_id and outcome.ui_command:
            out.append(f"open it:  {outcome.ui_command}")
    elif outcome.run_id:
        out.append(f"MLflow run: {outcome.run_id}")
        if outcome.ui_command:
            out.append(f"open it:  {outcome.ui_command}")
    elif outcome.tracked:
        out.append("MLflow run: not recorded (tracking failed: see the error above)")
    else:
        out.append("MLflow run: none (tracking=none)")
    return fix_said_once("\n".join(out))
