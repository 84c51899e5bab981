"""Edge cases where the backends must agree, and where a store meets input it cannot
hold: typed errors, nothing already stored lost."""

from __future__ import annotations

import logging
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from universal_event import SessionLog
from universal_event.errors import CorruptEventError, DecodeError, StoreError, StoreURLError
from universal_event.events import NativeUnknownEvent
from universal_event.stores import open_store
from universal_event.stores.jsonl import JsonlStore
from universal_event.stores.postgres import PostgresStore
from universal_event.stores.sqlite import SqliteStore
from universal_event.testing import sample_events

from .conftest import POSTGRES_URL, StoreKit, new_schema

DEEP = b"[" * 100_000 + b"]" * 100_000
"""JSON nested deeper than any decoder goes (it raises RecursionError)."""


def _nested(depth: int) -> dict[str, object]:
    payload: dict[str, object] = {"v": 0}
    for _ in range(depth):
        payload = {"n": payload}
    return payload


def test_a_tail_before_the_start_returns_the_whole_session(kit: StoreKit) -> None:
    store = kit.make()
    store.append("s", sample_events("s", 0, 5), expected_seq=0)
    assert [e.seq for e in store.tail("s", -3, timeout=0)] == [0, 1, 2, 3, 4]
    store.close()


def test_an_empty_append_makes_no_session(kit: StoreKit) -> None:
    store = kit.make()
    store.append("ghost", [], expected_seq=0)
    store.append("parent", sample_events("parent", 0, 2), expected_seq=0)
    store.fork("parent", "ghost", upto_seq=1)  # "ghost" holds nothing: forked onto
    assert store.latest_seq("ghost") == 1
    store.append("empty", [], expected_seq=0)
    with pytest.raises(StoreError):  # nothing to fork from
        store.fork("empty", "child", upto_seq=0)
    assert "empty" not in {info.session_id for info in store.list_sessions()}
    store.close()


def test_sessions_are_listed_in_code_point_order(kit: StoreKit) -> None:
    store = kit.make()
    ids = ["ab", "a-c", "a", "_x", "Z9", "B", "é"]
    for session in ids:
        store.append(session, sample_events(session, 0, 1), expected_seq=0)
    assert [info.session_id for info in store.list_sessions()] == sorted(ids)
    store.close()


def test_the_postgres_listing_order_does_not_depend_on_the_collation() -> None:
    """A database whose default collation is a language's (``en-US``) sorts ``_x``
    before ``B``; the listing is in code-point order all the same."""
    import psycopg

    database = new_schema([])
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(
            f"CREATE DATABASE {database} TEMPLATE template0 ENCODING 'UTF8' "
            "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
        )
    try:
        url = POSTGRES_URL.rsplit("/", 1)[0] + f"/{database}"
        store = PostgresStore(url, max_size=2)
        ids = ["ab", "a-c", "a", "_x", "Z9", "B"]
        for session in ids:
            store.append(session, sample_events(session, 0, 1), expected_seq=0)
        assert [info.session_id for info in store.list_sessions()] == sorted(ids)
        store.close()
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


@pytest.mark.parametrize("past_the_limit", [100, 2000])
def test_an_event_nested_too_deep_is_refused_with_a_typed_error(
    durable_kit: StoreKit, past_the_limit: int
) -> None:
    # the encoder's depth limit is the interpreter's recursion limit (which a test
    # library may have raised)
    depth = sys.getrecursionlimit() + past_the_limit
    store = durable_kit.make()
    store.append("s", sample_events("s", 0, 2), expected_seq=0)
    deep = NativeUnknownEvent(
        seq=2, id="deep", session_id="s", ts=1.0, runtime="r", native_type="t",
        payload=_nested(depth),
    )  # fmt: skip
    with pytest.raises(DecodeError, match="'s'.*nesting too deep"):
        store.append("s", [deep], expected_seq=2)
    assert [e.seq for e in store.read("s")] == [0, 1]  # nothing written
    store.append("s", sample_events("s", 2, 1), expected_seq=2)
    store.close()


