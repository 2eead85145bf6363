"""Tracking edge: where a run's params, metrics, reports, rows and plots go (MLflow or nowhere).

``make_tracker(cfg["tracking"], start_dir)`` returns a :class:`Tracker`. With ``kind: mlflow``
that is :class:`wai_exp.tracking.mlflow_tracker.MlflowTracker` (imported only then, because
MLflow takes seconds to import); with ``kind: none`` a :class:`NullTracker` that records
nothing and says "tracking off".

The ``tracking`` config group (``conf/tracking/*.yaml``):

========== ======================================================================
key        meaning
========== ======================================================================
kind       ``mlflow`` or ``none``
uri        null = ``sqlite:///<start_dir>/mlflow.db``; or ``http(s)://host:port`` of a
           team server; or another ``sqlite:///path`` (relative paths resolve
           against ``start_dir``). The file store (``file:``, a bare folder) is refused.
experiment MLflow experiment name (default ``wai-exp``)
log_rows   log each stage's rows gzipped as ``<stage>/rows.jsonl.gz`` and a dataset input
plots      log PNG plots for graded stages
traces     log up to this many rollouts per graded stage as MLflow traces (0 = none)
background record from a writer process, off the run's critical path (default true)
========== ======================================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

__all__ = [
    "PARENT_RUN_ENV",
    "NullTracker",
    "Tracker",
    "TrackingConfigError",
    "make_tracker",
    "resolve_tracking_uri",
    "tracking_settings",
]

#: Env var the sweep callback sets in each job (on_job_start) to the parent run's id.
#: Deliberately not MLFLOW_RUN_ID: MLflow would resume that run instead of nesting under it.
PARENT_RUN_ENV = "WAI_EXP_MLFLOW_PARENT_RUN_ID"

_KINDS = ("mlflow", "none")
_DEFAULTS: dict[str, Any] = {
    "kind": "mlflow",
    "uri": None,
    "experiment": "wai-exp",
    "log_rows": True,
    "plots": True,
    "traces": 200,
    "background": True,
}


class TrackingConfigError(ValueError):
    """The ``tracking`` config group holds a value wai-exp cannot use; the message says the fix."""


@runtime_checkable
class Tracker(Protocol):
    """What the pipeline runner calls. Every method returns None; failures raise.

    Attributes: ``run_id`` (None when nothing is recorded), ``ui_command`` (how to look at
    the run, None when there is nothing to look at), ``summary`` (one line for the run's
    final printout).
    """

    @property
    def run_id(self) -> str | None: ...

    @property
    def ui_command(self) -> str | None: ...

    @property
    def summary(self) -> str: ...

    def start(
        self,
        config: Mapping[str, Any],
        overrides: Sequence[str],
        run_dir: Path,
        preset: str | None,
        config_hash: str,
    ) -> None: ...

    def log_stage(
        self,
        name: str,
        *,
        kind: str,
        report: Mapping[str, Any] | None,
        text: str | None,
        rows_path: Path | None,
        metrics: Mapping[str, Any] | None,
        seconds: float | None,
        cached: bool,
        rows: Sequence[Mapping[str, Any]] | None = None,
    ) -> None: ...

    def set_tags(self, tags: Mapping[str, Any]) -> None: ...

    def finish(self, status: str, error: BaseException | str | None = None) -> None: ...


class NullTracker:
    """``tracking=none``: records nothing, anywhere. ``summary`` says tracking is off."""

    run_id: str | None = None
    ui_command: str | None = None

    @property
    def summary(self) -> str:
        return "tracking off (tracking=none): nothing was recorded in MLflow"

    def start(
        self,
        config: Mapping[str, Any],
        overrides: Sequence[str],
        run_dir: Path,
        preset: str | None,
        config_hash: str,
    ) -> None:
        return None

    def log_stage(self, name: str, **_: Any) -> None:
        return None

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        return None

    def finish(self, status: str, error: BaseException | str | None = None) -> None:
        return None


def tracking_settings(cfg_tracking: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tracking group with defaults filled in and every value checked.

    Raises :class:`TrackingConfigError` naming the bad key or value and the valid choices.
    Accepts a plain mapping or an OmegaConf node.
    """
    if cfg_tracking is not None and type(cfg_tracking).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        # A Mapping from omegaconf is a DictConfig, which converts to a dict (None for a
        # None node); to_container's own type also covers lists and scalars.
        cfg_tracking = cast(
            "dict[str, Any] | None", OmegaConf.to_container(cfg_tracking, resolve=True)
        )
    raw = dict(cfg_tracking or {})
    unknown = sorted(set(raw) - set(_DEFAULTS))
    if unknown:
        raise TrackingConfigError(
            f"unknown key(s) {unknown} in tracking; valid keys are {sorted(_DEFAULTS)}"
        )
    out = {**_DEFAULTS, **raw}
    if out["kind"] not in _KINDS:
        raise TrackingConfigError(
            f"tracking.kind={out['kind']!r} is not one of {list(_KINDS)}; "
            "pick tracking=mlflow, tracking=mlflow_server or tracking=none"
        )
    if out["uri"] is not None and not isinstance(out["uri"], str):
        raise TrackingConfigError(f"tracking.uri must be a string or null, got {out['uri']!r}")
    if out["kind"] == "mlflow" and isinstance(out["uri"], str) and not out["uri"].strip():
        # tracking=mlflow_server reads MLFLOW_TRACKING_URI: set but empty, it gives "", which
        # MLflow would take as the local SQLite store, without a word.
        raise TrackingConfigError(
            "tracking.uri is empty (with tracking=mlflow_server: MLFLOW_TRACKING_URI is set "
            "to an empty value); export MLFLOW_TRACKING_URI=http://<host>:5000 or pass "
            "tracking.uri=http://<host>:5000 for a server, or use tracking=mlflow for the "
            "local mlflow.db"
        )
    # Refuse a file-store URI here already, so config validation reports it before any run.
    resolve_tracking_uri(out["uri"], Path.cwd())
    if not isinstance(out["experiment"], str) or not out["experiment"].strip():
        raise TrackingConfigError(
            f"tracking.experiment must be a non-empty name, got {out['experiment']!r}"
        )
    traces = out["traces"]
    if isinstance(traces, bool) or not isinstance(traces, int) or traces < 0:
        raise TrackingConfigError(
            f"tracking.traces must be a whole number >= 0 (rollouts logged as MLflow traces "
            f"per graded stage; default 200, 0 = none), got {traces!r}"
        )
    for key in ("log_rows", "plots", "background"):
        if not isinstance(out[key], bool):
            raise TrackingConfigError(f"tracking.{key} must be true or false, got {out[key]!r}")
    return out


