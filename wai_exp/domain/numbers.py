"""The one reading of "a number" for values that came from rows, reports and metrics."""

from __future__ import annotations

import math
import numbers
from typing import Any


def finite_float(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is not one.

    A real number (``int``, ``float``, numpy's ints and floats, ``Fraction``) counts. ``None``,
    a ``bool`` (a flag, not a measurement; numpy's ``bool_`` too), a string (``"0.5"`` is
    text: a reader that parses text says so itself), NaN, ``inf``/``-inf`` and an int too
    large for a float all give None. Never raises.
    """
    kind = type(value)
    # The float or int a row almost always holds is checked first: this runs once per row and
    # metric. ``value - value`` is 0.0 for a finite float and NaN for NaN and the infinities.
    if kind is float:
        return value if value - value == 0.0 else None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if math.isfinite(out) else None


def reward_number(value: Any) -> float | None:
    """A reward as a finite float: ``True``/``False`` (a pass/fail verdict another tool wrote)
    as 1.0/0.0, else :func:`finite_float`. Every reader of a row's reward goes through this,
    so a verdict counts the same in a metric and in a published record."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return finite_float(value)


__all__ = ["finite_float", "reward_number"]
