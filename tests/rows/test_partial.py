"""A partial rows file read back for a resume (issue 25 item 3, issue 18): a torn tail of any
bytes is cut and counted, a damaged middle is refused with the lines to delete, and a row
changed after it landed is not reused."""

from __future__ import annotations

import errno
import random

import pytest

from wai_exp.rows.jsonl import RowAppender, RowsNotWritten
from wai_exp.rows.partial import PartialRowsDamaged, hashes_path, read_partial


def _streamed(path, n=3):
    with RowAppender(path) as app:
        for i in range(n):
            app.append({"rollout_id": f"r{i}", "final_text": "ça marche"})
    return path


def _resume_then_append(path):
    """What a resume does: read, repair, append the next row; returns the ids read after."""
    got = read_partial(path)
    got.repair()
    with RowAppender(path) as app:
        app.append({"rollout_id": "r9"})
    return got, [r["rollout_id"] for r in read_partial(path).rows]


TAILS = {
    # a multi-byte character cut in two by the kill: was UnicodeDecodeError on every rerun
    "utf8_cut": b'{"rollout_id": "r3", "final_text": "it\xe2',
    # a crash mid-write on some filesystems: 2,000 random bytes, newlines among them
    "random_2000": random.Random(18).randbytes(2000),
    # the file extended by a block its data never reached
    "nul_block": b"\0" * 4096,
    # a whole-looking line of binary after the last row, then a torn piece
    "binary_line": b"\xff\xfe\x00garbage\n\x80\x81",
}


@pytest.mark.parametrize("tail", sorted(TAILS))
def test_a_torn_tail_is_cut_counted_and_the_resume_goes_on(tmp_path, tail):
    path = _streamed(tmp_path / "partial.jsonl")
    whole = path.stat().st_size
    with path.open("ab") as fh:
        fh.write(TAILS[tail])
    got, after = _resume_then_append(path)
    assert [r["rollout_id"] for r in got.rows] == ["r0", "r1", "r2"]
    assert got.torn_bytes == len(TAILS[tail]) and got.torn_pieces >= 1
    assert f"cut a torn tail of {len(TAILS[tail])} bytes" in got.notes()[0]
    assert after == ["r0", "r1", "r2", "r9"]  # the next append starts on a line of its own
    assert path.read_bytes()[:whole].endswith(b"\n") and path.read_bytes().count(b"\n") == 4


def test_a_damaged_middle_is_refused_naming_the_lines_to_delete(tmp_path):
    path = _streamed(tmp_path / "partial.jsonl", n=2)
    with path.open("ab") as fh:
        fh.write(b'{"rollout_id": "r2", "final_te\xe2\n')  # a torn row, then rows after it
    with RowAppender(path) as app:
        app.append({"rollout_id": "r3"})
    before = path.read_bytes()
    with pytest.raises(PartialRowsDamaged) as err:
        read_partial(path)
    msg = str(err.value)
    assert "line 3 is not a row (bytes that are not UTF-8" in msg
    assert "rows follow from line 4" in msg
    assert f"Delete line 3 from {path}" in msg and f"or delete {path}" in msg
    assert "re-run the same command" in msg
    assert path.read_bytes() == before  # refused, not touched


def test_several_damaged_lines_are_named_as_a_span(tmp_path):
    path = tmp_path / "partial.jsonl"
    _streamed(path, n=1)
    with path.open("ab") as fh:
        fh.write(b"[1, 2]\nnot json\n")
    with RowAppender(path) as app:
        app.append({"rollout_id": "r5"})
    with pytest.raises(PartialRowsDamaged, match=r"lines 2, 3 are not rows .*Delete lines 2-3"):
        read_partial(path)


def test_an_edited_but_valid_row_is_not_reused(tmp_path):
    path = tmp_path / "partial.jsonl"
    with RowAppender(path) as app:
        app.append({"rollout_id": "r0", "reward": 0})
        app.append({"rollout_id": "r1", "reward": 0})
    path.write_bytes(path.read_bytes().replace(b'"reward": 0', b'"reward": 1', 1))
    got = read_partial(path)
    assert [r["rollout_id"] for r in got.rows] == ["r1"]
    assert got.changed == [1]
    assert "1 row in" in got.notes()[0] and "differs from the hash recorded" in got.notes()[0]
    got.repair()  # the changed row leaves the file; its rollout is simulated again
    with RowAppender(path) as app:
        app.append({"rollout_id": "r0", "reward": 0})
    again = read_partial(path)
    assert [(r["rollout_id"], r["reward"]) for r in again.rows] == [("r1", 0), ("r0", 0)]
    assert again.notes() == []


def test_rows_without_their_hash_file_are_not_reused_and_it_is_said(tmp_path):
    path = _streamed(tmp_path / "partial.jsonl", n=2)
    hashes_path(path).unlink()
    got = read_partial(path)
    assert got.rows == [] and len(got.changed) == 2
    assert "hash file" in got.notes()[0] and "is missing" in got.notes()[0]


def test_a_whole_file_is_read_as_written_and_left_alone(tmp_path):
    path = _streamed(tmp_path / "partial.jsonl")
    before = path.read_bytes()
    got = read_partial(path)
    got.repair()
    assert len(got.rows) == 3 and got.notes() == [] and path.read_bytes() == before
    assert read_partial(tmp_path / "none.jsonl").rows == []


def test_a_full_disk_is_named_with_the_file_not_swallowed(tmp_path, monkeypatch):
    path = tmp_path / "partial.jsonl"
    app = RowAppender(path)
    app.append({"rollout_id": "r0"})

    class Full:
        closed = False

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(app, "_fh", Full())
    with pytest.raises(RowsNotWritten) as err:
        app.append({"rollout_id": "r1"})
    assert err.value.errno == errno.ENOSPC
    assert str(err.value).startswith(f"the disk is full at {tmp_path} (ENOSPC)")
    assert str(path) in str(err.value)
