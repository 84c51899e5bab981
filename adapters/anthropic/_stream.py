"""Anthropic Messages API → Universal Events (streamed and non-streamed responses).

:class:`AnthropicAdapter` is a stateful normaliser. ``feed`` takes, in any mix:

* raw ``bytes`` of the HTTP response body — SSE (the fast path: frames decode straight
  into the :mod:`adapters.anthropic._wire` structs) or a whole non-streamed JSON body
  (a ``message`` or an ``error``), buffered across chunks;
* a ``str`` (the same text);
* a ``dict`` (one stream event, a ``message``, or an error body);
* the SDK's typed objects (``RawMessageStreamEvent`` members, ``Message``, the beta
  variants). The ``MessageStream`` helper's synthesised convenience events (``text``,
  ``thinking``, ``input_json``, ``citation``, ``signature``) repeat the raw deltas and are
  skipped.

What comes out, per API message: ``turn/start`` (when no turn is open) and
``step/start`` at ``message_start``; one ``assistant/chunk`` per delta (text, thinking,
signature, tool arguments, citations — concatenated they equal the final message);
at ``message_stop`` one ``assistant/message``, one ``usage`` (normalised once: input
includes the cache), ``step/end`` and — unless the model stopped to call tools
(``tool_use``, ``pause_turn``) — ``turn/end``.

Bad input never loses what was normalised: a frame that is not JSON, an unknown event
or delta type, a delta for a block that never started (out of order) become
``native/unknown`` events (payload kept, ``reason`` says why) and the stream goes on; a
stream cut before ``message_stop`` yields, at :meth:`AnthropicAdapter.close`, the partial
message (``status="partial"``), an ``error`` (``stream_interrupted``) and ``turn/end``
``interrupted``.

Native values of the wrong type never reach a typed event field (the event would encode
but not decode back, and a stored session holding it could not be read). The SSE fast
path's structs check the hot fields; frames they refuse, dicts and whole messages go
through the dict path, where an optional field of another type (``model``, a stop
reason, a tool block's ``id``/``name``, a citation's fields, ``request_id``) is dropped
to None, and a block ``index`` or message ``id`` that is not an integer / a string, or a
text that is not a string, makes the frame malformed (kept as ``native/unknown``).
Both are checked once per message or block, never per delta.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec

from adapters._base import (
    MALFORMED,
    Adapter,
    int_or_none,
    kept_bytes,
    new_id,
    str_or_none,
    text_value,
)
from adapters._tap import finish_open_taps
from adapters._usage import anthropic_usage, merge_anthropic_usage
from adapters.anthropic import _wire
from universal_event._sse_frames import SSEDecoder, SSEFrame
from universal_event.errors import UniversalEventError
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    Source,
    StepEndEvent,
    StepStartEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    TurnStatus,
    Usage,
    UsageEvent,
    UserMessageEvent,
)
from universal_event.parts import (
    AssistantPart,
    Citation,
    Provenance,
    ResultPart,
    ServerToolCallPart,
    ServerToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPart,
)

__all__ = [
    "AnthropicAdapter",
    "assistant_parts",
    "block_part",
    "citation_of",
    "is_retryable_error",
    "whole_block",
]

_raw_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()

TOOL_TURN_STOP_REASONS = frozenset({"tool_use", "pause_turn"})
"""Stop reasons after which the turn goes on (the client runs tools / resends)."""

_RETRYABLE_ERRORS = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error", "stream_interrupted"}
)
_HTTP_STATUS_OF_ERROR = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""Anthropic's documented error type → HTTP status (an in-stream error has no status)."""

_DELTA_WIRE_NAMES = {
    "text": ("text_delta", "text"),
    "thinking": ("thinking_delta", "thinking"),
    "signature": ("signature_delta", "signature"),
    "tool_arguments": ("input_json_delta", "partial_json"),
    "citation": ("citations_delta", "citation"),
}
"""Chunk kind → the native delta type and field (to keep a misplaced delta whole)."""

_SDK_HELPER_EVENTS = frozenset({"text", "thinking", "input_json", "citation", "signature"})
"""``MessageStream`` convenience events that only repeat a raw delta."""


def is_retryable_error(error_type: str | None) -> bool:
    """Whether an Anthropic error type is worth retrying (overload, 5xx, rate limit)."""
    return error_type in _RETRYABLE_ERRORS


def citation_of(native: Mapping[str, Any]) -> Citation:
    """An Anthropic citation (char/page/content-block location, web search result)."""
    title = native.get("title") or native.get("document_title")
    return Citation(
        kind=str(native.get("type", "unknown")),
        cited_text=str_or_none(native.get("cited_text")),
        url=str_or_none(native.get("url")),
        title=str_or_none(title),
        start_index=int_or_none(native.get("start_char_index")),
        end_index=int_or_none(native.get("end_char_index")),
        native=dict(native),
    )


