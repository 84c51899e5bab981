"""The ``Store`` protocol every backend implements, and what it promises.

A store holds sessions as append-only, seq-numbered event sequences:

* ``append(session_id, events, expected_seq=n)`` writes a batch whose first event has
  seq ``n`` and whose seqs are contiguous; when the store's next free seq is not ``n``
  (another writer got there first) it raises :class:`ConflictError` and writes nothing.
  On return the batch is durable to the backend's durability setting (this is what a
  checkpoint waits for).
* ``read`` streams a seq range in order (bounded memory: backends page through it).
* ``tail`` waits for events after a seq (wakes on appends, in this process or, for
  backends that can, in others).
* Optional: ``hold_live(session_id)`` marks this process as a session's live writer
  (returns the release, or None) and ``has_live_writer(session_id)`` tells whether one
  holds it, in any process; repair refuses such a session. The file stores use a lock
  file per session (:class:`LiveLocks`), PostgreSQL an advisory lock; a store without
  them is only known live within the process.

Events arrive already enveloped (seq, id, session_id, ts filled by the session log).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any, NoReturn, Protocol, cast, runtime_checkable
from urllib.parse import quote, unquote, urlsplit

import msgspec

from universal_event.codec import decode
from universal_event.errors import CorruptEventError, DecodeError, StoreError, StoreURLError
from universal_event.events import Event, EventBase

__all__ = [
    "DECODE_BATCH",
    "READ_PAGE_SIZE",
    "Batches",
    "FileLiveLocks",
    "LiveLocks",
    "Rehoming",
    "SameSession",
    "SessionInfo",
    "Store",
    "TailByPolling",
    "HASHED_NAME_MARK",
    "check_batch",
    "check_fork_point",
    "check_read_end",
    "check_session_id",
    "decode_batches",
    "decode_fetched",
    "decode_page",
    "decode_rows",
    "decode_stored",
    "UNSTORABLE",
    "encode_row_values",
    "unstorable",
    "local_path",
    "event_type",
    "session_file_stem",
    "AppendSignal",
    "poll_tail",
    "runtime_of",
    "runtime_of_payloads",
    "LineSource",
    "session_info_of",
    "shown_id",
]

_event_decoder: msgspec.json.Decoder[Event] = msgspec.json.Decoder(Event)
"""The fast path; anything it refuses goes through :func:`codec.decode`."""
_page_decoder: msgspec.json.Decoder[list[Event]] = msgspec.json.Decoder(list[Event])
"""A whole page of stored payloads joined into one JSON array, in one call."""
_row_encoder = msgspec.json.Encoder()

NO_END = 2**63 - 1
"""The bound of a read without an end: beyond any seq (and within a signed 64-bit int)."""

READ_PAGE_SIZE = 1000
"""How many events a durable backend fetches per page while streaming ``read``."""


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a store knows about a session without reading its events."""

    session_id: str
    runtime: str | None = None
    """The runtime of the first event that names one (``source.runtime``)."""
    created: float = 0.0
    last_activity: float = 0.0
    event_count: int = 0
    parent_id: str | None = None
    """For a fork: the session it was forked from."""
    fork_seq: int | None = None
    """For a fork: the last parent seq it shares."""


@runtime_checkable
class Store(Protocol):
    """An append-only event store. See the module docstring for the contract."""

    def append(self, session_id: str, events: Sequence[EventBase], *, expected_seq: int) -> None:
        """Append a contiguous batch starting at ``expected_seq``, or raise ConflictError."""
        ...

    def read(self, session_id: str, start: int = 0, end: int | None = None) -> Iterator[Event]:
        """Events with ``start <= seq < end`` (``end=None``: to the last), in seq order."""
        ...

    def latest_seq(self, session_id: str) -> int:
        """The highest seq stored for the session, -1 when it has none."""
        ...

    def list_sessions(self) -> list[SessionInfo]:
        """Every session, with metadata."""
        ...

    def session_info(self, session_id: str) -> SessionInfo:
        """One session's metadata; raises SessionNotFoundError."""
        ...

    def fork(self, source_id: str, new_id: str, *, upto_seq: int) -> None:
        """Copy events ``0..upto_seq`` of ``source_id`` into a new session ``new_id``.

        Each as it is stored but for its session id (:class:`Rehoming`): what a newer
        producer wrote that this version does not know reaches the child too.

        ``upto_seq`` past the source's last seq copies it all (``fork_seq`` is the last
        seq copied); ``-1`` copies nothing, and a session with no events is none: the
        child appears with its first append. Below ``-1``: ValueError
        (:func:`check_fork_point`)."""
        ...

    def delete(self, session_id: str) -> None:
        """Remove a session and all its events."""
        ...

    def tail(self, session_id: str, after_seq: int, *, timeout: float | None = None) -> list[Event]:
        """Events with seq > ``after_seq``; waits up to ``timeout`` seconds for some."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


class SameSession:
    """A read's check that the session it pages through is the one it began in (the
    same created time): one deleted and written anew meanwhile would have the read go
    on into the new session's events, a sequence that never was."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.created: float | None = None
        self.seen = False

    def check(self, created: float | None, position: int) -> None:
        if not self.seen:
            self.created, self.seen = created, True
        elif created != self.created:
            raise StoreError(
                f"session {self.session_id!r} was deleted while being read (events before "
                f"seq {position} were read); read it again"
            )


