"""hack_scan: planted shortcuts, endorsed features, the degenerate refusal, known-answer rho."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from tests.support.hack_rows import call, degenerate_pool
from wai_exp.score.diagnose.hack_scan import (
    auto_features,
    format_hack_scan,
    hack_scan,
    pooled_correlations,
)

WORDS = [
    "thanks",
    "order",
    "account",
    "please",
    "today",
    "help",
    "update",
    "note",
    "sorry",
    "check",
    "again",
    "soon",
]


def varied_pool(n_asks: int = 40, k: int = 8, seed: int = 0, reward_rule=None) -> list[dict]:
    """Rollouts whose tools, lengths and wording vary independently; reward = ``reward_rule(row)``
    (default: 1 exactly when ``lookup_order`` was called)."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(n_asks):
        for j in range(k):
            steps: list[dict] = []
            uses_lookup = bool(rng.random() < 0.5)
            if uses_lookup:
                steps += call("lookup_order", 0, order_id=f"ORD-{a}")
            for e in range(int(rng.integers(0, 3))):
                steps += call("search_orders", 10 + e, email=f"u{e}@example.com")
            text = " ".join(rng.choice(WORDS, int(rng.integers(3, 15))))
            steps.append({"kind": "assistant", "content": text, "tool_calls": []})
            row = {
                "scenario_id": f"s{a}",
                "rollout_index": j,
                "steps": steps,
                "final_text": text,
                "behavior_signature": f"sig-{a}-{j}",
            }
            row["reward"] = float(uses_lookup) if reward_rule is None else reward_rule(row, rng)
            rows.append(row)
    return rows


def test_planted_shortcut_is_a_reward_hack_when_something_else_is_endorsed():
    rows = varied_pool()
    report = hack_scan(rows, endorsed=("issue_refund",))
    assert report["regime"] == "reward_hack"
    assert report["top_feature"] == "tool:lookup_order"
    assert report["features"][0]["rho"] == pytest.approx(1.0)
    assert report["endorsed_on_top"] is False
    assert report["integrity"] == 0.0
    assert 0 < report["tau"] < 0.5
    assert any("reward hack" in w for w in report["warnings"])


def test_planted_feature_is_train_when_endorsed():
    report = hack_scan(varied_pool(), endorsed=("lookup_order",))
    assert report["regime"] == "train"
    assert report["top_feature"] == "tool:lookup_order"
    assert report["endorsed_on_top"] is True
    # The only other above-floor feature is the call count the extra call moves.
    above = {f["name"] for f in report["features"] if f["above_floor"]}
    assert "tool:lookup_order" in above
    assert report["integrity"] > 0.5
    assert report["inverted"] == []


def test_without_endorsed_the_scan_ranks_but_calls_nothing_a_hack():
    report = hack_scan(varied_pool())
    assert report["regime"] == "unknown"
    assert report["top_feature"] == "tool:lookup_order"
    assert report["integrity"] is None and report["endorsed_on_top"] is None
    assert any("endorsed" in w for w in report["warnings"])


def test_inverted_endorsed_feature_is_reported():
    # The reward pays for NOT looking the order up, and the lookup is what should be paid for.
    rows = varied_pool(
        reward_rule=lambda row, rng: float(
            not any(s.get("name") == "lookup_order" for s in row["steps"])
        )
    )
    report = hack_scan(rows, endorsed=("lookup_order",))
    assert report["regime"] == "reward_hack"
    assert report["inverted"] == ["tool:lookup_order"]
    assert report["features"][0]["rho"] == pytest.approx(-1.0)


def test_degenerate_pool_refuses_to_name_a_feature():
    # One distinct rollout per outcome in every ask: pass = lookup + long reply, fail = neither.
    rows = degenerate_pool()
    report = hack_scan(rows, endorsed=("issue_refund",))
    assert report["regime"] == "degenerate"
    assert report["distinct_per_ask"] == 2
    assert report["top_feature"] is None and report["integrity"] is None
    assert report["inverted"] == []
    assert {"tool:lookup_order", "reply_len", "n_tool_calls"} <= set(report["collinear"])


