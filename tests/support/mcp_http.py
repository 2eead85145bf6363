"""The notes MCP server (``tests.support.mcp_notes_server``) over streamable HTTP on a free
port of 127.0.0.1, for the tests that meet a ``world.url`` server."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def notes_server_over_http(ready_s: float = 30.0) -> Iterator[str]:
    """Start the server, wait until its port takes connections (up to ``ready_s``), yield
    its URL (``http://127.0.0.1:<port>/mcp``), and stop it on the way out."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.mcp_notes_server", "--http", str(port)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
