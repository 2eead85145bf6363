"""One ``SimulateParams`` model serves ``simulate()`` and ``check_inputs()``.

The pipeline refuses a bad stage before any work by calling ``check_inputs`` with the
stage's keyword arguments; that promise holds only if the check resolves the parameters
exactly as the run does. Both build one ``SimulateParams`` and resolve it through one
function, and ``simulate()`` keeps the explicit keyword signature the reference documents.
"""

import inspect

import pytest

from wai_exp.simulate import engine as engine_mod
from wai_exp.simulate.engine import check_inputs, simulate
from wai_exp.simulate.modes import PARAMS
from wai_exp.simulate.params import SimulateParams

#: The simulate reference's parameter table, in its order, with this build's defaults
#: (the offline ones: no hosted agent or writer, so ``agent=None`` and ``simulator=False``;
#: ``None`` for the values a mode presets).
REFERENCE_TABLE = {
    "agent": None,
    "spec": None,
    "tools": None,
    "system_prompt": None,
    "situations": None,
    "traces": None,
    "tasks": None,
    "runs": 1,
    "grader": None,
    "execute": None,
    "requests_per_situation": None,
    "rollouts_per_request": None,
    "repeat_policy": None,
    "unique_situations": None,
    "mode": "explore",
    "fault_rate": None,
    "hard_share": None,
    "reproducible": False,
    "budget": 1000,
    "time_budget": None,
    "until": "compute",
    "logprobs": None,
    "sampling": None,
    "simulator": False,
    "user_model": None,
    "timeout": 300,
    "grade": False,
    "llm_grade": False,
    "output": None,
    "advanced": None,
}
#: Beyond the reference: the seed shortcut, the pipeline's hooks, two engine choices.
BEYOND = {
    "seed": None,
    "done_rows": None,
    "on_row": None,
    "progress": None,
    "writer_structured_output": "auto",
    "lost_as": "failure",
    "shards": None,
}


def test_public_signature_is_the_reference_table_then_the_extras():
    sig = inspect.signature(simulate).parameters
    named = {n: p.default for n, p in sig.items() if p.kind is not p.VAR_KEYWORD}
    assert list(named) == [*REFERENCE_TABLE, *BEYOND]
    assert named == {**REFERENCE_TABLE, **BEYOND}
    assert sig["agent"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(sig[n].kind is inspect.Parameter.KEYWORD_ONLY for n in list(named)[1:])
    assert list(sig)[-1] == "aliases" and sig["aliases"].kind is inspect.Parameter.VAR_KEYWORD


def test_the_model_has_the_signatures_names_and_defaults():
    sig = inspect.signature(simulate).parameters
    fields = SimulateParams.model_fields
    assert list(fields) == [n for n in sig if n != "aliases"] == list(PARAMS)
    for name, field in fields.items():
        assert field.default == sig[name].default, name
    assert SimulateParams() == SimulateParams.from_call()


def test_aliases_land_on_their_parameter_and_unknown_names_are_refused():
    p = SimulateParams.from_call(
        None, phrasings=2, repeats=3, unique=False, policy="Be brief.", risk=0.1
    )
    assert (p.requests_per_situation, p.rollouts_per_request, p.unique_situations) == (2, 3, False)
    assert (p.system_prompt, p.fault_rate) == ("Be brief.", 0.1)
    with pytest.raises(ValueError, match="Did you mean 'budget'"):
        SimulateParams.from_call(budgte=3)
    with pytest.raises(ValueError, match="two spellings of one parameter"):
        SimulateParams.from_call(repeats=2, rollouts_per_request=3)


CALLS = [
    {},
    {"mode": "rl", "repeats": 2, "budget": 6, "seed": 4},
    {"phrasings": 2, "risk": 0.2, "advanced": {"concurrency": 2, "seed": 9}},
    {"mode": "sft", "hard_share": 0.5, "situations": 3, "unique": False},
]


@pytest.mark.parametrize("kwargs", CALLS, ids=lambda k: ",".join(k) or "defaults")
def test_simulate_and_check_inputs_resolve_the_same_parameters(monkeypatch, kwargs):
    seen: list[tuple[SimulateParams, object]] = []
    real = engine_mod._resolve_inputs

    def spy(params):
        inputs = real(params)
        seen.append((params, inputs))
        return inputs

    monkeypatch.setattr(engine_mod, "_resolve_inputs", spy)
    kwargs = {"budget": 2, **kwargs}
    check_inputs(None, **kwargs)
    data = simulate(None, **kwargs)
    (checked, c_in), (ran, r_in) = seen
    assert checked == ran
    assert c_in.cfg == r_in.cfg  # every resolved value and knob
    assert (c_in.tools, c_in.system_prompt, c_in.spec_name) == (
        r_in.tools,
        r_in.system_prompt,
        r_in.spec_name,
    )
    assert data.report()["mode"] == r_in.cfg.mode and len(data.rows) == r_in.cfg.budget


BAD = [
    {"budgte": 3},
    {"repeats": 2, "rollouts_per_request": 3},
    {"mode": "rll"},
    {"budget": 0},
    {"advanced": {"concurency": 4}},
    {"time_budget": 5, "reproducible": True},
    {"tasks": "/nonexistent/tasks.jsonl"},
]


@pytest.mark.parametrize("kwargs", BAD, ids=lambda k: ",".join(k))
def test_check_inputs_refuses_what_simulate_refuses_with_the_same_words(kwargs):
    with pytest.raises(ValueError) as checked:
        check_inputs(None, **kwargs)
    with pytest.raises(ValueError) as ran:
        simulate(None, **kwargs)
    assert str(checked.value) == str(ran.value)
