"""Projections: reducers folded over a session's event stream.

A projection is ``reducer(state, event) -> state`` plus an initial state. Registered on
a :class:`~universal_event.log.SessionLog` (``log.projections.register(...)``), it first
catches up on the events already logged, then sees each appended event once: the state
is kept up to date incrementally and never recomputed from the start. Projections
only read: they are given events, never the log, so they cannot write to it.

Built-ins (``log.projection("usage")`` registers one on first use):

* ``usage``: token totals, per request (``usage`` events) and per turn (``turn/end``);
* ``tools``: every tool call with its state (requested, running, completed, failed);
* ``plan``: the current plan / todo list (each ``plan/update`` replaces it whole);
* ``files``: the files changed, with the last kind of change and the calls that made it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from universal_event.errors import ProjectionError
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    EventBase,
    FileChangeEvent,
    PlanItem,
    PlanUpdateEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    Usage,
    UsageEvent,
)
from universal_event.parts import ToolCallPart

__all__ = [
    "BUILTIN_PROJECTIONS",
    "FileRecord",
    "FilesChanged",
    "PlanState",
    "Projections",
    "Reducer",
    "ToolCallRecord",
    "ToolCallSummary",
    "UsageTotals",
    "project",
    "reduce_files",
    "reduce_plan",
    "reduce_tools",
    "reduce_usage",
]

Reducer = Callable[[Any, Event], Any]
"""``reducer(state, event) -> new state`` (it may update ``state`` in place and return it)."""


# ---------------------------------------------------------------- usage


@dataclass
class UsageTotals:
    """Token usage summed over a session.

    ``requests`` sums the per-request ``usage`` events; ``turns`` sums ``turn/end``
    usage (runtimes like Claude Code report only per turn). They overlap when a
    runtime reports both, so they are kept apart; :attr:`total` takes each turn once:
    its requests where it has them, else its ``turn/end`` figures (a session handed
    from Claude Code to Codex has turns of both kinds). ``cost_usd`` is counted the
    same way.
    """

    requests: Usage = field(default_factory=Usage)
    request_count: int = 0
    turns: Usage = field(default_factory=Usage)
    turn_count: int = 0
    cost_usd: float = 0.0
    total: Usage = field(default_factory=Usage)
    """Each turn once: its per-request usage, or its ``turn/end`` usage without any."""
    turns_with_requests: set[str | None] = field(default_factory=set)


def reduce_usage(state: UsageTotals, event: Event) -> UsageTotals:
    """Add a ``usage`` event or a ``turn/end``'s usage to the totals."""
    if isinstance(event, UsageEvent):
        state.requests = state.requests + event.usage
        state.request_count += 1
        state.total = state.total + event.usage
        state.cost_usd += event.cost_usd or 0.0
        state.turns_with_requests.add(event.turn_id)
    elif isinstance(event, TurnEndEvent):
        state.turn_count += 1
        if event.usage is not None:
            state.turns = state.turns + event.usage
        if event.turn_id not in state.turns_with_requests:
            if event.usage is not None:
                state.total = state.total + event.usage
            state.cost_usd += event.cost_usd or 0.0
    return state


# ---------------------------------------------------------------- tools

ToolCallState = Literal["requested", "running", "completed", "failed"]


@dataclass
class ToolCallRecord:
    """One tool call and how far it got."""

    call_id: str
    name: str | None
    state: ToolCallState
    requested_seq: int | None = None
    started_seq: int | None = None
    result_seq: int | None = None


@dataclass
class ToolCallSummary:
    """Every tool call of a session (in call order) and the counts per tool name."""

    calls: dict[str, ToolCallRecord] = field(default_factory=dict)
    by_name: Counter[str] = field(default_factory=Counter)

    @property
    def open_calls(self) -> list[ToolCallRecord]:
        """Calls without a result yet."""
        return [c for c in self.calls.values() if c.state in ("requested", "running")]


def _tool_record(state: ToolCallSummary, call_id: str, name: str | None) -> ToolCallRecord:
    record = state.calls.get(call_id)
    if record is None:
        record = ToolCallRecord(call_id=call_id, name=name, state="requested")
        state.calls[call_id] = record
        if name is not None:
            state.by_name[name] += 1
    elif record.name is None and name is not None:
        record.name = name
        state.by_name[name] += 1
    return record


def reduce_tools(state: ToolCallSummary, event: Event) -> ToolCallSummary:
    """Track tool calls from assistant messages, ``tool/call`` and ``tool/result``."""
    if isinstance(event, AssistantMessageEvent):
        for part in event.content:
            if isinstance(part, ToolCallPart):
                record = _tool_record(state, part.id, part.name)
                if record.requested_seq is None:
                    record.requested_seq = event.seq
    elif isinstance(event, ToolCallEvent):
        record = _tool_record(state, event.call_id, event.name)
        record.started_seq = event.seq
        if record.state == "requested":
            record.state = "running"
    elif isinstance(event, ToolResultEvent):
        record = _tool_record(state, event.call_id, event.name)
        if record.result_seq is None:
            record.result_seq = event.seq
            record.state = "failed" if event.is_error else "completed"
    return state


