"""The stage cache owns its rows (issue 19 §1): run folders can be deleted without losing
cached work, a cache hit writes nothing into the entry, and ``wai-exp cache du | gc | verify``
look after the store. Every run goes through the console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

# One worker runs this module, so its costly module fixture (`computed`: a wai-exp run) is
# made once, not once on each xdist worker.
pytestmark = pytest.mark.xdist_group("cache_store")

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
BASE = ["+experiment=rl_round", "simulate.budget=120", "tracking=none"]
STAGES = ("simulate", "grade", "optimize", "publish_gate")
DAY = 86400


def wai(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([WAI_EXP, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def run(cwd: Path, name: str) -> subprocess.CompletedProcess:
    res = wai(cwd, *BASE, f"hydra.run.dir=outputs/{name}")
    assert res.returncode == 0, res.stdout + res.stderr
    return res


def statuses(res: subprocess.CompletedProcess) -> dict[str, str]:
    out = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if line.startswith("  ") and len(parts) >= 2 and parts[0] in STAGES:
            out[parts[0]] = parts[1]
    assert set(out) == set(STAGES), res.stdout
    return out


def cache_files(cwd: Path) -> dict[str, bytes]:
    """Every file of the cached stages' entries and of the row objects (not the lock files,
    which only say a run held an entry, nor ``publish``, which is never cached)."""
    root = cwd / "outputs/.cache"
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix != ".lock" and not p.parts[-2].startswith("publish-")
    }


def record(cwd: Path, stage: str) -> dict:
    [marker] = (cwd / "outputs/.cache").glob(f"{stage}-*/COMPLETE")
    return json.loads(marker.read_text())


def obj(cwd: Path, stage: str) -> Path:
    sha = record(cwd, stage)["files"]["rows.jsonl"]["sha256"]
    return cwd / "outputs/.cache/objects" / sha[:2] / sha[2:]


@pytest.fixture(scope="module")
def computed(tmp_path_factory) -> Path:
    """One computed run (outputs/r1 and its cache), copied into each test's folder."""
    root = tmp_path_factory.mktemp("computed")
    assert set(statuses(run(root, "r1")).values()) == {"ran"}
    return root


@pytest.fixture
def project(computed, tmp_path) -> Path:
    shutil.copytree(computed / "outputs", tmp_path / "outputs", symlinks=True)
    return tmp_path


def test_deleting_the_run_folder_keeps_every_stage_cached(tmp_path):
    project = tmp_path  # computed here: no other copy of the rows exists anywhere
    run(project, "r1")
    before = {s: (project / f"outputs/r1/{s}/rows.jsonl").read_bytes() for s in STAGES}
    shutil.rmtree(project / "outputs/r1")  # the usual clean-up of old run folders
    again = run(project, "r2")
    assert statuses(again) == dict.fromkeys(STAGES, "cached")
    for stage in STAGES:
        placed = project / f"outputs/r2/{stage}/rows.jsonl"
        assert placed.read_bytes() == before[stage]
        assert placed.stat().st_nlink == 1  # its own file, not a hard link into the cache


def test_a_cache_hit_leaves_every_entry_byte_for_byte_unchanged(project):
    before = cache_files(project)
    assert statuses(run(project, "r2")) == dict.fromkeys(STAGES, "cached")
    after = cache_files(project)
    changed = [n for n in before if before[n] != after.get(n)]
    assert changed == [] and set(after) >= set(before)


def test_editing_a_placed_rows_file_in_place_never_reaches_the_cache(project):
    run(project, "r2")
    mine = project / "outputs/r2/simulate/rows.jsonl"
    original = mine.read_bytes()
    with mine.open("r+b") as fh:  # the same inode, other bytes
        fh.write(b'{"rollout_id": "mine"}\n')
        fh.truncate()
    assert obj(project, "simulate").read_bytes() == original
    third = run(project, "r3")
    assert statuses(third)["simulate"] == "cached"
    assert (project / "outputs/r3/simulate/rows.jsonl").read_bytes() == original


def test_cache_du_counts_what_is_on_disk(project):
    res = wai(project, "cache", "du", "--json")
    assert res.returncode == 0, res.stderr
    usage = json.loads(res.stdout)
    root = project / "outputs/.cache"
    objects = [p for p in (root / "objects").rglob("*") if p.is_file()]
    assert usage["objects"] == len(objects) and usage["unused_objects"] == 0
    assert usage["object_bytes"] == sum(p.stat().st_size for p in objects)
    on_disk = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    locks = sum(p.stat().st_size for p in root.glob("*.lock"))
    assert usage["total_bytes"] == on_disk - locks
    assert usage["finished"] == usage["entries"] >= len(STAGES)
    assert set(STAGES) <= set(usage["by_stage"])
    text = wai(project, "cache", "du").stdout
    assert "row objects:" in text and "simulate" in text


