"""The Hydra config tree, shipped as the package ``wai_exp.conf``.

Importing it (Hydra does, to find ``pkg://wai_exp.conf``) registers the ``wai_run_token``
resolver the default run folder uses: ``outputs/<date>/<H-M-S>-<token>``, a short random
token per process, so runs started in the same second never share a folder.
"""

from __future__ import annotations

import secrets
import sys

from omegaconf import OmegaConf

#: This process's token (one per process: every path that reads it agrees).
RUN_TOKEN = secrets.token_hex(3)

if not OmegaConf.has_resolver("wai_run_token"):
    OmegaConf.register_new_resolver("wai_run_token", lambda: RUN_TOKEN)


def shipped_presets() -> list[str]:
    """The presets this package ships (``experiment/*.yaml``), ``rl_round`` first: the
    ``--help`` footer lists them from the files, so a new preset is never left out."""
    from pathlib import Path

    names = sorted(p.stem for p in (Path(__file__).parent / "experiment").glob("*.yaml"))
    return sorted(names, key=lambda n: n != "rl_round")


if not OmegaConf.has_resolver("wai_presets"):
    OmegaConf.register_new_resolver("wai_presets", lambda: ", ".join(shipped_presets()))

# Hydra reads this package to compose: judge=<name> and agent=<provider> then compose for a
# judge or provider registered in Python before it (those registered once Hydra is loaded
# offer themselves; the console script offers every one in wai_exp.commands.run).
if "hydra" in sys.modules:
    from wai_exp.domain import judges, providers

    judges.offer_to_hydra()
    providers.offer_to_hydra()
