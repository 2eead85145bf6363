"""The drawn-difficulty warning counts what ``hard_share`` draws: tasks the writer drew
afresh, one draw per task (its k repeats are not k draws, and a failing row's siblings
follow their parent's cell), and warns only when a fair draw would rarely fall that short."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

from wai_exp.config.knobs import Knobs
from wai_exp.simulate.engine import simulate
from wai_exp.simulate.report import tier_mix


def _tool(name: str, props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')}; SKU like SKU-1001.",
            "parameters": {"type": "object", "properties": props, "required": list(props)},
        },
    }


STOCK = [
    _tool("lookup_item", {"sku": {"type": "string"}}),
    _tool(
        "adjust_stock",
        {"sku": {"type": "string"}, "delta": {"type": "integer"}, "reason": {"type": "string"}},
    ),
]


def test_a_fair_draw_whose_siblings_are_mostly_standard_is_not_warned_about() -> None:
    # seed 0: 6 of 15 fresh tasks are hard (0.40); with the mutation arm's rows the row
    # share is 0.37, which a count over rows warned about.
    data = simulate(
        tools=STOCK, system_prompt="You manage stock.", mode="rl", budget=120, seed=0,
        advanced={"world": {"exists_share": 1.0}},
    )  # fmt: skip
    mix = data.search["tier_mix"]
    assert mix["hard_share_drawn"] < 0.4 and mix["fresh_tasks"] == 15, mix
    assert not [w for w in data.warnings if "hard share" in w], data.warnings


def _rows(hard: int, standard: int, k: int = 4) -> list[dict[str, Any]]:
    tiers = ["adversarial"] * hard + ["standard"] * standard
    return [
        {
            "scenario_id": f"s{i}",
            "arm": "fresh",
            "lineage": {"eval_run": 0},
            "scenario_dimensions": {"tier": tier},
        }
        for i, tier in enumerate(tiers)
        for _ in range(k)
    ]


def _mix(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], str | None]:
    cfg = SimpleNamespace(knobs=Knobs(), hard_share=0.5, runs=1)
    counts = Counter(r["scenario_dimensions"]["tier"] for r in rows)
    return tier_mix(cfg, [counts], rows)  # type: ignore[arg-type]


def test_a_short_draw_that_chance_explains_is_recorded_not_warned() -> None:
    mix, warning = _mix(_rows(6, 14))  # 6 of 20: a fair draw falls this short about 6% of the time
    assert warning is None
    assert 0.05 < mix["shortfall_chance"] < 0.06


def test_a_skewed_draw_is_warned_about_with_its_counts_and_chance() -> None:
    _, warning = _mix(_rows(30, 70))
    assert warning is not None
    assert "0.30 (30 of 100 freshly drawn tasks)" in warning and "p=0.000" in warning


def test_the_tolerance_knob_says_both_tests_the_warning_makes() -> None:
    # The knob table (docs/KNOBS.md, conf/knobs/default.yaml) is where a user reads why the
    # warning did or did not fire: it must name the fair-draw test, not the distance alone.
    from wai_exp.simulate.report import TIER_MIX_ALPHA

    said = Knobs.model_fields["tier_mix_tolerance"].description or ""
    assert "freshly drawn tasks" in said
    assert f"a fair draw of that many tasks falls that short under {TIER_MIX_ALPHA:.0%}" in said
