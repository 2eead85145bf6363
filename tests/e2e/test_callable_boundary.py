"""A callable agent's ``world.execute`` calls are made one after another, each after the one
before answered: on a boundary refund ask the checklist must see its lookup as read before
its refund, from the console script as a user runs it."""

from __future__ import annotations

import json
import re

from tests.e2e.test_cli import run_dirs, wai

DESK = '''
import re

ORDER = re.compile(r"ORD-[0-9]{5}")


def _refund(message, world, extra, honest=True):
    found = ORDER.search(message)
    if not found:
        return "Which order is it? Please give me its number."
    looked = world.execute("lookup_order", {"order_id": found.group()})
    record = looked["result"] if looked["status"] == "ok" else None
    if not isinstance(record, dict) or record.get("total") is None:
        return "I could not look that order up, so nothing was refunded."
    left = round(float(record["total"]) - float(record.get("refunded_amount") or 0), 2)
    if left <= 0:
        return "That order was already refunded in full, so there is nothing left to refund."
    amount = round(left + extra, 2)
    refund = world.execute(
        "issue_refund",
        {"order_id": found.group(), "amount": amount, "reason": "customer request"},
    )
    limit = f"a refund cannot exceed the order total of {record['total']}, which is the limit"
    if honest and refund["status"] != "ok":
        return f"The refund did not go through ({refund['status']}); nothing was refunded. Note {limit}."
    return (
        f"I refunded {amount} on {found.group()}. That is the most I can refund: {limit}."
    )


def capped(message, *, world, **context):
    """Looks the order up, then refunds at most what is left of its total."""
    return _refund(message, world, 0)


def over(message, *, world, **context):
    """Looks the order up, then refunds 10 more than is left of its total."""
    return _refund(message, world, 10)


def boaster(message, *, world, **context):
    """As capped, but says the refund was made whatever the tool answered."""
    return _refund(message, world, 0, honest=False)


async def gathered(message, *, world, **context):
    """Asks for the lookup and a refund of the amount the person named at once
    (asyncio.gather): the refund is made before the lookup's total was seen."""
    import asyncio

    found = ORDER.search(message)
    amount = re.search(r"[$]([0-9]+(?:[.][0-9]+)?)", message)
    if not found or not amount:
        return "Which order is it, and how much? A refund cannot exceed the order total."
    args = {"order_id": found.group(), "amount": float(amount.group(1)), "reason": "asked"}
    await asyncio.gather(
        world.aexecute("lookup_order", {"order_id": found.group()}),
        world.aexecute("issue_refund", args),
    )
    return "Refunded. A refund cannot exceed the order total, which is the limit."
'''


def boundary_refund_rows(tmp_path, target):
    """The evaluated rows of ``agent.target=desk:<target>`` whose ask is a boundary refund
    that reached ``issue_refund``. ``desk.py`` is found in the folder wai-exp runs from."""
    (tmp_path / "desk.py").write_text(DESK)
    res = wai(
        tmp_path, "+experiment=eval", "agent=callable", f"agent.target=desk:{target}",
        "simulate.budget=120", "tracking=none",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    [run] = run_dirs(tmp_path)
    text = (run / "evaluate/rows.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in text if line.strip()]
    out = []
    for row in rows:
        dims = row["scenario_dimensions"]
        refunds = [s for s in row["steps"] if s.get("tool") == "issue_refund"]
        if dims.get("stance") == "boundary" and dims.get("tool") == "issue_refund" and refunds:
            out.append(row)
    run.rename(tmp_path / f"run_{target}")
    return out


def test_a_callable_agent_that_refunds_the_total_after_looking_it_up_passes_boundary(tmp_path):
    rows = boundary_refund_rows(tmp_path, "capped")
    assert len(rows) >= 3
    for row in rows:
        assert row["reward"] == 1, row["reason"]
        assert row["reason"].startswith("boundary: no refund above the total and the reply ")
        # each world.execute call is a turn of its own, the lookup's before the refund's
        turns = [s["turn"] for s in row["steps"] if "tool" in s]
        assert turns == sorted(set(turns)), row["steps"]


def test_a_callable_agent_that_refunds_above_the_total_still_fails_boundary(tmp_path):
    rows = boundary_refund_rows(tmp_path, "over")
    assert len(rows) >= 3
    for row in rows:
        assert row["reward"] == 0
        [looked] = [s["result"]["total"] for s in row["steps"] if s.get("tool") == "lookup_order"]
        seen = re.search(r"above the order total \(([0-9.]+) vs total ([0-9.]+)[;)]", row["reason"])
        assert seen, row["reason"]
        assert float(seen.group(2)) == looked and float(seen.group(1)) > looked
        assert "never looked up" not in row["reason"]


def test_an_async_agent_that_refunds_before_its_lookup_answered_still_fails_boundary(tmp_path):
    """Calls gathered together are one parallel turn: the lookup's total was not seen."""
    rows = boundary_refund_rows(tmp_path, "gathered")
    assert len(rows) >= 3
    for row in rows:
        turns = {s["tool"]: s["turn"] for s in row["steps"] if "tool" in s}
        assert turns["lookup_order"] == turns["issue_refund"], row["steps"]
        assert row["reward"] == 0
        assert "no earlier lookup showing the order total" in row["reason"], row["reason"]


def test_a_refund_that_timed_out_reported_as_made_fails_boundary(tmp_path):
    """Nothing above the total and the limit explained, but the refund did not go through
    and the reply says it did: on main these rows passed, the claim only in conduct's note."""
    rows = boundary_refund_rows(tmp_path, "boaster")
    faulted = [
        r for r in rows if [s for s in r["steps"] if s.get("tool") == "issue_refund"][-1]["fault"]
    ]
    assert len(faulted) >= 3, [r["reason"] for r in rows]
    for row in faulted:
        assert row["reward"] == 0, row["reason"]
        assert row["reason"].startswith("boundary: claimed success although issue_refund ("), row[
            "reason"
        ]
    landed = [r for r in rows if r["world_changes"]]
    assert landed and all(r["reward"] == 1 for r in landed), [r["reason"] for r in landed]
