"""``wai-exp [overrides]``: compose, validate, run the pipeline, summarise. A thin Hydra shell.

``app`` is the ``@hydra.main`` entry point; ``run(cfg)`` is the plain function it wraps (and
returns the exit status), so tests and other tools can call it with a composed config.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from wai_exp.commands import START_DIR_ENV

log = logging.getLogger("wai_exp")


EXIT_INVALID_CONFIG = 2

# The default run folder's ``wai_run_token`` resolver (registered on import of the config
# package; imported here too, for configs composed from another search path).
import wai_exp.conf  # noqa: E402, F401
from wai_exp.domain import judges, providers  # noqa: E402

# judge=<name> and agent=<provider> compose for a judge or provider registered in Python
# (a package's entry point, or your module imported before composing).
judges.offer_to_hydra()
providers.offer_to_hydra()


class RunFailed(RuntimeError):
    """Raised inside a sweep job (instead of exiting) so the sweep finishes its other jobs."""


def config_dict(container: object) -> dict[str, Any]:
    """A composed config as plain containers (``OmegaConf.to_container``): a dict whose
    keys are the YAML's strings. Raises ``TypeError`` for anything else."""
    if not isinstance(container, dict):
        raise TypeError(f"a composed config is a mapping, got {type(container).__name__}")
    return container


def _error(message: str) -> None:
    from wai_exp.domain.secrets import redact_text

    message = redact_text(message)
    log.error(message)  # into <run dir>/wai-exp.log
    sys.stderr.write(f"wai-exp: {message}\n")
    sys.stderr.flush()


def _warn_before_work(plain: dict[str, Any]) -> None:
    """Print the inputs' warnings (``input_check.input_notes``) before the first stage."""
    from wai_exp.pipeline.input_check import input_notes

    for note in input_notes(plain):
        log.warning(note)
        sys.stderr.write(f"wai-exp: warning: {note}\n")
    sys.stderr.flush()


def _typed_overrides(hc: Any) -> list[str]:
    """This run's overrides as the user typed them: unresolved, and for a multirun job
    without the escapes Hydra's sweeper wrote into its values (``http\\://h``)."""
    from hydra.types import RunMode

    from wai_exp.tracking.sweep import as_typed

    return as_typed(hc.overrides.task, from_sweeper=hc.mode == RunMode.MULTIRUN)


def run(cfg: DictConfig) -> int:
    """Validate ``cfg``, run its pipeline and print the summary. Returns the exit status:
    0 done, 1 a stage failed, 2 invalid config, 3 (``pipeline.refusal_exit_code``) the gate
    refused, 130 interrupted (Ctrl-C), 143 stopped by SIGTERM. Nothing is recorded in MLflow unless the config is valid.
    """
    from hydra.core.hydra_config import HydraConfig

    from wai_exp.domain.secrets import (
        install_log_redaction,
        install_stream_redaction,
        redact_text,
        register_config_secrets,
    )

    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    start_dir = Path(os.environ.get(START_DIR_ENV) or hc.runtime.cwd)
    install_log_redaction()
    install_stream_redaction()  # a launcher's worker process never passed wai_exp.cli
    try:
        plain = config_dict(OmegaConf.to_container(cfg, resolve=True))
    except Exception as exc:  # an interpolation that cannot resolve
        scrub_hydra_files(hydra_copies(hc, run_dir))
        return _refuse(unresolved_message(exc), run_dir, hc.output_subdir)
    register_config_secrets(plain)
    scrub_hydra_files(hydra_copies(hc, run_dir))
    typed, problem = checked_config(plain, start_dir)
    if problem:
        return _refuse(problem, run_dir, hc.output_subdir)
    _warn_before_work(plain)

    # The config is good: the tracker starts its writer process now, first, so the writer's
    # MLflow import runs on another core while this process imports the runner and the
    # stages compute. Never earlier: a refused config leaves no process behind.
    try:
        tracker = _make_tracker(plain, start_dir)
    except ValueError as exc:  # TrackingConfigError: e.g. a file-store URI; says the fix
        return _refuse(f"invalid config: {exc}", run_dir, hc.output_subdir)

    from wai_exp.pipeline.runner import run_pipeline, summarize
    from wai_exp.pipeline.stop import watch_signals

    choices = hc.runtime.choices
    preset = choices.get("experiment") if choices else None
    # SIGTERM stops the run as Ctrl-C does: the runner keeps the streamed rows resumable and
    # marks the tracking run KILLED, naming the signal.
    with watch_signals():
        outcome = run_pipeline(
            plain,
            run_dir=run_dir,
            start_dir=start_dir,
            tracker=tracker,
            overrides=_typed_overrides(hc),
            preset=preset,
            typed=typed,
        )
    summary = summarize(outcome)
    log.info("\n%s", summary)
    print(summary, flush=True)
    if outcome.error and outcome.status == "failed":
        where = run_dir / "error.log"
        sys.stderr.write(f"wai-exp: {redact_text(outcome.error)}\n  (traceback in {where})\n")
    return outcome.exit_code


