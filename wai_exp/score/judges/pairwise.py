"""Pairwise judging: which of two replies to the same request is better, asked both ways round.

A pointwise reward says each reply passed or failed on its own; a preference pair claims the
chosen reply is *better* than the rejected one. ``judge_pairs`` puts that claim to a judge
that sees both replies side by side. Judges that compare two answers prefer one position
regardless of content (Zheng et al., arXiv:2306.05685, found about a third of GPT-4's
verdicts flip when the answers swap places), so by default each pair is judged twice with A
and B exchanged and a verdict that follows the position rather than the reply becomes a tie
with ``position_consistent=False``. The flip rate is itself the headline number: a judge
that flips often is measuring the order, not the replies.

``pairwise_judge`` is the model-backed judge. It talks to the model through the project's
HTTP layer (``wai_exp.llm``), imported lazily so ``wai_exp.score`` stays free
of httpx until a model judge is actually built.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import inspect
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from wai_exp.domain.plurals import counted
from wai_exp.rows.keys import task_key
from wai_exp.score.judges.rubric import tool_status_text
from wai_exp.score.stats.resample import wilson_ci

#: A flip rate at or over this is flagged: the judge's answer follows the order.
POSITION_FLIP_FLAG = 0.2
#: A share of pairs where the judge prefers the pointwise-rejected reply at or over this is
#: flagged: the pointwise scores and the side-by-side verdict disagree outright.
PREFERS_REJECTED_FLAG = 0.2
#: Environment variable naming the judge spec when none is passed.
JUDGE_ENV = "WAI_EXP_JUDGE"
#: Characters of each reply's transcript shown to the model judge (the request has its own
#: ``request_chars``); the end of a transcript, where the answer is, is kept.
REPLY_CHARS = 6000
#: Characters of a tool result shown inside a transcript.
RESULT_CHARS = 300
#: Characters of a judge's reason kept on the pair and in the report.
REASON_CHARS = 500

#: The pairwise system prompt (``prompt=`` replaces it).
DEFAULT_PAIRWISE_PROMPT = (
    "You compare two replies, A and B, that an assistant gave to the same request. Decide "
    "which reply serves the person better: it does what was asked correctly, uses its tools "
    "properly and only where needed, follows the operator's policy, and states nothing it "
    "did not establish. Length, confidence and politeness are not merits by themselves. The "
    "order in which the replies are shown means nothing. If neither is better, answer tie. "
    'Answer with one JSON object and nothing else: {"winner": "A" | "B" | "tie", '
    '"reason": "<one sentence>"}'
)


#: The JSON schema a structured-output request asks a comparison's verdict in.
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "winner": {"type": "string", "enum": ["A", "B", "tie"]},
        "reason": {"type": "string"},
    },
    "required": ["winner", "reason"],
    "additionalProperties": False,
}


class Verdict(TypedDict):
    """One pairwise judge answer: ``winner`` is ``"A"``, ``"B"``, ``"tie"`` or ``None``
    (the judge gave no usable answer; ``reason`` says why)."""

    winner: str | None
    reason: str


_WINNERS = {"a": "A", "b": "B", "tie": "tie", "draw": "tie", "equal": "tie", "neither": "tie"}
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)
_LEADING_WORD = re.compile(r"^\W*(A|B|tie)\b", re.I)


def parse_verdict(raw: Any) -> Verdict:
    """Read a judge's answer as a ``Verdict``; never raises.

    Accepts ``{"winner": ..., "reason": ...}``, that object as JSON text (also inside a
    longer reply or a code fence), or a reply that starts with ``A``, ``B`` or ``tie``.
    Anything else gives ``winner=None`` with the problem in ``reason``.
    """
    obj: Any = raw
    if isinstance(raw, str):
        text = raw.strip()
        match = _JSON_OBJECT.search(text)
        obj = None
        if match:
            try:
                obj = json.loads(match.group(0), strict=False)
            except ValueError:
                obj = None
        if not isinstance(obj, Mapping):
            lead = _LEADING_WORD.match(text)
            if lead:
                return {"winner": _WINNERS[lead.group(1).lower()], "reason": text[:REASON_CHARS]}
            return {"winner": None, "reason": f"no verdict in the judge's answer: {text[:200]!r}"}
    if not isinstance(obj, Mapping):
        return {"winner": None, "reason": f"judge returned {type(raw).__name__}, not a verdict"}
    winner = obj.get("winner")
    reason = obj.get("reason")
    reason = "" if reason is None else str(reason)[:REASON_CHARS]
    if winner is None:
        return {"winner": None, "reason": reason or "judge gave no winner"}
    mapped = _WINNERS.get(str(winner).strip().lower())
    if mapped is None:
        return {"winner": None, "reason": f"winner {winner!r} is not A, B or tie"}
    return {"winner": mapped, "reason": reason}


# ---------------------------------------------------------------------------------------
# judge_pairs
# ---------------------------------------------------------------------------------------


def _is_async(judge: Any) -> bool:
    while isinstance(judge, functools.partial):
        judge = judge.func
    if inspect.iscoroutinefunction(getattr(judge, "acall", None)):
        return True
    return inspect.iscoroutinefunction(judge) or inspect.iscoroutinefunction(
        getattr(judge, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def _judge_name(judge: Any) -> str:
    for attr in ("judge_name", "__name__"):
        name = getattr(judge, attr, None)
        if isinstance(name, str) and name:
            return name
    return type(judge).__name__


def _call_all(
    judge: Callable[[dict, dict], Any], calls: list[tuple[dict, dict]], concurrency: int
) -> list[Verdict]:
    """Every ``judge(a, b)`` call, at most ``concurrency`` at once, answers in order.

    A raising call becomes ``winner=None`` with the exception in ``reason``. An async judge
    runs on one event loop (and is closed with its ``aclose`` when it has one); a sync judge
    on a pool of ``concurrency`` threads.
    """

    def fail(exc: BaseException) -> Verdict:
        return {"winner": None, "reason": f"judge raised {type(exc).__name__}: {exc}"}

    if not _is_async(judge):

        def one(pair: tuple[dict, dict]) -> Verdict:
            try:
                return parse_verdict(judge(*pair))
            except Exception as exc:  # noqa: BLE001 - recorded on the pair, never hidden
                return fail(exc)

        if concurrency == 1 or len(calls) <= 1:
            return [one(c) for c in calls]
        with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
            return list(pool.map(one, calls))

    target = judge.func if isinstance(judge, functools.partial) else judge
    acall = getattr(target, "acall", None)
    awaited = acall if inspect.iscoroutinefunction(acall) else judge

    async def main() -> list[Verdict]:
        sem = asyncio.Semaphore(concurrency)

        async def one(pair: tuple[dict, dict]) -> Verdict:
            async with sem:
                try:
                    return parse_verdict(await awaited(*pair))
                except Exception as exc:  # noqa: BLE001 - recorded on the pair
                    return fail(exc)

        try:
            return list(await asyncio.gather(*(one(c) for c in calls)))
        finally:
            close = getattr(judge, "aclose", None)
            if close is not None:
                await close()

    from wai_exp.score.judges.judging import run_coro

    return run_coro(main)


def _rate(k: int, n: int) -> tuple[float | None, list[float] | None]:
    return (k / n if n else None), wilson_ci(k, n)


def _side(verdict: Verdict, chosen_is_a: bool) -> str | None:
    w = verdict["winner"]
    if w in (None, "tie"):
        return w
    return "chosen" if (w == "A") == chosen_is_a else "rejected"


def _example(pair: Mapping[str, Any]) -> dict[str, Any]:
    chosen, rejected = pair["chosen"], pair["rejected"]
    return {
        "task_key": pair.get("task_key") or task_key(chosen),
        "chosen": chosen.get("rollout_id"),
        "rejected": rejected.get("rollout_id"),
        "chosen_score": pair.get("chosen_score"),
        "rejected_score": pair.get("rejected_score"),
        "winner": pair["pairwise"]["winner"],
        "position_consistent": pair["pairwise"]["position_consistent"],
        "reasons": pair["pairwise"]["reasons"],
    }


def judge_pairs(
    pairs: Sequence[dict],
    judge: Callable[[dict, dict], Any] | None = None,
    spec: str | None = None,
    swap: bool = True,
    concurrency: int = 8,
    api_key: str | None = None,
    examples: int = 10,
    position_flip_flag: float = POSITION_FLIP_FLAG,
    prefers_rejected_flag: float = PREFERS_REJECTED_FLAG,
) -> tuple[list[dict], dict[str, Any]]:
    """Ask a judge which side of each pair is better, both ways round.

    ``pairs`` are ``build_preference_pairs`` pairs (dicts with ``chosen`` and ``rejected``
    row dicts). ``judge(a_row, b_row)`` (sync or async) returns a ``Verdict`` dict or that
    JSON as text; without one, ``pairwise_judge(spec, api_key=api_key)`` is built (which
    raises ``ValueError`` when no spec is given or configured). With ``swap=True`` each pair
    is judged as (chosen, rejected) and as (rejected, chosen); two answers that name
    different replies make the pair a tie with ``position_consistent=False``, and a pair
    where either call failed gets ``winner=None`` (a one-sided verdict would carry exactly
    the position bias being measured). With ``swap=False`` the order alternates pair by
    pair (chosen first on even positions) so a position-biased judge cannot inflate
    ``agrees_with_scores``; ``position_consistent`` is then None.

    Writes on each pair, in place: ``pairwise`` = ``{"winner": "chosen" | "rejected" |
    "tie" | None, "position_consistent": bool | None, "reasons": [str, ...], "verdicts":
    the raw A/B answers in call order, "judge": name}`` and ``tie`` (bool). Returns
    ``(pairs, report)``; the report has ``n_pairs``, ``judged``, ``failed``,
    ``position_flip_rate`` (over pairs answered both ways), ``tie_rate``,
    ``agrees_with_scores`` and ``prefers_rejected`` (over judged pairs), each with a Wilson
    ``*_ci95`` and None plus a note when unmeasured, ``prefers_rejected_n``, up to
    ``examples`` ``prefers_rejected_examples`` and ``flipped_examples``, ``failed_reasons``,
    ``judge``, ``swap``, ``notes`` and ``warnings``. Raises ``TypeError`` for a pair
    without ``chosen``/``rejected`` dicts or a non-callable judge, ``ValueError`` for a bad
    ``concurrency``/``examples`` or a flag outside [0, 1].
    """
    pairs = _check_judge_pairs(
        pairs, concurrency, examples, position_flip_flag, prefers_rejected_flag
    )
    if judge is None:
        judge = pairwise_judge(spec, api_key=api_key)
    if not callable(judge):
        raise TypeError(f"judge must be callable (a_row, b_row) -> verdict, got {judge!r}")
    name = _judge_name(judge)
    per_pair, n_calls = _ask(judge, pairs, swap, concurrency)
    t = _PairTally()
    for pair, got in zip(pairs, per_pair, strict=True):
        _settle(pair, got, name, t, examples)

    flip_rate, flip_ci = _rate(t.flips, t.both_ways)
    tie_rate, tie_ci = _rate(t.ties, t.judged)
    agree_rate, agree_ci = _rate(t.agree, t.judged)
    against_rate, against_ci = _rate(t.against, t.judged)
    notes: list[str] = []
    if not swap:
        notes.append(
            "position_flip_rate: not measured (swap=False judges each pair in one order only)"
        )
    elif flip_rate is None:
        notes.append("position_flip_rate: not measured (no pair was answered both ways round)")
    if t.judged == 0:
        notes.append(
            "tie_rate, agrees_with_scores, prefers_rejected: not measured (no pair was judged)"
        )
    warnings = _pair_warnings(
        len(pairs), t, flip_rate, against_rate, position_flip_flag, prefers_rejected_flag
    )
    report = {
        "n_pairs": len(pairs),
        "judged": t.judged,
        "failed": t.failed,
        "failed_reasons": t.failed_reasons[:examples],
        "answered_both_ways": t.both_ways,
        "position_flip_rate": flip_rate,
        "position_flip_ci95": flip_ci,
        "position_flips": t.flips,
        "tie_rate": tie_rate,
        "tie_ci95": tie_ci,
        "agrees_with_scores": agree_rate,
        "agrees_with_scores_ci95": agree_ci,
        "prefers_rejected": against_rate,
        "prefers_rejected_ci95": against_ci,
        "prefers_rejected_n": t.against,
        "prefers_rejected_examples": t.prefers_ex,
        "flipped_examples": t.flipped_ex,
        "judge": name,
        "swap": bool(swap),
        "calls": n_calls,
        "position_flip_flag": float(position_flip_flag),
        "prefers_rejected_flag": float(prefers_rejected_flag),
        "notes": notes,
        "warnings": warnings,
    }
    return pairs, report


def _check_judge_pairs(
    pairs: Sequence[dict],
    concurrency: int,
    examples: int,
    position_flip_flag: float,
    prefers_rejected_flag: float,
) -> list[dict]:
    """Refuse bad arguments before any judge call; return the pairs as a list."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise ValueError(f"examples must be an int >= 0, got {examples!r}")
    for name, flag in (
        ("position_flip_flag", position_flip_flag),
        ("prefers_rejected_flag", prefers_rejected_flag),
    ):
        if not isinstance(flag, int | float) or isinstance(flag, bool) or not 0 <= flag <= 1:
            raise ValueError(f"{name} must be a share in [0, 1], got {flag!r}")
    pairs = list(pairs)
    for i, pair in enumerate(pairs):
        if not (
            isinstance(pair, dict)
            and isinstance(pair.get("chosen"), Mapping)
            and isinstance(pair.get("rejected"), Mapping)
        ):
            raise TypeError(
                f"pair {i} is not a dict with 'chosen' and 'rejected' row dicts; pass the "
                "pairs build_preference_pairs returns"
            )
    return pairs


