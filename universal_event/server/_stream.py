"""One client's SSE response: the stored backlog, then the live tail from the hub.

A plain ASGI response rather than Starlette's ``StreamingResponse``: the live part is
the hot path of fan-out (every publish wakes every client), and a loop that awaits
``send`` directly skips a chain of async generators and a per-chunk re-check per
client. Disconnects are noticed the same way ``StreamingResponse`` notices them on
ASGI < 2.4 (uvicorn's HTTP protocols report 2.3): a watcher task waits in ``receive``
for ``http.disconnect`` and then ends the stream (uvicorn drops writes to a gone
client silently, so the writes alone would never tell).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import anyio.to_thread
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from universal_event.events import Event
from universal_event.server._hub import Chunk, ClientBuffer, Hub
from universal_event.sse import KEEPALIVE, encode_events, encode_retry
from universal_event.stores import Store

__all__ = ["EventStream", "read_page"]

BACKLOG_PAGE = 1000
RETRY_MILLISECONDS = 1000


def read_page(store: Store, session_id: str, start: int, end: int) -> list[Event]:
    """Stored events with ``start <= seq < end`` (run in a worker thread)."""
    return list(store.read(session_id, start, end))


class _Gap(Exception):
    """The store could not fill a gap in order: end the stream, the client resumes."""


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
        buffer = ClientBuffer(self.hub.client_buffer)
        watcher = asyncio.get_running_loop().create_task(_close_on_disconnect(receive, buffer))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            await _write(send, encode_retry(RETRY_MILLISECONDS))
            try:
                await self._stream(buffer, send)
            except _Gap:
                pass
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()

    async def _stream(self, buffer: ClientBuffer, send: Send) -> None:
        cursor = await self._backlog(self.after, buffer, send)
        if not self.follow or buffer.ended:
            return
        feed = await self.hub.subscribe(self.session_id, buffer)
        try:
            # Whatever was stored between the backlog and subscribing.
            cursor = await self._backlog(cursor, buffer, send)
            await self._live(cursor, buffer, send)
        finally:
            self.hub.unsubscribe(feed, buffer)

    async def _backlog(self, cursor: int, buffer: ClientBuffer, send: Send) -> int:
        """Send the stored events after ``cursor``, page by page; the last seq sent."""
        while not buffer.closed:
            page = await self._read(cursor + 1, cursor + 1 + BACKLOG_PAGE)
            if not page:
                break
            if page[0].seq != cursor + 1:
                raise RuntimeError(f"session {self.session_id!r}: store skipped seq {cursor + 1}")
            cursor = page[-1].seq
            await _write(send, encode_events(page))
            if len(page) < BACKLOG_PAGE:
                break
        return cursor

    async def _live(self, cursor: int, buffer: ClientBuffer, send: Send) -> None:
        """Write whatever is queued, as one piece, each time the buffer wakes us."""
        while True:
            await buffer.wait()
            if buffer.ended:
                return  # overflowed or gone: the client resumes from its Last-Event-ID
            chunks = buffer.drain()
            if not chunks:
                if buffer.keepalive_due:
                    buffer.keepalive_due = False
                    await send(_body(KEEPALIVE))
                continue
            buffer.keepalive_due = False
            if chunks[0].first_seq == cursor + 1:
                # The usual case: the queue continues the stream (a feed publishes
                # consecutive chunks), so the shared bytes go out as they are.
                data = chunks[0].data if len(chunks) == 1 else b"".join(c.data for c in chunks)
                cursor = chunks[-1].last_seq
            else:
                pieces, cursor = await self._continuation(chunks, cursor)
                data = b"".join(pieces)
            if data:
                await send(_body(data))

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
                missing = await self._read(cursor + 1, chunk.first_seq)
                if [event.seq for event in missing] != list(range(cursor + 1, chunk.first_seq)):
                    raise _Gap
                pieces.append(encode_events(missing))
                cursor = chunk.first_seq - 1
            pieces.append(chunk.after(cursor))
            cursor = chunk.last_seq
        return pieces, cursor

    async def _read(self, start: int, end: int) -> list[Event]:
        return await anyio.to_thread.run_sync(read_page, self.store, self.session_id, start, end)


def _body(data: bytes) -> Message:
    return {"type": "http.response.body", "body": data, "more_body": True}


async def _write(send: Send, data: bytes) -> None:
    await send(_body(data))


async def _close_on_disconnect(receive: Receive, buffer: ClientBuffer) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    buffer.close()
