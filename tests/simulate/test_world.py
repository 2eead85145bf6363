"""The mock world: records, state, validation, faults, and the simulated person."""

from __future__ import annotations

import json
import random

import pytest
from pydantic import ValidationError

from wai_exp.simulate.spec import load_agent_spec
from wai_exp.simulate.world import _HURRY as HURRY
from wai_exp.simulate.world import RolloutWorld, WorldOptions, is_write_tool, resolve_patience
from wai_exp.simulate.writer import Situation, TemplateWriter

SPEC = load_agent_spec()
TOOLS = SPEC.tools


def situation(
    tool="issue_refund", stance="direct", world_state="exists", cond="ok", **extra
) -> Situation:
    entities = {
        "first": "Maria",
        "name": "Maria Chen",
        "email": "maria.chen@example.com",
        "order_id": "ORD-10482",
        "items": [
            {"product": "blender", "qty": 1, "price": 59.99},
            {"product": "toaster", "qty": 2, "price": 20.0},
        ],
        "total": 99.99,
        "status": "delivered",
        "shipped": True,
        "address": "12 Oak Street, Springfield",
        "new_address": "9 Elm Road, Milton",
        "amount": None,
        "reason": "the blender arrived damaged",
        "extra_orders": [
            {
                "order_id": "ORD-20001",
                "status": "delivered",
                "total": 15.0,
                "items": [],
                "placed_on": "2026-07-01",
            }
        ],
        "identifier": "order_id",
        **extra,
    }
    dims = {
        "tool": tool,
        "stance": stance,
        "world_state": world_state,
        "tool_condition": cond,
        "history": "fresh",
        "rule": None,
        "tier": "standard",
    }
    return Situation("sit-test", dims, ("Refund ORD-10482 please.",), entities)


def test_lookup_answers_from_the_seeded_record():
    w = RolloutWorld(situation(), TOOLS, fault_rate=0.0, seed=1)
    step = w.execute("lookup_order", {"order_id": "ORD-10482"}, call_id="c1")
    assert (
        step["kind"] == "tool"
        and step["tool_call_id"] == "c1"
        and step["status"] == "ok"
        and step["fault"] is None
    )
    res = step["result"]
    assert (
        res["total"] == 99.99
        and res["email"] == "maria.chen@example.com"
        and res["shipped"] is True
    )
    assert [i["product"] for i in res["items"]] == ["blender", "toaster"]
    acct = w.execute("lookup_account", {"email": "maria.chen@example.com"})["result"]
    assert acct["name"] == "Maria Chen" and sorted(acct["orders"]) == ["ORD-10482", "ORD-20001"]
    hits = w.execute("search_orders", {"email": "maria.chen@example.com"})["result"]
    assert hits["count"] == 2 and {o["order_id"] for o in hits["orders"]} == {
        "ORD-10482",
        "ORD-20001",
    }
    assert w.steps[0] is step and len(w.steps) == 3


def test_state_persists_a_second_refund_sees_the_first():
    w = RolloutWorld(situation(), TOOLS, fault_rate=0.0, seed=1)
    first = w.execute(
        "issue_refund", {"order_id": "ORD-10482", "amount": 99.99, "reason": "damaged"}
    )["result"]
    assert first["ok"] is True and first["status"] == "refunded" and first["amount"] == 99.99
    assert w.execute("lookup_order", {"order_id": "ORD-10482"})["result"]["status"] == "refunded"
    again = w.execute(
        "issue_refund", {"order_id": "ORD-10482", "amount": 99.99, "reason": "damaged"}
    )["result"]
    assert again["ok"] is False and again["error"] == "already_refunded"


def test_partial_refund_then_cancel_and_address_change():
    w = RolloutWorld(
        situation(tool="cancel_order", status="processing", shipped=False),
        TOOLS,
        fault_rate=0.0,
        seed=2,
    )
    part = w.execute("issue_refund", {"order_id": "ORD-10482", "amount": 40, "reason": "x"})[
        "result"
    ]
    assert part["status"] == "partially_refunded"
    upd = w.execute(
        "update_shipping_address", {"order_id": "ORD-10482", "address": "9 Elm Road, Milton"}
    )["result"]
    assert (
        upd["ok"]
        and w.execute("lookup_order", {"order_id": "ORD-10482"})["result"]["shipping_address"]
        == "9 Elm Road, Milton"
    )
    assert (
        w.execute(
            "update_shipping_address", {"order_id": "ORD-10482", "address": "9 Elm Road, Milton"}
        )["result"]["error"]
        == "unchanged"
    )
    assert (
        w.execute("cancel_order", {"order_id": "ORD-10482", "reason": "x"})["result"]["status"]
        == "cancelled"
    )
    assert (
        w.execute("cancel_order", {"order_id": "ORD-10482", "reason": "x"})["result"]["error"]
        == "already_cancelled"
    )


