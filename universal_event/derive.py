"""Surface → neutral messages, incrementally.

The *surface* is the ordered list of surface events (``user/message``,
``assistant/message``, ``tool/result``) the model currently sees. An event enters it
by its :class:`~universal_event.events.Surface` intent:

* ``append`` (or no intent): at the end;
* ``replace(start, end)``: the nodes from seq ``start`` to seq ``end`` (inclusive, both
  on the surface, ``start`` not after ``end``) are swapped for this one event; the
  replaced events stay in the log, only the surface forgets them;
* ``hidden``: logged, never shown.

:class:`SurfaceView` keeps the surface and the derived messages side by side, so an
append derives one message and a replace derives only the event that replaced the
range. Positions are found by *sort keys*: a node's key is its own seq, or, for a
replacement, the key of the first node it replaced. Keys therefore stay strictly
increasing along the surface and a range is found by bisection, never by a walk.

:func:`derive_messages` is the from-scratch form: one view fed every event. Because the
session log feeds its view the very same events in the very same order (live or while
loading), deriving after a reload equals deriving live.

A surface event written by a newer producer may hold a part type this version does not
know; the codec keeps it whole as ``native/unknown`` (see :func:`is_recovered_surface`).
It keeps its place on the surface all the same, with the intent it was written with:
later replaces (a compression) name its seq, and a reader that dropped it would refuse
the whole session. What it derives is :func:`recovered_message`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import Any, TypeGuard, TypeVar, assert_never, cast, get_args

import msgspec

from universal_event.errors import SurfaceError
from universal_event.events import (
    EVENT_TYPES,
    SURFACE_EVENT_TYPES,
    AssistantMessageEvent,
    EventBase,
    NativeUnknownEvent,
    Surface,
    SurfaceEvent,
    ToolResultEvent,
    UserMessageEvent,
)
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import Part

__all__ = [
    "SurfaceView",
    "derive_messages",
    "is_recovered_surface",
    "is_surface_event",
    "message_of",
    "recovered_message",
    "rename_surface_ids",
    "resolve_surface_ids",
]

_SURFACE_CLASSES = (UserMessageEvent, AssistantMessageEvent, ToolResultEvent)

EventT = TypeVar("EventT", bound=EventBase)

_PART_TAGS = frozenset(str(kind.__struct_config__.tag) for kind in get_args(Part))


def is_surface_event(event: EventBase) -> TypeGuard[SurfaceEvent]:
    """True for the three event types that may reach the model."""
    return isinstance(event, _SURFACE_CLASSES)


def resolve_surface_ids(
    surface: Surface | None, seq_of: Callable[[str], int | None], event_id: str
) -> Surface | None:
    """``surface`` with a replace range named by event ids (``start_id``/``end_id``)
    named by their seqs, which ``seq_of`` gives (None: no such event logged); any other
    intent as it is. SurfaceError naming the event ``event_id`` when an id is not
    logged, or the range is named both ways or half."""
    if surface is None or not surface.by_ids:
        return surface
    if surface.op != "replace" or surface.start is not None or surface.end is not None:
        raise SurfaceError(
            f"event {event_id!r}: start_id/end_id name a replace's range, instead of "
            f"start/end seqs (got op {surface.op!r}, start {surface.start!r}, "
            f"end {surface.end!r})"
        )
    bounds = []
    for name, ref in (("start_id", surface.start_id), ("end_id", surface.end_id)):
        seq = None if ref is None else seq_of(ref)
        if seq is None:
            raise SurfaceError(f"event {event_id!r}: replace {name} {ref!r} is not logged")
        bounds.append(seq)
    return Surface(op="replace", start=bounds[0], end=bounds[1])


def rename_surface_ids(event: EventT, renamed: dict[str, str]) -> EventT:
    """``event`` with the event ids naming its replace's range (``start_id``/``end_id``)
    renamed as ``renamed`` says: a producer that gives the events of an adapter other
    ids (an import, the server's native ingest) renames what they refer to as well."""
    surface = getattr(event, "surface", None)
    if surface is None or not surface.by_ids:
        return event
    start_id, end_id = (
        renamed.get(ref, ref) if ref is not None else None
        for ref in (surface.start_id, surface.end_id)
    )
    surface = msgspec.structs.replace(surface, start_id=start_id, end_id=end_id)
    return msgspec.structs.replace(event, surface=surface)


def message_of(event: SurfaceEvent) -> Message:
    """The neutral message one surface event becomes (content lists are shared, not copied)."""
    if isinstance(event, UserMessageEvent):
        return UserMessage(
            seq=event.seq, content=event.content, instruction_role=event.instruction_role
        )
    if isinstance(event, AssistantMessageEvent):
        return AssistantMessage(
            seq=event.seq,
            content=event.content,
            provenance=event.provenance,
            message_id=event.message_id,
            stop_reason=event.stop_reason,
            status=event.status,
        )
    if isinstance(event, ToolResultEvent):
        return ToolMessage(
            seq=event.seq,
            call_id=event.call_id,
            content=event.content,
            name=event.name,
            is_error=event.is_error,
            cache_control=event.cache_control,
        )
    assert_never(event)


def is_recovered_surface(event: EventBase) -> TypeGuard[NativeUnknownEvent]:
    """True for a surface event the codec kept as ``native/unknown`` because it holds a
    part type this version does not know (``runtime`` ``universal-event``,
    ``native_type`` the surface type, ``payload`` the event as written)."""
    return (
        isinstance(event, NativeUnknownEvent)
        and event.runtime == "universal-event"
        and event.native_type in SURFACE_EVENT_TYPES
        and isinstance(event.payload, dict)
    )


def _recovered_intent(event: NativeUnknownEvent) -> Surface | None:
    """The surface intent a recovered surface event was written with (its payload's
    ``surface``); SurfaceError naming the event when it is not one."""
    raw = cast(dict[str, Any], event.payload).get("surface")
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, Surface)
    except msgspec.ValidationError as exc:
        raise SurfaceError(
            f"event seq {event.seq} ({event.native_type} kept as native/unknown): its "
            f"surface intent is not one: {exc}"
        ) from None