def _ask(
    judge: Callable[[dict, dict], Any], pairs: list[dict], swap: bool, concurrency: int
) -> tuple[list[list[tuple[Verdict, bool]]], int]:
    """Each pair's answers as (verdict, chosen shown as A?) in call order, and the calls made.
    Both orders with ``swap``; otherwise chosen first on even positions only."""
    plan: list[tuple[int, bool]] = []
    for i in range(len(pairs)):
        if swap:
            plan += [(i, True), (i, False)]
        else:
            plan.append((i, i % 2 == 0))
    calls = [
        (pairs[i]["chosen"], pairs[i]["rejected"])
        if chosen_a
        else (pairs[i]["rejected"], pairs[i]["chosen"])
        for i, chosen_a in plan
    ]
    answers = _call_all(judge, calls, concurrency)
    per_pair: list[list[tuple[Verdict, bool]]] = [[] for _ in pairs]
    for (i, chosen_a), verdict in zip(plan, answers, strict=True):
        per_pair[i].append((verdict, chosen_a))
    return per_pair, len(calls)


@dataclass
class _PairTally:
    """The counts the report's rates come from, and the examples it shows."""

    judged: int = 0
    failed: int = 0
    both_ways: int = 0
    flips: int = 0
    ties: int = 0
    agree: int = 0
    against: int = 0
    failed_reasons: list[str] = field(default_factory=list)
    prefers_ex: list[dict[str, Any]] = field(default_factory=list)
    flipped_ex: list[dict[str, Any]] = field(default_factory=list)


