"""Statistics over rows: task-level resampling and intervals, pass@k, run summaries, deltas between runs, power and sizing.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

from wai_exp.domain.lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
