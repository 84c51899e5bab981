"""The session log: the one place a session's events are appended and read back.

"What the model sees must first be in the log": the messages of the next model
request are derived from the log (:meth:`SessionLog.derive_messages`), never kept on
the side.

* :meth:`~SessionLog.append` gives each event its ``seq`` (0, 1, 2, ... without gaps),
  and its ``id``/``ts`` when empty; it always sets ``session_id`` to the log's (the
  store keys events by it). It is idempotent by ``id``: a producer retrying an event
  gets the originally logged one back, never a duplicate.
* Appends are buffered in memory and reach the store at *checkpoints*: before a model
  request, before a tool runs, before the next step (:meth:`~SessionLog.before_request`,
  :meth:`~SessionLog.before_tool`, :meth:`~SessionLog.before_step`). A failed
  checkpoint raises :class:`CheckpointError`, keeps the buffer for a retry, and the
  guarded block does not run.
* Surface events carry an intent (append / replace / hidden, see
  :mod:`universal_event.derive`); only ``user/message``, ``assistant/message`` and
  ``tool/result`` may. Compression and tool-result pruning are replaces with marker
  events around them.
* Request epochs: ``request/header`` is written when the effective request settings
  change (:meth:`~SessionLog.update_header`), and :meth:`~SessionLog.current_header`
  gives the settings in force.

A log opened with ``live=True`` (and every log made with the constructor) is the
session's writer in this process; :func:`universal_event.repair.repair` refuses it.
"""

from __future__ import annotations

import contextvars
import math
import re
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast, get_args, overload

import msgspec

from universal_event.derive import SurfaceView, resolve_surface_ids
from universal_event.errors import (
    CheckpointError,
    ConflictError,
    CorruptEventError,
    DecodeError,
    EventIdConflictError,
    SessionNotFoundError,
    SurfaceError,
    UniversalEventError,
)
from universal_event.events import (
    AssistantMessageEvent,
    CompressionEndEvent,
    CompressionPruneEvent,
    CompressionStartEvent,
    CompressionSummaryEvent,
    Event,
    EventBase,
    NativeUnknownEvent,
    RequestHeaderEvent,
    Surface,
    SurfaceEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)
from universal_event.messages import Message
from universal_event.parts import ResultPart, TextPart, UserPart
from universal_event.projections import Projections
from universal_event.stores._base import Store
from universal_event.stores.memory import MemoryStore

__all__ = [
    "ForkError",
    "SessionLog",
    "StoredSession",
    "effective_header",
    "new_event_id",
    "new_session_id",
]

_E = TypeVar("_E", bound=EventBase)
_S = TypeVar("_S", bound=SurfaceEvent)
_T = TypeVar("_T")

_SURFACE_CLASSES = (UserMessageEvent, AssistantMessageEvent, ToolResultEvent)

_in_tool: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "universal_event_in_tool", default=frozenset()
)
"""Ids of the logs whose ``before_tool`` guard the current thread / task is inside."""

_storable = msgspec.json.Encoder()
_readable = msgspec.json.Decoder(Event)


def _check_storable(event: EventBase) -> None:
    """DecodeError unless the event can be stored *and read back*, naming the event and
    the field: a value no JSON holds (a lone surrogate from a file name, an object in
    an ``Any`` field) would fail every checkpoint after it, and a value of the wrong
    type in a typed field (structs do not check types when built: a native stream's
    string where an ``int`` belongs) would be stored and leave the session unreadable."""
    tag = type(event).__struct_config__.tag
    try:
        data = _storable.encode(event)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DecodeError(f"{tag} event cannot be stored: {exc}") from exc
    except RecursionError:
        raise DecodeError(f"{tag} event cannot be stored: nesting too deep") from None
    if _STRUCTURAL_NULL.search(data):  # where a NaN or an infinity would be written
        _refuse_non_finite(tag, msgspec.to_builtins(event))
    try:
        _readable.decode(data)
    except RecursionError:  # encodable deeper than the decoder goes: would never read back
        raise DecodeError(f"{tag} event cannot be stored: nesting too deep to read back") from None
    except msgspec.ValidationError as exc:
        problem, _, path = str(exc).rpartition(" - at ")
        if not problem:
            problem, path = str(exc), "$"
        raise DecodeError(
            f"{tag} event cannot be stored: it would not read back: {problem}",
            path=path.strip("`"),
        ) from exc