def recovered_message(event: NativeUnknownEvent) -> Message | None:
    """The message a recovered surface event derives: its parts this version knows, the
    others left out; None (no message, the node keeps its place) when none is left or
    the rest is no valid event either.

    Known parts rather than nothing: they are what the model saw, and what the events
    after it build on (a tool call whose result follows, the question an answer
    answers); dropping the whole message would orphan those and lose the context, while
    leaving out a part only loses what this version could not render anyway.
    """
    payload = cast(dict[str, Any], event.payload)
    content = payload.get("content")
    if not isinstance(content, list):
        return None
    known = [part for part in content if isinstance(part, dict) and part.get("type") in _PART_TAGS]
    if not known:
        return None
    kind = EVENT_TYPES[cast(str, event.native_type)]
    fields = {**payload, "content": known, "surface": None, "seq": event.seq}
    try:
        rebuilt = msgspec.convert(fields, kind)
    except msgspec.ValidationError:
        return None  # damaged beyond its unknown parts: nothing this version can render
    return message_of(cast(SurfaceEvent, rebuilt))


class _SurfaceOrder:
    """The order of the surface nodes: each node's seq and sort key, strictly increasing
    along the surface, so a range is found by bisection. The core of
    :class:`SurfaceView`, and of the projections that follow the surface."""

    __slots__ = ("key_of", "keys", "seqs")

    def __init__(self) -> None:
        self.keys: list[int] = []
        """Sort key of each surface node, strictly increasing."""
        self.seqs: list[int] = []
        """Seq of each surface node."""
        self.key_of: dict[int, int] = {}
        """Seq → sort key, for the nodes on the surface only."""

    def append(self, seq: int) -> None:
        """Put the node ``seq`` at the end of the surface."""
        self.keys.append(seq)
        self.seqs.append(seq)
        self.key_of[seq] = seq

    def splice(self, seq: int, first: int, last: int) -> list[int]:
        """Swap the nodes at positions ``first`` to ``last`` (inclusive) for the node
        ``seq``, which takes the sort key of the first; the seqs it replaced."""
        key = self.keys[first]
        replaced = self.seqs[first : last + 1]
        for old in replaced:
            self.key_of.pop(old, None)
        self.keys[first : last + 1] = [key]
        self.seqs[first : last + 1] = [seq]
        self.key_of[seq] = key
        return replaced

    def range(self, start: int | None, end: int | None, seq: int) -> tuple[int, int]:
        """Surface positions of a replace range, or SurfaceError naming what is wrong (a
        bound of the wrong type first: a seq given as ``"0"`` is on no surface, and
        saying so would hide the real mistake)."""
        if start is None or end is None:
            raise SurfaceError(f"event seq {seq}: a replace needs both start and end seqs")
        for name, bound in (("start", start), ("end", end)):
            if isinstance(bound, bool) or not isinstance(bound, int):
                raise SurfaceError(
                    f"event seq {seq}: replace {name} must be an int seq, got "
                    f"{type(bound).__name__} {bound!r}"
                )
        start_key = self.key_of.get(start)
        end_key = self.key_of.get(end)
        if start_key is None:
            raise SurfaceError(f"event seq {seq}: replace start seq {start} is not on the surface")
        if end_key is None:
            raise SurfaceError(f"event seq {seq}: replace end seq {end} is not on the surface")
        if end_key < start_key:
            raise SurfaceError(
                f"event seq {seq}: replace range {start}..{end} runs backwards on the surface"
            )
        return bisect_left(self.keys, start_key), bisect_left(self.keys, end_key)


