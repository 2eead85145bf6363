"""Per-row readers every score check shares: a row's 0/1 reward, its numeric reward, its
reward under a named key, and the factorization of task keys into codes.

They sit in a module of their own, below ``resample`` (which re-exports them), so that a
check that only reads rewards and keys does not import the bootstrap machinery with them:
on ``hack_scan``'s path that import was a good part of the time a 3,200-row scan takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from wai_exp.domain.numbers import reward_number

#: Rows whose judge did not return a usable verdict; their reward is never a failure.
UNJUDGED_STATUSES = frozenset({"invalid_result", "error", "timeout", "abstain"})


def factorize(keys: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray]:
    """Sorted distinct keys and each key's position among them (``np.unique``'s inverse).

    A dict assigns codes in one pass and only the distinct keys are sorted, which is about
    twice as fast as ``np.unique`` on a string array and gives the same answer.
    """
    index: dict[str, int] = {}
    codes = np.fromiter(
        (index.setdefault(k, len(index)) for k in keys), dtype=np.intp, count=len(keys)
    )
    seen = list(index)
    order = sorted(range(len(seen)), key=seen.__getitem__)
    rank = np.empty(len(seen), dtype=np.intp)
    rank[order] = np.arange(len(seen), dtype=np.intp)
    return tuple(seen[i] for i in order), rank[codes]


def _judged_value(row: Mapping[str, Any]) -> Any:
    # The status rule and fields shared by binary_reward and numeric_reward: None when the
    # judge gave no verdict, else ``reward`` (``qwen_reward`` when reward is missing), as is.
    status = row.get("judge_status")
    if status is not None and status in UNJUDGED_STATUSES:
        return None
    value = row.get("reward")
    return row.get("qwen_reward") if value is None else value


def binary_reward(row: Mapping[str, Any]) -> float | None:
    """The row's pass/fail as 1.0 / 0.0, or ``None`` when it does not count.

    Reads ``reward``, else ``qwen_reward``. Only a binary verdict counts for pass metrics:
    a partial reward (strictly between 0 and 1), a missing one (unjudged) and a row whose
    ``judge_status`` says the judge did not return a verdict all give ``None``, so an
    unjudged row is never counted as a failure.
    """
    value = _judged_value(row)
    if value is None or isinstance(value, str):
        return None
    if value == 1 or value is True:
        return 1.0
    if value == 0 or value is False:
        return 0.0
    return None


def reward_under(row: Mapping[str, Any], key: str = "reward") -> float | None:
    """The row's reward under ``key`` as a finite float, or None (unjudged / not a number).

    Reads one named key and no ``judge_status``; ``resample.numeric_reward`` is the
    status-aware reader of ``reward``/``qwen_reward``."""
    return reward_number(row.get(key))


def numeric_reward(row: Mapping[str, Any]) -> float | None:
    """The row's judged score in [0, 1] (partial rewards included), or ``None`` when it has
    no usable verdict.

    Same fields and status rule as ``binary_reward``: reads ``reward``, else ``qwen_reward``;
    a ``judge_status`` in ``UNJUDGED_STATUSES``, a missing or non-numeric reward and a number
    outside [0, 1] (or NaN/inf) all give ``None``. ``True``/``False`` read as 1.0/0.0.
    """
    x = reward_number(_judged_value(row))
    return x if x is not None and 0.0 <= x <= 1.0 else None


__all__ = [
    "UNJUDGED_STATUSES",
    "binary_reward",
    "factorize",
    "numeric_reward",
    "reward_under",
]
