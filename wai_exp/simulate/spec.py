"""Agent specs: the tools an agent may call and the system prompt it runs under.

A spec is a JSON file ``{"name", "system_prompt", "tools"}``. ``tools`` is the OpenAI
function-calling shape, ``[{"type": "function", "function": {"name", "description",
"parameters"}}]``; the bare ``function`` dict (``{"name", "description", "parameters"}``) is
accepted too and normalised to the full shape, so every consumer reads one shape.

The package ships one spec, ``support_desk`` (``specs/support_desk.json``, described in
``docs/DOMAIN.md``), the offline default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from wai_exp.simulate.ids import prompt_sha

SPECS_DIR = Path(__file__).resolve().parent / "specs"
DEFAULT_SPEC = "support_desk"

_JSON_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}


def builtin_specs() -> list[str]:
    """Names of the specs shipped with the package (files in ``simulate/specs/``)."""
    return sorted(p.stem for p in SPECS_DIR.glob("*.json"))


def _normalize_tool(tool: Any, index: int) -> dict[str, Any]:
    where = f"tools[{index}]"
    fix = (
        'write each tool as {"type": "function", "function": {"name": ..., "description": ..., '
        '"parameters": {"type": "object", "properties": {...}, "required": [...]}}} or as the '
        "bare function dict"
    )
    if not isinstance(tool, Mapping):
        raise ValueError(f"{where} is a {type(tool).__name__}, not a dict: {fix}")
    if "function" in tool:
        if tool.get("type", "function") != "function":
            raise ValueError(
                f"{where} has type {tool.get('type')!r}; only 'function' tools are supported: {fix}"
            )
        fn = tool["function"]
        if not isinstance(fn, Mapping):
            raise ValueError(f"{where}['function'] is a {type(fn).__name__}, not a dict: {fix}")
    else:
        fn = tool
    name = fn.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where} has no 'name' (got keys {sorted(fn)}): {fix}")
    params = fn.get("parameters")
    if params is None:
        params = {"type": "object", "properties": {}, "required": []}
    if not isinstance(params, Mapping):
        raise ValueError(
            f"{where} ({name}): 'parameters' must be a JSON-schema object, got {type(params).__name__}: {fix}"
        )
    if params.get("type", "object") != "object":
        raise ValueError(
            f"{where} ({name}): 'parameters.type' must be 'object', got {params.get('type')!r}: {fix}"
        )
    props = params.get("properties") or {}
    if not isinstance(props, Mapping):
        raise ValueError(
            f"{where} ({name}): 'parameters.properties' must map argument names to schemas: {fix}"
        )
    for arg, schema in props.items():
        if not isinstance(schema, Mapping):
            raise ValueError(
                f"{where} ({name}): property {arg!r} must be a schema dict, got {type(schema).__name__}"
            )
        typ = schema.get("type")
        types = typ if isinstance(typ, list) else [typ] if typ is not None else []
        bad = [t for t in types if t not in _JSON_TYPES]
        if bad:
            raise ValueError(
                f"{where} ({name}): property {arg!r} has unknown type {bad[0]!r}; use one of {sorted(_JSON_TYPES)}"
            )
    required = params.get("required") or []
    if not isinstance(required, Sequence) or isinstance(required, str):
        raise ValueError(
            f"{where} ({name}): 'parameters.required' must be a list of argument names"
        )
    unknown = [r for r in required if r not in props]
    if unknown:
        raise ValueError(
            f"{where} ({name}): required argument {unknown[0]!r} is not in 'properties' "
            f"({sorted(props)}); declare it under properties or drop it from required"
        )
    return {
        "type": "function",
        "function": {
            "name": name.strip(),
            "description": str(fn.get("description") or ""),
            "parameters": {
                **dict(params),
                "type": "object",
                "properties": dict(props),
                "required": list(required),
            },
        },
    }


def normalize_tools(tools: Sequence[Any] | None) -> list[dict[str, Any]]:
    """Tools in OpenAI function shape, ``[{"type": "function", "function": {...}}]``.

    Accepts the full shape or the bare ``function`` dict per tool. Raises ``ValueError``
    naming the offending tool (``tools[i]``) and the shape to use for a missing name, a
    non-object ``parameters``, an unknown JSON type, a required argument that is not
    declared, or two tools with one name.
    """
    if tools is None:
        return []
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise ValueError(f"tools must be a list of tool dicts, got {type(tools).__name__}")
    out = [_normalize_tool(t, i) for i, t in enumerate(tools)]
    seen: set[str] = set()
    for t in out:
        name = t["function"]["name"]
        if name in seen:
            raise ValueError(f"tool {name!r} is declared twice; tool names must be unique")
        seen.add(name)
    return out


#: The tool names OpenAI's and Anthropic's APIs accept: a model backend refuses any other
#: name with an HTTP 400 on its first call, after the run has started.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

#: (lower, upper, exclusive) bounds of one JSON-schema property: no value is valid when the
#: lower is above the upper, or at it when either bound is exclusive.
_BOUNDS = (
    ("minimum", "maximum", False),
    ("exclusiveMinimum", "maximum", True),
    ("minimum", "exclusiveMaximum", True),
    ("exclusiveMinimum", "exclusiveMaximum", True),
    ("minLength", "maxLength", False),
    ("minItems", "maxItems", False),
)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _argument_problem(arg: str, schema: Mapping[str, Any]) -> str | None:
    """Why no value of argument ``arg`` can satisfy ``schema`` (or the schema is not one a
    model API takes), naming the fix; None when it is usable."""
    pattern = schema.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            return f"argument {arg!r} has a pattern that is not a string ({pattern!r}): write it as a regex string"
        try:
            re.compile(pattern)
        except re.error as exc:
            # Escapes only ECMA-262 knows (\p{L}) are left to the schema's own dialect.
            if not str(exc).startswith("bad escape"):
                return (
                    f"argument {arg!r} has pattern {pattern!r}, which is not a regular "
                    f"expression ({exc}): fix the pattern or drop it"
                )
    if "enum" in schema:
        enum = schema["enum"]
        if not isinstance(enum, list) or not enum:
            return (
                f"argument {arg!r} has enum {enum!r}: an enum is a non-empty list of the "
                "values allowed; list them or drop enum"
            )
    for low, high, exclusive in _BOUNDS:
        lo, hi = _number(schema.get(low)), _number(schema.get(high))
        if lo is not None and hi is not None and (lo >= hi if exclusive else lo > hi):
            return (
                f"argument {arg!r} has {low} {schema[low]} and {high} {schema[high]}: no value "
                "is valid; fix the bounds"
            )
    return None


def check_spec_tools(tools: Sequence[Mapping[str, Any]]) -> None:
    """Refuse tools (already normalised) that a model API would refuse or that no call can
    satisfy: a name outside letters, digits, ``_`` and ``-`` (at most 64), a pattern that is
    not a regex, an empty enum, a lower bound above its upper bound. Raises ``ValueError``
    naming the tool, the argument and the fix."""
    for index, tool in enumerate(tools):
        fn = tool["function"]
        name = fn["name"]
        where = f"tools[{index}] ({name})"
        if not _TOOL_NAME.fullmatch(name):
            fixed = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:64] or "tool"
            raise ValueError(
                f"{where}: tool names may hold only letters, digits, '_' and '-' (at most 64), "
                f"as OpenAI's and Anthropic's APIs require; rename it, e.g. {fixed!r}"
            )
        for arg, schema in (fn["parameters"].get("properties") or {}).items():
            problem = _argument_problem(arg, schema)
            if problem:
                raise ValueError(f"{where}: {problem}")


class AgentSpec(BaseModel):
    """One agent spec: a name, the policy system prompt and the tools (OpenAI shape)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    system_prompt: str
    tools: list[dict[str, Any]]

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> list[dict[str, Any]]:
        return normalize_tools(value)

    @property
    def tool_names(self) -> list[str]:
        """The declared tool names, in spec order."""
        return [t["function"]["name"] for t in self.tools]


