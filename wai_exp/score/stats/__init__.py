"""Statistics over rows: task-level resampling and intervals, pass@k, run summaries, deltas between runs, power and sizing.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> module of this folder that defines it
_EXPORTS: dict[str, str] = {
    "PassAt": "passat",
    "compare_runs": "stats",
    "delta_report": "delta",
    "detectable_effect": "power",
    "eval_variance": "stats",
    "format_delta_report": "delta",
    "holdout_size": "power",
    "marker_names": "stats",
    "marker_summary": "stats",
    "metric_summary": "stats",
    "pass_at": "passat",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
