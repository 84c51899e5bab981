"""Codex adapters over input of the wrong type or order: every event they make decodes
back (a stored session stays readable), a huge part index is refused, a turn's end
closes its calls, late and repeated lines are kept rather than re-open an item, a web
search re-emitted by a retry is kept once, and a rollout's bad lines say where they are.
The last test feeds seeded mutations of the captured lines and checks all of this holds.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from adapters.codex import CodexAdapter, CodexRolloutAdapter
from adapters.codex._core import MAX_INDEX_GAP
from tests.adapters._fuzz_support import capped_address_space, mutate
from universal_event.codec import decode_lines, encode_lines
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    Event,
    NativeUnknownEvent,
    SessionStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UsageEvent,
    UserMessageEvent,
)
from universal_event.log import SessionLog
from universal_event.parts import (
    ServerToolCallPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

CODEX = Path(__file__).parent.parent / "fixtures" / "captured" / "codex"


def lines(*objects: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objects)


def note(method: str, **params: Any) -> dict[str, Any]:
    return {"method": method, "params": {"threadId": "t", "turnId": "u", **params}}


def normalise(
    data: bytes, adapter: CodexAdapter | CodexRolloutAdapter | None = None
) -> list[Event]:
    adapter = adapter or CodexAdapter()
    return [*adapter.feed(data), *adapter.close()]


def normalise_dicts(objects: list[dict[str, Any]]) -> list[Event]:
    """The same lines fed as decoded dicts (the general path, not the typed one)."""
    adapter = CodexAdapter()
    events: list[Event] = []
    for line in objects:
        events += adapter.feed(line)
    return events + adapter.close()


def of(events: list[Event], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def assert_round_trip(events: list[Event]) -> None:
    """Every event encodes and decodes back to itself (else a stored log is unreadable)."""
    for event in events:
        assert decode_lines(encode_lines([event])) == [event], event


def both_paths(objects: list[dict[str, Any]]) -> list[list[Event]]:
    """Events of the lines as bytes (typed fast path) and as dicts (general path)."""
    return [normalise(lines(*objects)), normalise_dicts(objects)]


# ---------------------------------------------------------------- 1. wrong types


@pytest.mark.parametrize("index", ["1", 1.5, [0], True, {"a": 1}, -1])
@pytest.mark.parametrize(
    ("method", "field"),
    [
        ("item/reasoning/summaryTextDelta", "summaryIndex"),
        ("item/reasoning/textDelta", "contentIndex"),
    ],
)
def test_a_delta_index_of_the_wrong_type_keeps_the_line(
    method: str, field: str, index: Any
) -> None:
    line = note(method, itemId="rs_1", delta="x", **{field: index})
    for events in both_paths([line]):
        assert_round_trip(events)
        assert of(events, AssistantChunkEvent) == []
        [kept] = of(events, NativeUnknownEvent)
        assert kept.native_type == method


@pytest.mark.parametrize("index", [None, 0])
def test_a_missing_or_null_delta_index_is_the_first_part(index: Any) -> None:
    line = note("item/reasoning/summaryTextDelta", itemId="rs_1", delta="x", summaryIndex=index)
    for events in both_paths([line]):
        assert_round_trip(events)
        [chunk] = of(events, AssistantChunkEvent)
        assert (chunk.index, chunk.delta) == (0, "x")


def test_exec_thread_id_of_the_wrong_type_is_dropped() -> None:
    events = normalise(lines({"type": "thread.started", "thread_id": {"x": 1}}))
    assert_round_trip(events)
    [start] = of(events, SessionStartEvent)
    assert start.native_session_id is None and start.source.native_id is None


def test_app_server_fields_of_the_wrong_type_are_dropped() -> None:
    command = {"type": "commandExecution", "id": "call_1", "command": "c", "status": "completed"}
    objects = [
        note("thread/started", thread={"id": 7, "model": ["m"], "cwd": {"a": 1}}),
        note("turn/started", turn={"id": 5, "status": "inProgress"}),
        note("item/started", item={"type": "agentMessage", "id": "msg_1", "phase": 3}),
        note(
            "item/completed", item={"type": "agentMessage", "id": "msg_1", "text": "hi", "phase": 3}
        ),
        note("item/completed", item={**command, "exitCode": True, "durationMs": "9"}),
        note(
            "error",
            willRetry=False,
            error={"message": "m", "codexErrorInfo": {"x": {"httpStatusCode": True}}},
        ),
        note("turn/plan/updated", turnId=["u"], plan=[{"step": "s", "status": "pending"}]),
        note(
            "item/completed",
            item={"type": "userMessage", "id": "u1", "content": [{"type": "image", "url": 1}]},
        ),
        note("turn/completed", turn={"id": "u", "status": "completed", "durationMs": {"ms": 1}}),
    ]
    for events in both_paths(objects):
        assert_round_trip(events)
        [start] = of(events, SessionStartEvent)
        assert (start.native_session_id, start.model, start.cwd) == (None, None, None)
        turn_ids = {e.turn_id for e in events if not isinstance(e, SessionStartEvent)}
        assert len(turn_ids) == 1 and isinstance(turn_ids.pop(), str)
        [end] = of(events, TurnEndEvent)
        assert end.duration_ms is None
        [result] = of(events, ToolResultEvent)
        assert result.exit_code is None


def _rollout_line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-11-29T06:39:09.000Z", "type": kind, "payload": payload}


def test_rollout_fields_of_the_wrong_type_are_dropped() -> None:
    data = lines(
        _rollout_line("session_meta", {"id": 1, "cwd": [], "base_instructions": {"text": 5}}),
        _rollout_line("event_msg", {"type": "task_started", "turn_id": {"t": 1}}),
        _rollout_line(
            "response_item",
            {
                "type": "message",
                "id": -1,
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
            },
        ),
        _rollout_line(
            "response_item",
            {
                "type": "reasoning",
                "id": 3,
                "encrypted_content": ["x"],
                "summary": [{"type": "summary_text", "text": "plan"}],
            },
        ),
        _rollout_line(
            "response_item",
            {
                "type": "message",
                "id": 0,
                "role": "assistant",
                "phase": 1,
                "content": [
                    {
                        "type": "output_text",
                        "text": "ok",
                        "annotations": [{"type": "url_citation", "url": 1, "start_index": "0"}],
                    }
                ],
            },
        ),  # fmt: skip
        _rollout_line(
            "response_item",
            {"type": "function_call", "id": 9, "call_id": "call_1", "name": "f", "arguments": "{}"},
        ),
        _rollout_line(
            "response_item",
            {
                "type": "function_call_output",
                "id": True,
                "call_id": "call_1",
                "output": [{"type": "input_image", "image_url": 5, "file_id": 6}],
            },
        ),  # fmt: skip
        _rollout_line(
            "token_usage_record", {"response_id": {"r": 1}, "usage": {"input_tokens": 1}}
        ),
        _rollout_line(
            "event_msg", {"type": "task_complete", "duration_ms": "1", "error": {"message": 2}}
        ),
    )
    events = normalise(data, CodexRolloutAdapter())
    assert_round_trip(events)
    assert of(events, NativeUnknownEvent) == []
    [user] = of(events, UserMessageEvent)
    assert user.source.native_id is None
    thinking, text, call = of(events, AssistantMessageEvent)[0].content
    assert isinstance(thinking, ThinkingPart) and (thinking.id, thinking.encrypted_content) == (
        None,
        None,
    )
    assert isinstance(text, TextPart) and (text.item_id, text.phase) == (None, None)
    assert (text.citations[0].url, text.citations[0].start_index) == (None, None)
    assert isinstance(call, ToolCallPart) and call.item_id is None
    [result] = of(events, ToolResultEvent)
    assert result.source.native_id is None
    [usage] = of(events, UsageEvent)
    assert usage.message_id is None
    [end] = of(events, TurnEndEvent)
    assert (end.status, end.error, end.duration_ms) == ("failed", "2", None)


def test_rollout_message_text_of_the_wrong_type_keeps_the_line() -> None:
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": 5}],
    }
    events = normalise(lines(_rollout_line("response_item", item)), CodexRolloutAdapter())
    assert_round_trip(events)
    assert of(events, AssistantMessageEvent) == []
    assert len(of(events, NativeUnknownEvent)) == 1


# ---------------------------------------------------------------- 2. huge part index


@pytest.mark.parametrize("index", [MAX_INDEX_GAP + 1, 10**6])
@pytest.mark.parametrize("field", ["summaryIndex", "contentIndex"])
def test_a_part_index_far_beyond_the_parts_keeps_the_line(field: str, index: int) -> None:
    method = (
        "item/reasoning/summaryTextDelta" if field == "summaryIndex" else "item/reasoning/textDelta"
    )
    line = note(method, itemId="rs_1", delta="x", **{field: index})
    for events in both_paths([line]):
        assert of(events, AssistantChunkEvent) == []
        [kept] = of(events, NativeUnknownEvent)
        assert "out of range" in str(kept.reason)
        assert of(events, AssistantMessageEvent) == []  # no item was opened by it


def test_a_huge_part_index_costs_nothing() -> None:
    """It used to allocate a slot per index up to it: under a cap of 256 MiB more address
    space, that fails with MemoryError instead of taking the machine's memory."""
    line = note("item/reasoning/summaryTextDelta", itemId="rs_1", delta="x", summaryIndex=10**12)
    started = time.perf_counter()
    with capped_address_space(256 << 20) as capped:
        if not capped:
            pytest.skip("the address space cannot be capped here")
        events = normalise(lines(line))
    assert time.perf_counter() - started < 1.0
    assert len(of(events, NativeUnknownEvent)) == 1


