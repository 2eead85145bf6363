"""What the runner asks of a stage kind it asks through the kind's registration
(``register(key_sections=, key_params=, key_deps=, headline=)``), never by its name: a kind of your own
gets what ``simulate`` gets (a key narrowed to what it reads, a key that follows a value no
section holds) and what ``grade`` gets (its numbers in the summary's own line)."""

from __future__ import annotations

import io

from wai_exp.pipeline.registry import BUILTIN, StageResult, register, resolve
from wai_exp.pipeline.runner import run_pipeline, summarize

RUNS: list[str] = []


def _model_from_env(config, params):
    import os

    return {"model": os.environ.get("T_HOOK_MODEL", "")}


def _only_rows_file(sections, params):
    return {"t_hook": {"rows": (sections.get("t_hook") or {}).get("rows")}}


@register(
    "t_hooked",
    reads=("t_hook",),
    key_sections=_only_rows_file,
    key_deps=_model_from_env,
    headline="grading",
)
def _hooked(ctx, params, inputs):
    RUNS.append(ctx.key)
    return StageResult(rows=[{"rollout_id": "r0"}], text="t_hooked: my own headline")


def config(**section):
    return {
        "seed": 0,
        "name": "t",
        "tracking": {"kind": "none"},
        "t_hook": {"rows": "a.jsonl", **section},
        "pipeline": {"stages": {"mine": {"kind": "t_hooked"}}, "refusal_exit_code": 3},
    }


def run(cfg, tmp_path, name):
    return run_pipeline(cfg, run_dir=tmp_path / name, start_dir=tmp_path, stream=io.StringIO())


def test_key_deps_reruns_a_stage_when_the_value_it_adds_changes(tmp_path, monkeypatch):
    RUNS.clear()
    monkeypatch.setenv("T_HOOK_MODEL", "judge-a")
    assert run(config(), tmp_path, "r1").stage("mine").status == "ran"
    assert run(config(), tmp_path, "r2").stage("mine").status == "cached"
    monkeypatch.setenv("T_HOOK_MODEL", "judge-b")  # no config section holds it
    assert run(config(), tmp_path, "r3").stage("mine").status == "ran"
    assert len(set(RUNS)) == 2


def test_key_sections_keeps_what_the_kind_does_not_read_out_of_its_key(tmp_path, monkeypatch):
    RUNS.clear()
    monkeypatch.setenv("T_HOOK_MODEL", "judge-a")
    assert run(config(budget=1), tmp_path, "r1").stage("mine").status == "ran"
    # a key its key_sections leaves out: the stage is reused
    assert run(config(budget=2), tmp_path, "r2").stage("mine").status == "cached"
    assert run(config(rows="b.jsonl"), tmp_path, "r3").stage("mine").status == "ran"


def test_headline_puts_a_kind_in_the_summary_line_it_names(tmp_path, monkeypatch):
    monkeypatch.setenv("T_HOOK_MODEL", "judge-a")
    text = summarize(run(config(), tmp_path, "r1"))
    # a grading kind: not echoed as a report-like stage, and named where pass@1 is missing
    assert "my own headline" not in text
    assert "pass@1: not measured (" in text and "no grading stage" not in text


def test_the_builtin_kinds_declare_what_the_runner_used_to_know_by_name():
    headlines = {kind: resolve(kind).headline for kind in BUILTIN}
    assert headlines == {
        "simulate": "rollouts",
        "grade": "grading",
        "evaluate": "grading",
        "optimize": "selection",
        "publish_gate": "gate",
        "report": None,
        "next_round": None,
        "compare": None,
        "eval_variance": None,
        "publish": None,
    }
    simulate = resolve("simulate")
    assert simulate.key_sections is not None and simulate.key_deps is not None
    assert simulate.key_params is not None


def _without_note(params):
    return {k: v for k, v in params.items() if k != "note"}


@register("t_param_hooked", reads=("t_hook",), key_params=_without_note)
def _param_hooked(ctx, params, inputs):
    RUNS.append(ctx.key)
    return StageResult(rows=[{"rollout_id": "r0"}], text="t_param_hooked")


def test_key_params_keeps_a_param_the_kind_does_not_read_out_of_its_key(tmp_path):
    def params(**p):
        cfg = config()
        cfg["pipeline"]["stages"] = {"mine": {"kind": "t_param_hooked", "params": p}}
        return cfg

    assert run(params(note="a", n=1), tmp_path, "r1").stage("mine").status == "ran"
    assert run(params(note="b", n=1), tmp_path, "r2").stage("mine").status == "cached"
    assert run(params(note="b", n=2), tmp_path, "r3").stage("mine").status == "ran"


EVENTS: list[tuple] = []


def _note_prepare(config, params):
    EVENTS.append(("prepare", config["t_hook"]["rows"], dict(params)))


@register("t_prepared", reads=("t_hook",), prepare=_note_prepare)
def _prepared(ctx, params, inputs):
    EVENTS.append(("run", ctx.name))
    return StageResult(rows=[{"rollout_id": "r0"}], text="t_prepared")


class _Tracker:
    """A tracker that notes when the run's tracking starts (MLflow's run start is slow:
    what a stage prepares overlaps it)."""

    def start(self, **kwargs):
        EVENTS.append(("tracking starts",))

    def __getattr__(self, name):
        return lambda *a, **k: None


def test_a_kinds_prepare_hook_runs_with_its_params_before_tracking_starts(tmp_path):
    EVENTS.clear()
    cfg = config()
    cfg["pipeline"]["stages"] = {"mine": {"kind": "t_prepared", "params": {"workers": 2}}}
    out = run_pipeline(
        cfg, run_dir=tmp_path / "r", start_dir=tmp_path, stream=io.StringIO(), tracker=_Tracker()
    )
    assert out.stage("mine").status == "ran"
    assert EVENTS == [
        ("prepare", "a.jsonl", {"workers": 2}),
        ("tracking starts",),
        ("run", "mine"),
    ]
