"""Lazy re-exports for a package ``__init__``: names load from their module on first use.

Why: the score folders and ``rows`` re-export their public names without importing
numpy/scipy-heavy modules up front, and every folder needs the same ``__getattr__`` /
``__dir__`` pair. Type checkers read the package's ``if TYPE_CHECKING:`` imports instead.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # not imported at run time: this module is on every package's import path
    from collections.abc import Callable


class LazyPackage(types.ModuleType):
    """A package whose exported names are never rebound to a submodule of the same name.

    Why: the import system binds a submodule onto its package when it first loads it, so
    ``wai_exp.rows.scrub`` (the function) would become the module ``wai_exp.rows.scrub``
    once anything imported that module: the answer would depend on import order.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and name in self.__dict__.get("_EXPORTS", ()):
            return
        super().__setattr__(name, value)


def lazy_exports(
    package: str, exports: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return the module-level ``__getattr__`` and ``__dir__`` for ``package``.

    ``exports`` maps a public name to the submodule of ``package`` that defines it. The
    ``__getattr__`` imports that submodule on first use and caches the value in
    ``namespace`` (the package's globals), so later lookups skip it; a name not in
    ``exports`` raises ``AttributeError`` as a normal module would. The package becomes a
    ``LazyPackage``, so an exported name always means the object, never a submodule.
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

    sys.modules[package].__class__ = LazyPackage
    return __getattr__, __dir__
