"""The Store conformance suite: what every backend must do, runnable on yours.

Two ways to run it (neither needs pytest to import this module)::

    from universal_event.testing import run_store_conformance

    def test_my_store():
        run_store_conformance(lambda: MyStore(...))          # every check, in turn

or, to see one pytest test per check::

    from universal_event.testing import StoreConformance

    class TestMyStore(StoreConformance):
        def make_store(self) -> Store:
            return MyStore(...)

        def reopen_store(self, store: Store) -> Store | None:   # optional: durability
            store.close()
            return MyStore(...)                               # same underlying data

``make_store`` is called once per check and must return an *empty* store. Each check
closes the stores it made. Checks raise ``AssertionError`` (or the store's own
exception) with the check's name in front.

What is checked: appends and conflicts (a taken or skipped seq raises
:class:`~universal_event.errors.ConflictError` and writes nothing), batch validation,
byte-exact round trips of every kind of event including a large tool result, ordered
ranged streaming reads, ``latest_seq``, session metadata (a runtime named late too),
``fork`` (at the edges too, and of what a newer producer stored), ``delete``, ``tail``
(returns at once, times out, wakes on an append from another thread), and many threads
appending to one session (no gap, no duplicate).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import msgspec

from universal_event.codec import decode, encode
from universal_event.errors import ConflictError, SessionNotFoundError, StoreError
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    Event,
    EventBase,
    NativeUnknownEvent,
    SessionStartEvent,
    Source,
    ToolCallEvent,
    ToolResultEvent,
    Usage,
    UsageEvent,
    UserMessageEvent,
)
from universal_event.parts import Provenance, TextPart, ThinkingPart, ToolCallPart
from universal_event.stores._base import Store

__all__ = [
    "CHECKS",
    "StoreConformance",
    "large_tool_result",
    "newer_producer_events",
    "run_store_conformance",
    "sample_events",
]

StoreFactory = Callable[[], Store]
Reopen = Callable[[Store], "Store | None"]
Check = Callable[[StoreFactory, "Reopen | None"], None]

LARGE_RESULT_BYTES = 20 * 1024 * 1024
"""Size of the large tool result the suite round-trips (the issue's 20 MB)."""


# ---------------------------------------------------------------------- sample data


def sample_events(
    session_id: str, start: int, count: int, *, runtime: str = "anthropic"
) -> list[Event]:
    """``count`` enveloped events with seqs ``start..start+count-1``, of varied types.

    Deterministic in (session, seq): a reader can rebuild what must be stored.
    """
    return [_sample_event(session_id, seq, runtime) for seq in range(start, start + count)]


def _sample_event(session_id: str, seq: int, runtime: str) -> Event:
    envelope: dict[str, Any] = {
        "seq": seq,
        "id": f"{session_id}-ev-{seq}",
        "session_id": session_id,
        "ts": 1_700_000_000.0 + seq / 8,
        "source": Source(runtime=runtime, native_type="sample", model="m-1"),
    }
    kind = seq % 8
    if kind == 0:
        return SessionStartEvent(**envelope, runtime=runtime, metadata={"k": [1, 2.5, None]})
    if kind == 1:
        return UserMessageEvent(**envelope, content=[TextPart(text=f'question {seq} ✓ "q"\n')])
    if kind == 2:
        return AssistantChunkEvent(**envelope, message_id="msg_1", delta=f"tok{seq}")
    if kind == 3:
        return AssistantMessageEvent(
            **envelope,
            message_id="msg_1",
            provenance=Provenance(provider="anthropic", api="messages", model="m-1"),
            content=[
                ThinkingPart(text="hmm", signature="sig=="),
                TextPart(text=f"answer {seq}"),
                ToolCallPart(id=f"call_{seq}", name="bash", arguments={"cmd": "ls -la"}),
            ],
        )
    if kind == 4:
        return ToolCallEvent(**envelope, call_id=f"call_{seq - 1}", name="bash")
    if kind == 5:
        return ToolResultEvent(
            **envelope, call_id=f"call_{seq - 2}", content=[TextPart(text="a\tb\u0000c")]
        )
    if kind == 6:
        return UsageEvent(**envelope, usage=Usage(input_tokens=seq, output_tokens=2))
    return NativeUnknownEvent(
        **envelope, runtime=runtime, native_type="x.y", payload={"n": seq, "f": 0.1, "u": "é"}
    )


def large_tool_result(session_id: str, seq: int, size: int = LARGE_RESULT_BYTES) -> Event:
    """A tool result whose text is ``size`` characters, with escapes and non-ASCII mixed in."""
    unit = 'line of output: "quoted" \\ back\tslash — ünïcödé 🙂\n'
    text = (unit * (size // len(unit) + 1))[:size]
    return ToolResultEvent(
        seq=seq,
        id=f"{session_id}-big-{seq}",
        session_id=session_id,
        ts=1_700_000_000.5,
        call_id="call_big",
        name="cat",
        content=[TextPart(text=text)],
    )


class _NewerTextPart(TextPart, tag="text", kw_only=True, frozen=True):
    """A ``text`` part as a newer producer writes it: with a field this version lacks."""

    lang: str


class _NewerPart(msgspec.Struct, tag="text/annotated", tag_field="type", kw_only=True, frozen=True):
    """A part type this version does not know."""

    text: str
    note: str


class _NewerUserMessage(UserMessageEvent, tag="user/message", kw_only=True, frozen=True):
    """A ``user/message`` as a newer producer writes it: with a field this version lacks."""

    language: str


class _FutureEvent(EventBase, tag="future/event", kw_only=True, frozen=True):
    """An event type this version does not know."""

    origin: dict[str, Any]


def newer_producer_events(session_id: str, start: int = 0) -> list[EventBase]:
    """Four events with seqs ``start..start+3`` as a newer producer (schema evolution:
    fields and types added) would store them, holding what this version does not know:
    an event-level field, a field of a known part, a part type, an event type (one whose
    fields hold another ``session_id``, which is not the envelope's).

    Append them as they are (stores encode what they are given). Read back, an event
    holding an unknown type comes as ``native/unknown`` with the stored object as its
    payload; the others as this version's events (without the unknown fields: as any
    reader of this version decodes them).
    """
    envelope: dict[str, Any] = {"session_id": session_id, "ts": 1_700_000_000.0}
    return [
        _NewerUserMessage(
            **envelope,
            seq=start,
            id=f"{session_id}-newer-{start}",
            language="fr",
            content=[_NewerTextPart(text="bonjour", lang="fr")],
        ),
        _NewerUserMessage(
            **envelope,
            seq=start + 1,
            id=f"{session_id}-newer-{start + 1}",
            language="fr",
            content=[
                _NewerTextPart(text="salut", lang="fr"),
                _NewerPart(text="annotated", note="a later part"),  # type: ignore[list-item]
            ],
        ),
        _FutureEvent(
            **envelope,
            seq=start + 2,
            id=f"{session_id}-newer-{start + 2}",
            origin={"session_id": session_id, "note": "not the envelope's"},
        ),
        sample_events(session_id, start + 3, 1)[0],
    ]


def _as_stored(event: EventBase) -> Any:
    """What this version makes of the bytes of ``event``: a newer event read back and
    one written by the newer producer itself compare equal.

    Encoded with an encoder of its own, not :func:`codec.encode`: a newer producer's
    events are not this version's to check against its schema (this repository's tests
    check every event the codec encodes)."""
    return msgspec.to_builtins(decode(_newer_encoder.encode(event)))


_newer_encoder = msgspec.json.Encoder()


def _new_session_id(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:10]}"


def _read_all(store: Store, session_id: str, start: int = 0, end: int | None = None) -> list[Event]:
    return list(store.read(session_id, start, end))


def _assert_same(stored: list[Event], written: list[Event]) -> None:
    assert len(stored) == len(written), f"read {len(stored)} events, wrote {len(written)}"
    for got, want in zip(stored, written, strict=True):
        assert got == want, f"seq {want.seq}: read back {got!r}, wrote {want!r}"
        assert encode(got) == encode(want), f"seq {want.seq}: bytes differ after the round trip"


# ---------------------------------------------------------------------- the checks


def check_round_trip(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """Events of every kind read back equal and byte-identical, in seq order."""
    with _closing(make_store()) as store:
        session = _new_session_id("rt")
        written = sample_events(session, 0, 16)
        store.append(session, written[:5], expected_seq=0)
        store.append(session, written[5:], expected_seq=5)
        _assert_same(_read_all(store, session), written)
        assert store.latest_seq(session) == 15


def check_read_ranges(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """``read(start, end)`` is half-open, clamps at the end, and is empty past it."""
    with _closing(make_store()) as store:
        session = _new_session_id("range")
        written = sample_events(session, 0, 30)
        store.append(session, written, expected_seq=0)
        _assert_same(_read_all(store, session, 10, 20), written[10:20])
        _assert_same(_read_all(store, session, 25), written[25:])
        _assert_same(_read_all(store, session, 25, 1000), written[25:])
        _assert_same(_read_all(store, session, 0, 0), [])
        _assert_same(_read_all(store, session, 30), [])
        _assert_same(_read_all(store, "no-such-session"), [])


def check_read_streams(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """``read`` is a lazy iterator: it can be stopped early and interleaved with appends."""
    with _closing(make_store()) as store:
        session = _new_session_id("stream")
        written = sample_events(session, 0, 1200)
        store.append(session, written, expected_seq=0)
        stream = store.read(session)
        assert iter(stream) is stream, "read() must return an iterator, not a container"
        first = next(stream)
        assert first.seq == 0
        more = sample_events(session, 1200, 5)
        store.append(session, more, expected_seq=1200)
        rest = list(stream)
        assert [e.seq for e in rest[:1199]] == list(range(1, 1200))
        assert all(e.seq == 1200 + i for i, e in enumerate(rest[1199:])), "out of order"


def check_conflicts(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A taken or skipped seq raises ConflictError naming both seqs, writing nothing."""
    with _closing(make_store()) as store:
        session = _new_session_id("conflict")
        written = sample_events(session, 0, 5)
        store.append(session, written[:3], expected_seq=0)
        for expected in (0, 2, 4):
            batch = sample_events(session, expected, 2)
            try:
                store.append(session, batch, expected_seq=expected)
            except ConflictError as exc:
                assert exc.session_id == session
                assert exc.expected_seq == expected
                assert exc.actual_seq == 3, f"actual_seq {exc.actual_seq}, store is at 3"
            else:
                raise AssertionError(f"append at seq {expected} over 0..2 did not conflict")
        assert store.latest_seq(session) == 2
        _assert_same(_read_all(store, session), written[:3])
        store.append(session, written[3:], expected_seq=3)
        _assert_same(_read_all(store, session), written)


def check_conflict_on_new_session(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A first append that does not start at seq 0 conflicts and creates nothing."""
    with _closing(make_store()) as store:
        session = _new_session_id("gap")
        try:
            store.append(session, sample_events(session, 3, 2), expected_seq=3)
        except ConflictError as exc:
            assert exc.actual_seq == 0
        else:
            raise AssertionError("a first append at seq 3 did not conflict")
        assert store.latest_seq(session) == -1
        assert session not in {info.session_id for info in store.list_sessions()}


def check_batch_validation(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A batch with non-contiguous seqs or another session's event is refused whole."""
    with _closing(make_store()) as store:
        session = _new_session_id("batch")
        events = sample_events(session, 0, 4)
        bad_batches = [
            [events[0], events[1], events[3]],
            [events[0], msgspec.structs.replace(events[1], session_id="other")],
        ]
        for batch in bad_batches:
            try:
                store.append(session, batch, expected_seq=0)
            except ValueError:
                pass
            else:
                raise AssertionError("an invalid batch was accepted")
        assert store.latest_seq(session) == -1
        assert _read_all(store, session) == []


def check_unstorable_session_id(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A session id that is not valid Unicode (a lone surrogate) is refused with a
    ValueError naming it, on append and as a fork's source or child; nothing is stored."""
    with _closing(make_store()) as store:
        bad = _new_session_id("surrogate") + "\udc80"
        events = sample_events(bad, 0, 2)
        good = _new_session_id("kept")
        store.append(good, sample_events(good, 0, 2), expected_seq=0)
        attempts: list[tuple[str, Callable[[], object]]] = [
            ("append", lambda: store.append(bad, events, expected_seq=0)),
            ("fork to it", lambda: store.fork(good, bad, upto_seq=1)),
            ("fork from it", lambda: store.fork(bad, _new_session_id("child"), upto_seq=0)),
        ]
        for what, attempt in attempts:
            try:
                attempt()
            except ValueError as exc:
                assert repr(bad)[:40] in str(exc), f"{what}: the error does not name the id: {exc}"
            else:
                raise AssertionError(f"{what}: an id that is not valid Unicode was accepted")
        assert all(info.session_id != bad for info in store.list_sessions())
        _assert_same(_read_all(store, good), sample_events(good, 0, 2))


def check_empty_batch(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """An empty batch at the right seq is a no-op; at a wrong seq it conflicts."""
    with _closing(make_store()) as store:
        session = _new_session_id("empty")
        store.append(session, [], expected_seq=0)
        assert store.latest_seq(session) == -1
        store.append(session, sample_events(session, 0, 2), expected_seq=0)
        store.append(session, [], expected_seq=2)
        try:
            store.append(session, [], expected_seq=1)
        except ConflictError:
            pass
        else:
            raise AssertionError("an empty batch at a taken seq did not conflict")
        assert store.latest_seq(session) == 1


def check_sessions_isolated(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """Interleaved appends to two sessions never mix."""
    with _closing(make_store()) as store:
        first, second = _new_session_id("iso-a"), _new_session_id("iso-b")
        a, b = sample_events(first, 0, 10), sample_events(second, 0, 10, runtime="codex")
        for index in range(0, 10, 2):
            store.append(first, a[index : index + 2], expected_seq=index)
            store.append(second, b[index : index + 2], expected_seq=index)
        _assert_same(_read_all(store, first), a)
        _assert_same(_read_all(store, second), b)


def check_session_metadata(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """``list_sessions``/``session_info``: sorted ids, runtime, times, event counts."""
    with _closing(make_store()) as store:
        assert store.list_sessions() == [], "make_store must return an empty store"
        ids = sorted([_new_session_id("meta-b"), _new_session_id("meta-a")])
        before = time.time()
        store.append(ids[0], sample_events(ids[0], 0, 3, runtime="codex"), expected_seq=0)
        store.append(ids[1], sample_events(ids[1], 0, 1), expected_seq=0)
        first_info = store.session_info(ids[0])
        time.sleep(0.02)
        store.append(ids[0], sample_events(ids[0], 3, 4), expected_seq=3)
        listed = store.list_sessions()
        assert [info.session_id for info in listed] == ids
        info = listed[0]
        assert info == store.session_info(ids[0])
        assert info.runtime == "codex"
        assert info.event_count == 7
        assert listed[1].event_count == 1 and listed[1].runtime == "anthropic"
        assert before - 5 <= info.created <= info.last_activity <= time.time() + 5
        assert info.last_activity >= first_info.last_activity
        assert info.created == first_info.created
        assert info.parent_id is None and info.fork_seq is None
        try:
            store.session_info(_new_session_id("missing"))
        except SessionNotFoundError:
            pass
        else:
            raise AssertionError("session_info of an unknown session did not raise")


def check_fork(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A fork copies 0..upto_seq under the new id; the parent is untouched."""
    with _closing(make_store()) as store:
        parent, child = _new_session_id("parent"), _new_session_id("child")
        written = sample_events(parent, 0, 10)
        store.append(parent, written, expected_seq=0)
        store.fork(parent, child, upto_seq=4)
        copied = _read_all(store, child)
        expected = [msgspec.structs.replace(e, session_id=child) for e in written[:5]]
        _assert_same(copied, expected)
        info = store.session_info(child)
        assert (info.parent_id, info.fork_seq, info.event_count) == (parent, 4, 5)
        assert info.runtime == "anthropic"
        store.append(child, sample_events(child, 5, 2), expected_seq=5)
        assert store.latest_seq(child) == 6
        _assert_same(_read_all(store, parent), written)
        for target, source in ((child, parent), (parent, child)):
            try:
                store.fork(source, target, upto_seq=1)
            except ConflictError:
                pass
            else:
                raise AssertionError(f"fork onto existing session {target!r} did not conflict")
        try:
            store.fork(_new_session_id("missing"), _new_session_id("x"), upto_seq=0)
        except SessionNotFoundError:
            pass
        else:
            raise AssertionError("fork of an unknown session did not raise")


def check_fork_edges(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """Fork points at the edges: past the end copies all (``fork_seq`` the last copied),
    -1 copies nothing and makes no session, below -1 is a ValueError."""
    with _closing(make_store()) as store:
        parent = _new_session_id("parent")
        written = sample_events(parent, 0, 4)
        store.append(parent, written, expected_seq=0)
        whole = _new_session_id("whole")
        store.fork(parent, whole, upto_seq=50)
        info = store.session_info(whole)
        assert (info.event_count, info.fork_seq) == (4, 3), f"fork past the end: {info}"
        assert store.latest_seq(whole) == 3
        empty = _new_session_id("empty")
        for _ in range(2):  # nothing was made: the same id can be forked onto again
            store.fork(parent, empty, upto_seq=-1)
            assert store.latest_seq(empty) == -1 and _read_all(store, empty) == []
            assert empty not in [info.session_id for info in store.list_sessions()]
        store.append(empty, sample_events(empty, 0, 1), expected_seq=0)
        assert store.latest_seq(empty) == 0
        bad = _new_session_id("bad")
        try:
            store.fork(parent, bad, upto_seq=-2)
        except ValueError:
            pass
        else:
            raise AssertionError("fork up to seq -2 did not raise ValueError")
        assert store.latest_seq(bad) == -1
        assert bad not in [info.session_id for info in store.list_sessions()]
        _assert_same(_read_all(store, parent), written)


def check_fork_keeps_newer_fields(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A fork copies what a newer producer stored, fields and types this version does
    not know included, as it is but for the session id (:func:`newer_producer_events`)."""
    with _closing(make_store()) as store:
        parent, child = _new_session_id("newer"), _new_session_id("newer-child")
        written = newer_producer_events(parent)
        store.append(parent, written, expected_seq=0)
        store.fork(parent, child, upto_seq=len(written) - 1)
        for session, wanted in (
            (parent, written),
            (child, [msgspec.structs.replace(e, session_id=child) for e in written]),
        ):
            stored = _read_all(store, session)
            assert len(stored) == len(wanted), f"{session}: read {len(stored)} events"
            for got, want in zip(stored, wanted, strict=True):
                difference = _first_difference(_as_stored(got), _as_stored(want))
                assert difference is None, (
                    f"{'child' if session == child else 'parent'} seq {want.seq}: {difference}"
                )
        info = store.session_info(child)
        assert (info.parent_id, info.fork_seq, info.event_count) == (parent, 3, 4)


def _first_difference(got: Any, want: Any, path: str = "$") -> str | None:
    """Where two decoded JSON values first differ, said for a message; None if equal."""
    if isinstance(got, dict) and isinstance(want, dict):
        for key in {**want, **got}:
            if key not in got or key not in want:
                one, other = got.get(key, "(missing)"), want.get(key, "(missing)")
                return f"{path}.{key} is {one!r}, stored {other!r}"
            found = _first_difference(got[key], want[key], f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        for index, (one, other) in enumerate(zip(got, want, strict=True)):
            found = _first_difference(one, other, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    return None if got == want else f"{path} is {got!r}, stored {want!r}"


def check_runtime_named_late(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A session's runtime is that of its first event naming one, even when that event
    comes in a later batch."""
    store = make_store()
    session = _new_session_id("late-runtime")
    anonymous = [
        msgspec.structs.replace(event, source=None) for event in sample_events(session, 0, 2)
    ]
    try:
        store.append(session, anonymous, expected_seq=0)
        assert store.session_info(session).runtime is None
        store.append(session, sample_events(session, 2, 2, runtime="codex"), expected_seq=2)
        assert store.session_info(session).runtime == "codex"
        store.append(session, sample_events(session, 4, 1, runtime="other"), expected_seq=4)
        assert store.session_info(session).runtime == "codex"
    except BaseException:
        store.close()
        raise
    if reopen is None:
        store.close()
        return
    again = reopen(store)
    assert again is not None, "reopen returned no store"
    with _closing(again):
        assert again.session_info(session).runtime == "codex"


def check_fork_names_its_own_runtime(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A fork's runtime is the one its own events name: none when the parent's first
    event naming one comes after the fork point (it took the parent's)."""
    with _closing(make_store()) as store:
        parent = _new_session_id("late-named")
        anonymous = [
            msgspec.structs.replace(event, source=None)
            for event in sample_events(parent, 0, 150)  # past a page of a few rows
        ]
        store.append(parent, anonymous, expected_seq=0)
        store.append(parent, sample_events(parent, 150, 2, runtime="codex"), expected_seq=150)
        assert store.session_info(parent).runtime == "codex"
        before, after = _new_session_id("before"), _new_session_id("after")
        store.fork(parent, before, upto_seq=149)
        store.fork(parent, after, upto_seq=150)
        assert store.session_info(before).runtime is None
        assert store.session_info(after).runtime == "codex"
        named = _new_session_id("named")
        store.append(named, sample_events(named, 0, 3, runtime="claude-code"), expected_seq=0)
        child = _new_session_id("child")
        store.fork(named, child, upto_seq=0)
        assert store.session_info(child).runtime == "claude-code"


def check_delete(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """Delete removes a session whole; its id can start over; others stay."""
    with _closing(make_store()) as store:
        doomed, kept = _new_session_id("doomed"), _new_session_id("kept")
        store.append(doomed, sample_events(doomed, 0, 5), expected_seq=0)
        store.append(kept, sample_events(kept, 0, 3), expected_seq=0)
        store.delete(doomed)
        assert store.latest_seq(doomed) == -1
        assert _read_all(store, doomed) == []
        assert [info.session_id for info in store.list_sessions()] == [kept]
        try:
            store.session_info(doomed)
        except SessionNotFoundError:
            pass
        else:
            raise AssertionError("session_info of a deleted session did not raise")
        again = sample_events(doomed, 0, 2, runtime="codex")
        store.append(doomed, again, expected_seq=0)
        _assert_same(_read_all(store, doomed), again)
        assert store.session_info(doomed).runtime == "codex"
        store.delete(_new_session_id("never-existed"))
        assert store.latest_seq(kept) == 2


def check_read_across_delete(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A session deleted and written anew while a read streams it: the read gives the
    old events (all, or the first of them and then :class:`StoreError`), never the old
    ones run on into the new ones (a sequence that never was)."""
    with _closing(make_store()) as store:
        session = _new_session_id("recreated")
        old = sample_events(session, 0, 6000)  # more than two of any page size here
        store.append(session, old, expected_seq=0)
        reading = store.read(session)
        got = [next(reading)]
        store.delete(session)
        new = [
            msgspec.structs.replace(e, id=f"new-{e.seq}") for e in sample_events(session, 0, 6000)
        ]
        store.append(session, new, expected_seq=0)
        try:
            got += list(reading)
        except StoreError:
            pass
        old_ids = [event.id for event in old]
        assert [event.id for event in got] == old_ids[: len(got)], "the read mixed two sessions"
        assert [event.id for event in _read_all(store, session)] == [e.id for e in new]


def check_tail(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """``tail`` returns stored events at once, waits, times out, and wakes on appends."""
    with _closing(make_store()) as store:
        session = _new_session_id("tail")
        written = sample_events(session, 0, 6)
        store.append(session, written[:4], expected_seq=0)
        _assert_same(store.tail(session, 1, timeout=5), written[2:4])
        started = time.monotonic()
        assert store.tail(session, 3, timeout=0.3) == []
        waited = time.monotonic() - started
        assert 0.25 <= waited < 3, f"tail with timeout 0.3 s returned after {waited:.2f} s"

        def append_later() -> None:
            time.sleep(0.15)
            store.append(session, written[4:], expected_seq=4)

        writer = threading.Thread(target=append_later)
        started = time.monotonic()
        writer.start()
        woke = store.tail(session, 3, timeout=10)
        waited = time.monotonic() - started
        writer.join()
        assert woke, "tail timed out although another thread appended"
        _assert_same(woke, written[4 : 4 + len(woke)])
        assert waited < 3, f"tail woke {waited:.2f} s after an append 0.15 s in"


def check_concurrent_writers(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """Threads racing on one session: every batch lands once, seqs stay contiguous."""
    with _closing(make_store()) as store:
        session = _new_session_id("race")
        writers, batches_each = 4, 15
        conflicts = [0] * writers
        errors: list[BaseException] = []

        def write(writer: int) -> None:
            try:
                for batch in range(batches_each):
                    while True:
                        seq = store.latest_seq(session) + 1
                        events = [
                            msgspec.structs.replace(event, id=f"w{writer}-b{batch}-{i}")
                            for i, event in enumerate(sample_events(session, seq, 2))
                        ]
                        try:
                            store.append(session, events, expected_seq=seq)
                            break
                        except ConflictError:
                            conflicts[writer] += 1
            except BaseException as exc:  # reported to the main thread
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, f"a writer failed: {errors[0]!r}"
        stored = _read_all(store, session)
        assert [e.seq for e in stored] == list(range(writers * batches_each * 2))
        ids = [e.id for e in stored]
        assert len(set(ids)) == len(ids), "a batch was stored twice"
        assert store.session_info(session).event_count == len(stored)


def check_large_event(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """A 20 MB tool result between small events round-trips byte for byte."""
    with _closing(make_store()) as store:
        session = _new_session_id("large")
        written = sample_events(session, 0, 2)
        written.append(large_tool_result(session, 2))
        written += sample_events(session, 3, 2)
        store.append(session, written[:2], expected_seq=0)
        store.append(session, written[2:], expected_seq=2)
        stored = _read_all(store, session)
        _assert_same(stored, written)
        big = stored[2]
        assert isinstance(big, ToolResultEvent)
        part = big.content[0]
        assert isinstance(part, TextPart) and len(part.text) == LARGE_RESULT_BYTES


def check_durable_across_reopen(make_store: StoreFactory, reopen: Reopen | None) -> None:
    """After close and reopen everything is there and appends continue (needs ``reopen``)."""
    if reopen is None:
        return
    store = make_store()
    session, parent = _new_session_id("durable"), _new_session_id("durable-parent")
    written = sample_events(session, 0, 12)
    store.append(session, written[:6], expected_seq=0)
    store.append(session, written[6:], expected_seq=6)
    store.append(parent, sample_events(parent, 0, 3), expected_seq=0)
    store.fork(parent, f"{parent}-fork", upto_seq=1)
    info_before = store.session_info(session)
    again = reopen(store)
    assert again is not None, "reopen returned no store"
    with _closing(again):
        _assert_same(_read_all(again, session), written)
        assert again.latest_seq(session) == 11
        assert again.session_info(session).event_count == info_before.event_count
        assert again.session_info(session).created == info_before.created
        assert again.session_info(f"{parent}-fork").parent_id == parent
        more = sample_events(session, 12, 3)
        again.append(session, more, expected_seq=12)
        _assert_same(_read_all(again, session, 10), written[10:] + more)


CHECKS: dict[str, Check] = {
    "round_trip": check_round_trip,
    "read_ranges": check_read_ranges,
    "read_streams": check_read_streams,
    "conflicts": check_conflicts,
    "conflict_on_new_session": check_conflict_on_new_session,
    "batch_validation": check_batch_validation,
    "unstorable_session_id": check_unstorable_session_id,
    "empty_batch": check_empty_batch,
    "sessions_isolated": check_sessions_isolated,
    "session_metadata": check_session_metadata,
    "fork": check_fork,
    "fork_edges": check_fork_edges,
    "fork_keeps_newer_fields": check_fork_keeps_newer_fields,
    "runtime_named_late": check_runtime_named_late,
    "fork_names_its_own_runtime": check_fork_names_its_own_runtime,
    "delete": check_delete,
    "read_across_delete": check_read_across_delete,
    "tail": check_tail,
    "concurrent_writers": check_concurrent_writers,
    "large_event": check_large_event,
    "durable_across_reopen": check_durable_across_reopen,
}
"""Every check by name, in the order ``run_store_conformance`` runs them."""


def run_check(name: str, make_store: StoreFactory, reopen: Reopen | None = None) -> None:
    """Run one check; an AssertionError names the check."""
    try:
        CHECKS[name](make_store, reopen)
    except AssertionError as exc:
        raise AssertionError(f"store conformance {name!r}: {exc}") from exc


def run_store_conformance(
    make_store: StoreFactory,
    *,
    reopen: Reopen | None = None,
    skip: frozenset[str] = frozenset(),
) -> list[str]:
    """Run every check (minus ``skip``) with a fresh store each; return the names run."""
    unknown = skip - CHECKS.keys()
    assert not unknown, f"unknown checks in skip: {sorted(unknown)}"
    ran = []
    for name in CHECKS:
        if name not in skip:
            run_check(name, make_store, reopen)
            ran.append(name)
    return ran


class StoreConformance:
    """Subclass as ``TestSomething`` and define ``make_store``: one pytest test per check."""

    def make_store(self) -> Store:
        """An empty store of the backend under test."""
        raise NotImplementedError

    def reopen_store(self, store: Store) -> Store | None:
        """Close ``store`` and open the same data again; ``None`` skips the durability check."""
        return None

    def _run(self, name: str) -> None:
        reopen = self.reopen_store if _overrides_reopen(self) else None
        run_check(name, self.make_store, reopen)


def _overrides_reopen(suite: StoreConformance) -> bool:
    return type(suite).reopen_store is not StoreConformance.reopen_store


def _add_test(name: str) -> None:
    def test(self: StoreConformance) -> None:
        self._run(name)

    test.__name__ = f"test_{name}"
    test.__doc__ = CHECKS[name].__doc__
    setattr(StoreConformance, test.__name__, test)


for _name in CHECKS:
    _add_test(_name)


class _closing:
    """``with _closing(store)``: close the store whatever happens (stores are not CMs)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __enter__(self) -> Store:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()
