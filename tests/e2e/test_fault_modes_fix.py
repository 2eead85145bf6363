"""Narrowing ``world.fault_modes`` to modes without the default one is refused before any
work, naming the setting that fixes it, not only the mismatch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def test_fault_modes_without_the_default_mode_names_the_fix(tmp_path: Path) -> None:
    res = subprocess.run(
        [WAI_EXP, "+experiment=eval", "world.fault_modes=[error]", "tracking=none"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert "set world.default_fault_mode=error" in out
    assert "or add 'timeout' to world.fault_modes" in out
    assert not (tmp_path / "outputs").exists()


def test_world_default_fault_rate_is_refused_naming_simulate_fault_rate(tmp_path: Path) -> None:
    # A run gives every ask simulate.fault_rate, so world.default_fault_rate=0 would still
    # have faults firing at 0.8 under rl: refused before any work, naming the knob that works.
    res = subprocess.run(
        [WAI_EXP, "+experiment=eval", "world.default_fault_rate=0", "tracking=none"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert "set simulate.fault_rate=0" in out
    assert not (tmp_path / "outputs").exists()
