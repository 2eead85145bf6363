"""Config -> MLflow params: dotted flattening, valid keys, truncation with a warning, chunking."""

from __future__ import annotations

import logging

import pytest

from wai_exp.tracking.params import (
    MAX_KEY_CHARS,
    MAX_PARAM_VALUE_CHARS,
    REDACTED,
    TRUNCATION_MARK,
    chunked,
    flatten_config,
    log_params,
    redact_config,
    sanitize_key,
)


def test_nested_mappings_and_lists_flatten_with_dots_and_indices():
    cfg = {
        "simulate": {"budget": 200, "mode": "rl", "fault_rate": 0.5},
        "judge": {"rules": ["grounded", {"name": "honest", "weight": 2}]},
        "flag": True,
        "off": False,
        "nothing": None,
        "empty_list": [],
        "empty_map": {},
    }
    assert flatten_config(cfg) == {
        "simulate.budget": "200",
        "simulate.mode": "rl",
        "simulate.fault_rate": "0.5",
        "judge.rules.0": "grounded",
        "judge.rules.1.name": "honest",
        "judge.rules.1.weight": "2",
        "flag": "true",
        "off": "false",
        "nothing": "null",
        "empty_list": "[]",
        "empty_map": "{}",
    }


def test_omegaconf_nodes_are_resolved_before_flattening():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"seed": 3, "knobs": {"seed": "${seed}"}, "xs": [1, 2]})
    assert flatten_config(cfg) == {"seed": "3", "knobs.seed": "3", "xs.0": "1", "xs.1": "2"}


@pytest.mark.parametrize(
    "raw",
    ["a//b", "./x", "..", ".", "/lead", "trail/", "we$ird key!", "a/../b", "..hidden", "", "ü.ß"],
)
def test_sanitized_keys_pass_mlflows_own_validator(raw):
    from mlflow.utils.validation import _validate_param_name

    key = sanitize_key(raw)
    _validate_param_name(key)  # raises MlflowException on a key MLflow would refuse
    assert key


def test_valid_keys_are_left_alone():
    for key in ["simulate.budget", "a/b", "x-y z:1", "under_score"]:
        assert sanitize_key(key) == key


def test_long_keys_are_capped_and_stay_distinct():
    a, b = "k" * 300 + "a", "k" * 300 + "b"
    sa, sb = sanitize_key(a), sanitize_key(b)
    assert len(sa) <= MAX_KEY_CHARS and len(sb) <= MAX_KEY_CHARS
    assert sa != sb


def test_keys_that_collide_after_sanitizing_get_a_suffix_and_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="wai_exp.tracking.params"):
        flat = flatten_config({"a$": 1, "a%": 2, "a&": 3})
    assert flat == {"a_": "1", "a__2": "2", "a__3": "3"}
    assert "another key already uses" in caplog.text


def test_values_over_6000_chars_are_truncated_with_a_logged_warning(caplog):
    long = "x" * 7000
    with caplog.at_level(logging.WARNING, logger="wai_exp.tracking.params"):
        flat = flatten_config({"agent": {"system_prompt": long}, "short": "y" * 6000})
    value = flat["agent.system_prompt"]
    assert len(value) == MAX_PARAM_VALUE_CHARS
    assert value.endswith(TRUNCATION_MARK)
    assert value.startswith("x" * 100)
    assert flat["short"] == "y" * 6000  # exactly at the limit: kept whole
    assert "agent.system_prompt" in caplog.text and "7000" in caplog.text
    assert "short" not in caplog.text


def test_credentials_are_redacted_in_params_and_config_copy():
    cfg = {
        "agent": {"api_key": "sk-secret", "max_tokens": 512, "model": "m", "eos_token": "</s>"},
        "judge": {"auth_token": "t0k", "nested": [{"password": "pw"}]},
        "unset": {"api_key": None},
    }
    flat = flatten_config(cfg)
    assert flat["agent.api_key"] == REDACTED
    assert flat["judge.auth_token"] == REDACTED
    assert flat["judge.nested.0.password"] == REDACTED
    assert flat["agent.max_tokens"] == "512"  # not a credential
    assert flat["agent.eos_token"] == "</s>"  # a token, but not a credential
    assert flat["unset.api_key"] == "null"  # nothing to hide
    red = redact_config(cfg)
    assert red["agent"]["api_key"] == REDACTED and red["agent"]["model"] == "m"
    assert red["judge"]["nested"][0]["password"] == REDACTED
    assert cfg["agent"]["api_key"] == "sk-secret"  # the caller's config is not modified


class _RecordingClient:
    def __init__(self):
        self.batches: list[list] = []

    def log_batch(self, run_id, metrics=(), params=(), tags=(), synchronous=None):
        self.batches.append(list(params))


def test_params_are_sent_at_most_100_per_request():
    params = {f"p{i}": str(i) for i in range(250)}
    client = _RecordingClient()
    assert log_params(client, "run", params) == 3
    assert [len(b) for b in client.batches] == [100, 100, 50]
    sent = {p.key: p.value for batch in client.batches for p in batch}
    assert sent == params


def test_chunked_rejects_a_zero_size():
    with pytest.raises(ValueError, match="chunk size"):
        list(chunked([1, 2], 0))
    assert list(chunked([1, 2, 3], 2)) == [[1, 2], [3]]


def test_a_urls_query_values_and_a_commands_flag_values_never_become_params():
    import secrets

    t = ["Z" + secrets.token_hex(10) for _ in range(3)]
    world = {
        "url": f"http://127.0.0.1:9/mcp?sig={t[0]}&access={t[1]}",
        "command": f"python srv.py --access {t[2]}",
    }
    shown = {
        "url": f"http://127.0.0.1:9/mcp?sig={REDACTED}&access={REDACTED}",
        "command": f"python srv.py --access {REDACTED}",
    }
    assert flatten_config({"world": world}) == {f"world.{k}": v for k, v in shown.items()}
    assert redact_config({"world": world}) == {"world": shown}  # the config.yaml artifact
