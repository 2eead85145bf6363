"""The pipeline config as a DAG: check every ``needs`` and order the stages.

A pipeline config is ``{"stages": {name: {"kind" | "_target_", "needs": [...], "params": {...}}}}``.
``plan(stages)`` returns the stages in a topological order that keeps the config's own order
among stages that do not depend on each other, so a run reads top to bottom like its YAML.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class PipelineError(ValueError):
    """The pipeline config cannot run: a missing need, a cycle, a stage without a kind."""


@dataclass(frozen=True)
class StageSpec:
    """One stage of the pipeline, as configured."""

    name: str
    kind: str | None
    target: str | None
    needs: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.kind or self.target or "?"


def _specs(stages: Mapping[str, Any]) -> dict[str, StageSpec]:
    if not isinstance(stages, Mapping) or not stages:
        raise PipelineError(
            "the pipeline has no stages; give `pipeline.stages` a mapping like "
            "{simulate: {kind: simulate}, grade: {kind: grade, needs: [simulate]}}"
        )
    out: dict[str, StageSpec] = {}
    for name, node in stages.items():
        node = dict(node or {})
        kind, target = node.get("kind"), node.get("_target_", node.get("target"))
        if kind is None and target is None:
            raise PipelineError(
                f"stage {name!r} names neither `kind:` nor `_target_:`; set `kind:` to a stage "
                "kind (simulate, grade, optimize, publish_gate ...)"
            )
        needs = node.get("needs") or []
        if isinstance(needs, str):
            needs = [needs]
        out[str(name)] = StageSpec(
            name=str(name),
            kind=kind,
            target=target,
            needs=tuple(str(n) for n in needs),
            params=dict(node.get("params") or {}),
        )
    return out


def plan(stages: Mapping[str, Any]) -> list[StageSpec]:
    """The stages in the order they run.

    Raises ``PipelineError`` when a stage needs one that does not exist (naming the closest
    stage), needs itself, or the needs form a cycle (naming the cycle).
    """
    specs = _specs(stages)
    names = list(specs)
    for spec in specs.values():
        for need in spec.needs:
            if need == spec.name:
                raise PipelineError(f"stage {spec.name!r} needs itself; remove it from its `needs`")
            if need not in specs:
                close = difflib.get_close_matches(need, names, n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise PipelineError(
                    f"stage {spec.name!r} needs {need!r}, which is not a stage of this pipeline."
                    f"{hint} Stages: {', '.join(names)}"
                )
    # Kahn's algorithm, always taking the first ready stage in config order.
    remaining = {n: set(specs[n].needs) for n in names}
    order: list[StageSpec] = []
    while remaining:
        ready = [n for n in names if n in remaining and not remaining[n]]
        if not ready:
            raise PipelineError(f"the stages' needs form a cycle: {' -> '.join(_cycle(remaining))}")
        name = ready[0]
        order.append(specs[name])
        del remaining[name]
        for deps in remaining.values():
            deps.discard(name)
    return order


def _cycle(remaining: dict[str, set[str]]) -> list[str]:
    # Every stage left has an unmet need among the remaining ones: walking needs must revisit.
    start = next(iter(remaining))
    path, seen = [start], {start: 0}
    node = start
    while True:
        node = sorted(remaining[node])[0]
        if node in seen:
            return path[seen[node] :] + [node]
        seen[node] = len(path)
        path.append(node)
