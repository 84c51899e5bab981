"""PostgreSQL store (psycopg 3): for platforms with many control-plane processes.

``postgresql://user@host:5432/db`` (add ``?schema=name`` or pass ``schema=`` to keep the
tables in a schema of your choice; default ``universal_event``). Any libpq URI works
(``postgresql:///db?host=/run/postgresql``, ``?options=-c%20statement_timeout%3D5000``):
``schema`` is taken out and the rest goes to libpq as written. Needs the ``postgres``
extra (``psycopg[binary]``, ``psycopg-pool``).

Opening reads the schema's version (one ``SELECT``) and writes nothing when it is
current, so a read-only role or a read replica can open an existing store. Only a
missing or older schema is created or migrated; with ``must_exist=True`` (read-only
uses) a missing one is :class:`~universal_event.errors.StoreNotFoundError` instead.

Shape (schema version 1), the same as SQLite's::

    events(session_id text, seq bigint, type text, ts float8, payload bytea,
           PRIMARY KEY (session_id, seq))       -- one row per event, never updated
    sessions(session_id text PRIMARY KEY, runtime, created, last_activity,
             event_count, parent_id, fork_seq)  -- one small row per session
    schema_version(version int PRIMARY KEY, applied timestamptz)

Why: the seeds' lesson is that updating large JSONB rows in place causes write
amplification and lock contention; appends here insert rows and bump one small row.
``payload`` is ``bytea``, not ``jsonb``, so what is read back is byte-for-byte what was
written (``jsonb`` re-orders keys and drops duplicates).

Conflicts: an append is one statement (its own transaction, one round trip): a
compare-and-set on the session row (``UPDATE ... WHERE event_count = expected``), and an
``INSERT ... SELECT FROM unnest(binary arrays)`` that runs only when the compare-and-set
took. A concurrent writer blocks on that row lock and, once the first commits, sees the
moved count, inserts nothing and gets :class:`ConflictError`; the primary key is the
backstop. The same statement queues a ``NOTIFY`` (delivered at commit), so a ``tail`` in
any process on any machine wakes at once.
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import Any, cast
from urllib.parse import unquote

import msgspec

from universal_event.errors import (
    ConflictError,
    CorruptEventError,
    SessionNotFoundError,
    StoreError,
    StoreNotFoundError,
    StoreURLError,
)
from universal_event.events import Event, EventBase
from universal_event.stores._base import (
    DECODE_BATCH,
    NO_END,
    READ_PAGE_SIZE,
    UNSTORABLE,
    Batches,
    Rehoming,
    SameSession,
    SessionInfo,
    check_batch,
    check_fork_point,
    check_read_end,
    check_session_id,
    decode_batches,
    decode_rows,
    event_type,
    runtime_of,
    runtime_of_payloads,
    session_info_of,
    shown_id,
    unstorable,
)

try:
    import psycopg
    from psycopg import pq
    from psycopg.adapt import Dumper
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the PostgreSQL store needs the 'postgres' extra: pip install 'universal-event[postgres]'"
    ) from exc

__all__ = ["PostgresStore"]


class _Pool(ConnectionPool["psycopg.Connection[Any]"]):
    """The connection pool, whose wait for a free connection ends in a typed error."""

    def getconn(self, timeout: float | None = None) -> psycopg.Connection[Any]:
        try:
            return super().getconn(timeout)
        except PoolTimeout as exc:
            raise StoreError(
                f"PostgreSQL store {self.name!r}: none of the pool's {self.max_size} "
                f"connections came free within {self.timeout:g} s (an open read() holds "
                f"one while it is iterated: read to the end or drop it, or give the store "
                f"a larger max_size)"
            ) from exc


_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,50}$")
_OWN_PARAMETERS = ("schema",)
"""The URL query parameters that are this store's, not libpq's."""
_COPY_TYPES = ["text", "int8", "text", "float8", "bytea"]

# PostgreSQL's binary array format (``array_recv``): ndim, has-nulls flag, element type
# oid, then per dimension its length and lower bound; then each element as an int32
# byte length and its bytes.
_ARRAY_HEADER = struct.Struct(">iiIii")
_LENGTH = struct.Struct(">i")
_FLOAT8_ELEMENT = struct.Struct(">id")
_TEXT_OID = 25
_BYTEA_OID = 17
_FLOAT8_OID = 701


class _WireArray(bytes):
    """A one-dimensional array already in PostgreSQL's binary format.

    Sent as it is, with no type: the statement's cast (``%b::bytea[]``) names it and
    the server decodes it with that type's receive function. Why: psycopg dumps a list
    parameter element by element in Python, which measured at about a third of a
    100-event append; packing here is a few C-level calls per array.
    """


class _WireArrayDumper(Dumper):
    format = pq.Format.BINARY
    oid = 0  # unknown: the server takes the type from the statement's cast

    def dump(self, obj: Any) -> bytes:
        return bytes(obj)


def _varlena_array(element_oid: int, items: Sequence[bytes]) -> _WireArray:
    parts = [b""] * (2 * len(items) + 1)
    parts[0] = _ARRAY_HEADER.pack(1, 0, element_oid, len(items), 1)
    parts[1::2] = map(_LENGTH.pack, map(len, items))
    parts[2::2] = items
    return _WireArray(b"".join(parts))


def _float8_array(items: Sequence[float]) -> _WireArray:
    header = _ARRAY_HEADER.pack(1, 0, _FLOAT8_OID, len(items), 1)
    return _WireArray(header + b"".join(map(_FLOAT8_ELEMENT.pack, repeat(8), items)))


_payload_encoder = msgspec.json.Encoder()
_ts_of = attrgetter("ts")
_FIRST_COLUMN = itemgetter(slice(0, 1))


def _columns(events: Sequence[EventBase]) -> tuple[_WireArray, _WireArray, _WireArray]:
    """The batch's ``type``, ``ts`` and ``payload`` columns as binary arrays.

    In C-level passes over the batch (one per column): this and the encoder are the
    store's whole per-event Python cost, measured against a floor given encoded rows.
    """
    kinds = list(map(type, events))
    tags = {
        kind: event_type(one).encode()
        for kind, one in dict(zip(kinds, events, strict=True)).items()
    }
    return (
        _varlena_array(_TEXT_OID, list(map(tags.__getitem__, kinds))),
        _float8_array(list(map(_ts_of, events))),
        _varlena_array(_BYTEA_OID, list(map(_payload_encoder.encode, events))),
    )


PAGE_BYTES = 4 * 1024 * 1024
"""A read's page holds at most this many bytes of payloads (or one row): with large
events (tool results of megabytes) a page of :data:`READ_PAGE_SIZE` rows would be
gigabytes. See :func:`_plan_after`."""

_NOTIFY_ID_CHARS = 1999
"""Longer ids are notified by their hash: a ``NOTIFY`` payload must stay under 8000
bytes (1999 characters are at most 7996 UTF-8 bytes). Listeners only count
notifications, so what the payload says does not matter to them."""


def _check_id(session_id: str) -> None:
    """ValueError for an id PostgreSQL cannot store, before anything is sent: ``text``
    holds no NUL character, and the id must be encodable as UTF-8."""
    if "\0" in session_id:
        raise ValueError(
            f"session id {shown_id(session_id)} contains a NUL character, "
            "which PostgreSQL text cannot hold"
        )
    check_session_id(session_id)


def _too_long(session_id: str, exc: psycopg.Error) -> ValueError:
    """The ValueError for an id over the primary key index's limit (about 2700 bytes
    once compressed)."""
    return ValueError(
        f"session id {shown_id(session_id)} is too long for the PostgreSQL store's index: "
        f"{exc.diag.message_primary or _reason(exc)}"
    )


def _notice(session_id: str) -> str:
    """The ``NOTIFY`` payload for a session: its id, or the id's hash when long."""
    if len(session_id) <= _NOTIFY_ID_CHARS:
        return session_id
    return "#" + hashlib.blake2b(session_id.encode(), digest_size=16).hexdigest()


