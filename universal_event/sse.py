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

import re
from collections.abc import Iterable

import msgspec

from universal_event._sse_frames import SSEDecoder
from universal_event.codec import decode, encode
from universal_event.errors import DecodeError, StreamError
from universal_event.events import Event, EventBase

__all__ = [
    "KEEPALIVE",
    "STREAM_ERROR_EVENT",
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
    "no id seen yet". Anything but decimal digits (or ``-1``) from -1 to
    :data:`MAX_RESUME_SEQ` raises ``DecodeError``.
    """
    for name, value in (("Last-Event-ID", last_event_id), ("after", after)):
        if value is None or not value.strip():
            continue
        text = value.strip()
        if not _SEQ.fullmatch(text):  # int() would also take "2_0" and "+2"
            raise DecodeError(f"{name} must be an event seq (an integer), got {value!r}")
        seq = int(text)
        if not -1 <= seq <= MAX_RESUME_SEQ:
            raise DecodeError(f"{name} must be from -1 to {MAX_RESUME_SEQ}, got {text}")
        return seq
    return -1


MAX_RESUME_SEQ = 2**62
"""Beyond any seq a store holds, and within the stores' signed 64-bit integers."""
_SEQ = re.compile(r"-?[0-9]{1,19}")


class SSEMessage(msgspec.Struct, frozen=True):
    """One dispatched SSE event before its data is interpreted."""

    event: str
    data: str
    id: str
    """The last event id in effect (the stream's "last event ID buffer")."""


class SSEEventDecoder:
    """Incremental SSE decoder for clients: bytes in, :class:`SSEMessage` / events out.

    Framing is the shared :class:`~universal_event._sse_frames.SSEDecoder`; this adds
    the client's view: the event name defaults to ``message``, frames without data are
    not dispatched, and ``last_event_id`` is what a client sends back as
    ``Last-Event-ID`` on reconnect.
    """

    def __init__(self) -> None:
        self._frames = SSEDecoder()
        self.last_event_id = ""
        """The id of the last *complete* frame (committed at its blank line)."""

    def feed(self, chunk: bytes) -> list[SSEMessage]:
        """The messages that ``chunk`` completes."""
        messages = [
            SSEMessage(
                frame.event or "message", frame.data.decode("utf-8", "replace"), frame.id or ""
            )
            for frame in self._frames.feed(chunk)
            if frame.has_data
        ]
        # WHATWG: the id is committed when a frame completes (a cut after `id:` does not
        # count); a frame without data lines dispatches nothing but its id counts.
        self.last_event_id = self._frames.last_id or ""
        self._frames.unrecognised.clear()  # a client ignores fields it does not know
        return messages

    def feed_events(self, chunk: bytes) -> list[Event]:
        """The Universal Events that ``chunk`` completes (``: comments`` skipped).

        A ``stream-error`` frame (the server cannot go on: a stored event it cannot
        read) raises :class:`~universal_event.errors.StreamError`, which carries the
        events ``chunk`` held before it.
        """
        events: list[Event] = []
        for message in self.feed(chunk):
            if message.event == STREAM_ERROR_EVENT:
                raise StreamError(_error_body(message.data), events)
            if message.data:
                events.append(decode(message.data))
        return events


STREAM_ERROR_EVENT = "stream-error"
"""The SSE event name of the frame that ends a stream the server cannot go on with."""


def _error_body(data: str) -> dict[str, object]:
    try:
        body = msgspec.json.decode(data)
    except msgspec.DecodeError:
        return {"message": data}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {"message": data}
