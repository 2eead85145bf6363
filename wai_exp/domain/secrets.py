"""The one redaction rule: what counts as a secret, and how text is cleaned before it leaves.

Every place that writes text out of the process (files, MLflow params/tags/artifacts, logs,
error messages, Hydra's ``.hydra/`` folder) passes it through :func:`redact_text` (free text)
or :func:`redact` (nested data, where a credential-like key hides its value too). A secret is

* the value under a credential-like key: ``api_key``, ``*_api_key``, ``token``,
  ``auth_token``, ``password``, ``secret``, ``authorization`` ... (:func:`is_secret_key`;
  ``max_tokens`` and ``eos_token`` are not secrets);
* the secrets of a URL, and only those: its password (``http://user:KEY@host:8011/v1`` ->
  ``http://user:***redacted***@host:8011/v1``), a user with no password (``https://KEY@host``:
  the credential itself) and the value of a credential-like query parameter (``?api_key=``,
  ``?key=``, ``?sig=`` ...). Scheme, host, port and path stay, so a run still says which
  server it used;
* a bearer credential (``Authorization: Bearer KEY``) and key-shaped strings (``sk-...``,
  ``ghp_...``, ``xoxb-...``);
* the value of every provider key variable present in the environment (``OPENAI_API_KEY``,
  ``ANTHROPIC_API_KEY``, any ``*_API_KEY``/``*_TOKEN``/``*_SECRET``/``*_PASSWORD``), wherever
  it appears - also inside a server's error body that quotes the request's headers;
* everything of a URL or command line the config names that could carry a credential
  (:func:`redact_setting`): a token can sit under any query name or flag, so names cannot
  decide. A value under a URL key (``url``, ``base_url``, ``*_url``, ``uri``) keeps its
  scheme, user, host, port, path and query names; its password (or a user with no
  password), every key-shaped path segment (``/mcp/sk-.../``, a long random one: hosted
  servers may take their key in the path; :func:`is_key_segment`) and every query value go
  (:func:`redact_url`). A value under a command key
  (``command``, ``*_command``) keeps its program, what a known launcher starts (``npx -y
  @scope/server``, ``docker run -i mcp/fetch``), flag names, script file names and
  ``-m``'s module; every other word, and a kept one shaped like a key, goes
  (:func:`redact_command`). The runner registers
  every query value and key-shaped path segment of a URL in the config too, so a message
  or log line that quotes the URL (an HTTP client's request line) loses them as well;
* any value handed to :func:`register_secret` (the runner registers every secret it finds in
  the resolved config, the value of every variable a ``*_env`` key such as
  ``judge.api_key_env`` names, and the model layer registers every key and URL credential it
  sends, so a key given any way is scrubbed from echoes too).

A known secret is redacted by value in every form it travels in (:func:`secret_forms`): as
given, percent-decoded and percent-encoded (``KEY%2Fq`` and ``KEY/q``), JSON-escaped, and
inside base64 (``Authorization: Basic base64(user:KEY)``, whatever the user name).

Pure and cheap: no I/O beyond reading ``os.environ``; plain substring checks guard every
regular expression, so text without secrets costs a few ``in`` scans.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import logging
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

REDACTED = "***redacted***"
#: Secrets shorter than this are not scrubbed from free text: replacing "1" or "abc"
#: everywhere would mangle ordinary data without protecting anything.
MIN_SECRET_CHARS = 6

# A key (or the last dotted segment of one) that holds a credential.
_SECRET_KEY = re.compile(
    r"^(api[_-]?key|.*_api[_-]?key|apikey|secret|.*_secret|secret_key|password|.*_password"
    r"|passwd|token|(access|auth|bearer|hf|api|refresh|session|id)_token|authorization"
    r"|auth_header|x[_-]api[_-]key|credentials?)$",
    re.IGNORECASE,
)
# Environment variables whose value is a credential.
_SECRET_ENV = re.compile(
    r"(API_?KEY|_TOKEN|_SECRET|_SECRET_KEY|_PASSWORD|^HF_TOKEN|_ACCESS_KEY)$", re.IGNORECASE
)
# Variables that match the pattern but hold no credential.
_NOT_SECRET_ENV = frozenset({"WAI_EXP_START_DIR"})

# scheme://user:password@  -> keep scheme and user, drop the password.
_URL_CREDS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/:@'\"<>]*):([^\s/@'\"<>]+)@")
# http(s)://TOKEN@host: a user with no password is the credential itself (a client sends it
# as Basic auth), so it goes; the host after it stays.
_URL_TOKEN_USER = re.compile(r"(?i)\b((?:https?|wss?)://)([^\s/:@'\"<>?#]+)@")
# ?name=value / &name=value of a URL query; the value goes when the name is credential-like.
# An interpolation (``${...}``, Hydra's ``$\{...\}``) names where the value lives: it stays.
_URL_QUERY = re.compile(r"([?&])([A-Za-z0-9_.\-]+)=(?!\$\\?\{)([^\s&#'\"<>]+)")
#: Query parameter names that carry a credential besides the credential-like keys
#: (``?key=`` is how some OpenAI-compatible gateways take the API key).
_SECRET_PARAMS = frozenset({"key", "sig", "signature", "code", "auth"})
# Authorization: Bearer KEY (and "Basic KEY" right after an Authorization key)
_BEARER = re.compile(
    r"(?i)\b(bearer|(?<=authorization: )basic|(?<=authorization\": \")basic|(?<=authorization=)basic)"
    r"(\s+)([A-Za-z0-9._~+/\-]{8,}=*)"
)
# Provider key shapes: OpenAI/Anthropic "sk-...", Hugging Face "hf_...", GitHub "ghp_..."
# and "github_pat_...", Slack "xoxb-...", GitLab "glpat-...".
_KEY_SHAPES = re.compile(
    r"\b(sk-[A-Za-z0-9_\-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|xox[abeoprs]-[A-Za-z0-9\-]{10,}|glpat-[A-Za-z0-9_\-]{20,})"
)
_KEY_PREFIXES = (
    "sk-", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
    "xoxa-", "xoxb-", "xoxe-", "xoxo-", "xoxp-", "xoxr-", "xoxs-",
)  # fmt: skip
# key=value / key: value / "key": "value" for a credential-like key in free text.
_KEY_VALUE = re.compile(
    r"(?i)(\b(?:[a-z0-9_\-]*api[_-]?key|apikey|(?:access|auth|bearer|hf|api|refresh|session|id)_token"
    r"|token|[a-z0-9_]*password|passwd"
    r"|[a-z0-9_]*secret|authorization|x-api-key)[\"']?\s*[:=]\s*)"
    # An interpolation (``${oc.env:...}``, or Hydra's escaped ``$\{...\}``) names where the
    # value lives, and ``...`` / ``<your key>`` are a message's placeholders: they stay.
    r"(?![\"']?(?:\*\*\*redacted|bearer\s|\$\\?\{|\.\.\.|<[a-z]))([\"']?)([^\s\"',;}\]]+)"
)
# The override rewrite of ``wai_exp.cli`` moves secret values into these variables: a
# credential into ``WAI_EXP_SECRET_<n>`` (scrubbed from every text, as the environment's
# keys are), a value a record only leaves out into ``WAI_EXP_HIDDEN_<n>`` (a query value or
# flag value under a name no credential has: it may be a plain word a row must keep).
SECRET_ENV_PREFIX = "WAI_EXP_SECRET_"
HIDDEN_ENV_PREFIX = "WAI_EXP_HIDDEN_"
_MOVED = re.compile(r"\$\{oc\.env:(?:" + SECRET_ENV_PREFIX + "|" + HIDDEN_ENV_PREFIX + r")\d+\}")

_registered: set[str] = set()


def is_secret_key(key: Any) -> bool:
    """True when ``key`` (or its last dotted segment) names a credential. Never raises."""
    last = str(key).rsplit(".", 1)[-1].lstrip("+~")
    return bool(_SECRET_KEY.match(last))


def register_secret(value: Any) -> None:
    """Treat ``value`` as a secret in every later :func:`redact_text` call (process-wide).
    Values shorter than :data:`MIN_SECRET_CHARS`, None and non-strings are ignored."""
    if isinstance(value, str) and len(value) >= MIN_SECRET_CHARS and value != REDACTED:
        _registered.add(value)


_env_cache: tuple[Any, list[str]] = (None, [])
_known_cache: tuple[Any, list[str]] = (None, [])
_forms_cache: tuple[Any, list[str]] = (None, [])
#: A base64 fragment shorter than this is not searched for: it could occur by chance.
MIN_BASE64_CHARS = 8


def _base64_cores(raw: bytes) -> set[str]:
    """The parts of base64 text that encode ``raw`` whatever bytes surround it: base64 packs
    3 bytes into 4 characters, so ``raw`` at each of the 3 offsets modulo 3 has its own
    encoding; the characters that mix in a neighbouring byte are dropped from each end."""
    cores = set()
    for offset, first in ((0, 0), (1, 2), (2, 3)):
        padded = b"\0" * offset + raw
        core = base64.b64encode(padded).decode()[first : (8 * len(padded)) // 6]
        if len(core) >= MIN_BASE64_CHARS:
            cores |= {core, core.translate(_URLSAFE)}
    return cores


_URLSAFE = str.maketrans("+/", "-_")
_LOWER_HEX = re.compile(r"%[0-9A-F]{2}")


def secret_forms(value: str) -> set[str]:
    """Every form ``value`` may take in text that leaves the process: as given,
    percent-decoded and percent-encoded (both ways, ``%2F`` and ``%2f``, ``+`` for a
    space), JSON-escaped, and base64-encoded at any offset (an ``Authorization: Basic``
    header carries ``base64(user:KEY)``). Forms shorter than :data:`MIN_SECRET_CHARS` are
    left out."""
    plain = {value, unquote(value), unquote_plus(value)}
    forms = set(plain)
    for v in plain:
        for encoded in (quote(v, safe=""), quote(v), quote_plus(v, safe="")):
            forms |= {encoded, _LOWER_HEX.sub(lambda m: m.group(0).lower(), encoded)}
        forms.add(json.dumps(v)[1:-1])
        forms |= _base64_cores(v.encode("utf-8"))
    return {f for f in forms if len(f) >= MIN_SECRET_CHARS}


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The credential values in the environment (provider key variables and the like)."""
    global _env_cache
    if environ is None:
        # Decoding os.environ costs ~0.4 ms; the raw values are a cheap fingerprint, so the
        # scan reruns only when the environment changed (a test's setenv included).
        raw = getattr(os.environ, "_data", None)
        stamp = dict(raw) if isinstance(raw, dict) else None
        if stamp is not None and stamp == _env_cache[0]:
            return _env_cache[1]
        found = env_secrets(dict(os.environ))
        if stamp is not None:
            _env_cache = (stamp, found)
        return found
    env = environ
    return [
        v
        for k, v in env.items()
        if k not in _NOT_SECRET_ENV
        and (_SECRET_ENV.search(k) or k.startswith(SECRET_ENV_PREFIX))
        and len(v) >= MIN_SECRET_CHARS
    ]


