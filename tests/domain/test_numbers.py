"""One reading of "a finite number" for rows, reports and metrics (``finite_float``), and the
readers that now share it agree on ``True``, strings, NaN and the infinities."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from wai_exp.domain.numbers import finite_float

INF = float("inf")


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (0.25, 0.25),
        (-3, -3.0),
        (0, 0.0),
        (np.float64(0.5), 0.5),
        (np.float32(0.5), 0.5),
        (np.int64(7), 7.0),
        (Fraction(1, 4), 0.25),
        (1e308, 1e308),
        (None, None),
        (True, None),  # a flag, not a measurement
        (False, None),
        (np.True_, None),
        ("0.5", None),  # text: a reader that parses text says so itself
        (b"0.5", None),
        ("nan", None),
        (float("nan"), None),
        (INF, None),
        (-INF, None),
        (np.float64("inf"), None),
        (np.float64("nan"), None),
        (10**400, None),  # too large for a float: not an OverflowError
        ([1.0], None),
        ({"a": 1}, None),
        (object(), None),
    ],
)
def test_finite_float(value, want):
    got = finite_float(value)
    assert got == want
    assert got is None or type(got) is float


def test_metric_value_is_the_shared_reading():
    from wai_exp.tracking.mlflow_tracker import metric_value

    # Old: True logged as the metric 1.0 while the run summary left it out.
    assert metric_value(True) is None
    assert metric_value(-INF) is None
    assert metric_value(np.float64(0.75)) == 0.75
    assert metric_value("0.5") is None


@pytest.mark.parametrize("value", [True, False, "0.5", INF, -INF, float("nan"), 0.5, 3])
def test_logged_metric_and_run_summary_agree(value):
    from wai_exp.tracking.mlflow_tracker import metric_value
    from wai_exp.tracking.summary import headline_metrics

    # Old: a True metric was logged as 1.0 yet left out of the run's headline.
    assert metric_value(value) == headline_metrics({"pass_at_1": value}).get("pass_at_1")


def test_aggregate_metrics_skips_text_instead_of_raising():
    from wai_exp.tracking.callbacks import aggregate_metrics

    # Old: float("n/a") raised ValueError out of the sweep's aggregate; True counted as 1.0.
    out = aggregate_metrics(
        [{"acc": 0.5}, {"acc": "n/a"}, {"acc": 0.7}, {"acc": True}, {"acc": INF}],
        replicates=False,
    )
    assert out["acc"]["n"] == 2
    assert math.isclose(out["acc"]["mean"], 0.6)


def test_rl_situation_never_carries_infinity():
    from wai_exp.rows.export import situation_of

    # Old: the fault rate inf went into the record, and json.dumps wrote 'Infinity', which
    # no JSON reader of the published file accepts.
    sit = situation_of({"prompt": "hi", "faults": {"rate": INF}})
    assert sit["faults"]["rate"] is None
    json.loads(json.dumps(sit, allow_nan=False))


def test_reward_readers_still_read_a_bool_verdict():
    from wai_exp.score.grade.given import given_reward
    from wai_exp.score.stats.readers import numeric_reward, reward_under

    # A reward of True is a pass verdict to every score reader (binary_reward's rule).
    assert reward_under({"reward": True}) == 1.0
    assert reward_under({"reward": False}) == 0.0
    assert numeric_reward({"reward": True}) == 1.0
    assert given_reward({"reward": True})["reward"] == 1.0
    for bad in (INF, float("nan"), "1", None):
        assert reward_under({"reward": bad}) is None
        assert numeric_reward({"reward": bad}) is None
        assert given_reward({"reward": bad}) is None
    assert numeric_reward({"reward": 1.5}) is None
    assert given_reward({"reward": 1.5})["reward"] == 1.5  # the contract marks it invalid
