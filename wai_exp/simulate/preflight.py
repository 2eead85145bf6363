"""Inspect the agent before spending simulation budget, and report after.

* ``build_dimensions`` lays out the covering grid ``simulate`` draws from, in the engine's own
  vocabulary (the template writer's grid and its parse of the policy's rules).
* ``preflight`` is the spec-quality report: what a developer should fix before generating
  thousands of rows from these tools and this policy.
* ``recommend`` says how much data the agent needs, from its own grid and published practice,
  with ``simulate_kwargs`` ready to splat into ``wai_exp.simulate``.
* ``coverage_gap`` places a hand-written suite's asks on the grid's axes by text heuristics
  and names the tools and rules no ask reaches; ``format_coverage_gap`` prints it.
* ``dataset_report`` is the one report to read after simulate/grade: size, signal, mix.

Pure functions over plain dicts, except ``_read_text``: ``coverage_gap`` accepts a path to a
suite file and that one helper reads it (``.py`` files are parsed, never executed).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wai_exp.domain.dimensions import (
    DIMENSION_KEYS,
    HARD_TIERS,
    HISTORIES,
    STANCES,
    TIER_OF_STANCE,
    TIERS,
    WORLD_STATES,
)
from wai_exp.domain.plurals import counted
from wai_exp.domain.rules import parse_rules
from wai_exp.domain.tools import is_write_tool
from wai_exp.rows.keys import task_key
from wai_exp.rows.reader import read_steps
from wai_exp.simulate.writer import TemplateWriter

__all__ = [
    "HARD_SHARE_FLOOR",
    "RL_ROLLOUTS_PER_PROMPT",
    "SATURATION_COPIES",
    "SFT_RANGE",
    "SFT_SURPLUS",
    "build_dimensions",
    "coverage_gap",
    "dataset_report",
    "format_coverage_gap",
    "preflight",
    "recommend",
]

#: Visits each grid cell wants before it counts as covered. One visit shows a cell once; a
#: second can repeat the first by chance; three is the smallest count at which a cell's
#: situations show whether the agent's behaviour there varies. Convention, untested.
SATURATION_COPIES = 3

#: Curated agent SFT sets land at 500 to 2,000 trajectories: FireAct (arXiv:2310.05915) 500,
#: LIMA (arXiv:2305.11206) 1,000, AgentTuning (arXiv:2310.12823) 1,866.
SFT_RANGE = (500, 2000)

#: Rows simulated per SFT demonstration kept. ``select_for_sft`` keeps only correct, distinct
#: demonstrations; at a pass rate near one half, two rows leave one. Convention, untested.
SFT_SURPLUS = 2.0

#: Rollouts per prompt in agent RL: 8 to 16 (DAPO, arXiv:2503.14476; Skywork-OR1 2025), with
#: all-pass / all-fail groups dropped. The low end is the ``rl`` mode's own preset.
RL_ROLLOUTS_PER_PROMPT = (8, 16)

#: Share of hard-tier rows under which ``dataset_report`` calls the set easy.
HARD_SHARE_FLOOR = 0.3

#: Phrasings per situation the ``sft`` mode presets (``simulate.modes.MODE_PRESETS``).
_SFT_PHRASINGS = 3

_MODES = ("sft", "rl")


# ---------------------------------------------------------------------------------------
# Tools: raw dicts read leniently, so a poor spec is reported instead of raised.


def _raw_function(tool: Any) -> Mapping[str, Any] | None:
    if not isinstance(tool, Mapping):
        return None
    fn = tool.get("function", tool)
    return fn if isinstance(fn, Mapping) else None


def _clean_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The tools the grid can be built from: named function dicts, first of each name, with
    undeclared ``required`` entries, unknown types and non-object parameters dropped. The
    writer's own ``normalize_tools`` raises on each of these; preflight reports them instead."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for tool in tools:
        fn = _raw_function(tool)
        if fn is None:
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not name.strip() or name.strip() in seen:
            continue
        seen.add(name.strip())
        params = fn.get("parameters")
        if not isinstance(params, Mapping) or params.get("type", "object") != "object":
            params = {}
        props = params.get("properties")
        props = dict(props) if isinstance(props, Mapping) else {}
        props = {
            a: {k: v for k, v in s.items() if k != "type" or _known_type(v)}
            for a, s in props.items()
            if isinstance(s, Mapping)
        }
        req = params.get("required")
        req = [r for r in req if r in props] if isinstance(req, list) else []
        out.append(
            {
                "type": "function",
                "function": {
                    "name": name.strip(),
                    "description": str(fn.get("description") or ""),
                    "parameters": {"type": "object", "properties": props, "required": req},
                },
            }
        )
    return out


_JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})


def _known_type(typ: Any) -> bool:
    types = typ if isinstance(typ, list) else [typ]
    return all(t in _JSON_TYPES for t in types)


def _tool_list(tools: Any) -> list[Any]:
    if tools is None:
        raise ValueError(
            "tools is required: pass the agent's tools in OpenAI function shape, e.g. "
            "tools=load_agent_spec().tools for the shipped support desk "
            "(from wai_exp.simulate.spec import load_agent_spec)"
        )
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise ValueError(
            f"tools must be a list of tool dicts (OpenAI function shape), got {type(tools).__name__}"
        )
    return list(tools)


# ---------------------------------------------------------------------------------------
# build_dimensions


def build_dimensions(tools: Sequence[Any], system_prompt: str | None = "") -> dict[str, Any]:
    """The covering grid ``simulate`` draws from, axis by axis, in the engine's vocabulary.

    The grid is the template writer's own (``TemplateWriter.grid``: one cell per
    ``tool x stance x world_state x tool_condition x history`` the writer can word for that
    tool) and the rules are its parse of the policy (``parse_rules``: numbered lines, else
    bullets, as ``R1..Rn``). Returns ``tool``, ``stance``, ``world_state``,
    ``tool_condition``, ``history``, ``rule``, ``tier`` (the values each axis takes in this
    grid, in vocabulary order), ``rules`` (``{rule_id: text}``), ``cells`` (grid size),
    ``cells_by_tool``, ``cells_by_tier``, ``rule_cells`` (``{rule_id: cells exercising it}``),
    ``unreached_rules`` (parsed rules no cell exercises: the writer's keywords found no
    situation kind for them), ``read_tools``, ``write_tools`` and ``grid`` (one dict per
    cell with its ``rule`` and ``tier``). Raises ``ValueError`` when ``tools`` is not a list
    or holds no usable tool.
    """
    clean = _clean_tools(_tool_list(tools))
    if not clean:
        raise ValueError(
            "no usable tool: every tool needs a 'name' (OpenAI function shape "
            '{"type": "function", "function": {"name": ..., "parameters": {...}}})'
        )
    writer = TemplateWriter(clean, system_prompt or "")
    grid: list[dict[str, Any]] = []
    for tool, stance, ws, cond, hist in writer.grid:
        # The writer decides which rule a cell exercises; its rule lookup is the one place
        # that mapping lives, so the grid here cannot drift from what simulate draws.
        rule = writer.rule_for(tool, stance, ws, cond)
        grid.append(
            {
                "tool": tool,
                "stance": stance,
                "world_state": ws,
                "tool_condition": cond,
                "history": hist,
                "rule": rule,
                "tier": TIER_OF_STANCE[stance],
            }
        )
    names = [t["function"]["name"] for t in clean]
    rules = dict(writer.rules)

    def used(axis: str, vocabulary: Sequence[str]) -> list[str]:
        present = {c[axis] for c in grid}
        return [v for v in vocabulary if v in present]

    rule_cells = Counter(c["rule"] for c in grid if c["rule"])
    return {
        "tool": names,
        "stance": used("stance", STANCES),
        "world_state": used("world_state", WORLD_STATES),
        "tool_condition": used("tool_condition", writer.conditions),
        "history": used("history", HISTORIES),
        "rule": list(rules),
        "tier": used("tier", TIERS),
        "rules": rules,
        "cells": len(grid),
        "cells_by_tool": dict(Counter(c["tool"] for c in grid)),
        "cells_by_tier": {t: n for t in TIERS if (n := sum(c["tier"] == t for c in grid))},
        "rule_cells": {r: rule_cells.get(r, 0) for r in rules},
        "unreached_rules": [r for r in rules if not rule_cells.get(r)],
        "read_tools": [n for n in names if not is_write_tool(n)],
        "write_tools": [n for n in names if is_write_tool(n)],
        "grid": grid,
    }


# ---------------------------------------------------------------------------------------
# preflight


def preflight(tools: Sequence[Any], system_prompt: str = "") -> dict[str, Any]:
    """Spec-quality report for an agent. Report only; nothing is changed.

    Returns ``ok`` (no warnings), ``warnings`` (the sentences a developer should read before
    generating thousands of rows), ``issues`` (the same as dicts: ``code``, ``tool``, ``arg``,
    ``message``), ``n_tools``, ``read_tools``, ``write_tools``, ``rules`` (``{id: text}``),
    ``cells`` (the covering-grid size, counted as ``recommend`` counts it; 0 when no tool is
    usable) and ``dimensions`` (``build_dimensions`` without the cell list). Codes:
    ``no_tools``, ``bad_tool``, ``duplicate_tool``, ``no_description``, ``bad_parameters``,
    ``param_no_type``, ``param_bad_type``, ``param_no_description``, ``required_undeclared``,
    ``no_system_prompt``, ``no_rules``, ``rule_unreached``, ``write_without_read``. Raises
    ``ValueError`` only when ``tools`` is not a list at all.
    """
    raw = _tool_list(tools)
    issues = _Issues()
    if not raw:
        issues.flag("no_tools", "no tools declared: simulate has nothing to exercise; pass tools=")
    names: Counter[str] = Counter()
    for i, tool in enumerate(raw):
        issues += _tool_issues(i, tool, names)
    prompt = system_prompt or ""
    rules = dict(parse_rules(prompt))
    issues += _prompt_issues(prompt, rules)
    dims: dict[str, Any] | None = None
    if _clean_tools(raw):
        dims = build_dimensions(raw, prompt)
        issues += _grid_issues(dims, rules)
    summary = {k: v for k, v in (dims or {}).items() if k != "grid"}
    return {
        "ok": not issues,
        "warnings": [i["message"] for i in issues],
        "issues": list(issues),
        "n_tools": len(names),
        "read_tools": summary.get("read_tools", []),
        "write_tools": summary.get("write_tools", []),
        "rules": rules,
        "cells": summary.get("cells", 0),
        "dimensions": summary,
    }


class _Issues(list[dict[str, Any]]):
    """Preflight's findings in the order found, each as code, tool, arg and message."""

    def flag(
        self, code: str, message: str, tool: str | None = None, arg: str | None = None
    ) -> None:
        self.append({"code": code, "tool": tool, "arg": arg, "message": message})


