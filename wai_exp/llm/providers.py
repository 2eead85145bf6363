"""The model providers and the model-spec strings that name one model on one server.

A spec is ``<provider>:<model>`` with an optional ``@<base url>``::

    openai:gpt-4.1-mini
    vllm:Qwen/Qwen3-4B@http://gpu-box:8000/v1
    ollama:llama3.2@http://127.0.0.1:11434/v1
    anthropic:claude-sonnet-4-5

The providers are the registry in ``wai_exp.domain.providers`` (re-exported here:
``register_provider`` adds one). ``chat_backend`` builds the chat client a spec's provider speaks, over a caller's
``httpx.AsyncClient`` (the caller owns the client and its event loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wai_exp.domain.providers import (
    PROVIDERS,
    Provider,
    provider_names,
    register_provider,
    split_model_spec,
)
from wai_exp.domain.secrets import register_url_secrets

if TYPE_CHECKING:
    import httpx

    from wai_exp.llm.http import RetryPolicy
    from wai_exp.llm.turn import ChatBackend

__all__ = [
    "PROVIDERS",
    "ModelSpec",
    "Provider",
    "bare_model",
    "chat_backend",
    "is_model_spec",
    "parse_model_spec",
    "provider_names",
    "register_provider",
]


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
    parts = split_model_spec(spec)
    if parts is None:
        raise ValueError(
            f"model spec {spec!r} is not <provider>:<model>[@<base url>] with provider one of {sorted(PROVIDERS)}"
        )
    provider, model, url = parts
    base = url or PROVIDERS[provider].default_url()
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


#: Prefixes a row's model name may carry that are not providers: a Hugging Face hub id
#: (``hf:Qwen/Qwen3-4B``) and a local checkpoint (``local:ckpt-7``).
NAME_PREFIXES = frozenset({"hf", "local"})


def bare_model(name: Any) -> str | None:
    """A model name without provider prefix or endpoint, lower-cased, for comparison:
    ``vllm:Qwen/Qwen3-4B@https://host/v1`` -> ``qwen/qwen3-4b``."""
    if not isinstance(name, str) or not name.strip():
        return None
    s = name.strip()
    if "@" in s:
        s = s.split("@", 1)[0]
    for names in (PROVIDERS, NAME_PREFIXES):  # a provider, then a hub or local checkpoint
        head, sep, rest = s.partition(":")
        if sep and head.lower() in names:
            s = rest
    return s.lower() or None
