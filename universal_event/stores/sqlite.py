"""SQLite store: the embedded default (``sqlite:///path.db``).

Shape (schema version 1)::

    events(session_id TEXT, seq INTEGER, type TEXT, ts REAL, payload BLOB,
           PRIMARY KEY (session_id, seq))         -- one row per event, never updated
    sessions(session_id TEXT PRIMARY KEY, runtime, created, last_activity,
             event_count, parent_id, fork_seq)    -- small metadata row per session
    schema_version(version INTEGER PRIMARY KEY, applied REAL)

Why this shape: the seeds' lesson is that rewriting one large JSON row per session
(as some agent SDKs do) turns every append into a rewrite of the whole history. Here an
append inserts its rows and bumps one small metadata row.

Concurrency: WAL lets readers run beside one writer. Every append runs in
``BEGIN IMMEDIATE`` (the database write lock is taken before the next-seq check), so
two processes appending to one session serialise. The check is one compare-and-set
statement on the session row (``... WHERE event_count = expected``, an upsert for a
first append); when it changes no row, the loser gets :class:`ConflictError`. The
primary key is the backstop: a duplicate seq can never be stored.

Reads fetch a page of :data:`~universal_event.stores._base.DECODE_BATCH` events as one
row (the payloads joined, the row count and top seq) and decode it in one call; a page
that does not check out is fetched again and decoded row by row, which names the
damaged seq. A page holds at most :data:`PAGE_BYTES` of payloads (or one event), so
reading large events stays bounded in memory too. ``synchronous=FULL`` (the default
here) makes a returned append durable across power loss; ``synchronous="NORMAL"`` keeps
it durable across process crashes.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from itertools import chain, repeat
from pathlib import Path
from typing import Any, Literal

from universal_event.errors import (
    ConflictError,
    CorruptEventError,
    SessionNotFoundError,
    StoreError,
)
from universal_event.events import Event, EventBase
from universal_event.stores._base import (
    DECODE_BATCH,
    NO_END,
    UNSTORABLE,
    AppendSignal,
    Batches,
    FileLiveLocks,
    LiveLocks,
    Rehoming,
    SameSession,
    SessionInfo,
    TailByPolling,
    check_fork_point,
    check_read_end,
    check_session_id,
    decode_fetched,
    decode_page,
    encode_row_values,
    local_path,
    runtime_of,
    runtime_of_payloads,
    session_info_of,
    unstorable,
)

__all__ = ["SqliteStore"]

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            """CREATE TABLE sessions (
                session_id TEXT PRIMARY KEY,
                runtime TEXT,
                created REAL NOT NULL,
                last_activity REAL NOT NULL,
                event_count INTEGER NOT NULL,
                parent_id TEXT,
                fork_seq INTEGER
            )""",
            """CREATE TABLE events (
                session_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                type TEXT NOT NULL,
                ts REAL NOT NULL,
                payload BLOB NOT NULL,
                PRIMARY KEY (session_id, seq)
            )""",
        ),
    ),
)
"""Versioned migrations, applied in order on first use; never edit a released one."""

SCHEMA_VERSION = _MIGRATIONS[-1][0]

_ROWS_PER_INSERT = 128
"""The most rows one ``INSERT`` binds: 640 values, under SQLite's oldest variable limit
(999); a larger batch takes several statements."""
_ROW_STEP = 4
"""Multi-row statements exist for multiples of this many rows (plus 1, 2 and 3), so a
connection prepares at most ``128 / 4 + 3`` of them, well within its statement cache."""


def _insert_rows_statement(count: int) -> str:
    return "INSERT INTO events (session_id, seq, type, ts, payload) VALUES " + ", ".join(
        ["(?, ?, ?, ?, ?)"] * count
    )


_INSERT_ROWS = {
    count: _insert_rows_statement(count)
    for count in (1, 2, 3, *range(_ROW_STEP, _ROWS_PER_INSERT + 1, _ROW_STEP))
}
"""Prebuilt multi-row inserts, by row count. One statement per chunk of rows: measured,
a 100-row append binds and steps in ~70 µs less than ``executemany`` of one row each."""


def _insert_chunks(count: int) -> list[int]:
    """Row counts of the inserts that write ``count`` rows (each a key of _INSERT_ROWS)."""
    chunks = [_ROWS_PER_INSERT] * (count // _ROWS_PER_INSERT)
    rest = count % _ROWS_PER_INSERT
    if rest >= _ROW_STEP:
        chunks.append(rest - rest % _ROW_STEP)
    if rest % _ROW_STEP:
        chunks.append(rest % _ROW_STEP)
    return chunks


_CLAIM_NEW_SESSION = (
    "INSERT INTO sessions (session_id, runtime, created, last_activity, event_count) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
    "runtime = excluded.runtime, created = excluded.created, "
    "last_activity = excluded.last_activity, event_count = excluded.event_count, "
    "parent_id = NULL, fork_seq = NULL WHERE sessions.event_count = 0"
)
"""A first append's compare-and-set: creates the row (or takes over an empty one)."""
_CLAIM_NEXT_SEQS = (
    "UPDATE sessions SET event_count = event_count + ?, last_activity = ?, "
    "runtime = COALESCE(runtime, ?) WHERE session_id = ? AND event_count = ?"
)
"""A later append's compare-and-set: changes no row when another writer got there first."""
_PAGE = "FROM events WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq LIMIT ?"
"""A page is the next rows from a seq on (below the read's bound), not a seq range: a
missing row shows as a wrong seq in the page, never as its end."""
_CREATED = "(SELECT created FROM sessions WHERE session_id = ?)"
"""The session's created time, read with each page (one statement, one snapshot): a
session deleted and written anew while a read pages through it is told by it."""
_READ_PAGE_JOINED = (
    f"SELECT count(*), max(seq), CAST(group_concat(payload, ',') AS BLOB), {_CREATED} "
    f"FROM (SELECT seq, payload {_PAGE})"
)
"""A page in one row: its size, its top seq and the payloads joined with commas (one
value to fetch instead of a row object per event: measured, half the SQL time).

SQLite does not promise ``group_concat``'s order; it follows the primary-key scan, and
:func:`~universal_event.stores._base.decode_page` checks every seq, so another order
would only send the page down the row-by-row path."""
_READ_PAGE_ROWS = f"SELECT seq, payload {_PAGE}"
_READ_FORK_ROWS = f"SELECT seq, type, ts, payload {_PAGE}"
"""A page of rows as a fork copies them."""