def _settle(
    pair: dict, got: list[tuple[Verdict, bool]], name: str, t: _PairTally, examples: int
) -> None:
    """Write the pair's ``pairwise`` and ``tie`` from its answers, and count it in ``t``."""
    sides = [_side(v, chosen_a) for v, chosen_a in got]
    consistent: bool | None = None
    if any(v["winner"] is None for v, _ in got):
        winner = None
        t.failed += 1
        t.failed_reasons += [v["reason"] for v, _ in got if v["winner"] is None]
    elif len(sides) == 2:
        t.both_ways += 1
        consistent = sides[0] == sides[1]
        winner = sides[0] if consistent else "tie"
        t.flips += not consistent
    else:
        winner = sides[0]
    pair["pairwise"] = {
        "winner": winner,
        "position_consistent": consistent,
        "reasons": [v["reason"] for v, _ in got],
        "verdicts": [v["winner"] for v, _ in got],
        "judge": name,
    }
    pair["tie"] = winner == "tie"
    if winner is None:
        return
    t.judged += 1
    t.ties += winner == "tie"
    t.agree += winner == "chosen"
    if winner == "rejected":
        t.against += 1
        if len(t.prefers_ex) < examples:
            t.prefers_ex.append(_example(pair))
    if consistent is False and len(t.flipped_ex) < examples:
        t.flipped_ex.append(_example(pair))


