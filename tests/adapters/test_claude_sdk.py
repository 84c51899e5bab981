"""Claude Code stream-json, claude_agent_sdk typed messages, and transcripts → events.

Facts pinned from the captures (tests/fixtures/captured/claude) and the recorded
transcript (tests/fixtures/recorded/claude-code).
"""

from __future__ import annotations

import io
import json
import time
from contextlib import redirect_stdout
from datetime import datetime
from pathlib import Path

import pytest
from claude_agent_sdk._internal.message_parser import parse_message

from adapters.claude_sdk import ClaudeCodeAdapter, ClaudeTranscriptAdapter
from tests.adapters._anthropic_support import CAPTURED, TRANSCRIPTS, sdk_objects
from tests.adapters._render_support import derived_texts
from universal_event import codec
from universal_event.cli import main
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    NativeUnknownEvent,
    RequestHeaderEvent,
    SessionStartEvent,
    StepEndEvent,
    TaskEndEvent,
    TaskStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    UsageEvent,
    UserMessageEvent,
)
from universal_event.ingest import append_imported, import_events
from universal_event.log import SessionLog
from universal_event.parts import TextPart, ThinkingPart, ToolCallPart
from universal_event.stores import MemoryStore


def _run(path: Path, chunk: int | None = None) -> list[Event]:
    adapter = ClaudeCodeAdapter()
    data = path.read_bytes()
    events: list[Event] = []
    step = chunk or len(data)
    for offset in range(0, len(data), step):
        events += adapter.feed(data[offset : offset + step])
    return events + adapter.close()


def _structure(events: list[Event]) -> list[str]:
    return [
        e.__struct_config__.tag
        for e in events
        if e.__struct_config__.tag not in ("assistant/chunk", "native/unknown")
    ]


