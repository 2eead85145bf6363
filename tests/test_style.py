"""The code base is ruff clean: lint rules and formatting, as pyproject.toml configures them.

Whoever picks the code up next relies on one style; a change that breaks it fails here with
ruff's own list of what to fix.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_check_finds_nothing():
    done = _ruff("check", ".")
    assert done.returncode == 0, f"run `ruff check --fix .`:\n{done.stdout}{done.stderr}"


def test_ruff_format_changes_nothing():
    done = _ruff("format", "--check", ".")
    assert done.returncode == 0, f"run `ruff format .`:\n{done.stdout}{done.stderr}"
