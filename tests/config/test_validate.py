"""Validation errors name what was wrong and what is accepted."""

from __future__ import annotations

import copy

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from wai_exp.commands.validate import ConfigError, check_override_keys, validate_config
from wai_exp.config.validate import override_keys


@pytest.fixture(scope="module")
def base() -> dict:
    with initialize_config_module(version_base="1.3", config_module="wai_exp.conf"):
        cfg = compose(config_name="config", overrides=["+experiment=rl_round"])
    return OmegaConf.to_container(cfg, resolve=True)


def problems(cfg) -> list[str]:
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    return err.value.problems


def test_valid_config_passes(base):
    assert validate_config(base).simulate.mode == "rl"


def test_unknown_knob_names_the_closest_and_the_valid_keys(base):
    cfg = copy.deepcopy(base)
    cfg["knobs"]["concurency"] = 4
    [p] = problems(cfg)
    assert p.startswith("knobs.concurency: unknown key 'concurency'. Did you mean 'concurrency'?")
    assert "Valid keys: " in p and "avg_turns" in p and "stop_grace" in p


def test_unknown_nested_key_names_the_closest(base):
    cfg = copy.deepcopy(base)
    cfg["simulate"]["bugdet"] = 10
    cfg["agent"]["skil"] = 0.5
    cfg["pipeline"]["stages"]["grade"]["nedes"] = ["simulate"]
    ps = problems(cfg)
    assert any(
        p.startswith("simulate.bugdet: unknown key 'bugdet'. Did you mean 'budget'?") for p in ps
    )
    # the agent's keys are the scripted agent's, not every agent kind's
    agent = next(p for p in ps if p.startswith("agent.skil"))
    assert (
        "Did you mean 'skill'?" in agent
        and "Valid keys: kind, model_version, skill, skills, spread" in agent
    )
    assert any("pipeline.stages.grade.nedes" in p and "'needs'" in p for p in ps)


def test_unknown_top_level_key(base):
    cfg = copy.deepcopy(base)
    cfg["sede"] = 1
    [p] = problems(cfg)
    assert "unknown key 'sede'" in p and "Did you mean 'seed'?" in p


def test_knob_out_of_bounds_names_floor_ceiling_and_default(base):
    from wai_exp.config.knobs import knob

    k = knob("concurrency")
    cfg = copy.deepcopy(base)
    cfg["knobs"]["concurrency"] = 0
    [p] = problems(cfg)
    assert p.startswith("knobs.concurrency=0 is below the floor")
    assert f"floor {k.lo!r}" in p and f"ceiling {k.hi!r}" in p and f"default {k.default!r}" in p


def test_wrong_type_names_the_expected_type(base):
    cfg = copy.deepcopy(base)
    cfg["simulate"]["budget"] = "lots"
    cfg["simulate"]["reproducible"] = "sometimes"
    cfg["knobs"]["avg_turns"] = "many"
    ps = problems(cfg)
    assert "simulate.budget = 'lots': expected an integer" in ps
    assert "simulate.reproducible = 'sometimes': expected true or false" in ps
    assert any(p.startswith("knobs.avg_turns must be an int") for p in ps)


def test_bounds_on_config_values(base):
    cfg = copy.deepcopy(base)
    cfg["simulate"]["fault_rate"] = 1.5
    cfg["selection"]["band"] = [0.8, 0.2]
    cfg["simulate"]["mode"] = "rll"
    ps = problems(cfg)
    assert "simulate.fault_rate = 1.5: must be <= 1.0" in ps
    assert any(p.startswith("selection.band") and "above its high end" in p for p in ps)
    assert any(
        p.startswith("simulate.mode = 'rll': expected one of 'explore', 'sft', 'rl' or 'adaptive'")
        for p in ps
    )


def test_world_typo_names_world_options_fields(base):
    cfg = copy.deepcopy(base)
    cfg["world"]["serch_hits"] = 3
    ps = problems(cfg)
    assert any(
        p.startswith("world.serch_hits: unknown key") and "Did you mean 'search_hits'?" in p
        for p in ps
    )


