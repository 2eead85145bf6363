"""Diagnosing a dataset or a reward: reward-hack scans and their diff, reward correlations, logprob staleness and KL.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wai_exp.domain.lazy import lazy_exports

# Not re-exported here: hack_scan, hack_scan_diff. Each shares its name with the module
# that defines it, so after that module is imported the package attribute is the module;
# re-exporting would make the answer depend on import order. Use ``wai_exp.<name>``.

__all__ = [
    "format_hack_scan",
    "format_hack_scan_diff",
    "logprob_report",
    "mean_kl",
    "reward_correlations",
    "staleness_report",
]

if TYPE_CHECKING:
    from wai_exp.score.diagnose.correlations import reward_correlations
    from wai_exp.score.diagnose.hack_scan import format_hack_scan
    from wai_exp.score.diagnose.hack_scan_diff import format_hack_scan_diff
    from wai_exp.score.diagnose.logprobs import logprob_report, mean_kl, staleness_report

#: public name -> module of this package that defines it, imported on first use
_EXPORTS: dict[str, str] = {
    "format_hack_scan": "hack_scan",
    "format_hack_scan_diff": "hack_scan_diff",
    "logprob_report": "logprobs",
    "mean_kl": "logprobs",
    "reward_correlations": "correlations",
    "staleness_report": "logprobs",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
