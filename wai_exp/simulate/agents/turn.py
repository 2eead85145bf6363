"""What one model call returns, whatever the backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Completion:
    """One assistant turn: text, tool calls (``{"id", "name", "arguments": dict}``), usage."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    truncated: bool = False
    model: str = ""
    token_logprobs: list[float] | None = None
