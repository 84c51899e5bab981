"""Repair of cut-off sessions, fork at a turn boundary, replay."""

from __future__ import annotations

import pytest

from tests.log.conftest import add_turn
from universal_event import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ForkError,
    LiveSessionError,
    OpenToolCall,
    SessionEndedSeqEvent,
    SessionInterruptedEvent,
    SessionLog,
    SessionNotFoundError,
    StepEndEvent,
    TextPart,
    ToolCallEvent,
    ToolCallPart,
    ToolResultEvent,
    TurnEndEvent,
    UserMessageEvent,
)
from universal_event.repair import find_open_work, repair
from universal_event.replay import replay
from universal_event.stores import MemoryStore, Store, open_store


def cut_session(store: Store, session_id: str = "cut") -> SessionLog:
    """Two turns: the first complete, the second cut while its tools were in flight."""
    log = SessionLog(store, session_id)
    add_turn(log, 0, tools=1)
    add_turn(log, 1, tools=1, finish=False)  # step 0 closed; tool ran and returned
    add_turn(log, 2, tools=1, run_tools=False)  # step open; tool asked for, never started
    log.append(_running_call("t2"))
    log.checkpoint()
    log.close()
    return log


def _running_call(turn_id: str) -> ToolCallEvent:
    return ToolCallEvent(turn_id=turn_id, call_id="call_running", name="grep")


def test_repair_classifies_and_closes_what_was_open(store: Store) -> None:
    original = cut_session(store)
    appended = repair(store, "cut")
    assert [type(e) for e in appended] == [
        AssistantMessageEvent,
        StepEndEvent,
        TurnEndEvent,
        TurnEndEvent,
        SessionInterruptedEvent,
        SessionEndedSeqEvent,
    ]
    # the call started with no message holding it: the message it came in, rebuilt
    rebuilt = appended.pop(0)
    assert isinstance(rebuilt, AssistantMessageEvent) and rebuilt.turn_id == "t2"
    assert rebuilt.content == [ToolCallPart(id="call_running", name="grep")]
    assert (rebuilt.status, rebuilt.stop_reason) == ("partial", "interrupted")
    step_end = appended[0]
    assert isinstance(step_end, StepEndEvent)
    assert (step_end.turn_id, step_end.step, step_end.status) == ("t2", 0, "interrupted")
    turn_ends = [e for e in appended if isinstance(e, TurnEndEvent)]
    assert [(e.turn_id, e.status) for e in turn_ends] == [
        ("t2", "interrupted"),
        ("t1", "interrupted"),
    ]
    interrupted = appended[-2]
    assert isinstance(interrupted, SessionInterruptedEvent)
    assert interrupted.closed_turns == ["t1", "t2"]
    assert interrupted.open_tool_calls == [
        OpenToolCall(call_id="call_2_0", name="bash", state="not-started"),
        OpenToolCall(call_id="call_running", name="grep", state="running"),
    ]
    ended = appended[-1]
    assert isinstance(ended, SessionEndedSeqEvent) and ended.last_seq == original.next_seq - 1
    assert store.latest_seq("cut") == appended[-1].seq  # checkpointed
    assert not find_open_work(store.read("cut"))


def test_repair_is_idempotent(store: Store) -> None:
    cut_session(store)
    first = repair(store, "cut")
    count = store.latest_seq("cut")
    assert first
    assert repair(store, "cut") == []
    assert store.latest_seq("cut") == count


def test_repair_of_a_clean_session_adds_nothing(store: Store) -> None:
    log = SessionLog(store, "clean")
    add_turn(log, 0)
    log.checkpoint()
    log.close()
    assert repair(store, "clean") == []


def test_repair_refuses_a_live_session() -> None:
    store = MemoryStore()
    live = SessionLog(store, "live")
    add_turn(live, 0, finish=False)
    live.checkpoint()
    with pytest.raises(LiveSessionError):
        repair(store, "live")
    with pytest.raises(LiveSessionError):
        live.repair()
    live.close()
    assert repair(store, "live")