def test_tool_turn_stream_json() -> None:
    events = _run(CAPTURED / "cli" / "c01_tool" / "stdout.jsonl")
    assert _structure(events) == [
        "session/start",
        "request/header",
        "turn/start",
        "step/start",
        "tool/call",  # logged as its block arrives: the tool may start before the message ends
        "assistant/message",
        "tool/result",
        "step/end",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    (call,) = [e for e in events if isinstance(e, ToolCallEvent)]
    assert (call.call_id, call.name) == ("toolu_016f686f1746544348b5f5f1", "Bash")
    assert call.arguments["command"] == "echo 1+1 | bc"
    start = next(e for e in events if isinstance(e, SessionStartEvent))
    assert start.native_session_id == "3a419201-3e06-4179-b8a5-4b56bc3cc587"
    assert start.cwd == "/sandbox/work/c01_tool"
    header = next(e for e in events if isinstance(e, RequestHeaderEvent))
    assert header.model == "claude-sonnet-4-5-20250929" and len(header.tools) == 26
    first, second = [e for e in events if isinstance(e, AssistantMessageEvent)]
    # Three assistant lines (one per block) sharing one message id → one message.
    assert first.message_id == "msg_01373d2b47bd4b41318e25b3"
    assert [type(p) for p in first.content] == [ThinkingPart, TextPart, ToolCallPart]
    assert second.content == [TextPart(text="The result of `echo 1+1 | bc` is **2**.")]
    (result,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.call_id == "toolu_016f686f1746544348b5f5f1" and result.name == "Bash"
    assert result.details == {
        "tool_use_result": {
            "stdout": "2",
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
        }
    }
    end = events[-1]
    assert isinstance(end, TurnEndEvent) and end.status == "completed"
    assert end.usage is not None and (end.usage.input_tokens, end.usage.output_tokens) == (
        44415,
        54,
    )
    assert end.cost_usd == pytest.approx(0.134055) and end.duration_ms == 532
    # the result line is kept whole: what has no field (denials, per-model usage, API time)
    assert end.native is not None and end.native["type"] == "result"
    assert {"permission_denials", "modelUsage", "duration_api_ms"} <= set(end.native)


def test_failed_tool_result_keeps_the_string_tool_use_result() -> None:
    events = _run(CAPTURED / "cli" / "c05_tool_fail_partial" / "stdout.jsonl")
    (result,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.is_error and result.content == [TextPart(text="Exit code 3\noops")]
    assert result.details == {"tool_use_result": "Error: Exit code 3\noops"}


def test_partial_messages_give_chunks_usage_and_stop_reasons() -> None:
    events = _run(CAPTURED / "cli" / "c02_tool_partial" / "stdout.jsonl", chunk=97)
    messages = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert [m.stop_reason for m in messages] == ["tool_use", "end_turn"]
    for message in messages:
        chunks = [
            e
            for e in events
            if isinstance(e, AssistantChunkEvent) and e.message_id == message.message_id
        ]
        assert all(c.source and c.source.runtime == "claude-code" for c in chunks)
        for index, part in enumerate(message.content):
            of_block = [c for c in chunks if c.index == index]
            if isinstance(part, TextPart):
                assert "".join(c.delta for c in of_block) == part.text
            elif isinstance(part, ThinkingPart):
                assert "".join(c.delta for c in of_block if c.kind == "thinking") == part.text
                assert "".join(c.delta for c in of_block if c.kind == "signature") == part.signature
            elif isinstance(part, ToolCallPart):
                raw = "".join(c.delta for c in of_block)
                assert json.loads(raw) == part.arguments
    usages = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert [(u.input_tokens, u.output_tokens) for u in usages] == [(22127, 44), (22296, 10)]


def test_interrupt_gives_a_partial_message_and_an_interrupted_turn() -> None:
    events = _run(CAPTURED / "cli" / "c_interrupt_sigint_partial" / "stdout.jsonl")
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert message.status == "partial"
    (user,) = [e for e in events if isinstance(e, UserMessageEvent)]
    assert user.content == [TextPart(text="[Request interrupted by user]")]
    # the step of the partial message was interrupted too (the CLI closes the cut
    # stream with a message_stop of its own, without a stop reason)
    (step,) = [e for e in events if isinstance(e, StepEndEvent)]
    assert step.source is not None and step.source.native_id == message.message_id
    assert step.status == "interrupted"
    end = events[-1]
    assert isinstance(end, TurnEndEvent) and end.status == "interrupted"


def test_api_retries_and_synthetic_error() -> None:
    events = _run(CAPTURED / "cli" / "c_err_midstream_close_partial_nofallback" / "stdout.jsonl")
    assert not [e for e in events if isinstance(e, AssistantMessageEvent)]
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [(e.code, e.fatal, e.retryable) for e in errors] == [
        ("unknown", False, True),
        ("unknown", False, True),
        ("server_error", True, True),
    ]
    assert "ECONNRESET" in errors[-1].message
    assert errors[-1].http_status is None  # the connection was lost: no response
    # three streams cut by ECONNRESET (two retried, the last one given up): failed steps
    steps = [e for e in events if isinstance(e, StepEndEvent)]
    assert [(e.step, e.status, e.stop_reason) for e in steps] == [
        (0, "failed", None),
        (1, "failed", None),
        (2, "failed", None),
    ]
    assert [e.step for e in errors] == [0, 1, 2]
    end = events[-1]
    assert isinstance(end, TurnEndEvent) and end.status == "failed"


@pytest.mark.parametrize("run", ["c01_tool", "c02_tool_partial", "c05_tool_fail_partial"])
def test_steps_of_complete_messages_end_completed(run: str) -> None:
    """Only a cut message changes the step's status: with partial messages (a stop
    reason from the stream) and without (the lines cannot tell: completed)."""
    events = _run(CAPTURED / "cli" / run / "stdout.jsonl")
    steps = [e for e in events if isinstance(e, StepEndEvent)]
    assert [e.status for e in steps] == ["completed", "completed"]


def test_typed_sdk_messages_give_the_same_step_statuses() -> None:
    for name in ("c_interrupt_sigint_partial", "c_err_midstream_close_partial_nofallback"):
        path = CAPTURED / "cli" / name / "stdout.jsonl"
        typed = ClaudeCodeAdapter()
        lines = [json.loads(line) for line in path.open() if line.strip()]
        events = [e for line in lines for e in typed.feed(parse_message(line))] + typed.close()
        expected = [e.status for e in _run(path) if isinstance(e, StepEndEvent)]
        assert [e.status for e in events if isinstance(e, StepEndEvent)] == expected
        assert set(expected) <= {"interrupted", "failed"}


def _synthetic_error(events: list[Event]) -> ErrorEvent:
    (error,) = [e for e in events if isinstance(e, ErrorEvent) and e.fatal]
    assert error.source is not None and error.source.model == "<synthetic>"
    return error


def test_synthetic_error_keeps_the_http_status() -> None:
    """The CLI's final API error (``api_error_status: 500``) has ``http_status`` on
    both paths: the stream-json line, and the SDK's ``AssistantMessage`` (which drops
    ``api_error_status``; the status is in its ``API Error: 500 …`` text)."""
    path = CAPTURED / "cli" / "c_err_http500_partial" / "stdout.jsonl"
    lines = [json.loads(line) for line in path.open() if line.strip()]
    from_lines = _synthetic_error(_run(path))
    assert (from_lines.code, from_lines.http_status) == ("server_error", 500)
    assert from_lines.native["api_error_status"] == 500
    assert from_lines.native["request_id"] == "req_0e472e17756f4fbba5bf364f"
    typed = ClaudeCodeAdapter()
    from_objects = _synthetic_error(
        [e for line in lines for e in typed.feed(parse_message(line))] + typed.close()
    )
    assert from_objects.http_status == 500
    assert (from_objects.message, from_objects.retryable) == (
        from_lines.message,
        from_lines.retryable,
    )
    # native: what the typed object has, nothing made up
    assert from_objects.native["error"] == "server_error"
    assert "api_error_status" not in from_objects.native
    sdk = ClaudeCodeAdapter()
    objects = sdk_objects(CAPTURED / "sdk" / "sdk03_err_http500_partial" / "sdk_messages.jsonl")
    assert (
        _synthetic_error([e for o in objects for e in sdk.feed(o)] + sdk.close()).http_status == 500
    )


def test_synthetic_error_status_prefers_the_line_field() -> None:
    line = {
        "type": "assistant",
        "message": {
            "id": "x",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": "API Error: Rate limit reached"}],
        },
        "error": "rate_limit",
        "api_error_status": 429,
    }
    assert _synthetic_error(ClaudeCodeAdapter().feed(line)).http_status == 429
    without = {key: value for key, value in line.items() if key != "api_error_status"}
    assert _synthetic_error(ClaudeCodeAdapter().feed(without)).http_status is None


def test_cut_stream_json_ends_the_turn_interrupted() -> None:
    lines = (CAPTURED / "cli" / "c01_tool" / "stdout.jsonl").read_bytes().splitlines(keepends=True)
    adapter = ClaudeCodeAdapter()
    events = adapter.feed(b"".join(lines[:7]) + b'{"type":"assistant", "mess')
    events += adapter.feed(b"not json at all\n")
    closing = adapter.close()
    unknown = [e for e in events if e.__struct_config__.tag == "native/unknown"]
    assert unknown[-1].reason is not None and unknown[-1].reason.startswith("malformed JSON line")
    assert [e.__struct_config__.tag for e in closing] == [
        "assistant/message",
        "error",
        "step/end",
        "turn/end",
    ]
    end = closing[-1]
    assert isinstance(end, TurnEndEvent) and end.status == "interrupted"


@pytest.mark.parametrize("run", ["sdk01_tool", "sdk02_tool_partial", "sdk03_err_http500_partial"])
def test_typed_sdk_messages_match_the_dict_path(run: str) -> None:
    """The real claude_agent_sdk objects give the same messages as their JSON lines."""
    objects = sdk_objects(CAPTURED / "sdk" / run / "sdk_messages.jsonl")
    typed = ClaudeCodeAdapter()
    typed_events = [e for o in objects for e in typed.feed(o)] + typed.close()
    records = [json.loads(line) for line in (CAPTURED / "sdk" / run / "sdk_messages.jsonl").open()]
    assert len(records) == len(objects)
    messages = [e for e in typed_events if isinstance(e, AssistantMessageEvent)]
    if run == "sdk03_err_http500_partial":
        assert messages == []
        assert [e.code for e in typed_events if isinstance(e, ErrorEvent)][-1] == "server_error"
        return
    assert [len(m.content) for m in messages] == [3, 1]
    assert messages[0].message_id is not None
    results = [e for e in typed_events if isinstance(e, ToolResultEvent)]
    assert len(results) == 1 and isinstance(results[0].details, dict)


def test_transcript_import() -> None:
    path = TRANSCRIPTS / "session_transcript_init_claude_md.jsonl"
    adapter = ClaudeTranscriptAdapter()
    log = SessionLog()
    log.extend(adapter.feed(path.read_bytes()) + adapter.close())
    events = log.events()
    (start,) = [e for e in events if isinstance(e, SessionStartEvent)]
    assert start.native_session_id == "1af7fc5e-8455-4414-9ccd-011d40f70b2a"
    messages = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert len(messages) == 7  # 13 assistant lines, 7 distinct message ids
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert len(results) == 12
    calls = {p.id for m in messages for p in m.content if isinstance(p, ToolCallPart)}
    assert {r.call_id for r in results} == calls
    # The denied Write: toolUseResult is a string, the result an error.
    denied = [r for r in results if r.name == "Write"]
    assert denied[0].is_error and isinstance(denied[0].details["tool_use_result"], str)  # type: ignore[index]
    derived = log.derive_messages()
    assert [m.__struct_config__.tag for m in derived][:3] == ["user", "user", "assistant"]
    assert events[-1].__struct_config__.tag == "turn/end"


def test_transcript_events_keep_the_time_of_their_line() -> None:
    """An imported transcript is history: events carry their lines' times (parallel tool
    results are out of order in the file itself, and stay so), not the import's."""
    path = TRANSCRIPTS / "session_transcript_init_claude_md.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    moments = {datetime.fromisoformat(json.loads(line)["timestamp"]).timestamp() for line in lines}
    adapter = ClaudeTranscriptAdapter()
    for line in lines:
        moment = datetime.fromisoformat(json.loads(line)["timestamp"]).timestamp()
        assert all(event.ts == moment for event in adapter.feed(line))
    closing = adapter.close()
    assert closing and all(event.ts in moments for event in closing)


@pytest.mark.parametrize(
    "transcript",
    sorted((CAPTURED / "cli").glob("*/session_transcript.jsonl")),
    ids=lambda path: path.parent.name,
)
def test_transcript_lines_without_a_time_keep_the_last_one(transcript: Path) -> None:
    """Claude Code ends a transcript with lines that carry no timestamp (``last-prompt``,
    ``atis-latch``), and its last message is logged only by ``close()``: those events
    take the time of the last line that had one, not the import's (a recorded session
    replayed ``--paced`` waited out the file's age)."""
    stamps = [json.loads(line).get("timestamp") for line in transcript.read_text().splitlines()]
    moments = [datetime.fromisoformat(s).timestamp() for s in stamps if isinstance(s, str)]
    assert None in stamps  # the capture has such lines
    adapter = ClaudeTranscriptAdapter()
    events = adapter.feed(transcript.read_bytes()) + adapter.close()
    assert events
    assert all(min(moments) <= event.ts <= max(moments) for event in events)
    assert events[-1].ts == max(moments)


def test_live_stream_events_are_stamped_on_arrival() -> None:
    before = time.time()
    adapter = ClaudeCodeAdapter()
    events = adapter.feed((CAPTURED / "cli" / "c01_tool" / "stdout.jsonl").read_bytes())
    assert events and all(before <= event.ts <= time.time() for event in events)


@pytest.mark.parametrize(
    ("runtime", "path", "expected_messages"),
    [
        ("claude-code", CAPTURED / "cli" / "c01_tool" / "stdout.jsonl", 2),
        ("claude-code-transcript", TRANSCRIPTS / "session_transcript_init_claude_md.jsonl", 7),
        (
            "anthropic",
            CAPTURED / "cli" / "c01_tool" / "requests" / "0002_POST_v1_messages.response.sse",
            1,
        ),
    ],
)
def test_cli_normalize(runtime: str, path: Path, expected_messages: int) -> None:
    out = io.StringIO()
    buffer = io.BytesIO()
    out.buffer = buffer  # type: ignore[misc]
    with redirect_stdout(out):
        assert main(["normalize", "--from", runtime, str(path)]) == 0
    events = codec.decode_lines(buffer.getvalue())
    assert sum(isinstance(e, AssistantMessageEvent) for e in events) == expected_messages
    assert all(e.source is not None and e.source.runtime == runtime for e in events)


# Lines the captures do not contain (no rate limit, permission prompt or sub-agent was hit
# offline); their shapes are the CLI's as claude_agent_sdk's message parser reads them
# (claude_agent_sdk/_internal/message_parser.py, types.py).
_RATE_LIMITED = {
    "type": "rate_limit_event",
    "rate_limit_info": {"status": "rejected", "rateLimitType": "five_hour", "resetsAt": 1},
    "uuid": "u-rl",
    "session_id": "s",
}
_TASK_CALL = "toolu_task1"


def _sub_agent_lines() -> list[dict[str, object]]:
    """A main-model Task call, the sub-agent's own message, the task's end, the result."""
    return [
        {
            "type": "assistant",
            "message": {
                "id": "msg_main",
                "model": "claude-x",
                "content": [{"type": "tool_use", "id": _TASK_CALL, "name": "Task", "input": {}}],
            },
            "parent_tool_use_id": None,
        },
        {
            "type": "system",
            "subtype": "task_started",
            "task_id": "t1",
            "description": "look around",
            "tool_use_id": _TASK_CALL,
            "uuid": "u1",
            "session_id": "s",
        },
        {
            "type": "assistant",
            "message": {
                "id": "msg_sub",
                "model": "claude-x",
                "content": [{"type": "text", "text": "sub-agent says hi"}],
            },
            "parent_tool_use_id": _TASK_CALL,
        },
        {
            "type": "system",
            "subtype": "task_notification",
            "task_id": "t1",
            "status": "failed",
            "summary": "gave up",
            "output_file": "/tmp/o",
            "tool_use_id": _TASK_CALL,
            "uuid": "u2",
            "session_id": "s",
        },
        {"type": "system", "subtype": "permission_denied", "message": "Bash denied", "uuid": "u3"},
        _RATE_LIMITED,
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": _TASK_CALL, "content": "done"}],
            },
            "parent_tool_use_id": None,
        },
    ]


def test_sub_agent_tasks_permission_denials_and_rate_limits() -> None:
    adapter = ClaudeCodeAdapter()
    events = [e for line in _sub_agent_lines() for e in adapter.feed(line)]
    messages = [e for e in events if isinstance(e, AssistantMessageEvent)]
    main_message, sub_message = messages
    assert main_message.parent_id is None and main_message.surface is None
    assert sub_message.parent_id == _TASK_CALL
    assert sub_message.surface is not None and sub_message.surface.op == "hidden"
    start = next(e for e in events if isinstance(e, TaskStartEvent))
    end = next(e for e in events if isinstance(e, TaskEndEvent))
    assert (start.task_id, start.call_id, start.description) == ("t1", _TASK_CALL, "look around")
    assert (end.task_id, end.status, end.summary) == ("t1", "failed", "gave up")
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [(e.code, e.fatal) for e in errors] == [
        ("permission_denied", False),
        ("rate_limit", False),
    ]
    assert errors[0].message == "Bash denied"
    assert errors[1].retryable and errors[1].http_status == 429
    assert "five_hour" in errors[1].message
    # Only the main model's message is history; the sub-agent's stays out of it.
    log = SessionLog(MemoryStore(), "sub-agent")
    log.extend(events)
    history = log.derive_messages()
    texts = [p.text for m in history for p in getattr(m, "content", []) if isinstance(p, TextPart)]
    assert "sub-agent says hi" not in texts
    assert any(isinstance(p, ToolCallPart) for m in history for p in getattr(m, "content", []))


def test_rate_limit_allowed_is_informational_and_typed_object_matches_the_line() -> None:
    allowed = {**_RATE_LIMITED, "rate_limit_info": {"status": "allowed"}}
    (kept,) = ClaudeCodeAdapter().feed(allowed)
    assert kept.__struct_config__.tag == "native/unknown"
    typed = parse_message(_RATE_LIMITED)
    (from_object,) = ClaudeCodeAdapter().feed(typed)
    (from_line,) = ClaudeCodeAdapter().feed(_RATE_LIMITED)
    assert isinstance(from_object, ErrorEvent) and isinstance(from_line, ErrorEvent)
    assert from_object.message == from_line.message == "rate limit rejected (five_hour)"


def test_runtime_settings_stay_out_of_the_request_header() -> None:
    """``cwd`` and ``permissionMode`` are Claude Code's, not the API's: a request with
    them is refused, so the header has none; the session start keeps them, and a later
    init that changes them is kept as it came."""
    from adapters.anthropic import render_request

    events = _run(CAPTURED / "cli" / "c01_tool" / "stdout.jsonl")
    (header,) = [e for e in events if isinstance(e, RequestHeaderEvent)]
    assert header.adapter_defaults == {} and header.sampling == {}
    (start,) = [e for e in events if isinstance(e, SessionStartEvent)]
    assert start.cwd and start.metadata["permissionMode"]
    log = SessionLog()
    for event in events:
        log.append(event)
    kwargs = render_request(log.derive_messages(), log.current_header())
    assert not {"cwd", "permission_mode", "extra_body"} & set(kwargs)

    init = json.loads((CAPTURED / "cli" / "c01_tool" / "stdout.jsonl").read_text().splitlines()[0])
    adapter = ClaudeCodeAdapter()
    adapter.feed(init)
    assert adapter.feed(init) == []  # the same settings again: nothing new
    changed = adapter.feed({**init, "permissionMode": "plan"})
    (kept,) = [e for e in changed if isinstance(e, NativeUnknownEvent)]
    assert kept.reason == "runtime settings changed" and kept.payload["permissionMode"] == "plan"


BRANCHED = CAPTURED.parent / "claude_chains" / "resume_at"


def _prompt_and_reply_texts(messages: list[dict[str, object]]) -> list[tuple[str, str]]:
    """(role, text) of each message's text blocks, without Claude Code's own
    ``<system-reminder>`` blocks (it adds them; the transcript's user lines lack them)."""
    texts = []
    for message in messages:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:  # type: ignore[attr-defined]
            text = block.get("text", "")
            if block.get("type") == "text" and not text.startswith("<system-reminder>"):
                texts.append((str(message["role"]), text))
    return texts


def test_a_branched_transcript_holds_both_branches_in_file_order() -> None:
    """What the import does with a branched transcript today: every line is logged, so
    the abandoned turn's lines are in the log (nothing lost), one after the other."""
    log = SessionLog()
    adapter = ClaudeTranscriptAdapter()
    log.extend(adapter.feed((BRANCHED / "session_transcript.jsonl").read_bytes()) + adapter.close())
    prompts = [
        part.text
        for event in log.events()
        if isinstance(event, UserMessageEvent)
        for part in event.content
        if isinstance(part, TextPart)
    ]
    assert prompts == [
        "First question",
        "Second question, later abandoned",
        "Branch question after rewinding",
    ]


def _sent_texts() -> list[tuple[str, str]]:
    sent = json.loads((BRANCHED / "requests" / "branch_messages.json").read_text())["messages"]
    return _prompt_and_reply_texts(sent)


def test_a_branched_transcript_derives_the_history_claude_code_sent() -> None:
    """The oracle: after ``--resume-session-at`` Claude Code sent turn one and the branch
    prompt, not the turn it rewound past; the derived history is that, then the reply."""
    log = SessionLog()
    adapter = ClaudeTranscriptAdapter()
    log.extend(adapter.feed((BRANCHED / "session_transcript.jsonl").read_bytes()) + adapter.close())
    assert derived_texts(log) == [*_sent_texts(), ("assistant", "Branch answer after rewinding.")]
    (branch,) = [e for e in log.events() if isinstance(e, UserMessageEvent) and e.surface]
    assert branch.surface is not None and branch.surface.start_id is None  # stored by seqs
    dropped = log.events()[branch.surface.start : branch.surface.end + 1]  # type: ignore[operator]
    assert any(isinstance(e, UserMessageEvent) for e in dropped)  # still in the log


def test_an_import_of_the_transcript_as_it_grew_follows_the_branch() -> None:
    """Imported before the branch (turn two shown), then again once the branch is in the
    file: the grown import's branch prompt replaces what the first import showed, and a
    third import adds nothing."""
    data = (BRANCHED / "session_transcript.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    branch_at = next(i for i, line in enumerate(lines) if b"Branch question" in line)
    log = SessionLog()
    append_imported(log, import_events("claude-code-transcript", b"".join(lines[:branch_at])))
    assert ("user", "Second question, later abandoned") in derived_texts(log)
    append_imported(log, import_events("claude-code-transcript", data))
    assert derived_texts(log) == [*_sent_texts(), ("assistant", "Branch answer after rewinding.")]
    count = len(log.events())
    append_imported(log, import_events("claude-code-transcript", data))
    assert len(log.events()) == count


def _entry(
    kind: str, uuid: str, parent: str | None, text: str, **more: object
) -> dict[str, object]:
    content: object = text if kind == "user" else [{"type": "text", "text": text}]
    message: dict[str, object] = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=f"msg_{uuid}", model="claude-sonnet-4-5", stop_reason="end_turn")
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "message": message, **more}