@pytest.mark.parametrize(
    ("tool", "call", "error"),
    [
        (
            "issue_refund",
            ("issue_refund", {"order_id": "ORD-10482", "amount": 5, "reason": "x"}),
            "already_refunded",
        ),
        (
            "cancel_order",
            ("cancel_order", {"order_id": "ORD-10482", "reason": "x"}),
            "already_cancelled",
        ),
        (
            "update_shipping_address",
            ("update_shipping_address", {"order_id": "ORD-10482", "address": "9 Elm Road, Milton"}),
            "unchanged",
        ),
        (
            "reset_password",
            ("reset_password", {"email": "maria.chen@example.com"}),
            "reset_already_sent",
        ),
    ],
)
def test_already_done_records_show_the_action_taken(tool, call, error):
    w = RolloutWorld(
        situation(tool=tool, world_state="already_done"), TOOLS, fault_rate=0.0, seed=3
    )
    order = w.execute("lookup_order", {"order_id": "ORD-10482"})["result"]
    acct = w.execute("lookup_account", {"email": "maria.chen@example.com"})["result"]
    shown = {
        "issue_refund": order["status"] == "refunded" and order["refunded_amount"] == 99.99,
        "cancel_order": order["status"] == "cancelled",
        "update_shipping_address": order["shipping_address"] == "9 Elm Road, Milton",
        "reset_password": acct["password_reset_pending"] is True,
    }[tool]
    assert shown
    assert w.execute(*call)["result"]["error"] == error


def test_missing_records_answer_not_found():
    w = RolloutWorld(situation(world_state="missing"), TOOLS, fault_rate=0.0, seed=4)
    assert w.execute("lookup_order", {"order_id": "ORD-10482"})["result"]["error"] == "not_found"
    assert (
        w.execute("issue_refund", {"order_id": "ORD-10482", "amount": 1.0, "reason": "x"})[
            "result"
        ]["error"]
        == "not_found"
    )
    w2 = RolloutWorld(
        situation(tool="reset_password", world_state="missing", identifier="email"),
        TOOLS,
        fault_rate=0.0,
        seed=4,
    )
    assert (
        w2.execute("lookup_account", {"email": "maria.chen@example.com"})["result"]["error"]
        == "not_found"
    )
    assert (
        w2.execute("search_orders", {"email": "maria.chen@example.com"})["result"]["orders"] == []
    )
    assert (
        w2.execute("reset_password", {"email": "maria.chen@example.com"})["result"]["error"]
        == "not_found"
    )


def test_bad_calls_are_error_results_not_exceptions():
    w = RolloutWorld(situation(), TOOLS, fault_rate=1.0, seed=5)
    missing = w.execute("issue_refund", {"order_id": "ORD-10482", "amount": 5})
    assert missing["status"] == "invalid" and missing["fault"] is None
    assert "missing required argument 'reason'" in missing["result"]["message"]
    wrong = w.execute("issue_refund", {"order_id": "ORD-10482", "amount": "lots", "reason": "x"})
    assert wrong["status"] == "invalid" and "must be number" in wrong["result"]["message"]
    extra = w.execute("lookup_order", {"order_id": "ORD-10482", "pin": "1"})
    assert extra["status"] == "invalid" and "unknown argument 'pin'" in extra["result"]["message"]
    unknown = w.execute("delete_everything", {})
    assert unknown["status"] == "invalid" and "lookup_order" in unknown["result"]["message"]
    assert w.fired == []  # invalid calls never reach the fault
    assert len(w.steps) == 4


