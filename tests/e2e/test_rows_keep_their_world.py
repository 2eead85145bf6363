"""Rows made against the user's world (a real MCP server the test starts, or a
``simulate.execute`` backend) and read by a later run through ``simulate.rows=`` keep the
world they were made against, through the console script: the later run refuses verl before
any work, warns on trl (``unreplayable_world`` in report.json) and ``serve-env`` refuses its
records, exactly as the run that made the rows would.

Old code: a row did not record its world, so the later run stamped its own (the mock
world's) dials on every record: verl published with exit 0, trl without a word, and
``reset`` replayed the tasks on the mock world, whose records are not the server's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from wai_exp.env import EnvError, reset

# One worker runs this module, so its costly module fixture (`first_runs`: a wai-exp run per
# world) makes each run once, not once on each xdist worker.
pytestmark = pytest.mark.xdist_group("rows_keep_their_world")

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-stock-secret-5d81c0a9e7"
#: A shop that finds every order it is asked about (``simulate.execute``).
BACKEND = """
def execute(name, arguments):
    oid = arguments.get("order_id") or "ORD-10001"
    return {"order_id": oid, "status": "processing", "total": 42.0, "email": "a@example.com"}
"""
FIRST_RUN = {
    "mcp": ("world=mcp", "world.command=python -m tests.support.mcp_stock_server",
            f"world.cwd={REPO}", "world.reset_tool=reset_stock", "world.state_tool=stock_state",
            f"+world.env.STOCK_TOKEN={SECRET}", "simulate.budget=120"),
    "execute": ("simulate.execute=my_shop:execute", "simulate.budget=80"),
}  # fmt: skip
WORDS = {"mcp": "your tool server (world=mcp)", "execute": "your own backend (simulate.execute)"}


def _wai(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WAI_EXP, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
        env=dict(os.environ),
    )  # fmt: skip


@pytest.fixture(scope="module")
def first_runs(tmp_path_factory) -> Callable[[str], Path]:
    """An rl_round against each world, run once the first time a test asks for it: the
    folder whose ``first/simulate/rows.jsonl`` a later run reads."""
    done: dict[str, Path] = {}

    def first(world: str) -> Path:
        if world not in done:
            where = tmp_path_factory.mktemp(world)
            (where / "my_shop.py").write_text(BACKEND)
            res = _wai(
                where, "+experiment=rl_round", *FIRST_RUN[world], "tracking=none",
                "hydra.run.dir=first",
            )  # fmt: skip
            assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
            done[world] = where
        return done[world]

    return first


@pytest.fixture(params=sorted(FIRST_RUN))
def made(request, first_runs) -> tuple[str, Path]:
    """``(world, folder)`` of the first run against that world."""
    return request.param, first_runs(request.param)


def _again(where: Path, fmt: str) -> subprocess.CompletedProcess[str]:
    return _wai(
        where, "+experiment=rl_round", "simulate.rows=first/simulate/rows.jsonl",
        f"publish.format={fmt}", "tracking=none", f"hydra.run.dir={fmt}",
    )  # fmt: skip


def test_the_rows_record_their_world_and_no_secret(made) -> None:
    world, where = made
    rows = [json.loads(line) for line in (where / "first/simulate/rows.jsonl").open()]
    kinds = {r["lineage"]["world"]["options"].get("kind", "mock") for r in rows}
    assert kinds == {"mcp" if world == "mcp" else "mock"}
    assert {bool(r["lineage"]["world"].get("execute")) for r in rows} == {world == "execute"}
    for path in where.rglob("*"):  # every file the runs wrote here
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


def test_verl_on_the_rows_of_another_world_is_refused_before_work(made) -> None:
    world, where = made
    res = _again(where, "verl")
    out = res.stdout + res.stderr
    assert res.returncode == 2, out[-3000:]
    assert "publish.format: 'verl' names wai-exp's reward function" in out, out[-3000:]
    assert f"rows in {where}/first/simulate/rows.jsonl (simulate.rows) were made against" in out
    assert WORDS[world] in out
    assert "use publish.format=trl / openai with a reward function of your own" in out
    assert "simulate: running" not in out and not (where / "verl").exists()


def test_trl_on_the_rows_of_another_world_warns_and_serve_env_refuses(made) -> None:
    world, where = made
    res = _again(where, "trl")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    report = json.loads((where / "trl/publish/report.json").read_text())
    n = report["records"]
    assert n > 0 and report["unreplayable_world"] == {world: n}, report["unreplayable_world"]
    assert (
        f"warning (publish): {n} of {n} RL records were made against {WORDS[world]}: "
        "wai_exp.env.reset cannot replay them" in out
    ), out[-3000:]
    published = where / "trl/publish/train.jsonl"
    for line in published.open():
        with pytest.raises(EnvError, match=r"made against your"):
            reset(json.loads(line))
    from tests.support.training import require_training_stack

    require_training_stack("openenv", package="openenv-core")
    served = _wai(where, "serve-env", "--records", str(published), "--port", "9")
    assert served.returncode == 2, (served.stdout + served.stderr)[-3000:]
    assert f"cannot be played: this record was made against {WORDS[world]}" in served.stderr
