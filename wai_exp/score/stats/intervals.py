"""Closed-form pieces every interval shares: the interval type, the two-sided normal
quantile and the Wilson score interval for a proportion.

They sit below ``resample`` (which re-exports them) so that a report needing only a Wilson
interval (``build_preference_pairs``' length and policy shares) does not import the bootstrap
machinery, nor scipy at the default level.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple


def _special() -> Any:
    """``scipy.special``, imported on first use: the four distribution functions used here
    (``ndtri``, ``ndtr``, ``stdtrit``, ``stdtr``) are all this module needs from scipy, and the
    many callers that only read rewards (``binary_reward``, ``factorize``) never pay the
    import. Not ``scipy.stats``: that costs about 0.6 s more."""
    from scipy import special

    return special


class Interval(NamedTuple):
    """A confidence interval ``(low, high)``."""

    low: float
    high: float

    def as_list(self) -> list[float]:
        return [float(self.low), float(self.high)]


def _check_level(level: float) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95; got {level!r}")
    return level


#: ``scipy.special.ndtri(0.975)`` bit for bit (a test checks): the default level's quantile
#: without importing scipy, which costs about 0.2 s of CPU in a process that needs nothing
#: else from it (a Wilson interval in ``build_preference_pairs``' report).
_Z_AT = {0.95: 1.959963984540054}


def z_quantile(level: float = 0.95) -> float:
    """The two-sided normal quantile for ``level`` (1.959964 at 0.95)."""
    level = _check_level(level)
    z = _Z_AT.get(level)
    return z if z is not None else float(_special().ndtri(0.5 + level / 2.0))


def wilson_interval(successes: int, n: int, level: float = 0.95) -> Interval | None:
    """Wilson score interval for a binomial proportion ``successes / n``.

    Returns ``None`` for ``n == 0`` (no trials, no interval). Unlike the Wald interval it
    stays inside [0, 1] and is not zero-width at 0 or n successes. Raises ``ValueError``
    when ``successes`` is outside ``0..n``.
    """
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n; got successes={successes}, n={n}")
    if n == 0:
        return None
    return wilson_score(successes / n, n, level)


def wilson_score(p: float, n: float, level: float = 0.95) -> Interval:
    """The Wilson score interval around a proportion ``p`` in [0, 1] observed over ``n > 0``
    trials: the one formula behind ``wilson_interval`` (counts), ``resample.wilson_over_tasks``
    (a mean of bounded task values) and ``resample.wilson_design_effect`` (an effective,
    possibly fractional, ``n``)."""
    z = z_quantile(level)
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # At p = 0 (or 1) the bound is exactly 0 (or 1); the subtraction leaves 1e-17.
    low = 0.0 if p == 0.0 else max(0.0, centre - half)
    high = 1.0 if p == 1.0 else min(1.0, centre + half)
    return Interval(low, high)


__all__ = ["Interval", "wilson_interval", "wilson_score", "z_quantile"]
