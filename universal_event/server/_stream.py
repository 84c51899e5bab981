"""One client's SSE response: the stored backlog, then the live tail from the hub.

A plain ASGI response rather than Starlette's ``StreamingResponse``: the live part is
the hot path of fan-out (every publish wakes every client), and a loop that awaits
``send`` directly skips a chain of async generators and a per-chunk re-check per
client. Disconnects are noticed the same way ``StreamingResponse`` notices them on
ASGI < 2.4 (uvicorn's HTTP protocols report 2.3): a watcher task waits in ``receive``
for ``http.disconnect`` and then ends the stream (uvicorn drops writes to a gone
client silently, so the writes alone would never tell).

Writes. ``send`` returns once the server took the bytes, after the previous write
drained; a client that stops reading leaves the next ``send`` pending forever, with
the last write's bytes held for it. So every write stamps the buffer's
``sending_since`` for the hub's watchdog, which drops a connection whose write waits
longer than the send timeout; and a large write goes out in slices of
:data:`WRITE_SLICE` bytes, so what the server copies per connection stays small while
the rest is a reference to the chunk every client shares. The connection is dropped
through the transport of uvicorn's request cycle (``receive.__self__.transport``);
under a server that offers none the stream just ends once the pending write returns.

A stream that cannot go on (a corrupt stored event) sends the events before it, then
one frame without ``id``::

    event: stream-error
    data: {"error":{"code":"corrupt_event","message":"...","session_id":"s1","seq":5}}

and ends. Resuming (``Last-Event-ID`` unchanged) meets the same error until the row is
repaired.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio.to_thread
import msgspec
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from universal_event.errors import CorruptEventError
from universal_event.events import Event
from universal_event.server._hub import Chunk, ClientBuffer, Hub
from universal_event.sse import (
    KEEPALIVE,
    STREAM_ERROR_EVENT,
    encode_event,
    encode_events,
    encode_retry,
)
from universal_event.stores import Store

__all__ = ["EventStream", "error_frame", "read_page"]

BACKLOG_PAGE = 1000
RETRY_MILLISECONDS = 1000
WRITE_SLICE = 256 * 1024
"""Largest single write: a bigger one is cut (the client's socket takes it in parts)."""
STREAM_ERROR = STREAM_ERROR_EVENT.encode()
_json = msgspec.json.Encoder()


def read_page(
    store: Store, session_id: str, start: int, end: int
) -> tuple[list[Event], CorruptEventError | None]:
    """Stored events with ``start <= seq < end`` (run in a worker thread), up to the
    first corrupt one; the error, if one stopped the read."""
    events: list[Event] = []
    try:
        for event in store.read(session_id, start, end):
            events.append(event)
    except CorruptEventError as exc:
        return events, exc
    return events, None


def error_frame(error: Exception) -> bytes:
    """The ``stream-error`` frame that ends a stream which cannot go on."""
    body: dict[str, Any] = {"code": "stream_failed", "message": str(error)}
    if isinstance(error, CorruptEventError):
        body.update(code="corrupt_event", session_id=error.session_id, seq=error.seq)
    return b"event: %s\ndata: %s\n\n" % (STREAM_ERROR, _json.encode({"error": body}))


class _Gap(Exception):
    """The store could not fill a gap in order: end the stream, the client resumes."""


class _Unreadable(Exception):
    """A stored event cannot be read: the stream ends with an error frame."""

    def __init__(self, error: CorruptEventError) -> None:
        self.error = error


class EventStream(Response):
    """``GET /sessions/{id}/events``: events after ``after``, then (``follow``) live."""

    media_type = "text/event-stream"

    def __init__(
        self,
        *,
        hub: Hub,
        session_id: str,
        after: int,
        follow: bool,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers(headers)
        self.hub = hub
        self.store = hub.store
        self.session_id = session_id
        self.after = after
        self.follow = follow

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hub = self.hub
        buffer = ClientBuffer(hub.client_buffer, hub.client_buffer_bytes)
        buffer.abort = _aborter(receive)
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._send = send
        self._buffer = buffer
        self._cursor = self.after
        watcher = loop.create_task(_close_on_disconnect(receive, buffer))
        hub.open_stream(buffer)
        try:
            await self._write_message(
                {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
            )
            await self._write(encode_retry(RETRY_MILLISECONDS))
            try:
                await self._stream(buffer)
            except _Gap:
                pass
            except _Unreadable as exc:
                buffer.error = exc.error
            if buffer.error is not None and not buffer.ended:
                await self._end_with_error(buffer.error)
            await self._write_message({"type": "http.response.body", "body": b""})
        finally:
            hub.close_stream(buffer)
            watcher.cancel()

    async def _stream(self, buffer: ClientBuffer) -> None:
        self._cursor = await self._backlog(self.after, buffer)
        if not self.follow or buffer.ended:
            return
        feed = await self.hub.subscribe(self.session_id, buffer)
        try:
            # Whatever was stored between the backlog and subscribing.
            self._cursor = await self._backlog(self._cursor, buffer)
            await self._live(self._cursor, buffer)
        finally:
            self.hub.unsubscribe(feed, buffer)

    async def _backlog(self, cursor: int, buffer: ClientBuffer) -> int:
        """Send the stored events after ``cursor``, page by page; the last seq sent."""
        while not buffer.ended:
            page, error = await self._read(cursor + 1, cursor + 1 + BACKLOG_PAGE)
            if page:
                if page[0].seq != cursor + 1:
                    raise RuntimeError(
                        f"session {self.session_id!r}: store skipped seq {cursor + 1}"
                    )
                await self._write_events(page)
                cursor = self._cursor = page[-1].seq
            if error is not None:
                raise _Unreadable(error)
            if len(page) < BACKLOG_PAGE:
                break
        return cursor

    async def _live(self, cursor: int, buffer: ClientBuffer) -> None:
        """Write whatever is queued, as one piece, each time the buffer wakes us."""
        while True:
            await buffer.wait()
            if buffer.ended:
                return  # overflowed or gone: the client resumes from its Last-Event-ID
            chunks = buffer.drain()
            if not chunks:
                if buffer.error is not None:
                    return
                if buffer.keepalive_due:
                    buffer.keepalive_due = False
                    await self._write(KEEPALIVE)
                continue
            buffer.keepalive_due = False
            if chunks[0].first_seq == cursor + 1:
                # The usual case: the queue continues the stream (a feed publishes
                # consecutive chunks), so the shared bytes go out as they are.
                cursor = self._cursor = chunks[-1].last_seq
                if len(chunks) == 1:
                    await self._write(chunks[0].data)
                else:
                    await self._write_pieces([chunk.data for chunk in chunks])
            else:
                pieces, cursor = await self._continuation(chunks, cursor)
                await self._write_pieces(pieces)

    async def _continuation(self, chunks: list[Chunk], cursor: int) -> tuple[list[bytes], int]:
        """The bytes that continue the stream after ``cursor``, and the new cursor.

        Chunks published before this client caught up with the store are cut or
        skipped; a gap before a chunk is filled from the store.
        """
        pieces: list[bytes] = []
        for chunk in chunks:
            if chunk.last_seq <= cursor:
                continue
            if chunk.first_seq > cursor + 1:
                missing, error = await self._read(cursor + 1, chunk.first_seq)
                if error is not None:
                    # What is readable before the bad seq follows (``_end_with_error``).
                    await self._write_pieces(pieces)
                    self._cursor = cursor
                    raise _Unreadable(error)
                if [event.seq for event in missing] != list(range(cursor + 1, chunk.first_seq)):
                    raise _Gap
                pieces.append(encode_events(missing))
                cursor = chunk.first_seq - 1
            pieces.append(chunk.after(cursor))
            cursor = self._cursor = chunk.last_seq
        return pieces, cursor

    async def _end_with_error(self, error: Exception) -> None:
        """Send the readable events the stream has not sent yet, then the error frame."""
        if isinstance(error, CorruptEventError) and error.seq is not None:
            if error.seq > self._cursor + 1:
                events, _ = await self._read(self._cursor + 1, error.seq)
                expected = list(range(self._cursor + 1, self._cursor + 1 + len(events)))
                if [event.seq for event in events] == expected:
                    await self._write_events(events)
        await self._write(error_frame(error))

    async def _read(self, start: int, end: int) -> tuple[list[Event], CorruptEventError | None]:
        return await anyio.to_thread.run_sync(read_page, self.store, self.session_id, start, end)

    # ------------------------------------------------------------ writes

    async def _write_message(self, message: Message) -> None:
        """``send`` with its start stamped for the hub's watchdog."""
        buffer = self._buffer
        buffer.sending_since = self._loop.time()
        try:
            await self._send(message)
        finally:
            buffer.sending_since = 0.0

    async def _write(self, data: bytes) -> None:
        """One piece of the body; a large one in slices (see the module's docstring)."""
        if len(data) <= WRITE_SLICE:
            await self._write_message(_body(data))
            return
        view = memoryview(data)
        for start in range(0, len(data), WRITE_SLICE):
            if self._buffer.ended:
                return  # overflowed, gone or stopping: the client resumes
            await self._write_message(_body(bytes(view[start : start + WRITE_SLICE])))

    async def _write_pieces(self, pieces: Sequence[bytes]) -> None:
        """Consecutive pieces, joined into writes of up to ``WRITE_SLICE`` bytes (a
        larger piece goes out on its own, sliced)."""
        group: list[bytes] = []
        size = 0
        for piece in pieces:
            if size and size + len(piece) > WRITE_SLICE:
                await self._write(group[0] if len(group) == 1 else b"".join(group))
                group, size = [], 0
            group.append(piece)
            size += len(piece)
        if group:
            await self._write(group[0] if len(group) == 1 else b"".join(group))

    async def _write_events(self, events: Sequence[Event]) -> None:
        await self._write_pieces([encode_event(event) for event in events])


def _body(data: bytes) -> Message:
    return {"type": "http.response.body", "body": data, "more_body": True}


def _aborter(receive: Receive) -> Callable[[], None] | None:
    """A way to drop the client's connection at once, if the server gives one: uvicorn's
    ``receive`` is a method of the request cycle, which holds the connection's transport
    (``abort`` discards what is still buffered for the client; ``close`` would wait for
    it to drain, forever for a client that does not read)."""
    transport = getattr(getattr(receive, "__self__", None), "transport", None)
    abort = getattr(transport, "abort", None)
    return abort if callable(abort) else None


async def _close_on_disconnect(receive: Receive, buffer: ClientBuffer) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    buffer.close()