def test_a_refused_url_or_world_is_quoted_without_its_query_or_flag_values(base):
    import secrets

    t1, t2 = "Z" + secrets.token_hex(10), "Z" + secrets.token_hex(10)
    cfg = copy.deepcopy(base)
    cfg["agent"] = {"kind": "vllm", "model": "m", "base_url": f"ftp://gpu-box/v1?access={t1}"}
    cfg["world"] = {**cfg["world"], "kind": "mcp", "command": f"python srv.py --access {t2}",
                    "url": "http://127.0.0.1:9/mcp"}  # fmt: skip
    cfg["knobs"]["world"] = cfg["world"]
    ps = problems(cfg)
    assert not any(t1 in p or t2 in p or t2[:6] in p for p in ps), ps
    assert "agent.base_url = 'ftp://gpu-box/v1?access=***redacted***'" in " ".join(ps)
    assert any(p.startswith("world = {") and "exactly one of" in p for p in ps), ps
    cfg["agent"]["base_url"] = f"gpu-box/v1?access={t1}"  # the guess quotes the URL back
    assert "did you mean agent.base_url=http://gpu-box/v1?access=***redacted***" in " ".join(
        problems(cfg)
    )


def test_a_command_starting_with_an_environment_assignment_is_refused_without_its_value(base):
    """The line runs without a shell: ``TOKEN=x python srv.py`` would start a program named
    ``TOKEN=x``, and the failure quoted the whole line."""
    import secrets

    token = "Z" + secrets.token_hex(10)
    cfg = copy.deepcopy(base)
    cfg["world"] = {**cfg["world"], "kind": "mcp", "command": f"MY_TOKEN={token} python srv.py"}
    cfg["knobs"]["world"] = cfg["world"]
    [problem] = problems(cfg)
    assert token not in problem
    assert problem.startswith("world.command = 'MY_TOKEN=***redacted*** python srv.py'")
    assert "+world.env.MY_TOKEN=${oc.env:MY_TOKEN}" in problem


def test_knobs_seed_must_follow_seed(base):
    cfg = copy.deepcopy(base)
    cfg["knobs"]["seed"] = 5
    [p] = problems(cfg)
    assert "top-level `seed=5`" in p


def test_tracking_typo(base):
    cfg = copy.deepcopy(base)
    cfg["tracking"]["urii"] = "x"
    [p] = problems(cfg)
    assert p.startswith("tracking.urii: unknown key") and "Did you mean 'uri'?" in p


def test_every_problem_is_reported_at_once(base):
    cfg = copy.deepcopy(base)
    cfg["knobs"]["concurency"] = 4
    cfg["simulate"]["budget"] = 0
    err = pytest.raises(ConfigError, validate_config, cfg).value
    text = str(err)
    assert text.startswith("invalid config (2 problems):")
    assert "simulate.budget = 0: must be >= 1" in text


def test_callable_judge_needs_a_target(base):
    cfg = copy.deepcopy(base)
    cfg["judge"]["kind"] = "callable"
    ps = problems(cfg)
    assert any("judge.target" in p for p in ps)


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("http://gpu-box:8000/v1", True),
        ("https://user:pw@host/v1", True),
        ("not a url", False),
        ("127.0.0.1:8000/v1", False),  # no scheme: read as part of the model's name before
        ("http://", False),
        ("ftp://host/v1", False),
        (" http://host/v1", False),  # used as typed: the space hid the URL from the spec
        ("http://host:99999/v1", False),
    ],
)
def test_a_model_agents_base_url_must_be_an_http_url_with_a_host(base, url, ok):
    cfg = copy.deepcopy(base)
    cfg["agent"] = {"kind": "vllm", "model": "m", "base_url": url}
    if ok:
        assert validate_config(cfg).agent.base_url == url
        return
    [problem] = problems(cfg)
    assert problem.startswith("agent.base_url = ")
    assert "not an http(s) URL with a host" in problem
    assert "agent.base_url=http://127.0.0.1:8000/v1" in problem


