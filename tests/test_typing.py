"""The type check: ``mypy wai_exp`` finds nothing at pyproject's [tool.mypy] strictness
(every function body checked, annotated or not; no partly annotated signature; no ignore or
cast that does nothing), and that strictness is the one in force."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mypy", reason="mypy is in the test extra")


def mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1800,
    )


@pytest.mark.slow
def test_mypy_finds_no_errors_in_the_package():
    done = mypy("wai_exp")
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
    assert done.stdout.startswith("Success: no issues found"), done.stdout


def test_the_stated_strictness_is_in_force(tmp_path):
    # One mistake per setting that is off by default: each must be reported.
    (tmp_path / "probe.py").write_text(
        "def untyped():\n"
        "    return 1 + 'a'\n"  # check_untyped_defs
        "\n"
        "def half(x: int, y):\n"  # disallow_incomplete_defs
        "    return x\n"
        "\n"
        "n: int = 1  # type: ignore[assignment]\n"  # warn_unused_ignores
        "m = int(n)\n"
        "same = 1 == 'a'\n"  # strict_equality
    )
    done = mypy("--no-incremental", "probe.py", cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    for code in ("[operator]", "[no-untyped-def]", "[unused-ignore]", "[comparison-overlap]"):
        assert code in done.stdout, (code, done.stdout)
