"""Damaged stored data: typed errors naming session and seq; other sessions readable."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest

from universal_event.errors import CorruptEventError, StoreError
from universal_event.stores._base import DECODE_BATCH, READ_PAGE_SIZE
from universal_event.stores.jsonl import JsonlStore
from universal_event.stores.sqlite import SqliteStore
from universal_event.testing import sample_events

from ._writers import scripted_event
from .conftest import make_kit


def _fill(store: object, *sessions: str, count: int = 6) -> None:
    for session in sessions:
        store.append(session, sample_events(session, 0, count), expected_seq=0)  # type: ignore[attr-defined]


def _read_fails_at(store: object, session: str, seq: int) -> list[int]:
    """Read ``session``; it must fail with CorruptEventError at ``seq``. Returns the seqs
    read before the failure."""
    seen: list[int] = []
    with pytest.raises(CorruptEventError) as info:
        for event in store.read(session):  # type: ignore[attr-defined]
            seen.append(event.seq)
    assert info.value.session_id == session
    assert info.value.seq == seq
    assert repr(session) in str(info.value) and f"seq {seq}" in str(info.value)
    return seen


# ---------------------------------------------------------------------- JSONL


def _jsonl_path(directory: Path, session: str) -> Path:
    return directory / (quote(session, safe="") + ".jsonl")


def test_jsonl_garbage_line(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    _fill(store, "bad", "good")
    path = _jsonl_path(tmp_path, "bad")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[4] = b'{"type":"user/message","seq":3,"content":[{"type":"te\x00\n'  # seq 3's line
    path.write_bytes(b"".join(lines))
    assert _read_fails_at(store, "bad", 3) == [0, 1, 2]
    assert [e.seq for e in store.read("good")] == list(range(6))
    assert [info.session_id for info in store.list_sessions()] == ["bad", "good"]


def test_jsonl_duplicated_line_is_caught(tmp_path: Path) -> None:
    """A line copied twice (a botched manual edit) is not silently a second seq."""
    store = JsonlStore(tmp_path)
    _fill(store, "dup")
    path = _jsonl_path(tmp_path, "dup")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:4], lines[3], *lines[4:]]))
    assert _read_fails_at(store, "dup", 3) == [0, 1, 2]


def test_jsonl_file_truncated_mid_line_is_cut_by_the_next_write(tmp_path: Path) -> None:
    """Opening and reading leave a torn file as it is; the next append cuts the torn line
    (and only it) under the lock, then writes."""
    store = JsonlStore(tmp_path)
    _fill(store, "cut", count=10)
    path = _jsonl_path(tmp_path, "cut")
    data = path.read_bytes()
    torn = data[: len(data) - 25]  # the last line (seq 9) loses its end
    path.write_bytes(torn)
    reopened = JsonlStore(tmp_path)
    assert reopened.latest_seq("cut") == 8
    assert [e.seq for e in reopened.read("cut")] == list(range(9))
    assert reopened.session_info("cut").event_count == 9
    assert path.read_bytes() == torn
    reopened.append("cut", sample_events("cut", 9, 2), expected_seq=9)
    assert [e.seq for e in reopened.read("cut")] == list(range(11))
    assert path.read_bytes().startswith(torn[: torn.rindex(b"\n") + 1])


def test_jsonl_first_write_torn_after_the_header_is_cut_by_the_next_write(
    tmp_path: Path,
) -> None:
    """A crash during a session's first write can leave the header and part of seq 0 (or
    part of the header): the session reads as empty, and the next write starts it."""
    store = JsonlStore(tmp_path)
    _fill(store, "after-header", "in-header", count=1)
    for session, keep in (("after-header", -20), ("in-header", 10)):
        path = _jsonl_path(tmp_path, session)
        path.write_bytes(path.read_bytes()[:keep])
        reopened = JsonlStore(tmp_path)
        assert reopened.latest_seq(session) == -1
        assert list(reopened.read(session)) == []
        reopened.append(session, sample_events(session, 0, 3), expected_seq=0)
        assert [e.seq for e in reopened.read(session)] == [0, 1, 2]
    assert [info.event_count for info in JsonlStore(tmp_path).list_sessions()] == [3, 3]


def test_jsonl_torn_line_seen_by_a_live_store_is_ignored_then_cut_by_the_next_append(
    tmp_path: Path,
) -> None:
    store = JsonlStore(tmp_path)
    _fill(store, "torn")
    path = _jsonl_path(tmp_path, "torn")
    with open(path, "ab") as handle:
        handle.write(b'{"type":"user/message","seq":6,"id":"half')
    assert store.latest_seq("torn") == 5
    assert [e.seq for e in store.read("torn")] == list(range(6))
    store.append("torn", sample_events("torn", 6, 1), expected_seq=6)
    assert [e.seq for e in store.read("torn")] == list(range(7))
    assert b"half" not in path.read_bytes()


def test_jsonl_store_never_changes_a_foreign_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A user's own ``.jsonl`` files in the directory (no session header; the last line
    without its newline, one with no newline at all) are neither listed nor changed by
    opening, listing, reading, or trying to write that session; each names it."""
    foreign = {
        "capture": b'{"type":"thread.started"}\n{"type":"turn.completed","usage":{}}',
        "one-line": b'{"type":"thread.started"}',
        "notes": b"plain text\n",
    }
    for name, data in foreign.items():
        _jsonl_path(tmp_path, name).write_bytes(data)
    store = JsonlStore(tmp_path)
    _fill(store, "mine")
    assert [info.session_id for info in store.list_sessions()] == ["mine"]
    assert "'capture'" in caplog.text and "'notes'" in caplog.text
    for name, data in foreign.items():
        with pytest.raises(CorruptEventError) as info:
            store.append(name, sample_events(name, 0, 1), expected_seq=0)
        assert info.value.session_id == name
        for read in (lambda n=name: list(store.read(n)), lambda n=name: store.latest_seq(n)):
            with pytest.raises(CorruptEventError):
                read()
        assert _jsonl_path(tmp_path, name).read_bytes() == data, name
    assert [e.seq for e in store.read("mine")] == list(range(6))


