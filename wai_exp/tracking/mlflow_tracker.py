"""``MlflowTracker``: one wai-exp run -> one MLflow run (a child run inside a sweep).

Everything goes through ``MlflowClient`` with an explicit run id, never the fluent
``mlflow.start_run`` state: the basic Hydra launcher runs sweep jobs in one process, and an
"active run" left over from one job must not swallow the next (shared/NOTES-hydra-mlflow.md).

Store layout for the default ``sqlite:///<start_dir>/mlflow.db``: the experiment's artifacts
live in ``<start_dir>/mlartifacts`` (set explicitly; MLflow would otherwise pick ``./mlruns``
relative to wherever the process happens to be). The schema and the experiment are created
once, under a file lock next to the database, because MLflow migrates a fresh SQLite file
without a lock and parallel jobs corrupt it ("duplicate column", "table already exists").

MLflow is imported inside functions: this module is imported only when tracking is on, but
the sweep callback imports helpers from it on every Hydra start.
"""

from __future__ import annotations

import atexit
import contextlib
import getpass
import json
import logging
import math
import os
import shlex
import shutil
import subprocess
import tempfile
import time
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from wai_exp.domain.files import file_sha256
from wai_exp.domain.numbers import finite_float
from wai_exp.domain.secrets import (
    install_log_redaction,
    redact,
    redact_overrides,
    redact_text,
)
from wai_exp.tracking import PARENT_RUN_ENV
from wai_exp.tracking.orphans import command_start_ms, owner_tags, reap_orphans
from wai_exp.tracking.params import (
    MAX_PARAMS_PER_BATCH,
    MAX_TAG_VALUE_CHARS,
    chunked,
    flatten_config,
    format_value,
    log_params,
    redact_config,
    sanitize_key,
    truncate,
)
from wai_exp.tracking.summary import (
    DELTA_HEADLINE_KEYS,
    HEADLINE_KEYS,
    StageNote,
    describe_run,
    headline_metrics,
    headline_stage,
    keeps_rows,
    run_name,
    split_knobs,
)
from wai_exp.tracking.sweep import (
    as_parent_typed,
    override_list,
    parse_overrides,
    same_value,
    unpinned,
)

log = logging.getLogger(__name__)

#: Written by the sweep callback into the sweep folder: ``{"run_id", "uri", "experiment_id"}``.
#: A job finds it at ``<run_dir>/../PARENT_FILE`` when the env var did not reach it.
PARENT_FILE = ".wai_mlflow_parent.json"
#: One metric request holds at most this many metrics (mlflow.utils.validation).
MAX_METRICS_PER_BATCH = 1000
#: A stage's rows in the run's artifacts: ``<stage>/rows.jsonl.gz`` (``gunzip`` gives the
#: stage's ``rows.jsonl``, byte for byte).
ROWS_ARTIFACT = "rows.jsonl.gz"
#: Where ``mlflow ui`` listens by default.
UI_URL = "http://127.0.0.1:5000"

_STATUSES = ("FINISHED", "FAILED", "KILLED")
#: Stage kinds whose rows get plots. Any other stage that reports a ``pass_at_1`` metric (a
#: user's own grading stage) gets them too; selection stages (optimize, publish_gate) carry
#: graded rows but a histogram of the kept subset would read as the policy's pass rate.
GRADED_KINDS = frozenset({"grade", "evaluate"})
_prepared: dict[tuple[str, str], str] = {}
#: The SQLite file each prepared URI was opened on (device, inode): a file made again at
#: that path is another store, which MLflow's cached engine would not see.
_opened_files: dict[str, tuple[int, int] | None] = {}
#: Runs this process started (a launcher worker that is reused runs several jobs).
_RUNS_IN_PROCESS = 0


class TrackingError(RuntimeError):
    """The tracking store cannot be used as configured; the message says what to change."""


# --------------------------------------------------------------------------- store set-up


#: Seconds the end of a run waits, in all, for its plots still rendering.
PLOT_WAIT_S = 300.0


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, or None for any other URI."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(unquote(uri[len("sqlite:///") :].split("?", 1)[0]))


