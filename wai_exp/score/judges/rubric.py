"""Rubrics: prompt-specific criteria as an object, a judge that scores them one by one, and a
writer that drafts them.

A ``Rubric`` is a tuple of ``Criterion`` items of three kinds:

* ``principle``: adds its weight when the reply meets it;
* ``pitfall``: subtracts its weight when the reply exhibits the mistake;
* ``hard``: a rule the reply must meet; missing one makes the reward 0.

``Rubric.score`` turns one verdict per criterion into a reward in [0, 1] (the scoring rule
is pure and model-free). ``rubric_judge`` asks a model for those verdicts and is a judge in
the ``run_judge`` contract; ``write_rubrics`` asks a model (or your ``writer``) to draft one
rubric per distinct prompt. A row carries its rubric on ``privileged.rubric`` (the teacher's
block, scrubbed from every file), so ``attach_rubric`` / ``rubric_of`` move it on and off.

The two model paths are the only I/O here; they go through the project's HTTP layer
(``wai_exp.llm``), imported lazily so the scoring rule stays import-light.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wai_exp.rows.model import NOT_EXECUTED

#: The criterion kinds, in the order the checklist lists them.
KINDS: tuple[str, ...] = ("hard", "principle", "pitfall")
#: Words a writer or hand-written rubric may use for a kind (the rubric book's
#: Essential / Important / Optional / Pitfall labels map onto our three kinds).
KIND_ALIASES: dict[str, str] = {
    "hard": "hard",
    "essential": "hard",
    "required": "hard",
    "must": "hard",
    "principle": "principle",
    "important": "principle",
    "optional": "principle",
    "nice": "principle",
    "pitfall": "pitfall",
    "mistake": "pitfall",
    "avoid": "pitfall",
}
#: Hex characters of the sha256 kept as a rubric's version (64 bits).
VERSION_HEX_CHARS = 16
#: Environment variable naming the judge / writer model spec when none is passed.
JUDGE_ENV = "WAI_EXP_JUDGE"
#: Words read as a verdict string (case-insensitive).
YES_WORDS = frozenset({"yes", "y", "true", "met", "pass", "passed", "exhibited", "1"})
NO_WORDS = frozenset({"no", "n", "false", "not met", "unmet", "fail", "failed", "clean", "0"})
#: Keys of a per-criterion verdict object that carry the yes/no answer, first present wins.
VERDICT_KEYS: tuple[str, ...] = ("yes", "met", "verdict", "value", "exhibited", "answer")
#: Characters of the prompt kept in write_rubrics failure lines.
PROMPT_HEAD = 80

_SLUG_WORDS = 8
_SLUG_CHARS = 60


def _slug(text: str) -> str:
    """Lower-case words joined by ``_``: the key a verdict may use instead of the title."""
    words = re.findall(r"\w+", str(text).lower())[:_SLUG_WORDS]
    return "_".join(words)[:_SLUG_CHARS].strip("_")


# ---------------------------------------------------------------------------------------
# Criterion / Rubric
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Criterion:
    """One rubric item.

    ``weight`` is a positive magnitude; a ``pitfall`` subtracts it when the reply exhibits
    the mistake, a ``principle`` adds it when met, and a ``hard`` rule missed fails the whole
    reply. Raises ``ValueError`` for an empty title, an unknown kind or a weight that is not
    a finite number > 0.
    """

    title: str
    description: str = ""
    weight: float = 1.0
    kind: str = "principle"

    def __post_init__(self) -> None:
        if not isinstance(self.title, str) or not self.title.strip():
            raise ValueError(f"Criterion needs a non-empty title string, got {self.title!r}")
        if not _slug(self.title):
            raise ValueError(
                f"Criterion title {self.title!r} has no letters or digits; give it words a "
                "judge can answer by"
            )
        kind = KIND_ALIASES.get(str(self.kind).strip().lower())
        if kind is None:
            raise ValueError(
                f"Criterion {self.title!r}: kind={self.kind!r} is not one of {list(KINDS)} "
                f"(aliases: {sorted(KIND_ALIASES)})"
            )
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
            raise ValueError(
                f"Criterion {self.title!r}: weight={w!r} must be a finite number > 0 (a "
                "pitfall's weight is a magnitude too; kind='pitfall' makes it subtract)"
            )
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "weight", float(w))
        object.__setattr__(self, "description", str(self.description or ""))

    @property
    def slug(self) -> str:
        """The title as lower-case words joined by ``_`` (a verdict may be keyed by it)."""
        return _slug(self.title)

    def as_dict(self) -> dict[str, Any]:
        """``{"title", "description", "weight", "kind"}``."""
        return {
            "title": self.title,
            "description": self.description,
            "weight": self.weight,
            "kind": self.kind,
        }

    @classmethod
    def from_value(cls, item: Any) -> Criterion:
        """A ``Criterion`` from itself, a title string, or a dict (``title`` or ``name``,
        ``description``, ``weight``, ``kind`` or ``type``). Raises ``TypeError`` for
        anything else and ``ValueError`` as the constructor does."""
        if isinstance(item, Criterion):
            return item
        if isinstance(item, str):
            return cls(item)
        if isinstance(item, Mapping):
            title = item.get("title", item.get("name", item.get("criterion")))
            kind = item.get("kind", item.get("type", "principle"))
            weight = item.get("weight", 1.0)
            if isinstance(weight, str):
                with contextlib.suppress(ValueError):
                    weight = float(weight)
            return cls(
                title=title,
                description=item.get("description", "") or "",
                weight=weight,
                kind=kind,
            )
        raise TypeError(
            f"a criterion must be a Criterion, a title string or a dict with 'title', got "
            f"{type(item).__name__}"
        )


def _verdict(value: Any) -> bool | None:
    """A verdict as True/False, or None when it says nothing (unanswered)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value) if math.isfinite(value) else None
    if isinstance(value, str):
        word = value.strip().lower().rstrip(".")
        if word in YES_WORDS:
            return True
        if word in NO_WORDS:
            return False
        return None
    if isinstance(value, Mapping):
        for key in VERDICT_KEYS:
            if key in value:
                return _verdict(value[key])
        return None
    return None


