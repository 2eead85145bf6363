"""Who answers: ``simulate(agent=...)`` resolved into a callable, the model name rows carry,
and the identity the run id hashes."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ResolvedAgent:
    """``fn(prompt, *, tools, system_prompt, world, sampling) -> dict`` (sync or async) and
    what the engine records about it."""

    fn: Any
    model: str
    #: a model-server backend (it records its own sampling and logprobs)
    is_backend: bool
    #: what the run id hashes: two arms that differ only in the agent's settings (a scripted
    #: agent's skills) must not share rollout ids
    identity: str
    warnings: list[str] = field(default_factory=list)


def resolve_agent(
    agent: Any,
    *,
    timeout: float,
    sampling: dict[str, Any] | None,
    logprobs: Any,
    avg_turns: int,
) -> ResolvedAgent:
    """``agent=None``/``"scripted"`` is the built-in scripted agent, a ``<backend>:<model>``
    string a ``ModelAgent``, a callable itself.

    Raises ``ValueError`` for a string that is not a model spec or a value that is not
    callable.
    """
    from wai_exp.simulate.agents.scripted import ScriptedAgent

    if isinstance(agent, ScriptedAgent):
        identity = repr(agent)
    elif agent is None or agent == "scripted":
        identity = repr(ScriptedAgent())
    else:
        identity = None
    fn, model, is_backend = _callable_of(
        agent, timeout=timeout, sampling=sampling, logprobs=logprobs, avg_turns=avg_turns
    )
    resolved = ResolvedAgent(fn, model, is_backend, identity if identity is not None else model)
    if logprobs and not is_backend:
        resolved.warnings.append(
            "logprobs= is recorded by model backends only; this agent is a callable, so no logprob was captured."
        )
    return resolved


def _callable_of(
    agent: Any, *, timeout: float, sampling: dict[str, Any] | None, logprobs: Any, avg_turns: int
) -> tuple[Any, str, bool]:
    """(callable, model name, is a model backend)."""
    from wai_exp.simulate.agents.scripted import ScriptedAgent

    if agent is None or agent == "scripted":
        agent = ScriptedAgent()
    if isinstance(agent, ScriptedAgent):
        # Pure and fast: call its synchronous ``run`` in the loop instead of awaiting a
        # coroutine per rollout (same rollout, no scheduling overhead).
        scripted = agent

        def run_scripted(
            prompt: str, *, tools: Any, system_prompt: Any, world: Any, sampling: Any
        ) -> dict[str, Any]:
            return scripted.run(prompt, tools=tools, world=world)

        return run_scripted, str(scripted.model_version), False
    # Imported only here: the backends pull in httpx.
    from wai_exp.llm.providers import PROVIDERS, is_model_spec
    from wai_exp.simulate.agents.model_agent import ModelAgent

    if isinstance(agent, str):
        if not is_model_spec(agent):
            raise ValueError(
                f"agent={agent!r} is not a model spec: use <backend>:<model>[@<url>] with backend one of "
                f"{list(PROVIDERS)}, 'scripted', a callable, or None for the built-in scripted agent"
            )
        a = ModelAgent(
            agent, timeout=timeout, sampling=sampling, logprobs=logprobs, max_turns=avg_turns
        )
        return a, str(getattr(a, "model_version", agent)), True
    if not callable(agent):
        raise ValueError(
            f"agent must be a callable, a model spec string or None, got {type(agent).__name__}"
        )
    name = getattr(agent, "model_version", None) or callable_name(agent)
    return agent, str(name), isinstance(agent, ModelAgent)


def callable_name(fn: Any) -> str:
    """A name for an agent or grader: its ``name``, ``__name__``, else its type's name."""
    if fn is None:
        return "none"
    name = getattr(fn, "name", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return str(name)


def is_async_callable(fn: Any) -> bool:
    """True for a coroutine function or an object whose ``__call__`` is one."""
    call = type(fn).__call__ if not inspect.isfunction(fn) and not inspect.ismethod(fn) else None
    return inspect.iscoroutinefunction(fn) or (
        call is not None and inspect.iscoroutinefunction(call)
    )
