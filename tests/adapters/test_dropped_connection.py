"""A connection that drops mid-stream is logged alike by every HTTP SDK adapter: one
retryable ``error`` (the SDK's exception), the message so far as ``partial``, the step
and the turn ``failed``; the exception reaches the caller. Real SDK clients over
respx, replaying the first half of a recorded stream, then the connection reset."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
import respx

from adapters import anthropic as anthropic_adapter
from adapters import openai_chat, openai_responses
from tests.adapters.test_anthropic_tap import REQUEST, START
from tests.adapters.test_openai_chat import body_bytes, load
from tests.adapters.test_openai_responses_input import fixture_body
from universal_event.events import (
    AssistantMessageEvent,
    ErrorEvent,
    StepEndEvent,
    TurnEndEvent,
)
from universal_event.log import SessionLog


def _first_half(body: bytes) -> bytes:
    """The SSE events of ``body`` up to its middle (whole events only)."""
    return body[: len(body) // 2].rsplit(b"\n\n", 1)[0] + b"\n\n"


def _cut(head: bytes) -> Iterator[bytes]:
    yield head
    raise httpx.ReadError("connection reset by peer")


def _anthropic(router: respx.MockRouter) -> Any:
    router.post("https://api.anthropic.com/v1/messages").mock(
        return_value=httpx.Response(200, content=_cut(START), headers=_SSE)
    )
    client = anthropic.Anthropic(api_key="test", max_retries=0)
    return anthropic_adapter.tap, client.messages.create(**REQUEST)


def _responses(router: respx.MockRouter) -> Any:
    head = _first_half(fixture_body("stream_annotations_url_citation.json"))
    router.post("https://api.openai.com/v1/responses").mock(
        return_value=httpx.Response(200, content=_cut(head), headers=_SSE)
    )
    client = openai.OpenAI(api_key="sk-test", max_retries=0)
    return openai_responses.tap, client.responses.create(model="gpt-5", input="hi", stream=True)


def _chat(router: respx.MockRouter) -> Any:
    interaction = load("stream_tool_call_then_text_usage.json")["interactions"][0]
    head = _first_half(body_bytes(interaction))
    router.post("https://api.openai.com/v1/chat/completions").mock(
        return_value=httpx.Response(200, content=_cut(head), headers=_SSE)
    )
    client = openai.OpenAI(api_key="sk-test", max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    return openai_chat.tap, stream


_SSE = {"content-type": "text/event-stream"}
PROVIDERS: dict[str, Callable[[respx.MockRouter], Any]] = {
    "anthropic": _anthropic,
    "openai-responses": _responses,
    "openai-chat": _chat,
}


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_dropped_connection_is_one_retryable_error_and_a_failed_turn(provider: str) -> None:
    log = SessionLog()
    with respx.mock() as router:
        tap, stream = PROVIDERS[provider](router)
        with pytest.raises(Exception) as raised:
            for _ in tap(stream, log):
                pass
    events = log.events()
    (error,) = [e for e in events if isinstance(e, ErrorEvent)]
    assert error.code == type(raised.value).__name__ and error.retryable is True
    assert error.http_status is None
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert message.status == "partial" and message.content
    assert [e.status for e in events if isinstance(e, StepEndEvent)] == ["failed"]
    assert [e.status for e in events if isinstance(e, TurnEndEvent)] == ["failed"]
    assert log.persisted_seq == len(events)  # durable before the exception surfaced
