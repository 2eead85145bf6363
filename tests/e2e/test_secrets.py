"""A key given any way a user gives one never reaches a file, the MLflow store or the terminal.

Each case runs the console script against a real server on 127.0.0.1 that answers 401 and
quotes the request's credential in its error body (as real providers do). Afterwards every
file under the test folder (run dirs with Hydra's ``.hydra/``, the stage cache, MLflow's
artifacts) and a full SQL dump of every ``mlflow.db`` are searched for the planted keys.
"""

from __future__ import annotations

import base64
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from tests.support.scripted_server import chat_reply, echo_401, scripted_server
from tests.support.written import all_text

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")
BASE = ["+experiment=rl_round", "simulate.budget=8", "agent=openai"]


def _start(cwd: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen:
    cwd.mkdir()
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.Popen(
        [WAI_EXP, *args], cwd=cwd, env={**clean, **env}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


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
        stored = all_text(tmp_path / name)
        # the refusal really happened and is on the record (in words, without the echoed body)
        assert "HTTP 401" in stored, name
        if name != "env":  # a key in the environment is in no config copy to redact
            assert "***redacted***" in stored, name
    assert not (tmp_path / "refused" / "outputs").exists()  # a refused run leaves no folder
    assert (tmp_path / "cli" / "mlflow.db").is_file()
    everything = all_text(tmp_path) + "".join(o + e for o, e in outputs.values())
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
    everything = all_text(tmp_path / "swept") + all_text(tmp_path / "preset")
    everything += "".join(o + e for o, e in outputs.values())
    for key in [*swept, literal]:
        assert key not in everything, f"{key} leaked"
    preset_root = next((tmp_path / "preset").rglob("multirun.yaml"))
    assert "***redacted***" in preset_root.read_text(encoding="utf-8")


# -- three more ways in (issue 18 §9) ------------------------------------------------------


def _forms(key: str, user: str = "user") -> set[str]:
    """Every form a key travels in: as given, percent-decoded and -encoded, and the
    ``Authorization: Basic`` credential an HTTP client builds from ``user:key``."""
    plain = {key, unquote(key)}
    forms = plain | {quote(k, safe="") for k in plain}
    return forms | {base64.b64encode(f"{user}:{k}".encode()).decode() for k in plain}


def _quoting_server(status: int, seen: list[str]):
    """A server that answers ``status`` quoting the credential it got in every shape:
    the raw key (not only ``Bearer <key>``), a Basic header's base64 and its decoded text."""

    def answer(path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
        seen.append(auth)
        scheme, _, cred = auth.partition(" ")
        decoded = base64.b64decode(cred).decode() if scheme == "Basic" else ""
        quoted = f"you sent {cred} ({decoded}); header: {auth}"
        if status == 200:
            return 200, chat_reply(f"Done, I looked it up. {quoted}")
        return status, {"error": {"message": f"Incorrect API key provided: {quoted}"}}

    return answer


def _leaks(root: Path, outputs: tuple[str, str], keys: list[str]) -> list[str]:
    everything = all_text(root) + "".join(outputs)
    return sorted(f for key in keys for f in _forms(key) if f in everything)


def test_a_sweep_with_hydras_choice_over_keys_prints_neither_key(tmp_path):
    """``+agent.api_key=choice(K1,K2)``: Hydra's launch lines (``#0 : ...``) and its
    "Error executing job with overrides" name a variable, never a key; each job still
    sends its own key."""
    keys = ["PLANTED-choice-key-0008", "PLANTED-choice-key-0009"]
    seen: list[str] = []
    with scripted_server(_quoting_server(401, seen)) as url:
        proc = _start(tmp_path / "choice", [
            "-m", *BASE, "simulate.budget=4", f"agent.base_url={url}",
            f"+agent.api_key=choice({keys[0]},{keys[1]})",
        ], {})  # fmt: skip
        out, err = proc.communicate(timeout=300)
    assert proc.returncode != 2, err
    assert "#1 : " in out + err  # Hydra launched both jobs and said so
    assert {f"Bearer {k}" for k in keys} <= set(seen)  # each job sent its own key
    assert "HTTP 401" in all_text(tmp_path / "choice")
    assert _leaks(tmp_path / "choice", (out, err), keys) == []


def test_a_judge_key_from_api_key_env_is_kept_out_of_every_record(tmp_path):
    """``judge.api_key_env=MY_JUDGE_KEY``, and a judge server whose 401 quotes the key:
    the error is recorded everywhere (terminal, error.txt, the grade report in the run and
    the cache, mlflow.db), the key nowhere."""
    key = "PLANTED-judge-key-0010"
    seen: list[str] = []
    with scripted_server(_quoting_server(401, seen)) as url:
        proc = _start(tmp_path / "judge", [
            "+experiment=rl_round", "simulate.budget=4", "judge=llm",
            f"judge.model=vllm:judge@{url}", "judge.api_key_env=MY_JUDGE_KEY",
        ], {"MY_JUDGE_KEY": key})  # fmt: skip
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err  # the grade failed: every judge call was refused
    assert seen and set(seen) == {f"Bearer {key}"}
    root = tmp_path / "judge"
    assert "HTTP 401" in err
    assert any(
        "HTTP 401" in p.read_text() for p in (root / "outputs" / ".cache").rglob("report.json")
    )
    assert any(p.name == "error.txt" for p in (root / "mlartifacts").rglob("*"))
    assert _leaks(root, (out, err), [key]) == []


def test_url_credentials_with_a_percent_encoded_character_stay_out_of_rows_and_store(tmp_path):
    """``http://user:KEY%2Fq@host/v1``: the client sends ``user:KEY/q`` as Basic auth, and a
    server that quotes it back in its replies puts it in no row, report or MLflow record."""
    key = "PLANTED-url-key-0011%2Fq"
    seen: list[str] = []
    with scripted_server(_quoting_server(200, seen)) as url:
        host = url.removeprefix("http://")
        proc = _start(tmp_path / "url", [
            *BASE, "simulate.budget=4", f"agent.base_url=http://user:{key}@{host}",
        ], {})  # fmt: skip
        out, err = proc.communicate(timeout=300)
    assert proc.returncode in (0, 3), err
    basic = base64.b64encode(f"user:{unquote(key)}".encode()).decode()
    assert set(seen) == {f"Basic {basic}"}  # the server got the decoded password
    root = tmp_path / "url"
    rows = [
        p for p in (root / "outputs").rglob("rows.jsonl") if p.parent.name in ("simulate", "grade")
    ]
    assert rows and all("Done, I looked it up." in p.read_text() for p in rows)
    assert _leaks(root, (out, err), [key]) == []


def _closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then let go)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _recorded(root: Path) -> dict[str, str]:
    """Where a run names its server: Hydra's copies, the run's log, MLflow's param and tags."""
    run_dir = next((root / "outputs").glob("*/*/.hydra")).parent
    with sqlite3.connect(root / "mlflow.db") as db:
        param = db.execute("select value from params where key = 'agent.base_url'").fetchone()
        tag = db.execute("select value from tags where key = 'wai.overrides'").fetchone()
    files = (".hydra/config.yaml", ".hydra/overrides.yaml", "wai-exp.log")
    return {
        **{name: (run_dir / name).read_text(encoding="utf-8") for name in files},
        "param agent.base_url": param[0],
        "tag wai.overrides": tag[0],
    }


def test_a_base_url_with_credentials_names_its_server_and_hides_only_the_secret(tmp_path):
    """``http://user:KEY@host:port/v1``, ``...?api_key=KEY`` and a refused one: every record
    and message still says which server the run used (host, port, path); the key is in none
    of them, and the server got it."""
    keys = {"user": "PLANTED-url-pass-0040", "query": "PLANTED-query-key-0041",
            "refused": "PLANTED-url-pass-0042"}  # fmt: skip
    seen: list[tuple[str, str]] = []

    def answer(path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        seen.append((path, {k.lower(): v for k, v in headers.items()}.get("authorization", "")))
        return 200, chat_reply("Done, I looked it up.")

    closed = f"127.0.0.1:{_closed_port()}"
    with scripted_server(answer) as url:
        server = url.removeprefix("http://").removesuffix("/v1")
        runs = {
            "user": _start(tmp_path / "user", [
                *BASE, "simulate.budget=4", f"agent.base_url=http://user:{keys['user']}@{server}/v1",
            ], {}),
            "query": _start(tmp_path / "query", [
                *BASE, "simulate.budget=4", f"agent.base_url='{url}?api_key={keys['query']}'",
            ], {}),
            "refused": _start(tmp_path / "refused", [
                *BASE, f"agent.base_url=http://user:{keys['refused']}@{closed}/v1",
            ], {}),
        }  # fmt: skip
        outputs = {name: p.communicate(timeout=240) for name, p in runs.items()}
    for name in ("user", "query"):
        assert runs[name].returncode in (0, 3), outputs[name][1]
        for where, text in _recorded(tmp_path / name).items():
            assert f"{server}/v1" in text and "***redacted***" in text, (name, where, text)
    basic = base64.b64encode(f"user:{keys['user']}".encode()).decode()
    assert ("/v1/chat/completions", f"Basic {basic}") in seen  # the user's key was sent
    # the query's key was sent, the API's path joined before the query
    assert (f"/v1/chat/completions?api_key={keys['query']}", "") in seen
    # refused before any work, and the message names the server that could not be reached
    assert runs["refused"].returncode == 2, outputs["refused"]
    assert f"http://user:***redacted***@{closed}/v1 cannot be reached" in outputs["refused"][1]
    for name, key in keys.items():
        assert _leaks(tmp_path / name, outputs[name], [key]) == [], name
