"""verl and OpenRLHF read the RL records and score rollouts through ``wai_exp.env``.

verl is tested with verl itself when it is installed (its ``load_extern_object`` loads
``compute_score`` from the file path its ``custom_reward_function.path`` takes, and its
``NaiveRewardManager`` scores a ``DataProto`` built from the Parquet file); without verl,
through the documented signature ``compute_score(data_source, solution_str, ground_truth,
extra_info)`` on the Parquet rows as pandas reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wai_exp.env import compute_score, reset
from wai_exp.env.verl import play, reward_func
from wai_exp.rows.rl_formats import VERL_COLUMNS, openrlhf_records, verl_records

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _text(turns):
    """A rollout as a Qwen2.5-style template renders it (what verl decodes): each call in
    ``<tool_call>`` tags, each tool answer in ``<tool_response>`` tags, the final reply last."""
    out = []
    for turn in turns:
        if turn["role"] == "assistant":
            out.append(turn.get("content") or "")
            for call in turn.get("tool_calls") or ():
                fn = call["function"]
                args = fn["arguments"]
                args = json.loads(args) if isinstance(args, str) else args
                out.append(
                    "<tool_call>\n"
                    + json.dumps({"name": fn["name"], "arguments": args})
                    + "\n</tool_call>"
                )
        else:
            out.append(f"user\n<tool_response>\n{turn['content']}\n</tool_response>\nassistant\n")
    return "\n".join(out)


def _rollout(record):
    """A fixed policy played live through the environment: ``(environment reward, the
    transcript after the prompt)``."""
    order = sit_order(record)
    ep = reset(record)
    turns = [
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "c1",
                    "function": {
                        "name": "lookup_order",
                        "arguments": json.dumps({"order_id": order}),
                    },
                }
            ],
        },
        {"role": "assistant", "content": "I have looked at your order; it is in hand."},
    ]
    for turn in turns:
        res = ep.step(turn)
    return res.reward, ep.messages[len(ep.prompt) :]


def sit_order(record):
    import re

    found = re.findall(r"ORD-\d+", record["prompt"][-1]["content"])
    return found[0] if found else "ORD-10000"


def _parquet(records, tmp_path: Path) -> Path:
    from wai_exp.pipeline.stages.publish import parquet_table

    path = tmp_path / "train.parquet"
    pq.write_table(parquet_table(records), path)
    return path


def test_verl_records_have_verls_columns_and_score_through_compute_score(run, tmp_path):
    _, records = run
    verl = verl_records(records)
    assert all(list(r)[:5] == list(VERL_COLUMNS) for r in verl)
    path = _parquet(verl, tmp_path)
    import pandas as pd

    frame = pd.read_parquet(path)
    assert list(frame.columns)[:5] == list(VERL_COLUMNS)
    scored = 0
    for record, (_, row) in zip(records, frame.iterrows(), strict=True):
        want, transcript = _rollout(record)
        got = compute_score(
            row["data_source"],
            _text(transcript),
            row["reward_model"]["ground_truth"],
            dict(row["extra_info"]),
        )
        assert got == want
        scored += 1
    assert scored == len(records)


def test_verl_loads_compute_score_from_its_path_and_its_reward_manager_scores_our_parquet(
    run, tmp_path
):
    pytest.importorskip("verl")
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    import pandas as pd
    from verl import DataProto
    from verl.utils.import_utils import load_extern_object
    from verl.workers.reward_manager.naive import NaiveRewardManager

    import wai_exp.env.verl as module

    _, records = run
    records = records[:8]
    frame = pd.read_parquet(_parquet(verl_records(records), tmp_path))
    fn = load_extern_object(module_path=module.__file__, object_name="compute_score")

    class Bytes:
        """A byte-level tokenizer: ids are UTF-8 bytes (all the manager does is decode)."""

        def decode(self, ids, skip_special_tokens=True):
            return bytes(int(i) for i in ids).decode("utf-8")

    wants, prompts, responses = [], [], []
    for record in records:
        want, transcript = _rollout(record)
        wants.append(want)
        prompts.append(list(record["prompt"][-1]["content"].encode()))
        responses.append(list(_text(transcript).encode()))
    p_len, r_len = max(map(len, prompts)), max(map(len, responses))

    def pad(ids, n, left):
        return ([0] * (n - len(ids)) + ids) if left else (ids + [0] * (n - len(ids)))

    mask = [
        [0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r))
        for p, r in zip(prompts, responses, strict=True)
    ]
    data = DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([pad(p, p_len, True) for p in prompts]),
            "responses": torch.tensor([pad(r, r_len, False) for r in responses]),
            "attention_mask": torch.tensor(mask),
        },
        non_tensors={
            "data_source": np.array(list(frame["data_source"]), dtype=object),
            "reward_model": np.array(list(frame["reward_model"]), dtype=object),
            "extra_info": np.array([dict(x) for x in frame["extra_info"]], dtype=object),
        },
    )
    scores = NaiveRewardManager(tokenizer=Bytes(), num_examine=0, compute_score=fn)(data)
    assert scores.sum(dim=-1).tolist() == wants


def test_openrlhf_has_one_label_column_that_scores_through_reward_func(run):
    _, records = run
    rows = openrlhf_records(records)
    assert all(set(r) == {"prompt", "label", "tools"} and isinstance(r["label"], str) for r in rows)
    prompts, queries, wants = [], [], []
    for record, row in zip(records, rows, strict=True):
        want, transcript = _rollout(record)
        prompt = "<|im_start|>user\n" + row["prompt"][-1]["content"] + "<|im_end|>\n"
        prompts.append(prompt)
        queries.append(prompt + _text(transcript))
        wants.append(want)
    out = reward_func(queries, prompts, [r["label"] for r in rows])
    assert [float(x) for x in out["rewards"]] == wants


def test_a_rollout_given_as_chat_messages_scores_as_played(run):
    _, records = run
    for record in records[:10]:
        want, transcript = _rollout(record)
        assert play(record, transcript).row["reward"] == want
