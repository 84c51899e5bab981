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
rest appended). Keys apply only to events sent *without* an id: an event that carries
its own id is de-duplicated by that id alone, whatever key came with it.

Same id, other body. Next to each stored id the writer keeps a short digest of the
event's body (the envelope, seq, session and time, left out, and its surface intent
apart, as :class:`~universal_event.log.SessionLog` compares a retry), computed alike
for the events it appends and those it reads back from the store. An append that
checks bodies refuses an id stored with another body
(:class:`~universal_event.errors.EventIdConflictError`, naming the id and its seq)
instead of counting it as a duplicate and losing the new body; no session is re-read.

Contention. When other writers keep taking the expected seq, the writer retries with
randomised, growing pauses for at most :data:`CONFLICT_BUDGET` seconds, then gives up
with :class:`WriteContention` (the server answers 503 with ``Retry-After``).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from universal_event.derive import (
    SurfaceView,
    is_recovered_surface,
    is_surface_event,
    resolve_surface_ids,
)
from universal_event.errors import (
    ConflictError,
    EventIdConflictError,
    StoreError,
    UniversalEventError,
)
from universal_event.events import Event, EventBase, NativeUnknownEvent
from universal_event.stores import Store

__all__ = [
    "AppendResult",
    "IdempotencyKeyReused",
    "SessionWriters",
    "WriteContention",
    "is_keyed_id",
    "keyed_id",
]

CONFLICT_BUDGET = 10.0
"""Seconds an append keeps retrying conflicts (other writers first) before giving up."""
_BACKOFF_FIRST = 0.002
_BACKOFF_MAX = 0.2
_KEYED_ID = re.compile(r"(.+)~([0-9a-f]{12})-[0-9]+")
_envelope = msgspec.json.Encoder()
_SEQ_BITS = 40
_SEQ_MASK = (1 << _SEQ_BITS) - 1
_SURFACE_BITS = 32
_SURFACE_MASK = (1 << _SURFACE_BITS) - 1
_NO_SURFACE = 0


def is_keyed_id(event_id: str) -> bool:
    """Whether ``event_id`` has the shape :func:`keyed_id` gives."""
    return "~" in event_id and _KEYED_ID.fullmatch(event_id) is not None


def _digests(event: EventBase) -> tuple[int, int]:
    """A digest of the event's body (envelope and surface intent left out) and one of
    its surface intent (``_NO_SURFACE`` for none); process-local, like ``hash``."""
    surface = getattr(event, "surface", None)
    changes: dict[str, object] = {"seq": 0, "session_id": "", "ts": 0.0}
    if surface is not None:
        changes["surface"] = None
    try:
        body = hash(_envelope.encode(msgspec.structs.replace(event, **changes)))
        marks = _NO_SURFACE if surface is None else (hash(_envelope.encode(surface)) | 1)
    except (TypeError, ValueError, OverflowError):
        body, marks = hash(id(event)), _NO_SURFACE  # not storable: matches nothing
    return body & ((1 << 64) - 1), marks & _SURFACE_MASK


def _pack(event: EventBase) -> int:
    """What the writer keeps per stored id: body digest, surface digest, seq."""
    body, surface = _digests(event)
    return (((body << _SURFACE_BITS) | surface) << _SEQ_BITS) | event.seq


def keyed_id(key: str, fingerprint: str, index: int) -> str:
    """The id of the ``index``-th event of a request sent with ``Idempotency-Key: key``
    whose body has ``fingerprint`` (12 hex digits)."""
    return f"{key}~{fingerprint}-{index}"