# ---- the command-line pre-check (runs before Hydra) ----------------------------------


def test_override_keys_skips_options_appends_and_group_packages():
    argv = [
        "-m",
        "--cfg",
        "job",
        "--config-dir",
        "/x",
        "+experiment=rl_round",
        "seed=1",
        "knobs.concurrency=4",
        "~simulate.spec",
        "++extra=1",
        "agent@foo=scripted",
        "-cn=config",
    ]
    assert override_keys(argv) == ["seed", "knobs.concurrency"]


def test_precheck_names_the_closest_key():
    [p] = check_override_keys(["+experiment=rl_round", "knobs.concurency=4"])
    assert "knobs.concurency" in p and "Did you mean 'concurrency'?" in p


def test_precheck_accepts_valid_keys_group_choices_and_free_maps():
    argv = [
        "seed=3",
        "agent=openai",
        "agent.model=x",
        "simulate.budget=5",
        "world.search_hits=2",
        "pipeline.stages.grade.params.k=4",
        "judge.pass_at.min_k=2",
        "tracking.uri=sqlite:///x.db",
        "hydra.run.dir=/tmp/x",
        "cache.dir=/tmp/c",
    ]
    assert check_override_keys(argv) == []


def test_precheck_rejects_typos_at_every_level():
    ps = check_override_keys(
        [
            "simulate.budjet=1",
            "world.serch_hits=2",
            "judge.pass_at.mink=2",
            "pipeline.stages.grade.nedes=[]",
            "tracking.uir=x",
            "sed=1",
        ]
    )
    assert len(ps) == 6
    assert "Did you mean 'budget'?" in ps[0] and "Did you mean 'search_hits'?" in ps[1]
    assert "Did you mean 'min_k'?" in ps[2] and "Did you mean 'needs'?" in ps[3]
    assert "Did you mean 'uri'?" in ps[4] and "Did you mean 'seed'?" in ps[5]


def test_scripted_skill_names_are_the_agents_behaviours(base):
    from wai_exp.config.models import Skills
    from wai_exp.domain.dimensions import BEHAVIOURS

    assert tuple(Skills.model_fields) == BEHAVIOURS
    cfg = copy.deepcopy(base)
    cfg["agent"]["skills"]["honesty"] = 0.5
    [p] = problems(cfg)
    assert p.startswith("agent.skills.honesty: unknown key") and "honest_faults" in p


def test_named_functions_are_imported_before_any_work(base):
    from wai_exp.commands.validate import import_problems

    cfg = copy.deepcopy(base)
    assert import_problems(cfg) == []
    cfg["agent"] = {
        "kind": "callable",
        "target": "no_such_pkg.agents:answer",
        "factory": False,
        "kwargs": {},
    }
    cfg["judge"]["kind"], cfg["judge"]["target"] = (
        "callable",
        "wai_exp.score.grade.checklist:no_such_judge",
    )
    cfg["simulate"]["execute"] = (
        "wai_exp.score.grade.checklist:task_checklist"  # importable and callable
    )
    ps = import_problems(cfg)
    assert len(ps) == 2
    assert ps[0].startswith(
        "agent.target: 'no_such_pkg.agents:answer': cannot import module 'no_such_pkg.agents'"
    )
    assert ps[1].startswith("judge.target:") and "has no 'no_such_judge'" in ps[1]


def test_report_stage_function_names_are_checked_before_any_work(base):
    from wai_exp.commands.validate import import_problems

    cfg = copy.deepcopy(base)
    cfg["pipeline"]["stages"]["r"] = {
        "kind": "report",
        "needs": ["grade"],
        "params": {"fn": "metric_sumary", "format": "format_hack_scan"},
    }
    [p] = import_problems(cfg)
    assert p.startswith(
        "pipeline.stages.r.params.fn: wai_exp has no public function 'metric_sumary'"
    )
    assert "Did you mean 'metric_summary'?" in p


