"""Content-addressed stage cache: keys, completion marker, linking into run folders."""

import hashlib
import json
import os
import shutil
import stat

from wai_exp.pipeline.cache import MARKER, PARTIAL, ROWS, StageCache, copy_outputs, stage_key


def key(**over):
    base = dict(
        kind="grade",
        params={"k": 4},
        sections={"judge": {"kind": "checklist"}},
        input_keys=[("simulate", "abc")],
        version="0.1.0",
    )
    base.update(over)
    return stage_key(**base)


def test_key_is_stable_and_ignores_mapping_order():
    a = stage_key("grade", {"x": 1, "y": 2}, {"judge": {"a": 1, "b": 2}}, [("s", "1"), ("t", "2")])
    b = stage_key("grade", {"y": 2, "x": 1}, {"judge": {"b": 2, "a": 1}}, [("t", "2"), ("s", "1")])
    assert a == b and len(a) == 64


def test_key_changes_with_each_ingredient():
    k0 = key()
    assert key(kind="evaluate") != k0
    assert key(params={"k": 8}) != k0
    assert key(sections={"judge": {"kind": "conduct"}}) != k0
    assert key(input_keys=[("simulate", "abd")]) != k0
    assert key(version="0.2.0") != k0


def test_entry_is_complete_only_after_the_marker(tmp_path):
    cache = StageCache(tmp_path)
    k = key()
    entry = cache.prepare("grade", k)
    (entry / "rows.jsonl").write_text('{"a": 1}\n')
    assert not cache.is_complete("grade", k)  # files alone are not "finished"
    cache.mark_complete("grade", k, {"seconds": 1.5})
    assert cache.is_complete("grade", k) and cache.info("grade", k)["seconds"] == 1.5


def test_marker_for_another_key_is_not_complete(tmp_path):
    cache = StageCache(tmp_path)
    k = key()
    entry = cache.prepare("grade", k)
    (entry / MARKER).write_text(json.dumps({"key": "0" * 64}))
    assert not cache.is_complete("grade", k)


def test_prepare_removes_a_stale_marker_but_keeps_partial_rows(tmp_path):
    cache = StageCache(tmp_path)
    k = key()
    entry = cache.prepare("simulate", k)
    (entry / PARTIAL).write_text('{"rollout_id": "r1"}\n')
    cache.mark_complete("simulate", k, {})
    assert not (entry / PARTIAL).exists()  # the finished rows supersede the partial file
    (entry / PARTIAL).write_text('{"rollout_id": "r1"}\n')
    cache.prepare("simulate", k)
    assert not cache.is_complete("simulate", k)
    assert (entry / PARTIAL).read_text() == '{"rollout_id": "r1"}\n'


def test_disabled_cache_never_reuses(tmp_path):
    k = key()
    StageCache(tmp_path).prepare("grade", k)
    StageCache(tmp_path).mark_complete("grade", k, {})
    assert StageCache(tmp_path).reusable("grade", k)
    assert not StageCache(tmp_path, enabled=False).reusable("grade", k)


def test_copy_outputs_places_every_present_file_as_a_copy_not_a_link(tmp_path):
    src, dst = tmp_path / "entry", tmp_path / "run" / "grade"
    src.mkdir()
    (src / "rows.jsonl").write_text("r\n")
    (src / "report.json").write_text("{}\n")
    placed = copy_outputs(src, dst)
    assert sorted(p.name for p in placed) == ["report.json", "rows.jsonl"]
    assert (dst / "rows.jsonl").read_text() == "r\n"
    assert (dst / "rows.jsonl").stat().st_nlink == 1  # no hard link into the cache
    with (dst / "rows.jsonl").open("a") as fh:  # an in-place edit in the run folder
        fh.write("edited\n")
    assert (src / "rows.jsonl").read_text() == "r\n"
    # placing again (a rerun into the same folder) replaces rather than failing
    copy_outputs(src, dst)
    assert (dst / "report.json").read_text() == "{}\n"


def test_lock_makes_a_second_holder_wait(tmp_path):
    import threading

    cache = StageCache(tmp_path)
    k = key()
    order: list[str] = []
    waited = threading.Event()
    inside = threading.Event()

    def second():
        inside.wait(30)
        with cache.lock("grade", k, on_wait=waited.set):
            order.append("second")

    t = threading.Thread(target=second)
    t.start()
    with cache.lock("grade", k):
        inside.set()
        # held until the second holder has found it taken, not for a fixed time: a second
        # thread that got no CPU for that long would find the lock free and never wait
        waited.wait(30)
        order.append("first")
    t.join(30)
    assert order == ["first", "second"] and waited.is_set()


def _finished(cache, tmp_path, rows=b'{"rollout_id": "a"}\n{"rollout_id": "b"}\n'):
    """A finished grade entry whose rows a run wrote into ``tmp_path/r1/grade``."""
    k = key()
    cache.prepare("grade", k)
    run_rows = tmp_path / "r1" / "grade" / "rows.jsonl"
    run_rows.parent.mkdir(parents=True)
    run_rows.write_bytes(rows)
    record = cache.mark_complete("grade", k, {"seconds": 1.0}, rows_path=run_rows)
    return k, run_rows, record


