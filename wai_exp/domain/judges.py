"""The judge kinds ``judge=<name>`` (``judge.kind``) can name: one registry.

Every part that needs to know the judges reads this table: config validation (the names
``judge.kind``, ``judge.pointwise`` and ``simulate.grader`` accept), the grade stage (which
function builds the judge), the pre-run checks (which judges need a model, a key and a
reachable server) and the floor (a model judge's costs one more call per task). It sits in
``domain`` because ``config`` may not import the stages; each kind names its builder as a
``"package.module:function"`` path, imported only when a run grades with it.

A new judge is one module with one registration::

    # my_judges.py
    from wai_exp.domain.judges import register_judge

    def exact_refund(row, **_):
        return 1.0 if "refund" in str(row.get("messages", "")) else 0.0

    @register_judge("exact_refund")
    def build(section, tools, policy):
        return exact_refund

after which ``judge=exact_refund`` composes and grades (``simulate.grader=exact_refund``
too). The console script finds the module through an entry point of your package
(``[project.entry-points."wai_exp.judges"] exact_refund = "my_judges"``); see
docs/JUDGES.md.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: ``build(section, tools, policy) -> judge``: ``section`` the run's ``judge`` config as plain
#: containers, ``tools`` the agent's declared tool names (or None), ``policy`` its system
#: prompt. The judge takes one row and returns a reward, a verdict dict or None.
Builder = Callable[[dict[str, Any], list[str] | None, str], Any]
#: ``check(section, config) -> [problem, ...]``: what would make the judge fail, found before
#: any work (one sentence each, naming the fix). No request is sent.
Check = Callable[[dict[str, Any], Mapping[str, Any]], list[str]]

#: The entry-point group a package registers its judge modules under.
ENTRY_POINTS = "wai_exp.judges"


@dataclass(frozen=True)
class JudgeKind:
    """One judge kind.

    ``build`` (a callable, or its ``"package.module:function"`` path) makes the judge from the
    ``judge`` section. ``model``: its verdicts come from a model over HTTP, so a run needs
    ``judge.model`` (or ``WAI_EXP_JUDGE``), the key and a reachable server, and the floor is
    measured only when asked (one more call per task). ``pointwise``: it grades one fresh row
    from the section alone, so ``simulate.grader`` and ``judge.pointwise`` may name it.
    ``grades_with``: the section key naming the judge that grades the rows instead
    (``pairwise`` grades with ``judge.pointwise``). ``check``: problems found before work."""

    name: str
    build: Builder | str
    model: bool = False
    pointwise: bool = True
    grades_with: str | None = None
    check: Check | str | None = None

    def builder(self) -> Builder:
        return _load(self.build)

    def problems(self, section: dict[str, Any], config: Mapping[str, Any]) -> list[str]:
        return list(_load(self.check)(section, config)) if self.check else []


JUDGES: dict[str, JudgeKind] = {}

_NAME = re.compile(r"[a-z][a-z0-9_]*")


def register_judge(
    name: str,
    build: Builder | str | None = None,
    *,
    model: bool = False,
    pointwise: bool = True,
    grades_with: str | None = None,
    check: Check | str | None = None,
) -> Any:
    """Add (or replace) judge kind ``name``. With ``build`` returns the ``JudgeKind``;
    without, a decorator that registers the function it decorates and returns it unchanged.
    Raises ``ValueError`` for a name that is not lower-case ``[a-z][a-z0-9_]*``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"judge name {name!r}: use lower-case letters, digits or '_', starting with a letter"
        )

    def add(fn: Builder | str) -> JudgeKind:
        kind = JudgeKind(name, fn, model, pointwise, grades_with, check)
        JUDGES[name] = kind
        if "hydra" in sys.modules:  # else wai_exp.conf offers it on import
            offer_to_hydra()
        return kind

    if build is not None:
        return add(build)

    def deco(fn: Builder) -> Builder:
        add(fn)
        return fn

    return deco