def test_a_part_index_a_little_ahead_is_accepted() -> None:
    objects = [
        note("turn/started", turn={"id": "u"}),
        note("item/reasoning/summaryTextDelta", itemId="rs_1", delta="a", summaryIndex=0),
        note("item/reasoning/summaryTextDelta", itemId="rs_1", delta="c", summaryIndex=2),
        note("turn/completed", turn={"id": "u", "status": "interrupted"}),
    ]
    for events in both_paths(objects):
        assert [c.index for c in of(events, AssistantChunkEvent)] == [0, 2]
        [message] = of(events, AssistantMessageEvent)
        assert message.content[0].summary == ["a", "", "c"]


# ---------------------------------------------------------------- 3. calls closed by the turn's end


def _exec_command(item_id: str, command: str, *, done: bool) -> dict[str, Any]:
    item = {"id": item_id, "type": "command_execution", "command": command}
    if done:
        item.update(aggregated_output="hi\n", exit_code=0, status="completed")
    else:
        item.update(aggregated_output="", exit_code=None, status="in_progress")
    return {"type": "item.completed" if done else "item.started", "item": item}


def test_an_interrupted_run_then_a_resumed_one_pair_their_own_calls() -> None:
    """exec numbers items from item_0 in every run: the resumed run's command is a new call."""
    first = [{"type": "thread.started", "thread_id": "t1"}, {"type": "turn.started"},
             _exec_command("item_0", "sleep 9", done=False)]  # fmt: skip
    second = [
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "turn.started"},
        _exec_command("item_0", "echo hi", done=False),
        _exec_command("item_0", "echo hi", done=True),
        {
            "type": "item.completed",
            "item": {"id": "item_1", "type": "agent_message", "text": "said hi"},
        },
        {"type": "turn.completed", "usage": {}},
    ]
    events = normalise(lines(*first, *second))
    calls = of(events, ToolCallEvent)
    assert [c.arguments["command"] for c in calls] == ["sleep 9", "echo hi"]
    first_end = next(e for e in events if isinstance(e, TurnEndEvent))
    assert first_end.status == "interrupted"
    # No result is made up for the interrupted call; the new call gets the real one.
    [result] = of(events, ToolResultEvent)
    assert events.index(result) > events.index(calls[1]) > events.index(first_end)
    assert result.details is not None and result.details["command"] == "echo hi"


