"""Per-runtime adapters: native streams in, Universal Events out (and, for request
formats, the way back: rendering and parsing provider requests).

``create_adapter(runtime)`` builds a normaliser by the CLI's runtime name.
"""

from __future__ import annotations

import importlib
from typing import Any

from adapters._base import Adapter, new_id
from adapters._render import RenderPolicy
from adapters._tap import atap, tap

__all__ = ["RUNTIMES", "Adapter", "RenderPolicy", "atap", "create_adapter", "new_id", "tap"]

RUNTIMES: dict[str, tuple[str, str]] = {
    "anthropic": ("adapters.anthropic", "AnthropicAdapter"),
    "claude-code": ("adapters.claude_sdk", "ClaudeCodeAdapter"),
    "claude-code-transcript": ("adapters.claude_sdk", "ClaudeTranscriptAdapter"),
    "openai-chat": ("adapters.openai_chat", "OpenAIChatAdapter"),
    "openai-responses": ("adapters.openai_responses", "OpenAIResponsesAdapter"),
    "codex": ("adapters.codex", "CodexAdapter"),
    "codex-rollout": ("adapters.codex", "CodexRolloutAdapter"),
}
"""CLI runtime name → (module, adapter class)."""


def create_adapter(runtime: str, **options: Any) -> Adapter:
    """A fresh adapter for ``runtime`` (a key of :data:`RUNTIMES`)."""
    if runtime not in RUNTIMES:
        known = ", ".join(sorted(RUNTIMES))
        raise ValueError(f"unknown runtime {runtime!r}; known: {known}")
    module_name, class_name = RUNTIMES[runtime]
    adapter: Adapter = getattr(importlib.import_module(module_name), class_name)(**options)
    return adapter
