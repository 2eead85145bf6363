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


def test_quick_exit_runs_the_exit_handlers_but_not_the_collectors_last_passes():
    """A process that imported MLflow spent 2-9 s (under load) in the collector's passes at
    exit, after its last line: ``wai-exp compare`` and the tracking writer register
    ``quick_exit`` at start. Exit handlers registered later still run; cyclic garbage is
    left to the operating system instead of being walked."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import atexit, sys
        from wai_exp.domain.gc_tuning import quick_exit
        if sys.argv[1] == "quick":
            quick_exit()
        atexit.register(lambda: print("handler ran", flush=True))

        class Cycle:
            def __del__(self):
                print("walked by the collector", flush=True)

        a = Cycle()
        a.me = a  # only the collector frees it
        import gc
        gc.disable()  # keep it alive until exit
        del a
        """
    )
    out = {
        mode: subprocess.run(
            [sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=60
        ).stdout
        for mode in ("quick", "plain")
    }
    assert out["plain"].splitlines() == ["handler ran", "walked by the collector"], out
    assert out["quick"].splitlines() == ["handler ran"], out


def test_resume_after_imports_freezes_what_was_made_and_switches_the_collector_back_on():
    """The tracking writer imports MLflow with the collector off; afterwards every object
    made so far is out of the collector's reach (it lives as long as the process) and the
    collector runs again for what the writer makes next."""
    from wai_exp.domain.gc_tuning import resume_after_imports

    frozen = gc.get_freeze_count()
    gc.disable()
    try:
        made = [[i] for i in range(5_000)]  # what an import leaves behind
        resume_after_imports()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(made)
        before = gc.get_freeze_count()
        resume_after_imports()  # the collector is on: nothing more is frozen
        assert gc.get_freeze_count() == before
    finally:
        gc.unfreeze()
        gc.enable()


def test_a_runs_landed_rows_are_frozen_as_they_land_and_handed_back_at_its_end():
    """Full collections walked every row a run holds (40 µs of a 360 µs row offline); the
    rows are frozen every ``every`` landed rows, young garbage cycles collected first, and
    the run's end hands everything back to the collector."""
    import weakref

    from wai_exp.domain.gc_tuning import landed_rows_frozen

    class Node:
        pass

    gc.unfreeze()  # what an earlier test in this process froze (the tracking writer's code does)
    rows = []
    with landed_rows_frozen(every=100) as landed:
        for i in range(250):
            rows.append({"messages": [{"content": str(i)}]})
            landed()
            if i == 98:
                assert gc.get_freeze_count() == 0  # not before the 100th row
            if i == 100:
                after_first = gc.get_freeze_count()
            if i == 198:
                # nothing frozen between two freezes (frozen objects freed meanwhile lower it)
                before_second = gc.get_freeze_count()
                assert before_second <= after_first
                cycle = Node()
                cycle.me = cycle  # young garbage when the 100th row lands
                gone = weakref.ref(cycle)
                del cycle
        assert gone() is None  # collected before the freeze, not frozen with the rows
        # the second freeze took the rows landed since the first (a row's dict and list)
        assert gc.get_freeze_count() >= before_second + 98 * 2
    assert gc.get_freeze_count() == 0  # everything is the collector's again
    assert len(rows) == 250


def test_a_process_that_froze_objects_itself_is_left_alone():
    from wai_exp.domain.gc_tuning import landed_rows_frozen

    theirs = [[i] for i in range(100)]
    gc.freeze()
    try:
        held = gc.get_freeze_count()  # (frozen objects freed since lower it a little)
        with landed_rows_frozen(every=1) as landed:
            rows = [[i] for i in range(1_000)]
            landed()
            assert gc.get_freeze_count() <= held  # the new rows were not frozen
        assert gc.get_freeze_count() > held - 100  # their objects stay frozen
    finally:
        gc.unfreeze()
    assert theirs and rows


def test_a_runs_report_reads_its_rows_frozen_and_the_collector_has_them_back_after(
    monkeypatch,
):
    # The collector's first full pass once the rows are handed back walks every one (0.4 s
    # at 20,000 rows): the report's own allocations started it inside the stage.
    import importlib

    engine = importlib.import_module("wai_exp.simulate.engine")
    seen = []
    build = engine.build_report

    def watched(*args, **kwargs):
        seen.append(gc.get_freeze_count())
        return build(*args, **kwargs)

    monkeypatch.setattr(engine, "build_report", watched)
    gc.unfreeze()  # what an earlier test in this process froze
    data = simulate(budget=1_200, seed=0)
    assert len(data.rows) == 1_200
    assert seen and seen[0] > 0  # frozen while the report was built
    assert gc.get_freeze_count() == 0