def _transcript_texts(entries: list[dict[str, object]]) -> list[str]:
    log = SessionLog()
    adapter = ClaudeTranscriptAdapter()
    for entry in entries:
        log.extend(adapter.feed(entry))
    log.extend(adapter.close())
    return [text for _, text in derived_texts(log)]


def test_branches_of_a_transcript() -> None:
    linear = [
        _entry("user", "u1", None, "q1"),
        _entry("assistant", "a1", "u1", "r1"),
        _entry("user", "u2", "a1", "q2"),
        _entry("assistant", "a2", "u2", "r2"),
    ]
    assert _transcript_texts(linear) == ["q1", "r1", "q2", "r2"]
    edited = [
        *linear,
        _entry("user", "u3", "a1", "q2 edited"),
        _entry("assistant", "a3", "u3", "r3"),
    ]
    assert _transcript_texts(edited) == ["q1", "r1", "q2 edited", "r3"]
    # Rewound to the very first prompt: a branch on an assistant entry.
    retried = [*linear, _entry("assistant", "a1b", "u1", "r1 again")]
    assert _transcript_texts(retried) == ["q1", "r1 again"]
    # A sub-agent's entries between them, a parent not in the file, a new root: no branch.
    sidechain = _entry("user", "s1", "zz", "agent prompt", isSidechain=True)
    orphan = _entry("user", "u4", "not-in-file", "q4")
    root = _entry("user", "u5", None, "q5")
    others = [*linear[:2], sidechain, *linear[2:], orphan, root]
    assert _transcript_texts(others) == ["q1", "r1", "q2", "r2", "q4", "q5"]