def test_a_turn_end_forgets_its_open_calls() -> None:
    adapter = CodexAdapter()
    events = normalise(
        lines({"type": "turn.started"}, _exec_command("item_1", "sleep 9", done=False)), adapter
    )
    assert adapter._open_calls == {} and adapter._output_seen == {}
    [end] = of(events, TurnEndEvent)
    assert end.status == "interrupted"
    assert of(events, ToolResultEvent) == []
    # The renderer answers the unanswered call (rule 6), as for the other runtimes.
    log = SessionLog()
    log.extend(events)
    [message] = log.derive_messages()
    assert [type(p) for p in message.content] == [ToolCallPart]


# ---------------------------------------------------------------- 4 and 7. late and repeated lines


def test_exec_late_start_after_completion_is_kept_not_a_new_call() -> None:
    command = _exec_command("item_2", "c", done=True)
    events = normalise(
        lines(
            {"type": "turn.started"},
            command,
            {"type": "item.started", "item": {**command["item"], "status": "in_progress"}},
            {"type": "item.updated", "item": {**command["item"], "aggregated_output": "more"}},
            {
                "type": "item.completed",
                "item": {"id": "item_3", "type": "agent_message", "text": "done"},
            },
            {"type": "turn.completed", "usage": {}},
        )
    )
    assert len(of(events, ToolCallEvent)) == 1
    assert len(of(events, ToolResultEvent)) == 1
    late = of(events, NativeUnknownEvent)
    assert [e.native_type for e in late] == ["item.started", "item.updated"]
    assert all("already has its result" in str(e.reason) for e in late)
    last = of(events, AssistantMessageEvent)[-1]
    assert [type(p) for p in last.content] == [TextPart]


