"""Which RL records ``wai_exp.env.reset`` can replay: one rule (``env.task.replay_gaps``),
read by the env when it refuses a record and by publish when it counts, warns and refuses.

A record made against the user's tool server (``world=mcp``) has every field but a world
the env does not play: publish's verl / openrlhf refusal and trl / openai warning and card
say so, as they do for rows another tool wrote."""

from __future__ import annotations

import json

import pytest

from wai_exp.env import EnvError, reset
from wai_exp.env.task import replay_gaps
from wai_exp.pipeline.stages import publish


def sit(record):
    return record["reward_model"]["ground_truth"]["situation"]


def with_situation(record, situation):
    truth = {**record["reward_model"]["ground_truth"], "situation": situation}
    return {**record, "reward_model": {**record["reward_model"], "ground_truth": truth}}


def _mcp(record):
    world = {**sit(record)["world"], "options": {"kind": "mcp", "command": "python srv.py"}}
    return with_situation(record, {**sit(record), "world": world})


def _execute(record):
    """As ``world_dials`` records a run whose tool calls the user's ``simulate.execute``
    answered: the mock world's options are there, but no mock world served a call."""
    return with_situation(
        record, {**sit(record), "world": {**sit(record)["world"], "execute": True}}
    )


MANGLES = {
    "recorded": lambda r: r,
    "mcp": _mcp,
    "execute": _execute,
    "no seed": lambda r: with_situation(r, {**sit(r), "seed": None}),
    "no cell, mcp": lambda r: _mcp(with_situation(r, {**sit(r), "scenario_dimensions": None})),
    "no tools": lambda r: {**r, "tools": []},
    "no tools, mcp": lambda r: _mcp({**r, "tools": []}),
}


@pytest.mark.parametrize("name", MANGLES)
def test_publish_counts_as_unreplayable_exactly_what_reset_refuses(run, name):
    record = MANGLES[name](run[1][0])
    gaps = replay_gaps(sit(record), record["tools"])
    try:
        reset(record)
        refused = False
    except EnvError:
        refused = True
    assert bool(gaps) == refused == (name != "recorded")
    n_missing = publish._unreplayable([record])[0]
    served = publish._served_elsewhere([record])
    toolless = publish._toolless([record])
    assert (n_missing, dict(served), toolless) == {
        "recorded": (0, {}, 0),
        "mcp": (0, {"mcp": 1}, 0),
        "execute": (0, {"execute": 1}, 0),
        "no seed": (1, {}, 0),
        "no cell, mcp": (1, {}, 0),
        "no tools": (0, {}, 1),
        "no tools, mcp": (0, {"mcp": 1}, 0),  # the world is the gap tools would not fix
    }[name]


def test_reset_refuses_an_mcp_record_before_building_a_world_naming_what_to_do(run):
    with pytest.raises(EnvError) as info:
        reset(_mcp(run[1][0]))
    said = str(info.value)
    assert "world=mcp" in said and "mock world only" in said
    assert "reward function of your own" in said and "default world" in said


def test_reset_refuses_a_record_a_users_own_backend_answered_naming_it(run):
    """Such a record replayed on the mock world: the env answered lookup_order with a mock
    order (another total, items and email) where the user's backend had answered, so the
    policy trained on a world the rows never saw and the card said reset rebuilds it."""
    with pytest.raises(EnvError) as info:
        reset(_execute(run[1][0]))
    said = str(info.value)
    assert "your own backend (simulate.execute)" in said and "mock world only" in said
    assert "live on your backend" in said and "a run without simulate.execute" in said
    assert "world=" not in said


def test_publish_words_records_a_users_backend_answered_by_that_backend(run):
    records = [_execute(r) for r in run[1][:3]]
    with pytest.raises(ValueError) as info:
        publish._refuse_served_elsewhere(records, "verl")
    said = str(info.value)
    assert "3 of 3 RL records were made against your own backend (simulate.execute)" in said
    assert "records live on your backend" in said and "world=" not in said
    warning = publish._served_elsewhere_warning(publish._served_elsewhere(records), 3)
    assert warning.startswith("3 of 3 RL records were made against your own backend")
    note = "\n".join(publish._answer_key_note("rl", 0, 3, {"execute": 3}))
    assert "rebuilds the task's mock world" not in note
    assert "These records were made against your own backend (simulate.execute)" in note