def test_the_log_refuses_an_event_nested_too_deep() -> None:
    log = SessionLog(open_store("memory:"), "deep")
    deep = _nested(sys.getrecursionlimit() + 100)
    with pytest.raises(DecodeError, match="nesting too deep"):
        log.append(NativeUnknownEvent(runtime="r", native_type="t", payload=deep))
    assert log.events() == []


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_a_stored_event_nested_too_deep_reads_as_corrupt(backend: str, tmp_path: Path) -> None:
    """Every read path names the session and seq (a decoder's RecursionError is no
    reader's to catch); the events before it still reach the reader."""
    if backend == "jsonl":
        store: JsonlStore | SqliteStore = JsonlStore(tmp_path / "j")
        store.append("s", sample_events("s", 0, 3), expected_seq=0)
        path = tmp_path / "j" / "s.jsonl"
        lines = path.read_bytes().split(b"\n")
        lines[2] = b'{"seq":1,"x":' + DEEP + b"}"  # the header is line 0
        path.write_bytes(b"\n".join(lines))
        store = JsonlStore(tmp_path / "j")
    else:
        store = SqliteStore(tmp_path / "s.db")
        store.append("s", sample_events("s", 0, 3), expected_seq=0)
        with sqlite3.connect(tmp_path / "s.db") as raw:
            raw.execute("UPDATE events SET payload = ? WHERE seq = 1", (DEEP,))
    reader = store.read("s")
    assert next(reader).seq == 0
    with pytest.raises(CorruptEventError) as raised:
        list(reader)
    assert (raised.value.session_id, raised.value.seq) == ("s", 1)
    with pytest.raises(CorruptEventError):
        store.fork("s", "child", upto_seq=2)
    store.close()


def test_a_jsonl_last_line_nested_too_deep_is_corrupt_and_hides_no_other_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = JsonlStore(tmp_path)
    store.append("s", sample_events("s", 0, 2), expected_seq=0)
    store.append("other", sample_events("other", 0, 1), expected_seq=0)
    with open(tmp_path / "s.jsonl", "ab") as handle:
        handle.write(b'{"seq":2,"x":' + DEEP + b"}\n")
    store = JsonlStore(tmp_path)
    for call in (store.latest_seq, store.session_info):
        with pytest.raises(CorruptEventError) as raised:
            call("s")
        assert raised.value.seq == 2
    with caplog.at_level(logging.WARNING):
        assert [info.session_id for info in store.list_sessions()] == ["other"]
    assert "skipping session 's'" in caplog.text


def test_a_directory_named_like_a_jsonl_session_is_skipped_and_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = JsonlStore(tmp_path)
    store.append("good", sample_events("good", 0, 2), expected_seq=0)
    (tmp_path / "old.jsonl").mkdir()
    with caplog.at_level(logging.WARNING):
        assert [info.session_id for info in store.list_sessions()] == ["good"]
    assert "old.jsonl" in caplog.text
    for call in (store.session_info, store.latest_seq, lambda s: list(store.read(s))):
        with pytest.raises(CorruptEventError, match="directory"):
            call("old")
    with pytest.raises(CorruptEventError, match="directory"):
        store.append("old", sample_events("old", 0, 1), expected_seq=0)
    assert (tmp_path / "old.jsonl").is_dir()


def test_a_jsonl_store_does_not_delete_a_file_that_is_not_a_session(tmp_path: Path) -> None:
    capture = tmp_path / "capture.jsonl"
    capture.write_bytes(b'{"some": "user data"}\n{"more": 1}\n')
    store = JsonlStore(tmp_path)
    with pytest.raises(CorruptEventError):
        store.delete("capture")
    assert capture.read_bytes() == b'{"some": "user data"}\n{"more": 1}\n'
    empty = tmp_path / "cut.jsonl"  # a first write that never came: a session of none
    empty.touch()
    store.delete("cut")
    assert not empty.exists()


def test_a_jsonl_session_was_never_active_before_it_was_created(tmp_path: Path) -> None:
    """``created`` is the clock's time, a file's mtime the kernel's coarser one."""
    store = JsonlStore(tmp_path)
    for index in range(200):
        session = f"s{index}"
        store.append(session, sample_events(session, 0, 1), expected_seq=0)
        info = store.session_info(session)
        assert info.created <= info.last_activity


