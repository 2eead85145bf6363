"""The lost line of the headline: counts in words that agree with their number."""

from __future__ import annotations

import pytest

from wai_exp.simulate.lost import lost_sentence, lost_summary


def _block(n_gone: int, lost_as: str) -> dict:
    """Four tasks of two rows each; ``n_gone`` of them lost both rows, the next one of two."""
    kept = [f"t{i}" for i in range(n_gone, 4) for _ in range(2)][1:]
    gone = [f"t{i}" for i in range(n_gone) for _ in range(2)] + [f"t{n_gone}"]
    lost = [{"scenario_id": t, "category": "issue_refund"} for t in gone]
    return lost_summary([{"tool": "issue_refund"}] * len(kept), kept, lost, lost_as)


@pytest.mark.parametrize(
    ("n_gone", "lost_as", "said"),
    [
        (1, "failure", "; 1 task lost every rollout and scores 0"),
        (2, "failure", "; 2 tasks lost every rollout and score 0"),
        (1, "excluded", "; 1 task lost every rollout and is not in the score"),
        (2, "excluded", "; 2 tasks lost every rollout and are not in the score"),
    ],
)
def test_the_tasks_that_lost_every_rollout_are_counted_in_agreeing_words(
    n_gone: int, lost_as: str, said: str
) -> None:
    block = _block(n_gone, lost_as)
    assert block["tasks_all_lost"] == n_gone
    line = lost_sentence(block)
    assert line is not None and said in line, line
