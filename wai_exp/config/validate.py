"""Validate a resolved config before any work, with errors a person can act on.

Two entry points (the console script calls them through ``wai_exp.commands.validate``, which
passes in the ``Sections`` this layer cannot import: config sits below simulate and tracking):

* ``validate_config(cfg, sections)`` after Hydra composed the config: the pydantic models of
  ``models.py``, the knob table for ``knobs``, ``WorldOptions`` for ``world``. Raises
  ``ConfigError`` listing every problem (unknown key -> the valid keys and the closest one;
  out of bounds -> floor, ceiling and default; wrong type -> the expected type).
* ``check_override_keys(argv, sections)`` before Hydra sees the command line: Hydra itself rejects
  ``knobs.concurency=4`` with a struct error that never names ``concurrency``, so the console
  script checks every ``key=value`` override's key against the same models first.

Both are cheap: pydantic and the knob table only (no mlflow, no scipy).
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from wai_exp.config import models
from wai_exp.config.arms import DEFAULT_KIND, arm_agent, switches_kind
from wai_exp.domain.plurals import counted
from wai_exp.domain.secrets import redact_setting, redact_text

#: Top-level keys whose single-part override selects a config group option (``agent=callable``).
GROUPS = ("agent", "world", "knobs", "judge", "selection", "pipeline", "tracking", "experiment")


class ConfigError(ValueError):
    """The composed config is not valid. ``problems`` holds one line per problem."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(self.render())

    def render(self) -> str:
        """The message: a count, one ``- problem`` line each, then where to look. Never raises."""
        n = len(self.problems)
        head = f"invalid config ({counted(n, 'problem')}):"
        body = "\n".join(f"  - {p}" for p in self.problems)
        tail = "Fix the key or value (`wai-exp --help` lists the groups; `wai-exp --cfg job` prints the config)."
        return f"{head}\n{body}\n{tail}"


# --------------------------------------------------------------------------- key tables


def knob_names() -> list[str]:
    """Every knob name in the knob model, in table order."""
    from wai_exp.config.knobs import Knobs

    return list(Knobs.model_fields)


@dataclass(frozen=True)
class Sections:
    """What validation needs from the layers above config, passed in by the caller
    (``wai_exp.commands.validate.sections()``): the world section's model (``WorldOptions``),
    the tracking group's keys, and the tracking check (``tracking_settings``, raising
    ``ValueError`` on a bad value). Left empty, the world and tracking sections go unchecked."""

    world_model: type[BaseModel] | None = None
    tracking_keys: Sequence[str] = field(default_factory=tuple)
    tracking_check: Callable[[dict[str, Any]], Any] | None = None
    #: The registered trainer formats (``wai_exp.rows.formats``), or a mapping of each to
    #: the record shapes it writes (``verl``: rl only); empty = unchecked.
    publish_formats: Sequence[str] | Mapping[str, Sequence[str]] = field(default_factory=tuple)
    #: The formats whose card names wai-exp's reward function, which replays each record's
    #: task on the mock world (``verl``, ``openrlhf``); empty = unchecked.
    replaying_formats: Sequence[str] = field(default_factory=tuple)

    def world_fields(self) -> list[str]:
        """The world model's field names (empty without a model)."""
        return list(self.world_model.model_fields) if self.world_model else []

    def tracking_fields(self) -> list[str]:
        """The tracking group's keys."""
        return list(self.tracking_keys)


NO_SECTIONS = Sections()


