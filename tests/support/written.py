"""Everything a run left on disk, as text: what a test searches for a secret."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def all_text(root: Path) -> str:
    """The text of every file under ``root`` plus the SQL dump of every ``mlflow.db``."""
    parts = []
    for path in root.rglob("*"):
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
            if path.name == "mlflow.db":
                with sqlite3.connect(path) as db:
                    parts.extend(db.iterdump())
    return "\n".join(parts)