_STRUCTURAL_NULL = re.compile(rb"[:,\[]null")
"""A JSON null as a value (not the word in a string): msgspec writes NaN and infinity
so, and only then does an event need the walk of :func:`_refuse_non_finite`."""


def _refuse_non_finite(tag: object, value: Any) -> None:
    """DecodeError naming a NaN or an infinity in ``value`` (an event as builtins):
    JSON has neither, so msgspec writes null and the event would read back changed (a
    cost of ``nan`` as None) or not at all (a ``ts`` of ``inf``). A walk with a stack of
    its own: an ``Any`` payload may nest deeper than Python recursion goes."""
    stack: list[tuple[Any, _Step | None]] = [(value, None)]
    while stack:
        item, step = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                raise DecodeError(
                    f"{tag} event cannot be stored: {item!r} is not a finite number "
                    "(JSON has no NaN or infinity; it would read back as null)",
                    path=_path_of(step),
                )
        elif isinstance(item, dict):
            stack.extend((child, (step, f".{key}")) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, (step, f"[{index}]")) for index, child in enumerate(item))


_Step = tuple["_Step | None", str]
"""Where a value sits: the step to its container and its own key (``.cost_usd``,
``[0]``), a chain walked back only to name a refused value."""


def _path_of(step: _Step | None) -> str:
    keys: list[str] = []
    while step is not None:
        step, key = step
        keys.append(key)
    return "$" + "".join(reversed(keys))


def _check_all_storable(*events: EventBase) -> None:
    """:func:`_check_storable` for each of events logged together, before the first is
    logged: a refusal halfway would leave the first ones without the rest."""
    for event in events:
        _check_storable(event)


_USER_PART_CLASSES = get_args(UserPart)
_RESULT_PART_CLASSES = get_args(ResultPart)


def _parts_of(
    what: str, given: str | Sequence[Any], allowed: tuple[type[msgspec.Struct], ...]
) -> list[Any]:
    """``given`` as a list of parts (a string: one text part); DecodeError naming the
    first part that is not of the ``allowed`` kinds (a thinking part in a summary)."""
    if isinstance(given, str):
        return [TextPart(text=given)]
    parts = list(given)
    for index, part in enumerate(parts):
        if not isinstance(part, allowed):
            kinds = ", ".join(str(kind.__struct_config__.tag) for kind in allowed)
            raise DecodeError(
                f"{what} part {index} is a {type(part).__name__}; only {kinds} parts go there",
                path=f"$.content[{index}]",
            )
    return parts


_live_logs: dict[tuple[int, str], weakref.WeakSet[SessionLog]] = {}
"""(store, session) → its live logs in this process (more than one may be open; each
counts until it is closed or collected)."""
_live_logs_lock = threading.Lock()


class ForkError(UniversalEventError, ValueError):
    """A fork point that is not a turn boundary, or a child session id already taken."""


def new_session_id() -> str:
    """A fresh session id."""
    return f"ses_{uuid.uuid4().hex}"


def new_event_id() -> str:
    """A fresh event id (the log's, for events a producer left without one)."""
    return f"evt_{uuid.uuid4().hex}"


def effective_header(header: RequestHeaderEvent) -> RequestHeaderEvent:
    """``header`` with its adapter defaults merged under its explicit ``sampling``.

    Explicit settings win; ``adapter_defaults`` stays as it was so a reader can still
    tell which values an adapter filled in.
    """
    if not header.adapter_defaults:
        return header
    merged = {**header.adapter_defaults, **header.sampling}
    if merged == header.sampling:
        return header
    return msgspec.structs.replace(header, sampling=merged)