def test_world_dials_say_whether_a_users_backend_answered_not_which(run):
    config = {"world": {"kind": "mock"}, "simulate": {"execute": "/home/me/shop.py:execute"},
              "knobs": {}}  # fmt: skip
    dials = publish.world_dials(config)
    assert dials["execute"] is True and "/home/me" not in str(dials)
    assert "execute" not in publish.world_dials({"world": {"kind": "mock"}, "knobs": {}})


@pytest.mark.parametrize("fmt", ["verl", "openrlhf"])
def test_verl_and_openrlhf_refuse_mcp_records_naming_the_fix(run, fmt):
    records = [_mcp(r) for r in run[1][:3]] + run[1][3:5]
    publish._refuse_unreplayable(records, None, fmt)  # every field is there
    with pytest.raises(ValueError) as info:
        publish._refuse_served_elsewhere(records, fmt)
    said = str(info.value)
    assert f"publish.format={fmt}: 3 of 5 RL records were made against your tool server" in said
    assert "(world=mcp)" in said and "publish.format=trl / openai" in said
    assert "Nothing was published" in said
    publish._refuse_served_elsewhere(run[1][3:5], fmt)


def test_the_card_of_mcp_records_never_says_reset_rebuilds_them():
    note = "\n".join(publish._answer_key_note("rl", 0, 5, {"mcp": 5}))
    assert "rebuilds the task's mock world" not in note
    assert "`wai_exp.env.reset(record)` cannot rebuild their world" in note
    assert "No reward function ships with these records" in note
    assert "These records were made against your tool server (world=mcp)" in note
    some = "\n".join(publish._answer_key_note("rl", 0, 5, {"mcp": 2}))
    assert "2 of 5 were made against your tool server" in some
    mock = "\n".join(publish._answer_key_note("rl", 0, 5, {}))
    assert "rebuilds the task's mock world" in mock and "tool server" not in mock


def test_serve_env_refuses_records_reset_would_refuse_before_serving(run, tmp_path):

    from wai_exp.commands.serve_env import read_records

    path = tmp_path / "train.jsonl"
    good = run[1][:2]
    path.write_text("".join(json.dumps(r) + "\n" for r in [*good, _mcp(run[1][2])]))
    said = read_records(path)
    assert isinstance(said, str) and said.startswith(f"{path}:3 cannot be played")
    assert "world=mcp" in said and "default world" in said
    path.write_text("".join(json.dumps(r) + "\n" for r in good))
    assert read_records(path) == good


def _refusal(record):
    with pytest.raises(EnvError) as info:
        reset(record)
    return str(info.value)


def test_reset_refuses_a_record_with_no_tools_naming_the_spec_to_publish_with(run):
    """The record opens with the shipped support desk's system prompt: that is the spec to
    publish with. Its refusal said "the spec they were made with" when it could tell."""
    bare = {**run[1][0], "tools": []}
    said = _refusal(bare)
    assert said.startswith("the record has no `tools`: the world answers only declared tools")
    assert said.endswith(
        "(simulate.rows without simulate.spec); to publish them again, pass "
        "simulate.spec=support_desk (the rows' system prompt is that shipped spec's), or "
        "write each row's `tools`"
    )
    # As a Parquet row holds it (the prompt a JSON string), and with the prompt where the
    # verl shape keeps it for the reward function.
    assert _refusal({**bare, "prompt": json.dumps(bare["prompt"])}) == said
    verl = {k: v for k, v in bare.items() if k != "prompt"}
    assert _refusal({**verl, "extra_info": {"tools": [], "prompt": bare["prompt"]}}) == said


def test_a_record_with_no_tools_and_a_prompt_of_no_shipped_spec_says_what_to_pass(run):
    bare = {**run[1][0], "tools": []}
    ask = bare["prompt"][1:]
    own = _refusal({**bare, "prompt": [{"role": "system", "content": "You sell kites."}, *ask]})
    assert own.endswith(
        "(simulate.rows without simulate.spec); the record's system prompt is none of the "
        "shipped specs' (support_desk); to publish them again, pass simulate.spec=<the spec "
        "they were made with>, or write each row's `tools`"
    )
    bare_ask = _refusal({**bare, "prompt": ask})
    assert "; the record has no system prompt to tell the spec by; to publish them" in bare_ask
    assert bare_ask.endswith(f"pass {UNKNOWN}")
    # No system message, but the record says which prompt it ran under.
    sha = run[0][0]["lineage"]["system_prompt_sha"]
    assert _refusal({**bare, "prompt": ask, "lineage": {"system_prompt_sha": sha}}) == (
        _refusal(bare)
    )