def test_jsonl_one_damaged_session_leaves_the_others_usable(tmp_path: Path) -> None:
    """The last complete line of one session unreadable: opening the store, listing,
    reading and writing other sessions work; that session reads up to the damage, then
    raises naming it, and a write to it is refused without changing the file."""
    _fill(JsonlStore(tmp_path), "damaged", "good")
    path = _jsonl_path(tmp_path, "damaged")
    data = path.read_bytes()
    last = data.rindex(b"\n", 0, len(data) - 1) + 1  # seq 5's line
    damaged = data[:last] + data[last:].replace(b'{"type"', b'{"typ\x00e"', 1)
    path.write_bytes(damaged)
    store = JsonlStore(tmp_path)
    assert [info.session_id for info in store.list_sessions()] == ["good"]
    assert [e.seq for e in store.read("good")] == list(range(6))
    _fill(store, "other")
    assert [info.session_id for info in store.list_sessions()] == ["good", "other"]
    assert _read_fails_at(store, "damaged", 5) == [0, 1, 2, 3, 4]
    for attempt in (
        lambda: store.latest_seq("damaged"),
        lambda: store.append("damaged", sample_events("damaged", 6, 1), expected_seq=6),
    ):
        with pytest.raises(CorruptEventError) as info:
            attempt()
        assert (info.value.session_id, info.value.seq) == ("damaged", 5)
    assert path.read_bytes() == damaged
    # the command line prints what comes before the damage, then names it
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "universal_event", "events", "--session", "damaged"]
        + ["--store", f"jsonl:///{tmp_path}"],
        capture_output=True,
        check=False,
    )
    assert result.returncode == 1 and b"seq 5" in result.stderr
    assert len(result.stdout.splitlines()) == 5


def test_jsonl_truncated_in_the_middle(tmp_path: Path) -> None:
    """Bytes lost in the middle (not at the end): the damaged line is reported."""
    store = JsonlStore(tmp_path)
    _fill(store, "hole", "fine")
    path = _jsonl_path(tmp_path, "hole")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = lines[3][:20]  # seq 2 loses its end and its newline: runs into seq 3
    path.write_bytes(b"".join(lines))
    assert _read_fails_at(JsonlStore(tmp_path), "hole", 2) == [0, 1]
    assert len(list(JsonlStore(tmp_path).read("fine"))) == 6


def test_jsonl_bad_header(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    _fill(store, "headless", "fine")
    path = _jsonl_path(tmp_path, "headless")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"not json\n" + b"".join(lines[1:]))
    with pytest.raises(CorruptEventError) as info:
        list(store.read("headless"))
    assert info.value.session_id == "headless" and info.value.seq is None
    with pytest.raises(CorruptEventError):
        store.session_info("headless")
    assert [info.session_id for info in store.list_sessions()] == ["fine"]


