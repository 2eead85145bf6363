"""What the registries users extend (judges, providers) share: the entry points a package
registers under, and the Hydra option a registered name gets when no file ships for it.

A registry lives in ``domain`` so the config check can read it; Hydra is imported here only
when a caller composes (``offer_options``), never by the config check.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from importlib import resources
from typing import Any


def load_group(group: str, errors: dict[str, str]) -> list[tuple[str, Any]]:
    """``(name, object)`` for every entry point of ``group`` an installed package declares
    (importing a module registers what it defines); one that fails to import is recorded
    in ``errors`` under its name, so a run naming it says why, and runs that never name it
    are not stopped by it."""
    loaded = []
    for ep in _installed_entry_points().select(group=group):
        try:
            loaded.append((ep.name, ep.load()))
        except Exception as exc:
            errors[ep.name] = f"entry point {ep.value!r} failed to load: {exc!r}"
    return loaded


@functools.cache
def _installed_entry_points() -> Any:
    """Every installed package's entry points, read once per process: each read walks every
    distribution's metadata (about 7 ms in a venv of 250 packages), and each registry (judges,
    providers) asks for its own group."""
    from importlib.metadata import entry_points

    return entry_points()


def offer_options(group: str, names: Iterable[str], base: str, **fields: Any) -> None:
    """Make ``<group>=<name>`` compose for each of ``names`` without a shipped
    ``conf/<group>/<name>.yaml``: a node in Hydra's config store holding the shipped
    ``base`` option's section with ``kind: <name>`` and ``fields`` laid over it (so every
    key of the group can be overridden as usual)."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    folder = resources.files("wai_exp.conf") / group
    section: dict[str, Any] | None = None
    for name in names:
        if (folder / f"{name}.yaml").is_file():
            continue
        if section is None:
            loaded = OmegaConf.to_container(OmegaConf.create((folder / f"{base}.yaml").read_text()))
            section = {str(k): v for k, v in loaded.items()} if isinstance(loaded, dict) else {}
        node = {**section, **fields, "kind": name}
        ConfigStore.instance().store(group=group, name=name, node=node, provider="wai_exp")