@pytest.mark.parametrize("seed", range(40))
def test_random_rewinds_along_the_chain_derive_the_chain(seed: int) -> None:
    """Entries that continue the last one or rewind to one of its ancestors (what
    ``--resume-session-at`` and edits make): the history is the chain from the last
    entry back, in order, as Claude Code walks it."""
    import random

    chance = random.Random(seed)
    entries = [_entry("user", "e0", None, "t0")]
    parent_of: dict[str, str | None] = {"e0": None}
    kind_of = {"e0": "user"}
    tip = "e0"
    for number in range(1, 30):
        chain = []
        entry: str | None = tip
        while entry is not None:
            chain.append(entry)
            entry = parent_of[entry]
        parent = tip if chance.random() < 0.7 else chance.choice(chain)
        kind = "assistant" if kind_of[parent] == "user" else "user"
        uuid = f"e{number}"
        entries.append(_entry(kind, uuid, parent, f"t{number}"))
        parent_of[uuid], kind_of[uuid], tip = parent, kind, uuid
    expected = []
    entry = tip
    while entry is not None:
        expected.append(f"t{entry[1:]}")
        entry = parent_of[entry]
    assert _transcript_texts(entries) == expected[::-1]


COMPACTED = CAPTURED.parent / "claude_chains" / "compact"