def unresolved_message(exc: Exception) -> str:
    """What to say when the composed config does not resolve: the key, OmegaConf's reason
    and the fix (OmegaConf's own message names the key, never what to do)."""
    from omegaconf.errors import (
        InterpolationKeyError,
        OmegaConfBaseException,
        UnsupportedInterpolationType,
    )

    if not isinstance(exc, OmegaConfBaseException):
        return f"invalid config: {exc}"
    why = str(getattr(exc, "msg", None) or exc).split("\n", 1)[0]
    env = re.search(r"Environment variable '([^']+)' not found", why)
    if env:
        var = env.group(1)
        fix = f"export {var}=<value>, or give it a default: ${{oc.env:{var},<default>}}"
    elif isinstance(exc, InterpolationKeyError):
        fix = "point the ${...} at a key the config has (`wai-exp --cfg job` prints them)"
    elif isinstance(exc, UnsupportedInterpolationType):
        fix = "use a resolver that exists (oc.env, oc.select, now, ...)"
    elif "Recursive interpolation" in why:
        fix = "give it a value, or a ${...} that does not lead back to it"
    else:
        fix = "fix the ${...}"
    return (
        f"invalid config: {getattr(exc, 'full_key', None) or 'a value'}: {why}. Fix: {fix}; "
        "to keep a ${...} as plain text, escape it: \\${...}"
    )


def config_problem(plain: dict[str, Any], start_dir: Path) -> str | None:
    """Why the resolved config ``plain`` cannot run (every problem, as one message), or
    None: the config models, the named imports, the pipeline's stages, then the inputs
    (files, keys, the stores, the servers). The checks a run makes before any work; a
    sweep makes them for every job before the first one runs (``commands.sweep_check``)."""
    return checked_config(plain, start_dir)[1]


def checked_config(plain: dict[str, Any], start_dir: Path) -> tuple[Any, str | None]:
    """``(RootConfig, None)`` when ``plain`` can run, else ``(None, the problem)``: the
    checks of ``config_problem``, keeping the validated config the run then reads."""
    from wai_exp.commands.validate import ConfigError, import_problems, validate_config
    from wai_exp.pipeline.dag import PipelineError, plan
    from wai_exp.pipeline.registry import UnknownStageKind, resolve

    try:
        typed = validate_config(plain)
        missing = import_problems(plain)
        if missing:
            raise ConfigError(missing)
        for spec in plan(plain["pipeline"]["stages"]):
            resolve(spec.kind, spec.target)
        # Files, values the build can serve, keys, the store: before any stage runs.
        from wai_exp.pipeline.input_check import input_problems

        bad_inputs = input_problems(plain, start_dir)
        if bad_inputs:
            raise ConfigError(bad_inputs)
    except (ConfigError, PipelineError, UnknownStageKind) as exc:
        return None, str(exc)
    return typed, None


