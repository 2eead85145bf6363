"""The layer contract: imports only go down the layer order, and no two top-level packages
import each other; inside score, subpackages import only down (pyproject's
[tool.importlinter], checked by import-linter)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which(
    "lint-imports"
)

pytestmark = pytest.mark.skipif(LINT is None, reason="import-linter is in the test extra")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over the wai_exp package under ``root`` with pyproject's contracts."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT), "--no-cache", str(ROOT / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_package_keeps_the_layer_order_and_has_no_package_cycles():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 kept, 0 broken" in done.stdout


def copy_package(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "wai_exp", tmp_path / "wai_exp", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path


@pytest.mark.parametrize(
    ("module", "bad_import", "importer", "imported"),
    [
        # domain is the bottom layer: it may not reach up into the pipeline.
        (
            "domain/dimensions.py",
            "from wai_exp.pipeline import dag",
            "domain.dimensions",
            "pipeline.dag",
        ),
        # score sits below simulate, even through a lazy import inside a function.
        (
            "score/grade/checklist.py",
            "def _late():\n    from wai_exp.simulate import writer",
            "score.grade.checklist",
            "simulate.writer",
        ),
        # Inside score, subpackages import only down judges -> select -> diagnose -> grade
        # -> stats: a grade module may not read select's helpers.
        (
            "score/grade/length.py",
            "def _late():\n    from wai_exp.score.select import trim",
            "score.grade.length",
            "score.select.trim",
        ),
        # llm, rows and config are siblings: none imports another.
        ("rows/keys.py", "import wai_exp.config.models", "rows.keys", "config.models"),
    ],
)
def test_a_bad_import_breaks_the_contract(tmp_path, module, bad_import, importer, imported):
    root = copy_package(tmp_path)
    path = root / "wai_exp" / module
    path.write_text(path.read_text() + f"\n\n{bad_import}\n")
    done = lint(root)
    assert done.returncode != 0, done.stdout
    assert "0 broken" not in done.stdout
    # The report names the import that broke it.
    assert f"wai_exp.{importer} -> wai_exp.{imported}" in done.stdout, done.stdout
