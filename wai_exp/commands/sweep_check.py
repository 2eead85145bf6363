"""A sweep checks every job's config before its first job runs.

Hydra checks each job of ``wai-exp -m ...`` only as it starts, so a sweep with one bad value
(``simulate.budget=8,1e12``) would run the good jobs first and fail at the bad one, minutes
or hours in. ``ValidateSweepCallback.on_multirun_start`` (registered first among the
config's Hydra callbacks, so before the MLflow parent run exists) expands the sweep as
Hydra's basic sweeper will, composes each job's config with Hydra's own loader and runs the
checks a single run makes (``commands.run.config_problem``). Any problem: one line per bad
job, naming the job's overrides, then exit 2; no job runs and no sweep folder is made.
Other sweepers (Optuna, Nevergrad ...) choose their jobs as they go and are left alone.

Then it pins the task set (``pin_tasks``). A job's asks depend on its agent: a row whose tool
fault fired queues a sibling ask in that row's cell (``knobs.writer_context_parents`` such
rows wait as mutation parents), so two skills at one seed draw the same first asks and then
part ways (75, 75 and 82 of 100 tasks shared at ``agent.skill=0.6,0.75,0.9``). With
``sweep.tasks=same`` (the default) a sweep whose jobs differ by more than seed/replicate adds
``knobs.writer_context_parents=0`` to every job's overrides: failing rows steer nothing, so a
seed draws the same asks whatever the agent does and every value is measured on the same
tasks. The override is in each job's ``.hydra/overrides.yaml`` and ``wai.override_list``, so
a child re-runs alone as it ran in the sweep; a single run never changes.
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
from wai_exp.domain.plurals import counted

log = logging.getLogger(__name__)

EXIT_INVALID_CONFIG = 2


class ValidateSweepCallback(Callback):
    """Refuse a sweep (exit 2) when any of its jobs would be refused."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        problems = sweep_problems(config)
        if not problems:
            return
        from wai_exp.domain.secrets import redact_text

        n = len(problems)
        lines = [f"wai-exp: {counted(n, 'job')} of this sweep would be refused; no job ran:"]
        for overrides, problem in problems:
            lines.append(f"  job {' '.join(overrides)}:")
            lines.extend(f"    {line}" for line in problem.splitlines())
        lines.append("Fix or drop those values and run the sweep again.")
        sys.stderr.write(redact_text("\n".join(lines)) + "\n")
        sys.stderr.flush()
        sys.exit(EXIT_INVALID_CONFIG)


#: Swept keys that cannot change the asks a seed draws (who answers, who grades, what is
#: kept): with the pin, every value of such a sweep runs the same tasks per seed.
_DRAW_NEUTRAL = ("agent", "judge", "selection", "publish", "tracking", "name")


