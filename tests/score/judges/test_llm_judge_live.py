"""grade_llm against the real SmolLM2-135M server (tests/support/llama_server.py) as judge.

A 135M model's verdicts are not sensible, so this asserts the protocol and the contract:
the verdict is asked for in the server's structured-output form (llama-cpp-python refuses
``json_schema`` with a 500 and takes ``json_object`` with the schema, a grammar), so it
parses into a reward, with the judge's model, prompt hash, temperature and version on it. Skips with the reason when
the model is not installed; under CI a missing model is a failure (.ci/run installs it).
"""

from __future__ import annotations

import pytest

from tests.support.llama_server import require_model, serve
from wai_exp.llm.http import RetryPolicy
from wai_exp.score.judges.judging import run_judge
from wai_exp.score.judges.llm_judge import grade_llm
from wai_exp.simulate.engine import simulate

require_model()
# The model server uses both cores: the real-model modules run on one xdist worker, in turn.
pytestmark = pytest.mark.xdist_group("real_model")


@pytest.fixture(scope="module")
def llama_url():
    with serve() as base:
        yield base


def test_smollm2_as_judge_grades_rows_under_the_contract(llama_url: str) -> None:
    # One row: a verdict can take a minute on a shared 2-core machine. max_tokens leaves room
    # for the reason, which the grammar bounds at 240 characters.
    rows = list(simulate(mode="rl", budget=1, seed=5).trajectories)
    judge = grade_llm(
        f"vllm:smollm2@{llama_url}",
        max_tokens=128,
        timeout=600,
        retry=RetryPolicy(retries=0),
    )
    scored = run_judge(rows, judge, concurrency=1, version=judge.version)
    assert len(scored.rows) == 1
    for r in scored.rows:
        assert r["judge_status"] == "ok", r["judge_meta"]
        assert r["reward"] in (0.0, 1.0)
        meta = r["judge_meta"]
        assert meta["structured_output"] == "json_object"
        assert "json_schema refused (HTTP 500" in meta["structured_output_fallback"]
        assert meta["model"] == "vllm:smollm2" and meta["temperature"] == 0.0
        assert meta["version"] == judge.version and meta["prompt_hash"] == judge.prompt_hash