def check_fork_point(source_id: str, new_id: str, upto_seq: int) -> None:
    """ValueError unless ``upto_seq`` can end a fork (a seq, or -1 for none) and both ids
    can be stored."""
    check_session_id(source_id)
    check_session_id(new_id)
    if isinstance(upto_seq, bool) or not isinstance(upto_seq, int) or upto_seq < -1:
        raise ValueError(
            f"session {source_id!r}: cannot fork up to seq {upto_seq!r} "
            "(a seq of the session, or -1 for none)"
        )


def check_batch(session_id: str, events: Sequence[EventBase], expected_seq: int) -> None:
    """Raise ValueError unless ``events`` are seq-contiguous from ``expected_seq``.

    One plain pass: measured on a batch of 100 freshly built events, ~2.5x faster than
    comparing mapped lists (one visit per event instead of three list/set builds).
    """
    check_session_id(session_id)
    seq = expected_seq
    for event in events:
        if event.seq != seq or event.session_id != session_id:
            _name_the_culprit(session_id, events, expected_seq)
        seq += 1


def check_session_id(session_id: str) -> None:
    """ValueError naming an id no store can hold: one that is not valid Unicode (a lone
    surrogate, as a file name decoded with ``surrogateescape`` has). Files, SQLite and
    PostgreSQL all keep ids as UTF-8; without this check each failed its own way, most
    with an encoding error that named no session."""
    if not session_id.isascii():
        try:
            session_id.encode()
        except UnicodeEncodeError:
            raise ValueError(
                f"session id {shown_id(session_id)} is not valid Unicode "
                "(a lone surrogate); it cannot be stored as UTF-8"
            ) from None


def shown_id(session_id: str) -> str:
    """An id for a message: its repr, cut short when long."""
    if len(session_id) <= 80:
        return repr(session_id)
    return f"{session_id[:60]!r}... ({len(session_id.encode(errors='replace'))} bytes)"


def _name_the_culprit(session_id: str, events: Sequence[EventBase], expected_seq: int) -> NoReturn:
    """Raise ValueError naming the first event that breaks the batch."""
    for offset, event in enumerate(events):
        if event.seq != expected_seq + offset:
            raise ValueError(
                f"session {session_id!r}: batch event {offset} has seq {event.seq}, "
                f"expected {expected_seq + offset}"
            )
        if event.session_id != session_id:
            raise ValueError(
                f"batch event seq {event.seq} belongs to session {event.session_id!r}, "
                f"not {session_id!r}"
            )
    raise ValueError(f"session {session_id!r}: batch is not contiguous from {expected_seq}")


UNSTORABLE = (TypeError, OverflowError, UnicodeEncodeError, RecursionError)
"""What encoding an event no JSON holds raises (an unsupported object, a huge integer, a
lone surrogate, nesting deeper than the encoder goes): see :func:`unstorable`."""


def unstorable(session_id: str, exc: BaseException) -> DecodeError:
    """The typed error of a batch whose events cannot be encoded (one of
    :data:`UNSTORABLE`): refused whole, nothing written. (A :class:`SessionLog` checks
    each event when it is appended; this is for callers of a store itself.)"""
    problem = "nesting too deep" if isinstance(exc, RecursionError) else str(exc)
    return DecodeError(f"session {session_id!r}: an event cannot be stored: {problem}")


