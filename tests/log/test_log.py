"""SessionLog core: envelope, idempotency, surface intents, checkpoints, reload."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.log.conftest import PROVENANCE, add_turn
from universal_event import (
    AssistantMessage,
    AssistantMessageEvent,
    CheckpointError,
    ConflictError,
    Event,
    EventBase,
    EventIdConflictError,
    SessionLog,
    SessionNotFoundError,
    Surface,
    SurfaceError,
    TextPart,
    ToolCallEvent,
    ToolMessage,
    ToolResultEvent,
    TurnStartEvent,
    Usage,
    UsageEvent,
    UserMessage,
    UserMessageEvent,
)
from universal_event.parts import ThinkingPart
from universal_event.stores import MemoryStore, SessionInfo, Store, open_store


class FlakyStore:
    """A real MemoryStore whose next ``fail`` appends raise, as a dead disk would."""

    def __init__(self, fail: int = 0) -> None:
        self.inner = MemoryStore()
        self.fail = fail
        self.append_calls = 0

    def append(self, session_id: str, events: Sequence[EventBase], *, expected_seq: int) -> None:
        self.append_calls += 1
        if self.fail:
            self.fail -= 1
            raise OSError("disk full")
        self.inner.append(session_id, events, expected_seq=expected_seq)

    def read(self, session_id: str, start: int = 0, end: int | None = None) -> Iterator[Event]:
        return self.inner.read(session_id, start, end)

    def latest_seq(self, session_id: str) -> int:
        return self.inner.latest_seq(session_id)

    def list_sessions(self) -> list[SessionInfo]:
        return self.inner.list_sessions()

    def session_info(self, session_id: str) -> SessionInfo:
        return self.inner.session_info(session_id)

    def fork(self, source_id: str, new_id: str, *, upto_seq: int) -> None:
        self.inner.fork(source_id, new_id, upto_seq=upto_seq)

    def delete(self, session_id: str) -> None:
        self.inner.delete(session_id)

    def tail(self, session_id: str, after_seq: int, *, timeout: float | None = None) -> list[Event]:
        return self.inner.tail(session_id, after_seq, timeout=timeout)

    def close(self) -> None:
        self.inner.close()


def user(text: str, **kw: object) -> UserMessageEvent:
    return UserMessageEvent(content=[TextPart(text=text)], **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- envelope


def test_default_log_is_a_fresh_session_in_memory() -> None:
    first, second = SessionLog(), SessionLog()
    assert first.session_id != second.session_id
    assert isinstance(first.store, MemoryStore)
    assert first.next_seq == 0 and first.events() == []


def test_append_assigns_contiguous_seqs_and_fills_the_envelope() -> None:
    log = SessionLog(session_id="s1")
    logged = [log.append(user(f"m{i}")) for i in range(3)]
    assert [e.seq for e in logged] == [0, 1, 2]
    assert all(e.session_id == "s1" and e.id and e.ts > 0 for e in logged)
    assert len({e.id for e in logged}) == 3
    assert log.next_seq == 3
    assert log.events() == logged
    assert log.events(1, 2) == [logged[1]]


def test_append_keeps_a_producer_id_and_ts_but_rehomes_the_session() -> None:
    log = SessionLog(session_id="mine")
    logged = log.append(user("hi", id="evt-1", ts=12.5, session_id="native-session", seq=99))
    assert (logged.id, logged.ts, logged.session_id, logged.seq) == ("evt-1", 12.5, "mine", 0)


def test_append_returns_the_same_type() -> None:
    log = SessionLog()
    logged = log.append(ToolCallEvent(call_id="c", name="bash"))
    assert isinstance(logged, ToolCallEvent) and logged.call_id == "c"


def test_retry_with_the_same_id_returns_the_original_event() -> None:
    log = SessionLog()
    original = log.append(user("first", id="dup"))
    # The envelope (seq, session, time) does not count: a retry made again is the event.
    retry = log.append(user("first", id="dup", seq=7, session_id="elsewhere", ts=3.0))
    assert retry is original
    assert log.next_seq == 1
    assert log.extend([user("first", id="dup"), user("y", id="other")])[0] is original
    assert log.next_seq == 2


def test_another_event_under_a_logged_id_is_refused() -> None:
    log = SessionLog(session_id="s")
    log.append(user("first", id="dup", ts=5.0))
    with pytest.raises(EventIdConflictError, match=r"'dup' is already logged at seq 0") as info:
        log.append(user("changed text, same id", id="dup"))
    assert (info.value.session_id, info.value.event_id, info.value.seq) == ("s", "dup", 0)
    with pytest.raises(EventIdConflictError, match="tool/call"):
        log.append(ToolCallEvent(id="dup", call_id="c", name="bash"))
    assert log.next_seq == 1 and log.events()[0].content == [TextPart(text="first")]  # type: ignore[union-attr]


def test_a_retry_need_not_repeat_its_surface_intent_but_may_not_change_it() -> None:
    log = SessionLog()
    log.append(user("draft"))
    replacing = log.append(user("final", id="u2"), surface=Surface(op="replace", start=0, end=0))
    assert log.append(user("final", id="u2")) is replacing
    assert log.append(user("final", id="u2"), surface=replacing.surface) is replacing
    with pytest.raises(EventIdConflictError):
        log.append(user("final", id="u2"), surface=Surface(op="hidden"))
    assert log.surface_seqs() == [1]


def test_idempotency_survives_a_reload(durable_url: str) -> None:
    store = open_store(durable_url)
    log = SessionLog(store, "s")
    log.append(user("a", id="evt-a"))
    log.checkpoint()
    log.close()
    reopened = SessionLog.open(open_store(durable_url), "s", live=True)
    assert reopened.append(user("a", id="evt-a")).seq == 0
    with pytest.raises(EventIdConflictError):
        reopened.append(user("again", id="evt-a"))
    assert reopened.next_seq == 1


# ---------------------------------------------------------------- surface intents


def test_surface_intent_only_on_surface_types() -> None:
    log = SessionLog()
    with pytest.raises(SurfaceError, match="turn/start"):
        log.append(TurnStartEvent(), surface=Surface(op="hidden"))  # type: ignore[call-overload]
    with pytest.raises(SurfaceError, match="usage"):
        log.append(UsageEvent(usage=Usage(input_tokens=3)), surface=Surface())  # type: ignore[call-overload]
    assert log.next_seq == 0
    hidden = log.append(user("secret"), surface=Surface(op="hidden"))
    assert hidden.surface == Surface(op="hidden")
    assert log.derive_messages() == []


def test_a_bad_replace_range_is_rejected_and_nothing_is_logged() -> None:
    log = SessionLog()
    log.append(user("a"))
    log.append(TurnStartEvent())
    with pytest.raises(SurfaceError, match="start seq 1 is not on the surface"):
        log.replace(1, 1, user("x"))
    with pytest.raises(SurfaceError, match="end seq 7"):
        log.replace(0, 7, user("x"))
    with pytest.raises(SurfaceError, match="needs both"):
        log.append(user("x"), surface=Surface(op="replace", start=0))
    assert log.next_seq == 2


def test_replace_runs_backwards_is_rejected() -> None:
    log = SessionLog()
    log.append(user("a"))
    log.append(user("b"))
    with pytest.raises(SurfaceError, match="backwards"):
        log.replace(1, 0, user("x"))


# ---------------------------------------------------------------- derive


def test_derive_maps_each_surface_event_to_its_message() -> None:
    log = SessionLog()
    log.append(TurnStartEvent(turn_id="t"))
    u = log.append(user("hello"))
    thinking = ThinkingPart(text="hm", signature="sig", provenance=PROVENANCE)
    a = log.append(
        AssistantMessageEvent(
            content=[thinking, TextPart(text="hi")],
            provenance=PROVENANCE,
            message_id="msg_1",
            stop_reason="end_turn",
            status="partial",
        )
    )
    r = log.append(
        ToolResultEvent(call_id="c1", name="bash", content=[TextPart(text="ok")], is_error=True)
    )
    assert log.derive_messages() == [
        UserMessage(seq=u.seq, content=[TextPart(text="hello")]),
        AssistantMessage(
            seq=a.seq,
            content=[thinking, TextPart(text="hi")],
            provenance=PROVENANCE,
            message_id="msg_1",
            stop_reason="end_turn",
            status="partial",
        ),
        ToolMessage(
            seq=r.seq, call_id="c1", name="bash", content=[TextPart(text="ok")], is_error=True
        ),
    ]


def test_derived_list_is_a_copy() -> None:
    log = SessionLog()
    log.append(user("a"))
    messages = log.derive_messages()
    messages.clear()
    assert len(log.derive_messages()) == 1


def test_replace_swaps_the_range_and_bumps_the_generation() -> None:
    log = SessionLog()
    for i in range(5):
        log.append(user(f"m{i}"))
    assert log.generation == 0
    summary = log.replace(1, 3, user("summary of 1..3"))
    assert log.generation == 1
    assert log.surface_seqs() == [0, summary.seq, 4]
    assert [m.seq for m in log.derive_messages()] == [0, 5, 4]
    # the replaced events stay in the log
    assert [e.seq for e in log.events()] == list(range(6))
    # the replacement can itself be replaced, with its neighbours
    again = log.replace(0, summary.seq, user("all so far"))
    assert log.surface_seqs() == [again.seq, 4]
    assert log.generation == 2
    with pytest.raises(SurfaceError, match="start seq 1 is not on the surface"):
        log.replace(1, 4, user("gone"))


# ---------------------------------------------------------------- checkpoints


def test_appends_reach_the_store_only_at_checkpoints(store: Store) -> None:
    log = SessionLog(store, "s")
    log.append(user("a"))
    log.append(user("b"))
    assert store.latest_seq("s") == -1
    assert log.pending == 2
    assert log.checkpoint() == 2
    assert store.latest_seq("s") == 1
    assert [e.id for e in store.read("s")] == [e.id for e in log.events()]
    assert log.checkpoint() == 0


def test_failed_checkpoint_raises_keeps_the_buffer_and_skips_the_guarded_block() -> None:
    store = FlakyStore(fail=1)
    log = SessionLog(store, "s")  # type: ignore[arg-type]
    log.append(user("a"))
    ran = []
    with pytest.raises(CheckpointError, match="disk full") as info:
        with log.before_request():
            ran.append("request")
    assert isinstance(info.value.__cause__, OSError)
    assert ran == []
    assert log.pending == 1
    with log.before_request():
        ran.append("request")
    assert ran == ["request"]
    assert store.inner.latest_seq("s") == 0


@pytest.mark.parametrize("guard", ["before_request", "before_step", "before_tool"])
def test_every_guard_refuses_to_run_after_a_failed_checkpoint(guard: str) -> None:
    log = SessionLog(FlakyStore(fail=1), "s")  # type: ignore[arg-type]
    log.append(user("a"))
    context = log.before_tool("c1") if guard == "before_tool" else getattr(log, guard)()
    ran = []
    with pytest.raises(CheckpointError):
        with context:
            ran.append(guard)
    assert ran == []


def test_conflicting_writer_is_a_checkpoint_error() -> None:
    store = MemoryStore()
    first = SessionLog(store, "s")
    second = SessionLog(store, "s")
    first.append(user("a"))
    first.checkpoint()
    second.append(user("b"))
    with pytest.raises(CheckpointError) as info:
        second.checkpoint()
    assert isinstance(info.value.__cause__, ConflictError)


def test_a_checkpoint_whose_write_landed_but_was_not_acknowledged_is_retried_cleanly() -> None:
    """The store wrote the batch, then the call failed (a connection lost after the
    commit): the retry finds its own events there, not another writer's."""

    class LostAck(FlakyStore):
        def append(
            self, session_id: str, events: Sequence[EventBase], *, expected_seq: int
        ) -> None:
            self.inner.append(session_id, events, expected_seq=expected_seq)
            if self.fail:
                self.fail -= 1
                raise OSError("connection lost after COMMIT")

    store = LostAck(fail=1)
    log = SessionLog(store, "s")  # type: ignore[arg-type]
    log.append(user("a"))
    with pytest.raises(CheckpointError, match="connection lost"):
        log.checkpoint()
    assert log.checkpoint() == 1 and log.pending == 0
    log.append(user("b"))
    assert log.checkpoint() == 1
    assert [e.seq for e in store.inner.read("s")] == [0, 1]
    # another writer's events at the same seqs are still a conflict
    other = SessionLog(store, "s")  # type: ignore[arg-type]
    log.append(user("c"))
    other.append(user("d"))
    other.checkpoint()
    with pytest.raises(CheckpointError):
        log.checkpoint()


