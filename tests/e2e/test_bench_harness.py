"""The benchmark harness (``experiments/bench/run.py``): it finds every ``bench_*`` function
beside it, prints one table row per result with its target verdict, writes
``results/latest.json`` and exits non-zero when a target is missed or a benchmark raises.

The harness runs here on stand-in benchmark files in a temporary folder, so the test measures
nothing and never overwrites the repo's recorded results."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "experiments" / "bench"

FAKE = """
def bench_fast():
    return {"name": "fast thing", "value": 0.5, "unit": "s", "target": 1.0, "better": "lower"}


def bench_slow():
    return {"name": "slow thing", "value": 3.0, "unit": "s", "target": 1.0, "better": "lower"}


def bench_many():
    return [
        {"name": "rate a", "value": 200.0, "unit": "rows/s", "target": 100.0, "better": "higher"},
        {"name": "rate b", "value": 7.0, "unit": "rows/s"},
    ]


def bench_broken():
    raise RuntimeError("benchmark setup failed")


def helper_not_a_bench():
    raise AssertionError("only bench_* functions run")
"""


@pytest.fixture
def harness(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_run_under_test", BENCH / "run.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    (tmp_path / "bench_fake.py").write_text(FAKE)
    (tmp_path / "helper.py").write_text("raise AssertionError('not a bench_*.py file')\n")
    monkeypatch.setattr(module, "HERE", tmp_path)
    return module


def test_every_result_is_printed_judged_and_written(harness, tmp_path, capsys):
    code = harness.main([])
    out = capsys.readouterr().out
    assert code == 1  # one target missed and one benchmark raised
    saved = json.loads((tmp_path / "results/latest.json").read_text())
    by_name = {r["name"]: r for r in saved["results"]}
    assert set(by_name) == {
        "fast thing",
        "slow thing",
        "rate a",
        "rate b",
        "bench_fake.bench_broken",
    }
    assert by_name["fast thing"]["verdict"] == "ok"  # 0.5 <= 1.0
    assert by_name["slow thing"]["verdict"] == "MISS"  # 3.0 > 1.0
    assert by_name["rate a"]["verdict"] == "ok"  # higher is better: 200 >= 100
    assert by_name["rate b"]["verdict"] == ""  # no target: measured, not judged
    broken = by_name["bench_fake.bench_broken"]
    assert broken["value"] is None and broken["error"] == "raised"
    assert all(r["bench"].startswith("bench_fake.bench_") for r in saved["results"])
    assert all(r["wall_s"] >= 0 for r in saved["results"])
    assert "slow thing" in out and "MISS" in out and "n/a" in out  # the raised one shows n/a


def test_a_filter_runs_only_matching_benchmarks_and_all_ok_exits_0(harness, tmp_path):
    assert harness.main(["FAST"]) == 0  # case-insensitive substring of module.function
    saved = json.loads((tmp_path / "results/latest.json").read_text())
    assert [r["name"] for r in saved["results"]] == ["fast thing"]


def test_the_shipped_benchmarks_follow_the_convention():
    # Parsed, not run: the suite takes minutes and measures, it does not assert.
    files = sorted(BENCH.glob("bench_*.py"))
    assert files
    for path in files:
        tree = ast.parse(path.read_text())
        names = [
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name.startswith("bench_")
        ]
        assert names, f"{path.name} defines no bench_* function"
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names):
            n_required = len(fn.args.args) - len(fn.args.defaults)
            assert n_required == 0, f"{path.name}:{fn.name} must be callable with no arguments"
