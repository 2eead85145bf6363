"""Diagnosing a dataset or a reward: reward-hack scans and their diff, reward correlations, logprob staleness and KL.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

from wai_exp.domain.lazy import lazy_exports

# Not re-exported here: hack_scan, hack_scan_diff. Each shares its name with the module
# that defines it, so after that module is imported the package attribute is the module;
# re-exporting would make the answer depend on import order. Use ``wai_exp.<name>``.

#: public name -> module of this folder that defines it
_EXPORTS: dict[str, str] = {
    "format_hack_scan": "hack_scan",
    "format_hack_scan_diff": "hack_scan_diff",
    "logprob_report": "logprobs",
    "mean_kl": "logprobs",
    "reward_correlations": "correlations",
    "staleness_report": "logprobs",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
