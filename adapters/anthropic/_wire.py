"""The Anthropic Messages SSE wire format as msgspec structs (the fast path).

Raw SSE ``data:`` payloads decode straight into these structs — no SDK objects, no
intermediate dicts for the hot events (``content_block_delta``). Unknown keys are
ignored (msgspec's default), so newer API fields (``stop_details``, ``caller``,
``usage.iterations``) never break decoding; an unknown event ``type`` or delta ``type``
fails the tagged-union decode and the adapter falls back to its dict path, which keeps
the event as ``native/unknown``.

Where the API sends objects whose every key matters for a same-provider replay
(content blocks, citations, usage), they stay ``dict`` so nothing is lost.

Facts from the recordings (tests/fixtures/recorded/anthropic-messages):
* ``data:`` JSON is padded with spaces before the final ``}``
  (``{"type":"message_stop"      }``) — harmless for a JSON decoder;
* ``ping`` is serialised as ``{"type": "ping"}``;
* ``message_start.message.usage.output_tokens`` is provisional; the final figure is in
  ``message_delta.usage``.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "CitationsDelta",
    "ContentBlockDelta",
    "ContentBlockStart",
    "ContentBlockStop",
    "Delta",
    "ErrorEvent",
    "InputJsonDelta",
    "MessageDelta",
    "MessageDeltaBody",
    "MessageStart",
    "MessageStop",
    "Ping",
    "SignatureDelta",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
    "WireMessage",
    "stream_event_decoder",
]


class _Delta(msgspec.Struct, tag_field="type", frozen=True):
    pass


class TextDelta(_Delta, tag="text_delta", frozen=True):
    text: str


class ThinkingDelta(_Delta, tag="thinking_delta", frozen=True):
    thinking: str


class SignatureDelta(_Delta, tag="signature_delta", frozen=True):
    signature: str


class InputJsonDelta(_Delta, tag="input_json_delta", frozen=True):
    partial_json: str


class CitationsDelta(_Delta, tag="citations_delta", frozen=True):
    citation: dict[str, Any]


Delta = TextDelta | ThinkingDelta | SignatureDelta | InputJsonDelta | CitationsDelta


class WireMessage(msgspec.Struct, frozen=True):
    """The ``message`` of ``message_start`` (its ``content`` is always empty there)."""

    id: str
    model: str | None = None
    content: list[dict[str, Any]] = []
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: dict[str, Any] | None = None


class _Event(msgspec.Struct, tag_field="type", frozen=True):
    pass


class MessageStart(_Event, tag="message_start", frozen=True):
    message: WireMessage


class ContentBlockStart(_Event, tag="content_block_start", frozen=True):
    index: int
    content_block: dict[str, Any]


class ContentBlockDelta(_Event, tag="content_block_delta", frozen=True):
    index: int
    delta: Delta


class ContentBlockStop(_Event, tag="content_block_stop", frozen=True):
    index: int


class MessageDeltaBody(msgspec.Struct, frozen=True):
    stop_reason: str | None = None
    stop_sequence: str | None = None


class MessageDelta(_Event, tag="message_delta", frozen=True):
    delta: MessageDeltaBody = MessageDeltaBody()
    usage: dict[str, Any] | None = None


class MessageStop(_Event, tag="message_stop", frozen=True):
    pass


class Ping(_Event, tag="ping", frozen=True):
    pass


class ErrorEvent(_Event, tag="error", frozen=True):
    """An in-stream error (``overloaded_error`` mid-stream); the stream ends after it."""

    error: dict[str, Any]
    request_id: str | None = None


StreamEvent = (
    MessageStart
    | ContentBlockStart
    | ContentBlockDelta
    | ContentBlockStop
    | MessageDelta
    | MessageStop
    | Ping
    | ErrorEvent
)


stream_event_decoder: msgspec.json.Decoder[StreamEvent] = msgspec.json.Decoder(StreamEvent)
"""Decodes one SSE ``data:`` payload; built once (msgspec's advice)."""
