"""``world=mcp``: the agent's tools are a real MCP server's (``docs/MCP.md``).

One server per stage: ``McpServer`` starts it (``world.command`` over stdio, or
``world.url`` over streamable HTTP) through the ``mcp`` package's client, reads its
``list_tools`` and keeps one session open on a thread of its own (its own event loop), so the
engine's agent threads call ``call_tool`` synchronously. ``McpWorld`` is the mock world with
its tool answers replaced by the server's: the argument check, the fault schedule and the
simulated person stay the engine's. A fault that fires answers *instead of* the call, so the
server never sees it and a write never half-applies; every tool step says where its answer
came from (``source``: ``server``, ``injected`` or ``engine`` for a bad call the world
refused before the server).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

from wai_exp.domain.secrets import redact_command, redact_url, started_program
from wai_exp.simulate.world import HUMAN_TOOL_NAMES, RolloutWorld

#: The system prompt of a ``world=mcp`` run given no spec: the shipped spec's desk prompt
#: would describe tools the server does not have.
MCP_SYSTEM_PROMPT = (
    "You are an assistant acting through the tools you are given. Use them to do what the "
    "person asks; ask for any detail you need; never claim an action a tool did not confirm."
)


def server_setting(options: Any) -> str:
    """``world.url=...`` or ``world.command='...'`` as a message names the server: as a
    record shows it (``wai_exp.domain.secrets.redact_setting``), no query or flag value."""
    if options.url:
        return f"world.url={redact_url(options.url)}"
    return f"world.command={redact_command(options.command)!r}"


#: Program words that mean the interpreter wai-exp runs in (its venv has the ``mcp``
#: package); a path (``/usr/bin/python3``) or a version (``python3.12``) names another.
_THIS_PYTHON = frozenset({"python", "python3"})


def server_argv(command: str) -> list[str]:
    """``world.command`` split as it is started: ``python`` or ``python3`` as the program,
    first or after ``env``'s options and assignments (``env TOKEN=x python -m srv``), is
    the interpreter wai-exp runs in, not the first one on PATH, which may lack the server's
    packages. What another launcher runs (``uv run python``, a container's ``python``) is
    that launcher's to pick."""
    argv = shlex.split(command)
    at = started_program(argv)
    if at is not None and argv[at] in _THIS_PYTHON:
        argv[at] = sys.executable
    return argv


def _folder(cwd: str | None) -> str | None:
    """``world.cwd`` as the server's process gets it: ``~`` is the home folder (no shell
    expands it). Records keep it as typed, report.json included."""
    return os.path.expanduser(cwd) if cwd else cwd


class McpServerError(RuntimeError):
    """The server could not be started or reached, or it went away mid-run."""


class McpServer:
    """A live session with one MCP server (module doc). ``tools`` are its tools in
    function-calling shape; ``call`` runs one ``call_tool``; ``close`` stops the server."""

    def __init__(self, options: Any, *, startup_timeout: float = 30.0) -> None:
        self.options = options
        self.call_timeout = float(options.call_timeout)
        # The server's stderr, for the tail an error quotes; closed in close().
        self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._stop: asyncio.Event | None = None
        self._session: Any = None
        self._runner: Any = None
        self._startup_timeout = startup_timeout
        self._restart_lock = threading.Lock()
        self.tools: list[dict[str, Any]] = []
        self.dead: str | None = None
        #: how many times the server was started again after it went away
        self.restarts = 0
        try:
            self.tools = self._connect()
        except BaseException as exc:
            why = self._why_not(exc)  # before close: it reads the stderr log close drops
            self.close()
            raise McpServerError(why) from None

    def _connect(self) -> list[dict[str, Any]]:
        ready: Any = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        return ready.result(self._startup_timeout)

    def ensure_alive(self) -> None:
        """Start the server again if it went away (one restart however many threads ask)."""
        if self.dead is None:
            return
        with self._restart_lock:
            if self.dead is None:
                return
            self._shutdown_session()
            self._session = None
            try:
                self._connect()
            except BaseException as exc:  # noqa: BLE001 - this rollout is lost, named why
                raise McpServerError(self._why_not(exc)) from None
            self.dead = None
            self.restarts += 1

    # -- life --------------------------------------------------------------------------

    async def _start(self) -> list[dict[str, Any]]:
        started: asyncio.Future[list[dict[str, Any]]] = self._loop.create_future()
        stop = self._stop = asyncio.Event()
        self._runner = asyncio.ensure_future(self._hold(started, stop))
        return await started

    async def _hold(
        self, started: asyncio.Future[list[dict[str, Any]]], stop: asyncio.Event
    ) -> None:
        """Open the transport and the session, list the tools, then hold both open until
        ``close`` (the ``mcp`` client's contexts must be left on the task that entered them)."""
        from mcp.client.session import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._transport())
                read, write = streams[0], streams[1]
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                listed = await session.list_tools()
                self._session = session
                started.set_result([_function_tool(t) for t in listed.tools])
                await stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported to whoever waits
            if not started.done():
                started.set_exception(exc)
            else:
                self.dead = self.dead or f"{type(exc).__name__}: {exc}"

    def _transport(self) -> Any:
        o = self.options
        if o.url:
            import httpx2  # the mcp package's HTTP client
            from mcp.client.streamable_http import streamable_http_client

            client = httpx2.AsyncClient(headers=dict(o.headers), timeout=self.call_timeout)
            return _with_client(client, streamable_http_client(o.url, http_client=client))
        from mcp.client.stdio import StdioServerParameters, stdio_client

        argv = server_argv(o.command)
        params = StdioServerParameters(
            command=argv[0], args=argv[1:], env=dict(o.env) or None, cwd=_folder(o.cwd)
        )
        return stdio_client(params, errlog=self._errlog)

    def stderr_tail(self, lines: int = 3) -> str:
        """The last lines the server wrote to stderr (stdio servers only)."""
        try:
            self._errlog.flush()
            self._errlog.seek(0)
            text = self._errlog.read()
        except (OSError, ValueError):
            return ""
        # One line, newest last, runs of spaces collapsed (log formatters pad to the width):
        # it has to survive one-line error summaries.
        kept = [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]
        return " | ".join(kept[-lines:])

    def _why_not(self, exc: BaseException) -> str:
        o = self.options
        where = server_setting(o)
        cause = _root(exc)
        tail = self.stderr_tail()
        msg = f"the MCP server ({where}) could not be started or reached: {cause}"
        if tail:
            msg += f"\nits stderr ends: {tail}"
        fix = (
            "check that the server is running and the URL (with its path, e.g. /mcp) is right"
            if o.url
            else "check that the command starts an MCP server on stdio from this folder "
            "(world.cwd sets another)"
        )
        return f"{msg}\nfix: {fix}"

    def _shutdown_session(self) -> None:
        if self._stop is None or self._runner is None:
            return
        stop, runner = self._stop, self._runner

        async def _shut() -> None:
            stop.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(runner, 10)

        with contextlib.suppress(BaseException):
            asyncio.run_coroutine_threadsafe(_shut(), self._loop).result(15)
        self._stop = self._runner = None

    def close(self) -> None:
        """Stop the session and the server process; safe to call twice."""
        if self._loop.is_closed():
            return
        self._shutdown_session()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()
        with contextlib.suppress(OSError):
            self._errlog.close()

    # -- calls -------------------------------------------------------------------------

    def call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """One ``call_tool``: the tool's answer as plain JSON (its structured content, else
        its text parsed when it is JSON); a tool error comes back as ``{"error", "message"}``.
        Raises ``McpServerError`` with the server's stderr tail when the server is gone."""
        if self.dead is not None or self._session is None:
            raise McpServerError(self._gone())
        fut: Any = asyncio.run_coroutine_threadsafe(
            self._session.call_tool(name, dict(arguments)), self._loop
        )
        try:
            result = fut.result(self.call_timeout)
        except TimeoutError:
            fut.cancel()
            self.dead = f"{name} did not answer within world.call_timeout={self.call_timeout:g} s"
            raise McpServerError(
                f"{self._gone()}; raise world.call_timeout if the tool is slow, not stuck"
            ) from None
        except Exception as exc:  # the transport closed under the call: the server is gone
            self.dead = f"{type(exc).__name__}: {_root(exc)}"
            raise McpServerError(self._gone()) from None
        return _plain(result)

    def _gone(self) -> str:
        tail = self.stderr_tail()
        msg = f"the MCP server stopped answering ({self.dead or 'not connected'})"
        return (f"its stderr ends: {tail} -- " if tail else "") + msg

    def reset(self) -> None:
        """The configured reset: a tool call or a shell command (before each rollout)."""
        o = self.options
        if o.reset_tool:
            self.call(o.reset_tool, {})
        elif o.reset_command:
            _run_reset(o.reset_command, _folder(o.cwd))

    def state(self) -> Any:
        """The server's own account of its state (``world.state_tool``), or None."""
        if not self.options.state_tool:
            return None
        return self.call(self.options.state_tool, {})

    @property
    def stateful(self) -> bool:
        """A reset or a state tool is configured: a rollout's start state and its recorded
        end state are the server's, so rollouts must not overlap on it (``exclusive``)."""
        o = self.options
        return bool(o.reset_tool or o.reset_command or o.state_tool)

    @property
    def harness_tools(self) -> set[str]:
        """The reset and state tools: the harness calls them, the agent is not offered them
        (an agent calling the reset would wipe its own rollout's work)."""
        o = self.options
        return {t for t in (o.reset_tool, o.state_tool) if t}