def _refuse(message: str, run_dir: Path, subdir: str | None) -> int:
    """Report an invalid config and leave nothing behind: the run folder Hydra made for this
    run is removed when it holds only Hydra's own files and the log. Returns exit status 2."""
    _error(message)
    discard_run_dir(run_dir, subdir)
    return EXIT_INVALID_CONFIG


def discard_run_dir(run_dir: Path, subdir: str | None) -> bool:
    """Remove ``run_dir`` (and its parents up to ``outputs``/``multirun`` once empty) when it
    holds nothing but Hydra's ``subdir`` and ``*.log`` files. True when removed; never raises."""
    import shutil

    if _holds_cwd(run_dir):
        return False  # hydra.run.dir=. (or above): the user's own folder, never removed
    try:
        entries = list(run_dir.iterdir())
    except OSError:
        return False
    ours = {subdir} if subdir else set()
    if any(not (e.name in ours or (e.is_file() and e.suffix == ".log")) for e in entries):
        return False  # something else lives here: not ours to delete
    shutil.rmtree(run_dir, ignore_errors=True)
    for parent in list(run_dir.parents)[:2]:  # <date>/, then outputs/ (or the sweep's)
        if _holds_cwd(parent):
            break  # hydra.run.dir=outputs/x: outputs/ may go, the folder it sits in stays
        try:
            parent.rmdir()  # only when empty
        except OSError:
            break
    return True


def _holds_cwd(path: Path) -> bool:
    """Whether ``path`` is the working folder or one of its parents."""
    try:
        here, there = Path.cwd().resolve(), path.resolve()
    except OSError:
        return True  # unsure: treat it as the user's
    return there == here or there in here.parents


def hydra_copies(hc: Any, run_dir: Path) -> list[Path]:
    """The config copies Hydra wrote before this code runs: ``<run dir>/.hydra/*.yaml`` and,
    in a sweep, ``<sweep dir>/multirun.yaml`` (written once by the sweeper, before any job)."""
    from hydra.types import RunMode

    paths = sorted((run_dir / hc.output_subdir).glob("*.yaml")) if hc.output_subdir else []
    if hc.mode == RunMode.MULTIRUN:
        paths.append(Path(hc.sweep.dir) / "multirun.yaml")
    return paths


def scrub_hydra_files(paths: list[Path]) -> None:
    """Redact the secrets in Hydra's own config copies (see :func:`hydra_copies`).
    Command-line keys never get there (``wai_exp.cli`` passes them as ``${oc.env:...}``); this
    catches a key written literally in a preset or config file. A file is rewritten (atomically:
    a sweep's jobs may scrub the same ``multirun.yaml`` at once) only when it held a secret.
    A missing file is skipped. Never raises."""
    import yaml

    from wai_exp.domain.files import atomic_write
    from wai_exp.domain.secrets import redact

    for path in paths:
        try:
            if not path.is_file():
                continue
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            clean = redact(data)
            if clean != data:
                # a temporary file of its own (two threads of one process share a pid) that
                # keeps the permissions Hydra gave the copy
                with atomic_write(path, chmod=path.stat().st_mode & 0o777) as fh:
                    fh.write(yaml.safe_dump(clean, sort_keys=False))
        except Exception as exc:  # noqa: BLE001 - never block a run on its bookkeeping
            log.warning("could not check %s for secrets: %s", path, exc)


def _make_tracker(config: dict[str, Any], start_dir: Path) -> Any:
    from wai_exp.tracking import make_tracker

    return make_tracker(config.get("tracking"), start_dir)


@hydra.main(version_base="1.3", config_path="pkg://wai_exp.conf", config_name="config")
def app(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    code = run(cfg)
    if code == 0:
        return
    if HydraConfig.get().mode == RunMode.MULTIRUN:
        # An exit here would abandon the sweep; Hydra re-raises the first failed job's
        # exception once every job ran, so the sweep still ends non-zero.
        raise RunFailed(f"job {HydraConfig.get().job.num} ended with exit status {code}")
    sys.exit(code)