def test_sync_refuses_another_writers_bad_surface_intent_without_taking_it() -> None:
    from universal_event.events import Surface, UserMessageEvent

    store = MemoryStore()
    reader = SessionLog(store, "s", live=False)
    bad = UserMessageEvent(
        seq=0, id="x", session_id="s", ts=1.0, surface=Surface(op="replace", start=40, end=41)
    )
    store.append("s", [bad], expected_seq=0)
    with pytest.raises(SurfaceError):
        reader.sync()
    assert len(reader) == 0 and reader.pending == 0 and reader.derive_messages() == []


def test_nested_tool_calls_reuse_the_outer_checkpoint() -> None:
    store = FlakyStore()
    log = SessionLog(store, "s")  # type: ignore[arg-type]
    log.append(user("a"))
    with log.before_tool("outer"):
        assert store.append_calls == 1
        log.append(ToolCallEvent(call_id="inner", name="sub"))
        with log.before_tool("inner"):
            assert store.append_calls == 1  # no checkpoint of its own
            assert log.pending == 1
    with log.before_tool("next"):
        assert store.append_calls == 2
        assert log.pending == 0


def test_parallel_tool_calls_in_other_threads_checkpoint_for_themselves() -> None:
    store = FlakyStore()
    log = SessionLog(store, "s")  # type: ignore[arg-type]
    log.append(user("a"))
    pending_in_thread: list[int] = []

    def other_tool() -> None:
        log.append(ToolCallEvent(call_id="parallel", name="bash"))
        with log.before_tool("parallel"):
            pending_in_thread.append(log.pending)

    with log.before_tool("first"):
        thread = threading.Thread(target=other_tool)
        thread.start()
        thread.join()
    assert pending_in_thread == [0]


