"""Your own judge from the console script: one module that registers it, found through its
package's ``wai_exp.judges`` entry point; ``wai-exp judge=<name>`` then grades with it, and
a misspelt name is refused before work naming it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_cli import run_dirs, wai

JUDGE_MODULE = """
from wai_exp.domain.judges import register_judge


def called_a_tool(row, **_):
    return 1.0 if any(m.get("tool_calls") for m in row.get("messages") or ()) else 0.0


@register_judge("called_a_tool")
def build(section, tools, policy):
    return called_a_tool
"""


def installed_plugin(root: Path) -> dict[str, str]:
    """The module and the entry point an installed package would have (``pip install`` of a
    project declaring ``[project.entry-points."wai_exp.judges"]``); the env to find them."""
    site = root / "site"
    (site / "my_judges.py").parent.mkdir(parents=True)
    (site / "my_judges.py").write_text(JUDGE_MODULE)
    info = site / "my_judges-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-judges\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[wai_exp.judges]\ncalled_a_tool = my_judges\n")
    return {"PYTHONPATH": str(site)}


def test_judge_equals_a_registered_judge_grades_the_run(tmp_path):
    env = installed_plugin(tmp_path)
    args = ("+experiment=eval", "simulate.budget=32", "tracking=none", "judge=called_a_tool")
    done = wai(tmp_path, *args, env=env)
    assert done.returncode == 0, done.stderr
    [run] = run_dirs(tmp_path)
    report = json.loads((run / "evaluate" / "report.json").read_text())
    assert report["judge"]["kind"] == "called_a_tool" and report["judge"]["name"] == "called_a_tool"
    rows = [json.loads(line) for line in (run / "evaluate" / "rows.jsonl").read_text().splitlines()]
    called = [any(m.get("tool_calls") for m in r["messages"]) for r in rows]
    assert len(rows) == 32 and [r["reward"] for r in rows] == [float(c) for c in called]


def test_a_misspelt_judge_is_refused_before_work_naming_the_registered_one(tmp_path):
    env = installed_plugin(tmp_path)
    done = wai(tmp_path, "+experiment=eval", "tracking=none", "judge=called_a_tol", env=env)
    assert done.returncode == 2
    assert "Did you mean judge=called_a_tool?" in done.stderr
    assert not run_dirs(tmp_path)
