"""Run names and descriptions: a run reads as what the user changed and what came out."""

from __future__ import annotations

from wai_exp.tracking.summary import StageNote, describe_run, run_name, split_knobs


def test_run_name_is_the_preset_then_the_overrides():
    assert run_name("eval", ["+experiment=eval", "agent.skill=0.6", "seed=1"]) == (
        "eval agent.skill=0.6 seed=1"
    )
    # bookkeeping overrides say where the run is recorded, not what it computes
    assert run_name("eval", ["tracking=none", "hydra/launcher=joblib", "cache.enabled=false"]) == (
        "eval"
    )
    assert run_name(None, ["+simulate.tasks=/data/runs/2026/rows.jsonl"]) == (
        "run simulate.tasks=rows.jsonl"
    )
    long = run_name("eval", ["agent.system_prompt=" + "x" * 100])
    assert long == "eval agent.system_prompt=" + "x" * 23 + "…"
    many = run_name("eval", [f"world.k{i}=1234567890" for i in range(30)])
    assert len(many) <= 120 and many.endswith("more")
    assert run_name("eval", ["seed=0,1"], prefix="sweep") == "sweep eval seed=0,1"


def test_run_names_keep_the_model_and_host_of_a_server():
    """'…/v1' shortened to 'v1': two runs against two models had the same name."""
    a = run_name("rl_round", ["simulate.simulator=vllm:smollm2@http://127.0.0.1:8000/v1"])
    b = run_name("rl_round", ["simulate.simulator=vllm:qwen3-8b@http://10.0.0.7:8000/v1"])
    assert a == "rl_round simulate.simulator=vllm:smollm2@127.0.0.1:8000"
    assert b == "rl_round simulate.simulator=vllm:qwen3-8b@10.0.0.7:8000"
    assert run_name("eval", ["agent.base_url=https://api.example.com/v1"]) == (
        "eval agent.base_url=api.example.com"
    )
    # a user:password in a URL never reaches the name
    named = run_name("eval", ["agent.base_url=https://me:s3cret@proxy.example.com:8443/v1"])
    assert named == "eval agent.base_url=proxy.example.com:8443" and "s3cret" not in named


def _stages(gate_checks=None, verdict="passed", warnings=()):
    return [
        StageNote("simulate", "simulate", {"rows_out": 1000}, {}),
        StageNote(
            "grade",
            "grade",
            {
                "pass_at_1": 0.707,
                "pass_at_1_ci_lo": 0.658,
                "pass_at_1_ci_hi": 0.753,
                "pass_pow_k": 0.424,
                "pass_at_k": 0.938,
            },
            {"n_groups": 147, "k": 4},
        ),  # fmt: skip
        StageNote("optimize", "optimize", {"rows_kept": 359, "rows_in": 1000}, {}),
        StageNote(
            "publish_gate",
            "publish_gate",
            {},
            {
                "verdict": verdict,
                "checks": gate_checks or {"graded": True},
                "warnings": list(warnings),
            },
        ),
    ]


def test_description_states_the_answer():
    note = describe_run(
        _stages(), preset="rl_round", overrides=["seed=1"], config_hash="abcdef1234567890",
        gate_verdict="passed",
    )  # fmt: skip
    assert "### pass@1 0.707 (95% CI 0.658–0.753) over 147 tasks" in note
    assert "pass^4 0.424 (interval not measured) · pass@4 0.938" in note
    assert "**Publish gate: PASSED**" in note
    assert "**Rows kept:** 359 of 1000 made (optimize)" in note
    assert "**Warnings:** none" in note
    assert "overrides: seed=1" in note and "config abcdef123456" in note


def test_description_names_failed_and_not_run_checks_and_warnings():
    note = describe_run(
        _stages({"graded": True, "mixed_group": False, "hack_free": None}, "refused",
                ["band too narrow"]),
        preset="rl_round", overrides=[], config_hash="h", gate_verdict="refused",
        gate_reason="no mixed group",
    )  # fmt: skip
    assert "**Publish gate: REFUSED** — no mixed group" in note
    assert "failed checks: mixed_group" in note and "checks not run: hack_free" in note
    assert "- publish_gate: band too narrow" in note


