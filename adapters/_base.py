"""What every adapter shares: the ``feed``/``close`` contract and envelope filling.

An adapter is a stateful normaliser for one native dialect. ``feed(native)`` takes one
native item (an SDK object, a dict, a JSON line, or a chunk of raw bytes) and returns
the Universal Events it completes; ``close()`` finishes the stream — a stream cut
before its terminal event yields an interrupted/error event there, not silence.
Events come back without ``seq`` (the session log assigns it) but with ``source``,
``session_id``, ``turn_id`` and ``ts`` filled.
"""

from __future__ import annotations

import base64
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

import msgspec

from adapters._tap import finish_open_taps
from universal_event._sse_frames import SSEDecoder, SSEFrame
from universal_event.errors import UniversalEventError
from universal_event.events import Event, EventBase, NativeUnknownEvent, Source, UserMessageEvent
from universal_event.parts import TextPart, UserPart

__all__ = [
    "MALFORMED",
    "Adapter",
    "bool_or_none",
    "dict_or_none",
    "int_or_none",
    "kept_bytes",
    "native_time",
    "new_id",
    "split_lines",
    "str_or_none",
    "text_value",
]

MALFORMED = (KeyError, TypeError, AttributeError, ValueError, IndexError)
"""What a native item of an unexpected shape (a missing key, a field of another type)
raises inside an adapter; the adapter keeps that item as ``native/unknown`` (see
:meth:`Adapter.malformed`) and goes on with the next one. The project's own errors
(:class:`~universal_event.errors.UniversalEventError`, some of them ``ValueError``) are
raised on purpose and are let through."""


def kept_bytes(raw: bytes) -> str | dict[str, str]:
    """Native bytes kept as a payload: their text, or, when they are not UTF-8 (binary
    garbage, another encoding), ``{"base64": ...}`` of the bytes themselves, which a
    replacement character would have lost for good."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def text_value(value: Any) -> str:
    """A native text field, which must be a string (a delta of another type would
    break the text it is joined into, later and somewhere else)."""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def str_or_none(value: Any) -> str | None:
    """A native optional string field: the string, None for a value of any other type."""
    return value if isinstance(value, str) else None


def int_or_none(value: Any) -> int | None:
    """A native optional integer field: the int (not a bool), None for anything else."""
    return value if type(value) is int else None


def dict_or_none(value: Any) -> dict[str, Any] | None:
    """A native optional object field (``cache_control``, a JSON schema): the dict, None
    for a value of any other type (an event holding one would not decode back)."""
    return value if type(value) is dict else None


def bool_or_none(value: Any) -> bool | None:
    """A native optional boolean field: the bool, None for a value of any other type."""
    return value if type(value) is bool else None


EventT = TypeVar("EventT", bound=EventBase)

_json_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


_SOURCE_NAMED_FIELDS: dict[type[EventBase], tuple[bool, bool]] = {}
"""Event type → whether it has its own ``native_type`` / ``model`` fields (filled on use)."""


def _source_named_fields(event_type: type[EventBase]) -> tuple[bool, bool]:
    named = _SOURCE_NAMED_FIELDS.get(event_type)
    if named is None:
        fields = event_type.__struct_fields__
        named = _SOURCE_NAMED_FIELDS[event_type] = ("native_type" in fields, "model" in fields)
    return named


def split_lines(complete: bytes) -> list[bytes]:
    """The non-blank lines of complete lines (``complete`` ends with a newline or is empty)."""
    lines = complete.split(b"\n")
    lines.pop()  # after the last newline: b""
    # ``isspace`` stops at the first other byte; ``strip`` would copy every line.
    return [line for line in lines if line and not line.isspace()]


def native_time(value: Any) -> float | None:
    """A native ISO 8601 timestamp (``2026-11-29T06:39:11.817Z``) as Unix seconds; None
    when absent or unreadable. One without a zone is taken as UTC."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def new_id() -> str:
    """A fresh unique event id."""
    return uuid.uuid4().hex


