"""Config validation as the console script runs it: ``wai_exp.config.validate`` with the
world's options model and the tracking group passed in, plus the check that every named
``package.module:function`` imports.

This is the composition root's side of validation: config sits below simulate, tracking
and pipeline, so it takes what it needs from them as arguments (``Sections``) instead of
importing them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from wai_exp.config import models
from wai_exp.config import validate as _validate
from wai_exp.config.arms import arm_agent
from wai_exp.config.validate import ConfigError, Sections

__all__ = ["ConfigError", "check_override_keys", "import_problems", "sections", "validate_config"]


def sections() -> Sections:
    """The world's ``WorldOptions`` and the tracking group's keys and check (imported when
    asked: the world module is heavy)."""
    from wai_exp.rows.formats import FORMATS
    from wai_exp.simulate.world import WorldOptions
    from wai_exp.tracking import _DEFAULTS, tracking_settings

    return Sections(
        world_model=WorldOptions,
        tracking_keys=tuple(_DEFAULTS),
        tracking_check=tracking_settings,
        publish_formats={name: fmt.shapes for name, fmt in FORMATS.items()},
        replaying_formats=tuple(name for name, fmt in FORMATS.items() if fmt.replays),
    )


def validate_config(cfg: Mapping[str, Any]) -> models.RootConfig:
    """``config.validate.validate_config`` over every section, world and tracking included.
    Raises ``ConfigError`` listing every problem."""
    return _validate.validate_config(cfg, sections())


def check_override_keys(argv: Sequence[str]) -> list[str]:
    """``config.validate.check_override_keys`` with world and tracking keys known: one
    problem per override whose key cannot exist in a config."""
    return _validate.check_override_keys(argv, sections())


def import_problems(cfg: Mapping[str, Any]) -> list[str]:
    """Every ``package.module:function`` the config names (agent, judge, execute, report
    stages' ``fn``/``format``), imported now: a typo in a target is a config error (exit 2,
    nothing recorded), not a stage failing half-way through a run."""
    from wai_exp.pipeline.registry import import_object

    agents = _agent_targets(cfg)
    named: list[tuple[str, Any]] = [(what, path) for what, path, _ in agents]
    judge = cfg.get("judge") or {}
    if judge.get("kind") == "callable":
        named.append(("judge.target", judge.get("target")))
    execute = (cfg.get("simulate") or {}).get("execute")
    if execute:
        named.append(("simulate.execute", execute))
    agents_factory = {what: factory for what, _, factory in agents}
    problems = []
    stages = ((cfg.get("pipeline") or {}).get("stages")) or {}
    for name, stage in stages.items():
        if (stage or {}).get("kind") != "report":
            continue
        from wai_exp.pipeline.stages.report import resolve_function

        params = stage.get("params") or {}
        for key in ("fn", "format"):
            if params.get(key):
                try:
                    resolve_function(str(params[key]), f"pipeline.stages.{name}.params.{key}")
                except ValueError as exc:
                    problems.append(str(exc))
    for what, path in named:
        try:
            obj = import_object(str(path), what)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if not callable(obj):
            problems.append(f"{what}: {path!r} is not callable")
        elif what in agents_factory:
            problems.extend(_agent_problems(obj, path, agents_factory[what]))
    return problems


def _agent_targets(cfg: Mapping[str, Any]) -> list[tuple[str, Any, bool]]:
    """``(where, target, factory)`` of every callable agent a run builds: the agent
    section's and each simulate arm's own (``params.agent``, as the stage runs it)."""
    section = cfg.get("agent") or {}
    found: list[tuple[str, Any, bool]] = []
    if section.get("kind") == "callable":
        found.append(("agent.target", section.get("target"), bool(section.get("factory"))))
    stages = ((cfg.get("pipeline") or {}).get("stages")) or {}
    for name, stage in stages.items():
        arm = ((stage or {}).get("params") or {}).get("agent")
        if (stage or {}).get("kind") != "simulate" or not isinstance(arm, Mapping):
            continue
        agent = arm_agent(section, arm)
        if agent.get("kind") == "callable" and agent.get("target") != section.get("target"):
            where = f"pipeline.stages.{name}.params.agent.target"
            found.append((where, agent.get("target"), bool(agent.get("factory"))))
    return found


def _agent_problems(obj: Any, path: Any, factory: bool) -> list[str]:
    """What keeps ``agent.target`` from answering, found before any work: a class whose
    instances cannot be called, or a function whose signature cannot take the message (the
    same check the engine makes when the stage starts). A factory's product is built only
    when the stage runs, so only its being callable is checked here."""
    import inspect

    from wai_exp.simulate.agent_setup import context_keys

    if inspect.isclass(obj):
        if not any("__call__" in vars(k) for k in obj.__mro__[:-1]):
            return [
                f"agent.target: {path!r} is a class whose instances cannot be called: give it "
                "a __call__(self, message, ...) method, or point agent.target at a function"
            ]
        return []
    if factory:
        return []
    try:
        context_keys(obj)
    except ValueError as exc:
        return [f"agent.target: {exc}"]
    return []