def _unwrap(tp: Any) -> list[Any]:
    """The member types of an annotation (Annotated, Optional and unions flattened)."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(tp):
            out.extend(_unwrap(arg))
        return out
    return [tp]


def _model_keys(model: type[BaseModel]) -> dict[str, Any]:
    return {(f.alias or name): f.annotation for name, f in model.model_fields.items()}


# A node of the key walk: ("keys", {key: annotation | special}) / ("any", annotation) / ("leaf",)
def _node(tp: Any) -> tuple[str, Any]:
    keys: dict[str, Any] = {}
    any_value: Any = None
    for member in _unwrap(tp):
        if isinstance(member, type) and issubclass(member, BaseModel):
            keys.update(_model_keys(member))
        elif typing.get_origin(member) is dict:
            any_value = typing.get_args(member)[1] if typing.get_args(member) else Any
    if keys:
        return ("keys", keys)
    if any_value is not None:
        return ("any", any_value)
    return ("leaf", None)


def _root_keys() -> dict[str, Any]:
    keys = _model_keys(models.RootConfig)
    keys["agent"] = typing.Union[models.AGENT_MODELS]  # noqa: UP007 - a runtime union of classes
    return keys


def unknown_key_message(path: str, key: str, valid: Sequence[str]) -> str:
    """The problem line for an unknown ``key`` at ``path``: the closest valid key (when one is
    close) and every valid key, sorted. Never raises."""
    close = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"{path}: unknown key {key!r}.{hint} Valid keys: {', '.join(sorted(valid))}"


def check_key_path(parts: Sequence[str], sections: Sections = NO_SECTIONS) -> str | None:
    """None when ``parts`` (``["knobs", "concurrency"]``) can exist in a config, else the
    problem (naming the closest valid key)."""
    if not parts or parts[0] == "hydra":
        return None
    table: dict[str, Any] | None = _root_keys()
    here: list[str] = []
    special: str | None = None
    for i, part in enumerate(parts):
        path = ".".join([*here, part])
        if special == "knobs" and part in ("seed", "world"):
            follow = "seed=..." if part == "seed" else "world.<field>=..."
            return f"{path}: knobs.{part} follows the top-level {part}; set `{follow}` instead"
        if special is not None:
            valid = {
                "knobs": knob_names,
                "world": sections.world_fields,
                "tracking": sections.tracking_fields,
            }[special]()
            if valid and part not in valid:
                return unknown_key_message(path, part, valid)
            return (
                None  # knob/world values may be dicts themselves; their insides are checked later
            )
        if table is None:
            return None  # free-form below here
        if part not in table:
            return unknown_key_message(path, part, list(table))
        here.append(part)
        if i == 0 and part in ("knobs", "world", "tracking"):
            special = part
            continue
        kind, payload = _node(table[part])
        if kind == "keys":
            table = payload
        elif kind == "any":
            # a dict: the next part is a free key; the one after walks the value type
            if i + 1 < len(parts):
                value_kind, value_payload = _node(payload)
                if value_kind != "keys":
                    return None
                return _check_below(parts[i + 2 :], value_payload, [*here, parts[i + 1]])
            return None
        else:
            return (
                None
                if i == len(parts) - 1
                else f"{path} is a value, not a section; it has no key {parts[i + 1]!r}"
            )
    return None


def _check_below(parts: Sequence[str], table: dict[str, Any], here: list[str]) -> str | None:
    for part in parts:
        path = ".".join([*here, part])
        if part not in table:
            return unknown_key_message(path, part, list(table))
        here = [*here, part]
        kind, payload = _node(table[part])
        if kind == "keys":
            table = payload
        else:
            return None
    return None


_OPTION = re.compile(r"^(--?[\w-]+)(=.*)?$")
# Hydra options that take the next argv element as their value.
_TAKES_VALUE = {
    "-cp",
    "--config-path",
    "-cn",
    "--config-name",
    "-cd",
    "--config-dir",
    "-p",
    "--package",
}
_OPTIONAL_VALUE = {
    "-c": {"job", "hydra", "all"},
    "--cfg": {"job", "hydra", "all"},
    "-i": {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"},
    "--info": {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"},
}


def parse_argv(argv: Sequence[str]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """Split a command line into overrides ``(prefix, key, value)`` (prefix ``""``, ``"+"``,
    ``"++"`` or ``"~"``) and the ``--config-dir`` folders; Hydra's other options are skipped."""
    overrides: list[tuple[str, str, str]] = []
    config_dirs: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg.startswith("-"):
            m = _OPTION.match(arg)
            flag = m.group(1) if m else arg
            value = m.group(2)[1:] if m and m.group(2) else None
            if value is None and (
                flag in _TAKES_VALUE
                or (flag in _OPTIONAL_VALUE and i < len(args) and args[i] in _OPTIONAL_VALUE[flag])
            ):
                value = args[i]
                i += 1
            if flag in ("-cd", "--config-dir") and value:
                config_dirs.append(value)
            continue
        prefix = "++" if arg.startswith("++") else arg[0] if arg[0] in "+~" else ""
        body = arg[len(prefix) :]
        key, _, value = body.partition("=")
        overrides.append((prefix, key, value))
    return overrides, config_dirs


def override_keys(argv: Sequence[str]) -> list[str]:
    """The keys of the plain ``key=value`` overrides in ``argv`` (Hydra options skipped;
    ``+``/``++`` appends and ``~`` deletions skipped: the composed config is validated anyway)."""
    overrides, _ = parse_argv(argv)
    return [k for prefix, k, _ in overrides if not prefix and "@" not in k]


def group_options(group: str, config_dirs: Sequence[str] = ()) -> list[str] | None:
    """The options of config group ``group``: the shipped ``conf/<group>/*.yaml`` plus those in
    every ``--config-dir`` (for ``judge`` and ``agent``, plus every registered judge and
    provider). None when the group is unknown everywhere."""
    from importlib.resources import files

    found: set[str] = set()
    known = False
    shipped = files("wai_exp.conf").joinpath(group)
    if shipped.is_dir():
        known = True
        found |= {e.name[:-5] for e in shipped.iterdir() if e.name.endswith(".yaml")}
    for d in config_dirs:
        folder = Path(d).expanduser() / group
        if folder.is_dir():
            known = True
            found |= {p.stem for p in folder.glob("*.yaml")}
    if group == "judge":  # and every registered judge (wai_exp.domain.judges)
        from wai_exp.domain.judges import judge_names

        found |= set(judge_names())
    if group == "agent":  # and every registered provider (wai_exp.domain.providers)
        found |= set(models.provider_names())
    return sorted(found) if known else None


