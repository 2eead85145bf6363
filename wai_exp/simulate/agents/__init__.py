"""Agents that answer situations: the built-in scripted agent and the model backends.

``current_rollout`` names the rollout being answered, for an agent or a user ``execute``
world that keeps per-rollout state: the engine sets it around every agent call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextvars import ContextVar, Token
from dataclasses import dataclass
from dataclasses import fields as fields_of
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wai_exp.simulate.agents.scripted import ScriptedAgent

__all__ = ["CurrentRollout", "RolloutContext", "ScriptedAgent", "current_rollout"]


@dataclass(frozen=True, slots=True)
class RolloutContext:
    """The rollout being answered: its ask, repeat index, situation and per-rollout seed."""

    prompt: str
    rollout_index: int = 0
    scenario_id: str | None = None
    seed: int | None = None

    # Read as the reference names it, the pair ``(prompt, rollout_index)``: ``ctx[0]``,
    # ``ctx[1]``, ``prompt, i = ctx``; and dict-style, ``ctx["seed"]``, for code written
    # against a plain dict context.
    def __getitem__(self, key: str | int) -> Any:
        if isinstance(key, int):
            return (self.prompt, self.rollout_index)[key]
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def __len__(self) -> int:
        return 2

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, or ``default`` when there is no such field."""
        return getattr(self, key, default)

    def __iter__(self) -> Iterator[Any]:
        # The reference names the rollout as (prompt, rollout index): ``prompt, i = ctx``.
        return iter((self.prompt, self.rollout_index))


class CurrentRollout:
    """``current_rollout``: the rollout being answered, wherever the agent or an
    ``execute=`` world runs.

    Read it the way the reference names it, ``current_rollout.prompt`` and
    ``current_rollout.rollout_index`` (also ``scenario_id`` and ``seed``), or take the whole
    context with ``current_rollout.get()`` (a ``RolloutContext``, ``None`` outside a
    rollout), which also unpacks as ``prompt, rollout_index``. Backed by a ``ContextVar``:
    each asyncio task (and ``asyncio.to_thread`` call) sees its own rollout, so concurrent
    rollouts never see each other's. Reading a field outside a rollout raises
    ``AttributeError`` saying so (``getattr(current_rollout, "prompt", None)`` gives None).
    """

    __slots__ = ("_var",)

    def __init__(self) -> None:
        self._var: ContextVar[RolloutContext | dict[str, Any] | None] = ContextVar(
            "current_rollout", default=None
        )

    def get(self, default: Any = None) -> RolloutContext | dict[str, Any] | None:
        """The context of the rollout being answered, or ``default`` outside one."""
        ctx = self._var.get()
        return default if ctx is None else ctx

    def set(self, ctx: RolloutContext | dict[str, Any] | None) -> Token[Any]:
        """Name ``ctx`` as the current rollout (the engine does this around each agent call);
        returns the token ``reset`` takes."""
        return self._var.set(ctx)

    def reset(self, token: Token[Any]) -> None:
        """Restore what was current before the ``set`` that returned ``token``."""
        self._var.reset(token)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        ctx = self._var.get()
        if ctx is None:
            raise AttributeError(
                f"current_rollout.{name}: no rollout is being answered here; it is set only "
                "inside the agent call and the execute= world it calls"
            )
        if isinstance(ctx, dict):
            if name in ctx:
                return ctx[name]
        elif hasattr(ctx, name):
            return getattr(ctx, name)
        fields = sorted(ctx) if isinstance(ctx, dict) else [f.name for f in fields_of(ctx)]
        raise AttributeError(f"current_rollout has no field {name!r}; fields: {', '.join(fields)}")

    def __repr__(self) -> str:
        return f"current_rollout({self._var.get()!r})"


#: The rollout being answered (``get()`` is ``None`` outside one). Set by the engine per
#: rollout around every agent call.
current_rollout = CurrentRollout()


if not TYPE_CHECKING:  # type checkers see the import above, and no catch-all attribute

    def __getattr__(name: str) -> Any:
        # Lazy, so importing the ContextVar does not load the world and pydantic models.
        if name == "ScriptedAgent":
            from wai_exp.simulate.agents.scripted import ScriptedAgent

            return ScriptedAgent
        raise AttributeError(f"module 'wai_exp.simulate.agents' has no attribute {name!r}")
