"""Claude Code adapter fixes: tool results that come while their message still streams,
``<synthetic>`` messages that are no API error, user lines of mixed blocks, an init line
without a session id.

The stream inputs follow what the real CLI printed (Claude Code 2.1.332 through
claude-agent-sdk 0.2.189, fake model server, partial messages on): a tool runs as soon as
its ``tool_use`` block is complete, so its result line comes before the next block's
``content_block_start`` (two calls) or before ``message_delta``/``message_stop``.
"""

from __future__ import annotations

from typing import Any

from adapters.claude_sdk import ClaudeCodeAdapter, ClaudeTranscriptAdapter
from universal_event.events import (
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    SessionStartEvent,
    StepEndEvent,
    ToolResultEvent,
    UserMessageEvent,
)
from universal_event.log import SessionLog
from universal_event.parts import ToolCallPart


def _se(event: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    return {"type": "stream_event", "event": event, "parent_tool_use_id": parent}


def _start(mid: str, parent: str | None = None) -> dict[str, Any]:
    message = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    return _se({"type": "message_start", "message": message}, parent)


def _tool_block(
    mid: str, index: int, call: str, command: str, parent: str | None = None
) -> list[dict[str, Any]]:
    """A streamed ``tool_use`` block: its events and the ``assistant`` line (which the CLI
    prints before the block's ``content_block_stop``)."""
    block = {"type": "tool_use", "id": call, "name": "Bash", "input": {}}
    return [
        _se({"type": "content_block_start", "index": index, "content_block": block}, parent),
        _se(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {
                    "type": "input_json_delta",
                    "partial_json": f'{{"command": "{command}"}}',
                },
            },
            parent,
        ),
        _assistant(mid, [{**block, "input": {"command": command}}], parent),
        _se({"type": "content_block_stop", "index": index}, parent),
    ]


def _text_block(mid: str, index: int, text: str, parent: str | None = None) -> list[dict[str, Any]]:
    return [
        _se(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
            parent,
        ),
        _se(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": text},
            },
            parent,
        ),
        _assistant(mid, [{"type": "text", "text": text}], parent),
        _se({"type": "content_block_stop", "index": index}, parent),
    ]


def _stop(reason: str, parent: str | None = None) -> list[dict[str, Any]]:
    return [
        _se(
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
            parent,
        ),
        _se({"type": "message_stop"}, parent),
    ]


def _assistant(mid: str, blocks: list[dict[str, Any]], parent: str | None = None) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"id": mid, "model": "claude-x", "content": blocks, "stop_reason": None},
        "parent_tool_use_id": parent,
    }


def _result_line(call: str, text: str, parent: str | None = None) -> dict[str, Any]:
    return {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call, "content": text}],
        },
        "parent_tool_use_id": parent,
        "tool_use_result": {"stdout": text, "stderr": ""},
    }


_RESULT = {"type": "result", "subtype": "success", "is_error": False, "stop_reason": "end_turn"}


def _run(lines: list[dict[str, Any]], prompt: str = "go") -> tuple[list[Event], SessionLog]:
    adapter, log = ClaudeCodeAdapter(), SessionLog()
    log.extend(adapter.user_prompt(prompt))
    for line in lines:
        log.extend(adapter.feed(line))
    log.extend(adapter.close())
    return list(log.events()), log


def _tags(events: list[Event], *tags: str) -> list[str]:
    return [e.__struct_config__.tag for e in events if e.__struct_config__.tag in tags]


