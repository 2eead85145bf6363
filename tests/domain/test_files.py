"""``atomic_write``: readers see the old file or the whole new one, concurrent writers never
share a temporary file; ``file_record``/``file_sha256``: one streaming hash for every caller."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading

import pytest

from wai_exp.domain.files import CHUNK, ContentHasher, atomic_write, file_record, file_sha256


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_atomic_write_text_and_bytes(tmp_path):
    target = tmp_path / "sub" / "a.txt"
    with atomic_write(target) as fh:
        fh.write("héllo\n")
    assert target.read_text(encoding="utf-8") == "héllo\n"
    with atomic_write(target, "wb") as fh:
        fh.write(b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    with atomic_write(target, "wb", chmod=0o644) as fh:
        fh.write(b"x")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert _leftovers(target.parent) == []


def test_atomic_write_failure_keeps_the_old_file(tmp_path):
    target = tmp_path / "a.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_write(target) as fh:
        fh.write("half of the new")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert _leftovers(tmp_path) == []


def test_atomic_write_refuses_append_modes(tmp_path):
    with pytest.raises(ValueError, match="mode 'w' or 'wb'"), atomic_write(tmp_path / "x", "a"):
        pass


def test_two_concurrent_writers_never_mix(tmp_path):
    """Two writers of one path, each writing its own 3 MiB in pieces, 40 times at once, and a
    reader: every read is one writer's whole content, and nothing is left behind. With a fixed
    temporary name the writers wrote into one file and the second rename failed."""
    target = tmp_path / "rows.jsonl"
    payloads = [bytes([65 + i]) * (3 * CHUNK) for i in range(2)]
    target.write_bytes(payloads[0])
    start = threading.Barrier(3)
    errors: list[BaseException] = []
    seen: set[bytes] = set()
    done = threading.Event()

    def write(data: bytes) -> None:
        try:
            start.wait()
            for _ in range(40):
                with atomic_write(target, "wb") as fh:
                    for i in range(0, len(data), CHUNK // 4):
                        fh.write(data[i : i + CHUNK // 4])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def read() -> None:
        start.wait()
        while not done.is_set():
            seen.add(hashlib.sha256(target.read_bytes()).digest())

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    reader = threading.Thread(target=read)
    for t in (*threads, reader):
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join()
    assert errors == []
    assert seen <= {hashlib.sha256(p).digest() for p in payloads}
    assert target.read_bytes() in payloads
    assert _leftovers(tmp_path) == []


def test_hydra_copies_scrubbed_by_two_threads_at_once(tmp_path, caplog):
    """A sweep's jobs scrub the same multirun.yaml; two threads of one process share a pid, so
    the old '.multirun.yaml.<pid>.tmp' was one file for both: a rename failed ('could not check
    ... for secrets') or moved the other's half-written file into place."""
    from wai_exp.commands.run import scrub_hydra_files

    path = tmp_path / "multirun.yaml"
    secret = "sk-" + "a1B2c3D4" * 6
    body = "".join(f"key_{i}: value number {i} of the sweep's config\n" for i in range(300))
    caplog.set_level(logging.WARNING, logger="wai_exp.commands.run")
    for _ in range(8):
        path.write_text(f"api_key: {secret}\n{body}")
        path.chmod(0o640)
        mode = 0o640
        start = threading.Barrier(4)

        def scrub() -> None:
            start.wait()  # noqa: B023 - the round's own barrier
            scrub_hydra_files([path])  # noqa: B023

        threads = [threading.Thread(target=scrub) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        text = path.read_text()
        assert secret not in text and text.endswith(body)
        assert stat.S_IMODE(path.stat().st_mode) == mode  # Hydra's permissions kept
    assert [r.getMessage() for r in caplog.records] == []
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 7])
def test_file_record_matches_hashlib(tmp_path, size):
    data = (b"0123456789abcde\n" * (size // 16 + 1))[:size]
    path = tmp_path / "f"
    path.write_bytes(data)
    want = {"bytes": size, "lines": data.count(b"\n"), "sha256": hashlib.sha256(data).hexdigest()}
    assert file_record(path) == want
    assert file_sha256(path) == want["sha256"]
    hasher = ContentHasher()
    for i in range(0, size, 1000):
        hasher.update(data[i : i + 1000])
    assert hasher.record() == want


def test_callers_share_the_one_hash(tmp_path):
    from wai_exp.pipeline import cache, deps
    from wai_exp.tracking.mlflow_tracker import file_digest

    path = tmp_path / "rows.jsonl"
    path.write_bytes(os.urandom(CHUNK + 3))
    want = hashlib.sha256(path.read_bytes()).hexdigest()
    assert deps.file_sha256(path) == cache.file_record(path)["sha256"] == want
    assert file_digest(path) == want[:16]
