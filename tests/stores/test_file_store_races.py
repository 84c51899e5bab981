"""Races and edges of the file stores (SQLite, JSONL): another process deleting or
re-creating a session at the worst moment, databases opened together, large events,
fork points, runtimes named late, long session ids.

The races are injected (a hook runs the other process's step at the exact point), so
every test is deterministic.
"""

from __future__ import annotations

import os
import sqlite3
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from universal_event.errors import (
    ConflictError,
    CorruptEventError,
    SessionNotFoundError,
    StoreError,
)
from universal_event.events import Event
from universal_event.stores import Store
from universal_event.stores import jsonl as jsonl_module
from universal_event.stores import sqlite as sqlite_module
from universal_event.stores.jsonl import JsonlStore
from universal_event.stores.sqlite import SqliteStore
from universal_event.testing import large_tool_result, sample_events

from .conftest import make_kit

FILE_BACKENDS = ["jsonl", "sqlite"]


def _file_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return make_kit(backend, request, tmp_path).make()


def _seqs(store: Store, session_id: str) -> list[int]:
    return [event.seq for event in store.read(session_id)]


# ---------------------------------------------------------------------- fork vs delete


def test_sqlite_fork_sees_its_source_deleted_just_before_it_or_not_at_all(
    tmp_path: Path,
) -> None:
    """Another process deletes the source as the fork starts: the fork finds no source
    (it reads it inside its write transaction), never commits a child without rows."""
    store, other = SqliteStore(tmp_path / "s.db"), SqliteStore(tmp_path / "s.db")
    store.append("p", sample_events("p", 0, 50), expected_seq=0)
    real = store._write_transaction

    def delete_first() -> Any:
        other.delete("p")  # the other process's delete, just before the fork's BEGIN
        return real()

    store._write_transaction = delete_first  # type: ignore[method-assign]
    with pytest.raises(SessionNotFoundError):
        store.fork("p", "child", upto_seq=40)
    store._write_transaction = real  # type: ignore[method-assign]
    assert store.latest_seq("child") == -1
    assert _seqs(store, "child") == []
    assert [info.session_id for info in store.list_sessions()] == []
    store.close()
    other.close()