def test_built_in_stage_params_are_checked_like_their_section(base):
    cfg = copy.deepcopy(base)
    cfg["pipeline"]["stages"]["grade"]["params"] = {"concurency": 2}
    cfg["pipeline"]["stages"]["simulate"]["params"] = {"budget": 0, "agent": {"skill": 0.5}}
    cfg["pipeline"]["stages"]["optimize"]["params"] = {"order": "random"}
    ps = problems(cfg)
    assert any(
        p.startswith("pipeline.stages.grade.params.concurency: unknown key")
        and "'concurrency'" in p
        for p in ps
    )
    assert "pipeline.stages.simulate.params.budget = 0: must be >= 1" in ps
    assert any(
        p.startswith("pipeline.stages.optimize.params.order = 'random': expected one of")
        for p in ps
    )
    assert len(ps) == 3


def test_valid_stage_params_pass(base):
    cfg = copy.deepcopy(base)
    cfg["pipeline"]["stages"]["simulate"]["params"] = {"budget": 50, "agent": {"skill": 0.5}}
    cfg["pipeline"]["stages"]["grade"]["params"] = {"pass_at": {"k": 2, "min_k": 2}}
    cfg["pipeline"]["stages"]["publish_gate"]["params"] = {"strict": False}
    assert validate_config(cfg)


def test_an_arm_agent_for_another_kind_is_refused_before_any_work():
    # The delta preset's arms carry the scripted agent's skill and model_version; laid over
    # agent=callable they failed simulate_before mid-run with a bare pydantic error.
    with initialize_config_module(version_base="1.3", config_module="wai_exp.conf"):
        cfg = compose(
            config_name="config",
            overrides=["+experiment=delta", "agent=callable", "agent.target=my_agent:answer"],
        )
    ps = problems(OmegaConf.to_container(cfg, resolve=True))
    for arm in ("simulate_before", "simulate_after"):
        for key in ("skill", "model_version"):
            assert any(
                p.startswith(f"pipeline.stages.{arm}.params.agent.{key}: unknown key")
                and "Valid keys: factory, kind, kwargs, target" in p
                and "agent=callable" in p
                for p in ps
            ), ps
    assert len(ps) == 4, ps


def test_an_arm_agent_that_fits_its_kind_passes(base):
    cfg = copy.deepcopy(base)
    cfg["agent"] = {"kind": "callable", "target": "my_agent:answer"}
    cfg["pipeline"]["stages"]["simulate"]["params"] = {"agent": {"target": "my_agent:other"}}
    assert validate_config(cfg)


def test_an_arm_that_switches_kind_is_checked_as_the_whole_agent_it_runs(base):
    # A callable arm over the scripted section passed the check yet failed the stage on the
    # section's skill/skills/spread/model_version: the arm runs an agent of its own kind.
    cfg = copy.deepcopy(base)
    stage = cfg["pipeline"]["stages"]["simulate"]
    stage["params"] = {"agent": {"kind": "callable", "target": "my_agent:answer"}}
    assert validate_config(cfg)
    stage["params"] = {"agent": {"kind": "callable", "skill": 0.5}}
    ps = problems(cfg)
    where = "pipeline.stages.simulate.params.agent"
    assert any(p.startswith(f"{where}.target: required") for p in ps), ps
    assert any(p.startswith(f"{where}.skill: unknown key") for p in ps), ps
    assert all("replaces the agent section" in p for p in ps) and len(ps) == 2, ps
    # the way to write it over a preset's arm (delta's scripted skill/model_version)
    fix = f"over a preset's arm, drop it first: '~{where}' '+{where}={{kind: callable, ...}}')"
    assert all(p.endswith(fix) for p in ps), ps


def test_a_model_spec_as_the_agent_option_is_refused_with_the_three_keys():
    # docs/MODELS.md's spec "<provider>:<model>[@<base url>]" typed as agent= was Hydra's
    # "Could not find 'agent/vllm:smollm2@http://...'" with no fix, URL (and key) echoed.
    [p] = check_override_keys(["agent=vllm:smollm2@http://u:SECRET@127.0.0.1:8000/v1"])
    assert p == (
        "agent=vllm:smollm2@...: agent= picks an option of the agent group, not a model spec; "
        "write it as agent=vllm agent.model=smollm2 agent.base_url=<the URL after @>"
    )
    [p] = check_override_keys(["agent=ollama:llama3.2:1b"])
    assert p.endswith("write it as agent=ollama agent.model=llama3.2:1b")
    assert check_override_keys(["agent=vllm", "agent.model=smollm2"]) == []