def encode_row_values(session_id: str, events: Sequence[EventBase], expected_seq: int) -> list[Any]:
    """The stored rows of a batch, flattened: five values per event
    (``session_id, seq, type, ts, payload``), in one list.

    Appends are measured against a driver given already-encoded rows, so this loop is
    the store's whole per-event Python cost: one encoder call, one dict lookup for the
    tag. What a multi-row ``INSERT ... VALUES (?, ?, ?, ?, ?), (...)`` binds: the driver
    steps one statement per chunk of rows instead of one per row, and no row tuple
    outlives the loop. Checked as :func:`check_batch` checks, in the same single pass.
    """
    check_session_id(session_id)
    values: list[Any] = []
    add = values.extend
    encode_event = _row_encoder.encode
    seq = expected_seq
    for event in events:
        if event.seq != seq or event.session_id != session_id:
            _name_the_culprit(session_id, events, expected_seq)  # raises
        kind = type(event)
        add(
            (session_id, seq, _TAGS.get(kind) or _remember_tag(kind), event.ts, encode_event(event))
        )
        seq += 1
    return values


def runtime_of(events: Iterable[EventBase]) -> str | None:
    """The runtime the first event that names one belongs to (``source.runtime``)."""
    return next((e.source.runtime for e in events if e.source is not None), None)


class SourceRuntime(msgspec.Struct):
    runtime: str | None = None


class LineSource(msgspec.Struct):
    """Just enough of a stored event to read its runtime."""

    source: SourceRuntime | None = None


_line_source_decoder = msgspec.json.Decoder(LineSource)


def runtime_of_payloads(payloads: Iterable[bytes | bytearray | memoryview]) -> str | None:
    """:func:`runtime_of` over stored events, each read only as far as its source. A
    fork's child names the runtime its own events name: its parent's may be named only
    after the fork point. One that does not decode is passed over (the copy reads
    every event in full and reports damage)."""
    for payload in payloads:
        try:
            source = _line_source_decoder.decode(payload).source
        except msgspec.DecodeError:
            continue
        if source is not None:
            return source.runtime
    return None


_SESSION_KEY = b'"session_id"'
_KEY_ESCAPE = re.compile(rb"\\u00(?:5[fF]|6[459eEfF]|73)")
"""A ``\\u`` escape of a letter of ``session_id``: what could spell the key otherwise."""
_document_decoder: msgspec.json.Decoder[dict[str, msgspec.Raw]] = msgspec.json.Decoder(
    dict[str, msgspec.Raw]
)
"""A stored event's top level, every value kept as its bytes (for :class:`Rehoming`)."""


