"""``server_code``: the files of a ``world=mcp`` stdio server found from its command, and why
a server cannot be checked (the simulate stage's cache key, ``docs/CACHE.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wai_exp.pipeline.server_code import server_code
from wai_exp.pipeline.stages.simulate import key_deps, never_reused, reused_note


def _package(root: Path) -> None:
    (root / "srv").mkdir()
    (root / "srv/__init__.py").write_text("")
    (root / "srv/__main__.py").write_text("from .app import main\n")
    (root / "srv/app.py").write_text("from . import tools\nimport helper\n\ndef main(): ...\n")
    (root / "srv/tools.py").write_text("X = 1\n")
    (root / "srv/unused.py").write_text("Y = 1\n")
    (root / "helper.py").write_text("import json\n")


def _names(found: object, root: Path) -> set[str]:
    assert isinstance(found, dict), found
    return {str(Path(p).relative_to(root)) for p in found}


def test_a_module_server_hashes_its_file_its_packages_and_what_they_import(tmp_path: Path) -> None:
    _package(tmp_path)
    world = {"kind": "mcp", "command": "python -u -X dev -m srv.app", "cwd": str(tmp_path)}
    names = _names(server_code(world), tmp_path)
    assert names == {"srv/__init__.py", "srv/app.py", "srv/tools.py", "helper.py"}
    # ``python -m pkg`` runs pkg/__main__.py too
    world["command"] = "python3 -m srv"
    assert "srv/__main__.py" in _names(server_code(world), tmp_path)


def test_a_script_server_resolves_against_world_cwd_and_imports_from_its_folder(
    tmp_path: Path,
) -> None:
    _package(tmp_path)
    (tmp_path / "serve.py").write_text("import helper\n")
    world = {"kind": "mcp", "command": "python ./serve.py --port 1", "cwd": str(tmp_path)}
    assert _names(server_code(world), tmp_path) == {"serve.py", "helper.py"}


def test_an_edited_server_file_changes_the_simulate_key(tmp_path: Path) -> None:
    _package(tmp_path)
    config = {"world": {"kind": "mcp", "command": "python -m srv.app", "cwd": str(tmp_path)}}
    before = key_deps(config, {})
    (tmp_path / "srv/tools.py").write_text("X = 2\n")
    assert key_deps(config, {}) != before and never_reused(config, {}) is None


def test_servers_that_cannot_be_checked_say_why_and_the_mock_world_has_nothing(
    tmp_path: Path,
) -> None:
    cases = {
        "npx some-server --token sk-1": "runs 'npx', whose server code is not a file",
        "python -c 'import srv'": "runs no Python file or module",
        "python -m json.tool": "not a file under",
        "python -m no_such_module": "not a file under",
    }
    for command, why in cases.items():
        config = {"world": {"kind": "mcp", "command": command, "cwd": str(tmp_path)}}
        said = never_reused(config, {})
        assert said is not None and why in said, (command, said)
        assert "sk-1" not in said and "world_code" not in key_deps(config, {})
    url = {"world": {"kind": "mcp", "url": "http://127.0.0.1:9/mcp?token=sk-2"}}
    said = str(never_reused(url, {}))
    # the server is named as a record shows it: no query value
    assert "the server at world.url=http://127.0.0.1:9/mcp?token=***redacted*** can" in said
    assert "sk-2" not in said
    assert never_reused({"world": {"kind": "mock"}}, {}) is None
    assert server_code({"kind": "mock"}) is None
    # a stage reading simulate.rows never talks to the server
    assert never_reused({**url, "simulate": {"rows": "rows.jsonl"}}, {}) is None


def test_only_a_checked_server_notes_that_its_run_time_reads_are_not(tmp_path: Path) -> None:
    (tmp_path / "srv.py").write_text("import json\n")
    checked = {"world": {"kind": "mcp", "command": "python srv.py", "cwd": str(tmp_path)}}
    assert "not what it reads at run time" in str(reused_note(checked, {}))
    url = {"world": {"kind": "mcp", "url": "http://127.0.0.1:9/mcp"}}
    for config in (url, {"world": {"kind": "mock"}}, {**checked, "simulate": {"rows": "r"}}):
        assert reused_note(config, {}) is None, config


def test_a_server_started_through_env_or_from_a_home_folder_is_still_checked(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # ``env NAME=v python -m srv`` runs the same module as ``python -m srv`` (the start swaps
    # in wai-exp's Python there too), and ``world.cwd=~/srv`` is the home folder's srv: both
    # servers' code is hashed, so their stage can be reused and an edit is seen.
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "work").mkdir()
    _package(tmp_path / "work")
    world = {"kind": "mcp", "command": "env NOTES_MODE=fast python -u -m srv.app", "cwd": "~/work"}
    names = _names(server_code(world), tmp_path / "work")
    assert names == {"srv/__init__.py", "srv/app.py", "srv/tools.py", "helper.py"}