class Adapter(ABC):
    """Base class of the per-runtime normalisers."""

    runtime: ClassVar[str]
    """The runtime name the CLI uses (``--from``)."""

    _has_envelope_defaults: ClassVar[bool] = False
    """Whether the class overrides :meth:`_envelope_defaults` (else ``make`` skips it)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._has_envelope_defaults = cls._envelope_defaults is not Adapter._envelope_defaults

    def __init__(self, *, session_id: str = "") -> None:
        self.session_id = session_id
        self.turn_id: str | None = None
        self.step: int | None = None
        self._line_buffer = bytearray()
        """JSON-lines input after its last newline (the start of a line cut by a chunk)."""
        self._native_time: float | None = None
        """When the native item being normalised happened, where it says so: the lines of
        recorded files (a Codex rollout, a Claude Code transcript) carry a timestamp, and
        the events made from an imported session keep it as their ``ts`` (else: now)."""

    def _line_time(self, timestamp: Any) -> None:
        """The time of the recorded line being read (its ``timestamp``). A line without
        one (a transcript's ``last-prompt``, ``atis-latch``) keeps the time of the line
        before it, as do the events ``close()`` makes at the file's end (the last message
        is logged only there): stamping them with the time of the import put a gap of
        the file's age inside a recorded session (``replay --paced`` waited it out)."""
        moment = native_time(timestamp)
        if moment is not None:
            self._native_time = moment

    @abstractmethod
    def feed(self, native: Any) -> list[Event]:
        """Normalise one native item into the events it completes."""

    def close(self) -> list[Event]:
        """Finish the stream; events for anything left open."""
        return []

    def user_prompt(self, content: str | list[UserPart]) -> list[Event]:
        """The user's input, which native streams rarely echo, as a ``user/message``.

        Adapters that track turns override this to open a turn with it. A stream of this
        adapter that a tap is still holding, which the caller stopped reading, is
        finished first (:func:`adapters._tap.finish_open_taps`): its partial message and
        interrupted turn are logged before the prompt. Overrides do the same.
        """
        finish_open_taps(self)
        parts: list[UserPart] = [TextPart(text=content)] if isinstance(content, str) else content
        return [self.make(UserMessageEvent, native_type="prompt", content=parts)]

    def make(
        self,
        event_type: type[EventT],
        *,
        native_type: str | None = None,
        native_id: str | None = None,
        model: str | None = None,
        **fields: Any,
    ) -> EventT:
        """Build an event with the envelope filled from the adapter's state.

        Adapters change the envelope through the hooks, not by overriding this:
        :meth:`_envelope_defaults` (more fields), :meth:`_event_id` (another id scheme),
        :meth:`_event_source` (another ``source``); ``ts`` is the native item's time
        when the adapter knows it (``_native_time``), else now.
        """
        if self._has_envelope_defaults:
            self._envelope_defaults(fields)
        # Only what differs from the field defaults is passed: every keyword costs.
        if self.turn_id is not None and "turn_id" not in fields:
            fields["turn_id"] = self.turn_id
        if self.step is not None and "step" not in fields:
            fields["step"] = self.step
        if self.session_id and "session_id" not in fields:
            fields["session_id"] = self.session_id
        # Some events have fields of the same names as the source's (native/unknown's
        # ``native_type``, usage's ``model``): fill those too unless given.
        has_native_type, has_model = _source_named_fields(event_type)
        if has_native_type and "native_type" not in fields:
            fields["native_type"] = native_type
        if has_model and "model" not in fields:
            fields["model"] = model
        # An envelope field given outright (a replayed event's id, a known time) is kept.
        if "id" not in fields:
            fields["id"] = self._event_id()
        if "ts" not in fields:
            native = self._native_time
            fields["ts"] = time.time() if native is None else native
        if "source" not in fields:
            fields["source"] = self._event_source(native_type, native_id, model)
        # All in one dict: keywords *and* ``**fields`` would be merged into a new one.
        return event_type(**fields)

    def _envelope_defaults(self, fields: dict[str, Any]) -> None:
        """Hook: set defaults for more of an event's fields (``setdefault``)."""
        return None

    def _event_id(self) -> str:
        """Hook: a fresh event id."""
        return new_id()

    def _event_source(
        self, native_type: str | None, native_id: str | None, model: str | None
    ) -> Source:
        """Hook: the ``source`` of an event."""
        return Source(
            runtime=self.runtime, native_type=native_type, native_id=native_id, model=model
        )

    # ------------------------------------------------------------ JSON-lines input

    def _lines(self, chunk: bytes) -> list[bytes]:
        """Complete, non-blank lines of ``chunk`` (a line cut at its end waits for the rest)."""
        return split_lines(self._complete_lines(chunk))

    def _complete_lines(self, chunk: bytes) -> bytes:
        """What an earlier chunk left, then ``chunk``, up to its last newline (the complete
        lines, each ending with ``\\n``); a line cut at the end waits for the rest.

        A chunk without a newline is only appended to the buffer, and the buffer becomes
        bytes once, when its line is complete: copying it for every chunk made one long
        line fed in small chunks cost quadratic time (a 32 MB line took 13 s). The buffer
        never holds a newline, so only ``chunk`` is searched.
        """
        end = chunk.rfind(b"\n") + 1
        buffer = self._line_buffer
        if end == 0:  # still inside a line
            buffer += chunk
            return b""
        if not buffer and end == len(chunk):  # the usual case: no copy
            return chunk
        if buffer:
            buffer += memoryview(chunk)[:end]
            complete = bytes(buffer)
            buffer.clear()
        else:
            complete = chunk[:end]
        buffer += memoryview(chunk)[end:]  # the start of a line
        return complete

    def _rest_of_lines(self) -> list[bytes]:
        """At close: a last line without its newline (complete JSON or a truncated one)."""
        rest = bytes(self._line_buffer).strip()
        self._line_buffer.clear()
        return [rest] if rest else []

    def _json_object(
        self, raw: bytes, out: list[Event], problem: str = "malformed JSON line"
    ) -> dict[str, Any] | None:
        """One JSON line as an object; anything else is kept as ``native/unknown``."""
        try:
            line = _json_decoder.decode(raw)
        except msgspec.DecodeError as exc:
            out.append(self.unknown(None, kept_bytes(raw), f"{problem}: {exc}"))
            return None
        if not isinstance(line, dict):
            out.append(self.unknown(None, line, "JSON line is not an object"))
            return None
        return line

    def malformed(
        self, native_type: str | None, payload: Any, exc: Exception
    ) -> NativeUnknownEvent:
        """Keep a native item whose shape broke the adapter (see :data:`MALFORMED`)."""
        reason = f"malformed {native_type or 'native item'}: {type(exc).__name__}: {exc}"
        return self.unknown(native_type, payload, reason)

    def malformed_frame(self, frame: SSEFrame, exc: Exception) -> NativeUnknownEvent:
        """Keep an SSE frame whose shape broke the adapter, its data as text."""
        return self.malformed(frame.event, kept_bytes(frame.data), exc)

    def handle_frames(
        self,
        frames: Iterable[SSEFrame],
        on_frame: Callable[[SSEFrame, list[Event]], None],
        decoder: SSEDecoder,
        out: list[Event],
    ) -> None:
        """Each frame through ``on_frame``; one whose shape broke it is kept as
        native/unknown and the stream goes on. Then the lines of ``decoder``'s input
        that were no SSE field, kept the same way."""
        for frame in frames:
            try:
                on_frame(frame, out)
            except UniversalEventError:
                raise
            except MALFORMED as exc:
                out.append(self.malformed_frame(frame, exc))
        if decoder.unrecognised:
            self.keep_unrecognised(decoder, out)

    def keep_unrecognised(self, decoder: SSEDecoder, out: list[Event]) -> None:
        """Lines of an SSE input that are no SSE field, as native/unknown events."""
        for line in decoder.unrecognised:
            out.append(self.unknown(None, kept_bytes(line), "not an SSE line"))
        decoder.unrecognised.clear()

    def unknown(self, native_type: str | None, payload: Any, reason: str) -> NativeUnknownEvent:
        """Keep a native item the adapter does not recognise."""
        return self.make(
            NativeUnknownEvent,
            native_type=native_type,
            runtime=self.runtime,
            payload=payload,
            reason=reason,
        )
