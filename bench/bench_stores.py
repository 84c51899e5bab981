"""Store benchmarks: appends against the raw driver floor; reading a 100k-event session.

Appends (batch sizes 1, 100, 1000) on each durable backend, against the floor measured
in the same run with the same durability setting and the same rows:

* SQLite: plain ``sqlite3`` ``BEGIN IMMEDIATE`` + ``executemany`` + ``COMMIT`` of the
  already-encoded rows, on a connection given the store's pragmas (WAL,
  ``synchronous=FULL``, ``mmap_size``) into a table made by the store's own
  ``CREATE TABLE`` statement;
* PostgreSQL: plain psycopg binary ``COPY`` of the already-encoded rows + ``COMMIT``;
* JSONL: plain ``write`` + ``fsync`` of the already-encoded lines into a new file per
  session, whose first write also fsyncs the directory (as the store's does).

The floor gets its rows pre-encoded: the store's figure includes encoding the events,
the conflict check and the session-metadata row. Store and floor appends are
interleaved one by one (who goes first alternates), and each figure is the median
append per event. ``ratio`` here is project/floor (lower is better), target ``<=1.2``
at batch 100 (batches 1 and 1000 are reported).

Reading: a 100k-event session back into typed events vs the openai-agents SDK's
``SQLiteSession.get_items`` on 100k items of the same text (``bench`` extra);
``ratio`` there is baseline/project (higher = faster), target ``>=2``.

    python bench/bench_stores.py [--postgres URL] [--rounds R] [--read-rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
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

BATCHES = {1: 60, 100: 20, 1000: 4}
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

Step = Callable[[], None]
"""One timed append (a store's, or the floor's)."""


def bench_sqlite_appends(directory: Path, rounds: int) -> list[str]:
    store = SqliteStore(directory / "store.db")
    raw = sqlite3.connect(directory / "floor.db", isolation_level=None)
    # The floor's connection and table are the store's: same pragmas (WAL,
    # synchronous=FULL, mmap), same CREATE TABLE statement, so only the store's own work
    # differs.
    for pragma in ("journal_mode", "synchronous", "mmap_size"):
        (value,) = store._conn.execute(f"PRAGMA {pragma}").fetchone()
        raw.execute(f"PRAGMA {pragma}={value}")
    (events_table,) = store._conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'"
    ).fetchone()
    raw.execute(events_table)

    def floor_steps(batches: list[list[Event]]) -> tuple[list[Step], Step]:
        rows = [[row_of(e) for e in events] for events in batches]

        def step(batch_rows: list[tuple[str, int, str, float, bytes]]) -> None:
            raw.execute("BEGIN IMMEDIATE")
            raw.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", batch_rows)
            raw.execute("COMMIT")

        return [partial(step, r) for r in rows], lambda: None

    lines = [_append_ratio("sqlite", batch, store.append, floor_steps, rounds) for batch in BATCHES]
    store.close()
    raw.close()
    return lines


def bench_jsonl_appends(directory: Path, rounds: int) -> list[str]:
    store = JsonlStore(directory / "jsonl")
    floor_dir = directory / "jsonl-floor"
    floor_dir.mkdir()

    def floor_steps(batches: list[list[Event]]) -> tuple[list[Step], Step]:
        """Write + fsync of the encoded lines into a new file per session; the first write
        also fsyncs the directory, as the store does, so the new file is as durable."""
        chunks = [encode_lines(events) for events in batches]
        path = floor_dir / batches[0][0].session_id
        fd: list[int] = []

        def first() -> None:
            fd.append(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
            os.write(fd[0], chunks[0])
            os.fsync(fd[0])
            directory_fd = os.open(floor_dir, os.O_RDONLY)
            os.fsync(directory_fd)
            os.close(directory_fd)

        def later(chunk: bytes) -> None:
            os.write(fd[0], chunk)
            os.fsync(fd[0])

        steps: list[Step] = [first, *(partial(later, c) for c in chunks[1:])]
        return steps, lambda: os.close(fd[0])

    return [_append_ratio("jsonl", batch, store.append, floor_steps, rounds) for batch in BATCHES]


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
    copy_sql = (
        f'COPY "{schema}".floor (session_id, seq, type, ts, payload) FROM STDIN (FORMAT BINARY)'
    )

    def floor_steps(batches: list[list[Event]]) -> tuple[list[Step], Step]:
        rows = [[row_of(e) for e in events] for events in batches]

        def step(batch_rows: list[tuple[str, int, str, float, bytes]]) -> None:
            with raw.cursor() as cur, cur.copy(copy_sql) as copy:
                copy.set_types(["text", "int8", "text", "float8", "bytea"])
                for row in batch_rows:
                    copy.write_row(row)
            raw.commit()

        return [partial(step, r) for r in rows], lambda: None

    try:
        return [
            _append_ratio("postgres", batch, store.append, floor_steps, rounds) for batch in BATCHES
        ]
    finally:
        store.close()
        raw.execute(f'DROP SCHEMA "{schema}" CASCADE')
        raw.commit()
        raw.close()


def _append_ratio(
    backend: str,
    batch: int,
    append: Callable[..., None],
    floor_steps: Callable[[list[list[Event]]], tuple[list[Step], Step]],
    rounds: int,
) -> str:
    """Interleave the store's appends with the floor's, one append each in turn.

    Each round appends ``BATCHES[batch]`` batches to a new session on both sides; the
    side that goes first alternates at every append, so drifting machine load (fsync
    latency, other processes) falls on both alike. The floor's rows are encoded before
    its timed part. Figures are the median append, per event; ratio = project/floor.
    """
    project_times: list[float] = []
    floor_times: list[float] = []
    appends = BATCHES[batch]
    for round_index in range(rounds):
        session = f"p-{uuid.uuid4().hex[:8]}"
        batches = _split(make_events(session, 0, batch * appends), batch)
        floor, finish = floor_steps(_split(make_events(f"f-{session}", 0, batch * appends), batch))
        for index, events in enumerate(batches):

            def project(events: list[Event] = events, session: str = session) -> None:
                append(session, events, expected_seq=events[0].seq)

            pair = [(project_times, project), (floor_times, floor[index])]
            if (round_index + index) % 2:
                pair.reverse()
            for sink, step in pair:
                start = time.perf_counter()
                step()
                sink.append(time.perf_counter() - start)
        finish()
    project_us = statistics.median(project_times) / batch * 1e6
    floor_us = statistics.median(floor_times) / batch * 1e6
    ratio = project_us / floor_us
    target = 1.2
    ok = "yes" if ratio <= target else "no"
    if batch != 100:
        ok = f"{ok}(report-only)"
    return (
        f"RATIO append_{backend}_batch{batch} project={project_us:.4g}us/event "
        f"baseline={floor_us:.4g}us/event ratio={ratio:.2f} target=<={target} ok={ok}"
    )


def _split(events: list[Event], size: int) -> list[list[Event]]:
    return [events[i : i + size] for i in range(0, len(events), size)]


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
        assert url is not None
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
    parser.add_argument("--rounds", type=int, default=6, help="append rounds")
    parser.add_argument("--read-rounds", type=int, default=5, help="best of, for reads")
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="ue-bench-stores-"))
    url: str | None = args.postgres
    try:
        import psycopg

        psycopg.connect(args.postgres, connect_timeout=3).close()
    except Exception as exc:  # report and go on without PostgreSQL
        print(f"# PostgreSQL unreachable ({exc}); skipping its figures")
        url = None
    lines: list[str] = []
    try:
        lines += bench_sqlite_appends(directory, args.rounds)
        lines += bench_jsonl_appends(directory, args.rounds)
        if url is not None:
            lines += bench_postgres_appends(url, args.rounds)
        lines += bench_reads(directory, url, args.read_rounds, args.events)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
