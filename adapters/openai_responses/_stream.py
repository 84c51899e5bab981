"""OpenAI Responses → Universal Events (streamed ``response.*`` events and whole bodies).

What comes out, per response:

* ``step/start`` at the first lifecycle event (``response.created``, or ``queued`` in
  background mode) — one step is one model request;
* ``assistant/chunk`` for every delta: output text (``text``), refusals (``refusal``),
  function-call arguments and custom-tool input (``tool_arguments``, with the call's
  ``call_id`` and name), MCP arguments and interpreter code (``tool_arguments`` of the
  server tool), reasoning summaries (``summary``), raw reasoning text (``thinking``),
  annotations (``citation``); ``tool/output`` for streamed shell output;
* at the terminal event (``response.completed`` / ``incomplete`` / ``failed``): ONE
  ``assistant/message`` holding every output item in ``output_index`` order (so the
  derived history has one assistant message per response, like the request the real
  client sends back), then ``usage``, an ``error`` for ``failed`` / ``incomplete``, and
  ``step/end``.

Stop status. Responses has no finish reason; ``stop_reason`` is ``tool_calls`` when a
completed response asks for client tools, else ``completed``; the
``incomplete_details.reason`` (``max_output_tokens``, ``content_filter``) for an
incomplete one; ``failed`` / ``cancelled`` otherwise. ``step/end.status`` is
``completed`` (also for ``incomplete``: the API finished the request), ``failed``,
``cancelled``, or ``interrupted`` for a stream cut before its terminal event.

Sequence numbers. Every event carries ``sequence_number`` (0, 1, 2, ... per response);
a jump or a repeat yields a ``warning`` (code ``sequence_gap`` /
``sequence_out_of_order``), not an error: the terminal event still carries the whole
output, so the message stays complete; only chunks may be missing.

Input. ``feed`` takes raw bytes (SSE, cut anywhere; or a whole non-streamed Response
JSON body, or JSON lines of events), a ``str``, a ``dict``, the SDK's typed event or
``Response`` object, or an ``openai.APIStatusError``. Caller-sent tool results
(``function_call_output`` and the other ``*_call_output`` input items) go through
:meth:`OpenAIResponsesAdapter.tool_outputs` (or ``feed`` one as a dict) and become
``tool/result``; HTTP error bodies through :meth:`OpenAIResponsesAdapter.http_error`
(with their status). An error body (``{"error": {...}}``) fed as such, whole or as an
SSE ``data:`` line, is an ``error`` event too (its status unknown), as openai-chat makes
it; inside a response, ``close`` then ends that response ``failed``.
:func:`tap` / :func:`atap` wrap the generic :mod:`adapters._tap` for ``openai`` streams.

A response with no output (one that failed before producing any) gets no
``assistant/message``: an empty assistant turn would be rejected when rendered back.

Wrong types. A dict of another shape fed whole is kept as ``native/unknown``; an output
item whose parts cannot be read (the terminal object's, or one assembled from deltas) is
kept the same way and the response still ends (message, step end, turn end); a chunk's
``tool_call_id`` / ``tool_name`` of another type is dropped (once per item).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from typing import Any, ClassVar, Literal, TypeVar

import msgspec

from adapters._base import MALFORMED, Adapter, kept_bytes, str_or_none
from adapters._tap import (
    AsyncTap,
    EventLog,
    Tap,
    atap_sdk_stream,
    finish_open_taps,
    log_session_id,
    tap_sdk_stream,
)
from adapters._usage import openai_usage
from adapters.openai_responses import _wire as wire
from adapters.openai_responses._items import (
    CLIENT_RESULT_TYPES,
    citation,
    item_parts,
    result_parts,
)
from universal_event._sse_frames import SSEDecoder, SSEFrame
from universal_event.errors import UniversalEventError
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    EventBase,
    NativeUnknownEvent,
    Source,
    StepEndEvent,
    StepStartEvent,
    ToolOutputEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    TurnStatus,
    Usage,
    UsageEvent,
    WarningEvent,
)
from universal_event.parts import AssistantPart, Provenance, ToolCallPart

__all__ = ["OpenAIResponsesAdapter", "atap", "tap"]

_CALL_DONE_EVENTS = frozenset(
    {"response.function_call_arguments.done", "response.custom_tool_call_input.done"}
)
_CALL_ITEMS = frozenset({"function_call", "custom_tool_call"})

EventT = TypeVar("EventT", bound=EventBase)
ChunkKind = Literal["text", "thinking", "tool_arguments", "refusal", "summary"]

_QUIET_TYPES = frozenset(
    {
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.refusal.done",
        "response.function_call_arguments.done",
        "response.custom_tool_call_input.done",
        "response.mcp_call_arguments.done",
        "response.code_interpreter_call_code.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_list_tools.failed",
        "response.image_generation_call.in_progress",
        "response.image_generation_call.generating",
        "response.image_generation_call.partial_image",
        "response.image_generation_call.completed",
        "response.shell_call_command.added",
        "response.shell_call_command.done",
        "response.shell_call_output_content.done",
        "response.compaction.compacting",
    }
)
"""Known events with nothing to map: status pings and ``*.done`` repeats of content that
``response.output_item.done`` (and the terminal response) carry whole. Partial images are
previews of the final ``image_generation_call.result``."""

_RETRYABLE_CODES = frozenset(
    {"rate_limit_exceeded", "server_error", "internal_error", "server_overloaded", "timeout"}
)
_NOT_RETRYABLE_CODES = frozenset({"insufficient_quota", "invalid_prompt", "model_not_found"})

_raw_decoder = msgspec.json.Decoder()


class _Partial:
    """An output item still streaming: the ``added`` item plus the deltas so far.

    Deltas are kept as the wire structs themselves (one list append on the hot path)
    and only assembled when the stream is cut (``close``) or fails: a finished item is
    replaced by its ``output_item.done`` form. ``chunk_meta`` caches, per native delta
    type, what every chunk of this item repeats (source, tool call id and name).
    """

    __slots__ = ("chunk_meta", "deltas", "item")

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item
        self.deltas: list[wire.ItemDelta] = []
        self.chunk_meta: dict[str, tuple[Source, str | None, str | None]] = {}

    def pieces(self) -> dict[tuple[str, int], str]:
        """(slot, content / summary index) → the text the deltas add up to."""
        joined: dict[tuple[str, int], list[str]] = {}
        for delta in self.deltas:
            index = getattr(delta, "content_index", None)
            if index is None:
                index = getattr(delta, "summary_index", 0)
            key = (_SLOTS[type(delta)], index if isinstance(index, int) else 0)
            joined.setdefault(key, []).append(delta.delta)
        return {key: "".join(texts) for key, texts in joined.items()}

    def assemble(self) -> dict[str, Any]:
        """The item as far as it got (text, arguments, summaries filled from deltas)."""
        item = dict(self.item)
        item_type = item.get("type")
        pieces = self.pieces()

        def indexed(slot: str) -> list[tuple[int, str]]:
            return sorted((index, text) for (name, index), text in pieces.items() if name == slot)

        arguments = pieces.get(("arguments", 0))
        if item_type == "message":
            content = [
                (index, {"type": "output_text", "text": text, "annotations": []})
                for index, text in indexed("text")
            ] + [
                (index, {"type": "refusal", "refusal": text}) for index, text in indexed("refusal")
            ]
            item["content"] = [part for _, part in sorted(content, key=lambda entry: entry[0])]
        elif item_type in ("function_call", "mcp_call"):
            item["arguments"] = arguments or item.get("arguments") or ""
        elif item_type == "custom_tool_call":
            item["input"] = arguments or item.get("input") or ""
        elif item_type == "code_interpreter_call":
            item["code"] = arguments or item.get("code")
        elif item_type == "reasoning":
            if summaries := indexed("summary"):
                item["summary"] = [{"type": "summary_text", "text": t} for _, t in summaries]
            if reasoning := indexed("thinking"):
                item["content"] = [{"type": "reasoning_text", "text": t} for _, t in reasoning]
        return item


_SLOTS: dict[type[Any], str] = {
    wire.OutputTextDelta: "text",
    wire.RefusalDelta: "refusal",
    wire.ReasoningSummaryTextDelta: "summary",
    wire.ReasoningTextDelta: "thinking",
    wire.FunctionCallArgumentsDelta: "arguments",
    wire.CustomToolCallInputDelta: "arguments",
    wire.McpCallArgumentsDelta: "arguments",
    wire.CodeInterpreterCodeDelta: "arguments",
    wire.ShellCallCommandDelta: "arguments",
}
"""Which part of a partial item each delta type grows."""


class _Response:
    """What the adapter knows about the response it is reading."""

    __slots__ = (
        "done",
        "error_reported",
        "id",
        "model",
        "partial",
        "provenance",
        "terminal",
    )

    def __init__(self, response_id: str, model: str | None) -> None:
        self.id = response_id
        self.model = model
        self.provenance = Provenance(provider="openai", api="responses", model=model)
        self.done: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, _Partial] = {}
        self.terminal = False
        self.error_reported = False

    def set_model(self, model: str | None) -> None:
        if model and model != self.model:
            self.model = model
            self.provenance = Provenance(provider="openai", api="responses", model=model)

    def items(self) -> list[dict[str, Any]]:
        """Finished items plus the partial ones, in ``output_index`` order."""
        indexes = sorted(set(self.done) | set(self.partial))
        return [
            self.done[index] if index in self.done else self.partial[index].assemble()
            for index in indexes
        ]


class OpenAIResponsesAdapter(Adapter):
    """Stateful normaliser for the OpenAI Responses API (see the module docstring)."""

    runtime: ClassVar[str] = "openai-responses"

    def __init__(self, *, session_id: str = "") -> None:
        super().__init__(session_id=session_id)
        self._sse = SSEDecoder()
        self._mode: Literal["unknown", "sse", "json"] = "unknown"
        self._json_buffer = bytearray()
        self._response: _Response | None = None
        self._last_seq: int | None = None
        self._call_names: dict[str, str] = {}
        self._logged_results: set[str] = set()
        self._sources: dict[tuple[str, str | None], Source] = {}
        self._id_prefix = uuid.uuid4().hex[:20]
        self._id_count = 0
        self._fed_at = 0.0
        self._turn_usage: Usage | None = None
        """The open turn's usage so far (its responses summed): the ``turn/end``'s."""

    # ------------------------------------------------------------------ public API

    def feed(self, native: Any) -> list[Event]:
        """Normalise one native item (bytes, str, dict, SDK object, API error).

        Chunks carry the time their input arrived (one clock read per ``feed``: the
        events of one network read arrived together).
        """
        self._fed_at = time.time()
        if isinstance(native, bytes | bytearray | memoryview):
            return self._feed_bytes(bytes(native))
        if isinstance(native, str):
            return self._feed_str(native)
        if isinstance(native, Mapping):
            return self._feed_dict(native)
        if isinstance(native, BaseException):
            return self.api_error(native)
        to_dict = getattr(native, "to_dict", None)
        if callable(to_dict):
            as_dict = to_dict(mode="json", warnings=False)
            if isinstance(as_dict, Mapping):
                return self._feed_dict(as_dict)
        return [self.unknown(type(native).__name__, repr(native), "not a Responses object")]

    def close(self) -> list[Event]:
        """Flush buffered input; a response left open ends ``partial`` + ``interrupted``."""
        events: list[Event] = []
        if self._mode == "sse":
            for frame in self._sse.flush():
                events.extend(self._guarded(frame, self._on_frame))
            self.keep_unrecognised(self._sse, events)
        elif self._mode == "json" and self._json_buffer.strip():
            events.extend(self._flush_json(final=True))
        response = self._response
        if response is not None and not response.terminal:
            try:
                cut = self._finish_cut(response, "the stream ended before a terminal event")
            except UniversalEventError:
                raise
            except MALFORMED as exc:  # an item of another shape in the terminal object
                self._response = None
                cut = [self.malformed("close", None, exc)]
            events.extend(cut)
        return events

    def hands_over_call(self, native: Any) -> bool:
        """Whether ``native`` hands the caller a whole tool call before its message is
        logged (at ``response.completed``): a function or custom tool call's
        ``response.output_item.done``, or its arguments' / input's ``.done``
        (:mod:`adapters._tap`)."""
        if self._response is None:
            return False
        kind = getattr(native, "type", None)
        if kind in _CALL_DONE_EVENTS:
            return True
        if kind != "response.output_item.done":
            return False
        return getattr(getattr(native, "item", None), "type", None) in _CALL_ITEMS

    def tool_outputs(self, items: Iterable[Any]) -> list[Event]:
        """``tool/result`` events for the caller-sent tool outputs among ``items``.

        ``items`` is a Responses ``input`` list (dicts or SDK objects); only
        ``function_call_output``, ``custom_tool_call_output`` and the other
        ``*_call_output`` items are mapped, other items are skipped. A Responses loop
        re-sends its whole history each turn, so a ``call_id`` already logged by this
        adapter is skipped: pass the full ``input`` every turn and each result is
        logged once. Results of the opaque caller-run item types (shell, computer,
        apply-patch) keep the whole input item in ``details["native"]``. As
        :meth:`user_prompt`, a response the caller stopped reading ends first (its
        message, with the calls the outputs answer, logged before them).
        """
        finish_open_taps(self)
        events: list[Event] = (
            self.close() if self._response is not None or self._mode is not None else []
        )
        for native_item in items:
            item = _as_mapping(native_item)
            if item is None or item.get("type") not in CLIENT_RESULT_TYPES:
                continue
            call_id = item.get("call_id")
            if call_id is None and item.get("type") == "local_shell_call_output":
                call_id = item.get("id")  # the SDK's shape names the call by ``id``
            if not isinstance(call_id, str) or call_id in self._logged_results:
                continue
            self._logged_results.add(call_id)
            events.append(self._tool_result(item, call_id))
        return events

    def http_error(self, status: int, body: Any) -> list[Event]:
        """An ``error`` event for an HTTP error answer (400 model_not_found, 429, 5xx...).

        ``body`` is the raw body (bytes / str), the parsed JSON, or the SDK's
        ``APIStatusError.body`` (which is already the inner ``error`` object).
        A ``stream=True`` request can be answered this way too: plain JSON, no SSE.
        """
        parsed = _parse_body(body)
        error = parsed.get("error") if isinstance(parsed, Mapping) else None
        if not isinstance(error, Mapping):
            error = parsed if isinstance(parsed, Mapping) else {}
        code = error.get("code") or error.get("type")
        message = error.get("message") or (parsed if isinstance(parsed, str) else "")
        return [
            self._event(
                ErrorEvent,
                "http_error",
                None,
                message=str(message or f"HTTP {status}"),
                code=str(code) if code is not None else None,
                retryable=_retryable(code, status),
                http_status=status,
                native=parsed,
            )
        ]

    def api_error(self, exc: BaseException) -> list[Event]:
        """An ``error`` event for an exception the ``openai`` client raised.

        ``APIStatusError`` (it has ``status_code`` and ``body``) goes through
        :meth:`http_error`; anything else (connection errors, timeouts) is retryable.
        """
        status = getattr(exc, "status_code", None)
        if isinstance(status, int):
            # Prefer the whole HTTP body (``{"error": {...}}``, read by the SDK before it
            # raises) so ``native`` is the same as from raw bytes; ``exc.body`` is only
            # the inner ``error`` object.
            response = getattr(exc, "response", None)
            try:
                body: Any = response.content if response is not None else None
            except Exception:  # a streamed response not read: fall back to exc.body
                body = None
            return self.http_error(status, body or getattr(exc, "body", None) or str(exc))
        body = getattr(exc, "body", None)
        if isinstance(body, Mapping):
            # The SDK raises ``APIError`` itself when an SSE payload has a top-level
            # ``error`` (openai/_streaming.py, ``__stream__``): the in-stream ``error``
            # event never reaches the caller as an object, and the ``response.failed``
            # after it is never read. Same event as the wire path; ``close`` then ends
            # the step ``failed``.
            return self._on_error(wire.StreamError(error=dict(body)))
        # A dropped connection or a timeout: the error that ends the open response
        # (``close`` then ends it ``failed``, as the other HTTP adapters do).
        response = self._response
        if response is not None:
            response.error_reported = True
        return [
            self._event(
                ErrorEvent,
                "client_error",
                response.id if response else None,
                message=str(exc) or type(exc).__name__,
                code=type(exc).__name__,
                retryable=True,
            )
        ]

    # ------------------------------------------------------------------ input shapes

    def _feed_bytes(self, data: bytes) -> list[Event]:
        if self._mode == "unknown":
            head = data.lstrip()[:1]
            if not head:
                return []
            self._mode = "json" if head in (b"{", b"[") else "sse"
        if self._mode == "json":
            self._json_buffer += data
            return self._flush_json(final=False)
        events: list[Event] = []
        decode = wire.event_decoder.decode
        dispatch = self._dispatch
        for frame in self._sse.feed(data):
            try:
                event = decode(frame.data)
            except (msgspec.ValidationError, msgspec.DecodeError):
                # [DONE], undeclared, malformed
                events.extend(self._guarded(frame, self._on_frame))
                continue
            try:
                events.extend(dispatch(event))
            except UniversalEventError:
                raise
            except MALFORMED as exc:
                events.append(self.malformed_frame(frame, exc))
        if self._sse.unrecognised:
            self.keep_unrecognised(self._sse, events)
        return events

    def _guarded(self, frame: SSEFrame, on_frame: Callable[[SSEFrame], list[Event]]) -> list[Event]:
        """A frame of an unexpected shape is kept as native/unknown; the stream goes on."""
        try:
            return on_frame(frame)
        except UniversalEventError:
            raise
        except MALFORMED as exc:
            return [self.malformed_frame(frame, exc)]

    def _feed_str(self, text: str) -> list[Event]:
        stripped = text.strip()
        if not stripped:
            return []
        if stripped.startswith("{") and self._mode != "sse":
            try:
                raw = _raw_decoder.decode(stripped)
            except msgspec.DecodeError as exc:
                return [self.unknown(None, text, f"malformed JSON: {exc}")]
            return self._feed_dict(raw) if isinstance(raw, Mapping) else []
        data = text.encode()
        return self._feed_bytes(data if data.endswith(b"\n") else data + b"\n")

    def _feed_dict(self, raw: Mapping[str, Any]) -> list[Event]:
        """One event, body or tool output as a dict; one of another shape is kept."""
        try:
            return self._on_dict(raw)
        except UniversalEventError:
            raise
        except MALFORMED as exc:
            return [self.malformed(str_or_none(raw.get("type")), dict(raw), exc)]

    def _on_dict(self, raw: Mapping[str, Any]) -> list[Event]:
        if raw.get("object") == "response":
            return self._on_response_body(raw)
        if raw.get("type") in CLIENT_RESULT_TYPES:
            return self.tool_outputs([raw])
        try:
            event = wire.decode_event(dict(raw))
        except msgspec.ValidationError as exc:
            return self._on_undeclared(raw, str(exc))
        return self._dispatch(event)

    def _flush_json(self, *, final: bool) -> list[Event]:
        """A whole JSON body, or JSON lines of events, buffered until complete."""
        buffer = bytes(self._json_buffer)
        try:
            raw = _raw_decoder.decode(buffer)
        except msgspec.DecodeError:
            raw = None
        if isinstance(raw, Mapping):
            self._json_buffer.clear()
            return self._feed_dict(raw)
        lines = buffer.split(b"\n")
        events: list[Event] = []
        complete = lines if final else lines[:-1]
        consumed = 0
        for line in complete:
            if line.strip():
                try:
                    item = _raw_decoder.decode(line)
                except msgspec.DecodeError as exc:
                    if not final and consumed == 0 and not _holds_event_line(complete):
                        return events  # a pretty-printed body still arriving
                    events.append(self.unknown(None, kept_bytes(line), str(exc)))
                    consumed += len(line) + 1
                    continue
                if not isinstance(item, Mapping):
                    events.append(self.unknown(None, item, "JSON line is not an object"))
                else:
                    try:
                        events.extend(self._feed_dict(item))
                    except UniversalEventError:
                        raise
                    except MALFORMED as exc:
                        events.append(self.malformed(str(item.get("type")), dict(item), exc))
            consumed += len(line) + 1
        del self._json_buffer[: min(consumed, len(self._json_buffer))]
        return events

    def _on_frame(self, frame: SSEFrame) -> list[Event]:
        data = frame.data
        if not data or data == b"[DONE]":
            return []
        try:
            event = wire.event_decoder.decode(data)
        except msgspec.ValidationError as exc:
            try:
                raw = _raw_decoder.decode(data)
            except msgspec.DecodeError:  # pragma: no cover - validation implies valid JSON
                raw = None
            if isinstance(raw, Mapping):
                return self._on_undeclared(raw, str(exc))
            return [self.unknown(frame.event, kept_bytes(data), str(exc))]
        except msgspec.DecodeError as exc:
            return [self.unknown(frame.event, kept_bytes(data), f"malformed JSON: {exc}")]
        return self._dispatch(event)

    def _on_undeclared(self, raw: Mapping[str, Any], problem: str) -> list[Event]:
        """A payload the wire structs do not declare: quiet, a body, an error body, or
        native/unknown."""
        native_type = raw.get("type")
        if raw.get("object") == "response":
            return self._on_response_body(raw)
        error = raw.get("error")
        if native_type is None and (
            isinstance(error, Mapping) or (isinstance(error, str) and error)
        ):
            # An OpenAI error body, ``{"error": {"code", "message", "type", "param"}}``:
            # fed whole (an HTTP error answer saved without its status) or as an SSE
            # ``data:`` line (where the SDK raises ``APIError``, see :meth:`api_error`).
            # The same ``error`` event as those paths and as openai-chat's; ``native`` is
            # the whole body, as :meth:`http_error` keeps it.
            event = (
                wire.StreamError(error=dict(error))
                if isinstance(error, Mapping)
                else wire.StreamError(message=error)
            )
            return self._on_error(event, native=dict(raw))
        events = self._check_sequence(raw.get("sequence_number"), native_type)
        if native_type in _QUIET_TYPES:
            return events
        reason = (
            "event type not mapped by this adapter"
            if "$.type" in problem
            else f"unexpected shape: {problem}"
        )
        events.append(self.unknown(str_or_none(native_type), dict(raw), reason))
        return events

    # ------------------------------------------------------------------ dispatch

    def _dispatch(self, event: wire.WireEvent) -> list[Event]:
        sequence = event.sequence_number
        last = self._last_seq
        if sequence is None or (last is not None and sequence == last + 1):
            if sequence is not None:
                self._last_seq = sequence
            return _HANDLERS[type(event)](self, event)
        if isinstance(event, wire.Lifecycle) and self._is_new(event.response.id):
            self._last_seq = None  # numbering restarts with each response
        warnings = self._check_sequence(sequence, _TAGS[type(event)])
        return warnings + _HANDLERS[type(event)](self, event)

    def _check_sequence(self, sequence: Any, native_type: Any) -> list[Event]:
        if not isinstance(sequence, int):
            return []
        last = self._last_seq
        self._last_seq = sequence if last is None or sequence > last else last
        if last is None or sequence == last + 1:
            return []
        code = "sequence_gap" if sequence > last else "sequence_out_of_order"
        message = f"sequence_number {sequence} after {last}: " + (
            f"{sequence - last - 1} event(s) missing" if sequence > last else "repeated or late"
        )
        return [
            self._event(
                WarningEvent,
                str(native_type),
                self._response.id if self._response else None,
                code=code,
                message=message,
                details={"expected": last + 1, "received": sequence},
            )
        ]

    def _is_new(self, response_id: str) -> bool:
        current = self._response
        return current is None or (bool(response_id) and response_id != current.id)

    # ------------------------------------------------------------------ lifecycle

    def _on_lifecycle(self, event: wire.Lifecycle) -> list[Event]:
        native_type = _TAGS[type(event)]
        body = event.response
        events: list[Event] = []
        response = self._response
        if response is None or self._is_new(body.id):
            if response is not None and not response.terminal:
                events.extend(self._finish_cut(response, "a new response began"))
            response = self._start(body, native_type, events)
        else:
            response.set_model(body.model)
        if isinstance(
            event, wire.ResponseCompleted | wire.ResponseIncomplete | wire.ResponseFailed
        ):
            if not response.terminal:
                events.extend(self._finish(response, body, native_type))
        return events

    def _start(self, body: wire.ResponseObject, native_type: str, events: list[Event]) -> _Response:
        """A response is a step; the first of a turn opens it (a turn goes on while its
        responses end in function calls, the caller's tool results feeding the next)."""
        response = _Response(body.id, body.model)
        self._response = response
        self._sources.clear()
        if self.turn_id is None:  # no turn open
            self._turn_usage = None
            # named after its first response (the API's id), else made up
            self.turn_id = (
                f"turn-{body.id}" if body.id else f"turn-{self._id_prefix}{self._id_count:x}"
            )
            self.step = 0
            events.append(self._event(TurnStartEvent, native_type, body.id))
        else:
            self.step = 0 if self.step is None else self.step + 1
        events.append(self._event(StepStartEvent, native_type, body.id))
        return response

    def _end_turn(
        self,
        events: list[Event],
        native_type: str,
        response: _Response,
        status: TurnStatus,
        stop_reason: str | None,
    ) -> None:
        """``turn/end`` with the turn's usage; the adapter's next response opens a turn."""
        events.append(
            self._event(
                TurnEndEvent,
                native_type,
                response.id,
                status=status,
                usage=self._turn_usage,
                stop_reason=stop_reason,
            )
        )
        self._turn_usage = None
        self.turn_id = None
        self.step = None

    def _on_response_body(self, raw: Mapping[str, Any]) -> list[Event]:
        """A non-streamed Response object: the same events a stream ends with."""
        try:
            body = msgspec.convert(dict(raw), wire.ResponseObject)
        except msgspec.ValidationError as exc:
            return [self.unknown("response", dict(raw), f"unexpected shape: {exc}")]
        events: list[Event] = []
        previous = self._response
        if previous is not None and not previous.terminal and previous.id != body.id:
            events.extend(self._finish_cut(previous, "a new response began"))
        response = self._start(body, "response", events)
        self._last_seq = None
        events.extend(self._finish(response, body, "response"))
        return events

    def _finish(
        self, response: _Response, body: wire.ResponseObject, native_type: str
    ) -> list[Event]:
        """The terminal events: message, usage, error, step end."""
        response.terminal = True
        response.set_model(body.model)
        status = body.status or native_type.removeprefix("response.")
        items = _final_items(response, body)
        events: list[Event] = []
        content = self._parts(items, response.provenance, events)
        stop_reason = _stop_reason(status, body, content)
        if content:
            events.append(
                self._message(
                    response,
                    content,
                    stop_reason,
                    native_type,
                    "partial" if status in ("failed", "cancelled") else "complete",
                    logprobs=_text_logprobs(items),
                )
            )
        if body.usage:
            usage = openai_usage(body.usage)
            self._turn_usage = usage if self._turn_usage is None else self._turn_usage + usage
            events.append(
                self._event(
                    UsageEvent,
                    native_type,
                    response.id,
                    usage=usage,
                    message_id=response.id,
                    model=response.model,
                    service_tier=body.service_tier,
                )
            )
        events.extend(self._terminal_errors(response, body, status, native_type))
        step_status: TurnStatus = (
            "failed"
            if status == "failed"
            else "cancelled"
            if status == "cancelled"
            else "completed"
        )
        events.append(
            self._event(
                StepEndEvent,
                native_type,
                response.id,
                status=step_status,
                stop_reason=stop_reason,
            )
        )
        calls_tools = any(isinstance(part, ToolCallPart) for part in content)
        if step_status != "completed" or not calls_tools:
            self._end_turn(events, native_type, response, step_status, stop_reason)
        return events

    def _terminal_errors(
        self, response: _Response, body: wire.ResponseObject, status: str, native_type: str
    ) -> list[Event]:
        if status == "failed" and not response.error_reported:
            error = body.error or {}
            code = error.get("code")
            return [
                self._event(
                    ErrorEvent,
                    native_type,
                    response.id,
                    message=str(error.get("message") or "response failed"),
                    code=str(code) if code is not None else None,
                    retryable=_retryable(code, None),
                    native=error or None,
                )
            ]
        if status == "incomplete":
            reason = (body.incomplete_details or {}).get("reason") or "incomplete"
            return [
                self._event(
                    ErrorEvent,
                    native_type,
                    response.id,
                    message=f"response incomplete: {reason}",
                    code=str(reason),
                    retryable=False,
                    fatal=False,
                    native=body.incomplete_details,
                )
            ]
        return []

    def _finish_cut(self, response: _Response, why: str) -> list[Event]:
        """A response that never reached a terminal event: partial message, interrupted."""
        response.terminal = True
        events: list[Event] = []
        content = self._parts(response.items(), response.provenance, events)
        if content:
            events.append(
                self._message(
                    response,
                    content,
                    "failed" if response.error_reported else None,
                    "close",
                    "partial",
                )
            )
        failed = response.error_reported
        if not failed:
            events.append(
                self._event(
                    ErrorEvent,
                    "close",
                    response.id,
                    message=f"response {response.id or '?'} interrupted: {why}",
                    code="stream_interrupted",
                    retryable=True,
                )
            )
        status: TurnStatus = "failed" if failed else "interrupted"
        stop_reason = "failed" if failed else None
        events.append(
            self._event(StepEndEvent, "close", response.id, status=status, stop_reason=stop_reason)
        )
        self._end_turn(events, "close", response, status, stop_reason)
        return events

    def _message(
        self,
        response: _Response,
        content: list[AssistantPart],
        stop_reason: str | None,
        native_type: str,
        status: Literal["complete", "partial"],
        *,
        logprobs: dict[str, list[Any]] | None = None,
    ) -> AssistantMessageEvent:
        for part in content:
            if isinstance(part, ToolCallPart):
                self._call_names[part.id] = part.name
        return self._event(
            AssistantMessageEvent,
            native_type,
            response.id,
            content=content,
            message_id=response.id or None,
            provenance=response.provenance,
            stop_reason=stop_reason,
            status=status,
            logprobs=logprobs,
        )

    def _parts(
        self, items: list[dict[str, Any]], provenance: Provenance, events: list[Event]
    ) -> list[AssistantPart]:
        """The parts of a response's items; an item of another shape (the terminal
        object's, or one assembled from deltas) is kept whole as native/unknown, so the
        response still ends (message, step end, turn end)."""
        content: list[AssistantPart] = []
        for item in items:
            try:
                content.extend(item_parts(item, provenance))
            except UniversalEventError:
                raise
            except MALFORMED as exc:
                events.append(self.malformed(str(item.get("type")), item, exc))
        return content

    # ------------------------------------------------------------------ items, deltas

    def _current(self) -> _Response:
        """The response being read; a stream fed from its middle gets an anonymous one."""
        response = self._response
        if response is None:
            response = self._response = _Response("", None)
        return response

    def _on_item_added(self, event: wire.OutputItemAdded) -> list[Event]:
        self._current().partial[event.output_index] = _Partial(event.item)
        return []

    def _on_item_done(self, event: wire.OutputItemDone) -> list[Event]:
        response = self._current()
        # An item of another shape fails here (its frame kept as native/unknown), not
        # when the response's message is put together from the items.
        item_parts(event.item, response.provenance)
        response.done[event.output_index] = event.item
        response.partial.pop(event.output_index, None)
        return []

    def _on_delta(self, event: wire.ItemDelta) -> list[Event]:
        """The hot path: one delta → one chunk (and the partial item grows)."""
        response = self._response or self._current()
        partial = response.partial.get(event.output_index)
        native_type = _TAGS[type(event)]
        meta: tuple[Source, str | None, str | None]
        if partial is None:
            meta = (self._source(native_type, event.item_id or None), None, None)
        else:
            partial.deltas.append(event)
            cached = partial.chunk_meta.get(native_type)
            if cached is None:
                cached = partial.chunk_meta[native_type] = self._chunk_meta(
                    partial, native_type, event.item_id or None
                )
            meta = cached
        self._id_count += 1
        return [
            AssistantChunkEvent(
                id=f"{self._id_prefix}{self._id_count:012x}",
                session_id=self.session_id,
                ts=self._fed_at,
                turn_id=self.turn_id,
                step=self.step,
                source=meta[0],
                message_id=response.id or None,
                index=event.output_index,
                kind=_CHUNK_KINDS[type(event)],
                delta=event.delta,
                tool_call_id=meta[1],
                tool_name=meta[2],
            )
        ]

    def _chunk_meta(
        self, partial: _Partial, native_type: str, item_id: str | None
    ) -> tuple[Source, str | None, str | None]:
        source = self._source(native_type, item_id)
        if _SLOTS[_WIRE_BY_TAG[native_type]] != "arguments":
            return source, None, None
        item = partial.item  # once per item: a value of another type is dropped
        call_id = str_or_none(item.get("call_id")) or str_or_none(item.get("id"))
        return source, call_id, str_or_none(item.get("name")) or str_or_none(item.get("type"))

    def _on_annotation(self, event: wire.AnnotationAdded) -> list[Event]:
        response = self._current()
        return [
            self._event(
                AssistantChunkEvent,
                "response.output_text.annotation.added",
                event.item_id or None,
                message_id=response.id or None,
                index=event.output_index,
                kind="citation",
                citation=citation(event.annotation),
            )
        ]

    def _on_shell_output(self, event: wire.ShellCallOutputDelta) -> list[Event]:
        partial = self._current().partial.get(event.output_index)
        call_id = (partial.item.get("call_id") if partial else None) or event.item_id
        delta = event.delta if isinstance(event.delta, Mapping) else {"stdout": event.delta}
        events: list[Event] = []
        for stream in ("stdout", "stderr"):
            text = delta.get(stream)
            if isinstance(text, str) and text:
                events.append(
                    self._event(
                        ToolOutputEvent,
                        "response.shell_call_output_content.delta",
                        event.item_id or None,
                        call_id=str(call_id),
                        delta=text,
                        stream=stream,
                    )
                )
        return events

    def _on_error(self, event: wire.StreamError, native: Any = None) -> list[Event]:
        nested = event.error or {}
        code = event.code or nested.get("code") or nested.get("type")
        message = event.message or nested.get("message") or "stream error"
        response = self._response
        if response is not None:
            response.error_reported = True
        return [
            self._event(
                ErrorEvent,
                "error",
                response.id if response else None,
                message=str(message),
                code=str(code) if code is not None else None,
                retryable=_retryable(code, None),
                native=native if native is not None else msgspec.to_builtins(event),
            )
        ]

    # ------------------------------------------------------------------ results

    def _tool_result(self, item: Mapping[str, Any], call_id: str) -> ToolResultEvent:
        item_type = str(item.get("type"))
        details = None
        if item_type not in ("function_call_output", "custom_tool_call_output"):
            details = {"native": dict(item)}
        return self._event(
            ToolResultEvent,
            item_type,
            str_or_none(item.get("id")),
            call_id=call_id,
            name=self._call_names.get(call_id),
            content=result_parts(item.get("output")),
            details=details,
        )

    # ------------------------------------------------------------------ envelope

    def _source(self, native_type: str, native_id: str | None) -> Source:
        """Sources are frozen: one per (native type, item) is shared by its chunks."""
        key = (native_type, native_id)
        source = self._sources.get(key)
        if source is None:
            model = self._response.model if self._response else None
            source = self._sources[key] = Source(
                runtime=self.runtime, native_type=native_type, native_id=native_id, model=model
            )
        return source

    def _event(
        self,
        event_type: type[EventT],
        wire_type: str,
        wire_id: str | None,
        **fields: Any,
    ) -> EventT:
        """Like :meth:`Adapter.make`, with a cheap unique id (prefix + counter).

        ``wire_type`` / ``wire_id`` fill ``source.native_type`` / ``source.native_id``.
        """
        self._id_count += 1
        fields.setdefault("turn_id", self.turn_id)
        fields.setdefault("step", self.step)
        return event_type(
            id=f"{self._id_prefix}{self._id_count:012x}",
            session_id=self.session_id,
            ts=time.time(),
            source=self._source(wire_type, wire_id),
            **fields,
        )

    def unknown(self, native_type: str | None, payload: Any, reason: str) -> NativeUnknownEvent:
        """Keep a native item the adapter does not recognise (never dropped)."""
        return self._event(
            NativeUnknownEvent,
            native_type or "unknown",
            None,
            runtime=self.runtime,
            native_type=native_type,
            payload=payload,
            reason=reason,
        )


_HANDLERS: dict[type[Any], Callable[[OpenAIResponsesAdapter, Any], list[Event]]] = {
    wire.ResponseCreated: OpenAIResponsesAdapter._on_lifecycle,
    wire.ResponseQueued: OpenAIResponsesAdapter._on_lifecycle,
    wire.ResponseInProgress: OpenAIResponsesAdapter._on_lifecycle,
    wire.ResponseCompleted: OpenAIResponsesAdapter._on_lifecycle,
    wire.ResponseIncomplete: OpenAIResponsesAdapter._on_lifecycle,
    wire.ResponseFailed: OpenAIResponsesAdapter._on_lifecycle,
    wire.OutputItemAdded: OpenAIResponsesAdapter._on_item_added,
    wire.OutputItemDone: OpenAIResponsesAdapter._on_item_done,
    wire.OutputTextDelta: OpenAIResponsesAdapter._on_delta,
    wire.RefusalDelta: OpenAIResponsesAdapter._on_delta,
    wire.FunctionCallArgumentsDelta: OpenAIResponsesAdapter._on_delta,
    wire.CustomToolCallInputDelta: OpenAIResponsesAdapter._on_delta,
    wire.McpCallArgumentsDelta: OpenAIResponsesAdapter._on_delta,
    wire.CodeInterpreterCodeDelta: OpenAIResponsesAdapter._on_delta,
    wire.ShellCallCommandDelta: OpenAIResponsesAdapter._on_delta,
    wire.ShellCallOutputDelta: OpenAIResponsesAdapter._on_shell_output,
    wire.ReasoningSummaryTextDelta: OpenAIResponsesAdapter._on_delta,
    wire.ReasoningTextDelta: OpenAIResponsesAdapter._on_delta,
    wire.AnnotationAdded: OpenAIResponsesAdapter._on_annotation,
    wire.StreamError: OpenAIResponsesAdapter._on_error,
}
"""Wire struct → handler. Exhaustive over :data:`wire.WireEvent` (checked below)."""

assert set(_HANDLERS) == set(wire.WireEvent.__args__), "every declared wire event needs a handler"

_CHUNK_KINDS: dict[type[Any], ChunkKind] = {
    wire.OutputTextDelta: "text",
    wire.RefusalDelta: "refusal",
    wire.ReasoningSummaryTextDelta: "summary",
    wire.ReasoningTextDelta: "thinking",
    wire.FunctionCallArgumentsDelta: "tool_arguments",
    wire.CustomToolCallInputDelta: "tool_arguments",
    wire.McpCallArgumentsDelta: "tool_arguments",
    wire.CodeInterpreterCodeDelta: "tool_arguments",
    wire.ShellCallCommandDelta: "tool_arguments",
}
"""The chunk kind of each delta type (MCP arguments and interpreter code are the server
tool's ``tool_arguments``)."""

_WIRE_BY_TAG: dict[str, type[Any]] = {cls.__struct_config__.tag: cls for cls in _SLOTS}

_TAGS: dict[type[Any], str] = {cls: str(cls.__struct_config__.tag) for cls in _HANDLERS}
"""Wire struct → its ``type`` tag (``__struct_config__`` builds a new object per access:
too slow for the per-delta path)."""


# ---------------------------------------------------------------------- helpers


def _final_items(response: _Response, body: wire.ResponseObject) -> list[dict[str, Any]]:
    """The response's items: each ``output_item.done`` item, else the terminal object's.

    Quirk: every copy of a reasoning item carries a *fresh* encryption of its
    ``encrypted_content`` (``output_item.added``, ``output_item.done`` and the
    ``response.completed`` output all differ, tests/fixtures/recorded/openai-responses/
    stream_web_search_call.json). Real clients replay the ``output_item.done`` one
    (pydantic-ai's next request in the same recordings), so that one is kept; the
    terminal object fills in items whose ``done`` event was lost (a sequence gap), and
    partial items fill in what neither has.
    """
    by_index: dict[int, dict[str, Any]] = dict(enumerate(body.output))
    for index, partial in response.partial.items():
        by_index.setdefault(index, partial.assemble())
    by_index.update(response.done)
    return [by_index[index] for index in sorted(by_index)]


def _stop_reason(status: str, body: wire.ResponseObject, content: list[AssistantPart]) -> str:
    if status == "completed":
        return "tool_calls" if any(isinstance(p, ToolCallPart) for p in content) else "completed"
    if status == "incomplete":
        return str((body.incomplete_details or {}).get("reason") or "incomplete")
    return status


def _retryable(code: Any, http_status: int | None) -> bool:
    """Whether sending the same request again may succeed.

    ``insufficient_quota`` arrives as HTTP 429 (and in-stream), yet retrying never helps.
    """
    if code in _NOT_RETRYABLE_CODES:
        return False
    if code in _RETRYABLE_CODES:
        return True
    return http_status is not None and (http_status in (408, 409, 429) or http_status >= 500)


def _parse_body(body: Any) -> Any:
    if isinstance(body, bytes | bytearray | memoryview):
        body = bytes(body).decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            return _raw_decoder.decode(body)
        except msgspec.DecodeError:
            return body
    return body


def _as_mapping(native: Any) -> Mapping[str, Any] | None:
    if isinstance(native, Mapping):
        return native
    to_dict = getattr(native, "to_dict", None)
    if callable(to_dict):
        result = to_dict(mode="json", warnings=False)
        return result if isinstance(result, Mapping) else None
    return None


T = TypeVar("T")


def tap(
    stream: Iterable[T], log: EventLog, *, adapter: OpenAIResponsesAdapter | None = None
) -> Tap[T]:
    """Iterate an ``openai`` Responses stream unchanged while its events go to ``log``.

    ``for event in tap(client.responses.create(..., stream=True), log): ...`` — the
    generic :func:`adapters._tap.tap` (checkpoints before the caller can act on tool
    calls, ``close()`` on a cut or abandoned stream), plus what is Responses-specific:
    an exception the SDK raises mid-stream (it raises ``APIError`` itself on an
    in-stream ``error`` event) is logged as an ``error`` event before it propagates.
    Pass the conversation's adapter so tool outputs find their calls' names.
    """
    return tap_sdk_stream(
        stream, adapter or OpenAIResponsesAdapter(session_id=log_session_id(log)), log
    )


def atap(
    stream: AsyncIterable[T], log: EventLog, *, adapter: OpenAIResponsesAdapter | None = None
) -> AsyncTap[T]:
    """:func:`tap` for ``AsyncOpenAI`` streams (``async for``)."""
    return atap_sdk_stream(
        stream, adapter or OpenAIResponsesAdapter(session_id=log_session_id(log)), log
    )


def _holds_event_line(lines: list[bytes]) -> bool:
    """Whether a line after the first is a whole stream event (an object with a
    ``type``): the input is then JSON lines whose first line is malformed, not a
    pretty-printed body still arriving (none of whose lines is such an object alone)."""
    for line in lines[1:]:
        if line.lstrip().startswith(b"{"):
            try:
                item = _raw_decoder.decode(line)
            except msgspec.DecodeError:
                continue
            if isinstance(item, Mapping) and isinstance(item.get("type"), str):
                return True
    return False


def _text_logprobs(items: list[dict[str, Any]]) -> dict[str, list[Any]] | None:
    """The token log probabilities of the response's ``output_text`` parts (present
    with ``include=["message.output_text.logprobs"]``), in order, in the shape Chat
    gives them (``{"content": [...]}``); None when there are none."""
    tokens = [
        token
        for item in items
        if item.get("type") == "message"
        for content in item.get("content") or []
        if isinstance(content, dict) and content.get("type") == "output_text"
        for token in content.get("logprobs") or []
    ]
    return {"content": tokens} if tokens else None