def _pair_warnings(
    n_pairs: int,
    t: _PairTally,
    flip_rate: float | None,
    against_rate: float | None,
    position_flip_flag: float,
    prefers_rejected_flag: float,
) -> list[str]:
    """No pairs, failed calls, a position-biased judge, or one that prefers the rejected."""
    warnings: list[str] = []
    if not n_pairs:
        warnings.append("no pairs to judge: build them with build_preference_pairs first")
    if t.failed:
        warnings.append(
            f"{t.failed} of {counted(n_pairs, 'pair')} got no verdict (winner None); "
            f"{'it is' if t.failed == 1 else 'they are'} left out of every rate. First problem: "
            f"{t.failed_reasons[0]}"
        )
    if flip_rate is not None and flip_rate >= position_flip_flag:
        warnings.append(
            f"position bias: the judge changed its answer with the order on {flip_rate:.0%} of "
            f"pairs (flag {position_flip_flag:.0%}); its verdicts follow where a reply is shown, "
            "so use a stronger judge or a different pairwise prompt before trusting them"
        )
    if against_rate is not None and against_rate >= prefers_rejected_flag:
        warnings.append(
            f"the judge prefers the pointwise-rejected reply on {against_rate:.0%} of judged "
            f"pairs (flag {prefers_rejected_flag:.0%}): read prefers_rejected_examples; either "
            "the pointwise grade or the pairwise judge is wrong on them"
        )
    return warnings