def test_a_record_with_no_tools_and_another_world_is_refused_for_its_world(run):
    """Tools would not make it playable: the message names the gap that would remain."""
    with pytest.raises(EnvError, match="made against your tool server"):
        reset(_mcp({**run[1][0], "tools": []}))


@pytest.mark.parametrize("fmt", ["verl", "openrlhf"])
def test_verl_and_openrlhf_refuse_records_with_no_tools_naming_the_shipped_spec(run, fmt):
    rows, records = run
    bare = [{**r, "tools": []} for r in records[:3]] + records[3:5]
    with pytest.raises(ValueError) as info:
        publish._refuse_toolless(bare, rows, fmt)
    said = str(info.value)
    assert said.startswith(f"publish.format={fmt}: 3 of 5 RL records have no `tools`")
    assert (
        "Pass simulate.spec=support_desk (the rows' system prompt is that shipped spec's)" in said
    )
    assert said.endswith("Nothing was published.")
    publish._refuse_toolless(records[3:5], rows, fmt)


def test_the_shipped_spec_is_named_only_when_every_row_ran_under_its_prompt(run):
    rows = run[0][:4]
    assert publish.shipped_spec_of(rows) == "support_desk"
    other = {**rows[0], "lineage": {**rows[0]["lineage"], "system_prompt_sha": "0" * 64}}
    assert publish.shipped_spec_of([other, *rows[1:]]) is None
    assert publish.shipped_spec_of([other]) is None
    assert publish.shipped_spec_of([{"messages": []}]) is None  # another tool's row


def test_the_warning_and_card_for_records_with_no_tools_say_reset_refuses_them(run):
    rows = run[0]
    [said] = publish._no_tools_warning(3, 5, rows, 3, [])
    assert said.startswith("3 of 5 RL records offer the policy no tools, though their rows")
    assert "wai_exp.env.reset and the reward functions built on it refuse them" in said
    assert said.endswith(f"; pass {KNOWN}")
    # Another tool's rows with no situation: the missing reward facts are said elsewhere.
    [foreign] = publish._no_tools_warning(3, 5, rows, 0, [])
    assert "wai_exp.env.reset" not in foreign and foreign.endswith(f"; pass {UNKNOWN}")
    assert publish._no_tools_warning(0, 5, rows, 0, []) == []
    note = "\n".join(publish._no_tools_note(5, 5))
    assert "These records have an empty `tools` list" in note and "raises on them" in note
    assert publish._no_tools_note(0, 5) == []


#: The fix every message about records with no tools ends with: the shipped spec the rows'
#: system prompt is, when it is one; else the spec they were made with.
KNOWN = (
    "simulate.spec=support_desk (the rows' system prompt is that shipped spec's), or write "
    "each row's `tools`"
)
UNKNOWN = "simulate.spec=<the spec they were made with>, or write each row's `tools`"


def test_every_message_about_records_with_no_tools_names_the_fix_in_one_wording(run):
    """The SFT skip reason, publish's warning, refusal and card, the pre-run check's
    problem and reset's refusal each said the fix in their own words ("add the tools to
    the rows, or pass the spec that declares them (simulate.spec)", "publish them again
    with simulate.spec=...", "Pass simulate.spec=..., or write each row's `tools`")."""
    from wai_exp.rows.export import no_tools_reason

    calls = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "cancel_order", "arguments": "{}"}}
    ]}]  # fmt: skip
    assert no_tools_reason(calls).endswith(f"never given; pass {UNKNOWN}")
    with pytest.raises(EnvError) as info:
        reset({**run[1][0], "tools": []})
    assert str(info.value).endswith(f"to publish them again, pass {KNOWN}")
    assert publish.no_tools_problem("3 of 5 RL records have", None).endswith(f". Pass {UNKNOWN}")
    known = publish.no_tools_problem("3 of 5 RL records have", "support_desk")
    assert known.endswith(f"tools. Pass {KNOWN}")
    [said] = publish._no_tools_warning(3, 5, run[0], 3, [])
    assert said.endswith(f"; pass {KNOWN}")
    note = "\n".join(publish._no_tools_note(5, 5))
    assert f"them. Pass {UNKNOWN} when you publish them again." in note


def test_serve_env_refuses_records_with_no_tools_before_serving(run, tmp_path):

    from wai_exp.commands.serve_env import read_records

    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [run[1][0], {**run[1][1], "tools": []}]))
    said = read_records(path)
    assert isinstance(said, str) and said.startswith(f"{path}:2 cannot be played")
    assert "has no `tools`" in said and "simulate.spec=" in said
