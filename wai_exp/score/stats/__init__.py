"""Statistics over rows: task-level resampling and intervals, pass@k, run summaries, deltas between runs, power and sizing.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wai_exp.domain.lazy import lazy_exports

__all__ = [
    "PassAt",
    "compare_runs",
    "delta_report",
    "detectable_effect",
    "eval_variance",
    "format_delta_report",
    "holdout_size",
    "marker_names",
    "marker_summary",
    "metric_summary",
    "pass_at",
]

if TYPE_CHECKING:
    from wai_exp.score.stats.delta import delta_report, format_delta_report
    from wai_exp.score.stats.passat import PassAt, pass_at
    from wai_exp.score.stats.power import detectable_effect, holdout_size
    from wai_exp.score.stats.stats import (
        compare_runs,
        eval_variance,
        marker_names,
        marker_summary,
        metric_summary,
    )

#: public name -> module of this package that defines it, imported on first use
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

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
