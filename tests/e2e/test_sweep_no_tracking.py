"""A sweep with ``tracking=none`` still ends with its comparison: the per-value table, the
paired delta and ``sweep/per_value.csv``, built from the jobs' run folders by the code that
builds them from MLflow child runs. Each pass metric in it carries its interval."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
SWEEP = ["-m", "+experiment=eval", "tracking=none", "agent.skill=0.6,0.9",
         "simulate.budget=80", "seed=0,1"]  # fmt: skip


def wai(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [WAI_EXP, *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=os.environ
    )


def test_a_sweep_without_tracking_prints_its_table_and_writes_it(tmp_path: Path) -> None:
    res = wai(tmp_path, *SWEEP)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-2000:]
    out = res.stdout
    assert "wai-exp sweep: 4 of 4 jobs finished; swept: agent.skill, seed" in out, out[-3000:]
    head = next(line for line in out.splitlines() if line.startswith("agent.skill  runs"))
    # every pass metric beside its interval, pass^k named by its k
    assert head.split() == ["agent.skill", "runs", "pass@1", "95%", "CI", "tasks", "(shared)",
                            "pass^4", "95%", "CI", "pass@4", "95%", "CI", "rows", "kept"]  # fmt: skip
    rows = {
        line.split()[0]: line.split() for line in out.splitlines() if line[:3] in ("0.6", "0.9")
    }
    assert set(rows) == {"0.6", "0.9"} and all("not" not in r for r in rows.values()), rows
    assert "paired delta agent.skill:0.9 vs 0.6:" in out and "MLflow" in out.splitlines()[-1]
    [sweep_dir] = (tmp_path / "multirun").glob("*/*")
    with (sweep_dir / "sweep" / "per_value.csv").open(newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [r["agent.skill"] for r in table] == ["0.6", "0.9"]
    for r in table:
        assert (
            float(r["pass_pow_k_ci_lo"]) <= float(r["pass_pow_k"]) <= float(r["pass_pow_k_ci_hi"])
        )
        assert float(r["pass_at_k_ci_lo"]) <= float(r["pass_at_k"]) <= float(r["pass_at_k_ci_hi"])
        assert r["k"] == "4" and r["n_runs"] == "2"
    # the printed pass@1 is the mean over the value's tasks of the jobs' own rows
    low = [json.loads((d / "run.json").read_text()) for d in sorted(sweep_dir.glob("[01]"))]
    assert all(j["overrides"][2] == "agent.skill=0.6" for j in low)
    assert float(rows["0.6"][2]) == round(sum(j["headline"]["pass_at_1"] for j in low) / 2, 3)
