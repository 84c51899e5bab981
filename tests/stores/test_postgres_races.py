"""PostgreSQL store: races and limits.

A delete against an append in flight, a fork against a delete of its source, reads that
hold no pool connection while the reader has the events, reads bounded in bytes, fork
points, session ids PostgreSQL cannot store. Races are made deterministic with a second
connection holding a lock (a write in flight) and a watcher that waits until the store's
statement is blocked on it.
"""

from __future__ import annotations

import gc
import random
import string
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("psycopg")

import msgspec
import psycopg

from universal_event.codec import encode
from universal_event.errors import ConflictError, CorruptEventError, SessionNotFoundError
from universal_event.events import Event, EventBase
from universal_event.stores._base import READ_PAGE_SIZE, event_type
from universal_event.stores.postgres import PostgresStore
from universal_event.testing import large_tool_result, sample_events

from .conftest import new_schema


def encode_for(session_id: str, event: EventBase) -> bytes:
    """The stored bytes of ``event`` re-homed into ``session_id`` (rows written here
    directly, as a store would)."""
    if event.session_id != session_id:
        event = msgspec.structs.replace(event, session_id=session_id)
    return encode(event)


StoreMaker = Callable[..., PostgresStore]


@pytest.fixture
def make_store(postgres_url: str, postgres_schemas: list[str]) -> Iterator[StoreMaker]:
    made: list[PostgresStore] = []

    def make(**options: Any) -> PostgresStore:
        options.setdefault("connect_timeout", 5)
        store = PostgresStore(postgres_url, schema=new_schema(postgres_schemas), **options)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


class _Running:
    """A call on another thread; what it returned or raised."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = call()
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 30) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the call did not finish"


def _blocked(url: str, statement: str, timeout: float = 10) -> bool:
    """Whether a backend comes to wait on a lock while running ``statement`` (a prefix
    of its text) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND starts_with(query, %s)",
                (statement,),
            ).fetchone()
            if row and row[0]:
                return True
            time.sleep(0.01)
    return False


