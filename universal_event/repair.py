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

Before that, the assistant message a writer was cut inside is logged, ``partial``
(:func:`unlogged_message`): an adapter logs a message once it is whole, but its
``assistant/chunk`` and ``tool/call`` events as they come, and the tap checkpoints a
``tool/call`` before the tool runs. A process killed while the tool ran (Claude Code
runs it after the message's last block; a Codex response is over once its commands
ran) left the chunks and the call, not the message: without it the history would lack
what the model said and the call it made (a command with side effects ran), and the
next runtime would not know of it. Rebuilt from what was logged, the call is then an
orphan the renderers answer (an "interrupted" result).

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from universal_event.errors import LiveSessionError
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    Event,
    OpenToolCall,
    RequestHeaderEvent,
    SessionEndedSeqEvent,
    SessionInterruptedEvent,
    Source,
    StepEndEvent,
    StepStartEvent,
    ToolCallEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from universal_event.log import SessionLog, close_last
from universal_event.parts import (
    AssistantPart,
    Provenance,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from universal_event.projections import ToolCallSummary, reduce_tools
from universal_event.stores._base import Store

__all__ = ["OpenWork", "find_open_work", "repair", "repair_log", "unlogged_message"]


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


def unlogged_message(
    events: Sequence[Event], turn_id: str | None, header: RequestHeaderEvent | None = None
) -> AssistantMessageEvent | None:
    """The assistant message a cut-off writer streamed in turn ``turn_id`` but did not
    log: after the turn's last ``assistant/message``, its text and thinking chunks, and
    the calls ``tool/call`` started that no logged message holds. ``partial``,
    ``stop_reason="interrupted"``, its provenance the settings in force (``header``, the
    log's :meth:`~universal_event.log.SessionLog.current_header`), as the adapter would
    have said; None when nothing was streamed after it."""
    in_turn = [e for e in events if e.turn_id == turn_id]
    last = max(
        (i for i, e in enumerate(in_turn) if isinstance(e, AssistantMessageEvent)), default=-1
    )
    asked = {
        part.id
        for e in events
        if isinstance(e, AssistantMessageEvent)
        for part in e.content
        if isinstance(part, ToolCallPart)
    }
    texts: dict[tuple[str | None, str, int], list[str]] = {}
    calls: dict[str, ToolCallEvent] = {}
    for event in in_turn[last + 1 :]:
        if isinstance(event, AssistantChunkEvent) and event.kind in _STREAMED_PARTS:
            texts.setdefault((event.message_id, event.kind, event.index), []).append(event.delta)
        elif isinstance(event, ToolCallEvent) and event.call_id not in asked:
            calls.setdefault(event.call_id, event)
    provenance = None
    if header is not None and header.provider and header.api:
        provenance = Provenance(provider=header.provider, api=header.api, model=header.model)
    content: list[AssistantPart] = []
    summaries: dict[str | None, list[str]] = {}
    for (message_id, kind, _), deltas in texts.items():
        text = "".join(deltas)
        if kind == "text":
            content.append(TextPart(text=text))
        elif kind == "thinking":
            content.append(ThinkingPart(text=text, provenance=provenance))
        elif message_id not in summaries:  # summary: one reasoning part per item
            summaries[message_id] = [text]
            content.append(ThinkingPart(summary=summaries[message_id], provenance=provenance))
        else:
            summaries[message_id].append(text)
    content.extend(
        ToolCallPart(
            id=call.call_id, name=call.name, arguments=call.arguments, provenance=provenance
        )
        for call in calls.values()
    )
    if not content:
        return None
    streamed = [
        e for e in in_turn[last + 1 :] if isinstance(e, AssistantChunkEvent | ToolCallEvent)
    ]
    message_ids = {key[0] for key in texts} - {None}
    message_id = message_ids.pop() if len(message_ids) == 1 else None
    runtime = next((e.source.runtime for e in streamed if e.source is not None), "unknown")
    return AssistantMessageEvent(
        turn_id=turn_id,
        step=streamed[-1].step,
        content=content,
        message_id=message_id,
        provenance=provenance,
        status="partial",
        stop_reason="interrupted",
        # the provider's message id, as an adapter names its message (a runtime's own
        # record of the session can then tell whether it holds this message)
        source=Source(runtime=runtime, native_type="repair", native_id=message_id),
    )


_STREAMED_PARTS = ("text", "thinking", "summary")
"""The chunk kinds a message is rebuilt from (a call's arguments come whole, with its
``tool/call``; a signature alone is no part)."""


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
    for turn_id in work.turns:
        message = unlogged_message(log.events(), turn_id, log.current_header())
        if message is not None:
            appended.append(log.append(message))
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