class Rehoming:
    """Stored events of ``source_id`` re-homed into ``new_id``, as ``fork`` copies them.

    A fork copies each stored event as it is, byte for byte, but for the value of its
    ``session_id`` (seq, id and all else stay: a fork is the same history under another
    id). Never decoded into this version's structs and encoded again: what a newer
    producer wrote that this version does not know (fields, part and event types) must
    reach the child as it reached the parent.

    Only for payloads already decoded and checked (``decode_stored``, ``decode_page``):
    each is one JSON object whose top-level ``session_id`` is ``source_id``. The fast
    path replaces bytes, where that is sure to hit that member and no other: each
    payload holds ``"session_id"`` once (then it is the top-level key: a quote inside a
    string is escaped, and no ``\\u`` escape of one of its letters spells the key
    another way), followed by the source's id as this version encodes it (whitespace
    around the colon is kept). Otherwise (the key nested too, escapes) the payload's top
    level is decoded with every value kept raw, the one value set and the object
    encoded again: everything nested stays byte for byte, only whitespace between
    top-level members would go.
    """

    def __init__(self, source_id: str, new_id: str) -> None:
        old, new = _row_encoder.encode(source_id), _row_encoder.encode(new_id)
        self._old_member = _SESSION_KEY + b":" + old
        self._new_member = _SESSION_KEY + b":" + new
        self._new_value = new
        self._new_raw = msgspec.Raw(new)
        # An empty id may be stored as no key at all (the default): nothing to find.
        self._replaceable = bool(source_id)
        self._member = re.compile(
            b"(" + re.escape(_SESSION_KEY) + rb"[ \t\n\r]*:[ \t\n\r]*)" + re.escape(old)
        )

    def _by_replace(self, data: bytes, count: int) -> bool:
        """Whether ``data`` (``count`` payloads) can be re-homed by replacing members."""
        return (
            self._replaceable
            and _KEY_ESCAPE.search(data) is None
            and data.count(_SESSION_KEY) == count
            and data.count(self._old_member) == count
        )

    def payloads(self, payloads: Sequence[bytes | bytearray | memoryview | str]) -> list[bytes]:
        """Each payload re-homed: one check of them all, then one C-level pass."""
        stored = cast("list[bytes]", payloads)
        if set(map(type, payloads)) - {bytes}:  # TEXT values, buffers: seldom
            stored = list(map(_as_bytes, payloads))
        joined = stored[0] if len(stored) == 1 else b"\n".join(stored)  # one large row: no copy
        if self._by_replace(joined, len(stored)):
            return list(
                map(bytes.replace, stored, repeat(self._old_member), repeat(self._new_member))
            )
        return list(map(self.payload, stored))

    def lines(self, run: bytes, count: int) -> bytes:
        """A run of ``count`` whole lines (newline-terminated), a payload each (JSONL)."""
        if self._by_replace(run, count):
            return run.replace(self._old_member, self._new_member)
        return b"".join(self.payload(line) + b"\n" for line in run[:-1].split(b"\n"))

    def payload(self, payload: bytes | bytearray | memoryview | str) -> bytes:
        """One payload re-homed."""
        stored = _as_bytes(payload)
        if (
            self._replaceable
            and _KEY_ESCAPE.search(stored) is None
            and stored.count(_SESSION_KEY) == 1
        ):
            found = self._member.search(stored)
            if found is not None:  # the key, maybe spaced, then the source's id: splice
                return b"".join((stored[: found.end(1)], self._new_value, stored[found.end() :]))
        document = _document_decoder.decode(stored)
        document["session_id"] = self._new_raw
        return _row_encoder.encode(document)


def _as_bytes(payload: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):  # a TEXT value another SQLite client wrote
        return payload.encode("utf-8", "surrogatepass")
    return bytes(payload)


def decode_stored(
    session_id: str, seq: int, payload: bytes | bytearray | memoryview | str
) -> Event:
    """Decode a stored event, checking it is the one its position says it is.

    Raises :class:`CorruptEventError` naming session and seq when the bytes do not
    decode or the event inside claims another seq or session (a duplicated or
    misplaced line/row would otherwise pass silently).
    """
    try:
        event = _event_decoder.decode(payload)
    except (msgspec.MsgspecError, TypeError, RecursionError):
        event = _decode_slowly(session_id, seq, payload)
    if event.seq != seq or event.session_id != session_id:
        raise CorruptEventError(
            session_id,
            seq,
            f"stored event claims session {event.session_id!r} seq {event.seq}",
        )
    return event


def _decode_slowly(session_id: str, seq: int, payload: object) -> Event:
    """The codec's full path: unknown event types become ``native/unknown``; errors
    become :class:`CorruptEventError`."""
    if not isinstance(payload, bytes | bytearray | memoryview | str):
        raise CorruptEventError(session_id, seq, f"payload is {type(payload).__name__}")
    try:
        return decode(payload)
    except (DecodeError, msgspec.MsgspecError) as exc:
        # msgspec.MsgspecError too: codec.decode has let msgspec's own error escape for
        # malformed JSON that starts like an event of an unknown type.
        raise CorruptEventError(session_id, seq, str(exc)) from None


def event_type(event: EventBase) -> str:
    """The event's tag (``user/message``); msgspec keeps it on the class, not the instance."""
    kind = type(event)
    return _TAGS.get(kind) or _remember_tag(kind)


_TAGS: dict[type[EventBase], str] = {}


def _remember_tag(kind: type[EventBase]) -> str:
    tag = kind.__struct_config__.tag
    _TAGS[kind] = found = tag if isinstance(tag, str) else kind.__name__
    return found


