"""What the agent acts in: the spec (tools + system prompt) and the world class and options
each rollout's world is built from, validated before any rollout runs."""

from __future__ import annotations

import difflib
import inspect
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wai_exp.config.knobs import Knobs


def resolve_spec(
    spec: Any, tools: Sequence[Any] | None, system_prompt: str | None
) -> tuple[str, list[dict[str, Any]], str | None]:
    """``(spec name, tools, system prompt)``: ``tools=``/``system_prompt=`` win over the spec's.

    ``spec=None`` with neither given is the shipped spec; with either given it is ``"inline"``
    (the missing half from the shipped spec). Raises ``ValueError`` when the agent would have
    no tools, or whatever ``load_agent_spec`` raises for an unreadable spec.
    """
    from wai_exp.simulate.spec import load_agent_spec, normalize_tools

    if spec is None and tools is None and system_prompt is None:
        loaded = load_agent_spec(None)
        spec_name, tool_list, sp = loaded.name, list(loaded.tools), loaded.system_prompt
    elif spec is not None:
        loaded = load_agent_spec(spec)
        spec_name = loaded.name
        tool_list = normalize_tools(tools) if tools is not None else list(loaded.tools)
        sp = system_prompt if system_prompt is not None else loaded.system_prompt
    else:
        spec_name = "inline"
        tool_list = (
            normalize_tools(tools) if tools is not None else list(load_agent_spec(None).tools)
        )
        sp = system_prompt if system_prompt is not None else load_agent_spec(None).system_prompt
    if not tool_list:
        where = (
            f'the spec {spec} lists none; add one to its "tools" (OpenAI function shape)'
            if tools is None
            else "tools= is empty; pass at least one tool"
        )
        raise ValueError(f"the agent has no tools: {where}")
    return spec_name, tool_list, sp


@dataclass
class WorldSetup:
    """How each rollout's world is built: ``cls(situation, tools, fault_rate=, options=,
    seed=, **kwargs)``."""

    cls: Any
    options: Any
    kwargs: dict[str, Any]
    #: ``world=mcp``: the stage's live server (``mcp_world.McpServer``); close it at the end
    server: Any = None

    @property
    def exclusive(self) -> bool:
        """Rollouts must hold the world one at a time: a ``world=mcp`` server with a reset or
        state tool, whose state every concurrent rollout would otherwise share."""
        return self.server is not None and self.server.stateful

    def close(self) -> None:
        """Stop the stage's MCP server, if any."""
        if self.server is not None:
            self.server.close()


def resolve_world(knobs: Knobs, execute: Callable[[str, dict[str, Any]], Any] | None) -> WorldSetup:
    """The world class, its validated ``WorldOptions`` (``advanced.world``) and the person
    knobs its constructor takes; with ``execute=`` a world whose tool calls go to it.

    Raises ``ValueError`` for an unknown or invalid ``advanced.world`` field, or an
    ``execute`` that is not callable.
    """
    from wai_exp.simulate import world as world_mod

    options = settled_exists_share(world_options(world_mod, knobs.world), execute)
    kwargs = _world_kwargs(world_mod.RolloutWorld, knobs)
    cls = world_mod.RolloutWorld
    if getattr(options, "kind", "mock") == "mcp":
        if execute is not None:
            raise ValueError("execute= and world=mcp both answer tool calls: give one")
        return _mcp_world(options, kwargs)
    if execute is not None:
        if not callable(execute):
            raise ValueError("execute must be a callable execute(tool_name, arguments) -> result")
        cls = _user_exec_world(cls, execute)
    return WorldSetup(cls, options, kwargs)


#: What answers the tool calls without seeing the writer's plan, by kind: the name the
#: warnings give it, and what they call it after.
_PLAN_BLIND: dict[str, tuple[str, str]] = {
    "execute": ("simulate.execute", "your backend"),
    "mcp": ("the world=mcp server", "the server"),
}


def plan_blind(options: Any, execute: bool) -> str | None:
    """``"execute"`` when a user's ``execute=`` answers the tool calls, ``"mcp"`` for a
    ``world=mcp`` server, None for the mock world: the first two answer from their own records
    and never see the writer's plan (``world_state``), which the checklist grades against."""
    if execute:
        return "execute"
    return "mcp" if getattr(options, "kind", "mock") == "mcp" else None