def test_fault_rate_zero_never_fires_and_one_always_fires_on_the_target():
    for seed in range(200):
        w = RolloutWorld(situation(cond="timeout"), TOOLS, fault_rate=0.0, seed=seed)
        assert (
            w.execute("issue_refund", {"order_id": "ORD-10482", "amount": 1.0, "reason": "x"})[
                "status"
            ]
            == "ok"
        )
        assert w.fired == []
    w = RolloutWorld(situation(cond="error"), TOOLS, fault_rate=1.0, seed=0)
    w.execute("lookup_order", {"order_id": "ORD-10482"})  # not the target: never faults
    for _ in range(20):
        step = w.execute("issue_refund", {"order_id": "ORD-10482", "amount": 1.0, "reason": "x"})
        assert (
            step["status"] == step["fault"] == "error"
            and step["result"]["error"] == "internal_error"
        )
    assert w.steps[0]["status"] == "ok"
    assert w.fired == [{"tool": "issue_refund", "mode": "error", "step": i} for i in range(1, 21)]
    # A fault changes nothing: the order was never refunded.
    assert w.execute("lookup_order", {"order_id": "ORD-10482"})["result"]["status"] == "delivered"
    assert w.fault_plan == {"tool": "issue_refund", "mode": "error"}
    assert RolloutWorld(situation(cond="ok"), TOOLS, fault_rate=1.0).fault_plan is None


def test_fault_modes_and_rate():
    timeout = RolloutWorld(situation(cond="timeout"), TOOLS, fault_rate=1.0).execute(
        "issue_refund", {"order_id": "ORD-10482", "amount": 1.0, "reason": "x"}
    )
    assert "timed out" in timeout["result"]["message"]
    malformed = RolloutWorld(situation(cond="malformed"), TOOLS, fault_rate=1.0).execute(
        "issue_refund", {"order_id": "ORD-10482", "amount": 1.0, "reason": "x"}
    )
    assert isinstance(malformed["result"], str)
    with pytest.raises(ValueError):
        json.loads(malformed["result"])
    fired = sum(
        bool(
            RolloutWorld(situation(cond="timeout"), TOOLS, fault_rate=0.3, seed=s).execute(
                "issue_refund", {"order_id": "ORD-10482", "amount": 1.0, "reason": "x"}
            )["fault"]
        )
        for s in range(3000)
    )
    assert abs(fired / 3000 - 0.3) < 0.03  # sd 0.008
    assert (
        RolloutWorld(situation(cond="timeout"), TOOLS).fault_rate
        == WorldOptions().default_fault_rate
    )
    with pytest.raises(ValueError, match="fault_rate"):
        RolloutWorld(situation(), TOOLS, fault_rate=1.5)


def test_custom_fault_mode_needs_a_builder():
    with pytest.raises(ValidationError, match="fault_builders"):
        WorldOptions(fault_modes=("timeout", "rate_limited"))
    opts = WorldOptions(
        fault_modes=("rate_limited",),
        default_fault_mode="rate_limited",
        fault_builders={"rate_limited": lambda tool, args, rng: {"error": "429", "tool": tool}},
    )
    step = RolloutWorld(
        situation(cond="rate_limited"), TOOLS, fault_rate=1.0, options=opts
    ).execute("issue_refund", {"order_id": "ORD-10482", "amount": 1.0, "reason": "x"})
    assert step["fault"] == "rate_limited" and step["result"] == {
        "error": "429",
        "tool": "issue_refund",
    }


def test_world_options_reject_typos_and_bad_values():
    with pytest.raises(ValidationError) as err:
        WorldOptions(fault_rate=0.5)
    assert "fault_rate" in str(err.value) and "extra" in str(err.value).lower()
    with pytest.raises(ValidationError, match="default_fault_mode"):
        WorldOptions(default_fault_mode="explode")
    with pytest.raises(ValidationError):
        WorldOptions(exists_share=1.5)
    with pytest.raises(ValidationError, match="first_names must not be empty"):
        WorldOptions(first_names=())
    with pytest.raises(TypeError, match="WorldOptions"):
        RolloutWorld(situation(), TOOLS, options=3)


def test_same_seed_same_world_and_no_global_rng():
    def fired(seed):
        w = RolloutWorld(situation(cond="timeout"), TOOLS, fault_rate=0.5, seed=seed)
        return [
            w.execute("issue_refund", {"order_id": "ORD-10482", "amount": 1.0, "reason": "x"})[
                "status"
            ]
            for _ in range(30)
        ]

    random.seed(123)
    state = random.getstate()
    assert fired(9) == fired(9)
    assert fired(9) != fired(10)
    assert random.getstate() == state


QUESTION = "Could you give me the order number?"