@contextlib.asynccontextmanager
async def _with_client(client: Any, transport: Any) -> Any:
    async with client, transport as streams:
        yield streams


def _root(exc: BaseException) -> str:
    """The innermost error of an exception group / chain, as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}".splitlines()[0][:300]


def _function_tool(tool: Any) -> dict[str, Any]:
    """An MCP tool in the function-calling shape the agents and the writer read."""
    schema = dict(tool.input_schema or {}) if hasattr(tool, "input_schema") else {}
    if not schema:
        schema = dict(getattr(tool, "inputSchema", None) or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description or "",
            "parameters": schema,
        },
    }


def _plain(result: Any) -> Any:
    """A ``CallToolResult`` as JSON: structured content first, then the text parts."""
    is_error = bool(getattr(result, "is_error", getattr(result, "isError", False)))
    structured = getattr(result, "structured_content", None)
    if structured is None:
        structured = getattr(result, "structuredContent", None)
    texts = [c.text for c in (result.content or []) if getattr(c, "type", None) == "text"]
    text = "\n".join(texts)
    if is_error:
        return {"error": "tool_error", "message": text or "the tool reported an error"}
    if structured is not None:
        # A tool returning a non-object is wrapped by the server as {"result": value}; one
        # returning JSON text (json.dumps of its answer) means the object that text holds.
        inner = structured.get("result") if len(structured) == 1 else None
        if isinstance(inner, str):
            with contextlib.suppress(ValueError):
                parsed = json.loads(inner)
                if isinstance(parsed, dict | list):
                    return parsed
        return structured
    with contextlib.suppress(ValueError):
        return json.loads(text)
    return text


def narrow_tools(
    server_tools: list[dict[str, Any]], declared: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """The server's tools, narrowed to (and described by) ``declared`` when given: a tool
    named there keeps the server's schema unless it declares its own parameters."""
    if not declared:
        return server_tools
    by_name = {t["function"]["name"]: t for t in server_tools}
    out = []
    for tool in declared:
        fn = tool.get("function", tool)
        base = by_name.get(fn.get("name"))
        if base is None:
            continue
        merged = dict(base["function"])
        if fn.get("description"):
            merged["description"] = fn["description"]
        if fn.get("parameters"):
            merged["parameters"] = fn["parameters"]
        out.append({"type": "function", "function": merged})
    return out


