"""Agents that answer situations: the built-in scripted agent and the model backends.

``current_rollout`` names the rollout being answered, for an agent or a user ``execute``
world that keeps per-rollout state: the engine sets it around every agent call.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = ["RolloutContext", "ScriptedAgent", "current_rollout"]


@dataclass(frozen=True, slots=True)
class RolloutContext:
    """The rollout being answered: its ask, repeat index, situation and per-rollout seed."""

    prompt: str
    rollout_index: int = 0
    scenario_id: str | None = None
    seed: int | None = None

    # Dict-style access too, so code written against a plain dict context reads this as well.
    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, or ``default`` when there is no such field."""
        return getattr(self, key, default)


#: The rollout being answered (``None`` outside one). Set by the engine per rollout; each
#: asyncio task runs in its own context copy, so concurrent rollouts never see each other's.
current_rollout: ContextVar[RolloutContext | dict[str, Any] | None] = ContextVar(
    "current_rollout", default=None
)


def __getattr__(name: str) -> Any:
    # Lazy, so importing the ContextVar does not load the world and pydantic models.
    if name == "ScriptedAgent":
        from wai_exp.simulate.agents.scripted import ScriptedAgent

        return ScriptedAgent
    raise AttributeError(f"module 'wai_exp.simulate.agents' has no attribute {name!r}")