# ---------------------------------------------------------------- open / reload


def test_open_a_missing_session_raises(store: Store) -> None:
    with pytest.raises(SessionNotFoundError):
        SessionLog.open(store, "nope")


def test_reload_gives_the_same_events_and_messages(durable_url: str) -> None:
    log = SessionLog(open_store(durable_url), "s")
    for turn in range(3):
        add_turn(log, turn, tools=2)
        log.checkpoint()
    log.compress(1, 8, "summary")
    log.checkpoint()
    reloaded = SessionLog.open(open_store(durable_url), "s")
    assert reloaded.events() == log.events()
    assert reloaded.derive_messages() == log.derive_messages()
    assert reloaded.generation == log.generation == 1
    assert reloaded.next_seq == log.next_seq
    assert not reloaded.live


def test_sync_picks_up_another_writers_events() -> None:
    store = MemoryStore()
    writer = SessionLog(store, "s")
    writer.append(user("a"))
    writer.checkpoint()
    reader = SessionLog.open(store, "s")
    writer.append(user("b"))
    writer.checkpoint()
    assert [e.seq for e in reader.sync()] == [1]
    assert len(reader.derive_messages()) == 2


def test_the_type_checker_refuses_a_surface_intent_on_other_types(tmp_path: Path) -> None:
    """The overloads of ``append`` make mypy reject what the runtime check rejects."""
    from mypy import api

    snippet = (
        "from universal_event import SessionLog, Surface, TurnStartEvent, UserMessageEvent\n"
        "log = SessionLog()\n"
        "log.append(UserMessageEvent(content=[]), surface=Surface(op='hidden'))\n"
        "log.append(TurnStartEvent())\n"
        "log.append(TurnStartEvent(), surface=Surface(op='hidden'))\n"
    )
    out, err, status = api.run(
        ["--config-file", "", "--strict", "--no-error-summary", "--ignore-missing-imports",
         "--cache-dir", str(tmp_path), "-c", snippet]
    )  # fmt: skip
    assert status == 1, (out, err)
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and errors[0].startswith("<string>:5:"), out