def resolve_tracking_uri(uri: str | None, start_dir: Path) -> str:
    """The absolute tracking URI for ``tracking.uri`` (None = ``<start_dir>/mlflow.db``).

    SQLite URIs are made absolute against ``start_dir``, so a job whose working directory
    changed still writes to the store ``mlflow ui`` opens where the user started. ``http``,
    ``https`` and other database URIs pass through. The file store is refused (MLflow 3.13+
    raises on a new one unless MLFLOW_ALLOW_FILE_STORE is set, and it races under sweeps):
    raises :class:`TrackingConfigError` for ``file:`` URIs and bare paths, and for a scheme
    MLflow has no store for (``garbage://x`` failed only once every stage had run).
    """
    start = Path(start_dir).expanduser().resolve()
    if uri is None or uri == "":
        return f"sqlite:///{start / 'mlflow.db'}"
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///") :]
        query = ""
        if "?" in path:
            path, query = path.split("?", 1)
            query = "?" + query
        if path in ("", ":memory:"):
            raise TrackingConfigError(
                f"tracking.uri={uri!r} has no database file; use null for "
                f"{start / 'mlflow.db'} or sqlite:////absolute/path/mlflow.db"
            )
        p = Path(path).expanduser()
        p = p if p.is_absolute() else start / p
        return f"sqlite:///{p.resolve()}{query}"
    if uri.startswith("file:") or "://" not in uri:
        raise TrackingConfigError(
            f"tracking.uri={uri!r} is an MLflow file store, which wai-exp does not use "
            "(MLflow 3.13+ refuses new ones and they race under sweeps). Use null for "
            f"sqlite:///{start / 'mlflow.db'}, a sqlite:///<path>.db URI, or http://host:port "
            "for a tracking server"
        )
    scheme = uri.split("://", 1)[0].split("+", 1)[0].lower()
    if scheme not in STORE_SCHEMES:
        raise TrackingConfigError(
            f"tracking.uri={uri!r}: MLflow has no store for {scheme + '://'!r}; use null for "
            f"sqlite:///{start / 'mlflow.db'}, a sqlite:///<path>.db URI, http(s)://host:port "
            "for a tracking server, or a database URI (postgresql://, mysql://, mssql://)"
        )
    return uri


#: URI schemes MLflow can track to (its tracking store registry, less the file store);
#: ``postgresql+psycopg2://`` counts as ``postgresql``.
STORE_SCHEMES = frozenset(
    {"sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks", "databricks-uc", "uc"}
)


def make_tracker(cfg_tracking: Mapping[str, Any] | None, start_dir: Path) -> Tracker:
    """The tracker the ``tracking`` config group asks for.

    ``kind: none`` -> :class:`NullTracker`; ``kind: mlflow`` -> an ``MlflowTracker`` writing
    to :func:`resolve_tracking_uri` (nothing touches the store until ``start``). Raises
    :class:`TrackingConfigError` for an unknown key, kind or a file-store URI.
    """
    settings = tracking_settings(cfg_tracking)
    if settings["kind"] == "none":
        return NullTracker()
    uri = resolve_tracking_uri(settings["uri"], start_dir)
    kwargs = {
        "uri": uri,
        "experiment": settings["experiment"],
        "start_dir": Path(start_dir),
        "log_rows": settings["log_rows"],
        "plots": settings["plots"],
        "traces": settings["traces"],
    }
    if settings["background"]:
        # A writer process imports MLflow and records while the stages compute.
        from wai_exp.tracking.background import BackgroundTracker

        return BackgroundTracker(**kwargs)
    from wai_exp.tracking.mlflow_tracker import MlflowTracker

    return MlflowTracker(**kwargs)
