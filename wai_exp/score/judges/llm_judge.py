"""A model judge in the ``run_judge`` contract: one pass/fail verdict per row from an LLM.

``grade_llm`` asks a model (any ``openai:``/``vllm:``/``ollama:``/``anthropic:`` spec, else
``WAI_EXP_JUDGE``) whether the assistant handled the request: the transcript, the tools it
had, the operator's policy and, when the row carries one, the teacher's reference
(``privileged.reference``) go in; ``{"score", "reason"}`` comes back. Every verdict carries
``judge_meta`` with the model, the prompt hash, the temperature and ``version``
(``<model>@<prompt hash>``), so an edited prompt is a new judge and the row says so.

The call goes through the project's HTTP layer (``wai_exp.llm``), imported lazily.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from wai_exp.score.judges.rubric import (
    _Chat,
    _json_from_text,
    _resolve_spec,
    _tool_lines,
    conversation_parts,
)

#: Hex characters of the prompt's sha256 kept as its hash (``judge_meta.prompt_hash``).
PROMPT_HASH_CHARS = 12
#: Longest ``reason`` a grammar-constrained verdict may write (the ``json_object`` form).
REASON_CHARS = 240
#: Tokens of a verdict's JSON besides its reason's text.
VERDICT_JSON_TOKENS = 16


def reason_chars(max_tokens: int) -> int:
    """The longest reason a grammar-constrained verdict of ``max_tokens`` tokens may write:
    the budget less the JSON around it (a token holds at least one character of ASCII text,
    so such a verdict is not cut off), at most ``REASON_CHARS``, at least 8."""
    return max(8, min(REASON_CHARS, max_tokens - VERDICT_JSON_TOKENS))


#: Characters of a model answer kept when it carries no verdict.
RAW_ANSWER_CHARS = 300

#: The pointwise grading instructions (``prompt=`` replaces them).
DEFAULT_GRADE_PROMPT = (
    "You grade one conversation between a person and a tool-using assistant. Decide whether "
    "the assistant handled the request correctly: it did what was asked when the policy "
    "allows it, used its tools properly with identifiers from the conversation, followed the "
    "operator's policy, and its final reply tells the truth about what happened. Tool "
    "results are the ground truth: when a tool failed, the action did not happen, and a "
    "reply that says it did fails. When a reference is given, it says what a good reply "
    "does. Length, confidence and politeness are not merits. Answer with one JSON object "
    'and nothing else: {"score": 1 or 0, "reason": "<one sentence>"}'
)


def prompt_hash(text: str) -> str:
    """The first ``PROMPT_HASH_CHARS`` hex characters of ``text``'s sha256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:PROMPT_HASH_CHARS]


def _message(row: Mapping[str, Any], policy: str, tools: Sequence | None) -> str:
    parts = conversation_parts(row, policy, tools, policy_label="OPERATOR'S POLICY")
    parts.append('Grade it. Answer with the JSON object only: {"score": 1 or 0, "reason": "..."}')
    return "\n\n".join(parts)


def verdict_schema(custom_prompt: bool) -> dict[str, Any]:
    """The JSON schema a structured-output request asks the verdict in: ``score`` 1 or 0
    under the shipped prompt, any number under a custom one (its scale is the user's; the
    judge contract reads it), and a one-sentence ``reason``."""
    score: dict[str, Any] = (
        {"type": "number"} if custom_prompt else {"type": "integer", "enum": [1, 0]}
    )
    return {
        "type": "object",
        "properties": {"score": score, "reason": {"type": "string"}},
        "required": ["score", "reason"],
        "additionalProperties": False,
    }


def _verdict(answer: str) -> tuple[Any, str | None]:
    """(score as the model gave it, reason) from its answer; the whole answer as the score
    when it holds no JSON object (``normalize_judge_result`` then reads PASS/FAIL or a
    number, or marks it ``invalid_result``)."""
    try:
        parsed = _json_from_text(answer)
    except ValueError:
        return answer.strip()[:RAW_ANSWER_CHARS], None
    if isinstance(parsed, Mapping):
        reason = parsed.get("reason") or parsed.get("explanation")
        for key in ("score", "reward", "verdict", "pass", "passed", "grade"):
            if key in parsed:
                value = parsed[key]
                if isinstance(value, str) and value.strip().lower() in ("pass", "fail"):
                    value = value.strip().upper()
                return value, None if reason is None else str(reason)
    return answer.strip()[:RAW_ANSWER_CHARS], None


