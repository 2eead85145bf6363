"""Pearson correlation of many columns with one target, vectorised (trace flags and reward
correlations both read it)."""

from __future__ import annotations

import numpy as np


def pearson_columns(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson correlation of every column of ``x`` (n x p) with ``y`` (n), as a length-p
    array; NaN where the column or ``y`` is constant (or n < 2), since no correlation is
    defined there. Raises ValueError when the shapes disagree."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ValueError(
            f"pearson_columns needs x of shape (n, p) and y of shape (n,); got {x.shape} "
            f"and {y.shape}"
        )
    out = np.full(x.shape[1], np.nan)
    if x.shape[0] < 2 or np.ptp(y) == 0:
        return out
    xc = x - x.mean(axis=0)
    yc = y - y.mean()
    # ptp, not the centred sum of squares: a constant column of 0.1s centres to ~1e-17,
    # which would divide into a spurious +-1.
    varying = np.ptp(x, axis=0) > 0
    den = np.sqrt((xc**2).sum(axis=0) * (yc**2).sum())
    num = xc.T @ yc
    out[varying] = np.clip(num[varying] / den[varying], -1.0, 1.0)
    return out
