"""PostgreSQL store (psycopg 3): for platforms with many control-plane processes.

``postgresql://user@host:5432/db`` (add ``?schema=name`` or pass ``schema=`` to keep the
tables in a schema of your choice; default ``universal_event``). Needs the ``postgres``
extra (``psycopg[binary]``, ``psycopg-pool``).

Shape (schema version 1), the same as SQLite's::

    events(session_id text, seq bigint, type text, ts float8, payload bytea,
           PRIMARY KEY (session_id, seq))       -- one row per event, never updated
    sessions(session_id text PRIMARY KEY, runtime, created, last_activity,
             event_count, parent_id, fork_seq)  -- one small row per session
    schema_version(version int PRIMARY KEY, applied timestamptz)

Why: the seeds' lesson is that updating large JSONB rows in place causes write
amplification and lock contention; appends here insert rows (``COPY``, binary) and bump
one small row. ``payload`` is ``bytea``, not ``jsonb``, so what is read back is
byte-for-byte what was written (``jsonb`` re-orders keys and drops duplicates).

Conflicts: an append first runs a compare-and-set on the session row
(``UPDATE ... WHERE event_count = expected``). A concurrent writer blocks on that row
lock and, once the first commits, sees the moved count and gets :class:`ConflictError`;
the primary key is the backstop. The same statement queues a ``NOTIFY`` (delivered at
commit), so a ``tail`` in any process on any machine wakes at once.
"""

from __future__ import annotations

import re
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from universal_event.errors import (
    ConflictError,
    SessionNotFoundError,
    StoreError,
)
from universal_event.events import Event, EventBase
from universal_event.stores._base import (
    READ_PAGE_SIZE,
    Batches,
    EventRow,
    SessionInfo,
    decode_fetched,
    encode_for,
    encode_rows,
    event_type,
    page_through,
    runtime_of,
    session_info_of,
)

try:
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the PostgreSQL store needs the 'postgres' extra: pip install 'universal-event[postgres]'"
    ) from exc

__all__ = ["PostgresStore"]

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,50}$")
_COPY_TYPES = ["text", "int8", "text", "float8", "bytea"]


def _migrations(schema: str) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """Versioned migrations, applied in order on first use; never edit a released one."""
    return (
        (
            1,
            (
                f"""CREATE TABLE "{schema}".sessions (
                    session_id text PRIMARY KEY,
                    runtime text,
                    created double precision NOT NULL,
                    last_activity double precision NOT NULL,
                    event_count bigint NOT NULL,
                    parent_id text,
                    fork_seq bigint
                )""",
                f"""CREATE TABLE "{schema}".events (
                    session_id text NOT NULL,
                    seq bigint NOT NULL,
                    type text NOT NULL,
                    ts double precision NOT NULL,
                    payload bytea NOT NULL,
                    PRIMARY KEY (session_id, seq)
                )""",
                # Large payloads are already compact JSON; skip pglz's compression try.
                f'ALTER TABLE "{schema}".events ALTER COLUMN payload SET STORAGE EXTERNAL',
            ),
        ),
    )


SCHEMA_VERSION = 1


