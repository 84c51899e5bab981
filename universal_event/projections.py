"""Projections: reducers folded over a session's event stream.

A projection is ``reducer(state, event) -> state`` plus an initial state. Registered on
a :class:`~universal_event.log.SessionLog` (``log.projections.register(...)``), it first
catches up on the events already logged, then sees each appended event once: the state
is kept up to date incrementally and never recomputed from the start. Projections
only read: they are given events, never the log, so they cannot write to it.

Built-ins (``log.projection("usage")`` registers one on first use):

* ``usage``: token totals, per request (``usage`` events) and per turn (``turn/end``);
* ``tools``: every tool call with its state (requested, running, completed, failed,
  interrupted), each round of a reused call id its own call;
* ``plan``: the current plan / todo list (each ``plan/update`` replaces it whole);
* ``files``: the files changed, with the last kind of change and the calls that made it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from universal_event.derive import _SurfaceOrder
from universal_event.errors import ProjectionError, SurfaceError
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    EventBase,
    FileChangeEvent,
    PlanItem,
    PlanUpdateEvent,
    SessionInterruptedEvent,
    SurfaceEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    Usage,
    UsageEvent,
    UserMessageEvent,
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

ToolCallState = Literal["requested", "running", "completed", "failed", "interrupted"]
"""How far a call got; ``interrupted``: open when a ``session/interrupted`` (a repair)
closed the session, settled by it."""


@dataclass
class ToolCallRecord:
    """One tool call (one round of its call id) and how far it got."""

    call_id: str
    name: str | None
    state: ToolCallState
    requested_seq: int | None = None
    started_seq: int | None = None
    result_seq: int | None = None
    round: int = 0
    """Which use of ``call_id`` this call is: 0, then 1, 2... when a provider that
    numbers calls per response (``functions.search:0``) reuses the id in later rounds."""

    @property
    def is_open(self) -> bool:
        """Requested or running: no result yet, not settled by an interruption."""
        return self.state in ("requested", "running")


_Entry = tuple[Literal["call", "result"], str]
"""What a surface node says about a tool call: it asks for it, or it is its result."""


class _SurfaceCalls:
    """The tool calls and results each surface node stands for.

    A surface replace puts one event in place of a surface range, and the replacement
    stands for what it replaced: a pruned result's shorter result, a message rewritten
    with the same tool calls (thinking stripped, corrected from a rollout, grown on a
    re-import), a compression summary. The calls it asks for and the results it gives
    that the replaced nodes already stood for are not new ones: a pruned result is no
    second result of its call, a rewritten message no second request. Only the surface
    intents are read (a ``compression/prune``'s replacements are replaces of one seq).

    Its order is :class:`~universal_event.derive.SurfaceView`'s: sort keys strictly
    increasing along the surface, a range found by bisection.
    """

    __slots__ = ("_order", "_stands_for")

    def __init__(self) -> None:
        self._order = _SurfaceOrder()
        self._stands_for: dict[int, list[_Entry] | Counter[_Entry]] = {}
        """Seq → what a surface node stands for (only the nodes that stand for any): its
        own entries, or for a replacement a count of them and of those it replaced."""

    def enter(self, event: SurfaceEvent, own: list[_Entry]) -> list[bool]:
        """Put ``event`` on the surface as its intent says; which of its ``own`` entries
        are new (False: one the nodes it replaced stood for)."""
        surface = event.surface
        if surface is None or surface.op == "append":
            self._order.append(event.seq)
            if own:
                self._stands_for[event.seq] = own
        elif surface.op == "replace":
            span = self._span(surface.start, surface.end, event.seq)
            if span is not None:
                return self._replace(event.seq, *span, own)
        # hidden, or a range not on the surface (which the log refuses): all new
        return [True] * len(own)

    def _span(self, start: int | None, end: int | None, seq: int) -> tuple[int, int] | None:
        """Surface positions of a replace range; None when it is not on the surface."""
        try:
            first, last = self._order.range(start, end, seq)
        except SurfaceError:
            return None
        seqs = self._order.seqs
        if seqs[first] != start or seqs[last] != end:
            return None  # keys out of order (events never appended): no range to trust
        return first, last

    def _replace(self, seq: int, first: int, last: int, own: list[_Entry]) -> list[bool]:
        stood: Counter[_Entry] = Counter()
        for replaced in self._order.splice(seq, first, last):
            stood.update(self._stands_for.pop(replaced, ()))
        unclaimed = stood.copy()
        new: list[bool] = []
        for entry in own:
            carried = unclaimed[entry] > 0
            if carried:
                unclaimed[entry] -= 1
            new.append(not carried)
        stood.update(entry for entry, is_new in zip(own, new, strict=True) if is_new)
        if stood:
            self._stands_for[seq] = stood
        return new


class _IdRounds:
    """The calls (rounds) of one call id, and where the next event of each kind goes."""

    __slots__ = ("next_request", "next_result", "next_start", "records")

    def __init__(self) -> None:
        self.records: list[ToolCallRecord] = []
        # No round before these can take that event any more: they only advance.
        self.next_request = 0
        self.next_start = 0
        self.next_result = 0

    def first(self, index: int, takes: Callable[[ToolCallRecord], bool]) -> int:
        """The first round from ``index`` that ``takes`` the event (``len(records)``:
        none does, the event makes a new round)."""
        records = self.records
        while index < len(records) and not takes(records[index]):
            index += 1
        return index


def _takes_request(record: ToolCallRecord) -> bool:
    """A round logged before its request (its ``tool/call`` or result came first)."""
    return record.requested_seq is None and record.state != "interrupted"


def _takes_start(record: ToolCallRecord) -> bool:
    """A round requested, not started and not settled."""
    return record.state == "requested"


def _takes_result(record: ToolCallRecord) -> bool:
    return record.is_open


@dataclass
class ToolCallSummary:
    """Every tool call of a session (in call order) and the counts per tool name.

    A call is one *round* of its call id: a provider that numbers calls per response
    (``functions.search:0`` every time) reuses the id, and each use is its own call.
    An event joins the earliest call of its id still waiting for it, else makes a new
    one: a ``tool/result`` the earliest open call, a ``tool/call`` the earliest call
    requested and not started, a request in an ``assistant/message`` the earliest call
    logged without one (its ``tool/call`` or result came first, as Codex logs them); a
    request repeated before its call started (a retried message) is the same call. A
    ``session/interrupted`` (a repair) settles the calls open then. Surface
    replacements (a pruned result, a message rewritten with the same calls) stand for
    what they replaced and make no new round.
    :func:`universal_event.repair.find_open_work` reads its open calls from here.
    """

    calls: dict[str, ToolCallRecord] = field(default_factory=dict)
    """Call id → its latest call (round), in first-use order."""
    by_name: Counter[str] = field(default_factory=Counter)
    """Calls per tool name (each round counts)."""
    records: list[ToolCallRecord] = field(default_factory=list)
    """Every call, each round of a reused id its own, in call order."""
    _rounds: dict[str, _IdRounds] = field(default_factory=dict, repr=False, compare=False)
    _surface: _SurfaceCalls = field(default_factory=_SurfaceCalls, repr=False, compare=False)

    @property
    def open_calls(self) -> list[ToolCallRecord]:
        """Calls without a result yet (and not settled by an interruption), in call order."""
        return [c for c in self.records if c.is_open]

    def rounds(self, call_id: str) -> list[ToolCallRecord]:
        """The calls of one call id, one per round (empty for an unknown id)."""
        rounds = self._rounds.get(call_id)
        return [] if rounds is None else list(rounds.records)


def _tool_record(
    state: ToolCallSummary, rounds: _IdRounds, index: int, call_id: str, name: str | None
) -> ToolCallRecord:
    """Round ``index`` of ``call_id`` (``len(rounds.records)``: a new one)."""
    if index < len(rounds.records):
        record = rounds.records[index]
        if record.name is None and name is not None:
            record.name = name
            state.by_name[name] += 1
        return record
    record = ToolCallRecord(call_id=call_id, name=name, state="requested", round=index)
    rounds.records.append(record)
    state.records.append(record)
    state.calls[call_id] = record
    if name is not None:
        state.by_name[name] += 1
    return record


def _id_rounds(state: ToolCallSummary, call_id: str) -> _IdRounds:
    rounds = state._rounds.get(call_id)
    if rounds is None:
        rounds = state._rounds[call_id] = _IdRounds()
    return rounds


def _requested(state: ToolCallSummary, part: ToolCallPart, seq: int) -> None:
    rounds = _id_rounds(state, part.id)
    index = rounds.next_request = rounds.first(rounds.next_request, _takes_request)
    if index == len(rounds.records) and rounds.records:
        latest = rounds.records[-1]
        if latest.state == "requested":
            index = latest.round  # asked again before it started: the same call
    record = _tool_record(state, rounds, index, part.id, part.name)
    if record.requested_seq is None:
        record.requested_seq = seq


_TOOLS_EVENTS = (
    AssistantMessageEvent,
    ToolCallEvent,
    ToolResultEvent,
    UserMessageEvent,
    SessionInterruptedEvent,
)


def reduce_tools(state: ToolCallSummary, event: Event) -> ToolCallSummary:
    """Track tool calls from assistant messages, ``tool/call``, ``tool/result`` and
    ``session/interrupted``, each round of a reused call id its own call."""
    if not isinstance(event, _TOOLS_EVENTS):
        return state  # most events (chunks, tool output) say nothing about calls
    if isinstance(event, AssistantMessageEvent):
        parts = [p for p in event.content if isinstance(p, ToolCallPart)]
        new = state._surface.enter(event, [("call", p.id) for p in parts])
        for part, is_new in zip(parts, new, strict=True):
            if is_new:
                _requested(state, part, event.seq)
    elif isinstance(event, ToolCallEvent):
        rounds = _id_rounds(state, event.call_id)
        index = rounds.next_start = rounds.first(rounds.next_start, _takes_start)
        record = _tool_record(state, rounds, index, event.call_id, event.name)
        record.started_seq = event.seq
        if record.state == "requested":
            record.state = "running"
    elif isinstance(event, ToolResultEvent):
        if state._surface.enter(event, [("result", event.call_id)])[0]:
            rounds = _id_rounds(state, event.call_id)
            index = rounds.next_result = rounds.first(rounds.next_result, _takes_result)
            record = _tool_record(state, rounds, index, event.call_id, event.name)
            record.result_seq = event.seq
            record.state = "failed" if event.is_error else "completed"
    elif isinstance(event, UserMessageEvent):
        state._surface.enter(event, [])
    elif isinstance(event, SessionInterruptedEvent):
        # A repair found these calls open and closed the session: they are settled.
        for record in state.records:
            if record.is_open:
                record.state = "interrupted"
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
    catch up on; after that :meth:`feed` hands it each new event once. ``lock`` is the
    log's: the log feeds under it, and a projection registered meanwhile from another
    thread would be fed an event twice or not at all (and make that append raise).
    """

    def __init__(
        self, history: Callable[[], Iterable[Event]], lock: threading.RLock | None = None
    ) -> None:
        self._history = history
        self._lock = lock if lock is not None else threading.RLock()
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
        with self._lock:
            if name in self:
                raise ValueError(f"a projection named {name!r} is already registered")
            state = project(self._history(), reducer, initial)
            self._reducers[name] = reducer
            self._states[name] = state
            return state

    def unregister(self, name: str) -> None:
        """Stop maintaining a projection."""
        with self._lock:
            self._reducers.pop(name, None)
            self._states.pop(name, None)
            self._failures.pop(name, None)

    def get(self, name: str) -> Any:
        """The current state of a projection; built-ins are registered on first use."""
        with self._lock:
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
        after the event was taken (a retry without an id would log it twice). The
        caller holds the lock (the log feeds each event as it takes it, under its own).
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