@dataclass(frozen=True)
class Rubric:
    """A rubric: criteria plus provenance.

    ``criteria`` is a tuple of ``Criterion`` (a list, dicts or title strings are converted);
    ``source`` says who wrote it (``"hand"``, ``"model"``), ``domain`` the guidance it was
    drafted under, ``notes`` anything else. ``version`` is a content hash of the criteria
    (titles, descriptions, weights, kinds and their order); provenance is not part of it.

    Raises ``ValueError`` for no criteria or two criteria with the same slug (a verdict keyed
    by slug would be ambiguous), ``TypeError`` for an item that is not a criterion.
    """

    criteria: tuple[Criterion, ...]
    source: str = "hand"
    domain: str = ""
    notes: str = ""
    _cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        items = self.criteria
        if isinstance(items, str | Mapping | Criterion) or not isinstance(items, Sequence):
            raise TypeError(
                "Rubric criteria must be a list/tuple of Criterion (or dicts / title "
                f"strings), got {type(items).__name__}"
            )
        crit = tuple(Criterion.from_value(c) for c in items)
        if not crit:
            raise ValueError("a Rubric needs at least one criterion")
        seen: dict[str, str] = {}
        for c in crit:
            if c.slug in seen:
                raise ValueError(
                    f"criteria {seen[c.slug]!r} and {c.title!r} share the slug {c.slug!r}; "
                    "retitle one so each verdict names one criterion"
                )
            seen[c.slug] = c.title
        object.__setattr__(self, "criteria", crit)

    @property
    def version(self) -> str:
        """sha256 (first ``VERSION_HEX_CHARS`` hex) of the criteria as canonical JSON."""
        v = self._cache.get("version")
        if v is None:
            text = json.dumps(
                [c.as_dict() for c in self.criteria],
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
            )
            v = hashlib.sha256(text.encode("utf-8")).hexdigest()[:VERSION_HEX_CHARS]
            self._cache["version"] = v
        return v

    def as_dict(self) -> dict[str, Any]:
        """The JSON form ``Rubric.from_value`` reads back (``version`` included for reading)."""
        return {
            "criteria": [c.as_dict() for c in self.criteria],
            "source": self.source,
            "domain": self.domain,
            "notes": self.notes,
            "version": self.version,
        }

    @classmethod
    def from_value(cls, value: Any) -> Rubric:
        """A ``Rubric`` from itself, its dict form (``{"criteria": [...], ...}``) or a list of
        criteria. Raises ``TypeError``/``ValueError`` naming what was wrong."""
        if isinstance(value, Rubric):
            return value
        if isinstance(value, Mapping):
            if "criteria" not in value:
                raise ValueError(
                    f"a rubric dict needs a 'criteria' list, got keys {sorted(map(str, value))}"
                )
            return cls(
                criteria=value["criteria"],
                source=str(value.get("source", "hand") or "hand"),
                domain=str(value.get("domain", "") or ""),
                notes=str(value.get("notes", "") or ""),
            )
        if isinstance(value, Sequence) and not isinstance(value, str | bytes):
            return cls(criteria=tuple(value))
        raise TypeError(
            f"a rubric must be a Rubric, its dict form or a list of criteria, got "
            f"{type(value).__name__}"
        )

    def _index(self) -> dict[str, Criterion]:
        idx = self._cache.get("index")
        if idx is None:
            idx = {c.slug: c for c in self.criteria}
            self._cache["index"] = idx
        return idx

    def checklist(self) -> str:
        """The rubric as the judge reads it: one numbered line per criterion with its slug
        (the key to answer with), kind, weight and description, hard rules first."""
        ask = {
            "hard": "must meet (missing it fails the reply)",
            "principle": "should meet",
            "pitfall": "mistake to avoid (answer yes if the reply makes it)",
        }
        lines: list[str] = []
        n = 0
        for kind in KINDS:
            for c in self.criteria:
                if c.kind != kind:
                    continue
                n += 1
                desc = f": {c.description}" if c.description else ""
                lines.append(
                    f"{n}. [{c.slug}] {kind}, weight {c.weight:g}, {ask[kind]}. {c.title}{desc}"
                )
        return "\n".join(lines)

    def score(self, results: Mapping[str, Any]) -> dict[str, Any]:
        """Reward from one verdict per criterion.

        ``results`` is keyed by title or slug; a truthy value means the reply meets a hard
        rule or principle, or exhibits a pitfall (``"yes"``/``"no"`` strings and
        ``{"yes": bool}`` objects are read too; ``None`` or an unreadable value is no
        answer). A missed hard rule is a 0. Otherwise the reward is the met principle weight
        minus the exhibited pitfall weight, over the total principle weight, clamped to
        [0, 1]; with no principle the reward is 1 minus the exhibited share of pitfall weight
        (1.0 with no pitfall either). Criteria the judge did not answer count as not met
        (and not exhibited) and are listed under ``unanswered``.

        Returns ``reward``, ``rule`` (``"hard_fail"``, ``"principles"``, ``"pitfalls"``),
        ``verdicts`` (slug -> True/False/None), ``met``, ``missed``, ``exhibited``,
        ``hard_missed``, ``unanswered`` (slugs), ``unknown_keys`` (result keys naming no
        criterion), and the weights ``principle_weight``, ``met_weight``,
        ``pitfall_weight``, ``exhibited_weight``. Raises ``TypeError`` when ``results`` is
        not a mapping.
        """
        if not isinstance(results, Mapping):
            raise TypeError(
                f"results must be a dict of criterion title/slug -> verdict, got "
                f"{type(results).__name__}"
            )
        idx = self._index()
        given: dict[str, bool | None] = {}
        unknown: list[str] = []
        for key, value in results.items():
            slug = _slug(str(key))
            if slug not in idx:
                unknown.append(str(key))
                continue
            v = _verdict(value)
            # A slug answered twice (title and slug): a definite answer beats none.
            if given.get(slug) is None:
                given[slug] = v
        verdicts = {c.slug: given.get(c.slug) for c in self.criteria}
        unanswered = [s for s, v in verdicts.items() if v is None]
        met = [c.slug for c in self.criteria if c.kind != "pitfall" and verdicts[c.slug]]
        missed = [c.slug for c in self.criteria if c.kind != "pitfall" and not verdicts[c.slug]]
        exhibited = [c.slug for c in self.criteria if c.kind == "pitfall" and verdicts[c.slug]]
        hard_missed = [c.slug for c in self.criteria if c.kind == "hard" and not verdicts[c.slug]]
        principle_w = sum(c.weight for c in self.criteria if c.kind == "principle")
        met_w = sum(c.weight for c in self.criteria if c.kind == "principle" and verdicts[c.slug])
        pitfall_w = sum(c.weight for c in self.criteria if c.kind == "pitfall")
        exhibited_w = sum((idx[s].weight for s in exhibited), 0.0)
        if hard_missed:
            reward, rule = 0.0, "hard_fail"
        elif principle_w > 0:
            reward, rule = (met_w - exhibited_w) / principle_w, "principles"
        else:
            reward = 1.0 - (exhibited_w / pitfall_w if pitfall_w > 0 else 0.0)
            rule = "pitfalls"
        reward = min(1.0, max(0.0, reward))
        return {
            "reward": reward,
            "rule": rule,
            "verdicts": verdicts,
            "met": met,
            "missed": missed,
            "exhibited": exhibited,
            "hard_missed": hard_missed,
            "unanswered": unanswered,
            "unknown_keys": unknown,
            "principle_weight": principle_w,
            "met_weight": met_w,
            "pitfall_weight": pitfall_w,
            "exhibited_weight": exhibited_w,
        }


