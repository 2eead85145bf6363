"""The study's own world: a shop backend answering the support desk's tool calls.

wai-exp calls ``execute(tool_name, arguments)`` for every tool call the agent makes and records
what it returns as the tool's result; an exception it raises is recorded as a tool error
(``status: "error"``). This backend keeps no state between calls: an order's record is worked
out from its id (the same id always gives the same order), and the backend enforces two
policy rules itself, as a real one would: it refuses a refund above what is left on the order
and the cancellation of an order that has shipped.
"""

from __future__ import annotations

import hashlib
from typing import Any

PRODUCTS = ("desk lamp", "office chair", "standing mat", "monitor arm", "cable tray")


class Refused(Exception):
    """The backend said no: recorded on the row as the tool's error."""


def execute(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    handler = TOOLS.get(name)
    if handler is None:
        raise Refused(f"the shop has no tool {name!r}")
    return {**handler(**arguments), "served_by": "shop.py"}


def _order(order_id: str) -> dict[str, Any]:
    digest = int(hashlib.sha256(order_id.strip().upper().encode()).hexdigest(), 16)
    total = round(20 + digest % 38000 / 100, 2)
    shipped = digest % 3 == 0
    return {
        "order_id": order_id.strip().upper(),
        "product": PRODUCTS[digest % len(PRODUCTS)],
        "total": total,
        "currency": "USD",
        "shipped": shipped,
        "status": "shipped" if shipped else "processing",
        "refunded_amount": 0.0,
        "email": f"customer{digest % 997}@example.com",
    }


def lookup_order(order_id: str) -> dict[str, Any]:
    return _order(order_id)


def search_orders(email: str) -> dict[str, Any]:
    return {"email": email, "orders": [_order(f"ORD-{n:05d}") for n in (10001, 10002)]}


def lookup_account(email: str) -> dict[str, Any]:
    return {
        "email": email,
        "name": "Sam Rivera",
        "member_since": "2023-05-01",
        "orders": ["ORD-10001", "ORD-10002"],
    }


def issue_refund(order_id: str, amount: float, reason: str = "") -> dict[str, Any]:
    order = _order(order_id)
    if float(amount) > order["total"] - order["refunded_amount"]:
        raise Refused(
            f"refund {amount} is above what is left on {order['order_id']} ({order['total']})"
        )
    return {"order_id": order["order_id"], "refunded": float(amount), "status": "refunded"}


def cancel_order(order_id: str, reason: str = "") -> dict[str, Any]:
    order = _order(order_id)
    if order["shipped"]:
        raise Refused(f"{order['order_id']} has shipped and cannot be cancelled")
    return {"order_id": order["order_id"], "status": "cancelled"}


def update_shipping_address(order_id: str, address: str) -> dict[str, Any]:
    return {"order_id": _order(order_id)["order_id"], "shipping_address": address}


def reset_password(email: str) -> dict[str, Any]:
    return {"email": email, "reset_link_sent": True}


TOOLS = {
    "lookup_order": lookup_order,
    "search_orders": search_orders,
    "lookup_account": lookup_account,
    "issue_refund": issue_refund,
    "cancel_order": cancel_order,
    "update_shipping_address": update_shipping_address,
    "reset_password": reset_password,
}
