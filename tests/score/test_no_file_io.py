"""score/ is pure functions over rows: no module under wai_exp/score opens, reads or writes a
file. The spec's path-taking signatures are served by wai_exp.pipeline.edges."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import wai_exp
from wai_exp.score.grade.quality import rank
from wai_exp.score.grade.spec import load_spec
from wai_exp.score.judges.labels import attach_labels
from wai_exp.score.select.decontaminate import decontaminate
from wai_exp.score.select.optimize import optimize

SCORE = Path(wai_exp.__file__).parent / "score"
#: Calls that touch the file system (by the called name, attribute or bare).
FILE_CALLS = {
    "open",
    "read_text",
    "write_text",
    "read_bytes",
    "write_bytes",
    "read_rows",
    "iter_rows",
    "write_rows",
    "read_jsonl",
    "write_jsonl",
}
#: Imports that would bring the row file readers in.
FILE_MODULES = {"wai_exp.rows.jsonl"}


def file_touches(path: Path, root: Path = SCORE) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name in FILE_CALLS:
                out.append(f"{path.relative_to(root)}:{node.lineno} {name}()")
        elif isinstance(node, ast.ImportFrom) and node.module in FILE_MODULES:
            out.append(f"{path.relative_to(root)}:{node.lineno} import {node.module}")
    return out


def test_no_module_under_score_touches_files():
    found = [hit for path in sorted(SCORE.rglob("*.py")) for hit in file_touches(path)]
    assert found == [], "score/ must stay pure; move file I/O to wai_exp.pipeline.edges:\n" + (
        "\n".join(found)
    )


def test_the_check_sees_each_way_of_touching_a_file(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from wai_exp.rows.jsonl import read_rows\n"
        "def f(p):\n    open(p)\n    p.read_text()\n    write_rows(p, [])\n"
    )
    assert file_touches(probe, tmp_path) == [
        "probe.py:1 import wai_exp.rows.jsonl",
        "probe.py:3 open()",
        "probe.py:4 read_text()",
        "probe.py:5 write_rows()",
    ]


@pytest.mark.parametrize(
    "call",
    [
        lambda p: optimize(p),
        lambda p: attach_labels([], p),
        lambda p: decontaminate([], p),
        lambda p: rank(p),
        lambda p: load_spec(p),
    ],
)
def test_score_functions_refuse_a_path_and_name_the_public_one(tmp_path, call):
    path = tmp_path / "rows.jsonl"
    path.write_text("{}\n")
    with pytest.raises(TypeError, match=r"wai_exp\.\w+\("):
        call(str(path))


def test_the_public_names_point_at_the_edges():
    from wai_exp.pipeline import edges

    for name in ("optimize", "attach_labels", "decontaminate", "rank", "load_spec"):
        assert getattr(wai_exp, name) is getattr(edges, name)