# ---------------------------------------------------------------------------------------
# rows <-> rubric
# ---------------------------------------------------------------------------------------


def rubric_of(row: Mapping[str, Any]) -> Rubric | None:
    """The row's ``privileged.rubric`` as a ``Rubric``, or None when the row carries none.

    Raises ``ValueError``/``TypeError`` (from ``Rubric.from_value``) when the stored rubric is
    malformed, so a broken rubric is never silently read as "no rubric".
    """
    block = row.get("privileged") if isinstance(row, Mapping) else None
    if not isinstance(block, Mapping):
        return None
    value = block.get("rubric")
    if value is None:
        return None
    return Rubric.from_value(value)


def attach_rubric(
    rows: Sequence[dict],
    rubric: Rubric | Mapping[str, Any] | Sequence[Mapping[str, Any]] | Callable[[dict], Any],
    overwrite: bool = True,
) -> list[dict]:
    """Put a rubric on each row's ``privileged`` block (in place) and return the rows.

    ``rubric`` is a ``Rubric``, its dict / list form, or ``row -> Rubric | None`` for a
    per-prompt rubric; ``None`` leaves that row alone. The rubric is stored in its dict form
    (``Rubric.as_dict()``), so rows stay JSON-shaped; ``rubric_of`` reads it back. With
    ``overwrite=False`` a row that already carries a rubric keeps it. Raises ``TypeError``
    for a row that is not a dict or a ``privileged`` that is not one.
    """
    fixed: Rubric | None = None
    per_row: Callable[[dict], Any] | None = None
    if callable(rubric) and not isinstance(rubric, Rubric | Mapping | Sequence):
        per_row = rubric
    else:
        fixed = Rubric.from_value(rubric)
    out = rows if isinstance(rows, list) else list(rows)
    for i, row in enumerate(out):
        if not isinstance(row, dict):
            raise TypeError(f"rows[{i}] is {type(row).__name__}, not a row dict")
        block = row.get("privileged")
        if block is None:
            block = row["privileged"] = {}
        elif not isinstance(block, dict):
            raise TypeError(
                f"rows[{i}]['privileged'] is {type(block).__name__}; it must be a dict to "
                "carry a rubric"
            )
        if not overwrite and block.get("rubric") is not None:
            continue
        chosen = fixed if per_row is None else per_row(row)
        if chosen is None:
            continue
        block["rubric"] = Rubric.from_value(chosen).as_dict()
    return out


# ---------------------------------------------------------------------------------------
# model plumbing shared by the judge and the writer
# ---------------------------------------------------------------------------------------


