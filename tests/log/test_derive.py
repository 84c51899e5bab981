"""derive_messages: incremental, cached, and equal to a from-scratch derive and a reload."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.log.conftest import PROVENANCE, add_turn
from universal_event import (
    AssistantChunkEvent,
    AssistantMessage,
    AssistantMessageEvent,
    Event,
    Message,
    SessionLog,
    Surface,
    TextPart,
    ToolMessage,
    ToolResultEvent,
    TurnStartEvent,
    UserMessage,
    UserMessageEvent,
    derive_messages,
)
from universal_event import derive as derive_module
from universal_event.stores.sqlite import SqliteStore


def naive_derive(events: list[Event]) -> list[Message]:
    """An independent oracle: a plain list of (seq, message), ranges found by search."""
    surface: list[tuple[int, Message]] = []
    for event in events:
        if isinstance(event, UserMessageEvent):
            message: Message = UserMessage(seq=event.seq, content=event.content)
        elif isinstance(event, AssistantMessageEvent):
            message = AssistantMessage(
                seq=event.seq,
                content=event.content,
                provenance=event.provenance,
                message_id=event.message_id,
                stop_reason=event.stop_reason,
                status=event.status,
            )
        elif isinstance(event, ToolResultEvent):
            message = ToolMessage(
                seq=event.seq,
                call_id=event.call_id,
                content=event.content,
                name=event.name,
                is_error=event.is_error,
            )
        else:
            continue
        intent = event.surface or Surface()
        if intent.op == "append":
            surface.append((event.seq, message))
        elif intent.op == "replace":
            seqs = [seq for seq, _ in surface]
            first, last = seqs.index(intent.start), seqs.index(intent.end)
            surface[first : last + 1] = [(event.seq, message)]
    return [message for _, message in surface]


def test_derive_messages_of_a_plain_event_list() -> None:
    log = SessionLog()
    for turn in range(3):
        add_turn(log, turn, tools=2)
    messages = derive_messages(log.events())
    assert messages == naive_derive(log.events()) == log.derive_messages()
    assert [m.__struct_config__.tag for m in messages[:5]] == [
        "user", "assistant", "tool", "assistant", "tool",
    ]  # fmt: skip


def test_appending_derives_only_the_new_event(monkeypatch: pytest.MonkeyPatch) -> None:
    log = SessionLog()
    for turn in range(50):
        add_turn(log, turn, tools=2)
    calls: list[int] = []
    original = derive_module.message_of

    def counting(event: Any) -> Message:
        calls.append(event.seq)
        return original(event)

    monkeypatch.setattr(derive_module, "message_of", counting)
    appended = log.append(UserMessageEvent(content=[TextPart(text="one more")]))
    log.derive_messages()
    assert calls == [appended.seq]
    calls.clear()
    seqs = log.surface_seqs()
    replaced = log.replace(seqs[5], seqs[20], UserMessageEvent(content=[TextPart(text="summary")]))
    log.derive_messages()
    assert calls == [replaced.seq]
    calls.clear()
    log.append(AssistantChunkEvent(delta="streaming"))
    log.append(TurnStartEvent())
    assert calls == []


# ---------------------------------------------------------------- the state machine

_texts = st.text(alphabet="abcxyz ", min_size=0, max_size=8)


class DeriveMachine(RuleBasedStateMachine):
    """Random appends, replaces, compressions, prunes, checkpoints and reloads.

    After every step the live, incremental messages must equal a from-scratch derive
    of the log's events and the independent oracle; after a reload, the reloaded log's
    messages must equal the live ones exactly.
    """

    def __init__(self) -> None:
        super().__init__()
        self.store = SqliteStore(":memory:", synchronous="OFF")
        self.log = SessionLog(self.store, "machine")
        self.calls = 0

    def teardown(self) -> None:
        self.store.close()

    @rule(text=_texts, hidden=st.booleans())
    def user(self, text: str, hidden: bool) -> None:
        surface = Surface(op="hidden") if hidden else None
        self.log.append(UserMessageEvent(content=[TextPart(text=text)]), surface=surface)

    @rule(text=_texts, partial=st.booleans())
    def assistant(self, text: str, partial: bool) -> None:
        self.log.append(
            AssistantMessageEvent(
                content=[TextPart(text=text)],
                provenance=PROVENANCE,
                status="partial" if partial else "complete",
            )
        )

    @rule(text=_texts, is_error=st.booleans())
    def tool_result(self, text: str, is_error: bool) -> None:
        self.calls += 1
        self.log.append(
            ToolResultEvent(
                call_id=f"c{self.calls}", content=[TextPart(text=text)], is_error=is_error
            )
        )

    @rule(delta=_texts)
    def chunk(self, delta: str) -> None:
        self.log.append(AssistantChunkEvent(delta=delta))

    @precondition(lambda self: len(self.log.surface_seqs()) > 0)
    @rule(data=st.data(), text=_texts)
    def replace(self, data: st.DataObject, text: str) -> None:
        seqs = self.log.surface_seqs()
        first = data.draw(st.integers(0, len(seqs) - 1))
        last = data.draw(st.integers(first, len(seqs) - 1))
        before = self.log.generation
        self.log.replace(seqs[first], seqs[last], UserMessageEvent(content=[TextPart(text=text)]))
        assert self.log.generation == before + 1

    @precondition(lambda self: len(self.log.surface_seqs()) > 1)
    @rule(data=st.data(), text=_texts)
    def compress(self, data: st.DataObject, text: str) -> None:
        seqs = self.log.surface_seqs()
        first = data.draw(st.integers(0, len(seqs) - 2))
        last = data.draw(st.integers(first, len(seqs) - 1))
        self.log.compress(seqs[first], seqs[last], text or "summary")

    @rule(data=st.data())
    def prune(self, data: st.DataObject) -> None:
        results = [
            seq for seq in self.log.surface_seqs() if isinstance(self.log.get(seq), ToolResultEvent)
        ]
        if results:
            chosen = data.draw(st.lists(st.sampled_from(results), min_size=1, unique=True))
            self.log.prune(chosen, tokens_saved=len(chosen))

    @rule()
    def checkpoint(self) -> None:
        self.log.checkpoint()

    @rule()
    def reload(self) -> None:
        self.log.checkpoint()
        live = self.log.derive_messages()
        self.log.close()
        if self.log.next_seq:
            self.log = SessionLog.open(self.store, "machine", live=True)
        else:
            self.log = SessionLog(self.store, "machine")
        assert self.log.derive_messages() == live

    @invariant()
    def incremental_equals_from_scratch(self) -> None:
        events = self.log.events()
        live = self.log.derive_messages()
        assert live == derive_messages(events)
        assert live == naive_derive(events)
        assert [m.seq for m in live] == self.log.surface_seqs()


DeriveMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestDeriveMachine = DeriveMachine.TestCase
