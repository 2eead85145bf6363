"""What a stage read while it ran: recorded by the audit hook, checked on the next lookup."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from wai_exp.pipeline import cache as cache_mod
from wai_exp.pipeline import deps, reads
from wai_exp.pipeline.registry import import_object


def test_a_file_read_is_recorded_with_its_hash_and_an_edit_is_named(tmp_path):
    data = tmp_path / "template.txt"
    data.write_text("one\n")
    with reads.record() as rec:
        data.read_text()
    snap = reads.snapshot(rec)
    assert snap["files"][str(data)] == {"bytes": 4, "sha256": deps.file_sha256(data)}
    assert reads.changed(snap) is None
    data.write_text("two\n")  # same size, other bytes
    assert "template.txt, which the stage read, has changed" in reads.changed(snap)
    data.unlink()
    assert "is gone" in reads.changed(snap)


def test_scratch_files_the_stage_wrote_and_its_own_folders_are_not_inputs(tmp_path):
    own, scratch, data = tmp_path / "run", tmp_path / "scratch.txt", tmp_path / "in.txt"
    own.mkdir()
    (own / "rows.jsonl").write_text("{}\n")
    data.write_text("x")
    with reads.record([own]) as rec:
        scratch.write_text("a")
        scratch.read_text()
        (own / "rows.jsonl").read_text()
        data.read_bytes()
        os.close(os.open(data, os.O_RDONLY))
    files = reads.snapshot(rec)["files"]
    assert {p for p in files if p.startswith(str(tmp_path))} == {str(data)}


def test_a_file_read_then_rewritten_by_the_stage_is_named_as_unseen(tmp_path):
    memo = tmp_path / "memo.json"
    memo.write_text("{}")
    with reads.record() as rec:
        memo.read_text()
        memo.write_text('{"seen": 1}')
    snap = reads.snapshot(rec)
    assert str(memo) not in snap["files"]
    assert snap["unseen"] == {"rewritten": [str(memo)]}
    assert "read and then rewrote" in reads.unseen_note(snap)


def test_a_file_looked_for_and_missing_must_stay_missing(tmp_path):
    maybe = tmp_path / "override.txt"
    with reads.record() as rec:
        assert not maybe.exists()
        with contextlib.suppress(FileNotFoundError):
            maybe.read_text()
    snap = reads.snapshot(rec)
    assert snap["files"][str(maybe)] == {"absent": True} and reads.changed(snap) is None
    maybe.write_text("now here")
    assert "exists now" in reads.changed(snap)


def test_rays_session_files_are_not_inputs(tmp_path, monkeypatch):
    # simulate.cluster=ray: the stage's process reads Ray's object-spill files, which change
    # while it runs and are new in every session. Recorded, they made every Ray stage
    # "not stable": never reused from the cache, never resumed after a Ctrl-C.
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "raytmp"))
    session = tmp_path / "raytmp/ray/session_2026-12-06_08-35-47_549585_22339"
    session.mkdir(parents=True)
    spill = session / "ray_spilled_objects_9a057a58"
    spill.write_bytes(b"\0" * 8)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("be brief")
    with reads.record() as rec:
        spill.read_bytes()
        prompt.read_text()
    snap = reads.snapshot(rec)
    assert str(spill) not in snap["files"]
    assert str(prompt) in snap["files"] and reads.changed(snap) is None


def test_a_file_that_changed_while_the_stage_ran_never_matches(tmp_path):
    data = tmp_path / "moving.txt"
    data.write_text("before")
    with reads.record() as rec:
        data.read_text()
        data.write_bytes(b"after, longer")  # from outside: another process, say
        rec.written.discard(str(data))
    snap = reads.snapshot(rec)
    assert "unstable" in snap["files"][str(data)]
    assert "was not stable" in reads.changed(snap)


def test_a_module_loaded_by_name_is_recorded_and_the_stdlib_is_not(tmp_path, monkeypatch):
    (tmp_path / "reply_mod_a.py").write_text("WORDS = 'one'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with reads.record() as rec:
            importlib.import_module("reply_mod_a")
            importlib.import_module("json.tool")
        files = reads.snapshot(rec)["files"]
        assert str(tmp_path / "reply_mod_a.py") in files
        assert not [p for p in files if p.endswith(("tool.py", ".pyc"))]
        assert not [p for p in files if p.startswith(str(Path(deps.__file__).parent))]
    finally:
        sys.modules.pop("reply_mod_a", None)


def test_modules_loaded_with_the_users_code_before_the_stage_are_its_reads(tmp_path, monkeypatch):
    # The run imports the agent to check it before any stage starts, and the agent loads a
    # module by name when it is imported; a later stage of the same process (a launcher
    # worker's next job) loads a module at call time that is already imported.
    (tmp_path / "words_b.py").write_text("WORDS = 'one'\n")
    (tmp_path / "late_b.py").write_text("LATE = 1\n")
    (tmp_path / "agent_b.py").write_text(
        "import importlib\n_w = importlib.import_module('words_' + 'b')\n"
        "def agent(message):\n    return importlib.import_module('late_' + 'b').LATE\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        fn = import_object("agent_b:agent", "agent.target")
        with reads.record(runs=["agent_b:agent"]) as first:
            fn("hi")
        with reads.record(runs=["agent_b:agent"]) as second:
            fn("hi")  # late_b is imported already: no import happens now
        with reads.record() as builtin:  # a stage that runs none of it
            pass
        want = {str(tmp_path / f) for f in ("agent_b.py", "words_b.py", "late_b.py")}
        for rec in (first, second):
            assert want <= set(reads.snapshot(rec)["files"])
        assert not want & set(reads.snapshot(builtin)["files"])
    finally:
        for name in ("agent_b", "words_b", "late_b"):
            sys.modules.pop(name, None)


def test_reads_in_a_thread_without_the_stage_context_are_recorded(tmp_path):
    # A judge pool thread does not inherit the stage's context: its reads go to every active
    # recorder rather than to none.
    data = tmp_path / "judge_notes.txt"
    data.write_text("x")
    with reads.record() as rec:
        t = threading.Thread(target=data.read_text)
        t.start()
        t.join()
    assert str(data) in reads.snapshot(rec)["files"]


def test_a_worker_processs_reads_are_merged_into_the_stages_record(tmp_path):
    # simulate.workers: rollouts run in other processes, whose reads the stage's audit hook
    # cannot see. Each worker spools them (a line as each file is first opened, so a worker
    # killed mid-run has said them); the stage merges them before its snapshot.
    hint, scratch, spooled = tmp_path / "hint.txt", tmp_path / "scratch.txt", tmp_path / "spool"
    hint.write_text("be brief")
    worker = (
        "import sys; from pathlib import Path; from wai_exp.pipeline import reads\n"
        "reads.spool(Path(sys.argv[1]) / 'host-1.jsonl')\n"
        "Path(sys.argv[2]).read_text(); Path(sys.argv[3]).write_text('x')\n"
        "Path(sys.argv[3]).read_text()\n"
    )
    ran = subprocess.run([sys.executable, "-c", worker, spooled, hint, scratch], check=False)
    assert ran.returncode == 0
    with reads.record() as rec:
        pass
    assert reads.merge_spools(rec, spooled) == 1
    snap = reads.snapshot(rec)
    assert snap["files"][str(hint)] == {"bytes": 8, "sha256": deps.file_sha256(hint)}
    assert str(scratch) not in snap["files"]  # the worker wrote it: its scratch, not an input
    assert not spooled.exists()
    hint.write_text("be long!")
    assert "hint.txt, which the stage read, has changed since" in reads.changed(snap)


def test_a_worker_that_spooled_nothing_is_named_as_unseen():
    with reads.record() as rec:
        rec.on_unseen("worker", "1 of 2 worker processes")
    note = reads.unseen_note(reads.snapshot(rec))
    assert "what its workers read on another machine (1 of 2 worker processes)" in note


def test_network_and_subprocess_are_named_as_unseen(tmp_path):
    with reads.record() as rec:
        s = socket.socket()
        s.settimeout(0.2)
        try:
            s.connect(("127.0.0.1", 9))
        except OSError:
            pass
        finally:
            s.close()
        os.system("true")
    snap = reads.snapshot(rec)
    assert snap["unseen"] == {"network": ["127.0.0.1:9"], "subprocess": ["true"]}
    note = reads.unseen_note(snap)
    assert "network" in note and "127.0.0.1:9" in note and "cache.enabled=false" in note
    assert reads.unseen_note({"files": {}}) is None


def test_nothing_is_recorded_outside_a_stage(tmp_path):
    data = tmp_path / "later.txt"
    data.write_text("x")
    with reads.record() as rec:
        pass
    data.read_text()
    assert str(data) not in reads.snapshot(rec)["files"]


def _complete_entry(cache: cache_mod.StageCache, read: dict) -> None:
    entry = cache.prepare("simulate", "k" * 64)
    for name in cache_mod.ENTRY_FILES:
        (entry / name).write_text("{}\n")
    cache.mark_complete("simulate", "k" * 64, {"reads": read})


def test_the_cache_lookup_misses_when_a_read_changed_and_leaves_the_entry_alone(tmp_path):
    data = tmp_path / "template.txt"
    data.write_text("one\n")
    with reads.record() as rec:
        data.read_text()
    cache = cache_mod.StageCache(tmp_path / "cache")
    _complete_entry(cache, reads.snapshot(rec))
    marker = cache.entry("simulate", "k" * 64) / cache_mod.MARKER
    assert cache.check("simulate", "k" * 64)[0] is not None
    before = marker.read_bytes()
    data.write_text("two\n")
    record, why = cache.check("simulate", "k" * 64)
    assert record is None and str(data) in why
    assert marker.read_bytes() == before  # the lookup wrote nothing
    data.write_text("one\n")  # back as it was: reused again
    assert cache.check("simulate", "k" * 64)[0] is not None
    assert json.loads(before)["reads"]["files"][str(data)]["bytes"] == 4


def test_the_shipped_spec_is_part_of_wai_exps_digest():
    root = Path(deps.__file__).resolve().parent.parent
    files = deps._package_files(root)
    assert root / "simulate" / "specs" / "support_desk.json" in files
    assert not [p for p in files if "__pycache__" in p.parts]
