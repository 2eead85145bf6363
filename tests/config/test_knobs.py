"""The knob table: every advanced key of the simulate reference, with the reference's default."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from wai_exp.config.knobs import (
    KNOBS,
    knob_defaults,
    knob_table_markdown,
    knobs_yaml,
    resolve_knobs,
)

REPO = Path(__file__).resolve().parents[2]

# Hard-coded from shared/seeds/simulate-parameters.md ("Experiment knobs" table).
EXPERIMENT = {
    "seed": 0,
    "concurrency": 32,
    "avg_turns": 12,
    "patience": "normal",
    "user_temperature": None,
    "writer_temperature": (0.45, 1.05),
    "world": {},
    "pass_threshold": 0.5,
    "mutate_graded_failures": None,  # "on with grader=": None resolves against grader
    "smoothing_alpha": 1.0,
    "allocation_gain": 4.0,
    "allocation_tool_weight": 0.6,
    "allocation_condition_weight": 0.4,
    "gap_weight": 0.7,
    "adaptive_verify_explore_floor": 0.55,
    "tier_mix_min_rows": 20,
    "tier_mix_tolerance": 0.1,
    "stop_grace": 5,
    "embedder": "hash",
}
# ... and the "Engine internals" table.
ENGINE = {
    "empty_rounds_to_stop": 8,
    "writer_idle_rounds_to_restart": 4,
    "writer_idle_rounds_to_rest": 2,
    "restart_avoid_window": 8,
    "rows_per_extra_restart": 100,
    "dead_agent_errors": 16,
    "dead_agent_budget_multiple": 2,
    "closing_margin": 2.0,
    "closing_window_rollouts": 20,
    "collect_wait_s": 0.35,
    "collect_wait_floor_s": 0.1,
    "writer_wait_s": 0.5,
    "writer_wait_floor_s": 0.2,
    "hosted_touch_s": 5.0,
    "scene_join_s": 8.0,
    "scene_join_clocked_s": 1.0,
    "writer_buffer_waves": 2,
    "writer_buffer_cap": 96,
    "writer_typical_completions": 3,
    "pool_low_floor": 16,
    "pool_low_cap": 64,
    "pool_low_flight_divisor": 4,
    "offline_topup_multiple": 2,
    "offline_bounce_limit": 20,
    "offline_bounce_stride": 17,
    "restart_seed_stride": 997,
    "first_wave_writers": 2,
    "first_wave_cards": 4,
    "first_wave_tokens": 320,
    "min_cards_per_wave": 2,
    "tokens_per_card": 130,
    "wave_tokens_base": 128,
    "wave_tokens_floor": 256,
    "wave_tokens_cap": 2048,
    "failing_seeds_cap": 40,
    "select_oversample": 3,
    "family_cap_floor": 16,
    "family_cap_per_phrasing": 4,
    "writer_context_items": 8,
    "writer_context_parents": 10,
    "family_avoid_items": 6,
    "region_novelty_smoothing": 0.5,
    "gap_min_rows": 3,
    "gap_rich_signatures": 3,
    "gap_value_stuck": 1.0,
    "gap_value_rich": 0.2,
    "gap_value_unknown": 0.5,
    "short_share_floor": 0.08,
    "long_share_floor": 0.1,
    "followup_starved_min": 8,
    "followup_starved_divisor": 4,
    "semantic_duplicate_novelty": 0.05,
    "idle_judge_share": 0.1,
    "progress_every_s": 10.0,
    "progress_every_rows": 10,
    "flush_report_rows": 25,
    "flush_report_s": 5.0,
}


#: Engine knobs beyond the spec's table (each knob's reason says so): the saturation plateau,
#: the bound on one model call's rate-limit waits.
BEYOND_SPEC = {"saturation_window": 250, "saturation_growth": 0.02, "rate_limit_wait": 600.0}


def test_every_reference_key_is_declared_once_with_the_reference_default():
    names = [k.name for k in KNOBS]
    assert len(names) == len(set(names))
    assert set(names) == set(EXPERIMENT) | set(ENGINE) | set(BEYOND_SPEC)
    defaults = knob_defaults()
    for name, expected in {**EXPERIMENT, **ENGINE, **BEYOND_SPEC}.items():
        assert defaults[name] == expected, name
    sections = {k.name: k.section for k in KNOBS}
    assert {n for n, s in sections.items() if s == "experiment"} == set(EXPERIMENT)
    assert {n for n, s in sections.items() if s == "engine"} == set(ENGINE) | set(BEYOND_SPEC)
    for k in KNOBS:
        assert (k.name in BEYOND_SPEC) == k.reason.startswith("Beyond the spec."), k.name


def test_every_knob_says_why_and_defaults_sit_inside_their_bounds():
    for k in KNOBS:
        assert k.reason.strip(), k.name
        assert k.doc.strip(), k.name
        if k.lo is not None and k.hi is not None:
            assert k.lo <= k.hi, k.name
    # The defaults themselves must pass validation.
    assert resolve_knobs({k.name: k.default for k in KNOBS}) == knob_defaults()


def test_resolve_overlays_and_coerces():
    r = resolve_knobs(
        {
            "concurrency": 4,
            "stop_grace": 2,
            "writer_temperature": [0.2, 0.9],
            "patience": (0.1, 0.2),
        }
    )
    assert r["concurrency"] == 4
    assert r["stop_grace"] == 2.0 and isinstance(r["stop_grace"], float)
    assert r["writer_temperature"] == (0.2, 0.9)
    assert r["patience"] == {"second": 0.1, "later": 0.2}
    assert r["avg_turns"] == 12  # untouched keys keep their defaults
    assert resolve_knobs({"writer_temperature": 0.7})["writer_temperature"] == 0.7
    assert resolve_knobs({"patience": "endless"})["patience"] == "endless"


def test_defaults_are_fresh_copies():
    d = knob_defaults()
    d["world"]["search_hits"] = 3
    assert knob_defaults()["world"] == {}


def test_unknown_key_names_closest_and_valid_keys():
    with pytest.raises(ValueError) as exc:
        resolve_knobs({"concurency": 4})
    msg = str(exc.value)
    assert "'concurency'" in msg and "Did you mean 'concurrency'" in msg
    assert "avg_turns" in msg and "wave_tokens_cap" in msg  # lists the valid keys


def test_out_of_bounds_names_floor_ceiling_and_default():
    with pytest.raises(ValueError) as exc:
        resolve_knobs({"concurrency": 0})
    msg = str(exc.value)
    assert "below the floor 1" in msg and "ceiling 4096" in msg and "default 32" in msg
    with pytest.raises(ValueError) as exc:
        resolve_knobs({"pass_threshold": 1.5})
    msg = str(exc.value)
    assert "above the ceiling 1.0" in msg and "floor 0.0" in msg and "default 0.5" in msg
    with pytest.raises(ValueError, match="ceiling"):
        resolve_knobs({"writer_temperature": (0.5, 3.0)})
    with pytest.raises(ValueError, match="floor"):
        resolve_knobs({"patience": {"second": -0.1, "later": 0.5}})
    with pytest.raises(ValueError, match="NaN"):
        resolve_knobs({"gap_weight": float("nan")})


def test_wrong_type_names_expected_type():
    with pytest.raises(ValueError, match="must be an int"):
        resolve_knobs({"concurrency": "many"})
    with pytest.raises(ValueError, match="must be an int"):
        resolve_knobs({"concurrency": True})  # a bool is not a count
    with pytest.raises(ValueError, match="must be a number"):
        resolve_knobs({"gap_weight": "0.5"})
    with pytest.raises(ValueError, match="True, False or None"):
        resolve_knobs({"mutate_graded_failures": "yes"})
    with pytest.raises(ValueError, match="must be a dict"):
        resolve_knobs({"world": [1]})
    with pytest.raises(ValueError, match="not a level"):
        resolve_knobs({"patience": "impatient"})
    with pytest.raises(ValueError, match="not one of"):
        resolve_knobs({"embedder": "bert"})
    with pytest.raises(ValueError, match="low end is above"):
        resolve_knobs({"writer_temperature": (0.9, 0.2)})


def test_conf_yaml_is_generated_from_the_table():
    path = REPO / "conf" / "knobs" / "default.yaml"
    assert path.read_text() == knobs_yaml()
    loaded = OmegaConf.to_container(OmegaConf.load(path))
    assert resolve_knobs(loaded) == knob_defaults()


def test_markdown_table_lists_every_knob():
    md = knob_table_markdown()
    for k in KNOBS:
        assert f"| `{k.name}` |" in md
    assert "### Experiment knobs" in md and "### Engine internals" in md
    engine_only = knob_table_markdown("engine")
    assert "`concurrency`" not in engine_only and "`wave_tokens_cap`" in engine_only
    with pytest.raises(ValueError):
        knob_table_markdown("other")


def test_hydra_containers_are_accepted():
    cfg = OmegaConf.create(
        {
            "writer_temperature": [0.1, 0.5],
            "patience": {"second": 0.1, "later": 0.2},
            "world": {"search_hits": 2},
        }
    )
    r = resolve_knobs(cfg)
    assert r["writer_temperature"] == (0.1, 0.5)
    assert r["patience"] == {"second": 0.1, "later": 0.2}
    assert r["world"] == {"search_hits": 2} and type(r["world"]) is dict
