"""The one redaction rule: every way a key can be given is caught; ordinary data is left."""

from __future__ import annotations

import base64
import logging

from wai_exp.cli import move_secret_overrides
from wai_exp.domain.secrets import (
    REDACTED,
    RedactingFilter,
    is_secret_key,
    redact,
    redact_overrides,
    redact_text,
    register_config_secrets,
)


def test_credential_keys_are_secret_but_token_counts_are_not():
    for key in ("api_key", "agent.api_key", "judge.auth_token", "OPENAI_API_KEY", "password",
                "db.password", "secret", "authorization", "+agent.kwargs.api_key"):  # fmt: skip
        assert is_secret_key(key), key
    for key in ("max_tokens", "eos_token", "tokens", "agent.model", "keyword", "base_url"):
        assert not is_secret_key(key), key


def test_url_passwords_bearer_headers_and_key_shapes_are_redacted():
    assert (
        redact_text("http://user:hunter2pass@host:8000/v1")
        == f"http://user:{REDACTED}@host:8000/v1"
    )
    assert redact_text("Authorization: Bearer abcdefgh12345") == f"Authorization: Bearer {REDACTED}"
    assert "sk-proj-abcdefghijklmnop1234" not in redact_text("key sk-proj-abcdefghijklmnop1234 bad")
    assert redact_text("+agent.api_key=zzz") == f"+agent.api_key={REDACTED}"
    assert redact_text('{"api_key": "xyzxyzxyz"}') == f'{{"api_key": "{REDACTED}"}}'


def test_environment_keys_are_redacted_wherever_they_appear(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "an-env-key-value-42")
    monkeypatch.setenv("SOME_PROVIDER_TOKEN", "tok-value-9999")
    text = "server said: bad key an-env-key-value-42 (and tok-value-9999)"
    assert redact_text(text, keys=False) == f"server said: bad key {REDACTED} (and {REDACTED})"


def test_config_secrets_are_registered_and_scrubbed_from_echoes():
    register_config_secrets(
        {"agent": {"api_key": "cfg-key-123456", "base_url": "http://u:urlpw789@h/v1"}}
    )
    assert redact_text("echo cfg-key-123456", keys=False) == f"echo {REDACTED}"
    basic = base64.b64encode(b"u:urlpw789").decode()
    assert redact_text(f"quoted Basic {basic}", keys=False) == f"quoted Basic {REDACTED}"


def test_ordinary_text_and_row_data_survive():
    text = "max_tokens: 512, eos_token: </s>, the bearer of good news, basic information"
    assert redact_text(text) == text
    row = {"steps": [{"tool": "login", "arguments": {"password": "mock-pass"}}], "reward": 1.0}
    assert redact(row, keys=False) == row  # a mock tool's argument is data, not our key
    assert redact(row)["steps"][0]["arguments"]["password"] == REDACTED


def test_overrides_are_redacted_and_moved_out_of_hydras_sight():
    args = ["+experiment=rl_round", "+agent.api_key=sk-abcdefghijklmnopqrstuv",
            "agent.base_url=http://u:pw123456@h/v1", "simulate.budget=8", "--multirun"]  # fmt: skip
    env: dict[str, str] = {}
    moved = move_secret_overrides(args, env)
    assert moved[0] == "+experiment=rl_round" and moved[3:] == ["simulate.budget=8", "--multirun"]
    assert moved[1] == "+agent.api_key=${oc.env:WAI_EXP_SECRET_0}"
    assert moved[2] == "agent.base_url=${oc.env:WAI_EXP_SECRET_1}"
    assert env == {
        "WAI_EXP_SECRET_0": "sk-abcdefghijklmnopqrstuv",
        "WAI_EXP_SECRET_1": "http://u:pw123456@h/v1",
    }
    assert redact_overrides(moved)[1:3] == [
        f"+agent.api_key={REDACTED}",
        f"agent.base_url={REDACTED}",
    ]


def test_a_swept_key_has_every_value_moved_and_other_sweeps_pass_through():
    env: dict[str, str] = {}
    moved = move_secret_overrides(
        ["+agent.api_key=key-one-abcdef,'key-two-abcdef'", "seed=0,1,2", "x.password='a,bcdefg'"],
        env,
    )
    assert moved == [
        "+agent.api_key=${oc.env:WAI_EXP_SECRET_0},${oc.env:WAI_EXP_SECRET_1}",
        "seed=0,1,2",
        "x.password=${oc.env:WAI_EXP_SECRET_2}",  # quoted: one value with a comma in it
    ]
    assert env == {
        "WAI_EXP_SECRET_0": "key-one-abcdef",
        "WAI_EXP_SECRET_1": "key-two-abcdef",
        "WAI_EXP_SECRET_2": "a,bcdefg",
    }


def test_hydras_escaped_interpolation_is_a_reference_not_a_secret():
    # .hydra/overrides.yaml stores a moved key as Hydra escapes it; it names a variable
    line = "+agent.api_key=$\\{oc.env\\:WAI_EXP_SECRET_0\\}"
    assert redact_text(line) == line
    assert redact_text("+agent.api_key=real-key-value") == f"+agent.api_key={REDACTED}"
    # a message's placeholders are not keys: the fix it names must stay readable
    fix = "export OPENAI_API_KEY=<your key> (or pass +agent.api_key=...)"
    assert redact_text(fix) == fix


def test_log_records_are_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-log-test-abcdefghijklmnop")
    record = logging.LogRecord(
        "x", logging.ERROR, __file__, 1, "failed with %s", ("sk-log-test-abcdefghijklmnop",), None
    )
    assert RedactingFilter().filter(record)
    assert record.getMessage() == f"failed with {REDACTED}"
