"""A failing row's siblings (the mutation arm) keep to ``world.exists_share``: at 1.0 (the
unset share wherever a server or a backend of yours answers) no sibling is planned on a
missing record or an action already done, which that world never serves."""

from __future__ import annotations

from collections import Counter

from wai_exp.simulate.engine import simulate


def _planned(share: float | None) -> Counter[tuple[str, str]]:
    world = {} if share is None else {"exists_share": share}
    data = simulate(mode="rl", budget=300, seed=3, advanced={"world": world})
    return Counter((r["arm"], r["scenario_dimensions"]["world_state"]) for r in data.rows)


def test_siblings_of_failing_rows_keep_every_record_existing_at_share_one() -> None:
    planned = _planned(1.0)
    assert planned[("mutation", "exists")] > 0, planned
    assert {ws for _, ws in planned} == {"exists"}, planned


def test_siblings_still_cover_every_state_at_the_mock_worlds_share() -> None:
    states = {ws for arm, ws in _planned(None) if arm == "mutation"}
    assert {"missing", "already_done"} <= states, states
