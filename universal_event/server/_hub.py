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
(in events or in bytes) is marked overflowed and its client's response ends; the
client reconnects with ``Last-Event-ID`` and reads what it missed from the store. A
client that stops reading but stays connected leaves its sender blocked in a write
(the server's socket buffer full), and its response could end (on overflow) only
after that write: a connection whose write has waited ``send_timeout`` is therefore
dropped (one watchdog per hub checks every open stream, so the hot path only stamps
the time a write began), which also frees the bytes the server holds for it. Until
then a client holds at most one write slice of its own (see ``_stream``) besides
references to the shared chunks, which the byte bound limits.

A feed whose store fails (starting, or tailing) is restarted with backoff a few times,
then ends its subscribers' streams so they resume; a corrupt stored event ends them
with an error frame naming session and seq (see :mod:`universal_event.server._stream`).

Keepalive: one ticker per hub (not one timer per wait, which cost a timer-heap
insert and cancel per client per publish) marks a buffer that saw nothing for a whole
tick; its sender then writes a comment frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from universal_event.errors import CorruptEventError
from universal_event.events import EventBase
from universal_event.sse import encode_event
from universal_event.stores import Store

__all__ = ["Chunk", "ClientBuffer", "Hub", "SessionFeed", "make_chunk"]

logger = logging.getLogger("universal_event.server")

DEFAULT_BUFFER_BYTES = 16 * 1024 * 1024
"""Bytes of SSE frames queued per client before it is dropped (twice the default
largest POST, so a client that keeps up never is)."""
DEFAULT_SEND_TIMEOUT = 30.0
"""Seconds one write to a client may wait for the client to read before it is dropped."""
_FEED_RESTARTS = 4
"""Consecutive failures of a feed's store calls it retries before ending its streams."""
_TAIL_FAILURES = 3
"""Consecutive failed tails after which the feed restarts (re-reading the latest seq)."""


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

    ``capacity`` counts events, ``capacity_bytes`` their bytes (one chunk may exceed
    either when nothing is queued before it: a caught-up client takes any publish).
    ``push`` wakes the client's sender if it waits; ``drain`` takes everything queued
    at once (the sender's coalescing point).

    The stream stamps ``sending_since`` (loop time) while a write to the client is
    pending and sets ``abort`` when the server lets it drop the connection; a client
    whose write outlives the hub's send timeout is disconnected (:meth:`disconnect`).
    """

    __slots__ = (
        "_active",
        "_chunks",
        "_queued",
        "_queued_bytes",
        "_waiter",
        "abort",
        "capacity",
        "capacity_bytes",
        "closed",
        "error",
        "keepalive_due",
        "overflowed",
        "sending_since",
        "timed_out",
    )

    def __init__(self, capacity: int, capacity_bytes: int = DEFAULT_BUFFER_BYTES) -> None:
        self.capacity = capacity
        self.capacity_bytes = capacity_bytes
        self.overflowed = False
        self.closed = False
        """The client went away (or the server is stopping): the sender ends."""
        self.timed_out = False
        """A write to the client outlived the send timeout: the connection was dropped."""
        self.error: Exception | None = None
        """The stream cannot go on (a corrupt stored event): the sender writes what is
        queued, then an error frame, and ends."""
        self.keepalive_due = False
        self.sending_since = 0.0
        """Loop time at which the pending write to the client began; 0.0 when none is."""
        self.abort: Callable[[], None] | None = None
        """Drops the client's connection at once, pending bytes included (if the server
        gives a way to)."""
        self._chunks: deque[Chunk] = deque()
        self._queued = 0
        self._queued_bytes = 0
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
        size = len(chunk.data)
        # A caught-up client takes one chunk of any size (a large POST, shared by all
        # clients, encoded once); a client behind by more than the bounds is dropped.
        if self._queued and (
            self._queued + chunk.count > self.capacity
            or self._queued_bytes + size > self.capacity_bytes
        ):
            self.overflowed = True
            self._chunks.clear()
            self._queued = 0
            self._queued_bytes = 0
        else:
            self._chunks.append(chunk)
            self._queued += chunk.count
            self._queued_bytes += size
        self._wake()

    def close(self) -> None:
        """End the client's stream (it disconnected, or the server stops)."""
        self.closed = True
        self._wake()

    def disconnect(self) -> None:
        """End the stream and drop the connection now, even with a write pending."""
        self.closed = True
        abort, self.abort = self.abort, None
        if abort is not None:
            abort()
        self._wake()

    def fail(self, error: Exception) -> None:
        """End the stream after what is queued, with an error frame (see ``error``)."""
        self.error = error
        self._wake()

    def tick(self) -> None:
        """Called once per keepalive interval: a buffer idle since the last tick is due one."""
        if not self._active and not self._chunks:
            self.keepalive_due = True
            self._wake()
        self._active = False

    async def wait(self) -> None:
        """Until something is queued, a keepalive is due, or the stream must end."""
        if self._chunks or self.keepalive_due or self.ended or self.error is not None:
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
        self._queued_bytes = 0
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
    tails: int = 0
    """Tails that returned (the store answered): a restart after some is a new failure."""

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

    def end_streams(self, error: Exception | None = None) -> None:
        """The feed cannot go on: end every subscriber's stream (after what is queued,
        with an error frame when ``error`` is given); the clients resume."""
        for buffer in list(self.subscribers):
            if error is not None:
                buffer.fail(error)
            else:
                buffer.close()

    async def run(self) -> None:
        """Tail the store while anyone listens.

        The first run starts from the store's latest seq (subscribers catch up from the
        store before they join). A restart after a failure goes on from what was
        published: what other processes stored meanwhile is tailed, not skipped.
        """
        if not self.ready.is_set():
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

        A corrupt event, or a store failing several tails in a row, ends the loop with
        the error (the pump decides); one failure is logged once per streak.
        """
        after = self.published
        failures = 0
        while self.subscribers and not self.stopping:
            try:
                # ``published`` is ahead when local appends were published first.
                events = self.store.tail(
                    self.session_id, max(after, self.published), timeout=self.tail_timeout
                )
            except CorruptEventError:
                raise  # retrying reads the same bad row again: the pump ends the streams
            except Exception:  # a store hiccup must not kill every client's stream
                if self.stopping:
                    return  # the store may be closing under us
                failures += 1
                if failures >= _TAIL_FAILURES:
                    raise
                if failures == 1:
                    logger.warning(
                        "tail of session %r failed; retrying", self.session_id, exc_info=True
                    )
                time.sleep(min(self.tail_timeout, 0.1 * 2**failures))
                continue
            failures = 0
            self.tails += 1
            if events:
                # Consecutive from the store, published in order on the loop: the next
                # tail may start after them before they are published.
                after = events[-1].seq
                try:
                    loop.call_soon_threadsafe(self.publish, events)
                except RuntimeError:  # the loop is closed: the server stopped
                    return


class Hub:
    """All feeds of one app; created on startup, stopped on shutdown.

    Also the registry of every open stream (backlog or live), for the send watchdog
    and for ending streams on shutdown.
    """

    def __init__(
        self,
        store: Store,
        *,
        client_buffer: int,
        client_buffer_bytes: int = DEFAULT_BUFFER_BYTES,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
        tail_timeout: float = 1.0,
        keepalive: float = 15.0,
    ) -> None:
        self.store = store
        self.client_buffer = client_buffer
        self.client_buffer_bytes = client_buffer_bytes
        self.send_timeout = send_timeout
        self.tail_timeout = tail_timeout
        self.keepalive = keepalive
        # Tails block a worker thread each; keep them off the limiter request handlers use.
        self.tail_limiter = anyio.CapacityLimiter(1024)
        self._feeds: dict[str, SessionFeed] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self.streams: set[ClientBuffer] = set()
        """The buffer of every open stream (backlog or live)."""
        self.stopping = False
        """The server is shutting down: open streams end, new ones end at once."""
        self.overflow_disconnects = 0
        self.send_timeouts = 0
        self.feed_failures = 0

    def open_stream(self, buffer: ClientBuffer) -> None:
        """A stream began: watch its writes until :meth:`close_stream`."""
        self.streams.add(buffer)
        if self.stopping:
            buffer.close()
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    def close_stream(self, buffer: ClientBuffer) -> None:
        self.streams.discard(buffer)

    async def subscribe(self, session_id: str, buffer: ClientBuffer) -> SessionFeed:
        """``buffer`` receives every chunk the session's feed publishes from now on.

        Returns once the feed knows the store's latest seq: every event up to the feed's
        ``published`` is stored by then, every later one will reach ``buffer``, so a
        client that reads the store *after* this call misses nothing in between (it
        cannot see a feed whose start point is still moving). A feed that could not
        start closes ``buffer`` before this returns.
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
        """Run the feed; restart it after a store failure (with backoff) a few times,
        then end its subscribers' streams (they resume, and a new feed starts)."""
        failures = 0
        failed = False
        try:
            while True:
                tails = feed.tails
                try:
                    await feed.run()
                    return
                except CorruptEventError as exc:
                    logger.error("session %r: live stream ended: %s", feed.session_id, exc)
                    self.feed_failures += 1
                    failed = True
                    feed.end_streams(exc)
                    return
                except Exception:
                    if feed.tails != tails:
                        failures = 0  # it ran a while: a new failure, not the same one
                    failures += 1
                    if not feed.subscribers or feed.stopping:
                        return
                    if failures > _FEED_RESTARTS:
                        logger.exception(
                            "feed of session %r keeps failing; ending its %d stream(s) "
                            "(the clients resume)",
                            feed.session_id,
                            len(feed.subscribers),
                        )
                        self.feed_failures += 1
                        failed = True
                        feed.end_streams()
                        return
                    if failures == 1:
                        logger.warning(
                            "feed of session %r failed; restarting",
                            feed.session_id,
                            exc_info=True,
                        )
                await asyncio.sleep(random.uniform(0.5, 1.0) * 0.05 * 2**failures)
        finally:
            feed.ready.set()  # a failed start must not leave subscribers waiting
            if (failed or not feed.subscribers) and self._feeds.get(feed.session_id) is feed:
                del self._feeds[feed.session_id]  # the next subscriber starts a new feed

    async def _tick(self) -> None:
        """Keepalive ticks for every subscriber, while there are any."""
        while self._feeds:
            await asyncio.sleep(self.keepalive)
            for feed in list(self._feeds.values()):
                for buffer in feed.subscribers:
                    buffer.tick()

    async def _watch(self) -> None:
        """Drop every client whose pending write has waited more than ``send_timeout``."""
        loop = asyncio.get_running_loop()
        while self.streams:
            await asyncio.sleep(self.send_timeout / 4)
            limit = loop.time() - self.send_timeout
            for buffer in list(self.streams):
                since = buffer.sending_since
                if since and since < limit and not buffer.timed_out:
                    self.send_timeouts += 1
                    buffer.timed_out = True
                    buffer.disconnect()

    def end_streams(self, grace: float = 1.0) -> None:
        """Shutdown begins: every open stream ends now (a clean end of its response);
        one still stuck in a write after ``grace`` seconds is disconnected."""
        self._close_streams()
        if self.streams:
            asyncio.get_running_loop().call_later(grace, self._disconnect_all)

    def _close_streams(self) -> None:
        """Shutdown begins: new streams end at once, every open one ends now."""
        self.stopping = True
        for buffer in list(self.streams):
            buffer.close()

    def _disconnect_all(self) -> None:
        for buffer in list(self.streams):
            buffer.disconnect()

    async def stop(self) -> None:
        """End every stream, cancel every pump, the ticker and the watchdog (on shutdown)."""
        self._close_streams()
        for feed in self._feeds.values():
            feed.stopping = True  # its tail thread ends within one tail timeout
        tasks = [feed.task for feed in self._feeds.values() if feed.task is not None]
        for task in (self._ticker, self._watchdog):
            if task is not None:
                tasks.append(task)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
