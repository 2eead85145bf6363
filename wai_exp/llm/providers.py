"""The model providers and the model-spec strings that name one model on one server.

A spec is ``<provider>:<model>`` with an optional ``@<base url>``::

    openai:gpt-4.1-mini
    vllm:Qwen/Qwen3-4B@http://gpu-box:8000/v1
    ollama:llama3.2@http://127.0.0.1:11434/v1
    anthropic:claude-sonnet-4-5

``chat_backend`` builds the chat client a spec's provider speaks, over a caller's
``httpx.AsyncClient`` (the caller owns the client and its event loop).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wai_exp.domain.secrets import register_secret, register_url_secrets

if TYPE_CHECKING:
    import httpx

    from wai_exp.llm.http import RetryPolicy
    from wai_exp.llm.turn import ChatBackend


@dataclass(frozen=True)
class Provider:
    base_url: str
    key_env: str | None
    url_env: str | None
    kind: str  # "openai" | "anthropic"

    def api_key(self, given: str | None = None) -> str | None:
        """``given`` when it is not None, else the provider's key variable from the
        environment; None when the provider takes no key or the variable is unset. Every
        key a request will carry passes here, so it is registered with the redaction rule:
        a server that quotes it back cannot put it in a row, a log or the store."""
        key = given if given is not None else os.environ.get(self.key_env) if self.key_env else None
        register_secret(key)
        return key


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL", "openai"),
    "vllm": Provider("http://127.0.0.1:8000/v1", "VLLM_API_KEY", "VLLM_BASE_URL", "openai"),
    "ollama": Provider("http://127.0.0.1:11434/v1", None, "OLLAMA_BASE_URL", "openai"),
    "anthropic": Provider(
        "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "anthropic"
    ),
}


@dataclass(frozen=True)
class ModelSpec:
    provider: str
    model: str
    base_url: str


def is_model_spec(value: object) -> bool:
    """True for a string naming a known provider, e.g. ``"vllm:Qwen/Qwen3-4B"``."""
    return isinstance(value, str) and value.split(":", 1)[0] in PROVIDERS and ":" in value


def parse_model_spec(spec: str) -> ModelSpec:
    """Split ``provider:model[@url]``. Raises ``ValueError`` naming the known providers."""
    provider, sep, rest = spec.partition(":")
    if not sep or provider not in PROVIDERS or not rest:
        raise ValueError(
            f"model spec {spec!r} is not <provider>:<model>[@<base url>] with provider one of {sorted(PROVIDERS)}"
        )
    # The first "@http(s)://" starts the URL: a URL may itself hold "@" (user:key@host).
    cut = min((i for i in (rest.find("@http://"), rest.find("@https://")) if i >= 0), default=-1)
    model, url = (rest[:cut], rest[cut + 1 :]) if cut >= 0 else (rest, "")
    prov = PROVIDERS[provider]
    base = url or (os.environ.get(prov.url_env, "") if prov.url_env else "") or prov.base_url
    register_url_secrets(base)  # user:KEY@host: the request carries KEY as Basic auth
    return ModelSpec(provider, model, base)


def chat_backend(
    spec: ModelSpec,
    client: httpx.AsyncClient,
    *,
    api_key: str | None = None,
    policy: RetryPolicy | None = None,
) -> ChatBackend:
    """The chat client for ``spec``'s provider (Anthropic Messages or OpenAI-compatible chat
    completions) over ``client``. Never raises: ``spec`` was validated by ``parse_model_spec``."""
    from wai_exp.llm.anthropic_chat import AnthropicChat
    from wai_exp.llm.openai_chat import OpenAIChat

    cls = AnthropicChat if PROVIDERS[spec.provider].kind == "anthropic" else OpenAIChat
    return cls(client, spec.base_url, spec.model, api_key=api_key, policy=policy)


def bare_model(name: Any) -> str | None:
    """A model name without provider prefix or endpoint, lower-cased, for comparison:
    ``vllm:Qwen/Qwen3-4B@https://host/v1`` -> ``qwen/qwen3-4b``."""
    if not isinstance(name, str) or not name.strip():
        return None
    s = name.strip()
    if "@" in s:
        s = s.split("@", 1)[0]
    for prefix in ("vllm:", "openai:", "anthropic:", "hf:", "local:"):
        if s.lower().startswith(prefix):
            s = s[len(prefix) :]
    return s.lower() or None
