"""Where asks come from, under ``unique_situations``: a template draw that repeats a
situation the run already drew is rejected, and a batch left short bounces to extra template
rounds (``offline_bounce_limit`` of them, writer seeds ``offline_bounce_stride`` apart)
before it is accepted short."""

from __future__ import annotations

from dataclasses import dataclass

import wai_exp as wai
from tests.support.specs import STATUS_TOOL
from wai_exp.simulate.tasks import SituationSource


@dataclass(frozen=True)
class _Sit:
    scenario_id: str
    phrasings: tuple[str, ...]


class _Repeating:
    """A writer with room for ``distinct`` situations: every draw after those repeats one."""

    def __init__(self, seed: int, distinct: int) -> None:
        self.seed, self.distinct, self.drawn = seed, distinct, 0

    def next_batch(self, n: int) -> list[_Sit]:
        out = []
        for _ in range(n):
            i = self.drawn % self.distinct if self.seed == 0 else 0
            sid = f"sit-{self.seed:04x}{i:08x}"
            out.append(_Sit(sid, (f"ask {sid}",)))
            self.drawn += 1
        return out


def _source(limit, *, unique=True):
    made: list[int] = []

    def bounce(seed):
        made.append(seed)
        return _Repeating(seed, 1)

    src = SituationSource(
        writer=_Repeating(0, 3), phrasings=1, k=1, max_situations=None, batch=5,
        writer_params={"seed": 0}, unique=unique, bounce=bounce, bounce_limit=limit,
        bounce_stride=17,
    )  # fmt: skip
    return src, made


def test_a_short_batch_bounces_with_seeds_a_stride_apart_then_is_accepted_short():
    src, made = _source(4)
    asks = [src.next_task() for _ in range(3)]
    # 3 distinct of 5; each bounce writer (seed 17, 34, ...) adds its one new situation.
    fourth = src.next_task()
    assert made == [17, 34]
    assert fourth.writer_lineage == {"seed": 17, "index": 0}
    assert src.next_task().writer_lineage == {"seed": 34, "index": 0}
    assert src.stats["bounce_rounds"] == 2 and src.stats["short_batches_accepted"] == 0
    assert len({t.scenario_id for t in asks}) == 3
    # The next batch: the main writer repeats itself, the two bouncers too, the other two
    # add one each, and after the limit the short batch (2 of 5) is accepted.
    later = [src.next_task() for _ in range(2)]
    assert made == [17, 34, 51, 68]
    assert [t.writer_lineage["seed"] for t in later] == [51, 68]
    assert src.stats["bounce_rounds"] == 6 and src.stats["short_batches_accepted"] == 1


def test_no_bounce_accepts_the_short_batch_and_a_run_without_unique_rejects_nothing():
    src, made = _source(0)
    assert len([src.next_task() for _ in range(3)]) == 3
    assert made == [] and src.stats["short_batches_accepted"] == 1
    plain, made = _source(4, unique=False)
    ids = [plain.next_task().scenario_id for _ in range(5)]
    assert len(set(ids)) == 3 and made == [] and plain.stats["repeats_rejected"] == 0


_ONE_NAME = {"first_names": ["Ann"], "last_names": ["Lee"]}


def _tiny(**advanced):
    return wai.simulate(
        tools=[STATUS_TOOL], system_prompt="R1. Be kind.", budget=500, seed=0,
        advanced={"world": _ONE_NAME, "writer_context_parents": 0, **advanced},
    )  # fmt: skip


def _content(sid):
    return "-".join(sid.split("-")[:2])


def test_a_unique_run_never_repeats_a_situation_and_bounced_asks_replay():
    data = _tiny()
    rounds = data.search["template_rounds"]
    assert rounds["repeats_rejected"] > 0 and rounds["bounce_rounds"] > 0
    ids = [r["scenario_id"] for r in data.rows]
    assert len({_content(s) for s in ids}) == len(ids) == 500
    seeds = {r["lineage"]["writer"]["seed"] for r in data.rows}
    assert seeds == {0, 17}
    strided = _tiny(offline_bounce_stride=5)
    assert {r["lineage"]["writer"]["seed"] for r in strided.rows} == {0, 5}
    short = _tiny(offline_bounce_limit=0)
    assert short.search["template_rounds"]["short_batches_accepted"] > 0
    assert {r["lineage"]["writer"]["seed"] for r in short.rows} == {0}
    # A bounced ask is rebuilt from its lineage (the bounce writer's seed and index).
    bounced = [r for r in data.rows if r["lineage"]["writer"]["seed"] == 17]
    again = wai.simulate(
        tools=[STATUS_TOOL], system_prompt="R1. Be kind.", tasks=bounced, seed=1,
        advanced={"world": _ONE_NAME},
    )  # fmt: skip
    assert sorted(r["scenario_id"] for r in again.rows) == sorted(r["scenario_id"] for r in bounced)
