"""``codex exec --json``: every captured run normalised and asserted, plus the item types
and failure modes the captures do not contain (lines written to the exec_events schema,
the shapes quoted in captured/RECIPE.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.codex import CodexAdapter
from universal_event.errors import AdapterError
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    FileChangeEvent,
    NativeUnknownEvent,
    PlanUpdateEvent,
    SessionStartEvent,
    ToolCallEvent,
    ToolOutputEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from universal_event.parts import (
    Provenance,
    ServerToolCallPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

EXEC = Path(__file__).parent.parent / "fixtures" / "captured" / "codex" / "exec"


def run(name: str, **options: Any) -> list[Event]:
    adapter = CodexAdapter(**options)
    return [*adapter.feed((EXEC / name / "stdout.jsonl").read_bytes()), *adapter.close()]


def lines(*objects: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objects)


def types(events: list[Event]) -> list[str]:
    return [str(type(e).__struct_config__.tag) for e in events]


def of(events: list[Event], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def test_tool_turn() -> None:
    events = run("x01_tool", model="gpt-5.5")
    assert types(events) == [
        "session/start", "turn/start", "request/header", "assistant/chunk", "assistant/chunk",
        "tool/call", "assistant/message", "tool/result", "assistant/chunk", "assistant/chunk",
        "assistant/message", "turn/end",
    ]  # fmt: skip
    start = of(events, SessionStartEvent)[0]
    assert start.native_session_id == "01a22607-4b68-76e0-8d1b-53681453f500"
    turn_id = of(events, TurnStartEvent)[0].turn_id
    assert turn_id and all(e.turn_id == turn_id for e in events[1:])
    first, final = of(events, AssistantMessageEvent)
    provenance = Provenance(provider="openai", api="responses", model="gpt-5.5")
    assert first.provenance == provenance
    thinking, text, call = first.content
    assert thinking == ThinkingPart(
        summary=[
            "**Planning the calculation**\n\nThe user wants 1+1 via bc; I will run a shell command."
        ],
        provenance=provenance,
    )
    assert text == TextPart(text="I'll compute that with bc.")
    assert isinstance(call, ToolCallPart) and call.id == "item_2"
    tool_call = of(events, ToolCallEvent)[0]
    assert (tool_call.call_id, tool_call.kind) == ("item_2", "command")
    assert tool_call.arguments == {"command": "/bin/bash -lc 'echo 1+1 | bc'"}
    result = of(events, ToolResultEvent)[0]
    assert (result.call_id, result.exit_code, result.is_error) == ("item_2", 0, False)
    assert result.content == [TextPart(text="2\n")]
    assert [p.text for p in final.content if isinstance(p, TextPart)] == [
        "The result of `echo 1+1 | bc` is **2**."
    ]
    end = of(events, TurnEndEvent)[0]
    assert end.status == "completed"
    assert end.usage is not None and end.usage.scope == "turn"  # summed over 2 requests
    assert (end.usage.input_tokens, end.usage.output_tokens, end.usage.reasoning_tokens) == (
        19532, 114, 42,
    )  # fmt: skip
    chunks = of(events, AssistantChunkEvent)
    assert [c.kind for c in chunks] == ["summary", "text", "summary", "text"]


def test_text_turn() -> None:
    events = run("x03_text")
    (message,) = of(events, AssistantMessageEvent)
    assert [type(p).__name__ for p in message.content] == ["ThinkingPart", "TextPart"]
    assert message.provenance == Provenance(provider="openai", api="responses")
    assert of(events, TurnEndEvent)[0].usage.input_tokens == 9628


def test_failed_command_is_an_error_result() -> None:
    result = of(run("x04_tool_fail"), ToolResultEvent)[0]
    assert (result.exit_code, result.is_error) == (3, True)
    assert result.content == [TextPart(text="oops\n")]
    assert result.details == {
        "status": "failed",
        "command": "/bin/bash -lc 'echo oops >&2; exit 3'",
    }


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("x_err_http500", "We’re currently experiencing high demand, which may cause temporary errors."),
        ("x_err_midstream_close", "stream disconnected before completion: Transport error: network error: error decoding response body"),
    ],
)  # fmt: skip
def test_retry_then_failure(name: str, reason: str) -> None:
    events = run(name)
    retry, final = of(events, ErrorEvent)
    assert retry.message == f"Reconnecting... 1/1 ({reason})"
    assert (retry.retryable, retry.fatal, retry.code) == (True, False, "reconnecting")
    assert (final.message, final.retryable, final.fatal) == (reason, False, True)
    end = events[-1]
    assert isinstance(end, TurnEndEvent) and (end.status, end.error) == ("failed", reason)
    assert not of(events, AssistantMessageEvent)


def test_interrupt_without_terminal_event_is_closed_by_close() -> None:
    adapter = CodexAdapter()
    events = adapter.feed((EXEC / "x_interrupt_sigint" / "stdout.jsonl").read_bytes())
    assert types(events) == ["session/start", "turn/start"]
    closing = adapter.close()
    assert types(closing) == ["turn/end"]
    assert closing[0].status == "interrupted"  # type: ignore[union-attr]
    assert closing[0].turn_id == events[1].turn_id
    assert adapter.close() == []  # closing twice adds nothing


def test_items_completed_before_an_interrupt_are_kept_partial() -> None:
    adapter = CodexAdapter()
    adapter.feed(
        lines(
            {"type": "turn.started"},
            {
                "type": "item.completed",
                "item": {"id": "item_0", "type": "agent_message", "text": "Working"},
            },
        )
    )
    message, end = adapter.close()
    assert isinstance(message, AssistantMessageEvent)
    assert (message.status, message.stop_reason) == ("partial", "interrupted")
    assert isinstance(end, TurnEndEvent) and end.status == "interrupted"


# ---------------------------------------------------------------- retries


def _attempt(text_a: str, text_b: str, first: int) -> list[dict[str, Any]]:
    return [
        {"type": "item.completed", "item": {"id": f"item_{first}", "type": "reasoning", "text": text_a}},
        {"type": "item.completed", "item": {"id": f"item_{first + 1}", "type": "agent_message", "text": text_b}},
    ]  # fmt: skip


def test_items_re_emitted_after_a_retry_are_logged_once() -> None:
    # x_err_no_completed (RECIPE.md): the stream ends without response.completed, Codex
    # retries and prints the completed items again with new ids.
    adapter = CodexAdapter()
    events = adapter.feed(
        lines(
            {"type": "turn.started"},
            *_attempt("Thinking", "Hello", 0),
            {
                "type": "error",
                "message": "Reconnecting... 1/1 (stream closed before response.completed)",
            },
            *_attempt("Thinking", "Hello", 2),
            {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}},
        )
    )
    assert len(of(events, AssistantChunkEvent)) == 2  # the re-emission is not logged again
    (message,) = of(events, AssistantMessageEvent)
    assert [type(p).__name__ for p in message.content] == ["ThinkingPart", "TextPart"]
    assert message.status == "complete"


def test_a_retry_that_answers_differently_keeps_only_the_retry() -> None:
    adapter = CodexAdapter()
    events = adapter.feed(
        lines(
            {"type": "turn.started"},
            *_attempt("Thinking", "Hello", 0),
            {"type": "error", "message": "Reconnecting... 1/2 (x)"},
            *_attempt("Thinking", "Hi there", 2),
            {"type": "turn.completed", "usage": {}},
        )
    )
    (message,) = of(events, AssistantMessageEvent)
    texts = [p.text for p in message.content if isinstance(p, TextPart)]
    assert texts == ["Hi there"]
    assert len(of(events, AssistantChunkEvent)) == 3  # Thinking, Hello, Hi there


# ---------------------------------------------------------------- other item types


def test_unknown_model_warning_item_is_not_fatal() -> None:
    message = "Model metadata for `gpt-5.1-codex` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."
    events = CodexAdapter().feed(
        lines(
            {"type": "turn.started"},
            {
                "type": "item.completed",
                "item": {"id": "item_0", "type": "error", "message": message},
            },
        )
    )
    (error,) = of(events, ErrorEvent)
    assert (error.message, error.fatal, error.retryable) == (message, False, False)


def test_file_change_mcp_web_search_and_todo_list() -> None:
    adapter = CodexAdapter()
    events = adapter.feed(
        lines(
            {"type": "turn.started"},
            {"type": "item.started", "item": {"id": "item_0", "type": "todo_list", "items": [{"text": "read", "completed": False}]}},
            {"type": "item.updated", "item": {"id": "item_0", "type": "todo_list", "items": [{"text": "read", "completed": True}]}},
            {"type": "item.started", "item": {"id": "item_1", "type": "file_change", "changes": [], "status": "in_progress"}},
            {"type": "item.completed", "item": {"id": "item_1", "type": "file_change", "changes": [{"path": "a.py", "kind": "add"}, {"path": "b.py", "kind": "update"}], "status": "completed"}},
            {"type": "item.completed", "item": {"id": "item_2", "type": "mcp_tool_call", "server": "docs", "tool": "search", "arguments": {"q": "x"}, "result": {"content": [{"type": "text", "text": "found"}], "structured_content": None}, "error": None, "status": "completed"}},
            {"type": "item.completed", "item": {"id": "item_3", "type": "mcp_tool_call", "server": "docs", "tool": "search", "arguments": {}, "result": None, "error": {"message": "boom"}, "status": "failed"}},
            {"type": "item.completed", "item": {"id": "item_4", "type": "web_search", "query": "weather"}},
            {"type": "turn.completed", "usage": {}},
        )
    )  # fmt: skip
    plans = of(events, PlanUpdateEvent)
    assert [[(i.text, i.status) for i in p.items] for p in plans] == [
        [("read", "pending")],
        [("read", "completed")],
    ]
    (change,) = of(events, FileChangeEvent)
    assert change.call_id == "item_1" and change.status == "completed"
    assert [(c.path, c.kind) for c in change.changes] == [("a.py", "add"), ("b.py", "update")]
    calls = {c.call_id: c for c in of(events, ToolCallEvent)}
    assert (calls["item_1"].name, calls["item_1"].kind) == ("apply_patch", "file_change")
    assert (calls["item_2"].name, calls["item_2"].kind, calls["item_2"].arguments) == (
        "search", "mcp", {"q": "x"},
    )  # fmt: skip
    results = {r.call_id: r for r in of(events, ToolResultEvent)}
    assert results["item_1"].is_error is False
    assert results["item_2"].content == [TextPart(text="found")] and not results["item_2"].is_error
    assert results["item_3"].content == [TextPart(text="boom")] and results["item_3"].is_error
    assert "item_4" not in calls  # the provider ran the search: no client tool call
    final = of(events, AssistantMessageEvent)[-1]
    assert isinstance(final.content[-1], ServerToolCallPart)
    assert final.content[-1].input == {"query": "weather", "action": None}


def test_command_output_growing_in_item_updated_is_streamed() -> None:
    item = {
        "id": "item_0",
        "type": "command_execution",
        "command": "c",
        "exit_code": None,
        "status": "in_progress",
    }
    events = CodexAdapter().feed(
        lines(
            {"type": "item.started", "item": {**item, "aggregated_output": ""}},
            {"type": "item.updated", "item": {**item, "aggregated_output": "a\n"}},
            {"type": "item.updated", "item": {**item, "aggregated_output": "a\nb\n"}},
            {"type": "item.completed", "item": {**item, "aggregated_output": "a\nb\n", "exit_code": 0, "status": "completed"}},
            {"type": "turn.completed", "usage": {}},  # the response is over: its results
        )
    )  # fmt: skip
    assert [o.delta for o in of(events, ToolOutputEvent)] == ["a\n", "b\n"]
    assert of(events, ToolResultEvent)[0].content == [TextPart(text="a\nb\n")]
    assert len(of(events, ToolCallEvent)) == 1


# ---------------------------------------------------------------- bad input


def test_bytes_cut_anywhere_give_the_same_events() -> None:
    data = (EXEC / "x01_tool" / "stdout.jsonl").read_bytes()
    whole = run("x01_tool")
    adapter = CodexAdapter()
    pieces: list[Event] = []
    for offset in range(0, len(data), 7):
        pieces += adapter.feed(data[offset : offset + 7])
    pieces += adapter.close()
    assert types(pieces) == types(whole)
    assert [_comparable(e) for e in pieces] == [_comparable(e) for e in whole]


def _comparable(event: Event) -> dict[str, Any]:
    """An event without what differs between two runs (ids, time, made-up turn ids)."""
    fields = {f: getattr(event, f) for f in event.__struct_fields__}
    return {k: v for k, v in fields.items() if k not in ("id", "ts", "turn_id")}


def test_str_lines_and_dicts_work_too() -> None:
    adapter = CodexAdapter()
    events = adapter.feed('{"type":"thread.started","thread_id":"t"}')
    events += adapter.feed({"type": "turn.started"})
    assert types(events) == ["session/start", "turn/start"]


def test_malformed_and_unknown_lines_are_kept_and_later_lines_still_normalised() -> None:
    adapter = CodexAdapter()
    events = adapter.feed(
        b'{"type":"turn.started"}\n{not json\n[1,2]\n{"type":"thread.renamed","name":"x"}\n'
        b'{"type":"item.completed","item":{"id":"item_0","type":"hologram"}}\n'
        b'{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"still here"}}\n'
        b'{"type":"turn.completed","usage":{"input_tokens":1}}\n'
    )
    unknown = of(events, NativeUnknownEvent)
    assert [u.reason.split(":")[0] for u in unknown] == [
        "malformed JSON line",
        "JSON line is not an object",
        "unknown exec event type",
        "unknown exec item type",
    ]
    assert unknown[0].payload == "{not json"
    assert unknown[3].payload == {"id": "item_0", "type": "hologram"}
    (message,) = of(events, AssistantMessageEvent)
    assert message.content == [TextPart(text="still here")]


def test_a_truncated_last_line_is_kept_and_the_turn_closed() -> None:
    adapter = CodexAdapter()
    events = adapter.feed(b'{"type":"turn.started"}\n{"type":"item.completed","item":{"id":"it')
    assert types(events) == ["turn/start"]
    closing = adapter.close()
    assert types(closing) == ["native/unknown", "turn/end"]
    assert closing[0].reason.startswith("truncated last line")  # type: ignore[union-attr]
    assert closing[1].status == "interrupted"  # type: ignore[union-attr]


def test_an_item_of_the_wrong_shape_does_not_lose_the_rest() -> None:
    events = CodexAdapter().feed(
        lines(
            {"type": "turn.started"},
            {"type": "item.completed", "item": {"id": "item_0", "type": "todo_list", "items": 5}},
            {"type": "item.completed", "item": "not an object"},
            {"type": "turn.completed", "usage": {}},
        )
    )
    assert types(events) == ["turn/start", "native/unknown", "native/unknown", "turn/end"]


def test_feeding_something_else_is_a_typed_error() -> None:
    with pytest.raises(AdapterError, match=r"\[codex\] cannot normalise a 'int'"):
        CodexAdapter().feed(42)
