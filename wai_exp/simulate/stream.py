"""``output=`` streaming: rows appended to ``<output>.partial`` while the run goes, so a crash
loses at most one flush interval."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from wai_exp.config.knobs import Knobs


class RowStream:
    """Rows streamed to ``<output>.partial`` while the run goes, flushed every
    ``flush_report_rows`` rows or ``flush_report_s`` seconds, so a crash loses at most that
    much; the complete file is then written atomically under ``output`` by the caller."""

    def __init__(self, output: Path, knobs: Knobs) -> None:
        from wai_exp.rows.jsonl import dumps_row

        self._dumps = dumps_row
        self.path = output.with_name(output.name + ".partial")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("w", encoding="utf-8")
        self._pending: list[str] = []
        self._every_rows = knobs.flush_report_rows
        self._every_s = knobs.flush_report_s
        self._last = time.monotonic()

    def add(self, row: dict[str, Any]) -> None:
        """Queue ``row`` (scrubbed by ``dumps_row``); flush when a threshold is reached."""
        self._pending.append(self._dumps(row) + "\n")
        now = time.monotonic()
        if len(self._pending) >= self._every_rows or now - self._last >= self._every_s:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        """Write the queued rows to the partial file."""
        if self._pending:
            self._fh.write("".join(self._pending))
            self._fh.flush()
            self._pending.clear()
        self._last = time.monotonic() if now is None else now

    def close(self, *, remove: bool) -> None:
        """Flush and close; ``remove`` deletes the partial file (the full one is written)."""
        self.flush()
        self._fh.close()
        if remove:
            self.path.unlink(missing_ok=True)