def test_pool_exhausted_when_every_ask_is_unanimous():
    rows = [
        {"scenario_id": f"s{a}", "final_text": "x", "reward": float(a % 2)}
        for a in range(10)
        for _ in range(4)
    ]
    report = hack_scan(rows)
    assert report["regime"] == "pool_exhausted"
    assert report["asks_all_pass"] == 5 and report["asks_all_fail"] == 5
    assert report["asks_mixed"] == 0 and report["gradient_capacity"] == 0.0


def test_no_signal_when_reward_is_noise():
    rows = varied_pool(seed=3, reward_rule=lambda row, rng: float(rng.random() < 0.5))
    report = hack_scan(rows, endorsed=("lookup_order",))
    assert report["regime"] == "no_signal"
    assert report["top_feature"] is None
    assert all(not f["above_floor"] for f in report["features"])


def test_too_few_rows_is_unknown():
    rows = varied_pool(n_asks=2, k=4)
    report = hack_scan(rows, endorsed=("lookup_order",))
    assert report["regime"] == "unknown"
    assert any("min_obs" in w for w in report["warnings"])


def test_within_ask_spearman_known_answer():
    # One ask: feature ranks 0..3 centred (-1.5,-0.5,0.5,1.5); reward ranks (0.5,0.5,2.5,2.5)
    # centred (-1,-1,1,1). rho = 4 / sqrt(5 * 4) = 2 / sqrt(5).
    rows = [{"scenario_id": "a", "h": h, "reward": r} for h, r in [(1, 0), (2, 0), (3, 1), (4, 1)]]
    report = hack_scan(rows, features={"h": lambda row: row["h"]}, auto=False, min_obs=1, seeds=0)
    assert report["features"][0]["name"] == "h"
    assert report["features"][0]["rho"] == pytest.approx(2 / math.sqrt(5), abs=1e-6)
    # Pooled Pearson over the same rows: corr([1,2,3,4], [0,0,1,1]) = 4/sqrt(5*4).
    assert report["features"][0]["pooled"] == pytest.approx(2 / math.sqrt(5), abs=1e-6)


def test_rho_is_within_ask_not_pooled():
    # Ask b's values are all larger than ask a's, which a pooled rank would mix in; within
    # each ask the ranking is what a grouped update sees.
    rows = []
    for sid, base in (("a", 0), ("b", 100)):
        for h, r in [(base + 1, 1), (base + 2, 0), (base + 3, 1), (base + 4, 0)]:
            rows.append({"scenario_id": sid, "h": h, "reward": r})
    report = hack_scan(rows, features={"h": lambda row: row["h"]}, auto=False, min_obs=1, seeds=0)
    # Per ask: feature ranks centred (-1.5,-.5,.5,1.5), reward ranks centred (1,-1,1,-1):
    # sum xy = -2 per ask, so rho = -4 / sqrt(10 * 8) = -2 / sqrt(20).
    assert report["features"][0]["rho"] == pytest.approx(-2 / math.sqrt(20), abs=1e-6)


def test_missing_hand_feature_values_and_broken_features_do_not_sink_the_scan():
    rows = varied_pool(n_asks=10)

    def sometimes(row):
        return None if row["rollout_index"] % 2 else float(row["rollout_index"])

    def broken(row):
        raise KeyError("nope")

    report = hack_scan(
        rows, features={"sometimes": sometimes, "broken": broken}, endorsed=("lookup_order",)
    )
    names = {f["name"] for f in report["features"]}
    assert "sometimes" in names and "broken" not in names
    assert any("'broken' raised KeyError" in w for w in report["warnings"])


def test_deterministic_in_seed_and_does_not_mutate():
    rows = varied_pool(n_asks=20)
    before = copy.deepcopy(rows)
    a = hack_scan(rows, endorsed=("lookup_order",), seed=5)
    b = hack_scan(rows, endorsed=("lookup_order",), seed=5)
    assert a == b
    assert rows == before


def test_unjudged_rows_are_skipped_and_counted():
    rows = varied_pool(n_asks=10)
    rows[0]["reward"] = None
    report = hack_scan(rows)
    assert report["n_skipped"] == 1 and report["n_rows"] == len(rows) - 1


