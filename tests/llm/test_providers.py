"""One provider registry: every part that knows the providers reads the same table, so a
provider spelled any way a spec, an agent kind or a row can spell it is one provider."""

from __future__ import annotations

import pytest

from wai_exp.config.models import AGENT_BY_KIND, ModelAgentConfig
from wai_exp.llm.providers import (
    PROVIDERS,
    bare_model,
    is_model_spec,
    parse_model_spec,
    provider_names,
    register_provider,
)
from wai_exp.pipeline.input_check import key_problem
from wai_exp.pipeline.stages.simulate import build_agent
from wai_exp.simulate.model_calls import same_model

SHIPPED = ("openai", "vllm", "ollama", "anthropic")


def spellings(provider: str, model: str = "Llama3.2") -> list[str]:
    """Every way a run names one model of ``provider``."""
    return [
        f"{provider}:{model}",
        f"{provider.upper()}:{model}",
        f"{provider}:{model}@http://127.0.0.1:9/v1",
        f"{provider}:{model}@https://user:key@host.example/v1",
        f" {provider}:{model} ",
    ]


def test_the_shipped_providers_are_registered():
    assert set(SHIPPED) <= set(provider_names())


@pytest.mark.parametrize("provider", SHIPPED)
def test_every_provider_spelling_is_the_same_model_as_the_bare_name(provider):
    # was: 'ollama:llama3.2' and 'llama3.2' were two models (bare_model kept its own list
    # of prefixes, without ollama), while 'vllm:llama3.2' was one.
    for name in spellings(provider):
        assert bare_model(name) == "llama3.2", name
        assert same_model(name, "llama3.2"), name
        assert same_model(name, "hf:llama3.2"), name
    assert not same_model(f"{provider}:llama3.2", "llama3.1")


@pytest.mark.parametrize("provider", SHIPPED)
def test_every_provider_is_a_spec_an_agent_kind_and_a_config_kind(provider):
    assert is_model_spec(f"{provider}:m")
    assert parse_model_spec(f"{provider}:m").base_url == PROVIDERS[provider].base_url
    assert AGENT_BY_KIND[provider] is ModelAgentConfig
    assert ModelAgentConfig(kind=provider, model="m").kind == provider
    agent = build_agent({"kind": provider, "model": "m", "api_key": "k"}, seed=0)
    assert agent.model_version == f"{provider}:m"


def test_an_unknown_kind_is_refused_naming_the_registered_providers():
    with pytest.raises(ValueError, match="vllm, ollama, anthropic"):
        build_agent({"kind": "mystery", "model": "m"}, seed=0)


def test_the_key_check_reads_the_registry():
    assert key_problem({"kind": "vllm", "model": "m"}) is None  # a local server: no key
    assert key_problem({"kind": "ollama", "model": "m"}) is None


def test_a_registered_provider_is_a_spec_an_agent_and_stripped_from_row_names(monkeypatch):
    monkeypatch.setitem(PROVIDERS, "together", PROVIDERS["vllm"])  # restored after the test
    register_provider(
        "together",
        base_url="http://127.0.0.1:9/v1",
        key_env="TOGETHER_API_KEY",
        key_required=True,
    )
    monkeypatch.delenv("TOGETHER_API_KEY", raising=False)
    assert parse_model_spec("together:m").base_url == "http://127.0.0.1:9/v1"
    assert same_model("together:Qwen/Qwen3-4B", "vllm:qwen/qwen3-4b")
    assert build_agent({"kind": "together", "model": "m"}, seed=0).model_version == "together:m"
    problem = key_problem({"kind": "together", "model": "m"})
    assert problem is not None and "TOGETHER_API_KEY" in problem


@pytest.mark.parametrize("name", ["Bad", "scripted", "callable", "1x", ""])
def test_a_provider_name_that_would_clash_is_refused(name):
    with pytest.raises(ValueError, match="provider name"):
        register_provider(name, base_url="http://127.0.0.1:9/v1")


def test_a_provider_registered_after_the_config_was_imported_is_an_agent_kind(
    monkeypatch, tmp_path
):
    # was: the agent kinds were frozen into a Literal when wai_exp.config was imported, so a
    # provider registered later was refused ("expected one of 'openai', 'vllm', ...").
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from wai_exp.commands.validate import validate_config

    monkeypatch.setitem(PROVIDERS, "together", PROVIDERS["vllm"])  # restored after the test
    register_provider("together", base_url="http://127.0.0.1:9/v1")
    assert ModelAgentConfig(kind="together", model="m").kind == "together"
    with initialize_config_module(version_base="1.3", config_module="wai_exp.conf"):
        cfg = compose(config_name="config", overrides=["agent=together", "agent.model=m"])
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert plain["agent"]["kind"] == "together" and plain["agent"]["base_url"] is None
    assert validate_config(plain).agent.kind == "together"


def test_an_agent_kind_nothing_registered_still_names_every_kind():
    from wai_exp.commands.validate import ConfigError, validate_config

    with pytest.raises(ConfigError) as err:
        validate_config({"agent": {"kind": "togther"}, "pipeline": {"stages": {}}})
    assert "kind must be one of 'scripted', 'callable', 'openai', 'vllm', 'ollama'" in str(
        err.value
    )