_plugins_loaded = False
#: entry-point name -> why it did not load (said when a run names it)
_plugin_errors: dict[str, str] = {}


def load_plugins() -> None:
    """Import every module registered under the ``wai_exp.judges`` entry-point group (once),
    so judges packages register are known before a config is checked. An entry point that
    names a builder function registers it under the entry point's name."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from wai_exp.domain.plugins import load_group

    for name, obj in load_group(ENTRY_POINTS, _plugin_errors):
        if callable(obj) and name not in JUDGES:
            register_judge(name, obj)


def offer_to_hydra() -> None:
    """Make ``judge=<name>`` compose for every registered judge without a shipped
    ``conf/judge/<name>.yaml``: the shipped checklist's section under its own kind (so
    ``judge.concurrency=4`` and the rest apply)."""
    from wai_exp.domain.plugins import offer_options

    load_plugins()
    offer_options("judge", list(JUDGES), "checklist")


def judge_kind(name: str) -> JudgeKind:
    """The registered kind ``name``; raises ``ValueError`` naming every registered judge and
    the two ways to add one."""
    load_plugins()
    try:
        return JUDGES[name]
    except KeyError:
        raise ValueError(f"judge.kind={name!r}: {unknown_judge(name)}") from None


def judge_names(*, pointwise: bool | None = None) -> list[str]:
    """The registered judges' names, sorted (only the pointwise ones, or only the others)."""
    load_plugins()
    return sorted(n for n, k in JUDGES.items() if pointwise is None or k.pointwise == pointwise)


def unknown_judge(name: Any, names: list[str] | None = None) -> str:
    """The sentence for a judge name nothing registered: the closest name, every name (or
    those of ``names``), and how to add your own."""
    import difflib

    which = judge_names() if names is None else names
    close = difflib.get_close_matches(str(name), which, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    own = "judge=callable judge.target=package.module:function, or " if names is None else ""
    if str(name) in _plugin_errors:
        return f"not registered: its {_plugin_errors[str(name)]}; fix the module or reinstall it"
    return (
        f"not a registered{' pointwise' if names is not None else ''} judge{hint}; "
        f"use one of {', '.join(which)}, {own}register your own "
        "(wai_exp.domain.judges.register_judge, see docs/JUDGES.md)"
    )


def grading_kind(section: Mapping[str, Any]) -> str:
    """The judge kind that grades the rows under ``section``: its ``kind``, or for a kind
    that grades with another (``pairwise``) the one its ``grades_with`` key names."""
    kind = str(section.get("kind") or "checklist")
    with_key = JUDGES[kind].grades_with if kind in JUDGES else None
    return str(section.get(with_key) or "checklist") if with_key else kind


def is_model_judge(section: Mapping[str, Any], *, grading: bool = False) -> bool:
    """True when the judge ``section`` names calls a model (``grading``: when the judge that
    grades the rows does, so ``pairwise`` over ``checklist`` is not)."""
    kind = grading_kind(section) if grading else str(section.get("kind") or "checklist")
    found = JUDGES.get(kind)
    return bool(found and found.model)


def _load(ref: Any) -> Any:
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


_GRADE = "wai_exp.pipeline.stages.grade"
_CHECK = "wai_exp.pipeline.input_check"
register_judge("checklist", f"{_GRADE}:build_checklist")
register_judge("conduct", f"{_GRADE}:build_conduct")
register_judge("given", f"{_GRADE}:build_given", pointwise=False)
register_judge("callable", f"{_GRADE}:build_callable", pointwise=False)
register_judge("llm", f"{_GRADE}:build_llm", model=True)
register_judge(
    "rubric_llm", f"{_GRADE}:build_rubric_llm", model=True, check=f"{_CHECK}:rubric_problems"
)
register_judge(
    "pairwise",
    f"{_GRADE}:build_pairwise",
    model=True,
    pointwise=False,
    grades_with="pointwise",
    check=f"{_CHECK}:pairwise_problems",
)