def _resolve_spec(spec: str | None, who: str) -> str:
    spec = spec or os.environ.get(JUDGE_ENV) or None
    if not spec:
        raise ValueError(
            f"{who} needs a model: pass spec='openai:gpt-4.1-mini' (or 'vllm:<model>@<url>', "
            f"'ollama:<model>', 'anthropic:<model>') or set {JUDGE_ENV}; there is no hosted "
            "default"
        )
    return spec


class _Chat:
    """A judge's or rubric writer's ``wai_exp.llm.model.Model`` asked one system and one
    user message at a time, at a fixed temperature."""

    def __init__(
        self,
        spec: str,
        api_key: str | None,
        timeout: float,
        transport: Any,
        retry: Any,
        temperature: float = 0.0,
    ) -> None:
        from wai_exp.llm.model import Model

        self.temperature = temperature
        self.llm = Model(spec, api_key=api_key, timeout=timeout, retry=retry, transport=transport)
        self.spec = self.llm.spec
        self.kind = self.llm.kind
        self.api_key = self.llm.api_key
        self.model = self.llm.name

    async def aclose_current(self) -> None:
        """Close the client of the running loop (a direct call's loop ends with it)."""
        await self.llm.aclose()

    async def ask(self, system: str, user: str, max_tokens: int = 2048) -> str:
        """The model's answer text. Raises ``BackendError`` when the call fails for good."""
        text, _ = await self.ask_structured(system, user, max_tokens)
        return text

    async def ask_structured(
        self,
        system: str,
        user: str,
        max_tokens: int = 2048,
        structured: Any = None,
        schema: dict[str, Any] | None = None,
    ) -> tuple[str, str | None]:
        """``(answer text, the response_format form it was asked with or None)``: with a
        ``StructuredOutput`` the request asks for its schema (``schema`` replaces it for
        this call) and steps down when the server refuses. Raises ``BackendError`` when the
        call fails for good."""
        messages = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": user})
        sampling = {"temperature": self.temperature, "max_tokens": max_tokens}
        if structured is None:
            done = await self.llm.complete(messages, [], sampling)
            return done.content, None
        done, form = await self.llm.complete(
            messages, [], sampling, structured=structured, schema=schema
        )
        return done.content, form


def _json_from_text(text: str) -> Any:
    """The JSON value in a model's answer (code fences and prose around it tolerated).
    Raises ``ValueError`` quoting the start of the answer when there is none."""
    s = str(text).strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", s, re.S)
    if fence:
        s = fence.group(1).strip()
    try:
        return json.loads(s, strict=False)
    except json.JSONDecodeError:
        pass
    starts = [i for i in (s.find("{"), s.find("[")) if i >= 0]
    if starts:
        start = min(starts)
        end = max(s.rfind("}"), s.rfind("]"))
        if end > start:
            try:
                return json.loads(s[start : end + 1], strict=False)
            except json.JSONDecodeError:
                pass
    raise ValueError(f"no JSON in the model's answer: {str(text)[:200]!r}")


# ---------------------------------------------------------------------------------------
# rubric_judge
# ---------------------------------------------------------------------------------------

JUDGE_INSTRUCTIONS = (
    "You grade one reply of a tool-using assistant against a rubric, criterion by "
    "criterion. For a hard rule or a principle answer yes when the reply meets it; for a "
    "pitfall answer yes when the reply MAKES that mistake. Judge only what the transcript "
    "shows; tool results are the ground truth. Answer with JSON only:\n"
    '{"verdicts": {"<criterion key>": {"yes": true|false, "why": "<one sentence>"}, ...}, '
    '"summary": "<one sentence>"}\n'
    "Use every criterion key in square brackets exactly once."
)


def _transcript(row: Mapping[str, Any]) -> str:
    from wai_exp.score.grade.grading import final_reply, trajectory_steps

    prompt, steps = trajectory_steps(row)
    lines = [f"USER: {prompt}"]
    for step in steps:
        kind = step.get("kind")
        if kind == "assistant":
            if step.get("content"):
                lines.append(f"ASSISTANT: {step['content']}")
            for call in step.get("tool_calls") or []:
                args = json.dumps(call.get("arguments", {}), sort_keys=True, default=str)
                lines.append(f"ASSISTANT calls {call.get('name')}({args})")
        elif kind == "tool":
            result = step.get("result")
            text = result if isinstance(result, str) else json.dumps(result, default=str)
            lines.append(f"TOOL {step.get('name')} [{tool_status_text(step)}]: {text}")
        elif kind == "user":
            lines.append(f"USER: {step.get('content', '')}")
    final = final_reply(row, steps)
    if final and not any(line == f"ASSISTANT: {final}" for line in lines[-1:]):
        lines.append(f"FINAL REPLY: {final}")
    return "\n".join(lines)


def tool_status_text(step: Mapping[str, Any]) -> str:
    """A tool step's status as a judge reads it: one no world executed says so, so its
    result is not taken for the ground truth the instructions name."""
    if step.get("source") == NOT_EXECUTED:
        return "NOT EXECUTED: the assistant's own claim of a result, no tool ran"
    return str(step.get("status", "ok"))


def _tool_lines(tools: Sequence | None) -> str:
    if not tools:
        return ""
    out = []
    for t in tools:
        if isinstance(t, str):
            out.append(f"- {t}")
        elif isinstance(t, Mapping):
            fn = t.get("function", t)
            out.append(f"- {fn.get('name', '?')}: {fn.get('description', '')}".rstrip(": "))
    return "\n".join(out)


