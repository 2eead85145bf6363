"""The agent a simulate stage's arm runs: its ``params.agent`` laid over the ``agent`` section.

One function, so the check before any work, the stage that builds the agent and the cache
key's list of user code all read the same agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
