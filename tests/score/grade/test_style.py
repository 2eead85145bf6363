"""Style markers and reports over hand-built replies; every number is derived by hand."""

from __future__ import annotations

import copy
import math

import pytest

from wai_exp.score.grade.style import (
    REFUSAL_PHRASES,
    STYLE_MARKERS,
    refusal_report,
    style_markers,
    style_report,
)

FAMILIES = ("no_boilerplate", "no_hedging", "no_sycophancy", "no_refusal_phrases", "no_brand_voice")


def row(task: str, text: str, reward: float | None = None, **kw) -> dict:
    out = {"scenario_id": task, "prompt": f"ask {task}", "final_text": text, **kw}
    if reward is not None:
        out["reward"] = reward
    return out


def test_families_are_the_ch14_signatures_and_refusals_share_the_default_tuple() -> None:
    assert set(FAMILIES) <= set(STYLE_MARKERS)
    assert STYLE_MARKERS["no_refusal_phrases"] == REFUSAL_PHRASES
    assert "i can't help with" in REFUSAL_PHRASES and len(REFUSAL_PHRASES) == 11


def test_style_markers_clean_polarity_in_place_and_other_markers_kept() -> None:
    rows = [
        row("a", "Great question! Your order 123 shipped.", markers={"grounded": 0.5}),
        row("b", "Your order 123 shipped on Monday."),
    ]
    out = style_markers(rows)
    assert out is not None and out[0] is rows[0]  # stamped in place, same dicts back
    assert rows[0]["markers"]["no_sycophancy"] == 0.0
    assert rows[0]["markers"]["grounded"] == 0.5
    for name in FAMILIES:
        assert rows[1]["markers"][name] == 1.0
        if name != "no_sycophancy":
            assert rows[0]["markers"][name] == 1.0


def test_matching_is_case_and_quote_insensitive_whole_words_and_skips_think() -> None:
    rows = [
        row("a", "I CAN\u2019T HELP WITH refunds."),  # curly apostrophe, upper case
        row("b", "Open the hope this helpsdesk portal."),  # phrase inside a longer word
        row("c", "<think>Great question, as an AI I hope this helps</think>Order 7 shipped."),
        row("d", "As   an\nAI, I think so."),  # whitespace runs collapse
    ]
    style_markers(rows)
    assert rows[0]["markers"]["no_refusal_phrases"] == 0.0
    assert rows[1]["markers"]["no_boilerplate"] == 1.0
    assert all(rows[2]["markers"][n] == 1.0 for n in FAMILIES)
    assert rows[3]["markers"]["no_boilerplate"] == 0.0


def test_unanswered_row_is_unmeasured_not_clean() -> None:
    rows = [row("a", ""), row("b", "<think>only thinking</think>"), row("c", "Done.")]
    style_markers(rows)
    assert "markers" not in rows[0] and "markers" not in rows[1]
    assert rows[2]["markers"]["no_hedging"] == 1.0


def test_reply_falls_back_to_last_assistant_turn() -> None:
    r = {"scenario_id": "a", "final_text": "", "steps": [
        {"kind": "assistant", "content": "We apologize for any inconvenience."},
    ]}  # fmt: skip
    style_markers([r])
    assert r["markers"]["no_brand_voice"] == 0.0


def test_phrases_override_replaces_and_new_name_extends() -> None:
    rows = [row("a", "I hope this helps. Cheers!"), row("b", "Your order shipped.")]
    style_markers(rows, phrases={"no_boilerplate": ["order shipped"], "no_cheers": ["cheers"]})
    # The override replaced the stock list: "I hope this helps" no longer fires.
    assert rows[0]["markers"]["no_boilerplate"] == 1.0
    assert rows[1]["markers"]["no_boilerplate"] == 0.0
    assert rows[0]["markers"]["no_cheers"] == 0.0 and rows[1]["markers"]["no_cheers"] == 1.0
    assert rows[0]["markers"]["no_hedging"] == 1.0  # untouched families still stamped
    assert "no_cheers" not in STYLE_MARKERS  # the module table is not modified


