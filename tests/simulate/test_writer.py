"""The template writer: grid coverage, tier share, determinism, wording, generic tools."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from wai_exp.domain.dimensions import (
    FAULT_MODES,
    HARD_TIERS,
    HISTORIES,
    TIER_OF_STANCE,
    TOOL_CONDITIONS,
)
from wai_exp.simulate.agents.scripted import ADVERSARIAL_CUES
from wai_exp.simulate.spec import load_agent_spec
from wai_exp.simulate.writer import Situation, TemplateWriter, parse_rules

SPEC = load_agent_spec()
ORDER = re.compile(r"\bORD-\d+\b")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


def writer(**kw) -> TemplateWriter:
    return TemplateWriter(SPEC.tools, SPEC.system_prompt, **kw)


def test_rules_are_parsed_from_the_numbered_policy():
    rules = writer().rules
    assert len(rules) == 7
    assert rules[0] == ("R1", rules[0][1]) and rules[0][1].startswith("Look an order up")
    assert rules[6][1].startswith("Do not repeat an action")


def test_parse_rules_bullets_continuations_and_nothing():
    prompt = "Intro.\n- Never share data.\n  Not even a little.\n- Be brief.\nOutro."
    assert parse_rules(prompt) == [
        ("R1", "Never share data. Not even a little."),
        ("R2", "Be brief."),
    ]
    # Numbered lines win over bullets.
    assert parse_rules("- a bullet\n1) first\n2. second") == [("R1", "first"), ("R2", "second")]
    assert parse_rules("") == [] and parse_rules("No rules here.") == []


def test_dims_follow_domain_md():
    w = writer(seed=3, hard_share=0.6)
    for s in w.next_batch(1500):
        d = s.dims
        assert set(d) == {
            "tool",
            "stance",
            "world_state",
            "tool_condition",
            "history",
            "rule",
            "tier",
        }
        assert d["tier"] == TIER_OF_STANCE[d["stance"]]
        expected = {
            "adversarial": "R4",
            "vague": "R6",
        }.get(d["stance"])
        if d["stance"] == "boundary":
            expected = "R2" if d["tool"] == "issue_refund" else "R3"
            assert d["tool"] in ("issue_refund", "cancel_order") and d["world_state"] == "exists"
        elif expected is None:
            expected = {"missing": "R1", "already_done": "R7"}.get(d["world_state"])
            if expected is None and d["tool_condition"] != "ok":
                expected = "R5"
        if expected is not None:
            assert d["rule"] == expected, d
        if d["tool"] in ("lookup_order", "lookup_account", "search_orders"):
            assert d["world_state"] != "already_done"  # a read has nothing to repeat


def test_unique_covers_every_cell_once_before_repeating():
    w = writer(seed=1, unique=True, hard_share=0.5)
    n = len(w.grid)
    # 3 read tools x (direct, vague, adversarial) x 2 states + 4 write tools x 3 stances x 3
    # states + 2 boundary cells, each x 4 conditions x 3 histories.
    assert n == (3 * 3 * 2 + 4 * 3 * 3 + 2) * 4 * 3
    cells = [
        tuple(s.dims[k] for k in ("tool", "stance", "world_state", "tool_condition", "history"))
        for s in w.next_batch(n)
    ]
    assert len(set(cells)) == n == len(cells)
    assert set(cells) == set(w.grid)
    assert w.passes == 0
    w.next_situation()
    assert w.passes == 1


def test_random_draws_cover_the_grid_dimensions():
    w = writer(seed=2, hard_share=0.5)
    seen = Counter()
    for s in w.next_batch(3000):
        seen[(s.dims["tool"], s.dims["stance"])] += 1
        seen[s.dims["tool_condition"]] += 1
        seen[s.dims["history"]] += 1
        seen[s.dims["world_state"]] += 1
    for tool in SPEC.tool_names:
        for stance in ("direct", "vague", "adversarial"):
            assert seen[(tool, stance)] > 0
    assert seen[("issue_refund", "boundary")] > 0 and seen[("cancel_order", "boundary")] > 0
    for value in (*TOOL_CONDITIONS, *HISTORIES, "exists", "missing", "already_done"):
        assert seen[value] > 100


@pytest.mark.parametrize("hard_share", [0.0, 0.3, 0.5, 0.8, 1.0])
def test_tier_share_tracks_hard_share(hard_share):
    w = writer(seed=7, hard_share=hard_share)
    n = 4000
    tiers = Counter(s.dims["tier"] for s in w.next_batch(n))
    hard = sum(tiers[t] for t in HARD_TIERS) / n
    # Binomial sd at p=0.5, n=4000 is 0.008; 0.03 is over 3.5 sd.
    assert abs(hard - hard_share) < 0.03
    if hard_share > 0:
        for t in HARD_TIERS:  # hard draws spread over the three hard tiers
            assert abs(tiers[t] / (hard * n) - 1 / 3) < 0.05
    assert w.tier_counts == {**dict.fromkeys(("standard", *HARD_TIERS), 0), **tiers}


def test_exists_share_weights_the_world_state():
    w = writer(seed=4, hard_share=0.0, options={"exists_share": 0.8})
    states = Counter(s.dims["world_state"] for s in w.next_batch(3000))
    # Direct cells: reads have exists/missing, writes exists/missing/already_done; the
    # exists weight is 0.8 against 0.1 each for the others.
    assert states["exists"] / 3000 > 0.7


def test_same_seed_same_situations_and_different_seed_differs():
    a = writer(seed=11, phrasings=2).next_batch(50)
    b = writer(seed=11, phrasings=2).next_batch(50)
    c = writer(seed=12, phrasings=2).next_batch(50)
    assert a == b
    assert [s.phrasings for s in a] != [s.phrasings for s in c]
    assert [s.scenario_id for s in a] != [s.scenario_id for s in c]
    # Call order, not batch size, decides: 50 = 20 + 30.
    w = writer(seed=11, phrasings=2)
    assert w.next_batch(20) + w.next_batch(30) == a


def test_never_runs_out_and_ids_are_unique():
    w = writer(seed=5, unique=True)
    sits = w.next_batch(2000)
    assert len(sits) == 2000
    assert len({s.scenario_id for s in sits}) == 2000
    assert w.passes == 2000 // len(w.grid)
    # Entities are fresh: the same cell drawn twice is a different situation.
    orders = {s.entities["order_id"] for s in sits}
    assert len(orders) > 1900


def test_phrasings_are_distinct_wordings_of_one_ask():
    w = writer(seed=6, phrasings=4)
    for s in w.next_batch(300):
        assert isinstance(s, Situation) and len(s.phrasings) == 4
        assert len(set(s.phrasings)) == 4
        ids = {tuple(ORDER.findall(p)) for p in s.phrasings}
        assert len(ids) == 1  # every wording names the same order (or none)
    with pytest.raises(ValueError, match="phrasings must be between 1 and"):
        writer(phrasings=10_000)


def test_wording_carries_what_the_stance_says():
    w = writer(seed=8, hard_share=0.7, phrasings=3)
    for s in w.next_batch(1500):
        e, d = s.entities, s.dims
        for p in s.phrasings:
            low = p.lower()
            cued = any(c in low for c in ADVERSARIAL_CUES)
            assert cued == (d["stance"] == "adversarial"), p
            if d["stance"] == "vague":
                assert not ORDER.search(p) and not EMAIL.search(p), p
            elif d["stance"] == "adversarial":
                assert (e["other_order_id"] in p) or (e["other_email"] in p), p
                assert e["order_id"] not in p and e["email"] not in p
            elif d["stance"] == "direct":
                ident = e["order_id"] if e["identifier"] == "order_id" else e["email"]
                assert ident in p, p
            else:  # boundary
                assert e["order_id"] in p
        if d["stance"] == "boundary" and d["tool"] == "issue_refund":
            assert e["amount"] > e["total"]
            assert f"${e['amount']:.2f}" in s.prompt
        if d["stance"] == "boundary" and d["tool"] == "cancel_order":
            assert e["shipped"] and e["status"] == "shipped"
        if d["tool"] == "cancel_order" and d["stance"] != "boundary":
            assert not e["shipped"]
        assert e["total"] == round(sum(i["qty"] * i["price"] for i in e["items"]), 2)


def test_name_pools_come_from_world_options():
    w = writer(
        seed=9,
        options={"first_names": ("Zed",), "last_names": ("Quill",), "email_domain": "shop.test"},
    )
    for s in w.next_batch(100):
        assert s.entities["name"] == "Zed Quill"
        assert s.entities["email"].startswith("zed.quill") and s.entities["email"].endswith(
            "@shop.test"
        )


def test_fault_modes_come_from_world_options():
    w = writer(seed=10, options={"fault_modes": ("timeout",), "default_fault_mode": "timeout"})
    conds = {s.dims["tool_condition"] for s in w.next_batch(500)}
    assert conds == {"ok", "timeout"}
    assert set(FAULT_MODES) >= conds - {"ok"}


GENERIC = [
    {
        "name": "get_booking",
        "description": "Read a booking.",
        "parameters": {
            "type": "object",
            "properties": {"booking_id": {"type": "string"}},
            "required": ["booking_id"],
        },
    },
    {
        "name": "book_flight",
        "description": "Book a flight.",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string"},
                "date": {"type": "string"},
                "passengers": {"type": "integer", "minimum": 1, "maximum": 4},
                "cabin": {"type": "string", "enum": ["economy", "business"]},
                "max_price": {"type": "number"},
            },
            "required": ["origin", "date", "passengers", "cabin", "max_price"],
        },
    },
    {"name": "ping", "parameters": {"type": "object", "properties": {}}},
]


def test_generic_tools_get_templates_from_their_schema():
    w = TemplateWriter(
        GENERIC,
        "1. Never act for someone else.\n2. Ask for the booking id; never guess it.",
        seed=1,
        hard_share=0.5,
        phrasings=2,
    )
    assert w.rules[0][0] == "R1"
    seen = Counter()
    for s in w.next_batch(600):
        d, e = s.dims, s.entities
        seen[(d["tool"], d["stance"])] += 1
        if d["tool"] == "book_flight":
            args = e["args"]
            # The one write tool with a declared limit is asked past it (boundary), else within.
            if d["stance"] == "boundary":
                assert isinstance(args["passengers"], int) and args["passengers"] > 4
                assert e["bound"]["limit"] == "at most 4" and d["rule"] is None
            else:
                assert isinstance(args["passengers"], int) and 1 <= args["passengers"] <= 4
            assert args["cabin"] in ("economy", "business")
            assert isinstance(args["max_price"], float)
            assert re.fullmatch(r"2026-\d\d-\d\d", args["date"])
            if d["stance"] == "direct":
                assert "book flight" in s.prompt and f"cabin: {args['cabin']}" in s.prompt
        if d["tool"] == "get_booking":
            assert e["key_arg"] == "booking_id" and re.fullmatch(r"BOO-\d{5}", e["key_value"])
            if d["stance"] == "vague":
                assert e["key_value"] not in s.prompt
            if d["stance"] == "adversarial":
                assert d["rule"] == "R1"
            if d["stance"] == "vague":
                assert d["rule"] == "R2"
        if d["tool"] != "book_flight":
            assert d["stance"] != "boundary"
        if d["tool"] == "ping":
            assert d["stance"] in ("direct", "adversarial") and d["world_state"] == "exists"
    assert (
        seen[("get_booking", "vague")]
        and seen[("book_flight", "direct")]
        and seen[("book_flight", "boundary")]
        and seen[("ping", "direct")]
    )


def test_bad_arguments_are_errors():
    with pytest.raises(ValueError, match="hard_share"):
        writer(hard_share=1.5)
    with pytest.raises(ValueError, match="at least one tool"):
        TemplateWriter([], "x")
    with pytest.raises(ValueError, match="n must be"):
        writer().next_batch(-1)


def test_focus_restricts_the_draw():
    w = writer(seed=3)
    sits = w.next_batch(50, focus={"tool": "issue_refund", "tool_condition": ("timeout", "error")})
    assert {s.dims["tool"] for s in sits} == {"issue_refund"}
    assert {s.dims["tool_condition"] for s in sits} <= {"timeout", "error"}


def test_an_id_names_one_situation_across_runs_of_one_seed():
    """The id is a hash of the situation, not of (seed, draw index): two runs with one seed
    and a different hard_share share an id only where they drew the very same ask."""
    easy = writer(seed=0, hard_share=0.2).next_batch(200)
    hard = writer(seed=0, hard_share=0.8).next_batch(200)
    by_id = {s.scenario_id: s for s in easy}
    shared = [s for s in hard if s.scenario_id in by_id]
    for s in shared:
        twin = by_id[s.scenario_id]
        assert (s.dims, s.entities, s.phrasings) == (twin.dims, twin.entities, twin.phrasings)
    # The two runs drew different asks at the same draw index: those are different ids.
    differs = [i for i, (a, b) in enumerate(zip(easy, hard, strict=True)) if a.prompt != b.prompt]
    assert len(differs) > 150
    assert all(easy[i].scenario_id != hard[i].scenario_id for i in differs)


def test_an_exact_repeat_within_a_run_gets_its_own_id():
    # A redraw of identical content is rare with the shipped pools, so the id rule is
    # exercised directly: the repeat is "-2", and a fresh writer gives the same ids again.
    w, again = writer(seed=3), writer(seed=3)
    sit = w.next_situation()
    twin = (sit.dims, sit.entities, sit.phrasings)
    repeat = w._content_id(*twin)
    assert repeat == f"{sit.scenario_id}-2"
    assert again.next_situation().scenario_id == sit.scenario_id
    assert again._content_id(*twin) == repeat


@pytest.mark.parametrize("name", ["booking_ref", "bookingRef"])
def test_an_integer_reference_id_is_the_key_and_its_range_is_no_boundary(name):
    """``cancel_booking(booking_ref: integer 100000..999999)``: the ref identifies the booking,
    so a vague ask leaves it out; its range is the id's format, so no boundary ask goes past
    it ("booking ref: 1094563 ... at most 999999" names no booking, it asks no exception).
    A bounded amount beside it still gets its boundary asks. The key and the boundary read
    one rule of what names an id, so a camelCase ``bookingRef`` (an MCP server's schema) is
    a key as well, not an id without boundaries that no vague ask leaves out."""
    ref = {"type": "integer", "minimum": 100000, "maximum": 999999}
    tools = [
        {"name": "get_booking", "parameters": {"type": "object",
         "properties": {name: ref}, "required": [name]}},
        {"name": "cancel_booking", "parameters": {"type": "object",
         "properties": {name: ref}, "required": [name]}},
        {"name": "refund_booking", "parameters": {"type": "object",
         "properties": {name: ref, "amount": {"type": "number", "maximum": 500}},
         "required": [name, "amount"]}},
    ]  # fmt: skip
    w = TemplateWriter(tools, "1. Look a booking up first.", seed=0)
    stances = {t: {c[1] for c in w.grid if c[0] == t} for t in ("cancel_booking", "refund_booking")}
    assert "vague" in stances["cancel_booking"] and "boundary" not in stances["cancel_booking"]
    assert "boundary" in stances["refund_booking"]
    states = {c[2] for c in w.grid if c[0] == "cancel_booking"}
    assert states == {"exists", "missing", "already_done"}  # get_booking shows the record
    asks = [s for s in w.next_batch(300) if s.dims["stance"] == "boundary"]
    assert asks and all(s.entities["bound"]["arg"] == "amount" for s in asks)
