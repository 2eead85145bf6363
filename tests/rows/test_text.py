"""Model and tool text made writable: surrogates and NUL replaced, the row says so."""

from __future__ import annotations

import json

from wai_exp.rows.jsonl import dumps_row
from wai_exp.rows.text import repair_row


def test_lone_surrogates_and_nul_are_replaced_and_recorded():
    row = {"final_text": "ok \udd2f", "steps": [{"content": "a\x00b"}], "reward": 1.0}
    fixed = repair_row(row)
    assert fixed["final_text"] == "ok \ufffd" and fixed["steps"][0]["content"] == "a\ufffdb"
    assert fixed["text_repaired"]["replaced"] == 2
    assert fixed["text_repaired"]["paths"] == ["final_text", "steps.0.content"]
    json.loads(dumps_row(fixed).encode("utf-8"))  # writable as UTF-8


def test_clean_rows_are_returned_untouched():
    row = {"final_text": "déjà vu 🙂", "steps": [{"content": "fine"}]}
    assert repair_row(row) is row


def test_unwritable_text_deep_in_keys_tuples_and_lists_is_found():
    row = {
        "steps": [{"kind": "tool", "result": ({"items": ["fine", {"k\x00ey": "v"}]},)}],
        "world_changes": [{"note": "ok"}, {"note": ["x", "y\ud800"]}],
        "reward": 0.5,
    }
    fixed = repair_row(row)
    assert fixed is not row and fixed["text_repaired"]["replaced"] == 2
    assert fixed["steps"][0]["result"][0]["items"][1] == {"k\ufffdey": "v"}
    assert fixed["world_changes"][1]["note"][1] == "y\ufffd"
    json.loads(dumps_row(fixed).encode("utf-8"))
