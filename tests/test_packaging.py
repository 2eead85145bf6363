"""The package ships every subpackage and its config tree."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "wai_exp").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    missing = found - listed
    assert not missing, (
        f"add these to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"
    )


def test_public_api_names_resolve():
    import wai_exp

    missing = [name for name in wai_exp.__all__ if not hasattr(wai_exp, name)]
    assert not missing, f"wai_exp._EXPORTS names modules that do not define: {missing}"
