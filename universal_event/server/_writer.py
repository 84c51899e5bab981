"""Idempotent appends from many producers, across server processes.

Each session keeps, in this process, the next free seq and the set of event ids it
holds. An append skips events whose id is already stored (a producer's retry adds
nothing), assigns the next seqs and writes with ``expected_seq``; when another process
got there first the store raises :class:`ConflictError`, and the writer reads what it
missed (learning its ids, so a retry that landed elsewhere is still recognised) and
tries again. Calls are synchronous (run them in a worker thread); a per-session lock
orders writers within the process.

Idempotency keys. Events of a request sent with an ``Idempotency-Key`` get ids
``<key>~<fingerprint>-<index>`` (:func:`keyed_id`; the fingerprint is of the request's
body), so a retry finds them stored. The writer remembers which fingerprint each key
came with, read back from the ids (so other processes' requests and earlier runs count
too): a key sent again with another body is refused (:class:`IdempotencyKeyReused`)
rather than half applied (the indexes both bodies have taken as "already stored", the
rest appended).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from universal_event.derive import SurfaceView, is_surface_event
from universal_event.errors import ConflictError, StoreError, UniversalEventError
from universal_event.events import Event
from universal_event.stores import Store

__all__ = ["AppendResult", "IdempotencyKeyReused", "SessionWriters", "keyed_id"]

_MAX_CONFLICT_RETRIES = 20
_KEYED_ID = re.compile(r"(.+)~([0-9a-f]{12})-[0-9]+")


def keyed_id(key: str, fingerprint: str, index: int) -> str:
    """The id of the ``index``-th event of a request sent with ``Idempotency-Key: key``
    whose body has ``fingerprint`` (12 hex digits)."""
    return f"{key}~{fingerprint}-{index}"


class IdempotencyKeyReused(UniversalEventError):
    """An ``Idempotency-Key`` already used in this session with another body."""

    def __init__(self, session_id: str, key: str) -> None:
        self.session_id = session_id
        self.key = key
        super().__init__(
            f"session {session_id!r}: Idempotency-Key {key!r} was already used with "
            "another body; a retry must send the same body (or use a new key)"
        )


@dataclass
class AppendResult:
    """What an append did: the events now stored, and how many were already there."""

    appended: list[Event]
    duplicates: int


@dataclass
class _SessionState:
    next_seq: int = 0
    ids: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    loaded: bool = False
    keys: dict[str, str] = field(default_factory=dict)
    """Idempotency-Key → the fingerprint of the body it came with (from the ids)."""
    surface: SurfaceView = field(default_factory=lambda: SurfaceView(derive=False))
    """Which seqs are on the surface: a posted replace intent is checked against it (a
    bad one stored would make the session fail to load everywhere)."""

    def take(self, event: Event) -> None:
        """Take in a stored event: its id (and the key it was made from), its surface
        intent; the next free seq follows it."""
        event_id = event.id
        self.ids.add(event_id)
        if "~" in event_id and (keyed := _KEYED_ID.fullmatch(event_id)):
            self.keys.setdefault(keyed[1], keyed[2])
        if is_surface_event(event):
            self.surface.apply(event)
        self.next_seq = event.seq + 1


class SessionWriters:
    """The per-session writer state of one process."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._states: dict[str, _SessionState] = {}
        self._states_lock = threading.Lock()

    def _state(self, session_id: str) -> _SessionState:
        with self._states_lock:
            return self._states.setdefault(session_id, _SessionState())

    def _catch_up(self, session_id: str, state: _SessionState) -> None:
        for event in self.store.read(session_id, state.next_seq):
            state.take(event)

    def append(
        self,
        session_id: str,
        events: Sequence[Event],
        *,
        idempotency_key: tuple[str, str] | None = None,
    ) -> AppendResult:
        """Store the events not stored yet, in order; returns them with their seqs.

        ``idempotency_key`` is the request's key and its body's fingerprint, when it
        came with one: the ids of ``events`` were made from them (:func:`keyed_id`).
        """
        state = self._state(session_id)
        with state.lock:
            if not state.loaded:
                self._catch_up(session_id, state)
                state.loaded = True
            for _attempt in range(_MAX_CONFLICT_RETRIES):
                if idempotency_key is not None:
                    key, fingerprint = idempotency_key
                    if state.keys.get(key, fingerprint) != fingerprint:
                        raise IdempotencyKeyReused(session_id, key)
                batch, duplicates = self._number(session_id, state, events)
                for event in batch:  # against the surface before the batch: refused whole
                    if is_surface_event(event):
                        state.surface.check(event)
                if not batch and self.store.latest_seq(session_id) + 1 < state.next_seq:
                    self._forget(state)  # all "already stored", but the session was deleted
                    self._catch_up(session_id, state)
                    continue
                try:
                    if batch:
                        self.store.append(session_id, batch, expected_seq=state.next_seq)
                except ConflictError as exc:
                    if exc.actual_seq < state.next_seq:
                        self._forget(state)  # deleted (and maybe begun again) since
                    self._catch_up(session_id, state)
                    continue
                for event in batch:
                    state.take(event)
                return AppendResult(batch, duplicates)
        raise StoreError(
            f"session {session_id!r}: gave up after {_MAX_CONFLICT_RETRIES} conflicting appends"
        )

    @staticmethod
    def _forget(state: _SessionState) -> None:
        """The session was deleted behind this writer: what it knew of it is gone too."""
        state.next_seq = 0
        state.ids.clear()
        state.keys.clear()
        state.surface = SurfaceView(derive=False)

    @staticmethod
    def _number(
        session_id: str, state: _SessionState, events: Sequence[Event]
    ) -> tuple[list[Event], int]:
        batch: list[Event] = []
        in_batch: set[str] = set()
        duplicates = 0
        now = time.time()
        for event in events:
            if event.id in state.ids or event.id in in_batch:
                duplicates += 1
                continue
            in_batch.add(event.id)
            batch.append(
                msgspec.structs.replace(
                    event,
                    seq=state.next_seq + len(batch),
                    session_id=session_id,
                    ts=event.ts or now,
                )
            )
        return batch, duplicates
