"""Rollouts as MLflow traces: a researcher reads a failing rollout in the Traces tab, next to
its score.

One trace per sampled rollout, linked to the run: a root span (the ask in, the final reply
out), then one span per agent turn (its text and tool calls) and one per tool call (arguments
in, result out; status ERROR when the world injected a fault or the call failed). The reward
and the judge's reason are a ``reward`` feedback assessment (source CODE, the judge's name);
an unjudged rollout gets its judge status instead of a reward.

At most ``cap`` rollouts per stage (``tracking.traces``, default 200): failing and passing
rollouts in equal shares where both exist, picked by a seeded draw over rollout ids, so a
re-run records the same ones.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import heapq
import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

#: Longest text kept on a span input or output; the rows artifact keeps the rest.
MAX_TEXT = 4000


def sample_rollouts(
    rows: Iterable[Mapping[str, Any]], cap: int, seed: str = ""
) -> list[Mapping[str, Any]]:
    """Up to ``cap`` rows: half failing (reward < 1) and half passing where both exist, each
    share filled from the other when short, ordered by a hash of ``seed`` and the rollout id.

    ``rows`` are read once and at most ``cap`` of each kind (failing, passing, ungraded) are
    held at a time, so a stage's rows file can stream through."""
    if cap <= 0:
        return []

    def order(r: Mapping[str, Any]) -> str:
        key = f"{seed}:{r.get('rollout_id') or r.get('scenario_id')}:{r.get('rollout_index')}"
        return hashlib.sha256(key.encode()).hexdigest()

    def reward(r: Mapping[str, Any]) -> float | None:
        v = r.get("reward")
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    # Per kind, the ``cap`` rows first by hash (ties: first seen), as a sort would keep them.
    kept: dict[str, list[tuple[str, int, Mapping[str, Any]]]] = {"f": [], "p": [], "o": []}
    for i, r in enumerate(rows):
        v = reward(r)
        heap = kept["o" if v is None else ("f" if v < 1 else "p")]
        item = (_negated(order(r)), -i, r)
        if len(heap) < cap:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    failing, passing, other = (
        [r for _, _, r in sorted(kept[k], reverse=True)] for k in ("f", "p", "o")
    )
    half = cap // 2
    take_f = min(len(failing), max(half, cap - len(passing)))
    take_p = min(len(passing), cap - take_f)
    picked = failing[:take_f] + passing[:take_p]
    picked += other[: cap - len(picked)]
    return picked


def _negated(hex_digest: str) -> str:
    """A key that sorts in the reverse order of ``hex_digest`` (for a max-heap of hashes)."""
    return hex_digest.translate(_REVERSE_HEX)


_REVERSE_HEX = str.maketrans("0123456789abcdef", "fedcba9876543210")


def _clip(value: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 15] + "...[truncated]"


#: Traces per store transaction (and per ``log_spans`` request): their infos, tags, reward
#: assessments and spans are written with one commit instead of one per rollout (on SQLite
#: each commit waits for the disk: 200 rollouts took 2-5 s, most of what the command waited
#: for at its end); 50 rollouts keep a request to a server to a few MB and a SQLite write
#: lock held well under a second.
TRACES_PER_BATCH = 50

#: One thread at a time writes to a SQLite store from this process: the tracking writer's
#: trace thread holds it for each batch, its main thread for each command. Two connections
#: of one process otherwise meet the database lock, and SQLite's busy handler sleeps in steps
#: of up to 50 ms whether or not the lock has come free: 0.6-1.2 s of a 3-s rl_round went to
#: those sleeps. Re-entrant, so a thread that holds it can log traces itself.
STORE_WRITES = threading.RLock()