def test_finished_rows_are_stored_read_only_under_their_sha256(tmp_path):
    cache = StageCache(tmp_path / "cache")
    k, run_rows, record = _finished(cache, tmp_path)
    sha = hashlib.sha256(run_rows.read_bytes()).hexdigest()
    stored = tmp_path / "cache" / "objects" / sha[:2] / sha[2:]
    assert record["files"]["rows.jsonl"]["sha256"] == sha and "paths" not in record["files"][ROWS]
    assert stored.read_bytes() == run_rows.read_bytes()
    assert stat.S_IMODE(stored.stat().st_mode) == 0o444
    assert not os.path.samefile(stored, run_rows)


def test_placing_a_hit_writes_nothing_into_the_entry_and_survives_the_run_folder(tmp_path):
    cache = StageCache(tmp_path / "cache")
    k, run_rows, _ = _finished(cache, tmp_path)
    rows = run_rows.read_bytes()
    shutil.rmtree(tmp_path / "r1")
    entry = cache.entry("grade", k)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in entry.iterdir()}
    info, why = cache.check("grade", k)
    hit, why = cache.place("grade", k, info, tmp_path / "r2" / "grade")
    assert why is None and hit.rows_path.read_bytes() == rows
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in entry.iterdir()} == before


def test_a_corrupted_object_is_never_placed_and_a_recompute_replaces_it(tmp_path):
    cache = StageCache(tmp_path / "cache")
    k, run_rows, record = _finished(cache, tmp_path)
    stored = cache.object_path(record["files"][ROWS]["sha256"])
    good = stored.read_bytes()
    stored.chmod(0o644)
    stored.write_bytes(good.replace(b'"a"', b'"x"'))  # same size, other bytes
    info, _ = cache.check("grade", k)
    hit, why = cache.place("grade", k, info, tmp_path / "r2" / "grade")
    assert hit is None and "rows.jsonl" in why and not (tmp_path / "r2/grade/rows.jsonl").exists()
    _finished(cache, tmp_path / "again")  # the stage computed again
    assert stored.read_bytes() == good


def _as_older_wai_exp(cache, k, paths):
    """Rewrite the entry's record the way wai-exp wrote it before the object store."""
    marker = cache.entry("grade", k) / MARKER
    info = json.loads(marker.read_text())
    info["record"] = 2
    info["files"][ROWS]["paths"] = [str(p) for p in paths]
    marker.write_text(json.dumps(info))
    obj = cache.object_path(info["files"][ROWS]["sha256"])
    obj.unlink()
    return marker, obj


def test_an_entry_an_older_wai_exp_wrote_is_read_and_its_rows_adopted(tmp_path):
    cache = StageCache(tmp_path / "cache")
    k, run_rows, _ = _finished(cache, tmp_path)
    marker, obj = _as_older_wai_exp(cache, k, [tmp_path / "gone.jsonl", run_rows])
    before = marker.read_bytes()
    info, why = cache.check("grade", k)
    assert why is None
    hit, why = cache.place("grade", k, info, tmp_path / "r2" / "grade")
    assert why is None and hit.rows_path.read_bytes() == run_rows.read_bytes()
    assert obj.read_bytes() == run_rows.read_bytes()  # now the cache's own
    assert marker.read_bytes() == before  # the entry itself is not rewritten
    shutil.rmtree(tmp_path / "r1")
    hit, why = cache.place("grade", k, info, tmp_path / "r3" / "grade")
    assert why is None


def test_an_older_entry_whose_run_folders_are_gone_is_recomputed_saying_why(tmp_path):
    cache = StageCache(tmp_path / "cache")
    k, run_rows, _ = _finished(cache, tmp_path)
    _as_older_wai_exp(cache, k, [run_rows])
    shutil.rmtree(tmp_path / "r1")
    info, _ = cache.check("grade", k)
    hit, why = cache.place("grade", k, info, tmp_path / "r2" / "grade")
    assert hit is None and "rows.jsonl" in why and "missing" in why


def _parts(server: str, budget: int = 30) -> dict:
    from wai_exp.pipeline.cache import key_parts

    deps = {"wai_exp": "w", "world_code": {"/srv/notes_server.py": server, "/srv/util.py": "u"}}
    return key_parts("simulate", {}, {"simulate": {"budget": budget}}, [], "0.1.0", deps=deps)


def test_rows_another_key_streamed_are_named_only_when_content_alone_changed(tmp_path):
    from wai_exp.pipeline.cache import PARTIAL_KEY

    cache = StageCache(tmp_path)
    old, new, other = _parts("a"), _parts("b"), _parts("a", budget=40)
    old_key, new_key, other_key, fourth = (stage_key("simulate", {}, {}, [], p) for p in "wxyz")
    for k, parts in ((old_key, old), (other_key, other)):
        entry = cache.prepare("simulate", k)
        (entry / PARTIAL).write_text('{"rollout_id": "r1"}\n')
        cache.keep_partial_key("simulate", k, parts)
    # the same command, the server edited: the old rows are named with what changed
    assert cache.superseded_partial("simulate", new_key, new) == (
        cache.entry("simulate", old_key) / PARTIAL,
        "the MCP server's code (notes_server.py)",
    )
    found = cache.superseded_partial("simulate", fourth, _parts("c", budget=40))
    assert found is not None and found[0].parent == cache.entry("simulate", other_key)
    # another command (a config part differs from every attempt's): nothing to say
    assert cache.superseded_partial("simulate", new_key, _parts("b", budget=50)) is None
    # a finished entry no longer holds rows to resume, nor its key record
    cache.mark_complete("simulate", old_key, {})
    assert not (cache.entry("simulate", old_key) / PARTIAL_KEY).exists()
    assert cache.superseded_partial("simulate", new_key, new) is None