def _dump(obj: Any) -> dict[str, Any]:
    """An SDK (pydantic) object as the JSON dict the API sent.

    ``exclude_unset`` keeps exactly the keys the SDK built the object from, so a
    same-provider replay of an opaque block sees the API's own shape.
    """
    if isinstance(obj, Mapping):
        return dict(obj)
    # ``warnings=False``: the SDK builds its objects unvalidated, and a field of another
    # type than declared (a float ``input_tokens`` from a compatible server) would make
    # pydantic warn on every dump, where the SDK itself runs clean.
    dumped: dict[str, Any] = obj.model_dump(
        mode="json", by_alias=True, exclude_unset=True, warnings=False
    )
    return dumped


_BLOCK_TEXTS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "thinking": ("thinking", "signature"),
}
"""The text fields a content block starts with (strings, or the block is malformed)."""


class _Block:
    """One content block being accumulated (streamed deltas, or whole)."""

    __slots__ = (
        "citations",
        "index",
        "json_parts",
        "known",
        "native",
        "signature",
        "text_parts",
        "tool_id",
        "tool_name",
        "type",
    )

    def __init__(self, index: int, native: dict[str, Any]) -> None:
        self.index = index
        self.native = native
        self.type: str = str(native.get("type"))
        self.known = _part_kind(self.type) != "unknown"
        self.text_parts: list[str] = []
        self.json_parts: list[str] = []
        self.citations: list[Citation] = []
        self.signature: str = ""
        # Typed fields of every chunk of the block: a value of another type is dropped.
        self.tool_id = str_or_none(native.get("id")) if self.type.endswith("tool_use") else None
        self.tool_name = str_or_none(native.get("name")) if self.tool_id else None


class _Message:
    """The API message being streamed."""

    __slots__ = (
        "blocks",
        "chunk_source",
        "id",
        "model",
        "provenance",
        "stop_reason",
        "stop_sequence",
        "streamed",
        "usage_delta",
        "usage_start",
    )

    def __init__(self, message_id: str, model: str | None, runtime: str) -> None:
        self.id = message_id
        self.model = model
        self.provenance = Provenance(provider="anthropic", api="messages", model=model)
        self.blocks: dict[int, _Block] = {}
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.usage_start: dict[str, Any] | None = None
        self.usage_delta: dict[str, Any] | None = None
        self.streamed = True
        self.chunk_source = Source(
            runtime=runtime, native_type="content_block_delta", native_id=message_id, model=model
        )


