"""Known answers written out by hand from the formulas, for the scoring tests."""

from __future__ import annotations

import math


def wilson(k: int, n: int, z: float = 1.959963984540054) -> list[float]:
    """The Wilson score interval ``[low, high]`` for ``k`` successes in ``n`` trials."""
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return [centre - half, centre + half]
