"""``wai-exp serve-env``: a run's published RL records served as an OpenEnv environment
(``openenv-core``'s server), played with OpenEnv's own client."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.training import require_training_stack

require_training_stack("openenv", package="openenv-core")

WAI_EXP = str(Path(sys.executable).parent / "wai-exp")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``wai-exp serve-env +experiment=rl_round`` on 127.0.0.1: ``(base_url, run_dir)``."""
    import httpx

    where = tmp_path_factory.mktemp("serve")
    port = _free_port()
    log = (where / "server.log").open("w")
    proc = subprocess.Popen(
        [WAI_EXP, "serve-env", "+experiment=rl_round", "tracking=none",
         "hydra.run.dir=run", "--port", str(port)],
        cwd=where, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert proc.poll() is None, (where / "server.log").read_text()[-3000:]
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("serve-env did not come up in 300 s")
    yield url, where / "run", proc
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def _call(order: str) -> dict:
    return {
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "lookup_order",
                        "arguments": json.dumps({"order_id": order}),
                    },
                }
            ],
        }
    }


def test_an_episode_through_openenvs_client_and_bad_input_never_stops_the_server(server):
    from openenv.core import GenericEnvClient

    from wai_exp.env import reset

    url, run_dir, proc = server
    records = [
        json.loads(x) for x in (run_dir / "publish" / "train.jsonl").read_text().splitlines()
    ]
    with GenericEnvClient(base_url=url).sync() as env:
        first = env.reset(task=0, seed=7)
        obs = first.observation
        assert not first.done and first.reward is None
        assert obs["prompt"] == records[0]["prompt"] and obs["tools"] == records[0]["tools"]
        assert obs["task_key"] == records[0]["task_key"]

        answer = env.step(_call("ORD-10001"))
        (tool,) = answer.observation["messages"]
        assert tool["role"] == "tool" and tool["name"] == "lookup_order" and tool["content"]
        assert not answer.done

        # Bad input: the episode's own refusal comes back to the client, the session goes on.
        with pytest.raises(RuntimeError, match="assistant turn; got role 'user'"):
            env.step({"message": {"role": "user", "content": "hi"}})
        with pytest.raises(RuntimeError, match="Invalid message"):
            env.step({"not_a_message": 1})
        with pytest.raises(RuntimeError, match="out of range: this server has"):
            env.reset(task=len(records))

        env.reset(task=0, seed=7)
        env.step(_call("ORD-10001"))
        done = env.step({"message": {"role": "assistant", "content": "It is sorted."}})
        assert done.done and isinstance(done.reward, float) and done.observation["reason"]

    # The same turns played in process give the same reward: the server is wai_exp.env.
    ep = reset(records[0], seed=7)
    ep.step(_call("ORD-10001")["message"])
    local = ep.step({"role": "assistant", "content": "It is sorted."})
    assert local.reward == done.reward and local.reason == done.observation["reason"]

    import httpx

    garbage = httpx.post(f"{url}/step", content=b"{not json", timeout=10)
    assert 400 <= garbage.status_code < 500
    assert httpx.get(f"{url}/health", timeout=10).status_code == 200
    assert proc.poll() is None


def test_serve_env_refuses_what_it_cannot_serve_before_work(tmp_path):
    res = subprocess.run([WAI_EXP, "serve-env"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "+experiment=rl_round" in res.stderr
    sft = tmp_path / "train.jsonl"
    sft.write_text(json.dumps({"messages": [], "tools": []}) + "\n")
    res = subprocess.run(
        [WAI_EXP, "serve-env", "--records", str(sft)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 2 and "not an RL record" in res.stderr and "selection=rl" in res.stderr