class McpWorld(RolloutWorld):
    """One rollout's world over a live ``McpServer`` (module doc). The subclass is made per
    stage by ``mcp_world_class`` with the server bound as ``server``."""

    server: McpServer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A server that crashed in an earlier rollout is started again: that rollout is
        # lost, the stage goes on.
        self.server.ensure_alive()
        self.server.reset()
        # The server keeps its own records: what changed is read off its answers (the
        # checklist grades the tool results when a row carries no record of changes).
        self.changes = None  # type: ignore[assignment]  # None = no record kept; the base world's is a list

    def observed_state(self) -> str:
        """The row's ``world_state``: the state tool's answer (JSON text) when the server
        has one, else ``unknown``: the writer's planned state is never passed off as the
        server's."""
        if not self.server.options.state_tool:
            return "unknown"
        try:
            return json.dumps(self.server.state(), sort_keys=True, default=str)
        except McpServerError:
            return "unknown"

    def execute(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> dict[str, Any]:
        step = super().execute(name, arguments, call_id=call_id)
        if step.get("fault"):
            step["source"] = "injected"
        elif step.get("status") == "invalid":
            step["source"] = "engine"  # refused before the server: unknown tool, bad arguments
        elif name in HUMAN_TOOL_NAMES:
            step["source"] = "person"
        else:
            step["source"] = "server"
        return step

    async def aexecute(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None
    ) -> dict[str, Any]:
        """``execute`` for a model agent's loop: ``call_tool`` waits on a thread, so the
        other rollouts' model calls go on meanwhile (a blocking call would stall them all)."""
        return await asyncio.to_thread(self.execute, name, arguments, call_id=call_id)

    def _answer(self, name: str, args: dict[str, Any]) -> Any:
        """The server's answer (the mock world's record handlers are not used)."""
        return self.server.call(name, args)


def mcp_world_class(server: McpServer) -> type[McpWorld]:
    """The world class of one stage, bound to its server."""
    return type("McpWorld", (McpWorld,), {"server": server})


def _run_reset(command: str, cwd: str | None) -> None:
    """Run ``world.reset_command``; a failure raises ``McpServerError`` naming the command as
    a record shows it (``subprocess``'s own message quotes every argument)."""
    shown = f"world.reset_command ({redact_command(command)!r})"
    try:
        subprocess.run(shlex.split(command), check=True, timeout=60, cwd=cwd)
    except subprocess.CalledProcessError as exc:
        raise McpServerError(f"{shown} exited with status {exc.returncode}") from None
    except subprocess.TimeoutExpired:
        raise McpServerError(f"{shown} did not finish within 60 s") from None
    except OSError as exc:
        raise McpServerError(f"{shown} could not start: {exc.strerror}") from None