def test_a_long_running_jsonl_store_remembers_a_bounded_number_of_sessions(
    tmp_path: Path,
) -> None:
    from universal_event.stores import jsonl

    store = JsonlStore(tmp_path, fsync=False)
    sessions = jsonl._MAX_REMEMBERED_PATHS + 50
    for index in range(sessions):
        session = f"s{index}"
        store.append(session, sample_events(session, 0, 1), expected_seq=0)
    assert len(store._positions) <= jsonl._MAX_REMEMBERED_PATHS
    assert store.latest_seq("s0") == 0  # forgotten, found again
    store.append("s0", sample_events("s0", 1, 1), expected_seq=1)


@pytest.mark.parametrize(
    "url",
    ["sqlite:///./q.db?mode=ro", "sqlite:///./q.db#x", "jsonl:///./d?fsync=false", "jsonl:///./d?"],
)
def test_a_file_store_url_with_parameters_is_refused(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreURLError, match="query or fragment"):
        open_store(url)
    assert list(tmp_path.iterdir()) == []


def test_store_url_schemes_are_case_insensitive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("MEMORY:", "SQLite:///./s.db", "JSONL:///./j"):
        store = open_store(url)
        store.append("s", sample_events("s", 0, 1), expected_seq=0)
        assert store.latest_seq("s") == 0
        store.close()
    schema = new_schema([])
    store = open_store("POSTGRESQL" + POSTGRES_URL[len("postgresql") :] + f"?schema={schema}")
    try:
        assert store.latest_seq("s") == -1
    finally:
        store.close()
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_postgres_reads_left_open_do_not_starve_the_store(
    postgres_url: str, postgres_schemas: list[str]
) -> None:
    """Reads hold all but one of the pool's connections: more reads open at once than
    the pool has connections, and an append meanwhile, all go through (reads past the
    held ones take a connection page by page)."""
    store = PostgresStore(postgres_url, schema=new_schema(postgres_schemas), max_size=3)
    try:
        for index in range(6):
            session = f"m{index}"
            store.append(session, sample_events(session, 0, 3), expected_seq=0)
        readers = [store.read(f"m{index}") for index in range(6)]
        assert [next(reader).seq for reader in readers] == [0] * 6
        started = time.monotonic()
        store.append("m0", sample_events("m0", 3, 1), expected_seq=3)
        assert time.monotonic() - started < 5
        # each read ends where the session ended when it began
        assert [[e.seq for e in reader] for reader in readers] == [[1, 2]] * 6
        assert store.latest_seq("m0") == 3
    finally:
        store.close()


def test_a_pool_with_no_connection_free_raises_a_store_error(
    postgres_url: str, postgres_schemas: list[str]
) -> None:
    store = PostgresStore(postgres_url, schema=new_schema(postgres_schemas), max_size=2)
    store._pool.timeout = 0.5
    taken = [store._pool.getconn(), store._pool.getconn()]  # another user of the pool
    try:
        with pytest.raises(StoreError, match="2 connections came free within 0.5 s"):
            store.latest_seq("s")
    finally:
        for connection in taken:
            store._pool.putconn(connection)
        store.close()


def test_memory_store_lists_sessions_while_another_thread_deletes_them() -> None:
    """list_sessions read the session table outside the store's lock: a KeyError when a
    session went between listing its id and reading its metadata."""
    import sys
    import threading

    from universal_event.stores import MemoryStore
    from universal_event.testing import sample_events

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        store = MemoryStore()
        ids = [f"s{index}" for index in range(3000)]
        for session_id in ids:
            store.append(session_id, sample_events(session_id, 0, 1), expected_seq=0)
        failures: list[BaseException] = []
        done = threading.Event()

        def delete_all() -> None:
            for session_id in ids:
                store.delete(session_id)
            done.set()

        deleter = threading.Thread(target=delete_all)
        deleter.start()
        while not done.is_set():
            try:
                listed = store.list_sessions()
            except KeyError as exc:
                failures.append(exc)
                break
            assert all(info.event_count == 1 for info in listed)
        deleter.join()
        assert failures == [] and store.list_sessions() == []
    finally:
        sys.setswitchinterval(switch)
