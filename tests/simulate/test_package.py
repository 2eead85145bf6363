"""`wai.simulate(...)` works whichever simulate module a user touched first."""

import subprocess
import sys


def test_wai_simulate_is_callable_after_a_submodule_import():
    code = (
        "import wai_exp as wai\n"
        "wai.WorldOptions\n"  # imports wai_exp.simulate.world, binding the package first
        "data = wai.simulate(mode='rl', budget=16, seed=0)\n"
        "assert len(data.rows) == 16, len(data.rows)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