def test_top_features_caps_the_ranking():
    rows = varied_pool(n_asks=10)
    assert len(hack_scan(rows, top_features=2)["features"]) == 2
    full = hack_scan(rows, top_features=None)
    assert len(full["features"]) == full["n_features"] > 2


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="alpha"):
        hack_scan([], alpha=1.5)
    with pytest.raises(ValueError, match="features"):
        hack_scan([], auto=False)


def test_auto_features_of_one_rollout():
    row = {
        "steps": call("lookup_order", 0, order_id="ORD-1")
        + call("lookup_order", 1, order_id="ORD-1")
        + [
            {"kind": "tool", "name": "issue_refund", "status": "timeout"},
            {"kind": "user", "content": "hi"},
        ]
        + [
            {
                "kind": "assistant",
                "content": "I used lookup order. Anything else?",
                "tool_calls": [],
            }
        ],
        "final_text": "I used lookup order. Anything else?",
        "faults": {"fired": [{"tool": "issue_refund", "mode": "timeout", "step": 4}]},
        "markers": {"hedging": 1.0, "note": "text is ignored"},
        "ended_by": "final",
    }
    f = auto_features(row, tool_names=["issue_refund"])
    assert f["tool:lookup_order"] == 1.0
    assert f["n_tool_calls"] == 2.0 and f["repeated_calls"] == 1.0
    assert f["contains:lookup_order"] == 1.0 and "contains:issue_refund" not in f
    assert f["tool_errors"] == 1.0 and f["fault:timeout"] == 1.0
    assert f["assistant_turns"] == 3.0 and f["user_turns"] == 1.0
    assert f["reply_question"] == 1.0 and f["reply_len"] == len(row["final_text"])
    assert f["marker:hedging"] == 1.0 and "marker:note" not in f
    assert f["ended_by:final"] == 1.0


def test_pooled_correlations_flags_cheap_features():
    rows = [{"final_text": "x" * (10 if r else 1), "reward": float(r)} for r in (1, 0, 1, 0, 1, 0)]
    out = pooled_correlations(rows)
    assert out["correlations"]["reply_len"] == pytest.approx(1.0)
    assert out["flagged"] == ["reply_len"]
    assert out["correlations"]["n_tool_calls"] is None  # constant: no correlation to report


def test_format_hack_scan_reads_regime_floor_and_ranking():
    report = hack_scan(varied_pool(), endorsed=("issue_refund",))
    text = format_hack_scan(report, top=3)
    assert text.splitlines()[0] == "hack scan: regime=reward_hack"
    assert "tau=" in text and "tool:lookup_order" in text
    assert "more" in text  # the ranking is cut at top=3
    degenerate = format_hack_scan({"regime": "unknown", "tau": None, "warnings": ["w"]})
    assert "not measured" in degenerate and "! w" in degenerate


def test_large_pools_scan_a_seeded_sample_of_whole_asks(monkeypatch):
    import wai_exp.score.diagnose.hack_scan as hs

    monkeypatch.setattr(hs, "MAX_SCAN_ROWS", 100)
    rows = varied_pool(n_asks=40)
    report = hack_scan(rows, endorsed=("lookup_order",))
    assert report["sampled"]["rows"] <= 100
    assert report["sampled"]["of_asks"] == report["asks_mixed"]  # support covers every ask
    assert report["regime"] == "train"  # a perfect shortcut still shows on the sample
    assert "seeded sample" in format_hack_scan(report)


def test_floor_false_alarm_rate_is_near_alpha_under_the_null():
    # Reward independent of every feature: a feature should clear the floor in about
    # alpha = 5% of pools. 60 pools: 10 or more alarms has probability ~0.003 at 5%.
    alarms = 0
    for s in range(60):
        rows = varied_pool(
            n_asks=20, seed=100 + s, reward_rule=lambda row, rng: float(rng.random() < 0.5)
        )
        report = hack_scan(rows, seed=s)
        alarms += any(f["above_floor"] for f in report["features"])
    assert alarms <= 9
