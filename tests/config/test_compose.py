"""Every experiment preset composes with Hydra's compose API and validates."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from wai_exp.commands.validate import validate_config
from wai_exp.config.knobs import knob_defaults
from wai_exp.config.models import RootConfig
from wai_exp.pipeline.dag import plan

CONF = Path(__file__).resolve().parents[2] / "conf"
PRESETS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def composed(*overrides: str) -> dict:
    # initialize_config_module: the configs as the installed package ships them.
    with initialize_config_module(version_base="1.3", config_module="wai_exp.conf"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)


def test_the_presets_this_repo_promises_exist():
    assert {"rl_round", "sft_round", "preference_round", "explore", "eval", "next_round"} <= set(
        PRESETS
    )


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_composes_and_validates(preset):
    cfg = composed(f"+experiment={preset}")
    root = validate_config(cfg)
    assert isinstance(root, RootConfig)
    assert plan(cfg["pipeline"]["stages"])  # a valid DAG
    assert cfg["knobs"]["seed"] == cfg["seed"]


def test_primary_config_defaults():
    cfg = composed()
    root = validate_config(cfg)
    assert root.seed == 0 and root.name == "wai-exp"
    assert root.agent.kind == "scripted"
    assert root.judge.kind == "checklist" and root.selection.mode == "rl"
    assert cfg["tracking"]["kind"] == "mlflow"
    # a bare `wai-exp` explores (mode explore + the explore pipeline), never a mismatched recipe
    assert list(cfg["pipeline"]["stages"]) == ["simulate", "grade", "by_stance", "by_world_state"]
    # simulate carries the reference's defaults; null = the engine's per-mode default
    assert cfg["simulate"]["mode"] == "explore" and cfg["simulate"]["budget"] == 1000
    assert cfg["simulate"]["runs"] == 1 and cfg["simulate"]["until"] == "compute"
    assert cfg["simulate"]["fault_rate"] is None and cfg["simulate"]["time_budget"] is None
    assert cfg["simulate"]["timeout"] == 300 and cfg["simulate"]["simulator"] is False
    assert cfg["cache"] == {"enabled": True, "dir": None, "salt": ""}
    # knobs mirror the knob table, with seed and world following the top level
    expected = knob_defaults()
    expected["writer_temperature"] = list(expected["writer_temperature"])
    expected["seed"], expected["world"] = cfg["seed"], cfg["world"]
    assert cfg["knobs"] == expected


def test_rl_round_preset():
    cfg = composed("+experiment=rl_round")
    assert cfg["name"] == "rl_round"
    assert cfg["simulate"]["mode"] == "rl" and 200 <= cfg["simulate"]["budget"] <= 1000
    assert list(cfg["pipeline"]["stages"]) == [
        "simulate",
        "grade",
        "optimize",
        "publish_gate",
        "publish",
    ]
    assert [s.name for s in plan(cfg["pipeline"]["stages"])] == [
        "simulate",
        "grade",
        "optimize",
        "publish_gate",
        "publish",
    ]
    assert cfg["pipeline"]["refusal_exit_code"] == 3
    assert cfg["selection"]["band"] == [0.2, 0.8] and cfg["selection"]["gate"]["strict"] is True


def test_sft_round_preset_selects_for_sft():
    cfg = composed("+experiment=sft_round")
    assert cfg["simulate"]["mode"] == "sft" and cfg["selection"]["mode"] == "sft"
    assert cfg["selection"]["target"] == 300


def test_preference_round_preset_pairs_repeats_and_publishes():
    cfg = composed("+experiment=preference_round")
    assert cfg["simulate"]["mode"] == "rl" and cfg["selection"]["mode"] == "preference"
    assert cfg["selection"]["min_margin"] == 1.0 and cfg["selection"]["max_pairs_per_prompt"] == 1
    assert [s.name for s in plan(cfg["pipeline"]["stages"])][-2:] == ["publish_gate", "publish"]


def test_eval_and_next_round_presets():
    ev = composed("+experiment=eval")
    assert [s.name for s in plan(ev["pipeline"]["stages"])] == ["simulate", "evaluate"]
    assert ev["simulate"]["repeats"] == 4
    nr = composed("+experiment=next_round")
    assert [s.name for s in plan(nr["pipeline"]["stages"])] == ["simulate", "grade", "next_round"]
    ex = composed("+experiment=explore")
    assert ex["pipeline"]["stages"]["by_stance"]["params"] == {
        "fn": "metric_summary",
        "kwargs": {"metric": "pass_at_1"},
        "by": "scenario_dimensions.stance",
    }
    assert ev["simulate"]["repeat_policy"] == "fixed"


def test_command_line_overrides_win_over_the_preset():
    cfg = composed(
        "+experiment=rl_round",
        "simulate.budget=123",
        "seed=7",
        "knobs.concurrency=4",
        "agent=callable",
        "agent.target=mypkg.agents:answer",
    )
    root = validate_config(cfg)
    assert root.simulate.budget == 123 and root.seed == 7 and cfg["knobs"]["seed"] == 7
    assert cfg["knobs"]["concurrency"] == 4
    assert root.agent.kind == "callable" and root.agent.target == "mypkg.agents:answer"


@pytest.mark.parametrize("option", ["openai", "vllm", "ollama", "anthropic"])
def test_model_agents_compose(option):
    root = validate_config(composed("+experiment=rl_round", f"agent={option}"))
    assert root.agent.kind == option and root.agent.model


def test_world_dials_are_world_options():
    from wai_exp.simulate.world import WorldOptions

    cfg = composed()
    opts = WorldOptions(**cfg["world"])
    assert opts.search_hits == cfg["world"]["search_hits"]
    assert cfg["knobs"]["world"] == cfg["world"]


def test_tracking_none_composes():
    cfg = composed("+experiment=rl_round", "tracking=none")
    validate_config(cfg)
    assert cfg["tracking"]["kind"] == "none"


def test_help_template_names_groups_and_presets():
    with initialize_config_module(version_base="1.3", config_module="wai_exp.conf"):
        cfg = compose(config_name="config", return_hydra_config=True)
    help_cfg = cfg.hydra.help
    assert "$APP_CONFIG_GROUPS" in help_cfg.template
    assert (
        "+experiment=rl_round" in help_cfg.footer
        and "-m +experiment=eval_variance" in help_cfg.footer
    )
    assert cfg.hydra.run.dir.startswith("outputs/") and cfg.hydra.sweep.dir.startswith("multirun/")
    assert (
        cfg.hydra.callbacks.mlflow_sweep._target_
        == "wai_exp.tracking.callbacks.MlflowSweepCallback"
    )


@pytest.mark.parametrize("pipeline", ["rl_round", "sft_round", "explore", "eval", "next_round"])
def test_pipeline_options_set_every_pipeline_key(pipeline):
    # Without the key in the file, `pipeline.max_parallel=2` would be a Hydra struct error.
    cfg = composed(
        f"pipeline={pipeline}", "pipeline.max_parallel=2", "pipeline.refusal_exit_code=0"
    )
    root = validate_config(cfg)
    assert root.pipeline.max_parallel == 2 and root.pipeline.refusal_exit_code == 0