def log_rollout_traces(
    uri: str,
    run_id: str,
    experiment_id: str,
    stage: str,
    rows: Sequence[Mapping[str, Any]],
    cap: int,
    *,
    redact: Any = None,
) -> int:
    """Log the sampled rollouts of one stage as traces of ``run_id``; returns how many.

    The traces are built whole in memory, then written :data:`TRACES_PER_BATCH` at a time:
    one ``start_trace`` per rollout (its info, tags, run link and reward assessment) and one
    ``log_spans`` per batch, in one transaction per batch on a database store
    (:func:`_one_transaction`). MLflow's fluent tracing would export every span on its own and
    log each assessment in a request of its own (about seven store writes per rollout).
    ``redact`` (text -> text) is applied to every input, output and reason. Raises what MLflow
    raises; the caller treats traces as best-effort."""
    picked = sample_rollouts(rows, cap, seed=stage)
    if not picked:
        return 0
    from mlflow.tracing.client import TracingClient

    clean = redact or (lambda t: t)
    store = TracingClient(tracking_uri=uri).store
    t = time.time_ns()
    built = []
    for row in picked:
        info, spans, t = _rollout_trace(row, stage, run_id, experiment_id, clean, t)
        built.append((info, spans))
    for i in range(0, len(built), TRACES_PER_BATCH):
        batch = built[i : i + TRACES_PER_BATCH]
        with _one_transaction(store) as writer:
            for info, _ in batch:
                writer.start_trace(info)
            writer.log_spans(experiment_id, [s for _, trace_spans in batch for s in trace_spans])
    return len(picked)


@contextlib.contextmanager
def _one_transaction(store: Any) -> Iterator[Any]:
    """The store to write a batch through: for a database store, a shallow copy whose every
    session is one session committed once at the end (all of the batch or, on an error,
    none of it); any other store (a tracking server) as it is.

    The copy shares the store's engine but not its session maker, so the writer's other
    threads keep their own transactions. MLflow opens a session, and on SQLite commits it
    with a wait for the disk, for every ``start_trace``; its ``ManagedSessionMaker`` is an
    attribute of the store object (mlflow 3.17, pinned in pyproject.toml)."""
    maker = vars(store).get("ManagedSessionMaker")
    if maker is None:
        yield store
        return
    with STORE_WRITES, maker(read_only=False) as session:

        @contextlib.contextmanager
        def same_session(read_only: bool = True) -> Iterator[Any]:
            yield session

        batch = copy.copy(store)
        batch.ManagedSessionMaker = same_session
        # Every start_trace reads its experiment (to check it is active): once per batch.
        batch.get_experiment = functools.lru_cache(maxsize=4)(batch.get_experiment)
        yield batch


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _span(
    trace_id: str,
    otel_trace_id: int,
    parent: int | None,
    name: str,
    span_type: str,
    start_ns: int,
    end_ns: int,
    inputs: Any,
    outputs: Any,
    error: bool = False,
) -> tuple[Any, int]:
    """One finished span as MLflow's ``Span`` entity (built from its stored form), and its id."""
    import base64
    import uuid

    from mlflow.entities import Span
    from mlflow.tracing.constant import SpanAttributeKey

    span_id = uuid.uuid4().int >> 64 or 1

    def b64(n: int, size: int) -> str:
        return base64.b64encode(n.to_bytes(size, "big")).decode()

    span = Span.from_dict(
        {
            "trace_id": b64(otel_trace_id, 16),
            "span_id": b64(span_id, 8),
            "parent_span_id": b64(parent, 8) if parent is not None else None,
            "name": name,
            "start_time_unix_nano": start_ns,
            "end_time_unix_nano": end_ns,
            "events": [],
            "status": {"code": "STATUS_CODE_ERROR" if error else "STATUS_CODE_OK", "message": ""},
            "attributes": {
                SpanAttributeKey.REQUEST_ID: _dumps(trace_id),
                SpanAttributeKey.SPAN_TYPE: _dumps(span_type),
                SpanAttributeKey.INPUTS: _dumps(inputs),
                SpanAttributeKey.OUTPUTS: _dumps(outputs),
            },
            "links": [],
        }
    )
    return span, span_id