def test_precheck_names_a_missing_group_option(tmp_path):
    [p] = check_override_keys(["+experiment=rl_rnd"])
    assert p.startswith(
        "+experiment=rl_rnd: no option 'rl_rnd' in group 'experiment'. Did you mean +experiment=rl_round?"
    )
    assert "Options: " in p and "sft_round" in p
    [p] = check_override_keys(["agent=opnai"])
    assert "Did you mean agent=openai?" in p
    # sweeps list options with commas; each is checked
    [p] = check_override_keys(["-m", "judge=checklist,conduckt"])
    assert "judge=conduckt" in p and "Did you mean judge=conduct?" in p


def test_precheck_sees_options_from_config_dirs(tmp_path):
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline/mine.yaml").write_text("stages: {}\n")
    assert check_override_keys(["--config-dir", str(tmp_path), "pipeline=mine"]) == []
    assert check_override_keys(["pipeline=mine"])  # without the folder it does not exist
    assert (
        check_override_keys(["agent=glob(*)", "hydra.searchpath=[file:///x]", "agent=anything"])
        == []
    )


def test_knobs_seed_and_world_point_to_where_they_are_set(base):
    [p] = check_override_keys(["knobs.world.search_hits=5"])
    assert "set `world.<field>=...` instead" in p
    [p] = check_override_keys(["knobs.seed=3"])
    assert "set `seed=...` instead" in p
    cfg = copy.deepcopy(base)
    cfg["knobs"]["world"] = {"search_hits": 5}
    [p] = problems(cfg)
    assert p.startswith("knobs.world differs from the world group")


def test_precheck_knows_which_agent_was_picked():
    [p] = check_override_keys(["agent=scripted", "agent.model=gpt-4.1"])  # scripted has no model
    assert p.startswith("agent.model: unknown key 'model'")
    assert "Valid keys: kind, model_version, skill" in p
    # without agent= on the command line, a preset may have picked any agent
    assert check_override_keys(["+experiment=rl_round", "agent.model=gpt-4.1"]) == []
    assert check_override_keys(["agent=openai", "agent.model=gpt-4.1"]) == []
    [p] = check_override_keys(["agent=openai", "agent.modle=gpt-4.1"])
    assert "Did you mean 'model'?" in p and "skill" not in p


def test_launchers_pass_through_to_hydras_plugin_discovery(monkeypatch):
    """`hydra/launcher=joblib` is Hydra's group: not an unknown key; a documented launcher
    whose plugin is missing names the install extra."""
    import importlib.util

    from wai_exp.commands.validate import check_override_keys

    assert check_override_keys(["-m", "hydra/launcher=joblib", "seed=0,1"]) == []
    assert check_override_keys(["hydra/sweeper=basic", "hydra.launcher.n_jobs=2"]) == []
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.endswith("ray_launcher") else real(name, *a),
    )
    (problem,) = check_override_keys(["hydra/launcher=ray"])
    assert "pip install 'wai-exp[ray]'" in problem


@pytest.mark.parametrize("name", ["successive", "adaptive", "none", "unique", "split", "fixed"])
def test_the_specs_repeat_policy_names_validate(base, name):
    cfg = copy.deepcopy(base)
    cfg["simulate"]["repeat_policy"] = name
    assert validate_config(cfg).simulate.repeat_policy == name


@pytest.mark.parametrize(
    "grader", ["checklist", "llm", {"_target_": "pkg.mod:fn"}, {"kind": "conduct", "name": "c"}]
)
def test_simulate_grader_grade_and_output_validate(base, grader):
    cfg = copy.deepcopy(base)
    cfg["simulate"].update(grader=grader, output="rows.jsonl")
    sim = validate_config(cfg).simulate
    assert (sim.grader, sim.output, sim.grade) == (grader, "rows.jsonl", False)