def _tool_issues(i: int, tool: Any, names: Counter[str]) -> list[dict[str, Any]]:
    """What is wrong with ``tools[i]``; counts its name in ``names`` (a repeat is flagged once)."""
    issues = _Issues()
    fn = _raw_function(tool)
    name = fn.get("name") if fn is not None else None
    if fn is None or not isinstance(name, str) or not name.strip():
        issues.flag(
            "bad_tool",
            f"tools[{i}] has no name: it is skipped; write it as "
            '{"type": "function", "function": {"name": ..., "description": ..., '
            '"parameters": {...}}}',
        )
        return issues
    name = name.strip()
    names[name] += 1
    if names[name] == 2:
        issues.flag(
            "duplicate_tool",
            f"tool {name!r} is declared more than once: the agent cannot tell the two "
            "apart and simulate refuses the spec; rename or merge them",
            tool=name,
        )
    if names[name] > 1:
        return issues
    if not str(fn.get("description") or "").strip():
        issues.flag(
            "no_description",
            f"tool {name!r} has no description: the agent must guess when to call it "
            "from its name alone; say what it does and what it returns",
            tool=name,
        )
    params = fn.get("parameters")
    if params is None:
        params = {}
    if not isinstance(params, Mapping) or params.get("type", "object") != "object":
        issues.flag(
            "bad_parameters",
            f"tool {name!r}: 'parameters' is not a JSON-schema object; write "
            '{"type": "object", "properties": {...}, "required": [...]}',
            tool=name,
        )
        return issues
    props = params.get("properties") or {}
    props = props if isinstance(props, Mapping) else {}
    for arg, schema in props.items():
        schema = schema if isinstance(schema, Mapping) else {}
        if "type" not in schema and "enum" not in schema:
            issues.flag(
                "param_no_type",
                f"tool {name!r}: parameter {arg!r} has no type: the agent cannot tell a "
                "number from a string; add a JSON type",
                tool=name,
                arg=arg,
            )
        elif "type" in schema and not _known_type(schema["type"]):
            issues.flag(
                "param_bad_type",
                f"tool {name!r}: parameter {arg!r} has unknown type {schema['type']!r}; "
                f"use one of {sorted(_JSON_TYPES)}",
                tool=name,
                arg=arg,
            )
        if not str(schema.get("description") or "").strip():
            issues.flag(
                "param_no_description",
                f"tool {name!r}: parameter {arg!r} has no description: say what value "
                "goes there and in what format",
                tool=name,
                arg=arg,
            )
    required = params.get("required") or []
    for arg in required if isinstance(required, list) else []:
        if arg not in props:
            issues.flag(
                "required_undeclared",
                f"tool {name!r}: required parameter {arg!r} is not declared under "
                "properties; declare it (with a type and description) or drop it from "
                "required",
                tool=name,
                arg=arg,
            )

    return issues