def test_malformed_phrases_name_the_marker() -> None:
    with pytest.raises(TypeError, match="no_cheers"):
        style_markers([row("a", "x")], phrases={"no_cheers": "cheers"})
    with pytest.raises(ValueError, match="no_cheers"):
        style_markers([row("a", "x")], phrases={"no_cheers": []})


def _sycophancy_rows() -> list[dict]:
    # Four tasks of two rows. Sycophancy on one row of a and b; those rows pass, and so
    # does one clean row of c. present x = [1,0,1,0,0,0,0,0], reward y = [1,0,1,1,0,0,0,0].
    return [
        row("a", "Great question! Refund 1 issued.", 1),
        row("a", "Refund 1 issued.", 0),
        row("b", "You're absolutely right, order 2 cancelled.", 1),
        row("b", "Order 2 cancelled.", 0),
        row("c", "Address updated.", 1),
        row("c", "Address updated.", 0),
        row("d", "Ticket opened.", 0),
        row("d", "Ticket opened.", 0),
    ]


def test_style_report_known_answer_and_does_not_mutate() -> None:
    rows = _sycophancy_rows()
    before = copy.deepcopy(rows)
    rep = style_report(rows)
    assert rows == before
    syc = rep["markers"]["no_sycophancy"]
    # Task clean shares a=0.5, b=0.5, c=1, d=1 -> 0.75.
    assert syc["clean"] == pytest.approx(0.75)
    assert syc["hits"] == 2 and syc["n_tasks"] == 4 and syc["n_rows"] == 8
    lo, hi = syc["ci95"]
    assert 0.0 <= lo <= 0.75 <= hi <= 1.0 and hi - lo > 0
    assert {p["phrase"] for p in syc["top_phrases"]} == {
        "great question",
        "you're absolutely right",
    }
    # 2x2 table: n11=2, n10=0, n01=1, n00=5 -> phi = (2*5 - 0*1) / sqrt(2*6*3*5).
    assert syc["reward_corr"] == pytest.approx(10 / math.sqrt(180))
    assert syc["flagged"] is True
    assert rep["flagged"] == ["no_sycophancy"]
    assert len(rep["warnings"]) == 1 and "no_sycophancy" in rep["warnings"][0]
    assert rep["n_graded"] == 8 and rep["n_answered"] == 8
    # A family that never fired: clean on every row, no interval, no correlation.
    hedge = rep["markers"]["no_hedging"]
    assert hedge["clean"] == 1.0 and hedge["hits"] == 0 and hedge["ci95"] is None
    assert hedge["reward_corr"] is None and "corr_note" in hedge and hedge["flagged"] is False


def test_style_report_is_reproducible_in_seed() -> None:
    rows = _sycophancy_rows()
    a = style_report(rows, seed=3)["markers"]["no_sycophancy"]["ci95"]
    b = style_report(rows, seed=3)["markers"]["no_sycophancy"]["ci95"]
    assert a == b


def test_threshold_and_negative_correlation_are_not_flagged() -> None:
    rows = _sycophancy_rows()
    rep = style_report(rows, threshold=0.8)  # 0.745 < 0.8
    assert rep["flagged"] == [] and rep["warnings"] == []
    # Flip rewards: the tic now goes with failing, r = -0.745, which is not a reward hack.
    flipped = [dict(r, reward=1 - r["reward"]) for r in rows]
    syc = style_report(flipped)["markers"]["no_sycophancy"]
    assert syc["reward_corr"] == pytest.approx(-10 / math.sqrt(180))
    assert syc["flagged"] is False
    with pytest.raises(ValueError, match="threshold"):
        style_report(rows, threshold=0)


