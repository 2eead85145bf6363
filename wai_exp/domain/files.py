"""Writing a file so no reader ever sees half of it, and hashing one as it streams by."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

#: Bytes read at a time when hashing or copying a file: large enough that a 1 GB rows file
#: costs about a thousand reads, small enough to hold no file-sized buffer.
CHUNK = 1 << 20


@contextmanager
def atomic_write(
    path: str | Path,
    mode: str = "w",
    *,
    encoding: str | None = "utf-8",
    buffering: int = -1,
    chmod: int | None = None,
) -> Iterator[IO[Any]]:
    """Open a new temporary file beside ``path`` for the block, then move it onto ``path``.

    Readers see the old file or the whole new one, never a part, and two writers of the same
    path never share a temporary file (``mkstemp`` gives each its own name): the last to
    finish wins, whole. The data is flushed and fsynced before the move. An exception in the
    block deletes the temporary file and leaves ``path`` as it was. The parent folder is
    created. ``mode`` is ``"w"`` or ``"wb"``; ``encoding`` applies to text; the handle's
    ``name`` is the temporary file's path (to read back what was written). The file keeps
    ``mkstemp``'s 0600 permissions unless ``chmod`` gives others. Raises ``OSError`` when the
    folder cannot be written.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes a new file: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)  # opened again by name, so the handle's ``name`` is the temporary path
    try:
        text_encoding = encoding if mode == "w" else None
        with open(tmp, mode, buffering=buffering, encoding=text_encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if chmod is not None:
            os.chmod(tmp, chmod)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ContentHasher:
    """Size, line count and SHA-256 of bytes fed to it in pieces: a file as it is written or
    copied is hashed in the same pass, with no second read."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.bytes = 0
        self.lines = 0

    def update(self, data: bytes) -> None:
        self._hash.update(data)
        self.bytes += len(data)
        self.lines += data.count(b"\n")

    def record(self) -> dict[str, Any]:
        """``{"bytes", "lines", "sha256"}`` (hex) of what was fed so far."""
        return {"bytes": self.bytes, "lines": self.lines, "sha256": self._hash.hexdigest()}


def read_chunks(fh: IO[bytes]) -> Iterator[bytes]:
    """``fh``'s bytes, ``CHUNK`` at a time, to its end."""
    while chunk := fh.read(CHUNK):
        yield chunk


def file_record(path: str | Path) -> dict[str, Any]:
    """``{"bytes", "lines", "sha256"}`` of a file, read once in ``CHUNK`` pieces (no parsing).
    Raises ``OSError`` when it cannot be read."""
    hasher = ContentHasher()
    with open(path, "rb") as fh:
        for chunk in read_chunks(fh):
            hasher.update(chunk)
    return hasher.record()


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of the file's bytes, read in ``CHUNK`` pieces. Raises ``OSError``."""
    return str(file_record(path)["sha256"])


__all__ = ["CHUNK", "ContentHasher", "atomic_write", "file_record", "file_sha256", "read_chunks"]
