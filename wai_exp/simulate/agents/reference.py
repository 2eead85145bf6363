"""Score finished rollouts under a reference model, so ``mean_kl`` has its other side.

``reference_logprobs`` stamps ``ref_logprob`` (the reference's summed logprob over the
assistant-generated text of a rollout) and ``ref_n_tokens`` on every row. It lives here, at the
HTTP edge, because ``wai_exp.score`` stays pure; ``mean_kl(rows)`` then reads ``ref_logprob``.

What is scored, exactly
-----------------------
Each rollout is rendered as one ChatML text (``<|im_start|>role\\n...<|im_end|>\\n``; the tool
list goes into the system block, tool calls into ``<tool_call>`` blocks after the reply text,
tool results into ``<tool_response>`` blocks of a user turn, as Qwen's template writes them)
and sent to the OpenAI-compatible legacy completions endpoint, ``POST {base}/completions``
with ``echo: true, logprobs: 1, max_tokens: 1, skip_special_tokens: false``: the server
scores the prompt's own tokens (the one token it generates lies past the prompt and is
ignored). The answer's token texts place every token in the rendered text (a leading BOS is
allowed for); the tokens that *start* inside an assistant turn's content or tool-call block
are summed. The turn markers (``<|im_start|>assistant\\n`` and the closing ``<|im_end|>``) are
not scored, so the policy's stop token is not either.

Limits (read before trusting the number):

* ChatML is the chat format of Qwen-family models, where the rendering is close to the model's
  own template. Under any other model it is a plain-text approximation: the reference scores
  the policy's text in a context the policy did not see, and ``mean_kl`` then mixes a format
  shift into the KL.
* The text is what the row recorded. Tool-call arguments are re-serialised JSON (sorted keys),
  not the policy's original bytes, and a reasoning block the row did not keep is not scored.
* Tokens are the reference's own. ``token_count_gap`` in the report (mean
  ``|ref_n_tokens - n_tokens|`` over rows carrying the policy's ``n_tokens``) is near zero only
  when the reference shares the policy's tokenizer and the rendering matches what was sampled.
* Positions are by token start: a reference token that runs from the turn header into the reply
  is not counted. A row whose token texts do not reproduce the prompt (a server decoding with
  special tokens skipped, or a non-ASCII character split across byte-level tokens) fails with
  that error rather than be scored at wrong positions.
* ``chat_template_kwargs`` supports only ``enable_thinking``: ``False`` puts Qwen3's empty
  ``<think>`` block (unscored) in front of every assistant turn, as Qwen3's template does.
* Backends: ``vllm:`` (the intended one), ``ollama:``/``openai:`` only when the server still
  honours ``echo`` with ``logprobs`` on ``/completions``; ``anthropic:`` has no such endpoint.
* A JSONL path is read and its rows are scored in memory only: nothing is written back. Pass
  the loaded rows (``wai_exp.rows.read_rows``) to keep them.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from wai_exp.llm.http import DEFAULT_RETRY, BackendError, RetryPolicy
from wai_exp.llm.model import Model

#: The chat template keys this renderer understands (see the module docstring).
SUPPORTED_TEMPLATE_KWARGS = frozenset({"enable_thinking"})

_START = "<|im_start|>"
_END = "<|im_end|>"
_EMPTY_THINK = "<think>\n\n</think>\n\n"


@dataclass(frozen=True)
class Rendered:
    """One rollout as text, with the ``[start, end)`` character spans the policy generated."""

    text: str
    spans: tuple[tuple[int, int], ...]


def _tool_call_text(call: Mapping[str, Any]) -> str:
    # Name first, then the arguments with sorted keys: the shape Qwen's template writes, with
    # the argument order messages_from_steps uses (the policy's own bytes are not kept).
    name = json.dumps(str(call.get("name", "")), ensure_ascii=False)
    args = json.dumps(call.get("arguments") or {}, sort_keys=True, ensure_ascii=False, default=str)
    return f'<tool_call>\n{{"name": {name}, "arguments": {args}}}\n</tool_call>'


def render_chatml(
    system_prompt: str | None,
    tools: Sequence[Mapping[str, Any]] | None,
    prompt: str,
    steps: Sequence[Mapping[str, Any]],
    *,
    enable_thinking: bool = True,
) -> Rendered:
    """The ChatML text of a rollout and the spans of its assistant-generated text.

    A span covers an assistant step's content followed by its tool-call blocks; an assistant
    step with neither contributes no span. Never raises on row content.
    """
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = 0

    def add(text: str) -> None:
        nonlocal pos
        parts.append(text)
        pos += len(text)

    system = system_prompt or ""
    if tools:
        listing = "\n".join(
            json.dumps(t, sort_keys=True, ensure_ascii=False, default=str) for t in tools
        )
        system = (system + "\n\n" if system else "") + f"# Tools\n\n<tools>\n{listing}\n</tools>"
    if system:
        add(f"{_START}system\n{system}{_END}\n")
    add(f"{_START}user\n{prompt}{_END}\n")
    for step in steps:
        if not isinstance(step, Mapping):
            continue
        kind = step.get("kind")
        if kind == "assistant":
            add(f"{_START}assistant\n")
            if not enable_thinking:
                add(_EMPTY_THINK)
            content = str(step.get("content") or "")
            calls = [c for c in step.get("tool_calls") or () if isinstance(c, Mapping)]
            generated = content
            for call in calls:
                generated += ("\n" if generated else "") + _tool_call_text(call)
            if generated:
                spans.append((pos, pos + len(generated)))
                add(generated)
            add(f"{_END}\n")
        elif kind == "tool":
            result = step.get("result")
            text = (
                result
                if isinstance(result, str)
                else json.dumps(result, sort_keys=True, ensure_ascii=False, default=str)
            )
            add(f"{_START}user\n<tool_response>\n{text}\n</tool_response>{_END}\n")
        elif kind == "user":
            add(f"{_START}user\n{step.get('content') or ''}{_END}\n")
    return Rendered("".join(parts), tuple(spans))


def sum_span_logprobs(
    body: Mapping[str, Any], spans: Sequence[tuple[int, int]], text: str
) -> tuple[float, int, bool]:
    """``(summed logprob, token count, placed by token text)`` over the tokens that start
    inside ``spans`` of the prompt ``text``.

    ``body`` is a legacy completions answer (``choices[0].logprobs`` with ``token_logprobs``,
    ``text_offset`` and ``tokens``). When ``tokens`` is there, token positions come from the
    token texts themselves, located in ``text`` (so a leading BOS token the server adds shifts
    nothing); otherwise ``text_offset`` is trusted as is and the third value is False. Tokens
    before the prompt or at/after its end (the one generated token) are ignored. Raises
    ``BackendError`` when the lists are missing or differ in length, the token texts do not
    reproduce the prompt, or a token in a span has no finite logprob.
    """
    try:
        lp = body["choices"][0]["logprobs"]
        values = lp["token_logprobs"]
        offsets = lp["text_offset"]
    except (KeyError, IndexError, TypeError) as exc:
        raise BackendError(
            "the answer has no choices[0].logprobs.token_logprobs/text_offset: the server does "
            f"not score echoed prompts on /completions (use a vllm: reference): {str(body)[:200]}"
        ) from exc
    if not isinstance(values, list) or not isinstance(offsets, list) or len(values) != len(offsets):
        raise BackendError(
            f"token_logprobs ({len(values) if isinstance(values, list) else values!r}) and "
            f"text_offset ({len(offsets) if isinstance(offsets, list) else offsets!r}) "
            "do not line up"
        )
    tokens = lp.get("tokens")
    placed = (
        isinstance(tokens, list)
        and len(tokens) == len(values)
        and all(isinstance(t, str) for t in tokens)
    )
    if placed:
        joined = "".join(tokens)
        shift = joined.find(text)
        if shift < 0:
            raise BackendError(
                "the server's token texts do not reproduce the prompt (special tokens skipped "
                "in decoding, or a character split across tokens), so the assistant spans "
                "cannot be placed; serve the reference so prompt tokens decode verbatim"
            )
        starts, pos = [], -shift
        for t in tokens:
            starts.append(pos)
            pos += len(t)
        offsets = starts
    total = 0.0
    n = 0
    for value, off in zip(values, offsets, strict=True):
        if not isinstance(off, int) or off < 0 or off >= len(text):
            continue
        if not any(a <= off < b for a, b in spans):
            continue
        if value is None or not math.isfinite(float(value)):
            raise BackendError(f"token at offset {off} inside an assistant turn has no logprob")
        total += float(value)
        n += 1
    return total, n, placed


def _resolve_source(
    source: Any, system_prompt: str | None, tools: Sequence[Mapping[str, Any]] | None
) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]], str | None, list, bool]:
    """(rows to stamp, extra row lists to mirror stamps onto, system prompt, tools, from_path)."""
    if isinstance(source, (str, Path)):
        from wai_exp.rows.jsonl import read_rows

        return read_rows(source), [], system_prompt, list(tools or []), True
    if hasattr(source, "trajectories") and hasattr(source, "tools"):
        # SimulationData: stamp the in-memory trajectories and mirror onto its scrubbed copies
        # (``.rows``), which are built once and cached.
        sp = system_prompt if system_prompt is not None else getattr(source, "system_prompt", None)
        tl = list(tools) if tools is not None else list(getattr(source, "tools", None) or [])
        return list(source.trajectories), [list(source.rows)], sp, tl, False
    if isinstance(source, Sequence) and not isinstance(source, (bytes, bytearray)):
        rows = list(source)
        for i, r in enumerate(rows):
            if not isinstance(r, dict):
                raise TypeError(f"source row {i} is {type(r).__name__}, not a dict")
        return rows, [], system_prompt, list(tools or []), False
    raise TypeError(
        "source must be a SimulationData, a list of row dicts, or a JSONL path; "
        f"got {type(source).__name__}"
    )


def reference_logprobs(
    source: Any,
    ref: str,
    system_prompt: str | None = None,
    tools: Sequence[dict] | None = None,
    api_key: str | None = None,
    concurrency: int = 4,
    timeout: float = 600.0,
    chat_template_kwargs: Mapping[str, Any] | None = None,
    transport: httpx.AsyncBaseTransport | Callable[[dict], Any] | None = None,
    *,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> dict[str, Any]:
    """Stamp ``ref_logprob`` and ``ref_n_tokens`` on every row, in place.

    ``ref_logprob`` is the reference model's summed logprob over the text the policy generated
    (assistant content and tool calls; see the module docstring for exactly what is scored and
    its limits). ``source`` is a ``SimulationData`` (system prompt and tools from it unless
    given), a list of row dicts, or a JSONL path (scored in memory, nothing written back).
    ``ref`` is a backend spec (``vllm:<model>@<url>``). ``transport`` is an
    ``httpx.AsyncBaseTransport`` for the one shared client, or a callable taking the request
    payload and returning the answer body (sync or async), for tests and custom backends.

    A row with no assistant text, or whose call failed for good, gets ``ref_logprob=None``
    (so ``mean_kl`` skips it) and is counted in ``n_skipped``; failures are listed in
    ``errors`` as ``{"index", "rollout_id", "error"}``.

    Returns ``n_rows``, ``n_scored``, ``n_skipped`` with ``skipped`` = ``{"no_assistant",
    "error"}``, ``errors``, ``n_tokens`` (reference tokens over scored rows), ``model`` (the
    spec's ``provider:model``, and ``served_model`` as the server named it), ``token_count_gap``
    (None with a note when no scored row carries the policy's ``n_tokens``),
    ``token_count_gap_n``, ``n_unverified`` (rows placed by ``text_offset`` alone because the
    answer had no token texts), ``method``, ``written`` (always False) and ``notes``.

    Raises ``ValueError`` for a malformed spec, an ``anthropic:`` reference, ``concurrency`` < 1
    or an unsupported ``chat_template_kwargs`` key; ``TypeError`` for a source of another kind.
    """
    model = Model(
        ref,
        api_key=api_key,
        timeout=timeout,
        retry=retry,
        transport=transport if isinstance(transport, httpx.AsyncBaseTransport) else None,
    )
    spec = model.spec
    enable_thinking = _check_reference(model, ref, concurrency, chat_template_kwargs)
    rows, mirrors, sp, tool_list, from_path = _resolve_source(source, system_prompt, tools)
    notes: list[str] = []
    jobs, no_assistant, sha_mismatch = _render_jobs(rows, sp, tool_list, enable_thinking)
    if sha_mismatch:
        notes.append(
            f"{sha_mismatch} rows ran under a different system prompt than the one the reference "
            "saw (lineage.system_prompt_sha); pass system_prompt= to score them in their context"
        )
    scored = _Scored([None] * len(rows))
    if jobs:
        from wai_exp.score.judges.judging import run_coro  # lazy: simulate loads score on use only

        run_coro(lambda: _score_all(model, transport, concurrency, rows, jobs, scored))
    n_tokens, gaps = _stamp(rows, mirrors, scored.results)
    scored.errors.sort(key=lambda e: e["index"])
    n_scored = sum(r is not None for r in scored.results)
    gap = float(sum(gaps) / len(gaps)) if gaps else None
    if gap is None and n_scored:
        notes.append(
            "token_count_gap not measured: no scored row carries the policy's n_tokens "
            "(simulate with logprobs=True to capture them)"
        )
    elif gap is not None and gap > 0:
        notes.append(
            f"token_count_gap {gap:g}: the reference tokenizes the policy's text differently "
            "(or the rendering differs from what was sampled); mean_kl mixes in a length effect"
        )
    if not rows:
        notes.append("no rows")
    if scored.unplaced:
        notes.append(
            f"{len(scored.unplaced)} rows were placed by the server's text_offset alone (no token "
            "texts in the answer to check them against the prompt)"
        )
    if from_path:
        notes.append(f"rows read from {source} were scored in memory; nothing was written back")
    return {
        "n_rows": len(rows),
        "n_scored": n_scored,
        "n_skipped": len(rows) - n_scored,
        "skipped": {"no_assistant": no_assistant, "error": len(scored.errors)},
        "errors": scored.errors,
        "n_tokens": n_tokens,
        "n_unverified": len(scored.unplaced),
        "model": f"{spec.provider}:{spec.model}",
        "served_model": scored.served[0] if scored.served else None,
        "token_count_gap": gap,
        "token_count_gap_n": len(gaps),
        "method": (
            "POST /completions echo=true logprobs=1 max_tokens=1 over a ChatML rendering; "
            "summed over tokens starting in assistant content and tool-call blocks"
        ),
        "written": False,
        "notes": notes,
    }


def _check_reference(
    model: Model, ref: str, concurrency: Any, chat_template_kwargs: Mapping[str, Any] | None
) -> bool:
    """Refuse what cannot score before any call; return whether thinking blocks render."""
    if model.kind != "openai":
        raise ValueError(
            f"reference {ref!r}: {model.spec.provider} has no completions endpoint that scores "
            "a given text; serve the reference with vLLM and pass 'vllm:<model>@<url>'"
        )
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive int; got {concurrency!r}")
    kwargs = dict(chat_template_kwargs or {})
    unknown = sorted(set(kwargs) - SUPPORTED_TEMPLATE_KWARGS)
    if unknown:
        raise ValueError(
            f"chat_template_kwargs {unknown} are not supported by the ChatML rendering; "
            f"supported: {sorted(SUPPORTED_TEMPLATE_KWARGS)}"
        )
    return bool(kwargs.get("enable_thinking", True))


def _render_jobs(
    rows: list[dict[str, Any]], sp: str | None, tool_list: Any, enable_thinking: bool
) -> tuple[list[tuple[int, Rendered]], int, int]:
    """Each row with assistant text as (index, its ChatML rendering); the rows with none;
    and the rows whose lineage names another system prompt."""
    from wai_exp.simulate.ids import prompt_sha

    jobs: list[tuple[int, Rendered]] = []
    no_assistant = sha_mismatch = 0
    sp_sha = prompt_sha(sp)
    for i, row in enumerate(rows):
        rendered = render_chatml(
            sp, tool_list, str(row.get("prompt") or ""), row.get("steps") or [],
            enable_thinking=enable_thinking,
        )  # fmt: skip
        row_sha = (row.get("lineage") or {}).get("system_prompt_sha")
        if row_sha and row_sha != sp_sha:
            sha_mismatch += 1
        if rendered.spans:
            jobs.append((i, rendered))
        else:
            no_assistant += 1
    return jobs, no_assistant, sha_mismatch


@dataclass
class _Scored:
    """Per row (sum, tokens) or None, and what the calls said: errors, the served model name,
    rows placed by text_offset alone."""

    results: list[tuple[float, int] | None]
    errors: list[dict[str, Any]] = field(default_factory=list)
    served: list[str] = field(default_factory=list)
    unplaced: list[int] = field(default_factory=list)


async def _score_all(
    model: Model,
    transport: Any,
    concurrency: int,
    rows: list[dict[str, Any]],
    jobs: list[tuple[int, Rendered]],
    out: _Scored,
) -> None:
    """Ask the reference to score each rendering, ``concurrency`` at a time, into ``out``."""
    sem = asyncio.Semaphore(concurrency)
    # a callable transport answers the payload itself; anything else goes to the server
    answer = (
        None if transport is None or isinstance(transport, httpx.AsyncBaseTransport) else transport
    )

    async def one(i: int, rendered: Rendered) -> None:
        payload = {
            "model": model.spec.model,
            "prompt": rendered.text,
            "echo": True,
            "logprobs": 1,
            # vLLM rejects max_tokens=0; the one generated token sits past the prompt's
            # end and is ignored. skip_special_tokens=False keeps the ChatML markers in
            # the token texts, which is how the spans are placed.
            "max_tokens": 1,
            "skip_special_tokens": False,
            "temperature": 0.0,
        }
        async with sem:
            try:
                if answer is not None:
                    body = answer(payload)
                    if inspect.isawaitable(body):
                        body = await body
                else:
                    body = await model.post_json("/completions", payload)
                if not isinstance(body, Mapping):
                    raise BackendError(f"answer is {type(body).__name__}, not a JSON object")
                total, n, placed = sum_span_logprobs(body, rendered.spans, rendered.text)
                out.results[i] = (total, n)
                if not placed:
                    out.unplaced.append(i)
                if isinstance(body.get("model"), str):
                    out.served.append(body["model"])
            except Exception as exc:  # noqa: BLE001 - every failure is kept on the report
                out.errors.append(
                    {
                        "index": i,
                        "rollout_id": rows[i].get("rollout_id"),
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                )

    try:
        await asyncio.gather(*(one(i, r) for i, r in jobs))
    finally:
        await model.aclose()


def _stamp(
    rows: list[dict[str, Any]],
    mirrors: Sequence[Sequence[dict[str, Any]]],
    results: list[tuple[float, int] | None],
) -> tuple[int, list[float]]:
    """Write ref_logprob/ref_n_tokens on each row and its mirrors; return the reference
    tokens scored and, per row that has them, the gap to the policy's token count."""
    from wai_exp.score.diagnose.logprobs import row_logprob

    n_tokens = 0
    gaps: list[float] = []
    for i, row in enumerate(rows):
        res = results[i]
        stamp: dict[str, Any] = {"ref_logprob": None, "ref_n_tokens": None}
        if res is not None:
            stamp = {"ref_logprob": float(res[0]), "ref_n_tokens": int(res[1])}
            n_tokens += res[1]
            _, policy_n = row_logprob(row)
            if policy_n is not None:
                gaps.append(abs(res[1] - policy_n))
        row.update(stamp)
        for mirror in mirrors:
            if i < len(mirror):
                mirror[i].update(stamp)
    return n_tokens, gaps
