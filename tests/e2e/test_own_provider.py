"""Your own provider from the console script: one module that registers it, found through
its package's ``wai_exp.providers`` entry point; ``wai-exp agent=<name>`` then composes,
validates and reaches for the provider's server before any work."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_cli import run_dirs, wai

PROVIDER_MODULE = """
from wai_exp.llm.providers import register_provider

register_provider("together", base_url="http://127.0.0.1:9/v1", url_env="TOGETHER_BASE_URL")
"""


def installed_plugin(root: Path) -> dict[str, str]:
    site = root / "site"
    site.mkdir()
    (site / "my_providers.py").write_text(PROVIDER_MODULE)
    info = site / "my_providers-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-providers\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[wai_exp.providers]\ntogether = my_providers\n")
    return {"PYTHONPATH": str(site)}


def test_agent_equals_a_registered_provider_composes_and_is_checked_before_work(tmp_path):
    env = installed_plugin(tmp_path)
    shown = wai(tmp_path, "agent=together", "agent.model=m", "--cfg", "job", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "kind: together" in shown.stdout and "model: m" in shown.stdout
    # The run is checked like any provider's: nothing answers at its server (port 9), so it
    # is refused before work, naming the server; the config itself was accepted.
    done = wai(tmp_path, "+experiment=eval", "tracking=none", "agent=together",
               "agent.model=m", env=env, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert "agent=together: the model server at http://127.0.0.1:9/v1 cannot be reached" in (
        done.stderr
    )
    assert not run_dirs(tmp_path)
