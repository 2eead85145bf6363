"""The run report's counts over rows (``wai_exp.simulate.report``)."""

from __future__ import annotations

from wai_exp.simulate.report import dimension_counts, mixed_rate, row_facts

KEYS = ("tool", "tier")


def test_dimension_counts_counts_each_value_as_text_across_rows():
    dims = [{"tool": "cancel_order", "tier": 1}, {"tool": "cancel_order", "tier": "1"}, {}]
    assert dimension_counts(dims, KEYS) == {
        "tool": {"None": 1, "cancel_order": 2},
        "tier": {"1": 2, "None": 1},  # 1 and "1" read the same, as text
    }


def test_dimension_counts_takes_a_value_that_cannot_be_hashed():
    # rows another tool wrote may carry a list where ours carry a name
    dims = [{"tool": ["a", "b"], "tier": "easy"}, {"tool": ["a", "b"], "tier": "hard"}]
    assert dimension_counts(dims, KEYS) == {
        "tool": {"['a', 'b']": 2},
        "tier": {"easy": 1, "hard": 1},
    }


def test_row_facts_reads_rows_with_missing_fields_and_mixed_rate_groups_them():
    rows = [
        {"scenario_id": "s1", "lineage": {"eval_run": 0}, "reward": 1.0},
        {"scenario_id": "s1", "lineage": {"eval_run": 0}, "reward": 0.0},
        {"scenario_id": "s2", "behavior_signature": "a"},
        {"scenario_id": "s2", "behavior_signature": "a"},
        {"scenario_id": "s3"},
    ]
    facts = row_facts(rows)
    assert facts.group[2] == ("s2", None, None) and facts.dims[4] == {}
    rate = mixed_rate(facts, alpha=0.0, thr=0.5)
    assert (rate["groups"], rate["mixed"]) == (2, 1)  # s1 split on reward, s2 agreed
    assert row_facts([]).group == []
