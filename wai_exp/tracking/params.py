"""Turn a resolved config into MLflow params: flat, valid keys, bounded values, chunked batches.

MLflow's rules (``mlflow/utils/validation.py``, 3.17): a key matches ``^[/\\w.\\- :]*$``, is at
most 250 characters and must not change under ``posixpath.normpath`` (no ``a//b``, ``./x``,
``..``, leading or trailing ``/``); a value is at most 6,000 characters; one request carries at
most 100 params. This module enforces all of them on our side, so a config with odd keys or a
long prompt never makes the run fail halfway through logging, and every truncation is logged.

No MLflow import here: everything but :func:`log_params` is pure and cheap.
"""

from __future__ import annotations

import hashlib
import logging
import math
import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from wai_exp.domain.secrets import (
    REDACTED,
    is_secret_entry,
    is_secret_key,
    redact,
    redact_setting,
    redact_text,
)

log = logging.getLogger(__name__)

#: mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
MAX_PARAM_VALUE_CHARS = 6000
#: mlflow.utils.validation.MAX_TAG_VAL_LENGTH
MAX_TAG_VALUE_CHARS = 8000
#: mlflow.utils.validation.MAX_ENTITY_KEY_LENGTH
MAX_KEY_CHARS = 250
#: mlflow.utils.validation.MAX_PARAMS_TAGS_PER_BATCH
MAX_PARAMS_PER_BATCH = 100

TRUNCATION_MARK = "...[truncated]"

# Characters MLflow accepts in a key; everything else becomes "_".
_BAD_KEY_CHARS = re.compile(r"[^/\w.\- :]")


def sanitize_key(key: str) -> str:
    """Return ``key`` rewritten so MLflow accepts it as a param, metric or tag key.

    Characters outside ``[/\\w.\\- :]`` become ``_``; runs of ``/`` collapse; leading and
    trailing ``/`` go; path segments ``.`` and ``..`` (and a leading ``..``) are rewritten, since
    MLflow rejects any key that ``posixpath.normpath`` would change. Keys over 250 characters
    keep their head and gain a short hash of the whole key, so two long keys stay distinct.
    An empty key becomes ``_``. Never raises.
    """
    out = _BAD_KEY_CHARS.sub("_", str(key))
    out = re.sub(r"/{2,}", "/", out).strip("/")
    parts = ["_" if p in (".", "..") else p for p in out.split("/")]
    out = "/".join(parts)
    if out.startswith(".."):
        out = "_" + out[1:]
    if not out:
        out = "_"
    if len(out) > MAX_KEY_CHARS:
        digest = hashlib.sha1(out.encode()).hexdigest()[:10]
        out = out[: MAX_KEY_CHARS - 11].rstrip("/") + "-" + digest
    # Belt and braces: whatever the rules above missed, normpath must leave the key alone.
    if posixpath.normpath(out) != out:
        out = out.replace("/", "_")
    return out


def format_value(value: Any) -> str:
    """The param string for one config leaf: YAML spelling for null and booleans, ``str`` else.

    ``None`` -> ``"null"``, ``True`` -> ``"true"``, an empty list -> ``"[]"``, an empty mapping
    -> ``"{}"`` (so an empty container still shows up as a param), floats by ``repr``.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, Mapping) and not value:
        return "{}"
    if isinstance(value, (list, tuple)) and not value:
        return "[]"
    return str(value)


def _to_container(config: Any) -> Any:
    """A plain dict/list from an OmegaConf node (resolved), or the object itself."""
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return OmegaConf.to_container(config, resolve=True)
    return config


def iter_leaves(config: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(dotted key, leaf value)`` for every leaf of a nested mapping/list.

    List items get their index as a segment (``a.0``, ``a.1``); an empty container is a leaf.
    Keys are not sanitized here (see :func:`flatten_config`).
    """
    config = _to_container(config)
    if isinstance(config, Mapping) and config:
        for k, v in config.items():
            yield from iter_leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(config, (list, tuple)) and config:
        for i, v in enumerate(config):
            yield from iter_leaves(v, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix, config


def truncate(value: str, limit: int, what: str) -> str:
    """``value`` cut to ``limit`` characters (ending in a visible mark), logging a warning if cut."""
    if len(value) <= limit:
        return value
    log.warning(
        "%s is %d characters; MLflow keeps at most %d, so it is truncated in MLflow "
        "(the full value is in the run's config.yaml artifact)",
        what,
        len(value),
        limit,
    )
    return value[: limit - len(TRUNCATION_MARK)] + TRUNCATION_MARK


def flatten_config(config: Any, *, redact_secrets: bool = True) -> dict[str, str]:
    """Every leaf of a resolved config as ``{sanitized dotted key: string value}``.

    Nested keys join with dots and list indices become ``.0``, ``.1``; keys are made valid for
    MLflow with :func:`sanitize_key`; values over 6,000 characters are truncated with a logged
    warning; values under a credential-like key (``api_key``, ``*_token``, ``password`` ...) are
    replaced by ``***redacted***`` unless ``redact_secrets`` is False. When two different keys
    sanitize to the same string the later one gets a ``_2``, ``_3`` ... suffix and a warning,
    because MLflow refuses a batch that repeats a key. Accepts plain mappings or OmegaConf
    nodes (resolved here). Never raises on odd keys or values.
    """
    out: dict[str, str] = {}
    for raw_key, value in iter_leaves(config):
        key = sanitize_key(raw_key)
        if key in out:
            n = 2
            while f"{key}_{n}" in out:
                n += 1
            log.warning(
                "config key %r becomes %r for MLflow, which another key already uses; "
                "logging it as %r",
                raw_key,
                key,
                f"{key}_{n}",
            )
            key = f"{key}_{n}"
        if (
            redact_secrets
            and value is not None
            and (is_secret_key(raw_key) or is_secret_entry(raw_key))
        ):
            text = REDACTED
        else:
            if redact_secrets:
                value = redact_setting(raw_key, value)  # a URL's query, a command's flags
            text = format_value(value)
            if redact_secrets:
                text = redact_text(text)  # a URL's password, a known key's value
            text = truncate(text, MAX_PARAM_VALUE_CHARS, f"param {key!r}")
        out[key] = text
    return out


def chunked(items: Sequence[Any], size: int = MAX_PARAMS_PER_BATCH) -> Iterator[list[Any]]:
    """Consecutive slices of at most ``size`` items (the last may be shorter)."""
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def log_params(client: Any, run_id: str, params: Mapping[str, str]) -> int:
    """Log ``params`` to ``run_id`` with ``client.log_batch``, at most 100 per request.

    Returns the number of requests made. Raises whatever MLflow raises (for example
    "Changing param values is not allowed" when a resumed run logs a different value).
    """
    from mlflow.entities import Param

    items = [Param(k, v) for k, v in params.items()]
    n = 0
    for batch in chunked(items):
        client.log_batch(run_id, params=batch, synchronous=True)
        n += 1
    return n


def redact_config(config: Any) -> Any:
    """A plain copy of ``config`` with every secret replaced by ``***redacted***``: values
    under credential-like keys, URL passwords and known key values in strings
    (``wai_exp.domain.secrets.redact``, the rule :func:`flatten_config` uses). Used for the
    ``config.yaml`` artifact, so an API key reaches neither the params nor the artifacts.
    """
    return redact(_to_container(config))
