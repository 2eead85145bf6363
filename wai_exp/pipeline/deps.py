"""What a stage's result depends on besides its config: file contents and code.

The runner puts these digests into the stage's cache key (``cache.stage_key``), following
DVC's model: a key is the hash of the stage's command, its parameters and the *contents* of
its dependencies, so an input rewritten in place or an edited helper module re-runs the stage.

* ``input_files``: the files a stage reads by path (``simulate.tasks``, ``simulate.traces``,
  ``simulate.spec``, ``simulate.rows``), by the SHA-256 of their bytes;
* ``user_code``: the user's modules a stage runs (a callable agent or judge,
  ``simulate.execute``, a ``_target_`` stage) and every module they import from outside the
  standard library, site-packages and wai-exp itself, found by walking the ``import``
  statements of each file (``ast``, nothing is executed);
* ``source_digest``: one digest of every file of the installed wai-exp package (its source
  and the data it ships, such as the ``support_desk`` spec), so an upgrade, an edited judge
  or an edited shipped spec re-runs what it computes.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import sys
import sysconfig
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wai_exp.config.arms import arm_agent
from wai_exp.domain.files import file_sha256

#: Config keys (of ``simulate``, or a stage's params) naming a file the stage reads.
FILE_KEYS = ("tasks", "traces", "spec", "rows")


def _digest_or_reason(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        # The stage itself reports the missing file; the key only has to differ from the
        # key of a readable file.
        return f"unreadable: {type(exc).__name__}"


def _package_files(root: Path) -> list[Path]:
    """Every file of the package but compiled bytecode: its source and the data it ships
    (the ``support_desk`` spec a run loads when ``simulate.spec`` is null, the row schema)."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    )


@functools.cache
def source_digest() -> str:
    """Hex SHA-256 over every file of the wai_exp package, source and shipped data
    (relative path and bytes, in sorted order). Computed once per process."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in _package_files(root):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _resolve(value: str, start_dir: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else start_dir / p


def _rows_file(path: Path) -> Path:
    """The file ``simulate`` reads for ``tasks``/``traces`` (a run directory names one)."""
    if not path.is_dir():
        return path
    from wai_exp.simulate.replay import _rows_path

    try:
        return _rows_path(path, "tasks")
    except ValueError:
        return path


def input_files(
    sections: Mapping[str, Any], params: Mapping[str, Any], start_dir: Path
) -> dict[str, str]:
    """``{key: sha256}`` for each file the stage reads by path: ``simulate.tasks``,
    ``simulate.traces``, ``simulate.spec``, ``simulate.rows`` and the same keys in the stage's params (which
    override the section). A missing file digests to a reason instead of raising; ``spec``
    values that name a shipped spec rather than a file are left to the config section."""
    sim = sections.get("simulate")
    merged = {**(sim if isinstance(sim, Mapping) else {}), **params}
    out: dict[str, str] = {}
    for key in FILE_KEYS:
        value = merged.get(key)
        if not isinstance(value, str) or not value:
            continue
        path = _resolve(value, start_dir)
        if key == "spec" and not path.exists():
            continue  # a shipped spec's name: its bytes are in ``source_digest``
        out[key] = _digest_or_reason(_rows_file(path) if key != "spec" else path)
    return out


@functools.cache
def _excluded_roots() -> tuple[str, ...]:
    """Folders whose modules are not user code: the standard library, site-packages and the
    wai_exp package (covered by ``source_digest``)."""
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))}
    roots.add(str(Path(__file__).resolve().parent.parent))
    return tuple(str(Path(r).resolve()) for r in roots if r)


def _module_file(name: str) -> Path | None:
    """The source file of module ``name`` when it is user code, else None."""
    if _not_user_module(name):
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    return _user_source(spec)


def _not_user_module(name: str) -> bool:
    if not name or name in sys.builtin_module_names or name in sys.stdlib_module_names:
        return True
    return name.partition(".")[0] in sys.stdlib_module_names


def _user_source(spec: Any) -> Path | None:
    """The ``.py`` file a module spec names when it is user code (not under the standard
    library, site-packages or wai-exp), else None."""
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    path = Path(spec.origin).resolve()
    if path.suffix != ".py" or not path.is_file():
        return None
    text = str(path)
    if any(text.startswith(root + "/") for root in _excluded_roots()):
        return None
    return path


def find_spec_under(name: str, roots: Sequence[str]) -> Any:
    """The spec of module ``name`` as a process whose import path is ``roots`` finds it, or
    None. Nothing is imported: a parent package is looked up, never run."""
    from importlib.machinery import PathFinder

    spec = None
    search: Sequence[str] | None = list(roots)
    parts = name.split(".")
    for i in range(len(parts)):
        if search is None:
            return None
        spec = PathFinder.find_spec(".".join(parts[: i + 1]), list(search))
        if spec is None:
            return None
        search = spec.submodule_search_locations
    return spec


def module_file_under(name: str, roots: Sequence[str]) -> Path | None:
    """``_module_file`` for a process whose import path is ``roots`` (another folder)."""
    return None if _not_user_module(name) else _user_source(find_spec_under(name, roots))


def _imports(path: Path, module: str) -> set[str]:
    """Module names ``path`` (module ``module``) imports, relative imports resolved. Both
    ``pkg.mod`` and ``pkg.mod.name`` are listed for ``from pkg.mod import name``: the name
    may be a submodule."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts):
                    continue
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            if not base:
                continue
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    # the parent packages run too (their __init__.py)
    for name in list(names):
        parts = name.split(".")
        names.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return names