def test_description_says_unmeasured_instead_of_zero():
    note = describe_run(
        [StageNote("simulate", "simulate", {"rows_out": 5}, {})],
        preset=None, overrides=[], config_hash="h", status="FAILED", error="boom",
    )  # fmt: skip
    assert note.startswith("**Run FAILED**: boom")
    assert "pass@1 not measured" in note and "0.000" not in note
    assert "**Publish gate:** not run" in note
    assert "rows kept: not measured" in note


def test_only_changed_knobs_become_params():
    knobs = {"concurrency": 8, "k": 4, "seed": 3, "world": {}, "mystery": 1, "band": [0.2, 0.8]}
    defaults = {"concurrency": 16, "k": 4, "seed": 0, "world": {}, "band": (0.2, 0.8)}
    assert split_knobs(knobs, defaults, skip=("seed", "world")) == {"concurrency": 8, "mystery": 1}


def test_an_adaptive_runs_pass_at_1_says_it_reads_the_first_batch():
    stages = _stages()
    stages[1].report["pass_at_1_basis"] = "first_batch"
    note = describe_run(stages, preset="rl_round", overrides=[], config_hash="a" * 16)
    assert "over 147 tasks, from the fixed first batch of every task" in note


def test_the_description_says_which_tasks_the_headline_left_out_under_it():
    stages = _stages()
    line = "left out: 2 of 149 tasks are not in pass@1, pass^k or pass@k (over 147 tasks): ..."
    stages[1].report["ungraded_tasks_line"] = line
    note = describe_run(stages, preset="eval", overrides=[], config_hash="a" * 16)
    head = next(i for i, text in enumerate(note.splitlines()) if text.startswith("### pass@1"))
    assert note.splitlines()[head + 1] == line


def test_a_sweep_child_is_named_by_its_swept_values_first():
    """Issue 23 §6: MLflow's runs table shows about 20 characters of a nested run's name, and
    every child of `-m agent.skill=0.6,0.9` read "eval agent.skill=…"."""
    name = run_name("eval", ["+experiment=eval", "simulate.budget=40", "agent.skill=0.6", "seed=1"],
                    swept=["agent.skill", "seed"])  # fmt: skip
    assert name == "skill=0.6 seed=1 · eval simulate.budget=40"
    # two swept keys that end alike keep their whole key
    assert run_name("eval", ["agent.skill=0.6", "judge.skill=2"],
                    swept=["agent.skill", "judge.skill"]) == "agent.skill=0.6 judge.skill=2 · eval"  # fmt: skip


def test_what_was_not_measured_says_whether_the_pipeline_has_it_or_the_run_ended_first():
    """A failed rl_round said 'no simulate or selection stage' and 'not run in this
    pipeline' for a pipeline that has both and a gate (issue 24 §5)."""
    rl_round = ["simulate", "grade", "optimize", "publish_gate", "publish"]
    failed_sim = [StageNote("simulate", "simulate", {"rows_out": 0.0, "rollouts_lost": 8.0}, {})]

    def note(stages, planned):
        return describe_run(stages, preset="rl_round", overrides=[], config_hash="a" * 16,
                            status="FAILED", error="stage 'simulate' failed", planned=planned)  # fmt: skip

    ended = note(failed_sim, rl_round)
    assert "**Rows made:** 0; rows kept: not measured (the selection stage did not finish)" in ended
    assert "**Publish gate:** not run (the run ended before it)" in ended
    nothing = note([], rl_round)
    assert "**Rows kept:** not measured (the run ended before simulate or selection finished)" in (
        nothing
    )
    # a pipeline without those stages still says so
    report_only = note([], ["report"])
    assert "**Rows kept:** not measured (no simulate or selection stage)" in report_only
    assert "**Publish gate:** not run in this pipeline" in report_only


def test_the_description_says_why_one_task_has_no_interval_and_what_k_is_under_runs():
    """The MLflow description read 'pass@1 1.000 (interval not measured) over 1 tasks' with
    no reason, and pass^12 for 4 repeats x 3 runs without saying the runs were pooled."""
    one = StageNote("evaluate", "evaluate", {"pass_at_1": 1.0}, {"n_groups": 1, "k": 4})
    note = describe_run([one], preset="eval", overrides=[], config_hash="0" * 16)
    assert "### pass@1 1.000 (interval not measured: 1 task; an interval is over tasks" in note
    assert "run more tasks: a larger simulate.budget" in note and "over 1 tasks" not in note
    basis = "k=4, one run's repeats; each task's rows from the 3 runs are pooled"
    pooled = StageNote(
        "grade", "grade", {"pass_at_1": 0.7, "pass_pow_k": 0.42, "pass_at_k": 0.94},
        {"n_groups": 50, "k": 4, "k_basis": basis},
    )  # fmt: skip
    note = describe_run([pooled], preset="eval_variance", overrides=[], config_hash="0" * 16)
    assert f"· pass@4 0.940 (interval not measured) ({basis})" in note