# ---------------------------------------------------------------------------------------
# pairwise_judge
# ---------------------------------------------------------------------------------------


def _clip_tail(text: str, limit: int) -> str:
    """The last ``limit`` characters (the answer sits at the end of a transcript)."""
    return text if len(text) <= limit else "[...]" + text[-limit:]


def render_reply(row: Mapping[str, Any]) -> str:
    """The reply as the pairwise judge reads it: the agent's turns, its tool calls with
    arguments, each tool's status and (clipped) result, the person's follow-ups, and the
    final answer. Never includes ``privileged``: the judge compares what the person saw."""
    from wai_exp.score.grade.grading import final_reply, trajectory_steps

    _, steps = trajectory_steps(row)
    lines: list[str] = []
    for step in steps:
        kind = step.get("kind", step.get("role"))
        if kind == "assistant":
            if isinstance(step.get("content"), str) and step["content"].strip():
                lines.append(f"assistant: {step['content'].strip()}")
            for call in step.get("tool_calls") or ():
                if isinstance(call, Mapping):
                    fn = call.get("function")
                    if not isinstance(fn, Mapping):
                        fn = call
                    args = fn.get("arguments")
                    args = args if isinstance(args, str) else json.dumps(args, default=str)
                    lines.append(f"tool call: {fn.get('name')}({args})")
        elif kind == "tool":
            result = step.get("result", step.get("content"))
            text = result if isinstance(result, str) else json.dumps(result, default=str)
            lines.append(
                f"tool result ({step.get('name')}, {tool_status_text(step)}): {text[:RESULT_CHARS]}"
            )
        elif kind == "user":
            lines.append(f"person: {step.get('content')}")
    final = final_reply(row, steps)
    if final and not (lines and lines[-1] == f"assistant: {final.strip()}"):
        lines.append(f"final answer: {final.strip()}")
    return "\n".join(lines) or "(empty reply)"