def _prompt_issues(prompt: str, rules: dict[str, str]) -> list[dict[str, Any]]:
    """No system prompt, or one with no rule a situation could exercise."""
    issues = _Issues()
    if not prompt.strip():
        issues.flag(
            "no_system_prompt",
            "no system prompt: the agent has no policy to follow and situations exercise no "
            "rule; pass system_prompt=",
        )
    elif not rules:
        issues.flag(
            "no_rules",
            "no policy rules found: write the policy as numbered lines (1. ..., 2. ...) or "
            "bullets so each rule can be exercised and reported on",
        )

    return issues


def _grid_issues(dims: dict[str, Any], rules: dict[str, str]) -> list[dict[str, Any]]:
    """Rules no drawn situation reaches, and write tools with nothing to read first."""
    issues = _Issues()
    for rid in dims["unreached_rules"]:
        issues.flag(
            "rule_unreached",
            f"rule {rid} ({_short(rules[rid])}) matches no situation kind the writer draws: "
            "no simulated ask will exercise it; grade it with your own tasks",
        )
    if dims["write_tools"] and not dims["read_tools"]:
        issues.flag(
            "write_without_read",
            f"write tools {dims['write_tools']} have no read tool to verify against: the "
            "agent cannot look a record up before changing it; add a lookup tool",
        )
    return issues


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3].rstrip() + "..."


# ---------------------------------------------------------------------------------------
# recommend


def recommend(
    tools: Sequence[Any] | None = None,
    policy: str = "",
    system_prompt: str | None = None,
    mode: str = "sft",
    target: int | None = None,
    mixed_rate: float = 0.5,
) -> dict[str, Any]:
    """How much data this agent needs, from its own grid. No guessing.

    ``policy=`` and ``system_prompt=`` are the same text (``simulate``'s spellings); passing
    both is a ``ValueError``. The grid (``build_dimensions``) gives ``cells``; every cell
    wants ``SATURATION_COPIES`` visits (one situation each).

    * ``mode="sft"``: ``target`` is demonstrations to keep, by default the grid's demand
      ``cells x SATURATION_COPIES`` clamped to ``SFT_RANGE`` (500 to 2,000). Rows simulated
      are ``target x SFT_SURPLUS`` so selection has surplus to choose from, worded
      ``_SFT_PHRASINGS`` ways per situation.
    * ``mode="rl"``: ``target`` is rows kept in mixed groups (what ``select_for_rl`` counts),
      by default ``cells x SATURATION_COPIES x mixed_rate`` groups of k. ``k`` is 8 (the low
      end of 8 to 16 rollouts per prompt); ``mixed_rate`` is the share of groups expected to
      split, the rest dropped as unanimous, so prompts simulated = kept groups / mixed_rate.

    Returns ``mode``, ``cells``, ``saturation_copies``, ``target``, ``situations``,
    ``phrasings``, ``repeats``, ``rows`` (the simulate budget), ``copies_per_cell`` (visits
    each cell gets), ``simulate_kwargs`` (``mode``, ``tools``, ``system_prompt``,
    ``situations``, ``phrasings``, ``repeats``, ``unique``, ``budget``: splat into
    ``wai_exp.simulate``), ``reasoning`` (the arithmetic, line by line), ``sources`` and
    ``spec``: ``None`` for your own tools; with ``tools=None`` (the default) the shipped
    support-desk spec is sized instead (its policy too when none is given), ``spec`` names it
    and the first reasoning line says so. Raises ``ValueError`` for an empty or malformed
    tool list, an unknown mode, a non-positive target, a ``mixed_rate`` outside (0, 1], or
    both policy spellings.
    """
    prompt = _check_recommend(policy, system_prompt, mode, target, mixed_rate)
    defaulted: str | None = None
    if tools is None:
        tools, prompt, defaulted, what = _shipped_spec(prompt, policy, system_prompt)
    clean = _clean_tools(_tool_list(tools))
    dims = build_dimensions(clean, prompt)
    cells = dims["cells"]
    demand = cells * SATURATION_COPIES
    lines = []
    if defaulted is not None:
        lines.append(
            f"tools=None: sized for the shipped {defaulted} spec ({what}: {len(clean)} tools); "
            "pass tools= (and policy=) to size your own agent"
        )
    lines.append(
        f"grid: {len(dims['tool'])} tools x stances x world states x tool conditions x "
        f"histories = {cells} cells; each wants {SATURATION_COPIES} visits = {demand} situations"
    )
    plan = _sft_plan(demand, target) if mode == "sft" else _rl_plan(demand, target, mixed_rate)
    lines += plan.lines
    copies = plan.situations / cells if cells else 0.0
    lines.append(
        f"coverage: {plan.situations} situations / {cells} cells = {copies:.2f} visits per cell"
        + (
            f", under the {SATURATION_COPIES} saturation wants: pass a larger target= to close it"
            if copies < SATURATION_COPIES
            else ""
        )
    )
    kwargs: dict[str, Any] = {
        "mode": mode,
        "tools": clean,
        "system_prompt": prompt,
        "situations": plan.situations,
        "phrasings": plan.phrasings,
        "repeats": plan.repeats,
        # unique: each pass of the writer visits every cell once before any repeats, so
        # SATURATION_COPIES passes are SATURATION_COPIES visits per cell.
        "unique": True,
        "budget": plan.rows,
    }
    return {
        "mode": mode,
        "cells": cells,
        "saturation_copies": SATURATION_COPIES,
        "target": int(plan.target),
        "situations": plan.situations,
        "phrasings": plan.phrasings,
        "repeats": plan.repeats,
        "rows": plan.rows,
        "copies_per_cell": copies,
        "mixed_rate": float(mixed_rate) if mode == "rl" else None,
        "simulate_kwargs": kwargs,
        "reasoning": lines,
        "sources": plan.sources,
        "spec": defaulted,
    }


