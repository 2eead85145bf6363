"""Stages read the config through its pydantic models, so every default lives in one place
(``wai_exp.config.models``) instead of being restated at each read."""

from __future__ import annotations

import re
from pathlib import Path

from wai_exp.config.models import JudgeConfig, SelectionConfig
from wai_exp.pipeline.registry import StageContext

ROOT = Path(__file__).resolve().parents[2]


def _ctx(config, tmp_path):
    return StageContext(
        name="s", kind="s", config=config, run_dir=tmp_path, stage_dir=tmp_path,
        start_dir=tmp_path, key="k" * 64, partial_path=tmp_path / "partial.jsonl",
    )  # fmt: skip


def test_a_section_is_its_model_with_the_stage_params_laid_over(tmp_path):
    ctx = _ctx({"selection": {"mode": "sft", "band": [0.1, 0.9]}}, tmp_path)
    sel = ctx.section(SelectionConfig, "selection", {"target": 5, "shape": "rl"})
    assert (sel.mode, sel.band, sel.target) == ("sft", (0.1, 0.9), 5)  # config, then params
    assert sel.min_margin == SelectionConfig.model_fields["min_margin"].default  # the model's
    judge = _ctx({}, tmp_path).section(JudgeConfig, "judge")  # an absent section: all defaults
    assert judge == JudgeConfig()


#: `<section>.get("<key>", <literal>)`: a config default restated at the read.
RESTATED = re.compile(
    r"\b(agent_cfg|judge_cfg|cfg|sel|opts|gate|cache_cfg)\.get\(\"[a-z_]+\", [^)]"
)

#: The agent section's kind picks which model reads it (its default is the scripted agent's).
STILL_RESTATED = {"wai_exp/pipeline/stages/simulate.py": 1}


def test_no_stage_restates_a_config_default():
    found: dict[str, int] = {}
    for path in sorted((ROOT / "wai_exp" / "pipeline").rglob("*.py")):
        n = len(RESTATED.findall(path.read_text()))
        if n:
            found[path.relative_to(ROOT).as_posix()] = n
    over = {p: n for p, n in found.items() if n > STILL_RESTATED.get(p, 0)}
    assert not over, f"read these through ctx.section(<model>, ...) instead: {over}"


def test_the_run_hands_its_stages_the_config_it_validated(tmp_path):
    """The RootConfig that validation returned is what a stage reads (not a re-read of the
    dict); a stage's params still lay over it."""
    from wai_exp.config.validate import validate_config
    from wai_exp.pipeline.registry import StageResult, register
    from wai_exp.pipeline.runner import run_pipeline

    seen = {}

    @register("t_typed_read", reads=("selection",))
    def read(ctx, params, inputs):
        seen["plain"] = ctx.section(SelectionConfig, "selection")
        seen["params"] = ctx.section(SelectionConfig, "selection", params)
        return StageResult()

    config = {
        "seed": 0,
        "tracking": {},
        "selection": {"target": 7},
        "cache": {"enabled": False},
        "pipeline": {"stages": {"a": {"kind": "t_typed_read", "params": {"target": 3}}}},
    }
    typed = validate_config(config)
    out = run_pipeline(config, run_dir=tmp_path / "run", start_dir=tmp_path, typed=typed)
    assert out.status == "passed", out.error
    assert seen["plain"] is typed.selection and seen["plain"].target == 7
    assert seen["params"].target == 3 and typed.selection.target == 7