def test_jsonl_session_ids_are_safe_file_names(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    odd = ["../escape", "a/b", ".hidden", "ünï", "x.jsonl"]
    for session in odd:
        store.append(session, sample_events(session, 0, 2), expected_seq=0)
    assert sorted(p.parent for p in tmp_path.iterdir()) == [tmp_path] * len(odd)
    assert [info.session_id for info in store.list_sessions()] == sorted(odd)
    for session in odd:
        assert [e.session_id for e in store.read(session)] == [session, session]


# ---------------------------------------------------------------------- SQLite


def test_sqlite_garbage_row(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    store = SqliteStore(path)
    _fill(store, "bad", "good")
    with sqlite3.connect(path) as raw:
        raw.execute(
            "UPDATE events SET payload = ? WHERE session_id = 'bad' AND seq = 3", (b"\xff\x00{",)
        )
    assert _read_fails_at(store, "bad", 3) == [0, 1, 2]
    assert [e.seq for e in store.read("good")] == list(range(6))
    assert [e.seq for e in store.read("bad", 4)] == [4, 5]


def test_sqlite_row_claiming_another_seq_or_missing(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    store = SqliteStore(path)
    _fill(store, "moved", "gap")
    with sqlite3.connect(path) as raw:
        (payload,) = raw.execute(
            "SELECT payload FROM events WHERE session_id = 'moved' AND seq = 1"
        ).fetchone()
        raw.execute(
            "UPDATE events SET payload = ? WHERE session_id = 'moved' AND seq = 2", (payload,)
        )
        raw.execute("DELETE FROM events WHERE session_id = 'gap' AND seq = 4")
    assert _read_fails_at(store, "moved", 2) == [0, 1]
    assert _read_fails_at(store, "gap", 4) == [0, 1, 2, 3]


def test_sqlite_row_missing_at_the_end_of_a_page(tmp_path: Path) -> None:
    """A gap where a page ends is not taken for the end of the session."""
    path = tmp_path / "x.db"
    store = SqliteStore(path)
    _fill(store, "gap", count=DECODE_BATCH + 10)
    missing = DECODE_BATCH - 1
    with sqlite3.connect(path) as raw:
        raw.execute("DELETE FROM events WHERE session_id = 'gap' AND seq = ?", (missing,))
    assert _read_fails_at(store, "gap", missing) == list(range(missing))
    assert [e.seq for e in store.read("gap", missing + 1)] == list(
        range(missing + 1, DECODE_BATCH + 10)
    )


def test_sqlite_rows_missing_from_the_end(tmp_path: Path) -> None:
    """Rows lost from the end of a session are not taken for a shorter session: the
    session row still counts them (a whole page gone, or every row)."""
    path = tmp_path / "x.db"
    store = SqliteStore(path)
    _fill(store, "cut", "emptied", "good")
    _fill(store, "long", count=DECODE_BATCH + 10)
    with sqlite3.connect(path) as raw:
        raw.execute("DELETE FROM events WHERE session_id = 'cut' AND seq >= 4")
        raw.execute("DELETE FROM events WHERE session_id = 'emptied'")
        raw.execute("DELETE FROM events WHERE session_id = 'long' AND seq >= ?", (DECODE_BATCH,))
    assert _read_fails_at(store, "cut", 4) == [0, 1, 2, 3]
    assert _read_fails_at(store, "emptied", 0) == []
    assert _read_fails_at(store, "long", DECODE_BATCH) == list(range(DECODE_BATCH))
    assert [e.seq for e in store.read("cut", 1, 4)] == [1, 2, 3]  # the hole is beyond the end
    with pytest.raises(CorruptEventError, match="seq 4: corrupt event: row missing"):
        store.fork("cut", "copy", upto_seq=5)
    assert [e.seq for e in store.read("good")] == list(range(6))


def test_sqlite_text_payload_beside_an_unknown_event_type(tmp_path: Path) -> None:
    """A payload stored as TEXT (the sqlite3 shell writes them so) in a page that also
    holds a future event type: the page is decoded row by row, both read."""
    path = tmp_path / "x.db"
    store = SqliteStore(path)
    _fill(store, "mixed")
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE events SET payload = CAST(payload AS TEXT) WHERE seq = 3")
        future = b'{"type":"zz/future","seq":4,"session_id":"mixed","id":"f4"}'
        raw.execute("UPDATE events SET payload = ? WHERE seq = 4", (future,))
    events = list(store.read("mixed"))
    assert [e.seq for e in events] == list(range(6))
    assert type(events[3]).__name__ != "NativeUnknownEvent"
    assert type(events[4]).__name__ == "NativeUnknownEvent"


def test_sqlite_truncated_file(tmp_path: Path) -> None:
    """A database file cut short is refused with a typed error, not a crash."""
    path = tmp_path / "x.db"
    store = SqliteStore(path)
    for index in range(20):
        session = f"s{index}"
        store.append(session, [scripted_event(session, s) for s in range(40)], expected_seq=0)
    store.close()
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size // 3)
    with pytest.raises(StoreError) as info:
        damaged = SqliteStore(path)
        for index in range(20):
            list(damaged.read(f"s{index}"))
    error = info.value
    if isinstance(error, CorruptEventError):
        assert error.session_id.startswith("s") and error.seq is not None


# ---------------------------------------------------------------------- PostgreSQL


def test_postgres_garbage_row(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    import psycopg

    from .conftest import POSTGRES_URL

    store = make_kit("postgresql", request, tmp_path).make()
    schema = store.schema  # type: ignore[attr-defined]
    _fill(store, "bad", "good", "gap")
    with psycopg.connect(POSTGRES_URL) as raw:
        raw.execute(
            f'UPDATE "{schema}".events SET payload = %s WHERE session_id = %s AND seq = 3',
            (b"{garbage", "bad"),
        )
        raw.execute(f'DELETE FROM "{schema}".events WHERE session_id = %s AND seq = 1', ("gap",))
    assert _read_fails_at(store, "bad", 3) == [0, 1, 2]
    assert _read_fails_at(store, "gap", 1) == [0]
    assert [e.seq for e in store.read("good")] == list(range(6))
    store.close()


def test_postgres_row_missing_at_the_end_of_a_page(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A gap where a page ends is not taken for the end of the session (first page, and
    a page read ahead on the pipelined connection)."""
    import psycopg

    from .conftest import POSTGRES_URL

    store = make_kit("postgresql", request, tmp_path).make()
    schema = store.schema  # type: ignore[attr-defined]
    _fill(store, "first", "later", count=2 * READ_PAGE_SIZE + 5)
    with psycopg.connect(POSTGRES_URL) as raw:
        for session, seq in (("first", READ_PAGE_SIZE - 1), ("later", 2 * READ_PAGE_SIZE - 1)):
            raw.execute(
                f'DELETE FROM "{schema}".events WHERE session_id = %s AND seq = %s', (session, seq)
            )
    assert _read_fails_at(store, "first", READ_PAGE_SIZE - 1) == list(range(READ_PAGE_SIZE - 1))
    later = 2 * READ_PAGE_SIZE - 1
    assert _read_fails_at(store, "later", later) == list(range(later))
    store.close()


def test_postgres_rows_missing_from_the_end(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Rows lost from the end of a session are not taken for a shorter session: on the
    first page, on a page read ahead on the pipelined connection, every row gone."""
    import psycopg

    from .conftest import POSTGRES_URL

    store = make_kit("postgresql", request, tmp_path).make()
    schema = store.schema  # type: ignore[attr-defined]
    _fill(store, "cut", "emptied", "good")
    _fill(store, "long", count=2 * READ_PAGE_SIZE + 5)
    delete = f'DELETE FROM "{schema}".events WHERE session_id = %s AND seq >= %s'
    with psycopg.connect(POSTGRES_URL) as raw:
        raw.execute(delete, ("cut", 4))
        raw.execute(delete, ("emptied", 0))
        raw.execute(delete, ("long", READ_PAGE_SIZE + 7))
    assert _read_fails_at(store, "cut", 4) == [0, 1, 2, 3]
    assert _read_fails_at(store, "emptied", 0) == []
    assert _read_fails_at(store, "long", READ_PAGE_SIZE + 7) == list(range(READ_PAGE_SIZE + 7))
    assert [e.seq for e in store.read("cut", 1, 4)] == [1, 2, 3]
    with pytest.raises(CorruptEventError, match="row missing"):
        store.fork("cut", "copy", upto_seq=5)
    assert [e.seq for e in store.read("good")] == list(range(6))
    store.close()


def test_no_stray_files(tmp_path: Path) -> None:
    """A fork writes through a temporary file that never stays behind."""
    store = JsonlStore(tmp_path)
    _fill(store, "p")
    store.fork("p", "c", upto_seq=2)
    with pytest.raises(StoreError):
        store.fork("p", "c", upto_seq=2)
    assert sorted(os.listdir(tmp_path)) == ["c.jsonl", "p.jsonl"]
