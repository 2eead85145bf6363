"""simulate() runs with fewer collector passes and gives the caller's thresholds back."""

from __future__ import annotations

import gc

import pytest

from wai_exp import simulate
from wai_exp.domain.gc_tuning import YOUNG_THRESHOLD, fewer_gc_passes


@pytest.fixture
def own_thresholds():
    before = gc.get_threshold()
    gc.set_threshold(900, 11, 12)
    yield (900, 11, 12)
    gc.set_threshold(*before)


def test_a_run_raises_the_young_threshold_and_restores_the_callers(own_thresholds):
    seen = []

    async def agent(prompt, **context):
        seen.append(gc.get_threshold())
        return f"I looked into it: {prompt[:20]}"

    data = simulate(agent=agent, budget=4, seed=0)
    assert len(data.rows) == 4
    assert seen and all(t == (YOUNG_THRESHOLD, 11, 12) for t in seen)
    assert gc.get_threshold() == own_thresholds


def test_an_error_inside_the_block_restores_them_too(own_thresholds):
    with pytest.raises(RuntimeError), fewer_gc_passes():
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        raise RuntimeError("the run failed")
    assert gc.get_threshold() == own_thresholds


def test_a_higher_or_disabled_threshold_is_left_alone():
    before = gc.get_threshold()
    try:
        for mine in ((50_000, 10, 10), (0, 10, 10)):
            gc.set_threshold(*mine)
            with fewer_gc_passes():
                assert gc.get_threshold() == mine
            assert gc.get_threshold() == mine
    finally:
        gc.set_threshold(*before)


def test_no_gc_pauses_and_restores_the_collector():
    import gc

    from wai_exp.domain.gc_tuning import no_gc, without_gc

    assert gc.isenabled()
    with no_gc():
        assert not gc.isenabled()
    assert gc.isenabled()

    @without_gc
    def inside() -> bool:
        return gc.isenabled()

    assert inside() is False and gc.isenabled()
    gc.disable()
    try:
        with no_gc():
            pass
        assert not gc.isenabled()  # off before, left off
    finally:
        gc.enable()


def test_one_gc_module():
    import importlib.util

    # score/stats/gc_pause.py and simulate/gc_tuning.py were two modules tuning one collector
    assert importlib.util.find_spec("wai_exp.score.stats.gc_pause") is None
    assert importlib.util.find_spec("wai_exp.simulate.gc_tuning") is None