PAGE_BYTES = 2 * 1024 * 1024
"""The most payload bytes a read page holds (a larger event is a page of its own): what
bounds a read's memory when events are large (tool results of megabytes)."""
_SMALL_ROW_BYTES = PAGE_BYTES // DECODE_BATCH
"""Rows up to this size fill a page of the fast path without counting: a full page of
them is within :data:`PAGE_BYTES`."""
_READ_SMALL_ROWS = (
    f"SELECT count(*), max(seq), CAST(group_concat(payload, ',') AS BLOB), {_CREATED} "
    "FROM (SELECT seq, payload FROM events WHERE session_id = ? AND seq >= ? AND seq < ? "
    f"AND length(payload) <= {_SMALL_ROW_BYTES} ORDER BY seq LIMIT ?)"
)
"""The fast page: ``_READ_PAGE_JOINED`` of small rows only. A larger row is left
out, so the page comes back short (or with a gap in its seqs) before it; measured, the
size test costs ~1.5% of a read of small events, where counting sizes in a query of
their own before each page cost ~17%."""
_READ_SMALL_FORK_ROWS = (
    "SELECT seq, type, ts, payload FROM events WHERE session_id = ? AND seq >= ? AND seq < ? "
    f"AND length(payload) <= {_SMALL_ROW_BYTES} ORDER BY seq LIMIT ?"
)
"""A fork's fast page: ``_READ_FORK_ROWS`` of small rows only (see ``_READ_SMALL_ROWS``)."""
_READ_SIZES = f"SELECT length(payload) {_PAGE}"
"""Payload sizes of the next rows, to cut a page of large ones (SQLite takes a BLOB's
length from its row header, without reading it)."""
_READ_END = (
    "SELECT (SELECT event_count FROM sessions WHERE session_id = ?), "
    "(SELECT max(seq) FROM events WHERE session_id = ?)"
)
"""Where a session ends, in one snapshot: its row's count and its highest stored seq."""