def test_a_result_while_the_next_call_streams_does_not_split_the_message() -> None:
    """Two calls in one message: the first call's result comes while the second
    ``tool_use`` block streams. One complete message with both calls, then the results
    in order, as the CLI's next request has them."""
    lines = [
        _start("msg_1"),
        *_text_block("msg_1", 0, "Two."),
        *_tool_block("msg_1", 1, "toolu_a", "echo aaa"),
        _result_line("toolu_a", "aaa"),
        *_tool_block("msg_1", 2, "toolu_b", "echo bbb"),
        _result_line("toolu_b", "bbb"),
        *_stop("tool_use"),
        _start("msg_2"),
        *_text_block("msg_2", 0, "Done."),
        *_stop("end_turn"),
        _RESULT,
    ]
    events, log = _run(lines)
    assert _tags(events, "assistant/message", "tool/result", "step/end", "turn/end") == [
        "assistant/message",
        "tool/result",
        "tool/result",
        "step/end",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    first = next(e for e in events if isinstance(e, AssistantMessageEvent))
    assert first.status == "complete" and first.stop_reason == "tool_use"
    assert [p.id for p in first.content if isinstance(p, ToolCallPart)] == ["toolu_a", "toolu_b"]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [(r.call_id, r.step) for r in results] == [("toolu_a", 0), ("toolu_b", 0)]
    assert results[0].details == {"tool_use_result": {"stdout": "aaa", "stderr": ""}}
    steps = [e for e in events if isinstance(e, StepEndEvent)]
    assert [(s.status, s.stop_reason) for s in steps] == [
        ("completed", "tool_use"),
        ("completed", "end_turn"),
    ]
    roles = [m.__struct_config__.tag for m in log.derive_messages()]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]


def test_a_result_before_message_stop_leaves_the_message_complete() -> None:
    """One call whose tool returns before ``message_delta``: the message is complete,
    with its stop reason, and its step ends ``completed``."""
    lines = [
        _start("msg_1"),
        *_tool_block("msg_1", 0, "toolu_a", "echo aaa"),
        _result_line("toolu_a", "aaa"),
        *_stop("tool_use"),
        _start("msg_2"),
        *_text_block("msg_2", 0, "Done."),
        *_stop("end_turn"),
        _RESULT,
    ]
    events, _ = _run(lines)
    first = next(e for e in events if isinstance(e, AssistantMessageEvent))
    assert (first.status, first.stop_reason) == ("complete", "tool_use")
    tags = [e.__struct_config__.tag for e in events]
    assert tags.index("assistant/message") < tags.index("tool/result") < tags.index("step/end")
    assert [e.status for e in events if isinstance(e, StepEndEvent)] == ["completed", "completed"]


def test_held_results_are_logged_when_the_stream_ends_without_message_stop() -> None:
    """A result held for a message whose stream never ends (the CLI went away) is still
    logged, after the message (partial), at close."""
    lines = [_start("msg_1"), *_tool_block("msg_1", 0, "toolu_a", "echo aaa")]
    lines.append(_result_line("toolu_a", "aaa"))
    events, _ = _run(lines)
    tags = [e.__struct_config__.tag for e in events]
    assert tags.index("assistant/message") < tags.index("tool/result")
    message = next(e for e in events if isinstance(e, AssistantMessageEvent))
    assert message.status == "partial"


def test_sub_agent_lines_do_not_end_the_main_message() -> None:
    """An async Agent call returns at once; its sub-agent's lines (``parent_tool_use_id``)
    come while the main message still streams: the main message stays one, the
    sub-agent's message is logged (hidden) before its own tool result."""
    sub = "toolu_agent"
    lines = [
        _start("msg_1"),
        *_tool_block("msg_1", 0, sub, "delegate"),
        _result_line(sub, "Async agent launched"),
        # sub-agent lines come without stream events (as the CLI prints them)
        _assistant("msg_sub", [{"type": "text", "text": "sub-agent here"}], sub),
        _assistant(
            "msg_sub", [{"type": "tool_use", "id": "toolu_inner", "name": "Bash", "input": {}}], sub
        ),
        _result_line("toolu_inner", "inner", sub),
        *_tool_block("msg_1", 1, "toolu_b", "echo bbb"),
        *_stop("tool_use"),
        _result_line("toolu_b", "bbb"),
        _start("msg_2"),
        *_text_block("msg_2", 0, "Done."),
        *_stop("end_turn"),
        _RESULT,
    ]
    events, log = _run(lines)
    main = [e for e in events if isinstance(e, AssistantMessageEvent) and e.parent_id is None]
    assert [m.message_id for m in main] == ["msg_1", "msg_2"]
    assert [m.status for m in main] == ["complete", "complete"]
    assert [p.id for p in main[0].content if isinstance(p, ToolCallPart)] == [sub, "toolu_b"]
    main_results = [e.call_id for e in events if isinstance(e, ToolResultEvent) and not e.parent_id]
    assert main_results == [sub, "toolu_b"]
    roles = [m.__struct_config__.tag for m in log.derive_messages()]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    sub_tags = [e.__struct_config__.tag for e in events if e.parent_id == sub]
    assert sub_tags.index("assistant/message") < sub_tags.index("tool/result")