def test_repair_through_a_loaded_log_refuses_a_session_another_log_writes() -> None:
    """``SessionLog.open(...).repair()`` is a repair like ``repair(store, id)``; and a
    second live log on the session, closed or collected, does not hide the first."""
    import gc

    store = MemoryStore()
    writer = SessionLog(store, "w")
    add_turn(writer, 0, finish=False)
    writer.checkpoint()
    with pytest.raises(LiveSessionError):
        SessionLog.open(store, "w").repair()
    second = SessionLog(store, "w")  # live too (the constructor's default)
    second.close()
    third = SessionLog(store, "w")
    del third
    gc.collect()
    with pytest.raises(LiveSessionError):
        repair(store, "w")
    assert store.latest_seq("w") == writer.next_seq - 1
    writer.close()
    assert SessionLog.open(store, "w").repair()


def test_new_events_after_a_repair_are_repaired_again() -> None:
    store = MemoryStore()
    cut_session(store)
    repair(store, "cut")
    resumed = SessionLog.open(store, "cut", live=True)
    add_turn(resumed, 3, tools=1, run_tools=False)
    resumed.checkpoint()
    resumed.close()
    again = repair(store, "cut")
    interrupted = [e for e in again if isinstance(e, SessionInterruptedEvent)]
    assert [c.call_id for c in interrupted[0].open_tool_calls] == ["call_3_0"]
    assert interrupted[0].closed_turns == ["t3"]


def test_a_call_id_reused_in_a_later_round_is_open_again() -> None:
    """A provider that numbers calls per response reuses ``functions.search:0``: the
    second round's call is open until its own result; a call logged after its result
    is not."""
    call = ToolCallPart(id="functions.search:0", name="search", arguments={})
    asked = AssistantMessageEvent(content=[call])
    answered = ToolResultEvent(call_id="functions.search:0", content=[TextPart(text="x")])
    assert not find_open_work([asked, answered]).tool_calls
    assert not find_open_work([answered, asked]).tool_calls  # logged after its result
    reopened = find_open_work([asked, answered, asked]).tool_calls
    assert [c.call_id for c in reopened.values()] == ["functions.search:0"]
    assert not find_open_work([asked, answered, asked, answered]).tool_calls
    started = ToolCallEvent(call_id="functions.search:0", name="search")
    running = find_open_work([asked, started, answered, asked, started]).tool_calls
    assert [c.state for c in running.values()] == ["running"]


def _reused_id_session(store: Store, *, prune: bool, start_second: bool = False) -> None:
    """Two rounds of ``functions.search:0``; the process dies before the second's result."""
    log = SessionLog(store, "reused")
    log.append(UserMessageEvent(content=[TextPart(text="search twice")]))
    call = ToolCallPart(id="functions.search:0", name="search", arguments={})
    log.append(AssistantMessageEvent(content=[call]))
    result = log.append(
        ToolResultEvent(call_id="functions.search:0", content=[TextPart(text="long output")])
    )
    if prune:
        log.prune([result.seq])
    log.append(AssistantMessageEvent(content=[call]))
    if start_second:
        log.append(ToolCallEvent(call_id="functions.search:0", name="search"))
    log.checkpoint()
    log.close()


@pytest.mark.parametrize("prune", [False, True])
@pytest.mark.parametrize("start_second", [False, True])
def test_a_pruned_result_is_no_result_of_a_later_round(
    store: Store, prune: bool, start_second: bool
) -> None:
    """A pruned result's replacement stands for the result it replaced: the second round
    of a reused call id stays open, pruned or not."""
    _reused_id_session(store, prune=prune, start_second=start_second)
    interrupted = [e for e in repair(store, "reused") if isinstance(e, SessionInterruptedEvent)]
    state = "running" if start_second else "not-started"
    assert interrupted[0].open_tool_calls == [
        OpenToolCall(call_id="functions.search:0", name="search", state=state)
    ]
    assert repair(store, "reused") == []


