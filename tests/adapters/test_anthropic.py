"""Every recorded Anthropic Messages fixture, replayed through the real ``anthropic``
client over respx (streamed: the SDK's typed events; non-streamed: its ``Message``;
errors: the SDK's exception body), and through the raw-bytes fast path.

The expected values are pinned from the recordings (tests/fixtures/recorded/
anthropic-messages): part kinds, stop reason, and usage normalised once (input includes
cache reads and writes).
"""

from __future__ import annotations

import inspect
import json
import warnings
from typing import Any

import anthropic
import httpx
import pytest
import respx

from adapters.anthropic import AnthropicAdapter
from tests.adapters._anthropic_support import recorded, recorded_names, sse_body
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    NativeUnknownEvent,
    UsageEvent,
)
from universal_event.parts import (
    Provenance,
    ServerToolCallPart,
    ServerToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

Row = tuple[Any, ...]
EXPECTED: dict[str, list[Row]] = {
    "error_400_invalid_request.json": [("error", "invalid_request_error", 400)],
    "error_404_model_not_found.json": [("error", "not_found_error", 404)],
    "image_url_input.json": [(("text",), "end_turn", (296, 0, 0, 91))],
    "parallel_tool_use_nonstream.json": [
        (
            ("text", "tool_call", "tool_call", "tool_call", "tool_call"),
            "tool_use",
            (423, 0, 0, 202),
        ),
        (("text",), "end_turn", (771, 0, 0, 77)),
    ],
    "prompt_caching_usage.json": [
        (("text",), "end_turn", (1114, 1111, 0, 406)),
        (("text",), "end_turn", (1532, 1111, 418, 33)),
    ],
    "redacted_thinking_replay.json": [
        (("thinking", "text"), "end_turn", (92, 0, 0, 196)),
        (("thinking", "text"), "end_turn", (168, 0, 0, 232)),
    ],
    "stream_advisor_server_tool.json": [
        (
            (
                "thinking",
                "text",
                "server_tool_call",
                "server_tool_result:advisor_tool_result",
                "text",
            ),
            "end_turn",
            (2411, 0, 0, 145),
        )
    ],
    "stream_client_tool_two_turns.json": [
        (("tool_call",), "tool_use", (1270, 0, 0, 82)),
        (("text",), "end_turn", (1391, 0, 0, 49)),
    ],
    "stream_code_execution_thinking.json": [
        (
            (
                "thinking",
                "text",
                "server_tool_call",
                "server_tool_result:bash_code_execution_tool_result",
                "text",
            ),
            "end_turn",
            (4714, 0, 0, 304),
        )
    ],
    "stream_document_citations.json": [(("text",), "end_turn", (569, 0, 0, 28))],
    "stream_image_base64_input.json": [(("text",), "end_turn", (83, 0, 0, 9))],
    "stream_mcp_servers.json": [
        (
            ("thinking", "server_tool_call", "server_tool_result:mcp_tool_result", "text"),
            "end_turn",
            (3042, 0, 0, 354),
        )
    ],
    "stream_parallel_tool_use.json": [
        (("text", "tool_call", "tool_call"), "tool_use", (506, 0, 0, 153))
    ],
    "stream_prefill_stop_sequence.json": [(("text",), "stop_sequence", (16, 0, 0, 28))],
    "stream_redacted_thinking.json": [
        (("thinking", "thinking", "text"), "end_turn", (92, 0, 0, 189))
    ],
    "stream_thinking_signature_text.json": [(("thinking", "text"), "end_turn", (43, 0, 0, 282))],
    "stream_thinking_tooluse_signature_replay.json": [
        (("thinking", "tool_call"), "tool_use", (598, 0, 0, 92)),
        (("text",), "end_turn", (707, 0, 0, 89)),
    ],
    "stream_tool_search_then_client_tool.json": [
        (
            (
                "text",
                "server_tool_call",
                "server_tool_result:tool_search_tool_result",
                "text",
                "tool_call",
            ),
            "tool_use",
            (1591, 0, 0, 175),
        ),
        (("text",), "end_turn", (1007, 0, 0, 59)),
    ],
    "stream_tool_use_raw.json": [(("text", "tool_call"), "tool_use", (377, 0, 0, 65))],
    "stream_web_fetch_thinking.json": [
        (
            ("thinking", "server_tool_call", "server_tool_result:web_fetch_tool_result", "text"),
            "end_turn",
            (7244, 0, 0, 153),
        )
    ],
    "stream_web_search_citations_thinking.json": [
        (
            ("thinking", "server_tool_call", "server_tool_result:web_search_tool_result", "text")
            + ("server_tool_call", "server_tool_result:web_search_tool_result")
            + ("text",) * 11,
            "end_turn",
            (22397, 0, 0, 637),
        )
    ],
    "thinking_tool_use_nonstream.json": [
        (("thinking", "text", "tool_call"), "tool_use", (398, 0, 0, 155)),
        (("text",), "end_turn", (566, 0, 0, 126)),
    ],
}

_CREATE_KEYS = set(inspect.signature(anthropic.resources.Messages.create).parameters) - {
    "self",
    "stream",
}
"""What this SDK version's ``messages.create`` takes; other request keys go in extra_body."""


def test_every_recorded_fixture_has_expectations() -> None:
    assert sorted(EXPECTED) == recorded_names()


def _kwargs(body: dict[str, Any] | None) -> dict[str, Any]:
    body = dict(body or {"model": "claude-sonnet-4-20250514", "max_tokens": 1024, "messages": []})
    body.pop("stream", None)
    known = {k: v for k, v in body.items() if k in _CREATE_KEYS}
    extra = {k: v for k, v in body.items() if k not in _CREATE_KEYS}
    return {**known, "extra_body": extra}


def _via_sdk(interaction: dict[str, Any]) -> list[Event]:
    """Replay one interaction through the real client; feed what the SDK hands back."""
    adapter = AnthropicAdapter()
    events: list[Event] = []
    streamed = interaction["response_body_format"] == "sse"
    status = interaction["response_status"] or 200
    content_type = "text/event-stream" if streamed else "application/json"
    with (
        warnings.catch_warnings(),
        respx.mock(base_url="https://api.anthropic.com") as router,
    ):
        # The recordings name models the SDK now calls deprecated; that is not under test.
        warnings.simplefilter("ignore", DeprecationWarning)
        route = router.post("/v1/messages").mock(
            return_value=httpx.Response(
                status, content=sse_body(interaction), headers={"content-type": content_type}
            )
        )
        client = anthropic.Anthropic(api_key="test", max_retries=0)
        try:
            if streamed:
                for event in client.messages.create(
                    **_kwargs(interaction["request_body"]), stream=True
                ):
                    events.extend(adapter.feed(event))
            else:
                events.extend(
                    adapter.feed(client.messages.create(**_kwargs(interaction["request_body"])))
                )
        except anthropic.APIStatusError as error:
            assert error.status_code == status
            events.extend(adapter.feed(error.response.json()))
        assert route.called
    events.extend(adapter.close())
    return events


def _summary(events: list[Event]) -> Row:
    messages = [e for e in events if isinstance(e, AssistantMessageEvent)]
    if not messages:
        (error,) = [e for e in events if isinstance(e, ErrorEvent)]
        return ("error", error.code, error.http_status)
    (message,) = messages
    (usage_event,) = [e for e in events if isinstance(e, UsageEvent)]
    usage = usage_event.usage
    kinds = tuple(
        f"server_tool_result:{p.kind}"
        if isinstance(p, ServerToolResultPart)
        else p.__struct_config__.tag
        for p in message.content
    )
    figures = (
        usage.input_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.output_tokens,
    )
    return (kinds, message.stop_reason, figures)


UNTERMINATED = "stream_tool_use_raw.json"
"""Its stored body ends ``data: {"type":"message_stop"}`` without the blank line that
terminates an SSE event. The anthropic SDK's decoder drops such a last event (checked:
with ``\n\n`` appended it yields ``message_stop``), so over the SDK the adapter never
sees ``message_stop`` and reports the message partial; the raw-bytes path flushes the
pending frame at ``close()`` and completes it."""


def _check_semantics(events: list[Event], name: str, *, via_sdk: bool = False) -> None:
    """What holds for every message: chunks rebuild it, provenance, usage once."""
    assert not [e for e in events if isinstance(e, NativeUnknownEvent)], name
    for message in (e for e in events if isinstance(e, AssistantMessageEvent)):
        cut = via_sdk and name == UNTERMINATED
        assert message.status == ("partial" if cut else "complete")
        assert message.provenance == Provenance(
            provider="anthropic",
            api="messages",
            model=message.source.model if message.source else None,
        )
        chunks = [
            e
            for e in events
            if isinstance(e, AssistantChunkEvent) and e.message_id == message.message_id
        ]
        if message.source is not None and message.source.native_type == "message":
            assert chunks == []  # not streamed
            continue
        by_index: dict[int, dict[str, str]] = {}
        for chunk in chunks:
            by_index.setdefault(chunk.index, {}).setdefault(chunk.kind, "")
            by_index[chunk.index][chunk.kind] += chunk.delta
        streamed_parts = list(message.content)
        indexes = sorted(by_index)
        for part in streamed_parts:
            if isinstance(part, TextPart):
                texts = [v["text"] for v in by_index.values() if v.get("text") == part.text]
                assert texts, f"{name}: chunks do not rebuild text {part.text[:40]!r}"
            elif isinstance(part, ThinkingPart) and part.redacted_data is None:
                assert any(
                    v.get("thinking", "") == part.text and v.get("signature") == part.signature
                    for v in by_index.values()
                ), name
                assert part.signature
            elif isinstance(part, ToolCallPart):
                raw = next(
                    by_index[i]["tool_arguments"]
                    for i in indexes
                    if any(
                        c.tool_call_id == part.id and c.index == i
                        for c in chunks
                        if c.kind == "tool_arguments"
                    )
                )
                assert (json.loads(raw) if raw.strip() else {}) == part.arguments
            elif isinstance(part, ServerToolCallPart):
                assert part.native["id"] == part.id and part.native["input"] == part.input


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replay_through_the_sdk(name: str) -> None:
    fixture = recorded(name)
    rows = []
    for interaction in fixture["interactions"]:
        events = _via_sdk(interaction)
        _check_semantics(events, name, via_sdk=True)
        rows.append(_summary(events))
    assert rows == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_raw_bytes_fast_path_equals_the_sdk_path(name: str) -> None:
    for interaction in recorded(name)["interactions"]:
        sdk_events = _via_sdk(interaction)
        adapter = AnthropicAdapter()
        raw_events = adapter.feed(sse_body(interaction)) + adapter.close()
        _check_semantics(raw_events, name)

        def content(events: list[Event]) -> list[Any]:
            return [
                (e.content, e.stop_reason, e.message_id)
                for e in events
                if isinstance(e, AssistantMessageEvent)
            ]

        if name == UNTERMINATED:
            # Same content; over the SDK the stop is lost, so the message is partial and
            # the step/turn end interrupted with a stream_interrupted error.
            (sdk_message,) = [e for e in sdk_events if isinstance(e, AssistantMessageEvent)]
            (raw_message,) = [e for e in raw_events if isinstance(e, AssistantMessageEvent)]
            assert sdk_message.content == raw_message.content
            assert (sdk_message.status, raw_message.status) == ("partial", "complete")
            errors = [e.code for e in sdk_events if isinstance(e, ErrorEvent)]
            assert errors == ["stream_interrupted"]
            continue
        assert content(raw_events) == content(sdk_events)
        assert [e.__struct_config__.tag for e in raw_events] == [
            e.__struct_config__.tag for e in sdk_events
        ]


def test_the_matched_stop_sequence_is_kept_sdk_and_bytes() -> None:
    interaction = recorded("stream_prefill_stop_sequence.json")["interactions"][0]
    adapter = AnthropicAdapter()
    for events in (_via_sdk(interaction), adapter.feed(sse_body(interaction)) + adapter.close()):
        (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
        assert message.stop_reason == "stop_sequence" and message.stop_sequence == "```"


def test_thinking_signature_and_empty_tool_input() -> None:
    interaction = recorded("stream_thinking_tooluse_signature_replay.json")["interactions"][0]
    events = _via_sdk(interaction)
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    thinking, call = message.content
    assert isinstance(thinking, ThinkingPart) and thinking.signature is not None
    assert thinking.signature.startswith("EoQDCm0IDhgCKkCDzGs2")
    assert thinking.provenance == Provenance(
        provider="anthropic", api="messages", model="claude-haiku-4-5-20251001"
    )
    # A tool without arguments streams one input_json_delta with partial_json "".
    assert call == ToolCallPart(
        id="toolu_01825dXWLSoJwCst1qTsiWdb",
        name="fixed_version",
        arguments={},
        provenance=thinking.provenance,
    )
    arg_chunks = [
        e for e in events if isinstance(e, AssistantChunkEvent) and e.kind == "tool_arguments"
    ]
    assert [c.delta for c in arg_chunks] == [""]


def test_citations_and_redacted_thinking() -> None:
    events = _via_sdk(recorded("stream_document_citations.json")["interactions"][0])
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    (text,) = message.content
    assert isinstance(text, TextPart) and text.citations
    assert text.citations[0].kind == "char_location"
    assert text.citations[0].native is not None
    citation_chunks = [
        e for e in events if isinstance(e, AssistantChunkEvent) and e.kind == "citation"
    ]
    assert [c.citation for c in citation_chunks] == text.citations

    events = _via_sdk(recorded("stream_redacted_thinking.json")["interactions"][0])
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    redacted = [p for p in message.content if isinstance(p, ThinkingPart)]
    assert len(redacted) == 2 and all(p.redacted_data and not p.text for p in redacted)


def test_turns_and_steps_are_synthesised() -> None:
    fixture = recorded("stream_client_tool_two_turns.json")
    adapter = AnthropicAdapter()
    tags: list[str] = []
    first, second = fixture["interactions"]
    tags += [e.__struct_config__.tag for e in adapter.feed(sse_body(first)) + adapter.close()]
    tags += [
        e.__struct_config__.tag
        for e in adapter.tool_result("toolu_015czvgRAN7XL7DZXTBbSXiP", "print('hello')")
    ]
    tags += [e.__struct_config__.tag for e in adapter.feed(sse_body(second)) + adapter.close()]
    structural = [t for t in tags if t != "assistant/chunk"]
    assert structural == [
        "turn/start",
        "step/start",
        "assistant/message",
        "usage",
        "step/end",
        "tool/result",
        "step/start",
        "assistant/message",
        "usage",
        "step/end",
        "turn/end",
    ]


def test_streamed_tool_input_with_a_lone_surrogate_is_kept_as_text() -> None:
    """A streamed ``input_json`` holding half an emoji (``\\ud83d``) is kept as its text;
    parsed, it would be a string no store can encode (every checkpoint would fail)."""
    from universal_event import codec

    frames = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 1, "output_tokens": 0},
            },
        },  # fmt: skip
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "note", "input": {}},
        },  # fmt: skip
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"text":"x\\ud83d"}'},
        },  # fmt: skip
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 5},
        },  # fmt: skip
        {"type": "message_stop"},
    ]
    data = "".join(f"event: {f['type']}\ndata: {json.dumps(f)}\n\n" for f in frames).encode()
    adapter = AnthropicAdapter()
    events = adapter.feed(data) + adapter.close()
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    (call,) = message.content
    assert isinstance(call, ToolCallPart)
    assert (call.arguments, call.arguments_raw) == (None, '{"text":"x\\ud83d"}')
    assert all(codec.encode(event) for event in events)
