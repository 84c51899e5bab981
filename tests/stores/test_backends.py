"""What each backend promises beyond the shared suite: URLs, schema, append-only rows,
migrations, bounded-memory reads."""

from __future__ import annotations

import os
import sqlite3
import time
import tracemalloc
from pathlib import Path

import pytest

from universal_event.errors import StoreError, StoreNotFoundError, StoreURLError
from universal_event.stores import MemoryStore, open_store
from universal_event.stores.jsonl import JsonlStore
from universal_event.stores.sqlite import SqliteStore
from universal_event.testing import sample_events

from .conftest import POSTGRES_URL, StoreKit, make_kit, new_schema


def test_open_store_urls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.chdir(tmp_path)
    assert isinstance(open_store("memory:"), MemoryStore)
    assert isinstance(MemoryStore.from_url("memory:"), MemoryStore)  # as every backend
    with pytest.raises(StoreURLError, match="no path"):
        MemoryStore.from_url("memory:///x")
    jsonl = open_store(f"jsonl://{tmp_path}/j")
    assert isinstance(jsonl, JsonlStore) and jsonl.directory == tmp_path / "j"
    relative = open_store("sqlite:///./rel/x.db")
    assert isinstance(relative, SqliteStore) and relative.path == Path("rel/x.db")
    assert (tmp_path / "rel" / "x.db").exists()
    absolute = open_store(f"sqlite://{tmp_path}/abs.db")
    assert isinstance(absolute, SqliteStore) and absolute.path == tmp_path / "abs.db"
    relative_jsonl = open_store("jsonl:///./jr")
    assert isinstance(relative_jsonl, JsonlStore) and (tmp_path / "jr").is_dir()
    with pytest.raises(ValueError, match="unknown store URL"):
        open_store("redis://x")
    for store in (relative, absolute):
        store.close()
    request.getfixturevalue("postgres_url")
    schema = new_schema(request.getfixturevalue("postgres_schemas"))
    from universal_event.stores.postgres import PostgresStore

    for scheme in ("postgresql", "postgres"):
        url = POSTGRES_URL.replace("postgresql", scheme, 1) + f"?schema={schema}"
        store = open_store(url)
        assert isinstance(store, PostgresStore) and store.schema == schema
        store.close()