def _synthetic(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {
            "id": "21de3244-79b8-4de1-a064-52e4b91a86c2",
            "model": "<synthetic>",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "stop_sequence",
        },
        "parent_tool_use_id": None,
        **fields,
    }


def test_a_synthetic_message_without_an_error_is_an_assistant_message() -> None:
    """After an interrupt Claude Code writes ``No response requested.`` (model
    ``<synthetic>``, ``isApiErrorMessage: false``, no ``error``) and sends it to the model."""
    adapter, log = ClaudeTranscriptAdapter(), SessionLog()
    lines = [
        {"type": "user", "message": {"role": "user", "content": "count"}, "uuid": "u1"},
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "[Request interrupted by user]"}],
            },
            "uuid": "u2",
        },
        _synthetic("No response requested.", isApiErrorMessage=False, uuid="a1"),
        {"type": "user", "message": {"role": "user", "content": "go on"}, "uuid": "u3"},
    ]
    for line in lines:
        log.extend(adapter.feed(line))
    log.extend(adapter.close())
    assert not [e for e in log.events() if isinstance(e, ErrorEvent)]
    history = log.derive_messages()
    assert [m.__struct_config__.tag for m in history] == ["user", "user", "assistant", "user"]


def test_synthetic_api_errors_stay_errors() -> None:
    for fields in ({"error": "server_error"}, {"isApiErrorMessage": True}):
        events = ClaudeCodeAdapter().feed(_synthetic("API Error: 500 boom", **fields))
        (error,) = [e for e in events if isinstance(e, ErrorEvent)]
        assert error.fatal and error.http_status == 500
        assert not [e for e in events if isinstance(e, AssistantMessageEvent)]


_CALL = _assistant("m1", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}])


def _user(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "user",
        "message": {"role": "user", "content": blocks},
        "parent_tool_use_id": None,
    }


def test_a_user_line_keeps_the_order_of_its_blocks() -> None:
    line = _user(
        [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
            {"type": "text", "text": "and also this"},
        ]
    )
    events, _ = _run([_CALL, line])
    assert _tags(events, "tool/result", "user/message")[-2:] == ["tool/result", "user/message"]


def test_a_malformed_user_line_is_kept_once() -> None:
    """A ``tool_result`` without its call id: the line is kept whole, its text not also
    logged as a user message."""
    line = _user([{"type": "text", "text": "hi"}, {"type": "tool_result", "content": "ok"}])
    events, _ = _run([_CALL, line])
    users = [e for e in events if isinstance(e, UserMessageEvent)]
    assert [getattr(p, "text", None) for e in users for p in e.content] == ["go"]
    assert _tags(events, "native/unknown") == ["native/unknown"]


def test_an_init_line_without_a_session_id_starts_the_session_once() -> None:
    adapter = ClaudeCodeAdapter()
    init = {"type": "system", "subtype": "init", "tools": [], "model": "m"}
    events = adapter.feed(init) + adapter.feed(init)
    starts = [e for e in events if isinstance(e, SessionStartEvent)]
    assert len(starts) == 1 and starts[0].native_session_id is None
