"""``simulate(llm_grade=...)``: an LLM judge beside the deterministic reward.

Each row, as it lands, is put to a model judge (``grade_llm``) and gains ``llm_reward``
(0/1, or None when the judge could not say) and ``llm_judge`` (``name``, ``status``,
``reason``, ``judge_meta``: model, prompt hash, temperature, version). ``reward`` is left
as the deterministic grader wrote it (or absent), so the two can be compared row by row.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

#: Environment variable naming the judge model when ``llm_grade=True``.
JUDGE_ENV = "WAI_EXP_JUDGE"


def llm_grade_spec(llm_grade: Any) -> str | None:
    """The judge's model spec for ``llm_grade`` (a spec string, or ``True`` = env
    ``WAI_EXP_JUDGE``); None when off or when ``llm_grade`` is a judge object. Raises
    ``ValueError`` naming the fix for ``True`` with no variable set, a malformed spec, or a
    value that is none of these."""
    if llm_grade in (None, False):
        return None
    if hasattr(llm_grade, "acall") or (callable(llm_grade) and not isinstance(llm_grade, str)):
        return None
    if llm_grade is True:
        spec = os.environ.get(JUDGE_ENV)
        if not spec:
            raise ValueError(
                f"llm_grade=True needs a judge model: export {JUDGE_ENV}=<spec> (e.g. "
                "vllm:<model>@http://host:8000/v1) or pass llm_grade='<spec>'"
            )
    elif isinstance(llm_grade, str):
        spec = llm_grade
    else:
        raise ValueError(
            f"llm_grade={llm_grade!r}: use True (the {JUDGE_ENV} model), a model spec string, "
            "or a judge with an async acall(row)"
        )
    from wai_exp.llm.providers import parse_model_spec

    try:
        parse_model_spec(spec)
    except ValueError as exc:
        raise ValueError(f"llm_grade: {exc}") from None
    return spec


class LLMGrader:
    """Stamps ``llm_reward`` and ``llm_judge`` on rows as they land (``await grade(row)``);
    a judge error leaves ``llm_reward`` None with the status, never a 0."""

    def __init__(self, judge: Any) -> None:
        from wai_exp.score.judges.judging import normalize_judge_result

        self.judge = judge
        self.name = getattr(judge, "judge_name", None) or type(judge).__name__
        self.model = getattr(judge, "model", None)
        self._normalize = normalize_judge_result

    async def grade(self, row: dict[str, Any]) -> None:
        from wai_exp.domain.secrets import redact_text

        meta: dict[str, Any] = dict(getattr(self.judge, "meta", None) or {"model": self.model})
        try:
            acall = getattr(self.judge, "acall", None)
            raw = await acall(row) if acall is not None else self.judge(row)
            norm = self._normalize(raw)
            reward, status, reason = norm["reward"], norm["judge_status"], norm["reason"]
            meta.update(norm.get("judge_meta") or {})
        except Exception as exc:  # noqa: BLE001 - an unjudged row, never a failure
            reward, status = None, "error"
            reason = redact_text(f"{type(exc).__name__}: {exc}")[:500]
        row["llm_reward"] = reward
        row["llm_judge"] = {
            "name": self.name,
            "status": status,
            "reason": reason,
            "judge_meta": meta,
        }

    async def aclose(self) -> None:
        closer = getattr(self.judge, "aclose", None)
        if closer is not None:
            await closer()

    def close(self) -> None:
        """Nothing left to close once ``aclose`` ran (the engine calls both)."""


def resolve_llm_grader(
    llm_grade: Any, tools: Sequence[Any] | None, system_prompt: str | None
) -> LLMGrader | None:
    """The grader ``llm_grade`` asks for (None when off): ``grade_llm`` on the resolved spec,
    shown the run's tools and system prompt, or the judge object given. Raises as
    ``llm_grade_spec`` does."""
    if llm_grade in (None, False):
        return None
    spec = llm_grade_spec(llm_grade)
    if spec is None:
        return LLMGrader(llm_grade)
    from wai_exp.score.judges.llm_judge import grade_llm

    return LLMGrader(grade_llm(spec, policy=system_prompt or "", tools=list(tools or []) or None))