def test_app_server_late_start_and_repeated_completion_are_kept() -> None:
    command = {"type": "commandExecution", "id": "call_1", "command": "c", "cwd": "/",
               "status": "completed", "aggregatedOutput": "2\n", "exitCode": 0, "durationMs": 3}  # fmt: skip
    message = {"type": "agentMessage", "id": "msg_2", "text": "done"}
    objects = [
        note("turn/started", turn={"id": "u", "status": "inProgress", "items": []}),
        note("item/completed", item=command),
        note("item/started", item={**command, "status": "inProgress", "aggregatedOutput": None}),
        note("item/completed", item=command),
        note("item/completed", item=message),
        note("item/completed", item=message),
        note("item/started", item=message),
        note("turn/completed", turn={"id": "u", "status": "completed", "items": []}),
    ]
    for events in both_paths(objects):
        assert_round_trip(events)
        assert len(of(events, ToolCallEvent)) == 1
        assert len(of(events, ToolResultEvent)) == 1
        assert len(of(events, NativeUnknownEvent)) == 4
        last = of(events, AssistantMessageEvent)[-1]
        assert [p.text for p in last.content] == ["done"]


def test_a_late_delta_then_an_interrupt_does_not_add_a_second_part() -> None:
    objects = [
        note("turn/started", turn={"id": "u", "status": "inProgress", "items": []}),
        note("item/started", item={"type": "agentMessage", "id": "msg_1", "text": ""}),
        note("item/agentMessage/delta", itemId="msg_1", delta="Hel"),
        note("item/completed", item={"type": "agentMessage", "id": "msg_1", "text": "Hello"}),
        note("item/agentMessage/delta", itemId="msg_1", delta="lo"),
        note("item/reasoning/summaryTextDelta", itemId="msg_1", delta="x", summaryIndex=0),
        note("turn/completed", turn={"id": "u", "status": "interrupted", "items": []}),
    ]
    for events in both_paths(objects):
        [message] = of(events, AssistantMessageEvent)
        assert [(p.text, p.item_id) for p in message.content] == [("Hello", "msg_1")]
        assert [c.delta for c in of(events, AssistantChunkEvent)] == ["Hel"]
        assert len(of(events, NativeUnknownEvent)) == 2