def test_ask_user_supplies_the_missing_identifier_and_records_it():
    w = RolloutWorld(situation(stance="vague"), TOOLS, seed=1)
    answer = w.ask_user(QUESTION)
    assert "ORD-10482" in answer
    assert w.steps[-1] == {"kind": "user", "content": answer}
    email = w.ask_user("Which email is the account under?")
    assert email is None or "maria.chen@example.com" in email
    assert RolloutWorld(situation(), TOOLS, seed=1).ask_user(
        "Shall I go ahead with the refund?"
    ) in ("Yes, please go ahead.", "Yes please.", "Go ahead, thanks.", "Yes, that's right.")


def _walkaways(patience, n=4000, questions=4):
    left_at = [0] * (questions + 1)
    for seed in range(n):
        w = RolloutWorld(situation(), TOOLS, seed=seed, patience=patience, avg_turns=40)
        for q in range(1, questions + 1):
            if w.ask_user(QUESTION) is None:
                left_at[q] += 1
                break
    return left_at


@pytest.mark.parametrize(
    ("level", "second", "later"),
    [
        ("normal", 0.35, 0.60),
        ("short", 0.60, 0.90),
        ({"second": 0.2, "later": 0.5}, 0.2, 0.5),
        ((0.1, 0.3), 0.1, 0.3),
    ],
)
def test_patience_walk_away_rates_match_the_spec(level, second, later):
    n = 4000
    left = _walkaways(level, n)
    assert left[1] == 0  # the first question is always answered
    assert abs(left[2] / n - second) < 0.03  # binomial sd <= 0.008
    stayed = n - left[2]
    assert abs(left[3] / stayed - later) < 0.04
    stayed -= left[3]
    if stayed > 200:
        assert abs(left[4] / stayed - later) < 0.08


def test_endless_patience_never_walks_away_and_levels_are_checked():
    assert _walkaways("endless", 300, 6) == [0] * 7
    with pytest.raises(ValueError, match="endless"):
        resolve_patience("lazy")
    with pytest.raises(ValueError, match="'second' and 'later'"):
        resolve_patience({"second": 0.1})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        resolve_patience((0.1, 2.0))


def test_the_person_speaks_at_most_avg_turns_over_two_times():
    w = RolloutWorld(situation(), TOOLS, seed=0, patience="endless", avg_turns=6)
    answers = [w.ask_user(QUESTION) for _ in range(4)]
    # 6 // 2 = 3 lines: the opening ask and two answers.
    assert answers[0] and answers[1] and answers[2] is None and answers[3] is None
    # Out of turns is not walking away: the cap has its own ended_by.
    assert w.left and w.ended_by == "max_turns"


def test_patience_shows_in_the_persons_words_even_at_the_first_question():
    def first_lines(patience):
        return [
            RolloutWorld(situation(), TOOLS, seed=s, patience=patience).ask_user(QUESTION)
            for s in range(400)
        ]

    def hurried(lines):
        return sum(any(h in line for h in HURRY) for line in lines) / len(lines)

    # The chance of a hurried line is the chance of walking away at the next question.
    assert hurried(first_lines("endless")) == 0.0
    assert abs(hurried(first_lines("normal")) - 0.35) < 0.08
    assert abs(hurried(first_lines("short")) - 0.60) < 0.08
    # The line itself is still the answer: the order id is in every one of them.
    assert all("ORD-10482" in line for line in first_lines("short"))