def _header_key(header: RequestHeaderEvent) -> tuple[Any, ...]:
    """What makes two headers the same epoch: provider, api, model, system (with its
    blocks' cache hints), tools and the effective sampling. Adapter defaults that explicit settings override do not
    count: they change nothing the model sees."""
    effective = effective_header(header)
    return (
        effective.provider,
        effective.api,
        effective.model,
        effective.system,
        effective.system_parts,  # compared as values: an encoding depends on how a
        effective.tools,  # default-valued field's string was made (see _logged_again)
        msgspec.json.encode(effective.sampling, order="sorted"),
        msgspec.json.encode(header.sampling, order="sorted"),
    )


class SessionLog:
    """One session's append-only event log over a :class:`~universal_event.stores.Store`.

    ``SessionLog()`` is a fresh session in a memory store. ``SessionLog(store, id)``
    writes session ``id`` (loading what the store already holds of it);
    :meth:`open` loads an existing session and fails when there is none.
    """

    def __init__(
        self,
        store: Store | None = None,
        session_id: str | None = None,
        *,
        live: bool = True,
    ) -> None:
        self._store: Store = store if store is not None else MemoryStore()
        self._session_id = session_id or new_session_id()
        self._events: list[Event] = []
        self._persisted = 0
        self._seq_of_id: dict[str, int] = {}
        self._view = SurfaceView()
        self._header: RequestHeaderEvent | None = None
        self._lock = threading.RLock()
        self._live = False
        self._release_live: weakref.finalize[Any, Any] | None = None
        self.projections = Projections(lambda: list(self._events), self._lock)
        """Reducers over this log's events (see :mod:`universal_event.projections`)."""
        self._load()
        if live:
            self._mark_live()

    # ------------------------------------------------------------ opening

    @classmethod
    def open(cls, store: Store, session_id: str, *, live: bool = False) -> SessionLog:
        """Load an existing session; ``live=True`` when this process keeps writing it.

        Loading writes nothing (a reader may be looking at a session another process
        is still writing). Closing what a cut-off writer left open is :meth:`repair`;
        the ``run`` command repairs a session before it continues it.
        """
        if store.latest_seq(session_id) < 0:
            raise SessionNotFoundError(session_id)
        return cls(store, session_id, live=live)

    def _load(self) -> None:
        """Read the stored events through the same path live appends take."""
        for event in self._store.read(self._session_id):
            self._take_stored(event)
        self._persisted = len(self._events)

    def _take_stored(self, event: Event) -> None:
        """Record an event read from the store, checked first as an append is: its seq
        the next one, its surface intent applicable (a bad one raises, recording
        nothing)."""
        _check_seq(self._session_id, event, len(self._events))
        self._check_intent(event)
        self._record(event)

    def _mark_live(self) -> None:
        self._live = True
        with _live_logs_lock:
            key = (id(self._store), self._session_id)
            _live_logs.setdefault(key, weakref.WeakSet()).add(self)
        # Other processes too (a store that can say so): repair refuses the session
        # while this log is open. Released at close, or when the log is collected.
        hold = getattr(self._store, "hold_live", None)
        release = hold(self._session_id) if hold is not None else None
        self._release_live = weakref.finalize(self, release) if release is not None else None

    def close(self) -> None:
        """Stop being the live writer of the session (buffered events are not flushed)."""
        if self._live:
            self._live = False
            key = (id(self._store), self._session_id)
            with _live_logs_lock:
                logs = _live_logs.get(key)
                if logs is not None:
                    logs.discard(self)
                    if not logs:
                        del _live_logs[key]
            if self._release_live is not None:
                self._release_live()

    def go_live(self) -> None:
        """Become the session's writer in this process: a log loaded to be read or
        repaired first (``run`` repairs a session cut off, then continues it, loading it
        once), then written."""
        if not self._live:
            self._mark_live()

    @staticmethod
    def live_writer(store: Store, session_id: str) -> SessionLog | None:
        """The live log writing ``session_id`` to ``store`` in this process, if any."""
        with _live_logs_lock:
            return next(iter(_live_logs.get((id(store), session_id), ())), None)

    # ------------------------------------------------------------ properties

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def store(self) -> Store:
        return self._store

    @property
    def live(self) -> bool:
        """Whether this log is the session's writer in this process."""
        return self._live

    @property
    def next_seq(self) -> int:
        """The seq the next appended event gets."""
        return len(self._events)

    @property
    def persisted_seq(self) -> int:
        """How many events have reached the store (the buffered ones follow)."""
        return self._persisted

    @property
    def pending(self) -> int:
        """How many appended events wait for the next checkpoint."""
        return len(self._events) - self._persisted

    @property
    def generation(self) -> int:
        """The surface generation: bumped by every replace."""
        return self._view.generation

    def __len__(self) -> int:
        return len(self._events)

    # ------------------------------------------------------------ appending

    @overload
    def append(self, event: _S, *, surface: Surface | None = None) -> _S: ...
    @overload
    def append(self, event: _E, *, surface: None = None) -> _E: ...

    def append(self, event: EventBase, *, surface: Surface | None = None) -> EventBase:
        """Log one event and return it as logged (seq, id, ts, session_id filled).

        ``surface`` sets the intent of a surface event; any other type raises
        :class:`SurfaceError`, as does a replace whose range is not on the surface.
        A retry with an id already logged returns the logged event unchanged; another
        event under a logged id raises :class:`EventIdConflictError`.
        """
        with self._lock:
            surface = self._resolved_intent(event, surface)
            if event.id and event.id in self._seq_of_id:
                return self._logged_again(event, surface)
            logged = self._envelope(event, surface)
            self._check_intent(logged)
            _check_storable(logged)
            self._record(cast(Event, logged))
            return logged

    def _resolved_intent(self, event: EventBase, surface: Surface | None) -> Surface | None:
        """``surface``, or the event's own intent when it names a replace's range by
        event ids: that range by seqs (:func:`~universal_event.derive.resolve_surface_ids`),
        so what is stored and checked names seqs only."""
        intent = surface if surface is not None else getattr(event, "surface", None)
        if intent is None:  # most events: spared a call
            return surface
        resolved = resolve_surface_ids(intent, self._seq_of_id.get, event.id)
        return surface if resolved is intent else resolved

    def _logged_again(self, event: EventBase, surface: Surface | None) -> EventBase:
        """The logged event ``event`` retries, compared as stored. The envelope does not
        count: the log fills in seq and session, a producer that makes the event again
        (an import read a second time) stamps it with a new time, and a surface intent
        is given once."""
        logged = self._events[self._seq_of_id[event.id]]
        changes: dict[str, Any] = {
            "seq": logged.seq,
            "session_id": logged.session_id,
            "ts": logged.ts,
        }
        if isinstance(event, _SURFACE_CLASSES) and isinstance(logged, _SURFACE_CLASSES):
            # An intent given with the first append (an import's replace) need not be
            # given again; a different one is a different event.
            changes["surface"] = surface or event.surface or logged.surface
        retried = msgspec.structs.replace(event, **changes)
        # Equal values first: ``omit_defaults`` leaves out a default-valued field only
        # when it holds the default object itself, so an equal string parsed from input
        # (a tool's ``kind`` read from a request body) is written out, and the same
        # event re-made from the same input encoded otherwise than the one stored.
        try:
            same = retried == logged or _storable.encode(retried) == _storable.encode(logged)
        except (TypeError, ValueError, OverflowError):
            same = False  # the logged one was storable
        if not same:
            tag = type(event).__struct_config__.tag
            raise EventIdConflictError(self._session_id, event.id, logged.seq, str(tag))
        return logged

    def extend(self, events: Iterable[EventBase]) -> list[Event]:
        """Append several events in order; returns them as logged."""
        return [cast(Event, self.append(event)) for event in events]

    def _envelope(self, event: EventBase, surface: Surface | None) -> EventBase:
        changes: dict[str, Any] = {"seq": len(self._events), "session_id": self._session_id}
        if not event.id:
            changes["id"] = new_event_id()
        if not event.ts:
            changes["ts"] = time.time()
        if surface is not None:
            if not isinstance(event, _SURFACE_CLASSES):
                tag = type(event).__struct_config__.tag
                raise SurfaceError(
                    f"{tag!r} events never reach the model and cannot carry a surface intent; "
                    "only user/message, assistant/message and tool/result can"
                )
            changes["surface"] = surface
        return msgspec.structs.replace(event, **changes)

    def _check_intent(self, event: EventBase) -> None:
        _check_intent(self._view, event)

    def _record(self, event: Event) -> None:
        """Take an enveloped event into memory, the surface and the projections."""
        self._events.append(event)
        self._seq_of_id[event.id] = event.seq
        self._header = _take_in(self._view, event, self._header)
        self.projections.feed(event)

    # ------------------------------------------------------------ checkpoints

    def checkpoint(self) -> int:
        """Write the buffered events to the store; returns how many were written.

        On failure raises :class:`CheckpointError` (the store's error is its cause) and
        keeps the buffer, so a later checkpoint retries the same events.
        """
        with self._lock:
            batch = self._events[self._persisted :]
            if not batch:
                return 0
            try:
                self._store.append(self._session_id, batch, expected_seq=self._persisted)
            except ConflictError as exc:
                if not self._stored_already(batch):
                    raise CheckpointError(
                        f"session {self._session_id!r}: checkpoint of seqs "
                        f"{self._persisted}..{self._persisted + len(batch) - 1} failed: {exc}"
                    ) from exc
            except Exception as exc:
                raise CheckpointError(
                    f"session {self._session_id!r}: checkpoint of seqs "
                    f"{self._persisted}..{self._persisted + len(batch) - 1} failed: {exc}"
                ) from exc
            self._persisted += len(batch)
            return len(batch)

    def _stored_already(self, batch: list[Event]) -> bool:
        """Whether the store holds this very batch (same seqs, same ids): an earlier
        checkpoint wrote it and then failed before saying so (a connection lost after
        the commit). Its retry then meets its own events, not another writer's."""
        stored = [
            event.id
            for event in self._store.read(self._session_id, batch[0].seq, batch[-1].seq + 1)
        ]
        return stored == [event.id for event in batch]

    @contextmanager
    def before_request(self, header: RequestHeaderEvent | None = None) -> Iterator[None]:
        """Guard a model request: log ``header`` when it starts a new epoch, checkpoint,
        then run the block (not at all when the checkpoint fails)."""
        if header is not None:
            self.update_header(header)
        self.checkpoint()
        yield

    @contextmanager
    def before_tool(self, call_id: str) -> Iterator[None]:
        """Guard a tool run: checkpoint, then run the block.

        A tool call nested inside another's guard (a sub-agent's tool, in the same
        thread or task) reuses the outer checkpoint instead of taking its own.
        """
        inside = _in_tool.get()
        if id(self) not in inside:
            self.checkpoint()
        token = _in_tool.set(inside | {id(self)})
        try:
            yield
        finally:
            _in_tool.reset(token)

    @contextmanager
    def before_step(self) -> Iterator[None]:
        """Guard the next step: checkpoint, then run the block."""
        self.checkpoint()
        yield

    # ------------------------------------------------------------ reading

    def events(self, start: int = 0, end: int | None = None) -> list[Event]:
        """Logged events with ``start <= seq < end`` (buffered ones included)."""
        return self._events[start:end]

    def get(self, seq: int) -> Event:
        """The event at ``seq``."""
        if not 0 <= seq < len(self._events):
            raise IndexError(f"session {self._session_id!r} has no seq {seq}")
        return self._events[seq]

    def event_by_id(self, event_id: str) -> Event | None:
        """The logged event with this id, if any."""
        seq = self._seq_of_id.get(event_id)
        return None if seq is None else self._events[seq]

    def derive_messages(self) -> list[Message]:
        """The neutral messages the model sees now (kept incrementally, see ``derive``)."""
        with self._lock:
            return self._view.messages()

    def surface_seqs(self) -> list[int]:
        """The seqs of the surface nodes, in order."""
        with self._lock:
            return self._view.seqs()

    def sync(self) -> list[Event]:
        """Pick up events another writer stored after ours (only with nothing buffered)."""
        with self._lock:
            if self.pending:
                raise CheckpointError(
                    f"session {self._session_id!r}: {self.pending} events are buffered; "
                    "checkpoint before syncing"
                )
            fresh = list(self._store.read(self._session_id, self._persisted))
            try:
                for event in fresh:
                    self._take_stored(event)
            finally:
                self._persisted = len(self._events)
            return fresh

    # ------------------------------------------------------------ request epochs

    def current_header(self) -> RequestHeaderEvent | None:
        """The request settings in force: the last header, adapter defaults merged under
        its explicit sampling."""
        return None if self._header is None else effective_header(self._header)

    def update_header(self, header: RequestHeaderEvent) -> RequestHeaderEvent | None:
        """Log ``header`` when it starts a new epoch; returns it as logged, or None when
        the settings in force are already the same."""
        with self._lock:
            if self._header is not None and _header_key(self._header) == _header_key(header):
                return None
            return self.append(header)

    # ------------------------------------------------------------ surface operations

    def replace(self, start: int, end: int, event: _S) -> _S:
        """Swap surface nodes ``start..end`` (seqs, inclusive) for ``event``."""
        return self.append(event, surface=Surface(op="replace", start=start, end=end))

    def compress(
        self,
        start: int,
        end: int,
        summary: str | Sequence[UserPart],
        *,
        reason: str | None = None,
        tokens_before: int | None = None,
        tokens_after: int | None = None,
    ) -> UserMessageEvent:
        """Replace surface nodes ``start..end`` by a summary, with compression markers.

        Writes ``compression/start``, the summary as a ``user/message`` replacing the
        range, ``compression/summary`` (pointing at that message) and
        ``compression/end``. Returns the summary message. Nothing is written when the
        range is not on the surface or any of the four events could not be stored (a
        part that is no user part: :class:`DecodeError` naming it): a refusal halfway
        would leave a lone ``compression/start`` behind.
        """
        parts: list[UserPart] = _parts_of("compress: summary", summary, _USER_PART_CLASSES)
        text = "".join(p.text for p in parts if isinstance(p, TextPart))
        with self._lock:
            self._view._range(start, end, self.next_seq)  # validate before writing anything
            first = self.next_seq
            opening = CompressionStartEvent(start=start, end=end, reason=reason)
            message = UserMessageEvent(content=parts)
            summarised = CompressionSummaryEvent(
                text=text,
                start=start,
                end=end,
                message_seq=first + 1,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
            )
            _check_all_storable(opening, message, summarised)
            saved = (  # of two ints stored above: the compression/end is storable too
                tokens_before - tokens_after
                if tokens_before is not None and tokens_after is not None
                else None
            )
            self.append(opening)
            logged = self.replace(start, end, message)
            self.append(summarised)
            self.append(CompressionEndEvent(tokens_saved=saved))
            return logged

    def prune(
        self,
        seqs: Sequence[int],
        replacement: str | Sequence[ResultPart] = "[tool output pruned]",
        *,
        tokens_saved: int = 0,
    ) -> list[ToolResultEvent]:
        """Replace the ``tool/result`` nodes at ``seqs`` by shorter results.

        Writes ``compression/prune`` (the pruned seqs, the tokens saved and the seqs of
        the replacements) followed by one replacement ``tool/result`` per pruned result,
        same call id and name. Returns the replacements. Nothing is written when one of
        them could not be stored (a part that is no result part: :class:`DecodeError`
        naming it): the marker alone would name seqs that later, unrelated events take.
        """
        parts: list[ResultPart] = _parts_of("prune: replacement", replacement, _RESULT_PART_CLASSES)
        if not seqs:
            raise SurfaceError("prune: no seqs given")
        if len(set(seqs)) != len(seqs):
            raise SurfaceError(f"prune: a seq is given twice in {list(seqs)}")
        with self._lock:
            originals: list[ToolResultEvent] = []
            for seq in seqs:
                event = self.get(seq) if 0 <= seq < self.next_seq else None
                if not isinstance(event, ToolResultEvent):
                    raise SurfaceError(f"prune: seq {seq} is not a tool/result")
                if seq not in self._view:
                    raise SurfaceError(f"prune: tool/result seq {seq} is not on the surface")
                originals.append(event)
            first = self.next_seq + 1
            marker = CompressionPruneEvent(
                pruned=list(seqs),
                tokens_saved=tokens_saved,
                replacement_seqs=list(range(first, first + len(originals))),
            )
            replacements = [
                ToolResultEvent(
                    call_id=original.call_id,
                    name=original.name,
                    content=parts,
                    is_error=original.is_error,
                    turn_id=original.turn_id,
                    step=original.step,
                    parent_id=original.parent_id,
                    surface=Surface(op="replace", start=original.seq, end=original.seq),
                )
                for original in originals
            ]
            _check_all_storable(marker, *replacements)
            self.append(marker)
            return [self.append(replacement) for replacement in replacements]

    # ------------------------------------------------------------ repair, fork, replay

    def repair(self, *, reason: str | None = None) -> list[Event]:
        """Close a cut-off session (see :mod:`universal_event.repair`)."""
        from universal_event.repair import repair_log

        return repair_log(self, reason=reason)

    def turn_boundaries(self) -> list[tuple[str | None, int]]:
        """(turn id, seq of its ``turn/end``) of every finished turn after which no turn
        is open, in order: the end of a sub-agent's turn inside another turn is no
        boundary (a fork there would leave the outer turn and its tool call open).

        A ``turn/end`` closes turns as repair counts them (:func:`close_last`), so a
        session repair finds nothing open in can be forked at its ends; the boundary
        is named by the turn it closed."""
        return turn_boundaries(self._events)

    def fork(
        self, new_session_id: str | None = None, *, after_turn: str | None = None
    ) -> SessionLog:
        """A new session sharing this one's history up to a turn boundary.

        ``after_turn`` names the turn whose ``turn/end`` is the last shared event
        (default: the last finished turn). This log is checkpointed first; the store
        copies the events and this session is left unchanged. Returns the child, live.
        """
        upto = fork_point(self._session_id, self.turn_boundaries(), after_turn)
        self.checkpoint()
        child_id = _fork_at(self._store, self._session_id, new_session_id, upto)
        return SessionLog.open(self._store, child_id, live=True)

    def replay(self, *, paced: bool = False, speed: float = 1.0) -> Iterator[Event]:
        """Every event again, chunks included (see :func:`universal_event.replay.replay`)."""
        from universal_event.replay import replay

        return replay(list(self._events), paced=paced, speed=speed)

    def projection(self, name: str) -> Any:
        """The state of a projection (built-ins registered on first use)."""
        with self._lock:
            return self.projections.get(name)