def settled_exists_share(options: Any, execute: Any) -> Any:
    """``options`` with ``exists_share`` set: the user's value when given, else 1.0 when the
    tool calls are answered by something that never sees the writer's plan (``execute=`` or a
    ``world=mcp`` server, ``plan_blind``) and the mock world's 0.5 otherwise. Such a world
    answers from its own records, so a task planned on a missing record (or an action already
    done) would be graded against a state it did not have. A share under 1.0 given for one is
    the user's choice, warned about once before work."""
    from wai_exp.simulate.world import DEFAULT_EXISTS_SHARE, USER_BACKEND_EXISTS_SHARE

    blind = plan_blind(options, execute is not None)
    share = getattr(options, "exists_share", DEFAULT_EXISTS_SHARE)
    if share is None:
        share = USER_BACKEND_EXISTS_SHARE if blind else DEFAULT_EXISTS_SHARE
        return options.model_copy(update={"exists_share": share})
    if blind and share < 1.0 and f"{blind}:exists_share={share}" not in _WARNED:
        import logging

        _WARNED.add(f"{blind}:exists_share={share}")
        logging.getLogger(__name__).warning(
            "%s",
            plan_not_served_note(
                f"world.exists_share={share:g} plans up to {1.0 - share:.0%} of the tasks "
                "with the record missing or the action already done",
                blind,
            ),
        )
    return options


def plan_not_served_note(what: str, blind: str = "execute") -> str:
    """The warning for tasks planned on a state the world answering the tool calls never saw
    (``blind``: a ``plan_blind`` kind); ``what`` says which tasks (a share before work,
    counts of rows after)."""
    name, it = _PLAN_BLIND[blind]
    return (
        f"{name} answers the tool calls, but {what}: {it} never sees that plan, and the "
        f"checklist grades each reply against it, so an agent that reports what {it} "
        "answered fails there. Leave world.exists_share unset (1.0 under simulate.execute "
        "or world=mcp; advanced['world']['exists_share'] from Python) or set it to 1.0, and "
        f"replay with simulate.tasks only tasks {it} can serve, unless it serves those states"
    )


def plan_not_served(rows: Sequence[Mapping[str, Any]], blind: str = "execute") -> str | None:
    """The warning for a finished run on a ``plan_blind`` world whose rows were planned on a
    missing record or an action already done (``scenario_dimensions.world_state``), or None."""
    states = Counter(
        str((r.get("scenario_dimensions") or {}).get("world_state") or r.get("world_state"))
        for r in rows
    )
    missing, done = states.get("missing", 0), states.get("already_done", 0)
    if not missing + done:
        return None
    return plan_not_served_note(
        f"{missing + done} of {len(rows)} rows were planned with the record missing "
        f"({missing}) or the action already done ({done})",
        blind,
    )


def world_options(world_mod: Any, overrides: Mapping[str, Any]) -> Any:
    """``WorldOptions(**overrides)``; a typo is a ValueError naming the fields."""
    opts_cls = world_mod.WorldOptions
    fields = sorted(getattr(opts_cls, "model_fields", {}))
    unknown = [k for k in overrides if fields and k not in fields]
    if unknown:
        close = difflib.get_close_matches(unknown[0], fields, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"advanced['world'] has unknown field {unknown[0]!r}.{hint} WorldOptions fields: {', '.join(fields)}"
        )
    try:
        return opts_cls(**dict(overrides))
    except Exception as exc:  # pydantic ValidationError: name the field and the fix
        raise ValueError(f"advanced['world'] is invalid: {exc}") from exc


def world_dump(options: Any) -> dict[str, Any]:
    """The resolved ``WorldOptions`` as plain JSON (fault builders by mode name only)."""
    if not hasattr(options, "model_dump"):
        return dict(options or {})
    out = options.model_dump(mode="python", exclude={"fault_builders"})
    out = json.loads(json.dumps(out, default=list))
    out["fault_builders"] = sorted(getattr(options, "fault_builders", {}) or {})
    return out


