"""Native input of an unexpected shape, for every adapter: the item is kept as
``native/unknown`` naming what was wrong, the events around it are not lost, and no
exception other than the project's own escapes (feed or close)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters import RUNTIMES, create_adapter
from universal_event.events import AssistantMessageEvent, Event, NativeUnknownEvent

CAPTURED = Path(__file__).parent.parent / "fixtures" / "captured"
RECORDED = Path(__file__).parent.parent / "fixtures" / "recorded"


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def _normalise(runtime: str, data: bytes) -> list[Event]:
    adapter = create_adapter(runtime, session_id="s")
    return adapter.feed(data) + adapter.close()


def _kept(events: list[Event]) -> list[str]:
    return [e.reason for e in events if isinstance(e, NativeUnknownEvent)]


_ANTHROPIC_START = {
    "type": "message_start",
    "message": {"id": "msg_1", "model": "claude", "role": "assistant", "content": []},
}
_RESPONSES_START = {
    "type": "response.created",
    "response": {"id": "resp_1", "status": "in_progress", "model": "gpt", "output": []},
}


@pytest.mark.parametrize(
    ("runtime", "data"),
    [
        # a text delta that is no text (it used to break the block at its stop)
        (
            "anthropic",
            _sse(
                _ANTHROPIC_START,
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
                {"type": "content_block_delta", "index": 0, "delta": {"text": "ok "}},
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": 5},
                },
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "!"},
                },
                {"type": "content_block_stop", "index": 0},
                {"type": "message_stop"},
            ),
        ),
        (
            "anthropic",
            _sse(
                _ANTHROPIC_START,
                {"type": "content_block_start", "index": 0, "content_block": ["x"]},
            ),
        ),
        # an output item of another shape (it used to break the message at the end)
        (
            "openai-responses",
            _sse(
                _RESPONSES_START,
                {
                    "type": "response.output_item.done",
                    "output_index": 0,
                    "item": {"id": "rs_1", "type": "reasoning", "summary": [None]},
                },
                {"type": {"not": "a name"}},
            ),
        ),
        # a chunk that is not UTF-8
        ("openai-chat", b'data: {"object":"chat.completion.chunk","\x92":1}\n\n'),
        # an assistant line whose message id is an object
        (
            "claude-code",
            (CAPTURED / "claude" / "cli" / "c01_tool" / "stdout.jsonl").read_bytes()
            + b'{"type":"assistant","message":{"id":{},"content":[]}}\n',
        ),
        # a typed app-server line with content of another type
        (
            "codex",
            b'{"method":"item/completed","params":{"item":{"type":"userMessage","id":"u",'
            b'"content":5}}}\n',
        ),
    ],
    ids=["anthropic-delta", "anthropic-block", "responses-item", "chat-utf8", "claude-id", "codex"],
)
def test_a_native_item_of_another_shape_is_kept_and_the_rest_goes_on(
    runtime: str, data: bytes
) -> None:
    events = _normalise(runtime, data)
    reasons = _kept(events)
    assert reasons and any("malformed" in r or "unexpected shape" in r for r in reasons), reasons


def test_events_before_and_after_the_damaged_item_are_kept() -> None:
    good = (CAPTURED / "claude" / "cli" / "c01_tool" / "stdout.jsonl").read_bytes()
    lines = good.splitlines(keepends=True)
    damaged = b"".join([*lines[:3], b'{"type":"assistant","message":{"id":[1]}}\n', *lines[3:]])
    clean = _normalise("claude-code", good)
    events = _normalise("claude-code", damaged)
    assert len(events) == len(clean) + 1
    assert sum(isinstance(e, AssistantMessageEvent) for e in events) == sum(
        isinstance(e, AssistantMessageEvent) for e in clean
    )


@pytest.mark.parametrize("runtime", ["anthropic", "openai-chat", "openai-responses"])
def test_an_error_page_instead_of_a_stream_is_kept(runtime: str) -> None:
    """A proxy's HTML or plain-text error where SSE was expected: no SSE field, so the
    standard ignores it; the adapter keeps it as native/unknown instead of nothing."""
    events = _normalise(runtime, b"<html><body>502 Bad Gateway</body></html>\n")
    assert [e.payload for e in events if isinstance(e, NativeUnknownEvent)] == [
        "<html><body>502 Bad Gateway</body></html>"
    ]


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_bytes_that_are_not_utf8_are_kept_whole(runtime: str) -> None:
    """Binary garbage is kept as native/unknown with its bytes recoverable (base64),
    not with replacement characters that lose them."""
    import base64

    garbage = bytes(range(128, 256)) + b"\n"
    adapter = create_adapter(runtime)
    events = [*adapter.feed(garbage), *adapter.close()]
    kept = [e for e in events if isinstance(e, NativeUnknownEvent)]
    assert kept, events
    recovered = b"".join(
        base64.b64decode(e.payload["base64"]) for e in kept if isinstance(e.payload, dict)
    )
    assert recovered == bytes(range(128, 256))
    assert not any("\ufffd" in str(e.payload) for e in kept)


@pytest.mark.parametrize(
    ("runtime", "fixture", "tier"),
    [
        ("anthropic", "anthropic-messages/stream_parallel_tool_use.json", "standard"),
        ("openai-chat", "openai-chat/stream_tool_call_then_text_usage.json", "default"),
        (
            "openai-responses",
            "openai-responses/stream_reasoning_encrypted_function_call.json",
            "flex",
        ),
    ],
)
def test_usage_says_which_service_tier_the_request_ran_in(
    runtime: str, fixture: str, tier: str
) -> None:
    """The tier sets the price (OpenAI ``flex`` is half): a usage event names it."""
    from universal_event.events import UsageEvent
    from universal_event.ingest import normalize_bytes

    interaction = json.loads((RECORDED / fixture).read_text())["interactions"][0]
    body = interaction["response_body"]
    if interaction["response_body_format"] == "sse-data-jsonl":
        body = "".join(f"data: {line}\n\n" for line in body.splitlines() if line.strip())
    elif not isinstance(body, str):
        body = json.dumps(body)
    usages = [e for e in normalize_bytes(runtime, body.encode()) if isinstance(e, UsageEvent)]
    assert usages and {u.service_tier for u in usages} == {tier}