def _check_seq(session_id: str, event: Event, expected: int) -> None:
    """CorruptEventError unless a stored event read back has the seq due next."""
    if event.seq != expected:
        raise CorruptEventError(
            session_id, event.seq, f"the store returned seq {event.seq} where {expected} was due"
        )


def _check_intent(view: SurfaceView, event: EventBase) -> None:
    """SurfaceError unless the event's surface intent applies now: a surface event's,
    or a recovered one's (kept as native/unknown, see :mod:`universal_event.derive`)."""
    if isinstance(event, _SURFACE_CLASSES):
        view.check(event)
    elif type(event) is NativeUnknownEvent:
        view.check_recovered(event)


def _take_in(
    view: SurfaceView, event: Event, header: RequestHeaderEvent | None
) -> RequestHeaderEvent | None:
    """Apply an event to the surface; the header in force after it."""
    if isinstance(event, _SURFACE_CLASSES):
        view.apply(event)
    elif isinstance(event, RequestHeaderEvent):
        return event
    elif type(event) is NativeUnknownEvent:
        view.apply_recovered(event)
    return header


class StoredSession:
    """What the model sees of a stored session — :meth:`derive_messages`,
    :meth:`current_header` — read in one pass without keeping its events.

    For readers that only derive or render (the CLI's ``derive`` and ``render``, the
    server's ``/messages`` and ``/render``): a :class:`SessionLog` keeps every event in
    memory (~650 bytes each; 680 MB for a million), this only the surface. The events
    are checked as a log loading them checks them (seqs in order, surface intents that
    apply).
    """

    def __init__(self, store: Store, session_id: str) -> None:
        if store.latest_seq(session_id) < 0:
            raise SessionNotFoundError(session_id)
        self.session_id = session_id
        self._view = SurfaceView()
        self._header: RequestHeaderEvent | None = None
        expected = 0
        for event in store.read(session_id):
            _check_seq(session_id, event, expected)
            _check_intent(self._view, event)
            self._header = _take_in(self._view, event, self._header)
            expected += 1

    def derive_messages(self) -> list[Message]:
        """The neutral messages the model sees."""
        return self._view.messages()

    def current_header(self) -> RequestHeaderEvent | None:
        """As :meth:`SessionLog.current_header`."""
        return None if self._header is None else effective_header(self._header)


