"""``RowList``: the list type of ``data.rows`` (``simulate``) and ``scored.rows`` (``evaluate``)."""

from __future__ import annotations


class RowList(list):
    """A list of rows that can also be called: ``data.rows`` and ``data.rows()`` are the same
    list, so code written for either spelling works on both."""

    def __call__(self) -> RowList:
        return self


__all__ = ["RowList"]
