"""List the functions in wai_exp/ longer than a limit (default 120 lines).

    python scripts/long_functions.py            # functions over 120 lines, longest first
    python scripts/long_functions.py --limit 80 --top 10

A function's length is its source span, decorators excluded (``end_lineno - lineno + 1``);
nested functions are counted on their own and inside their parent, as a reader meets them.
Complexity is McCabe's, counted as ruff's C901 counts it (``ruff check --select C901``).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

LIMIT = 120
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Function:
    path: str
    name: str
    line: int
    length: int
    complexity: int

    def __str__(self) -> str:
        return f"{self.length:5d}  cc {self.complexity:3d}  {self.path}:{self.line}  {self.name}"


def _branches(body: list[ast.stmt]) -> int:
    """Decision points in a block, counted as ruff's C901 (McCabe) counts them: statements only."""
    score = 0
    for stmt in body:
        if isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While)):
            score += 1 + _branches(stmt.body) + _branches(stmt.orelse)
        elif isinstance(stmt, (ast.Try, ast.TryStar)):
            score += len(stmt.handlers) + bool(stmt.orelse)
            score += _branches(stmt.body) + _branches(stmt.orelse)
            score += _branches(stmt.finalbody)
            score += sum(_branches(h.body) for h in stmt.handlers)
        elif isinstance(stmt, (ast.With, ast.AsyncWith, ast.ClassDef)):
            score += _branches(stmt.body)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            score += 1 + _branches(stmt.body)
        elif isinstance(stmt, ast.Match):
            score += sum(1 + _branches(case.body) for case in stmt.cases)
            last = stmt.cases[-1].pattern if stmt.cases else None
            if isinstance(last, ast.MatchAs) and last.pattern is None:
                score -= 1
    return score


def _complexity(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return 1 + _branches(node.body)


def _visit(node: ast.AST, path: str, prefix: str, found: list[Function]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{child.name}"
            length = (child.end_lineno or child.lineno) - child.lineno + 1
            found.append(Function(path, name, child.lineno, length, _complexity(child)))
            _visit(child, path, f"{name}.", found)
        elif isinstance(child, ast.ClassDef):
            _visit(child, path, f"{prefix}{child.name}.", found)
        else:
            _visit(child, path, prefix, found)


def functions(root: Path = ROOT / "wai_exp") -> list[Function]:
    """Every function and method under ``root``, with its qualified name."""
    found: list[Function] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        _visit(tree, path.relative_to(root.parent).as_posix(), "", found)
    return found


def long_functions(limit: int = LIMIT, root: Path = ROOT / "wai_exp") -> list[Function]:
    """Functions longer than ``limit`` lines, longest first."""
    over = [f for f in functions(root) if f.length > limit]
    return sorted(over, key=lambda f: (-f.length, f.path, f.line))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=LIMIT)
    parser.add_argument("--top", type=int, default=0, help="show only the N longest")
    args = parser.parse_args(argv)
    over = long_functions(args.limit)
    print(f"{len(over)} functions over {args.limit} lines")
    for f in over[: args.top or None]:
        print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
