"""The control plane when things go wrong: clients that stop reading, contention, store
failures, corrupt rows, ids sent again with other bodies, odd input, shutdown."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import httpx
import msgspec
import pytest

from tests.transport._support import ServerThread, post_events, serve_process, user_events
from universal_event.codec import encode
from universal_event.errors import CorruptEventError, StoreError, StreamError
from universal_event.events import Event, EventBase, Surface, UserMessageEvent
from universal_event.parts import TextPart
from universal_event.server import Limits, _writer, create_app
from universal_event.server._hub import ClientBuffer, make_chunk
from universal_event.sse import SSEEventDecoder
from universal_event.stores import MemoryStore


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def _until(condition: Callable[[], bool], what: str, timeout: float = 4.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.02)


def _health(http: httpx.Client, server: ServerThread) -> dict:
    return http.get(f"{server.url}/healthz").json()


def _read(chunks: Iterator[bytes], done: Callable[[bytes], bool], timeout: float = 4.0) -> bytes:
    """Read a stream's raw chunks until ``done(body)`` or the stream ends; fails after
    ``timeout`` (keepalives keep a stalled stream's reads returning)."""
    deadline = time.monotonic() + timeout
    body = b""
    for chunk in chunks:
        body += chunk
        if done(body):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; got {body[-300:]!r}")
    return body


def _through(seq: int) -> Callable[[bytes], bool]:
    """Whether a body holds the whole frame of ``seq`` (frames arrive in order)."""
    return lambda body: b"id: %d\n" % seq in body and body.endswith(b"\n\n")


def _seqs(body: bytes) -> list[int]:
    return [event.seq for event in SSEEventDecoder().feed_events(body)]


def _frames(body: bytes) -> list[tuple[str, str]]:
    """(event name, data) of every complete frame."""
    return [(m.event, m.data) for m in SSEEventDecoder().feed(body)]


class _RawStream:
    """A GET of a session's events on a plain socket that reads only when told to."""

    def __init__(self, server: ServerThread, session: str, *, rcvbuf: int = 4096) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect(("127.0.0.1", server.port))
        request = f"GET /sessions/{session}/events HTTP/1.1\r\nHost: x\r\n\r\n"
        self.sock.sendall(request.encode())

    def read_until_closed(self, timeout: float) -> tuple[bytes, bool]:
        """Everything until the server closes (True) or ``timeout`` passes (False)."""
        self.sock.settimeout(timeout)
        data = b""
        try:
            while chunk := self.sock.recv(1 << 20):
                data += chunk
        except TimeoutError:
            return data, False
        except ConnectionResetError:
            pass
        return data, True

    def close(self) -> None:
        self.sock.close()


# ---------------------------------------------------------------- 1. clients that stop reading


def test_a_client_that_stops_reading_is_dropped_after_the_send_timeout(
    http: httpx.Client,
) -> None:
    store = MemoryStore()
    app = create_app(store, tokens=None, limits=Limits(send_timeout=1.0), keepalive=60)
    with ServerThread(app) as server:
        stalled = [_RawStream(server, "big") for _ in range(4)]
        try:
            plane = app.state.control_plane
            _until(lambda: plane.hub.subscribers("big") == 4, "the clients subscribed")
            reader = httpx.Client(timeout=10)
            with reader.stream("GET", f"{server.url}/sessions/big/events") as live:
                _until(lambda: plane.hub.subscribers("big") == 5, "the reader subscribed")
                big = user_events(4, prefix="big", size=900_000)  # ~3.6 MB in one chunk
                assert post_events(http, server.url, "big", big).status_code == 200
                # a reading client gets it all, intact
                body = _read(live.iter_raw(), _through(3))
                assert _seqs(body) == [0, 1, 2, 3]
                _until(lambda: _health(http, server)["send_timeouts"] == 4, "stalled dropped")
            reader.close()
            for client in stalled:  # the server closed (reset) their connections
                _, closed = client.read_until_closed(2.0)
                assert closed
        finally:
            for client in stalled:
                client.close()


def test_a_client_buffer_is_bounded_in_bytes_as_well_as_events() -> None:
    events = [
        msgspec.structs.replace(event, seq=index)
        for index, event in enumerate(user_events(6, prefix="b", size=1000))
    ]
    buffer = ClientBuffer(1000, capacity_bytes=2500)
    buffer.push(make_chunk(events[:2]))  # ~2 KB: a caught-up client takes any chunk
    assert not buffer.overflowed
    buffer.push(make_chunk(events[2:3]))  # would queue over 2500 bytes
    assert buffer.overflowed and buffer.ended
    assert buffer.drain() == []


# ---------------------------------------------------------------- 2. contention


class _ContendedStore(MemoryStore):
    """Another writer appends first, ``conflicts`` times (or always, with -1)."""

    def __init__(self, conflicts: int) -> None:
        super().__init__()
        self.conflicts = conflicts
        self.appends = 0

    def append(self, session_id: str, events: Sequence[EventBase], *, expected_seq: int) -> None:
        if self.conflicts:
            self.conflicts -= 1
            self.appends += 1
            other = UserMessageEvent(
                id=f"other-{self.appends}", content=[], seq=expected_seq, session_id=session_id
            )
            super().append(session_id, [other], expected_seq=expected_seq)
        super().append(session_id, events, expected_seq=expected_seq)


def test_conflicting_appends_are_retried_and_endless_contention_is_a_json_503(
    http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _ContendedStore(conflicts=25)  # more than the old 20-attempt limit
    with ServerThread(create_app(store, tokens=None)) as server:
        response = post_events(http, server.url, "c", user_events(2, prefix="mine"))
        assert response.status_code == 200, response.text
        assert response.json()["first_seq"] == 25
    monkeypatch.setattr(_writer, "CONFLICT_BUDGET", 0.5)
    store = _ContendedStore(conflicts=-1)
    with ServerThread(create_app(store, tokens=None)) as server:
        started = time.monotonic()
        response = post_events(http, server.url, "c", user_events(1, prefix="mine"))
        assert time.monotonic() - started < 3
        assert response.status_code == 503
        assert response.headers["content-type"] == "application/json"
        assert response.headers["retry-after"] == "1"
        assert response.json()["error"]["code"] == "write_contention"


class _BrokenStore(MemoryStore):
    def append(self, session_id: str, events: Sequence[EventBase], *, expected_seq: int) -> None:
        raise StoreError("the disk went away")


def test_a_store_error_on_write_is_a_json_503(http: httpx.Client) -> None:
    with ServerThread(create_app(_BrokenStore(), tokens=None)) as server:
        response = post_events(http, server.url, "c", user_events(1, prefix="x"))
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    error = response.json()["error"]
    assert error["code"] == "store_unavailable" and "disk went away" in error["message"]


# ---------------------------------------------------------------- 3. feeds that fail


class _FlakyLatestStore(MemoryStore):
    """``latest_seq`` fails ``failures`` times off the main thread (-1: always)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def latest_seq(self, session_id: str) -> int:
        if self.failures and threading.current_thread() is not threading.main_thread():
            self.failures -= 1
            raise RuntimeError("transient store error")
        return super().latest_seq(session_id)


def test_a_feed_whose_start_fails_restarts_and_live_clients_get_later_events(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="universal_event.server")
    store = _FlakyLatestStore(failures=1)
    app = create_app(store, tokens=None, keepalive=0.3)
    with ServerThread(app) as server:
        with http.stream("GET", f"{server.url}/sessions/ff/events") as live:
            _until(lambda: app.state.control_plane.hub.subscribers("ff") == 1, "subscribed")
            time.sleep(0.3)  # the feed failed and restarted meanwhile
            assert post_events(http, server.url, "ff", user_events(3, prefix="e")).is_success
            body = _read(live.iter_raw(), _through(2))
            assert _seqs(body) == [0, 1, 2]


class _FlakyTailStore(MemoryStore):
    """``tail`` fails while ``failing`` is set, as a store connection that dropped."""

    failing = False
    failures = 0

    def tail(self, session_id: str, after_seq: int, *, timeout: float | None = None) -> list[Event]:
        if self.failing:
            self.failures += 1
            time.sleep(0.01)
            raise OSError("connection lost")
        return super().tail(session_id, after_seq, timeout=timeout)


def test_a_restarted_feed_sends_what_was_stored_while_it_failed(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    """Events another process stored while the tail kept failing reach live clients once
    it recovers (before, the restarted feed jumped to the store's latest seq: they came
    only with the next append, if any)."""
    caplog.set_level(logging.CRITICAL, logger="universal_event.server")
    store = _FlakyTailStore()
    app = create_app(store, tokens=None, keepalive=0.3, tail_timeout=0.1)
    with ServerThread(app) as server:
        assert post_events(http, server.url, "rf", user_events(2, prefix="a")).is_success
        with http.stream("GET", f"{server.url}/sessions/rf/events") as live:
            chunks = live.iter_raw()
            body = _read(chunks, _through(1))
            store.failing = True
            _until(lambda: store.failures >= 1, "a tail failed")
            elsewhere = [
                UserMessageEvent(id=f"x{seq}", content=[], seq=seq, session_id="rf")
                for seq in (2, 3, 4)
            ]
            store.append("rf", elsewhere, expected_seq=2)  # "another process"
            _until(lambda: store.failures >= 4, "the feed restarted")  # 3 tails a run
            store.failing = False
            body += _read(chunks, _through(4))
        assert _seqs(body) == [0, 1, 2, 3, 4]


def test_a_feed_that_keeps_failing_ends_its_streams(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="universal_event.server")
    store = _FlakyLatestStore(failures=-1)
    app = create_app(store, tokens=None, keepalive=0.3)
    with ServerThread(app) as server:
        started = time.monotonic()
        with http.stream("GET", f"{server.url}/sessions/ff/events") as response:
            assert response.status_code == 200
            _read(response.iter_raw(), lambda body: False)  # until the server ends it
        assert time.monotonic() - started < 4
        assert _health(http, server)["feed_failures"] == 1


# ---------------------------------------------------------------- 4. corrupt rows


class _CorruptStore(MemoryStore):
    """Reads and tails fail at ``bad[session]`` as a row that cannot be decoded would."""

    def __init__(self) -> None:
        super().__init__()
        self.bad: dict[str, int] = {}

    def read(self, session_id: str, start: int = 0, end: int | None = None) -> Iterator[Event]:
        for event in super().read(session_id, start, end):
            if event.seq == self.bad.get(session_id):
                raise CorruptEventError(session_id, event.seq, "JSON is malformed")
            yield event

    def tail(self, session_id: str, after_seq: int, *, timeout: float | None = None) -> list[Event]:
        events = super().tail(session_id, after_seq, timeout=timeout)
        bad = self.bad.get(session_id)
        if any(event.seq == bad for event in events):  # the whole batch fails
            raise CorruptEventError(session_id, bad, "JSON is malformed")
        return events


def _stream_error(frames: list[tuple[str, str]]) -> dict:
    assert frames[-1][0] == "stream-error", frames[-1:]
    return json.loads(frames[-1][1])["error"]


def test_a_corrupt_row_ends_streams_with_an_error_after_the_readable_events(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="universal_event.server")
    store = _CorruptStore()
    app = create_app(store, tokens=None, keepalive=0.3, tail_timeout=0.1)
    with ServerThread(app) as server:
        assert post_events(http, server.url, "cs", user_events(3, prefix="a")).is_success
        with http.stream("GET", f"{server.url}/sessions/cs/events") as live:
            chunks = live.iter_raw()
            body = _read(chunks, _through(2))
            assert post_events(http, server.url, "cs", user_events(1, prefix="b")).is_success
            # published live: the stream is on the feed
            body += _read(chunks, _through(3))
            store.bad["cs"] = 5  # seq 4 is fine, seq 5 will be corrupt
            # appended by "another process": the tail finds them, the feed cannot go on
            other = [
                UserMessageEvent(id=f"o{seq}", content=[], seq=seq, session_id="cs")
                for seq in (4, 5, 6)
            ]
            store.append("cs", other, expected_seq=4)
            body += _read(chunks, lambda body: False)  # until the server ends the stream
        frames = _frames(body)
        assert [json.loads(data)["seq"] for name, data in frames[:-1]] == [0, 1, 2, 3, 4]
        error = _stream_error(frames)
        assert (error["code"], error["session_id"], error["seq"]) == ("corrupt_event", "cs", 5)
        time.sleep(0.5)  # the tail would have reported several times by now
        live_reports = [r for r in caplog.records if "live stream ended" in r.getMessage()]
        assert len(live_reports) == 1

        # a new reader gets the good events before the bad seq, then the error
        fresh = http.get(f"{server.url}/sessions/cs/events", params={"after": "1"})
        frames = _frames(fresh.content)
        assert [json.loads(data)["seq"] for _, data in frames[:-1]] == [2, 3, 4]
        assert _stream_error(frames)["seq"] == 5
        # a client's decoder raises it, typed, with the events before it
        with pytest.raises(StreamError) as raised:
            SSEEventDecoder().feed_events(fresh.content)
        assert (raised.value.code, raised.value.session_id, raised.value.seq) == (
            "corrupt_event",
            "cs",
            5,
        )
        assert [event.seq for event in raised.value.events] == [2, 3, 4]

        # a write names it, in JSON
        response = post_events(http, server.url, "cs", user_events(1, prefix="new"))
        assert response.status_code == 500
        error = response.json()["error"]
        assert (error["code"], error["session_id"], error["seq"]) == ("corrupt_event", "cs", 5)


# ---------------------------------------------------------------- 5. ids and bodies


def test_an_id_sent_again_with_another_body_is_a_409_naming_id_and_seq(
    http: httpx.Client,
) -> None:
    store = MemoryStore()
    url = "/sessions/i/events"

    def message(text: str, **extra: object) -> bytes:
        fields: dict[str, object] = {"id": "X1", **extra}
        return encode(UserMessageEvent(content=[TextPart(text=text)], **fields))  # type: ignore[arg-type]

    with ServerThread(create_app(store, tokens=None)) as server:
        assert http.post(server.url + url, content=message("original")).is_success
        again = http.post(server.url + url, content=message("original", ts=123.0))
        assert again.json() == {"appended": 0, "duplicates": 1}  # a retry: ts does not count
        other = http.post(server.url + url, content=message("DIFFERENT"))
        assert other.status_code == 409
        error = other.json()["error"]
        assert (error["code"], error["event_id"], error["seq"]) == ("event_id_conflict", "X1", 0)
    # another process (or a restart) knows the bodies from the store
    with ServerThread(create_app(store, tokens=None)) as server:
        assert http.post(server.url + url, content=message("DIFFERENT")).status_code == 409
        assert http.post(server.url + url, content=message("original")).is_success
        # one request holding an id twice: the same body is a duplicate, another a 409
        twice = b"[" + message("new", id="X2") + b"," + message("new", id="X2") + b"]"
        assert http.post(server.url + url, content=twice).json()["duplicates"] == 1
        clash = b"[" + message("one", id="X3") + b"," + message("two", id="X3") + b"]"
        refused = http.post(server.url + url, content=clash)
        assert refused.status_code == 409 and refused.json()["error"]["event_id"] == "X3"
    assert [event.id for event in store.read("i")] == ["X1", "X2"]


def test_a_surface_intent_is_given_once_a_retry_may_leave_it_out(http: httpx.Client) -> None:
    store = MemoryStore()
    url = "/sessions/sv/events"
    with ServerThread(create_app(store, tokens=None)) as server:
        post_events(http, server.url, "sv", user_events(2, prefix="a"))
        replace = Surface(op="replace", start=0, end=1)
        summary = UserMessageEvent(id="sum", content=[TextPart(text="s")], surface=replace)
        assert http.post(server.url + url, content=encode(summary)).json()["appended"] == 1
        plain = UserMessageEvent(id="sum", content=[TextPart(text="s")])
        assert http.post(server.url + url, content=encode(plain)).json()["duplicates"] == 1
        hidden = UserMessageEvent(
            id="sum", content=[TextPart(text="s")], surface=Surface(op="hidden")
        )
        assert http.post(server.url + url, content=encode(hidden)).status_code == 409


def test_an_explicit_id_shaped_like_a_keyed_id_is_refused(http: httpx.Client) -> None:
    store = MemoryStore()
    with ServerThread(create_app(store, tokens=None)) as server:
        poison = UserMessageEvent(id="K4~0123456789ab-0", content=[])
        response = http.post(f"{server.url}/sessions/k/events", content=encode(poison))
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "reserved_event_id"
        keyed = post_events(
            http, server.url, "k", user_events(1, prefix="legit"), **{"Idempotency-Key": "K4"}
        )
        assert keyed.json()["appended"] == 1
        # events that carry ids are known by them; the key applies to those without
        assert store.latest_seq("k") == 0


# ---------------------------------------------------------------- 6 and 8. input and errors


def test_odd_requests_get_json_errors(http: httpx.Client) -> None:
    store = MemoryStore()
    with ServerThread(create_app(store, tokens=None)) as server:
        good = encode(UserMessageEvent(id="n", content=[]))
        newline = http.post(f"{server.url}/sessions/abc%0A/events", content=good)
        assert newline.status_code == 400
        assert newline.json()["error"]["code"] == "bad_session_id"
        read = http.get(f"{server.url}/sessions/abc%0A/events", params={"follow": "0"})
        assert read.status_code == 400

        missing = http.get(f"{server.url}/nowhere")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "not_found"
        wrong = http.delete(f"{server.url}/sessions/s/events")
        assert wrong.status_code == 405
        assert wrong.json()["error"]["code"] == "method_not_allowed"
        assert "GET" in wrong.headers["allow"]

        truncated = http.post(
            f"{server.url}/sessions/s/events",
            content=b'{"type": "user/message", ',
            headers={"content-type": "application/json"},
        )
        assert truncated.status_code == 400
        assert truncated.json()["error"]["code"] == "invalid_json"

        resume = http.get(f"{server.url}/sessions/s/events", headers={"Last-Event-ID": "x"})
        assert resume.status_code == 400
        message = resume.json()["error"]["message"]
        assert "Last-Event-ID" in message and "(at $)" not in message
    assert store.list_sessions() == []


# ---------------------------------------------------------------- 7. shutdown


def test_shutdown_ends_open_streams_cleanly_and_closes_the_store(tmp_path: Path) -> None:
    database = tmp_path / "sessions.db"
    with serve_process(f"sqlite:///{database}", extra=("--dev",)) as (process, base):
        with httpx.Client(timeout=10) as http:
            post_events(http, base, "sd", user_events(2, prefix="x"))

        async def watch() -> list[bytes]:
            async def one() -> bytes:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", int(base.rsplit(":")[-1])
                )
                writer.write(b"GET /sessions/sd/events HTTP/1.1\r\nHost: x\r\n\r\n")
                data = b""
                while b"id: 1\n" not in data:
                    data += await reader.read(65536)
                subscribed.append(1)
                while chunk := await asyncio.wait_for(reader.read(65536), 4):
                    data += chunk
                writer.close()
                return data

            subscribed: list[int] = []
            tasks = [asyncio.create_task(one()) for _ in range(5)]
            while len(subscribed) < 5:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)
            process.send_signal(signal.SIGTERM)
            return await asyncio.gather(*tasks)

        started = time.monotonic()
        bodies = asyncio.run(watch())
        process.wait(5)
        assert time.monotonic() - started < 4
        assert all(body.endswith(b"0\r\n\r\n") for body in bodies)  # a clean end
        assert process.stderr is not None
        errors = process.stderr.read()
        assert "Traceback" not in errors and "ERROR" not in errors, errors
    assert not Path(f"{database}-wal").exists()  # the store was closed