def test_a_walk_away_says_user_left_and_a_human_tool_gets_the_persons_answer():
    w = RolloutWorld(situation(), TOOLS, seed=0, patience=(0.0, 1.0), avg_turns=40)
    assert w.ask_user(QUESTION) and w.ask_user(QUESTION)
    assert w.ask_user(QUESTION) is None and w.ended_by == "user_left"
    tools = [*TOOLS, {"type": "function", "function": {"name": "ask_user", "parameters": {
        "type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}}]  # fmt: skip
    w = RolloutWorld(situation(stance="vague"), tools, seed=1, patience="endless")
    step = w.execute("ask_user", {"question": QUESTION})
    assert step["status"] == "ok" and "ORD-10482" in step["result"]["answer"]
    assert w.user_turns == 2 and w.ended_by is None


def test_the_person_may_leave_when_asked_what_they_cannot_know():
    gone = RolloutWorld(situation(), TOOLS, seed=0, options={"unknown_ask_leave": 1.0}).ask_user(
        "What is your loyalty PIN?"
    )
    assert gone is None
    stays = RolloutWorld(situation(), TOOLS, seed=0, options={"unknown_ask_leave": 0.0}).ask_user(
        "What is your loyalty PIN?"
    )
    assert stays and "ORD-" not in stays


def test_user_temperature_zero_gives_the_plainest_line():
    lines = {
        RolloutWorld(situation(), TOOLS, seed=s, user_temperature=0.0, patience="endless").ask_user(
            QUESTION
        )
        for s in range(30)
    }
    assert lines == {"It's ORD-10482."}
    spread = {
        RolloutWorld(situation(), TOOLS, seed=s, user_temperature=2.0).ask_user(QUESTION)
        for s in range(60)
    }
    assert len(spread) > 1


def test_generic_tools_answer_from_their_schema():
    tools = [
        {
            "name": "get_booking",
            "parameters": {
                "type": "object",
                "properties": {"booking_id": {"type": "string"}},
                "required": ["booking_id"],
            },
        },
        {
            "name": "cancel_booking",
            "parameters": {
                "type": "object",
                "properties": {"booking_id": {"type": "string"}},
                "required": ["booking_id"],
            },
        },
    ]
    w = TemplateWriter(tools, "", seed=0)
    sit = next(
        s
        for s in iter(w.next_situation, None)
        if s.dims["tool"] == "cancel_booking" and s.dims["world_state"] == "already_done"
    )
    key = sit.entities["key_value"]
    world = RolloutWorld(sit, tools, fault_rate=0.0, seed=0)
    seen = world.execute("get_booking", {"booking_id": key})["result"]
    assert seen["found"] is True and seen["status"] == "cancel booking already done"
    assert world.execute("cancel_booking", {"booking_id": key})["result"]["error"] == "already_done"
    missing = next(
        s
        for s in iter(w.next_situation, None)
        if s.dims["tool"] == "get_booking" and s.dims["world_state"] == "missing"
    )
    mw = RolloutWorld(missing, tools, fault_rate=0.0, seed=0)
    assert (
        mw.execute("get_booking", {"booking_id": missing.entities["key_value"]})["result"]["error"]
        == "not_found"
    )
    ok = RolloutWorld(sit, tools, fault_rate=0.0, seed=0).execute(
        "cancel_booking", {"booking_id": "BOO-00001"}
    )["result"]
    assert ok["ok"] is True and ok["booking_id"] == "BOO-00001"


def test_read_verbs_decide_write_tools():
    assert not is_write_tool("lookup_order") and is_write_tool("issue_refund")
    assert (
        not is_write_tool("getUser")
        and not is_write_tool("search-orders")
        and not is_write_tool("list_items")
    )
    assert is_write_tool("book_flight") and is_write_tool("getaway_plan") is True


def test_a_tool_that_only_shares_a_support_name_is_answered_generically():
    from wai_exp.simulate.world import is_support_tool

    mine = [
        {
            "name": "lookup_order",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
            },
        }
    ]
    assert not is_support_tool(mine[0])
    assert all(is_support_tool(t["function"]) for t in TOOLS)
    w = TemplateWriter(mine, "", seed=0)
    sit = next(s for s in iter(w.next_situation, None) if s.dims["world_state"] == "exists")
    assert sit.entities["key_arg"] == "id"
    res = RolloutWorld(sit, mine, fault_rate=0.0).execute(
        "lookup_order", {"id": sit.entities["key_value"]}
    )
    assert res["status"] == "ok" and res["result"]["found"] is True


def test_a_refund_without_an_amount_refunds_what_is_left():
    optional = [
        {
            "name": "issue_refund",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string"},
                    "amount": {"type": "number"},
                    "reason": {"type": "string"},
                },
                "required": ["order_id"],
            },
        }
    ]
    res = RolloutWorld(situation(), optional, fault_rate=0.0).execute(
        "issue_refund", {"order_id": "ORD-10482"}
    )["result"]
    assert res["ok"] and res["amount"] == 99.99 and res["status"] == "refunded"


def test_a_refused_world_never_quotes_the_value_it_was_given():
    """The Python API's refusal is pydantic's text, which quoted the input: a command line
    with a token (or an env/headers mapping) came back whole in the message."""
    import secrets

    from wai_exp import simulate

    token = "Z" + secrets.token_hex(10)
    for world in (
        {"kind": "mcp", "command": f"TOKEN={token} python -m my_server"},
        {"kind": "mcp", "command": "python -m my_server", "headers": f"X-Key: {token}"},
    ):
        with pytest.raises(ValueError, match=r"advanced\['world'\] is invalid") as err:
            simulate(budget=2, advanced={"world": world})
        assert token not in str(err.value) and token not in str(err.value.__cause__)