class SqliteStore(TailByPolling, FileLiveLocks):
    """Sessions in one SQLite database file. Thread-safe; usable from many processes."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout: float = 30.0,
        poll_interval: float = 0.02,
        mmap_size: int = 256 * 1024 * 1024,
    ) -> None:
        self.path = Path(path)
        self._poll_interval = poll_interval
        if str(self.path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves (BEGIN IMMEDIATE).
        self._conn = sqlite3.connect(
            str(self.path), timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        self._lock = threading.RLock()
        self._appended = AppendSignal()
        self._live_locks = (
            None if str(self.path) == ":memory:" else LiveLocks(Path(f"{self.path}.live"))
        )
        try:
            self._set_up(synchronous, mmap_size, busy_timeout)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise StoreError(f"SQLite database {str(self.path)!r} is unusable: {exc}") from None

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SqliteStore:
        """``sqlite:///abs/path.db``, ``sqlite:///./relative.db`` or ``sqlite:///:memory:``."""
        return cls(cls.path_of(url), **options)

    @staticmethod
    def path_of(url: str) -> str:
        """The database file a ``sqlite:`` URL names (``:memory:`` for none)."""
        return local_path(url, "sqlite", "file", special=("/:memory:",))

    # ------------------------------------------------------------------ schema

    def _set_up(self, synchronous: Synchronous, mmap_size: int, busy_timeout: float) -> None:
        """Pragmas and migrations, tried again while the database is locked (for up to
        ``busy_timeout`` seconds).

        Some of SQLite's locks are taken without its busy handler: ``journal_mode=WAL``
        on a database another process is opening (or converting) at the same moment
        fails at once with "database is locked". Processes that open a new database
        together are the common case, so that is waited out here.
        """
        deadline = time.monotonic() + busy_timeout
        delay = 0.001
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute(f"PRAGMA synchronous={synchronous}")
                # Reads map the database file instead of copying each page through
                # read(): reading a long session back halves its SQL time. Writes still
                # go through the journal (Python's SQLite is built without
                # SQLITE_MMAP_READWRITE).
                self._conn.execute(f"PRAGMA mmap_size={int(mmap_size)}")
                self._migrate()
                return
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc) or time.monotonic() + delay > deadline:
                    raise
            _pause(delay)
            delay = min(delay * 2, 0.05)

    def _migrate(self) -> None:
        """Bring the schema to :data:`SCHEMA_VERSION`; safe when many processes race."""
        with self._lock, self._write_transaction():
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version "
                "(version INTEGER PRIMARY KEY, applied REAL NOT NULL)"
            )
            row = self._conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = row[0] if row and row[0] is not None else 0
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: schema version {current} is newer than this library's "
                    f"{SCHEMA_VERSION}; upgrade universal-event"
                )
            for version, statements in _MIGRATIONS:
                if version <= current:
                    continue
                for statement in statements:
                    self._conn.execute(statement)
                self._conn.execute(
                    "INSERT INTO schema_version (version, applied) VALUES (?, ?)",
                    (version, time.time()),
                )

    def _write_transaction(self) -> _Transaction:
        return _Transaction(self._conn)

    # ------------------------------------------------------------------ writes

    def append(self, session_id: str, events: Sequence[EventBase], *, expected_seq: int) -> None:
        try:
            values = encode_row_values(session_id, events, expected_seq)
        except UNSTORABLE as exc:
            raise unstorable(session_id, exc) from exc
        count = len(events)
        now = time.time()
        with self._lock, self._write_transaction():
            if not count:
                stored = self._event_count(session_id)
                if stored != expected_seq:
                    raise ConflictError(session_id, expected_seq, stored)
                return
            if expected_seq == 0:
                claim = self._conn.execute(
                    _CLAIM_NEW_SESSION, (session_id, runtime_of(events), now, now, count)
                )
            else:
                claim = self._conn.execute(
                    _CLAIM_NEXT_SEQS,
                    (count, now, runtime_of(events), session_id, expected_seq),
                )
            if claim.rowcount != 1:
                raise ConflictError(session_id, expected_seq, self._event_count(session_id))
            try:
                self._insert_values(values, count)
            except sqlite3.IntegrityError:
                # Only reachable when the events table disagrees with sessions
                # (rows written by something else): still never a duplicate.
                (top,) = self._conn.execute(
                    "SELECT COALESCE(MAX(seq), -1) FROM events WHERE session_id = ?", (session_id,)
                ).fetchone()
                raise ConflictError(session_id, expected_seq, int(top) + 1) from None
        self._appended.appended()

    def _insert_values(self, values: list[Any], count: int) -> None:
        """Insert ``count`` rows given as flat values, a prebuilt statement per chunk."""
        if count in _INSERT_ROWS:  # the common case: one statement, the list as is
            self._conn.execute(_INSERT_ROWS[count], values)
            return
        start = 0
        for chunk in _insert_chunks(count):
            end = start + chunk * 5
            self._conn.execute(_INSERT_ROWS[chunk], values[start:end])
            start = end

    def _event_count(self, session_id: str) -> int:
        row = self._conn.execute(
            "SELECT event_count FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def fork(self, source_id: str, new_id: str, *, upto_seq: int) -> None:
        """Copy in one write transaction: the source's row is read inside it, so a
        source deleted (or appended to) by another process is seen whole or not at all,
        and the child's count is the rows actually copied. Each row is copied as stored
        but for the session id in it (:class:`~universal_event.stores._base.Rehoming`)."""
        check_fork_point(source_id, new_id, upto_seq)
        with self._lock, self._write_transaction():
            source = self._session_row(source_id)
            if source is None:
                raise SessionNotFoundError(source_id)
            if self._event_count(new_id):
                raise ConflictError(new_id, 0, self._event_count(new_id))
            last = min(upto_seq, source.event_count - 1)
            if last < 0:
                return  # nothing to copy: a session without events is none
            runtime = source.runtime and runtime_of_payloads(self._payloads(source_id, last + 1))
            copied = self._copy_rows(source_id, new_id, last + 1)
            if copied != last + 1:
                raise CorruptEventError(
                    source_id, copied, f"fork copied {copied} of {last + 1} events"
                )
            now = time.time()
            self._conn.execute(
                "INSERT OR REPLACE INTO sessions (session_id, runtime, created, last_activity, "
                "event_count, parent_id, fork_seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (new_id, runtime, now, now, copied, source_id, copied - 1),
            )
        self._appended.appended()

    def _copy_rows(self, source_id: str, new_id: str, stop: int) -> int:
        """Copy the source's rows ``0..stop-1`` under ``new_id`` (the caller holds the
        lock and the write transaction); how many were copied.

        A page at a time (at most :data:`DECODE_BATCH` rows and :data:`PAGE_BYTES`), as a
        read goes: every row is decoded and checked as a read checks it (damage raises
        :class:`CorruptEventError` naming the seq), then its stored bytes, type and ts are
        copied, the payload re-homed, never encoded again from what this version decoded.
        """
        rehoming = Rehoming(source_id, new_id)
        position = 0
        while position < stop:
            fetched = self._fork_rows(source_id, position, stop)
            if not fetched:
                break
            seqs, kinds, stamps, stored = zip(*fetched, strict=True)
            for batch in decode_fetched(source_id, position, list(zip(seqs, stored, strict=True))):
                deque(batch, maxlen=0)  # decoded to be checked: raises at a damaged row
            payloads = rehoming.payloads(stored)
            rows = zip(repeat(new_id), seqs, kinds, stamps, payloads)
            self._insert_values(list(chain.from_iterable(rows)), len(fetched))
            position += len(fetched)
        if position < stop:
            event_count, top_seq = self._conn.execute(_READ_END, (source_id, source_id)).fetchone()
            check_read_end(source_id, position, stop, event_count, top_seq)
        return position

    def _payloads(self, source_id: str, stop: int) -> Iterator[bytes]:
        """The stored payloads of seqs ``0..stop-1``, a page at a time, as asked for."""
        position = 0
        while position < stop:
            rows = self._fork_rows(source_id, position, stop)
            if not rows:
                return
            for _seq, _kind, _ts, payload in rows:
                yield payload
            position += len(rows)

    def _fork_rows(self, source_id: str, start: int, stop: int) -> list[tuple[Any, ...]]:
        """The next page of rows from ``start`` (below ``stop``) for a fork: ``(seq, type,
        ts, payload)``, seqs contiguous from ``start``; none when no row is there.

        As a read pages (:meth:`_batches`): small rows in one statement; when those do
        not run on from ``start`` (a large row comes first, a row is missing) the page is
        cut by the sizes of its rows instead (a missing row then shows as a gap, which
        the caller's decoding names)."""
        limit = min(DECODE_BATCH, stop - start)
        try:
            rows: list[tuple[Any, ...]] = self._conn.execute(
                _READ_SMALL_FORK_ROWS, (source_id, start, stop, limit)
            ).fetchall()
            if rows and rows[0][0] == start and rows[-1][0] == start + len(rows) - 1:
                return rows
            within = self._rows_within_budget(source_id, start, start + limit, stop)
            if within == 0:
                return []
            rows = self._conn.execute(_READ_FORK_ROWS, (source_id, start, stop, within)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise CorruptEventError(source_id, start, f"sqlite: {exc}") from None
        return rows

    def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        with self._lock, self._write_transaction():
            self._conn.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
            self._conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))

    # ------------------------------------------------------------------ reads

    def read(self, session_id: str, start: int = 0, end: int | None = None) -> Iterator[Event]:
        """Stream in pages of up to :data:`DECODE_BATCH` rows and :data:`PAGE_BYTES`;
        no lock is held between pages. Lazy: nothing is read before the first event
        is asked for."""
        check_session_id(session_id)
        bound = NO_END if end is None else end
        return chain.from_iterable(self._batches(session_id, max(start, 0), bound))

    def _batches(self, session_id: str, position: int, bound: int) -> Batches:
        """The events of seqs ``position..bound-1``, a page at a time.

        The fast path reads a page of small rows in one statement. A page it cannot
        give whole (the session ends, a large row, damage) is cut by the sizes of its
        rows and read by :meth:`_page`, which checks the end of the session.
        """
        same = SameSession(session_id)
        while position < bound:
            stop = min(position + DECODE_BATCH, bound)
            with self._lock:
                count, top, joined, created = self._conn.execute(
                    _READ_SMALL_ROWS, (session_id, session_id, position, bound, stop - position)
                ).fetchone()
            same.check(created, position)
            if count and joined is not None and top == position + count - 1:
                events = decode_page(session_id, position, count, b"".join((b"[", joined, b"]")))
                del joined
                if events is not None:
                    yield events
                    del events  # the reader may free them before the next page is read
                    position += count
                    if position == stop:
                        continue
            rows = self._rows_within_budget(session_id, position, stop, bound)
            if rows == 0:
                yield from self._end_of_rows(session_id, position, bound, iter(()))
                return
            found, batches = self._page(session_id, position, position + rows, bound, same)
            yield from batches
            if found < rows:
                return
            position += rows

    def _rows_within_budget(self, session_id: str, start: int, stop: int, bound: int) -> int:
        """How many of the rows from ``start`` (at most ``stop - start``) fit in
        :data:`PAGE_BYTES` (at least one); 0 when there is none."""
        with self._lock:
            sizes = self._conn.execute(
                _READ_SIZES, (session_id, start, bound, stop - start)
            ).fetchall()
        rows = total = 0
        for (size,) in sizes:
            total += size or 0
            if rows and total > PAGE_BYTES:
                break
            rows += 1
        return rows

    def _page(
        self, session_id: str, start: int, stop: int, bound: int, same: SameSession
    ) -> tuple[int, Batches]:
        """Up to ``stop - start`` rows from ``start`` on, below ``bound``: how many, and
        their events.

        The joined value is decoded in one call when it checks out; otherwise (damage,
        an unknown event type, a page beyond SQLite's value size limit) the rows are
        read and decoded one by one.
        """
        with self._lock:
            try:
                count, top, joined, created = self._conn.execute(
                    _READ_PAGE_JOINED, (session_id, session_id, start, bound, stop - start)
                ).fetchone()
            except sqlite3.DatabaseError:
                count = top = joined = None
            else:
                same.check(created, start)
        if count == 0:
            return 0, self._end_of_rows(session_id, start, bound, iter(()))
        if joined is not None and top == start + count - 1:
            events = decode_page(session_id, start, count, b"".join((b"[", joined, b"]")))
            if events is not None:
                if count < stop - start:
                    return count, self._end_of_rows(
                        session_id, start + count, bound, iter([events])
                    )
                return count, iter([events])
        rows = self._fetch_rows(session_id, start, stop, bound)
        batches = decode_fetched(session_id, start, rows)
        if len(rows) < stop - start:
            batches = self._end_of_rows(session_id, start + len(rows), bound, batches)
        return len(rows), batches

    def _end_of_rows(self, session_id: str, reached: int, bound: int, batches: Batches) -> Batches:
        """A short page's events, then the check that the session really ends there (no
        rows missing from its end): the good events reach the reader first."""
        yield from batches
        if reached >= bound:
            return
        with self._lock:
            event_count, top_seq = self._conn.execute(
                _READ_END, (session_id, session_id)
            ).fetchone()
        check_read_end(session_id, reached, bound, event_count, top_seq)

    def _fetch_rows(
        self, session_id: str, start: int, stop: int, bound: int
    ) -> list[tuple[int, bytes]]:
        """The raw rows of a page; an unreadable database file is corruption."""
        with self._lock:
            try:
                rows: list[tuple[int, bytes]] = self._conn.execute(
                    _READ_PAGE_ROWS, (session_id, start, bound, stop - start)
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                raise CorruptEventError(session_id, start, f"sqlite: {exc}") from None
        return rows

    def latest_seq(self, session_id: str) -> int:
        check_session_id(session_id)
        with self._lock:
            return self._event_count(session_id) - 1

    def list_sessions(self) -> list[SessionInfo]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT session_id, runtime, created, last_activity, event_count, parent_id, "
                "fork_seq FROM sessions WHERE event_count > 0 ORDER BY session_id"
            ).fetchall()
        return [session_info_of(row) for row in rows]

    def session_info(self, session_id: str) -> SessionInfo:
        check_session_id(session_id)
        with self._lock:
            info = self._session_row(session_id)
        if info is None:
            raise SessionNotFoundError(session_id)
        return info

    def _session_row(self, session_id: str) -> SessionInfo | None:
        """The session's metadata; None when it has no events (caller holds the lock)."""
        row = self._conn.execute(
            "SELECT session_id, runtime, created, last_activity, event_count, parent_id, "
            "fork_seq FROM sessions WHERE session_id = ? AND event_count > 0",
            (session_id,),
        ).fetchone()
        return None if row is None else session_info_of(row)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


_pause = time.sleep
"""How a locked open waits before trying again (a seam for tests)."""


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` says the database is locked by another connection (worth a retry)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self._conn.execute("COMMIT")
        else:
            self._conn.execute("ROLLBACK")