def test_sqlite_is_wal_with_versioned_schema(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    SqliteStore(path).close()
    SqliteStore(path).close()  # a second open does not migrate again
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert raw.execute("SELECT version FROM schema_version").fetchall() == [(1,)]
        columns = [row[1] for row in raw.execute("PRAGMA table_info(events)")]
        assert columns == ["session_id", "seq", "type", "ts", "payload"]
        primary = [row[1] for row in raw.execute("PRAGMA table_info(events)") if row[5]]
        assert primary == ["session_id", "seq"]
        raw.execute("INSERT INTO schema_version VALUES (2, 0)")
    with pytest.raises(StoreError, match="newer"):
        SqliteStore(path)


def test_sqlite_event_type_column(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    store = SqliteStore(path)
    store.append("s", sample_events("s", 0, 3), expected_seq=0)
    with sqlite3.connect(path) as raw:
        rows = raw.execute("SELECT seq, type, ts FROM events ORDER BY seq").fetchall()
    assert [(seq, kind) for seq, kind, _ in rows] == [
        (0, "session/start"),
        (1, "user/message"),
        (2, "assistant/chunk"),
    ]
    assert [ts for *_, ts in rows] == [e.ts for e in sample_events("s", 0, 3)]


def _exercise(store: object) -> None:
    """Every write path: create, append, conflict, fork, delete."""
    store.append("a", sample_events("a", 0, 5), expected_seq=0)  # type: ignore[attr-defined]
    store.append("a", sample_events("a", 5, 5), expected_seq=5)  # type: ignore[attr-defined]
    store.fork("a", "b", upto_seq=3)  # type: ignore[attr-defined]
    store.append("b", sample_events("b", 4, 2), expected_seq=4)  # type: ignore[attr-defined]
    store.delete("a")  # type: ignore[attr-defined]
    store.append("a", sample_events("a", 0, 1), expected_seq=0)  # type: ignore[attr-defined]


def test_sqlite_never_updates_event_rows(tmp_path: Path) -> None:
    """A trigger that aborts any UPDATE of the events table does not stop the store."""
    path = tmp_path / "x.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute(
            "CREATE TRIGGER no_update BEFORE UPDATE ON events "
            "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"
        )
    store = SqliteStore(path)
    _exercise(store)
    assert store.latest_seq("b") == 5


def test_postgres_never_updates_event_rows_and_migrates_once(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    import psycopg

    store = make_kit("postgresql", request, tmp_path).make()
    schema = store.schema  # type: ignore[attr-defined]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as raw:
        raw.execute(
            f'CREATE FUNCTION "{schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS '
            "$$ BEGIN RAISE EXCEPTION 'events are append-only'; END $$"
        )
        raw.execute(
            f'CREATE TRIGGER no_update BEFORE UPDATE ON "{schema}".events '
            f'FOR EACH ROW EXECUTE FUNCTION "{schema}".refuse()'
        )
    _exercise(store)
    store.close()
    from universal_event.stores.postgres import PostgresStore

    again = PostgresStore(POSTGRES_URL, schema=schema)
    assert again.latest_seq("b") == 5
    again.close()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as raw:
        versions = raw.execute(f'SELECT version FROM "{schema}".schema_version').fetchall()
        assert versions == [(1,)]
        kind = raw.execute(
            "SELECT data_type FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = 'events' AND column_name = 'payload'",
            (schema,),
        ).fetchone()
        assert kind == ("bytea",)


def test_postgres_refused_connection_is_a_store_error_at_once() -> None:
    """Nothing listens: a typed error with libpq's reason at once, not after the pool's
    start-up timeout."""
    from universal_event.stores.postgres import PostgresStore

    started = time.monotonic()
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as info:
        PostgresStore("postgresql://postgres@127.0.0.1:1/test")
    assert "Connection refused" in str(info.value)
    assert time.monotonic() - started < 3


def test_postgres_rejected_connection_says_why(postgres_url: str) -> None:
    """The server answers but refuses (no such database): its reason, at once."""
    from universal_event.stores.postgres import PostgresStore

    url = postgres_url.rsplit("/", 1)[0] + "/ue_no_such_database"
    started = time.monotonic()
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as info:
        PostgresStore(url)
    assert 'database "ue_no_such_database" does not exist' in str(info.value)
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "postgresql"])
def test_read_streams_in_bounded_memory(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Streaming a long session holds a page at a time, not the session."""
    kit: StoreKit = make_kit(backend, request, tmp_path)
    store = kit.make()
    total, batch = 40_000, 5_000
    for start in range(0, total, batch):
        store.append("long", sample_events("long", start, batch), expected_seq=start)
    tracemalloc.start()
    try:
        count = 0
        for event in store.read("long"):
            count += event.seq == count
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        everything = list(store.read("long", 0, 10_000))
        _, peak_of_a_quarter = tracemalloc.get_traced_memory()
        del everything
    finally:
        tracemalloc.stop()
    store.close()
    assert count == total, "events out of order or missing"
    # Holding a quarter of the session costs more than streaming all of it.
    assert peak < peak_of_a_quarter / 2, (peak, peak_of_a_quarter)
    assert peak < 4 * 1024 * 1024, f"streaming peaked at {peak / 1e6:.1f} MB"


def _store_raw_event(backend: str, store: object, session: str, payload: bytes) -> None:
    """Add one stored event behind the store's back (as a newer writer would)."""
    import json

    seq = json.loads(payload)["seq"]
    if backend == "jsonl":
        assert isinstance(store, JsonlStore)
        with open(store.directory / f"{session}.jsonl", "ab") as handle:
            handle.write(payload + b"\n")
        return
    if backend == "sqlite":
        assert isinstance(store, SqliteStore)
        with sqlite3.connect(store.path) as raw:
            raw.execute(
                "INSERT INTO events VALUES (?, ?, 'future/thing', 0, ?)", (session, seq, payload)
            )
            raw.execute(
                "UPDATE sessions SET event_count = event_count + 1 WHERE session_id = ?", (session,)
            )
        return
    import psycopg

    schema = store.schema  # type: ignore[attr-defined]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(
            f'INSERT INTO "{schema}".events VALUES (%s, %s, %s, 0, %s)',
            (session, seq, "future/thing", payload),
        )
        conn.execute(
            f'UPDATE "{schema}".sessions SET event_count = event_count + 1 WHERE session_id = %s',
            (session,),
        )


