"""Projections: registered reducers kept up to date incrementally, never writing the log."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.log.conftest import add_turn
from universal_event import (
    AssistantMessageEvent,
    Event,
    FileChange,
    FileChangeEvent,
    PlanItem,
    PlanUpdateEvent,
    SessionInterruptedEvent,
    SessionLog,
    ToolCallEvent,
    ToolCallPart,
    ToolResultEvent,
    TurnEndEvent,
    Usage,
    UsageEvent,
    UserMessageEvent,
    project,
)
from universal_event.parts import TextPart
from universal_event.projections import (
    FilesChanged,
    PlanState,
    ToolCallSummary,
    UsageTotals,
    reduce_tools,
    reduce_usage,
)
from universal_event.repair import repair
from universal_event.stores import MemoryStore, open_store


def test_custom_reducer_catches_up_then_follows_appends() -> None:
    log = SessionLog()
    add_turn(log, 0, tools=2)
    seen: list[int] = []

    def count_tool_results(state: int, event: Event) -> int:
        seen.append(event.seq)
        return state + isinstance(event, ToolResultEvent)

    assert log.projections.register("results", count_tool_results, 0) == 2
    assert seen == list(range(log.next_seq))
    seen.clear()
    add_turn(log, 1, tools=3)
    assert log.projection("results") == 5
    # each new event was handed over exactly once: incremental, no re-walk
    assert seen == list(range(log.next_seq - len(seen), log.next_seq))
    with pytest.raises(ValueError, match="already registered"):
        log.projections.register("results", count_tool_results, 0)
    with pytest.raises(KeyError, match="no projection named 'nope'"):
        log.projection("nope")


def test_projections_never_write_the_log() -> None:
    log = SessionLog()
    add_turn(log, 0)
    before = log.events()
    for name in ("usage", "tools", "plan", "files"):
        log.projection(name)
    assert log.events() == before
    assert log.pending == len(before)


def test_usage_totals() -> None:
    log = SessionLog()
    log.append(UsageEvent(usage=Usage(input_tokens=100, cache_read_tokens=80, output_tokens=5),
                          cost_usd=0.01))  # fmt: skip
    totals = log.projection("usage")
    assert isinstance(totals, UsageTotals)
    log.append(UsageEvent(usage=Usage(input_tokens=50, output_tokens=7, reasoning_tokens=3)))
    log.append(TurnEndEvent(usage=Usage(input_tokens=150, output_tokens=12), cost_usd=0.02))
    totals = log.projection("usage")
    assert totals.request_count == 2 and totals.turn_count == 1
    assert totals.total == Usage(
        input_tokens=150, cache_read_tokens=80, output_tokens=12, reasoning_tokens=3
    )
    assert totals.turns == Usage(input_tokens=150, output_tokens=12)
    assert totals.cost_usd == pytest.approx(0.01)  # per-request costs win over turn totals
    turn_only = project(
        [TurnEndEvent(usage=Usage(input_tokens=9), cost_usd=0.5)], reduce_usage, UsageTotals()
    )
    assert turn_only.total == Usage(input_tokens=9) and turn_only.cost_usd == 0.5


def test_tool_call_summary() -> None:
    log = SessionLog()
    add_turn(log, 0, tools=2)
    add_turn(log, 1, tools=1, run_tools=False)
    log.append(ToolCallEvent(call_id="call_x", name="grep"))
    log.append(ToolResultEvent(call_id="call_x", name="grep", is_error=True))
    summary = log.projection("tools")
    assert isinstance(summary, ToolCallSummary)
    assert {c.call_id: c.state for c in summary.calls.values()} == {
        "call_0_0": "completed",
        "call_0_1": "completed",
        "call_1_0": "requested",
        "call_x": "failed",
    }
    assert summary.by_name == {"bash": 3, "grep": 1}
    assert [c.call_id for c in summary.open_calls] == ["call_1_0"]
    record = summary.calls["call_0_0"]
    assert record.requested_seq is not None and record.started_seq is not None
    assert record.requested_seq < record.started_seq < (record.result_seq or 0)


def test_plan_state_and_files_changed() -> None:
    log = SessionLog()
    log.append(PlanUpdateEvent(items=[PlanItem(text="read"), PlanItem(text="write")]))
    log.append(PlanUpdateEvent(items=[PlanItem(text="read", status="completed"),
                                      PlanItem(text="write", status="in_progress")]))  # fmt: skip
    plan = log.projection("plan")
    assert isinstance(plan, PlanState)
    assert [(i.text, i.status) for i in plan.items] == [
        ("read", "completed"),
        ("write", "in_progress"),
    ]
    assert plan.updates == 2
    log.append(FileChangeEvent(changes=[FileChange(path="a.py", kind="add")], call_id="c1"))
    log.append(FileChangeEvent(changes=[FileChange(path="a.py"), FileChange(path="b.py")],
                               call_id="c2"))  # fmt: skip
    log.append(FileChangeEvent(changes=[FileChange(path="c.py")], status="declined"))
    log.append(FileChangeEvent(changes=[FileChange(path="b.py", kind="delete")], call_id="c3"))
    files = log.projection("files")
    assert isinstance(files, FilesChanged)
    assert {p: (r.kind, r.changes, r.call_ids) for p, r in files.files.items()} == {
        "a.py": ("add", 2, ["c1", "c2"]),
        "b.py": ("delete", 2, ["c2", "c3"]),
    }


def test_projection_after_reload_equals_live(durable_url: str) -> None:
    log = SessionLog(open_store(durable_url), "s")
    log.projection("tools")
    for turn in range(3):
        add_turn(log, turn, tools=2)
    log.append(UsageEvent(usage=Usage(input_tokens=3)))
    log.checkpoint()
    reloaded = SessionLog.open(open_store(durable_url), "s")
    for name in ("tools", "usage"):
        assert reloaded.projection(name) == log.projection(name)


def test_usage_total_takes_each_turn_once_across_a_hand_off() -> None:
    """Claude Code reports a turn's usage and cost on its turn/end only, Codex per
    request (and the turn's sum again on turn/end): a session handed from one to the
    other counts every turn once, in either order."""
    from universal_event.events import TurnEndEvent, TurnStartEvent, Usage, UsageEvent

    def claude_turn(log: SessionLog, turn: str) -> None:
        log.append(TurnStartEvent(turn_id=turn))
        usage = Usage(input_tokens=200, output_tokens=40, scope="turn")
        log.append(TurnEndEvent(turn_id=turn, usage=usage, cost_usd=0.05))

    def codex_turn(log: SessionLog, turn: str) -> None:
        log.append(TurnStartEvent(turn_id=turn))
        for _ in range(2):
            request = Usage(input_tokens=150, output_tokens=30, scope="request")
            log.append(UsageEvent(turn_id=turn, usage=request))
        summed = Usage(input_tokens=300, output_tokens=60, scope="turn")
        log.append(TurnEndEvent(turn_id=turn, usage=summed))

    for order in ((claude_turn, codex_turn), (codex_turn, claude_turn)):
        log = SessionLog()
        for index, turn in enumerate(order):
            turn(log, f"t{index}")
        totals = log.projection("usage")
        assert (totals.total.input_tokens, totals.total.output_tokens) == (500, 100)
        assert totals.cost_usd == pytest.approx(0.05)


def test_a_projection_that_raises_stops_alone_and_the_append_stands() -> None:
    from universal_event.errors import ProjectionError

    log = SessionLog()
    seen: list[int] = []

    def broken(state: int, event: Any) -> int:
        if event.seq == 1:
            raise KeyError("oops")
        return state + 1

    def counting(state: int, event: Any) -> int:
        seen.append(event.seq)
        return state + 1

    log.projections.register("broken", broken, 0)
    log.projections.register("counting", counting, 0)
    for text in ("a", "b", "c"):
        log.append(UserMessageEvent(content=[TextPart(text=text)]))  # the second must not raise
    assert len(log) == 3 and seen == [0, 1, 2]
    with pytest.raises(ProjectionError, match="'broken' failed at seq 1: KeyError"):
        log.projection("broken")
    assert log.projection("counting") == 3
    log.projections.unregister("broken")
    assert log.projections.register("broken", lambda s, e: s + 1, 0) == 3


# ---------------------------------------------------------------- tools: reused call ids


def test_each_round_of_a_reused_call_id_is_its_own_call() -> None:
    """A provider that numbers calls per response reuses ``functions.search:0``: the
    second round, still running, is its own call, open, and counted; the projection
    says what repair says."""
    from universal_event.repair import find_open_work

    log = SessionLog()
    summary = log.projection("tools")  # kept incrementally from here on
    for round_ in range(2):
        call = ToolCallPart(id="functions.search:0", name="search")
        log.append(AssistantMessageEvent(content=[call]))
        log.append(ToolCallEvent(call_id="functions.search:0", name="search"))
        if round_ == 0:
            log.append(ToolResultEvent(call_id="functions.search:0", content=[TextPart(text="r")]))
    assert [(c.call_id, c.state) for c in summary.open_calls] == [("functions.search:0", "running")]
    assert summary.by_name == {"search": 2}
    assert {c.call_id: c.state for c in find_open_work(log.events()).tool_calls.values()} == {
        "functions.search:0": "running"
    }
    first, second = summary.rounds("functions.search:0")
    assert (first.state, first.round, first.requested_seq, first.started_seq, first.result_seq) == (
        "completed", 0, 0, 1, 2
    )  # fmt: skip
    assert (second.state, second.round, second.requested_seq, second.started_seq) == (
        "running", 1, 3, 4
    )  # fmt: skip
    assert second.result_seq is None
    assert summary.calls["functions.search:0"] is second  # the latest round
    assert summary.records == [first, second]
    assert summary.open_calls == [second]
    log.append(ToolResultEvent(call_id="functions.search:0", is_error=True))
    assert (second.state, second.result_seq) == ("failed", 5)
    assert summary.open_calls == [] and not find_open_work(log.events()).tool_calls
    assert project(log.events(), reduce_tools, ToolCallSummary()) == summary


def test_codex_order_and_late_requests_join_their_call() -> None:
    """Codex logs ``tool/call`` before the message asking for it; a request logged after
    its call's result joins that call; a request repeated before the call started (a
    retried message) is the same call."""
    call = ToolCallPart(id="functions.run:0", name="run")
    started = ToolCallEvent(call_id="functions.run:0", name="run")
    asked = AssistantMessageEvent(content=[call])
    answered = ToolResultEvent(call_id="functions.run:0")
    summary = project([started, asked, answered] * 2, reduce_tools, ToolCallSummary())
    assert [(c.round, c.state) for c in summary.records] == [(0, "completed"), (1, "completed")]
    summary = project([answered, asked], reduce_tools, ToolCallSummary())
    assert [c.state for c in summary.records] == ["completed"]
    retried = [AssistantMessageEvent(content=[call], status="partial"), asked, started]
    summary = project(retried, reduce_tools, ToolCallSummary())
    assert [c.state for c in summary.records] == ["running"]


def test_surface_replacements_make_no_new_round() -> None:
    """A pruned result's replacement and a message rewritten with the same calls stand
    for what they replaced: no second result, no second request."""
    log = SessionLog()
    summary = log.projection("tools")
    call = ToolCallPart(id="functions.search:0", name="search")
    asked = log.append(AssistantMessageEvent(content=[TextPart(text="hm"), call]))
    result = log.append(ToolResultEvent(call_id="functions.search:0"))
    log.prune([result.seq])
    log.replace(asked.seq, asked.seq, AssistantMessageEvent(content=[call]))
    assert [(c.state, c.result_seq) for c in summary.records] == [("completed", result.seq)]
    log.append(AssistantMessageEvent(content=[call]))  # the id reused: a new round
    assert [(c.round, c.state) for c in summary.open_calls] == [(1, "requested")]
    assert summary.by_name == {"search": 2}


def test_calls_open_at_an_interruption_are_settled_by_it() -> None:
    store = MemoryStore()
    log = SessionLog(store, "cut")
    call = ToolCallPart(id="functions.search:0", name="search")
    log.append(AssistantMessageEvent(content=[call]))
    log.checkpoint()
    log.close()
    repair(store, "cut")
    resumed = SessionLog.open(store, "cut", live=True)
    summary = resumed.projection("tools")
    assert [c.state for c in summary.records] == ["interrupted"] and not summary.open_calls
    resumed.append(AssistantMessageEvent(content=[call]))  # asked again after the repair
    resumed.append(ToolResultEvent(call_id="functions.search:0"))
    assert [c.state for c in summary.records] == ["interrupted", "completed"]


_STATE_OF_STAGE = {
    "asked": "requested",
    "started": "running",
    "done": "completed",
    "interrupted": "interrupted",
}


@pytest.mark.parametrize("seed", range(40))
def test_tool_rounds_follow_a_random_session(seed: int) -> None:
    """Calls (reused ids among them) asked, started, answered, retried, interrupted,
    with prunes, rewrites and compressions in between: the projection, kept live, has
    exactly the calls made, each in its state; it equals the projection from scratch and
    after a reload; repair's open calls are its open ones."""
    from universal_event.repair import find_open_work

    rng = random.Random(seed)
    store = MemoryStore()
    log = SessionLog(store, "s")
    summary = log.projection("tools")
    calls: list[dict[str, Any]] = []  # what was really done: id and stage of each call

    def unsettled(call_id: str) -> bool:
        return any(c["id"] == call_id and c["stage"] in ("asked", "started") for c in calls)

    def on_surface(kind: type[Event]) -> list[Event]:
        return [log.get(s) for s in log.surface_seqs() if isinstance(log.get(s), kind)]

    for _ in range(60):
        op = rng.choice(["call", "call", "start", "result", "result", "prune", "rewrite",
                         "compress", "interrupt", "user"])  # fmt: skip
        waiting = [c for c in calls if c["stage"] in ("asked", "started")]
        if op == "call":
            call_id = rng.choice(["functions.search:0", "functions.read:0", f"c{len(calls)}"])
            if unsettled(call_id):
                continue
            call = {"id": call_id, "stage": "asked"}
            calls.append(call)
            part = ToolCallPart(id=call_id, name=call_id.split(":")[0])
            if rng.random() < 0.3:  # Codex: tool/call first, the message after it
                log.append(ToolCallEvent(call_id=call_id, name=part.name))
                call["stage"] = "started"
            elif rng.random() < 0.2:  # a message cut off, then asked again whole
                log.append(AssistantMessageEvent(content=[part], status="partial"))
            log.append(AssistantMessageEvent(content=[TextPart(text="t"), part]))
        elif op == "start" and any(c["stage"] == "asked" for c in waiting):
            call = rng.choice([c for c in waiting if c["stage"] == "asked"])
            log.append(ToolCallEvent(call_id=call["id"], name="x"))
            call["stage"] = "started"
        elif op == "result" and waiting:
            call = rng.choice(waiting)
            log.append(ToolResultEvent(call_id=call["id"], content=[TextPart(text="out")]))
            call["stage"] = "done"
        elif op == "prune" and on_surface(ToolResultEvent):
            log.prune([rng.choice(on_surface(ToolResultEvent)).seq])
        elif op == "rewrite" and on_surface(AssistantMessageEvent):
            message = rng.choice(on_surface(AssistantMessageEvent))
            assert isinstance(message, AssistantMessageEvent)
            kept = [p for p in message.content if isinstance(p, ToolCallPart)]
            log.replace(message.seq, message.seq, AssistantMessageEvent(content=kept))
        elif op == "compress" and log.surface_seqs():
            seqs = log.surface_seqs()
            first = rng.randrange(len(seqs))
            last = rng.randrange(first, min(len(seqs), first + 4))
            log.compress(seqs[first], seqs[last], "summary")
        elif op == "interrupt":
            log.append(SessionInterruptedEvent())
            for call in waiting:
                call["stage"] = "interrupted"
        elif op == "user":
            log.append(UserMessageEvent(content=[TextPart(text="more")]))
        assert [(r.call_id, r.state) for r in summary.records] == [
            (c["id"], _STATE_OF_STAGE[c["stage"]]) for c in calls
        ]
        open_work = find_open_work(log.events()).tool_calls
        assert {c.call_id: c.state for c in open_work.values()} == {
            c["id"]: "running" if c["stage"] == "started" else "not-started"
            for c in calls
            if c["stage"] in ("asked", "started")
        }
    assert project(log.events(), reduce_tools, ToolCallSummary()) == summary
    log.checkpoint()
    assert SessionLog.open(store, "s").projection("tools") == summary


def test_a_projection_registered_while_another_thread_appends_sees_each_event_once() -> None:
    """The log feeds its projections under its lock; registering took no lock, so an
    append could raise ``dictionary changed size during iteration`` after its event was
    taken, and the new projection count an event twice or miss it."""
    import sys

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the threads finely
    try:
        for _ in range(40):
            _register_while_appending()
    finally:
        sys.setswitchinterval(switch)


def _register_while_appending() -> None:
    import threading

    from universal_event.events import ToolCallEvent

    log = SessionLog()
    for index in range(30):
        log.projections.register(f"base{index}", lambda count, event: count + 1, 0)
    stop = threading.Event()
    failures: list[BaseException] = []

    def append() -> None:
        index = 0
        while not stop.is_set():
            try:
                log.append(ToolCallEvent(id=f"e{index}", call_id=f"c{index}", name="x"))
            except BaseException as exc:  # reported below
                failures.append(exc)
                return
            index += 1

    appender = threading.Thread(target=append)
    appender.start()
    for index in range(20):
        log.projections.register(f"late{index}", lambda count, event: count + 1, 0)
    stop.set()
    appender.join()
    assert failures == []
    for index in range(20):
        assert log.projection(f"late{index}") == log.next_seq
