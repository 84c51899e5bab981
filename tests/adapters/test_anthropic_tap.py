"""``adapters.anthropic.tap`` / ``atap`` over the real ``anthropic`` client (respx-mocked HTTP):
the SDK's objects pass through unchanged, an in-stream error the SDK raises is logged as
that error before it propagates, a dropped connection is logged as retryable."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator

import anthropic
import httpx
import pytest
import respx

from adapters.anthropic import AnthropicAdapter, atap, tap
from tests.adapters._anthropic_support import recorded, sse_body
from universal_event.events import AssistantMessageEvent, ErrorEvent, Event, TurnEndEvent
from universal_event.log import SessionLog
from universal_event.parts import TextPart

BASE = "https://api.anthropic.com"
REQUEST = {
    "model": "claude-x",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Hi"}],
    "stream": True,
}
START = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","model":"claude-x","content":[],"usage":{"input_tokens":5,'
    b'"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hello "}}\n\n'
)
OVERLOADED = (
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
    b'"message":"Overloaded"}}\n\n'
)


def _client() -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test", base_url=BASE, max_retries=0)


def _of_type(events: list[Event], kind: type) -> list:  # type: ignore[type-arg]
    return [event for event in events if isinstance(event, kind)]


def _streamed(router: respx.MockRouter, body: bytes | Iterator[bytes]) -> None:
    router.post("/v1/messages").mock(
        return_value=httpx.Response(
            200, content=body, headers={"content-type": "text/event-stream"}
        )
    )


def test_tap_hands_on_the_sdk_events_and_logs_the_same_as_raw_bytes() -> None:
    interaction = recorded("stream_client_tool_two_turns.json")["interactions"][0]
    assert interaction["response_body_format"] == "sse"
    body = sse_body(interaction)
    log = SessionLog()
    with warnings.catch_warnings(), respx.mock(base_url=BASE) as router:
        warnings.simplefilter("ignore", DeprecationWarning)
        _streamed(router, body)
        seen = list(tap(_client().messages.create(**REQUEST), log))  # type: ignore[call-overload]
    assert seen and all(type(item).__module__.startswith("anthropic.") for item in seen)
    adapter = AnthropicAdapter()
    expected = adapter.feed(body) + adapter.close()
    assert [e.__struct_config__.tag for e in log.events()] == [
        e.__struct_config__.tag for e in expected
    ]
    (message,) = _of_type(log.events(), AssistantMessageEvent)
    (raw_message,) = _of_type(expected, AssistantMessageEvent)
    assert message.content == raw_message.content
    assert log.pending == 0


def test_in_stream_error_is_logged_as_itself_then_raised() -> None:
    log = SessionLog()
    with respx.mock(base_url=BASE) as router:
        _streamed(router, START + OVERLOADED)
        stream = _client().messages.create(**REQUEST)  # type: ignore[call-overload]
        with pytest.raises(anthropic.APIStatusError):
            for _ in tap(stream, log):
                pass
    events = log.events()
    assert [event.seq for event in events] == list(range(len(events)))
    (error,) = _of_type(events, ErrorEvent)
    assert (error.code, error.retryable, error.http_status) == ("overloaded_error", True, 529)
    (message,) = _of_type(events, AssistantMessageEvent)
    assert message.content == [TextPart(text="Hello ")]
    assert _of_type(events, TurnEndEvent)[-1].status == "failed"
    assert log.pending == 0


def test_dropped_connection_is_logged_as_retryable_and_the_message_kept() -> None:
    def body() -> Iterator[bytes]:
        yield START
        raise httpx.ReadError("connection reset by peer")

    log = SessionLog()
    with respx.mock(base_url=BASE) as router:
        _streamed(router, body())
        stream = _client().messages.create(**REQUEST)  # type: ignore[call-overload]
        with pytest.raises(httpx.ReadError):
            for _ in tap(stream, log):
                pass
    events = log.events()
    errors = _of_type(events, ErrorEvent)
    assert errors[0].code == "ReadError" and errors[0].retryable is True
    assert errors[0].http_status is None
    (message,) = _of_type(events, AssistantMessageEvent)
    assert message.content == [TextPart(text="Hello ")] and message.status == "partial"
    assert _of_type(events, TurnEndEvent)[-1].status == "failed"


def test_atap_logs_an_async_stream_like_tap() -> None:
    async def run() -> SessionLog:
        log = SessionLog(session_id="s-async")
        client = anthropic.AsyncAnthropic(api_key="test", base_url=BASE, max_retries=0)
        with respx.mock(base_url=BASE) as router:
            _streamed(router, START + OVERLOADED)
            stream = await client.messages.create(**REQUEST)  # type: ignore[call-overload]
            with pytest.raises(anthropic.APIStatusError):
                async for _ in atap(stream, log):
                    pass
        return log

    log = asyncio.run(run())
    (error,) = _of_type(log.events(), ErrorEvent)
    assert error.code == "overloaded_error"
    assert {event.session_id for event in log.events()} == {"s-async"}


def test_a_message_streams_text_stream_is_refused_and_the_stream_itself_is_tapped() -> None:
    """``text_stream`` holds only the text: tapping it would lose the reply, so it is
    refused by name; the helper itself is tapped and its ``text`` events carry the text."""
    end = (
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        b'"end_turn"},"usage":{"output_tokens":3}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    request = {key: value for key, value in REQUEST.items() if key != "stream"}
    log = SessionLog()
    with respx.mock(base_url=BASE) as router:
        _streamed(router, START + end)
        with _client().messages.stream(**request) as stream:  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="text_stream"):
                tap(stream.text_stream, log)
            texts = [event.text for event in tap(stream, log) if event.type == "text"]
    assert texts == ["Hello "]
    (message,) = _of_type(log.events(), AssistantMessageEvent)
    assert message.content == [TextPart(text="Hello ")] and message.status == "complete"

    async def refused() -> None:
        client = anthropic.AsyncAnthropic(api_key="test", base_url=BASE, max_retries=0)
        with respx.mock(base_url=BASE) as router:
            _streamed(router, START + end)
            async with client.messages.stream(**request) as stream:  # type: ignore[arg-type]
                atap(stream.text_stream, SessionLog())

    with pytest.raises(TypeError, match="text_stream"):
        asyncio.run(refused())


def test_a_whole_response_given_to_tap_is_refused_naming_the_way() -> None:
    """A non-streamed response is a pydantic model: iterating it yields its fields, each
    kept as an unknown item and the reply lost. tap() refuses it (all dialects share
    the check); fed whole, it is logged."""
    import openai

    from adapters.openai_chat import tap as chat_tap
    from adapters.openai_responses import atap as responses_atap

    body = recorded("thinking_tool_use_nonstream.json")["interactions"][0]["response_body"]
    message = anthropic.types.Message.model_validate(body)
    log = SessionLog()
    with pytest.raises(TypeError, match="a whole response, not a stream"):
        tap(message, log)  # type: ignore[arg-type]
    completion = openai.types.chat.ChatCompletion.model_construct(id="c", choices=[])
    with pytest.raises(TypeError, match="ChatCompletion, a whole response"):
        chat_tap(completion, log)  # type: ignore[arg-type]
    response = openai.types.responses.Response.model_construct(id="r", output=[])
    with pytest.raises(TypeError, match="log.extend"):
        responses_atap(response, log)  # type: ignore[arg-type]
    sse = b"event: message_start\ndata: {}\n\n"
    for data in (sse, sse.decode(), bytearray(sse)):
        with pytest.raises(TypeError, match=f"one {type(data).__name__}, not a stream"):
            tap(data, log)  # type: ignore[arg-type]
    assert log.events() == []
    adapter = AnthropicAdapter(session_id=log.session_id)
    log.extend(adapter.feed(message))
    assert _of_type(log.events(), AssistantMessageEvent)