def test_a_result_pruned_while_the_next_round_runs_does_not_settle_it() -> None:
    log = SessionLog()
    call = ToolCallPart(id="functions.search:0", name="search")
    log.append(AssistantMessageEvent(content=[call]))
    first = log.append(ToolResultEvent(call_id="functions.search:0"))
    log.append(AssistantMessageEvent(content=[call]))
    log.append(ToolCallEvent(call_id="functions.search:0", name="search"))
    log.prune([first.seq])
    open_calls = find_open_work(log.events()).tool_calls
    assert [(c.call_id, c.state) for c in open_calls.values()] == [
        ("functions.search:0", "running")
    ]
    log.append(ToolResultEvent(call_id="functions.search:0"))
    assert not find_open_work(log.events())


def test_a_message_rewritten_on_the_surface_is_no_second_request() -> None:
    """A replace that keeps a message's tool call (thinking stripped, corrected from a
    rollout) does not ask for the call again; a call the rewrite adds is a new one."""
    store = MemoryStore()
    log = SessionLog(store, "rewritten")
    asked = log.append(
        AssistantMessageEvent(
            content=[TextPart(text="thinking..."), ToolCallPart(id="c1", name="f")]
        )
    )
    log.append(ToolResultEvent(call_id="c1", content=[TextPart(text="ok")]))
    rewritten = log.replace(
        asked.seq, asked.seq, AssistantMessageEvent(content=[ToolCallPart(id="c1", name="f")])
    )
    assert not find_open_work(log.events()).tool_calls
    # rewritten again, growing a second call: c1 is still the same, c2 is new
    grown = AssistantMessageEvent(
        content=[ToolCallPart(id="c1", name="f"), ToolCallPart(id="c2", name="g")]
    )
    log.replace(rewritten.seq, rewritten.seq, grown)
    log.checkpoint()
    log.close()
    open_calls = find_open_work(store.read("rewritten")).tool_calls
    assert list(open_calls.values()) == [OpenToolCall(call_id="c2", name="g", state="not-started")]


def test_a_compression_summary_stands_for_the_calls_it_replaced() -> None:
    """Compressed away, a call and its result stay settled; the id reused after the
    compression is a new round, open until its own result."""
    log = SessionLog()
    user = log.append(UserMessageEvent(content=[TextPart(text="go")]))
    call = ToolCallPart(id="functions.search:0", name="search")
    log.append(AssistantMessageEvent(content=[call]))
    result = log.append(ToolResultEvent(call_id="functions.search:0"))
    log.compress(user.seq, result.seq, "searched once")
    assert not find_open_work(log.events()).tool_calls
    log.append(AssistantMessageEvent(content=[call]))
    assert list(find_open_work(log.events()).tool_calls) == ["functions.search:0"]
    log.append(ToolResultEvent(call_id="functions.search:0"))
    assert not find_open_work(log.events()).tool_calls


def test_a_request_repeated_before_its_call_started_is_the_same_call() -> None:
    """A retried message asking for the same call again (a partial message, then the
    whole one) is one call: its result settles it."""
    call = ToolCallPart(id="functions.search:0", name="search")
    partial = AssistantMessageEvent(content=[call], status="partial")
    whole = AssistantMessageEvent(content=[call])
    started = ToolCallEvent(call_id="functions.search:0", name="search")
    answered = ToolResultEvent(call_id="functions.search:0")
    assert not find_open_work([partial, whole, started, answered]).tool_calls
    running = find_open_work([partial, whole, started]).tool_calls
    assert [c.state for c in running.values()] == ["running"]


# ---------------------------------------------------------------- fork