def _check_recommend(
    policy: str, system_prompt: str | None, mode: str, target: int | None, mixed_rate: float
) -> str:
    """Refuse bad arguments before any work; return the policy text under either spelling."""
    if system_prompt is not None and policy:
        raise ValueError("policy= and system_prompt= are the same text; pass one of them, not both")
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    if target is not None and (isinstance(target, bool) or int(target) != target or target < 1):
        raise ValueError(f"target must be a positive integer (rows to keep), got {target!r}")
    if not 0.0 < float(mixed_rate) <= 1.0:
        raise ValueError(
            f"mixed_rate is the share of RL groups expected to split, in (0, 1]; got {mixed_rate}"
        )
    return system_prompt if system_prompt is not None else (policy or "")


def _shipped_spec(
    prompt: str, policy: str, system_prompt: str | None
) -> tuple[list[Any], str, str, str]:
    """The documented default for tools=None: the shipped spec's tools (and its policy when
    none was given), said so on the result, rather than a number for no agent at all.
    Returns the tools, the prompt, the spec's name and what of it was used."""
    from wai_exp.simulate.spec import DEFAULT_SPEC, load_agent_spec

    shipped = load_agent_spec()
    what = "its tools, your policy"
    if system_prompt is None and not policy:
        prompt, what = shipped.system_prompt or "", "its tools and policy"
    return shipped.tools, prompt, DEFAULT_SPEC, what


@dataclass(frozen=True)
class _Plan:
    """One mode's sizing: what to keep, how many situations and rows, and why."""

    target: int
    situations: int
    phrasings: int
    repeats: int
    rows: int
    lines: list[str]
    sources: list[str]


def _sft_plan(demand: int, target: int | None) -> _Plan:
    """Demonstrations to keep (the demand clamped to SFT_RANGE unless given), with surplus."""
    lines = []
    lo, hi = SFT_RANGE
    if target is None:
        target = min(max(demand, lo), hi)
        bound = " (published floor)" if demand < lo else " (published ceiling)"
        lines.append(
            f"target: {demand} demonstrations clamped to [{lo}, {hi}] = {target}"
            + (bound if target != demand else "")
        )
    else:
        lines.append(f"target: {target} demonstrations (given)")
    phrasings = _SFT_PHRASINGS
    rows = math.ceil(target * SFT_SURPLUS)
    lines.append(
        f"rows: {target} x {SFT_SURPLUS:g} surplus for selection (keeps correct, distinct "
        f"demos) = {rows}"
    )
    situations = math.ceil(rows / phrasings)
    rows = situations * phrasings
    lines.append(
        f"situations: ceil({math.ceil(target * SFT_SURPLUS)} / {phrasings} phrasings) = "
        f"{situations} -> {rows} rows"
    )
    sources = [
        "FireAct (arXiv:2310.05915): 500 agent trajectories",
        "LIMA (arXiv:2305.11206): 1,000 curated examples",
        "AgentTuning (arXiv:2310.12823): 1,866 agent trajectories",
    ]
    return _Plan(target, situations, phrasings, 1, rows, lines, sources)


def _rl_plan(demand: int, target: int | None, mixed_rate: float) -> _Plan:
    """Rows to keep in mixed groups of k, and the prompts that takes at this mixed rate."""
    lines = []
    repeats = RL_ROLLOUTS_PER_PROMPT[0]
    if target is None:
        kept_groups = math.ceil(demand * mixed_rate)
        target = kept_groups * repeats
        lines.append(
            f"target: {demand} situations x {mixed_rate:g} mixed = {kept_groups} kept "
            f"groups x k={repeats} = {target} rows"
        )
    else:
        kept_groups = math.ceil(target / repeats)
        lines.append(f"target: {target} rows (given) / k={repeats} = {kept_groups} kept groups")
    situations = max(math.ceil(kept_groups / mixed_rate), 1)
    rows = situations * repeats
    lines.append(
        f"situations: {kept_groups} kept groups / {mixed_rate:g} mixed rate (unanimous "
        f"groups are dropped) = {situations}; rows <= {situations} x k={repeats} = {rows}"
    )
    lines.append(
        f"k={repeats}: the low end of 8 to 16 rollouts per prompt; the rl preset starts "
        "each ask at k/2 and extends only groups that split, so rows is a ceiling"
    )
    sources = [
        "DAPO (arXiv:2503.14476): 8 to 16 rollouts per prompt, unanimous groups dropped",
        "Skywork-OR1 (2025): grouped rollouts, all-pass/all-fail groups filtered",
    ]
    return _Plan(target, situations, 1, repeats, rows, lines, sources)


# ---------------------------------------------------------------------------------------
# coverage_gap: text heuristics, not a model.

_WORD = re.compile(r"[a-z][a-z']+")
_STOP_WORDS = (
    "a an the and or but if of to in on at by for with from as is are was were be been it "
    "its this that these those you your yours i me my we our us they them their he she his "
    "her not no do does did done can could would should will shall may might must have has "
    "had there here what when where which who whom why how any all some each every one ones "
    "than then so such only own same too very just also into out up down over under again "
    "more most other another about before after once whatever whether while because what's "
    "it's i'm don't didn't isn't please tell say said use using get got give given want "
    "wants need needs like make makes"
)
_STOP = frozenset(_STOP_WORDS.split())

