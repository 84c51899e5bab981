"""A fork copies each stored event as it is, but for its session id: what a newer producer
wrote (fields, part and event types this version does not know, its own spacing) reaches
the child byte for byte. The shared suite sees this through ``read``; here the stored
rows and lines themselves are compared, on every durable backend."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec
import pytest

from universal_event.errors import CorruptEventError
from universal_event.stores import Store
from universal_event.stores._base import Rehoming
from universal_event.testing import newer_producer_events, sample_events

from .conftest import POSTGRES_URL, StoreKit

# ---------------------------------------------------------------------- raw access


def _jsonl_path(store: Any, session: str) -> Path:
    return Path(store.directory) / (quote(session, safe="") + ".jsonl")


def _raw_rows(kit: StoreKit, store: Any, session: str) -> list[tuple[str | None, bytes]]:
    """The session's stored ``(type, payload)`` in seq order (JSONL: no type column)."""
    if kit.backend == "jsonl":
        return [(None, line) for line in _jsonl_path(store, session).read_bytes().splitlines()[1:]]
    query = "SELECT type, payload FROM {events} WHERE session_id = {p} ORDER BY seq"
    if kit.backend == "sqlite":
        with sqlite3.connect(store.path) as raw:
            rows = raw.execute(query.format(events="events", p="?"), (session,)).fetchall()
        return [(kind, bytes(payload)) for kind, payload in rows]
    import psycopg

    with psycopg.connect(POSTGRES_URL) as raw:
        events = f'"{store.schema}".events'
        rows = raw.execute(query.format(events=events, p="%s"), (session,)).fetchall()
    return [(kind, bytes(payload)) for kind, payload in rows]


def _write_raw(
    kit: StoreKit, store: Any, session: str, seq: int, kind: str, payload: bytes
) -> None:
    """Put ``payload`` in place of the stored event ``seq``, as another writer would."""
    if kit.backend == "jsonl":
        path = _jsonl_path(store, session)
        lines = path.read_bytes().splitlines(keepends=True)
        lines[seq + 1] = payload + b"\n"
        path.write_bytes(b"".join(lines))
        return
    update = "UPDATE {events} SET type = {p}, payload = {p} WHERE session_id = {p} AND seq = {p}"
    if kit.backend == "sqlite":
        with sqlite3.connect(store.path) as raw:
            raw.execute(update.format(events="events", p="?"), (kind, payload, session, seq))
        return
    import psycopg

    with psycopg.connect(POSTGRES_URL) as raw:
        events = f'"{store.schema}".events'
        raw.execute(update.format(events=events, p="%s"), (kind, payload, session, seq))


def _member(session: str) -> bytes:
    return b'"session_id":' + msgspec.json.encode(session)


def _assert_rehomed(
    parent: list[tuple[str | None, bytes]], child: list[tuple[str | None, bytes]], want: list[bytes]
) -> None:
    assert len(child) == len(want)
    for seq, ((kind, payload), (parent_kind, _), wanted) in enumerate(
        zip(child, parent, want, strict=False)
    ):
        assert payload == wanted, f"seq {seq}: stored {payload!r}, wanted {wanted!r}"
        assert kind == parent_kind, f"seq {seq}: type column {kind!r}, parent's {parent_kind!r}"


# ---------------------------------------------------------------------- backends


def test_fork_copies_stored_bytes_but_the_session_id(durable_kit: StoreKit) -> None:
    """Events a newer producer made (and this version's, control characters escaped as
    ``\\u0000`` too), forked part way: each child row is the parent's with the top-level
    session id replaced, nothing else; the type column is copied as stored."""
    store: Store = durable_kit.make()
    try:
        written = [*newer_producer_events("p"), *sample_events("p", 4, 300)]
        store.append("p", written, expected_seq=0)
        store.fork("p", "c", upto_seq=260)
        parent = _raw_rows(durable_kit, store, "p")
        child = _raw_rows(durable_kit, store, "c")
        want = [payload.replace(_member("p"), _member("c"), 1) for _, payload in parent[:261]]
        _assert_rehomed(parent, child, want)
        assert b'"origin":{"session_id":"p"' in child[2][1]  # not the envelope's: kept
        assert [event.seq for event in store.read("c")] == list(range(261))
        assert {event.session_id for event in store.read("c")} == {"c"}
    finally:
        store.close()


