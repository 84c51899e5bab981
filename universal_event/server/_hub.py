"""Fan-out of a session's events to many SSE clients, without letting any of them
slow the producer.

The store is the source of truth. Per watched session one :class:`SessionFeed` keeps
a worker thread (stores are synchronous) in ``store.tail`` for events after the last
seq it published, for as long as anyone listens. ``store.tail`` wakes on appends in
this process and, for PostgreSQL, on LISTEN/NOTIFY from other processes (SQLite and
JSONL poll), so a client on process B sees what was appended through A. Appends made through this
process are also published directly by the appending coroutine after they are stored
(:meth:`Hub.published_locally`), so local clients wait for no thread and no tail.

Encode once, share the bytes. A publish turns its events into one :class:`Chunk`: the
SSE frames joined into one ``bytes`` object, plus where each frame starts. Every
subscriber's :class:`ClientBuffer` queues a reference to that same chunk; no client
encodes, copies or re-joins anything unless it must cut a chunk it partly had already.

Coalescing without waiting. A client's sender drains *everything* queued when it runs
and writes it as one piece; it never waits for more to arrive. A sender that is behind
(its socket full, or the loop busy) therefore catches up in one write; one that keeps
up writes each publish as it comes, at no added latency.

Each feed publishes strictly contiguous seqs; whatever arrives twice (local publish
and tail) or out of turn is dropped there and delivered by the other path.

Slow clients: publishing never awaits a client. A buffer that would exceed its bound
is marked overflowed and its client's response ends; the client reconnects with
``Last-Event-ID`` and reads what it missed from the store.

Keepalive: one ticker per hub (not one timer per wait, which cost a timer-heap
insert and cancel per client per publish) marks a buffer that saw nothing for a whole
tick; its sender then writes a comment frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from universal_event.events import EventBase
from universal_event.sse import encode_event
from universal_event.stores import Store

__all__ = ["Chunk", "ClientBuffer", "Hub", "SessionFeed", "make_chunk"]

logger = logging.getLogger("universal_event.server")


@dataclass(frozen=True, slots=True)
class Chunk:
    """Consecutive SSE frames, encoded once and shared by every client's buffer."""

    first_seq: int
    data: bytes
    starts: tuple[int, ...]
    """Offset of each frame in ``data`` (``starts[0] == 0``)."""

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.starts) - 1

    @property
    def count(self) -> int:
        return len(self.starts)

    def after(self, seq: int) -> bytes:
        """The frames of seqs greater than ``seq`` (all of them when ``seq`` is before)."""
        if seq < self.first_seq:
            return self.data
        if seq >= self.last_seq:
            return b""
        return self.data[self.starts[seq + 1 - self.first_seq] :]


def make_chunk(events: Sequence[EventBase]) -> Chunk:
    """One chunk of consecutive logged events (``seq`` assigned, contiguous)."""
    frames = [encode_event(event) for event in events]
    starts: list[int] = []
    offset = 0
    for frame in frames:
        starts.append(offset)
        offset += len(frame)
    return Chunk(events[0].seq, b"".join(frames), tuple(starts))