def _system_prompt(prompt: str | None, policy: str, tools: Sequence | None) -> str:
    parts = [prompt if prompt is not None else DEFAULT_PAIRWISE_PROMPT]
    if policy:
        parts.append(f"The operator's policy the assistant works under:\n{policy}")
    if tools:
        described = []
        for t in tools:
            fn = t.get("function", t) if isinstance(t, Mapping) else {"name": str(t)}
            desc = fn.get("description") or ""
            described.append(f"- {fn.get('name')}" + (f": {desc}" if desc else ""))
        parts.append("The tools the assistant could call:\n" + "\n".join(described))
    return "\n\n".join(parts)


class PairwiseJudge:
    """A model that compares two replies (built by ``pairwise_judge``).

    ``judge(a_row, b_row)`` returns a ``Verdict`` (``await judge.acall(a_row, b_row)`` on an
    event loop); a failed model call or an answer
    with no verdict gives ``winner=None`` with the reason, never an exception. One
    ``httpx.AsyncClient`` per event loop (``judge_pairs`` runs one loop and calls
    ``aclose`` at the end).
    """

    def __init__(
        self,
        spec: str,
        *,
        api_key: str | None,
        system: str,
        timeout: float,
        max_tokens: int,
        request_chars: int,
        transport: Any = None,
        structured_output: str = "auto",
    ) -> None:
        from wai_exp.llm.model import Model
        from wai_exp.llm.structured import StructuredOutput

        self.llm = Model(spec, api_key=api_key, timeout=timeout, transport=transport)
        self.spec = self.llm.spec
        self.api_key = self.llm.api_key
        self.kind = self.llm.kind
        self.system = system
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.request_chars = request_chars
        self.transport = transport
        self.model = self.llm.name
        digest = hashlib.blake2b(system.encode(), digest_size=4).hexdigest()
        # The prompt is part of the judge: editing it must not keep the old name.
        self.judge_name = f"{self.spec.model}@{digest}"
        #: the ``StructuredOutput`` comparisons are asked with (None = structured_output off)
        self.structured = (
            None
            if structured_output == "off"
            else StructuredOutput(
                structured_output,
                "pairwise_verdict",
                VERDICT_SCHEMA,
                # a token holds at least one ASCII character: a reason this long fits the budget
                max_string_chars=max(8, min(REASON_CHARS, max_tokens - 16)),
            )
        )

    def structured_meta(self) -> dict[str, Any]:
        """``structured_output`` (the ``response_format`` form comparisons are asked with
        now, ``"off"`` for none) and, after the server refused one, ``structured_output_fallback``."""
        return self.structured.meta() if self.structured else {"structured_output": "off"}

    def messages(self, a_row: Mapping[str, Any], b_row: Mapping[str, Any]) -> list[dict]:
        """The chat messages sent for one comparison."""
        request = str(a_row.get("prompt") or b_row.get("prompt") or "")
        if len(request) > self.request_chars:
            request = request[: self.request_chars] + "[...]"
        user = (
            f"Request:\n{request}\n\n"
            f"Reply A:\n{_clip_tail(render_reply(a_row), REPLY_CHARS)}\n\n"
            f"Reply B:\n{_clip_tail(render_reply(b_row), REPLY_CHARS)}\n\n"
            "Which reply is better? Answer with the JSON object only."
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def __call__(self, a_row: Mapping[str, Any], b_row: Mapping[str, Any]) -> Verdict:
        """The verdict for one comparison, run to completion (on a loop of its own in a
        worker thread when called from inside a running loop, e.g. a notebook)."""
        from wai_exp.score.judges.judging import run_coro

        async def once() -> Verdict:
            try:
                return await self.acall(a_row, b_row)
            finally:
                await self.aclose()

        return run_coro(once)

    async def acall(self, a_row: Mapping[str, Any], b_row: Mapping[str, Any]) -> Verdict:
        """The verdict for one comparison, awaited on the caller's event loop (what
        ``judge_pairs`` uses to keep ``concurrency`` comparisons in flight)."""
        from wai_exp.llm.http import BackendError

        messages = self.messages(a_row, b_row)
        sampling = {"temperature": 0.0, "max_tokens": self.max_tokens}
        try:
            if self.structured is None:
                done = await self.llm.complete(messages, [], sampling)
            else:
                done, _ = await self.llm.complete(
                    messages, [], sampling, structured=self.structured
                )
        except BackendError as exc:
            return {"winner": None, "reason": f"model call failed: {exc}"}
        return parse_verdict(done.content)

    async def aclose(self) -> None:
        """Close the running loop's HTTP client (safe to call twice)."""
        await self.llm.aclose()


def pairwise_judge(
    spec: str | None = None,
    api_key: str | None = None,
    prompt: str | None = None,
    policy: str = "",
    tools: Sequence | None = None,
    timeout: float = 120,
    max_tokens: int = 120,
    request_chars: int = 4000,
    *,
    structured_output: str = "auto",
    transport: Any = None,
) -> Callable[[dict, dict], Verdict]:
    """A model judge for ``judge_pairs``: ``judge(a_row, b_row) -> Verdict`` (``await
    judge.acall(a_row, b_row)`` on an event loop).

    ``spec`` is a backend spec (``openai:gpt-4.1-mini``, ``vllm:<model>@<url>``,
    ``ollama:...``, ``anthropic:...``), else the ``WAI_EXP_JUDGE`` environment variable;
    there is no offline default, so with neither it raises ``ValueError``. ``prompt``
    replaces ``DEFAULT_PAIRWISE_PROMPT``; ``policy`` and ``tools`` are appended to it. The
    judge's ``judge_name`` is ``<model>@<hash of the system prompt>``, so a prompt edit is a
    new judge. ``max_tokens`` is the reply budget, ``request_chars`` how much of the request
    the judge sees. ``structured_output`` (``auto``, ``json_schema``, ``json_object``,
    ``off``) asks for the verdict's JSON schema through ``response_format``, stepping down
    when the server refuses a form (``judge.structured_meta()`` says what was used).
    ``transport`` (an ``httpx`` transport) is for tests. Raises ``ValueError`` for an
    unknown provider, a non-positive budget or an unknown ``structured_output``.
    """
    from wai_exp.llm.structured import check_mode

    check_mode(structured_output, "structured_output")
    spec = spec or os.environ.get(JUDGE_ENV) or None
    if not spec:
        raise ValueError(
            "pairwise_judge needs a model: pass spec='openai:gpt-4.1-mini' (or "
            "'vllm:<model>@http://host:8000/v1', 'ollama:<model>', 'anthropic:<model>'), set "
            f"{JUDGE_ENV} to such a spec, or pass judge_pairs(judge=) your own callable"
        )
    for name, value in (
        ("timeout", timeout),
        ("max_tokens", max_tokens),
        ("request_chars", request_chars),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(f"{name} must be > 0, got {value!r}")
    return PairwiseJudge(
        spec,
        api_key=api_key,
        system=_system_prompt(prompt, policy, tools),
        timeout=float(timeout),
        max_tokens=int(max_tokens),
        request_chars=int(request_chars),
        transport=transport,
        structured_output=structured_output,
    )


__all__ = [
    "DEFAULT_PAIRWISE_PROMPT",
    "POSITION_FLIP_FLAG",
    "PREFERS_REJECTED_FLAG",
    "PairwiseJudge",
    "Verdict",
    "judge_pairs",
    "pairwise_judge",
    "parse_verdict",
]