def turn_boundaries(events: Iterable[Event]) -> list[tuple[str | None, int]]:
    """(turn id, seq of its ``turn/end``) of every finished turn after which no turn is
    open: see :meth:`SessionLog.turn_boundaries`."""
    boundaries: list[tuple[str | None, int]] = []
    open_turns: list[str | None] = []
    for event in events:
        if isinstance(event, TurnStartEvent):
            open_turns.append(event.turn_id)
        elif isinstance(event, TurnEndEvent):
            closed = close_last(open_turns, event.turn_id)
            if not open_turns:
                boundaries.append((closed, event.seq))
    return boundaries


def fork_point(
    session_id: str, boundaries: list[tuple[str | None, int]], after_turn: str | None
) -> int:
    """The seq a fork after turn ``after_turn`` (default: the last finished) copies up
    to; :class:`ForkError` when that is no turn boundary."""
    if after_turn is None:
        if not boundaries:
            raise ForkError(f"session {session_id!r} has no finished turn to fork at")
        return boundaries[-1][1]
    matches = [seq for turn_id, seq in boundaries if turn_id == after_turn]
    if not matches:
        raise ForkError(
            f"session {session_id!r} has no finished turn {after_turn!r} "
            "(a fork point must be a turn boundary)"
        )
    return matches[-1]