class LLMJudge:
    """The judge ``grade_llm`` builds. ``judge(row)`` returns the verdict dict (also from
    inside a running event loop); ``await judge.acall(row)`` is the same on the caller's
    loop, which ``run_judge`` and ``simulate(llm_grade=True)`` use. Carries ``judge_name``
    and ``version`` (``<model>@<prompt hash>``), ``model``, ``prompt_hash``, ``temperature``
    and ``meta`` (the ``judge_meta`` every verdict carries)."""

    def __init__(
        self,
        chat: _Chat,
        system: str,
        policy: str,
        tools: Sequence | None,
        max_tokens: int,
        structured: Any = None,
    ) -> None:
        self._chat = chat
        #: the ``StructuredOutput`` verdicts are asked with (None = structured_output off)
        self.structured = structured
        self.system = system
        self.policy = policy
        self.tools = tools
        self.max_tokens = max_tokens
        self.model = chat.model
        self.temperature = chat.temperature
        # Policy and tools are part of what the judge reads, so they are part of its hash.
        self.prompt_hash = prompt_hash(
            json.dumps([system, policy, _tool_lines(tools)], ensure_ascii=False)
        )
        self.version = f"{chat.spec.model}@{self.prompt_hash}"
        self.judge_name = f"grade_llm:{self.version}"
        self.meta = {
            "model": self.model,
            "prompt_hash": self.prompt_hash,
            "temperature": self.temperature,
            "version": self.version,
        }

    async def acall(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The verdict for ``row``: ``{"score", "reason", "judge_meta"}``. Raises
        ``RuntimeError`` (secrets redacted) when the model call fails for good."""
        from wai_exp.domain.secrets import redact_text
        from wai_exp.llm.http import BackendError

        try:
            text, form = await self._chat.ask_structured(
                self.system,
                _message(row, self.policy, self.tools),
                max_tokens=self.max_tokens,
                structured=self.structured,
            )
        except BackendError as exc:
            raise RuntimeError(redact_text(f"judge model call failed: {exc}")) from None
        score, reason = _verdict(text)
        meta = dict(self.meta)
        meta.update(self.structured.meta(form) if self.structured else {"structured_output": "off"})
        return {"score": score, "reason": reason, "judge_meta": meta}

    def __call__(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from wai_exp.score.judges.judging import run_coro

        async def once() -> dict[str, Any]:
            try:
                return await self.acall(row)
            finally:
                await self._chat.aclose_current()

        return run_coro(once)

    async def aclose(self) -> None:
        """Close the HTTP client of the running loop (safe to call twice)."""
        await self._chat.aclose_current()


def grade_llm(
    spec: str | None = None,
    api_key: str | None = None,
    prompt: str | None = None,
    policy: str = "",
    tools: Sequence | None = None,
    timeout: float = 120,
    temperature: float = 0.0,
    max_tokens: int = 256,
    *,
    structured_output: str = "auto",
    transport: Any = None,
    retry: Any = None,
) -> Callable[[dict], Any]:
    """A model judge for ``run_judge`` / ``simulate(llm_grade=True)``: one pass/fail verdict
    per row.

    ``spec`` names the model (``"openai:gpt-4.1-mini"``, ``"vllm:<model>@<url>"``, ...), else
    env ``WAI_EXP_JUDGE``. The key is ``api_key`` or the provider's key variable; it is sent
    as a header and never stored. ``prompt`` replaces ``DEFAULT_GRADE_PROMPT``; ``policy``
    and ``tools`` are shown to the judge. ``timeout`` bounds each HTTP request in seconds.
    ``structured_output`` (``auto``, ``json_schema``, ``json_object``, ``off``) asks the
    server to answer in the verdict's JSON schema through ``response_format``
    (``wai_exp.llm.structured``): ``auto`` sends ``json_schema`` and steps down to
    ``json_object`` (llama-cpp-python's form), then to none, when the server refuses one;
    ``judge_meta.structured_output`` names the form each verdict was asked with and
    ``structured_output_fallback`` what was refused. ``transport``/``retry`` reach the HTTP
    layer (tests).

    The judge returns ``{"score", "reason", "judge_meta"}``: the model's score as it gave it
    (``run_judge`` maps it onto the contract: a number outside [0, 1] or an answer with no
    verdict becomes ``judge_status="invalid_result"``, never a made-up reward) and
    ``judge_meta`` = ``model``, ``prompt_hash``, ``temperature``, ``version``. A failed call
    raises, which ``run_judge`` records as ``judge_status="error"``.

    Raises ``ValueError`` here when no model is given or configured, the spec is malformed,
    or ``timeout``/``temperature``/``max_tokens``/``structured_output`` is out of range.
    """
    from wai_exp.llm.structured import StructuredOutput, check_mode

    check_mode(structured_output, "structured_output")
    if not (isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0):
        raise ValueError(f"timeout must be seconds > 0, got {timeout!r}")
    if not (
        isinstance(temperature, int | float)
        and not isinstance(temperature, bool)
        and math.isfinite(temperature)
        and 0 <= temperature <= 2
    ):
        raise ValueError(f"temperature must be a number in [0, 2], got {temperature!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    chat = _Chat(
        _resolve_spec(spec, "grade_llm"),
        api_key,
        float(timeout),
        transport,
        retry,
        temperature=float(temperature),
    )
    system = prompt if prompt is not None else DEFAULT_GRADE_PROMPT
    structured = None
    if structured_output != "off":
        structured = StructuredOutput(
            structured_output,
            "verdict",
            verdict_schema(prompt is not None),
            max_string_chars=reason_chars(int(max_tokens)),
        )
    return LLMJudge(chat, system, policy, tools, int(max_tokens), structured)


__all__ = ["DEFAULT_GRADE_PROMPT", "LLMJudge", "grade_llm", "prompt_hash"]
