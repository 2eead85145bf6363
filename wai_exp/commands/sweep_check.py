"""A sweep checks every job's config before its first job runs.

Hydra checks each job of ``wai-exp -m ...`` only as it starts, so a sweep with one bad value
(``simulate.budget=8,1e12``) would run the good jobs first and fail at the bad one, minutes
or hours in. ``ValidateSweepCallback.on_multirun_start`` (registered first among the
config's Hydra callbacks, so before the MLflow parent run exists) expands the sweep as
Hydra's basic sweeper will, composes each job's config with Hydra's own loader and runs the
checks a single run makes (``commands.run.config_problem``). Any problem: one line per bad
job, naming the job's overrides, then exit 2; no job runs and no sweep folder is made.
Other sweepers (Optuna, Nevergrad ...) choose their jobs as they go and are left alone.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from wai_exp.commands import START_DIR_ENV

log = logging.getLogger(__name__)

EXIT_INVALID_CONFIG = 2
_BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


class ValidateSweepCallback(Callback):
    """Refuse a sweep (exit 2) when any of its jobs would be refused."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        problems = sweep_problems(config)
        if not problems:
            return
        from wai_exp.domain.secrets import redact_text

        n = len(problems)
        lines = [
            f"wai-exp: {n} job{'s' if n > 1 else ''} of this sweep would be refused; no job ran:"
        ]
        for overrides, problem in problems:
            lines.append(f"  job {' '.join(overrides)}:")
            lines.extend(f"    {line}" for line in problem.splitlines())
        lines.append("Fix or drop those values and run the sweep again.")
        sys.stderr.write(redact_text("\n".join(lines)) + "\n")
        sys.stderr.flush()
        sys.exit(EXIT_INVALID_CONFIG)


def sweep_jobs(config: Any) -> list[list[str]] | None:
    """The override list of every job the basic sweeper will launch for ``config`` (the
    composed multirun config), in its order; None for another sweeper."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    sweeper = OmegaConf.select(config, "hydra.sweeper._target_")
    if sweeper != _BASIC_SWEEPER:
        return None
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    arguments = [f"{k}={v}" for k, v in dict(params).items()]
    task = OmegaConf.to_container(config.hydra.overrides.task, resolve=False)
    assert isinstance(task, list)  # hydra.overrides.task is a list of override strings
    arguments += [str(a) for a in task]
    parsed = OverridesParser.create().parse_overrides(arguments)
    [jobs] = BasicSweeper.split_arguments(parsed, None)
    return [list(job) for job in jobs]


def sweep_problems(config: Any) -> list[tuple[list[str], str]]:
    """``(job overrides, problem)`` for each job whose config a run would refuse. A job
    whose config cannot be composed here is left to Hydra (it checks each job's composition
    itself before launching). Identical job configs are checked once."""
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf, open_dict

    from wai_exp.commands.run import config_dict, config_problem

    jobs = sweep_jobs(config)
    if not jobs:
        return []
    loader = GlobalHydra.instance().config_loader()
    start_dir = Path(os.environ.get(START_DIR_ENV) or os.getcwd())
    seen: dict[str, str | None] = {}
    out = []
    for overrides in jobs:
        try:
            job_cfg = loader.load_sweep_config(config, overrides)
            with open_dict(job_cfg):
                del job_cfg["hydra"]
            plain = config_dict(OmegaConf.to_container(job_cfg, resolve=True))
        except Exception as exc:  # noqa: BLE001 - the job reports its own config error
            log.debug("sweep check: job %s not composed here: %s", overrides, exc)
            continue
        key = json.dumps(plain, sort_keys=True, default=str)
        if key not in seen:
            seen[key] = config_problem(plain, start_dir)
        if seen[key]:
            out.append((overrides, str(seen[key])))
    return out