def _module_of(target: str) -> str:
    """``pkg.mod:attr`` or ``pkg.mod.attr`` -> the module to start from."""
    if ":" in target:
        return target.partition(":")[0]
    if importlib.util.find_spec is not None:
        try:
            if importlib.util.find_spec(target) is not None:
                return target  # the target is a module itself
        except (ImportError, ValueError, AttributeError):
            pass
    return target.rpartition(".")[0]


def code_digests(targets: Iterable[str]) -> dict[str, str]:
    """``{source file: sha256}`` of the user modules behind ``targets`` (dotted paths of an
    agent, judge, world or stage) and every user module they import, transitively.

    Modules of the standard library, of site-packages and of wai-exp are not listed (the
    package digest covers wai-exp). A target that cannot be found contributes nothing: the
    stage fails on it with a clear message anyway.
    """
    return walk_code([(_module_of(str(t)), None) for t in targets if t], _module_file)


def walk_code(
    seeds: Iterable[tuple[str, Path | None]], find: Callable[[str], Path | None]
) -> dict[str, str]:
    """``{source file: sha256}`` of the seeds (a module name, with its file when known) and
    every user module they import, transitively; ``find`` maps a module name to its file
    (None: not user code, or not found)."""
    seen: dict[str, str] = {}
    visited: set[str] = set()
    todo = list(seeds)
    while todo:
        name, path = todo.pop()
        if path is None:
            if name in visited:
                continue
            visited.add(name)
            path = find(name)
        if path is None or str(path) in seen:
            continue
        seen[str(path)] = _digest_or_reason(path)
        todo.extend((n, None) for n in sorted(_imports(path, name) - visited))
    return dict(sorted(seen.items()))


def _callable_target(section: Any) -> str | None:
    if isinstance(section, Mapping) and section.get("kind") == "callable" and section.get("target"):
        return str(section["target"])
    return None


def code_targets(
    sections: Mapping[str, Any], params: Mapping[str, Any], target: str | None
) -> list[str]:
    """The dotted paths of the user code a stage runs: a callable agent or judge (from the
    config section or laid over it by the stage's params), ``simulate.execute`` and the
    stage's own ``_target_``."""
    agent = _callable_target(arm_agent(sections.get("agent"), params.get("agent")))
    named: list[str] = [agent] if agent else []
    judge = sections.get("judge")
    if isinstance(judge, Mapping):
        named += [t for t in [_callable_target({**judge, **params})] if t]
    named += [t for t in [_callable_target(sections.get("grader"))] if t]  # simulate.grader
    sim = sections.get("simulate")
    execute = params.get("execute") or (sim.get("execute") if isinstance(sim, Mapping) else None)
    if execute:
        named.append(str(execute))
    if target:
        named.append(target)
    return named
