"""A minimal world for agent tests: answers tool calls from a table, answers questions once."""

from __future__ import annotations

from typing import Any


class TableWorld:
    def __init__(
        self, answers: dict[str, Any] | None = None, user_answers: list[str | None] | None = None
    ) -> None:
        self.answers = answers or {}
        self.user_answers = list(user_answers or [])
        self.calls: list[tuple[str, dict]] = []
        self.questions: list[str] = []
        self.seed = 0

    def execute(self, name: str, arguments: dict) -> dict:
        self.calls.append((name, arguments))
        if name not in self.answers:
            return {"result": {"error": f"unknown tool {name}"}, "status": "error", "fault": None}
        return {"result": self.answers[name], "status": "ok", "fault": None}

    def ask_user(self, question: str) -> str | None:
        self.questions.append(question)
        return self.user_answers.pop(0) if self.user_answers else None