def conversation_parts(
    row: Mapping[str, Any], policy: str, tools: Sequence | None, *, policy_label: str
) -> list[str]:
    """What a model judge reads of one row, as titled blocks: the policy (under
    ``policy_label``), the tools, the teacher's reference from the privileged block (the judge
    may see the answer key; the agent never does) and the transcript. Never raises."""
    parts = []
    if policy:
        parts.append(f"{policy_label}:\n{policy}")
    tool_text = _tool_lines(tools)
    if tool_text:
        parts.append(f"TOOLS THE ASSISTANT HAD:\n{tool_text}")
    block = row.get("privileged")
    ref = block.get("reference") if isinstance(block, Mapping) else None
    if ref:
        ref_text = ref if isinstance(ref, str) else json.dumps(ref, sort_keys=True, default=str)
        parts.append(f"REFERENCE (what a good reply does):\n{ref_text}")
    parts.append(f"TRANSCRIPT:\n{_transcript(row)}")
    return parts


def _judge_message(
    rubric: Rubric, row: Mapping[str, Any], policy: str, tools: Sequence | None
) -> str:
    parts = conversation_parts(row, policy, tools, policy_label="ASSISTANT'S POLICY")
    parts.append(f"RUBRIC:\n{rubric.checklist()}")
    return "\n\n".join(parts)


def verdicts_schema(rubric: Rubric) -> dict[str, Any]:
    """The JSON schema a structured-output request asks the rubric verdicts in: one
    ``{"yes", "why"}`` per criterion key of ``rubric``, every key required, and a
    ``summary``."""
    item = {
        "type": "object",
        "properties": {"yes": {"type": "boolean"}, "why": {"type": "string"}},
        "required": ["yes", "why"],
        "additionalProperties": False,
    }
    keys = [c.slug for c in rubric.criteria]
    return {
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "object",
                "properties": {k: item for k in keys},
                "required": keys,
                "additionalProperties": False,
            },
            "summary": {"type": "string"},
        },
        "required": ["verdicts", "summary"],
        "additionalProperties": False,
    }


def _read_verdicts(answer: Any) -> tuple[dict[str, Any], str | None]:
    """(key -> raw verdict, summary) from the judge's parsed JSON."""
    if isinstance(answer, Mapping):
        summary = answer.get("summary") or answer.get("reason")
        body = answer.get("verdicts", answer.get("criteria", answer))
        if isinstance(body, Mapping):
            skip = {"summary", "reason"} if body is answer else set()
            return {str(k): v for k, v in body.items() if k not in skip}, summary
        answer = body
    if isinstance(answer, list):
        out: dict[str, Any] = {}
        for item in answer:
            if isinstance(item, Mapping):
                key = item.get("key", item.get("id", item.get("slug", item.get("title"))))
                if key is not None:
                    out[str(key)] = item
        return out, None
    raise ValueError(
        f"judge answer is {type(answer).__name__}, not a JSON object of verdicts; "
        'expected {"verdicts": {"<key>": {"yes": true|false}}}'
    )


def _markers(rubric: Rubric, verdicts: Mapping[str, bool | None]) -> dict[str, float]:
    markers: dict[str, float] = {}
    for c in rubric.criteria:
        v = verdicts.get(c.slug)
        if v is None:
            # Unanswered is unmeasured: no marker rather than a made-up 0 or 1.
            continue
        clean = (not v) if c.kind == "pitfall" else v
        markers[f"rubric:{c.slug}"] = 1.0 if clean else 0.0
    return markers


def _reason(rubric: Rubric, breakdown: Mapping[str, Any], summary: Any) -> str:
    bits = []
    if breakdown["hard_missed"]:
        bits.append("missed hard rule(s): " + ", ".join(breakdown["hard_missed"]))
    if breakdown["exhibited"]:
        bits.append("pitfall(s): " + ", ".join(breakdown["exhibited"]))
    principles = [c.slug for c in rubric.criteria if c.kind == "principle"]
    if principles:
        bits.append(
            f"principles met {sum(1 for s in principles if s in breakdown['met'])}"
            f"/{len(principles)}"
        )
    if breakdown["unanswered"]:
        bits.append("unanswered (counted as not met): " + ", ".join(breakdown["unanswered"]))
    text = "; ".join(bits) or "every criterion met"
    if isinstance(summary, str) and summary.strip():
        text = f"{summary.strip()} ({text})"
    return text


def _judge_meta(
    chat: Any, instructions: str, policy: Any, tools: Any, fixed: Rubric | None
) -> dict[str, Any]:
    """The judge's model, prompt hash, temperature and version: a prompt, policy, tool or
    rubric edit is a new version."""
    digest = hashlib.sha256(
        json.dumps([instructions, policy, _tool_lines(tools)], ensure_ascii=False).encode()
    ).hexdigest()[:12]
    version = f"{chat.spec.model}@{digest}" + (f"+{fixed.version}" if fixed is not None else "")
    return {
        "model": chat.model,
        "prompt_hash": digest,
        "temperature": chat.temperature,
        "version": version,
    }