def test_cache_verify_names_a_corrupted_object_and_the_next_run_repairs_it(project):
    ok = wai(project, "cache", "verify")
    assert ok.returncode == 0 and ": ok" in ok.stdout, ok.stdout + ok.stderr
    bad = obj(project, "grade")
    data = bytearray(bad.read_bytes())
    data[10] ^= 0x01  # one flipped bit, same size
    bad.chmod(0o644)
    bad.write_bytes(bytes(data))
    found = wai(project, "cache", "verify")
    assert found.returncode == 1, found.stdout + found.stderr
    assert str(bad.relative_to(project)) in found.stdout and "corrupted" in found.stdout
    again = run(project, "r2")
    assert statuses(again)["simulate"] == "cached" and statuses(again)["grade"] == "ran"
    assert "not reusing" in again.stderr and "rows.jsonl" in again.stderr
    assert wai(project, "cache", "verify").returncode == 0  # the fresh rows replaced it
    assert (project / "outputs/r2/grade/rows.jsonl").read_bytes() == (
        project / "outputs/r1/grade/rows.jsonl"
    ).read_bytes()


def _age(project: Path, stage: str, days: float) -> None:
    """Make ``stage``'s entry, its lock and its rows object look ``days`` days unused."""
    old = time.time() - days * DAY
    [entry] = (project / "outputs/.cache").glob(f"{stage}-*/")
    paths = [obj(project, stage), entry.with_name(entry.name + ".lock"), entry]
    for p in [*entry.iterdir(), *paths]:
        if p.exists():
            os.utime(p, (old, old))


def test_cache_gc_removes_only_what_no_run_used_for_n_days(project):
    _age(project, "simulate", 40)
    sim_obj = obj(project, "simulate")
    kept = wai(project, "cache", "gc", "--keep-days", "30")
    assert kept.returncode == 0, kept.stderr
    assert "removed 1 entries and 1 row objects" in kept.stdout
    assert not list((project / "outputs/.cache").glob("simulate-*")) and not sim_obj.exists()
    assert obj(project, "grade").exists()
    assert "removed 0 entries" in wai(project, "cache", "gc", "--keep-days", "30").stdout
    again = run(project, "r2")
    # simulate is made again; grade then grades those rows, not the ones it was reused for
    # before (a model agent's rows differ from run to run: reusing grade would score rows
    # this run does not have)
    assert statuses(again)["simulate"] == "ran" and statuses(again)["grade"] == "ran"


def test_cache_gc_keep_days_0_empties_it_and_a_rerun_recomputes(project):
    res = wai(project, "cache", "gc", "--keep-days", "0")
    assert res.returncode == 0 and "removed 0 entries" not in res.stdout, res.stdout
    usage = json.loads(wai(project, "cache", "du", "--json").stdout)
    assert usage["entries"] == 0 and usage["objects"] == 0
    assert (project / "outputs/r1/simulate/rows.jsonl").exists()  # run folders untouched
    assert set(statuses(run(project, "r2")).values()) == {"ran"}


def test_a_reuse_counts_as_use_for_gc(project):
    for stage in STAGES:
        _age(project, stage, 40)
    run(project, "r2")  # every stage reused: now used today
    res = wai(project, "cache", "gc", "--keep-days", "30")
    assert "removed 0 entries and 0 row objects" in res.stdout, res.stdout


@pytest.mark.parametrize(
    "args, says",
    [
        (["cache", "gc"], "--keep-days"),
        (["cache", "gc", "--keep-days", "-1"], "--keep-days must be 0 or more"),
        (["cache", "du", "--dir", "nowhere"], "pass --dir"),
        (["cache"], "du,gc,verify"),
    ],
)
def test_cache_bad_input_exits_2_naming_the_fix(project, args, says):
    res = wai(project, *args)
    assert res.returncode == 2 and says in res.stderr, res.stderr


def test_cache_help_says_what_each_action_does(tmp_path):
    res = wai(tmp_path, "cache", "--help")
    assert res.returncode == 0
    for word in ("du", "gc", "verify", "--keep-days", "deleted without losing"):
        assert word in res.stdout, res.stdout
    assert "cache du|gc|verify" in wai(tmp_path, "--help").stdout  # listed with the commands
