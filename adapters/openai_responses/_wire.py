"""The OpenAI Responses stream on the wire: msgspec structs for the ``response.*`` events.

Declaring the wire format lets the fast path decode an SSE ``data:`` payload straight
into a typed struct (one C-level pass, no intermediate dict). What is declared here:

* the events that carry information the adapter maps (lifecycle events with the whole
  response object, output items, every delta, annotations, the in-stream ``error``);
* output *items* stay plain dicts: every item type is kept whole (``native``) and
  replayed as is, so a struct per item type would only copy it twice.

Events not declared here (``response.content_part.added``, ``*.in_progress`` status
pings, ``*.done`` events that repeat what ``output_item.done`` carries, event types newer
than this module) fail the tagged-union decode on ``$.type``; the adapter then decodes
the payload as a plain dict and decides between "known, nothing to map" and
``native/unknown``.

Wire facts (checked against tests/fixtures/recorded/openai-responses, 2025-2026
recordings): every event carries ``sequence_number`` except ``response.created`` /
``response.queued`` in some background-mode recordings; delta events carry
``obfuscation`` padding and ``output_text.delta`` carries ``logprobs`` (both ignored).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "AnnotationAdded",
    "CodeInterpreterCodeDelta",
    "CustomToolCallInputDelta",
    "FunctionCallArgumentsDelta",
    "ItemDelta",
    "Lifecycle",
    "McpCallArgumentsDelta",
    "OutputItemAdded",
    "OutputItemDone",
    "OutputTextDelta",
    "ReasoningSummaryTextDelta",
    "ReasoningTextDelta",
    "RefusalDelta",
    "ResponseCompleted",
    "ResponseCreated",
    "ResponseFailed",
    "ResponseInProgress",
    "ResponseIncomplete",
    "ResponseObject",
    "ResponseQueued",
    "ShellCallCommandDelta",
    "ShellCallOutputDelta",
    "StreamError",
    "WireEvent",
    "decode_event",
    "event_decoder",
]


class ResponseObject(msgspec.Struct, kw_only=True):
    """The ``response`` object echoed by lifecycle events (and a non-streamed body).

    Only what the adapter reads is declared; other fields are skipped by the decoder.
    ``output`` items are kept as dicts (see the module docstring).
    """

    id: str = ""
    status: str | None = None
    """``queued`` (background mode), ``in_progress``, ``completed``, ``incomplete``,
    ``failed``, ``cancelled``."""
    model: str | None = None
    output: list[dict[str, Any]] = []
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    incomplete_details: dict[str, Any] | None = None
    background: bool | None = None
    service_tier: str | None = None


class _Wire(msgspec.Struct, kw_only=True, tag_field="type"):
    sequence_number: int | None = None


class Lifecycle(_Wire, kw_only=True):
    """Base of the events that echo the whole response object."""

    response: ResponseObject


class ResponseCreated(Lifecycle, tag="response.created", kw_only=True):
    """The response exists (status ``in_progress``, or ``queued`` in background mode)."""


class ResponseQueued(Lifecycle, tag="response.queued", kw_only=True):
    """Background mode: the response waits for a worker."""


class ResponseInProgress(Lifecycle, tag="response.in_progress", kw_only=True):
    """Generation started."""


class ResponseCompleted(Lifecycle, tag="response.completed", kw_only=True):
    """Terminal: the only event that carries ``usage``."""


class ResponseIncomplete(Lifecycle, tag="response.incomplete", kw_only=True):
    """Terminal: stopped early (``incomplete_details.reason``: max_output_tokens, ...)."""


class ResponseFailed(Lifecycle, tag="response.failed", kw_only=True):
    """Terminal: failed; ``response.error`` holds code and message."""


class OutputItemAdded(_Wire, tag="response.output_item.added", kw_only=True):
    """An output item began (its content still empty)."""

    output_index: int = 0
    item: dict[str, Any]


class OutputItemDone(_Wire, tag="response.output_item.done", kw_only=True):
    """An output item is complete: the authoritative item."""

    output_index: int = 0
    item: dict[str, Any]


class ItemDelta(_Wire, kw_only=True):
    """Base of the delta events on one output item."""

    item_id: str = ""
    output_index: int = 0
    delta: str = ""


class OutputTextDelta(ItemDelta, tag="response.output_text.delta", kw_only=True):
    """Text of a message item's ``output_text`` part."""

    content_index: int = 0