class AppendSignal(threading.Condition):
    """Wakes this process's waiting tails when it appends (SQLite, JSONL).

    :meth:`appended` costs nothing when no tail waits: an append used to take the lock
    and notify every time, which measured ~10 µs of a batch's append right after an
    fsync (cold caches). Reading ``waiting`` outside the lock can miss a tail that is
    just about to wait; it sleeps one poll interval at most, as it would if the append
    came just before its ``wait``.
    """

    def __init__(self) -> None:
        super().__init__(threading.Lock())
        self.waiting = 0
        """Tails inside :meth:`wait` (changed under the lock)."""

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting += 1
        try:
            return super().wait(timeout)
        finally:
            self.waiting -= 1

    def appended(self) -> None:
        """Wake the tails waiting, if any."""
        if self.waiting:
            with self:
                self.notify_all()


def poll_tail(
    fetch: Callable[[], list[Event]],
    wake: threading.Condition,
    timeout: float | None,
    poll_interval: float,
) -> list[Event]:
    """Fetch until something arrives or ``timeout`` passes, sleeping on ``wake`` between.

    For backends that cannot be told about another process's append (SQLite, JSONL):
    ``wake`` is notified by this process's own appends, other processes are polled.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        found = fetch()
        if found:
            return found
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return []
        with wake:
            wake.wait(poll_interval if remaining is None else min(poll_interval, remaining))


class TailByPolling:
    """``tail`` for backends that cannot be told about another process's append (SQLite,
    JSONL): poll ``read``; this process's own appends notify ``_appended`` and wake it."""

    _appended: AppendSignal
    _poll_interval: float

    def read(self, session_id: str, start: int = 0, end: int | None = None) -> Iterator[Event]:
        raise NotImplementedError

    def tail(self, session_id: str, after_seq: int, *, timeout: float | None = None) -> list[Event]:
        """Events with seq > ``after_seq``; waits up to ``timeout`` seconds for some."""
        return poll_tail(
            lambda: list(self.read(session_id, after_seq + 1)),
            self._appended,
            timeout,
            self._poll_interval,
        )


def decode_rows(
    session_id: str, start: int, rows: Sequence[tuple[int, bytes | bytearray | memoryview | str]]
) -> Iterator[Event]:
    """Decode ``(seq, payload)`` rows expected to hold seqs ``start, start+1, ...``.

    Lazy, so the good events before a damaged one still reach the reader; a missing
    seq or a bad payload raises :class:`CorruptEventError` at its position.
    """
    expected = start
    for seq, payload in rows:
        if seq != expected:
            raise CorruptEventError(session_id, expected, "missing from the events table")
        yield decode_stored(session_id, seq, payload)
        expected += 1


DECODE_BATCH = 128
"""Events per decoder call on the fast read path.

Small enough that one call allocates fewer container objects than the collector's
first-generation threshold (700): a reader that drops each event after use never
triggers a collection, while a page decoded in one call would trigger several, each
scanning a thousand live events (and, now and then, the whole heap).
"""


Batches = Iterator[Iterable[Event]]
"""Events in batches, in seq order: ``itertools.chain.from_iterable`` flattens them for
the reader at C speed, where a ``yield`` per event per layer would not."""


def decode_batches(
    session_id: str,
    start: int,
    arrays: Iterable[tuple[int, bytes]],
    fallback: Callable[[int], Iterator[Event]],
) -> Batches:
    """Decode ``(count, JSON array of count stored payloads)`` pieces, seqs from ``start``.

    A piece that does not check out (see :func:`decode_page`) hands over to
    ``fallback(seq)``, which decodes the rest row by row from that seq: the good events
    before a damaged one still reach the reader, and the error names session and seq.
    """
    seq = start
    for count, array in arrays:
        events = decode_page(session_id, seq, count, array)
        if events is None:
            yield fallback(seq)
            return
        yield events
        seq += count
        del events  # the reader may free them before the next batch is decoded


def decode_fetched(session_id: str, start: int, rows: Sequence[tuple[int, bytes]]) -> Batches:
    """Decode fetched ``(seq, payload)`` rows expected to hold seqs ``start, start+1, ...``.

    The fast path: rows whose seqs are contiguous (first and last checked; the primary
    key makes them unique) are decoded :data:`DECODE_BATCH` at a time, each batch's
    payloads joined into one JSON array. From a batch that does not check out on,
    :func:`decode_rows` takes over and names the damaged seq.
    """
    if not rows or rows[0][0] != start or rows[-1][0] != start + len(rows) - 1:
        return iter([decode_rows(session_id, start, rows)])
    arrays = (
        (len(group), _joined([payload for _, payload in group]))
        for group in (rows[i : i + DECODE_BATCH] for i in range(0, len(rows), DECODE_BATCH))
    )
    return decode_batches(
        session_id, start, arrays, lambda seq: decode_rows(session_id, seq, rows[seq - start :])
    )


