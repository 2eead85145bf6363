"""Stage kinds: a name -> function registry, filled by a decorator.

A stage kind is a function ``run(ctx, params, inputs) -> StageResult``::

    from wai_exp.pipeline.registry import StageContext, StageResult, register

    @register("my_report", reads=("judge",))
    def run(ctx: StageContext, params: dict, inputs: dict[str, StageResult]) -> StageResult:
        rows = next(iter(inputs.values())).rows
        return StageResult(rows=rows, report={"n": len(rows)}, text=f"{len(rows)} rows")

``reads`` names the top-level config sections the stage depends on (``"simulate"``,
``"agent"``, ``"seed"`` ...). They go into the stage's cache key, so changing one of them
re-runs the stage and changing anything else does not. ``reads=None`` means "the whole
config except tracking, name and cache" (the safe default for user stages).

Built-in kinds live in ``wai_exp/pipeline/stages/<kind>.py`` and are imported only when a
pipeline names them, so ``wai-exp --help`` never pays for numpy/scipy. A user stage is named
in the pipeline config by ``_target_: "package.module.function"`` (or ``"package.module:function"``);
the function needs no decorator.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from wai_exp.pipeline import reads

if TYPE_CHECKING:
    from wai_exp.config.models import RootConfig

_Section = TypeVar("_Section", bound=BaseModel)

#: Config sections that never change what a stage computes, so never enter a cache key.
NOT_COMPUTED_FROM = ("tracking", "name", "cache")


@dataclass
class StageResult:
    """What a stage hands the runner (and its downstream stages).

    ``rows`` are plain row dicts (written scrubbed to ``rows.jsonl``; any iterable of them
    will do). A stage's inputs hand it their rows as a sequence that may be read from disk
    lazily (``pipeline.stored_rows.StoredRows``: ``len()``, iteration, indexing); take
    ``list(...)`` of it, or use ``input_rows``, to read it once. ``report`` a JSON-able
    dict (``report.json``), ``text`` the block a person reads (``report.txt``), ``metrics``
    flat float metrics (the runner prefixes them with the stage name for MLflow) and ``tags``
    string tags for the run (e.g. the gate verdict).
    """

    rows: Sequence[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class StageContext:
    """Everything a stage may read besides its params and inputs.

    ``config`` is the whole resolved config as plain containers; ``stage_dir`` is where the
    stage's outputs are being written (its cache entry); ``partial_path`` is the append-only
    file a long stage streams finished rows to so a crash loses none; ``progress`` takes a
    dict (``{"done": n, "total": m, "unit": "rows"}``) and draws the progress line.
    """

    name: str
    kind: str
    config: dict[str, Any]
    run_dir: Path
    stage_dir: Path
    start_dir: Path
    key: str
    partial_path: Path
    progress: Callable[[dict[str, Any]], None] = lambda info: None
    #: ``config`` as validated before the run (``config.models.RootConfig``); None when the
    #: pipeline was run from Python without one
    root: RootConfig | None = None

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", 0))

    def section(
        self, model: type[_Section], name: str, params: dict[str, Any] | None = None
    ) -> _Section:
        """Config section ``name`` as its pydantic ``model`` (``config.models``), with the
        stage's ``params`` that are fields of the model laid over it: the typed config a stage
        reads, so every default lives in the model, not restated at each read. The console
        script validated the whole config before any work, so on its runs this cannot fail."""
        given = {k: v for k, v in (params or {}).items() if k in model.model_fields}
        validated = getattr(self.root, name, None)
        if not given and isinstance(validated, model):
            return validated  # validated once, before the run
        return model.model_validate({**(self.config.get(name) or {}), **given})


StageFn = Callable[[StageContext, dict[str, Any], dict[str, StageResult]], StageResult]


#: ``key_sections(sections, params) -> sections``: the config sections a stage's cache key
#: is made of, from those it ``reads`` (a stage reading a file alone keys on that file).
KeySections = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
#: ``key_params(params) -> params``: the stage params its cache key is made of (a param
#: ``key_sections`` already put into the key in the form the stage reads it is left out).
KeyParams = Callable[[dict[str, Any]], dict[str, Any]]
#: ``key_deps(config, params) -> {name: value}``: what else its result depends on that no
#: section it reads holds (a value resolved from the environment ...), added to its key.
KeyDeps = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
#: ``never_reused(config, params) -> why | None``: why this run of the stage cannot be
#: checked against a cache entry (what it depends on is outside any key), so it runs.
NeverReused = Callable[[dict[str, Any], dict[str, Any]], str | None]
#: ``reused_note(config, params) -> note | None``: what a reused result may not reflect
#: (something its key cannot see), said once when the stage is reused.
ReusedNote = Callable[[dict[str, Any], dict[str, Any]], str | None]
#: ``prepare(config, params)``: work a stage can start before the run's tracking does.
Prepare = Callable[[Mapping[str, Any], dict[str, Any]], None]


@dataclass(frozen=True)
class StageKind:
    """A registered kind: its function, the config sections its result depends on, and the
    hooks the runner calls instead of knowing kinds by name (see ``register``)."""

    name: str
    fn: StageFn
    reads: tuple[str, ...] | None
    #: False for a stage whose output is files in the run folder (``publish``): it always
    #: runs, so those files are this run's.
    cached: bool = True
    key_sections: KeySections | None = None
    key_params: KeyParams | None = None
    key_deps: KeyDeps | None = None
    never_reused: NeverReused | None = None
    reused_note: ReusedNote | None = None
    #: The closing summary's own line this kind's numbers go to ("grading", "selection" ...);
    #: None = the summary shows the first line of its report text.
    headline: str | None = None
    #: Called with the run's config and the stage's params before tracking starts, for
    #: work that can run meanwhile (the simulate stage's worker processes start there).
    prepare: Prepare | None = None


#: kind name -> StageKind, filled by ``register``.
REGISTRY: dict[str, StageKind] = {}

#: Built-in kinds and the module that registers each. Imported on first use only.
BUILTIN: dict[str, str] = {
    "simulate": "wai_exp.pipeline.stages.simulate",
    "grade": "wai_exp.pipeline.stages.grade",
    "evaluate": "wai_exp.pipeline.stages.evaluate",
    "optimize": "wai_exp.pipeline.stages.optimize",
    "publish_gate": "wai_exp.pipeline.stages.publish_gate",
    "report": "wai_exp.pipeline.stages.report",
    "next_round": "wai_exp.pipeline.stages.next_round",
    "compare": "wai_exp.pipeline.stages.compare",
    "eval_variance": "wai_exp.pipeline.stages.eval_variance",
    "publish": "wai_exp.pipeline.stages.publish",
}


class UnknownStageKind(LookupError):
    """A pipeline names a stage kind (or ``_target_``) that cannot be found."""


def register(
    name: str,
    *,
    reads: tuple[str, ...] | None = None,
    cached: bool = True,
    key_sections: KeySections | None = None,
    key_params: KeyParams | None = None,
    key_deps: KeyDeps | None = None,
    never_reused: NeverReused | None = None,
    reused_note: ReusedNote | None = None,
    headline: str | None = None,
    prepare: Prepare | None = None,
) -> Callable[[StageFn], StageFn]:
    """Decorator: register ``fn`` as stage kind ``name``. Returns ``fn`` unchanged.

    ``cached=False`` makes the stage run every time (never reused from the cache).
    ``key_sections`` narrows the sections its cache key is made of, ``key_params`` the
    params, ``key_deps`` adds what it depends on outside them (all are called with the
    stage's params); ``never_reused(config, params)`` says why a run of it cannot be
    checked against the cache (it then runs, saying why); ``reused_note(config, params)``
    what a reused result of it may not reflect (said once when reused); ``headline``
    names the closing summary's line its numbers go to; ``prepare(config, params)`` starts
    what the stage will need while tracking starts. Registering a name twice replaces
    the earlier function (a user may shadow a built-in).
    """

    def deco(fn: StageFn) -> StageFn:
        REGISTRY[name] = StageKind(
            name=name,
            fn=fn,
            reads=tuple(reads) if reads is not None else None,
            cached=cached,
            key_sections=key_sections,
            key_params=key_params,
            key_deps=key_deps,
            never_reused=never_reused,
            reused_note=reused_note,
            headline=headline,
            prepare=prepare,
        )
        return fn

    return deco


def available_kinds() -> list[str]:
    """Every kind a pipeline can name: registered ones plus built-ins whose module exists."""
    found = set(REGISTRY)
    for kind, module in BUILTIN.items():
        try:
            if importlib.util.find_spec(module) is not None:
                found.add(kind)
        except ModuleNotFoundError:
            continue
    return sorted(found)


def _import_here_too(module_name: str) -> Any:
    """Import ``module_name``; a module or package that is not installed but sits in the
    folder wai-exp was started from (``agents.py`` beside the config) is found there, as
    ``python -m`` would find it. That folder goes last on ``sys.path``, so it never shadows
    an installed module."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        top = module_name.partition(".")[0]
        beside = Path(here, f"{top}.py").is_file() or Path(here, top, "__init__.py").is_file()
        if exc.name != top or not beside or here in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(module_name)


def _import_target(target: str) -> Any:
    module_name, sep, attr = target.partition(":")
    if not sep:
        module_name, _, attr = target.rpartition(".")
    if not module_name or not attr:
        raise UnknownStageKind(
            f"_target_ {target!r} is not a dotted path; write 'package.module.function' "
            "or 'package.module:function'"
        )
    try:
        with reads.loading(module_name):
            module = _import_here_too(module_name)
    except ImportError as exc:
        raise UnknownStageKind(
            f"_target_ {target!r}: cannot import module {module_name!r} ({exc}). Put it in the "
            "folder you run wai-exp from, install its package, or add its folder to PYTHONPATH"
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise UnknownStageKind(
            f"_target_ {target!r}: module {module_name!r} has no {attr!r}"
        ) from exc


def resolve(kind: str | None = None, target: str | None = None) -> StageKind:
    """The StageKind for a pipeline entry, by ``kind`` name or ``_target_`` path.

    Raises ``UnknownStageKind`` naming the available kinds (and the closest one).
    """
    if target:
        obj = _import_target(target)
        if isinstance(obj, StageKind):
            return obj
        registered = next((k for k in REGISTRY.values() if k.fn is obj), None)
        if registered is not None:
            return registered
        if not callable(obj):
            raise UnknownStageKind(f"_target_ {target!r} is not callable")
        return StageKind(name=target, fn=obj, reads=None)
    if kind is None:
        raise UnknownStageKind("a stage needs `kind:` (a registered stage kind) or `_target_:`")
    if kind not in REGISTRY and kind in BUILTIN:
        try:
            importlib.import_module(BUILTIN[kind])
        except ModuleNotFoundError as exc:
            if exc.name != BUILTIN[kind]:
                raise
    if kind in REGISTRY:
        return REGISTRY[kind]
    import difflib

    kinds = available_kinds()
    close = difflib.get_close_matches(kind, kinds, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownStageKind(
        f"unknown stage kind {kind!r}.{hint} Available kinds: {', '.join(kinds)}; or name your "
        "own function with `_target_: package.module.function`."
    )


def input_rows(name: str, inputs: dict[str, StageResult]) -> list[dict[str, Any]]:
    """The rows a one-input stage works on: its single need's rows, as a list (rows the
    runner keeps on disk between stages are read here, once).

    Raises ``ValueError`` naming the stage when it has no input or several (a stage that
    combines inputs, like ``compare``, reads ``inputs`` itself).
    """
    if len(inputs) != 1:
        got = ", ".join(inputs) or "none"
        raise ValueError(
            f"stage {name!r} reads the rows of exactly one stage; its `needs` lists {got}. "
            "Set `needs: [<stage>]` in the pipeline config."
        )
    rows = next(iter(inputs.values())).rows
    return rows if isinstance(rows, list) else list(rows)


def import_object(path: str, what: str) -> Any:
    """``"package.module:attr"`` (or ``"package.module.attr"``) -> the object.

    Raises ``ValueError`` naming ``what`` (the config key) and the import problem.
    """
    try:
        return _import_target(path)
    except UnknownStageKind as exc:
        raise ValueError(f"{what}: {str(exc).replace('_target_ ', '', 1)}") from exc
