"""The built wheel, installed into a fresh venv, runs a preset from outside the repo: the
Hydra configs ship inside it as ``wai_exp.conf`` and ``pkg://wai_exp.conf`` finds them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

# Its module fixture is costly: xdist keeps the module on one worker, so it is built once.
pytestmark = pytest.mark.xdist_group("wheel")

ROOT = Path(__file__).resolve().parents[2]


def _has_backend() -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        major = int(version("setuptools").split(".")[0])
        version("wheel")
    except (PackageNotFoundError, ValueError):
        return False
    return major >= 69


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Build from a copy, so the build leaves nothing (build/, *.egg-info) in the work tree.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    if not (src / "README.md").exists():
        (src / "README.md").write_text("wai-exp\n")  # pyproject names a readme; not what this tests
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "wai_exp", src / "wai_exp", ignore=ignore)
    shutil.copytree(ROOT / "conf", src / "conf", ignore=ignore)
    dist = tmp_path_factory.mktemp("dist")
    # The build backend pyproject names (setuptools>=69, wheel): from this environment when it
    # has them (offline, fast), else an isolated build that fetches them, as a release does.
    cmd = [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(src)]
    if _has_backend():
        cmd.insert(4, "--no-isolation")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    [whl] = dist.glob("wai_exp-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv whose dependencies resolve from this environment's site-packages (a
    plain path in a .pth file: this environment's editable-install hook is not loaded), with
    only the wheel installed in it."""
    env = tmp_path_factory.mktemp("venv")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=300
    )
    py = env / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "_deps_from_ci_env.pth").write_text("\n".join(sorted(deps)) + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "--no-deps",
            "--ignore-installed",
            "--no-index",
            "-q",
            str(wheel),
        ],
        check=True,
        timeout=600,
        capture_output=True,
        text=True,
    )
    return env


def test_wheel_ships_every_config_group(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {n.removeprefix("wai_exp/conf/") for n in names if n.startswith("wai_exp/conf/")}
    expected = {str(p.relative_to(ROOT / "conf")) for p in (ROOT / "conf").rglob("*.yaml")}
    assert expected and expected <= shipped
    assert "wai_exp/simulate/specs/support_desk.json" in names


def test_installed_wheel_runs_a_preset_outside_the_repo(venv, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WAI_EXP_START_DIR")}
    where = subprocess.run(
        [str(venv / "bin/python"), "-c", "import wai_exp; print(wai_exp.__file__)"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    assert where.startswith(str(venv)), f"wai_exp imported from {where}, not the wheel"
    res = subprocess.run(
        [str(venv / "bin/wai-exp"), "+experiment=rl_round", "simulate.budget=100", "tracking=none"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert "pass@1: " in res.stdout and "publish gate: passed" in res.stdout
    assert list((tmp_path / "outputs").glob("*/*/publish_gate/rows.jsonl"))
    helped = subprocess.run(
        [str(venv / "bin/wai-exp"), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "experiment: " in helped.stdout and "rl_round" in helped.stdout