class AnthropicAdapter(Adapter):
    """Normalises one Anthropic Messages conversation (one or more API responses).

    Feed the responses of successive requests into the same adapter: each message is a
    step; the turn ends when a message stops for a reason other than tool use. Append
    what the caller sends between requests with :meth:`user_prompt` and
    :meth:`tool_result`. After :meth:`close` the adapter can take the next stream.

    ``embedded=True`` is for runtimes that carry Anthropic stream events inside their own
    stream (Claude Code's ``stream_event``): only chunks, usage and errors come out; the
    host adapter owns messages, steps and turns.
    """

    runtime: ClassVar[str] = "anthropic"

    def __init__(self, *, session_id: str = "", embedded: bool = False) -> None:
        super().__init__(session_id=session_id)
        self.embedded = embedded
        self.parent_id: str | None = None
        self._message: _Message | None = None
        self._turn_open = False
        self._turn_usage: Usage | None = None
        self._next_step = 0
        self._sse = SSEDecoder()
        self._mode: str | None = None  # "sse" | "json", decided by the first bytes
        self._json_buffer = bytearray()
        self._id_prefix = new_id()[:20] + "-"
        self._id_counter = 0
        self._now = 0.0
        self.finished: dict[str, tuple[str | None, str]] = {}
        """message id → (stop_reason, status) of every message that ended (for hosts)."""

    # ------------------------------------------------------------------ public API

    def feed(self, native: Any) -> list[Event]:
        """Normalise bytes, a str, a dict or an SDK object; see the module docstring."""
        out: list[Event] = []
        self._now = time.time()  # arrival time, shared by the chunks of this input
        kind = getattr(native, "type", None)
        if isinstance(kind, str):  # an SDK object (checked first: the per-event path)
            self._on_typed(native, kind, out)
        elif isinstance(native, bytes | bytearray | memoryview):
            self._feed_bytes(bytes(native), out)
        elif isinstance(native, str):
            self._feed_bytes(native.encode(), out)
        elif isinstance(native, Mapping):
            self._on_dict(native, out)
        else:
            out.append(self.unknown(type(native).__name__, repr(native), "not an Anthropic event"))
        return out

    def close(self) -> list[Event]:
        """Finish the current stream: a message without ``message_stop`` ends partial.

        A turn whose last message stopped for ``tool_use`` stays open: the caller's tool
        results and the next request belong to it.
        """
        out: list[Event] = []
        self._now = time.time()
        if self._mode == "sse":
            self.handle_frames(self._sse.flush(), self._on_frame, self._sse, out)
        elif self._json_buffer.strip():
            raw = bytes(self._json_buffer)
            out.append(self.unknown(None, kept_bytes(raw), "truncated or malformed JSON"))
        self._sse = SSEDecoder()
        self._mode = None
        self._json_buffer.clear()
        if self._message is not None:
            try:
                self._finish(out, status="interrupted", error="stream ended before message_stop")
            except UniversalEventError:
                raise
            except MALFORMED as exc:  # a block of another shape left in the state
                out.append(self.malformed("close", None, exc))
        return out

    def user_prompt(self, content: str | list[UserPart]) -> list[Event]:
        """Append what the user asked: a new turn begins with it.

        A stream the caller stopped reading ends first: a tap of this adapter is finished
        (:func:`adapters._tap.finish_open_taps`), and a message still open here (fed
        without ``message_stop`` and not closed) ends ``partial`` with its turn
        ``interrupted``, as :meth:`close` ends it — not ``completed``.
        """
        parts: list[UserPart] = [TextPart(text=content)] if isinstance(content, str) else content
        out = self._end_open_stream()
        if self._turn_open:
            self._end_turn(out, "completed", None)
        self._start_turn(out)
        out.append(self.make(UserMessageEvent, content=parts))
        return out

    def _end_open_stream(self) -> list[Event]:
        """Before the caller's own input: a tap of this adapter the caller stopped
        reading is finished, and a message still open here ends as :meth:`close` ends
        it (partial, turn ``interrupted``); the events that ends it with."""
        finish_open_taps(self)
        return self.close() if self._message is not None or self._mode is not None else []

    def hands_over_call(self, native: Any) -> bool:
        """Whether ``native`` hands the caller a whole tool call before its message is
        logged: ``messages.stream()``'s ``content_block_stop`` carries the finished
        ``tool_use`` block, and ``message_stop`` comes after (:mod:`adapters._tap`)."""
        if self._message is None or getattr(native, "type", None) != "content_block_stop":
            return False
        return getattr(getattr(native, "content_block", None), "type", None) == "tool_use"

    def tool_result(
        self,
        call_id: str,
        content: str | list[ResultPart],
        *,
        is_error: bool = False,
        name: str | None = None,
    ) -> list[Event]:
        """Append the result of a client-side tool call the caller ran.

        As :meth:`user_prompt`, a stream the caller stopped reading (at the block that
        completed the call, to run the tool) ends first: its message, with the call, is
        logged before the result, which would otherwise answer no call yet.
        """
        parts: list[ResultPart] = [TextPart(text=content)] if isinstance(content, str) else content
        out = self._end_open_stream()
        out.append(
            self.make(ToolResultEvent, call_id=call_id, name=name, content=parts, is_error=is_error)
        )
        return out

    def _envelope_defaults(self, fields: dict[str, Any]) -> None:
        """``parent_id`` filled for nested streams (a sub-agent's)."""
        fields.setdefault("parent_id", self.parent_id)

    # ------------------------------------------------------------------ input front ends

    def _feed_bytes(self, chunk: bytes, out: list[Event]) -> None:
        if self._mode is None:
            head = chunk.lstrip()
            if not head:
                return
            self._mode = "json" if head[:1] in (b"{", b"[") else "sse"
        if self._mode == "sse":
            self._feed_sse(chunk, out)
        else:
            self._feed_json(chunk, out)

    def _feed_sse(self, chunk: bytes, out: list[Event]) -> None:
        self.handle_frames(self._sse.feed(chunk), self._on_frame, self._sse, out)

    def _feed_json(self, chunk: bytes, out: list[Event]) -> None:
        """A whole JSON body (non-streamed message, error) or JSON lines of events."""
        self._json_buffer += chunk
        try:
            document = _raw_decoder.decode(self._json_buffer)
        except msgspec.DecodeError as exc:
            if "truncated" in str(exc):
                return  # the rest of the body is still to come
            self._feed_json_lines(out)
            return
        self._json_buffer.clear()
        self._on_document(document, out)

    def _feed_json_lines(self, out: list[Event]) -> None:
        buffer = self._json_buffer
        end = buffer.rfind(b"\n")
        if end == -1:
            return
        complete, rest = bytes(buffer[:end]), bytes(buffer[end + 1 :])
        self._json_buffer = bytearray(rest)
        for line in complete.splitlines():
            if not line.strip():
                continue
            try:
                document = _raw_decoder.decode(line)
            except msgspec.DecodeError as exc:
                out.append(self.unknown(None, kept_bytes(line), f"malformed JSON: {exc}"))
                continue
            self._on_document(document, out)

    def _on_document(self, document: Any, out: list[Event]) -> None:
        if isinstance(document, dict):
            self._on_dict(document, out)
        else:
            out.append(self.unknown(None, document, "JSON body is not an object"))

    def _on_frame(self, frame: SSEFrame, out: list[Event]) -> None:
        """One SSE frame: the fast path decodes straight into the wire structs."""
        data = frame.data
        if not data or data == b"[DONE]":
            return
        try:
            event = _wire.stream_event_decoder.decode(data)
        except msgspec.ValidationError:
            # An unknown event or delta type, or a known one with an odd shape: the dict
            # path keeps it as native/unknown (or handles what it can).
            self._on_raw_frame(frame, out)
            return
        except msgspec.DecodeError as exc:
            out.append(
                self.unknown(frame.event, kept_bytes(data), f"malformed JSON in SSE data: {exc}")
            )
            return
        if type(event) is _wire.ContentBlockDelta:
            delta = event.delta
            kind = type(delta)
            if kind is _wire.TextDelta:
                self._delta(event.index, "text", delta.text, out)  # type: ignore[union-attr]
            elif kind is _wire.InputJsonDelta:
                self._delta(event.index, "tool_arguments", delta.partial_json, out)  # type: ignore[union-attr]
            elif kind is _wire.ThinkingDelta:
                self._delta(event.index, "thinking", delta.thinking, out)  # type: ignore[union-attr]
            elif kind is _wire.SignatureDelta:
                self._delta(event.index, "signature", delta.signature, out)  # type: ignore[union-attr]
            else:
                assert type(delta) is _wire.CitationsDelta
                self._citation(event.index, delta.citation, out)
            return
        match event:
            case _wire.MessageStart(message=message):
                self._message_start(message.id, message.model, message.usage, out)
            case _wire.ContentBlockStart(index=index, content_block=block):
                self._block_start(index, block, out)
            case _wire.ContentBlockStop(index=index):
                self._block_stop(index, out)
            case _wire.MessageDelta(delta=body, usage=usage):
                self._message_delta(body.stop_reason, body.stop_sequence, usage, out)
            case _wire.MessageStop():
                self._message_stop(out)
            case _wire.Ping():
                pass
            case _wire.ErrorEvent(error=error, request_id=request_id):
                self._error(error, request_id, out)

    def _on_raw_frame(self, frame: SSEFrame, out: list[Event]) -> None:
        try:
            document = _raw_decoder.decode(frame.data)
        except msgspec.DecodeError as exc:
            out.append(
                self.unknown(
                    frame.event, kept_bytes(frame.data), f"malformed JSON in SSE data: {exc}"
                )
            )
            return
        self._on_document(document, out)

    def _on_dict(self, event: Mapping[str, Any], out: list[Event]) -> None:
        """One event, message or error body as plain JSON values."""
        kind = event.get("type")
        try:
            if kind == "content_block_delta":
                self._delta_dict(block_index(event["index"]), event["delta"], event, out)
            elif kind == "message_start":
                message = event["message"]
                message_id, model = text_value(message["id"]), message.get("model")
                self._message_start(message_id, model, message.get("usage"), out)
            elif kind == "content_block_start":
                self._block_start(block_index(event["index"]), dict(event["content_block"]), out)
            elif kind == "content_block_stop":
                self._block_stop(event["index"], out)
            elif kind == "message_delta":
                delta = event.get("delta") or {}
                usage = event.get("usage")
                stop_reason = str_or_none(delta.get("stop_reason"))
                stop_sequence = str_or_none(delta.get("stop_sequence"))
                self._message_delta(stop_reason, stop_sequence, usage, out)
            elif kind == "message_stop":
                self._message_stop(out)
            elif kind == "ping":
                pass
            elif kind == "error":
                self._error(event.get("error") or {}, event.get("request_id"), out)
            elif kind == "message":
                self._whole_message(event, out)
            else:
                out.append(self.unknown(str(kind), dict(event), "unknown Anthropic event type"))
        except UniversalEventError:
            raise
        except MALFORMED as exc:
            out.append(self.malformed(str(kind), dict(event), exc))

    def _delta_dict(
        self, index: int, delta: Mapping[str, Any], event: Mapping[str, Any], out: list[Event]
    ) -> None:
        kind = delta.get("type")
        if kind == "text_delta":
            self._text(index, text_value(delta["text"]), out)
        elif kind == "input_json_delta":
            self._input_json(index, text_value(delta["partial_json"]), out)
        elif kind == "thinking_delta":
            self._thinking(index, text_value(delta["thinking"]), out)
        elif kind == "signature_delta":
            self._signature(index, text_value(delta["signature"]), out)
        elif kind == "citations_delta":
            self._citation(index, dict(delta["citation"]), out)
        else:
            reason = f"unknown delta type {kind!r}"
            out.append(self.unknown("content_block_delta", dict(event), reason))

    def _on_typed(self, obj: Any, kind: str, out: list[Event]) -> None:
        """The SDK's pydantic objects, read attribute by attribute (no dict round trip)."""
        if kind == "content_block_delta":
            delta = obj.delta
            delta_kind = delta.type
            if delta_kind == "text_delta":
                self._delta(obj.index, "text", delta.text, out)
            elif delta_kind == "input_json_delta":
                self._delta(obj.index, "tool_arguments", delta.partial_json, out)
            elif delta_kind == "thinking_delta":
                self._delta(obj.index, "thinking", delta.thinking, out)
            elif delta_kind == "signature_delta":
                self._delta(obj.index, "signature", delta.signature, out)
            elif delta_kind == "citations_delta":
                self._citation(obj.index, _dump(delta.citation), out)
            else:
                out.append(self.unknown(kind, _dump(obj), f"unknown delta type {delta_kind!r}"))
        elif kind == "message_start":
            message = obj.message
            usage = _dump(message.usage) if message.usage is not None else None
            self._message_start(message.id, message.model, usage, out)
        elif kind == "content_block_start":
            self._block_start(obj.index, _dump(obj.content_block), out)
        elif kind == "content_block_stop":
            self._block_stop(obj.index, out)
        elif kind == "message_delta":
            usage = _dump(obj.usage) if obj.usage is not None else None
            self._message_delta(obj.delta.stop_reason, obj.delta.stop_sequence, usage, out)
        elif kind == "message_stop":
            self._message_stop(out)
        elif kind == "message":
            self._whole_message(_dump(obj), out)
        elif kind in _SDK_HELPER_EVENTS or kind == "ping":
            pass
        else:
            out.append(self.unknown(kind, _dump(obj), "unknown Anthropic event type"))

    # ------------------------------------------------------------------ the state machine

    def _message_start(
        self, message_id: str, model: str | None, usage: dict[str, Any] | None, out: list[Event]
    ) -> None:
        if self._message is not None:
            # A new message while one is open: the previous stream was cut (a retry).
            self._finish(out, status="interrupted", error="a new message began before this one")
        if not self.embedded:
            if not self._turn_open:
                self._start_turn(out)
            self.step = self._next_step
            self._next_step += 1
            out.append(self.make(StepStartEvent, native_type="message_start", native_id=message_id))
        # Once per message (the typed path checked these already; dicts did not).
        message = _Message(message_id, str_or_none(model), self.runtime)
        message.usage_start = usage if isinstance(usage, dict) else None
        self._message = message

    def _block_start(self, index: int, native: dict[str, Any], out: list[Event]) -> None:
        message = self._message
        if message is None:
            reason = "content_block_start outside a message (no message_start)"
            out.append(self.unknown("content_block_start", native, reason))
            return
        if index in message.blocks:
            reason = f"content_block_start repeats block index {index}"
            out.append(self.unknown("content_block_start", native, reason))
            return
        block = _Block(index, native)
        texts = [text_value(native.get(key) or "") for key in _BLOCK_TEXTS.get(block.type, ())]
        message.blocks[index] = block  # after the checks: a block of another shape is not kept
        if block.type == "text":
            self._text(index, texts[0], out, skip_empty=True)
        elif block.type == "thinking":
            self._thinking(index, texts[0], out, skip_empty=True)
            self._signature(index, texts[1], out, skip_empty=True)
        elif _part_kind(block.type) == "unknown":
            reason = "unknown content block type; kept out of the assistant message"
            out.append(self.unknown(block.type, native, reason))

    def _delta(self, index: int, kind: Any, value: str, out: list[Event]) -> None:
        """One streamed delta: accumulate it in its block and emit its chunk (hot path)."""
        message = self._message
        block = message.blocks.get(index) if message is not None else None
        if block is None or not block.known:
            self._misplaced_delta(index, kind, value, out)
            return
        if kind == "tool_arguments":
            block.json_parts.append(value)
        elif kind == "signature":
            block.signature += value
        else:
            block.text_parts.append(value)
        self._emit_chunk(block, kind, value, out, None)

    def _emit_chunk(
        self, block: _Block, kind: Any, value: str, out: list[Event], citation: Citation | None
    ) -> None:
        message = self._message
        assert message is not None
        self._id_counter += 1
        out.append(
            AssistantChunkEvent(
                id=f"{self._id_prefix}{self._id_counter:x}",
                session_id=self.session_id,
                ts=self._now,
                turn_id=self.turn_id,
                step=self.step,
                source=message.chunk_source,
                parent_id=self.parent_id,
                message_id=message.id,
                index=block.index,
                kind=kind,
                delta=value,
                tool_call_id=block.tool_id,
                tool_name=block.tool_name,
                citation=citation,
            )
        )

    def _misplaced_delta(self, index: int, kind: str, value: Any, out: list[Event]) -> None:
        """A delta with no open block of a known type to go to: kept, never dropped."""
        message = self._message
        block = message.blocks.get(index) if message is not None else None
        why = (
            "delta outside a message"
            if message is None
            else f"delta for block index {index} that never started (out of order)"
            if block is None
            else f"delta for unknown block type {block.type!r}"
        )
        native_kind, field = _DELTA_WIRE_NAMES[kind]
        payload = {"type": native_kind, field: value}
        event = {"type": "content_block_delta", "index": index, "delta": payload}
        out.append(self.unknown("content_block_delta", event, why))

    def _text(self, index: int, text: str, out: list[Event], *, skip_empty: bool = False) -> None:
        if text or not skip_empty:
            self._delta(index, "text", text, out)

    def _thinking(
        self, index: int, text: str, out: list[Event], *, skip_empty: bool = False
    ) -> None:
        if text or not skip_empty:
            self._delta(index, "thinking", text, out)

    def _signature(
        self, index: int, signature: str, out: list[Event], *, skip_empty: bool = False
    ) -> None:
        if signature or not skip_empty:
            self._delta(index, "signature", signature, out)

    def _input_json(self, index: int, partial: str, out: list[Event]) -> None:
        self._delta(index, "tool_arguments", partial, out)

    def _citation(self, index: int, native: dict[str, Any], out: list[Event]) -> None:
        message = self._message
        block = message.blocks.get(index) if message is not None else None
        if block is None or not block.known:
            self._misplaced_delta(index, "citation", native, out)
            return
        citation = citation_of(native)
        block.citations.append(citation)
        self._emit_chunk(block, "citation", "", out, citation)

    def _block_stop(self, index: int, out: list[Event]) -> None:
        message = self._message
        if message is None or index not in message.blocks:
            event = {"type": "content_block_stop", "index": index}
            reason = "content_block_stop for a block that never started"
            out.append(self.unknown("content_block_stop", event, reason))

    def _message_delta(
        self,
        stop_reason: str | None,
        stop_sequence: str | None,
        usage: dict[str, Any] | None,
        out: list[Event],
    ) -> None:
        message = self._message
        if message is None:
            event = {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": usage}
            out.append(self.unknown("message_delta", event, "message_delta outside a message"))
            return
        message.stop_reason = stop_reason or message.stop_reason
        message.stop_sequence = stop_sequence or message.stop_sequence
        if isinstance(usage, Mapping):
            message.usage_delta = merge_anthropic_usage(message.usage_delta, usage)

    def _message_stop(self, out: list[Event]) -> None:
        if self._message is None:
            out.append(self.unknown("message_stop", {"type": "message_stop"}, "no open message"))
            return
        self._finish(out, status="completed")

    def _whole_message(self, native: Mapping[str, Any], out: list[Event]) -> None:
        """A non-streamed ``message``: the same steps, without chunks.

        Its blocks are read first: one of another shape makes the message malformed
        before it opened a step."""
        message_id = text_value(native["id"])
        blocks = [whole_block(i, dict(b)) for i, b in enumerate(native.get("content") or [])]
        self._message_start(message_id, native.get("model"), native.get("usage"), out)
        message = self._message
        assert message is not None
        message.streamed = False
        for block in blocks:
            if _part_kind(block.type) == "unknown":
                reason = "unknown content block type; kept out of the assistant message"
                out.append(self.unknown(block.type, dict(block.native), reason))
            message.blocks[block.index] = block
        message.stop_reason = str_or_none(native.get("stop_reason"))
        message.stop_sequence = str_or_none(native.get("stop_sequence"))
        self._finish(out, status="completed")

    def api_error(self, exc: BaseException) -> list[Event]:
        """Events for an exception the ``anthropic`` SDK raised while streaming.

        The SDK raises an in-stream ``error`` event as ``APIStatusError`` (its ``body`` is
        the event; ``status_code`` the stream's 200), an HTTP error as ``APIStatusError``
        with the error body and real status, and a dropped connection or a timeout with
        no body (retryable). The open message ends ``failed`` either way.
        """
        body = getattr(exc, "body", None)
        status = getattr(exc, "status_code", None)
        http_status = status if isinstance(status, int) and status >= 400 else None
        out: list[Event] = []
        if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
            request_id = body.get("request_id") or getattr(exc, "request_id", None)
            self._error(body["error"], request_id, out, http_status=http_status)
        else:
            error = {"type": type(exc).__name__, "message": str(exc)}
            self._error(error, None, out, http_status=http_status, retryable=status is None)
        return out

    def _error(
        self,
        error: Mapping[str, Any],
        request_id: str | None,
        out: list[Event],
        *,
        http_status: int | None = None,
        retryable: bool | None = None,
    ) -> None:
        """An API error (in-stream ``error`` event or an HTTP error body)."""
        code = str_or_none(error.get("type"))
        request_id = str_or_none(request_id)
        native = {"type": "error", "error": dict(error)}
        if request_id:
            native["request_id"] = request_id
        out.append(
            self.make(
                ErrorEvent,
                native_type="error",
                native_id=request_id,
                message=str(error.get("message") or code or "error"),
                code=code,
                retryable=is_retryable_error(code) if retryable is None else retryable,
                http_status=http_status or _HTTP_STATUS_OF_ERROR.get(str(code)),
                native=native,
            )
        )
        if self._message is not None:
            self._finish(out, status="failed", error=None)
        elif self._turn_open and not self.embedded:
            self._end_turn(out, "failed", str(error.get("message") or code))

    def _finish(self, out: list[Event], *, status: TurnStatus, error: str | None = None) -> None:
        """Close the open message: message, usage, step end and — if due — turn end."""
        message = self._message
        assert message is not None
        self._message = None
        complete = status == "completed"
        if not self.embedded:
            blocks = sorted(message.blocks.values(), key=_index)
            parts = [p for b in blocks if (p := block_part(b, message.provenance))]
            out.append(
                self.make(
                    AssistantMessageEvent,
                    native_type="message_stop" if message.streamed else "message",
                    native_id=message.id,
                    model=message.model,
                    content=parts,
                    message_id=message.id,
                    provenance=message.provenance,
                    stop_reason=message.stop_reason,
                    stop_sequence=message.stop_sequence,
                    status="complete" if complete else "partial",
                )
            )
        usage_native = merge_anthropic_usage(message.usage_start, message.usage_delta)
        usage = anthropic_usage(usage_native) if usage_native else None
        if usage is not None:
            out.append(
                self.make(
                    UsageEvent,
                    native_type="message_delta" if message.streamed else "message",
                    native_id=message.id,
                    usage=usage,
                    message_id=message.id,
                    model=message.model,
                    service_tier=_service_tier(usage_native),
                )
            )
            self._turn_usage = usage if self._turn_usage is None else self._turn_usage + usage
        if error is not None and not self.embedded:
            out.append(
                self.make(
                    ErrorEvent,
                    native_id=message.id,
                    message=error,
                    code="stream_interrupted",
                    retryable=True,
                )
            )
        self.finished[message.id] = (message.stop_reason, "complete" if complete else "partial")
        if self.embedded:
            return
        out.append(
            self.make(
                StepEndEvent,
                native_id=message.id,
                status=status,
                stop_reason=message.stop_reason,
            )
        )
        self.step = None
        if not complete or message.stop_reason not in TOOL_TURN_STOP_REASONS:
            self._end_turn(out, status, error, stop_reason=message.stop_reason)

    def _start_turn(self, out: list[Event]) -> None:
        self.turn_id = new_id()
        self.step = None
        self._turn_open = True
        self._turn_usage = None
        self._next_step = 0
        out.append(self.make(TurnStartEvent))

    def _end_turn(
        self,
        out: list[Event],
        status: TurnStatus,
        error: str | None,
        *,
        stop_reason: str | None = None,
    ) -> None:
        out.append(
            self.make(
                TurnEndEvent,
                status=status,
                usage=self._turn_usage,
                error=error,
                stop_reason=stop_reason,
            )
        )
        self._turn_open = False
        self._turn_usage = None


# ---------------------------------------------------------------------- blocks → parts


def _index(block: _Block) -> int:
    return block.index


def block_index(value: Any) -> int:
    """A native content block ``index``, which must be an integer (it keys the blocks,
    orders them, and is every chunk's typed ``index``)."""
    if type(value) is not int:
        raise TypeError(f"block index must be an integer, got {type(value).__name__}")
    return value


def _part_kind(block_type: str) -> str:
    """How a content block type maps: the client-side kinds, server tools, or unknown.

    Server tools (web search, web fetch, code execution, MCP, tool search, advisor, and
    whatever the API adds next) follow one naming pattern: the call is a ``*tool_use``
    block with ``id``/``name``/``input`` (``server_tool_use``, ``mcp_tool_use``), the
    result a ``*_tool_result`` block with ``tool_use_id`` (``web_search_tool_result``,
    ``bash_code_execution_tool_result``, ``advisor_tool_result``, ...). Both stay opaque.
    """
    if block_type in ("text", "thinking", "redacted_thinking", "tool_use"):
        return block_type
    if block_type.endswith("tool_use"):
        return "server_tool_call"
    if block_type.endswith("tool_result"):
        return "server_tool_result"
    return "unknown"


def _arguments(block: _Block) -> tuple[Any, str | None]:
    """Parsed tool input; ``(None, raw)`` when the streamed JSON is not valid.

    A tool without arguments streams one ``input_json_delta`` with ``partial_json: ""``
    (recorded: stream_thinking_tooluse_signature_replay) — that is ``{}``, the
    ``input`` of ``content_block_start``.
    """
    raw = "".join(block.json_parts)
    if not raw.strip():
        start_input = block.native.get("input")
        return (start_input if start_input is not None else {}), None
    try:  # msgspec, not json: a lone surrogate escape ("\ud83d") would decode into
        # a string no store can encode, and wedge every later checkpoint
        return _raw_decoder.decode(raw), None
    except msgspec.DecodeError:
        return None, raw


def whole_block(index: int, native: dict[str, Any]) -> _Block:
    """A block that arrived whole (non-streamed message, Claude Code ``assistant`` line)."""
    block = _Block(index, native)
    if block.type == "text":
        block.text_parts.append(text_value(native.get("text") or ""))
        block.citations = [citation_of(c) for c in native.get("citations") or []]
    elif block.type == "thinking":
        block.text_parts.append(text_value(native.get("thinking") or ""))
        block.signature = str_or_none(native.get("signature")) or ""
    elif block.type.endswith("tool_use"):
        block.json_parts.append(json.dumps(native.get("input", {})))
    return block


def assistant_parts(
    blocks: list[dict[str, Any]], provenance: Provenance
) -> tuple[list[AssistantPart], list[dict[str, Any]]]:
    """Whole Anthropic content blocks → parts, and the blocks of unknown type (kept apart)."""
    parts: list[AssistantPart] = []
    unknown: list[dict[str, Any]] = []
    for index, native in enumerate(blocks):
        part = block_part(whole_block(index, dict(native)), provenance)
        if part is None:
            unknown.append(dict(native))
        else:
            parts.append(part)
    return parts, unknown


def block_part(block: _Block, provenance: Provenance) -> AssistantPart | None:
    """The part a finished block becomes; ``None`` for an unknown block type."""
    kind = _part_kind(block.type)
    native = block.native
    if kind == "text":
        return TextPart(text="".join(block.text_parts), citations=block.citations)
    if kind == "thinking":
        return ThinkingPart(
            text="".join(block.text_parts),
            signature=block.signature or None,
            provenance=provenance,
        )
    if kind == "redacted_thinking":
        return ThinkingPart(redacted_data=str_or_none(native.get("data")), provenance=provenance)
    if kind == "tool_use":
        arguments, raw = _arguments(block)
        return ToolCallPart(
            id=str(native.get("id")),
            name=str(native.get("name")),
            arguments=arguments,
            arguments_raw=raw,
            provenance=provenance,
        )
    if kind == "server_tool_call":
        arguments, raw = _arguments(block)
        return ServerToolCallPart(
            id=str(native.get("id")),
            name=str(native.get("name")),
            input=arguments if raw is None else raw,
            native={**native, "input": arguments if raw is None else raw},
            provenance=provenance,
        )
    if kind == "server_tool_result":
        return ServerToolResultPart(
            call_id=str(native.get("tool_use_id")),
            kind=block.type,
            native=native,
            provenance=provenance,
        )
    return None


def _service_tier(usage: Any) -> str | None:
    tier = usage.get("service_tier") if isinstance(usage, dict) else None
    return tier if isinstance(tier, str) else None
