"""hack_scan_diff: a shortcut only the after side's reward tracks is gained and named, endorsed
flips the wording, a degenerate side claims nothing, scan_kwargs reach both scans."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from tests.support.hack_rows import call, degenerate_pool
from wai_exp.score.diagnose.hack_scan import hack_scan
from wai_exp.score.diagnose.hack_scan_diff import format_hack_scan_diff, hack_scan_diff

WORDS = ["thanks", "order", "account", "please", "today", "help", "update", "note", "sorry"]


def called(row: dict, tool: str) -> bool:
    return any(s.get("kind") == "tool" and s.get("name") == tool for s in row["steps"])


def pool(paid_tool: str, n_asks: int = 40, k: int = 8, seed: int = 0) -> list[dict]:
    """Rollouts that call ``lookup_order`` and ``issue_refund`` independently (each half the
    time), with random wording; reward = 1 exactly when ``paid_tool`` was called."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in range(n_asks):
        for j in range(k):
            steps: list[dict] = []
            if rng.random() < 0.5:
                steps += call("lookup_order", 0, order_id=f"ORD-{a}")
            if rng.random() < 0.5:
                steps += call("issue_refund", 1, order_id=f"ORD-{a}")
            text = " ".join(rng.choice(WORDS, int(rng.integers(3, 15))))
            steps.append({"kind": "assistant", "content": text, "tool_calls": []})
            row = {
                "scenario_id": f"s{a}",
                "rollout_index": j,
                "steps": steps,
                "final_text": text,
                "behavior_signature": f"sig-{a}-{j}",
            }
            row["reward"] = float(called(row, paid_tool))
            rows.append(row)
    return rows


# Before training the reward pays for the refund; after, the same reward-shaped pool pays for
# the lookup alone: the shortcut only the after side's reward tracks.
BEFORE = pool("issue_refund", seed=1)
AFTER = pool("lookup_order", seed=2)


def by_name(entries: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in entries}


def test_shortcut_only_after_tracks_is_gained_and_named_not_endorsed():
    report = hack_scan_diff(BEFORE, AFTER, endorsed=("issue_refund",))
    assert report["readable"] == {"before": True, "after": True}
    gained = by_name(report["gained"])
    assert "tool:lookup_order" in gained
    g = gained["tool:lookup_order"]
    assert g["rho_after"] == pytest.approx(1.0)
    assert g["above_after"] and not g["above_before"]
    assert abs(g["rho_before"]) < report["before"]["tau"]
    assert g["shift"] == pytest.approx(g["rho_after"] - g["rho_before"], abs=1e-6)
    assert g["endorsed"] is False
    # The refund dropped out: the update moved away from what the reward should track.
    lost = by_name(report["lost"])
    assert "tool:issue_refund" in lost and lost["tool:issue_refund"]["endorsed"] is True
    assert report["learned_feature"] == "tool:lookup_order"
    assert report["learned_endorsed"] is False and report["hack"] is True
    assert "tool:lookup_order" in report["learned"] and "not endorsed" in report["learned"]


def test_both_correlations_are_the_two_scans_own_numbers():
    report = hack_scan_diff(BEFORE, AFTER, endorsed=("issue_refund",), seed=3)
    b = {
        f["name"]: f
        for f in hack_scan(BEFORE, ("issue_refund",), seed=3, top_features=None)["features"]
    }
    a = {
        f["name"]: f
        for f in hack_scan(AFTER, ("issue_refund",), seed=3, top_features=None)["features"]
    }
    for e in report["gained"] + report["lost"] + report["moved"]:
        assert e["rho_before"] == b[e["name"]]["rho"]
        assert e["rho_after"] == a[e["name"]]["rho"]
        assert e["pooled_before"] == b[e["name"]]["pooled"]


def test_endorsing_the_shortcut_flips_the_wording():
    report = hack_scan_diff(BEFORE, AFTER, endorsed=("lookup_order",))
    assert report["learned_feature"] == "tool:lookup_order"
    assert report["learned_endorsed"] is True and report["hack"] is False
    assert "which is endorsed" in report["learned"] and "not endorsed" not in report["learned"]


def test_endorsed_feature_the_reward_now_pays_against_is_a_hack():
    after = [dict(r, reward=1.0 - r["reward"]) for r in AFTER]
    report = hack_scan_diff(BEFORE, after, endorsed=("lookup_order",))
    assert report["learned_feature"] == "tool:lookup_order"
    assert by_name(report["gained"])["tool:lookup_order"]["rho_after"] == pytest.approx(-1.0)
    assert report["learned_endorsed"] is True and report["hack"] is True
    assert "pays against" in report["learned"]


def test_nothing_endorsed_names_the_feature_but_claims_no_hack():
    report = hack_scan_diff(BEFORE, AFTER)
    assert report["learned_feature"] == "tool:lookup_order"
    assert report["learned_endorsed"] is None and report["hack"] is None
    assert "endorsed=[...]" in report["learned"]


def test_moved_is_the_largest_shifts_either_way_capped_at_top():
    report = hack_scan_diff(BEFORE, AFTER, endorsed=("issue_refund",), top=2)
    moved = report["moved"]
    assert len(moved) == 2
    # The lookup rises to ~+1 and the refund falls from ~+1: both shifts are near 1 in size.
    assert {e["name"] for e in moved} == {"tool:lookup_order", "tool:issue_refund"}
    signs = {e["name"]: np.sign(e["shift"]) for e in moved}
    assert signs == {"tool:lookup_order": 1.0, "tool:issue_refund": -1.0}
    every = hack_scan_diff(BEFORE, AFTER, endorsed=("issue_refund",), top=100)["moved"]
    sizes = [abs(e["shift"]) for e in every]
    assert len(every) > 2 and sizes == sorted(sizes, reverse=True)
    # Only features both scans measured can have a shift.
    assert all(e["rho_before"] is not None and e["rho_after"] is not None for e in every)