def test_sweep_tasks_is_same_by_default_and_takes_only_same_or_own(base):
    """``sweep.tasks`` decides whether a sweep pins its task set (issue 23 §5)."""
    assert validate_config(base).sweep.tasks == "same"
    cfg = copy.deepcopy(base)
    cfg["sweep"]["tasks"] = "maybe"
    assert problems(cfg) == ["sweep.tasks = 'maybe': expected one of 'same' or 'own'"]
    cfg["sweep"] = {"task": "own"}
    [p] = problems(cfg)
    assert p.startswith("sweep.task: unknown key 'task'. Did you mean 'tasks'?")


def _composed(*overrides: str) -> dict:
    with initialize_config_module(version_base="1.3", config_module="wai_exp.conf"):
        cfg = compose(config_name="config", overrides=["+experiment=rl_round", *overrides])
    return OmegaConf.to_container(cfg, resolve=True)


@pytest.mark.parametrize("fmt", ["verl", "openrlhf"])
def test_a_replaying_format_on_an_mcp_world_is_refused_before_any_work(fmt):
    # Their cards name wai-exp's reward function, which replays each task on the mock world:
    # every RL record of a run against the user's server would be refused at publish.
    mcp = ("world=mcp", "world.command=python -m my_server")
    [said] = problems(_composed(f"publish.format={fmt}", *mcp))
    assert f"publish.format: {fmt!r} names wai-exp's reward function" in said
    assert "world=mcp" in said and "publish.format=trl / openai" in said
    validate_config(_composed("publish.format=trl", *mcp))
    validate_config(_composed(f"publish.format={fmt}"))


def test_a_shared_mcp_server_with_resets_over_several_processes_is_refused():
    # Rollouts take turns on a world=mcp server with a reset or a state read, but each
    # rollout process keeps its own turns: two processes on the one server at world.url
    # reset it inside each other's rollouts (108 of 400 rows recorded a state holding
    # another rollout's calls with simulate.workers=2, none with 1).
    url = ("world=mcp", "world.url=http://127.0.0.1:8000/mcp", "world.reset_tool=reset")
    [said] = problems(_composed(*url, "simulate.workers=2"))
    assert said.startswith("world.url with world.reset_tool: rollouts take turns")
    assert "simulate.workers=2 runs them on several processes" in said
    assert "Use simulate.workers=1" in said and "world.command" in said
    [said] = problems(_composed(*url[:2], "world.state_tool=state", "simulate.cluster=ray"))
    assert said.startswith("world.url with world.state_tool") and "simulate.cluster=ray" in said
    cmd = ("world=mcp", "world.command=python -m my_server")
    [said] = problems(_composed(*cmd, "world.reset_command='sh reset.sh'", "simulate.workers=3"))
    assert (
        said.startswith("world.reset_command: ") and "world.reset_tool with world.command" in said
    )
    # Each process starts and resets its own server; one process takes its own turns.
    validate_config(_composed(*cmd, "world.reset_tool=reset", "simulate.workers=2"))
    validate_config(_composed(*url, "simulate.workers=1"))
    validate_config(_composed(*url[:2], "simulate.workers=2"))  # no reset: no turns


@pytest.mark.parametrize("fmt", ["verl", "openrlhf"])
def test_a_replaying_format_on_a_users_own_backend_is_refused_before_any_work(fmt):
    # The mock world the reward function replays is not the backend that answered the calls.
    [said] = problems(_composed(f"publish.format={fmt}", "simulate.execute=my_shop:execute"))
    assert f"publish.format: {fmt!r} names wai-exp's reward function" in said
    assert "simulate.execute answers the tool calls from your backend" in said
    assert "publish.format=trl / openai" in said and "plays your backend" in said
    validate_config(_composed("publish.format=trl", "simulate.execute=my_shop:execute"))