class RefusalDelta(ItemDelta, tag="response.refusal.delta", kw_only=True):
    """Text of a message item's ``refusal`` part."""

    content_index: int = 0


class FunctionCallArgumentsDelta(
    ItemDelta, tag="response.function_call_arguments.delta", kw_only=True
):
    """A fragment of a function call's JSON arguments."""


class CustomToolCallInputDelta(
    ItemDelta, tag="response.custom_tool_call_input.delta", kw_only=True
):
    """A fragment of a custom (freeform) tool call's plain-text input."""


class McpCallArgumentsDelta(ItemDelta, tag="response.mcp_call_arguments.delta", kw_only=True):
    """A fragment of a (server-run) MCP call's arguments."""


class CodeInterpreterCodeDelta(
    ItemDelta, tag="response.code_interpreter_call_code.delta", kw_only=True
):
    """A fragment of the code a code-interpreter call runs."""


class ShellCallCommandDelta(ItemDelta, tag="response.shell_call_command.delta", kw_only=True):
    """A fragment of a shell call's command."""

    command_index: int = 0


class ShellCallOutputDelta(_Wire, tag="response.shell_call_output_content.delta", kw_only=True):
    """Streamed output of a shell call. ``delta`` is an object (stdout/stderr) on the wire."""

    item_id: str = ""
    output_index: int = 0
    command_index: int = 0
    delta: Any = None


class ReasoningSummaryTextDelta(
    ItemDelta, tag="response.reasoning_summary_text.delta", kw_only=True
):
    """Text of one reasoning summary part (``summary_index``)."""

    summary_index: int = 0


class ReasoningTextDelta(ItemDelta, tag="response.reasoning_text.delta", kw_only=True):
    """Raw reasoning text (``reasoning_text`` content; open-weight models)."""

    content_index: int = 0


class AnnotationAdded(_Wire, tag="response.output_text.annotation.added", kw_only=True):
    """A citation (url_citation, file_citation, ...) attached to output text."""

    item_id: str = ""
    output_index: int = 0
    content_index: int = 0
    annotation_index: int = 0
    annotation: dict[str, Any] = {}


class StreamError(_Wire, tag="error", kw_only=True):
    """The in-stream ``error`` event.

    Two shapes are seen: the documented flat one (``code``, ``message``, ``param`` at the
    top) and the nested one in real traffic (``{"error": {"type", "code", "message",
    "param"}}``, tests/fixtures/recorded/openai-responses/stream_error_event_response_failed.json).
    """

    code: str | None = None
    message: str | None = None
    param: str | None = None
    error: dict[str, Any] | None = None


WireEvent = (
    ResponseCreated
    | ResponseQueued
    | ResponseInProgress
    | ResponseCompleted
    | ResponseIncomplete
    | ResponseFailed
    | OutputItemAdded
    | OutputItemDone
    | OutputTextDelta
    | RefusalDelta
    | FunctionCallArgumentsDelta
    | CustomToolCallInputDelta
    | McpCallArgumentsDelta
    | CodeInterpreterCodeDelta
    | ShellCallCommandDelta
    | ShellCallOutputDelta
    | ReasoningSummaryTextDelta
    | ReasoningTextDelta
    | AnnotationAdded
    | StreamError
)
"""Every declared ``response.*`` event."""

event_decoder: msgspec.json.Decoder[WireEvent] = msgspec.json.Decoder(WireEvent)
"""Built once (msgspec's advice): SSE ``data`` bytes → a :data:`WireEvent`."""

response_decoder: msgspec.json.Decoder[ResponseObject] = msgspec.json.Decoder(ResponseObject)


def decode_event(data: bytes | dict[str, Any]) -> WireEvent:
    """Decode one event from JSON bytes or a dict; raises ``msgspec.ValidationError``
    (undeclared type, wrong shape) or ``msgspec.DecodeError`` (malformed JSON)."""
    if isinstance(data, dict):
        event: WireEvent = msgspec.convert(data, WireEvent)
        return event
    return event_decoder.decode(data)
