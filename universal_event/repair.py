"""Repair of a cut-off session: close what was left open, say so in the log.

A session whose process died mid-turn leaves open turns, steps and tool calls behind.
Repair (of a session nobody is writing any more) appends:

* ``step/end`` and ``turn/end`` with status ``interrupted`` for every open step and
  turn, innermost first;
* ``session/interrupted`` listing the open tool calls, each classified as
  ``not-started`` (the model asked for it in an ``assistant/message``, no ``tool/call``
  was logged) or ``running`` (``tool/call`` logged, no ``tool/result``), and the turns
  it closed. The calls are the open ones of the ``tools`` projection: each round of a
  reused call id is its own call, and a surface replacement (a pruned result, a
  rewritten message) stands for the event it replaced;
* ``session/ended-seq`` naming the last seq written before the interruption.

Repair is idempotent: a ``session/interrupted`` settles the tool calls it lists, and
the turns and steps are closed, so a second repair finds nothing open and adds
nothing. Tool calls left without results are *not* given fake results here: renderers
repair orphans for their target (see ``adapters/_render.py``).

A live session (one with a writer in this process, see ``SessionLog(live=True)``, or,
for the stores that can tell, in another process: ``hold_live`` / ``has_live_writer``)
is refused with :class:`LiveSessionError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from universal_event.errors import LiveSessionError
from universal_event.events import (
    Event,
    OpenToolCall,
    SessionEndedSeqEvent,
    SessionInterruptedEvent,
    StepEndEvent,
    StepStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from universal_event.log import SessionLog, close_last
from universal_event.projections import ToolCallSummary, reduce_tools
from universal_event.stores._base import Store

__all__ = ["OpenWork", "find_open_work", "repair", "repair_log"]


@dataclass
class OpenWork:
    """What a session left open, in the order it was opened."""

    turns: list[str | None] = field(default_factory=list)
    """Turn ids of the turns started and not ended."""
    steps: list[tuple[str | None, int | None]] = field(default_factory=list)
    """(turn id, step) of the steps started and not ended."""
    tool_calls: dict[str, OpenToolCall] = field(default_factory=dict)
    """Call id → the open call, classified."""

    def __bool__(self) -> bool:
        return bool(self.turns or self.steps or self.tool_calls)


def find_open_work(events: Iterable[Event]) -> OpenWork:
    """Walk a session's events and collect the turns, steps and tool calls still open.

    Tool calls are those of the ``tools`` projection
    (:class:`~universal_event.projections.ToolCallSummary`), so the two always agree:
    calls are counted per id, not just marked, a result settling one call of its id (a
    call logged after its own result stays settled, while a provider that numbers calls
    per response, ``functions.search:0`` every round, reopens the id); a surface
    replacement (a pruned result's shorter result, a message rewritten with the same
    tool calls) stands for the event it replaced, not a new round; a
    ``session/interrupted`` (an earlier repair) settles the calls open then.
    """
    work = OpenWork()
    tools = ToolCallSummary()
    for event in events:
        tools = reduce_tools(tools, event)
        if isinstance(event, TurnStartEvent):
            work.turns.append(event.turn_id)
        elif isinstance(event, TurnEndEvent):
            turn_id = event.turn_id
            close_last(work.turns, turn_id)
            work.steps = [s for s in work.steps if s[0] != turn_id]
        elif isinstance(event, StepStartEvent):
            work.steps.append((event.turn_id, event.step))
        elif isinstance(event, StepEndEvent):
            key = (event.turn_id, event.step)
            close_last(work.steps, key)
    for record in tools.open_calls:
        known = work.tool_calls.get(record.call_id)
        if known is not None and (known.state == "running" or record.state != "running"):
            continue  # another open round of the id (a running one says more)
        work.tool_calls[record.call_id] = OpenToolCall(
            call_id=record.call_id,
            name=record.name if record.name is not None or known is None else known.name,
            state="running" if record.state == "running" else "not-started",
        )
    return work


def repair_log(log: SessionLog, *, reason: str | None = None) -> list[Event]:
    """Repair a loaded, non-live session log; returns the events appended (maybe none)."""
    if log.live:
        raise LiveSessionError(
            f"session {log.session_id!r} is live (its writer is this log); repair only "
            "sessions nobody is writing"
        )
    _refuse_if_written(log.store, log.session_id)
    work = find_open_work(log.events())
    if not work:
        return []
    last_seq = log.next_seq - 1
    appended: list[Event] = []
    for turn_id, step in reversed(work.steps):
        appended.append(log.append(StepEndEvent(turn_id=turn_id, step=step, status="interrupted")))
    for turn_id in reversed(work.turns):
        appended.append(log.append(TurnEndEvent(turn_id=turn_id, status="interrupted")))
    appended.append(
        log.append(
            SessionInterruptedEvent(
                open_tool_calls=list(work.tool_calls.values()),
                closed_turns=[t for t in work.turns if t is not None],
                reason=reason or "session cut off; repaired",
            )
        )
    )
    appended.append(log.append(SessionEndedSeqEvent(last_seq=last_seq)))
    log.checkpoint()
    return appended


def repair(store: Store, session_id: str, *, reason: str | None = None) -> list[Event]:
    """Load ``session_id`` from ``store`` and repair it; refuses a live session."""
    _refuse_if_written(store, session_id)
    return repair_log(SessionLog.open(store, session_id, live=False), reason=reason)


def _refuse_if_written(store: Store, session_id: str) -> None:
    """LiveSessionError when a live log writes the session: in this process, or (for a
    store that can tell) in another one. A repair under a writer would make its next
    checkpoint fail, and what it had not stored would be lost."""
    if SessionLog.live_writer(store, session_id) is not None:
        raise LiveSessionError(
            f"session {session_id!r} has a live writer in this process; refusing to repair"
        )
    has_live_writer = getattr(store, "has_live_writer", None)
    if has_live_writer is not None and _still_written(has_live_writer, session_id):
        raise LiveSessionError(
            f"session {session_id!r} is being written by another process (a run still "
            "going); refusing to repair: what it has not checkpointed yet would be lost"
        )


def _still_written(has_live_writer: Callable[[str], bool], session_id: str) -> bool:
    """Whether another process holds the session's live lock, and still does a second
    later: a writer that just died may not have let go yet (PostgreSQL drops its lock
    when the server notices the connection closed)."""
    deadline = time.monotonic() + _GRACE_SECONDS
    while has_live_writer(session_id):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.05)
    return False


_GRACE_SECONDS = 1.0