def test_jsonl_fork_copies_the_source_it_opened_when_another_process_deletes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source is deleted once the fork has started: the child holds every event
    its header claims (the copy reads the file the fork opened)."""
    store, other = JsonlStore(tmp_path), JsonlStore(tmp_path)
    written = sample_events("p", 0, 50)
    store.append("p", written, expected_seq=0)
    real_uuid4 = jsonl_module.uuid.uuid4

    def delete_then_uuid4() -> Any:
        other.delete("p")  # runs as the fork names its temporary file
        return real_uuid4()

    monkeypatch.setattr(jsonl_module, "uuid", SimpleNamespace(uuid4=delete_then_uuid4))
    store.fork("p", "child", upto_seq=40)
    monkeypatch.undo()
    info = store.session_info("child")
    assert (info.event_count, info.fork_seq, info.parent_id) == (41, 40, "p")
    assert list(store.read("child")) == [
        msgspec.structs.replace(e, session_id="child") for e in written[:41]
    ]
    assert store.latest_seq("p") == -1
    store.close()
    other.close()


# ---------------------------------------------------------------------- fork points


@pytest.mark.parametrize("backend", FILE_BACKENDS)
def test_fork_refuses_a_point_below_minus_one(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = _file_store(backend, request, tmp_path)
    store.append("p", sample_events("p", 0, 10), expected_seq=0)
    for bad in (-2, -5, True):
        with pytest.raises(ValueError, match="cannot fork"):
            store.fork("p", "c", upto_seq=bad)  # type: ignore[arg-type]
    assert store.latest_seq("c") == -1
    assert [info.session_id for info in store.list_sessions()] == ["p"]
    store.append("c", sample_events("c", 0, 1), expected_seq=0)
    assert _seqs(store, "c") == [0]
    store.close()


@pytest.mark.parametrize("backend", FILE_BACKENDS)
def test_fork_at_minus_one_makes_no_session_so_the_id_can_be_forked_onto_again(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = _file_store(backend, request, tmp_path)
    store.append("p", sample_events("p", 0, 10), expected_seq=0)
    for _ in range(2):
        store.fork("p", "c", upto_seq=-1)
        assert store.latest_seq("c") == -1
        with pytest.raises(SessionNotFoundError):
            store.session_info("c")
    store.fork("p", "c", upto_seq=50)  # past the end: all of it
    info = store.session_info("c")
    assert (info.event_count, info.fork_seq, info.parent_id) == (10, 9, "p")
    with pytest.raises(ConflictError):
        store.fork("p", "c", upto_seq=-1)  # onto a session with events
    with pytest.raises(SessionNotFoundError):
        store.fork("missing", "d", upto_seq=-1)
    store.close()


def test_jsonl_fork_replaces_a_session_file_holding_no_event(tmp_path: Path) -> None:
    """A file with only a header (a first write cut short, or left by an older fork at
    -1) is no session: a fork onto its id takes its place."""
    store = JsonlStore(tmp_path)
    store.append("p", sample_events("p", 0, 5), expected_seq=0)
    store.append("c", sample_events("c", 0, 3), expected_seq=0)
    path = store._path("c")
    with open(path, "rb") as handle:
        header = handle.readline()
    path.write_bytes(header)
    assert store.latest_seq("c") == -1
    store.fork("p", "c", upto_seq=2)
    assert _seqs(store, "c") == [0, 1, 2]
    assert store.session_info("c").parent_id == "p"
    store.append("c", sample_events("c", 3, 1), expected_seq=3)  # the kept descriptor
    assert _seqs(store, "c") == [0, 1, 2, 3]
    store.close()


# ---------------------------------------------------------------------- SQLite opens


class _LockedAtFirst(sqlite3.Connection):
    """A connection whose ``journal_mode`` pragma fails at once while ``locked_for``
    lasts, as SQLite's does when another process opens the database at that moment."""

    locked_for = 3

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
        if sql.startswith("PRAGMA journal_mode") and _LockedAtFirst.locked_for > 0:
            _LockedAtFirst.locked_for -= 1
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
            raise error
        return super().execute(sql, *args)


def _open_while_locked(
    monkeypatch: pytest.MonkeyPatch, locked_for: int, busy_timeout: float, path: Path
) -> tuple[SqliteStore, list[float]]:
    real_connect = sqlite3.connect
    pauses: list[float] = []
    monkeypatch.setattr(_LockedAtFirst, "locked_for", locked_for)
    monkeypatch.setattr(
        sqlite3, "connect", lambda *a, **kw: real_connect(*a, factory=_LockedAtFirst, **kw)
    )
    monkeypatch.setattr(sqlite_module, "_pause", pauses.append, raising=False)
    try:
        return SqliteStore(path, busy_timeout=busy_timeout), pauses
    finally:
        monkeypatch.setattr(sqlite3, "connect", real_connect)


def test_sqlite_open_waits_out_a_database_locked_by_another_opener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, pauses = _open_while_locked(monkeypatch, 3, 30.0, tmp_path / "s.db")
    assert len(pauses) == 3
    assert store._conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    store.append("s", sample_events("s", 0, 2), expected_seq=0)
    assert _seqs(store, "s") == [0, 1]
    store.close()


def test_sqlite_open_gives_up_on_a_lock_after_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(StoreError, match="locked"):
        _open_while_locked(monkeypatch, 10**9, 0.05, tmp_path / "s.db")


# ---------------------------------------------------------------------- large events