def test_an_event_no_store_can_encode_is_refused_at_append() -> None:
    """A lone surrogate (a file name os.listdir could not decode), an object in an
    ``Any`` field: refused with a typed error naming the event, nothing taken; before,
    it was buffered and every checkpoint after it failed."""
    from universal_event.errors import DecodeError
    from universal_event.events import ToolCallEvent

    store = MemoryStore()
    log = SessionLog(store, "s")
    for bad in (
        user("caf\udce9.txt"),
        ToolCallEvent(call_id="c", name="f", arguments={"when": object()}),
    ):
        with pytest.raises(DecodeError, match="cannot be stored"):
            log.append(bad)
    assert len(log) == 0 and log.pending == 0
    log.append(user("fine"))
    assert log.checkpoint() == 1


def test_an_event_that_would_not_read_back_is_refused_at_append(durable_url: str) -> None:
    """Structs do not check types when built: a native stream's string where an int
    belongs encodes fine but does not decode, and once stored made every read of the
    session fail (CorruptEventError). Refused at append, naming the field."""
    from universal_event.errors import DecodeError
    from universal_event.events import AssistantChunkEvent, TurnEndEvent

    log = SessionLog(open_store(durable_url), "s")
    log.append(user("before"))
    for bad, path in (
        (AssistantChunkEvent(delta="x", index="3"), "$.index"),  # type: ignore[arg-type]
        (TurnEndEvent(duration_ms={"ms": 1}), "$.duration_ms"),  # type: ignore[arg-type]
        (user("x", source={"runtime": 1}), "$.source"),  # not a Source: any path under it
    ):
        with pytest.raises(DecodeError, match="would not read back") as info:
            log.append(bad)
        assert info.value.path.startswith(path)
    log.append(user("after"))
    log.checkpoint()
    assert [e.seq for e in open_store(durable_url).read("s")] == [0, 1]