_PLAIN_OPTIONS = re.compile(r"^[\w\-/]+(,[\w\-/]+)*$")


#: Launchers wai-exp documents: option -> (plugin module Hydra discovers, pip extra).
LAUNCHERS = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher", "joblib"),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "submitit"),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "submitit"),
    "ray": ("hydra_plugins.hydra_ray_launcher", "ray"),
}


def check_hydra_group(key: str, value: str) -> str | None:
    """A problem for a Hydra config-group override (``hydra/launcher=joblib``), or None.

    Hydra's own groups and plugins are Hydra's to resolve (its plugin discovery finds
    launchers and sweepers under ``hydra_plugins``); this only catches the common case of a
    documented launcher whose plugin is not installed, and names the install extra."""
    if key != "hydra/launcher":
        return None
    import importlib.util

    for option in value.split(","):
        known = LAUNCHERS.get(option)
        if known is None:
            continue
        module, extra = known
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (
                f"hydra/launcher={option}: the Hydra {option.split('_')[0]} launcher plugin is "
                f"not installed; install it with `pip install 'wai-exp[{extra}]'` (or drop "
                "hydra/launcher= to run the sweep's jobs one after another)"
            )
    return None


#: Keys the models take that the shipped config files leave out, so only ``+key=`` sets them
#: (Hydra's own refusal, "Key 'api_key' is not in struct", names no fix).
APPEND_ONLY = {
    "agent.api_key": (
        "agent.api_key: the shipped agent files hold no api_key, so add it with "
        "+agent.api_key=<your key>; better, leave it in the environment as the provider's "
        "variable (OPENAI_API_KEY, VLLM_API_KEY, ANTHROPIC_API_KEY) or write "
        "${oc.env:MY_KEY} in a YAML file"
    ),
}


def check_override_keys(argv: Sequence[str], sections: Sections = NO_SECTIONS) -> list[str]:
    """One problem per command-line override whose key cannot exist in a config, or that
    picks a config-group option that does not exist (``agent=opnai``, ``+experiment=rl_rnd``)."""
    overrides, config_dirs = parse_argv(argv)
    searchpath = any(k.startswith("hydra.searchpath") for _, k, _ in overrides)
    # Only an explicit agent= narrows agent keys: a preset may pick another agent than the
    # primary default, and the composed config is validated against its real kind anyway.
    agent_choice = next((v for p, k, v in reversed(overrides) if k == "agent" and p != "~"), None)
    problems = []
    for prefix, key, value in overrides:
        if prefix == "~" or "@" in key:
            continue
        if key.split("/", 1)[0] == "hydra":
            # Hydra's own groups (hydra/launcher, hydra/sweeper, hydra/job_logging ...) are
            # resolved by Hydra and its plugins, not by wai-exp's config models.
            problem = check_hydra_group(key, value)
            if problem:
                problems.append(problem)
            continue
        parts = key.split(".")
        if len(parts) == 1 and parts[0] in GROUPS:
            # A group selection. Sweeps list options with commas; anything fancier (glob,
            # choice, range) and a custom hydra.searchpath are left to Hydra.
            spec = _model_spec_problem(prefix, parts[0], value)
            if spec:
                problems.append(spec)
                continue
            if searchpath or not _PLAIN_OPTIONS.match(value):
                continue
            options = group_options(parts[0], config_dirs)
            if options is None:
                continue
            for option in value.split(","):
                if option not in options:
                    problems.append(unknown_option_message(parts[0], option, options, prefix))
            continue
        if prefix:
            continue  # an append: the composed config is validated anyway
        if key in APPEND_ONLY and not config_dirs:
            problems.append(APPEND_ONLY[key])  # never the value: it is a secret
            continue
        stage = parts[:2] == ["pipeline", "stages"] and len(parts) > 2
        problem = _stage_problem(parts[2], overrides, config_dirs) if stage else None
        if problem:
            problems.append(problem)
            continue
        if (
            parts[0] == "agent"
            and len(parts) > 1
            and agent_choice is not None
            and agent_choice in models.AGENT_BY_KIND
        ):
            # The agent picked on this command line: its keys only.
            model = models.AGENT_BY_KIND[agent_choice]
            problem = _check_below(parts[1:], _model_keys(model), ["agent"])
        else:
            problem = check_key_path(parts, sections)
        if problem:
            problems.append(problem)
    return problems