class SurfaceView:
    """The surface and its derived messages, updated one event at a time."""

    __slots__ = ("_blank", "_derive", "_messages", "_order", "generation")

    def __init__(self, *, derive: bool = True) -> None:
        self._derive = derive
        """False: track which seqs are on the surface only (no messages), to check
        intents cheaply (the server's writers)."""
        self._order = _SurfaceOrder()
        """The surface nodes' seqs and sort keys."""
        self._messages: list[Message | None] = []
        """The derived message of each surface node (None: a recovered event with
        nothing this version can render, see :func:`recovered_message`)."""
        self._blank: set[int] = set()
        """Seqs of the surface nodes whose message is None (almost always none)."""
        self.generation = 0
        """Bumped by every replace."""

    def __len__(self) -> int:
        return len(self._order.seqs)

    def copy(self) -> SurfaceView:
        """A copy to try intents on (what a batch of events would do), leaving this
        view as it is."""
        twin = SurfaceView(derive=self._derive)
        order = twin._order
        order.keys, order.seqs = list(self._order.keys), list(self._order.seqs)
        order.key_of = dict(self._order.key_of)
        twin._messages = list(self._messages)
        twin._blank = set(self._blank)
        twin.generation = self.generation
        return twin

    def __contains__(self, seq: object) -> bool:
        return seq in self._order.key_of

    def seqs(self) -> list[int]:
        """The seqs of the surface nodes, in surface order (blank nodes included)."""
        return list(self._order.seqs)

    def messages(self) -> list[Message]:
        """The derived messages, in surface order (a new list; the messages are frozen)."""
        if self._blank:
            return [message for message in self._messages if message is not None]
        return cast(list[Message], list(self._messages))  # no None without blank nodes

    def check(self, event: SurfaceEvent) -> None:
        """Raise :class:`SurfaceError` unless ``event``'s intent can be applied now."""
        self._check_intent(event.surface, event.seq)

    def check_recovered(self, event: NativeUnknownEvent) -> None:
        """:meth:`check` for a recovered surface event (anything else passes)."""
        if is_recovered_surface(event):
            self._check_intent(_recovered_intent(event), event.seq)

    def _check_intent(self, surface: Surface | None, seq: int) -> None:
        if surface is None:
            return
        if surface.op == "replace":
            self._order.range(surface.start, surface.end, seq)
        elif surface.start is not None or surface.end is not None:
            # a range given with an intent that takes none: a replace meant, most likely
            raise SurfaceError(
                f"event seq {seq}: {surface.op!r} takes no range (got start "
                f"{surface.start!r}, end {surface.end!r}); a range is a replace's"
            )

    def apply(self, event: SurfaceEvent) -> None:
        """Put ``event`` on the surface as its intent says (``event.seq`` must be set)."""
        surface = event.surface
        if surface is None:  # the common case, inline: a full derive is benchmarked
            seq = event.seq
            order = self._order
            order.keys.append(seq)
            order.seqs.append(seq)
            order.key_of[seq] = seq
            if self._derive:
                self._messages.append(message_of(event))
        elif surface.op != "hidden":
            self._place(event.seq, surface, message_of(event) if self._derive else None)

    def apply_recovered(self, event: NativeUnknownEvent) -> None:
        """:meth:`apply` for a recovered surface event: its place as its payload's intent
        says, its message :func:`recovered_message` (other native/unknown events are
        not on the surface and are ignored)."""
        if not is_recovered_surface(event):
            return
        surface = _recovered_intent(event)
        if surface is not None and surface.op == "hidden":
            return
        self._place(event.seq, surface, recovered_message(event) if self._derive else None)

    def _place(self, seq: int, surface: Surface | None, message: Message | None) -> None:
        """Append the node ``seq``, or swap it for the range its replace names."""
        if surface is None or surface.op == "append":
            self._order.append(seq)
            if self._derive:
                self._messages.append(message)
                if message is None:
                    self._blank.add(seq)
        elif surface.op == "replace":
            first, last = self._order.range(surface.start, surface.end, seq)
            for replaced in self._order.splice(seq, first, last):
                self._blank.discard(replaced)
            if self._derive:
                self._messages[first : last + 1] = [message]
                if message is None:
                    self._blank.add(seq)
            self.generation += 1
        else:
            raise AssertionError(f"unexpected surface op {surface.op!r}")

    def _range(self, start: int | None, end: int | None, seq: int) -> tuple[int, int]:
        """Surface positions of a replace range, or SurfaceError (see
        :meth:`_SurfaceOrder.range`); the log validates a compression with it."""
        return self._order.range(start, end, seq)


def derive_messages(events: Iterable[EventBase]) -> list[Message]:
    """Derive the neutral messages of a whole event sequence, from scratch."""
    view = SurfaceView()
    for event in events:
        if isinstance(event, _SURFACE_CLASSES):
            view.apply(event)
        elif type(event) is NativeUnknownEvent:  # cheaper than isinstance (benchmarked)
            view.apply_recovered(event)
    return view.messages()