class PostgresStore:
    """Sessions in PostgreSQL tables, shared by any number of processes and machines."""

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "universal_event",
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 10.0,
        poll_interval: float = 1.0,
    ) -> None:
        if not _SCHEMA_NAME.match(schema):
            raise ValueError(f"schema name {schema!r} must match {_SCHEMA_NAME.pattern}")
        self.schema = schema
        self.channel = f"ue_events_{schema}"
        self._conninfo = conninfo
        self._poll_interval = poll_interval
        # Autocommit connections: reads are single statements, and writes open their
        # transaction themselves (append sends BEGIN with its first statement).
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            open=False,
            name=f"ue-{schema}",
            kwargs={"autocommit": True},
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreError(f"PostgreSQL at {_redact(conninfo)} is unreachable: {exc}") from None
        self._notified = threading.Condition()
        self._version = 0
        self._listener: threading.Thread | None = None
        self._listener_lock = threading.Lock()
        self._closing = threading.Event()
        self._sql = _Statements(schema)
        self._migrate()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresStore:
        """``postgresql://user@host:port/db[?schema=name&...]``; ``schema`` is ours, the
        rest of the query goes to libpq."""
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        if "schema" in query:
            options.setdefault("schema", query.pop("schema"))
        scheme = "postgresql" if parts.scheme == "postgres" else parts.scheme
        conninfo = urlunsplit((scheme, parts.netloc, parts.path, urlencode(query), ""))
        return cls(conninfo, **options)

    def _migrate(self) -> None:
        """Bring the schema to :data:`SCHEMA_VERSION`; an advisory lock serialises racers."""
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(self.schema.encode()),))
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{self.schema}".schema_version '
                "(version int PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())"
            )
            row = conn.execute(
                f'SELECT max(version) FROM "{self.schema}".schema_version'
            ).fetchone()
            current = row[0] if row and row[0] is not None else 0
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"schema {self.schema!r}: version {current} is newer than this library's "
                    f"{SCHEMA_VERSION}; upgrade universal-event"
                )
            for version, statements in _migrations(self.schema):
                if version <= current:
                    continue
                for statement in statements:
                    conn.execute(statement)
                conn.execute(
                    f'INSERT INTO "{self.schema}".schema_version (version) VALUES (%s)', (version,)
                )

    # ------------------------------------------------------------------ writes

    def append(self, session_id: str, events: Sequence[EventBase], *, expected_seq: int) -> None:
        rows = encode_rows(session_id, events, expected_seq)
        with self._pool.connection() as conn:
            if not rows:
                with conn.cursor() as cur:
                    count = self._event_count(cur, session_id)
                if count != expected_seq:
                    raise ConflictError(session_id, expected_seq, count)
                return
            try:
                self._append_rows(conn, session_id, rows, runtime_of(events), expected_seq)
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _append_rows(
        self,
        conn: psycopg.Connection[Any],
        session_id: str,
        rows: list[EventRow],
        runtime: str | None,
        expected_seq: int,
    ) -> None:
        """One transaction: compare-and-set the session row, COPY the rows, commit.

        ``BEGIN`` travels with the compare-and-set in one simple-protocol message
        (client-side binding), so an append costs the same round trips as a bare
        ``BEGIN; COPY; COMMIT``: the floor the benchmark compares against.
        """
        now = time.time()
        with psycopg.ClientCursor(conn) as cur:
            if expected_seq == 0:
                cur.execute(
                    "BEGIN; " + self._sql.create_session,
                    (session_id, runtime, now, now, len(rows), self.channel, session_id),
                )
            else:
                cur.execute(
                    "BEGIN; " + self._sql.advance_session,
                    (len(rows), now, runtime, session_id, expected_seq, self.channel, session_id),
                )
            cur.nextset()
            if cur.fetchone() is None:
                actual = self._event_count(cur, session_id)
                raise ConflictError(session_id, expected_seq, actual)
        with conn.cursor() as cur:
            try:
                with cur.copy(self._sql.copy_events) as copy:
                    copy.set_types(_COPY_TYPES)
                    for row in rows:
                        copy.write_row(row)
            except psycopg.errors.UniqueViolation:
                # Only reachable when the events table disagrees with sessions (rows
                # written by something else): still never a duplicate.
                raise ConflictError(session_id, expected_seq, -1) from None
        conn.execute("COMMIT")

    def _event_count(self, cur: psycopg.Cursor[Any], session_id: str) -> int:
        cur.execute(self._sql.event_count, (session_id,))
        row = cur.fetchone()
        return 0 if row is None else int(row[0])

    def fork(self, source_id: str, new_id: str, *, upto_seq: int) -> None:
        source = self.session_info(source_id)
        last = min(upto_seq, source.event_count - 1)
        now = time.time()
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute(
                self._sql.create_fork,
                (new_id, source.runtime, now, now, last + 1, source_id, last)
                + (self.channel, new_id),
            )
            if cur.fetchone() is None:
                raise ConflictError(new_id, 0, self._event_count(cur, new_id))
            for page_start in range(0, last + 1, READ_PAGE_SIZE):
                page_end = min(page_start + READ_PAGE_SIZE, last + 1)
                page = self._read_page(conn, source_id, page_start, page_end)
                with cur.copy(self._sql.copy_events) as copy:
                    copy.set_types(_COPY_TYPES)
                    for event in page:
                        copy.write_row(
                            (
                                new_id,
                                event.seq,
                                event_type(event),
                                event.ts,
                                encode_for(new_id, event),
                            )
                        )

    def delete(self, session_id: str) -> None:
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(self._sql.delete_events, (session_id,))
            conn.execute(self._sql.delete_session, (session_id,))

    # ------------------------------------------------------------------ reads

    def read(self, session_id: str, start: int = 0, end: int | None = None) -> Iterator[Event]:
        """Stream in pages; a connection is held only while one page is fetched."""

        def read_page(first: int, stop: int) -> tuple[int, Batches]:
            with self._pool.connection() as conn:
                return self._page(conn, session_id, first, stop)

        return page_through(start, end, read_page)

    def _read_page(
        self, conn: psycopg.Connection[Any], session_id: str, start: int, end: int
    ) -> list[Event]:
        return list(chain.from_iterable(self._page(conn, session_id, start, end)[1]))

    def _page(
        self, conn: psycopg.Connection[Any], session_id: str, start: int, end: int
    ) -> tuple[int, Batches]:
        """``start <= seq < end``: how many rows, and their events.

        Rows, not a server-side ``string_agg`` of them: measured, aggregating a page on
        the server cost more than sending its rows.
        """
        rows = self._fetch_rows(conn, session_id, start, end)
        return len(rows), decode_fetched(session_id, start, rows)

    def _fetch_rows(
        self, conn: psycopg.Connection[Any], session_id: str, start: int, end: int
    ) -> list[tuple[int, bytes]]:
        with conn.cursor(binary=True) as cur:
            cur.execute(self._sql.read_page, (session_id, start, end))
            rows: list[tuple[int, bytes]] = cur.fetchall()
        return rows

    def latest_seq(self, session_id: str) -> int:
        with self._pool.connection() as conn, conn.cursor() as cur:
            return self._event_count(cur, session_id) - 1

    def list_sessions(self) -> list[SessionInfo]:
        with self._pool.connection() as conn:
            rows = conn.execute(self._sql.list_sessions).fetchall()
        return [session_info_of(row) for row in rows]

    def session_info(self, session_id: str) -> SessionInfo:
        with self._pool.connection() as conn:
            row = conn.execute(self._sql.session_info, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFoundError(session_id)
        return session_info_of(row)

    def tail(self, session_id: str, after_seq: int, *, timeout: float | None = None) -> list[Event]:
        """Wait on LISTEN/NOTIFY (any process, any machine); poll slowly as a fallback."""
        self._ensure_listener()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._notified:
                seen = self._version
            found = list(self.read(session_id, after_seq + 1))
            if found:
                return found
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return []
            wait = self._poll_interval if remaining is None else min(self._poll_interval, remaining)
            with self._notified:
                if self._version == seen:
                    self._notified.wait(wait)

    def _ensure_listener(self) -> None:
        """Start the LISTEN thread once; LISTEN is in place before this returns."""
        with self._listener_lock:
            if self._listener is not None and self._listener.is_alive():
                return
            conn = psycopg.connect(self._conninfo, autocommit=True)
            conn.execute(f'LISTEN "{self.channel}"')
            self._listener = threading.Thread(
                target=self._listen, args=(conn,), name=f"ue-listen-{self.schema}", daemon=True
            )
            self._listener.start()

    def _listen(self, conn: psycopg.Connection[Any]) -> None:
        try:
            while not self._closing.is_set():
                for _ in conn.notifies(timeout=0.2):
                    with self._notified:
                        self._version += 1
                        self._notified.notify_all()
        except psycopg.Error:
            pass  # connection lost: tails fall back to polling
        finally:
            conn.close()

    def close(self) -> None:
        self._closing.set()
        if self._listener is not None:
            self._listener.join(timeout=2)
        self._pool.close()


class _Statements:
    """The SQL, with the schema name filled in once."""

    def __init__(self, schema: str) -> None:
        sessions = f'"{schema}".sessions'
        events = f'"{schema}".events'
        columns = "session_id, runtime, created, last_activity, event_count, parent_id, fork_seq"
        self.event_count = f"SELECT event_count FROM {sessions} WHERE session_id = %s"
        # Compare-and-set on the session row; pg_notify is delivered at commit.
        self.create_session = (
            f"WITH s AS (INSERT INTO {sessions} (session_id, runtime, created, last_activity, "
            "event_count) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET "
            "runtime = EXCLUDED.runtime, created = EXCLUDED.created, "
            "last_activity = EXCLUDED.last_activity, event_count = EXCLUDED.event_count, "
            f"parent_id = NULL, fork_seq = NULL WHERE {sessions}.event_count = 0 RETURNING 1) "
            "SELECT pg_notify(%s, %s) FROM s"
        )
        self.advance_session = (
            f"WITH s AS (UPDATE {sessions} SET event_count = event_count + %s, "
            "last_activity = %s, runtime = COALESCE(runtime, %s) "
            "WHERE session_id = %s AND event_count = %s RETURNING 1) "
            "SELECT pg_notify(%s, %s) FROM s"
        )
        self.create_fork = (
            f"WITH s AS (INSERT INTO {sessions} ({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (session_id) DO UPDATE SET runtime = EXCLUDED.runtime, "
            "created = EXCLUDED.created, last_activity = EXCLUDED.last_activity, "
            "event_count = EXCLUDED.event_count, parent_id = EXCLUDED.parent_id, "
            f"fork_seq = EXCLUDED.fork_seq WHERE {sessions}.event_count = 0 RETURNING 1) "
            "SELECT pg_notify(%s, %s) FROM s"
        )
        self.copy_events = (
            f"COPY {events} (session_id, seq, type, ts, payload) FROM STDIN (FORMAT BINARY)"
        )
        self.read_page = (
            f"SELECT seq, payload FROM {events} "
            "WHERE session_id = %s AND seq >= %s AND seq < %s ORDER BY seq"
        )
        self.list_sessions = (
            f"SELECT {columns} FROM {sessions} WHERE event_count > 0 ORDER BY session_id"
        )
        self.session_info = (
            f"SELECT {columns} FROM {sessions} WHERE session_id = %s AND event_count > 0"
        )
        self.delete_events = f"DELETE FROM {events} WHERE session_id = %s"
        self.delete_session = f"DELETE FROM {sessions} WHERE session_id = %s"


def _redact(conninfo: str) -> str:
    """The conninfo without a password, for error messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", conninfo)