def test_item_ids_are_forgotten_at_the_turns_end() -> None:
    turn = [
        {"type": "turn.started"},
        _exec_command("item_0", "c", done=True),
        {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "ok"}},
        {"type": "turn.completed", "usage": {}},
    ]
    events = normalise(lines(*turn, *turn))
    assert of(events, NativeUnknownEvent) == []
    assert len(of(events, ToolResultEvent)) == 2
    assert len(of(events, TurnStartEvent)) == 2


# ---------------------------------------------------------------- 5 and 6. retries


def test_a_retry_re_emitting_a_web_search_keeps_it_once() -> None:
    def reasoning(i: int) -> dict[str, Any]:
        return {
            "type": "item.completed",
            "item": {"id": f"item_{i}", "type": "reasoning", "text": "T"},
        }

    def search(i: int) -> dict[str, Any]:
        item = {"id": f"item_{i}", "type": "web_search", "query": "weather"}
        return {"type": "item.completed", "item": item}

    def answer(i: int) -> dict[str, Any]:
        return {
            "type": "item.completed",
            "item": {"id": f"item_{i}", "type": "agent_message", "text": "Hi"},
        }

    retry = {
        "type": "error",
        "message": "Reconnecting... 1/2 (stream closed before response.completed)",
    }
    events = normalise(
        lines({"type": "turn.started"}, reasoning(0), search(1), answer(2), retry,
              reasoning(3), search(4), answer(5), {"type": "turn.completed", "usage": {}})
    )  # fmt: skip
    [message] = of(events, AssistantMessageEvent)
    assert [type(p) for p in message.content] == [ThinkingPart, ServerToolCallPart, TextPart]
    assert message.content[1].id == "item_4"  # the retry's copy
    assert [c.delta for c in of(events, AssistantChunkEvent)] == ["T", "Hi"]


def test_a_different_web_search_after_a_retry_is_not_a_re_emission() -> None:
    def search(i: int, query: str) -> dict[str, Any]:
        item = {"id": f"item_{i}", "type": "web_search", "query": query}
        return {"type": "item.completed", "item": item}

    retry = {"type": "error", "message": "Reconnecting... 1/2 (stream closed)"}
    events = normalise(
        lines({"type": "turn.started"}, search(0, "a"), retry, search(1, "b"),
              {"type": "turn.completed", "usage": {}})
    )  # fmt: skip
    [message] = of(events, AssistantMessageEvent)
    assert [p.input["query"] for p in message.content] == ["b"]


def test_app_server_re_emitted_item_is_in_the_message_once_its_chunks_logged_again() -> None:
    """What the _core docstring says: the retry's deltas are logged, the item kept once."""

    def reasoning(item_id: str) -> list[dict[str, Any]]:
        return [
            note(
                "item/started",
                item={"type": "reasoning", "id": item_id, "summary": [], "content": []},
            ),
            note("item/reasoning/summaryTextDelta", itemId=item_id, delta="Plan", summaryIndex=0),
            note(
                "item/completed",
                item={"type": "reasoning", "id": item_id, "summary": ["Plan"], "content": []},
            ),
        ]

    objects = [
        note("turn/started", turn={"id": "u", "status": "inProgress", "items": []}),
        *reasoning("rs_1"),
        note("error", willRetry=True, error={"message": "Reconnecting... 1/1"}),
        *reasoning("rs_2"),
        note("turn/completed", turn={"id": "u", "status": "completed", "items": []}),
    ]
    for events in both_paths(objects):
        assert [c.message_id for c in of(events, AssistantChunkEvent)] == ["rs_1", "rs_2"]
        [message] = of(events, AssistantMessageEvent)
        assert [p.id for p in message.content] == ["rs_2"]