def _group_file(group: str, option: str, config_dirs: Sequence[str]) -> dict[str, Any] | None:
    """The YAML of ``conf/<group>/<option>.yaml`` (a ``--config-dir`` copy wins over the
    shipped one), or None when there is none or it does not parse."""
    from importlib.resources import files

    import yaml

    candidates = [Path(d).expanduser() / group / f"{option}.yaml" for d in reversed(config_dirs)]
    shipped = files("wai_exp.conf").joinpath(group, f"{option}.yaml")
    for path in [*candidates, shipped]:
        try:
            if path.is_file():
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
                return data if isinstance(data, dict) else None
        except (OSError, yaml.YAMLError):
            return None
    return None


def _stage_problem(
    name: str, overrides: Sequence[tuple[str, str, str]], config_dirs: Sequence[str]
) -> str | None:
    """``pipeline.stages.<name>.x=...`` naming no stage of the pipeline the command line
    picks: Hydra's refusal ("Key 'simulat' is not in struct", exit 1) names neither the
    stages nor the ``+`` that adds one. None when the stage exists, or when the pipeline
    cannot be told here (a custom search path, a preset not found)."""
    if any(k.startswith("hydra.searchpath") for _, k, _ in overrides):
        return None
    chosen = "explore"  # conf/config.yaml's default
    experiment = next(
        (v for p, k, v in reversed(overrides) if k == "experiment" and p != "~"), None
    )
    stages: set[str] = set()
    if experiment:
        preset = _group_file("experiment", experiment, config_dirs)
        if preset is None:
            return None
        for entry in preset.get("defaults") or ():
            if isinstance(entry, dict):
                for key, value in entry.items():
                    if str(key).replace("override ", "").strip().lstrip("/") == "pipeline":
                        chosen = str(value)
        stages |= set(((preset.get("pipeline") or {}).get("stages")) or {})
    chosen = next((v for p, k, v in reversed(overrides) if k == "pipeline" and p != "~"), chosen)
    pipeline = _group_file("pipeline", chosen, config_dirs)
    if pipeline is None:
        return None
    stages |= set(pipeline.get("stages") or {})
    stages |= {
        k.split(".")[2]
        for p, k, _ in overrides
        if p and k.startswith("pipeline.stages.") and k.count(".") >= 2
    }
    if name in stages:
        return None
    close = difflib.get_close_matches(name, sorted(stages), n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return (
        f"pipeline.stages.{name}: no stage {name!r} in pipeline {chosen!r}.{hint} Stages: "
        f"{', '.join(sorted(stages))}; to add a stage, write +pipeline.stages.{name}.kind=<kind>"
    )


def _model_spec_problem(prefix: str, group: str, value: str) -> str | None:
    """``agent=vllm:m@url``: a model spec (docs/MODELS.md) typed where the agent group wants
    an option, which Hydra refuses as a missing file with no fix. The fix is three keys;
    the URL is never echoed (it may carry a key: ``user:KEY@host``, ``?api_key=``)."""
    if group != "agent" or ":" not in value:
        return None
    from wai_exp.domain.providers import split_model_spec

    parts = split_model_spec(value)
    if parts is None:
        return None
    provider, model, url = parts
    base_url = " agent.base_url=<the URL after @>" if url else ""
    return (
        f"{prefix}agent={provider}:{model}{'@...' if url else ''}: agent= picks an option "
        f"of the agent group, not a model spec; write it as {prefix}agent={provider} "
        f"agent.model={model}{base_url}"
    )


def unknown_option_message(
    group: str, option: str, options: Sequence[str], prefix: str = ""
) -> str:
    """The problem line for ``group=option`` naming no option of ``group``: the closest
    option as a ready override (``prefix`` is ``+`` or ``++`` when the user typed one) and
    every option. Never raises."""
    close = difflib.get_close_matches(option, list(options), n=1, cutoff=0.5)
    hint = f" Did you mean {prefix}{group}={close[0]}?" if close else ""
    return f"{prefix}{group}={option}: no option {option!r} in group {group!r}.{hint} Options: {', '.join(options)}"


# --------------------------------------------------------------------------- full validation


def _expected(err: Mapping[str, Any]) -> str:
    t = err["type"]
    ctx = err.get("ctx") or {}
    if t.startswith("int_") or t == "int_type":
        return "expected an integer"
    if t.startswith("float_"):
        return "expected a number"
    if t.startswith("bool_"):
        return "expected true or false"
    if t.startswith("string_"):
        return "expected a string"
    if t in ("dict_type", "model_type", "model_attributes_type"):
        return "expected a mapping (key: value)"
    if t in ("list_type", "tuple_type", "too_short", "too_long"):
        return (
            f"expected a list ({err['msg'].lower()})" if t.startswith("too_") else "expected a list"
        )
    if t == "literal_error":
        return f"expected one of {ctx.get('expected', err['msg'])}"
    if t == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}"
    if t == "greater_than":
        return f"must be > {ctx.get('gt')}"
    if t == "less_than_equal":
        return f"must be <= {ctx.get('le')}"
    if t == "less_than":
        return f"must be < {ctx.get('lt')}"
    if t == models.UNKNOWN_AGENT:  # the registered kinds now, not when the model was built
        return f"kind must be one of {', '.join(repr(k) for k in models.agent_kinds())}"
    if t == "union_tag_invalid":
        return f"kind must be one of {ctx.get('expected_tags')}"
    if t == "missing":
        return "required, but missing"
    return err["msg"].removeprefix("Value error, ")