def _joined(payloads: list[bytes]) -> bytes:
    """Payloads as one JSON array; empty (which fails the batch, so its rows are decoded
    one by one) when one is not bytes (a TEXT value written by another SQLite client)."""
    try:
        return b"[" + b",".join(payloads) + b"]"
    except TypeError:
        return b""


def decode_page(session_id: str, start: int, count: int | None, array: bytes) -> list[Event] | None:
    """Decode ``count`` stored events, seqs ``start..start+count-1``, from one JSON array.

    ``None`` when anything is off: a payload that does not decode, an event type this
    version does not know, an event claiming another seq or session, a count that does
    not match. The caller then decodes row by row, which says exactly what is wrong.
    ``count=None``: as many events as the array holds (every seq is checked all the same).
    """
    try:
        events = _page_decoder.decode(array)
    except (msgspec.MsgspecError, RecursionError):
        return None
    if count is not None and len(events) != count:
        return None
    # One plain pass (as in check_batch): measured faster than comparing mapped lists.
    seq = start
    for event in events:
        if event.seq != seq or event.session_id != session_id:
            return None
        seq += 1
    return events


def check_read_end(
    session_id: str, reached: int, bound: int, event_count: int | None, top_seq: int | None
) -> None:
    """A read ended at seq ``reached`` (below its ``bound``): raise if rows the session row
    counts are missing there (deleted or lost from the end of the session).

    ``event_count`` (the session row's) and ``top_seq`` (the highest stored seq) come from
    one statement, so one snapshot: rows appended since the read's last page count in
    both and are not mistaken for missing ones.
    """
    if event_count is None:
        return
    first_missing = max(reached, -1 if top_seq is None else top_seq + 1)
    if first_missing < min(event_count, bound):
        raise CorruptEventError(
            session_id,
            first_missing,
            f"row missing: the session has {event_count} events, "
            f"the last stored row is seq {top_seq}",
        )


def session_info_of(row: Sequence[Any]) -> SessionInfo:
    """A ``sessions`` row (``session_id, runtime, created, last_activity, event_count,
    parent_id, fork_seq``) as :class:`SessionInfo`."""
    session_id, runtime, created, last_activity, event_count, parent_id, fork_seq = row
    return SessionInfo(
        session_id=session_id,
        runtime=runtime,
        created=created,
        last_activity=last_activity,
        event_count=event_count,
        parent_id=parent_id,
        fork_seq=fork_seq,
    )


def local_path(url: str, scheme: str, what: str, *, special: tuple[str, ...] = ()) -> str:
    """The path a file store's ``scheme:///path`` URL names (``what``: a file, a directory).

    ``scheme:///abs/path`` is absolute; ``scheme:///./rel`` and ``scheme:///../rel`` (and
    ``/.``, ``/..``) are relative to the working directory, as are the ``special`` names
    (``/:memory:``).
    """
    parts = urlsplit(url)
    if parts.scheme != scheme:
        raise StoreURLError(f"not a {scheme} URL: {url!r}")
    if parts.netloc:  # scheme://dir/file: "dir" would be a host, and silently lost
        raise StoreURLError(
            f"{scheme} URL {url!r} has a host part ({parts.netloc!r}); a local path takes "
            f"three slashes: {scheme}:///abs/path or {scheme}:///./relative/path"
        )
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise StoreURLError(
            f"{scheme} URL {url!r} has a query or fragment; a {scheme} store takes no URL "
            f"parameters (a '?' or '#' in the path is written %3F or %23)"
        )
    path = unquote(parts.path)
    if path.startswith(("/./", "/../")) or path in ("/.", "/..", *special):
        path = path[1:]
    if not path:
        raise StoreURLError(f"{scheme} URL {url!r} names no {what}")
    return path


_MAX_QUOTED_NAME = 200
"""The longest quoted id used as a file name as it is (file names stop at 255 bytes,
and a JSONL fork's temporary file adds 37); a longer one is shortened and hashed."""
_KEPT_OF_LONG_NAME = 64
HASHED_NAME_MARK = "+"
"""Separates a long id's kept start from its hash: ``quote`` never leaves a ``+``."""


