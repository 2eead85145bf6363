"""Rewrite imports of modules issue 8 moved, in the files given (default: every tracked .py/.md).

For branches written before the moves landed: ``python scripts/rewrite_moved_imports.py
$(git diff --name-only main...)`` after a rebase, then ``ruff check --fix --select I``.
Idempotent: already-new paths are left alone.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCORE = {
    "stats": ["resample", "passat", "stats", "delta", "power"],
    "grade": [
        "grading",
        "checklist",
        "trace",
        "grounding",
        "markers",
        "style",
        "length",
        "failures",
        "quality",
        "privileged",
        "stage",
        "spec",
    ],
    "judges": ["judging", "rubric", "pairwise", "labels", "agreement", "audit", "judge_trust"],
    "select": [
        "select",
        "trim",
        "hygiene",
        "optimize",
        "curriculum",
        "preference",
        "decontaminate",
        "publish_gate",
    ],
    "diagnose": ["hack_scan", "hack_scan_diff", "correlations", "logprobs"],
}
#: old dotted module -> new dotted module (whole-module moves)
MODULES = {f"wai_exp.score.{m}": f"wai_exp.score.{g}.{m}" for g, ms in SCORE.items() for m in ms}
MODULES |= {
    f"wai_exp.simulate.agents.{m}": f"wai_exp.llm.{m}"
    for m in ("http", "turn", "openai_chat", "anthropic_chat")
}
MODULES |= {
    "wai_exp.simulate.dimensions": "wai_exp.domain.dimensions",
    "wai_exp.rows.tools": "wai_exp.domain.tools",
    "wai_exp.score.preflight": "wai_exp.simulate.preflight",
    "wai_exp.score.diagnose.preflight": "wai_exp.simulate.preflight",
}

_DOTTED = re.compile(
    r"\b("
    + "|".join(re.escape(m) for m in sorted(MODULES, key=len, reverse=True))
    + r")\b(?![.\w])"
)
_DOTTED_SUB = re.compile(
    r"\b(" + "|".join(re.escape(m) for m in sorted(MODULES, key=len, reverse=True)) + r")(?=[.:])"
)
_FROM_SCORE = re.compile(r"^(\s*)from wai_exp\.score import ([\w, ]+)$", re.M)
_SUB = {m: g for g, ms in SCORE.items() for m in ms}


def _from_score(m: re.Match[str]) -> str:
    indent, names = m.group(1), [n.strip() for n in m.group(2).split(",")]
    if not all(n in _SUB for n in names):
        return m.group(0)
    return "\n".join(f"{indent}from wai_exp.score.{_SUB[n]} import {n}" for n in names)


def rewrite(text: str) -> str:
    """``text`` with every moved module path replaced by its new one."""

    # ``wai_exp.score.stats`` is both an old module and a new folder: only rewrite when not
    # already followed by one of the folder's modules.
    def new(m: re.Match[str]) -> str:
        old = m.group(1)
        rest = text[m.end() : m.end() + 40]
        folder = SCORE.get(old.rsplit(".", 1)[-1], ())
        for sub_mod in folder:
            if re.match(rf"\.{sub_mod}\b", rest):
                return old
        names = re.match(r" import ([\w, ]+)", rest)
        if folder and names and all(n.strip() in folder for n in names.group(1).split(",")):
            return old
        return MODULES[old]

    text = _DOTTED_SUB.sub(new, text)
    text = _DOTTED.sub(new, text)
    return _FROM_SCORE.sub(_from_score, text)


def main(argv: list[str]) -> None:
    files = (
        argv
        or subprocess.run(
            ["git", "ls-files", "*.py", "*.md"], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    for name in files:
        path = Path(name)
        if (
            not path.is_file()
            or path.suffix not in {".py", ".md"}
            or path.resolve() == Path(__file__).resolve()
        ):
            continue
        old = path.read_text()
        new = rewrite(old)
        if new != old:
            path.write_text(new)
            print(f"rewrote {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