# ---------------------------------------------------------------------- replace by ids


def test_a_replace_may_name_its_range_by_event_ids(tmp_path: Path) -> None:
    """An adapter knows the ids of the events it made, not their seqs: the log resolves
    ``start_id``/``end_id`` and stores the range by seqs (a reload derives the same)."""
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    log = SessionLog(store, session_id="s")
    for index in range(4):
        log.append(user(f"m{index}", id=f"e{index}"))
    summary = user("summary", id="sum", surface=Surface(op="replace", start_id="e1", end_id="e2"))
    logged = log.append(summary)
    assert logged.surface == Surface(op="replace", start=1, end=2)  # seqs only
    texts = [m.content[0].text for m in log.derive_messages()]  # type: ignore[union-attr]
    assert texts == ["m0", "summary", "m3"]
    assert log.append(summary) == logged  # a retry (an import read again) adds nothing
    log.checkpoint()
    reloaded = SessionLog.open(store, "s")
    assert reloaded.derive_messages() == log.derive_messages()


@pytest.mark.parametrize(
    ("surface", "says"),
    [
        (Surface(op="replace", start_id="e0", end_id="gone"), "end_id 'gone' is not logged"),
        (Surface(op="replace", start_id="e0"), "end_id None is not logged"),
        (Surface(op="replace", start=0, end=0, start_id="e0", end_id="e0"), "instead of"),
        (Surface(op="hidden", start_id="e0", end_id="e0"), "got op 'hidden'"),
    ],
)
def test_a_replace_by_ids_that_does_not_resolve_is_refused(surface: Surface, says: str) -> None:
    log = SessionLog()
    log.append(user("m0", id="e0"))
    with pytest.raises(SurfaceError, match=says) as info:
        log.append(user("x", id="x", surface=surface))
    assert "'x'" in str(info.value)
    assert len(log.events()) == 1


def test_live_logs_opened_and_closed_in_threads_are_always_found() -> None:
    """The registry of this process's live logs was changed without a lock: close()
    raised KeyError, and live_writer() missed a log still open (a repair then went
    through under it)."""
    import sys
    import threading

    from universal_event.stores import MemoryStore

    store = MemoryStore()
    seeded = SessionLog(store, "s")
    seeded.append(UserMessageEvent(content=[TextPart(text="hi")]))
    seeded.checkpoint()
    seeded.close()
    problems: list[object] = []
    start = threading.Barrier(4)

    def open_and_close() -> None:
        start.wait()
        for _ in range(1000):
            try:
                log = SessionLog(store, "s", live=True)
                if SessionLog.live_writer(store, "s") is None:
                    problems.append("an open live log was not found")
                log.close()
            except Exception as exc:  # reported below
                problems.append(exc)
                return

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=open_and_close) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    assert problems == []
    assert SessionLog.live_writer(store, "s") is None
