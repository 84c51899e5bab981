"""Store benchmarks: appends against the raw driver floor; reading a 100k-event session.

Appends (batch sizes 1, 100, 1000) on each durable backend, against the floor measured
in the same run with the same durability setting and the same rows:

* SQLite: plain ``sqlite3`` ``BEGIN IMMEDIATE`` + ``executemany`` + ``COMMIT`` of the
  already-encoded rows (WAL, ``synchronous=FULL``, like the store);
* PostgreSQL: plain psycopg binary ``COPY`` of the already-encoded rows + ``COMMIT``;
* JSONL: plain ``write`` + ``fsync`` of the already-encoded lines.

The floor gets its rows pre-encoded: the store's figure includes encoding the events,
the conflict check and the session-metadata row. ``ratio`` here is project/floor
(lower is better), target ``<=1.2`` at batch 100 (batches 1 and 1000 are reported).

Reading: a 100k-event session back into typed events vs the openai-agents SDK's
``SQLiteSession.get_items`` on 100k items of the same text (``bench`` extra);
``ratio`` there is baseline/project (higher = faster), target ``>=2``.

    python bench/bench_stores.py [--postgres URL] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ratio import best_of, ratio_line

from universal_event.codec import encode, encode_lines
from universal_event.events import Event, Source, UserMessageEvent
from universal_event.parts import TextPart
from universal_event.stores._base import event_type
from universal_event.stores.jsonl import JsonlStore
from universal_event.stores.sqlite import SqliteStore

BATCHES = {1: 100, 100: 20, 1000: 5}
"""Batch size → appends per measured round."""


def make_events(session_id: str, start: int, count: int) -> list[Event]:
    return [
        UserMessageEvent(
            seq=seq,
            id=f"{session_id}-{seq}",
            session_id=session_id,
            ts=1_700_000_000.0 + seq,
            source=Source(runtime="anthropic"),
            content=[TextPart(text=f"message number {seq}: " + "lorem ipsum dolor " * 8)],
        )
        for seq in range(start, start + count)
    ]


def row_of(event: Event) -> tuple[str, int, str, float, bytes]:
    return (event.session_id, event.seq, event_type(event), event.ts, encode(event))


# ---------------------------------------------------------------------- appends


class AppendCase:
    """One backend at one batch size: the store's append and the floor's, alternating."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.appends = BATCHES[batch]

    def batches(self, prefix: str) -> tuple[str, list[list[Event]]]:
        session = f"{prefix}-{uuid.uuid4().hex[:8]}"
        events = make_events(session, 0, self.batch * self.appends)
        return session, [events[i : i + self.batch] for i in range(0, len(events), self.batch)]


def bench_sqlite_appends(directory: Path, rounds: int) -> list[str]:
    store = SqliteStore(directory / "store.db")
    raw = sqlite3.connect(directory / "floor.db", isolation_level=None)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=FULL")
    raw.execute(
        "CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,"
        " ts REAL NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (session_id, seq))"
    )
    lines = []
    for batch in BATCHES:
        case = AppendCase(batch)

        def project(case: AppendCase = case) -> None:
            session, batches = case.batches("p")
            for events in batches:
                store.append(session, events, expected_seq=events[0].seq)

        def floor(case: AppendCase = case) -> Callable[[], None]:
            _, batches = case.batches("f")
            rows = [[row_of(e) for e in events] for events in batches]

            def run() -> None:
                for batch_rows in rows:
                    raw.execute("BEGIN IMMEDIATE")
                    raw.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", batch_rows)
                    raw.execute("COMMIT")

            return run

        lines.append(_append_ratio("sqlite", case, project, floor, rounds))
    store.close()
    raw.close()
    return lines