def session_file_stem(session_id: str) -> str:
    """The file name (without suffix) of a session's files (JSONL, live locks): its id
    quoted; for a long id, the start of that, ``+`` and the id's SHA-256 (names stop at
    255 bytes)."""
    check_session_id(session_id)
    quoted = quote(session_id, safe="")
    if len(quoted) <= _MAX_QUOTED_NAME:
        return quoted
    kept = quoted[:_KEPT_OF_LONG_NAME]
    escape = kept.find("%", len(kept) - 2)
    if escape >= 0:  # do not keep half of an escape
        kept = kept[:escape]
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{kept}{HASHED_NAME_MARK}{digest}"


class LiveLocks:
    """Which sessions have a live writer, across the processes of one machine.

    A live :class:`~universal_event.log.SessionLog` holds an exclusive ``flock`` on a
    small file per session (``<directory>/<file stem>.lock``, :func:`session_file_stem`) for as long as it is open;
    the system drops it when the process ends, however it ends. Repair from another
    process asks :meth:`held_elsewhere` and refuses a session still being written: a
    repair appended to a running session would make the writer's next checkpoint fail,
    and what it had not checkpointed would be lost. Best effort: a session whose lock
    file cannot be made (a name too long) is treated as having no live writer.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, session_id: str) -> Path:
        return self.directory / (session_file_stem(session_id) + ".lock")

    def hold(self, session_id: str) -> Callable[[], None] | None:
        """Take the session's lock; returns its release, or None when another process
        has it (or it cannot be made).

        Live logs of one session in this process share the lock (a ``flock`` taken
        through a second descriptor would fail): it is let go when the last of them
        releases it. Each took it once, the first for real; a second once counted as
        "another writer" and held nothing, so the first one's close left a log still
        writing with no lock, and a repair from another process went through.
        """
        path = os.path.abspath(self._path(session_id))
        key = (os.getpid(), path)  # a forked child holds none of its parent's locks
        with _process_holds_lock:
            held = _process_holds.get(key)
            if held is None:
                release = self._take(Path(path))
                if release is None:
                    return None
                held = _process_holds[key] = [release, 0]
            held[1] += 1
        return _shared_release(key)

    def _take(self, path: Path) -> Callable[[], None] | None:
        """Lock the file at ``path``; its release, or None when another holds it.

        The release removes the file (a store of many sessions keeps no file per
        session ever written), still holding the lock; so a lock taken here is kept only
        if the path still names the file locked (else another writer removed it
        between this open and this lock, and the path is tried again).
        """
        for _attempt in range(3):
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # another writer holds it
                os.close(fd)
                return None
            try:
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    return _releaser(fd, path)
            except OSError:  # the path went away meanwhile
                pass
            os.close(fd)
        return None

    def held_elsewhere(self, session_id: str) -> bool:
        """Whether a live writer (another process, or another log here) holds the lock."""
        try:
            fd = os.open(self._path(session_id), os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            os.close(fd)
        return False


class FileLiveLocks:
    """``hold_live`` / ``has_live_writer`` for a store on this machine's files: its
    :class:`LiveLocks` (None where there is no file, as for ``:memory:``)."""

    _live_locks: LiveLocks | None

    def hold_live(self, session_id: str) -> Callable[[], None] | None:
        """Mark this process as the session's live writer; returns the release."""
        return None if self._live_locks is None else self._live_locks.hold(session_id)

    def has_live_writer(self, session_id: str) -> bool:
        return self._live_locks is not None and self._live_locks.held_elsewhere(session_id)


_process_holds: dict[tuple[int, str], list[Any]] = {}
"""(process, lock file path) → [its release, how many live logs of the process hold it]."""
_process_holds_lock = threading.Lock()


def _shared_release(key: tuple[int, str]) -> Callable[[], None]:
    """One holder's release of a shared lock (once, however often it is called)."""
    released = False

    def release() -> None:
        nonlocal released
        with _process_holds_lock:
            if released:
                return
            released = True
            held = _process_holds[key]
            held[1] -= 1
            if held[1] == 0:
                del _process_holds[key]
                held[0]()

    return release


def _releaser(fd: int, path: Path) -> Callable[[], None]:
    def release() -> None:
        try:
            os.unlink(path)  # while still locked: nobody takes a file about to go
        except OSError:
            pass
        os.close(fd)  # closing the descriptor drops its lock

    return release
