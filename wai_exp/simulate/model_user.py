"""The simulated person played by a model (``user_model=<spec>``).

The world keeps the rules that make the person a fair test (``world.RolloutWorld``): the
first question is always attempted, ``patience`` decides walk-aways from the second question
on, and the person speaks at most ``avg_turns // 2`` times. What the model does is the line
itself: it answers the agent's question in the person's words, from the facts of the
situation only. When the agent asks for something the person could not know (nothing in
their facts answers it), the model may end the conversation by answering ``LEAVE``; the
world then records ``ended_by="user_left"``.

Temperatures: ``user_temperature`` when set, else the two named defaults,
``USER_TURN_TEMPERATURE`` (0.475) for follow-up answers and ``HUMAN_TOOL_TEMPERATURE`` (0.9)
for answers to a human tool the agent calls (``ask_user`` and the like).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from wai_exp.simulate.model_calls import ModelCaller
from wai_exp.simulate.world import HUMAN_TOOL_TEMPERATURE, USER_TURN_TEMPERATURE

__all__ = ["HUMAN_TOOL_TEMPERATURE", "USER_TURN_TEMPERATURE", "ModelUser"]
#: Reply budget of one line of the person: a sentence or two.
USER_MAX_TOKENS = 120

#: The word the model answers with to walk away.
LEAVE = "LEAVE"
_LEAVE_RE = re.compile(r"^\W*(leave|<leave>|\[leave\])\W*$", re.IGNORECASE)

_SYSTEM = (
    "You play a customer who contacted a support agent. Stay in character: write only the "
    "customer's next message, in the first person, one or two short sentences, no quotes, no "
    "labels. Use only the facts listed below; never invent an order number, email, amount or "
    "any other detail you were not given. If the agent asks for something the facts do not "
    "contain and you could not know it, either say you do not have it, or, if you would give "
    "up on the conversation, answer with the single word LEAVE."
)


class ModelUser:
    """Plays the person's lines on a model server; one instance serves a whole run.

    ``temperature`` is the ``user_temperature`` knob (None keeps the named defaults);
    ``api_key`` the key of an agent whose own model plays the person (None: the provider's
    key variable).
    ``answer`` (async) and ``answer_sync`` return the line, or ``None`` when the model chose
    to leave. Both raise what ``ModelCaller`` raises (``BackendError``, ``TimeoutError``):
    a user model that fails loses the rollout with that error, never a made-up line.
    """

    def __init__(
        self, spec: str, *, temperature: float | None, timeout: float, api_key: str | None = None
    ) -> None:
        self.caller = ModelCaller(spec, timeout=timeout, api_key=api_key)
        self.name = self.caller.name
        self.temperature = temperature
        self.lines = 0
        self.left = 0

    def sampling(self, kind: str) -> dict[str, Any]:
        """The sampling of one line: ``kind`` is ``"follow_up"`` or ``"human_tool"``."""
        if self.temperature is not None:
            temp = float(self.temperature)
        else:
            temp = HUMAN_TOOL_TEMPERATURE if kind == "human_tool" else USER_TURN_TEMPERATURE
        return {"temperature": temp, "max_tokens": USER_MAX_TOKENS}

    def messages(
        self, brief: Mapping[str, Any], question: str, kind: str = "follow_up"
    ) -> list[dict[str, Any]]:
        """The chat the model answers: the person's facts and opening ask, the transcript so
        far (the person's lines as the assistant's, the agent's as the user's), the question."""
        facts = json.dumps(dict(brief.get("facts") or {}), sort_keys=True, default=str)
        mood = brief.get("mood")
        system = (
            f"{_SYSTEM}\n\nYour facts: {facts}\nWhat you wrote first: {brief.get('opening', '')}"
            + (f"\nYour mood: {mood}" if mood else "")
        )
        out: list[dict[str, Any]] = [{"role": "system", "content": system}]
        for speaker, text in brief.get("transcript") or ():
            role = "assistant" if speaker == "user" else "user"
            out.append({"role": role, "content": str(text)})
        lead = "The agent's tool asks you: " if kind == "human_tool" else ""
        out.append({"role": "user", "content": lead + question})
        return out

    def _line(self, completion: Any) -> str | None:
        text = str(getattr(completion, "content", "") or "").strip().strip('"').strip()
        self.lines += 1
        if not text or _LEAVE_RE.match(text):
            # An empty line is the person not answering: they are gone, as with LEAVE.
            self.left += 1
            return None
        return text

    async def answer(
        self, brief: Mapping[str, Any], question: str, kind: str = "follow_up"
    ) -> str | None:
        """The person's line (async, on the caller's loop), or None when they leave."""
        done = await self.caller.complete(self.messages(brief, question, kind), self.sampling(kind))
        return self._line(done)

    def answer_sync(
        self, brief: Mapping[str, Any], question: str, kind: str = "follow_up"
    ) -> str | None:
        """``answer`` for sync callers (the scripted agent, a human tool call)."""
        done = self.caller.complete_sync(self.messages(brief, question, kind), self.sampling(kind))
        return self._line(done)

    async def aclose(self) -> None:
        await self.caller.aclose()

    def close(self) -> None:
        self.caller.close()