#: Everyday wordings that imply a tool's name word without saying it ("I moved" is an
#: address change, "locked out" a password reset). Each cue adds the words after it to the
#: ask's terms before tools are matched.
_IMPLIES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(cue, re.IGNORECASE), words)
    for cue, words in (
        (
            r"\bmoved\b|redirect|new address|deliver(?:y|ed)? to|send (?:it|them|my \w+) to",
            "address ship",
        ),
        (r"(?:money|\$[\d.,]+) back|reimburs|charged (?:twice|me)|compensat", "refund"),
        (r"log ?in|locked out|sign ?in|forgot my", "password reset"),
        (
            r"where is|where's|what's happening|track|(?:hasn't|has not|never|not yet|still not) arrived"
            r"|status of|update on",
            "lookup status",
        ),
        (r"changed my mind|don't want (?:it|them)|stop (?:the|my) order", "cancel"),
        (r"\blist\b|all (?:my|of my) orders|which orders|recent orders", "search list"),
    )
)

#: Stance cues, checked in this order (the first stance with a cue wins). A vague ask is one
#: that reaches a tool needing an identifier and names none.
_ADVERSARIAL = re.compile(
    r"ignore (?:your|the|all|previous|any)|pretend|bypass|override|jailbreak|system prompt"
    r"|another (?:customer|user|person)|someone else|not mine|isn't mine|is not mine"
    r"|belongs to|my (?:neighbou?r|sister|brother|ex|partner|coworker|colleague|friend|wife"
    r"|husband|housemate|boss|mother|father|mom|dad)(?:'s)?\b",
    re.IGNORECASE,
)
_BOUNDARY = re.compile(
    r"even though|even if|whatever (?:its|the) status|don't care|do not care"
    r"|more than (?:i|it|the|what|was)\b|above the|on top of|cover my (?:trouble|time)"
    r"|already (?:shipped|left)|left the warehouse|regardless",
    re.IGNORECASE,
)
_WANTED = re.compile(
    r"\b(?:want|need|like|get|have)\b[^.?!;:]{0,40}?\b([a-z]{3,}?)l?ed\b", re.IGNORECASE
)
_IDENTIFIER = re.compile(
    r"[\w.+-]+@[\w-]+\.[\w.]+|\b[A-Z]{2,}-?\d{3,}\b|#\d{3,}|\b\d{5,}\b", re.IGNORECASE
)
_FOLLOWUP = re.compile(
    r"last (?:week|time|month)|following up|follow up|follow-up|earlier|second time|again"
    r"|already (?:wrote|asked|contacted|chatted)|colleague|previous(?:ly)? (?:message|contact)",
    re.IGNORECASE,
)
_RETRY = re.compile(
    r"tried|didn't work|did not work|failed|gave me an error|nothing happened|attempt",
    re.IGNORECASE,
)


