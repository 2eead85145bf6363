"""A token inside a URL or a command line the config names, under a name no rule knows
(``?access=``, ``?X-Amz-Signature=``, ``--access``, ``--auth=``, ``--sig``), or in the MCP
server's env and headers under such a name (``+world.env.MY_VAR=``), never reaches a file,
the MLflow store or the terminal, while every record still names the server.

Each case runs the console script against a real server (an MCP server over stdio and over
streamable HTTP, an OpenAI-compatible one on 127.0.0.1) with a random token. Afterwards every
file under the test folder (rows, report.json, the stage cache, run.json, Hydra's
``.hydra/``, the run's log, MLflow's artifacts) and a SQL dump of ``mlflow.db`` are searched.

Old code: the world's URL and command went into every row's ``lineage.world``, report.json,
the params and Hydra's copies as typed; only query names and flags that look like a
credential (``api_key``, ``sig``, ``auth``) were redacted, never ``?access=`` or a flag's
value, and the refusals quoted the URL or command whole."""

from __future__ import annotations

import json
import os
import secrets
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.mcp_http import notes_server_over_http
from tests.support.scripted_server import chat_reply, scripted_server
from tests.support.written import all_text

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
REPO = Path(__file__).resolve().parents[2]
RUN = ["+experiment=rl_round", "simulate.budget=6", "tracking.uri=sqlite:///mlflow.db"]
R = "***redacted***"


