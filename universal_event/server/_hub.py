"""Fan-out of a session's events to many SSE clients, without letting any of them
slow the producer.

The store is the source of truth. Per watched session one :class:`SessionFeed`
"pump" task waits in ``store.tail`` (in a worker thread: stores are synchronous) for
events after the last seq it published, encodes each event to its SSE frame *once*,
and hands the frames to every subscriber's :class:`ClientBuffer`. ``store.tail`` wakes
on appends in this process and, for PostgreSQL, on LISTEN/NOTIFY from other processes
(SQLite and JSONL poll), so a client on process B sees what was appended through A.
Appends made through this process are also published directly after they are stored
(:meth:`Hub.published_locally`), so local clients do not wait for the tail to return.

Each feed publishes strictly contiguous seqs; whatever arrives twice (local publish
and tail) or out of turn is dropped there and delivered by the other path.

Slow clients: publishing never awaits a client. A buffer that would exceed its bound
is marked overflowed and its client's response ends; the client reconnects with
``Last-Event-ID`` and reads what it missed from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from universal_event.events import Event, EventBase
from universal_event.sse import encode_event
from universal_event.stores import Store

__all__ = ["ClientBuffer", "Frame", "Hub", "SessionFeed"]

logger = logging.getLogger("universal_event.server")

Frame = tuple[int, bytes]
"""``(seq, encoded SSE frame)``."""


class ClientBuffer:
    """A bounded queue of frames for one client; never blocks the publisher."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.overflowed = False
        self._frames: deque[Frame] = deque()
        self._ready = asyncio.Event()

    def push(self, frames: Sequence[Frame]) -> None:
        """Queue ``frames``; on overflow drop them all and mark the client for disconnect."""
        if self.overflowed:
            return
        if len(self._frames) + len(frames) > self.capacity:
            self.overflowed = True
            self._frames.clear()
        else:
            self._frames.extend(frames)
        self._ready.set()

    async def take(self, timeout: float) -> list[Frame]:
        """Everything queued (waits up to ``timeout`` for something); [] on timeout."""
        if not self._frames and not self.overflowed:
            # asyncio.timeout, not wait_for: no extra task per wait (this runs per batch
            # per client, the hot path of fan-out)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._ready.wait()
        self._ready.clear()
        frames = list(self._frames)
        self._frames.clear()
        return frames


@dataclass
class SessionFeed:
    """The pump of one session: tail the store, publish to subscribers."""

    session_id: str
    store: Store
    tail_timeout: float
    tail_limiter: anyio.CapacityLimiter
    published: int = -1
    subscribers: set[ClientBuffer] = field(default_factory=set)
    task: asyncio.Task[None] | None = None

    def publish(self, events: Sequence[EventBase]) -> None:
        """Hand the contiguous continuation of ``events`` to every subscriber."""
        frames: list[Frame] = []
        for event in events:
            if event.seq != self.published + 1:
                # Already published (the other path got there first), or a gap that
                # the store tail will fill in order.
                if event.seq > self.published + 1:
                    break
                continue
            frames.append((event.seq, encode_event(event)))
            self.published = event.seq
        if frames:
            for buffer in list(self.subscribers):
                buffer.push(frames)

    async def run(self) -> None:
        """Tail the store while anyone listens."""
        self.published = await anyio.to_thread.run_sync(
            self.store.latest_seq, self.session_id, limiter=self.tail_limiter
        )
        while self.subscribers:
            try:
                events: list[Event] = await anyio.to_thread.run_sync(
                    self._tail, self.published, abandon_on_cancel=True, limiter=self.tail_limiter
                )
            except asyncio.CancelledError:
                raise
            except Exception:  # a store hiccup must not kill every client's stream
                logger.exception("tail of session %r failed; retrying", self.session_id)
                await asyncio.sleep(self.tail_timeout)
                continue
            self.publish(events)

    def _tail(self, after_seq: int) -> list[Event]:
        return self.store.tail(self.session_id, after_seq, timeout=self.tail_timeout)


class Hub:
    """All feeds of one app; created on startup, stopped on shutdown."""

    def __init__(self, store: Store, *, client_buffer: int, tail_timeout: float = 1.0) -> None:
        self.store = store
        self.client_buffer = client_buffer
        self.tail_timeout = tail_timeout
        # Tails block a worker thread each; keep them off the limiter request handlers use.
        self.tail_limiter = anyio.CapacityLimiter(1024)
        self._feeds: dict[str, SessionFeed] = {}
        self.overflow_disconnects = 0

    def subscribe(self, session_id: str) -> tuple[SessionFeed, ClientBuffer]:
        """A new buffer that receives every frame the session's feed publishes from now on."""
        feed = self._feeds.get(session_id)
        if feed is None:
            feed = SessionFeed(session_id, self.store, self.tail_timeout, self.tail_limiter)
            self._feeds[session_id] = feed
        buffer = ClientBuffer(self.client_buffer)
        feed.subscribers.add(buffer)
        if feed.task is None or feed.task.done():
            feed.task = asyncio.get_running_loop().create_task(self._pump(feed))
        return feed, buffer

    def unsubscribe(self, feed: SessionFeed, buffer: ClientBuffer) -> None:
        """Forget a client; the feed stops tailing once nobody listens."""
        feed.subscribers.discard(buffer)
        if buffer.overflowed:
            self.overflow_disconnects += 1

    def published_locally(self, session_id: str, events: Sequence[EventBase]) -> None:
        """Events this process just stored: publish them without waiting for the tail."""
        feed = self._feeds.get(session_id)
        if feed is not None and feed.task is not None and not feed.task.done():
            feed.publish(events)

    async def _pump(self, feed: SessionFeed) -> None:
        try:
            await feed.run()
        finally:
            if not feed.subscribers and self._feeds.get(feed.session_id) is feed:
                del self._feeds[feed.session_id]

    async def stop(self) -> None:
        """Cancel every pump (on shutdown)."""
        tasks = [feed.task for feed in self._feeds.values() if feed.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