def test_a_compacted_transcript_derives_the_history_claude_code_sent() -> None:
    """The oracle across ``/compact``: turn three's request held the summary, the
    message compaction preserved, then the command's entries and the prompt."""
    log = SessionLog()
    adapter = ClaudeTranscriptAdapter()
    log.extend(
        adapter.feed((COMPACTED / "session_transcript.jsonl").read_bytes()) + adapter.close()
    )
    request = json.loads((COMPACTED / "requests" / "turn3_messages.json").read_text())
    sent = _prompt_and_reply_texts(request["messages"])
    assert sent[0][1].startswith("This session is being continued")
    assert sent[1] == ("assistant", "Turn two done.")
    # Claude Code ends each entry it merges into one user message with a newline.
    sent = [(role, text.rstrip("\n")) for role, text in sent]
    assert derived_texts(log) == [*sent, ("assistant", "Turn three after compaction.")]
    prompts = [e for e in log.events() if isinstance(e, UserMessageEvent)]
    assert [p.content[0].text for p in prompts[:2]] == ["First question", "Second question"]  # type: ignore[union-attr]


def test_an_import_of_the_transcript_across_the_compaction_as_it_grew() -> None:
    data = (COMPACTED / "session_transcript.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    boundary = next(i for i, line in enumerate(lines) if b'"compact_boundary"' in line)
    log = SessionLog()
    append_imported(log, import_events("claude-code-transcript", b"".join(lines[:boundary])))
    assert [text for _, text in derived_texts(log)][:2] == ["First question", "Turn one done."]
    append_imported(log, import_events("claude-code-transcript", data))
    derived = derived_texts(log)
    assert derived[0][1].startswith("This session is being continued")
    assert derived[1:2] == [("assistant", "Turn two done.")]
    assert derived[-2:] == [
        ("user", "Third question"),
        ("assistant", "Turn three after compaction."),
    ]


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({}, ["summary", "q3", "r3"]),
        (
            {"preservedSegment": {"headUuid": "u2", "tailUuid": "a2"}},
            ["summary", "q2", "r2", "q3", "r3"],
        ),
        ({"preservedSegment": {"headUuid": "a2", "tailUuid": "u2"}}, ["summary", "q3", "r3"]),
    ],
)
def test_a_compaction_replaces_what_it_does_not_preserve(
    metadata: dict[str, object], expected: list[str]
) -> None:
    """No preserved segment (or one whose head is not before its tail): the summary
    replaces everything shown before it."""
    entries = [
        _entry("user", "u1", None, "q1"),
        _entry("assistant", "a1", "u1", "r1"),
        _entry("user", "u2", "a1", "q2"),
        _entry("assistant", "a2", "u2", "r2"),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b",
            "parentUuid": None,
            "logicalParentUuid": "a2",
            "compactMetadata": metadata,
        },
        _entry("user", "s", "b", "summary", isCompactSummary=True),
        _entry("user", "u3", "s", "q3"),
        _entry("assistant", "a3", "u3", "r3"),
    ]
    assert _transcript_texts(entries) == expected


@pytest.mark.parametrize("last_newline", [True, False])
def test_a_branch_on_the_last_line_read_by_the_inputs_end(last_newline: bool) -> None:
    """The last entry branches and has no newline: ``close`` reads it, and the message
    it starts (logged only then) carries the replace, once."""
    entries = [
        _entry("user", "u1", None, "q1"),
        _entry("assistant", "a1", "u1", "r1"),
        _entry("user", "u2", "a1", "q2"),
        _entry("assistant", "a2", "u2", "r2"),
        _entry("assistant", "a1b", "u1", "r1 again"),
    ]
    data = b"\n".join(json.dumps(entry).encode() for entry in entries)
    log = SessionLog()
    adapter = ClaudeTranscriptAdapter()
    log.extend(adapter.feed(data + (b"\n" if last_newline else b"")) + adapter.close())
    assert [text for _, text in derived_texts(log)] == ["q1", "r1 again"]
    assert sum(1 for e in log.events() if getattr(e, "surface", None) is not None) == 1