class WriteContention(StoreError):
    """Other writers kept appending to the session first; the append gave up."""

    def __init__(self, session_id: str, attempts: int, seconds: float) -> None:
        self.session_id = session_id
        self.attempts = attempts
        super().__init__(
            f"session {session_id!r}: other writers appended first {attempts} times "
            f"in {seconds:.1f}s; try again"
        )


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
    ids: dict[str, int] = field(default_factory=dict)
    """Each stored id → its event's digests and seq (:func:`_pack`)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    loaded: bool = False
    keys: dict[str, str] = field(default_factory=dict)
    """Idempotency-Key → the fingerprint of the body it came with (from the ids)."""
    surface: SurfaceView = field(default_factory=lambda: SurfaceView(derive=False))
    """Which seqs are on the surface: a posted replace intent is checked against it (a
    bad one stored would make the session fail to load everywhere)."""

    def take(self, event: Event, packed: int | None = None) -> None:
        """Take in a stored event: its id (and the key it was made from), its surface
        intent; the next free seq follows it. ``packed`` is the event's :func:`_pack`
        when the caller has it already."""
        event_id = event.id
        self.ids[event_id] = _pack(event) if packed is None else packed
        if "~" in event_id and (keyed := _KEYED_ID.fullmatch(event_id)):
            self.keys.setdefault(keyed[1], keyed[2])
        if is_surface_event(event):
            self.surface.apply(event)
        elif type(event) is NativeUnknownEvent:  # maybe a newer writer's surface event
            self.surface.apply_recovered(event)
        self.next_seq = event.seq + 1


MAX_HELD_IDS = 2_000_000
"""Event ids the writers of one process hold, over all sessions (each ~100 bytes): past
it, the states of the sessions written least recently are let go (read again from the
store at their next append). A long-running server held every session it had ever
written to."""
MAX_HELD_SESSIONS = 4096
_BOUNDS_CHECKED_EVERY = 64
"""Appends between two counts of the ids held (a count visits every state)."""


class SessionWriters:
    """The per-session writer state of one process (bounded: :data:`MAX_HELD_IDS`)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._states: dict[str, _SessionState] = {}
        """Session → its state, least recently written first."""
        self._states_lock = threading.Lock()
        self._taken = 0

    def _state(self, session_id: str) -> _SessionState:
        with self._states_lock:
            state = self._states.pop(session_id, None) or _SessionState()
            self._states[session_id] = state
            self._taken += 1
            if self._taken % _BOUNDS_CHECKED_EVERY == 0 or len(self._states) > MAX_HELD_SESSIONS:
                self._let_go(keep=state)
            return state

    def _let_go(self, keep: _SessionState) -> None:
        """Drop the least recently written states while over the bounds; one in use (its
        lock held) stays. A writer holding a dropped state still appends correctly:
        ``expected_seq`` and the catch-up on conflict make it so."""
        held_ids = sum(len(state.ids) for state in self._states.values())
        for session_id, state in list(self._states.items()):
            if held_ids <= MAX_HELD_IDS and len(self._states) <= MAX_HELD_SESSIONS:
                return
            if state is keep or not state.lock.acquire(blocking=False):
                continue
            try:
                del self._states[session_id]
                held_ids -= len(state.ids)
            finally:
                state.lock.release()

    def _catch_up(self, session_id: str, state: _SessionState) -> None:
        for event in self.store.read(session_id, state.next_seq):
            state.take(event)

    def append(
        self,
        session_id: str,
        events: Sequence[Event],
        *,
        idempotency_key: tuple[str, str] | None = None,
        check_bodies: bool = True,
    ) -> AppendResult:
        """Store the events not stored yet, in order; returns them with their seqs.

        ``idempotency_key`` is the request's key and its body's fingerprint, when it
        came with one: the ids of ``events`` were made from them (:func:`keyed_id`).
        With ``check_bodies`` an event whose id is stored with another body raises
        :class:`EventIdConflictError` (nothing of the call is appended); without, it
        counts as a duplicate (ids derived from a native stream, whose adapter may
        stamp details anew each time). Raises :class:`WriteContention` when other
        writers keep appending first for :data:`CONFLICT_BUDGET` seconds.
        """
        state = self._state(session_id)
        with state.lock:
            if not state.loaded:
                self._catch_up(session_id, state)
                state.loaded = True
            started = time.monotonic()
            conflicts = 0
            while True:
                if idempotency_key is not None:
                    key, fingerprint = idempotency_key
                    if state.keys.get(key, fingerprint) != fingerprint:
                        raise IdempotencyKeyReused(session_id, key)
                batch, packs, duplicates = self._number(session_id, state, events, check_bodies)
                _check_intents(state.surface, batch)  # refused whole
                if not batch and self.store.latest_seq(session_id) + 1 < state.next_seq:
                    self._forget(state)  # all "already stored", but the session was deleted
                    self._catch_up(session_id, state)
                    conflicts += 1
                    self._back_off(session_id, conflicts, started)
                    continue
                try:
                    if batch:
                        self.store.append(session_id, batch, expected_seq=state.next_seq)
                except ConflictError as exc:
                    if exc.actual_seq < state.next_seq:
                        self._forget(state)  # deleted (and maybe begun again) since
                    self._catch_up(session_id, state)
                    conflicts += 1
                    self._back_off(session_id, conflicts, started)
                    continue
                for event, packed in zip(batch, packs, strict=True):
                    state.take(event, packed)
                return AppendResult(batch, duplicates)

    @staticmethod
    def _back_off(session_id: str, conflicts: int, started: float) -> None:
        """Pause before retrying a conflicting append (randomised: writers that collided
        must not collide again in step); give up once the budget is spent."""
        left = CONFLICT_BUDGET - (time.monotonic() - started)
        if left <= 0:
            raise WriteContention(session_id, conflicts, CONFLICT_BUDGET - left)
        if conflicts > 1:  # the first retry goes at once: the catch-up took time already
            pause = random.uniform(0, min(_BACKOFF_MAX, _BACKOFF_FIRST * 2**conflicts))
            time.sleep(min(pause, left))

    @staticmethod
    def _forget(state: _SessionState) -> None:
        """The session was deleted behind this writer: what it knew of it is gone too."""
        state.next_seq = 0
        state.ids.clear()
        state.keys.clear()
        state.surface = SurfaceView(derive=False)

    @staticmethod
    def _number(
        session_id: str, state: _SessionState, events: Sequence[Event], check_bodies: bool
    ) -> tuple[list[Event], list[int | None], int]:
        """Number the events not stored yet; returns them, their :func:`_pack` (when
        ``check_bodies`` computed it, else ``None``: ``take`` packs them) and how many
        were duplicates."""
        batch: list[Event] = []
        packs: list[int | None] = []
        in_batch: dict[str, int] = {}
        duplicates = 0
        now = time.time()

        def seq_of(event_id: str) -> int | None:
            packed = state.ids.get(event_id)
            if packed is None:
                packed = in_batch.get(event_id)
            return None if packed is None else packed & _SEQ_MASK

        for event in events:
            surface = getattr(event, "surface", None)
            if surface is not None and surface.by_ids:  # a range named by ids: stored by seqs
                resolved = resolve_surface_ids(surface, seq_of, event.id)
                event = msgspec.structs.replace(event, surface=resolved)
            earlier = state.ids.get(event.id)
            if earlier is None:
                earlier = in_batch.get(event.id)
            if earlier is not None:  # stored, or earlier in this call
                if check_bodies:
                    _check_same_body(session_id, event, earlier)
                duplicates += 1
                continue
            numbered = msgspec.structs.replace(
                event, seq=state.next_seq + len(batch), session_id=session_id, ts=event.ts or now
            )
            packed = _pack(numbered) if check_bodies else None
            in_batch[event.id] = numbered.seq if packed is None else packed
            batch.append(numbered)
            packs.append(packed)
        return batch, packs, duplicates