def rubric_judge(
    rubric: Rubric | None = None,
    spec: str | None = None,
    api_key: str | None = None,
    prompt: str | None = None,
    policy: str = "",
    tools: Sequence | None = None,
    timeout: float = 120,
    *,
    temperature: float = 0.0,
    structured_output: str = "auto",
    transport: Any = None,
    retry: Any = None,
) -> Callable[[dict], Any]:
    """A judge for ``run_judge`` / ``data.grade(judge=)`` that scores the rubric item by item.

    ``rubric`` (a ``Rubric`` or its dict/list form) applies to every row; without one the
    row's own ``privileged.rubric`` is used and a row with none stays ungraded (reward None,
    ``judge_status="abstain"``). The model (``spec``, e.g. ``"openai:gpt-4.1-mini"``, else
    env ``WAI_EXP_JUDGE``) sees ``policy`` (the assistant's system prompt), ``tools``, the
    row's reference when ``privileged`` has one, the transcript and ``Rubric.checklist()``,
    and answers one yes/no per criterion as JSON. ``prompt`` replaces the grading
    instructions. ``structured_output`` (``auto``, ``json_schema``, ``json_object``, ``off``)
    asks the server for the verdicts' JSON schema (one entry per criterion key) through
    ``response_format``, stepping down when the server refuses a form, as ``grade_llm``
    does; ``judge_meta.structured_output`` names the form used. ``transport`` (an ``httpx``
    transport, e.g. ``httpx.MockTransport``) and ``retry`` (a ``RetryPolicy``) reach the
    HTTP layer.

    The judge (a ``RubricJudge``: ``judge(row)`` returns the verdict dict, ``await
    judge.acall(row)`` the same on an event loop) returns ``reward`` (``Rubric.score``),
    ``reason``, ``markers``
    (``rubric:<slug>`` = 1.0 met / 0.0 not, and for a pitfall 1.0 clean / 0.0 exhibited;
    unanswered criteria get no marker), ``criteria`` (the raw verdicts), ``rubric_version``,
    ``breakdown`` (the rest of ``Rubric.score``), ``model`` and ``judge_meta`` (``model``,
    ``prompt_hash`` of the instructions, ``temperature``, ``version``: ``<model>@<prompt
    hash>``, plus ``+<rubric version>`` for a fixed rubric). Its ``judge_name`` is
    ``rubric_judge@<version>`` when ``rubric`` is fixed. A call whose answer holds no JSON
    raises ``ValueError`` (``run_judge`` records it as ``judge_status="error"``).

    Raises ``ValueError`` here when no model spec is given or configured, the spec is
    malformed or ``structured_output`` is not one of its values. Unlike the hosted SDK there
    is no scale-to-zero judge to warm up first.
    """
    from wai_exp.llm.structured import StructuredOutput, check_mode

    check_mode(structured_output, "structured_output")
    fixed = Rubric.from_value(rubric) if rubric is not None else None
    if not (isinstance(timeout, int | float) and timeout > 0):
        raise ValueError(f"timeout must be seconds > 0, got {timeout!r}")
    chat = _Chat(
        _resolve_spec(spec, "rubric_judge"),
        api_key,
        float(timeout),
        transport,
        retry,
        temperature=float(temperature),
    )
    instructions = prompt if prompt is not None else JUDGE_INSTRUCTIONS
    meta = _judge_meta(chat, instructions, policy, tools, fixed)
    version = meta["version"]
    structured = (
        None
        if structured_output == "off"
        else StructuredOutput(
            structured_output,
            "rubric_verdicts",
            verdicts_schema(fixed) if fixed is not None else {"type": "object"},
            max_string_chars=240,
        )
    )

    async def score(row: dict) -> dict[str, Any]:
        rb = fixed if fixed is not None else rubric_of(row)
        if rb is None:
            return {
                "reward": None,
                "reason": "no rubric: the row has no privileged.rubric and the judge was "
                "built without rubric=; attach one with attach_rubric or write_rubrics",
                "model": chat.model,
            }
        text, form = await chat.ask_structured(
            instructions,
            _judge_message(rb, row, policy, tools),
            structured=structured,
            schema=verdicts_schema(rb),
        )
        raw, summary = _read_verdicts(_json_from_text(text))
        breakdown = rb.score(raw)
        reward = breakdown.pop("reward")
        return {
            "reward": reward,
            "reason": _reason(rb, breakdown, summary),
            "markers": _markers(rb, breakdown["verdicts"]),
            "criteria": raw,
            "rubric_version": rb.version,
            "breakdown": breakdown,
            "model": chat.model,
            "judge_meta": {
                **meta,
                **(structured.meta(form) if structured else {"structured_output": "off"}),
            },
        }

    judge = RubricJudge(
        score,
        chat,
        f"rubric_judge@{fixed.version}" if fixed is not None else "rubric_judge",
        fixed,
    )
    judge.version = version
    judge.meta = meta
    return judge


class RubricJudge:
    """The judge ``rubric_judge`` builds. ``judge(row)`` returns the verdict dict, also when
    called from inside a running event loop (a notebook: the call then runs on a loop of
    its own in a worker thread); ``await judge.acall(row)`` is the same call for code on an
    event loop, which ``run_judge`` uses to keep ``concurrency`` calls in flight on one
    loop. Carries ``judge_name``, ``model`` and ``rubric`` (the fixed rubric or None)."""

    def __init__(
        self, score: Callable[[dict], Any], chat: _Chat, name: str, rubric: Rubric | None
    ) -> None:
        self._score = score
        self._chat = chat
        self.judge_name = name
        self.model = chat.model
        self.rubric = rubric
        #: ``<model>@<prompt hash>`` (set by ``rubric_judge``) and the ``judge_meta`` it stamps
        self.version: str | None = None
        self.meta: dict[str, Any] = {"model": chat.model}

    async def aclose(self) -> None:
        """Close the HTTP client of the running loop (safe to call twice)."""
        await self._chat.aclose_current()

    async def acall(self, row: dict) -> dict[str, Any]:
        """The verdict for ``row``, awaited on the caller's event loop."""
        return await self._score(row)

    def __call__(self, row: dict) -> dict[str, Any]:
        from wai_exp.score.judges.judging import run_coro

        async def once() -> dict[str, Any]:
            try:
                return await self._score(row)
            finally:
                await self._chat.aclose_current()

        return run_coro(once)


