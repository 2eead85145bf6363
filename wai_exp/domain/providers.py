"""The model providers a spec, an ``agent.kind`` or a row's model name can name: one registry.

Every part that needs to know the providers reads this table: config validation (the
agent kinds it accepts), the agent builder, spec parsing in ``wai_exp.llm.providers``,
the pre-run key and server checks and ``bare_model`` (which prefixes a row's model name
may carry). It sits in ``domain`` because ``config`` and ``llm`` are siblings that may not
import each other, and both read it. ``wai_exp.llm.providers`` re-exports it.

A new OpenAI-compatible server is one call::

    from wai_exp.llm.providers import register_provider
    register_provider("together", base_url="https://api.together.xyz/v1",
                      key_env="TOGETHER_API_KEY", url_env="TOGETHER_BASE_URL",
                      key_required=True)

after which ``together:<model>`` is a model spec and ``agent=together`` an agent kind
(``agent.model=<model>`` names the model). The console script finds a module that registers
providers through an entry point of its package
(``[project.entry-points."wai_exp.providers"] together = "my_providers"``).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Literal

from wai_exp.domain.secrets import register_secret

#: The wire protocols a provider can speak.
Api = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Provider:
    """One provider: where its server is by default, which variables override the URL and
    hold the key, and which API it speaks (``kind``: ``openai`` chat completions or
    ``anthropic`` messages). ``key_required``: its default endpoint refuses a request
    without a key (hosted APIs), so a run missing it is refused before work."""

    name: str
    base_url: str
    key_env: str | None
    url_env: str | None
    kind: Api = "openai"
    key_required: bool = False

    def api_key(self, given: str | None = None) -> str | None:
        """``given`` when it is not None, else the provider's key variable from the
        environment; None when the provider takes no key or the variable is unset. Every
        key a request will carry passes here, so it is registered with the redaction rule:
        a server that quotes it back cannot put it in a row, a log or the store."""
        key = given if given is not None else os.environ.get(self.key_env) if self.key_env else None
        register_secret(key)
        return key

    def default_url(self) -> str:
        """The server a spec without ``@<url>`` calls: the URL variable when set, else the
        provider's own."""
        return (os.environ.get(self.url_env, "") if self.url_env else "") or self.base_url


PROVIDERS: dict[str, Provider] = {}

_NAME = re.compile(r"[a-z][a-z0-9_-]*")
#: agent kinds that are not providers; a provider may not take their names.
RESERVED = frozenset({"scripted", "callable"})


def register_provider(
    name: str,
    *,
    base_url: str,
    key_env: str | None = None,
    url_env: str | None = None,
    kind: Api = "openai",
    key_required: bool = False,
) -> Provider:
    """Add (or replace) a provider and return it. Raises ``ValueError`` for a name that is
    not lower-case ``[a-z][a-z0-9_-]*``, an agent kind (``scripted``, ``callable``), or a
    ``kind`` other than ``openai`` / ``anthropic``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in RESERVED:
        raise ValueError(
            f"provider name {name!r}: use lower-case letters, digits, '-' or '_', starting "
            f"with a letter, and none of {sorted(RESERVED)}"
        )
    if kind not in ("openai", "anthropic"):
        raise ValueError(f"provider {name!r}: kind={kind!r}; use 'openai' or 'anthropic'")
    provider = Provider(name, base_url, key_env, url_env, kind, key_required)
    PROVIDERS[name] = provider
    if "hydra" in sys.modules:  # else wai_exp.commands.run offers it
        offer_to_hydra()
    return provider


def split_model_spec(spec: str) -> tuple[str, str, str] | None:
    """``provider:model[@url]`` as ``(provider, model, url)`` (url ``""`` when none), or None
    when ``spec`` names no registered provider or no model. The first ``@http(s)://`` starts
    the URL: a URL may itself hold ``@`` (``user:key@host``)."""
    provider, sep, rest = spec.partition(":")
    if not sep or provider not in PROVIDERS or not rest:
        return None
    cut = min((i for i in (rest.find("@http://"), rest.find("@https://")) if i >= 0), default=-1)
    return (provider, rest[:cut], rest[cut + 1 :]) if cut >= 0 else (provider, rest, "")


def provider_names() -> tuple[str, ...]:
    """The registered providers' names, in registration order (those installed packages
    register through the ``wai_exp.providers`` entry point included)."""
    load_plugins()
    return tuple(PROVIDERS)


#: The entry-point group a package registers its provider modules under.
ENTRY_POINTS = "wai_exp.providers"
_plugins_loaded = False
#: entry-point name -> why it did not load
plugin_errors: dict[str, str] = {}


def load_plugins() -> None:
    """Import every module registered under the ``wai_exp.providers`` entry-point group
    (once); each registers its providers."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from wai_exp.domain.plugins import load_group

    load_group(ENTRY_POINTS, plugin_errors)


def offer_to_hydra() -> None:
    """Make ``agent=<provider>`` compose for every registered provider without a shipped
    ``conf/agent/<name>.yaml``: the vllm agent's section under its kind, with the model left
    for you to name (``agent.model=<model>``)."""
    from wai_exp.domain.plugins import offer_options

    load_plugins()
    offer_options("agent", list(PROVIDERS), "vllm", model="???")


register_provider(
    "openai",
    base_url="https://api.openai.com/v1",
    key_env="OPENAI_API_KEY",
    url_env="OPENAI_BASE_URL",
    key_required=True,
)
register_provider(
    "vllm", base_url="http://127.0.0.1:8000/v1", key_env="VLLM_API_KEY", url_env="VLLM_BASE_URL"
)
register_provider("ollama", base_url="http://127.0.0.1:11434/v1", url_env="OLLAMA_BASE_URL")
register_provider(
    "anthropic",
    base_url="https://api.anthropic.com/v1",
    key_env="ANTHROPIC_API_KEY",
    url_env="ANTHROPIC_BASE_URL",
    kind="anthropic",
    key_required=True,
)