def _check_intents(surface: SurfaceView, batch: Sequence[Event]) -> None:
    """SurfaceError unless every surface intent of ``batch`` applies, each after the
    events before it (a replace may name events of the same batch: a native transcript
    whose branch drops what it showed); ``surface`` is left as it is. A batch without
    replace intents (nearly all) is not tried out: appends always apply."""
    if not any(_has_intent(event) for event in batch):
        return
    trial = surface.copy()
    for event in batch:
        if is_surface_event(event):
            trial.check(event)
            trial.apply(event)
        elif type(event) is NativeUnknownEvent:
            trial.check_recovered(event)
            trial.apply_recovered(event)


def _has_intent(event: Event) -> bool:
    if is_surface_event(event):
        return event.surface is not None and event.surface.op == "replace"
    return type(event) is NativeUnknownEvent and is_recovered_surface(event)


def _check_same_body(session_id: str, event: Event, stored: int) -> None:
    """Raise unless ``event`` is a retry of the stored event packed in ``stored``: the
    same body, and the same surface intent unless the retry gives none (an intent is
    given once)."""
    seq = stored & _SEQ_MASK
    stored_surface = (stored >> _SEQ_BITS) & _SURFACE_MASK
    stored_body = stored >> (_SEQ_BITS + _SURFACE_BITS)
    body, surface = _digests(event)
    if body != stored_body or (surface != _NO_SURFACE and surface != stored_surface):
        tag = type(event).__struct_config__.tag
        raise EventIdConflictError(session_id, event.id, seq, str(tag))