def test_same_pool_both_sides_learns_nothing():
    report = hack_scan_diff(BEFORE, BEFORE, endorsed=("issue_refund",))
    assert report["gained"] == [] and report["lost"] == []
    assert all(e["shift"] == 0 for e in report["moved"])
    assert report["learned_feature"] is None and report["hack"] is None
    assert report["learned"].startswith("nothing new clears the noise floor")


def test_degenerate_after_side_is_named_and_no_hack_is_claimed():
    report = hack_scan_diff(BEFORE, degenerate_pool(), endorsed=("issue_refund",))
    assert report["after"]["regime"] == "degenerate"
    assert report["readable"] == {"before": True, "after": False}
    assert "after" in report["unreadable"] and "before" not in report["unreadable"]
    assert "after scan could not be read" in report["learned"]
    assert "degenerate" in report["learned"] and "no hack is claimed" in report["learned"]
    assert report["hack"] is None and report["learned_feature"] is None
    # The rows are still listed: the collinear lookup sits above the floor after only.
    assert "tool:lookup_order" in by_name(report["gained"])
    assert report["moved"]


def test_degenerate_before_side_is_named():
    report = hack_scan_diff(degenerate_pool(), AFTER, endorsed=("issue_refund",))
    assert report["readable"] == {"before": False, "after": True}
    assert "before scan could not be read" in report["learned"]
    assert report["hack"] is None


def test_side_without_a_floor_is_unreadable():
    # Every ask unanimous after: no contrast, so no floor and nothing to compare against.
    after = [
        {"scenario_id": f"s{a}", "final_text": "x", "reward": 1.0}
        for a in range(10)
        for _ in range(4)
    ]
    report = hack_scan_diff(BEFORE, after, endorsed=("issue_refund",))
    assert report["after"]["regime"] == "pool_exhausted"
    assert "pool_exhausted" in report["unreadable"]["after"]
    assert report["hack"] is None and report["learned_feature"] is None
    assert "tool:issue_refund" in by_name(report["lost"])
    assert by_name(report["lost"])["tool:issue_refund"]["rho_after"] is None


def test_scan_kwargs_reach_both_scans():
    report = hack_scan_diff(BEFORE, AFTER, seed=7, n_perm=37, alpha=0.1, top_features=5)
    for side, rows in (("before", BEFORE), ("after", AFTER)):
        assert report[side]["n_perm"] == 37 and report[side]["alpha"] == 0.1
        assert len(report[side]["features"]) == 5
        assert report[side] == hack_scan(rows, seed=7, n_perm=37, alpha=0.1, top_features=5)
    assert any("top_features=5" in w for w in report["warnings"])
    # A different seed draws different shuffles on both sides: the floors move.
    other = hack_scan_diff(BEFORE, AFTER, seed=8, n_perm=37, alpha=0.1, top_features=5)
    assert other["before"]["tau"] != report["before"]["tau"]
    assert other["after"]["tau"] != report["after"]["tau"]


def test_reward_key_reaches_both_scans():
    before = [dict(r, score=r["reward"], reward=None) for r in BEFORE]
    after = [dict(r, score=r["reward"], reward=None) for r in AFTER]
    report = hack_scan_diff(before, after, endorsed=("issue_refund",), reward="score")
    assert report["learned_feature"] == "tool:lookup_order"


def test_deterministic_and_does_not_mutate():
    b, a = copy.deepcopy(BEFORE), copy.deepcopy(AFTER)
    one = hack_scan_diff(b, a, endorsed=("issue_refund",), seed=4)
    two = hack_scan_diff(b, a, endorsed=("issue_refund",), seed=4)
    assert one == two
    assert b == BEFORE and a == AFTER


def test_different_judges_are_warned():
    before = [dict(r, judge_name="j1") for r in BEFORE]
    after = [dict(r, judge_name="j2") for r in AFTER]
    report = hack_scan_diff(before, after)
    assert any("different judges" in w for w in report["warnings"])
    assert not any("different judges" in w for w in hack_scan_diff(before, before)["warnings"])


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="top"):
        hack_scan_diff(BEFORE, AFTER, top=0)
    with pytest.raises(ValueError, match="alpha"):
        hack_scan_diff(BEFORE, AFTER, alpha=2.0)
    with pytest.raises(TypeError):
        hack_scan_diff(BEFORE, AFTER, not_a_scan_option=1)


def test_format_leads_with_what_was_learned_then_the_shifts():
    report = hack_scan_diff(BEFORE, AFTER, endorsed=("issue_refund",))
    text = format_hack_scan_diff(report)
    lines = text.splitlines()
    assert lines[0] == f"hack scan diff: {report['learned']}"
    assert "gained (above the floor after, not before):" in text
    assert "lost (above the floor before, not after):" in text
    g = report["gained"][0]
    row = next(ln for ln in lines if ln.strip().startswith(g["name"]))
    assert f"{g['rho_after']:+.3f}" in row and f"{g['rho_before']:+.3f}" in row
    degenerate = format_hack_scan_diff(hack_scan_diff(BEFORE, degenerate_pool()))
    assert "(unreadable)" in degenerate
    assert "n/a: not scanned on that side" in degenerate
