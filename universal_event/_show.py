"""A readable table of a session: turns, steps, messages and tool calls (``show``)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    FileChangeEvent,
    NativeUnknownEvent,
    PlanUpdateEvent,
    RequestHeaderEvent,
    RuntimeSwitchEvent,
    SessionEndedSeqEvent,
    SessionInterruptedEvent,
    SessionStartEvent,
    StepEndEvent,
    Surface,
    ToolCallEvent,
    ToolOutputEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UsageEvent,
    UserMessageEvent,
    WarningEvent,
)
from universal_event.parts import (
    DocumentPart,
    ImagePart,
    Part,
    RefusalPart,
    ServerToolCallPart,
    ServerToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from universal_event.stores._base import SessionInfo

__all__ = ["session_table", "sessions_table"]

_WIDTH = 72
_STREAMED = (AssistantChunkEvent, ToolOutputEvent)


def _clip(text: str, width: int = _WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _part_text(part: Part) -> str:
    if isinstance(part, TextPart | RefusalPart):
        return repr(_clip(part.text, 40))
    if isinstance(part, ThinkingPart):
        return f"[thinking {len(part.text)} chars]"
    if isinstance(part, ToolCallPart):
        return f"call {part.name}({part.id})"
    if isinstance(part, ServerToolCallPart):
        return f"server {part.name}({part.id})"
    if isinstance(part, ServerToolResultPart):
        return f"server result {part.kind}"
    if isinstance(part, ImagePart):
        return "[image]"
    if isinstance(part, DocumentPart):
        return "[document]"
    return type(part).__name__


def _parts(parts: Iterable[Part]) -> str:
    return _clip(" ".join(_part_text(p) for p in parts))


def _detail(event: Event) -> str:
    """One line saying what an event is about (empty for the self-explanatory ones)."""
    if isinstance(event, UserMessageEvent | AssistantMessageEvent):
        text = _parts(event.content)
        if isinstance(event, AssistantMessageEvent) and event.status == "partial":
            text = f"(partial) {text}"
        return _surface_mark(event.surface) + text
    if isinstance(event, ToolCallEvent):
        return f"{event.name} ({event.call_id})"
    if isinstance(event, ToolResultEvent):
        flag = "error " if event.is_error else ""
        text = f"{flag}{event.name or ''} ({event.call_id}) {_parts(event.content)}"
        return _clip(_surface_mark(event.surface) + text)
    if isinstance(event, TurnEndEvent | StepEndEvent):
        extra = f" {event.stop_reason}" if event.stop_reason else ""
        if isinstance(event, TurnEndEvent) and event.usage is not None:
            extra += f" in={event.usage.input_tokens} out={event.usage.output_tokens}"
        return f"{event.status}{extra}"
    if isinstance(event, UsageEvent):
        return f"in={event.usage.input_tokens} out={event.usage.output_tokens}"
    if isinstance(event, RequestHeaderEvent):
        return _clip(f"{event.provider or ''}/{event.api or ''} {event.model or ''}")
    if isinstance(event, SessionStartEvent):
        return _clip(f"{event.runtime or ''} {event.model or ''} {event.cwd or ''}")
    if isinstance(event, ErrorEvent):
        return _clip(f"{event.code or ''} {event.message}")
    if isinstance(event, PlanUpdateEvent):
        return _clip(", ".join(f"{i.status}:{i.text}" for i in event.items))
    if isinstance(event, FileChangeEvent):
        return _clip(", ".join(f"{c.kind} {c.path}" for c in event.changes))
    if isinstance(event, SessionInterruptedEvent):
        calls = ", ".join(f"{c.call_id} {c.state}" for c in event.open_tool_calls)
        return _clip(f"open calls: {calls or 'none'}")
    if isinstance(event, SessionEndedSeqEvent):
        return f"last seq {event.last_seq}"
    if isinstance(event, WarningEvent):
        return _clip(f"[{event.code}] {event.message}")
    if isinstance(event, RuntimeSwitchEvent):
        return f"{event.from_runtime or '?'} → {event.to_runtime}"
    if isinstance(event, NativeUnknownEvent):
        return _clip(f"{event.runtime} {event.native_type or ''} {event.reason or ''}")
    return ""


def _surface_mark(surface: Surface | None) -> str:
    """How an event changes the surface, when it does more than append to it."""
    if surface is None or surface.op == "append":
        return ""
    if surface.op == "hidden":
        return "[hidden] "
    return f"[{surface.op} {surface.start}..{surface.end}] "


def _row(seq: str, turn: str, step: str, kind: str, detail: str) -> str:
    return f"{seq:>9}  {turn:<5}  {step:>4}  {kind:<20}  {_printable(detail)}".rstrip()


def _printable(text: str) -> str:
    """``text`` with its control characters escaped (``\\x1b``): native data (a type, an
    error message, a tool's output) shown raw could move the cursor or clear the screen."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def session_table(session_id: str, events: Iterable[Event]) -> list[str]:
    """The lines of ``show``: one row per event, runs of streamed chunks folded into one."""
    rows: list[str] = []
    turn_numbers: dict[str | None, str] = {}
    requested = 0
    ran: set[str] = (
        set()
    )  # call ids with a tool/call or a tool/result: Claude Code logs no tool/call
    count = 0
    run: list[Event] = []

    def turn_of(event: Event) -> str:
        """Turns are numbered in order of first appearance (native ids are long)."""
        if event.turn_id is None:
            return ""
        return turn_numbers.setdefault(event.turn_id, f"#{len(turn_numbers) + 1}")

    def flush_run() -> None:
        if run:
            first, last = run[0], run[-1]
            kind = "assistant/chunk" if isinstance(first, AssistantChunkEvent) else "tool/output"
            seqs = f"{first.seq}" if first is last else f"{first.seq}-{last.seq}"
            rows.append(_row(seqs, turn_of(first), _step(first), kind, f"{len(run)} streamed"))
            run.clear()

    for event in events:
        count += 1
        if isinstance(event, _STREAMED):
            if run and type(run[-1]) is not type(event):
                flush_run()
            run.append(event)
            continue
        flush_run()
        if isinstance(event, ToolCallEvent | ToolResultEvent):
            ran.add(event.call_id)
        if isinstance(event, AssistantMessageEvent):
            requested += sum(isinstance(p, ToolCallPart) for p in event.content)
        tag = type(event).__struct_config__.tag
        assert isinstance(tag, str)
        detail = _detail(event)
        if isinstance(event, TurnStartEvent) and event.turn_id:
            detail = f"id {event.turn_id}"
        rows.append(_row(str(event.seq), turn_of(event), _step(event), tag, detail))
    flush_run()
    header = [
        f"session {session_id}: {count} events, {len(turn_numbers)} turns, "
        f"{requested} tool calls requested, {len(ran)} run",
        _row("seq", "turn", "step", "event", "detail"),
    ]
    return header + rows


def _step(event: Event) -> str:
    return "" if event.step is None else str(event.step)


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def _shown(session_id: str) -> str:
    """A session id as a terminal can show it: one with control characters (which
    would move the cursor, clear the screen) quoted with them escaped."""
    return session_id if session_id.isprintable() else repr(session_id)


def sessions_table(sessions: Iterable[SessionInfo]) -> list[str]:
    """The lines of ``sessions``: id, runtime, event count, last activity, fork parent."""
    lines = [f"{'session':<40}  {'runtime':<22}  {'events':>7}  {'last activity':<19}  forked from"]
    for info in sessions:
        parent = f"{_shown(info.parent_id)}@{info.fork_seq}" if info.parent_id else ""
        lines.append(
            f"{_shown(info.session_id):<40}  {info.runtime or '-':<22}  {info.event_count:>7}  "
            f"{_when(info.last_activity):<19}  {parent}".rstrip()
        )
    return lines