def _rollout_trace(
    row: Mapping[str, Any],
    stage: str,
    run_id: str,
    experiment_id: str,
    clean: Any,
    t: int,
) -> tuple[Any, list[Any], int]:
    """``(TraceInfo, spans, next start time)`` for one rollout: the root span, one span per
    agent turn and per tool call, the reward as a feedback assessment."""
    import uuid

    from mlflow.entities import (
        AssessmentSource,
        Feedback,
        TraceInfo,
        TraceLocation,
        TraceState,
    )
    from mlflow.tracing.constant import (
        MAX_CHARS_IN_TRACE_INFO_METADATA,
        TRACE_SCHEMA_VERSION,
        TRACE_SCHEMA_VERSION_KEY,
        TraceMetadataKey,
        TraceTagKey,
    )

    otel_trace_id = uuid.uuid4().int
    trace_id = f"tr-{otel_trace_id:032x}"
    start = t
    inputs = {"prompt": clean(_clip(row.get("prompt") or ""))}
    children: list[tuple[Any, ...]] = []  # (name, type, start, end, inputs, outputs, error)
    turn = 0
    for step in row.get("steps") or []:
        if not isinstance(step, Mapping):
            continue
        t += 1_000_000
        kind = step.get("kind")
        if kind == "tool":
            bad = bool(step.get("fault")) or step.get("status") not in (None, "ok")
            children.append((
                f"tool {step.get('name', '?')}", "TOOL", t, t + 500_000,
                {"arguments": clean(_clip(step.get("arguments")))},
                {"result": clean(_clip(step.get("result"))), "fault": step.get("fault")},
                bad,
            ))  # fmt: skip
        else:
            turn += 1
            children.append((
                f"agent turn {turn}" if kind == "assistant" else f"{kind or 'step'} {turn}",
                "LLM" if kind == "assistant" else "UNKNOWN", t, t + 500_000,
                {"turn": turn},
                {"content": clean(_clip(step.get("content") or step.get("text") or "")),
                 "tool_calls": clean(_clip(step.get("tool_calls") or []))},
                False,
            ))  # fmt: skip
    t += 1_000_000
    outputs = {"final_text": clean(_clip(row.get("final_text") or ""))}
    name = f"{stage} rollout {row.get('scenario_id', '')}"
    root, root_id = _span(trace_id, otel_trace_id, None, name, "AGENT", start, t, inputs, outputs)
    spans = [root] + [_span(trace_id, otel_trace_id, root_id, *c)[0] for c in children]

    judge = str(row.get("judge_name") or "judge")
    reward = row.get("reward")
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        value: Any = float(reward)
    else:
        value = str(row.get("judge_status") or "unjudged")
    feedback = Feedback(
        name="reward",
        value=value,
        rationale=clean(_clip(row.get("reason") or "")) or None,
        source=AssessmentSource(source_type="CODE", source_id=judge),
        trace_id=trace_id,
    )
    request, response = _dumps(inputs), _dumps(outputs)
    limit = MAX_CHARS_IN_TRACE_INFO_METADATA
    info = TraceInfo(
        trace_id=trace_id,
        trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=start // 1_000_000,
        execution_duration=(t - start) // 1_000_000,
        state=TraceState.OK,
        request_preview=request,
        response_preview=response,
        trace_metadata={
            TRACE_SCHEMA_VERSION_KEY: str(TRACE_SCHEMA_VERSION),
            TraceMetadataKey.SOURCE_RUN: run_id,
            # The traces table's request and response columns read these.
            TraceMetadataKey.INPUTS: request[:limit],
            TraceMetadataKey.OUTPUTS: response[:limit],
        },
        tags={
            TraceTagKey.TRACE_NAME: name,
            "wai.stage": stage,
            "wai.rollout_id": str(row.get("rollout_id", "")),
            "wai.scenario_id": str(row.get("scenario_id", "")),
            "wai.reward": str(row.get("reward")),
        },
        assessments=[feedback],
    )
    return info, spans, t + 1_000_000
