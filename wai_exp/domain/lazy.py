"""Lazy re-exports for a package ``__init__``: names load from their module on first use.

Why: the score folders re-export their public names without importing numpy/scipy-heavy
modules up front, and every folder needs the same ``__getattr__`` / ``__dir__`` pair.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return the module-level ``__getattr__`` and ``__dir__`` for ``package``.

    ``exports`` maps a public name to the submodule of ``package`` that defines it. The
    ``__getattr__`` imports that submodule on first use and caches the value in
    ``namespace`` (the package's globals), so later lookups skip it; a name not in
    ``exports`` raises ``AttributeError`` as a normal module would.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
