"""Count import edges between wai_exp's packages, from the source with ``ast``.

Every ``import wai_exp.x`` / ``from wai_exp.x import y`` counts, including the lazy
imports inside functions: a lazy import is still a dependency. ``--depth 2`` splits
``score`` into its subfolders. Prints one ``from -> to: count`` line per package pair,
the totals, and the module-level import cycles (strongly connected components).

    python scripts/import_edges.py [--depth 1|2] [--root wai_exp]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, this: str, is_pkg: bool, top: str) -> list[str]:
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] == top]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = this.split(".") if is_pkg else this.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != top:
                continue
            out.append(mod)
            # ``from wai_exp.score import grading`` imports the submodule itself
            out += [f"{mod}.{a.name}" for a in node.names]
    return out


def package_of(module: str, depth: int, packages: set[str]) -> str:
    parts = module.split(".")[1:]
    if not parts:
        return "wai_exp"
    for d in range(depth, 0, -1):
        name = ".".join(parts[:d])
        if name in packages:
            return name
    return parts[0]


def graph(root: Path) -> tuple[dict[str, set[str]], set[str]]:
    modules: dict[str, Path] = {module_name(p, root): p for p in root.rglob("*.py")}
    packages = {
        m.split(".", 1)[1] for m, p in modules.items() if p.name == "__init__.py" and "." in m
    }
    edges: dict[str, set[str]] = defaultdict(set)
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for target in imported_modules(tree, mod, path.name == "__init__.py", root.name):
            while target not in modules and "." in target:  # a name, not a module
                target = target.rsplit(".", 1)[0]
            if target in modules and target != mod:
                edges[mod].add(target)
    return edges, packages


def sccs(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of size > 1 (the import cycles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="wai_exp")
    ap.add_argument("--depth", type=int, default=1)
    args = ap.parse_args()
    edges, packages = graph(Path(args.root).resolve())
    pairs: Counter[tuple[str, str]] = Counter()
    for src, targets in edges.items():
        for dst in targets:
            a = package_of(src, args.depth, packages)
            b = package_of(dst, args.depth, packages)
            if a != b:
                pairs[a, b] += 1
    for (a, b), n in sorted(pairs.items()):
        print(f"{a} -> {b}: {n}")
    print(
        f"total cross-package module edges: {sum(pairs.values())} over {len(pairs)} package pairs"
    )
    pkg_edges: dict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        pkg_edges[a].add(b)
    print(f"package cycles: {sccs(pkg_edges)}")
    cycles = sccs(edges)
    print(f"module cycles: {len(cycles)}")
    for c in cycles:
        print("  " + " <-> ".join(m.removeprefix("wai_exp.") for m in c))


if __name__ == "__main__":
    main()