# ---------------------------------------------------------------- plan


@dataclass
class PlanState:
    """The plans of a session by ``plan_id``; each ``plan/update`` replaces its plan whole."""

    plans: dict[str | None, list[PlanItem]] = field(default_factory=dict)
    latest: str | None = None
    """The plan id of the last update."""
    updates: int = 0

    @property
    def items(self) -> list[PlanItem]:
        """The most recently updated plan."""
        return self.plans.get(self.latest, [])


def reduce_plan(state: PlanState, event: Event) -> PlanState:
    """Keep the latest items of each plan."""
    if isinstance(event, PlanUpdateEvent):
        state.plans[event.plan_id] = list(event.items)
        state.latest = event.plan_id
        state.updates += 1
    return state


# ---------------------------------------------------------------- files


@dataclass
class FileRecord:
    """One changed file: the last kind of change and every call that changed it."""

    path: str
    kind: Literal["add", "delete", "update"]
    changes: int = 0
    call_ids: list[str] = field(default_factory=list)
    last_seq: int = -1


@dataclass
class FilesChanged:
    """Files changed in a session, in first-change order (only completed changes count)."""

    files: dict[str, FileRecord] = field(default_factory=dict)


def reduce_files(state: FilesChanged, event: Event) -> FilesChanged:
    """Record completed ``file/change`` events."""
    if isinstance(event, FileChangeEvent) and event.status == "completed":
        for change in event.changes:
            record = state.files.get(change.path)
            if record is None:
                record = FileRecord(path=change.path, kind=change.kind)
                state.files[change.path] = record
            elif record.kind == "add" and change.kind == "update":
                pass  # still an added file, as far as the session is concerned
            else:
                record.kind = change.kind
            record.changes += 1
            record.last_seq = event.seq
            if event.call_id is not None and event.call_id not in record.call_ids:
                record.call_ids.append(event.call_id)
    return state


# ---------------------------------------------------------------- registry

BUILTIN_PROJECTIONS: dict[str, tuple[Reducer, Callable[[], Any]]] = {
    "usage": (reduce_usage, UsageTotals),
    "tools": (reduce_tools, ToolCallSummary),
    "plan": (reduce_plan, PlanState),
    "files": (reduce_files, FilesChanged),
}
"""Name → (reducer, initial-state factory) of the built-in projections."""


def project(events: Iterable[EventBase], reducer: Reducer, initial: Any) -> Any:
    """Fold ``reducer`` over ``events`` from ``initial`` (a one-off projection)."""
    state = initial
    for event in events:
        state = reducer(state, event)  # type: ignore[arg-type]
    return state


class Projections:
    """The projections registered on one session log.

    ``history`` gives the events logged so far, for a projection registered late to
    catch up on; after that :meth:`feed` hands it each new event once.
    """

    def __init__(self, history: Callable[[], Iterable[Event]]) -> None:
        self._history = history
        self._reducers: dict[str, Reducer] = {}
        self._states: dict[str, Any] = {}
        self._failures: dict[str, ProjectionError] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._reducers or name in self._failures

    def names(self) -> list[str]:
        """Registered projection names, in registration order."""
        return list(self._reducers)

    def register(self, name: str, reducer: Reducer, initial: Any) -> Any:
        """Register a reducer, fold the history into ``initial``, return the state."""
        if name in self:
            raise ValueError(f"a projection named {name!r} is already registered")
        state = project(self._history(), reducer, initial)
        self._reducers[name] = reducer
        self._states[name] = state
        return state

    def unregister(self, name: str) -> None:
        """Stop maintaining a projection."""
        self._reducers.pop(name, None)
        self._states.pop(name, None)
        self._failures.pop(name, None)

    def get(self, name: str) -> Any:
        """The current state of a projection; built-ins are registered on first use."""
        if name in self._failures:
            raise self._failures[name]
        if name not in self._reducers:
            if name not in BUILTIN_PROJECTIONS:
                known = ", ".join(sorted({*self._reducers, *BUILTIN_PROJECTIONS}))
                raise KeyError(f"no projection named {name!r}; known: {known}")
            reducer, factory = BUILTIN_PROJECTIONS[name]
            self.register(name, reducer, factory())
        return self._states[name]

    def feed(self, event: Event) -> None:
        """Hand one newly logged event to every projection.

        A reducer that raises stops its own projection there (:meth:`get` then raises
        :class:`ProjectionError` naming the event); the event stays logged and the
        other projections see it: a bug in one view must not make an append fail
        after the event was taken (a retry without an id would log it twice).
        """
        failed = []
        for name, reducer in self._reducers.items():
            try:
                self._states[name] = reducer(self._states[name], event)
            except Exception as exc:
                failure = self._failures[name] = ProjectionError(name, event.seq, exc)
                failure.__cause__ = exc
                failed.append(name)
        for name in failed:
            del self._reducers[name]
