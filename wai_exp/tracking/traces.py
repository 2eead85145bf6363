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

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

#: Longest text kept on a span input or output; the rows artifact keeps the rest.
MAX_TEXT = 4000


def sample_rollouts(
    rows: Sequence[Mapping[str, Any]], cap: int, seed: str = ""
) -> list[Mapping[str, Any]]:
    """Up to ``cap`` rows: half failing (reward < 1) and half passing where both exist, each
    share filled from the other when short, ordered by a hash of ``seed`` and the rollout id."""
    if cap <= 0 or not rows:
        return []

    def order(r: Mapping[str, Any]) -> str:
        key = f"{seed}:{r.get('rollout_id') or r.get('scenario_id')}:{r.get('rollout_index')}"
        return hashlib.sha256(key.encode()).hexdigest()

    def reward(r: Mapping[str, Any]) -> float | None:
        v = r.get("reward")
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    failing = sorted((r for r in rows if (reward(r) is not None and reward(r) < 1)), key=order)
    passing = sorted((r for r in rows if (reward(r) is not None and reward(r) >= 1)), key=order)
    other = sorted((r for r in rows if reward(r) is None), key=order)
    half = cap // 2
    take_f = min(len(failing), max(half, cap - len(passing)))
    take_p = min(len(passing), cap - take_f)
    picked = failing[:take_f] + passing[:take_p]
    picked += other[: cap - len(picked)]
    return picked


def _clip(value: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 15] + "...[truncated]"


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

    ``redact`` (text -> text) is applied to every input, output and reason. Raises what
    MLflow raises; the caller treats traces as best-effort."""
    picked = sample_rollouts(rows, cap, seed=stage)
    if not picked:
        return 0
    import mlflow

    clean = redact or (lambda t: t)
    # MLflow's trace exporter writes to the process's tracking URI, not the client's.
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        return _log(uri, run_id, experiment_id, stage, picked, clean)
    finally:
        mlflow.set_tracking_uri(previous)


def _log(
    uri: str,
    run_id: str,
    experiment_id: str,
    stage: str,
    picked: Sequence[Mapping[str, Any]],
    clean: Any,
) -> int:
    import mlflow
    from mlflow import MlflowClient
    from mlflow.entities import AssessmentSource, Feedback
    from mlflow.tracing.client import TracingClient

    client = MlflowClient(tracking_uri=uri)
    tracing = TracingClient(tracking_uri=uri)
    t = time.time_ns()
    feedback: list[tuple[str, Any]] = []
    for row in picked:
        prompt = row.get("prompt") or ""
        root = client.start_trace(
            name=f"{stage} rollout {row.get('scenario_id', '')}",
            span_type="AGENT",
            inputs={"prompt": clean(_clip(prompt))},
            tags={
                "wai.stage": stage,
                "wai.rollout_id": str(row.get("rollout_id", "")),
                "wai.scenario_id": str(row.get("scenario_id", "")),
                "wai.reward": str(row.get("reward")),
            },
            experiment_id=experiment_id,
            run_id=run_id,
            start_time_ns=t,
        )
        trace_id = root.trace_id
        turn = 0
        for step in row.get("steps") or []:
            if not isinstance(step, Mapping):
                continue
            t += 1_000_000
            kind = step.get("kind")
            if kind == "tool":
                bad = bool(step.get("fault")) or step.get("status") not in (None, "ok")
                span = client.start_span(
                    name=f"tool {step.get('name', '?')}",
                    trace_id=trace_id,
                    parent_id=root.span_id,
                    span_type="TOOL",
                    inputs={"arguments": clean(_clip(step.get("arguments")))},
                    start_time_ns=t,
                )
                client.end_span(
                    trace_id,
                    span.span_id,
                    outputs={
                        "result": clean(_clip(step.get("result"))),
                        "fault": step.get("fault"),
                    },  # fmt: skip
                    status="ERROR" if bad else "OK",
                    end_time_ns=t + 500_000,
                )
            else:
                turn += 1
                span = client.start_span(
                    name=f"agent turn {turn}"
                    if kind == "assistant"
                    else f"{kind or 'step'} {turn}",
                    trace_id=trace_id,
                    parent_id=root.span_id,
                    span_type="LLM" if kind == "assistant" else "UNKNOWN",
                    inputs={"turn": turn},
                    start_time_ns=t,
                )
                client.end_span(
                    trace_id,
                    span.span_id,
                    outputs={
                        "content": clean(_clip(step.get("content") or step.get("text") or "")),
                        "tool_calls": clean(_clip(step.get("tool_calls") or [])),
                    },
                    end_time_ns=t + 500_000,
                )
        t += 1_000_000
        client.end_trace(
            trace_id,
            outputs={"final_text": clean(_clip(row.get("final_text") or ""))},
            end_time_ns=t,
        )
        judge = str(row.get("judge_name") or "judge")
        reward = row.get("reward")
        if isinstance(reward, int | float) and not isinstance(reward, bool):
            value: Any = float(reward)
        else:
            value = str(row.get("judge_status") or "unjudged")
        feedback.append(
            (
                trace_id,
                Feedback(
                    name="reward",
                    value=value,
                    rationale=clean(_clip(row.get("reason") or "")) or None,
                    source=AssessmentSource(source_type="CODE", source_id=judge),
                ),
            )
        )
    # Traces are exported asynchronously; an assessment needs its trace in the store.
    mlflow.flush_trace_async_logging()
    for trace_id, fb in feedback:
        tracing.log_assessment(trace_id, fb)
    return len(picked)
