"""The Chat Completions wire format, as msgspec structs (the fast path decodes into them).

One struct family covers the three bodies the endpoint produces, so one decoder
handles whatever a ``data:`` line or a response body holds:

* a streamed ``chat.completion.chunk`` (``choices[].delta``),
* a whole ``chat.completion`` (``choices[].message``),
* an error body ``{"error": {...}}`` (HTTP 4xx/5xx, or in-stream).

Only what the adapter reads is declared; msgspec skips every other field, which is
how newer fields (``obfuscation`` padding, ``service_tier``, ``system_fingerprint``,
``moderation``) are ignored safely. Fields whose shape varies between servers, or
that are kept verbatim (``usage``, ``logprobs``, ``error``, ``annotations``), are
``Any``: decoded to plain Python values and interpreted by the adapter.

Wire facts (from the recorded fixtures, openai-python 2024 recordings and
pydantic-ai 2025 cassettes):
* the first delta carries ``role`` and ``content: ""`` or ``null`` and
  ``refusal: null`` (``""`` when a refusal follows);
* a tool call's first fragment carries ``index``, ``id``, ``type``, ``function.name``
  and ``arguments: ""``; later fragments only ``index`` and ``function.arguments``;
* with ``stream_options.include_usage`` a last chunk has ``choices: []`` and the usage;
  gpt-5 with moderation sends one more ``choices: []`` chunk after it;
* compatible servers (DeepSeek, vLLM) stream ``reasoning_content``; OpenRouter and
  newer vLLM call it ``reasoning``.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "ChatBody",
    "Choice",
    "CustomFragment",
    "Delta",
    "FunctionFragment",
    "ToolCallFragment",
    "body_decoder",
]


class FunctionFragment(msgspec.Struct, kw_only=True):
    """``function`` of a tool call: the name (first fragment) and argument text."""

    name: str | None = None
    arguments: str | None = None


class CustomFragment(msgspec.Struct, kw_only=True):
    """``custom`` of a freeform (custom) tool call: the name and the raw input text."""

    name: str | None = None
    input: str | None = None


class ToolCallFragment(msgspec.Struct, kw_only=True):
    """One entry of ``delta.tool_calls`` (a fragment) or ``message.tool_calls`` (whole)."""

    index: int | None = None
    """Which parallel call this fragment belongs to; absent in whole messages."""
    id: str | None = None
    type: str | None = None
    function: FunctionFragment | None = None
    custom: CustomFragment | None = None


class Delta(msgspec.Struct, kw_only=True):
    """``choices[].delta`` of a chunk, or ``choices[].message`` of a whole completion."""

    role: str | None = None
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCallFragment] | None = None
    function_call: Any = None
    """The legacy (pre-tools) function call; kept as ``native/unknown``."""
    annotations: Any = None
    """``url_citation`` annotations (search models), on whole messages and in a delta."""
    audio: Any = None


class Choice(msgspec.Struct, kw_only=True):
    """One entry of ``choices``: a delta (streamed) or a message (whole)."""

    index: int = 0
    delta: Delta | None = None
    message: Delta | None = None
    finish_reason: str | None = None
    logprobs: Any = None


class ChatBody(msgspec.Struct, kw_only=True):
    """A chunk, a whole completion, or an error body."""

    id: str = ""
    object: str = ""
    model: str = ""
    choices: list[Choice] = []
    usage: dict[str, Any] | None = None
    service_tier: str | None = None
    error: Any = None


body_decoder: msgspec.json.Decoder[ChatBody] = msgspec.json.Decoder(ChatBody)
"""Built once (msgspec's advice); decodes a ``data:`` payload or a response body."""
