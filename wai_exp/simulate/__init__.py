"""simulate: situations, the mock world, agents, and the engine behind ``simulate()``.

``wai_exp.simulate`` is both this package and, for ``import wai_exp as wai``, the function
``wai.simulate(...)``: importing any submodule binds the package to that attribute of
``wai_exp``, so the package itself is made callable and forwards to ``engine.simulate``.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from wai_exp.simulate.engine import simulate

        return simulate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