def fork_stored(
    store: Store,
    session_id: str,
    new_session_id: str | None = None,
    *,
    after_turn: str | None = None,
) -> tuple[str, int]:
    """:meth:`SessionLog.fork` of a stored session, read in one pass and not kept (the
    CLI's ``fork``: a log would hold the parent's events, then the child's); returns
    the child's id and how many events it got."""
    if store.latest_seq(session_id) < 0:
        raise SessionNotFoundError(session_id)
    upto = fork_point(session_id, turn_boundaries(store.read(session_id)), after_turn)
    return _fork_at(store, session_id, new_session_id, upto), upto + 1


def _fork_at(store: Store, session_id: str, new_session_id: str | None, upto: int) -> str:
    """Have the store copy ``session_id`` up to seq ``upto`` into a new session."""
    child_id = new_session_id or new_session_id_for_fork(session_id)
    existing = store.latest_seq(child_id) + 1
    if existing:
        raise ForkError(
            f"cannot fork {session_id!r} into {child_id!r}: that session already "
            f"exists ({existing} events); name a new session"
        )
    store.fork(session_id, child_id, upto_seq=upto)
    return child_id


def close_last(open_items: list[_T], item: _T) -> _T:
    """Close what an end of ``item`` ends and return what it closed: the last open
    ``item``, else (an end without a name, or with one that matches none) the last open
    item, else none (``item`` itself). The one rule of turn and step ends: repair
    (:func:`universal_event.repair.find_open_work`) counts with it, and a turn it counts
    closed is a fork point here."""
    for index in range(len(open_items) - 1, -1, -1):
        if open_items[index] == item:
            del open_items[index]
            return item
    return open_items.pop() if open_items else item


def new_session_id_for_fork(parent_id: str) -> str:
    """A child session id that shows its parent."""
    return f"{parent_id}.fork-{uuid.uuid4().hex[:8]}"
