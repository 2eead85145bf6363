"""What the console script's process imports: every command pays its imports, and so does
every e2e test's subprocess. A library a command never uses is left to the process that
does (MLflow to the tracking writer, matplotlib to the plot process, scipy to the numbers
that need it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: Libraries no scripted eval needs in the wai-exp process itself.
NOT_ON_THE_EVAL_PATH = {
    "scipy", "mlflow", "matplotlib", "pandas", "pyarrow", "sqlalchemy", "ray", "torch", "trl",
    "transformers", "datasets", "mcp", "httpx", "aiohttp",
}  # fmt: skip

_MAIN = """
import json, sys
from wai_exp.cli import main
out, args, code = sys.argv[1], sys.argv[2:], 0  # main hands Hydra its own sys.argv
try:
    main(args)
except SystemExit as exc:
    code = exc.code
with open(out, "w") as fh:
    json.dump({"exit": code, "modules": sorted(sys.modules)}, fh)
"""


def _imported(cwd: Path, *args: str) -> tuple[object, set[str], str]:
    """Run ``wai-exp ARGS`` through ``wai_exp.cli.main`` in a fresh interpreter: its exit
    status, the modules it imported and its stdout."""
    out = cwd / "imported.json"
    done = subprocess.run(
        [sys.executable, "-c", _MAIN, str(out), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HYDRA_FULL_ERROR": "1"},
    )
    assert out.exists(), done.stderr
    seen = json.loads(out.read_text())
    return seen["exit"], set(seen["modules"]), done.stdout


def test_a_small_eval_imports_no_scipy_nor_any_heavy_stack(tmp_path):
    """The run computes its stages and its summary (pass@1, the do-nothing floor) with
    numpy alone: scipy is for the re-run variance's chi-square and the intervals that need
    a quantile, neither of which one task has."""
    code, modules, stdout = _imported(
        tmp_path, "+experiment=eval", "simulate.budget=4", "tracking=none"
    )
    assert code in (0, None), stdout
    assert "pass@1: " in stdout and "floor: " in stdout
    assert "numpy" in modules  # the run did compute
    assert {m.split(".")[0] for m in modules} & NOT_ON_THE_EVAL_PATH == set()


def test_help_imports_no_config_models(tmp_path):
    """``wai-exp --help`` has no override to check against the config models: it never
    pays for pydantic."""
    code, modules, stdout = _imported(tmp_path, "--help")
    assert code == 0
    assert "Config groups" in stdout
    assert not any(m == "pydantic" or m.startswith("wai_exp.config") for m in modules)
