"""The code of a ``world=mcp`` server, for the simulate stage's cache key.

A stdio server (``world.command``) is user code like a callable agent: its answers are the
rows. Its Python files are found from the command the way it runs, without running it:

* ``python path/srv.py``: that file, resolved against ``world.cwd`` (else the folder
  wai-exp runs in), and the user modules it imports, looked up in the script's folder
  (the first entry of a script's import path);
* ``python -m pkg.mod``: the module found under ``world.cwd`` (the first entry of a
  ``-m`` import path), the ``__init__.py`` of each package it is in, its ``__main__.py``
  when it is a package, and the user modules they import, transitively (``deps.walk_code``,
  the walk a callable agent's code gets).

A command whose code is no Python file found this way (``npx some-server``, a binary,
``python -c``, a module of an installed package) cannot be checked, and a ``world.url``
server can change between runs at any time: for both, ``server_code`` says why, and the
stage is never reused from the cache.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wai_exp.domain.secrets import redact_url, started_program
from wai_exp.pipeline import deps

#: Interpreter options followed by a value (``-W error``, ``-X dev``).
_VALUED = ("-W", "-X")
_PYTHON = re.compile(r"python(\d+(\.\d+)*)?")


def _base_dir(world: Mapping[str, Any]) -> Path:
    """The folder the server starts in: ``world.cwd`` (relative to this process's folder,
    as the server's launcher resolves it), else this process's folder."""
    here = Path(os.getcwd())
    cwd = world.get("cwd")
    return (here / Path(str(cwd)).expanduser()).resolve() if cwd else here


def _what_python_runs(args: list[str]) -> tuple[str, str] | None:
    """``("module", name)`` or ``("script", path)`` from a Python command's arguments
    after the interpreter; None for ``-c`` or no program (nothing on disk to hash)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m":
            return ("module", args[i + 1]) if i + 1 < len(args) else None
        if arg.startswith("-m"):
            return "module", arg[2:]
        if arg.startswith("-c"):
            return None
        if arg in _VALUED:
            i += 2
            continue
        if not arg.startswith("-") or arg == "-":
            return ("script", arg) if arg != "-" else None
        i += 1
    return None


def _program(command: str) -> tuple[str, str] | str:
    """What ``world.command`` runs (``_what_python_runs``), or why it is not Python code
    on disk. Only the program's name is quoted: the rest of a command line may hold a
    token."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return "world.command cannot be split into words"
    at = started_program(argv)  # after ``env``'s options and assignments, as the start reads it
    if at is None:
        return "world.command names no program wai-exp can find"
    name = Path(argv[at]).name
    if name.endswith(".py"):
        return "script", argv[at]
    if not _PYTHON.fullmatch(name):
        return f"world.command runs {name!r}, whose server code is not a file wai-exp can check"
    found = _what_python_runs(argv[at + 1 :])
    if found is None:
        return "world.command runs no Python file or module wai-exp can check"
    return found


def _script_code(script: str, base: Path) -> dict[str, str] | str:
    path = (base / script).resolve()
    if not path.is_file():
        return f"world.command's script {script!r} is not a file under {base}"
    roots = [str(path.parent)]
    return deps.walk_code([(path.stem, path)], lambda name: deps.module_file_under(name, roots))


def _module_code(module: str, base: Path) -> dict[str, str] | str:
    roots = [str(base)]
    path = deps.module_file_under(module, roots)
    if path is None:
        return (
            f"world.command runs module {module!r}, which is not a file under {base} "
            "wai-exp can check (an installed package's module is not)"
        )
    parts = module.split(".")
    seeds: list[tuple[str, Path | None]] = [(module, path)]
    seeds += [(".".join(parts[:i]), None) for i in range(1, len(parts))]  # its packages
    if path.name == "__init__.py":  # ``python -m pkg`` runs pkg/__main__.py
        seeds.append((f"{module}.__main__", None))
    return deps.walk_code(seeds, lambda name: deps.module_file_under(name, roots))


def server_code(world: Mapping[str, Any] | None) -> dict[str, str] | str | None:
    """For ``world=mcp``: ``{file: sha256}`` of the stdio server's Python code, or why its
    answers cannot be checked against the cache (a ``world.url`` server, a command whose
    code is not found). None for any other world."""
    if not isinstance(world, Mapping) or world.get("kind") != "mcp":
        return None
    if world.get("url"):
        # Named as a record shows it (no query value, no password): a resume says which
        # server answered the rows it keeps.
        url = redact_url(str(world["url"]))
        return f"the server at world.url={url} can change between runs at any time"
    command = world.get("command")
    if not command:
        return None  # refused by the world's own check before any stage runs
    program = _program(str(command))
    if isinstance(program, str):
        return program
    how, what = program
    base = _base_dir(world)
    return _script_code(what, base) if how == "script" else _module_code(what, base)
