"""Content-addressed stage cache: keys, completion marker, linking into run folders."""

import json

from wai_exp.pipeline.cache import MARKER, PARTIAL, StageCache, copy_outputs, stage_key


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
    import time

    cache = StageCache(tmp_path)
    k = key()
    order: list[str] = []
    waited = threading.Event()
    inside = threading.Event()

    def second():
        inside.wait(5)
        with cache.lock("grade", k, on_wait=waited.set):
            order.append("second")

    t = threading.Thread(target=second)
    t.start()
    with cache.lock("grade", k):
        inside.set()
        time.sleep(0.3)  # the second holder reaches the lock while this one holds it
        order.append("first")
    t.join(5)
    assert order == ["first", "second"] and waited.is_set()