def known_secrets() -> list[str]:
    """Every secret value scrubbed from free text: registered ones and the environment's
    keys, longest first (so a key that contains another is replaced whole)."""
    global _known_cache
    env = env_secrets()
    stamp = (id(env), len(_registered))
    if stamp != _known_cache[0]:
        _known_cache = (stamp, sorted({*_registered, *env}, key=len, reverse=True))
    return _known_cache[1]


def _known_forms() -> list[str]:
    """:func:`secret_forms` of every known secret, longest first."""
    global _forms_cache
    known = known_secrets()
    if _forms_cache[0] is not known:
        forms = {f for secret in known for f in secret_forms(secret)}
        _forms_cache = (known, sorted(forms, key=len, reverse=True))
    return _forms_cache[1]


def is_secret_param(name: str) -> bool:
    """True when a URL query parameter ``name`` carries a credential (``api_key``,
    ``access_token``, ``key``, ``sig``, ``X-Amz-Signature``, ``X-Amz-Security-Token`` ...)."""
    last = re.split(r"[-_.]", name.lower())[-1]
    return is_secret_key(name) or name.lower() in _SECRET_PARAMS or last in _SECRET_PARAM_ENDS


#: The last word of a compound query parameter name that makes it a credential's
#: (``X-Amz-Signature``); not ``key``, which ends plain names too (``sort_key``).
_SECRET_PARAM_ENDS = frozenset({"sig", "signature", "token", "credential", "secret", "password"})


