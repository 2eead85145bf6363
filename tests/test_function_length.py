"""No function in wai_exp/ is longer than a reader can hold (120 lines).

A reader holds a function whole, or not at all: past a screenful or two, a reviewer checks
one branch and trusts the rest. New code splits the way scipy.stats does (validate the
inputs, compute in small pure steps, assemble the report). `scripts/long_functions.py`
lists what is over the limit, longest first.
"""

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "long_functions", ROOT / "scripts" / "long_functions.py"
)
assert _spec is not None and _spec.loader is not None
long_functions = importlib.util.module_from_spec(_spec)
sys.modules["long_functions"] = long_functions  # its dataclass looks its module up
_spec.loader.exec_module(long_functions)

LIMIT = long_functions.LIMIT

#: Functions still over the limit, as path::qualified name. This list only shrinks: a new
#: long function fails the first test below, and an entry whose function was split (or
#: removed) fails the second until it is taken off the list. Lengths as last measured.
ALLOWED: set[str] = set()


def _over_limit() -> dict[str, int]:
    # In a fresh interpreter: CPython 3.11's ast.parse raises "AST constructor recursion
    # depth mismatch" when another thread compiles at the same time (a background import
    # an earlier test left running), which made this a flaky test of nothing.
    code = (
        "import json, sys; sys.path.insert(0, 'scripts'); import long_functions as lf; "
        f"print(json.dumps({{f'{{f.path}}::{{f.name}}': f.length for f in lf.long_functions({LIMIT})}}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_no_new_function_is_over_the_limit():
    new = {name: n for name, n in _over_limit().items() if name not in ALLOWED}
    assert not new, (
        f"over {LIMIT} lines: {new}. Split it (validate, compute in small pure steps, "
        "assemble the result); see scripts/long_functions.py"
    )


def test_the_allow_list_holds_only_what_is_still_too_long():
    stale = sorted(set(ALLOWED) - set(_over_limit()))
    assert not stale, f"no longer over {LIMIT} lines: take {stale} off ALLOWED"


def test_the_measure_counts_a_function_and_its_methods(tmp_path):
    pkg = tmp_path / "wai_exp"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))  # def line + LIMIT lines
    (pkg / "mod.py").write_text(
        f"def long():\n{body}\n\n\ndef short():\n    return 1\n\n\n"
        f"class C:\n    def method(self):\n{'    ' + body.replace(chr(10), chr(10) + '    ')}\n",
        encoding="utf-8",
    )
    ast.parse((pkg / "mod.py").read_text(encoding="utf-8"))
    found = {f.name: f.length for f in long_functions.long_functions(LIMIT, root=pkg)}
    assert found == {"long": LIMIT + 1, "C.method": LIMIT + 1}
    assert long_functions.long_functions(LIMIT + 1, root=pkg) == []
