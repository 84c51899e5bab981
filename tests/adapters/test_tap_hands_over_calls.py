"""An SDK helper hands a tool call over before its message ends (the caller runs the tool
there): the tap holds that item and the ones after it back until the message holding
the call is logged and checkpointed, then yields them all, in order and unchanged
(the real ``anthropic`` / ``openai`` clients over respx, recorded streams)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import respx

import adapters.anthropic as anthropic_adapter
import adapters.openai_chat as chat_adapter
import adapters.openai_responses as responses_adapter
from universal_event.errors import AdapterError
from universal_event.events import AssistantMessageEvent
from universal_event.log import SessionLog
from universal_event.parts import ToolCallPart

RECORDED = Path(__file__).parent.parent / "fixtures" / "recorded"
URLS = {
    "anthropic-messages": "https://api.anthropic.com/v1/messages",
    "openai-chat": "https://api.openai.com/v1/chat/completions",
    "openai-responses": "https://api.openai.com/v1/responses",
}


def _recorded(api: str, name: str) -> tuple[bytes, dict[str, Any]]:
    interaction = json.loads((RECORDED / api / name).read_text())["interactions"][0]
    request = {
        k: v
        for k, v in interaction["request_body"].items()
        if k not in ("stream", "stream_options")
    }
    return interaction["response_body"].encode(), request


def _sse(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


def _anthropic_helper(request: dict[str, Any]) -> Any:
    return anthropic.Anthropic(api_key="t", max_retries=0).messages.stream(**request)


def _chat_helper(request: dict[str, Any]) -> Any:
    return openai.OpenAI(api_key="t", max_retries=0).chat.completions.stream(**request)


def _responses_create(request: dict[str, Any]) -> Any:
    return openai.OpenAI(api_key="t", max_retries=0).responses.create(**request, stream=True)


def _responses_helper(request: dict[str, Any]) -> Any:
    return openai.OpenAI(api_key="t", max_retries=0).responses.stream(**request)


CASES = [
    ("anthropic-messages", "stream_client_tool_two_turns.json", _anthropic_helper,
     anthropic_adapter.tap, lambda e: e.type == "content_block_stop"
     and e.content_block.type == "tool_use"),
    ("openai-chat", "stream_parallel_tool_calls_usage_3turns.json", _chat_helper,
     chat_adapter.tap, lambda e: e.type == "tool_calls.function.arguments.done"),
    ("openai-responses", "stream_function_call_then_text.json", _responses_create,
     responses_adapter.tap, lambda e: e.type == "response.output_item.done"
     and e.item.type == "function_call"),
    ("openai-responses", "stream_function_call_then_text.json", _responses_helper,
     responses_adapter.tap, lambda e: e.type == "response.function_call_arguments.done"),
]  # fmt: skip


def _has_call(log: SessionLog) -> bool:
    return any(
        isinstance(e, AssistantMessageEvent) and any(isinstance(p, ToolCallPart) for p in e.content)
        for e in log.events()
    )


@pytest.mark.parametrize(("api", "name", "open_stream", "tap", "hands_over"), CASES)
def test_a_call_handed_over_early_is_durable_when_the_caller_gets_it(
    api: str,
    name: str,
    open_stream: Callable[[dict[str, Any]], Any],
    tap: Callable[..., Iterator[Any]],
    hands_over: Callable[[Any], bool],
) -> None:
    body, request = _recorded(api, name)
    with respx.mock() as router:
        router.post(URLS[api]).mock(side_effect=lambda _: _sse(body))
        with open_stream(request) as stream:
            untapped = [type(item).__name__ + str(getattr(item, "type", "")) for item in stream]
        log = SessionLog()
        seen = []
        with open_stream(request) as stream:
            for item in tap(stream, log):
                seen.append(type(item).__name__ + str(getattr(item, "type", "")))
                if hands_over(item):
                    assert _has_call(log) and log.pending == 0
                    handed = True
    assert handed
    assert seen == untapped  # every item, in order


def test_async_tap_holds_the_call_back_too() -> None:
    body, request = _recorded("anthropic-messages", "stream_client_tool_two_turns.json")

    async def run() -> bool:
        client = anthropic.AsyncAnthropic(api_key="t", max_retries=0)
        log = SessionLog()
        with respx.mock() as router:
            router.post(URLS["anthropic-messages"]).mock(return_value=_sse(body))
            async with client.messages.stream(**request) as stream:
                async for event in anthropic_adapter.atap(stream, log):
                    if (
                        event.type == "content_block_stop"
                        and event.content_block.type == "tool_use"
                    ):
                        return _has_call(log) and log.pending == 0
        return False

    assert asyncio.run(run())


def test_a_stream_cut_inside_the_message_yields_the_held_items_after_the_partial_message() -> None:
    """The stream ends after the call's block, before ``message_stop``: the items held
    back come once the partial message (with the call) is logged."""
    body, request = _recorded("anthropic-messages", "stream_client_tool_two_turns.json")
    cut = body[: body.index(b"event: message_delta")]
    with respx.mock() as router:
        router.post(URLS["anthropic-messages"]).mock(return_value=_sse(cut))
        log = SessionLog()
        got = None
        with _anthropic_helper(request) as stream:
            for event in anthropic_adapter.tap(stream, log):
                if event.type == "content_block_stop" and event.content_block.type == "tool_use":
                    got = _has_call(log) and log.pending == 0
    assert got
    (message,) = [e for e in log.events() if isinstance(e, AssistantMessageEvent)]
    assert message.status == "partial"


def test_two_streams_read_in_turn_with_one_adapter_are_refused_not_merged() -> None:
    """Two requests' streams read in turn through the conversation's adapter: the second
    tap began while the first was paused (taken for one the caller stopped reading, so
    finished: partial message); the first, read again, raises AdapterError instead of
    feeding its items into the second's message, which is logged whole."""
    body, request = _recorded("anthropic-messages", "stream_client_tool_two_turns.json")
    client = anthropic.Anthropic(api_key="t", max_retries=0)
    log = SessionLog()
    adapter = anthropic_adapter.AnthropicAdapter(session_id=log.session_id)
    with respx.mock() as router:
        router.post(URLS["anthropic-messages"]).mock(side_effect=lambda _: _sse(body))
        first = anthropic_adapter.tap(
            client.messages.create(**request, stream=True), log, adapter=adapter
        )
        second = anthropic_adapter.tap(
            client.messages.create(**request, stream=True), log, adapter=adapter
        )
        for _ in range(3):
            next(first)
        next(second)
        with pytest.raises(AdapterError, match="one response at a time"):
            next(first)
        rest = list(second)
    assert rest
    messages = [e for e in log.events() if isinstance(e, AssistantMessageEvent)]
    assert [m.status for m in messages] == ["partial", "complete"]
    assert [type(p) for p in messages[1].content] == [ToolCallPart]
