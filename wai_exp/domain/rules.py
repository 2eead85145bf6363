"""Policy rules: a system prompt's numbered (or, failing that, bulleted) lines, as R1..Rn."""

from __future__ import annotations

import re

_NUMBERED = re.compile(r"^\s*(?:rule\s*)?\(?(\d{1,3})[.):]\s+(.+?)\s*$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*[-*\u2022]\s+(.+?)\s*$")


def parse_rules(system_prompt: str | None) -> list[tuple[str, str]]:
    """``[(rule_id, text)]`` from a policy prompt: its numbered lines (``1.``, ``2)``, ``3:``),
    or its bullet lines when it has no numbered ones, as ``R1..Rn`` in order. An indented line
    under a rule continues it. Empty for a prompt with neither."""
    if not system_prompt:
        return []
    lines = system_prompt.splitlines()
    for pattern in (_NUMBERED, _BULLET):
        rules: list[str] = []
        indent_of_last = -1
        for line in lines:
            m = pattern.match(line)
            if m:
                rules.append(m.group(m.lastindex or 1))
                indent_of_last = len(line) - len(line.lstrip())
            elif rules and line.strip() and len(line) - len(line.lstrip()) > indent_of_last:
                rules[-1] = f"{rules[-1]} {line.strip()}"
            elif not line.strip():
                indent_of_last = -1 if not rules else indent_of_last
        if rules:
            return [(f"R{i}", text) for i, text in enumerate(rules, start=1)]
    return []