def _stem(word: str) -> str:
    w = word.strip("'").removesuffix("'s")
    # "-ed" is kept: a past form describes a state ("it shipped", "already refunded"), not
    # the action the person asks for, so it must not place the ask on that action's tool.
    for suffix in ("ing", "es", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            w = w[: -len(suffix)]
            break
    # cancelled/cancelling -> cancell -> cancel; shipped -> shipp -> ship
    if len(w) > 4 and w[-1] == w[-2] and w[-1] not in "aeious":
        w = w[:-1]
    return w


def _terms(text: str) -> set[str]:
    words = _WORD.findall(re.sub(r"[_\-]+|(?<=[a-z])(?=[A-Z])", " ", text).lower())
    return {_stem(w) for w in words if w not in _STOP and len(w) > 2}


def _distinctive(vocab: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Each entry's terms minus those shared by more than half of the entries (a word every
    tool or every rule carries places nothing)."""
    n = len(vocab)
    df = Counter(t for terms in vocab.values() for t in terms)
    cut = max(1, n // 2)
    return {k: {t for t in terms if df[t] <= cut} for k, terms in vocab.items()}


def _read_text(path: Path) -> str:
    """The one I/O in this package: read the suite file ``coverage_gap`` was handed (a
    leading byte-order mark skipped)."""
    return path.read_text(encoding="utf-8-sig")


def _asks_from_items(items: Any, where: str) -> list[str]:
    out: list[str] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, Mapping) and isinstance(item.get("prompt"), str):
            out.append(item["prompt"])
        else:
            raise ValueError(
                f"{where}[{i}] is neither a prompt string nor a dict with a 'prompt' string "
                f"(got {type(item).__name__})"
            )
    return out


def _asks_from_py(text: str, where: str) -> list[str]:
    # Parsed, never executed: a suite file is someone else's code.
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ValueError(f"{where} is not valid Python ({exc})") from exc
    found: list[str] = []
    for node in ast.walk(tree):
        value = getattr(node, "value", None)
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or value is None:
            continue
        try:
            literal = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError):
            continue
        if isinstance(literal, (list, tuple)) and literal:
            try:
                found.extend(_asks_from_items(literal, where))
            except ValueError:
                continue
    if not found:
        raise ValueError(
            f"{where} holds no literal list of prompt strings or of dicts with 'prompt' "
            "(e.g. ASKS = ['...', ...]); write the suite as such a list or as JSONL"
        )
    return found


def _load_asks(asks: Any) -> list[str]:
    if isinstance(asks, (str, Path)) and (
        isinstance(asks, Path) or asks.endswith((".jsonl", ".py")) or "\n" not in asks
    ):
        path = Path(asks).expanduser()
        if path.suffix not in (".jsonl", ".py"):
            raise ValueError(
                f"asks={str(asks)!r} is a string; pass a list of prompts, rows with 'prompt', "
                "or a path to a .jsonl / .py suite file"
            )
        if not path.is_file():
            raise ValueError(f"asks file {str(path)!r} does not exist")
        text = _read_text(path)
        if path.suffix == ".py":
            return _asks_from_py(text, str(path))
        items = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n} is not valid JSON ({exc})") from exc
        return _asks_from_items(items, str(path))
    if isinstance(asks, Sequence) and not isinstance(asks, (str, bytes)):
        return _asks_from_items(asks, "asks")
    raise ValueError(
        f"asks must be a list of prompts, rows with 'prompt', or a .jsonl/.py path; got "
        f"{type(asks).__name__}"
    )


class _Placer:
    """Places an ask on the grid's axes by its words."""

    def __init__(self, dims: Mapping[str, Any], tools: Sequence[Mapping[str, Any]]) -> None:
        self.dims = dims
        fns = {t["function"]["name"]: t["function"] for t in tools}
        # A tool's name words place an ask on their own; description words need two hits,
        # since descriptions share generic words (order, account) across tools.
        self.name_terms = {n: _terms(n) for n in fns}
        self.desc_terms = _distinctive(
            {n: _terms(fn.get("description", "")) - _terms(n) for n, fn in fns.items()}
        )
        self.name_df = Counter(t for terms in self.name_terms.values() for t in terms)
        self.desc_df = Counter(t for terms in self.desc_terms.values() for t in terms)
        self.write = {n: is_write_tool(n) for n in fns}
        self.needs_id = {
            n: bool((fn.get("parameters") or {}).get("required")) for n, fn in fns.items()
        }
        self.rule_terms = _distinctive({r: _terms(t) for r, t in dims["rules"].items()})
        # The rule a placed ask exercises on the grid, read off the writer's own cells at the
        # one point a hand-written ask sits on (world exists, tool ok).
        self.grid_rule: dict[tuple[str, str], str | None] = {}
        for c in dims["grid"]:
            key = (c["tool"], c["stance"])
            if c["world_state"] == "exists" and c["tool_condition"] == "ok":
                self.grid_rule.setdefault(key, c["rule"])

    def _tools_for(self, terms: set[str]) -> list[str]:
        """The tools an ask's terms place it on. Name words weigh 1/df (how many tool names
        carry them), description words half that. Tools hit by a name word no other tool
        has win; of those, every one scoring over half the best stays (an ask may name two
        actions, but a stray object word next to a named action does not add a tool). With
        no such word the best-scoring tools win, ties broken by description hits and then
        toward read tools (an ask that names a thing and no action is a lookup)."""
        unique: list[tuple[float, str]] = []
        scored = []
        for name, nt in self.name_terms.items():
            name_hits = terms & nt
            desc_hits = terms & self.desc_terms[name]
            if not name_hits and len(desc_hits) < 2:
                continue
            score = sum(1 / self.name_df[t] for t in name_hits) + 0.5 * sum(
                1 / self.desc_df[t] for t in desc_hits
            )
            if any(self.name_df[t] == 1 for t in name_hits):
                unique.append((score, name))
            scored.append((round(score, 9), len(desc_hits), not self.write[name], name))
        if unique:
            top = max(score for score, _ in unique)
            return [name for score, name in unique if score > top / 2]
        if not scored:
            return []
        best = max(s[:3] for s in scored)
        return [s[3] for s in scored if s[:3] == best]

    def place(self, ask: str) -> dict[str, Any]:
        plain = _IDENTIFIER.sub(" ", ask)
        implied: set[str] = set()
        for cue, words in _IMPLIES:
            if cue.search(plain):
                implied |= {_stem(w) for w in words.split()}
                # The cue's own words are spent: "an update on my order" is not an update.
                plain = cue.sub(" ", plain)
        # A past form after want/need ("I want it cancelled") asks for the action itself.
        implied |= {_stem(m) for m in _WANTED.findall(plain)}
        terms = _terms(plain) | implied
        tools = self._tools_for(terms)
        if _ADVERSARIAL.search(ask):
            stance = "adversarial"
        elif _BOUNDARY.search(ask):
            stance = "boundary"
        elif any(self.needs_id[t] for t in tools) and not _IDENTIFIER.search(ask):
            stance = "vague"
        else:
            stance = "direct"
        if _RETRY.search(ask):
            history = "retry"
        elif _FOLLOWUP.search(ask):
            history = "followup"
        else:
            history = "fresh"
        rules = {r for r, rt in self.rule_terms.items() if len(_terms(plain) & rt) >= 2}
        for tool in tools:
            rule = self.grid_rule.get((tool, stance))
            if rule:
                rules.add(rule)
        return {
            "ask": ask,
            "tools": tools,
            "rules": sorted(rules, key=_rule_order),
            "stance": stance,
            "history": history,
            "tier": TIER_OF_STANCE[stance],
        }


def _rule_order(rid: str) -> tuple[int, str]:
    digits = rid[1:]
    return (int(digits), rid) if digits.isdigit() else (10**9, rid)


def _dims_of(row: Mapping[str, Any]) -> Mapping[str, Any]:
    d = row.get("scenario_dimensions")
    return d if isinstance(d, Mapping) else {}


def _ending_fault(row: Mapping[str, Any]) -> str:
    """The fault the rollout ended in: the status of its last tool step, ``"ok"`` when it
    ended clean or called no tool."""
    last = "ok"
    for step in read_steps(row)[1]:
        if step.get("kind") == "tool":
            status = step.get("fault") or step.get("status") or "ok"
            last = str(status)
    return last


def coverage_gap(
    asks: Any,
    tools: Sequence[Any],
    system_prompt: str = "",
    rows: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Which parts of an agent's policy the asks you already send never reach.

    ``asks``: a list of prompt strings, a list of rows carrying ``prompt``, or a path to a
    ``.jsonl`` file (one prompt string or row per line) or a ``.py`` file holding a literal
    list of either (parsed, not run). The axes are ``build_dimensions``'s. Each ask is placed
    by its words: the tools whose name words it uses (or two of whose description words),
    the stance its cues show (adversarial > boundary > vague: a tool needing an identifier
    and none given > direct), the history (retry / followup / fresh), and the rules it
    reaches: those it shares two distinctive words with, plus the rule the writer's grid
    assigns its (tool, stance) at world ``exists`` / tool ``ok``.

    Returns ``n_asks``, ``axes`` (``{axis: {value: asks}}`` for every grid axis),
    ``untested_tools``, ``untested_rules`` (ids; texts in ``rules``), ``untested_stances``,
    ``untested_histories``, ``untested_tiers``, ``unplaced`` (asks that reach no tool),
    ``cell_coverage`` (``reached`` / ``of`` / ``share`` over the grid's
    ``tool x stance x history`` cells, the part an ask can show), ``placements`` (one per
    ask), ``world_side`` (with ``rows``: ``{rule: fault}`` for rules whose rows all ended in
    the same tool fault, else ``None``) and ``notes``. Raises ``ValueError`` for an
    unreadable ``asks`` or unusable ``tools``.
    """
    prompts = _load_asks(asks)
    clean = _clean_tools(_tool_list(tools))
    dims = build_dimensions(clean, system_prompt)
    placer = _Placer(dims, clean)
    placements = [placer.place(a) for a in prompts]

    tool_count = Counter(t for p in placements for t in p["tools"])
    rule_count = Counter(r for p in placements for r in p["rules"])
    axes: dict[str, dict[str, int]] = {
        "tool": {t: tool_count.get(t, 0) for t in dims["tool"]},
        "rule": {r: rule_count.get(r, 0) for r in dims["rule"]},
    }
    for axis, vocab in (("stance", STANCES), ("history", HISTORIES), ("tier", TIERS)):
        counts = Counter(p[axis] for p in placements)
        axes[axis] = {v: counts.get(v, 0) for v in vocab if v in dims[axis] or counts.get(v)}
    # An ask cannot say what the world holds or how the tool behaves: every one sits at the
    # grid's first point on those axes.
    axes["world_state"] = {v: (len(prompts) if v == "exists" else 0) for v in dims["world_state"]}
    axes["tool_condition"] = {v: (len(prompts) if v == "ok" else 0) for v in dims["tool_condition"]}

    projected = {(c["tool"], c["stance"], c["history"]) for c in dims["grid"]}
    reached = {(t, p["stance"], p["history"]) for p in placements for t in p["tools"]} & projected
    notes = [
        "world_state and tool_condition cannot be read from an ask: a prompt never says the "
        "record is missing or the tool timed out, so every ask sits at world 'exists', tool "
        f"'ok'; the grid's other {len(dims['world_state']) * len(dims['tool_condition']) - 1} "
        "combinations of the two come only from the world (simulate draws them)",
        "asks are placed by word heuristics, not a model: read `placements` before trusting "
        "a reached rule",
    ]
    unplaced = [p["ask"] for p in placements if not p["tools"]]
    if unplaced:
        one = len(unplaced) == 1
        notes.append(
            f"{counted(len(unplaced), 'ask')} {'names' if one else 'name'} or "
            f"{'implies' if one else 'imply'} no declared tool"
        )

    world_side: dict[str, str] | None = None
    if rows is not None:
        world_side = {}
        by_rule: dict[str, set[str]] = {}
        for row in rows:
            rule = _dims_of(row).get("rule")
            found = [rule] if rule else placer.place(str(row.get("prompt") or ""))["rules"]
            for r in found:
                by_rule.setdefault(r, set()).add(_ending_fault(row))
        for r in sorted(by_rule, key=_rule_order):
            ends = by_rule[r]
            if len(ends) == 1 and (end := next(iter(ends))) != "ok":
                world_side[r] = end
        if world_side:
            notes.append(
                "rules whose rows all ended in one tool fault are reached by the asks but the "
                "fixtures never let the rule's own path happen: "
                + ", ".join(f"{r} ({f})" for r, f in world_side.items())
            )
    return {
        "n_asks": len(prompts),
        "axes": axes,
        "rules": dims["rules"],
        "untested_tools": [t for t, n in axes["tool"].items() if not n],
        "untested_rules": [r for r, n in axes["rule"].items() if not n],
        "untested_stances": [s for s in dims["stance"] if not axes["stance"].get(s)],
        "untested_histories": [h for h in dims["history"] if not axes["history"].get(h)],
        "untested_tiers": [t for t in dims["tier"] if not axes["tier"].get(t)],
        "unplaced": unplaced,
        "cell_coverage": {
            "reached": len(reached),
            "of": len(projected),
            "share": (len(reached) / len(projected)) if projected else None,
        },
        "grid_cells": dims["cells"],
        "placements": placements,
        "world_side": world_side,
        "notes": notes,
    }


def format_coverage_gap(report: Mapping[str, Any]) -> str:
    """The gap report as the block a person actually reads: headline, the untested tools and
    rules (with their text), the untested stances and histories, then the notes."""
    axes = report["axes"]
    n_tools, n_rules = len(axes["tool"]), len(axes["rule"])
    cov = report["cell_coverage"]
    share = f"{cov['share']:.0%}" if cov["share"] is not None else "n/a"
    lines = [
        f"{report['n_asks']} asks reach {n_tools - len(report['untested_tools'])}/{n_tools} "
        f"tools, {n_rules - len(report['untested_rules'])}/{n_rules} rules, "
        f"{cov['reached']}/{cov['of']} tool x stance x history cells ({share})"
    ]
    if report["untested_tools"]:
        lines.append("untested tools: " + ", ".join(report["untested_tools"]))
    for rid in report["untested_rules"]:
        lines.append(f"untested rule {rid}: {_short(report['rules'][rid], 90)}")
    if report["untested_stances"]:
        lines.append("no ask is " + ", ".join(report["untested_stances"]))
    if report["untested_histories"]:
        lines.append("no ask has history " + ", ".join(report["untested_histories"]))
    stance = ", ".join(f"{k} {v}" for k, v in axes["stance"].items())
    lines.append(f"stances: {stance}")
    if report.get("world_side"):
        for r, fault in report["world_side"].items():
            lines.append(f"world: every {r} row ended in a {fault} fault")
    lines.extend(f"note: {n}" for n in report["notes"])
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# dataset_report


def _signal(
    rows: list[Mapping[str, Any]], graded: int, warnings: list[str], notes: list[str]
) -> dict[str, Any]:
    """``group_signal`` and ``pass_at`` over graded rows (None for both when none is)."""
    from wai_exp.score.select.optimize import group_signal
    from wai_exp.score.stats.passat import pass_at

    signal: dict[str, Any] = {"group_signal": None, "pass_at": None}
    if graded:
        signal["group_signal"] = group_signal(rows)
        signal["pass_at"] = pass_at(rows).to_dict()
        if not signal["group_signal"]["has_signal"]:
            warnings.append(
                "no ask's rollouts disagree: a grouped RL update has nothing to learn from; "
                + signal["group_signal"]["note"]
            )
    else:
        notes.append("no row carries a 0/1 reward: signal is unmeasured until the rows are graded")
    return signal


def _mix(
    rows: list[Mapping[str, Any]],
    rewards: list[float | None],
    hard_share_floor: float,
    warnings: list[str],
    notes: list[str],
) -> tuple[dict[str, Any], Counter[Any], Counter[str]]:
    """What the rows cover: tiers and the hard share, target tools, tools called, world
    states, faults planned and fired, failure classes; with the target-tool and called-tool
    counts the declared-tool check reads."""
    from wai_exp.score.grade.failures import classify_failure

    tier_counts = Counter(_dims_of(r).get("tier") for r in rows)
    with_tier = sum(n for t, n in tier_counts.items() if t)
    hard = sum(tier_counts.get(t, 0) for t in HARD_TIERS)
    hard_share = hard / with_tier if with_tier else None
    easy: bool | None = None
    if hard_share is None:
        notes.append("no row carries scenario_dimensions.tier: the difficulty mix is unmeasured")
    else:
        easy = hard_share < hard_share_floor
        if easy:
            warnings.append(
                f"hard-tier share {hard_share:.0%} ({hard}/{with_tier} rows) is under the "
                f"{hard_share_floor:.0%} floor: the set is easy; raise simulate(hard_share=)"
            )
    target_tools = Counter(_dims_of(r).get("tool") for r in rows if _dims_of(r).get("tool"))
    called: Counter[str] = Counter()
    fired_modes: Counter[str] = Counter()
    planned: Counter[str | None] = Counter()
    fired_rows = 0
    for r in rows:
        for step in read_steps(r)[1]:
            if step.get("kind") == "tool" and step.get("name"):
                called[str(step["name"])] += 1
        faults = r.get("faults")
        if not isinstance(faults, Mapping):
            faults = {}
        plan = faults.get("planned")
        planned[plan.get("mode") if isinstance(plan, Mapping) else "none"] += 1
        fired = [f for f in faults.get("fired") or () if isinstance(f, Mapping)]
        fired_rows += bool(fired)
        fired_modes.update(str(f.get("mode")) for f in fired)
    world_states = Counter(r.get("world_state") or _dims_of(r).get("world_state") for r in rows)
    failures: Counter[str] = Counter()
    for r, v in zip(rows, rewards, strict=True):
        if v == 0.0:
            failures[classify_failure(dict(r)) or "unclassified"] += 1
    mix = {
        "tiers": {t: tier_counts.get(t, 0) for t in TIERS},
        "hard_share": hard_share,
        "hard_share_floor": hard_share_floor,
        "easy": easy,
        "tools": dict(target_tools.most_common()),
        "tools_called": dict(called.most_common()),
        "world_states": {k: v for k, v in world_states.most_common() if k},
        "faults": {
            "planned": dict(planned.most_common()),
            "fired_rows": fired_rows,
            "fired_share": fired_rows / len(rows) if rows else None,
            "fired": dict(fired_modes.most_common()),
            "ending": dict(Counter(_ending_fault(r) for r in rows).most_common()),
        },
        "failures": dict(failures.most_common()),
    }
    return mix, target_tools, called


def dataset_report(
    rows: Sequence[Mapping[str, Any]],
    tools: Sequence[Any] | None = None,
    system_prompt: str = "",
    hard_share_floor: float = HARD_SHARE_FLOOR,
) -> dict[str, Any]:
    """One report a developer reads after simulate/grade: size, signal, mix.

    * ``size``: ``rows``, ``tasks`` (distinct ``task_key``), ``graded`` / ``unjudged`` rows.
    * ``signal``: ``group_signal(rows)`` and ``pass_at(rows).to_dict()`` (pass@1 with its
      task-bootstrap interval; k-way numbers ``None`` with a note below 4 repeats);
      ``None`` for both when no row carries a 0/1 reward.
    * ``mix``: ``tiers`` (rows per tier from ``scenario_dimensions``), ``hard_share`` (hard-
      tier rows over rows with a tier: an exact count over this set, not an estimate, so it
      carries no interval; ``None`` with a note when no row has a tier), ``easy`` (share under
      ``hard_share_floor``), ``tools`` (rows per target tool), ``tools_called`` (calls per
      tool over the steps), ``world_states``, ``faults`` (rows per planned fault mode,
      ``fired_rows``, fired calls per mode, ``ending`` per row's last tool status),
      ``failures`` (``classify_failure`` class per failing row; ``unclassified`` counted).
    * With ``tools`` / ``system_prompt``: ``untargeted_tools`` (declared, no row aims at
      them), ``uncalled_tools``, ``unexercised_rules``.

    Returns those plus ``warnings`` (sentences) and ``notes``. Raises ``ValueError`` for a
    ``hard_share_floor`` outside [0, 1].
    """
    from wai_exp.score.stats.resample import binary_reward

    if not 0.0 <= float(hard_share_floor) <= 1.0:
        raise ValueError(f"hard_share_floor must be in [0, 1], got {hard_share_floor}")
    rows = list(rows)
    warnings: list[str] = []
    notes: list[str] = []
    rewards = [binary_reward(r) for r in rows]
    graded = sum(v is not None for v in rewards)
    tasks = len({task_key(r) for r in rows})
    size = {"rows": len(rows), "tasks": tasks, "graded": graded, "unjudged": len(rows) - graded}

    signal = _signal(rows, graded, warnings, notes)
    mix, target_tools, called = _mix(rows, rewards, float(hard_share_floor), warnings, notes)
    report: dict[str, Any] = {"size": size, "signal": signal, "mix": mix}
    if tools is not None or system_prompt:
        declared = [t["function"]["name"] for t in _clean_tools(_tool_list(tools))] if tools else []
        rules = [rid for rid, _ in parse_rules(system_prompt)]
        exercised = {_dims_of(r).get("rule") for r in rows}
        report["untargeted_tools"] = [t for t in declared if not target_tools.get(t)]
        report["uncalled_tools"] = [t for t in declared if not called.get(t)]
        report["unexercised_rules"] = [r for r in rules if r not in exercised]
        if report["untargeted_tools"]:
            warnings.append(f"no row aims at tools {report['untargeted_tools']}")
        if report["unexercised_rules"]:
            warnings.append(f"no row exercises rules {report['unexercised_rules']}")
    if rows and not any(_dims_of(r) for r in rows):
        notes.append(
            f"no row carries scenario_dimensions ({', '.join(DIMENSION_KEYS)}): rows from "
            "outside simulate report size and signal only"
        )
    report["warnings"] = warnings
    report["notes"] = notes
    return report
