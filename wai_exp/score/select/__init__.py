"""Choosing training rows: SFT/RL selection, band and unanimity trims, duplicate hygiene, optimize and next_round, curriculum, preference pairs, decontamination and the publish gate.

The names below load lazily (the modules import numpy and scipy), so importing one module
of this folder does not import the others.
"""

from __future__ import annotations

from wai_exp.domain.lazy import lazy_exports

# Not re-exported here: curriculum, decontaminate, optimize, publish_gate. Each shares its name with the module
# that defines it, so after that module is imported the package attribute is the module;
# re-exporting would make the answer depend on import order. Use ``wai_exp.<name>``.

#: public name -> module of this folder that defines it
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

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