def _path(loc: Sequence[Any]) -> list[str]:
    """Config path of a pydantic ``loc``: union-member tags (``int``, ``literal['x']``,
    the agent kind) are dropped, so the path reads like the YAML."""
    out: list[str] = []
    kind, payload = "keys", _root_keys()
    for part in loc:
        if kind == "keys":
            if str(part) not in payload:
                continue  # a union member tag, not a key
            out.append(str(part))
            kind, payload = _node(payload[str(part)])
        elif kind == "any":
            out.append(str(part))  # a free key of a mapping
            kind, payload = _node(payload)
        elif isinstance(part, int):
            out.append(str(part))  # a list index
    return out


def _fmt_value(path: str, value: Any) -> str:
    """``value`` of the config key ``path`` as a message quotes it: as a record shows it
    (``wai_exp.domain.secrets.redact_setting``: no URL query value, no command flag value,
    no credential; a section's too), cut to 60 characters."""
    text = redact_text(repr(redact_setting(path, value)))
    return text if len(text) <= 60 else text[:57] + "..."


def pydantic_problems(
    exc: ValidationError,
    prefix: Sequence[str] = (),
    flat_keys: Sequence[str] | None = None,
) -> list[str]:
    """One line per config path from a pydantic ValidationError (union alternatives merged).
    An unknown key is offered ``flat_keys`` (a flat model's fields) when given, else the
    valid keys at its place in the config tree."""
    by_path: dict[str, list[Mapping[str, Any]]] = {}
    for err in exc.errors():
        loc = list(err["loc"])
        if err["type"] == "extra_forbidden":
            parts = (_path(loc[:-1]) if not prefix else [*prefix, *map(str, loc[:-1])]) + [
                str(loc[-1])
            ]
        else:
            parts = _path(loc) if not prefix else [*prefix, *map(str, loc)]
        path = ".".join(parts)
        by_path.setdefault(path, []).append(err)
    problems = []
    for path, errs in by_path.items():
        extra = [e for e in errs if e["type"] == "extra_forbidden"]
        if extra:
            parts = path.split(".")
            loc = errs[0]["loc"]
            if (
                not prefix
                and len(loc) == 3
                and loc[0] == "agent"
                and loc[1] in models.AGENT_BY_KIND
            ):
                valid = list(_model_keys(models.AGENT_BY_KIND[str(loc[1])]))
            else:
                valid = list(flat_keys) if flat_keys is not None else _valid_keys(parts[:-1])
            problems.append(unknown_key_message(path, parts[-1], valid or []))
            continue
        if any(e["type"] == "missing" for e in errs):
            problems.append(f"{path}: required, but missing")
            continue
        value = errs[0].get("input")
        expectations = []
        for e in errs:
            text = _expected(e)
            if text not in expectations:
                expectations.append(text)
        lead = f"{path} = {_fmt_value(path, value)}" if path else "config"
        problems.append(f"{lead}: {'; or '.join(expectations)}")
    return problems


def _valid_keys(parts: Sequence[str]) -> list[str]:
    table: dict[str, Any] | None = _root_keys()
    for i, part in enumerate(parts):
        if table is None or part not in table:
            return []
        kind, payload = _node(table[part])
        if kind == "keys":
            table = payload
        elif kind == "any" and i + 1 < len(parts):
            value_kind, value_payload = _node(payload)
            if value_kind != "keys":
                return []
            rest = parts[i + 2 :]
            keys: dict[str, Any] = value_payload
            for p in rest:
                if p not in keys:
                    return []
                k2, p2 = _node(keys[p])
                if k2 != "keys":
                    return []
                keys = p2
            return list(keys)
        else:
            return []
    return list(table or {})


_ADVANCED = re.compile(r"advanced\[\s*'([^']+)'\s*\]")


def knob_problems(knobs: Mapping[str, Any], seed: Any, world: Any = None) -> list[str]:
    """Each knob checked against the knob model (unknown key, type, bounds). ``knobs.seed``
    and ``knobs.world`` must follow the top-level ``seed`` and ``world`` (config.yaml links
    them), so a value set in the wrong place is named, not silently ignored."""
    from wai_exp.config.knobs import knob_errors

    names = knob_names()
    problems = []
    rest = {}
    for name, value in knobs.items():
        if name not in names:
            problems.append(unknown_key_message(f"knobs.{name}", name, names))
        elif name == "seed" and value != seed:
            problems.append(
                f"knobs.seed = {value!r} differs from seed = {seed!r}: set the run's seed with the "
                f"top-level `seed={value}` (knobs.seed follows it)"
            )
        elif name == "world" and world is not None and value != world:
            problems.append(
                "knobs.world differs from the world group: set world dials as `world.<field>=...` "
                "(knobs.world follows the world group)"
            )
        else:
            rest[name] = value
    for text in knob_errors(rest):
        problems.append(_ADVANCED.sub(lambda m: f"knobs.{m.group(1)}", text).rstrip("."))
    return problems


