"""The public API: every name of the scoring reference is importable from wai_exp under its
own name, ``__all__`` is exactly the documented names, and tools see each name's real object.
"""

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import wai_exp

ROOT = Path(__file__).resolve().parents[1]

SCORE_API_NAMES = (
    "Criterion",
    "PassAt",
    "PublishGateError",
    "Rubric",
    "ScoredData",
    "Spec",
    "Trait",
    "annotator_agreement",
    "argument_grounding",
    "attach_labels",
    "attach_rubric",
    "audit_grades",
    "behavior_signature",
    "behavioral_markers",
    "build_preference_pairs",
    "calibrate",
    "classify_failure",
    "compare_runs",
    "conduct_grade",
    "coverage_gap",
    "curriculum",
    "dataset_report",
    "decontaminate",
    "dedupe_groups",
    "delta_report",
    "detectable_effect",
    "eval_variance",
    "evaluate",
    "expected_outcome",
    "filter_rl_rows",
    "format_audit",
    "format_coverage_gap",
    "format_curriculum",
    "format_delta_report",
    "format_hack_scan",
    "format_hack_scan_diff",
    "format_judge_trust",
    "format_leak_report",
    "format_markers",
    "format_stages",
    "grounding_report",
    "group_signal",
    "hack_scan",
    "hack_scan_diff",
    "holdout_size",
    "judge_agreement",
    "judge_pairs",
    "judge_probes",
    "judge_trust",
    "leak_report",
    "length_report",
    "load_spec",
    "logprob_report",
    "mark_grounding",
    "mark_rows",
    "marker_names",
    "marker_summary",
    "mean_kl",
    "metric_summary",
    "near_duplicate_prompts",
    "next_round",
    "normalize_judge_result",
    "optimize",
    "outcome_check",
    "pairwise_judge",
    "pass_at",
    "preflight",
    "privileged_context",
    "publish_gate",
    "rank_rows",
    "recommend",
    "reference_logprobs",
    "refusal_report",
    "retire_solved",
    "reward_correlations",
    "row_markers",
    "rubric_judge",
    "rubric_of",
    "run_judge",
    "score_row",
    "select_for_rl",
    "select_for_sft",
    "spec_version",
    "stage_of",
    "stage_report",
    "staleness_report",
    "stamp_spec",
    "stamp_stage",
    "style_markers",
    "style_report",
    "task_checklist",
    "task_key",
    "trace_flag_report",
    "trace_flags",
    "trace_markers",
    "trim_out_of_band",
    "trim_unanimous_groups",
    "ungrounded_arguments",
    "write_rubrics",
)


def test_all_99_reference_names_are_public():
    assert len(SCORE_API_NAMES) == 99
    missing = [n for n in SCORE_API_NAMES if n not in wai_exp.__all__ or not hasattr(wai_exp, n)]
    assert not missing, f"not exported from wai_exp: {missing}"


def _documented_extras() -> dict[str, str]:
    """The names docs/API.md lists beyond the reference's 99, each with its module."""
    text = (ROOT / "docs" / "API.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `(\w+)` \| `([\w.]+)` \|", text, flags=re.M))


def test_all_is_exactly_the_documented_names():
    extras = _documented_extras()
    assert extras, "docs/API.md lists no names"
    assert not set(extras) & set(SCORE_API_NAMES)
    assert sorted(wai_exp.__all__) == sorted([*SCORE_API_NAMES, *extras])
    for name, module in extras.items():
        assert getattr(wai_exp, name) is getattr(importlib.import_module(f"wai_exp.{module}"), name)


# The packages that re-export names from their modules, each with a literal ``__all__``.
PACKAGES = [
    "wai_exp",
    "wai_exp.rows",
    "wai_exp.score.diagnose",
    "wai_exp.score.grade",
    "wai_exp.score.judges",
    "wai_exp.score.select",
    "wai_exp.score.stats",
    "wai_exp.simulate.agents",
]


def _module_source(package: str) -> ast.Module:
    path = ROOT / package.replace(".", "/") / "__init__.py"
    return ast.parse(path.read_text(encoding="utf-8"))


def _literal_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            try:
                return list(ast.literal_eval(node.value))
            except ValueError:
                return None  # computed: tools cannot read it
    return None


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """name -> module for every ``from m import name`` under ``if TYPE_CHECKING:``."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    for alias in stmt.names:
                        found[alias.asname or alias.name] = stmt.module or ""
    return found


def _defined_here(tree: ast.Module) -> set[str]:
    """Names the package's own ``__init__`` defines (classes, functions, assignments)."""
    own = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            own |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return own


@pytest.mark.parametrize("package", PACKAGES)
def test_type_checkers_see_every_public_name(package):
    """A literal ``__all__`` (ruff PLE0605), every name imported for type checkers from the
    module that defines it, and the same object at run time."""
    tree = _module_source(package)
    names = _literal_all(tree)
    assert names is not None, f"{package}.__all__ is not a literal list"
    pkg = importlib.import_module(package)
    assert names == list(pkg.__all__)
    imported = _type_checking_imports(tree)
    own = _defined_here(tree) & set(names)
    assert set(imported) | own == set(names), f"{package}: names not imported for type checkers"
    for name in set(names) - own:
        module = importlib.import_module(imported[name])
        assert getattr(pkg, name) is getattr(module, name), f"{package}.{name}"
    assert "__getattr__" not in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, (
        f"{package}: a module __getattr__ visible to type checkers makes every typo Any"
    )


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "first",
    [
        "import wai_exp.simulate.world",
        "import wai_exp.simulate",
        "from wai_exp.simulate import engine",
        "import wai_exp.simulate.agents",
        "import wai_exp; wai_exp.simulate",
        "import wai_exp",
    ],
)
def test_simulate_is_the_function_whatever_was_imported_first(first):
    code = (
        f"{first}\n"
        "import importlib, inspect, types, wai_exp\n"
        "importlib.import_module('wai_exp.simulate.engine')\n"
        "importlib.import_module('wai_exp.simulate.data')\n"
        "assert type(wai_exp.simulate) is types.FunctionType, type(wai_exp.simulate)\n"
        "assert 'budget' in inspect.signature(wai_exp.simulate).parameters\n"
        "from wai_exp import simulate\n"
        "assert simulate is wai_exp.simulate\n"
        "from wai_exp.simulate.world import WorldOptions\n"
        "assert WorldOptions is wai_exp.WorldOptions\n"
    )
    done = _fresh(code)
    assert done.returncode == 0, done.stderr


def test_import_wai_exp_loads_no_heavy_module():
    """``import wai_exp`` stays fast: no submodule and none of the heavy libraries."""
    done = _fresh(
        "import sys, wai_exp\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('wai_exp') or "
        "m.split('.')[0] in {'numpy', 'scipy', 'pydantic', 'httpx', 'mlflow', 'omegaconf'})))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["wai_exp"]


def test_a_subpackage_name_stays_the_function_after_its_module_loads():
    """``wai_exp.rows.scrub`` is the function, also once ``wai_exp.rows.scrub`` (the module)
    was imported: the import system would otherwise rebind it to the module."""
    done = _fresh(
        "import types, wai_exp.rows.scrub, wai_exp.rows\n"
        "assert type(wai_exp.rows.scrub) is types.FunctionType, wai_exp.rows.scrub\n"
        "from wai_exp.rows import scrub\n"
        "assert scrub({'a': 1}) == {'a': 1}\n"
    )
    assert done.returncode == 0, done.stderr