def _init_params(cls: Any) -> set[str]:
    try:
        return set(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return set()


def _world_kwargs(world_cls: Any, knobs: Knobs) -> dict[str, Any]:
    """The person-model knobs, passed to the world when its constructor takes them."""
    accepted = _init_params(world_cls)
    candidates = {
        "patience": knobs.patience,
        "avg_turns": knobs.avg_turns,
        "user_temperature": knobs.user_temperature,
    }
    return {k: v for k, v in candidates.items() if k in accepted}


def _user_exec_world(world_cls: Any, execute: Callable[[str, dict[str, Any]], Any]) -> Any:
    """A world whose tool calls go to the user's ``execute``: no fault schedule, the simulated
    person (``ask_user``) still answers questions."""

    class UserExecWorld(world_cls):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["fault_rate"] = 0.0
            super().__init__(*args, **kwargs)
            self._user_calls = 0

        def execute(
            self,
            name: str,
            arguments: Mapping[str, Any] | None = None,
            *,
            call_id: str | None = None,
        ) -> dict[str, Any]:
            self._user_calls += 1
            args = dict(arguments) if isinstance(arguments, Mapping) else {"_raw": arguments}
            step: dict[str, Any] = {
                "kind": "tool",
                "tool_call_id": call_id or f"call_{self._user_calls}",
                "name": name,
                "arguments": args,
                "result": None,
                "status": "ok",
                "fault": None,
            }
            try:
                step["result"] = execute(name, dict(args))
            except Exception as exc:  # noqa: BLE001 - the user's world failing is a tool error
                step["result"] = {"error": type(exc).__name__, "message": str(exc)}
                step["status"] = "error"
            self.steps.append(step)
            return step

    UserExecWorld.__name__ = f"UserExec{world_cls.__name__}"
    return UserExecWorld


#: servers already warned about (a run checks its inputs, then runs: one warning)
_WARNED: set[str] = set()


def _mcp_world(options: Any, kwargs: dict[str, Any]) -> WorldSetup:
    """Start the stage's MCP server (refusing, as a ValueError naming the fix, when it cannot
    start or lists no tools); its credential-named env values and headers, its URL's query
    values and its commands' credential words are secrets from here on (the Python API's
    run too)."""
    import importlib.util

    from wai_exp.domain.secrets import register_config_secrets, register_map_secrets
    from wai_exp.simulate.mcp_world import (
        McpServer,
        McpServerError,
        mcp_world_class,
        server_setting,
    )

    if importlib.util.find_spec("mcp") is None:
        raise ValueError("world=mcp needs the mcp package (its client): pip install 'mcp>=2.3,<3'")
    server_key = options.url or options.command
    register_map_secrets(options.env)
    register_map_secrets(options.headers)
    register_config_secrets({k: getattr(options, k) for k in ("url", "command", "reset_command")})
    try:
        server = McpServer(options)
    except McpServerError as exc:
        raise ValueError(str(exc)) from None
    if not server.tools:
        server.close()
        raise ValueError(
            f"the MCP server ({server_setting(options)}) lists no tools: the agent would have "
            "nothing to call; "
            "point world.command/world.url at a server that registers tools"
        )
    if not (options.reset_tool or options.reset_command) and server_key not in _WARNED:
        import logging

        _WARNED.add(server_key)
        logging.getLogger(__name__).warning(
            "world=mcp has no reset (world.reset_tool / world.reset_command): every rollout "
            "starts from the state earlier rollouts left, so rollouts are not independent "
            "and a rerun does not repeat them"
        )
    return WorldSetup(mcp_world_class(server), options, kwargs, server=server)


def mcp_tools(
    world: WorldSetup, declared: list[dict[str, Any]], sp: str | None, narrowed: bool
) -> tuple[list[dict[str, Any]], str | None]:
    """The tools and system prompt of a ``world=mcp`` run: the server's tools (narrowed to and
    described by ``declared`` when the user gave a spec or tools), and the spec's prompt or a
    generic one. Other worlds keep ``declared`` and ``sp``."""
    if world.server is None:
        return declared, sp
    from wai_exp.simulate.mcp_world import MCP_SYSTEM_PROMPT, narrow_tools

    offered = world.server.tools
    if not narrowed:
        # The reset and state tools are the harness's: offered, a model could wipe its own
        # rollout's work mid-rollout. A spec that names them offers them.
        hidden = world.server.harness_tools
        offered = [t for t in offered if t["function"]["name"] not in hidden]
    tools = narrow_tools(offered, declared if narrowed else None)
    if not tools and not narrowed:
        raise ValueError(
            "the MCP server lists only its reset/state tools "
            f"({', '.join(sorted(world.server.harness_tools))}), which the agent is not "
            "offered: point world.command/world.url at a server with tools to act with"
        )
    if not tools:
        raise ValueError(
            "none of the spec's tools is one the MCP server lists "
            f"({', '.join(t['function']['name'] for t in world.server.tools)}): name them "
            "in the spec, or give no spec to offer all of them"
        )
    return tools, sp if narrowed else MCP_SYSTEM_PROMPT