def test_fork_keeps_what_a_newer_writer_stored_as_it_stored_it(durable_kit: StoreKit) -> None:
    """Rows written by another (newer) producer: its own spacing, an unknown field at
    the event and the part level, an escaped key, a nested ``session_id``. The fork
    changes only the top-level session id of each: spacing kept where the id is found
    by bytes, the top level re-joined (compact) where it is decoded."""
    store: Store = durable_kit.make()
    try:
        store.append("p", sample_events("p", 0, 6), expected_seq=0)
        events = [json.loads(payload) for _, payload in _raw_rows(durable_kit, store, "p")]
        spaced = {**events[1], "content": [{"type": "text", "text": "hi", "lang": "fr"}]}
        spaced["language"] = "fr"
        _write_raw(durable_kit, store, "p", 1, "user/message", json.dumps(spaced).encode())
        escaped = json.dumps({**events[2], "note": "é"}, ensure_ascii=True, separators=(",", ":"))
        escaped = escaped.replace('"session_id"', '"session\\u005fid"')
        _write_raw(durable_kit, store, "p", 2, "assistant/chunk", escaped.encode())
        nested = {**events[3], "later": {"session_id": "p", "x": [1, 2.50]}}
        nested_bytes = json.dumps(nested, separators=(",", ":")).replace("2.5", "2.50").encode()
        _write_raw(durable_kit, store, "p", 3, "assistant/message", nested_bytes)
        parent = _raw_rows(durable_kit, store, "p")

        store.fork("p", "c", upto_seq=5)
        child = _raw_rows(durable_kit, store, "c")
        want = [payload.replace(_member("p"), _member("c"), 1) for _, payload in parent]
        want[1] = parent[1][1].replace(b'"session_id": "p"', b'"session_id": "c"')
        # compact already: re-joined the same, the key spelled plainly, "\u00e9" kept
        want[2] = escaped.replace('"session\\u005fid":"p"', '"session_id":"c"').encode()
        want[3] = nested_bytes.replace(_member("p"), _member("c"), 1)
        _assert_rehomed(parent, child, want)
        assert b'"x":[1,2.50]' in child[3][1]  # nested values as stored, not re-encoded
        assert {event.session_id for event in store.read("c")} == {"c"}
    finally:
        store.close()


def test_fork_of_a_damaged_event_fails_naming_it_and_makes_no_child(
    durable_kit: StoreKit,
) -> None:
    """Bytes are copied, but only once decoded and checked: damage is not passed on."""
    store: Store = durable_kit.make()
    try:
        store.append("p", sample_events("p", 0, 200), expected_seq=0)
        _write_raw(durable_kit, store, "p", 150, "user/message", b'{"type":"user/message",')
        with pytest.raises(CorruptEventError) as info:
            store.fork("p", "c", upto_seq=199)
        assert (info.value.session_id, info.value.seq) == ("p", 150)
        assert store.latest_seq("c") == -1
        store.fork("p", "c", upto_seq=149)  # the events before it fork
        assert [event.seq for event in store.read("c")] == list(range(150))
    finally:
        store.close()


# ---------------------------------------------------------------------- Rehoming


@pytest.mark.parametrize(
    ("payload", "rehomed"),
    [
        (
            b'{"type":"t","seq":1,"session_id":"p","ts":1}',
            b'{"type":"t","seq":1,"session_id":"c","ts":1}',
        ),
        (b'{"seq": 1, "session_id" : "p", "x": 2}', b'{"seq": 1, "session_id" : "c", "x": 2}'),
        (b'{"session_id":"p","t":"a\\u0000\\u001b"}', b'{"session_id":"c","t":"a\\u0000\\u001b"}'),
        # nested first: only the top-level member changes (the top level decoded)
        (
            b'{"m":{"session_id":"p"},"session_id":"p"}',
            b'{"m":{"session_id":"p"},"session_id":"c"}',
        ),
        # a string that holds the key's bytes
        (b'{"a\\"session_id":"p","session_id":"p"}', b'{"a\\"session_id":"p","session_id":"c"}'),
        # the key spelled with an escape, the bytes of the key nested
        (
            b'{"session\\u005fid":"p","m":{"session_id":"p"}}',
            b'{"session_id":"c","m":{"session_id":"p"}}',
        ),
        # the key twice: the last is the one a decoder takes
        (b'{"session_id":"x","session_id":"p","y":1}', b'{"session_id":"c","y":1}'),
        (
            b'{"seq":0,"session_id":"p","x":[1.50 , 2]}',
            b'{"seq":0,"session_id":"c","x":[1.50 , 2]}',
        ),
    ],
)
def test_rehoming_changes_only_the_top_level_session_id(payload: bytes, rehomed: bytes) -> None:
    rehoming = Rehoming("p", "c")
    assert rehoming.payload(payload) == rehomed
    assert rehoming.payload(payload.decode()) == rehomed  # a TEXT value
    assert rehoming.payloads([payload, bytearray(payload)]) == [rehomed, rehomed]
    assert rehoming.lines(payload + b"\n" + payload + b"\n", 2) == rehomed + b"\n" + rehomed + b"\n"


def test_rehoming_a_batch_by_bytes_and_one_by_one() -> None:
    """A batch the fast check passes is replaced as bytes; one it refuses (a payload with
    the key nested) is re-homed payload by payload, each right."""
    rehoming = Rehoming('s "1" é', "other")
    plain = [msgspec.json.encode({"seq": n, "session_id": 's "1" é', "t": "x"}) for n in range(3)]
    expected = [payload.replace(b'"s \\"1\\" \xc3\xa9"', b'"other"') for payload in plain]
    assert rehoming.payloads(plain) == expected
    odd = b'{"seq":3,"session_id":"s \\"1\\" \xc3\xa9","m":{"session_id":"s \\"1\\" \xc3\xa9"}}'
    assert rehoming.payloads([*plain, odd]) == [
        *expected,
        b'{"seq":3,"session_id":"other","m":{"session_id":"s \\"1\\" \xc3\xa9"}}',
    ]
    run = b"\n".join([*plain, odd]) + b"\n"
    assert rehoming.lines(run, 4) == b"\n".join(rehoming.payloads([*plain, odd])) + b"\n"


def test_rehoming_from_an_empty_id_that_was_left_out() -> None:
    """An empty session id may be stored as no key (the default): the fork adds it."""
    assert (
        Rehoming("", "c").payload(b'{"seq":0,"type":"t"}')
        == b'{"seq":0,"type":"t","session_id":"c"}'
    )