def _token() -> str:
    """A credential of no shape any rule knows."""
    return "Z" + secrets.token_hex(10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(cwd: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    cwd.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.Popen(
        [WAI_EXP, *args], cwd=cwd, env={**clean, "PYTHONPATH": str(REPO), **(env or {})},
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


@pytest.fixture
def notes_server() -> Iterator[str]:
    """An MCP server over streamable HTTP: ``http://127.0.0.1:<port>/mcp``."""
    with notes_server_over_http() as url:
        yield url


def _lineage_world(root: Path) -> dict[str, Any]:
    [rows] = [p for p in (root / "outputs").rglob("rows.jsonl") if p.parent.name == "simulate"]
    first = json.loads(rows.read_text(encoding="utf-8").splitlines()[0])
    return first["lineage"]["world"]["options"]


def _param(root: Path, key: str) -> str:
    with sqlite3.connect(root / "mlflow.db") as db:
        return db.execute("select value from params where key = ?", (key,)).fetchone()[0]


def test_tokens_in_a_worlds_url_and_command_and_a_model_url_reach_no_record(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, notes_server: str
) -> None:
    t = {name: _token() for name in ("access", "auth", "sig", "url", "amz", "base", "env", "hdr")}
    # the reset command writes the arguments it got where the search below does not look
    seen_by_reset = tmp_path_factory.mktemp("reset") / "argv.txt"
    reset = seen_by_reset.with_name("reset.py")
    reset.write_text(
        f"import sys\nopen({str(seen_by_reset)!r}, 'a').write(' '.join(sys.argv[1:]))\n"
    )
    command = f"python -m tests.support.mcp_stock_server --access {t['access']} --auth={t['auth']}"
    url = f"{notes_server}?access={t['url']}&X-Amz-Signature={t['amz']}"
    seen: list[str] = []

    def answer(path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        seen.append(path)
        return 200, chat_reply("Done, I looked it up.")

    with scripted_server(answer) as model_url:
        runs = {
            "stdio": _start(tmp_path / "stdio", [
                *RUN, "world=mcp", f"world.cwd={REPO}", f"world.command='{command}'",
                f"world.reset_command='python {reset} --sig {t['sig']}'",
                f"+world.env.MY_VAR={t['env']}",  # a name no rule knows
            ]),
            "http": _start(tmp_path / "http", [
                *RUN, "world=mcp", f"world.url='{url}'", f"+world.headers.X-Notes={t['hdr']}",
            ]),
            # the provider's URL variable: httpx logs every request line with its query
            "env": _start(tmp_path / "env", [*RUN, "simulate.budget=4", "agent=openai"], {
                "OPENAI_BASE_URL": f"{model_url}?access={t['base']}", "OPENAI_API_KEY": "none",
            }),
        }  # fmt: skip
        outputs = {name: p.communicate(timeout=600) for name, p in runs.items()}
    for name, proc in runs.items():
        assert proc.returncode in (0, 3), outputs[name][1][-3000:]
    # the real values went where they were meant to: the reset command's, the model's key
    assert f"/v1/chat/completions?access={t['base']}" in seen
    assert seen_by_reset.read_text(encoding="utf-8").startswith(f"--sig {t['sig']}")
    stdio = _lineage_world(tmp_path / "stdio")
    assert stdio["command"] == f"python -m tests.support.mcp_stock_server --access {R} --auth={R}"
    assert stdio["reset_command"] == f"python reset.py --sig {R}"
    assert _param(tmp_path / "stdio", "world.command") == stdio["command"]
    # Hydra's copy (the command line's values moved, then scrubbed) shows the same
    [hydra] = (tmp_path / "stdio" / "outputs").rglob(".hydra/config.yaml")
    world = yaml.safe_load(hydra.read_text(encoding="utf-8"))["world"]
    assert (world["command"], world["reset_command"]) == (
        stdio["command"],
        stdio["reset_command"],
    )
    shown = f"{notes_server}?access={R}&X-Amz-Signature={R}"
    assert _lineage_world(tmp_path / "http")["url"] == shown
    assert _param(tmp_path / "http", "world.url") == shown
    everything = all_text(tmp_path) + "".join(o + e for o, e in outputs.values())
    assert [name for name, token in t.items() if token in everything] == []


def test_refusals_quote_a_url_or_command_without_its_values(tmp_path: Path) -> None:
    """Hydra's grammar, the environment-assignment check, pydantic's URL check and an MCP
    server that cannot be reached: each refuses before any work and names the setting."""
    t = {name: _token() for name in ("grammar", "assign", "pydantic", "unreached")}
    closed = f"http://127.0.0.1:{_free_port()}/mcp"
    runs = {
        # unquoted: the '=' of the query is Hydra's grammar error, quoted back
        "grammar": _start(tmp_path / "grammar", [
            *RUN, "world=mcp", f"world.url={closed}?access={t['grammar']}"]),
        "assign": _start(tmp_path / "assign", [
            *RUN, "world=mcp", f"world.command='MY_TOKEN={t['assign']} python -m my_server'"]),
        "pydantic": _start(tmp_path / "pydantic", [
            *RUN, "agent=openai", f"agent.base_url='ftp://gpu-box/v1?access={t['pydantic']}'"]),
        "unreached": _start(tmp_path / "unreached", [
            *RUN, "world=mcp", f"world.url='{closed}?access={t['unreached']}'"]),
    }  # fmt: skip
    outputs = {name: p.communicate(timeout=300) for name, p in runs.items()}
    words = {
        "grammar": f"world.url={closed}?access={R}",
        "assign": "+world.env.MY_TOKEN=${oc.env:MY_TOKEN}",
        "pydantic": f"agent.base_url = 'ftp://gpu-box/v1?access={R}'",
        "unreached": f"world.url={closed}?access={R}) could not be started or reached",
    }
    for name, proc in runs.items():
        assert proc.returncode == 2, outputs[name]
        assert words[name] in outputs[name][1], outputs[name][1]
    everything = all_text(tmp_path) + "".join(o + e for o, e in outputs.values())
    assert [name for name, token in t.items() if token in everything] == []


def test_a_key_in_a_urls_path_reaches_no_record_and_no_message(tmp_path: Path) -> None:
    """A hosted server may take its key in the path (``/v1/<key>/``, ``/mcp/<key>/``): the
    model server gets the real URL, while Hydra's copies, the params, the rows, the log and
    the MCP world's refusal show the server with the key redacted."""
    t = {name: secrets.token_hex(16) for name in ("model", "world")}
    seen: list[str] = []

    def answer(path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        seen.append(path)
        return 200, chat_reply("Done, I looked it up.")

    closed = f"http://127.0.0.1:{_free_port()}/mcp"
    with scripted_server(answer) as model_url:
        runs = {
            "model": _start(tmp_path / "model", [
                *RUN, "simulate.budget=4", "agent=openai", f"agent.base_url={model_url}/{t['model']}",
            ], {"OPENAI_API_KEY": "none"}),
            "world": _start(tmp_path / "world", [
                *RUN, "world=mcp", f"world.url={closed}/{t['world']}/"]),
        }  # fmt: skip
        outputs = {name: p.communicate(timeout=600) for name, p in runs.items()}
    assert runs["model"].returncode in (0, 3), outputs["model"][1][-3000:]
    assert f"/v1/{t['model']}/chat/completions" in seen
    assert _param(tmp_path / "model", "agent.base_url") == f"{model_url}/{R}"
    [hydra] = (tmp_path / "model" / "outputs").rglob(".hydra/config.yaml")
    assert yaml.safe_load(hydra.read_text(encoding="utf-8"))["agent"]["base_url"] == (
        f"{model_url}/{R}"
    )
    assert runs["world"].returncode == 2, outputs["world"]
    assert f"world.url={closed}/{R}/) could not be started" in outputs["world"][1]
    everything = all_text(tmp_path) + "".join(o + e for o, e in outputs.values())
    assert [name for name, token in t.items() if token in everything] == []


def test_a_server_started_through_a_launcher_is_named_by_it_in_every_record(
    tmp_path: Path,
) -> None:
    """``uvx mcp-server-x --api-key T``: the package the launcher starts was recorded as
    ``***redacted***`` in the rows, the params and Hydra's copies, so no record said which
    server the run used. ``world.cwd=~/...`` is one value everywhere: report.json showed
    the expanded folder while the rows and the params kept the ``~``."""
    token = _token()
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    home.mkdir()
    (home / "srv").symlink_to(REPO)
    # a stand-in for uvx on PATH: it starts the notes server whatever package it is given
    uvx = bin_dir / "uvx"
    uvx.write_text(f"#!/bin/sh\nexec {sys.executable} -m tests.support.mcp_notes_server\n")
    uvx.chmod(0o755)
    run = _start(tmp_path / "run", [
        *RUN, "world=mcp", "world.cwd='~/srv'",
        f"world.command='uvx mcp-notes-server --api-key {token}'",
    ], {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home)})  # fmt: skip
    out, err = run.communicate(timeout=600)
    assert run.returncode in (0, 3), err[-3000:]
    shown = f"uvx mcp-notes-server --api-key {R}"
    world = _lineage_world(tmp_path / "run")
    assert (world["command"], world["cwd"]) == (shown, "~/srv")
    assert _param(tmp_path / "run", "world.command") == shown
    assert _param(tmp_path / "run", "world.cwd") == "~/srv"
    [report] = (tmp_path / "run" / "outputs").rglob("simulate/report.json")
    assert json.loads(report.read_text(encoding="utf-8"))["world"]["cwd"] == "~/srv"
    [hydra] = (tmp_path / "run" / "outputs").rglob(".hydra/config.yaml")
    assert yaml.safe_load(hydra.read_text(encoding="utf-8"))["world"]["command"] == shown
    [typed] = (tmp_path / "run" / "outputs").rglob(".hydra/overrides.yaml")
    assert f"uvx mcp-notes-server --api-key '{R}'" in typed.read_text(encoding="utf-8")
    assert token not in all_text(tmp_path) + out + err
