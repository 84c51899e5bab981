"""The hub's fan-out inside one process: shared frames, coalesced writes, bounds, keepalive.

These drive :class:`EventStream` as a plain ASGI app with an in-memory ``send`` and
``receive``, so what one client is sent (and in how many writes) is observable exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.transport._support import user_events
from universal_event.events import Event
from universal_event.server._hub import ClientBuffer, Hub, make_chunk
from universal_event.server._stream import EventStream
from universal_event.server._writer import SessionWriters
from universal_event.sse import KEEPALIVE, SSEEventDecoder, encode_event, encode_events
from universal_event.stores import MemoryStore

SESSION = "fan"


def _stored(count: int, prefix: str = "e") -> list[Event]:
    store = MemoryStore()
    return SessionWriters(store).append(SESSION, user_events(count, prefix=prefix)).appended


def _seqs(data: bytes) -> list[int]:
    return [event.seq for event in SSEEventDecoder().feed_events(data)]


# ---------------------------------------------------------------- chunks and buffers


def test_a_chunk_is_the_frames_encoded_once_and_cuts_at_frame_boundaries() -> None:
    events = _stored(5)
    chunk = make_chunk(events)
    assert chunk.data == encode_events(events)
    assert (chunk.first_seq, chunk.last_seq, chunk.count) == (0, 4, 5)
    for cursor in range(-1, 6):
        cut = chunk.after(cursor)
        assert _seqs(cut) == [seq for seq in range(5) if seq > cursor]
        expected = b"".join(encode_event(e) for e in events if e.seq > cursor)
        assert cut == expected


def test_every_subscriber_queues_the_same_bytes_object() -> None:
    buffers = [ClientBuffer(100) for _ in range(3)]
    chunk = make_chunk(_stored(4))
    for buffer in buffers:
        buffer.push(chunk)
    drained = [buffer.drain() for buffer in buffers]
    assert all(len(chunks) == 1 for chunks in drained)
    assert drained[0][0].data is drained[1][0].data is drained[2][0].data
    assert all(buffer.drain() == [] for buffer in buffers)


def test_a_buffer_over_its_bound_drops_everything_and_ends() -> None:
    events = _stored(6)
    buffer = ClientBuffer(5)
    buffer.push(make_chunk(events[:3]))
    assert not buffer.ended
    buffer.push(make_chunk(events[3:]))
    assert buffer.overflowed and buffer.ended
    assert buffer.drain() == []
    buffer.push(make_chunk(events[:1]))  # nothing more is queued once overflowed
    assert buffer.drain() == []


def test_a_caught_up_client_takes_one_chunk_larger_than_its_bound() -> None:
    """One POST of more events than the bound (shared by every client, encoded once)
    does not drop the clients that were keeping up; one behind by the bound is dropped."""
    events = _stored(8)
    buffer = ClientBuffer(5)
    buffer.push(make_chunk(events))
    assert not buffer.ended and len(buffer.drain()) == 1
    buffer.push(make_chunk(events[:1]))
    buffer.push(make_chunk(events))
    assert buffer.overflowed


def test_keepalive_is_due_only_after_a_whole_idle_tick() -> None:
    buffer = ClientBuffer(10)
    buffer.push(make_chunk(_stored(1)))
    buffer.tick()
    assert not buffer.keepalive_due  # it had something this tick
    buffer.drain()
    buffer.tick()
    assert buffer.keepalive_due


# ---------------------------------------------------------------- one client over ASGI


class _Client:
    """The ASGI side of one connection: records every body write; can disconnect."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.finished = False
        self._gone = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if message.get("more_body"):
                self.writes.append(message["body"])
            else:
                self.finished = True

    def disconnect(self) -> None:
        self._gone.set()

    def seqs(self) -> list[int]:
        return _seqs(b"".join(self.writes))


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting until {what}")


def _run(
    scenario: Callable[[Hub, SessionWriters, _Client], Awaitable[None]],
    *,
    keepalive: float = 60.0,
    buffer: int = 10_000,
    after: int = -1,
) -> None:
    async def main() -> None:
        store = MemoryStore()
        hub = Hub(store, client_buffer=buffer, keepalive=keepalive, tail_timeout=0.2)
        writers = SessionWriters(store)
        client = _Client()
        stream = EventStream(hub=hub, session_id=SESSION, after=after, follow=True)
        task = asyncio.create_task(stream({"type": "http"}, client.receive, client.send))
        try:
            await _until(lambda: hub.subscribers(SESSION) == 1, "the client subscribed")
            await scenario(hub, writers, client)
        finally:
            client.disconnect()
            await asyncio.wait_for(task, 5)
            await hub.stop()
        assert client.finished and hub.subscribers(SESSION) == 0

    asyncio.run(main())


def _append(hub: Hub, writers: SessionWriters, events: list[Event]) -> None:
    """What ``POST /events`` does once the store returned: publish from the appender."""
    hub.published_locally(SESSION, writers.append(SESSION, events).appended)


