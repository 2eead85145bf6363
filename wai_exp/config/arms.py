"""The agent a simulate stage's arm runs: its ``params.agent`` laid over the ``agent`` section.

One function, so the check before any work, the stage that builds the agent, the cache
key's list of user code and the cache key itself (``resolved_arm_agent``) all read the same
agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from wai_exp.config.models import AGENT_BY_KIND

#: the kind an agent section without one runs (the stage builds a scripted agent then)
DEFAULT_KIND = "scripted"


def switches_kind(agent: Any, arm: Any) -> bool:
    """Whether ``arm`` names a kind other than the ``agent`` section's."""
    if not isinstance(arm, Mapping) or "kind" not in arm:
        return False
    base = agent.get("kind", DEFAULT_KIND) if isinstance(agent, Mapping) else DEFAULT_KIND
    return str(arm["kind"]) != str(base)


def arm_agent(agent: Any, arm: Any) -> dict[str, Any]:
    """The agent config an arm runs. An arm of the section's kind changes some of its keys;
    an arm that names another kind is a whole agent of that kind, because the section's keys
    belong to the section's kind (a scripted ``skill`` is not a key of a callable agent, a
    provider's ``api_key`` must not reach another provider's server)."""
    over = dict(arm) if isinstance(arm, Mapping) else {}
    if switches_kind(agent, over):
        return over
    return {**(dict(agent) if isinstance(agent, Mapping) else {}), **over}


def resolved_arm_agent(agent: Any, arm: Any) -> dict[str, Any]:
    """The agent an arm runs as its model reads it: ``arm_agent`` validated, every default
    filled in, so two spellings of one agent (a default written out or left out, ``1`` or
    ``1.0``) are one agent and a key no kind reads is gone. An agent that does not validate
    (the check before any work refuses it) is returned as ``arm_agent`` gives it."""
    merged = {"kind": DEFAULT_KIND, **arm_agent(agent, arm)}
    try:
        model = AGENT_BY_KIND[str(merged["kind"])]
        return model.model_validate(merged).model_dump()
    except (KeyError, ValidationError):
        return merged
