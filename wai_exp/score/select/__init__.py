"""Choosing training rows: SFT/RL selection, band and unanimity trims, duplicate hygiene, optimize and next_round, curriculum, preference pairs, decontamination and the publish gate.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wai_exp.domain.lazy import lazy_exports

# Not re-exported here: curriculum, decontaminate, optimize, publish_gate. Each shares its name with the module
# that defines it, so after that module is imported the package attribute is the module;
# re-exporting would make the answer depend on import order. Use ``wai_exp.<name>``.

__all__ = [
    "PublishGateError",
    "build_preference_pairs",
    "calibrate",
    "dedupe_groups",
    "filter_rl_rows",
    "format_curriculum",
    "group_signal",
    "near_duplicate_prompts",
    "next_round",
    "retire_solved",
    "select_for_rl",
    "select_for_sft",
    "trim_out_of_band",
    "trim_unanimous_groups",
]

if TYPE_CHECKING:
    from wai_exp.score.select.curriculum import format_curriculum, retire_solved
    from wai_exp.score.select.hygiene import dedupe_groups, near_duplicate_prompts
    from wai_exp.score.select.optimize import filter_rl_rows, group_signal, next_round
    from wai_exp.score.select.preference import build_preference_pairs
    from wai_exp.score.select.publish_gate import PublishGateError, calibrate
    from wai_exp.score.select.select import select_for_rl, select_for_sft
    from wai_exp.score.select.trim import trim_out_of_band, trim_unanimous_groups

#: public name -> module of this package that defines it, imported on first use
_EXPORTS: dict[str, str] = {
    "PublishGateError": "publish_gate",
    "build_preference_pairs": "preference",
    "calibrate": "publish_gate",
    "dedupe_groups": "hygiene",
    "filter_rl_rows": "optimize",
    "format_curriculum": "curriculum",
    "group_signal": "optimize",
    "near_duplicate_prompts": "hygiene",
    "next_round": "optimize",
    "retire_solved": "curriculum",
    "select_for_rl": "select",
    "select_for_sft": "select",
    "trim_out_of_band": "trim",
    "trim_unanimous_groups": "trim",
}

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
