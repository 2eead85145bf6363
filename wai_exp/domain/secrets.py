"""The one redaction rule: what counts as a secret, and how text is cleaned before it leaves.

Every place that writes text out of the process (files, MLflow params/tags/artifacts, logs,
error messages, Hydra's ``.hydra/`` folder) passes it through :func:`redact_text` (free text)
or :func:`redact` (nested data, where a credential-like key hides its value too). A secret is

* the value under a credential-like key: ``api_key``, ``*_api_key``, ``token``,
  ``auth_token``, ``password``, ``secret``, ``authorization`` ... (:func:`is_secret_key`;
  ``max_tokens`` and ``eos_token`` are not secrets);
* the password of a URL (``http://user:KEY@host`` -> ``http://user:***redacted***@host``);
* a bearer credential (``Authorization: Bearer KEY``) and key-shaped strings (``sk-...``);
* the value of every provider key variable present in the environment (``OPENAI_API_KEY``,
  ``ANTHROPIC_API_KEY``, any ``*_API_KEY``/``*_TOKEN``/``*_SECRET``/``*_PASSWORD``), wherever
  it appears - also inside a server's error body that quotes the request's headers;
* any value handed to :func:`register_secret` (the runner registers every secret it finds in
  the resolved config, so a key given on the command line is scrubbed from echoes too).

Pure and cheap: no I/O beyond reading ``os.environ``; plain substring checks guard every
regular expression, so text without secrets costs a few ``in`` scans.
"""

from __future__ import annotations

import base64
import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

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
# Authorization: Bearer KEY (and "Basic KEY" right after an Authorization key)
_BEARER = re.compile(
    r"(?i)\b(bearer|(?<=authorization: )basic|(?<=authorization\": \")basic|(?<=authorization=)basic)"
    r"(\s+)([A-Za-z0-9._~+/\-]{8,}=*)"
)
# Provider key shapes: OpenAI/Anthropic "sk-...", Hugging Face "hf_...", GitHub "ghp_...".
_KEY_SHAPES = re.compile(
    r"\b(sk-[A-Za-z0-9_\-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,})"
)
# key=value / key: value / "key": "value" for a credential-like key in free text.
_KEY_VALUE = re.compile(
    r"(?i)(\b(?:[a-z0-9_\-]*api[_-]?key|apikey|(?:access|auth|bearer|hf|api|refresh|session|id)_token"
    r"|token|[a-z0-9_]*password|passwd"
    r"|[a-z0-9_]*secret|authorization|x-api-key)[\"']?\s*[:=]\s*)"
    # An interpolation (``${oc.env:...}``, or Hydra's escaped ``$\{...\}``) names where the
    # value lives, and ``...`` / ``<your key>`` are a message's placeholders: they stay.
    r"(?![\"']?(?:\*\*\*redacted|bearer\s|\$\\?\{|\.\.\.|<[a-z]))([\"']?)([^\s\"',;}\]]+)"
)
# The override rewrite of ``wai_exp.cli`` moves secret values into these variables.
SECRET_ENV_PREFIX = "WAI_EXP_SECRET_"
_MOVED = re.compile(r"\$\{oc\.env:" + SECRET_ENV_PREFIX + r"\d+\}")

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
    """Every value scrubbed from free text: registered ones and the environment's keys,
    longest first (so a key that contains another is replaced whole)."""
    global _known_cache
    env = env_secrets()
    stamp = (id(env), len(_registered))
    if stamp != _known_cache[0]:
        _known_cache = (stamp, sorted({*_registered, *env}, key=len, reverse=True))
    return _known_cache[1]


def register_config_secrets(config: Any) -> None:
    """Register every secret in a nested config: values under credential-like keys and the
    passwords of URLs in any string value."""
    if isinstance(config, Mapping):
        for k, v in config.items():
            if is_secret_key(k) and isinstance(v, str):
                register_secret(v)
            else:
                register_config_secrets(v)
    elif isinstance(config, list | tuple):
        for v in config:
            register_config_secrets(v)
    elif isinstance(config, str) and "://" in config:
        for m in _URL_CREDS.finditer(config):
            register_secret(m.group(3))
            # An HTTP client sends URL credentials as "Authorization: Basic base64(user:pw)",
            # and a server may quote that header back.
            register_secret(base64.b64encode(f"{m.group(2)}:{m.group(3)}".encode()).decode())


def redact_text(text: str, *, keys: bool = True) -> str:
    """``text`` with every secret replaced by ``***redacted***``.

    ``keys=False`` leaves ``password=...``-style pairs alone and removes only secret values
    (known keys, URL passwords, bearer credentials, key shapes): rows use it, since a mock
    tool argument named ``password`` is data, not a credential of ours. Never raises.
    """
    if not isinstance(text, str) or not text:
        return text
    if SECRET_ENV_PREFIX in text:
        text = _MOVED.sub(REDACTED, text)
    for secret in known_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    if "://" in text and "@" in text:
        text = _URL_CREDS.sub(lambda m: f"{m.group(1)}{m.group(2)}:{REDACTED}@", text)
    if "earer" in text or "EARER" in text or "asic " in text:
        text = _BEARER.sub(lambda m: m.group(0) if m.group(3).startswith("***") else
                           f"{m.group(1)}{m.group(2)}{REDACTED}", text)  # fmt: skip
    if "sk-" in text or "hf_" in text or "gh" in text:
        text = _KEY_SHAPES.sub(REDACTED, text)
    if keys:
        lowered = text.lower()
        if any(w in lowered for w in ("key", "token", "pass", "secret", "authorization")):
            text = _KEY_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return text


def redact(value: Any, *, keys: bool = True) -> Any:
    """A copy of nested data (dicts, lists, tuples, strings) with every secret redacted:
    values under credential-like keys (unless ``keys=False``) and secrets inside strings.
    Other leaves are returned as they are. Never raises."""
    if isinstance(value, str):
        return redact_text(value, keys=keys)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if keys and is_secret_key(k) and v is not None and not isinstance(v, Mapping | list):
                out[k] = REDACTED
            else:
                out[k] = redact(v, keys=keys)
        return out
    if isinstance(value, list | tuple):
        return [redact(v, keys=keys) for v in value]
    return value


def redact_overrides(overrides: Iterable[str]) -> list[str]:
    """Command-line overrides with secret values redacted (``+agent.api_key=***redacted***``,
    URL passwords, known key values)."""
    out = []
    for item in overrides:
        item = str(item)
        key, eq, _ = item.partition("=")
        if eq and is_secret_key(key):
            out.append(f"{key}={REDACTED}")
        else:
            out.append(redact_text(item))
    return out


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
