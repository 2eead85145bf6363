"""A small stateful MCP server for the ``world=mcp`` tests, written with the ``mcp`` package's
server API: a notes store with ids like ``NOTE-1234``.

Run over stdio: ``python -m tests.support.mcp_notes_server``; over streamable HTTP:
``python -m tests.support.mcp_notes_server --http PORT``. Dials through the environment:
``NOTES_CRASH_AFTER=N`` exits the process on the N-th tool call (a crash mid-run);
``NOTES_NO_TOOLS=1`` serves no tools; ``NOTES_ECHO_ENV=VAR`` makes ``list_notes`` report
whether ``VAR`` reached the server (never its value); ``NOTES_CALL_LOG=PATH`` appends one
JSON line per agent tool call the server answered (``{"tool", "arguments", "in_flight"}``:
the server's own count of what reached it, and how many calls it was answering at once);
``NOTES_SLOW_S=S`` makes every agent tool call take S seconds.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("notes")
_notes: dict[str, dict[str, str]] = {}
_calls = {"n": 0, "in_flight": 0}
_lock = threading.Lock()


def _tick(tool: str, **arguments: str) -> None:
    with _lock:  # the server runs sync tools on worker threads, several at once
        _calls["n"] += 1
        _calls["in_flight"] += 1
        entry = {"tool": tool, "arguments": arguments, "in_flight": _calls["in_flight"]}
        if log := os.environ.get("NOTES_CALL_LOG"):
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
    time.sleep(float(os.environ.get("NOTES_SLOW_S", "0") or 0))
    with _lock:
        _calls["in_flight"] -= 1
    crash_after = int(os.environ.get("NOTES_CRASH_AFTER", "0") or 0)
    if crash_after and _calls["n"] >= crash_after:
        print(f"notes server: fatal: simulated crash on call {_calls['n']}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(3)


def _register() -> None:
    @server.tool()
    def create_note(title: str, body: str) -> dict[str, str]:
        """Create a note. Returns its id, like NOTE-1001."""
        _tick("create_note", title=title, body=body)
        note_id = f"NOTE-{1001 + len(_notes)}"
        _notes[note_id] = {"note_id": note_id, "title": title, "body": body}
        return _notes[note_id]

    @server.tool()
    def get_note(note_id: str) -> dict[str, str]:
        """Read one note by its id (NOTE-1234)."""
        _tick("get_note", note_id=note_id)
        note = _notes.get(note_id.strip().upper())
        if note is None:
            raise ToolError(f"no note {note_id}")
        return note

    @server.tool()
    def delete_note(note_id: str) -> dict[str, str]:
        """Delete the note with this id (NOTE-1234)."""
        _tick("delete_note", note_id=note_id)
        if _notes.pop(note_id.strip().upper(), None) is None:
            raise ToolError(f"no note {note_id}")
        return {"deleted": note_id}

    @server.tool()
    def list_notes() -> dict[str, object]:
        """Every note's id and title."""
        _tick("list_notes")
        out: dict[str, object] = {"notes": [[k, v["title"]] for k, v in _notes.items()]}
        if var := os.environ.get("NOTES_ECHO_ENV"):
            out["env_seen"] = var in os.environ and bool(os.environ[var])
        return out

    @server.tool()
    def reset_notes() -> dict[str, int]:
        """Forget every note (the tests' reset tool)."""
        _notes.clear()
        return {"notes": 0}

    @server.tool()
    def notes_state() -> dict[str, object]:
        """The whole store (the tests' state tool)."""
        return {"count": len(_notes), "ids": sorted(_notes)}


if not os.environ.get("NOTES_NO_TOOLS"):
    _register()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