def test_what_queued_while_the_sender_was_away_goes_out_in_one_write() -> None:
    async def scenario(hub: Hub, writers: SessionWriters, client: _Client) -> None:
        before = len(client.writes)
        for batch in range(3):  # no await in between: the sender cannot run yet
            _append(hub, writers, user_events(20, prefix=f"b{batch}"))
        await _until(lambda: client.seqs() == list(range(60)), "all 60 events arrived")
        assert len(client.writes) == before + 1

    _run(scenario)


def test_each_publish_is_written_as_soon_as_the_sender_runs() -> None:
    async def scenario(hub: Hub, writers: SessionWriters, client: _Client) -> None:
        for batch in range(4):
            _append(hub, writers, user_events(5, prefix=f"b{batch}"))
            last = batch * 5 + 4
            await _until(lambda last=last: client.seqs()[-1:] == [last], f"batch {batch}")
        assert client.seqs() == list(range(20))

    _run(scenario)


def test_a_publish_out_of_turn_is_dropped_and_the_tail_delivers_in_order() -> None:
    async def scenario(hub: Hub, writers: SessionWriters, client: _Client) -> None:
        _append(hub, writers, user_events(3, prefix="a"))
        await _until(lambda: client.seqs() == [0, 1, 2], "the first batch arrived")
        # Stored but never published (as if appended by another process, not yet tailed)
        # then a local publish that starts after the gap.
        writers.append(SESSION, user_events(4, prefix="gap"))
        feed_events = writers.append(SESSION, user_events(2, prefix="c")).appended
        hub.published_locally(SESSION, feed_events)  # seqs 7, 8: dropped (out of turn)
        await _until(lambda: len(client.seqs()) >= 9, "the tail delivered 3..8")
        assert client.seqs() == list(range(9))

    _run(scenario)


def test_an_idle_client_gets_keepalive_comments() -> None:
    async def scenario(hub: Hub, writers: SessionWriters, client: _Client) -> None:
        await _until(lambda: KEEPALIVE in client.writes, "a keepalive was written")
        assert client.seqs() == []

    _run(scenario, keepalive=0.05)


def test_an_overflowing_client_is_ended_and_counted() -> None:
    async def scenario(hub: Hub, writers: SessionWriters, client: _Client) -> None:
        for batch in range(3):  # 30 events queued before the sender runs; bound is 25
            _append(hub, writers, user_events(10, prefix=f"b{batch}"))
        await _until(lambda: client.finished, "the server ended the stream")
        assert hub.overflow_disconnects == 1
        assert client.seqs() == []

    _run(scenario, buffer=25)


def test_resuming_after_a_seq_sends_only_later_events() -> None:
    async def scenario(hub: Hub, writers: SessionWriters, client: _Client) -> None:
        _append(hub, writers, user_events(6, prefix="a"))
        await _until(lambda: client.seqs() == [3, 4, 5], "events after seq 2")

    _run(scenario, after=2)


@pytest.mark.parametrize("clients", [1, 25])
def test_a_disconnect_unsubscribes_and_the_others_keep_streaming(clients: int) -> None:
    async def main() -> None:
        store = MemoryStore()
        hub = Hub(store, client_buffer=1000, keepalive=60, tail_timeout=0.2)
        writers = SessionWriters(store)
        peers = [_Client() for _ in range(clients + 1)]
        tasks = [
            asyncio.create_task(
                EventStream(hub=hub, session_id=SESSION, after=-1, follow=True)(
                    {"type": "http"}, peer.receive, peer.send
                )
            )
            for peer in peers
        ]
        await _until(lambda: hub.subscribers(SESSION) == len(peers), "all subscribed")
        peers[0].disconnect()
        await asyncio.wait_for(tasks[0], 5)
        assert hub.subscribers(SESSION) == clients
        _append(hub, writers, user_events(4, prefix="x"))
        await _until(
            lambda: all(peer.seqs() == [0, 1, 2, 3] for peer in peers[1:]), "the rest got 0..3"
        )
        assert peers[0].seqs() == []
        for peer in peers[1:]:
            peer.disconnect()
        await asyncio.wait_for(asyncio.gather(*tasks[1:]), 5)
        assert hub.subscribers(SESSION) == 0
        await hub.stop()

    asyncio.run(main())


def test_a_session_deleted_behind_the_writer_can_be_written_again() -> None:
    """Deleted by another process (or the library) while the server runs: the writer's
    idea of the session's next seq and ids is stale; it starts over instead of failing
    every later write."""
    store = MemoryStore()
    writers = SessionWriters(store)
    writers.append(SESSION, user_events(5, prefix="old"))
    store.delete(SESSION)
    again = writers.append(SESSION, user_events(3, prefix="old"))
    assert [e.seq for e in again.appended] == [0, 1, 2] and again.duplicates == 0
    store.delete(SESSION)
    SessionWriters(store).append(SESSION, user_events(4, prefix="other"))  # begun again
    after = writers.append(SESSION, user_events(2, prefix="new"))
    assert [e.seq for e in after.appended] == [4, 5]
    assert [e.id for e in store.read(SESSION)][:4] == [f"other-{i}" for i in range(4)]
