"""``world=mcp`` against a server whose search answers ``{"books": []}`` when nothing matches
(``tests/support/mcp_catalogue_server.py``), through the console script. The asks' search
words come from the schema (a bare ``query: str``), so the server holds nothing for them:
a task planned on a record that exists, whose own search found nothing with the person's
words, is unjudged (``judge_meta.plan_not_served``), not failed for a reply that "does not
confirm the result", and the summary counts those rows and names the fix. A search on words
the agent mistyped stays the agent's failure, and the write task is graded as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from wai_exp.domain.plurals import counted
from wai_exp.rows.jsonl import read_rows

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
REPO = Path(__file__).resolve().parents[2]


def _persons_words(row: dict) -> str:
    said = [row["prompt"], *(s.get("content") or "" for s in row["steps"] if s["kind"] == "user")]
    return " ".join(said).lower()


def _server_searches(row: dict) -> list[dict]:
    return [
        s for s in row["steps"] if s.get("name") == "search_books" and s.get("source") == "server"
    ]


def test_a_search_the_server_answers_with_nothing_leaves_the_row_unjudged(tmp_path: Path) -> None:
    res = subprocess.run(
        [WAI_EXP, "+experiment=eval", "world=mcp",
         "world.command=python -m tests.support.mcp_catalogue_server", f"world.cwd={REPO}",
         "world.reset_tool=reset_catalogue", "simulate.budget=40", "tracking=none",
         "hydra.run.dir=run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    rows = read_rows(tmp_path / "run" / "evaluate" / "rows.jsonl")
    unserved = [r for r in rows if (r.get("judge_meta") or {}).get("plan_not_served")]
    assert unserved, [r["reason"] for r in rows]
    for r in unserved:
        assert r["judge_meta"]["plan_not_served"] == "search_books", r["reason"]
        assert r["reward"] is None and r["judge_status"] == "abstain"
        assert r["scenario_dimensions"]["world_state"] == "exists"
        assert {str(s["result"]) for s in _server_searches(r)} == {"{'books': []}"}
        assert "world answered search_books(query=" in r["reason"]
    # Every search the server answered with nothing, on the person's own words, is one of
    # them; the rest of the empty answers are to words the agent got wrong ("launch prepx").
    empty = [
        r for r in rows
        if r["scenario_dimensions"]["tool"] == "search_books"
        and any(s["result"] == {"books": []} for s in _server_searches(r))
    ]  # fmt: skip
    mistyped = [r for r in empty if r not in unserved]
    assert mistyped, "seed 0's scripted agent mistypes some searches"
    for r in mistyped:
        query = _server_searches(r)[-1]["arguments"]["query"]
        assert query not in _persons_words(r), (query, _persons_words(r))
        assert r["reward"] == 0.0, r["reason"]
    # The write task is graded as before: the server holds every id its enum names.
    reserved = [r for r in rows if any(s.get("source") == "server" for s in r["steps"])
                and r["scenario_dimensions"]["tool"] == "reserve_book"]  # fmt: skip
    assert reserved and all(r["reward"] is not None for r in reserved)
    summary = res.stdout[res.stdout.index("wai-exp: done") :]
    tasks = {r["scenario_id"] for r in unserved}
    assert (
        f"warning (evaluate): {counted(len(unserved), 'row')} on {counted(len(tasks), 'task')} "
        "unjudged because the "
        "world answered not found (or nothing, to the task's own search or list)" in summary
    ), summary
    assert f"(search_books on {len(unserved)})" in summary
    assert "a search's query: examples of what it holds" in summary
