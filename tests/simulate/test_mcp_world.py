"""``world=mcp`` from the Python API, over stdio and streamable HTTP: a real MCP server
(``tests/support/mcp_notes_server.py``) answers the scripted agent's calls."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from tests.support.mcp_http import notes_server_over_http
from wai_exp import simulate

REPO = Path(__file__).resolve().parents[2]
STDIO = {"kind": "mcp", "command": "python -m tests.support.mcp_notes_server", "cwd": str(REPO)}


def _sources(data) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in data.rows:
        for s in row["steps"]:
            if s.get("kind") == "tool":
                out[s["source"]] = out.get(s["source"], 0) + 1
    return out


def test_simulate_over_stdio_offers_the_servers_tools_and_injects_faults() -> None:
    data = simulate(budget=40, seed=3, fault_rate=1.0, advanced={"world": STDIO})
    sources = _sources(data)
    assert sources.get("server", 0) > 0 and sources.get("injected", 0) > 0, sources
    called = {s["name"] for r in data.rows for s in r["steps"] if s.get("kind") == "tool"}
    assert called <= {
        "create_note",
        "get_note",
        "delete_note",
        "list_notes",
        "reset_notes",
        "notes_state",
    }


def test_a_spec_narrows_the_servers_tools() -> None:
    tools = [
        {
            "name": "list_notes",
            "description": "All notes.",
            "parameters": {"type": "object", "properties": {}},
        }
    ]
    data = simulate(budget=5, seed=1, tools=tools, advanced={"world": STDIO})
    called = {s["name"] for r in data.rows for s in r["steps"] if s.get("kind") == "tool"}
    assert called <= {"list_notes"}


def test_the_report_names_the_server_not_the_shipped_desk_when_no_spec_is_given() -> None:
    """The report said spec 'support_desk' (resolve_spec's fallback) although the tools
    offered were the server's; the note names the server as a record shows it."""
    import secrets

    token = "Z" + secrets.token_hex(10)
    world = {**STDIO, "command": f"{STDIO['command']} --sig {token}"}
    rep = simulate(budget=4, seed=1, advanced={"world": world}).report()
    assert rep["spec"] is None
    assert rep["spec_note"] == (
        "no spec: the tools are those the MCP server (world.command='python -m "
        "tests.support.mcp_notes_server --sig ***redacted***') lists, under the generic MCP "
        "system prompt; simulate.spec narrows and describes them"
    )
    assert token not in json.dumps(rep["spec_note"])


def test_a_spec_given_to_a_server_run_is_the_reports_spec(tmp_path: Path) -> None:
    spec = {
        "name": "notes_desk",
        "system_prompt": "You keep notes.",
        "tools": [
            {
                "name": "list_notes",
                "description": "All notes.",
                "parameters": {"type": "object", "properties": {}},
            }
        ],
    }
    path = tmp_path / "notes.json"
    path.write_text(json.dumps(spec))
    rep = simulate(budget=4, seed=1, spec=str(path), advanced={"world": STDIO}).report()
    assert rep["spec"] == "notes_desk" and "spec_note" not in rep
    assert rep["tools"] == ["list_notes"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server():
    with notes_server_over_http() as url:
        yield url


def test_simulate_over_streamable_http(http_server: str) -> None:
    world = {"kind": "mcp", "url": http_server, "reset_tool": "reset_notes"}
    data = simulate(budget=30, seed=2, fault_rate=0.5, advanced={"world": world})
    created = [
        s["result"] for r in data.rows for s in r["steps"]
        if s.get("kind") == "tool" and s["name"] == "create_note" and s["source"] == "server"
    ]  # fmt: skip
    assert created and {c["note_id"] for c in created} == {"NOTE-1001"}


def test_world_state_is_the_state_tools_answer_else_unknown() -> None:
    with_state = simulate(
        budget=6, seed=4, advanced={"world": {**STDIO, "state_tool": "notes_state"}}
    )
    states = [json.loads(r["world_state"]) for r in with_state.rows]
    assert all(set(s) == {"count", "ids"} for s in states)
    without = simulate(budget=6, seed=4, advanced={"world": STDIO})
    # never the writer's planned state (exists / missing / already_done) passed off as real
    assert {r["world_state"] for r in without.rows} == {"unknown"}
    # the server keeps the records: no empty change list claiming nothing changed
    assert all(r["world_changes"] is None for r in without.rows)


def test_no_reset_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    from wai_exp.simulate.engine import check_inputs

    world = {**STDIO, "env": {"NOTES_RUN": "warn-once"}, "command": STDIO["command"] + " "}
    check_inputs(budget=2, advanced={"world": world})
    simulate(budget=2, advanced={"world": world})
    warned = [r for r in caplog.records if "has no reset" in r.getMessage()]
    assert len(warned) == 1


def test_headers_reach_no_file(http_server: str, tmp_path: Path) -> None:
    secret = "hdr-secret-5b81d0c2a7e4"
    world = {"kind": "mcp", "url": http_server, "headers": {"X-Notes-Key": secret}}
    data = simulate(budget=4, seed=1, advanced={"world": world}, output=tmp_path / "rows.jsonl")
    assert secret not in json.dumps(data.report(), default=str)
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert secret not in f.read_text(errors="replace"), f


def test_an_injected_fault_never_reaches_the_server() -> None:
    world = {**STDIO, "reset_tool": "reset_notes", "state_tool": "notes_state"}
    data = simulate(budget=60, seed=7, fault_rate=0.5, advanced={"world": world})
    injected = 0
    for row in data.rows:
        tool_steps = [s for s in row["steps"] if s.get("kind") == "tool"]
        injected += sum(
            s["source"] == "injected" and s["name"] == "create_note" for s in tool_steps
        )
        made = [
            s for s in tool_steps
            if s["name"] == "create_note" and s["source"] == "server" and "note_id" in s["result"]
        ]  # fmt: skip
        # the server's own count after the rollout: only the real calls made notes
        assert json.loads(row["world_state"])["count"] == len(made), row["steps"]
    assert injected > 0


def test_a_server_with_only_its_reset_and_state_tools_is_refused() -> None:
    # The harness's reset and state tools are never offered to the agent: a server with no
    # other tool leaves the agent nothing to act with, refused before work, naming why.
    from types import SimpleNamespace

    from wai_exp.simulate.world_setup import WorldSetup, mcp_tools

    def tool(name: str) -> dict:
        return {"type": "function", "function": {"name": name, "parameters": {}}}

    server = SimpleNamespace(
        tools=[tool("reset_notes"), tool("notes_state")],
        harness_tools={"reset_notes", "notes_state"},
    )
    world = WorldSetup(cls=None, options=None, kwargs={}, server=server)
    with pytest.raises(ValueError, match="lists only its reset/state tools"):
        mcp_tools(world, [], None, narrowed=False)


def test_a_server_that_cannot_be_reached_or_reset_is_named_without_its_secrets() -> None:
    """The message names the server as a record does: no query value, no flag value."""
    import secrets
    from types import SimpleNamespace

    from wai_exp.simulate.mcp_world import McpServer, McpServerError
    from wai_exp.simulate.world import WorldOptions

    t1, t2 = "Z" + secrets.token_hex(10), "Z" + secrets.token_hex(10)
    port = _free_port()
    options = WorldOptions(kind="mcp", url=f"http://127.0.0.1:{port}/mcp?access={t1}")
    with pytest.raises(McpServerError) as err:
        McpServer(options, startup_timeout=20)
    assert t1 not in str(err.value)
    assert f"world.url=http://127.0.0.1:{port}/mcp?access=***redacted***" in str(err.value)
    reset = f"{sys.executable} -c 'import sys; sys.exit(3)' --sig {t2}"
    stub = SimpleNamespace(options=SimpleNamespace(reset_tool=None, reset_command=reset, cwd=None))
    with pytest.raises(McpServerError) as err:
        McpServer.reset(stub)  # type: ignore[arg-type]
    assert t2 not in str(err.value)
    assert (
        "world.reset_command ('python -c ***redacted*** --sig ***redacted***') exited with "
        "status 3" in str(err.value)
    )


def test_a_server_started_through_env_is_named_by_its_program() -> None:
    """``env NAME=value python -m srv``: the error named the program ``***redacted***``."""
    import secrets

    from wai_exp.simulate.mcp_world import McpServer, McpServerError
    from wai_exp.simulate.world import WorldOptions

    token = "Z" + secrets.token_hex(10)
    command = f"env NOTES_TOKEN={token} python -m tests.support.no_such_server --port 8123"
    with pytest.raises(McpServerError) as err:
        McpServer(WorldOptions(kind="mcp", command=command), startup_timeout=20)
    assert token not in str(err.value)
    assert (
        "world.command='env NOTES_TOKEN=***redacted*** python -m tests.support.no_such_server "
        "--port ***redacted***'" in str(err.value)
    )


def test_a_home_relative_cwd_starts_the_server_there_and_rows_keep_it_as_typed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``world.cwd=~/...`` was handed to the server's process as typed: it failed to start
    with "No such file or directory: '~/...'", where every other path setting reads ``~``
    as the home folder. A folder that does not exist is refused when the world is checked,
    naming world.cwd, not when the server fails to start."""
    from wai_exp.simulate.world import WorldOptions

    monkeypatch.setenv("HOME", str(REPO.parent))
    typed = f"~/{REPO.name}"
    data = simulate(budget=2, seed=1, fault_rate=0.0, advanced={"world": {**STDIO, "cwd": typed}})
    assert _sources(data).get("server", 0) > 0
    assert {row["lineage"]["world"]["options"]["cwd"] for row in data.rows} == {typed}
    # report.json's world is the options the stage ran with: as typed, as the rows say
    # (it showed the expanded folder while rows and params kept "~/...").
    assert data.report()["world"]["cwd"] == typed
    with pytest.raises(ValueError, match=r"world.cwd '.*/no-such-folder' is no folder"):
        WorldOptions(kind="mcp", command=STDIO["command"], cwd="~/no-such-folder")


def test_a_server_with_no_tools_is_named_without_its_commands_values() -> None:
    """Through the Python API too (no runner registered the config's secrets)."""
    import secrets

    token = "Z" + secrets.token_hex(10)
    world = {**STDIO, "command": f"{STDIO['command']} --access {token}",
             "env": {"NOTES_NO_TOOLS": "1"}}  # fmt: skip
    with pytest.raises(ValueError, match="lists no tools") as err:
        simulate(budget=2, advanced={"world": world})
    assert token not in str(err.value)
    assert "python -m tests.support.mcp_notes_server --access ***redacted***" in str(err.value)


def _path_python_that_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put a ``python`` and a ``python3`` first on PATH that cannot start a server, as on a
    machine whose PATH interpreter lacks the ``mcp`` package."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):
        exe = bin_dir / name
        exe.write_text('#!/bin/sh\necho "PATH\'s $0 has no mcp" >&2\nexit 3\n')
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_python_or_python3_after_env_is_the_interpreter_wai_exp_runs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``env NAME=v python -m srv`` and ``python3 -m srv`` started the first interpreter on
    PATH ("Connection closed" when it lacks ``mcp``); only a bare ``python`` first was
    wai-exp's own."""
    from wai_exp.simulate.mcp_world import McpServer
    from wai_exp.simulate.world import WorldOptions

    _path_python_that_fails(tmp_path, monkeypatch)
    module = "-m tests.support.mcp_notes_server"
    for command in (f"python {module}", f"python3 {module}", f"env NOTES_X=1 python {module}",
                    f"/usr/bin/env -u HOME NOTES_X=1 python3 {module}"):  # fmt: skip
        server = McpServer(WorldOptions(kind="mcp", command=command, cwd=str(REPO)))
        try:
            assert "create_note" in {t["function"]["name"] for t in server.tools}, command
        finally:
            server.close()


def test_an_interpreter_another_launcher_or_a_path_names_is_not_replaced() -> None:
    """A path or a version names its own interpreter; ``uv run`` and a container pick theirs."""
    from wai_exp.simulate.mcp_world import server_argv

    assert server_argv("env A=1 python srv.py") == ["env", "A=1", sys.executable, "srv.py"]
    for command in ("/usr/bin/python3 srv.py", "python3.12 srv.py", "uv run python srv.py",
                    "docker run -i --rm img python srv.py", "env --weird x python srv.py",
                    "node python"):  # fmt: skip
        assert sys.executable not in server_argv(command), command


def test_a_server_started_through_a_launcher_is_named_by_what_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``uvx mcp-server-fetch``, ``npx -y @scope/server``: the error named the package
    ``***redacted***``, so it did not say which server failed; flag values still go."""
    import secrets

    from wai_exp.simulate.mcp_world import McpServer, McpServerError
    from wai_exp.simulate.world import WorldOptions

    monkeypatch.setenv("PATH", str(tmp_path))  # no launcher there: the start fails
    token = "Z" + secrets.token_hex(10)
    for command, shown in {
        f"uvx mcp-server-fetch --api-key {token}":
            "uvx mcp-server-fetch --api-key ***redacted***",
        f"npx -y @modelcontextprotocol/server-filesystem /srv/{token}":
            "npx -y @modelcontextprotocol/server-filesystem ***redacted***",
        f"docker run -i --rm -e NOTES_TOKEN={token} mcp/notes":
            "docker run -i --rm -e NOTES_TOKEN=***redacted*** mcp/notes",
    }.items():  # fmt: skip
        with pytest.raises(McpServerError) as err:
            McpServer(WorldOptions(kind="mcp", command=command), startup_timeout=20)
        assert token not in str(err.value)
        assert f"(world.command={shown!r}) could not be started" in str(err.value)