# ---------------------------------------------------------------- 8. where a bad rollout line is


def test_a_rollout_line_kept_says_its_line_number() -> None:
    good = (CODEX / "exec" / "x01_tool" / "rollout.jsonl").read_bytes().splitlines(keepends=True)
    data = b"".join([good[0], b"\n", b"{not json\n", good[1],
                     b'{"timestamp":"x","type":"brand_new","payload":{}}\n', *good[2:]])  # fmt: skip
    for chunk in (len(data), 7):  # whole, and cut anywhere
        adapter = CodexRolloutAdapter()
        events = [e for i in range(0, len(data), chunk) for e in adapter.feed(data[i : i + chunk])]
        events += adapter.close()
        kept = {e.native_type: str(e.reason) for e in of(events, NativeUnknownEvent)}
        assert kept[None].startswith("malformed JSON line") and kept[None].endswith("(line 3)")
        assert kept["brand_new"] == "rollout line not modelled (line 5)"


def test_a_rollout_fed_as_dicts_counts_each_as_a_line() -> None:
    adapter = CodexRolloutAdapter()
    adapter.feed({"timestamp": "x", "type": "session_meta", "payload": {"id": "s"}})
    [kept] = adapter.feed({"timestamp": "x", "type": "brand_new", "payload": {}})
    assert isinstance(kept, NativeUnknownEvent) and str(kept.reason).endswith("(line 2)")
    no_payload, truncated = adapter.feed(b'{"type": "x"}\n{"cut') + adapter.close()
    assert isinstance(no_payload, NativeUnknownEvent) and isinstance(truncated, NativeUnknownEvent)
    assert str(no_payload.reason).endswith("(line 3)")
    assert str(truncated.reason).startswith("truncated last line")
    assert str(truncated.reason).endswith("(line 4)")


# ---------------------------------------------------------------- property: mutated captures

_CAPTURES = [
    *(("codex", p) for p in sorted(CODEX.glob("exec/*/stdout.jsonl"))),
    *(("codex", p) for p in sorted(CODEX.glob("app_server/*/wire/server_to_client.jsonl"))),
    *(("codex", p) for p in sorted(CODEX.glob("app_server/*/notifications.jsonl"))),
    *(("rollout", p) for p in sorted(CODEX.glob("*/*/rollout.jsonl"))),
]


@pytest.mark.parametrize("seed", [3, 7, 11])
def test_mutated_captured_lines_give_events_that_round_trip(seed: int) -> None:
    """A bounded, seeded fuzz: each trial mutates a few lines of a capture (1-3 changes
    each) and feeds it as bytes and as dicts; nothing escapes and every event decodes."""
    rng = random.Random(seed)
    for _ in range(60):
        kind, path = rng.choice(_CAPTURES)
        raws = path.read_bytes().splitlines()
        mutated = [
            json.dumps(mutate(json.loads(raw), rng) if rng.random() < 0.3 else json.loads(raw))
            for raw in raws
        ]
        for as_dicts in (False, True):
            adapter = CodexAdapter() if kind == "codex" else CodexRolloutAdapter()
            events: list[Event] = []
            if as_dicts:
                for text in mutated:
                    line = json.loads(text)
                    if isinstance(line, dict):
                        events += adapter.feed(line)
            else:
                events += adapter.feed("\n".join(mutated).encode() + b"\n")
            events += adapter.close()
            assert decode_lines(encode_lines(events)) == events, (path.name, seed)
