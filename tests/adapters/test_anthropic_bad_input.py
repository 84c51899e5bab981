"""Bad input never loses what was already normalised (cut streams, malformed JSON,
unknown types, out-of-order blocks), and SSE cut at any byte gives the same events."""

from __future__ import annotations

from adapters.anthropic import AnthropicAdapter
from tests.adapters._anthropic_support import recorded, sse_body
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    NativeUnknownEvent,
    StepEndEvent,
    TurnEndEvent,
)
from universal_event.parts import TextPart, ToolCallPart

START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":5,'
    b'"cache_read_input_tokens":2,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hello "}}\n\n'
)
TOOL = (
    b'data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use",'
    b'"id":"toolu_1","name":"f","input":{}}}\n\n'
    b'data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta",'
    b'"partial_json":"{\\"a\\": 1"}}\n\n'
)


def _tags(events: list[Event]) -> list[str]:
    return [e.__struct_config__.tag for e in events]


def test_stream_cut_before_message_stop_keeps_the_partial_message() -> None:
    adapter = AnthropicAdapter()
    events = adapter.feed(START + TOOL)
    assert _tags(events)[:2] == ["turn/start", "step/start"]
    closing = adapter.close()
    assert _tags(closing) == ["assistant/message", "usage", "error", "step/end", "turn/end"]
    message, usage, error, step_end, turn_end = closing
    assert isinstance(message, AssistantMessageEvent) and message.status == "partial"
    text, call = message.content
    assert text == TextPart(text="Hello ")
    # The truncated arguments are not valid JSON: kept raw, never guessed.
    assert isinstance(call, ToolCallPart) and call.arguments is None
    assert call.arguments_raw == '{"a": 1'
    assert isinstance(error, ErrorEvent) and error.code == "stream_interrupted" and error.retryable
    assert isinstance(step_end, StepEndEvent) and step_end.status == "interrupted"
    assert isinstance(turn_end, TurnEndEvent) and turn_end.status == "interrupted"


def test_malformed_json_frame_is_kept_and_the_stream_goes_on() -> None:
    adapter = AnthropicAdapter()
    events = adapter.feed(START + b'data: {"type":"content_block_delta","index":0,\n\n')
    events += adapter.feed(
        b'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}\n\n'
        b'data: {"type":"content_block_stop","index":0}\n\ndata: {"type":"message_stop"}\n\n'
    )
    (unknown,) = [e for e in events if isinstance(e, NativeUnknownEvent)]
    assert unknown.reason is not None and unknown.reason.startswith("malformed JSON")
    assert unknown.payload == '{"type":"content_block_delta","index":0,'
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert message.content == [TextPart(text="Hello x")] and message.status == "complete"


def test_unknown_event_and_delta_types_are_preserved() -> None:
    adapter = AnthropicAdapter()
    events = adapter.feed(
        START
        + b'data: {"type":"content_block_delta","index":0,"delta":{"type":"sparkle_delta","x":1}}\n\n'
        + b'data: {"type":"brand_new_event","payload":[1,2]}\n\n'
    )
    unknown = [e for e in events if isinstance(e, NativeUnknownEvent)]
    assert [(u.native_type, u.reason) for u in unknown] == [
        ("content_block_delta", "unknown delta type 'sparkle_delta'"),
        ("brand_new_event", "unknown Anthropic event type"),
    ]
    assert unknown[1].payload == {"type": "brand_new_event", "payload": [1, 2]}


def test_out_of_order_block_index_is_kept_not_crashed() -> None:
    adapter = AnthropicAdapter()
    events = adapter.feed(
        START
        + b'data: {"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"?"}}\n\n'
        + b'data: {"type":"content_block_stop","index":0}\n\ndata: {"type":"message_stop"}\n\n'
    )
    (unknown,) = [e for e in events if isinstance(e, NativeUnknownEvent)]
    assert unknown.reason == "delta for block index 7 that never started (out of order)"
    assert unknown.payload["delta"] == {"type": "text_delta", "text": "?"}
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert message.content == [TextPart(text="Hello ")]


def test_in_stream_error_event() -> None:
    adapter = AnthropicAdapter()
    events = adapter.feed(
        START + b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        b'"message":"Overloaded"}}\n\n'
    )
    assert _tags(events)[-5:] == ["error", "assistant/message", "usage", "step/end", "turn/end"]
    error = events[-5]
    assert isinstance(error, ErrorEvent)
    assert (error.code, error.retryable, error.http_status) == ("overloaded_error", True, 529)
    assert adapter.close() == []


def test_unknown_block_type_is_kept_out_of_the_message() -> None:
    adapter = AnthropicAdapter()
    events = adapter.feed(
        START
        + b'data: {"type":"content_block_start","index":1,"content_block":{"type":"hologram","z":1}}\n\n'
        + b'data: {"type":"message_stop"}\n\n'
    )
    (unknown,) = [e for e in events if isinstance(e, NativeUnknownEvent)]
    assert unknown.native_type == "hologram" and unknown.payload == {"type": "hologram", "z": 1}
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert message.content == [TextPart(text="Hello ")]


def _essence(events: list[Event]) -> list[object]:
    return [
        (e.__struct_config__.tag, getattr(e, "content", None), getattr(e, "delta", None))
        for e in events
    ]


def test_sse_cut_at_every_byte_gives_the_same_events() -> None:
    body = sse_body(recorded("stream_thinking_tooluse_signature_replay.json")["interactions"][0])
    whole = AnthropicAdapter()
    expected = _essence(whole.feed(body) + whole.close())
    step = 7
    for cut in range(1, len(body), step):
        adapter = AnthropicAdapter()
        events = adapter.feed(body[:cut]) + adapter.feed(body[cut:]) + adapter.close()
        assert _essence(events) == expected, cut
    crlf = body.replace(b"\n", b"\r\n")
    adapter = AnthropicAdapter()
    events: list[Event] = []
    for index in range(0, len(crlf), 13):
        events += adapter.feed(crlf[index : index + 13])
    assert _essence(events + adapter.close()) == expected


def test_chunks_concatenate_to_the_message() -> None:
    body = sse_body(recorded("stream_parallel_tool_use.json")["interactions"][0])
    adapter = AnthropicAdapter()
    events = adapter.feed(body) + adapter.close()
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    chunks = [e for e in events if isinstance(e, AssistantChunkEvent)]
    text = "".join(c.delta for c in chunks if c.kind == "text")
    assert text == message.content[0].text  # type: ignore[union-attr]
    for part in message.content[1:]:
        assert isinstance(part, ToolCallPart)
        raw = "".join(c.delta for c in chunks if c.tool_call_id == part.id)
        import json

        assert json.loads(raw) == part.arguments


def test_non_streamed_body_split_across_chunks() -> None:
    body = sse_body(recorded("thinking_tool_use_nonstream.json")["interactions"][0])
    adapter = AnthropicAdapter()
    assert adapter.feed(body[:50]) == []
    events = adapter.feed(body[50:])
    assert "assistant/message" in _tags(events)
    truncated = AnthropicAdapter()
    truncated.feed(body[:50])
    (unknown,) = truncated.close()
    assert (
        isinstance(unknown, NativeUnknownEvent) and unknown.reason == "truncated or malformed JSON"
    )
