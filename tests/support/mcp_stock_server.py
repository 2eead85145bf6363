"""An MCP server for the ``world=mcp`` tests whose tools answer with JSON *text* (``json.dumps``
of a dict), as many servers do: a stock list holding three items, ``SKU-1001`` to
``SKU-1003``, and nothing else. ``python -m tests.support.mcp_stock_server`` (stdio)."""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer

server = MCPServer("stock")
_START = {"SKU-1001": 40, "SKU-1002": 5, "SKU-1003": 0}
_stock = dict(_START)


@server.tool()
def lookup_item(sku: str) -> str:
    """Look up an item's stock by its SKU, like SKU-1001."""
    if sku not in _stock:
        return json.dumps({"error": "not_found", "sku": sku})
    return json.dumps({"sku": sku, "stock": _stock[sku]})


@server.tool()
def adjust_stock(sku: str, delta: int, reason: str) -> str:
    """Add delta units (negative to remove) to an item's stock. SKU like SKU-1001."""
    if sku not in _stock:
        return json.dumps({"error": "not_found", "sku": sku})
    _stock[sku] += delta
    return json.dumps({"ok": True, "sku": sku, "stock": _stock[sku], "reason": reason})


@server.tool()
def reset_stock() -> str:
    """Put every item back to its starting stock (the tests' reset tool)."""
    _stock.clear()
    _stock.update(_START)
    return "ok"


@server.tool()
def stock_state() -> str:
    """The whole stock list as JSON text (the tests' state tool)."""
    return json.dumps(_stock, sort_keys=True)


if __name__ == "__main__":
    server.run()