def default_artifact_location(uri: str) -> str | None:
    """``<db folder>/mlartifacts`` as a file URI for SQLite stores; None (server decides) else."""
    db = sqlite_path(uri)
    if db is None:
        return None
    return (db.parent / "mlartifacts").as_uri()


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Hold an exclusive lock on ``<db>.lock`` for SQLite URIs (no-op for servers).

    Serialises schema creation and experiment creation across processes on one machine.
    On platforms without ``fcntl`` (Windows) this degrades to no lock, with a debug note.
    """
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    db.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: create the schema before a parallel sweep yourself
        log.debug("no fcntl on this platform; SQLite schema creation is not locked")
        yield
        return
    with open(db.with_name(db.name + ".lock"), "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def check_server(uri: str, timeout: float = 5.0) -> None:
    """Fail fast when nothing answers at an ``http(s)://`` tracking URI.

    MLflow's own client retries a dead server with backoff for minutes; one GET of
    ``/health`` with a short timeout turns that into an immediate, actionable error. Any HTTP
    answer (even 401/404 from a proxy) counts as alive. Raises :class:`TrackingError`.
    """
    import urllib.error
    import urllib.request

    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return
    except urllib.error.HTTPError:
        return  # something answered; let MLflow report what it thinks of us
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise TrackingError(
            f"no MLflow tracking server answers at {uri} ({reason}). Start one "
            f"(`mlflow server --backend-store-uri sqlite:///$PWD/mlflow.db --port 5000`), fix "
            "tracking.uri, or use tracking=mlflow for the embedded SQLite store"
        ) from e


@contextlib.contextmanager
def _quiet_schema_logs() -> Iterator[None]:
    """Keep MLflow's "Creating initial MLflow database tables..." INFO lines (and alembic's)
    off the terminal on a new store: the summary, not the migration, is what a user reads."""
    loggers = [logging.getLogger(n) for n in ("mlflow.store.db.utils", "alembic")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def prepare_store(uri: str, experiment: str) -> str:
    """Create the store's schema and the experiment if needed; return the experiment id.

    Runs under :func:`store_lock`, once per process per ``(uri, experiment)``. A new
    experiment on SQLite gets ``artifact_location`` = ``<db folder>/mlartifacts``. Raises
    :class:`TrackingError` when the experiment exists but is deleted (restore it or pick
    another ``tracking.experiment``), the store cannot be opened, or no server answers at an
    ``http(s)`` URI.
    """
    key = (uri, experiment)
    _forget_a_replaced_store(uri)
    if key in _prepared:
        return _prepared[key]
    if uri.startswith(("http://", "https://")):
        check_server(uri)
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    with store_lock(uri), _quiet_schema_logs():
        db = sqlite_path(uri)
        if db is not None:
            seed_sqlite_store(db)
        client = MlflowClient(tracking_uri=uri)
        try:
            # The first call opens the store, which creates or migrates the SQLite schema.
            exp = client.get_experiment_by_name(experiment)
            if exp is None:
                exp_id = client.create_experiment(
                    experiment,
                    artifact_location=default_artifact_location(uri),
                    tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
                )
            else:
                if exp.lifecycle_stage == "deleted":
                    raise TrackingError(
                        f"MLflow experiment {experiment!r} (id {exp.experiment_id}) in {uri} is "
                        "deleted; restore it with `mlflow experiments restore --experiment-id "
                        f"{exp.experiment_id}` (with MLFLOW_TRACKING_URI={uri}) or set "
                        "tracking.experiment to another name"
                    )
                exp_id = exp.experiment_id
                if EXPERIMENT_KIND_TAG not in (exp.tags or {}):
                    # An experiment made before wai-exp set the kind: open it on its runs too.
                    client.set_experiment_tag(exp_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        except MlflowException as e:
            raise TrackingError(f"cannot open MLflow store {uri}: {e}") from e
    _prepared[key] = exp_id
    _opened_files[uri] = _file_identity(uri)
    return exp_id


def _file_identity(uri: str) -> tuple[int, int] | None:
    """(device, inode) of a SQLite URI's file; None for another store or no file."""
    db = sqlite_path(uri)
    try:
        st = db.stat() if db is not None else None
    except OSError:
        return None
    return None if st is None else (st.st_dev, st.st_ino)


def _forget_a_replaced_store(uri: str) -> None:
    """Drop what this process keeps of ``uri``'s store when its SQLite file was deleted and
    made again since it was prepared (``rm mlflow.db`` between two runs in one process): the
    experiment ids, and MLflow's cached engine, whose open connections still write to the
    deleted file ("attempt to write a readonly database")."""
    if uri not in _opened_files or _opened_files[uri] == _file_identity(uri):
        return
    del _opened_files[uri]
    for key in [k for k in _prepared if k[0] == uri]:
        del _prepared[key]
    with contextlib.suppress(Exception):  # MLflow's engine cache is private: best effort
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        # Closing its pooled connections makes the engine (kept by MLflow's cached store)
        # open the file now at the path on its next use.
        engine = SqlAlchemyStore._engine_map.get(uri)
        if engine is not None:
            engine.dispose()


#: Where the migrated, empty MLflow schema is kept (one file per MLflow version), under
#: ``$XDG_CACHE_HOME`` or ``~/.cache``; ``WAI_EXP_CACHE_HOME`` overrides the folder.
SCHEMA_CACHE_ENV = "WAI_EXP_CACHE_HOME"


def schema_template() -> Path | None:
    """A SQLite file holding MLflow's schema at this MLflow version's newest migration and no
    data, made once (by running MLflow's migrations on it) and kept in the user's cache;
    None when it cannot be made or kept (a read-only home). See :func:`seed_sqlite_store`."""
    import mlflow

    root = os.environ.get(SCHEMA_CACHE_ENV) or os.environ.get("XDG_CACHE_HOME")
    folder = Path(root) / "wai-exp" if root else Path.home() / ".cache" / "wai-exp"
    path = folder / f"mlflow-{mlflow.__version__}-schema.db"
    if path.is_file():
        return path
    try:
        import sqlalchemy
        from mlflow.store.db.utils import _initialize_tables

        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        engine = sqlalchemy.create_engine(f"sqlite:///{tmp}")
        try:
            _initialize_tables(engine)
        finally:
            engine.dispose()
        os.replace(tmp, path)  # whole or not at all, also when two processes race here
    except Exception as e:  # noqa: BLE001 - the store is then migrated in place, as MLflow does
        log.debug("no MLflow schema template in %s: %s", folder, e)
        return None
    return path