PAGE_ROWS = 4 * READ_PAGE_SIZE
"""The most rows of a page after the first (which has :data:`READ_PAGE_SIZE`, so that a
short read stays one small query): when the payloads are small (under a kilobyte, at
most :data:`PAGE_BYTES` in all), fewer round trips and pool checkouts. Measured on
100k small events: as fast as the page-ahead reads that held their connection."""

_UNCAPPED = 2**62
"""The cap of a page of one row: any size."""

Plan = tuple[int, int]
"""A page's most rows and the most bytes of one row's payload: their product is at
most :data:`PAGE_BYTES`, or the page is one row."""

FIRST_PLAN: Plan = (READ_PAGE_SIZE, PAGE_BYTES // READ_PAGE_SIZE)


def _plan_after(payloads: Sequence[tuple[bytes | None]], plan: Plan, cut: bool) -> Plan:
    """The plan of the page after one read with ``plan``.

    A page leaves out (NULL) any payload over its cap and ends before it (``cut``): the
    next page is that row alone, uncapped. Otherwise the rows are sized from the page's
    largest payload (twice it fits under the cap), up to :data:`PAGE_ROWS`; a page with
    that many rows is not measured (its payloads were all under its cap, the smallest).
    """
    if cut:
        return 1, _UNCAPPED
    if plan[0] >= PAGE_ROWS:
        return plan
    largest = max((len(payload or b"") for (payload,) in payloads), default=0)
    rows = max(1, min(PAGE_ROWS, PAGE_BYTES // max(2 * largest, 1)))
    return rows, PAGE_BYTES // rows


def _cut(payloads: list[tuple[bytes | None]]) -> list[tuple[int, bytes]]:
    """A page that left a payload out ends before it: drop the rest, and the page's
    pieces for the decoder."""
    del payloads[payloads.index((None,)) :]
    arrays = _arrays(payloads)
    assert arrays is not None
    return arrays


def _arrays(payloads: Sequence[tuple[bytes | None]]) -> list[tuple[int, bytes]] | None:
    """A page's payloads as the decoder's pieces: :data:`DECODE_BATCH` payloads joined
    into one JSON array each. None when a payload was left out (NULL: over the page's
    cap, see :data:`Plan`), which the join finds at no cost."""
    try:
        return [
            (len(group), b"[" + b",".join([payload for (payload,) in group]) + b"]")  # type: ignore[misc]
            for group in (
                payloads[i : i + DECODE_BATCH] for i in range(0, len(payloads), DECODE_BATCH)
            )
        ]
    except TypeError:
        return None


def _decode_all(
    session_id: str, start: int, stop: int, rows: Sequence[tuple[int, bytes]]
) -> Iterator[Event]:
    """:func:`decode_rows` for rows that must hold every seq ``start..stop-1``: a row
    missing after the last one fetched is named too."""
    yield from decode_rows(session_id, start, rows)
    if start + len(rows) < stop:
        raise CorruptEventError(session_id, start + len(rows), "missing from the events table")


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.adapters.register_dumper(_WireArray, _WireArrayDumper)
    # Every read is a range of the primary key, wanted in its order. Before the table
    # has statistics (a fresh table, until autovacuum's first ANALYZE) the planner picks
    # a bitmap heap scan plus a sort of the page instead of walking the index: measured,
    # 1.4 ms against 0.3 ms per 1000-row page of server time. Without bitmap scans the
    # index walk is the only cheap plan; no statement of ours wants a bitmap scan.
    conn.execute("SET enable_bitmapscan = off")


def _reason(exc: BaseException) -> str:
    """A driver error's message on one line."""
    reason = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return reason or type(exc).__name__


def _probe(conninfo: str, timeout: float) -> None:
    """Connect once before opening the pool: the pool retries a refused or rejected
    connection until its timeout and then reports only that; one plain attempt fails at
    once (no server, wrong port, unknown database, authentication) with libpq's reason.
    A connection string libpq cannot parse (an unknown option) is a
    :class:`StoreURLError` naming it."""
    try:
        psycopg.connect(conninfo, connect_timeout=max(2, math.ceil(timeout))).close()
    except psycopg.ProgrammingError as exc:
        raise StoreURLError(
            f"invalid PostgreSQL connection string {_redact(conninfo)}: {_reason(exc)}"
        ) from None
    except psycopg.Error as exc:
        raise StoreError(
            f"cannot connect to PostgreSQL at {_redact(conninfo)}: {_reason(exc)}"
        ) from None


def _split_url(url: str) -> tuple[str, dict[str, str]]:
    """The URL for libpq, and this store's own query parameters (:data:`_OWN_PARAMETERS`).

    Only those are taken out; everything else is kept as written (no re-encoding, an
    empty host stays empty) so that libpq reads what the user wrote.
    """
    base, mark, query = url.partition("?")
    kept: list[str] = []
    own: dict[str, str] = {}
    for item in query.split("&") if mark else ():
        key, _, value = item.partition("=")
        name = unquote(key)
        if name not in _OWN_PARAMETERS:
            kept.append(item)
        elif name in own:
            raise StoreURLError(f"store URL {_redact(url)}: {name!r} is given twice")
        else:
            own[name] = unquote(value)
    return (f"{base}?{'&'.join(kept)}" if kept else base), own


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
        must_exist: bool = False,
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 10.0,
        poll_interval: float = 1.0,
    ) -> None:
        """``must_exist``: for read-only uses; a schema holding no store raises
        :class:`StoreNotFoundError` instead of being created."""
        if not _SCHEMA_NAME.match(schema):
            raise ValueError(f"schema name {schema!r} must match {_SCHEMA_NAME.pattern}")
        self.schema = schema
        self.channel = f"ue_events_{schema}"
        self._conninfo = conninfo
        self._poll_interval = poll_interval
        _probe(conninfo, connect_timeout)
        # Autocommit connections: reads are single statements, and writes open their
        # transaction themselves (append sends BEGIN with its first statement).
        self._pool: _Pool = _Pool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            open=False,
            name=f"ue-{schema}",
            kwargs={"autocommit": True},
            configure=_configure,
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreError(
                f"cannot connect to PostgreSQL at {_redact(conninfo)}: {exc}"
            ) from None
        self._held_reads = 0
        """Open reads holding a connection (at most all but one of the pool's)."""
        self._held_reads_lock = threading.Lock()
        self._notified = threading.Condition()
        self._version = 0
        self._listener: threading.Thread | None = None
        self._listener_lock = threading.Lock()
        self._live_conn: psycopg.Connection[Any] | None = None
        self._live_lock = threading.Lock()
        self._closing = threading.Event()
        self._sql = _Statements(schema)
        try:
            self._open_schema(must_exist)
        except BaseException:
            self._pool.close()
            raise

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresStore:
        """``postgresql://user@host:port/db[?schema=name&...]``, or any libpq URI;
        ``schema`` is ours, the rest of the query goes to libpq as written."""
        conninfo, own = _split_url(url)
        if "schema" in own:
            if not _SCHEMA_NAME.match(own["schema"]):
                raise StoreURLError(
                    f"store URL {_redact(url)}: schema name {own['schema']!r} must match "
                    f"{_SCHEMA_NAME.pattern}"
                )
            options.setdefault("schema", own["schema"])
        return cls(conninfo, **options)

    @property
    def _location(self) -> str:
        """Where this store is, for messages: the connection string (no password) and
        the schema."""
        where = _redact(self._conninfo)
        if "://" not in where:
            return f"{where} (schema {self.schema})"
        return f"{where}{'&' if '?' in where else '?'}schema={self.schema}"

    def _open_schema(self, must_exist: bool) -> None:
        """Check the schema's version without writing; create or migrate it only when it
        is missing or older (and, when missing, only if the caller may create it)."""
        current = self._stored_version()
        if current == SCHEMA_VERSION:
            return
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"schema {self.schema!r}: version {current} is newer than this library's "
                f"{SCHEMA_VERSION}; upgrade universal-event"
            )
        if current == 0 and must_exist:
            raise StoreNotFoundError(self._location)
        try:
            self._migrate()
        except psycopg.Error as exc:
            doing = (
                f"create schema {self.schema!r}"
                if current == 0
                else f"migrate schema {self.schema!r} from version {current} to {SCHEMA_VERSION}"
            )
            raise StoreError(
                f"cannot {doing} at {_redact(self._conninfo)}: {_reason(exc)}"
            ) from None

    def _stored_version(self) -> int:
        """The schema's version, 0 when it holds no store (one read-only statement)."""
        try:
            with self._pool.connection() as conn:
                row = conn.execute(
                    f'SELECT max(version) FROM "{self.schema}".schema_version'
                ).fetchone()
        except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
            return 0
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot read schema {self.schema!r} at {_redact(self._conninfo)}: {_reason(exc)}"
            ) from None
        return int(row[0]) if row and row[0] is not None else 0

    def _migrate(self) -> None:
        """Bring the schema to :data:`SCHEMA_VERSION`; an advisory lock serialises racers."""
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(self.schema.encode()),))
            # Only when missing: CREATE SCHEMA IF NOT EXISTS still needs the CREATE
            # privilege on the database, which a role given an existing schema may lack.
            exists = conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
            ).fetchone()
            if exists is None:
                conn.execute(f'CREATE SCHEMA "{self.schema}"')
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
        _check_id(session_id)
        check_batch(session_id, events, expected_seq)
        try:
            columns = _columns(events) if events else None
        except UNSTORABLE as exc:
            raise unstorable(session_id, exc) from exc
        with self._pool.connection() as conn, conn.cursor() as cur:
            if columns is None:
                count = self._event_count(cur, session_id)
                if count != expected_seq:
                    raise ConflictError(session_id, expected_seq, count)
                return
            if not self._append_columns(cur, session_id, columns, events, expected_seq):
                raise ConflictError(session_id, expected_seq, self._event_count(cur, session_id))

    def _append_columns(
        self,
        cur: psycopg.Cursor[Any],
        session_id: str,
        columns: tuple[_WireArray, _WireArray, _WireArray],
        events: Sequence[EventBase],
        expected_seq: int,
    ) -> bool:
        """One statement, one round trip, its own transaction: False on a conflict.

        The statement compare-and-sets the session row (``event_count = expected``), and
        inserts the rows (``unnest`` of binary arrays) only when that took. A concurrent
        writer blocks on the row lock; once the first commits, PostgreSQL re-checks the
        condition on the new row version (READ COMMITTED), it fails, nothing is inserted
        and no row comes back. The primary key stays the backstop: rows already in
        ``events`` that ``sessions`` does not count abort the whole statement. Measured:
        one round trip beats ``BEGIN; UPDATE; COPY; COMMIT`` (four) at every batch size.
        """
        now = time.time()
        runtime = runtime_of(events)
        if expected_seq == 0:
            statement = self._sql.create_and_append
            session_row: tuple[Any, ...] = (session_id, runtime, now, now, len(events))
        else:
            statement = self._sql.advance_and_append
            session_row = (len(events), now, runtime, session_id, expected_seq)
        params = (
            *session_row,
            session_id,
            expected_seq,
            *columns,
            self.channel,
            _notice(session_id),
        )
        try:
            cur.execute(statement, params)
        except psycopg.errors.UniqueViolation:
            # Only reachable when the events table disagrees with sessions (rows
            # written by something else): still never a duplicate.
            raise ConflictError(session_id, expected_seq, -1) from None
        except psycopg.errors.ProgramLimitExceeded as exc:
            raise _too_long(session_id, exc) from None
        return cur.fetchone() is not None

    def _event_count(self, cur: psycopg.Cursor[Any], session_id: str) -> int:
        cur.execute(self._sql.event_count, (session_id,))
        row = cur.fetchone()
        return 0 if row is None else int(row[0])

    def fork(self, source_id: str, new_id: str, *, upto_seq: int) -> None:
        """One transaction: the source's row is read and locked (``FOR KEY SHARE``: a
        delete of the source waits for the fork, appends to it do not), the child's row
        is made and the source's rows ``0..last`` are copied, ``last`` being the lower
        of ``upto_seq`` and the source's last seq, and the child's ``fork_seq``."""
        check_fork_point(source_id, new_id, upto_seq)
        _check_id(source_id)
        _check_id(new_id)
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute(self._sql.lock_source, (source_id,))
            source = cur.fetchone()
            if source is None:
                raise SessionNotFoundError(source_id)
            runtime, event_count = source
            last = min(upto_seq, event_count - 1)
            if runtime is not None:  # the child's own events may not name it yet
                runtime = runtime_of_payloads(self._prefix_payloads(cur, source_id, last + 1))
            if last < 0:
                # Nothing to copy, and a session without events is none: the child
                # appears with its first append. Only an existing one conflicts.
                count = self._event_count(cur, new_id)
                if count:
                    raise ConflictError(new_id, 0, count)
                return
            now = time.time()
            try:
                cur.execute(
                    self._sql.create_fork,
                    (new_id, runtime, now, now, last + 1, source_id, last)
                    + (self.channel, _notice(new_id)),
                )
            except psycopg.errors.ProgramLimitExceeded as exc:
                raise _too_long(new_id, exc) from None
            if cur.fetchone() is None:
                raise ConflictError(new_id, 0, self._event_count(cur, new_id))
            copied = self._copy_events(conn, cur, source_id, new_id, last + 1)
            if copied != last + 1:  # the source is locked: only lost rows get here
                raise CorruptEventError(source_id, copied, "missing from the events table")

    def _prefix_payloads(
        self, cur: psycopg.Cursor[Any], source_id: str, stop: int
    ) -> Iterator[bytes]:
        """The stored payloads of seqs ``0..stop-1``, a few at a time, as asked for."""
        position = 0
        while position < stop:
            cur.execute(self._sql.read_rows, (source_id, position, stop, _PREFIX_ROWS))
            rows = cur.fetchall()
            if not rows:
                return
            for _seq, payload in rows:
                yield payload
            position = rows[-1][0] + 1

    def _copy_events(
        self,
        conn: psycopg.Connection[Any],
        cur: psycopg.Cursor[Any],
        source_id: str,
        new_id: str,
        stop: int,
    ) -> int:
        """Copy the source's events ``0..stop-1`` under ``new_id``, page by page (pages
        bounded in rows and bytes); how many were copied.

        Every row is decoded and checked as a read checks it (damage raises
        :class:`CorruptEventError` naming the seq), then copied as stored (its type, ts
        and payload bytes), the payload re-homed
        (:class:`~universal_event.stores._base.Rehoming`): never encoded again from what
        this version decoded, so what a newer producer wrote reaches the child whole."""
        rehoming = Rehoming(source_id, new_id)
        position, plan = 0, FIRST_PLAN
        while position < stop:
            limit = min(plan[0], stop - position)
            with conn.cursor(binary=True) as page:
                page.execute(self._sql.read_fork_rows, (plan[1], source_id, position, stop, limit))
                rows: list[tuple[bytes | None, str, float]] = page.fetchall()
            payloads: list[tuple[bytes | None]] = list(map(_FIRST_COLUMN, rows))
            arrays = _arrays(payloads)
            cut = arrays is None
            if arrays is None:
                arrays = _cut(payloads)
            again = partial(self._decode_rows_again, conn, source_id, stop=position + len(payloads))
            for batch in decode_batches(source_id, position, arrays, again):
                deque(batch, maxlen=0)  # decoded to be checked: raises at a damaged row
            del arrays
            stored = [payload for (payload,) in payloads]  # none left out (NULL): cut
            copied = rehoming.payloads(cast("list[bytes]", stored))
            with cur.copy(self._sql.copy_events) as copy:
                copy.set_types(_COPY_TYPES)
                rehomed = zip(rows, copied, strict=False)  # rows: the cut page's too
                for seq, ((_, kind, ts), payload) in enumerate(rehomed, position):
                    copy.write_row((new_id, seq, kind, ts, payload))
            position += len(copied)
            if not cut and len(payloads) < limit:
                self._check_end(conn, source_id, position, stop)
                break
            plan = _plan_after(payloads, plan, cut)
        return position

    def delete(self, session_id: str) -> None:
        """The session's row first: that waits for an append or fork holding it, and
        makes any later append at ``expected_seq > 0`` conflict, so no row it adds is
        left behind. Then the events of a session that has no row (in this
        transaction's view: ours is gone), so a session made again meanwhile by another
        process is left alone."""
        _check_id(session_id)
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(self._sql.delete_session, (session_id,))
            conn.execute(self._sql.delete_events, (session_id, session_id))

    # ------------------------------------------------------------------ reads

    def read(self, session_id: str, start: int = 0, end: int | None = None) -> Iterator[Event]:
        """Stream in pages of up to :data:`PAGE_ROWS` rows and :data:`PAGE_BYTES` of
        payloads, the server working one page ahead.

        A read holds a connection (pipeline mode) for as long as it is iterated: the
        next page's query is sent, and the server scans and sends it while the reader
        decodes this one (decoded lazily: a reader that drops each event after use
        triggers no garbage collection); dropping the iterator gives the connection
        back. Reads hold all but one of the pool's connections at most: a read opened
        past them (and any read from a pool of one) takes a connection for each page
        and gives it back before the page is decoded, so that a store call the reader
        makes meanwhile, or another open read, can have it; the server then waits
        while the reader decodes (measured ~1.6x slower on 100k events). A call that
        finds no connection free within the pool's timeout raises :class:`StoreError`. In memory: about two pages
        of payloads. The first page and where the session ends go in one round trip, so
        short reads (``tail``, a few recent events) cost one. Why not a thread fetching
        ahead: measured on 100k events, the fetching thread and the decoding one fought
        over the GIL and the read was slower than fetching and decoding in turn.

        A page's size is planned (:func:`_plan_after`): the first has up to
        :data:`READ_PAGE_SIZE` rows of up to 4 kB each; a larger payload is left out
        (one ``length`` test per row, its stored size: it is not even detoasted) and
        ends the page, and the pages after are sized from the payloads seen. So a page
        holds at most :data:`PAGE_BYTES` of payloads, or one row.
        """
        _check_id(session_id)
        return chain.from_iterable(self._read_batches(session_id, max(start, 0), end))

    def _read_batches(self, session_id: str, start: int, end: int | None) -> Batches:
        bound = NO_END if end is None else end
        if min(FIRST_PLAN[0], bound - start) <= 0:
            return
        if not self._hold_for_read():
            yield from self._pages(session_id, start, bound, self._page_lease, held=False)
            return
        try:
            # A store call the reader makes meanwhile gets another one (see read()).
            with self._pool.connection() as conn, conn.pipeline():
                yield from self._pages(session_id, start, bound, lambda: nullcontext(conn))
        finally:
            with self._held_reads_lock:
                self._held_reads -= 1

    def _hold_for_read(self) -> bool:
        """Whether a read may hold a connection: all but one of the pool's may be held,
        so that reads left open cannot starve the store's other calls (and reads past
        them, which take a connection page by page)."""
        with self._held_reads_lock:
            if self._held_reads >= self._pool.max_size - 1:
                return False
            self._held_reads += 1
            return True

    @contextmanager
    def _page_lease(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in pipeline mode, for one page."""
        with self._pool.connection() as conn, conn.pipeline():
            yield conn

    def _pages(
        self,
        session_id: str,
        first: int,
        bound: int,
        lease: Callable[[], AbstractContextManager[psycopg.Connection[Any]]],
        *,
        held: bool = True,
    ) -> Batches:
        """The pages of a read, each on a connection from ``lease``: ``held`` (one
        connection for the whole read) decodes a page for the reader while the server
        works on the next; else the connection is given back before the page is decoded
        (a pool of one: a store call the reader makes meanwhile needs it)."""
        plan = FIRST_PLAN
        limit = min(plan[0], bound - first)
        payloads: list[tuple[bytes | None]] | None = None
        session_end: tuple[int | None, int | None] | None = None  # the page's, when known
        same = SameSession(session_id)
        while True:
            with lease() as conn:
                if payloads is None:  # the first page, and where the session ends
                    page = self._send_page(conn, session_id, first, limit, plan[1], bound)
                    ends = conn.execute(self._sql.read_end, (session_id, session_id))
                    payloads = self._take(page, same, first)
                    session_end = ends.fetchone() or (None, None)
                    ends.close()
                reached = first + len(payloads)
                more = len(payloads) >= limit
                following_plan = _plan_after(payloads, plan, False)
                following = min(following_plan[0], bound - reached) if more else 0
                pending = (
                    self._send_page(conn, session_id, reached, following, following_plan[1], bound)
                    if following > 0
                    else None
                )
                # While the server works on the next page:
                arrays = _arrays(payloads)
                if arrays is None:  # the page left a large row out, and ends before it
                    arrays = _cut(payloads)
                    if pending is not None:
                        self._take(pending, same, reached)  # sent for a page not ending there
                    reached, more, following_plan = first + len(payloads), True, (1, _UNCAPPED)
                    following = 1
                    pending = self._send_page(conn, session_id, reached, 1, _UNCAPPED, bound)
                del payloads
                if held:
                    again = partial(self._decode_rows_again, conn, session_id, stop=reached)
                    yield from decode_batches(session_id, first, arrays, again)
                    del arrays
                payloads = None if pending is None else self._take(pending, same, reached)
                if pending is None and not more and reached < bound and session_end is None:
                    row = conn.execute(self._sql.read_end, (session_id, session_id)).fetchone()
                    session_end = row or (None, None)
            if not held:
                again = partial(self._decode_rows_again, None, session_id, stop=reached)
                yield from decode_batches(session_id, first, arrays, again)
                del arrays
            if payloads is None:
                if not more:
                    check_read_end(session_id, reached, bound, *(session_end or (None, None)))
                return
            first, limit, plan, session_end = reached, following, following_plan, None

    @staticmethod
    def _take(page: _SentPage, same: SameSession, start: int) -> list[tuple[bytes | None]]:
        """A sent page's payloads, once its session is known to be the one the read
        began in (``start``: the page's first seq)."""
        rows, created = page
        with rows:
            payloads: list[tuple[bytes | None]] = rows.fetchall()
        with created:
            row = created.fetchone()
        same.check(None if row is None else row[0], start)
        return payloads

    def _send_page(
        self,
        conn: psycopg.Connection[Any],
        session_id: str,
        start: int,
        limit: int,
        cap: int,
        bound: int,
    ) -> _SentPage:
        """Queue a page's query (up to ``limit`` rows from ``start`` on, below ``bound``;
        NULL for a payload over ``cap`` bytes), and one for the session's created time
        (:class:`SameSession`); :meth:`_take` fetches them."""
        rows = conn.cursor(binary=True)
        rows.execute(self._sql.read_payloads, (cap, session_id, start, bound, limit))
        created = conn.cursor()
        created.execute(self._sql.read_created, (session_id,))
        return rows, created

    def _check_end(
        self, conn: psycopg.Connection[Any], session_id: str, reached: int, bound: int
    ) -> None:
        """A page came back short: the session ends there, unless rows are missing."""
        if reached < bound:
            row = conn.execute(self._sql.read_end, (session_id, session_id)).fetchone()
            check_read_end(session_id, reached, bound, *(row or (None, None)))

    def _decode_rows_again(
        self, conn: psycopg.Connection[Any] | None, session_id: str, start: int, stop: int
    ) -> Iterator[Event]:
        """The slow path for a damaged page (seqs ``start..stop-1``): the rows with their
        seqs, fetched now (on ``conn``, else on a borrowed connection), decoded one by
        one as the reader gets to them, which names the damaged or missing seq."""
        if conn is None:
            with self._pool.connection() as borrowed:
                return self._decode_rows_again(borrowed, session_id, start, stop)
        with conn.cursor(binary=True) as cur:
            cur.execute(self._sql.read_rows, (session_id, start, stop, stop - start))
            rows: list[tuple[int, bytes]] = cur.fetchall()
        return _decode_all(session_id, start, stop, rows)

    def latest_seq(self, session_id: str) -> int:
        _check_id(session_id)
        with self._pool.connection() as conn, conn.cursor() as cur:
            return self._event_count(cur, session_id) - 1

    def list_sessions(self) -> list[SessionInfo]:
        with self._pool.connection() as conn:
            rows = conn.execute(self._sql.list_sessions).fetchall()
        return [session_info_of(row) for row in rows]

    def session_info(self, session_id: str) -> SessionInfo:
        _check_id(session_id)
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
            try:
                conn = psycopg.connect(self._conninfo, autocommit=True)
            except psycopg.Error:
                return  # tails poll; the next tail tries again
            try:
                conn.execute(f'LISTEN "{self.channel}"')
            except psycopg.Error:
                conn.close()
                return
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

    # ------------------------------------------------------------------ live writers

    def _live_key(self, session_id: str) -> tuple[int, int]:
        """The advisory-lock key of a session's live writer (two int4s)."""
        digest = hashlib.blake2b(f"{self.schema}\0{session_id}".encode(), digest_size=8).digest()
        return (
            int.from_bytes(digest[:4], "big", signed=True),
            int.from_bytes(digest[4:], "big", signed=True),
        )

    def hold_live(self, session_id: str) -> Callable[[], None] | None:
        """Mark this process as the session's live writer, on any machine: a session-level
        advisory lock on one connection this store keeps for them (the server drops it
        when that connection ends). Returns the release; None when another writer has it
        or the connection cannot be made."""
        key = self._live_key(session_id)
        with self._live_lock:
            try:
                if self._live_conn is None or self._live_conn.closed:
                    self._live_conn = psycopg.connect(self._conninfo, autocommit=True)
                row = self._live_conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()
            except psycopg.Error:
                return None
            if not (row and row[0]):
                return None
            held = self._live_conn

        def release() -> None:
            with self._live_lock:
                if not held.closed:
                    try:
                        held.execute("SELECT pg_advisory_unlock(%s, %s)", key)
                    except psycopg.Error:
                        pass  # the connection is gone, and its locks with it

        return release

    def has_live_writer(self, session_id: str) -> bool:
        """Whether a live writer (another process or machine, or another log here)
        holds the session's advisory lock."""
        key = self._live_key(session_id)
        with self._pool.connection() as conn:
            (free,) = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone() or (
                False,
            )
            if free:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)
        return not free

    def close(self) -> None:
        self._closing.set()
        with self._live_lock:
            if self._live_conn is not None:
                self._live_conn.close()
        if self._listener is not None:
            self._listener.join(timeout=2)
        self._pool.close()


_PREFIX_ROWS = 16
"""Rows a fork reads at a time looking for its child's runtime (the first row, mostly)."""
_SentPage = tuple["psycopg.Cursor[Any]", "psycopg.Cursor[Any]"]
"""A page's query and its session's created time, queued (see ``_send_page``)."""


class _Statements:
    """The SQL, with the schema name filled in once."""

    def __init__(self, schema: str) -> None:
        sessions = f'"{schema}".sessions'
        events = f'"{schema}".events'
        columns = "session_id, runtime, created, last_activity, event_count, parent_id, fork_seq"
        self.event_count = f"SELECT event_count FROM {sessions} WHERE session_id = %s"
        # One statement: compare-and-set the session row (``s``), insert the rows only
        # when it took (``e``), notify (delivered at commit). Parameters: the session
        # row's, then the rows' (session_id, first seq, types, ts, payloads), then the
        # channel's.
        insert_rows = (
            f", e AS (INSERT INTO {events} (session_id, seq, type, ts, payload) "
            "SELECT %s, %s + u.n - 1, u.type, u.ts, u.payload "
            "FROM unnest(%b::text[], %b::float8[], %b::bytea[]) "
            "WITH ORDINALITY AS u(type, ts, payload, n) WHERE EXISTS (SELECT FROM s)) "
            "SELECT pg_notify(%s, %s) FROM s"
        )
        self.create_and_append = (
            f"WITH s AS (INSERT INTO {sessions} (session_id, runtime, created, last_activity, "
            "event_count) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET "
            "runtime = EXCLUDED.runtime, created = EXCLUDED.created, "
            "last_activity = EXCLUDED.last_activity, event_count = EXCLUDED.event_count, "
            f"parent_id = NULL, fork_seq = NULL WHERE {sessions}.event_count = 0 RETURNING 1)"
            + insert_rows
        )
        self.advance_and_append = (
            f"WITH s AS (UPDATE {sessions} SET event_count = event_count + %s, "
            "last_activity = %s, runtime = COALESCE(runtime, %s) "
            "WHERE session_id = %s AND event_count = %s RETURNING 1)" + insert_rows
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
        # A page is the next rows from a seq on (below the read's bound), not a seq
        # range: a missing row shows as a wrong seq in the page, never as its end.
        page = (
            f"FROM {events} WHERE session_id = %s AND seq >= %s AND seq < %s ORDER BY seq LIMIT %s"
        )
        self.read_rows = f"SELECT seq, payload {page}"
        # A payload over the first parameter's bytes is NULL. ``length`` of a bytea
        # reads its stored size: a row left out is never detoasted. (A running sum of
        # sizes, a window function, cost a page of small rows 2.5 times the server time.)
        self.read_payloads = f"SELECT CASE WHEN length(payload) <= %s THEN payload END {page}"
        # A fork's page: the same, with the columns it copies as they are.
        self.read_fork_rows = (
            f"SELECT CASE WHEN length(payload) <= %s THEN payload END, type, ts {page}"
        )
        self.read_created = f"SELECT created FROM {sessions} WHERE session_id = %s"
        self.read_end = (
            f"SELECT (SELECT event_count FROM {sessions} WHERE session_id = %s), "
            f"(SELECT max(seq) FROM {events} WHERE session_id = %s)"
        )
        """Where a session ends, in one snapshot: its row's count, its highest stored seq."""
        self.list_sessions = f'SELECT {columns} FROM {sessions} WHERE event_count > 0 ORDER BY session_id COLLATE "C"'
        self.session_info = (
            f"SELECT {columns} FROM {sessions} WHERE session_id = %s AND event_count > 0"
        )
        self.delete_session = f"DELETE FROM {sessions} WHERE session_id = %s"
        self.delete_events = (
            f"DELETE FROM {events} WHERE session_id = %s "
            f"AND NOT EXISTS (SELECT FROM {sessions} WHERE session_id = %s)"
        )
        # The source of a fork: read and locked against a delete (not against appends,
        # whose UPDATE takes a weaker lock than a DELETE).
        self.lock_source = (
            f"SELECT runtime, event_count FROM {sessions} "
            "WHERE session_id = %s AND event_count > 0 FOR KEY SHARE"
        )


_USERINFO_PASSWORD = re.compile(r"(://[^:/@]*):[^@/]*@")
_PASSWORD_PARAMETER = re.compile(r"(\b(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^&\s]*)")


def _redact(conninfo: str) -> str:
    """The conninfo without a password (in the URI's user part, a ``password``
    parameter or keyword), for error messages."""
    return _PASSWORD_PARAMETER.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1:***@", conninfo))