class PinTasksCallback(Callback):
    """Give every value of a sweep the same tasks (``pin_tasks``); registered after
    ``ValidateSweepCallback`` and before the MLflow parent run, which records the override."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        line = pin_tasks(config)
        if line:
            sys.stderr.write(f"wai-exp sweep: {line}\n")
            sys.stderr.flush()


def pin_tasks(config: Any) -> str | None:
    """Pin the sweep's task set when ``sweep.tasks`` is ``same``: append ``PIN_KNOB=0`` to
    ``config.hydra.overrides.task`` (what the basic sweeper expands into every job) when the
    jobs differ by more than seed/replicate and their asks would follow each agent's
    failures. Returns the line that tells the user what happened (None: nothing to say).

    Left alone: another sweeper, a seed-only sweep, ``sweep.tasks=own``, an explicit
    ``knobs.writer_context_parents=`` (the user chose), asks already fixed (``simulate.tasks``
    or ``simulate.rows``, or the knob already 0). A model writer (``simulate.simulator``)
    writes each job's asks itself: the line says the tasks are not pinned and how to pin them.
    """
    from omegaconf import OmegaConf, read_write

    from wai_exp.tracking.sweep import (
        PIN_KNOB,
        PIN_OVERRIDE,
        REPLICATE_KEYS,
        parse_overrides,
        swept_keys,
    )

    jobs = sweep_jobs(config)
    if not jobs or OmegaConf.select(config, "sweep.tasks", default="same") != "same":
        return None
    keys = swept_keys([{"overrides": job} for job in jobs])
    if not [k for k in keys if k not in REPLICATE_KEYS]:
        return None
    task = config.hydra.overrides.task
    if PIN_KNOB in parse_overrides([str(o) for o in task]):
        return None
    if any(OmegaConf.select(config, k) for k in ("simulate.tasks", "simulate.rows")):
        return None
    if not OmegaConf.select(config, PIN_KNOB, default=0):
        return None
    if OmegaConf.select(config, "simulate.simulator"):
        return (
            "tasks not pinned: a model writer (simulate.simulator) writes each job's asks; "
            "pin them with simulate.tasks=<a run's simulate/rows.jsonl>"
        )
    with read_write(task):
        task.append(PIN_OVERRIDE)
    drawing = [k for k in keys if k not in REPLICATE_KEYS and not k.startswith(_DRAW_NEUTRAL)]
    if not drawing:
        return (
            f"every value runs the same tasks per seed: added {PIN_KNOB}=0 to each job "
            "(failing rows do not steer later asks); sweep.tasks=own keeps each job's steering"
        )
    return (
        f"added {PIN_KNOB}=0 to each job (failing rows do not steer later asks), but "
        f"{', '.join(drawing)} can change what the writer draws, so the values' task sets may "
        "still differ: the table says how many tasks every value shared; pin them with "
        "simulate.tasks=<a run's simulate/rows.jsonl>"
    )


def sweep_jobs(config: Any) -> list[list[str]] | None:
    """The override list of every job the basic sweeper will launch for ``config`` (the
    composed multirun config), in its order; None for another sweeper."""
    from wai_exp.tracking.sweep import planned_jobs

    return planned_jobs(config)


def sweep_problems(config: Any) -> list[tuple[list[str], str]]:
    """``(job overrides, problem)`` for each job whose config a run would refuse or Hydra
    cannot compose (a swept config file whose defaults list names no option). A job whose
    config composes but cannot be resolved here is left to the job unless it fails wherever
    it runs. Identical job configs are checked once."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf, open_dict

    from wai_exp.commands.run import config_dict, config_problem, unresolved_message

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
        except HydraException as exc:
            # Hydra's launcher composes each job with this same call as the job starts: a
            # job that fails here fails there, after the jobs before it ran.
            out.append((overrides, _composition_message(exc)))
            continue
        try:
            with open_dict(job_cfg):
                del job_cfg["hydra"]
            plain = config_dict(OmegaConf.to_container(job_cfg, resolve=True))
        except Exception as exc:  # noqa: BLE001 - the job reports its own config error
            if _unresolvable_anywhere(exc):
                out.append((overrides, unresolved_message(exc)))
            else:
                log.debug("sweep check: job %s not composed here: %s", overrides, exc)
            continue
        key = json.dumps(plain, sort_keys=True, default=str)
        if key not in seen:
            seen[key] = config_problem(plain, start_dir)
        if seen[key]:
            out.append((overrides, str(seen[key])))
    return out


def _composition_message(exc: Exception) -> str:
    """Hydra's reason a job's config cannot be composed, and the fix."""
    why = str(exc).strip() or type(exc).__name__
    return (
        f"Hydra cannot compose this job's config: {why}\n"
        "Fix the config file it names, or drop the value (`wai-exp ... --cfg job` with the "
        "job's overrides shows the same error and starts nothing)."
    )


def _unresolvable_anywhere(exc: Exception) -> bool:
    """Whether ``exc`` (resolving a job's config here) fails the job wherever it runs: a
    ``${...}`` naming a key the config lacks, an unset variable or a resolver nobody
    registered. Left to the job: a ``${hydra...}`` (its hydra node is not composed here)."""
    from omegaconf.errors import InterpolationKeyError, UnsupportedInterpolationType

    why = str(exc).split("\n", 1)[0]
    if isinstance(exc, InterpolationKeyError):
        return "key 'hydra" not in why
    return isinstance(exc, UnsupportedInterpolationType) or "Environment variable '" in why