def test_the_description_gives_the_plan_not_served_fix_once():
    """A world=mcp eval's description gave the same fix in the left-out line, the pass^k
    note and the grade warning; it also said the adaptive basis's left-out task twice."""
    from wai_exp.score.stats.passat import PLAN_NOT_SERVED_FIX as FIX

    stages = _stages()
    grade = stages[1]
    del grade.metrics["pass_pow_k"], grade.metrics["pass_at_k"]
    grade.report.update(
        ungraded_tasks_line=f"left out: 3 of 147 tasks ...: {FIX}",
        note="pass@1 reads the first batch of each task; 1 task has no graded first-batch row "
        "and is left out of it; "
        f"k=2 is below min_k=4 ...: 40 are unjudged ... does not change: {FIX}; or pass k=4",
        warnings=[f"103 rows on 26 tasks unjudged ... fail there. {FIX[0].upper()}{FIX[1:]}"],
    )
    note = describe_run(stages, preset="rl_round", overrides=[], config_hash="a" * 16)
    assert note.lower().count(FIX) == 1, note
    lines = note.splitlines()
    head = next(i for i, text in enumerate(lines) if text.startswith("### pass@1"))
    assert lines[head + 1] == f"left out: 3 of 147 tasks ...: {FIX}"
    k_way = next(text for text in lines if text.startswith("pass^k and pass@k: not measured"))
    assert k_way == (
        "pass^k and pass@k: not measured (k=2 is below min_k=4 ...: 40 are unjudged ... does "
        "not change: see the fix above; or pass k=4)"
    )
    assert "fail there. See the fix above" in note


def test_the_description_gives_the_published_record_count_or_says_it_is_not_recorded():
    """The terminal said ``publish: 47 preference records`` and the description only
    ``Rows kept``; a publish with no count, or a skipped one, says so, never a number."""

    def note(report):
        stages = [*_stages(), StageNote("publish", "publish", {"records": 18.0}, report)]
        return describe_run(stages, preset="rl_round", overrides=[], config_hash="h")

    assert "**Records published:** 18 rl records (publish)" in note({"records": 18, "shape": "rl"})
    assert "**Records published:** 1 record (publish)" in note({"records": 1})
    assert "**Records published:** not recorded (publish's report holds no count)" in note({})
    skipped = note({"skipped": "publish_gate refused"})
    assert "**Records published:** none (publish skipped: publish_gate refused)" in skipped
    assert "**Records published:**" not in describe_run(
        _stages(), preset="eval", overrides=[], config_hash="h"
    )


def test_the_description_names_a_users_own_gate_and_next_rounds_unit():
    """A ``_target_`` gate that passed read ``Publish gate: not run in this pipeline``; a
    next_round run read ``rows kept: not measured`` beside its kept tasks."""
    stages = [
        StageNote("simulate", "simulate", {"rows_out": 600}, {}),
        StageNote("gate", "my_gate:run", {}, {"verdict": "passed"}),
        StageNote(
            "publish",
            "publish",
            {},
            {"records": 3, "gate": {"verdict": "passed", "by": "gate (x)"}},
        ),
    ]
    note = describe_run(stages, preset="r", overrides=[], config_hash="h", gate_verdict="passed")
    assert "**Publish gate: PASSED**\n- given by stage gate (x); its checks: not recorded" in note
    kept = StageNote(
        "next_round", "next_round", {"rows_kept": 49.0, "rows_in": 600.0},
        {"rows_kept_are": "one row per task it keeps"},
    )  # fmt: skip
    note = describe_run([stages[0], kept], preset="next_round", overrides=[], config_hash="h")
    assert "**Rows kept:** 49 of 600 made (next_round: one row per task it keeps)" in note
    assert "not measured" not in note.split("**Rows kept:**", 1)[1].splitlines()[0]
