"""Stock presence markers: the same phrase families as score.grade.style, read the other way up."""

from __future__ import annotations

import copy

import pytest

from wai_exp.score.grade import style
from wai_exp.score.grade.markers import (
    behavioral_markers,
    format_markers,
    mark_rows,
    row_markers,
    stock_markers,
)

STOCK = ("boilerplate", "hedging", "sycophancy", "refusal_phrases", "brand_voice")


def row(task: str, text: str, **kw) -> dict:
    return {"scenario_id": task, "prompt": f"ask {task}", "final_text": text, **kw}


def test_stock_markers_are_style_families_without_the_prefix() -> None:
    stock = stock_markers()
    assert set(STOCK) <= set(stock)
    assert stock["hedging"] == style.STYLE_MARKERS["no_hedging"]
    assert stock["refusal_phrases"] == style.REFUSAL_PHRASES


def test_one_source_of_truth_a_new_style_family_is_a_new_stock_marker(monkeypatch) -> None:
    monkeypatch.setitem(style.STYLE_MARKERS, "no_emoji", ("cheers",))
    assert row_markers(row("a", "Cheers!"))["emoji"] == 1


def test_row_markers_presence_polarity_is_the_complement_of_style() -> None:
    r = row("a", "It's important to note that I can't assist with refunds. Hope this helps!")
    got = row_markers(r)
    assert got == {
        "boilerplate": 1,
        "hedging": 1,
        "sycophancy": 0,
        "refusal_phrases": 1,
        "brand_voice": 0,
    }
    stamped = style.style_markers([copy.deepcopy(r)])[0]["markers"]
    for name, present in got.items():
        assert stamped["no_" + name] == 1.0 - present


def test_row_markers_names_subset_and_unknown_name() -> None:
    r = row("a", "Great question!")
    assert row_markers(r, names=["sycophancy"]) == {"sycophancy": 1}
    assert row_markers(row("a", "")) == dict.fromkeys(STOCK, 0)
    with pytest.raises(ValueError, match="sycophancy"):  # the known names are listed
        row_markers(r, names=["flattery"])


def test_behavioral_markers_rates_over_all_rollouts_and_deprecated() -> None:
    rows = [
        row("a", "Great question! Generally speaking, yes."),
        row("b", "Great question."),
        row("c", "Order 5 shipped."),
        row("d", ""),  # no reply trips nothing but is a rollout
    ]
    with pytest.deprecated_call():
        rates = behavioral_markers(rows)
    assert rates["sycophancy"] == pytest.approx(2 / 4)
    assert rates["hedging"] == pytest.approx(1 / 4)
    assert rates["boilerplate"] == 0.0
    with pytest.deprecated_call():
        assert behavioral_markers([]) == {}


def test_mark_rows_copies_keeps_markers_and_overwrites_only_stock_names() -> None:
    rows = [
        row("a", "We apologize for any inconvenience.", markers={"grounded": 1.0, "hedging": 1}),
        row("b", "Done."),
    ]
    before = copy.deepcopy(rows)
    extra = {"long": lambda r: float(len(r["final_text"]) > 10), "skip": lambda r: None}
    with pytest.deprecated_call():
        out = mark_rows(rows, extra=extra)
    assert rows == before  # inputs and their markers dicts untouched
    assert out[0] is not rows[0] and out[0]["markers"] is not rows[0]["markers"]
    m = out[0]["markers"]
    assert m["grounded"] == 1.0  # another name: kept
    assert m["hedging"] == 0  # stale stock value: overwritten by the detector
    assert m["brand_voice"] == 1
    assert m["long"] == 1.0 and out[1]["markers"]["long"] == 0.0
    assert "skip" not in m  # None = unmeasured, not stamped
    with pytest.deprecated_call():
        only = mark_rows(rows, names=["brand_voice"])
    assert only[0]["markers"] == {"grounded": 1.0, "hedging": 1, "brand_voice": 1}


def test_mark_rows_rejects_bad_extra() -> None:
    rows = [row("a", "Done.")]
    with pytest.deprecated_call(), pytest.raises(ValueError, match="hedging"):
        mark_rows(rows, extra={"hedging": lambda r: 1.0})
    with pytest.deprecated_call(), pytest.raises(TypeError, match="bad"):
        mark_rows(rows, extra={"bad": lambda r: "yes"})


def test_format_markers_highest_rate_first() -> None:
    text = format_markers({"hedging": 0.25, "sycophancy": 0.5, "boilerplate": 0.0, "x": None})
    lines = text.splitlines()
    assert [ln.split()[0] for ln in lines] == ["sycophancy", "hedging", "boilerplate", "x"]
    assert "50.0%" in lines[0] and "25.0%" in lines[1] and lines[3].endswith("n/a")
    assert "no markers" in format_markers({})
