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
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import TypeGuard, assert_never

from universal_event.errors import SurfaceError
from universal_event.events import (
    AssistantMessageEvent,
    EventBase,
    SurfaceEvent,
    ToolResultEvent,
    UserMessageEvent,
)
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage

__all__ = ["SurfaceView", "derive_messages", "is_surface_event", "message_of"]

_SURFACE_CLASSES = (UserMessageEvent, AssistantMessageEvent, ToolResultEvent)


def is_surface_event(event: EventBase) -> TypeGuard[SurfaceEvent]:
    """True for the three event types that may reach the model."""
    return isinstance(event, _SURFACE_CLASSES)


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


class SurfaceView:
    """The surface and its derived messages, updated one event at a time."""

    __slots__ = ("_derive", "_key_of", "_keys", "_messages", "_seqs", "generation")

    def __init__(self, *, derive: bool = True) -> None:
        self._derive = derive
        """False: track which seqs are on the surface only (no messages), to check
        intents cheaply (the server's writers)."""
        self._keys: list[int] = []
        """Sort key of each surface node, strictly increasing."""
        self._seqs: list[int] = []
        """Seq of each surface node."""
        self._messages: list[Message] = []
        """The derived message of each surface node."""
        self._key_of: dict[int, int] = {}
        """Seq → sort key, for the nodes on the surface only."""
        self.generation = 0
        """Bumped by every replace."""

    def __len__(self) -> int:
        return len(self._seqs)

    def __contains__(self, seq: object) -> bool:
        return seq in self._key_of

    def seqs(self) -> list[int]:
        """The seqs of the surface nodes, in surface order."""
        return list(self._seqs)

    def messages(self) -> list[Message]:
        """The derived messages, in surface order (a new list; the messages are frozen)."""
        return list(self._messages)

    def check(self, event: SurfaceEvent) -> None:
        """Raise :class:`SurfaceError` unless ``event``'s intent can be applied now."""
        surface = event.surface
        if surface is not None and surface.op == "replace":
            self._range(surface.start, surface.end, event.seq)

    def apply(self, event: SurfaceEvent) -> None:
        """Put ``event`` on the surface as its intent says (``event.seq`` must be set)."""
        surface = event.surface
        op = "append" if surface is None else surface.op
        if op == "append":
            self._keys.append(event.seq)
            self._seqs.append(event.seq)
            if self._derive:
                self._messages.append(message_of(event))
            self._key_of[event.seq] = event.seq
        elif op == "replace":
            assert surface is not None
            first, last = self._range(surface.start, surface.end, event.seq)
            key = self._keys[first]
            for replaced in self._seqs[first : last + 1]:
                del self._key_of[replaced]
            self._keys[first : last + 1] = [key]
            self._seqs[first : last + 1] = [event.seq]
            if self._derive:
                self._messages[first : last + 1] = [message_of(event)]
            self._key_of[event.seq] = key
            self.generation += 1
        elif op == "hidden":
            pass
        else:
            assert_never(op)

    def _range(self, start: int | None, end: int | None, seq: int) -> tuple[int, int]:
        """Surface positions of a replace range, or SurfaceError naming what is wrong."""
        if start is None or end is None:
            raise SurfaceError(f"event seq {seq}: a replace needs both start and end seqs")
        start_key = self._key_of.get(start)
        end_key = self._key_of.get(end)
        if start_key is None:
            raise SurfaceError(f"event seq {seq}: replace start seq {start} is not on the surface")
        if end_key is None:
            raise SurfaceError(f"event seq {seq}: replace end seq {end} is not on the surface")
        if end_key < start_key:
            raise SurfaceError(
                f"event seq {seq}: replace range {start}..{end} runs backwards on the surface"
            )
        return bisect_left(self._keys, start_key), bisect_left(self._keys, end_key)


def derive_messages(events: Iterable[EventBase]) -> list[Message]:
    """Derive the neutral messages of a whole event sequence, from scratch."""
    view = SurfaceView()
    for event in events:
        if isinstance(event, _SURFACE_CLASSES):
            view.apply(event)
    return view.messages()
