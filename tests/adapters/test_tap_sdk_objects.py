"""What the SDKs hand a tap besides their plain stream objects: the OpenAI Chat
``chat.completions.stream()`` helper's events, and objects holding a field of another
type than declared (the SDKs build them unvalidated)."""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path
from typing import Any

import anthropic
import httpx
import msgspec
import openai
import pytest
import respx

import adapters.anthropic as anthropic_adapter
import adapters.openai_chat as chat_adapter
from universal_event.events import AssistantMessageEvent, Event, NativeUnknownEvent
from universal_event.log import SessionLog

CHAT_URL = "https://api.openai.com/v1/chat/completions"
CHAT_FIXTURES = Path(__file__).parent.parent / "fixtures" / "recorded" / "openai-chat"
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"


def _sse(content: bytes) -> httpx.Response:
    return httpx.Response(200, content=content, headers={"content-type": "text/event-stream"})


def _shape(events: list[Event]) -> list[dict[str, Any]]:
    """Events without their volatile envelope."""
    shaped = []
    for event in events:
        data = msgspec.to_builtins(event)
        for key in ("id", "ts", "turn_id", "seq", "session_id"):
            data.pop(key, None)
        shaped.append(data)
    return shaped


def _chat_interactions() -> list[tuple[str, int]]:
    cases = []
    for path in sorted(CHAT_FIXTURES.glob("stream_*.json")):
        interactions = json.loads(path.read_text())["interactions"]
        cases += [(path.name, number) for number in range(len(interactions))]
    return cases


def _chat_case(name: str, number: int) -> tuple[bytes, dict[str, Any]]:
    interaction = json.loads((CHAT_FIXTURES / name).read_text())["interactions"][number]
    request = dict(interaction["request_body"] or {})
    request.pop("stream", None)
    request.setdefault("model", "gpt-4o")
    request.setdefault("messages", [{"role": "user", "content": "hi"}])
    return interaction["response_body"].encode(), request


# ------------------------------------------------------------ chat.completions.stream()


@pytest.mark.parametrize(("name", "number"), _chat_interactions())
def test_the_chat_stream_helper_logs_what_create_stream_logs(name: str, number: int) -> None:
    body, request = _chat_case(name, number)
    client = openai.OpenAI(api_key="sk-test", max_retries=0)
    with respx.mock() as router:
        router.post(CHAT_URL).mock(return_value=_sse(body))
        created = SessionLog()
        with client.chat.completions.create(**request, stream=True) as stream:
            for _ in chat_adapter.tap(stream, created):
                pass
        helped = SessionLog()
        with client.chat.completions.stream(**request) as helper:
            seen = [event.type for event in chat_adapter.tap(helper, helped)]
    assert "chunk" in seen and len(set(seen)) > 1  # the helper's own events went by too
    assert _shape(helped.events()) == _shape(created.events())
    assert any(isinstance(e, AssistantMessageEvent) for e in helped.events())
    assert (
        not any(
            isinstance(e, NativeUnknownEvent) and "without choices" in (e.reason or "")
            for e in helped.events()
        )
        or name == "stream_usage_then_moderation_chunk.json"
    )


def test_the_async_chat_stream_helper_logs_what_create_stream_logs() -> None:
    body, request = _chat_case("stream_tool_call_then_text_usage.json", 1)

    async def run() -> tuple[SessionLog, SessionLog]:
        client = openai.AsyncOpenAI(api_key="sk-test", max_retries=0)
        with respx.mock() as router:
            router.post(CHAT_URL).mock(return_value=_sse(body))
            created = SessionLog()
            async with await client.chat.completions.create(**request, stream=True) as stream:
                async for _ in chat_adapter.atap(stream, created):
                    pass
            helped = SessionLog()
            async with client.chat.completions.stream(**request) as helper:
                async for _ in chat_adapter.atap(helper, helped):
                    pass
        return created, helped

    created, helped = asyncio.run(run())
    assert _shape(helped.events()) == _shape(created.events())
    (message,) = [e for e in helped.events() if isinstance(e, AssistantMessageEvent)]
    assert message.content


# ------------------------------------------------------------ off-type fields, no warnings


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1730000000.25,  # declared int: pydantic would warn when dumping
        "model": "gpt-4o",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\n"


OFF_TYPE_CHAT = (
    _chat_chunk({"role": "assistant", "content": "Hi"})
    + _chat_chunk({}, "stop")
    + "data: [DONE]\n\n"
).encode()
OFF_TYPE_ANTHROPIC = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
    b'"type":"message","role":"assistant","model":"claude-x","content":[],'
    b'"usage":{"input_tokens":5.5,"output_tokens":1}}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def test_tapping_chat_objects_with_an_off_type_field_warns_no_more_than_the_sdk() -> None:
    with respx.mock() as router, warnings.catch_warnings():
        warnings.simplefilter("error")
        router.post(CHAT_URL).mock(return_value=_sse(OFF_TYPE_CHAT))
        log = SessionLog()
        stream = openai.OpenAI(api_key="sk-test", max_retries=0).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        assert len(list(chat_adapter.tap(stream, log))) == 2
    (message,) = [e for e in log.events() if isinstance(e, AssistantMessageEvent)]
    assert message.status == "complete"


def test_tapping_anthropic_objects_with_an_off_type_field_warns_no_more_than_the_sdk() -> None:
    with respx.mock() as router, warnings.catch_warnings():
        warnings.simplefilter("error")
        router.post(ANTHROPIC_URL).mock(return_value=_sse(OFF_TYPE_ANTHROPIC))
        log = SessionLog()
        stream = anthropic.Anthropic(api_key="t", max_retries=0).messages.create(
            model="claude-x",
            max_tokens=8,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        assert len(list(anthropic_adapter.tap(stream, log))) == 2
    assert [e for e in log.events() if isinstance(e, AssistantMessageEvent)]
