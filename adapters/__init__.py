"""Per-runtime adapters: native streams in, Universal Events out (and, for request
formats, the way back: rendering and parsing provider requests).

``create_adapter(runtime)`` builds a normaliser by the CLI's runtime name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from adapters._base import Adapter, new_id
from adapters._render import RenderPolicy
from adapters._tap import atap, tap
from universal_event.errors import RenderError
from universal_event.messages import AssistantMessage

if TYPE_CHECKING:
    from universal_event.events import WarningEvent
    from universal_event.log import SessionLog, StoredSession

__all__ = [
    "RUNTIMES",
    "TARGETS",
    "Adapter",
    "RenderPolicy",
    "atap",
    "create_adapter",
    "new_id",
    "render_session",
    "tap",
]

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


TARGETS: dict[str, tuple[str, str]] = {
    "anthropic": ("adapters.anthropic", "anthropic"),
    "openai-chat": ("adapters.openai_chat", "openai"),
    "openai-responses": ("adapters.openai_responses", "openai"),
}
"""Render target name (CLI ``--to``, server ``?to=``) → (module, provider)."""


def render_session(
    log: SessionLog | StoredSession,
    target: str,
    *,
    model: str | None = None,
    warnings: list[WarningEvent] | None = None,
) -> dict[str, Any]:
    """The session's history as ``target``'s SDK ``create()`` keyword arguments.

    The model: ``model``, else the session's ``request/header``'s, else the model of its
    last reply from the target's provider (a log imported from a Claude Code transcript
    has no header, but each reply names its model). :class:`RenderError` when there is
    none. ``warnings`` receives what the rendering repaired or dropped.
    """
    if target not in TARGETS:
        raise ValueError(f"unknown render target {target!r}; known: {', '.join(TARGETS)}")
    module_name, provider = TARGETS[target]
    messages = log.derive_messages()
    header = log.current_header()
    if model is None and (header is None or header.model is None):
        model = _last_model(messages, provider)
        if model is None:
            raise RenderError(
                f"session {log.session_id!r} names no model to render for {target}: no "
                f"request/header has one, nor any {provider} reply; give one (CLI --model, "
                "server ?model=)"
            )
    module = importlib.import_module(module_name)
    rendered: dict[str, Any] = module.render_request(
        messages, header, RenderPolicy(model=model), warnings=warnings
    )
    return rendered


def _last_model(messages: list[Any], provider: str) -> str | None:
    """The model of the last assistant message from ``provider``."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            provenance = message.provenance
            if provenance is not None and provenance.provider == provider and provenance.model:
                return provenance.model
    return None