def test_sqlite_reads_and_forks_large_events_in_bounded_memory(tmp_path: Path) -> None:
    """Pages are bounded by bytes, not only by rows: 40 events of 1 MB stream (and
    fork) holding a few of them at a time."""
    store = SqliteStore(tmp_path / "s.db", synchronous="OFF")
    size, count = 1024 * 1024, 40
    for seq in range(count):
        store.append("big", [large_tool_result("big", seq, size)], expected_seq=seq)
    tracemalloc.start()
    try:
        seen = 0
        for event in store.read("big"):
            seen += event.seq == seen
        _, read_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        store.fork("big", "copy", upto_seq=count - 1)
        _, fork_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == count
    # A decoded event of this text takes ~4 MB (non-ASCII str); all 40 would be 160.
    assert read_peak < 24 * size, f"read peaked at {read_peak / 1e6:.0f} MB"
    assert fork_peak < 24 * size, f"fork peaked at {fork_peak / 1e6:.0f} MB"
    assert store.session_info("copy").event_count == count
    assert [e.id for e in store.read("copy", 38)] == ["big-big-38", "big-big-39"]
    store.close()


def test_sqlite_pages_cut_by_bytes_read_back_whole_at_every_bound(tmp_path: Path) -> None:
    """Small, larger-than-a-fast-row and larger-than-a-page events mixed: every range
    reads back exactly, and a missing row after a large one is still named."""
    store = SqliteStore(tmp_path / "s.db", synchronous="OFF")
    written: list[Event] = []
    small_row = sqlite_module.PAGE_BYTES // 128
    for seq in range(300):
        if seq in (130, 131, 260):
            event = large_tool_result("m", seq, sqlite_module.PAGE_BYTES + 10)
        elif seq % 7 == 3:
            event = large_tool_result("m", seq, small_row * 2)
        else:
            event = sample_events("m", seq, 1)[0]
        written.append(event)
    for start in range(0, 300, 50):
        store.append("m", written[start : start + 50], expected_seq=start)
    assert list(store.read("m")) == written
    for start, end in [(0, 1), (3, 4), (125, 140), (129, 132), (255, 300), (259, 400)]:
        assert list(store.read("m", start, end)) == written[start:end], (start, end)
    with sqlite3.connect(store.path) as raw:
        raw.execute("DELETE FROM events WHERE session_id = 'm' AND seq IN (132, 299)")
    with pytest.raises(CorruptEventError) as info:
        list(store.read("m", 120))
    assert info.value.seq == 132
    with pytest.raises(CorruptEventError) as info:
        list(store.read("m", 250))
    assert info.value.seq == 299
    store.close()


# ---------------------------------------------------------------------- JSONL inode reuse


def _replace_in_place(path: Path, content: bytes) -> None:
    """What another process's delete and re-create amounts to when the file system
    gives the new file the old inode (ext4 does, at once): other bytes, same inode."""
    inode = path.stat().st_ino
    path.write_bytes(content)
    assert path.stat().st_ino == inode


def test_jsonl_reader_notices_a_session_recreated_on_the_same_inode(tmp_path: Path) -> None:
    reader = JsonlStore(tmp_path / "store")
    writer = JsonlStore(tmp_path / "store")
    writer.append("s", sample_events("s", 0, 100), expected_seq=0)
    assert len(list(reader.read("s"))) == 100  # remembers where seq 99 ends
    again = [
        msgspec.structs.replace(e, id=f"{e.id}-again-{'z' * (e.seq % 37)}")
        for e in sample_events("s", 0, 300)
    ]
    elsewhere = JsonlStore(tmp_path / "elsewhere")
    elsewhere.append("s", again, expected_seq=0)
    _replace_in_place(reader._path("s"), elsewhere._path("s").read_bytes())
    assert reader.tail("s", 99, timeout=0) == again[100:]
    assert list(reader.read("s", 250)) == again[250:]
    for store in (reader, writer, elsewhere):
        store.close()