# ---------------------------------------------------------------------------------------
# write_rubrics
# ---------------------------------------------------------------------------------------

WRITER_INSTRUCTIONS = (
    "Write a grading rubric for replies to the request below: {lo} to {hi} criteria that "
    "separate a good reply from a bad one for THIS request (specific facts, actions and "
    "mistakes, not generic virtues). Kinds: 'hard' for a rule a reply must never miss "
    "(use sparingly: missing one fails the reply), 'principle' for what a good reply does, "
    "'pitfall' for a mistake a reply may make. Weight is a positive number, higher for "
    "what matters more. Answer with JSON only:\n"
    '{{"criteria": [{{"title": "...", "description": "...", "kind": '
    '"hard|principle|pitfall", "weight": 1.0}}]}}'
)


def _prompt_of(row: Mapping[str, Any]) -> str:
    return " ".join(str(row.get("prompt") or "").split())


def _reference_of(row: Mapping[str, Any], reference_key: str) -> Any:
    block = row.get("privileged")
    if isinstance(block, Mapping) and block.get("reference"):
        return block["reference"]
    return row.get(reference_key) or None


def _writer_message(prompt: str, reference: Any, domain: str, n_criteria: tuple[int, int]) -> str:
    lo, hi = n_criteria
    parts = [WRITER_INSTRUCTIONS.format(lo=lo, hi=hi)]
    if domain:
        parts.append(f"GENERAL GUIDANCE FOR THIS DOMAIN:\n{domain}")
    parts.append(f"REQUEST:\n{prompt}")
    if reference:
        ref = reference if isinstance(reference, str) else json.dumps(reference, default=str)
        parts.append(f"REFERENCE ANSWER (what a good reply does):\n{ref}")
    return "\n\n".join(parts)


def _cap_hard(criteria: tuple[Criterion, ...], max_hard: int) -> tuple[tuple[Criterion, ...], int]:
    """Keep the heaviest ``max_hard`` hard rules hard (earlier wins a tie); the rest become
    principles with their weight. Returns (criteria, how many were demoted)."""
    hard = [i for i, c in enumerate(criteria) if c.kind == "hard"]
    if len(hard) <= max_hard:
        return criteria, 0
    keep = set(sorted(hard, key=lambda i: (-criteria[i].weight, i))[:max_hard])
    out = tuple(
        Criterion(c.title, c.description, c.weight, "principle")
        if c.kind == "hard" and i not in keep
        else c
        for i, c in enumerate(criteria)
    )
    return out, len(hard) - max_hard


def write_rubrics(
    rows: Sequence[dict],
    spec: str | None = None,
    domain: str = "",
    n_criteria: tuple[int, int] = (3, 8),
    reference_key: str = "reference",
    overwrite: bool = False,
    concurrency: int = 8,
    api_key: str | None = None,
    timeout: float = 120,
    writer: Callable[[str], Any] | None = None,
    max_hard: int | None = None,
    *,
    transport: Any = None,
    retry: Any = None,
) -> tuple[list[dict], dict[str, Any]]:
    """Draft one rubric per distinct prompt and attach it to every row of that prompt
    (``privileged.rubric``, ``source="model"``), in place.

    The writer sees the request, the row's reference answer when there is one
    (``privileged.reference`` or ``row[reference_key]``) and the ``domain`` guidance, and
    answers JSON criteria. Rows that already carry a rubric are skipped unless
    ``overwrite``. ``writer(user_message) -> str`` replaces the model call (``spec`` or env
    ``WAI_EXP_JUDGE``); ``transport``/``retry`` reach the HTTP layer. A draft with fewer
    than ``n_criteria[0]`` or more than ``n_criteria[1]`` criteria, no JSON, or a malformed
    criterion is a failure (listed, rows left without a rubric), never a partial rubric.
    ``max_hard`` caps the hard rules per rubric: the heaviest stay hard, the rest become
    principles with their weight; ``None`` keeps what the writer wrote.

    Returns ``(rows, report)``; report keys: ``prompts`` (distinct prompts seen),
    ``to_write``, ``written``, ``skipped`` (prompts whose rows all had a rubric),
    ``no_prompt`` (rows without a prompt, left alone), ``rows_attached``, ``failures``
    (``[{"prompt", "error"}]``), ``n_failures``, ``mean_criteria`` (None when nothing was
    written), ``demoted_hard``, ``versions`` (prompt -> rubric version). Raises
    ``ValueError`` for bad ``n_criteria``/``concurrency``/``max_hard`` or when no writer,
    spec or ``WAI_EXP_JUDGE`` is given.
    """
    lo, hi = _check_write_rubrics(n_criteria, concurrency, max_hard, writer)
    chat = None
    if writer is None:
        chat = _Chat(
            _resolve_spec(spec, "write_rubrics"), api_key, float(timeout), transport, retry
        )
    out = rows if isinstance(rows, list) else list(rows)
    groups, no_prompt = _group_by_prompt(out)

    def needs(row: dict) -> bool:
        block = row.get("privileged")
        return overwrite or not (isinstance(block, Mapping) and block.get("rubric") is not None)

    todo = {p: [r for r in g if needs(r)] for p, g in groups.items()}
    todo = {p: g for p, g in todo.items() if g}
    jobs = []
    for p, g in todo.items():
        ref = next((x for x in (_reference_of(r, reference_key) for r in g) if x), None)
        jobs.append((p, _writer_message(p, ref, domain, (lo, hi))))
    answers: list[Any] = []
    if jobs:
        from wai_exp.score.judges.judging import run_coro

        answers = run_coro(lambda: _draft_all([m for _, m in jobs], writer, chat, concurrency))
    failures: list[dict[str, str]] = []
    versions: dict[str, str] = {}
    n_crit: list[int] = []
    demoted = attached = 0
    for (p, _), answer in zip(jobs, answers, strict=True):
        try:
            crit, d = _criteria_from_answer(answer, (lo, hi), max_hard)
            demoted += d  # counted even when the rubric is then refused (as before the split)
            rb = Rubric(crit, source="model", domain=domain)
        except Exception as exc:  # noqa: BLE001 - one bad draft must not sink the others
            failures.append({"prompt": p[:PROMPT_HEAD], "error": f"{type(exc).__name__}: {exc}"})
            continue
        attach_rubric(todo[p], rb, overwrite=True)
        attached += len(todo[p])
        versions[p] = rb.version
        n_crit.append(len(rb.criteria))
    report = {
        "prompts": len(groups),
        "to_write": len(jobs),
        "written": len(versions),
        "skipped": len(groups) - len(jobs),
        "no_prompt": no_prompt,
        "rows_attached": attached,
        "failures": failures,
        "n_failures": len(failures),
        "mean_criteria": (sum(n_crit) / len(n_crit)) if n_crit else None,
        "demoted_hard": demoted,
        "versions": versions,
    }
    return out, report


