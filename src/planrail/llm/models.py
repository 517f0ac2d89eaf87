"""Model names to clients: ``openai:gpt-4.1-mini``, ``anthropic:claude-sonnet-4-5``, ...

=============  ==========================================================================
prefix         client
=============  ==========================================================================
``openai``     :class:`OpenAIClient` (also any OpenAI-compatible server via ``base_url``)
``ollama``     :class:`OpenAIClient` on ``http://localhost:11434/v1`` unless ``base_url``
``anthropic``  :class:`AnthropicClient` (extra ``[anthropic]``)
=============  ==========================================================================

A name without a prefix is an OpenAI-compatible model.
"""

from __future__ import annotations

from typing import Any

from planrail.llm.base import LLM
from planrail.llm.errors import LLMRequestError

__all__ = ["PROVIDERS", "open_llm", "split_model_name"]

PROVIDERS = ("openai", "ollama", "anthropic")

_OLLAMA_URL = "http://localhost:11434/v1"


def split_model_name(name: str) -> tuple[str, str]:
    """``("openai", "gpt-4.1-mini")`` for ``openai:gpt-4.1-mini``; no prefix means openai.

    Only a known provider counts as a prefix, so ``llama3:8b`` is an OpenAI-compatible model.
    """
    provider, sep, model = name.partition(":")
    if sep and provider in PROVIDERS:
        if not model:
            raise LLMRequestError(f"model name {name!r} names no model after '{provider}:'")
        return provider, model
    if not name:
        raise LLMRequestError("no model named: pass --model, e.g. openai:gpt-4.1-mini")
    return "openai", name


def open_llm(
    name: str, *, base_url: str | None = None, api_key: str | None = None, **options: Any
) -> LLM:
    """The client for model ``name`` (see the table in this module's docstring)."""
    provider, model = split_model_name(name)
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise LLMRequestError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
    if provider == "anthropic":
        from planrail.llm.anthropic_client import AnthropicClient

        return AnthropicClient(model, base_url=base_url, api_key=api_key, **options)
    from planrail.llm.openai_client import OpenAIClient

    if provider == "ollama" and base_url is None:
        base_url = _OLLAMA_URL
    return OpenAIClient(model, base_url=base_url, api_key=api_key, **options)
