"""Seeds and ids: process-independent hashes behind rollout seeds, rollout ids and run ids.

``hash()`` is salted per process, so every id the engine stamps comes from these instead;
that is what makes the same call give byte-identical rows in any process.
"""

from __future__ import annotations

import hashlib
from typing import Any


def stable_hash(*parts: Any, bits: int = 63) -> int:
    """A process-independent non-negative integer hash of ``parts`` (``bits`` wide)."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") >> (64 - bits)


def short_hash(*parts: Any, n: int = 16) -> str:
    """The first ``n`` hex digits of a process-independent hash of ``parts``."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return hashlib.blake2b(text, digest_size=16).hexdigest()[:n]


def prompt_sha(system_prompt: str | None) -> str:
    """sha256 hex of the system prompt (None hashes as the empty string)."""
    return hashlib.sha256((system_prompt or "").encode()).hexdigest()
