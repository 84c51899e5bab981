"""Universal Events over Server-Sent Events: the wire format of the control plane.

One event is one SSE frame::

    id: 42
    event: assistant/chunk
    data: {"type":"assistant/chunk","seq":42,...}

``id`` is the event's ``seq`` in its session, ``event`` its type tag, ``data`` the
compact JSON of :func:`universal_event.codec.encode` (msgspec never emits a raw newline
inside JSON, so ``data`` is always one line).

Browsers: ``EventSource.onmessage`` only fires for frames without an ``event:`` name,
so a page listens per type (``addEventListener("assistant/chunk", ...)``). The
``error`` type shares its name with EventSource's own connection-error event: a
listener for it must tell them apart (ours is a ``MessageEvent`` with ``data``).

Resume (``Last-Event-ID``). A browser's ``EventSource`` remembers the last ``id`` it
saw and sends it back as the ``Last-Event-ID`` header when it reconnects; the server
then sends exactly the events with ``seq`` greater than it, in order, none twice.
Clients that cannot set headers pass ``?after=SEQ`` instead; ``-1`` (or nothing) means
"from the start". :func:`resume_after` turns either into the seq to continue after.

Decoding (:class:`SSEEventDecoder`) follows the WHATWG "event stream interpretation":
bytes may be cut anywhere (inside a line, between ``\\r`` and ``\\n``, inside a UTF-8
sequence); comment lines (``: keepalive``) and ``retry:`` are not events; and a frame
that was not terminated by a blank line when the stream ends is *discarded*, never
dispatched — a connection dropped mid-frame therefore never yields half an event,
and the client's last id stays at the last complete one.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from universal_event.codec import decode, encode
from universal_event.errors import DecodeError
from universal_event.events import Event, EventBase

__all__ = [
    "KEEPALIVE",
    "SSEEventDecoder",
    "SSEMessage",
    "encode_event",
    "encode_events",
    "encode_retry",
    "resume_after",
]

KEEPALIVE = b": keepalive\n\n"
"""A comment frame: keeps proxies from closing an idle stream; clients ignore it."""


def encode_event(event: EventBase) -> bytes:
    """One stored event (``seq`` assigned) as one SSE frame."""
    if event.seq < 0:
        raise ValueError(f"event {event.id!r} has no seq yet: only logged events go on the wire")
    tag = event.__struct_config__.tag
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, str(tag).encode(), encode(event))


def encode_events(events: Iterable[EventBase]) -> bytes:
    """Several events as consecutive frames (one write for a whole batch)."""
    return b"".join(encode_event(event) for event in events)


def encode_retry(milliseconds: int) -> bytes:
    """The ``retry:`` field: how long an EventSource waits before reconnecting."""
    return b"retry: %d\n\n" % milliseconds


def resume_after(last_event_id: str | None, after: str | None = None) -> int:
    """The seq a (re)connecting client continues after; ``-1`` for the start.

    ``Last-Event-ID`` (set by the client's transport on reconnect) wins over the
    ``after`` query parameter (set by the application on first connect): after a drop,
    the transport knows better than the URL it was opened with. An empty header means
    "no id seen yet". Anything that is not an integer >= -1 raises ``DecodeError``.
    """
    for name, value in (("Last-Event-ID", last_event_id), ("after", after)):
        if value is None or not value.strip():
            continue
        try:
            seq = int(value.strip())
        except ValueError:
            raise DecodeError(f"{name} must be an event seq (an integer), got {value!r}") from None
        if seq < -1:
            raise DecodeError(f"{name} must be >= -1, got {seq}")
        return seq
    return -1


class SSEMessage(msgspec.Struct, frozen=True):
    """One dispatched SSE event before its data is interpreted."""

    event: str
    data: str
    id: str
    """The last event id in effect (the stream's "last event ID buffer")."""


class SSEEventDecoder:
    """Incremental SSE decoder for clients: bytes in, :class:`SSEMessage` / events out.

    ``last_event_id`` is what a client sends back as ``Last-Event-ID`` on reconnect.
    """

    def __init__(self) -> None:
        self._pending = b""
        self._data: list[str] = []
        self._event = ""
        self._id_buffer = ""
        self.last_event_id = ""
        """The id of the last *complete* frame (committed at its blank line)."""

    def feed(self, chunk: bytes) -> list[SSEMessage]:
        """The messages that ``chunk`` completes."""
        buffer = self._pending + chunk
        messages: list[SSEMessage] = []
        start = 0
        length = len(buffer)
        while start < length:
            newline = buffer.find(b"\n", start)
            carriage = buffer.find(b"\r", start, length if newline == -1 else newline)
            if carriage != -1:
                if carriage + 1 == length:
                    break  # a trailing "\r" may be the first half of "\r\n"
                end = carriage
                start_next = carriage + 2 if buffer[carriage + 1] == 0x0A else carriage + 1
            elif newline != -1:
                end = newline
                start_next = newline + 1
            else:
                break
            message = self._line(buffer[start:end])
            if message is not None:
                messages.append(message)
            start = start_next
        self._pending = buffer[start:]
        return messages

    def feed_events(self, chunk: bytes) -> list[Event]:
        """The Universal Events that ``chunk`` completes (``: comments`` skipped)."""
        return [decode(message.data) for message in self.feed(chunk) if message.data]

    def _line(self, raw: bytes) -> SSEMessage | None:
        if not raw:
            return self._dispatch()
        line = raw.decode("utf-8", "replace")
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id_buffer = value
        return None

    def _dispatch(self) -> SSEMessage | None:
        # WHATWG: the id is committed when the frame completes (a cut after `id:` does
        # not count); a frame without data lines dispatches nothing but its id counts.
        self.last_event_id = self._id_buffer
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return SSEMessage(event or "message", "\n".join(data), self.last_event_id)
