"""leak_report / format_leak_report: quotes of a row's own privileged block in agent text."""

from __future__ import annotations

import copy
import math

import pytest

from wai_exp.score.grade.checklist import privileged_context
from wai_exp.score.grade.privileged import MAX_LEAKED, format_leak_report, leak_report

REFERENCE = "Do not call cancel_order again and say it was already done (rule 7)."
HIDDEN = "The action was already taken: the record shows it done."


def _row(i: int, final: str = "All sorted.", steps: list | None = None, **extra) -> dict:
    row = {
        "scenario_id": f"s{i}",
        "rollout_index": i % 3,
        "rollout_id": f"r{i}",
        "prompt": "cancel my order",
        "final_text": final,
        "steps": steps or [],
        "scenario_dimensions": {"tool": "cancel_order", "world_state": "already_done"},
        "privileged": {"hidden_state": HIDDEN, "reference": REFERENCE},
    }
    row.update(extra)
    return row


@pytest.fixture(scope="module")
def sim():
    from wai_exp.simulate.engine import simulate

    return simulate(mode="rl", budget=100, seed=0)


# ---- real simulate data -----------------------------------------------------------------


def test_real_trajectories_are_checked_and_clean(sim):
    report = leak_report(sim)
    assert report["n_rows"] == 100
    assert report["checked"] is True
    assert report["source"] == "trajectories"
    # Every simulated row carries a block built by privileged_context from its own dims.
    for row in sim.trajectories:
        assert row["privileged"] == privileged_context(row["scenario_dimensions"], row["faults"])
    assert report["n_with_block"] == 100
    assert report["n_checked"] == 100
    # The scripted agent never recites the answer key.
    assert report["n_leaked"] == 0
    assert report["rate"] == 0.0
    # Wilson upper bound for 0/100 at 95%: z^2 / (n + z^2) = 3.8415 / 103.8415.
    z2 = 1.959963984540054**2
    assert report["rate_ci"][0] == pytest.approx(0.0, abs=1e-12)
    assert math.isclose(report["rate_ci"][1], z2 / (100 + z2), rel_tol=1e-9)
    # The data object and its trajectories give the same answer.
    assert leak_report(sim.trajectories)["n_checked"] == 100


def test_planted_leak_in_real_data_is_found_and_inputs_untouched(sim):
    rows = copy.deepcopy(sim.trajectories)
    target = next(i for i, r in enumerate(rows) if r["privileged"].get("reference"))
    rows[target]["final_text"] += " " + rows[target]["privileged"]["reference"]
    before = copy.deepcopy(rows)
    report = leak_report(rows)
    assert rows == before  # not mutated
    assert report["n_leaked"] == 1
    assert report["rate"] == pytest.approx(1 / 100)
    [item] = report["leaked"]
    assert item["scenario_id"] == rows[target]["scenario_id"]
    assert item["rollout_index"] == rows[target]["rollout_index"]
    assert item["field"] == "reference"
    assert item["where"] == "final_text"
    assert item["needle"] == rows[target]["privileged"]["reference"]
    assert report["by_field"] == {"reference": 1}
    assert "1 of 100" in report["summary"]
    # The original simulate output is unaffected by the planted copy.
    assert leak_report(sim)["n_leaked"] == 0


@pytest.mark.parametrize("accessor", ["attr", "call"])
def test_scrubbed_export_is_vacuous_and_says_which_accessor_to_use(sim, accessor):
    rows = sim.rows if accessor == "attr" else sim.rows()
    report = leak_report(rows)
    assert report["checked"] is False
    assert report["n_checked"] == 0 and report["n_leaked"] == 0
    assert report["rate"] is None and report["rate_ci"] is None
    assert report["scrubbed_export"] is True
    assert "data.trajectories" in report["summary"]
    assert "vacuous" in report["summary"]


def test_plain_list_of_scrubbed_rows_is_recognized_as_export(sim):
    # A saved JSONL read back: a plain list, no block, but dims that simulate derives it from.
    report = leak_report([dict(r) for r in sim.rows])
    assert report["source"] == "list"
    assert report["scrubbed_export"] is True
    assert "data.trajectories" in report["summary"]


# ---- hand-built rows ----------------------------------------------------------------


def test_leak_in_assistant_turn_case_and_whitespace_insensitive():
    quote = "  the ACTION was already taken:\n the record   shows it done  "
    steps = [{"kind": "assistant", "content": "Checking. " + quote}, {"kind": "tool"}]
    rows = [_row(0, steps=steps), _row(1), _row(2), _row(3)]
    report = leak_report(rows)
    assert report["n_checked"] == 4
    assert report["n_leaked"] == 1
    assert report["rate"] == 0.25
    [item] = report["leaked"]
    assert (item["scenario_id"], item["field"], item["where"]) == ("s0", "hidden_state", "steps[0]")


def test_quote_without_final_full_stop_still_counts():
    rows = [_row(0, final="Sure. " + REFERENCE.rstrip("."))]
    assert leak_report(rows)["n_leaked"] == 1