def _rows(url: str, schema: str, session_id: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as raw:
        found = raw.execute(
            f'SELECT seq FROM "{schema}".events WHERE session_id = %s ORDER BY seq', (session_id,)
        ).fetchall()
    return [seq for (seq,) in found]


def _insert(raw: psycopg.Connection[Any], schema: str, events: list[Event]) -> None:
    for event in events:
        raw.execute(
            f'INSERT INTO "{schema}".events (session_id, seq, type, ts, payload) '
            "VALUES (%s, %s, %s, %s, %s)",
            (
                event.session_id,
                event.seq,
                event_type(event),
                event.ts,
                encode_for(event.session_id, event),
            ),
        )


# ---------------------------------------------------------------------- delete / append


def test_delete_waits_for_an_append_in_flight_and_leaves_no_rows(
    make_store: StoreMaker, postgres_url: str
) -> None:
    """An append committing while a delete runs: no row of it is left behind, and the
    id can be used again (before: its rows stayed, latest_seq said -1 and every append
    at 0 conflicted)."""
    store = make_store()
    schema = store.schema
    store.append("x", sample_events("x", 0, 5), expected_seq=0)
    with psycopg.connect(postgres_url) as writer:
        # Another process's append of seqs 5..7, in flight: it holds the session row.
        writer.execute(
            f'UPDATE "{schema}".sessions SET event_count = 8 '
            "WHERE session_id = %s AND event_count = 5",
            ("x",),
        )
        _insert(writer, schema, sample_events("x", 5, 3))
        deleting = _Running(lambda: store.delete("x"))
        assert _blocked(postgres_url, f'DELETE FROM "{schema}".sessions')
        writer.commit()
    deleting.join()
    assert deleting.error is None
    assert _rows(postgres_url, schema, "x") == []
    assert store.latest_seq("x") == -1
    assert "x" not in [info.session_id for info in store.list_sessions()]
    store.append("x", sample_events("x", 0, 2), expected_seq=0)
    assert [event.seq for event in store.read("x")] == [0, 1]


def test_an_append_behind_a_delete_conflicts_and_adds_nothing(
    make_store: StoreMaker, postgres_url: str
) -> None:
    """The other order: the delete holds the session row first; the append waiting for
    it then finds no row at its seq and conflicts, and nothing is left."""
    store = make_store()
    schema = store.schema
    store.append("x", sample_events("x", 0, 5), expected_seq=0)
    with psycopg.connect(postgres_url) as holder:
        holder.execute(
            f'SELECT 1 FROM "{schema}".sessions WHERE session_id = %s FOR UPDATE', ("x",)
        )
        deleting = _Running(lambda: store.delete("x"))
        assert _blocked(postgres_url, f'DELETE FROM "{schema}".sessions')
        appending = _Running(lambda: store.append("x", sample_events("x", 5, 3), expected_seq=5))
        assert _blocked(postgres_url, f'WITH s AS (UPDATE "{schema}".sessions')
        holder.commit()
    deleting.join()
    appending.join()
    assert deleting.error is None
    assert isinstance(appending.error, ConflictError)
    assert _rows(postgres_url, schema, "x") == []
    store.append("x", sample_events("x", 0, 1), expected_seq=0)
    assert store.latest_seq("x") == 0


def test_delete_clears_rows_left_without_a_session_row(
    make_store: StoreMaker, postgres_url: str
) -> None:
    """Rows left by the old race (no session row) are cleared by a delete, which makes
    the id usable again."""
    store = make_store()
    with psycopg.connect(postgres_url) as raw:
        _insert(raw, store.schema, sample_events("ghost", 5, 3))
    with pytest.raises(ConflictError):
        store.append("ghost", sample_events("ghost", 0, 6), expected_seq=0)
    store.delete("ghost")
    assert _rows(postgres_url, store.schema, "ghost") == []
    store.append("ghost", sample_events("ghost", 0, 6), expected_seq=0)
    assert store.latest_seq("ghost") == 5


def test_delete_leaves_a_session_made_again_meanwhile(
    make_store: StoreMaker, postgres_url: str
) -> None:
    """A session made (not yet committed) while its id is deleted is left whole."""
    store = make_store()
    store.append("x", sample_events("x", 0, 2), expected_seq=0)
    store.delete("x")
    with psycopg.connect(postgres_url) as maker:
        maker.execute(
            f'INSERT INTO "{store.schema}".sessions '
            "(session_id, runtime, created, last_activity, event_count) "
            "VALUES (%s, 'anthropic', 0, 0, 3)",
            ("x",),
        )
        _insert(maker, store.schema, sample_events("x", 0, 3))
        store.delete("x")  # sees no session, must not wait or touch the new rows
        maker.commit()
    assert [event.seq for event in store.read("x")] == [0, 1, 2]


# ---------------------------------------------------------------------- fork / delete


def test_fork_waits_for_a_delete_of_its_source(make_store: StoreMaker, postgres_url: str) -> None:
    """A fork while its source is being deleted waits for the delete, then finds no
    source (before: it copied from a source it had read before the delete, and could
    commit a child claiming rows it never got)."""
    store = make_store()
    schema = store.schema
    store.append("p", sample_events("p", 0, 50), expected_seq=0)
    with psycopg.connect(postgres_url) as deleter:
        deleter.execute(f'DELETE FROM "{schema}".sessions WHERE session_id = %s', ("p",))
        deleter.execute(f'DELETE FROM "{schema}".events WHERE session_id = %s', ("p",))
        forking = _Running(lambda: store.fork("p", "child", upto_seq=40))
        blocked = _blocked(postgres_url, f'SELECT runtime, event_count FROM "{schema}".sessions')
        deleter.commit()
    forking.join()
    assert blocked, "the fork did not wait for the delete of its source"
    assert isinstance(forking.error, SessionNotFoundError)
    assert store.latest_seq("child") == -1
    assert _rows(postgres_url, schema, "child") == []


def test_a_delete_of_the_source_waits_for_a_fork(
    make_store: StoreMaker, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete of the source arriving while a fork copies waits for it: the child is
    whole, and the source is gone after."""
    store = make_store()
    store.append("p", sample_events("p", 0, 50), expected_seq=0)
    copy = store._copy_events
    deleting: list[_Running] = []

    def copy_after_a_delete_came(*args: Any) -> int:
        deleting.append(_Running(lambda: store.delete("p")))
        assert _blocked(postgres_url, f'DELETE FROM "{store.schema}".sessions')
        return copy(*args)

    monkeypatch.setattr(store, "_copy_events", copy_after_a_delete_came)
    store.fork("p", "child", upto_seq=40)
    deleting[0].join()
    assert deleting[0].error is None
    assert [event.seq for event in store.read("child")] == list(range(41))
    info = store.session_info("child")
    assert (info.event_count, info.fork_seq, info.parent_id) == (41, 40, "p")
    assert store.latest_seq("p") == -1


def test_fork_never_claims_events_it_did_not_copy(
    make_store: StoreMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a fork looked at first, a delete of the source committed right after it
    leaves no child claiming rows it lacks (the audit's injection)."""
    store = make_store()
    store.append("p", sample_events("p", 0, 50), expected_seq=0)
    info = store.session_info

    def info_then_delete(session_id: str) -> Any:
        found = info(session_id)
        store.delete(session_id)
        return found

    monkeypatch.setattr(store, "session_info", info_then_delete)
    try:
        store.fork("p", "child", upto_seq=40)
    except SessionNotFoundError:
        pass
    monkeypatch.undo()
    read = list(store.read("child"))
    assert store.latest_seq("child") == len(read) - 1
    assert len(read) in (0, 41)


# ---------------------------------------------------------------------- fork points


def test_fork_points(make_store: StoreMaker, postgres_url: str) -> None:
    store = make_store()
    store.append("p", sample_events("p", 0, 10), expected_seq=0)
    with pytest.raises(ValueError, match="-2"):
        store.fork("p", "below", upto_seq=-2)
    store.fork("p", "none", upto_seq=-1)
    with psycopg.connect(postgres_url, autocommit=True) as raw:
        made = raw.execute(
            f'SELECT session_id FROM "{store.schema}".sessions WHERE session_id IN '
            "('below', 'none')"
        ).fetchall()
    assert made == []  # a fork copying nothing makes no session row
    store.append("none", sample_events("none", 0, 1), expected_seq=0)
    with pytest.raises(ConflictError):
        store.fork("p", "none", upto_seq=-1)  # onto an existing session
    store.fork("p", "past", upto_seq=50)
    info = store.session_info("past")
    assert (info.event_count, info.fork_seq) == (10, 9)
    with pytest.raises(SessionNotFoundError):
        store.fork("missing", "x", upto_seq=3)


# ---------------------------------------------------------------------- pool use by reads


@pytest.mark.parametrize("pool", [1, 2])
def test_store_calls_inside_a_read_loop(make_store: StoreMaker, pool: int) -> None:
    """From a pool of one, a read holds no connection while the reader has the events
    (before: past the first page it did, and any store call in the loop waited 30 s for
    PoolTimeout); from a larger pool it holds one, and the calls get another."""
    store = make_store(max_size=pool)
    count = 2 * READ_PAGE_SIZE + 500
    store.append("x", sample_events("x", 0, count), expected_seq=0)
    store.append("y", sample_events("y", 0, 3), expected_seq=0)
    began = time.monotonic()
    seen = 0
    for event in store.read("x"):
        assert event.seq == seen
        if event.seq in (READ_PAGE_SIZE + 200, 2 * READ_PAGE_SIZE + 100):
            assert store.latest_seq("x") == count - 1
            assert [e.seq for e in store.read("y")] == [0, 1, 2]
            store.append("y", sample_events("y", 3, 1), expected_seq=3)
            store.append("y", sample_events("y", 4, 1), expected_seq=4)
            store.delete("y")
            store.append("y", sample_events("y", 0, 3), expected_seq=0)
        seen += 1
    assert seen == count
    # A read dropped half way holds nothing either.
    dropped = store.read("x")
    for _ in range(READ_PAGE_SIZE + 10):
        next(dropped)
    assert store.latest_seq("x") == count - 1
    assert time.monotonic() - began < 20


@pytest.mark.parametrize("pool", [1, 4])
def test_damaged_row_past_the_first_page(
    make_store: StoreMaker, postgres_url: str, pool: int
) -> None:
    """A damaged row on a later page is CorruptEventError naming its seq, after the
    events before it (before, from a pool of one: the row-by-row fallback needed a
    second connection and the read ended in PoolTimeout). From a larger pool the read
    holds its connection, a page ahead in flight, and the fallback uses it."""
    store = make_store(max_size=pool)
    damaged = READ_PAGE_SIZE + 500
    store.append("x", sample_events("x", 0, 2 * READ_PAGE_SIZE + 500), expected_seq=0)
    with psycopg.connect(postgres_url, autocommit=True) as raw:
        raw.execute(
            f'UPDATE "{store.schema}".events SET payload = %s WHERE session_id = %s AND seq = %s',
            (b"\xff garbage", "x", damaged),
        )
    for start in (0, READ_PAGE_SIZE - 3, damaged - 1):
        seen: list[int] = []
        began = time.monotonic()
        with pytest.raises(CorruptEventError) as info:
            for event in store.read("x", start):
                seen.append(event.seq)
        assert time.monotonic() - began < 10
        assert info.value.seq == damaged
        assert seen == list(range(start, damaged))


# ---------------------------------------------------------------------- pages in bytes


def test_a_read_of_large_events_is_bounded_in_memory(make_store: StoreMaker) -> None:
    """Pages are bounded in bytes too (before: 1000 rows a page, so 24 events of 1 MB
    were one page, and with the page ahead and its decoding well over 100 MB)."""
    store = make_store()
    count = 24
    for seq in range(count):
        store.append("big", [large_tool_result("big", seq, 1024 * 1024)], expected_seq=seq)
    gc.collect()
    tracemalloc.start()
    try:
        seqs = [event.seq for event in store.read("big")]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seqs == list(range(count))
    assert peak < 64 * 1024 * 1024, f"peak {peak / 1e6:.0f} MB"


@pytest.mark.parametrize("pool", [1, 4])
def test_pages_of_mixed_sizes(
    make_store: StoreMaker, monkeypatch: pytest.MonkeyPatch, pool: int
) -> None:
    """Small and large rows mixed (large ones first on a page, last, in runs, at the
    end): every read gets the events written, and no page fetched passes the byte
    budget (unless it is one row). Smaller budgets than the shipped ones, same logic."""
    from universal_event.stores import postgres

    monkeypatch.setattr(postgres, "PAGE_BYTES", 200_000)
    monkeypatch.setattr(postgres, "FIRST_PLAN", (READ_PAGE_SIZE, 200_000 // READ_PAGE_SIZE))
    store = make_store(max_size=pool)
    count = 2 * READ_PAGE_SIZE + 300
    large = {0, 5, READ_PAGE_SIZE - 1, READ_PAGE_SIZE, 2 * READ_PAGE_SIZE + 299}
    large |= set(range(1500, 1540))  # a run: several large-rows pages
    large |= set(range(1700, 1900, 37))  # scattered ones
    written = [
        large_tool_result("m", seq, 20_000) if seq in large else sample_events("m", seq, 1)[0]
        for seq in range(count)
    ]
    for start in range(0, count, 500):
        store.append("m", written[start : start + 500], expected_seq=start)
    pages: list[int] = []
    take = store._take

    def measured(page: Any, *checked: Any) -> Any:
        payloads = take(page, *checked)
        pages.append(sum(len(payload or b"") for (payload,) in payloads))
        return payloads

    monkeypatch.setattr(store, "_take", measured)
    assert list(store.read("m")) == written
    largest = max(len(encode_for("m", event)) for event in written)
    assert max(pages) <= max(200_000, largest)
    for start, end in (
        (0, 1),
        (3, 9),
        (READ_PAGE_SIZE - 2, READ_PAGE_SIZE + 3),
        (1490, 1560),
        (1520, None),
        (count - 1, None),
        (count, None),
    ):
        assert list(store.read("m", start, end)) == written[start:end], (start, end)
    assert store.tail("m", count - 3, timeout=0) == written[-2:]
    store.fork("m", "copy", upto_seq=1600)
    copied = list(store.read("copy"))
    assert [(e.seq, type(e)) for e in copied] == [(e.seq, type(e)) for e in written[:1601]]
    assert store.session_info("copy").fork_seq == 1600


# ---------------------------------------------------------------------- session ids


def test_ids_postgresql_cannot_store_are_value_errors_before_any_query(
    make_store: StoreMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store()
    store.append("ok", sample_events("ok", 0, 2), expected_seq=0)

    def no_connection(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the database was asked")

    monkeypatch.setattr(store._pool, "connection", no_connection)
    for bad in ("a\x00b", "bad\udc80"):
        for call in _calls_with(store, bad):
            with pytest.raises(ValueError, match="session id"):
                call()


def _calls_with(store: PostgresStore, session_id: str) -> list[Callable[[], Any]]:
    return [
        lambda: store.append(session_id, sample_events(session_id, 0, 1), expected_seq=0),
        lambda: list(store.read(session_id)),
        lambda: store.latest_seq(session_id),
        lambda: store.session_info(session_id),
        lambda: store.delete(session_id),
        lambda: store.fork("ok", session_id, upto_seq=0),
        lambda: store.fork(session_id, "other", upto_seq=0),
    ]


def test_long_session_ids(make_store: StoreMaker, postgres_url: str) -> None:
    """An id past NOTIFY's 8000-byte payload works (the notice carries its hash), and
    tails in other processes still wake; one past the primary key index's limit is a
    ValueError naming the id."""
    store = make_store()
    watcher = PostgresStore(postgres_url, schema=store.schema, poll_interval=60)
    try:
        long_id = "y" * 9000
        store.append(long_id, sample_events(long_id, 0, 2), expected_seq=0)
        assert [e.seq for e in store.read(long_id)] == [0, 1]
        store.fork(long_id, long_id + "-f", upto_seq=0)
        assert store.latest_seq(long_id + "-f") == 0
        watcher.tail(long_id, 1, timeout=0)  # listening from here on
        waiting = _Running(lambda: watcher.tail(long_id, 1, timeout=20))
        time.sleep(0.2)
        began = time.monotonic()
        store.append(long_id, sample_events(long_id, 2, 1), expected_seq=2)
        waiting.join()
        assert [e.seq for e in waiting.result] == [2]
        assert time.monotonic() - began < 10  # woken by the notice, not by polling
        store.delete(long_id)
        assert store.latest_seq(long_id) == -1
    finally:
        watcher.close()
    rng = random.Random(7)
    noise = "".join(rng.choice(string.ascii_letters) for _ in range(3000))  # incompressible
    with pytest.raises(ValueError, match="too long"):
        store.append(noise, sample_events(noise, 0, 1), expected_seq=0)
    assert store.list_sessions() == [store.session_info(long_id + "-f")]
