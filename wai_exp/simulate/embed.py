"""The ``hash`` embedder (``advanced.embedder``): asks as unit vectors by feature hashing,
no model and no network, and the semantic novelty the model writer dedupes by.

An ask's words and word pairs are hashed into ``DIM`` signed buckets and the vector is
L2-normalised. Digits and e-mail addresses are masked first, so two asks that differ only
in an order number or an address are the same vector: near copies, not new situations.
Novelty is ``1 - max cosine`` to the asks already kept (1.0 for the first one).
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

#: Buckets of the hashing embedder: 512 keeps unrelated asks of a few dozen words near
#: cosine 0 (collisions are rare at that length) while a bank of thousands stays small.
DIM = 512

_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(\.[\w-]+)+\b")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[a-z#@]+")


def mask(text: str) -> str:
    """``text`` lower-cased with e-mails as ``@`` and digit runs as ``#``."""
    return _DIGITS.sub("#", _EMAIL.sub("@", text.lower()))


def words(text: str) -> list[str]:
    """The masked words of ``text``."""
    return _WORD.findall(mask(text))


def _bucket(feature: str) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    return h % DIM, 1.0 if (h >> 63) & 1 else -1.0


def hash_embed(text: str) -> np.ndarray:
    """The unit vector of ``text`` (all zeros for a text with no words)."""
    w = words(text)
    feats = w + [f"{a} {b}" for a, b in zip(w, w[1:], strict=False)]
    vec = np.zeros(DIM, dtype=np.float64)
    for f in feats:
        i, sign = _bucket(f)
        vec[i] += sign
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec


class NoveltyBank:
    """The kept asks' vectors; ``novelty(vec)`` is ``1 - max cosine`` to them, in [0, 1]."""

    def __init__(self) -> None:
        self._rows: list[np.ndarray] = []
        self._matrix: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._rows)

    def novelty(self, vec: np.ndarray) -> float:
        if not self._rows or not vec.any():
            return 1.0 if vec.any() else 0.0
        if self._matrix is None or len(self._matrix) != len(self._rows):
            self._matrix = np.vstack(self._rows)
        return float(min(1.0, max(0.0, 1.0 - float(np.max(self._matrix @ vec)))))

    def add(self, vec: np.ndarray) -> None:
        self._rows.append(vec)