def _check_write_rubrics(
    n_criteria: tuple[int, int], concurrency: int, max_hard: int | None, writer: Any
) -> tuple[int, int]:
    """Refuse bad arguments before any call; return the (min, max) criteria asked for."""
    try:
        lo, hi = (int(v) for v in n_criteria)
    except (TypeError, ValueError):
        raise ValueError(
            f"n_criteria must be a (min, max) pair of ints, got {n_criteria!r}"
        ) from None
    if not 1 <= lo <= hi:
        raise ValueError(f"n_criteria={n_criteria!r} needs 1 <= min <= max, e.g. (3, 8)")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
    if max_hard is not None and (
        isinstance(max_hard, bool) or not isinstance(max_hard, int) or max_hard < 0
    ):
        raise ValueError(f"max_hard must be None or an int >= 0, got {max_hard!r}")
    if writer is not None and not callable(writer):
        raise ValueError(f"writer must be callable (user_message -> str), got {writer!r}")
    return lo, hi


def _group_by_prompt(rows: list[Any]) -> tuple[dict[str, list[dict]], int]:
    """The rows by their prompt, and how many rows have none (left alone)."""
    groups: dict[str, list[dict]] = {}
    no_prompt = 0
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TypeError(f"rows[{i}] is {type(row).__name__}, not a row dict")
        p = _prompt_of(row)
        if not p:
            no_prompt += 1
            continue
        groups.setdefault(p, []).append(row)
    return groups, no_prompt


async def _draft_all(
    messages: list[str],
    writer: Callable[[str], Any] | None,
    chat: _Chat | None,
    concurrency: int,
) -> list[Any]:
    """Each message's answer (text, or the exception it raised), ``concurrency`` at a time."""
    import concurrent.futures

    sem = asyncio.Semaphore(concurrency)
    loop = asyncio.get_running_loop()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) if writer else None

    async def one(message: str) -> Any:
        async with sem:
            try:
                if writer is not None:
                    text = await loop.run_in_executor(pool, writer, message)
                    if inspect.isawaitable(text):
                        text = await text
                    return text
                assert chat is not None
                return await chat.ask("", message)
            except Exception as exc:  # noqa: BLE001 - kept per prompt as a failure
                return exc

    try:
        return await asyncio.gather(*(one(m) for m in messages))
    finally:
        if pool is not None:
            pool.shutdown(wait=False)


def _criteria_from_answer(
    answer: Any, bounds: tuple[int, int], max_hard: int | None
) -> tuple[tuple[Criterion, ...], int]:
    """The criteria a writer's answer holds and how many hard rules were demoted; raises
    for a failed call, no JSON, a count outside ``bounds`` or a malformed criterion."""
    lo, hi = bounds
    if isinstance(answer, BaseException):
        raise answer
    parsed = _json_from_text(answer) if isinstance(answer, str) else answer
    items = parsed.get("criteria") if isinstance(parsed, Mapping) else parsed
    if not isinstance(items, list):
        raise ValueError("the answer has no 'criteria' list")
    if not lo <= len(items) <= hi:
        raise ValueError(f"wrote {len(items)} criteria, asked for {lo} to {hi}")
    crit = tuple(Criterion.from_value(c) for c in items)
    demoted = 0
    if max_hard is not None:
        crit, demoted = _cap_hard(crit, max_hard)
    return crit, demoted


__all__ = [
    "Criterion",
    "Rubric",
    "attach_rubric",
    "rubric_judge",
    "rubric_of",
    "write_rubrics",
]