def bench_jsonl_appends(directory: Path, rounds: int) -> list[str]:
    store = JsonlStore(directory / "jsonl")
    floor_dir = directory / "jsonl-floor"
    floor_dir.mkdir()
    lines = []
    for batch in BATCHES:
        case = AppendCase(batch)

        def project(case: AppendCase = case) -> None:
            session, batches = case.batches("p")
            for events in batches:
                store.append(session, events, expected_seq=events[0].seq)

        def floor(case: AppendCase = case) -> Callable[[], None]:
            session, batches = case.batches("f")
            chunks = [encode_lines(events) for events in batches]

            def run() -> None:
                fd = os.open(floor_dir / session, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                try:
                    for chunk in chunks:
                        os.write(fd, chunk)
                        os.fsync(fd)
                finally:
                    os.close(fd)

            return run

        lines.append(_append_ratio("jsonl", case, project, floor, rounds))
    return lines


def bench_postgres_appends(url: str, rounds: int) -> list[str]:
    import psycopg

    from universal_event.stores.postgres import PostgresStore

    schema = f"ue_bench_{os.getpid()}"
    store = PostgresStore(url, schema=schema)
    raw = psycopg.connect(url)
    raw.execute(
        f'CREATE TABLE "{schema}".floor (session_id text NOT NULL, seq bigint NOT NULL, '
        "type text NOT NULL, ts double precision NOT NULL, payload bytea NOT NULL, "
        "PRIMARY KEY (session_id, seq))"
    )
    raw.execute(f'ALTER TABLE "{schema}".floor ALTER COLUMN payload SET STORAGE EXTERNAL')
    raw.commit()
    lines = []
    try:
        for batch in BATCHES:
            case = AppendCase(batch)

            def project(case: AppendCase = case) -> None:
                session, batches = case.batches("p")
                for events in batches:
                    store.append(session, events, expected_seq=events[0].seq)

            def floor(case: AppendCase = case) -> Callable[[], None]:
                _, batches = case.batches("f")
                rows = [[row_of(e) for e in events] for events in batches]
                copy_sql = (
                    f'COPY "{schema}".floor (session_id, seq, type, ts, payload) '
                    "FROM STDIN (FORMAT BINARY)"
                )

                def run() -> None:
                    for batch_rows in rows:
                        with raw.cursor() as cur, cur.copy(copy_sql) as copy:
                            copy.set_types(["text", "int8", "text", "float8", "bytea"])
                            for row in batch_rows:
                                copy.write_row(row)
                        raw.commit()

                return run

            lines.append(_append_ratio("postgres", case, project, floor, rounds))
    finally:
        store.close()
        raw.execute(f'DROP SCHEMA "{schema}" CASCADE')
        raw.commit()
        raw.close()
    return lines


def _append_ratio(
    backend: str,
    case: AppendCase,
    project: Callable[[], None],
    make_floor: Callable[[], Callable[[], None]],
    rounds: int,
) -> str:
    """Alternate project and floor; per-event µs, ratio = project/floor."""
    best_project = best_floor = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        project()
        best_project = min(best_project, time.perf_counter() - start)
        run_floor = make_floor()  # rows encoded outside the timed part
        start = time.perf_counter()
        run_floor()
        best_floor = min(best_floor, time.perf_counter() - start)
    events = case.batch * case.appends
    project_us = best_project / events * 1e6
    floor_us = best_floor / events * 1e6
    ratio = project_us / floor_us
    target = 1.2
    ok = "yes" if ratio <= target else "no"
    if case.batch != 100:
        ok = f"{ok}(report-only)"
    return (
        f"RATIO append_{backend}_batch{case.batch} project={project_us:.4g}us/event "
        f"baseline={floor_us:.4g}us/event ratio={ratio:.2f} target=<={target} ok={ok}"
    )


# ---------------------------------------------------------------------- reads


def bench_reads(directory: Path, url: str | None, rounds: int, count: int) -> list[str]:
    lines = []
    session = "read-bench"
    events = make_events(session, 0, count)
    sqlite_store = SqliteStore(directory / "read.db")
    for start in range(0, count, 10_000):
        sqlite_store.append(session, events[start : start + 10_000], expected_seq=start)

    def read_sqlite() -> None:
        got = sum(1 for _ in sqlite_store.read(session))
        assert got == count

    baseline = _agents_reader(directory, events)
    if baseline is None:
        (project,) = best_of(rounds, read_sqlite)
        lines.append(
            f"# openai-agents is not installed (pip install 'universal-event[bench]'); "
            f"sqlite read of {count} events: {project:.3f}s"
        )
    else:
        project, agents = best_of(rounds, read_sqlite, baseline)
        lines.append(ratio_line(f"read_{count}_sqlite_vs_agents", project, agents, "s", ">=", 2))

    jsonl_store = JsonlStore(directory / "read-jsonl")
    for start in range(0, count, 10_000):
        jsonl_store.append(session, events[start : start + 10_000], expected_seq=start)
    readers: list[tuple[str, Callable[[], None]]] = [
        ("jsonl", lambda: _drain(jsonl_store.read(session), count))
    ]
    pg_store: Any = None
    if url is not None:
        from universal_event.stores.postgres import PostgresStore

        pg_store = PostgresStore(url, schema=f"ue_bench_read_{os.getpid()}")
        for start in range(0, count, 10_000):
            pg_store.append(session, events[start : start + 10_000], expected_seq=start)
        readers.append(("postgres", lambda: _drain(pg_store.read(session), count)))
    if baseline is not None:
        for name, reader in readers:
            project, agents = best_of(rounds, reader, baseline)
            lines.append(
                ratio_line(f"read_{count}_{name}_vs_agents", project, agents, "s", ">=", 2)
            )
    if pg_store is not None:
        import psycopg

        pg_store.close()
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute(f'DROP SCHEMA "{pg_store.schema}" CASCADE')
    sqlite_store.close()
    return lines


def _drain(stream: Any, count: int) -> None:
    got = sum(1 for _ in stream)
    assert got == count, got


def _agents_reader(directory: Path, events: list[Event]) -> Callable[[], None] | None:
    """openai-agents' SQLiteSession holding the same messages; None when not installed."""
    try:
        from agents.memory import SQLiteSession
    except ImportError:
        return None
    session = SQLiteSession("bench", directory / "agents.db")
    items: list[Any] = []
    for event in events:
        assert isinstance(event, UserMessageEvent)
        part = event.content[0]
        assert isinstance(part, TextPart)
        items.append({"role": "user", "content": part.text})
    asyncio.run(session.add_items(items))

    def read() -> None:
        got = asyncio.run(session.get_items())
        assert len(got) == len(events)

    return read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "UNIVERSAL_EVENT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="ue-bench-stores-"))
    url: str | None = args.postgres
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=3).close()
    except Exception as exc:  # report and go on without PostgreSQL
        print(f"# PostgreSQL unreachable ({exc}); skipping its figures")
        url = None
    lines: list[str] = []
    try:
        lines += bench_sqlite_appends(directory, args.rounds)
        lines += bench_jsonl_appends(directory, args.rounds)
        if url is not None:
            lines += bench_postgres_appends(url, args.rounds)
        lines += bench_reads(directory, url, args.rounds, args.events)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