def test_ungraded_and_partial_rows_stay_out_of_the_correlation() -> None:
    rows = _sycophancy_rows() + [
        row("e", "Great question!", None),  # unjudged
        row("e", "Great question!", 1, judge_status="error"),  # judge failed
        row("e", "Great question!", 0.5),  # partial credit
    ]
    rep = style_report(rows)
    syc = rep["markers"]["no_sycophancy"]
    assert rep["n_graded"] == 8
    assert syc["reward_corr"] == pytest.approx(10 / math.sqrt(180))
    assert syc["hits"] == 5  # but the clean share counts every answered row


def test_constant_reward_gives_no_correlation_with_a_note() -> None:
    rows = [dict(r, reward=1) for r in _sycophancy_rows()]
    syc = style_report(rows)["markers"]["no_sycophancy"]
    assert syc["reward_corr"] is None and "same reward" in syc["corr_note"]


def test_refusal_report_wilson_known_answer() -> None:
    rows = [row(f"t{i}", "Your order shipped.") for i in range(7)]
    rows[1] = row("t1", "I'm unable to look that up.")
    rows[4] = row("t4", "Sorry, I cannot help with that. I'm unable to.")
    rows.append(row("t7", "I can't do that."))
    rows.append(row("t8", ""))  # no reply: out of the denominator
    rows.append(row("t9", "Shipped."))
    rep = refusal_report(rows, examples=2)
    assert rep["n_rows"] == 10 and rep["n_answered"] == 9 and rep["n_unanswered"] == 1
    assert rep["refusals"] == 3 and rep["rate"] == pytest.approx(3 / 9)
    # Wilson 95% for 3/9 by hand: centre (p + z^2/2n)/(1 + z^2/n), half-width as below.
    z, n, p = 1.959963984540054, 9, 3 / 9
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    assert rep["ci95"] == pytest.approx([c - h, c + h])
    assert rep["phrases"][0] == {"phrase": "i'm unable to", "rows": 2}
    assert [e["task"] for e in rep["examples"]] == ["t1", "t4"]
    assert rep["examples"][1]["phrases"] == ["i cannot help with", "i'm unable to"]
    assert "note" in rep


def test_refusal_report_custom_phrases_and_nothing_answered() -> None:
    rows = [row("a", "Nope, not doing that."), row("b", "Done.")]
    assert refusal_report(rows)["refusals"] == 0
    assert refusal_report(rows, phrases=["not doing that"])["refusals"] == 1
    empty = refusal_report([row("a", ""), row("b", "<think>hm</think>")])
    assert empty["rate"] is None and empty["ci95"] is None and "no refusal rate" in empty["note"]
    with pytest.raises(TypeError):
        refusal_report(rows, phrases="i can't")
    with pytest.raises(ValueError, match="examples"):
        refusal_report(rows, examples=-1)


def test_longest_phrase_is_reported_and_nested_families_both_fire() -> None:
    rep = style_report([row("a", "As an AI language model, I cannot do that.", 1)])
    boiler = rep["markers"]["no_boilerplate"]["top_phrases"]
    assert boiler == [{"phrase": "as an ai language model", "rows": 1}]
    # A phrase of one family inside a phrase of another: each family still sees its own.
    rows = [row("a", "As an AI language model, no.")]
    style_markers(rows, phrases={"no_short": ["as an ai"], "no_long": ["an ai language model"]})
    assert rows[0]["markers"]["no_short"] == 0.0 and rows[0]["markers"]["no_long"] == 0.0


@pytest.mark.parametrize("n", [1, 2])
def test_the_notes_count_rows_in_their_number(n: int) -> None:
    one = n == 1
    rows = [row("t0", "Shipped.")] + [row(f"u{i}", "") for i in range(n)]
    assert refusal_report(rows)["note"].startswith(
        f"{'1 row' if one else f'{n} rows'} without a spoken reply {'is' if one else 'are'} "
        "left out of the rate"
    )
    graded = [row("t0", "Shipped.", 1.0)] if one else [row("t0", "Shipped.")]
    want = "1 graded answered row:" if one else "0 graded answered rows:"
    note = style_report(graded)["markers"]["no_hedging"]["corr_note"]
    assert note.startswith(f"{want} a correlation needs at least two"), note