def load_agent_spec(path_or_name: str | Path | Mapping[str, Any] | None = None) -> AgentSpec:
    """Load an agent spec: a built-in name (``"support_desk"``), a JSON file path, or a dict.

    ``None`` loads the shipped default (``support_desk``). Returns an ``AgentSpec`` with tools
    normalised to the OpenAI function shape. Raises ``FileNotFoundError`` naming the built-in
    specs when the name or path does not exist, and ``ValueError`` naming the field and the fix
    for malformed JSON, a missing field, or a bad tool shape.
    """
    if path_or_name is None:
        path_or_name = DEFAULT_SPEC
    if isinstance(path_or_name, Mapping):
        data: Any = dict(path_or_name)
        source = "the spec dict"
    else:
        text = str(path_or_name)
        path = Path(text).expanduser()
        if not path.exists() and "/" not in text and not text.endswith(".json"):
            path = SPECS_DIR / f"{text}.json"
        if not path.is_file():
            raise FileNotFoundError(
                f"agent spec {text!r} not found: pass a path to a JSON file with "
                f'{{"name", "system_prompt", "tools"}} or one of the built-in specs {builtin_specs()}'
            )
        source = str(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"agent spec {source} is not valid JSON ({exc}); fix the file"
            ) from exc
        except UnicodeDecodeError:
            raise ValueError(
                f"agent spec {source} is not UTF-8 text (a binary file?); an agent spec is a "
                'JSON file {"name", "system_prompt", "tools"}'
            ) from None
    if not isinstance(data, Mapping):
        raise ValueError(
            f"agent spec {source} must be a JSON object with name, system_prompt, tools"
        )
    missing = [k for k in ("system_prompt", "tools") if k not in data]
    if missing:
        raise ValueError(
            f"agent spec {source} is missing {missing}; a spec is {{'name', 'system_prompt', 'tools'}}"
        )
    extra = sorted(set(data) - {"name", "system_prompt", "tools"})
    if extra:
        raise ValueError(
            f"agent spec {source} has unknown keys {extra}; the keys are name, system_prompt, tools"
        )
    name = data.get("name") or (Path(source).stem if source != "the spec dict" else "custom")
    if not isinstance(data["system_prompt"], str):
        raise ValueError(f"agent spec {source}: system_prompt must be a string")
    try:
        tools = normalize_tools(data["tools"])
        check_spec_tools(tools)
    except ValueError as exc:
        raise ValueError(f"agent spec {source}: {exc}") from None
    return AgentSpec(name=str(name), system_prompt=data["system_prompt"], tools=tools)


def builtin_spec_of(system_prompt_sha: str | None) -> str | None:
    """The shipped spec whose system prompt hashes to ``system_prompt_sha`` (``prompt_sha``),
    or None. A hint for a fix that names the spec, never a spec to run with: a spec of the
    user's may share the prompt and not the tools."""
    if not system_prompt_sha:
        return None
    return next(
        (
            name
            for name in builtin_specs()
            if prompt_sha(load_agent_spec(name).system_prompt) == system_prompt_sha
        ),
        None,
    )