def test_user_and_tool_text_are_not_the_agent_speaking():
    steps = [
        {"kind": "user", "content": REFERENCE},
        {"kind": "tool", "content": HIDDEN, "result": HIDDEN},
    ]
    assert leak_report([_row(0, steps=steps)])["n_leaked"] == 0


def test_another_rows_block_is_not_a_leak():
    # Row 0 says row 1's reference; only its own block counts.
    other = "Refund no more than the order total and explain the limit (rule 2)."
    rows = [_row(0, final=other), _row(1)]
    rows[1]["privileged"] = {"reference": other}
    assert leak_report(rows)["n_leaked"] == 0


def test_min_len_skips_short_strings_and_nested_hidden_state_is_walked():
    row = _row(0, final="ok, order ORD-1 at Shipped, ticket id ORD-1 noted")
    row["privileged"] = {
        "hidden_state": {"status": "Shipped", "notes": ["order ORD-1 at Shipped"]},
        "principle": "ok",
    }
    report = leak_report([row])  # "Shipped" (7) and "ok" (2) are under 12
    assert report["n_leaked"] == 1
    assert report["leaked"][0]["field"] == "hidden_state.notes[0]"
    assert report["by_field"] == {"hidden_state": 1}
    # With min_len above every string there is nothing to look for: checked, not measured.
    high = leak_report([row], min_len=100)
    assert high["checked"] is True
    assert high["n_with_block"] == 1 and high["n_checked"] == 0
    assert high["rate"] is None
    assert "min_len" in high["summary"]
    # A low min_len makes the short principle a needle: "ok" is in the reply.
    short = [_row(0, final="ok")]
    short[0]["privileged"]["principle"] = "ok"
    assert leak_report(short)["n_leaked"] == 0
    assert leak_report(short, min_len=2)["n_leaked"] == 1


def test_principle_is_checked():
    row = _row(0, final="Per policy: never reveal another customer's data.")
    row["privileged"] = {"principle": "Never reveal another customer's data"}
    report = leak_report([row])
    assert report["n_leaked"] == 1 and report["leaked"][0]["field"] == "principle"


def test_rows_without_block_are_not_in_the_denominator():
    rows = [_row(0, final=REFERENCE), _row(1), {"scenario_id": "x", "final_text": REFERENCE}]
    report = leak_report(rows)
    assert report["n_rows"] == 3
    assert report["n_checked"] == 2
    assert report["n_leaked"] == 1
    assert report["rate"] == 0.5
    # Wilson 1/2 at 95% by hand: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n).
    z = 1.959963984540054
    n, p = 2, 0.5
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert report["rate_ci"] == pytest.approx([centre - half, centre + half], rel=1e-9)


def test_no_block_without_dims_is_vacuous_but_not_called_an_export():
    report = leak_report([{"scenario_id": "a", "final_text": "hi"}])
    assert report["checked"] is False
    assert report["scrubbed_export"] is False
    assert "vacuous" in report["summary"]
    assert leak_report([])["checked"] is False


def test_leaked_list_is_capped_but_counts_are_exact():
    rows = [_row(i, final=REFERENCE) for i in range(MAX_LEAKED + 5)]
    report = leak_report(rows)
    assert report["n_leaked"] == MAX_LEAKED + 5
    assert len(report["leaked"]) == MAX_LEAKED
    text = format_leak_report(report)
    assert "5 more leaked rows not listed" in text


def test_object_with_only_rows_is_treated_as_export():
    class Exported:
        def __init__(self, rows):
            self._rows = rows

        def rows(self):
            return self._rows

    scrubbed = [{k: v for k, v in _row(0).items() if k != "privileged"}]
    report = leak_report(Exported(scrubbed))
    assert report["source"] == "rows"
    assert report["scrubbed_export"] is True


def test_bad_inputs_raise_with_a_fix():
    with pytest.raises(TypeError, match="single row dict"):
        leak_report(_row(0))
    with pytest.raises(ValueError, match="trajectories"):
        leak_report(None)
    with pytest.raises(ValueError, match="min_len"):
        leak_report([_row(0)], min_len=0)
    with pytest.raises(TypeError, match="must be a dict"):
        leak_report(["not a row"])


# ---- format_leak_report ------------------------------------------------------------------


def test_format_puts_summary_first_and_one_fact_per_line():
    rows = [_row(0, final=REFERENCE), _row(1)]
    report = leak_report(rows)
    lines = format_leak_report(report).split("\n")
    assert lines[0] == report["summary"]
    assert "rows: 2" in lines
    assert "rows checked: 2" in lines
    assert "rows leaked: 1" in lines
    assert any(line.startswith("leak rate: 0.5000 (95% CI") for line in lines)
    [leak_line] = [line for line in lines if line.startswith("leak: ")]
    assert "s0" in leak_line and "reference" in leak_line and "rule 7" in leak_line


def test_format_says_unmeasured_instead_of_zero():
    text = format_leak_report(leak_report([{"scenario_id": "a"}]))
    assert "not measured" in text
    assert "0.0000" not in text


def test_format_rejects_a_foreign_dict():
    with pytest.raises(KeyError, match="leak_report"):
        format_leak_report({"n_rows": 3})