def test_jsonl_append_never_trusts_a_position_of_a_recreated_file(tmp_path: Path) -> None:
    """Same inode and same size, but fewer events: the append must see them (no gap)."""
    reader = JsonlStore(tmp_path / "store")
    writer = JsonlStore(tmp_path / "store")
    writer.append("s", sample_events("s", 0, 100), expected_seq=0)
    writer.close()
    assert len(list(reader.read("s"))) == 100
    path = reader._path("s")
    size = path.stat().st_size
    elsewhere = JsonlStore(tmp_path / "elsewhere")
    fewer = sample_events("s", 0, 50)
    elsewhere.append("s", fewer[:49], expected_seq=0)
    grown = elsewhere._path("s").stat().st_size
    pad = size - grown - len(msgspec.json.encode(fewer[49])) - 1
    last = msgspec.structs.replace(fewer[49], id=fewer[49].id + "p" * pad)
    elsewhere.append("s", [last], expected_seq=49)
    _replace_in_place(path, elsewhere._path("s").read_bytes())
    assert path.stat().st_size == size
    with pytest.raises(ConflictError) as info:
        reader.append("s", sample_events("s", 100, 1), expected_seq=100)
    assert info.value.actual_seq == 50
    reader.append("s", sample_events("s", 50, 1), expected_seq=50)
    assert _seqs(JsonlStore(tmp_path / "store"), "s") == list(range(51))
    reader.close()
    elsewhere.close()


# ---------------------------------------------------------------------- runtime


@pytest.mark.parametrize("backend", FILE_BACKENDS)
def test_runtime_is_the_first_one_named_even_after_the_first_batch(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = _file_store(backend, request, tmp_path)
    events = sample_events("r", 0, 6)
    anonymous = [msgspec.structs.replace(e, source=None) for e in events]
    store.append("r", anonymous[:2], expected_seq=0)
    assert store.session_info("r").runtime is None
    store.append("r", anonymous[2:3], expected_seq=2)
    assert store.session_info("r").runtime is None
    store.append("r", events[3:4], expected_seq=3)
    assert store.session_info("r").runtime == "anthropic"
    later = sample_events("r", 4, 2, runtime="codex")
    store.append("r", later, expected_seq=4)
    assert store.session_info("r").runtime == "anthropic"
    assert [info.runtime for info in store.list_sessions()] == ["anthropic"]
    store.fork("r", "f", upto_seq=1)
    assert store.session_info("f").runtime is None  # its own events name none
    store.fork("r", "g", upto_seq=3)
    assert store.session_info("g").runtime == "anthropic"
    store.delete("r")
    store.append("r", sample_events("r", 0, 1, runtime="codex"), expected_seq=0)
    assert store.session_info("r").runtime == "codex"
    store.close()


# ---------------------------------------------------------------------- long ids


def test_jsonl_long_session_ids_work_and_are_listed(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    long_ids = ["x" * 300, "é/" * 1500, "y" * 9000, "z" * 194]
    for session in long_ids:
        store.append(session, sample_events(session, 0, 2), expected_seq=0)
        assert _seqs(store, session) == [0, 1]
    (tmp_path / "a+b.jsonl").write_bytes(b"a user's own file\n")
    assert all(len(p.name) <= 255 for p in tmp_path.iterdir())
    assert [info.session_id for info in store.list_sessions()] == sorted(long_ids)
    store.fork(long_ids[2], long_ids[1] + "-fork", upto_seq=0)
    assert _seqs(store, long_ids[1] + "-fork") == [0]
    for session in long_ids:
        store.delete(session)
        assert store.latest_seq(session) == -1
    assert [info.session_id for info in store.list_sessions()] == [long_ids[1] + "-fork"]
    reopened = JsonlStore(tmp_path)
    assert reopened.session_info(long_ids[1] + "-fork").fork_seq == 0
    store.close()
    reopened.close()


def test_jsonl_hashed_name_of_another_session_is_not_listed(tmp_path: Path) -> None:
    """A hashed file whose header names a session hashing elsewhere is skipped."""
    store = JsonlStore(tmp_path)
    store.append("q" * 300, sample_events("q" * 300, 0, 1), expected_seq=0)
    os.rename(store._path("q" * 300), tmp_path / "qqq+0000.jsonl")
    assert store.list_sessions() == []
    store.close()
