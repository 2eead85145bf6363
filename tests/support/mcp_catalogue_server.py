"""An MCP server for the ``world=mcp`` tests whose search answers with an empty list when
nothing matches, as most search tools do: a library catalogue of three books, searched by
title words, and reserved by id (the ids the server holds are the argument's enum).
``python -m tests.support.mcp_catalogue_server`` (stdio)."""

from __future__ import annotations

from typing import Literal

from mcp.server.mcpserver import MCPServer

server = MCPServer("catalogue")
_BOOKS = {"BK-1001": "Dune", "BK-1002": "Emma", "BK-1003": "Ulysses"}
_reserved: list[str] = []


@server.tool()
def search_books(query: str) -> dict[str, list[dict[str, str]]]:
    """Search the catalogue by words of a book's title."""
    words = query.lower().split()
    hits = [
        {"book_id": book_id, "title": title}
        for book_id, title in _BOOKS.items()
        if words and all(w in title.lower() for w in words)
    ]
    return {"books": hits}


@server.tool()
def reserve_book(book_id: Literal["BK-1001", "BK-1002", "BK-1003"]) -> dict[str, str]:
    """Reserve a book by its id."""
    _reserved.append(book_id)
    return {"reserved": book_id, "title": _BOOKS[book_id]}


@server.tool()
def reset_catalogue() -> str:
    """Cancel every reservation (the tests' reset tool)."""
    _reserved.clear()
    return "ok"


if __name__ == "__main__":
    server.run()
