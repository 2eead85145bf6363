"""The one redaction rule: every way a key can be given is caught; ordinary data is left."""

from __future__ import annotations

import base64
import io
import json
import logging
from urllib.parse import quote

from wai_exp.cli import move_secret_overrides
from wai_exp.domain.secrets import (
    REDACTED,
    RedactingFilter,
    RedactingStream,
    is_secret_key,
    known_secrets,
    redact,
    redact_overrides,
    redact_text,
    register_config_secrets,
    register_secret,
    register_url_secrets,
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
    assert moved[2] == "agent.base_url=http://u:${oc.env:WAI_EXP_SECRET_1}@h/v1"
    assert env == {
        "WAI_EXP_SECRET_0": "sk-abcdefghijklmnopqrstuv",
        "WAI_EXP_SECRET_1": "pw123456",
    }
    assert redact_overrides(moved)[1:3] == [
        f"+agent.api_key={REDACTED}",
        f"agent.base_url=http://u:{REDACTED}@h/v1",
    ]


def test_a_url_keeps_scheme_host_port_and_path_and_loses_only_its_secrets():
    cases = {
        "http://user:unit-pw-0030@127.0.0.1:8011/v1": f"http://user:{REDACTED}@127.0.0.1:8011/v1",
        "https://unit-token-0031@gw.example:443/v1": f"https://{REDACTED}@gw.example:443/v1",
        "http://h:8011/v1?api-version=2024&api_key=unit-q-0032&key=unit-q-0033#x": (
            f"http://h:8011/v1?api-version=2024&api_key={REDACTED}&key={REDACTED}#x"
        ),
    }
    for url, shown in cases.items():
        assert redact_text(url, keys=False) == shown
        assert redact_text(url) == shown
    # where a value lives is no secret; a query with no credential is left
    for text in ("http://h/v1?token=${oc.env:X}", "http://h/v1?page=2&sort=asc", "a?b=1&c=2"):
        assert redact_text(text) == text


def test_only_a_urls_secrets_are_moved_off_the_command_line():
    env: dict[str, str] = {}
    moved = move_secret_overrides([
        "agent.base_url=http://user:unit-pw-0034@127.0.0.1:8011/v1",
        "agent.base_url='http://h:8011/v1?api_key=unit-q-0035&api-version=1'",
        "judge.model=vllm:j@https://unit-token-0036@h:1/v1,vllm:j@http://h:2/v1",
        "agent.base_url=choice(http://u:unit-c-0037@h/v1,'http://u:unit-c-0038@h/v1')",
        "agent.base_url=http://u:unit-pw-0039@h/v1/sk-abcdefghijklmnopqrstuv",
    ], env)  # fmt: skip
    assert moved == [
        "agent.base_url=http://user:${oc.env:WAI_EXP_SECRET_0}@127.0.0.1:8011/v1",
        # every query value: a server may take its token under any name; one under a name
        # no credential has goes to a variable only records leave out (a word, maybe)
        "agent.base_url='http://h:8011/v1?api_key=${oc.env:WAI_EXP_SECRET_1}"
        "&api-version=${oc.env:WAI_EXP_HIDDEN_0}'",
        "judge.model=vllm:j@https://${oc.env:WAI_EXP_SECRET_2}@h:1/v1,vllm:j@http://h:2/v1",
        "agent.base_url=choice(http://u:${oc.env:WAI_EXP_SECRET_3}@h/v1,"
        "'http://u:${oc.env:WAI_EXP_SECRET_4}@h/v1')",
        # a key-shaped path segment is one of the URL's parts: it moves alone
        "agent.base_url=http://u:${oc.env:WAI_EXP_SECRET_5}@h/v1/${oc.env:WAI_EXP_SECRET_6}",
    ]
    assert list(env.values()) == [
        "unit-pw-0034", "unit-q-0035", "1", "unit-token-0036", "unit-c-0037", "unit-c-0038",
        "unit-pw-0039", "sk-abcdefghijklmnopqrstuv",
    ]  # fmt: skip
    # what Hydra parses and every copy then shows: the server, and no secret
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for item in moved:
        parser.parse_override(item)
    shown = " ".join(redact_overrides(moved))
    assert "127.0.0.1:8011/v1" in shown and "h:8011/v1?api_key=" in shown
    assert "unit-" not in shown


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


def test_a_known_key_is_redacted_in_every_form_it_travels_in():
    key = 'unit-form-key/0012+"x'
    register_secret(key)

    def b64(text: str, encode=base64.b64encode) -> str:
        return encode(text.encode()).decode()

    for text in (
        key,
        quote(key, safe=""),  # unit-form-key%2F0012%2B%22x
        quote(key, safe="").lower(),  # some clients write %2f
        json.dumps(key),  # "unit-form-key/0012+\"x" in a JSON file
        f"Authorization: Basic {b64(f'any-user:{key}')}",  # a user name never seen
        b64(f"ab:{key}"),  # the key at each offset modulo 3 of the base64 text
        b64(f"a:{key}"),
        b64(f"u:{key}", base64.urlsafe_b64encode),
    ):
        out = redact_text(f"echo {text} end", keys=False)
        assert text not in out and REDACTED in out, text
        assert "0012" not in out, out
    # percent-encoded as given, decoded on the wire (and the other way): both are the key
    register_secret("unit-pct-key%2Fq0013")
    assert redact_text("sent unit-pct-key/q0013", keys=False) == f"sent {REDACTED}"
    register_secret("unit-raw-key/q0013")
    assert redact_text("url unit-raw-key%2Fq0013", keys=False) == f"url {REDACTED}"


def test_redacting_by_value_leaves_ordinary_text_alone():
    register_secret("unit-ordinary-key-0014")
    text = "pass@1 0.50 [0.31, 0.69]; base64 of something else: aGVsbG8gd29ybGQgYWdhaW4="
    assert redact_text(text, keys=False) == text


def test_a_url_with_credentials_registers_the_decoded_password_and_basic_header():
    register_url_secrets("vllm:m@http://us%40er:unit-url-key%2F0015@h:1/v1")
    basic = base64.b64encode(b"us@er:unit-url-key/0015").decode()
    out = redact_text(f"got unit-url-key/0015 via Basic {basic}", keys=False)
    assert "0015" not in out and basic not in out


def test_a_config_key_env_names_a_variable_whose_value_is_a_secret(monkeypatch):
    monkeypatch.setenv("MY_UNIT_JUDGE_KEY", "unit-judge-key-0016")
    register_config_secrets({"judge": {"api_key_env": "MY_UNIT_JUDGE_KEY", "model_env": "X"}})
    assert redact_text("401: unit-judge-key-0016", keys=False) == f"401: {REDACTED}"
    assert "unit-judge-key-0016" in known_secrets()
    # the variable's name is no secret: the fix it names stays readable
    assert (
        redact_text("judge.api_key_env=MY_UNIT_JUDGE_KEY") == "judge.api_key_env=MY_UNIT_JUDGE_KEY"
    )


def test_a_key_the_model_layer_sends_is_registered():
    from wai_exp.llm.providers import PROVIDERS

    assert PROVIDERS["vllm"].api_key("unit-sent-key-0017") == "unit-sent-key-0017"
    assert redact_text("quoted unit-sent-key-0017", keys=False) == f"quoted {REDACTED}"


def test_a_choice_sweep_over_keys_has_every_value_moved():
    env: dict[str, str] = {}
    moved = move_secret_overrides(
        [
            "+agent.api_key=choice(unit-c-0018,'unit-c,0019')",
            "agent.base_url=shuffle(choice(http://u:unit-c-0020@h/v1, http://h2/v1))",
            "seed=range(start=0,stop=3)",
            "judge=choice(llm,checklist)",
        ],
        env,
    )
    assert moved == [
        "+agent.api_key=choice(${oc.env:WAI_EXP_SECRET_0},${oc.env:WAI_EXP_SECRET_1})",
        "agent.base_url=shuffle(choice(http://u:${oc.env:WAI_EXP_SECRET_2}@h/v1, http://h2/v1))",
        "seed=range(start=0,stop=3)",
        "judge=choice(llm,checklist)",
    ]
    assert env == {
        "WAI_EXP_SECRET_0": "unit-c-0018",
        "WAI_EXP_SECRET_1": "unit-c,0019",
        "WAI_EXP_SECRET_2": "unit-c-0020",
    }


def test_the_terminal_streams_pass_the_redaction_rule():
    register_secret("unit-stream-key-0021")
    sink = io.StringIO()
    stream = RedactingStream(sink)
    assert stream.write("Error executing job: ['+k=unit-stream-key-0021']\n") == 49
    stream.writelines(["a unit-stream-key-0021\n"])
    assert sink.getvalue() == f"Error executing job: ['+k={REDACTED}']\na {REDACTED}\n"
    assert stream.getvalue() == sink.getvalue()  # the rest is the wrapped stream's


# -- a URL or command the config names: every value that could be a credential ------------


def _token() -> str:
    """A credential of no shape any rule knows (no key prefix, no credential-like name)."""
    import secrets

    return "Z" + secrets.token_hex(10)


QUERY_NAMES = ("sig", "code", "auth", "X-Amz-Signature", "access", "v")


def test_a_recorded_url_keeps_its_server_and_loses_every_query_value_whatever_its_name():
    for name in QUERY_NAMES:
        t1, t2 = _token(), _token()
        url = f"http://127.0.0.1:8123/mcp?{name}={t1}&other={t2}&{t2}"
        for shown in (
            redact({"world": {"url": url}})["world"]["url"],
            redact({"agent": {"base_url": url}}, keys=False)["agent"]["base_url"],
            redact_overrides([f"world.url='{url}'"])[0],
        ):
            assert t1 not in shown and t2 not in shown, shown
            assert f"http://127.0.0.1:8123/mcp?{name}={REDACTED}&other={REDACTED}" in shown
    shown = redact({"url": "https://deploy:Zpw1234567@gw.example:8443/v1"})["url"]
    assert shown == f"https://deploy:{REDACTED}@gw.example:8443/v1"
    token = _token()
    shown = redact({"url": f"https://gw.example/cb?state=1#access_token={token}"})["url"]
    assert shown == f"https://gw.example/cb?state={REDACTED}#{REDACTED}"


def test_a_recorded_command_keeps_its_program_and_flags_and_loses_their_values():
    t = [_token() for _ in range(5)]
    world = {
        "command": f"/opt/venv/bin/python -m my_server --access {t[0]} --auth={t[1]} -k{t[2]}",
        "reset_command": f"TOKEN={t[3]} ./scripts/reset.sh {t[4]}",
    }
    assert redact({"world": world})["world"] == {
        "command": f"python -m my_server --access {REDACTED} --auth={REDACTED} -k{REDACTED}",
        "reset_command": f"TOKEN={REDACTED} ./scripts/reset.sh {REDACTED}",
    }
    assert redact_overrides([f"world.command='python srv.py --access {t[0]}'"]) == [
        f"world.command=python srv.py --access {REDACTED}"
    ]


def test_every_query_value_of_a_config_url_is_scrubbed_from_later_messages():
    """An HTTP client logs the request line with the base URL's query; a server quotes it."""
    t1, t2 = _token(), _token()
    register_config_secrets({
        "agent": {"base_url": f"http://127.0.0.1:8123/v1?access={t1}"},
        "judge": {"model": f"vllm:judge@http://127.0.0.1:8124/v1?X-Amz-Signature={t2}"},
    })  # fmt: skip
    line = (
        f'HTTP Request: POST http://127.0.0.1:8123/v1/chat/completions?access={t1} "200 OK"; '
        f"judge at .../v1?X-Amz-Signature={t2}"
    )
    for clean in (redact_text(line), redact_text(line, keys=False)):
        assert t1 not in clean and t2 not in clean
        assert "http://127.0.0.1:8123/v1/chat/completions?access=" in clean


def test_a_config_urls_plain_query_words_stay_in_rows_and_messages_elsewhere():
    """A query value under a name no credential has may be a word (``?profile=support``,
    Azure's ``?api-version=2024-06-01``): the URL loses it wherever it is quoted, but the
    same word in a reply or a log line that is not that URL is data, and stays."""
    token = _token()
    register_config_secrets({
        "world": {"url": f"http://127.0.0.1:8123/mcp?profile=support&auth={token}"},
        "agent": {"base_url": "https://gw.example/openai/v1?api-version=2024-06-01"},
    })  # fmt: skip
    reply = f"Thanks for contacting support; your order of 2024-06-01 ships today ({token})."
    for clean in (redact_text(reply), redact_text(reply, keys=False)):
        assert (
            clean
            == f"Thanks for contacting support; your order of 2024-06-01 ships today ({REDACTED})."
        )
    line = "POST https://gw.example/openai/v1/chat/completions?api-version=2024-06-01"
    assert redact_text(line, keys=False) == line.replace("2024-06-01", REDACTED)


def test_a_plain_word_moved_off_the_command_line_stays_in_rows(monkeypatch):
    """The command line moves every query value and flag value out of Hydra's copies; a
    word among them (``?profile=support``, ``--name supportdesk``, ``NODE_ENV=production``)
    must not then be scrubbed from every row as the environment's keys are."""
    token = _token()
    env: dict[str, str] = {}
    move_secret_overrides([
        f"world.url=http://127.0.0.1:8123/mcp?profile=support&sig={token}",
        "world.command='python srv.py --name supportdesk'",
        "+world.env.NODE_ENV=production",
    ], env)  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    reply = f"Our supportdesk team in production: contact support ({token})."
    assert redact_text(reply, keys=False) == reply.replace(token, REDACTED)


def test_a_commands_credential_words_are_scrubbed_from_later_messages():
    t1, t2, t3 = _token(), _token(), _token()
    register_config_secrets(
        {"world": {"command": f"TOKEN={t1} python srv.py --api-key {t2} --sig={t3} --port 8123"}}
    )
    text = redact_text(f"server said: started with {t1} {t2} {t3} on port 8123", keys=False)
    assert t1 not in text and t2 not in text and t3 not in text and "port 8123" in text


def test_a_url_or_command_with_secrets_is_moved_off_the_command_line():
    t1, t2, t3 = _token(), _token(), _token()
    env: dict[str, str] = {}
    moved = move_secret_overrides([
        f"world.url='http://127.0.0.1:8123/mcp?access={t1}&X-Amz-Signature={t2}'",
        f"world.command='python srv.py --auth {t3}'",
        "world.reset_command='python -m my_server.reset'",
    ], env)  # fmt: skip
    assert moved == [
        "world.url='http://127.0.0.1:8123/mcp?access=${oc.env:WAI_EXP_HIDDEN_0}"
        "&X-Amz-Signature=${oc.env:WAI_EXP_SECRET_0}'",
        # the flag's value, quoted for the shell split that runs the line
        "world.command=\"python srv.py --auth '${oc.env:WAI_EXP_SECRET_1}'\"",
        "world.reset_command='python -m my_server.reset'",  # nothing to redact: it stays
    ]
    assert list(env.values()) == [t1, t2, t3]


def test_a_command_line_runs_as_typed_with_its_values_moved(monkeypatch):
    """What Hydra parses and the run resolves splits into the words the user typed; every
    copy Hydra writes (the overrides as typed) shows the program and flags, no value."""
    import shlex

    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    t = [_token() for _ in range(4)]
    typed = {
        "world.command": f"npx -y @scope/server-x --api-key {t[0]} --auth={t[1]} -k{t[2]}",
        "world.reset_command": f"TOKEN={t[3]} python scripts/reset.py --quiet",
    }
    env: dict[str, str] = {}
    moved = move_secret_overrides([f"{k}='{v}'" for k, v in typed.items()], env)
    parser = OverridesParser.create()
    for item in moved:
        key, _, value = item.partition("=")
        parsed = parser.parse_override(item).value()
        for name, secret in env.items():
            monkeypatch.setenv(name, secret)
        resolved = OmegaConf.create({"v": parsed}).v
        assert shlex.split(resolved) == shlex.split(typed[key])
    shown = " ".join(redact_overrides(moved))
    assert not any(token in shown for token in t)
    assert f"world.command=npx -y @scope/server-x --api-key {REDACTED} --auth={REDACTED}" in shown
    assert f"world.reset_command=TOKEN={REDACTED} python scripts/reset.py --quiet" in shown


def test_an_override_hydra_cannot_read_is_quoted_without_its_values():
    from wai_exp.cli import override_grammar_problem

    t = _token()
    problem = override_grammar_problem([f"world.url=http://127.0.0.1:8123/mcp?access={t}"])
    assert problem is not None and t not in problem
    assert f"world.url=http://127.0.0.1:8123/mcp?access={REDACTED}" in problem


def test_every_value_of_world_env_and_headers_is_left_out_of_records_whatever_its_name():
    """``+world.env.MY_VAR=...`` and ``+world.headers.X-Notes=...`` (names no rule knows)
    went into Hydra's copies as typed: only credential-like names were moved. Every value
    is left out of records; only a credential's name makes it scrubbed from every text
    (``NODE_ENV=production``: a reply saying "production" is data)."""
    from wai_exp.tracking.params import flatten_config

    t1, t2 = _token(), _token()
    env: dict[str, str] = {}
    moved = move_secret_overrides([f"+world.env.MY_VAR={t1}", f"+world.headers.X-Notes={t2}"], env)
    assert moved == [
        "+world.env.MY_VAR=${oc.env:WAI_EXP_HIDDEN_0}",
        "+world.headers.X-Notes=${oc.env:WAI_EXP_HIDDEN_1}",
    ]
    assert redact_overrides([f"+world.env.MY_VAR={t1}"]) == [f"+world.env.MY_VAR={REDACTED}"]
    world = {"env": {"MY_VAR": t1}, "headers": {"X-Notes": t2}}
    assert redact({"world": world})["world"] == {
        "env": {"MY_VAR": REDACTED},
        "headers": {"X-Notes": REDACTED},
    }
    assert set(flatten_config({"world": world}).values()) == {REDACTED}
    register_config_secrets({"world": world})
    assert redact_text(f"{t1} {t2}", keys=False) == f"{t1} {t2}"
    t3, t4, t5 = _token(), _token(), _token()
    credentials = {
        "env": {"GITHUB_TOKEN": t3, "DATABASE_URL": f"postgres://app:{t5}@db/x"},
        "headers": {"Authorization": f"Bearer {t4}"},
    }
    register_config_secrets({"world": credentials})
    assert t3 not in redact_text(f"{t3} {t4} {t5}", keys=False)
    assert redact_text(f"{t3} {t4} {t5}", keys=False) == f"{REDACTED} {REDACTED} {REDACTED}"
    assert move_secret_overrides([f"+world.env.GITHUB_TOKEN={t3}"], {}) == [
        "+world.env.GITHUB_TOKEN=${oc.env:WAI_EXP_SECRET_0}"
    ]


def test_a_command_started_through_env_keeps_its_program_and_hides_its_assignments():
    """``env NAME=value python -m srv`` is ``python -m srv`` with one more variable: the
    program after ``env`` was recorded (and named in errors) as ``***redacted***``, and
    ``env``'s assignments were neither recorded by their name nor scrubbed from later text."""
    t = _token()
    command = f"env -u HOME NOTES_TOKEN={t} python -m my_server --port 8123"
    assert redact({"world": {"command": command}})["world"]["command"] == (
        f"env -u {REDACTED} NOTES_TOKEN={REDACTED} python -m my_server --port {REDACTED}"
    )
    plain = "world.command='/usr/bin/env python -m my_server'"
    assert redact_overrides([plain]) == ["world.command=env python -m my_server"]
    env: dict[str, str] = {}
    moved = move_secret_overrides([f"world.command='{command}'"], env)
    assert [name for name, value in env.items() if value == t] == ["WAI_EXP_SECRET_0"]
    assert "' python -m my_server --port '" in moved[0]
    register_config_secrets({"world": {"command": command}})
    assert redact_text(f"the server said {t}", keys=False) == f"the server said {REDACTED}"


#: Command lines started through a launcher, and how a record shows each: what the launcher
#: starts stays (it names the server), its options' values and every argument go.
LAUNCHED = {
    "npx -y @modelcontextprotocol/server-filesystem /srv":
        f"npx -y @modelcontextprotocol/server-filesystem {REDACTED}",
    "uvx mcp-server-fetch": "uvx mcp-server-fetch",
    "uvx --from ./tools/fetch mcp-server-fetch --user-agent=bot":
        f"uvx --from {REDACTED} mcp-server-fetch --user-agent={REDACTED}",
    "uv run --with mcp my_server.py": f"uv run --with {REDACTED} my_server.py",
    "uv run --python=3.12 mcp-server-x": f"uv run --python={REDACTED} mcp-server-x",
    "uv tool run mcp-server-time --local-timezone UTC":
        f"uv tool run mcp-server-time --local-timezone {REDACTED}",
    "pipx run pkg": "pipx run pkg",
    "node server.js": "node server.js",
    "deno run -A server.ts": "deno run -A server.ts",
    "deno run --allow-net=api.example.com jsr:@scope/srv":
        f"deno run --allow-net={REDACTED} jsr:@scope/srv",
    "docker run -i --rm mcp/fetch": "docker run -i --rm mcp/fetch",
    "docker run -it --rm -v /srv:/data --name notes ghcr.io/org/notes-server:1.2 stdio":
        f"docker run -it --rm -v {REDACTED} --name {REDACTED} ghcr.io/org/notes-server:1.2 "
        f"{REDACTED}",
    "python3 -m pkg": "python3 -m pkg",
    "python3.11 srv.py": "python3.11 srv.py",
    "env DEBUG=1 npx -y @scope/server-x": f"env DEBUG={REDACTED} npx -y @scope/server-x",
    # an option the launcher does not know may take the next word: nothing after it stays
    "npx --some-option x @scope/server-x": f"npx --some-option {REDACTED} {REDACTED}",
}  # fmt: skip


def test_what_a_launcher_starts_is_recorded_and_its_options_values_are_not():
    """``npx -y @scope/server``, ``uvx pkg``, ``docker run -i --rm image`` ...: the package,
    image or program the launcher starts was recorded (and named in errors, and moved off
    the command line) as ``***redacted***``, so no record said which server a run used."""
    for command, shown in LAUNCHED.items():
        assert redact({"world": {"command": command}})["world"]["command"] == shown, command
    env: dict[str, str] = {}
    moved = move_secret_overrides(["world.command='uvx mcp-server-fetch --api-key KEYVALUE1'"], env)
    assert moved == [
        "world.command=\"uvx mcp-server-fetch --api-key '${oc.env:WAI_EXP_SECRET_0}'\""
    ]
    assert list(env.values()) == ["KEYVALUE1"]


def test_a_credential_shaped_word_is_hidden_even_where_a_program_stands():
    """A key (``sk-...``, a long hex or random token) is no package name: in the place a
    launcher's package or the program stands it goes too; docker's ``-e NAME=value`` is an
    environment assignment, recorded by name and scrubbed from later text."""
    import secrets

    key, hex_token, t = "sk-" + secrets.token_hex(12), secrets.token_hex(16), _token()
    for command, shown in {
        f"npx -y {key}": f"npx -y {REDACTED}",
        f"uvx --from mcp-server-x {hex_token}": f"uvx --from {REDACTED} {REDACTED}",
        f"docker run -i ghcr.io/{hex_token}/srv": f"docker run -i {REDACTED}",
        f"./bin/{key}": REDACTED,
        f"docker run -i --rm -e NOTES_TOKEN={t} -e PORT mcp/notes":
            f"docker run -i --rm -e NOTES_TOKEN={REDACTED} -e {REDACTED} mcp/notes",
    }.items():  # fmt: skip
        assert redact_overrides([f"world.command='{command}'"]) == [f"world.command={shown}"]
    register_config_secrets({"world": {"command": f"docker run -i -e NOTES_TOKEN={t} mcp/x"}})
    assert redact_text(f"the server said {t}", keys=False) == f"the server said {REDACTED}"


#: Path segments a URL setting names its server by: models, routes, folders, dates.
ORDINARY_SEGMENTS = [
    "v1", "mcp", "api", "v2", "notes", "openai", "deployments", "chat-completions",
    "gpt-4o-mini-2024-07-18", "Llama-3.1-8B-Instruct", "Qwen2.5-72B-Instruct-AWQ",
    "Meta-Llama-3.1-70B-Instruct-Turbo", "DeepSeek-R1-Distill-Qwen-7B",
    "Phi-3-mini-4k-instruct", "Mixtral-8x7B-Instruct-v0.1", "claude-3-5-sonnet-20241022",
    "mistral-small-3.1-24b-instruct-2503", "gemini-2.0-flash-001",
    "Qwen3-30B-A3B-Instruct-2507", "Llama-4-Scout-17B-16E-Instruct", "WizardLM-2-8x22B-Chat",
    "gemma-2-27b-it-GGUF-Q4_K_M", "Mistral-Nemo-Instruct-2407", "OLMo-2-1124-13B-Instruct",
    "c4ai-command-r-plus-08-2024", "Qwen2-VL-72B-Instruct-GPTQ-Int4",
    "Mixtral-8x22B-Instruct-v0_1", "Qwen2_5-Coder-32B-Instruct-AWQ", "gpt-4-turbo-2024-04-09",
    "claude-opus-4-20250514", "text-embedding-3-large", "paraphrase-multilingual-MiniLM-L12-v2",
    "GetCustomerInformation", "listToolsAndCallTool", "apiGatewayV2Endpoint",
    "20241206T174455Z", "2024-12-06T17-44-55", "test_a_urls_query_values_and_0",
    "test_sweep_over_world_urls_1", "pytest-of-root", "my_experiment_2024_12_06",
    "notes_server_2025_12_06", "order-ORD-00042-details", "modelcontextprotocol",
]  # fmt: skip


def test_a_key_shaped_path_segment_is_a_secret_and_an_ordinary_path_is_not():
    """Hosted MCP gateways and webhooks take their key in the path (``/mcp/sk-.../``,
    ``/v1/<token>/``): the URL was recorded, registered and kept on the command line with
    it. A record still names the server; an ordinary path (a route, a model, a folder)
    stays as it is."""
    from wai_exp.domain.secrets import redact_url, url_secret_spans

    keys = {
        "sk": "sk-ak-Tq7ZkP2mX9vB4nR8wL3c",
        "b62": "Tq7ZkP2mX9vB4nR8wL3cY6hJ",
        "b64url": "vz8MdPfW_u6vRUNIAg5ptA",
        "hex": "9f1c2ab7e04d4c6f8a3b5d7e9f0a1b2c",
        "uuid": "c1880148-2734-4487-8b05-aa3e89c69518",
        "slack": "xoxb-1234567890-abcdefGHIJ",
        "named": "Kx7pq0",
    }
    urls = {
        "sk": "http://127.0.0.1:8000/mcp/{}/",
        "b62": "https://hooks.example/services/T0/B0/{}",
        "b64url": "https://gw.example/v1/{}/mcp",
        "hex": "https://gw.example/api/mcp/s/{}/mcp",
        "uuid": "https://mcp.example.net/{}/gmail",
        "slack": "https://gw.example/v1/{}",
        "named": "https://gw.example/api-key/{}/mcp",
    }
    for name, key in keys.items():
        url = urls[name].format(key)
        assert redact_url(url) == urls[name].format(REDACTED), name
        assert redact({"world": {"url": url}})["world"]["url"] == redact_url(url)
        assert [url[a:b] for a, b in url_secret_spans(url)] == [key], name
        env: dict[str, str] = {}
        moved = move_secret_overrides([f"world.url='{url}'"], env)
        assert moved == [f"world.url='{urls[name].format('${oc.env:WAI_EXP_SECRET_0}')}'"]
        assert env == {"WAI_EXP_SECRET_0": key}
    register_config_secrets({"world": {"url": urls["b62"].format(keys["b62"])}})
    line = f"HTTP Request: POST https://hooks.example/services/T0/B0/{keys['b62']} 200"
    assert redact_text(line, keys=False) == line.replace(keys["b62"], REDACTED)
    assert keys["slack"] not in redact_text(f"token {keys['slack']} refused", keys=False)
    for segment in ORDINARY_SEGMENTS:
        url = f"https://gw.example/api/token/refresh/models/{segment}/v1"
        assert redact_url(url) == url and url_secret_spans(url) == [], segment
    for url in (
        "sqlite:////home/me/runs/9f1c2ab7e04d4c6f8a3b5d7e9f0a1b2c/mlflow.db",  # a folder
        "file:///tmp/pytest-of-root/pytest-12/test_a_urls_query_values_and_0/mlruns",
        "http://127.0.0.1:8000/mcp/${oc.env:MCP_KEY}/",
        "http://h/key/${oc.env:K}",
    ):
        assert redact_url(url) == url and url_secret_spans(url) == [], url  # fmt: skip


def test_a_redacted_query_value_keeps_the_bracket_or_comma_that_ends_the_sentence() -> None:
    text = "the server at (world.url=http://127.0.0.1:9/mcp?token=abc123xyz) can change, see"
    assert redact_text(text) == (
        "the server at (world.url=http://127.0.0.1:9/mcp?token=***redacted***) can change, see"
    )
    assert redact_text("at http://h/mcp?key=abc123xyz, then") == (
        "at http://h/mcp?key=***redacted***, then"
    )


def test_a_relative_script_path_is_recorded_as_written_and_an_absolute_one_by_its_name() -> None:
    from wai_exp.domain.secrets import redact_command

    # a relative path names the server and runs again from the same folder; an absolute or
    # home path's folders may name the person
    assert redact_command("python srv/notes_srv.py --port 8000") == (
        f"python srv/notes_srv.py --port {REDACTED}"
    )
    assert redact_command("./bin/notes-server") == "./bin/notes-server"
    assert redact_command("npx -y ./tools/srv.js") == "npx -y ./tools/srv.js"
    assert redact_command("python /home/maria/srv/notes_srv.py") == "python notes_srv.py"
    assert redact_command("~/bin/notes-server") == "notes-server"
