"""OpenAI Chat Completions adapter: every recorded fixture replayed through the real
``openai`` client over respx, and the same bytes fed raw; both paths must agree.

Recorded facts are pinned in the test bodies (token counts, tool names, texts);
the fixtures are byte-identical copies under tests/fixtures/recorded/openai-chat/.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import openai
import pytest
import respx

from adapters.openai_chat import OpenAIChatAdapter, tap
from universal_event.codec import decode_lines, encode_lines
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    NativeUnknownEvent,
    StepEndEvent,
    StepStartEvent,
    TurnEndEvent,
    TurnStartEvent,
    UsageEvent,
    WarningEvent,
)
from universal_event.log import SessionLog
from universal_event.parts import Provenance, RefusalPart, TextPart, ThinkingPart, ToolCallPart
from universal_event.stores.memory import MemoryStore

FIXTURES = Path(__file__).parent.parent / "fixtures" / "recorded" / "openai-chat"
URL = "https://api.openai.com/v1/chat/completions"
DEFAULT_REQUEST = {
    "model": "gpt-4o-2024-08-06",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
}


def load(name: str) -> dict[str, Any]:
    fixture: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return fixture


def all_interactions() -> Iterator[tuple[str, int]]:
    for path in sorted(FIXTURES.glob("*.json")):
        for number, _ in enumerate(load(path.name)["interactions"]):
            yield path.name, number


def body_bytes(interaction: dict[str, Any]) -> bytes:
    body = interaction["response_body"]
    return body.encode() if isinstance(body, str) else json.dumps(body).encode()


def client() -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url="https://api.openai.com/v1", max_retries=0)


def shape(events: list[Event]) -> list[dict[str, Any]]:
    """Events without their volatile envelope (id, ts, generated turn id)."""
    result = []
    for event in events:
        data = msgspec.to_builtins(event)
        for key in ("id", "ts", "turn_id", "seq", "session_id"):
            data.pop(key, None)
        result.append(data)
    return result


def feed_raw(body: bytes, *, piece: int = 0) -> list[Event]:
    adapter = OpenAIChatAdapter()
    events: list[Event] = []
    if piece:
        for start in range(0, len(body), piece):
            events += adapter.feed(body[start : start + piece])
    else:
        events += adapter.feed(body)
    return events + adapter.close()


def replay_through_sdk(interaction: dict[str, Any]) -> tuple[list[Event], dict[str, Any]]:
    """Run the real client against the recorded response; events via ``tap``/``feed``."""
    request = interaction["request_body"] or DEFAULT_REQUEST
    fmt = interaction["response_body_format"]
    status = interaction["response_status"] or 200
    content_type = "text/event-stream" if fmt == "sse" else "application/json"
    events: list[Event] = []
    adapter = OpenAIChatAdapter()
    log = SessionLog()
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(
            return_value=httpx.Response(
                status, content=body_bytes(interaction), headers={"content-type": content_type}
            )
        )
        try:
            if request.get("stream"):
                stream = client().chat.completions.create(**request)
                for _chunk in tap(stream, log, adapter=adapter):
                    pass
                events += log.events()
            else:
                events += adapter.feed(client().chat.completions.create(**request))
                events += adapter.close()
        except openai.APIStatusError as exc:
            events += adapter.api_error(exc)
        sent = json.loads(route.calls.last.request.content)
    return events, sent


def of_type(events: list[Event], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


# ---------------------------------------------------------------- every fixture


@pytest.mark.parametrize(("name", "number"), list(all_interactions()))
def test_sdk_replay_equals_raw_bytes(name: str, number: int) -> None:
    """The SDK path (typed objects, via tap) and the raw-bytes fast path give the same events."""
    interaction = load(name)["interactions"][number]
    sdk_events, sent = replay_through_sdk(interaction)
    if interaction["request_body"] is not None:
        assert sent == interaction["request_body"]  # the replay sent the recorded request
    status = interaction["response_status"] or 200
    if status >= 400:
        raw_events = OpenAIChatAdapter().http_error(status, body_bytes(interaction))
    else:
        raw_events = feed_raw(body_bytes(interaction))
    assert sdk_events, "no events"
    assert shape(sdk_events) == shape(raw_events)
    # Cut anywhere: 7-byte pieces give the same events as the whole body.
    if status < 400:
        assert shape(feed_raw(body_bytes(interaction), piece=7)) == shape(raw_events)
    # Events survive the log encoding unchanged.
    assert shape(decode_lines(encode_lines(raw_events))) == shape(raw_events)


def successful_interactions() -> list[tuple[str, int]]:
    return [
        (name, number)
        for name, number in all_interactions()
        if (load(name)["interactions"][number]["response_status"] or 200) < 400
    ]


@pytest.mark.parametrize(("name", "number"), successful_interactions())
def test_envelope_and_boundaries(name: str, number: int) -> None:
    """Every response is one step inside a turn; chunks concatenate to their message."""
    interaction = load(name)["interactions"][number]
    events = feed_raw(body_bytes(interaction))
    assert isinstance(events[0], TurnStartEvent)
    assert isinstance(events[1], StepStartEvent)
    turn_id = events[0].turn_id
    assert turn_id and all(event.turn_id == turn_id for event in events)
    assert all(
        event.source is not None and event.source.runtime == "openai-chat" for event in events
    )
    assert len({event.id for event in events}) == len(events)
    assert sum(isinstance(event, StepEndEvent) for event in events) == 1
    messages = of_type(events, AssistantMessageEvent)
    assert messages and all(message.status == "complete" for message in messages)
    for message in messages:
        assert message.provenance is not None
        assert message.provenance.provider == "openai" and message.provenance.api == "chat"
        chunks = [
            event
            for event in of_type(events, AssistantChunkEvent)
            if event.message_id == message.message_id
        ]
        if not chunks:
            continue  # a whole (non-streamed) completion has no chunks
        text = "".join(chunk.delta for chunk in chunks if chunk.kind == "text")
        texts = [part.text for part in message.content if isinstance(part, TextPart)]
        assert text == "".join(texts)
        for part in message.content:
            if isinstance(part, ToolCallPart):
                fragments = "".join(
                    chunk.delta
                    for chunk in chunks
                    if chunk.kind == "tool_arguments" and chunk.tool_call_id == part.id
                )
                expected = part.arguments_raw
                if expected is None:
                    expected = msgspec.json.encode(part.arguments).decode()
                assert fragments == expected


# ---------------------------------------------------------------- recorded facts


def test_parallel_tool_calls_assembled_by_index() -> None:
    interaction = load("stream_parallel_tool_calls_raw.json")["interactions"][0]
    events = feed_raw(body_bytes(interaction), piece=13)
    (message,) = of_type(events, AssistantMessageEvent)
    calls = [part for part in message.content if isinstance(part, ToolCallPart)]
    assert [call.name for call in calls] == ["GetWeatherArgs", "get_stock_price"]
    assert calls[0].arguments == {"city": "Edinburgh", "country": "GB", "units": "c"}
    assert calls[1].arguments == {"ticker": "AAPL", "exchange": "NASDAQ"}
    assert all(call.id.startswith("call_") for call in calls)
    assert message.stop_reason == "tool_calls"
    assert message.provenance == Provenance(
        provider="openai", api="chat", model="gpt-4o-2024-08-06"
    )
    (usage,) = of_type(events, UsageEvent)
    assert usage.usage.input_tokens == 149 and usage.usage.output_tokens == 60
    # A tool_calls finish leaves the turn open for the tool results.
    assert not of_type(events, TurnEndEvent)
    assert of_type(events, StepEndEvent)[0].stop_reason == "tool_calls"


def test_n3_choices_are_separate_messages_and_only_choice_0_is_on_the_surface() -> None:
    interaction = load("stream_n3_choices.json")["interactions"][0]
    events = feed_raw(body_bytes(interaction))
    messages = of_type(events, AssistantMessageEvent)
    assert [message.choice for message in messages] == [0, 1, 2]
    assert messages[0].surface is None
    assert all(m.surface is not None and m.surface.op == "hidden" for m in messages[1:])
    assert len({message.message_id for message in messages}) == 3
    for message in messages:
        (part,) = message.content
        assert isinstance(part, TextPart)
        assert set(json.loads(part.text)) == {"city", "temperature", "units"}
        chunk_choices = {
            chunk.choice
            for chunk in of_type(events, AssistantChunkEvent)
            if chunk.message_id == message.message_id
        }
        assert chunk_choices == {message.choice}
    (turn_end,) = of_type(events, TurnEndEvent)
    assert turn_end.usage is not None and turn_end.usage.output_tokens == 42
    # In a log only choice 0 reaches the model; the others stay logged.
    log = SessionLog()
    log.extend(events)
    (derived,) = log.derive_messages()
    assert derived.content == messages[0].content
    assert len(of_type(log.events(), AssistantMessageEvent)) == 3


def test_refusal_with_logprobs() -> None:
    interaction = load("stream_refusal_with_logprobs.json")["interactions"][0]
    events = feed_raw(body_bytes(interaction))
    (message,) = of_type(events, AssistantMessageEvent)
    (part,) = message.content
    assert isinstance(part, RefusalPart)
    assert part.text.startswith("I'm very sorry, but I can't assist")
    refusal_chunks = [c for c in of_type(events, AssistantChunkEvent) if c.kind == "refusal"]
    assert "".join(chunk.delta for chunk in refusal_chunks) == part.text
    assert message.logprobs is not None
    tokens = message.logprobs["refusal"]
    assert "".join(token["token"] for token in tokens) == part.text
    assert tokens[0]["logprob"] == pytest.approx(-0.0012038043)


def test_usage_then_moderation_chunk_is_kept() -> None:
    interaction = load("stream_usage_then_moderation_chunk.json")["interactions"][0]
    events = feed_raw(body_bytes(interaction))
    kinds = [type(event).__name__ for event in events]
    assert (
        kinds.index("UsageEvent") < kinds.index("NativeUnknownEvent") < kinds.index("StepEndEvent")
    )
    (unknown,) = of_type(events, NativeUnknownEvent)
    assert "moderation" in unknown.payload and unknown.payload["choices"] == []
    (usage,) = of_type(events, UsageEvent)
    assert usage.usage.native is not None and usage.usage.native["total_tokens"] > 0
    assert usage.model == "gpt-5-2025-08-07"


def test_reasoning_tokens_from_completion_details() -> None:
    interaction = load("reasoning_model_usage.json")["interactions"][0]
    events = feed_raw(body_bytes(interaction))
    (usage,) = of_type(events, UsageEvent)
    assert (usage.usage.input_tokens, usage.usage.output_tokens) == (7, 87)
    assert usage.usage.reasoning_tokens == 64 and usage.usage.cache_read_tokens == 0
    (message,) = of_type(events, AssistantMessageEvent)
    assert message.content == [TextPart(text="Hello there! How can I help you today?")]
    assert message.source is not None and message.source.native_type == "chat.completion"


def test_length_finish_on_text_keeps_the_text() -> None:
    interaction = load("vision_and_400_error.json")["interactions"][0]
    events = feed_raw(body_bytes(interaction))
    (message,) = of_type(events, AssistantMessageEvent)
    assert message.stop_reason == "length"
    assert isinstance(message.content[0], TextPart)
    assert message.content[0].text.endswith("dunes or")
    (turn_end,) = of_type(events, TurnEndEvent)
    assert turn_end.stop_reason == "length" and turn_end.status == "completed"


def test_usage_sums_over_the_steps_of_a_turn() -> None:
    fixture = load("stream_tool_call_then_text_usage.json")
    adapter = OpenAIChatAdapter()
    events: list[Event] = []
    for interaction in fixture["interactions"]:
        events += adapter.feed(body_bytes(interaction))
        events += adapter.close()
    steps = of_type(events, StepStartEvent)
    assert [step.step for step in steps] == [0, 1]
    assert len(of_type(events, TurnStartEvent)) == 1
    usages = [event.usage for event in of_type(events, UsageEvent)]
    (turn_end,) = of_type(events, TurnEndEvent)
    assert turn_end.usage is not None
    assert turn_end.usage.input_tokens == sum(usage.input_tokens for usage in usages)
    assert turn_end.usage.output_tokens == sum(usage.output_tokens for usage in usages)


@pytest.mark.parametrize(
    ("name", "number", "status", "code"),
    [
        ("error_400_system_role_unsupported.json", 0, 400, "unsupported_value"),
        ("error_404_model_not_found.json", 0, 404, "model_not_found"),
        ("vision_and_400_error.json", 2, 400, "invalid_image_url"),
    ],
)
def test_http_errors(name: str, number: int, status: int, code: str) -> None:
    interaction = load(name)["interactions"][number]
    events, _ = replay_through_sdk(interaction)
    (error,) = events
    assert isinstance(error, ErrorEvent)
    assert (error.http_status, error.code) == (status, code)
    assert error.message == interaction["response_body"]["error"]["message"]
    assert error.retryable is False


# ---------------------------------------------------------------- synthetic edge cases
# Built from the recorded chunk shapes (first fragment with id/name, later ones bare).


def sse(*chunks: dict[str, Any], done: bool = True) -> bytes:
    lines = [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks]
    return b"".join(lines) + (b"data: [DONE]\n\n" if done else b"")


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, index: int = 0
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "model": "m-1",
        "choices": [{"index": index, "delta": delta or {}, "finish_reason": finish}],
    }


def tool_fragment(
    index: int, arguments: str, call_id: str | None = None, name: str | None = None
) -> dict[str, Any]:
    fragment: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        fragment.update(id=call_id, type="function")
        fragment["function"]["name"] = name
    return chunk({"tool_calls": [fragment]})


def test_length_mid_json_keeps_partial_arguments_and_warns() -> None:
    body = sse(
        chunk({"role": "assistant", "content": None}),
        tool_fragment(0, "", "call_a", "search"),
        tool_fragment(0, '{"query": "weath'),
        chunk(finish="length"),
    )
    events = feed_raw(body)
    (message,) = of_type(events, AssistantMessageEvent)
    (call,) = message.content
    assert isinstance(call, ToolCallPart)
    assert call.arguments is None and call.arguments_raw == '{"query": "weath'
    assert message.stop_reason == "length" and message.status == "complete"
    (warning,) = of_type(events, WarningEvent)
    assert warning.code == "tool_arguments_truncated"
    assert warning.details == {"call_id": "call_a", "finish_reason": "length"}


def test_interleaved_parallel_fragments_and_exact_raw_arguments() -> None:
    body = sse(
        tool_fragment(0, "", "call_a", "a"),
        tool_fragment(1, "", "call_b", "b"),
        tool_fragment(1, '{"y": '),
        tool_fragment(0, '{"x":1}'),
        tool_fragment(1, "2}"),
        chunk(finish="tool_calls"),
    )
    (message,) = of_type(feed_raw(body), AssistantMessageEvent)
    first, second = message.content
    assert isinstance(first, ToolCallPart) and isinstance(second, ToolCallPart)
    assert (first.id, first.arguments, first.arguments_raw) == ("call_a", {"x": 1}, None)
    # Spacing that compact re-encoding would lose is kept verbatim for replay.
    assert (second.id, second.arguments, second.arguments_raw) == ("call_b", {"y": 2}, '{"y": 2}')


URL_CITATION = {
    "type": "url_citation",
    "url_citation": {
        "url": "https://example.com/a",
        "title": "A",
        "start_index": 0,
        "end_index": 5,
    },
}


def test_streamed_annotations_become_citations_as_on_a_whole_completion() -> None:
    """Search-preview models stream the url_citations in a late delta of their own."""
    streamed = sse(
        chunk({"role": "assistant", "content": "Hello"}),
        chunk({"content": " world"}),
        chunk({"annotations": [URL_CITATION]}),
        chunk(finish="stop"),
    )
    whole = {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "model": "m-1",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": "Hello world",
                    "annotations": [URL_CITATION],
                },
            }
        ],
    }
    stream_request = {**DEFAULT_REQUEST, "model": "m-1"}
    runs = {
        "raw": feed_raw(streamed),
        "raw pieces": feed_raw(streamed, piece=7),
        "sdk stream": replay_through_sdk(
            {
                "request_body": stream_request,
                "response_body_format": "sse",
                "response_status": 200,
                "response_body": streamed.decode(),
            }
        )[0],
        "whole": feed_raw(json.dumps(whole).encode()),
        "sdk whole": replay_through_sdk(
            {
                "request_body": {**stream_request, "stream": False},
                "response_body_format": "json",
                "response_status": 200,
                "response_body": whole,
            }
        )[0],
    }
    contents = {}
    for how, events in runs.items():
        (message,) = of_type(events, AssistantMessageEvent)
        contents[how] = message.content
        assert not of_type(events, NativeUnknownEvent), how
    (text,) = contents["whole"]
    assert isinstance(text, TextPart) and text.text == "Hello world"
    (cited,) = text.citations
    assert (cited.kind, cited.url, cited.title, cited.start_index, cited.end_index) == (
        "url_citation",
        "https://example.com/a",
        "A",
        0,
        5,
    )
    assert cited.native == URL_CITATION
    assert all(content == contents["whole"] for content in contents.values()), contents
    # the stream also announces it as a citation chunk, after the text chunks
    kinds = [(c.kind, c.citation) for c in of_type(runs["raw"], AssistantChunkEvent)]
    assert kinds == [("text", None), ("text", None), ("citation", cited)]


def test_reasoning_content_from_compatible_servers_becomes_thinking() -> None:
    body = sse(
        chunk({"role": "assistant", "reasoning_content": "Let me "}),
        chunk({"reasoning_content": "think."}),
        chunk({"content": "Answer"}),
        chunk(finish="stop"),
    )
    events = feed_raw(body)
    (message,) = of_type(events, AssistantMessageEvent)
    thinking, text = message.content
    assert isinstance(thinking, ThinkingPart)
    assert thinking.text == "Let me think." and thinking.signature is None
    assert thinking.provenance == Provenance(provider="openai", api="chat", model="m-1")
    assert text == TextPart(text="Answer")
    kinds = [c.kind for c in of_type(events, AssistantChunkEvent)]
    assert kinds == ["thinking", "thinking", "text"]


def test_cut_stream_gives_partial_message_and_interrupted_turn() -> None:
    interaction = load("stream_parallel_tool_calls_raw.json")["interactions"][0]
    body = body_bytes(interaction)
    cut = body.index(b"Edinb") + 3  # inside the first call's arguments
    adapter = OpenAIChatAdapter()
    before = adapter.feed(body[:cut])
    after = adapter.close()
    assert of_type(before, AssistantChunkEvent), "chunks before the cut are kept"
    (message,) = of_type(after, AssistantMessageEvent)
    assert message.status == "partial"
    (call,) = message.content
    assert isinstance(call, ToolCallPart) and call.arguments is None
    # The torn frame holding '"Edinb' is kept as native/unknown, not half-parsed.
    assert call.arguments_raw == '{"city": '
    (torn,) = of_type(after, NativeUnknownEvent)
    assert torn.reason is not None and torn.reason.startswith("invalid JSON")
    assert '"Edi' in torn.payload
    assert [w.code for w in of_type(after, WarningEvent)] == ["tool_arguments_truncated"]
    (error,) = of_type(after, ErrorEvent)
    assert error.code == "stream_cut"
    assert of_type(after, StepEndEvent)[0].status == "interrupted"
    assert of_type(after, TurnEndEvent)[0].status == "interrupted"


def test_malformed_and_unknown_chunks_are_kept_and_the_stream_goes_on() -> None:
    body = (
        sse(chunk({"role": "assistant", "content": "Hel"}), done=False)
        + b"data: {not json\n\n"
        + sse({"id": "chatcmpl-x", "choices": [{"index": 0, "delta": {"content": 5}}]}, done=False)
        + sse({"type": "ping"}, done=False)
        + sse(chunk({"content": "lo"}), chunk(finish="stop"))
    )
    events = feed_raw(body, piece=5)
    unknown = of_type(events, NativeUnknownEvent)
    assert len(unknown) == 3
    assert unknown[0].payload == "{not json" and unknown[0].reason is not None
    assert unknown[0].reason.startswith("invalid JSON")
    assert unknown[1].payload["choices"][0]["delta"]["content"] == 5
    assert unknown[2].payload == {"type": "ping"} and unknown[2].native_type == "ping"
    (message,) = of_type(events, AssistantMessageEvent)
    assert message.content == [TextPart(text="Hello")] and message.status == "complete"


def test_in_stream_error_fails_the_response() -> None:
    error = {"error": {"message": "The server had an error", "type": "server_error", "code": None}}
    body = sse(chunk({"content": "Hi"}), error, done=False)
    events = feed_raw(body)
    (failure,) = of_type(events, ErrorEvent)
    assert failure.message == "The server had an error" and failure.code == "server_error"
    assert failure.retryable is True and failure.http_status is None
    (message,) = of_type(events, AssistantMessageEvent)
    assert message.status == "partial" and message.content == [TextPart(text="Hi")]
    (turn_end,) = of_type(events, TurnEndEvent)
    assert turn_end.status == "failed" and turn_end.error == "The server had an error"


def test_in_stream_error_through_the_sdk_is_logged_then_raised() -> None:
    error = {"error": {"message": "boom", "type": "server_error", "code": "server_error"}}
    body = sse(chunk({"content": "Hi"}), error, done=False)
    log = SessionLog()
    with respx.mock() as mock:
        mock.post(URL).mock(
            return_value=httpx.Response(
                200, content=body, headers={"content-type": "text/event-stream"}
            )
        )
        stream = client().chat.completions.create(**DEFAULT_REQUEST)
        with pytest.raises(openai.APIError):
            for _ in tap(stream, log):
                pass
    events = log.events()
    assert [event.seq for event in events] == list(range(len(events)))
    (failure,) = of_type(events, ErrorEvent)
    assert (failure.code, failure.message) == ("server_error", "boom")
    assert of_type(events, TurnEndEvent)[0].status == "failed"


def test_tap_appends_to_a_log_and_yields_native_chunks() -> None:
    interaction = load("stream_tool_call_then_text_usage.json")["interactions"][1]

    store = MemoryStore()
    log = SessionLog(store, "chat-tap")
    with respx.mock() as mock:
        mock.post(URL).mock(
            return_value=httpx.Response(
                200, content=body_bytes(interaction), headers={"content-type": "text/event-stream"}
            )
        )
        stream = client().chat.completions.create(**interaction["request_body"])
        natives = list(tap(stream, log))
    assert all(type(item).__name__ == "ChatCompletionChunk" for item in natives)
    text = "".join(c.choices[0].delta.content or "" for c in natives if c.choices)
    (message,) = of_type(log.events(), AssistantMessageEvent)
    assert message.content == [TextPart(text=text)]
    assert isinstance(log.events()[-1], TurnEndEvent)
    # The tap checkpointed: the store holds every event, in order.
    stored = list(store.read("chat-tap"))
    assert [event.id for event in stored] == [event.id for event in log.events()]


def test_str_lines_and_dicts_are_accepted() -> None:
    body = sse(chunk({"content": "Hi"}), chunk(finish="stop"))
    adapter = OpenAIChatAdapter()
    events: list[Event] = []
    for line in body.decode().splitlines():
        events += adapter.feed(line)
    events += adapter.close()
    assert shape(events) == shape(feed_raw(body))
    adapter = OpenAIChatAdapter()
    dict_events = adapter.feed(chunk({"content": "Hi"})) + adapter.feed(chunk(finish="stop"))
    dict_events += adapter.close()
    assert shape(dict_events) == shape(feed_raw(body))


def test_input_that_is_not_chat_completions_raises_adapter_error() -> None:
    from universal_event.errors import AdapterError

    with pytest.raises(AdapterError, match="openai-chat"):
        OpenAIChatAdapter().feed(42)
    with pytest.raises(AdapterError):
        OpenAIChatAdapter().feed("hello there")
    adapter = OpenAIChatAdapter()
    assert adapter.feed(b'{"id": "chatcmpl-1", "choices": [') == []
    with pytest.raises(AdapterError, match="neither SSE nor"):
        adapter.close()


def test_custom_tool_legacy_function_call_and_reasoning_alias_in_whole_completions() -> None:
    completion = {
        "id": "chatcmpl-w",
        "object": "chat.completion",
        "model": "m-2",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "reasoning": "thought",
                    "content": None,
                    "function_call": {"name": "old", "arguments": "{}"},
                    "tool_calls": [
                        {
                            "id": "call_c",
                            "type": "custom",
                            "custom": {"name": "apply_patch", "input": "*** Begin Patch"},
                        },
                        {
                            "id": "call_f",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                        },
                    ],
                },
            }
        ],
    }
    adapter = OpenAIChatAdapter()
    events = adapter.feed(completion) + adapter.close()
    (message,) = of_type(events, AssistantMessageEvent)
    thinking, custom, function = message.content
    assert isinstance(thinking, ThinkingPart) and thinking.text == "thought"
    assert custom == ToolCallPart(
        id="call_c", name="apply_patch", arguments_raw="*** Begin Patch", kind="custom"
    )
    # An empty argument string is a call without arguments; the exact text is kept.
    assert function == ToolCallPart(id="call_f", name="f", arguments={}, arguments_raw="")
    (legacy,) = of_type(events, NativeUnknownEvent)
    assert legacy.payload == {"function_call": {"name": "old", "arguments": "{}"}}


def test_atap_with_the_async_client() -> None:
    import asyncio

    from adapters.openai_chat import atap

    interaction = load("stream_n3_choices.json")["interactions"][0]

    async def run() -> SessionLog:
        log = SessionLog()
        async_client = openai.AsyncOpenAI(
            api_key="sk-test", base_url="https://api.openai.com/v1", max_retries=0
        )
        with respx.mock() as mock:
            mock.post(URL).mock(
                return_value=httpx.Response(
                    200,
                    content=body_bytes(interaction),
                    headers={"content-type": "text/event-stream"},
                )
            )
            stream = await async_client.chat.completions.create(**DEFAULT_REQUEST)
            async for _ in atap(stream, log):
                pass
        return log

    log = asyncio.run(run())
    assert shape(log.events()) == shape(feed_raw(body_bytes(interaction)))
