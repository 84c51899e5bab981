"""Projections: registered reducers kept up to date incrementally, never writing the log."""

from __future__ import annotations

from typing import Any

import pytest

from tests.log.conftest import add_turn
from universal_event import (
    Event,
    FileChange,
    FileChangeEvent,
    PlanItem,
    PlanUpdateEvent,
    SessionLog,
    ToolCallEvent,
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
    reduce_usage,
)
from universal_event.stores import open_store


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