def url_secret_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of what may be a credential inside the URLs of ``text``, in
    order: a password (``user:PASSWORD@``), a user with no password (``https://TOKEN@``),
    a key-shaped path segment (:func:`is_key_segment`: ``/mcp/sk-.../``) and the value of
    every query parameter (``?sig=VALUE``, ``?X-Amz-Signature=VALUE``: a server may take its
    token under any name). Scheme, user, host, port, the rest of the path and the
    parameters' names are no secret. An interpolation (``${...}``) names where a value
    lives: it is no span."""
    if not isinstance(text, str) or "://" not in text:
        return []
    spans = [m.span(3) for m in _URL_CREDS.finditer(text)]
    spans += [m.span(2) for m in _URL_TOKEN_USER.finditer(text)]
    for url in _URL.finditer(text):
        spans += _path_spans(text, url.start(), url.end())
        spans += _query_spans(text, url.start(), url.end())
    return sorted(spans)


def _path_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The spans of the key-shaped segments (:func:`is_key_segment`) of the path of the
    network URL ``text[start:end]`` (``http``, ``https``, ``ws``, ``wss``). Another scheme
    names a file or a database (``sqlite:///<folder>/mlflow.db``): a folder named by a hash
    is no key, and registering it would cut it out of every path a message shows."""
    url = text[start:end]
    scheme = _NETWORK_SCHEME.match(url)
    if scheme is None:
        return []
    after_scheme = scheme.end()
    path_at = url.find("/", after_scheme)
    if path_at < 0 or 0 <= url.find("?", after_scheme) < path_at:
        return []
    path_end = min((i for i in (url.find(c, path_at) for c in "?#") if i >= 0), default=len(url))
    spans, previous, at = [], "", start + path_at + 1
    for segment in url[path_at + 1 : path_end].split("/"):
        if is_key_segment(unquote(segment), unquote(previous)):
            spans.append((at, at + len(segment)))
        previous, at = segment, at + len(segment) + 1
    return spans


def is_key_segment(segment: str, previous: str = "") -> bool:
    """True when a URL path segment is a credential by its shape (hosted servers may take
    their key in the path: ``/mcp/sk-.../``, ``/v1/<token>/``): a provider key's shape
    (``sk-...``, ``ghp_...``, ``xoxb-...``); anything but a plain word after a segment that
    names a credential (``/key/K``, ``/token/T``, not ``/token/refresh``); or a long random
    string (:func:`_random_segment`). ``/v1/mcp``, ``/api/v2/notes``, a model name
    (``Llama-3.1-8B-Instruct``) and an interpolation (``${...}``) are none."""
    if not segment or segment.startswith(_INTERPOLATION):
        return False
    if _KEY_SHAPES.fullmatch(segment):
        return True
    if previous and _names_credential(previous):
        return not _PLAIN_WORD.fullmatch(segment)
    return _random_segment(segment)


_NETWORK_SCHEME = re.compile(r"(?i)(?:https?|wss?)://")
_PLAIN_WORD = re.compile(r"[a-z]+(?:[-_.][a-z]+)*")
#: Base64url (``=`` padding at its end): a token's alphabet; a dot, a tilde or a percent
#: sign marks a file name, a version or an encoded word.
_TOKEN_ALPHABET = re.compile(r"[A-Za-z0-9_\-]{20,}=*")
_HEX = re.compile(r"(?=.*[0-9])(?=.*[a-fA-F])[0-9a-fA-F]{24,}")


def _names_credential(segment: str) -> bool:
    """``key``, ``token``, ``api-key``, ``access_token``, ``secret``, ``sig`` ... as a path
    segment (a credential follows it)."""
    name = segment.replace("-", "_")
    return is_secret_key(name) or name.lower() in {"key", "sig", "signature"}


def _random_segment(segment: str) -> bool:
    """True when ``segment`` is a long random string: 20 characters or more of base64url,
    and either 24 hex digits or more once ``-`` is dropped (a UUID, a hash, a hex key), or
    16 pairs or more of neighbouring letters and digits of which one in four or more change
    class (lower case, upper case, digit; a capital starting a word is no change).

    Measured on 20,000 random strings each: 2.4% of 20 and 1.5% of 24 random letters and
    digits, 5.5% of ``secrets.token_urlsafe(16)`` and 0.3% of ``token_urlsafe(32)`` go
    unseen; every hex key and UUID is seen. No model name or path word of the list in
    ``tests/domain/test_secrets.py`` counts (``DeepSeek-R1-Distill-Qwen-7B`` changes class
    at 3 pairs in 22, ``claude-3-5-sonnet-20241022`` at none)."""
    if not _TOKEN_ALPHABET.fullmatch(segment):
        return False
    if _HEX.fullmatch(segment.replace("-", "")):
        return True
    kinds = ["u" if c.isupper() else "l" if c.islower() else "d" if c.isalnum() else "-"
             for c in segment]  # fmt: skip
    pairs = [(a, b) for a, b in zip(kinds, kinds[1:], strict=False) if "-" not in (a, b)]
    changes = sum(a != b and (a, b) != ("u", "l") for a, b in pairs)
    return len(pairs) >= 16 and changes * 4 >= len(pairs)


# A URL inside text: a scheme, "://" and everything up to white space or a quote.
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s'\"<>]+")
_INTERPOLATION = ("${", "$\\{")


def _query_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The spans of the query values of the URL ``text[start:end]`` (after ``=``, or a whole
    part with no ``=``: ``?TOKEN``) and of its fragment (``#access_token=...``)."""
    url = text[start:end]
    fragment_at = url.find("#")
    spans = [(start + fragment_at + 1, end)] if 0 <= fragment_at < len(url) - 1 else []
    query_at = url.find("?")
    if query_at < 0 or 0 <= fragment_at < query_at:
        return spans
    at = start + query_at + 1
    query = url[query_at + 1 :].split("#", 1)[0]
    for part in query.split("&"):
        _, eq, value = part.partition("=")
        offset = at + (len(part) - len(value) if eq else 0)
        value = value if eq else part
        if value and not value.startswith(_INTERPOLATION):
            spans.append((offset, offset + len(value)))
        at += len(part) + 1
    return spans


#: A config key whose value is a URL the run connects to: :func:`redact_url` records it.
_URL_SETTING = re.compile(r"^(url|uri|base_url|[a-z0-9_]*_url)$", re.IGNORECASE)
#: A config key whose value is a command line the run starts: :func:`redact_command`.
_COMMAND_SETTING = re.compile(r"^(command|[a-z0-9_]*_command)$", re.IGNORECASE)
#: Words of a command line kept as they are besides its program and flag names: script
#: files (by their name; the folder is the user's machine) and ``-m``'s module.
_SCRIPT = re.compile(r"[\w.\-]+\.(py|js|mjs|cjs|ts|sh|rb|pl|jar)$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.DOTALL)


def _setting_name(key: Any) -> str:
    return str(key).rsplit(".", 1)[-1].lstrip("+~")


#: Config mappings whose every value is a secret, whatever its name: an MCP server's extra
#: environment and HTTP headers (``world.env``, ``world.headers``).
SECRET_MAPS = frozenset({"env", "headers"})


def is_secret_entry(key: Any) -> bool:
    """True when the dotted config key ``key`` names an entry of a secret map
    (``+world.env.MY_VAR``, ``world.headers.X-Notes-Key``)."""
    parts = str(key).lstrip("+~").split(".")
    return len(parts) >= 2 and parts[-2] in SECRET_MAPS


def is_credential_entry(name: Any) -> bool:
    """True when an entry of a secret map (:data:`SECRET_MAPS`) is a credential by its name:
    ``GITHUB_TOKEN``, ``BRAVE_API_KEY``, ``Authorization``, ``X-Api-Key``, ``Cookie``."""
    text = str(name).rsplit(".", 1)[-1].lstrip("+~")
    return (
        is_secret_key(text)
        or bool(_SECRET_ENV.search(text))
        or text.lower() in _CREDENTIAL_HEADERS
        or is_secret_key(text.replace("-", "_"))
    )


_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


def register_map_secrets(entries: Mapping[Any, Any]) -> None:
    """Register the values of a secret map (``world.env``, ``world.headers``) that are
    credentials by their name, and the credentials of URLs among the others
    (``DATABASE_URL=postgres://u:PW@db``). Every value is left out of records by the map's
    name (:func:`redact`); the others (``NODE_ENV=production``, ``Accept:
    application/json``) are not scrubbed from every text: a row's reply may say them."""
    for name, value in entries.items():
        if not is_credential_entry(name):
            register_url_secrets(value)
            continue
        register_secret(value)
        scheme = _AUTH_SCHEME.match(value) if isinstance(value, str) else None
        if scheme:
            register_secret(scheme.group(1))  # Authorization: Bearer TOKEN: TOKEN alone too


_AUTH_SCHEME = re.compile(r"(?i)(?:bearer|basic|token)\s+(\S+)$")


def is_command_setting(key: Any) -> bool:
    """True when the config key ``key`` (or its last dotted segment) holds a command line
    (``world.command``, ``world.reset_command``)."""
    return bool(_COMMAND_SETTING.match(_setting_name(key)))


def redact_setting(key: Any, value: Any) -> Any:
    """``value`` as a record may show it under the config key ``key`` (dotted or not): a
    URL setting through :func:`redact_url`, a command setting through
    :func:`redact_command`, nested data through :func:`redact`; anything else as it is."""
    if isinstance(value, Mapping | list | tuple):
        return redact(value)
    if not isinstance(value, str):
        return value
    if _URL_SETTING.match(_setting_name(key)):
        return redact_url(value)
    return redact_command(value) if is_command_setting(key) else value


def redact_url(url: str) -> str:
    """``url`` with its password (or its user when it has no password: that user is the
    token), its key-shaped path segments (:func:`is_key_segment`), every query value and its
    fragment replaced by ``***redacted***``
    (``http://user:***redacted***@host:8000/mcp/***redacted***/?sig=***redacted***``): a
    record still says which server, and holds nothing a server could take as a credential,
    under whatever name. Not a URL: returned as it is."""
    if not isinstance(url, str):
        return url
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    host_end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, tail = rest[:host_end], rest[host_end:]
    if "@" in netloc:
        user, colon, _ = netloc.rsplit("@", 1)[0].partition(":")
        shown = f"{user}:{REDACTED}" if colon else REDACTED  # a user alone is the token
        netloc = f"{shown}@{netloc.rsplit('@', 1)[1]}"
    out = f"{scheme}{sep}{netloc}{tail}"
    spans = sorted(_query_spans(out, 0, len(out))) if "?" in tail or "#" in tail else []
    spans = sorted(spans + _path_spans(out, 0, len(out)))
    for start, end in reversed(spans):
        out = out[:start] + REDACTED + out[end:]
    return out


def redact_command(command: str) -> str:
    """``command`` (a command line, split as a POSIX shell would) with only its program (by
    name), what a known launcher starts (:func:`command_roles`: ``npx -y
    @scope/server``, ``uvx mcp-server-fetch``, ``docker run -i --rm mcp/fetch``, ``env ...
    python``), the names of its flags and of its environment assignments, script file names
    and ``-m``'s module kept; every other word (a flag's value, ``--auth X`` or ``--auth=X``,
    an environment assignment's value, ``TOKEN=X``, any other argument) and every kept word
    shaped like a credential (:func:`is_key_segment`) becomes ``***redacted***``. A line that
    does not split (an open quote) goes whole. Not a string: returned as it is."""
    if not isinstance(command, str):
        return command
    words = command_words(command)
    return REDACTED if words is None else " ".join(shown for _, shown in words)


def command_words(command: str) -> list[tuple[str, str]] | None:
    """``(word, shown)`` for each word of ``command`` as :func:`redact_command` records it: a
    ``shown`` ending in ``***redacted***`` replaces the rest of ``word`` after the same
    prefix (``--auth=``, ``-k``, ``TOKEN=`` or nothing). None when the line does not split."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    out: list[tuple[str, str]] = []
    flag = None
    for word, role in zip(words, command_roles(words), strict=True):
        out.append((word, _shown_word(word, role, flag)))
        flag = word if word.startswith("-") and "=" not in word else None
    return out


#: The part a word plays in a command line (:func:`command_roles`).
ASSIGNMENT = "assignment"  # NAME=value before the program or among env's options
PROGRAM = "program"  # an executable: the line's first, a launcher, what env or uv run runs
SUBCOMMAND = "subcommand"  # the rest of a launcher's name: run in docker run, uv tool run
OPTION = "option"  # a launcher's own option (-y, --rm, --with, --allow-net=host)
OPTION_VALUE = "option value"  # the word after a launcher's option that takes one
PACKAGE = "package"  # the package, image or script a launcher fetches and starts
ARGUMENT = "argument"  # a word after the program


@dataclass(frozen=True)
class _Launcher:
    """How a launcher reads the words after its name: its own options, with no value
    (``flags``) or followed by one (``valued``), then what it starts: an executable
    (``starts_executable``: ``env``, ``uv run``; itself maybe a launcher) or a package, image
    or script (``npx``, ``uvx``, ``docker run``), whose own arguments follow."""

    flags: frozenset[str]
    valued: frozenset[str] = frozenset()
    starts_executable: bool = False
    assignments: bool = False  # env: NAME=value words among its options


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_UV_FLAGS = "-q --quiet -v --verbose -n --no-cache --offline --isolated --no-config --native-tls"
_UV_FLAGS += " --no-progress -U --upgrade --refresh --no-build --no-binary --no-python-downloads"
_UV_VALUED = "--from --with --with-editable --with-requirements -p --python --index -i --index-url"
_UV_VALUED += " --default-index --extra-index-url -f --find-links --cache-dir --directory"
_UV_VALUED += " --project --config-file --env-file --python-preference --color -P"
_UV_VALUED += " --upgrade-package --refresh-package --prerelease --resolution --index-strategy"
_UVX = _Launcher(_words(_UV_FLAGS), _words(_UV_VALUED))
_DOCKER_RUN = _Launcher(
    _words("-i --interactive -t --tty --rm -d --detach --init --privileged -P --publish-all"
           " --read-only -q --quiet"),
    _words("-e --env --env-file -v --volume -p --publish --name --network --net -w --workdir"
           " -u --user --mount --entrypoint --platform -m --memory --cpus --pull -l --label"
           " -h --hostname --add-host --cap-add --cap-drop --device --gpus --ipc --shm-size"
           " --security-opt --tmpfs --ulimit --dns --restart --runtime --pid --userns -a"
           " --attach --group-add --expose --log-driver --log-opt --stop-signal --stop-timeout"),
)  # fmt: skip
#: Launchers by the words that name them, longest first: ``npx -y pkg`` runs ``pkg``.
_LAUNCHERS: dict[tuple[str, ...], _Launcher] = {
    ("uv", "tool", "run"): _UVX,
    ("uv", "run"): _Launcher(
        _words(_UV_FLAGS + " --no-project --no-sync --frozen --locked --active --no-dev --dev"
               " --all-extras --all-packages --all-groups --exact --no-editable -s --script"
               " --gui-script -m --module --no-env-file --only-dev"),
        _words(_UV_VALUED + " --extra --group --no-group --only-group --package"),
        starts_executable=True,
    ),
    ("docker", "run"): _DOCKER_RUN,
    ("podman", "run"): _DOCKER_RUN,
    ("pipx", "run"): _Launcher(
        _words("--no-cache -q --quiet -v --verbose --system-site-packages --path --pypackages"),
        _words("--spec --python --pip-args --index-url"),
    ),
    ("deno", "run"): _Launcher(
        _words("-A --allow-all -q --quiet --no-check --check -r --reload --unstable --no-prompt"
               " --cached-only --no-lock --no-remote --no-npm --watch -R --allow-read -W"
               " --allow-write -N --allow-net -E --allow-env --allow-run -S --allow-sys"
               " --allow-ffi --allow-hrtime -I --allow-import -P"),
        _words("-c --config --import-map --lock --location --seed --cert --ext"),
    ),
    ("env",): _Launcher(
        _words("-i --ignore-environment -0 --null -v --debug"),
        _words("-u --unset -C --chdir -S --split-string"),
        starts_executable=True,
        assignments=True,
    ),
    ("npx",): _Launcher(
        _words("-y --yes --no --no-install -q --quiet -s --silent --ignore-existing"
               " --prefer-offline --prefer-online --offline"),
        _words("-p --package -c --call --registry --cache --userconfig --loglevel"),
    ),
    ("uvx",): _UVX,
}  # fmt: skip
#: Launcher options whose value is ``NAME=value`` (``docker run -e TOKEN=x``): recorded by
#: its name, the value a credential as an environment assignment's is.
_ENV_OPTIONS = frozenset({"-e", "--env"})


def command_roles(words: list[str]) -> list[str]:
    """The part each word of a split command line plays, in one walk: leading environment
    assignments, the program, and after a known launcher (:data:`_LAUNCHERS`) its
    subcommand, its options (with their values) and what it starts: an executable, which
    may be a launcher again (``env TOKEN=x npx -y pkg``), or a package, image or script
    (``uvx mcp-server-fetch``, ``docker run -i --rm mcp/fetch``); every later word is an
    argument. After an option the launcher does not know (it may take the next word as
    its value) no word is taken for what it starts: the rest are arguments."""
    roles: list[str] = []
    while len(roles) < len(words) and _ASSIGNMENT.match(words[len(roles)]):
        roles.append(ASSIGNMENT)
    while len(roles) < len(words):
        name = _launcher_name(words, len(roles))
        if name is None:
            roles.append(PROGRAM)
            break
        launcher = _LAUNCHERS[name]
        roles += [PROGRAM] + [SUBCOMMAND] * (len(name) - 1)
        options, known = _launcher_options(words, len(roles), launcher)
        roles += options
        if not known:
            break
        if not launcher.starts_executable:
            roles += [PACKAGE][: len(words) - len(roles)]
            break
    return roles + [ARGUMENT] * (len(words) - len(roles))


def _launcher_name(words: list[str], at: int) -> tuple[str, ...] | None:
    """The name of the launcher ``words[at:]`` starts with (``("docker", "run")``), or None."""
    first = os.path.basename(words[at])
    for name in _LAUNCHERS:
        if name[0] == first and tuple(words[at + 1 : at + len(name)]) == name[1:]:
            return name
    return None


def _launcher_options(words: list[str], at: int, launcher: _Launcher) -> tuple[list[str], bool]:
    """The roles of ``launcher``'s options from ``words[at]`` on, and whether they end where
    what it starts begins (False: an option it does not know, which may take a value)."""
    roles: list[str] = []
    while at + len(roles) < len(words):
        word = words[at + len(roles)]
        if launcher.assignments and _ASSIGNMENT.match(word):
            roles.append(ASSIGNMENT)
        elif word == "--":
            return [*roles, OPTION], True
        elif not word.startswith("-") or word == "-":
            return roles, True
        elif "=" in word or _no_value(word, launcher):
            roles.append(OPTION)  # --with=mcp carries its value; -y, -it take none
        elif word in launcher.valued:
            roles += [OPTION, OPTION_VALUE][: len(words) - at - len(roles)]
        else:
            return roles, False
    return roles, True


def _no_value(option: str, launcher: _Launcher) -> bool:
    """True when ``option`` takes no value: one of ``launcher.flags``, or short ones joined
    (``-it``)."""
    if option in launcher.flags:
        return True
    joined = len(option) > 2 and option[0] == "-" and option[1] != "-"
    return joined and all(f"-{c}" in launcher.flags for c in option[1:])


def _shown_word(word: str, role: str, flag: str | None) -> str:
    """One word of :func:`redact_command` as recorded, by its ``role``
    (:func:`command_roles`), after ``flag`` (the word before, when it was a flag). A kept
    word shaped like a credential goes whatever its place."""
    assignment = _ASSIGNMENT.match(word)
    if assignment and (role == ASSIGNMENT or (role == OPTION_VALUE and flag in _ENV_OPTIONS)):
        return f"{assignment.group(1)}={REDACTED}"
    if role in (ASSIGNMENT, OPTION_VALUE):
        return REDACTED
    if role == PROGRAM:
        shown = _path_shown(word)
    elif role == SUBCOMMAND:
        shown = word
    elif role == OPTION:
        name, eq, _ = word.partition("=")
        shown = f"{name}={REDACTED}" if eq else word
    elif role == PACKAGE:
        shown = _package_shown(word)
    else:
        shown = _argument_shown(word, flag)
    pieces = re.split(r"[/@:=]", shown)
    return REDACTED if any(is_key_segment(piece) for piece in pieces) else shown


def _package_shown(word: str) -> str:
    """What a launcher starts as recorded: a package or image by its name
    (``@scope/server-x@1.2``, ``ghcr.io/org/server:tag``), a script or a path by its file's
    name, a URL as it is when it holds nothing :func:`redact_url` hides (else not at all)."""
    if "://" in word:
        return word if redact_url(word) == word else REDACTED
    if _SCRIPT.search(word) or word.startswith(("/", "./", "../", "~")):
        return _path_shown(word.rstrip("/")) or REDACTED
    return word


def _path_shown(path: str) -> str:
    """A program's or script's path as recorded: a relative one as written (it names the
    server, and a recorded command can be run again from the same folder), an absolute or
    home one by its file's name (its folders may name the person: /home/maria/...)."""
    return os.path.basename(path) if path.startswith(("/", "~")) else path


def _argument_shown(word: str, flag: str | None) -> str:
    """An argument (or a launcher's option) as recorded: a flag by its name, a script by its
    file's name, ``-m``'s module; anything else, a flag's value included, goes."""
    if word.startswith("-") and len(word) > 1:
        name, eq, _ = word.partition("=")
        if eq:
            return f"{name}={REDACTED}"
        if not word.startswith("--") and len(word) > 2:
            return f"{word[:2]}{REDACTED}"  # -kVALUE: a short flag with its value
        return word
    if flag == "-m" and _MODULE.match(word):
        return word
    if _SCRIPT.search(word):
        return _path_shown(word)
    return REDACTED


def started_program(words: list[str]) -> int | None:
    """The index of the program a split command line starts itself: its first word that is
    no assignment, or the one ``env`` runs after its options and assignments. None when
    there is none, or ``env``'s options hide it. What another launcher runs (``uv run
    python``, ``docker run ... python``) is that launcher's to find."""
    for i, role in enumerate(command_roles(words)):
        if role == PROGRAM and _launcher_name(words, i) != ("env",):
            return i
        if role not in (ASSIGNMENT, PROGRAM, OPTION, OPTION_VALUE):
            return None
    return None


def register_url_secrets(text: Any) -> None:
    """Register the secrets of every URL in ``text`` (:func:`url_secret_spans`), and the
    ``base64(user:password)`` an HTTP client sends for URL credentials (with the user and
    password as written and percent-decoded, as clients send them)."""
    if not isinstance(text, str) or "://" not in text:
        return
    for start, end in url_secret_spans(text):
        register_secret(_registered_form(text, start, end))
    pairs = [(m.group(2), m.group(3)) for m in _URL_CREDS.finditer(text)]
    pairs += [(m.group(2), "") for m in _URL_TOKEN_USER.finditer(text)]
    for user, password in pairs:
        for u, p in {(user, password), (unquote(user), unquote(password))}:
            register_secret(base64.b64encode(f"{u}:{p}".encode()).decode())


def url_secret_alone(text: str, start: int) -> bool:
    """True when the URL secret starting at ``text[start]`` (a span of
    :func:`url_secret_spans`) is a credential by its place (a password, a user with no
    password) or by its query parameter's name (``?sig=``, ``?api_key=``)."""
    before = text[start - 1] if start else ""
    if before in "?&#":
        return False
    if before != "=":
        return True  # user:PASSWORD@ or https://TOKEN@
    return is_secret_param(text[_param_start(text, start) : start - 1])


def _param_start(text: str, value_at: int) -> int:
    """Where the name of the query parameter whose value starts at ``text[value_at]`` (right
    after its ``=``) starts: after the last ``?``, ``&`` or ``#`` before that ``=``."""
    return max(text.rfind(c, 0, value_at - 1) for c in "?&#") + 1


def _registered_form(text: str, start: int, end: int) -> str:
    """What of the URL secret ``text[start:end]`` is scrubbed from every later text: the
    value alone when it is a credential by its place (a password, a user with no password)
    or by its parameter's name (``?sig=``, ``?api_key=``); otherwise the value with its name
    or delimiter (``profile=support``, ``?TOKEN``, ``#frag``). A query value under any other
    name may be a token, so a URL that quotes it loses it; but it may as well be a word
    (``?profile=support``, ``?api-version=2024-06-01``), and scrubbing that word alone
    would rewrite every row and log line that says it."""
    if url_secret_alone(text, start):
        return text[start:end]
    if text[start - 1] != "=":
        return text[start - 1 : end]  # ?TOKEN, #fragment
    pair = text[_param_start(text, start) : end]
    _NAMED_PAIRS.add(pair)
    return pair


#: ``name=value`` forms registered by :func:`_registered_form`: scrubbed to
#: ``name=***redacted***``, so a log line still says which parameter it was.
_NAMED_PAIRS: set[str] = set()


def register_env_secret(name: Any) -> None:
    """Register the value of the environment variable ``name`` (a config's ``api_key_env``
    names where its key lives; the key itself is a secret). Unset or empty: nothing."""
    if isinstance(name, str) and name:
        register_secret(os.environ.get(name))


def register_command_secrets(command: str) -> None:
    """Register the words of a command line that are credentials by their name
    (:func:`command_credentials`), so an error or a server's stderr that quotes them loses
    them too. Other flag values are only left out of records (:func:`redact_command`): a
    port or a model name is no secret to scrub everywhere."""
    for value in command_credentials(command):
        register_secret(value)


def command_credentials(command: str) -> list[str]:
    """The words of a command line that are credentials by their name: an environment
    assignment's value (``TOKEN=X python srv.py``, ``env TOKEN=X ...``, ``docker run -e
    TOKEN=X ...``) and the value of a credential-like flag
    (``--api-key X``, ``--auth=X``, ``--sig X``). A line that does not split: none."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    found: list[str] = []
    flag = None
    for word, role in zip(words, command_roles(words), strict=True):
        name, eq, value = word.partition("=")
        assignment = role == ASSIGNMENT or (role == OPTION_VALUE and flag in _ENV_OPTIONS)
        if eq and (assignment or (word.startswith("-") and is_secret_param(name.lstrip("-")))):
            found.append(value)
        elif flag is not None and is_secret_param(flag.lstrip("-")):
            found.append(word)
        flag = word if word.startswith("-") and not eq else None
    return found


def register_config_secrets(config: Any) -> None:
    """Register every secret in a nested config: values under credential-like keys and in
    secret maps (:data:`SECRET_MAPS`), the credentials of URLs in any string value
    (:func:`url_secret_spans`) and of command lines (:func:`register_command_secrets`)."""
    if isinstance(config, Mapping):
        for k, v in config.items():
            if is_secret_key(k) and isinstance(v, str):
                register_secret(v)
            elif k in SECRET_MAPS and isinstance(v, Mapping):
                register_map_secrets(v)
            elif isinstance(v, str) and is_command_setting(k):
                register_command_secrets(v)
            elif isinstance(k, str) and k.endswith("_env") and is_secret_key(k[:-4]):
                register_env_secret(v)  # judge.api_key_env: MY_KEY -> the value of $MY_KEY
            else:
                register_config_secrets(v)
    elif isinstance(config, list | tuple):
        for v in config:
            register_config_secrets(v)
    else:
        register_url_secrets(config)


def redact_text(text: str, *, keys: bool = True) -> str:
    """``text`` with every secret replaced by ``***redacted***``.

    ``keys=False`` leaves ``password=...``-style pairs alone and removes only secret values
    (known keys, URL passwords, bearer credentials, key shapes): rows use it, since a mock
    tool argument named ``password`` is data, not a credential of ours. Never raises.
    """
    if not isinstance(text, str) or not text:
        return text
    if SECRET_ENV_PREFIX in text or HIDDEN_ENV_PREFIX in text:
        text = _MOVED.sub(REDACTED, text)
    for form in _known_forms():
        if form in text:
            kept = form.partition("=")[0] + "=" if form in _NAMED_PAIRS else ""
            text = text.replace(form, kept + REDACTED)
    if "://" in text and "@" in text:
        text = _URL_CREDS.sub(lambda m: f"{m.group(1)}{m.group(2)}:{REDACTED}@", text)
        text = _URL_TOKEN_USER.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    if "=" in text and ("?" in text or "&" in text):
        text = _URL_QUERY.sub(_query_value, text)
    if "earer" in text or "EARER" in text or "asic " in text:
        text = _BEARER.sub(lambda m: m.group(0) if m.group(3).startswith("***") else
                           f"{m.group(1)}{m.group(2)}{REDACTED}", text)  # fmt: skip
    # The exact prefixes guard the expression: "gh" alone is in most English text, and the
    # expression costs about 250 us on a 3.5 kB row.
    if any(prefix in text for prefix in _KEY_PREFIXES):
        text = _KEY_SHAPES.sub(REDACTED, text)
    if keys:
        lowered = text.lower()
        if any(w in lowered for w in ("key", "token", "pass", "secret", "authorization")):
            text = _KEY_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return text


def _query_value(m: re.Match[str]) -> str:
    if not is_secret_param(m.group(2)):
        return m.group(0)
    # Punctuation that ends the value is the sentence's (a URL in brackets, or before a
    # comma), not the token's: it stays, so a message keeps its shape.
    value = m.group(3)
    after = value[len(value.rstrip(_CLOSING)) :]
    return f"{m.group(1)}{m.group(2)}={REDACTED}{after}"


#: what closes a sentence or a bracket around a URL, kept after a redacted query value
_CLOSING = ").,;:]}"


def redact(value: Any, *, keys: bool = True) -> Any:
    """A copy of nested data (dicts, lists, tuples, strings) with every secret redacted:
    values under credential-like keys (unless ``keys=False``), every value of a secret map
    (:data:`SECRET_MAPS`), URLs and command lines under their keys (:func:`redact_setting`)
    and secrets inside strings. Other leaves are returned as they are. Never raises."""
    if isinstance(value, str):
        return redact_text(value, keys=keys)
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if keys and is_secret_key(k) and v is not None and not isinstance(v, Mapping | list):
                out[k] = REDACTED
            elif k in SECRET_MAPS and isinstance(v, Mapping):
                out[k] = {name: REDACTED if x is not None else None for name, x in v.items()}
            elif isinstance(v, str):
                out[k] = redact_text(redact_setting(k, v), keys=keys)
            else:
                out[k] = redact(v, keys=keys)
        return out
    if isinstance(value, list | tuple):
        return [redact(v, keys=keys) for v in value]
    return value


def redact_overrides(overrides: Iterable[str]) -> list[str]:
    """Command-line overrides with secret values redacted (``+agent.api_key=***redacted***``,
    URLs and command lines under their keys as :func:`redact_setting` records them, known
    key values)."""
    out = []
    for item in overrides:
        item = str(item)
        key, eq, value = item.partition("=")
        if eq and (is_secret_key(key) or is_secret_entry(key)):
            out.append(f"{key}={REDACTED}")
        elif eq:
            shown = redact_setting(key, _unquoted(value))
            out.append(f"{key}={redact_text(value if shown == _unquoted(value) else shown)}")
        else:
            out.append(redact_text(item))
    return out


def _unquoted(value: str) -> str:
    """An override's value without the quotes it was typed in (``'a b'``)."""
    quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
    return value[1:-1] if quoted else value


class RedactingFilter(logging.Filter):
    """A logging filter that redacts every record's message and traceback text (attach it to
    a handler: handler filters see the records of every logger that propagates to it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is the formatter's to report
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[0] is not None:
            import traceback

            record.exc_text = redact_text("".join(traceback.format_exception(*record.exc_info)))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    """Attach one :class:`RedactingFilter` to every handler of ``logger`` (default: root)."""
    target = logger if logger is not None else logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


#: ``errno`` values of a write that nobody will read: the pipe's reader is gone (EPIPE:
#: ``wai-exp ... | tee run.log`` signalled as a group by timeout(1), Slurm or systemd, which
#: ends ``tee`` too) or the terminal closed (EIO).
_READER_GONE = (errno.EPIPE, errno.EIO)


def discard_output(stream: Any) -> None:
    """Point ``stream``'s file descriptor at /dev/null and drop what it still buffers, so
    later writes (and the interpreter's flush at exit) succeed with nowhere to go. Never
    raises."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        stream.flush()  # the text that could not be written goes to /dev/null now


class RedactingStream:
    """A text stream (``sys.stdout``/``sys.stderr``) that redacts every write before passing
    it on: the last gate for whatever reaches the terminal without a logging handler (Hydra's
    sweep launch lines and job errors, tracebacks, ``print``). Everything else is the wrapped
    stream's.

    When the reader is gone (a closed pipe or terminal) the stream is pointed at /dev/null
    instead of raising: a ``BrokenPipeError`` from a progress line or the summary would turn
    a run stopped by SIGTERM into a crash and leave its MLflow run without the end it was
    about to record. The run's own log (``<run dir>/wai-exp.log``) still has every line."""

    def __init__(self, stream: Any) -> None:
        self.wrapped = stream

    def write(self, text: Any) -> int:
        # keys=False: only secret values go; "password: ..." in a printed row is data.
        try:
            self.wrapped.write(redact_text(text, keys=False) if isinstance(text, str) else text)
        except OSError as exc:
            self._reader_gone(exc)
        return len(text)

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as exc:
            self._reader_gone(exc)

    def _reader_gone(self, exc: OSError) -> None:
        if exc.errno not in _READER_GONE:
            raise exc
        discard_output(self.wrapped)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def install_stream_redaction() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in :class:`RedactingStream` (once)."""
    import sys

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
