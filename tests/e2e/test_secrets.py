"""A key given any way a user gives one never reaches a file, the MLflow store or the terminal.

Each case runs the console script against a real server on 127.0.0.1 that answers 401 and
quotes the request's credential in its error body (as real providers do). Afterwards every
file under the test folder (run dirs with Hydra's ``.hydra/``, the stage cache, MLflow's
artifacts) and a full SQL dump of every ``mlflow.db`` are searched for the planted keys.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.scripted_server import echo_401, scripted_server

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
BASE = ["+experiment=rl_round", "simulate.budget=8", "agent=openai"]


def _start(cwd: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen:
    cwd.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.Popen(
        [WAI_EXP, *args], cwd=cwd, env={**clean, **env}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _everything(root: Path) -> str:
    """The text of every file under ``root`` plus the SQL dump of every SQLite database."""
    parts = []
    for path in root.rglob("*"):
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
            if path.name == "mlflow.db":
                with sqlite3.connect(path) as db:
                    parts.extend(db.iterdump())
    return "\n".join(parts)


def test_planted_keys_reach_no_file_tag_artifact_log_or_message(tmp_path):
    keys = {
        "cli": "PLANTED-cli-key-0001",
        "url": "PLANTED-url-key-0002",
        "env": "PLANTED-env-key-0003",
        "refused": "PLANTED-refused-key-0004",
    }
    with scripted_server(echo_401) as url:
        host = url.removeprefix("http://")
        runs = {
            # +agent.api_key on the command line; the server quotes "Bearer <key>" back
            "cli": _start(tmp_path / "cli", [*BASE, f"agent.base_url={url}", f"+agent.api_key={keys['cli']}"], {}),
            # credentials inside the base URL; httpx sends them as Basic auth, quoted back
            "url": _start(tmp_path / "url", [*BASE, f"agent.base_url=http://user:{keys['url']}@{host}"], {}),
            # the provider's key variable; quoted back in the 401 body
            "env": _start(tmp_path / "env", [*BASE, f"agent.base_url={url}"], {"OPENAI_API_KEY": keys["env"]}),
            # refused by validation after Hydra wrote .hydra/: the key must not be there either
            "refused": _start(tmp_path / "refused", [*BASE, f"+agent.api_key={keys['refused']}", "agent.timeout=-1"], {}),
        }  # fmt: skip
        outputs = {name: p.communicate(timeout=240) for name, p in runs.items()}
    assert runs["refused"].returncode == 2, outputs["refused"][1]
    for name in ("cli", "url", "env"):
        out, err = outputs[name]
        assert runs[name].returncode in (0, 1, 3), err
        stored = _everything(tmp_path / name)
        # the refusal really happened and is on the record (in words, without the echoed body)
        assert "HTTP 401" in stored, name
        if name != "env":  # a key in the environment is in no config copy to redact
            assert "***redacted***" in stored, name
    assert not (tmp_path / "refused" / "outputs").exists()  # a refused run leaves no folder
    assert (tmp_path / "cli" / "mlflow.db").is_file()
    everything = _everything(tmp_path) + "".join(o + e for o, e in outputs.values())
    for how, key in keys.items():
        assert key not in everything, f"the key given by {how} leaked"


def test_a_sweep_keeps_swept_keys_and_preset_keys_out_of_every_file(tmp_path):
    """``-m`` over two keys, and a key written literally in the user's own preset: neither
    reaches a job's ``.hydra/``, the sweep's ``multirun.yaml``, the store or the terminal."""
    swept = ["PLANTED-swept-key-0005", "PLANTED-swept-key-0006"]
    literal = "PLANTED-preset-key-0007"
    presets = tmp_path / "conf" / "experiment"
    presets.mkdir(parents=True)
    with scripted_server(echo_401) as url:
        (presets / "mine.yaml").write_text(
            "# @package _global_\n"
            "defaults:\n  - /experiment/rl_round\n  - override /agent: openai\n"
            f"agent:\n  api_key: {literal}\n  base_url: {url}\n"
            "simulate:\n  budget: 4\n",
            encoding="utf-8",
        )
        runs = {
            "swept": _start(tmp_path / "swept", [
                "-m", *BASE, f"agent.base_url={url}", f"+agent.api_key={swept[0]},{swept[1]}",
            ], {}),
            "preset": _start(tmp_path / "preset", [
                "--config-dir", str(tmp_path / "conf"), "-m", "+experiment=mine", "seed=0,1",
            ], {}),
        }  # fmt: skip
        outputs = {name: p.communicate(timeout=300) for name, p in runs.items()}
    for name, proc in runs.items():
        assert proc.returncode != 2, outputs[name][1]
        sweep_roots = list((tmp_path / name).rglob("multirun.yaml"))
        assert len(sweep_roots) == 1, name  # the sweep ran and Hydra wrote its copy
        assert len(list(sweep_roots[0].parent.glob("*/.hydra/config.yaml"))) == 2, name
    everything = _everything(tmp_path / "swept") + _everything(tmp_path / "preset")
    everything += "".join(o + e for o, e in outputs.values())
    for key in [*swept, literal]:
        assert key not in everything, f"{key} leaked"
    preset_root = next((tmp_path / "preset").rglob("multirun.yaml"))
    assert "***redacted***" in preset_root.read_text(encoding="utf-8")
