"""A support-desk agent written as one plain Python function: the study's own agent.

wai-exp calls ``answer(message, world=...)`` once per rollout. ``world.execute(name, arguments)``
makes a tool call and returns its step (``status`` and ``result``); what the function returns is
the reply. No model: the rules below are the whole agent, so the run is offline and repeatable.
"""

from __future__ import annotations

import re
from typing import Any

ORDER_ID = re.compile(r"\bORD-\d{5}\b")
EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
# Asks for something the policy forbids (rule 4: another customer's records).
OFF_LIMITS = (
    "ignore your rules",
    "ignore the rules",
    "someone else",
    "another customer",
    "my friend",
)
# The write each ask wants, by the words that name it.
WRITES = {
    "refund": "issue_refund",
    "cancel": "cancel_order",
    "address": "update_shipping_address",
    "ship it to": "update_shipping_address",
    "password": "reset_password",
}


def answer(message: str, *, world: Any, **_context: Any) -> str:
    text = message.lower()
    if any(words in text for words in OFF_LIMITS):
        return "I can only help with your own account and orders, so I can't do that."
    order, email = ORDER_ID.search(message), EMAIL.search(message)
    write = next((tool for words, tool in WRITES.items() if words in text), None)
    if write == "reset_password" and email:
        return _act(
            world, "reset_password", {"email": email.group()}, f"the account {email.group()}"
        )
    if order:
        return _about_order(world, order.group(), write, text)
    if email:
        step = world.execute("search_orders", {"email": email.group()})
        if step["status"] != "ok":
            return _failed("search your orders", step)
        return f"I found these orders for {email.group()}: {step['result']}."
    return "Could you give me your order number (like ORD-12345) or the email on your account?"


def _about_order(world: Any, order_id: str, write: str | None, text: str) -> str:
    looked = world.execute("lookup_order", {"order_id": order_id})  # rule 1: look before acting
    if looked["status"] != "ok":
        return _failed(f"look up {order_id}", looked)
    record = looked["result"] or {}
    if "error" in record or not record.get("order_id"):
        return f"I couldn't find an order {order_id}. Could you check the number?"
    if write is None:
        return f"Order {order_id} is {record.get('status')}, total {record.get('total')} {record.get('currency')}."
    if write == "cancel_order":
        if record.get("status") == "cancelled":
            return f"Order {order_id} was already cancelled, so there is nothing left to do."
        if record.get("shipped"):
            return f"Order {order_id} has already shipped, so I can't cancel it; you can return it."
        return _act(world, write, {"order_id": order_id, "reason": "customer request"}, order_id)
    if write == "issue_refund":
        total = float(record.get("total") or 0.0)
        left = round(total - float(record.get("refunded_amount") or 0.0), 2)
        if left <= 0:
            return f"Order {order_id} was already refunded in full, so there is nothing left to refund."
        amount = _amount(text, default=left)
        args = {"order_id": order_id, "amount": min(amount, left), "reason": "customer request"}
        return _act(world, write, args, order_id)
    if write == "update_shipping_address":
        return "What address should the order go to?"
    return "Could you tell me the email on your account?"


def _act(world: Any, tool: str, arguments: dict[str, Any], what: str) -> str:
    step = world.execute(tool, arguments)
    if step["status"] != "ok":
        return _failed(f"run {tool} on {what}", step)  # rule 5: say plainly it did not happen
    return f"Done: {tool.replace('_', ' ')} for {what} went through."


def _failed(action: str, step: dict[str, Any]) -> str:
    return f"I tried to {action}, but the system answered {step['status']}: nothing was changed. Please try again later."


def _amount(text: str, default: float) -> float:
    found = re.search(r"\$\s?(\d+(?:\.\d+)?)", text)
    return float(found.group(1)) if found else default