def world_problems(world: Mapping[str, Any], world_model: type[BaseModel]) -> list[str]:
    """Problem lines for the ``world`` section as ``world_model`` (``WorldOptions``) validates
    it (each naming the ``world.<field>``); empty when it is valid. Never raises on a mapping."""
    try:
        world_model(**dict(world))
    except ValidationError as exc:
        fields = list(world_model.model_fields)
        return pydantic_problems(exc, prefix=("world",), flat_keys=fields)
    except (TypeError, ValueError) as exc:
        return [f"world: {exc}"]
    # A run gives every ask simulate.fault_rate (the mode's when null), so the world's
    # fallback rate is never read: a value set there would change nothing, silently.
    rate = world.get("default_fault_rate")
    field = world_model.model_fields.get("default_fault_rate")
    if field is not None and rate is not None and rate != field.default:
        return [
            f"world.default_fault_rate={rate}: a run never reads it (every ask's faults fire at "
            "simulate.fault_rate; null: 0.5, or 0.8 under simulate.mode=rl); set "
            f"simulate.fault_rate={rate} instead"
        ]
    return []


def _rollout_processes(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(where it is set, the setting)`` for the simulate section and each stage whose
    params run rollouts on several processes (``workers`` > 1, or ``cluster: ray``)."""
    sim = cfg.get("simulate")
    if not isinstance(sim, Mapping):
        sim = {}
    out = [("simulate", sim.get("workers"), sim.get("cluster"))]
    stages = (cfg.get("pipeline") or {}).get("stages") or {}
    for name, stage in stages.items() if isinstance(stages, Mapping) else ():
        params = stage.get("params") if isinstance(stage, Mapping) else None
        if isinstance(params, Mapping) and ("workers" in params or "cluster" in params):
            where = f"pipeline.stages.{name}.params"
            out.append((where, params.get("workers", out[0][1]), params.get("cluster", out[0][2])))
    return [
        (where, f"{where}.cluster=ray" if cluster == "ray" else f"{where}.workers={workers}")
        for where, workers, cluster in out
        if (isinstance(workers, int) and workers > 1) or cluster == "ray"
    ]


def shared_world_problems(cfg: Mapping[str, Any]) -> list[str]:
    """``world=mcp`` with a reset or a state read runs one rollout at a time on its server:
    a turn each rollout process keeps for itself. Over several processes
    (``simulate.workers``, Ray actors) their turns overlap where they share what is reset:
    the one server at ``world.url``, or whatever ``world.reset_command`` resets. Each
    process's reset lands inside another's rollout and rows record each other's state.
    With ``world.command`` and a reset tool, each process resets its own server."""
    world = cfg.get("world")
    sim = cfg.get("simulate")
    if not isinstance(world, Mapping) or world.get("kind") != "mcp":
        return []
    if isinstance(sim, Mapping) and sim.get("rows"):
        return []  # rows read from a file: no rollout runs
    shared = []
    if world.get("url") and (world.get("reset_tool") or world.get("state_tool")):
        what = "reset_tool" if world.get("reset_tool") else "state_tool"
        shared.append(
            (f"world.url with world.{what}", "the one server at world.url",
             "world.command (each process starts its own server and resets it)")
        )  # fmt: skip
    if world.get("reset_command"):
        shared.append(
            ("world.reset_command", "what the command resets",
             "world.reset_tool with world.command (each process resets its own server)")
        )  # fmt: skip
    return [
        f"{setting}: rollouts take turns on the server only within one process, and "
        f"{runs} runs them on several processes sharing {what}: one process's reset would "
        "land inside another's rollout (rows would record each other's state). Use "
        f"{where}.workers=1 with {where}.cluster=local, or {fix}"
        for setting, what, fix in shared
        for where, runs in _rollout_processes(cfg)
    ]


def tracking_problems(tracking: Mapping[str, Any], sections: Sections) -> list[str]:
    """Problem lines for the ``tracking`` section: unknown keys (with the closest valid one),
    else what ``sections.tracking_check`` (``tracking_settings``) refuses (a file-store URI
    ...); empty when it is valid."""
    fields = sections.tracking_fields()
    problems = [
        unknown_key_message(f"tracking.{k}", k, fields) for k in tracking if k not in fields
    ]
    if problems or sections.tracking_check is None:
        return problems
    try:
        sections.tracking_check(dict(tracking))
    except ValueError as exc:  # TrackingConfigError is a ValueError
        return [str(exc)]
    return []


#: Built-in stage kind -> (config section its params are laid over, model of that section,
#: extra param keys the adapter reads). A param key outside these would be silently ignored.
_STAGE_PARAMS: dict[str, tuple[str | None, type[BaseModel] | None, tuple[str, ...]]] = {
    "simulate": ("simulate", models.SimulateConfig, ("agent", "tasks_from", "seed_offset")),
    "grade": ("judge", models.JudgeConfig, ()),
    "evaluate": ("judge", models.JudgeConfig, ()),
    "optimize": ("selection", models.SelectionConfig, ()),
    "publish_gate": ("selection", models.SelectionConfig, ("strict", "strict_hacks")),
    "next_round": (None, None, ("band",)),
    "report": (None, None, ("fn", "kwargs", "format", "by")),
}


def stage_param_problems(cfg: Mapping[str, Any]) -> list[str]:
    """Params of built-in stages checked like the section they override (unknown key ->
    the valid keys; wrong type or bounds -> the expected value). Other kinds (user stages,
    compare, eval_variance) validate their own params when they run."""
    stages = (cfg.get("pipeline") or {}).get("stages") or {}
    problems: list[str] = []
    for name, stage in stages.items():
        if not isinstance(stage, Mapping) or stage.get("_target_"):
            continue
        spec = _STAGE_PARAMS.get(str(stage.get("kind")))
        params = stage.get("params") or {}
        if spec is None or not isinstance(params, Mapping):
            continue
        section, model, extra = spec
        where = ("pipeline", "stages", str(name), "params")
        valid = sorted({*(_model_keys(model) if model else ()), *extra})
        unknown = [k for k in params if k not in valid]
        for key in unknown:
            problems.append(unknown_key_message(".".join([*where, str(key)]), str(key), valid))
        if model is None or section is None or unknown:
            continue
        merged = {
            **dict(cfg.get(section) or {}),
            **{k: v for k, v in params.items() if k not in extra},
        }
        try:
            model.model_validate(merged)
        except ValidationError as exc:
            keys = list(_model_keys(model))
            for p in pydantic_problems(exc, prefix=where, flat_keys=keys):
                if any(p.startswith(".".join([*where, str(k)])) for k in params):
                    problems.append(p)  # only what the params themselves got wrong
        if "agent" in params and not isinstance(params["agent"], Mapping):
            problems.append(
                f"{'.'.join(where)}.agent: expected a mapping laid over the agent section"
            )
        elif isinstance(params.get("agent"), Mapping):
            problems.extend(_arm_agent_problems(cfg, where, params["agent"]))
        pinned = params.get("tasks_from")
        if pinned is not None and pinned not in (stage.get("needs") or []):
            problems.append(
                f"{'.'.join(where)}.tasks_from: {pinned!r} must be one of this stage's needs "
                f"(needs: {list(stage.get('needs') or [])}); add it to pipeline.stages.{name}.needs"
            )
        offset = params.get("seed_offset")
        if offset is not None and (isinstance(offset, bool) or not isinstance(offset, int)):
            problems.append(f"{'.'.join(where)}.seed_offset: expected an integer, got {offset!r}")
    return problems


def _arm_agent_problems(
    cfg: Mapping[str, Any], where: Sequence[str], arm: Mapping[str, Any]
) -> list[str]:
    """A simulate stage's ``params.agent`` as the stage runs it (``arm_agent``), checked
    against the model of its kind, so a preset's arm written for one agent kind (the delta
    preset's ``skill``/``model_version`` for the scripted agent) is refused before any stage
    runs rather than failing the stage. An arm of the section's kind answers for the keys it
    sets; an arm of another kind is a whole agent and answers for all of them."""
    switched = switches_kind(cfg.get("agent"), arm)
    merged = arm_agent(cfg.get("agent"), arm)
    kind = str(merged.get("kind", DEFAULT_KIND))
    try:
        model = models.AGENT_BY_KIND[kind]
    except KeyError:
        return []  # an unknown kind is the agent section's own problem
    try:
        model.model_validate(merged)
    except ValidationError as exc:
        prefix = [*where, "agent"]
        keys = list(_model_keys(model))
        own = [".".join([*prefix, str(k)]) for k in arm]
        arm_key = ".".join(prefix)
        advice = (
            "an arm that names another kind replaces the agent section: give it the keys of "
            f"that kind, and only those; over a preset's arm, drop it first: '~{arm_key}' "
            f"'+{arm_key}={{kind: {kind}, ...}}'"
            if switched
            else f"set this arm's keys for your agent, or remove one with '~{arm_key}.KEY'"
        )
        return [
            f"{p} (agent={kind}; {advice})"
            for p in pydantic_problems(exc, prefix=prefix, flat_keys=keys)
            if switched or any(p.startswith(o) for o in own)
        ]
    return []


def published_shapes(cfg: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(stage name, shape)`` of each publish stage: its ``params.shape``, else
    ``selection.mode``."""
    selection = cfg.get("selection")
    if not isinstance(selection, Mapping):
        selection = {}
    stages = (cfg.get("pipeline") or {}).get("stages") or {}
    out = []
    for name, stage in stages.items() if isinstance(stages, Mapping) else ():
        if not isinstance(stage, Mapping) or stage.get("kind") != "publish":
            continue
        params = stage.get("params")
        if not isinstance(params, Mapping):
            params = {}
        out.append((str(name), params.get("shape") or selection.get("mode")))
    return out


def _format_shape_problems(cfg: Mapping[str, Any], fmt: str, shapes: Sequence[str]) -> list[str]:
    """``publish.format`` against the shape each publish stage writes (its ``params.shape``,
    else ``selection.mode``): ``verl`` and ``openrlhf`` write RL records only."""
    return [
        f"publish.format: {fmt!r} writes {' and '.join(shapes)} records, but stage "
        f"{name!r} publishes {shape!r} records; use selection=rl "
        "(+experiment=rl_round), or publish.format=trl for sft and preference"
        for name, shape in published_shapes(cfg)
        if isinstance(shape, str) and shape not in shapes
    ]


def _served_elsewhere(cfg: Mapping[str, Any]) -> tuple[str, str] | None:
    """(what answers the tool calls, where its records live) when it is not the mock world
    (``world=mcp``, or the user's own ``simulate.execute``); None for the mock world."""
    sim = cfg.get("simulate")
    if isinstance(sim, Mapping) and sim.get("execute"):
        return "simulate.execute answers the tool calls from your backend", "your backend"
    world = cfg.get("world")
    kind = world.get("kind") if isinstance(world, Mapping) else None
    if kind in (None, "mock"):
        return None
    return f"world={kind} plays your tool server", "your server"


def _format_world_problems(cfg: Mapping[str, Any], fmt: str) -> list[str]:
    """A format whose reward function replays the mock world, publishing RL records of a
    run against another world (``_served_elsewhere``): every record would be refused at
    publish."""
    served = _served_elsewhere(cfg)
    if served is None or not any(s == "rl" for _, s in published_shapes(cfg)):
        return []
    return [foreign_world_refusal(fmt, *served)]


def foreign_world_refusal(fmt: str, made: str, holder: str) -> str:
    """The problem line for a replaying format (``verl``, ``openrlhf``) whose RL records were
    made against another world: ``made`` says what was (a clause), ``holder`` where its
    records live, which a reward function of the user's own must play."""
    return (
        f"publish.format: {fmt!r} names wai-exp's reward function (wai_exp/env/verl.py), which "
        f"replays each task on the mock world, but {made}, whose records it cannot rebuild; "
        f"use publish.format=trl / openai with a reward function of your own that plays "
        f"{holder}, or selection=sft / preference (+experiment=sft_round)"
    )


def validate_config(cfg: Mapping[str, Any], sections: Sections = NO_SECTIONS) -> models.RootConfig:
    """The config as a ``RootConfig``; raises ``ConfigError`` listing every problem.

    ``cfg`` is the resolved config as plain containers (``OmegaConf.to_container(cfg,
    resolve=True)``) without the ``hydra`` node.
    """
    cfg = {k: v for k, v in dict(cfg).items() if k != "hydra"}
    problems: list[str] = []
    root: models.RootConfig | None = None
    try:
        root = models.RootConfig.model_validate(cfg)
    except ValidationError as exc:
        problems.extend(pydantic_problems(exc))
    knobs = cfg.get("knobs")
    if isinstance(knobs, Mapping):
        problems.extend(knob_problems(knobs, cfg.get("seed", 0), cfg.get("world")))
    world = cfg.get("world")
    if isinstance(world, Mapping) and sections.world_model is not None:
        problems.extend(world_problems(world, sections.world_model))
    tracking = cfg.get("tracking")
    if isinstance(tracking, Mapping):
        problems.extend(tracking_problems(tracking, sections))
    problems.extend(stage_param_problems(cfg))
    problems.extend(shared_world_problems(cfg))
    fmt = root.publish.format if root is not None else None
    if fmt is not None and sections.publish_formats and fmt not in sections.publish_formats:
        names = sorted(sections.publish_formats)
        problems.append(
            f"publish.format: {fmt!r} is not a registered trainer format; use one of {names} "
            f"(publish.format={names[0]})"
        )
    elif fmt is not None and isinstance(sections.publish_formats, Mapping):
        problems.extend(_format_shape_problems(cfg, fmt, sections.publish_formats[fmt]))
    if fmt is not None and fmt in sections.replaying_formats:
        problems.extend(_format_world_problems(cfg, fmt))
    if problems:
        raise ConfigError(problems)
    assert root is not None
    return root
