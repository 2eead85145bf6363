"""A sweep over a key other than seed gives every value the same tasks (issue 23 §5):
``pin_tasks`` adds ``knobs.writer_context_parents=0`` to the overrides the basic sweeper
expands into every job, and leaves every other sweep alone. The end-to-end measurement
(every value on the same tasks, paired deltas over them) is tests/e2e/test_run_answers.py."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import OmegaConf

from wai_exp.commands.sweep_check import pin_tasks, sweep_jobs

BASIC = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def _multirun(*task: str, **top: Any) -> Any:
    """A multirun config as Hydra hands it to ``on_multirun_start`` (read-only hydra node)."""
    cfg = OmegaConf.create(
        {
            "sweep": {"tasks": top.pop("sweep_tasks", "same")},
            "knobs": {"writer_context_parents": top.pop("parents", 10)},
            "simulate": {"tasks": None, "rows": None, "simulator": False, **top},
            "hydra": {
                "sweeper": {"_target_": BASIC, "params": {}},
                "overrides": {"task": list(task)},
            },
        }
    )
    OmegaConf.set_readonly(cfg.hydra, True)
    return cfg


def test_a_skill_sweep_runs_every_job_with_unsteered_asks() -> None:
    cfg = _multirun("+experiment=eval", "agent.skill=0.6,0.9", "seed=0,1")
    line = pin_tasks(cfg)
    assert line is not None and "knobs.writer_context_parents=0" in line
    assert "sweep.tasks=own" in line  # how to keep the steering
    jobs = sweep_jobs(cfg)
    assert jobs is not None and len(jobs) == 4
    assert all("knobs.writer_context_parents=0" in job for job in jobs)


@pytest.mark.parametrize(
    ("task", "top"),
    [
        (("seed=0,1,2",), {}),  # replicates only: nothing to compare across values
        (("agent.skill=0.6,0.9",), {"sweep_tasks": "own"}),  # the user asked for each job's own
        (("agent.skill=0.6,0.9", "knobs.writer_context_parents=4"), {}),  # the user chose
        (("agent.skill=0.6,0.9",), {"parents": 0}),  # nothing steers the asks already
        (("agent.skill=0.6,0.9",), {"tasks": "a/simulate/rows.jsonl"}),  # pinned already
        (("agent.skill=0.6,0.9",), {"rows": "r.jsonl"}),  # rows read in: no simulation
    ],
    ids=["seed-only", "own", "explicit-knob", "knob-0", "tasks-in", "rows-in"],
)
def test_other_sweeps_are_left_alone(task: tuple[str, ...], top: dict[str, Any]) -> None:
    cfg = _multirun("+experiment=eval", *task, **top)
    before = list(cfg.hydra.overrides.task)
    assert pin_tasks(cfg) is None
    assert list(cfg.hydra.overrides.task) == before


def test_a_model_writer_is_not_pinned_and_the_line_says_how() -> None:
    cfg = _multirun("agent.skill=0.6,0.9", simulator="openai:gpt-4.1-mini")
    line = pin_tasks(cfg)
    assert line is not None and line.startswith("tasks not pinned")
    assert "simulate.tasks=" in line
    assert "knobs.writer_context_parents=0" not in list(cfg.hydra.overrides.task)


def test_another_sweeper_is_left_alone() -> None:
    cfg = _multirun("agent.skill=0.6,0.9")
    OmegaConf.set_readonly(cfg.hydra, False)
    cfg.hydra.sweeper._target_ = "hydra_plugins.hydra_optuna_sweeper.OptunaSweeper"
    assert pin_tasks(cfg) is None


def test_run_names_leave_the_pin_out() -> None:
    """Every job carries the pin, so it tells no two runs apart: names stay as typed."""
    from wai_exp.tracking.summary import run_name
    from wai_exp.tracking.sweep import unpinned

    cfg = _multirun("+experiment=eval", "agent.skill=0.6,0.9")
    pin_tasks(cfg)
    task = [str(o) for o in cfg.hydra.overrides.task]
    assert run_name("eval", unpinned(task), prefix="sweep") == "sweep eval agent.skill=0.6,0.9"


@pytest.mark.parametrize(
    "swept",
    ["world.exists_share=0.5,1.0", "simulate.spec=a.json,b.json", "simulate.hard_share=0.2,0.8"],
)
def test_a_key_that_changes_the_draws_is_not_promised_the_same_tasks(swept: str) -> None:
    """A sweep over world.exists_share ran 48 shared of 200 tasks per value, after the line
    had said "every value runs the same tasks per seed": the pin stops failing rows from
    steering, but a key the writer reads still changes the draws. The line names the key
    and where to read the overlap, and how to pin the tasks."""
    line = pin_tasks(_multirun("+experiment=eval", swept, "seed=0,1"))
    assert line is not None and "knobs.writer_context_parents=0" in line
    assert "every value runs the same tasks" not in line
    assert f"{swept.split('=')[0]} can change what the writer draws" in line
    assert "simulate.tasks=" in line
    judged = pin_tasks(
        _multirun("+experiment=eval", "judge=checklist,conduct", "agent.skill=0.6,0.9")
    )
    assert judged is not None and judged.startswith("every value runs the same tasks per seed")