def test_fork_at_a_turn_boundary(store_url: str) -> None:
    store = open_store(store_url)
    parent = SessionLog(store, "parent")
    for turn in range(3):
        add_turn(parent, turn)
    parent_events = parent.events()
    child = parent.fork("child", after_turn="t1")
    boundary = dict(parent.turn_boundaries())["t1"]
    assert child.session_id == "child"
    assert [e.id for e in child.events()] == [e.id for e in parent_events[: boundary + 1]]
    assert {e.session_id for e in child.events()} == {"child"}
    assert child.derive_messages() == [m for m in parent.derive_messages() if m.seq <= boundary]
    child.append(UserMessageEvent(content=[TextPart(text="child only")]))
    child.checkpoint()
    assert parent.events() == parent_events
    assert [e.id for e in store.read("parent")] == [e.id for e in parent_events]
    assert store.session_info("child").parent_id == "parent"
    assert child.next_seq == boundary + 2


def test_fork_defaults_to_the_last_finished_turn_and_refuses_mid_turn() -> None:
    parent = SessionLog()
    add_turn(parent, 0)
    add_turn(parent, 1, finish=False)
    child = parent.fork()
    assert child.next_seq == parent.turn_boundaries()[-1][1] + 1
    assert child.session_id.startswith(parent.session_id)
    with pytest.raises(ForkError, match="t1"):
        parent.fork(after_turn="t1")
    with pytest.raises(ForkError, match="no finished turn"):
        SessionLog().fork()


def test_a_stored_session_forks_as_its_log_would_without_loading_it(store_url: str) -> None:
    """fork_stored (the CLI's fork) reads the parent once and keeps nothing of it."""
    from universal_event.log import fork_stored

    store = open_store(store_url)
    parent = SessionLog(store, "parent")
    for turn in range(3):
        add_turn(parent, turn)
    add_turn(parent, 3, finish=False)
    parent.checkpoint()
    assert fork_stored(store, "parent", "by-store", after_turn="t1") == (
        "by-store",
        dict(parent.turn_boundaries())["t1"] + 1,
    )
    parent.fork("by-log", after_turn="t1")
    by_store, by_log = list(store.read("by-store")), list(store.read("by-log"))
    assert [e.id for e in by_store] == [e.id for e in by_log]
    child_id, copied = fork_stored(store, "parent")  # the last finished turn
    assert copied == parent.turn_boundaries()[-1][1] + 1 == store.latest_seq(child_id) + 1
    with pytest.raises(ForkError, match="t3"):
        fork_stored(store, "parent", after_turn="t3")
    with pytest.raises(ForkError, match="already exists"):
        fork_stored(store, "parent", "by-store")
    with pytest.raises(SessionNotFoundError):
        fork_stored(store, "none")


def test_the_end_of_a_sub_agent_turn_inside_another_is_no_fork_point() -> None:
    from universal_event.events import TurnEndEvent, TurnStartEvent

    log = SessionLog()
    log.append(TurnStartEvent(turn_id="outer"))
    log.append(TurnStartEvent(turn_id="sub", parent_id="task_1"))
    log.append(TurnEndEvent(turn_id="sub", parent_id="task_1"))
    with pytest.raises(ForkError, match="'sub'"):
        log.fork(after_turn="sub")
    log.append(TurnEndEvent(turn_id="outer"))
    assert [turn for turn, _ in log.turn_boundaries()] == ["outer"]
    assert log.fork().next_seq == 4


# ---------------------------------------------------------------- replay


def test_replay_gives_every_event_again_chunks_included() -> None:
    log = SessionLog()
    add_turn(log, 0)
    for delta in ("a", "b", "c"):
        log.append(AssistantChunkEvent(delta=delta))
    assert list(log.replay()) == log.events()


def test_paced_replay_waits_as_the_original_did() -> None:
    log = SessionLog()
    for ts in (100.0, 100.5, 102.5, 102.5, 101.0):
        log.append(AssistantChunkEvent(delta="x", ts=ts))
    waits: list[float] = []
    events = list(replay(log.events(), paced=True, speed=2.0, sleep=waits.append))
    assert events == log.events()
    assert waits == [0.25, 1.0]  # equal and backwards timestamps do not wait
    waits.clear()
    list(replay(log.events(), paced=True, max_gap=0.1, sleep=waits.append))
    assert waits == [0.1, 0.1]
    with pytest.raises(ValueError, match="speed"):
        list(replay(log.events(), paced=True, speed=0))