def seed_sqlite_store(db: Path) -> bool:
    """Start a new SQLite store from :func:`schema_template` (True), or leave it to MLflow.

    MLflow makes a new store by running its schema migrations one by one: 5 s of a quiet
    core on every first run in a folder, and on every ``compare`` into a new store. A copy of
    an already migrated empty file takes milliseconds; MLflow then adds its default
    experiment (with this store's artifact location) as it does in any store. Called under
    :func:`store_lock`; an existing file is never touched. Never raises."""
    if db.exists():
        return False
    template = schema_template()
    if template is None:
        return False
    tmp = db.with_name(f"{db.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(template, tmp)
        os.link(tmp, db)  # fails if a process that does not take the lock made it meanwhile
        return True
    except OSError as e:
        log.debug("new store %s not seeded from %s: %s", db, template, e)
        return False
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def git_commit(cwd: Path) -> tuple[str | None, bool | None]:
    """``(commit sha, dirty)`` of the git checkout holding ``cwd``; ``(None, None)`` when
    ``cwd`` is in no checkout (or git is missing)."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return (sha or None), bool(status.strip())


def git_candidates(start_dir: Path, config_sources: Sequence[Path] | None = None) -> list[Path]:
    """Where to look for the commit, in order: the folder wai-exp was started in, the user's
    config folders (``config_sources``, default Hydra's file config sources: ``--config-dir``
    and the like), then the folder the shipped configs and code come from (an editable
    install in a checkout)."""
    out = [Path(start_dir)]
    if config_sources is not None:
        out.extend(Path(p) for p in config_sources)
    else:
        with contextlib.suppress(Exception):
            from hydra.core.hydra_config import HydraConfig

            if HydraConfig.initialized():
                for src in HydraConfig.get().runtime.config_sources:
                    if src.schema == "file" and src.path:
                        out.append(Path(src.path))
    import wai_exp

    out.append(Path(wai_exp.__file__).resolve().parent)
    seen: list[Path] = []
    for p in out:
        if p.is_dir() and p not in seen:
            seen.append(p)
    return seen


def git_tags(candidates: Sequence[Path]) -> dict[str, str]:
    """``mlflow.source.git.commit`` (+ ``wai.git_dirty``, ``wai.git_root``) from the first
    candidate folder inside a git checkout; with none, ``wai.git_commit`` says it is absent
    and why (never a made-up "unknown" commit)."""
    for folder in candidates:
        sha, dirty = git_commit(folder)
        if sha:
            tags = {"mlflow.source.git.commit": sha, "wai.git_root": str(folder)}
            if dirty is not None:
                tags["wai.git_dirty"] = "true" if dirty else "false"
            return tags
    where = ", ".join(str(p) for p in candidates) or "nowhere"
    return {"wai.git_commit": f"absent: no git checkout holds {where}"}


def run_params(config: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """``(params, knobs)``: every resolved config value as a param except the engine knobs,
    of which only those that differ from the knob table's default are params (``knobs.<name>``);
    ``knobs`` is the full resolved knob section, logged whole as ``knobs.yaml``. ``knobs.seed``
    and ``knobs.world`` repeat ``seed`` and ``world`` and are not params twice."""
    plain = dict(config)
    knobs = plain.pop("knobs", None)
    params = flatten_config(plain)
    if isinstance(knobs, Mapping):
        from wai_exp.config.knobs import knob_defaults

        changed = split_knobs(knobs, knob_defaults(), skip=("seed", "world"))
        params.update(flatten_config({"knobs": changed}) if changed else {})
    return params, dict(knobs) if isinstance(knobs, Mapping) else {}


#: Experiment tag older MLflow 3 UIs read for an experiment's kind: "custom_model_development"
#: marks it a model-training experiment (runs table), not a GenAI one (traces overview).
#: MLflow 3.17's UI ignores it (wai_exp/tracking/ui_app.py); it is set for the others.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"


#: The MLflow 3.17 UI picks its view (GenAI traces vs model training runs) from this URL
#: parameter, else from the browser's last choice (GenAI on a fresh browser). Links carry it,
#: so they open on the runs also in a UI wai-exp does not serve (a team server).
UI_VIEW = "workflowType=machine_learning"
#: ``mlflow ui --app-name`` value of wai-exp's UI app (wai_exp/tracking/ui_app.py): MLflow's
#: server whose UI opens an experiment on its runs, the bare experiment URL included.
UI_APP = "wai-exp"


def ui_hint(uri: str, experiment_id: str | None = None, run_id: str | None = None) -> str:
    """How to look at a run: the ``mlflow ui`` command (with wai-exp's UI app, so a bare
    experiment URL opens on its runs) for a database store, the server's URL alone otherwise
    (callers print it after their own "open it:"). The link opens the model-training view,
    where the runs table and run pages are."""
    path = ""
    if experiment_id is not None:
        path = f"/#/experiments/{experiment_id}"
        if run_id is not None:
            path += f"/runs/{run_id}"
        path += f"?{UI_VIEW}"
    if uri.startswith(("http://", "https://")):
        return f"{uri.rstrip('/')}{path}"
    # One worker: with mlflow's default of 4, uvicorn's supervisor health-checks each within
    # 5 s, and on a busy 2-core machine it kills and restarts them in a loop.
    cmd = f"mlflow ui --backend-store-uri {shlex.quote(uri)} --app-name {UI_APP} --workers 1"
    if uri.startswith("sqlite:"):
        return f"{cmd}  # then open {UI_URL}{path}" if path else cmd
    return cmd


# --------------------------------------------------------------------------- helpers


def jsonable(obj: Any) -> Any:
    """``obj`` as plain JSON data: numpy scalars/arrays, tuples, sets, Paths converted;
    NaN and infinities become None (JSON has no spelling for them)."""
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "tolist"):  # numpy scalar or array
        return jsonable(obj.tolist())
    if hasattr(obj, "to_dict"):
        with contextlib.suppress(Exception):
            return jsonable(obj.to_dict())
    if hasattr(obj, "model_dump"):
        with contextlib.suppress(Exception):
            return jsonable(obj.model_dump())
    return str(obj)


def metric_value(value: Any) -> float | None:
    """A finite float for MLflow, or None when the value is unmeasured or not a number
    (``finite_float``'s rule: a bool is a flag, not a metric)."""
    return finite_float(value)


def row_schema(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows' columns in MLflow's colspec form: one per top-level key, in first-seen order.

    A key whose values are all booleans is ``boolean``, all numbers (ints/floats) ``double``,
    anything else ``string`` (containers included); ``required`` is false when some row lacks
    the key or holds null. Keys that never leave memory (``privileged``, the engine's
    ``vector``; wai_exp.rows.scrub) are not columns. Never raises.
    """
    return _scan_schema(rows)[0]


def _scan_schema(rows: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """``(row_schema(rows), how many rows)``, reading ``rows`` once (they may stream from a
    file: only the keys' kinds and counts are kept)."""
    from wai_exp.rows.scrub import ENGINE_ONLY, NEVER_SHIPPED

    kinds: dict[str, set[str]] = {}
    seen: dict[str, int] = {}
    n = 0
    for row in rows:
        n += 1
        for k, v in row.items():
            key = str(k)
            seen[key] = seen.get(key, 0) + 1
            bucket = kinds.setdefault(key, set())
            if v is None:
                bucket.add("null")
            elif isinstance(v, bool):
                bucket.add("boolean")
            elif isinstance(v, (int, float)):
                bucket.add("double")
            else:
                bucket.add("string")
    out = []
    for key, found in kinds.items():
        if key in NEVER_SHIPPED or key in ENGINE_ONLY:
            continue
        types = found - {"null"}
        kind = types.pop() if len(types) == 1 else "string"
        out.append({"type": kind, "name": key, "required": "null" not in found and seen[key] == n})
    return out, n


def rows_dataset(
    rows: Iterable[Mapping[str, Any]],
    *,
    name: str,
    source: str | None,
    digest: str | None = None,
) -> Any | None:
    """An MLflow dataset entity (``mlflow.entities.Dataset``) describing ``rows``, or None
    when there are none.

    The schema is :func:`row_schema` over every row and the profile counts rows and cells,
    as MLflow's own pandas datasets record them, without building a pandas frame (which cost
    about a second per 1,000-row stage). ``rows`` are read once, or twice without a
    ``digest``; any re-iterable works (a file's rows stream through). ``source`` is the rows
    artifact's URI (``local`` for a file, ``url`` otherwise; none: ``code``). ``digest`` (at
    most 36 characters, MLflow's column) is the caller's content hash of the rows file;
    without one, a hash of the rows themselves. Never raises.
    """
    try:
        import hashlib

        from mlflow.entities import Dataset

        columns, n = _scan_schema(rows)
        if n == 0:
            return None
        if digest is None:
            h = hashlib.sha256()
            for row in rows:
                h.update(json.dumps(jsonable(row), sort_keys=True, default=str).encode())
            digest = h.hexdigest()
        if source is None:
            source_type, source_json = "code", json.dumps({"tags": {}})
        else:
            source_type = "local" if source.startswith("file:") else "url"
            source_json = json.dumps({"uri": source} if source_type == "local" else {"url": source})
        return Dataset(
            name=name,
            digest=str(digest)[:36],
            source_type=source_type,
            source=source_json,
            schema=json.dumps({"mlflow_colspec": columns}),
            profile=json.dumps({"num_rows": n, "num_elements": n * len(columns)}),
        )
    except Exception as e:  # a dataset input is a convenience; the JSONL artifact is the record
        log.debug("no MLflow dataset input for %s: %s", name, e)
        return None


class FileRows:
    """The rows of a JSONL file, parsed one at a time on each pass (never a list of them):
    the writer describes, plots and samples a 100,000-row stage without holding it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        from wai_exp.rows.jsonl import iter_rows

        return iter_rows(self.path, shared=False)  # each row is dropped before the next


def file_digest(path: Path) -> str:
    """The first 16 hex digits of the sha256 of ``path``'s bytes (a dataset's digest)."""
    return file_sha256(path)[:16]


def gzip_file(src: Path, dest: Path) -> None:
    """Gzip ``src`` into ``dest`` a block at a time (no file-sized buffer); the header holds
    no time stamp, so the same rows give the same bytes."""
    import gzip

    with open(src, "rb") as fh, open(dest, "wb") as raw:
        name = dest.name.removesuffix(".gz")
        with gzip.GzipFile(filename=name, mode="wb", fileobj=raw, mtime=0) as out:
            shutil.copyfileobj(fh, out, 1 << 20)


def _wai_version() -> str:
    from wai_exp import __version__

    return __version__


# --------------------------------------------------------------------------- the tracker


class MlflowTracker:
    """Records one wai-exp run in MLflow. See ``wai_exp.tracking.Tracker`` for the protocol.

    Construct through ``make_tracker``; nothing touches the store until :meth:`start`.
    ``parent_run_id`` nests the run under a sweep's parent; when None, the id comes from
    the env var the sweep callback sets (``WAI_EXP_MLFLOW_PARENT_RUN_ID``) or the parent
    file in the sweep folder.
    """

    def __init__(
        self,
        *,
        uri: str,
        experiment: str = "wai-exp",
        start_dir: Path | None = None,
        log_rows: bool = True,
        plots: bool = True,
        traces: int = 200,
        parent_run_id: str | None = None,
        config_sources: Sequence[Path] | None = None,
        owner: Mapping[str, str] | None = None,
        start_time_ms: int | None = None,
    ) -> None:
        self.uri = uri
        #: the run's MLflow start time: the command's start (orphans.command_start_ms), not
        #: when the store was reached, so the Duration column reads what the user waited
        self.start_time_ms = start_time_ms
        #: tags naming the process that owns the run (default: this one); a writer process
        #: records for the wai-exp process that started it
        self.owner = dict(owner) if owner else None
        self.traces = int(traces)
        #: where trace jobs go (the writer hands them to its trace thread); None = log now
        self.trace_sink: Any = None
        self.config_sources = list(config_sources) if config_sources is not None else None
        self.experiment = experiment
        self.start_dir = Path(start_dir or Path.cwd()).resolve()
        self.log_rows = log_rows
        self.plots = plots
        self.parent_run_id = parent_run_id
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.run_url_path: str | None = None
        self.ui_command: str | None = ui_hint(uri)
        self.status: str | None = None
        self._client: Any = None
        self._artifact_uri: str | None = None
        self._notes: list[StageNote] = []
        self._headlined = False
        #: a pipeline with a compare stage: its delta, not the first arm's pass@1, is the
        #: run's headline (set in ``start`` from the pipeline's stage kinds)
        self._delta_run = False
        self._planned: list[str] = []
        #: stage metrics held until the headline is logged: MLflow lists a run's metrics in
        #: the order they were first logged, so the answer must be logged first
        self._held_metrics: list[Any] = []
        self._hold_metrics = False
        #: dataset inputs held until the published (training) one is logged: MLflow lists a
        #: run's inputs in logging order and shows the first one ("simulate-rows +4")
        self._held_inputs: list[Any] = []
        self._hold_inputs = False
        self._rows_made = 0.0
        self._gate: dict[str, str | None] = {}
        self._preset: str | None = None
        self._overrides: list[str] = []
        self._config_hash = ""
        self._band: tuple[float, float] | None = (0.2, 0.8)
        #: plot processes still rendering: (stage, job), logged by _log_rendered_plots
        self._plot_jobs: list[tuple[str, Any]] = []

    # -- public -------------------------------------------------------------------------

    @property
    def summary(self) -> str:
        if self.run_id is None:
            return f"MLflow tracking to {self.uri} (no run started)"
        state = f", {self.status}" if self.status else ""
        return f"MLflow run {self.run_id} (experiment {self.experiment!r}{state}); view: {self.ui_command}"

    def start(
        self,
        config: Mapping[str, Any],
        overrides: Sequence[str],
        run_dir: Path,
        preset: str | None,
        config_hash: str,
    ) -> None:
        """Create the run: tags, every resolved config value as a param, config and overrides
        as artifacts. Raises :class:`TrackingError` if the store cannot be used and
        RuntimeError if this tracker already started a run."""
        if self.run_id is not None:
            raise RuntimeError(f"this tracker already started run {self.run_id}")
        import sys

        global _RUNS_IN_PROCESS
        # Whether this process had MLflow loaded before this run: a reused launcher worker
        # (joblib/loky) pays the import once, for its first job only.
        preloaded = "mlflow" in sys.modules
        _RUNS_IN_PROCESS += 1
        from mlflow import MlflowClient

        # MLflow logs to stderr through its own handler: redact it like ours, and leave the
        # SQL dump of a failed store write to our one-line message (store_errors).
        install_log_redaction(logging.getLogger("mlflow"))
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
        exp_id = prepare_store(self.uri, self.experiment)
        client = MlflowClient(tracking_uri=self.uri)
        # A run SIGKILLed earlier in this store is still RUNNING: mark it KILLED, with why.
        reap_orphans(client, [exp_id])
        run_dir = Path(run_dir)
        parent = self._find_parent(client, run_dir)
        if parent is not None:
            exp_id = parent.info.experiment_id  # the UI nests children only within one experiment

        # Overrides carry keys typed on the command line: never into a tag or an artifact.
        overrides = redact_overrides(str(o) for o in overrides)
        if parent is not None:  # what the sweep's command line set, as typed there
            overrides = as_parent_typed(overrides, override_list(parent.data.tags))
        self._preset, self._overrides, self._config_hash = preset, overrides, config_hash
        tags: dict[str, str] = {
            "preset": preset or "none",
            "config_hash": config_hash,
            "wai.version": _wai_version(),
            "mlflow.source.type": "LOCAL",
            "mlflow.source.name": "wai-exp",
            "mlflow.note.content": (
                f"**Running** since {time.strftime('%Y-%m-%d %H:%M:%S')}: the answer is written "
                "here when the run ends.\n\n"
                f"<sub>preset {preset or 'none'} · overrides: {' '.join(overrides) or 'none'} · "
                f"config {config_hash[:12]}</sub>"
            ),
            "wai.run_dir": str(run_dir.resolve()),
            "wai.overrides": " ".join(overrides),
            "wai.override_list": json.dumps(overrides),
            "wai.process": f"{os.getpid()}:{_RUNS_IN_PROCESS}",
            "wai.mlflow_preloaded": "true" if preloaded else "false",
            **git_tags(git_candidates(self.start_dir, self.config_sources)),
            **(self.owner or owner_tags()),
        }
        with contextlib.suppress(Exception):
            tags["mlflow.user"] = getpass.getuser()
        if parent is not None:
            tags["mlflow.parentRunId"] = parent.info.run_id
        tags = {
            k: truncate(redact_text(v), MAX_TAG_VALUE_CHARS, f"tag {k!r}") for k, v in tags.items()
        }

        if self.start_time_ms is None:
            self.start_time_ms = command_start_ms()
        run = client.create_run(
            exp_id,
            start_time=self.start_time_ms,
            tags=tags,
            # A sweep child's name leads with its swept values and leaves out the pin its
            # sweep put on every job.
            run_name=run_name(
                preset,
                overrides if parent is None else unpinned(overrides),
                swept=_swept_by(parent, overrides),
            ),
        )
        self._client = client
        self.run_id = run.info.run_id
        self.experiment_id = exp_id
        self._artifact_uri = run.info.artifact_uri
        self.run_url_path = f"/#/experiments/{exp_id}/runs/{self.run_id}"
        self.ui_command = ui_hint(self.uri, exp_id, self.run_id)
        self.status = "RUNNING"
        atexit.register(self._atexit)

        self._planned = _stage_kinds(config)
        kinds = set(self._planned)
        self._delta_run = "compare" in kinds
        self._hold_metrics = bool(kinds & ({"compare"} if self._delta_run else GRADED_KINDS))
        self._hold_inputs = "publish" in kinds
        band = (config.get("selection") or {}).get("band") if isinstance(config, Mapping) else None
        with contextlib.suppress(TypeError, ValueError, IndexError):
            self._band = (float(band[0]), float(band[1])) if band else self._band
        params, knobs = run_params(config)
        log_params(client, self.run_id, params)
        safe = jsonable(redact_config(config))
        client.log_text(self.run_id, _yaml(safe), "config.yaml")
        client.log_text(self.run_id, _yaml(jsonable(redact_config(knobs))), "knobs.yaml")
        client.log_text(self.run_id, _yaml(overrides), "overrides.yaml")

    def log_stage(
        self,
        name: str,
        *,
        kind: str,
        report: Mapping[str, Any] | None = None,
        text: str | None = None,
        rows_path: Path | None = None,
        metrics: Mapping[str, Any] | None = None,
        seconds: float | None = None,
        cached: bool = False,
        rows: Iterable[Mapping[str, Any]] | None = None,
    ) -> None:
        """Record one finished stage.

        ``rows`` are the stage's rows when the caller has them in memory (the runner does), so
        the file at ``rows_path`` is uploaded but not parsed again; without them, each pass
        over the rows (schema, plots, trace sample) streams the file.

        Metrics go under ``<stage>.<metric>`` (plus ``<stage>.seconds``); None/NaN metrics are
        not logged as numbers but listed in the tag ``<stage>.unmeasured``. In a pipeline
        with a graded (or, for a before/after run, compare) stage they are held until the
        headline is logged, and go right after it (MLflow lists metrics in logging order). Artifacts:
        ``<stage>/report.json``, ``<stage>/report.txt``, ``<stage>/rows.jsonl.gz`` (when
        ``log_rows``), PNG plots for graded stages (kind ``grade``/``evaluate`` or a
        ``pass_at_1`` metric) whose rows carry binary rewards (when ``plots``),
        and a dataset input with context ``<stage>``. Plots and the dataset are best-effort
        (a warning or debug note, never an exception); metrics and artifacts raise on failure.
        """
        client, run_id = self._require_run()
        self._log_rendered_plots(wait=False)
        prefix = sanitize_key(name)
        values: dict[str, Any] = dict(metrics or {})
        if seconds is not None:
            values["seconds"] = seconds
        self._notes.append(StageNote(name, kind, values, report, cached))
        headline, batch, tags = self._stage_batch(prefix, kind, values, cached)
        if self._hold_metrics and not self._headlined:
            self._held_metrics += batch  # the tags go now: they carry no order
            batch = []
        else:
            batch = _last_per_key([*headline, *self._held_metrics, *batch])
            self._held_metrics = []
        # One store write for the stage's metrics and tags (a request holds 1,000 metrics
        # and 100 tags; a stage has a few tags).
        chunks = list(chunked(batch, MAX_METRICS_PER_BATCH - len(tags))) or [[]]
        for i, chunk in enumerate(chunks):
            client.log_batch(run_id, metrics=chunk, tags=tags if i == 0 else [], synchronous=True)

        if report is not None:
            body = json.dumps(redact(jsonable(report), keys=False), indent=2)
            client.log_text(run_id, body, f"{prefix}/report.json")
        if text is not None:
            client.log_text(run_id, redact_text(text, keys=False), f"{prefix}/report.txt")

        if self._plots_for(report) and isinstance(report, Mapping) and "headline_verdict" in report:
            self._log_plots(prefix, None, report, values)  # a compare stage: its delta plot
        graded = kind in GRADED_KINDS or "pass_at_1" in values
        if rows is not None and rows_path is None and self.traces > 0 and graded:
            self._queue_traces(prefix, rows)
            return
        if rows_path is None or not (self.log_rows or self.plots or (self.traces > 0 and graded)):
            return
        rows_path = Path(rows_path)
        if not rows_path.is_file():
            # Stages such as publish_gate produce no rows; that is not worth a warning.
            log.debug("stage %s: no rows file at %s; no rows logged", name, rows_path)
            return
        self._log_stage_rows(prefix, kind, report, values, rows_path, rows, graded)

    def _stage_batch(
        self, prefix: str, kind: str, values: dict[str, Any], cached: bool
    ) -> tuple[list[Any], list[Any], list[Any]]:
        """The run's headline metrics (when this stage holds them; else none), the stage's
        metrics (with rows kept and rows made) and its tags; a None/NaN metric is named in
        ``<stage>.unmeasured`` instead of logged."""
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        headline: list[Any] = []
        batch: list[Any] = []
        keys = DELTA_HEADLINE_KEYS if self._delta_run else HEADLINE_KEYS
        if headline_stage(kind, values, self._delta_run) and not self._headlined:
            # The answer under short names, ahead of every stage's own metrics (held until
            # now): the run page and the metric charts lead with it (a before/after run's is
            # its delta).
            self._headlined = True
            headline = [Metric(k, v, now, 0) for k, v in headline_metrics(values, keys).items()]
        if keeps_rows(kind, values):
            kept = metric_value(values.get("rows_kept"))
            if kept is not None:
                batch.append(Metric("rows_kept", kept, now, 0))
        if kind == "simulate" and metric_value(values.get("rows_out")) is not None:
            self._rows_made += metric_value(values.get("rows_out")) or 0.0
            batch.append(Metric("rows_made", self._rows_made, now, 0))
        unmeasured: list[str] = []
        for key, raw in values.items():
            v = metric_value(raw)
            if v is None:
                unmeasured.append(str(key))
                continue
            batch.append(Metric(sanitize_key(f"{prefix}.{key}"), v, now, 0))
        tags = [
            RunTag(f"{prefix}.kind", str(kind)),
            RunTag(f"{prefix}.cached", "true" if cached else "false"),
        ]
        if unmeasured:
            tags.append(
                RunTag(
                    f"{prefix}.unmeasured",
                    truncate(", ".join(unmeasured), MAX_TAG_VALUE_CHARS, "unmeasured list"),
                )
            )
        return headline, batch, tags

    def _log_stage_rows(
        self,
        prefix: str,
        kind: str,
        report: Mapping[str, Any] | None,
        values: dict[str, Any],
        rows_path: Path,
        rows: Iterable[Mapping[str, Any]] | None,
        graded: bool,
    ) -> None:
        """The stage's rows file: uploaded, its dataset input, plots and trace sample."""
        if self.log_rows:
            self._log_rows_file(rows_path, prefix)
        if rows is None:
            # Read from the file on each pass, never held whole: the writer process would
            # otherwise hold every stage's rows (1.4 GB for a 100,000-row rl_round).
            rows = FileRows(rows_path)
        if self.log_rows:
            self._log_stage_dataset(prefix, report, rows_path, rows)
        if self._plots_for(report) and (kind in GRADED_KINDS or "pass_at_1" in values):
            self._log_plots(prefix, rows_path, report, values)
        if self.traces > 0 and graded:
            self._queue_traces(prefix, rows)

    def _log_stage_dataset(
        self,
        prefix: str,
        report: Mapping[str, Any] | None,
        rows_path: Path,
        rows: Iterable[Mapping[str, Any]],
    ) -> None:
        """The rows as a dataset input: ``<stage>-rows``, or a publish stage's own file."""
        source = f"{self._artifact_uri}/{prefix}/{ROWS_ARTIFACT}" if self._artifact_uri else None
        name, digest, context = f"{prefix}-rows", file_digest(rows_path), prefix
        published = (report or {}).get("dataset")
        if isinstance(published, Mapping) and published.get("digest"):
            # A publish stage: its files are artifacts, and the dataset input is the
            # published file under its own name and content digest.
            for path in published.get("files") or ():
                self._client.log_artifact(self.run_id, str(path), prefix)
            name = str(published.get("name") or name)
            digest, context = str(published["digest"])[:36], "training"
            file_name = Path(str(published.get("source") or "rows.jsonl")).name
            source = f"{self._artifact_uri}/{prefix}/{file_name}" if self._artifact_uri else None
        ds = rows_dataset(rows, name=name, source=source, digest=digest)
        if ds is not None:
            self._log_dataset(ds, context)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        """Set run tags (gate verdict, stopped_because ...): keys sanitized, values as
        strings (null/true/false spelled as in YAML), truncated at 8,000 characters with a
        warning, 100 per request."""
        client, run_id = self._require_run()
        from mlflow.entities import RunTag

        for key in ("gate_verdict", "gate_reason"):
            if key in tags:
                self._gate[key] = None if tags[key] is None else str(tags[key])
        items = [
            RunTag(
                sanitize_key(k),
                truncate(redact_text(format_value(v)), MAX_TAG_VALUE_CHARS, f"tag {k!r}"),
            )
            for k, v in tags.items()
        ]
        for chunk in chunked(items, MAX_PARAMS_PER_BATCH):
            client.log_batch(run_id, tags=chunk, synchronous=True)

    def finish(self, status: str = "FINISHED", error: BaseException | str | None = None) -> None:
        """End the run as FINISHED, FAILED or KILLED (case-insensitive).

        With ``error``, the full text (the traceback for an exception) becomes the artifact
        ``error.txt`` and its last line the tag ``wai.error``. A second call is a no-op.
        Raises ValueError for an unknown status.
        """
        st = str(status).upper()
        if st not in _STATUSES:
            raise ValueError(f"status {status!r} is not one of {list(_STATUSES)}")
        if self.run_id is None or self.status in _STATUSES:
            return
        client = self._client
        self._log_rendered_plots(wait=True)
        try:
            self._flush_held()
        except Exception as e:  # still end the run, saying what is missing
            log.warning(
                "run %s: stage metrics held for the headline not written: %s", self.run_id, e
            )
        headline = None
        if error is not None:
            if isinstance(error, BaseException):
                full = "".join(traceback.format_exception(error))
                headline = f"{type(error).__name__}: {error}"
            else:
                full = str(error)
                lines = [ln for ln in full.strip().splitlines() if ln.strip()]
                headline = lines[-1] if lines else full
            full, headline = redact_text(full), redact_text(headline)
            try:
                client.log_text(self.run_id, full, "error.txt")
                client.set_tag(self.run_id, "wai.error", truncate(headline, 1000, "error tag"))
            except Exception as e:  # still end the run: a RUNNING leftover is worse
                log.warning("could not store the error of run %s: %s", self.run_id, e)
        try:
            note = describe_run(
                self._notes,
                preset=self._preset,
                overrides=self._overrides,
                config_hash=self._config_hash,
                status=st,
                gate_verdict=self._gate.get("gate_verdict"),
                gate_reason=self._gate.get("gate_reason"),
                error=headline,
                version=_wai_version(),
                planned=self._planned,
            )
            client.set_tag(
                self.run_id,
                "mlflow.note.content",
                truncate(redact_text(note), MAX_TAG_VALUE_CHARS, "description"),
            )
        except Exception as e:  # the description is a convenience; ending the run is not
            log.warning("could not write the description of run %s: %s", self.run_id, e)
        client.set_terminated(self.run_id, st)
        self.status = st
        with contextlib.suppress(Exception):
            atexit.unregister(self._atexit)

    # -- internals ----------------------------------------------------------------------

    def _require_run(self) -> tuple[Any, str]:
        if self.run_id is None or self._client is None:
            raise RuntimeError("call start(...) before logging to the tracker")
        if self.status in _STATUSES:
            raise RuntimeError(f"run {self.run_id} already ended ({self.status})")
        return self._client, self.run_id

    def _find_parent(self, client: Any, run_dir: Path) -> Any | None:
        """The sweep parent run to nest under, or None (standalone run)."""
        parent_id = self.parent_run_id or os.environ.get(PARENT_RUN_ENV) or None
        origin = "env " + PARENT_RUN_ENV if not self.parent_run_id else "parent_run_id"
        if parent_id is None:
            marker = run_dir.resolve().parent / PARENT_FILE
            if marker.is_file():
                with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                    info = json.loads(marker.read_text())
                    if info.get("uri") == self.uri:
                        parent_id = info["run_id"]
                        origin = str(marker)
        if not parent_id:
            return None
        try:
            parent = client.get_run(parent_id)
        except Exception as e:
            log.warning(
                "sweep parent run %s (from %s) is not in %s (%s); this run is not nested",
                parent_id,
                origin,
                self.uri,
                e,
            )
            return None
        if parent.info.status != "RUNNING":
            log.warning(
                "sweep parent run %s (from %s) is %s, not RUNNING; this run is not nested",
                parent_id,
                origin,
                parent.info.status,
            )
            return None
        return parent

    def _queue_traces(self, prefix: str, rows: Iterable[Mapping[str, Any]]) -> None:
        from wai_exp.tracking.traces import sample_rollouts

        # Only the sampled rollouts wait for the run's end (the writer logs traces then), not
        # the stage's rows; sampling the sample again picks the same rows.
        picked = sample_rollouts(rows, self.traces, seed=prefix)
        job = (self.uri, self.run_id, self.experiment_id, prefix, picked, self.traces)
        if self.trace_sink is not None:
            self.trace_sink(job)
        else:
            log_traces(job)

    def _log_rows_file(self, rows_path: Path, prefix: str) -> None:
        """``<prefix>/rows.jsonl.gz``: the rows file gzipped as it streams into a temporary
        file (JSONL rows shrink about 20x), so the store holds a small copy, not a second
        full one."""
        with tempfile.TemporaryDirectory(prefix="wai-rows-") as tmp:
            dest = Path(tmp) / ROWS_ARTIFACT
            gzip_file(rows_path, dest)
            self._client.log_artifact(self.run_id, str(dest), prefix)

    def _log_dataset(self, dataset: Any, context: str) -> None:
        """The rows as a dataset input; a pipeline that publishes holds the others until
        the published one is logged first (or the run ends)."""
        from mlflow.entities import DatasetInput, InputTag
        from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

        entity = DatasetInput(
            dataset=dataset, tags=[InputTag(key=MLFLOW_DATASET_CONTEXT, value=context)]
        )
        if self._hold_inputs and context != "training":
            self._held_inputs.append(entity)
            return
        held, self._held_inputs = self._held_inputs, []
        self._log_inputs([entity, *held])

    def _log_inputs(self, entities: Sequence[Any]) -> None:
        if not entities:
            return
        try:
            self._client.log_inputs(self.run_id, datasets=list(entities))
        except Exception as e:
            log.debug("dataset inputs %s not logged: %s", [d.dataset.name for d in entities], e)

    def _flush_held(self) -> None:
        """Write what waited for the headline or the training dataset: the run ends without
        them (a failed stage, or a pipeline that never got there)."""
        metrics, self._held_metrics = _last_per_key(self._held_metrics), []
        for chunk in chunked(metrics, MAX_METRICS_PER_BATCH):
            self._client.log_batch(self.run_id, metrics=chunk, synchronous=True)
        held, self._held_inputs = self._held_inputs, []
        self._log_inputs(held)

    def _plots_for(self, report: Mapping[str, Any] | None) -> bool:
        """Whether a stage with this report gets plots: plots are on, and it did not fail
        with its headline withheld (``headline_not_measured``). Its plots would draw the
        rates of the rows it got to (a histogram at a mean of 0.000 where no judge verdict
        was read), the numbers the run says it did not measure."""
        return self.plots and not (
            isinstance(report, Mapping) and report.get("headline_not_measured")
        )

    def _log_plots(
        self,
        prefix: str,
        rows_path: Path | None,
        report: Mapping[str, Any] | None,
        metrics: Mapping[str, Any] | None = None,
    ) -> None:
        """Start the stage's plots in a process of their own (plot_process); their files
        are logged once rendered, at the latest when the run ends."""
        try:
            from wai_exp.tracking.plot_process import stage_plots

            job = stage_plots(prefix, rows_path, report, metrics, self._band)
            self._plot_jobs.append((prefix, job))
        except Exception as e:
            log.warning("stage %s: plots not made (%s: %s)", prefix, type(e).__name__, e)

    def _log_rendered_plots(self, *, wait: bool, within_s: float = PLOT_WAIT_S) -> None:
        """Log the plot files of the jobs that are done; with ``wait``, of all of them,
        waiting at most ``within_s`` seconds in all (a job still rendering then is
        dropped with a warning)."""
        deadline = time.monotonic() + within_s
        pending = []
        for prefix, job in self._plot_jobs:
            if not (wait or job.done()):
                pending.append((prefix, job))
                continue
            try:
                for name, path in job.files(max(0.0, deadline - time.monotonic())).items():
                    self._client.log_artifact(
                        self.run_id, str(path), str(Path(prefix, name).parent)
                    )
            except Exception as e:
                log.warning("stage %s: plots not logged (%s: %s)", prefix, type(e).__name__, e)
            finally:
                job.discard()
        self._plot_jobs = pending

    def _atexit(self) -> None:
        """Never leave a run RUNNING: a process that exits without finish() marks it FAILED."""
        if self.run_id is None or self.status in _STATUSES:
            return
        with contextlib.suppress(Exception):
            self._flush_held()
        with contextlib.suppress(Exception):  # the plots already rendering, briefly
            self._log_rendered_plots(wait=True, within_s=10.0)
        with contextlib.suppress(Exception):
            self._client.set_tag(
                self.run_id,
                "wai.error",
                "the process exited before the run finished (crash, interrupt or missing finish())",
            )
        with contextlib.suppress(Exception):
            self._client.set_terminated(self.run_id, "FAILED")
            self.status = "FAILED"


def _stage_kinds(config: Mapping[str, Any]) -> list[str]:
    """The kinds of the run's pipeline stages, in config order ([] when it has none): a
    ``compare`` stage's delta is the run's answer, a ``publish`` stage's file its training
    dataset."""
    pipeline = config.get("pipeline") if isinstance(config, Mapping) else None
    stages = pipeline.get("stages") if isinstance(pipeline, Mapping) else None
    if not isinstance(stages, Mapping):
        return []
    return [str(s.get("kind")) for s in stages.values() if isinstance(s, Mapping) and s.get("kind")]


def _last_per_key(metrics: Sequence[Any]) -> list[Any]:
    """Each key once, where it first appears, with its last value (``rows_made`` after each
    of two simulate stages held together: one write, the total)."""
    out: dict[str, Any] = {}
    for m in metrics:
        out[m.key] = m  # a dict keeps a key where it was first set
    return list(out.values())


def _swept_by(parent: Any, overrides: Sequence[str]) -> list[str]:
    """The keys a sweep parent varies that this child sets: the child's value differs from
    the parent's (``agent.skill=0.6`` under ``agent.skill=0.6,0.9``), or the parent's command
    line lacks the key (a preset's ``hydra.sweeper.params``); none without a parent."""
    if parent is None:
        return []
    typed = parse_overrides(override_list(parent.data.tags))
    return [k for k, v in parse_overrides(overrides).items() if not same_value(typed.get(k), v)]


def log_traces(job: tuple[Any, ...]) -> int:
    """Log one stage's sampled rollouts as traces (``wai_exp.tracking.traces``); best-effort:
    a failure is a warning, never the run's failure. Returns how many were logged."""
    uri, run_id, experiment_id, stage, rows, cap = job
    try:
        from wai_exp.tracking.traces import log_rollout_traces

        return log_rollout_traces(uri, run_id, experiment_id, stage, rows, cap, redact=redact_text)
    except Exception as e:  # noqa: BLE001
        log.warning("stage %s: rollouts not logged as traces (%s: %s)", stage, type(e).__name__, e)
        return 0


def _yaml(obj: Any) -> str:
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True, default_flow_style=False)