@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "postgresql"])
def test_unknown_event_type_mid_session_reads_back_as_native_unknown(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The batched read falls back to the codec's full path for a batch holding an event
    type this version does not know, and goes on batching after it."""
    from universal_event.events import NativeUnknownEvent

    store = make_kit(backend, request, tmp_path).make()
    written = sample_events("s", 0, 200)
    store.append("s", written, expected_seq=0)
    future = b'{"type":"future/thing","seq":200,"id":"s-ev-200","session_id":"s","ts":1.5,"x":[1]}'
    _store_raw_event(backend, store, "s", future)
    later = sample_events("s", 201, 1100)
    store.append("s", later, expected_seq=201)
    read = list(store.read("s"))
    assert [e.seq for e in read] == list(range(1301))
    unknown = read[200]
    assert isinstance(unknown, NativeUnknownEvent) and unknown.native_type == "future/thing"
    assert unknown.payload == {**unknown.payload, "x": [1]}
    assert read[:200] == written and read[201:] == later
    assert list(store.read("s", 150, 260)) == read[150:260]
    store.close()


def test_jsonl_append_after_another_store_deleted_and_recreated_the_session(
    tmp_path: Path,
) -> None:
    """A store keeps session files open between appends; a file deleted (and created
    again) by another store is noticed, and no append goes to the unlinked one."""
    first, second = JsonlStore(tmp_path), JsonlStore(tmp_path)
    first.append("s", sample_events("s", 0, 3), expected_seq=0)
    second.delete("s")
    from universal_event.errors import ConflictError

    with pytest.raises(ConflictError):
        first.append("s", sample_events("s", 3, 1), expected_seq=3)
    second.append("s", sample_events("s", 0, 2), expected_seq=0)
    first.append("s", sample_events("s", 2, 2), expected_seq=2)
    assert [e.seq for e in second.read("s")] == [0, 1, 2, 3]
    first.close()
    second.close()


def test_jsonl_fsyncs_each_checkpoint_after_writing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint (one ``append``) is on disk before it returns: the file is fsynced
    after its lines are written, and a new file's directory entry too."""
    synced: list[tuple[int, int]] = []  # (inode, size at fsync time)
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        stat = os.fstat(fd)
        synced.append((stat.st_ino, stat.st_size))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    store = JsonlStore(tmp_path)
    store.append("s", sample_events("s", 0, 3), expected_seq=0)
    file = tmp_path / "s.jsonl"
    assert len(synced) == 2
    assert synced[0] == (file.stat().st_ino, file.stat().st_size)  # after the write, all of it
    assert synced[1][0] == tmp_path.stat().st_ino  # the new file's directory entry
    synced.clear()
    store.append("s", sample_events("s", 3, 2), expected_seq=3)
    assert synced == [(file.stat().st_ino, file.stat().st_size)]
    store.close()

    synced.clear()
    unsynced = JsonlStore(tmp_path / "fast", fsync=False)
    unsynced.append("s", sample_events("s", 0, 3), expected_seq=0)
    unsynced.close()
    assert synced == []


@pytest.mark.parametrize("sizes", [(1, 2, 3, 129), (1003,), (128, 127, 4)])
def test_batches_of_every_size_read_back_whole_and_in_order(
    kit: StoreKit, sizes: tuple[int, ...]
) -> None:
    """SQLite writes batches as multi-row INSERTs in chunks (1, 2, 3, multiples of 4 up
    to 128): batches across those boundaries must land whole, in order, once."""
    from universal_event.errors import ConflictError
    from universal_event.testing import sample_events

    store = kit.make()
    start = 0
    for size in sizes:
        store.append("chunks", sample_events("chunks", start, size), expected_seq=start)
        start += size
    events = list(store.read("chunks"))
    assert [e.seq for e in events] == list(range(start))
    assert events == sample_events("chunks", 0, start)
    with pytest.raises(ConflictError):
        store.append("chunks", sample_events("chunks", start - 1, 130), expected_seq=start - 1)
    assert store.latest_seq("chunks") == start - 1
    store.close()


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_must_exist_refuses_a_missing_file_store_and_creates_nothing(
    tmp_path: Path, scheme: str
) -> None:
    url = f"{scheme}:///{tmp_path}/absent/store"
    with pytest.raises(StoreNotFoundError) as info:
        open_store(url, must_exist=True)
    assert info.value.url == url and url in str(info.value)
    assert not (tmp_path / "absent").exists()
    store = open_store(url)  # writing opens (and creates) it
    store.append("s", sample_events("s", 0, 2), expected_seq=0)
    store.close()
    again = open_store(url, must_exist=True)
    assert [e.seq for e in again.read("s")] == [0, 1]
    again.close()


def test_must_exist_does_not_apply_to_memory() -> None:
    assert isinstance(open_store("memory:", must_exist=True), MemoryStore)


_LIVE_WRITER = """
import sys, time
from universal_event import SessionLog
from universal_event.events import TurnStartEvent
from universal_event.stores import open_store

log = SessionLog(open_store(sys.argv[1]), "busy")  # live: this process writes it
log.append(TurnStartEvent(turn_id="t1"))
log.checkpoint()
print("ready", flush=True)
time.sleep(60)
"""


def test_repair_refuses_a_session_another_process_is_writing(durable_kit: StoreKit) -> None:
    """A run in another process holds the session's live lock: a repair from here would
    close its turn under it (and make its next checkpoint fail, losing what it had not
    stored). Once that process is gone, however it ended, repair goes ahead."""
    import subprocess
    import sys

    from universal_event.errors import LiveSessionError
    from universal_event.repair import repair

    store = durable_kit.make()
    url = durable_kit.url_of(store)
    writer = subprocess.Popen(
        [sys.executable, "-c", _LIVE_WRITER, url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        with pytest.raises(LiveSessionError, match="another process"):
            repair(store, "busy")
        assert store.latest_seq("busy") == 0
    finally:
        writer.kill()
        writer.wait()
    # The system drops a dead process's lock at once; PostgreSQL when the server sees
    # its connection close (a moment later).
    deadline = time.monotonic() + 10
    while store.has_live_writer("busy") and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.05)
    closed = repair(store, "busy")
    assert [e.__struct_config__.tag for e in closed][0] == "turn/end"
    store.close()


def test_live_locks_leave_no_file_behind_and_refuse_another_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    from universal_event.stores._base import LiveLocks

    locks = LiveLocks(tmp_path / ".live")
    release = locks.hold("s/1")
    assert release is not None
    elsewhere = (
        "import sys; from pathlib import Path; from universal_event.stores._base import "
        "LiveLocks; sys.exit(LiveLocks(Path(sys.argv[1])).hold('s/1') is not None)"
    )
    other_process = [sys.executable, "-c", elsewhere, str(tmp_path / ".live")]
    assert subprocess.run(other_process, check=False).returncode == 0  # refused there
    assert locks.held_elsewhere("s/1")
    release()
    assert not locks.held_elsewhere("s/1")
    assert list((tmp_path / ".live").iterdir()) == []
    again = locks.hold("s/1")
    assert again is not None
    again()


def test_live_logs_of_one_session_in_one_process_share_its_lock(tmp_path: Path) -> None:
    """Two live logs of one session here (threads, two store objects): the lock is held
    until both are closed. The second used to hold nothing (a flock through another
    descriptor fails), so closing the first left it writing unlocked, and a repair
    from another process went through."""
    from universal_event.log import SessionLog
    from universal_event.stores._base import LiveLocks

    for make in (
        lambda: SqliteStore(tmp_path / "s.db"),
        lambda: JsonlStore(tmp_path / "j"),
    ):
        store = make()
        first = SessionLog(store, "s")
        second = SessionLog(make(), "s")  # another store object, same files
        assert store.has_live_writer("s")
        first.close()
        assert store.has_live_writer("s")  # the second still writes it
        first.close()  # closing again counts once
        assert store.has_live_writer("s")
        second.close()
        assert not store.has_live_writer("s")
    locks = LiveLocks(tmp_path / "locks")
    releases = [locks.hold("x"), locks.hold("x")]
    assert all(releases) and locks.held_elsewhere("x")
    for release in releases:
        assert release is not None
        release()
    assert not locks.held_elsewhere("x")


def test_live_locks_hold_a_session_whose_id_is_too_long_for_a_file_name(tmp_path: Path) -> None:
    """The lock file is named as the JSONL store names a session's file: a long id is
    shortened and hashed, so its lock can be made (it used to fail, silently: no lock)."""
    from universal_event.stores._base import LiveLocks, session_file_stem

    locks = LiveLocks(tmp_path)
    long_id, other = "s" * 600, "s" * 599 + "t"
    assert len(session_file_stem(long_id)) < 200
    release = locks.hold(long_id)
    assert release is not None and locks.held_elsewhere(long_id)
    other_release = locks.hold(other)  # another long id: another lock
    assert other_release is not None
    release()
    other_release()
    assert not locks.held_elsewhere(long_id)