class ClientBuffer:
    """The chunks queued for one client; never blocks the publisher.

    ``capacity`` counts events (one chunk may exceed it when nothing is queued before
    it). ``push`` wakes the client's sender if it waits;
    ``drain`` takes everything queued at once (the sender's coalescing point).
    """

    __slots__ = (
        "_active",
        "_chunks",
        "_queued",
        "_waiter",
        "capacity",
        "closed",
        "keepalive_due",
        "overflowed",
    )

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.overflowed = False
        self.closed = False
        """The client went away (or the server is stopping): the sender ends."""
        self.keepalive_due = False
        self._chunks: deque[Chunk] = deque()
        self._queued = 0
        self._active = False
        self._waiter: asyncio.Future[None] | None = None

    @property
    def ended(self) -> bool:
        return self.overflowed or self.closed

    def push(self, chunk: Chunk) -> None:
        """Queue ``chunk``; on overflow drop everything and mark the client for disconnect."""
        if self.overflowed:
            return
        self._active = True
        # A caught-up client takes one chunk of any size (a large POST, shared by all
        # clients, encoded once); a client behind by more than ``capacity`` is dropped.
        if self._queued and self._queued + chunk.count > self.capacity:
            self.overflowed = True
            self._chunks.clear()
            self._queued = 0
        else:
            self._chunks.append(chunk)
            self._queued += chunk.count
        self._wake()

    def close(self) -> None:
        """End the client's stream (it disconnected, or the server stops)."""
        self.closed = True
        self._wake()

    def tick(self) -> None:
        """Called once per keepalive interval: a buffer idle since the last tick is due one."""
        if not self._active and not self._chunks:
            self.keepalive_due = True
            self._wake()
        self._active = False

    async def wait(self) -> None:
        """Until something is queued, a keepalive is due, or the stream must end."""
        if self._chunks or self.keepalive_due or self.ended:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await waiter
        finally:
            self._waiter = None

    def drain(self) -> list[Chunk]:
        """Everything queued, oldest first; the buffer is empty afterwards."""
        chunks = list(self._chunks)
        self._chunks.clear()
        self._queued = 0
        return chunks

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


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
    stopping: bool = False
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once ``published`` holds the store's latest seq (see :meth:`Hub.subscribe`)."""

    def publish(self, events: Sequence[EventBase]) -> None:
        """Hand the contiguous continuation of ``events`` to every subscriber."""
        fresh: list[EventBase] = []
        for event in events:
            if event.seq != self.published + 1:
                # Already published (the other path got there first), or a gap that
                # the store tail will fill in order.
                if event.seq > self.published + 1:
                    break
                continue
            fresh.append(event)
            self.published = event.seq
        if fresh:
            chunk = make_chunk(fresh)
            for buffer in self.subscribers:
                buffer.push(chunk)

    async def run(self) -> None:
        """Tail the store while anyone listens."""
        latest = await anyio.to_thread.run_sync(
            self.store.latest_seq, self.session_id, limiter=self.tail_limiter
        )
        # A local publish may have got in first (a new session's seq 0): never go back.
        self.published = max(self.published, latest)
        self.ready.set()
        loop = asyncio.get_running_loop()
        # The thread checks for subscribers off the loop; this check, on the loop, runs
        # in the same step as the caller's clean-up, so no subscriber can slip between.
        while self.subscribers and not self.stopping:
            await anyio.to_thread.run_sync(
                self._tail_loop, loop, abandon_on_cancel=True, limiter=self.tail_limiter
            )

    def _tail_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Tail in this worker thread until nobody listens; results go to the loop.

        One thread per feed for its whole life, rather than one thread hop per tail:
        every local append wakes the tail (the store notifies), so a hop back to the
        loop and out again per result cost two thread switches per append.
        """
        after = self.published
        while self.subscribers and not self.stopping:
            try:
                # ``published`` is ahead when local appends were published first.
                events = self.store.tail(
                    self.session_id, max(after, self.published), timeout=self.tail_timeout
                )
            except Exception:  # a store hiccup must not kill every client's stream
                if self.stopping:
                    return  # the store may be closing under us
                logger.exception("tail of session %r failed; retrying", self.session_id)
                time.sleep(self.tail_timeout)
                continue
            if events:
                # Consecutive from the store, published in order on the loop: the next
                # tail may start after them before they are published.
                after = events[-1].seq
                try:
                    loop.call_soon_threadsafe(self.publish, events)
                except RuntimeError:  # the loop is closed: the server stopped
                    return


class Hub:
    """All feeds of one app; created on startup, stopped on shutdown."""

    def __init__(
        self,
        store: Store,
        *,
        client_buffer: int,
        tail_timeout: float = 1.0,
        keepalive: float = 15.0,
    ) -> None:
        self.store = store
        self.client_buffer = client_buffer
        self.tail_timeout = tail_timeout
        self.keepalive = keepalive
        # Tails block a worker thread each; keep them off the limiter request handlers use.
        self.tail_limiter = anyio.CapacityLimiter(1024)
        self._feeds: dict[str, SessionFeed] = {}
        self._ticker: asyncio.Task[None] | None = None
        self.overflow_disconnects = 0

    async def subscribe(self, session_id: str, buffer: ClientBuffer) -> SessionFeed:
        """``buffer`` receives every chunk the session's feed publishes from now on.

        Returns once the feed knows the store's latest seq: every event up to the feed's
        ``published`` is stored by then, every later one will reach ``buffer``, so a
        client that reads the store *after* this call misses nothing in between (it
        cannot see a feed whose start point is still moving).
        """
        feed = self._feeds.get(session_id)
        if feed is None:
            feed = SessionFeed(session_id, self.store, self.tail_timeout, self.tail_limiter)
            self._feeds[session_id] = feed
        feed.subscribers.add(buffer)
        loop = asyncio.get_running_loop()
        if feed.task is None or feed.task.done():
            feed.task = loop.create_task(self._pump(feed))
        if self._ticker is None or self._ticker.done():
            self._ticker = loop.create_task(self._tick())
        try:
            await feed.ready.wait()
        except BaseException:
            feed.subscribers.discard(buffer)
            raise
        return feed

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

    def subscribers(self, session_id: str) -> int:
        """How many clients watch the session live in this process."""
        feed = self._feeds.get(session_id)
        return 0 if feed is None else len(feed.subscribers)

    async def _pump(self, feed: SessionFeed) -> None:
        try:
            await feed.run()
        finally:
            feed.ready.set()  # a failed start must not leave subscribers waiting
            if not feed.subscribers and self._feeds.get(feed.session_id) is feed:
                del self._feeds[feed.session_id]

    async def _tick(self) -> None:
        """Keepalive ticks for every subscriber, while there are any."""
        while self._feeds:
            await asyncio.sleep(self.keepalive)
            for feed in list(self._feeds.values()):
                for buffer in feed.subscribers:
                    buffer.tick()

    async def stop(self) -> None:
        """Cancel every pump and the ticker (on shutdown)."""
        for feed in self._feeds.values():
            feed.stopping = True  # its tail thread ends within one tail timeout
        tasks = [feed.task for feed in self._feeds.values() if feed.task is not None]
        if self._ticker is not None:
            tasks.append(self._ticker)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
