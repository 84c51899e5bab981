"""Switching runtimes mid-session: every source rendered for every target, and back.

Sources: ``anthropic``, ``openai-chat``, ``openai-responses`` (a history in that
request format, read with ``parse_request``), ``claude-code`` and ``codex`` (the same
plus a real captured run normalised by their adapters, with a failed tool call). Every
session has text, thinking, parallel tool calls, a failed tool call and an image.

For each (source, target): the request renders, validates against the target SDK's
types, every turn is there (user texts, assistant texts, each tool call and result),
and no provider-bound reasoning leaks to a foreign target. Then a recorded response of
the target is normalised into the same session and the session is rendered back for
the source: A → B → A loses nothing — the source's own rendering before the switch is
a prefix of the one after it, signatures and encrypted reasoning included.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from adapters._render import TOOL_ERROR_MARKER, RenderPolicy, same_origin
from tests.adapters._render_support import FIXTURES, log_of, validate_history, validate_request
from tests.adapters.test_render_oracle import TARGETS, _response_events, module, recording
from universal_event.events import Event, UserMessageEvent
from universal_event.ingest import normalize_bytes
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import Provenance, TextPart, ThinkingPart, ToolCallPart

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
TARGET_MODELS = {
    "anthropic": "claude-sonnet-4-5",
    "openai-chat": "gpt-4o",
    "openai-responses": "gpt-5",
}
SOURCE_FORMAT = {
    "anthropic": "anthropic",
    "claude-code": "anthropic",
    "openai-chat": "openai-chat",
    "openai-responses": "openai-responses",
    "codex": "openai-responses",
}
SOURCES = tuple(SOURCE_FORMAT)


def anthropic_body(model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 8000,
        "system": "You are terse.",
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [
            {
                "name": "weather",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
            {"name": "clock", "input_schema": {"type": "object", "properties": {}}},
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture, and the weather?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Check both tools.", "signature": "SIG-A1"},
                    {"type": "text", "text": "Checking weather and time."},
                    {
                        "type": "tool_use",
                        "id": "toolu_w1",
                        "name": "weather",
                        "input": {"city": "Paris"},
                    },
                    {"type": "tool_use", "id": "toolu_c1", "name": "clock", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_w1", "content": "sunny"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_c1",
                        "content": "clock offline",
                        "is_error": True,
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Clock failed.", "signature": "SIG-A2"},
                    {"type": "text", "text": "A red square; Paris is sunny; the clock failed."},
                ],
            },
            {"role": "user", "content": "Thanks. Anything else?"},
        ],
    }


def chat_body() -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture, and the weather?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
            },
            {
                "role": "assistant",
                "reasoning_content": "Check both tools.",
                "content": "Checking weather and time.",
                "tool_calls": [
                    {
                        "id": "call_w1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_c1",
                        "type": "function",
                        "function": {"name": "clock", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_w1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "call_c1", "content": "[tool error] clock offline"},
            {"role": "assistant", "content": "A red square; Paris is sunny; the clock failed."},
            {"role": "user", "content": "Thanks. Anything else?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            },
            {
                "type": "function",
                "function": {"name": "clock", "parameters": {"type": "object", "properties": {}}},
            },
        ],
    }


def responses_body(model: str = "gpt-5") -> dict[str, Any]:
    return {
        "model": model,
        "instructions": "You are terse.",
        "include": ["reasoning.encrypted_content"],
        "tools": [
            {
                "type": "function",
                "name": "weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": False,
            },
            {
                "type": "function",
                "name": "clock",
                "parameters": {"type": "object", "properties": {}},
                "strict": False,
            },
        ],
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is in this picture, and the weather?"},
                    {
                        "type": "input_image",
                        "image_url": f"data:image/png;base64,{PNG}",
                        "detail": "auto",
                    },
                ],
            },
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "Check both tools."}],
                "encrypted_content": "ENC-R1",
            },
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "Checking weather and time.", "annotations": []}
                ],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_w1",
                "name": "weather",
                "arguments": '{"city":"Paris"}',
            },
            {
                "type": "function_call",
                "id": "fc_2",
                "call_id": "call_c1",
                "name": "clock",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_w1", "output": "sunny"},
            {
                "type": "function_call_output",
                "call_id": "call_c1",
                "output": "error: clock offline",
            },
            {
                "type": "reasoning",
                "id": "rs_2",
                "summary": [{"type": "summary_text", "text": "Clock failed."}],
                "encrypted_content": "ENC-R2",
            },
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_2",
                "status": "completed",
                "content": [
                    {
                        "type": "output_text",
                        "text": "A red square; Paris is sunny; the clock failed.",
                        "annotations": [],
                    }
                ],
            },
            {"role": "user", "content": "Thanks. Anything else?"},
        ],
    }


def captured(path: str, runtime: str) -> list[Event]:
    return normalize_bytes(runtime, (FIXTURES / "captured" / path).read_bytes())


def source_events(source: str) -> list[Event]:
    """The session of one source runtime, as events."""
    if source == "anthropic":
        return module("anthropic").parse_request(anthropic_body())
    if source == "openai-chat":
        return module("openai-chat").parse_request(chat_body())
    if source == "openai-responses":
        return module("openai-responses").parse_request(responses_body())
    if source == "claude-code":
        run = captured("claude/cli/c05_tool_fail_partial/stdout.jsonl", "claude-code")
        base = module("anthropic").parse_request(anthropic_body("claude-sonnet-4-5-20250929"))
    else:
        run = captured("codex/exec/x04_tool_fail/stdout.jsonl", "codex")
        base = module("openai-responses").parse_request(responses_body("gpt-5-codex"))
    closing = UserMessageEvent(content=[TextPart(text="Now summarise the session.")])
    return [*base, *run, closing]


def source_header_model(events: list[Event]) -> str:
    header = log_of(events).current_header()
    assert header is not None and header.model is not None
    return header.model


def render_for(target: str, events: list[Event], model: str) -> dict[str, Any]:
    log = log_of(events)
    kwargs: dict[str, Any] = module(target).render_request(
        log.derive_messages(), log.current_header(), RenderPolicy(model=model)
    )
    validate_history(target, kwargs)
    validate_request(target, kwargs)
    return kwargs


def opaque_strings(messages: list[Message], target: Provenance) -> tuple[set[str], set[str]]:
    """(bound to the target, bound elsewhere): every signature / redacted / encrypted value."""
    own: set[str] = set()
    foreign: set[str] = set()
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for part in message.content:
            if isinstance(part, ThinkingPart):
                values = {
                    v for v in (part.signature, part.redacted_data, part.encrypted_content) if v
                }
                origin = part.provenance or message.provenance
                (own if same_origin(origin, target) else foreign).update(values)
    return own, foreign


def every_turn_is_there(messages: list[Message], rendered: str) -> None:
    for message in messages:
        if isinstance(message, UserMessage | ToolMessage):
            for part in message.content:
                if isinstance(part, TextPart) and part.text.strip():
                    assert msgspec.json.encode(part.text).decode()[1:-1] in rendered
        if isinstance(message, ToolMessage):
            assert message.call_id in rendered
        if isinstance(message, AssistantMessage):
            for part in message.content:
                if isinstance(part, TextPart) and part.text.strip():
                    assert msgspec.json.encode(part.text).decode()[1:-1] in rendered
                if isinstance(part, ToolCallPart):
                    assert part.id in rendered and part.name in rendered


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", SOURCES)
def test_switching_matrix_renders_every_turn_without_foreign_reasoning(
    source: str, target: str
) -> None:
    events = source_events(source)
    messages = log_of(events).derive_messages()
    assert any(isinstance(m, ToolMessage) and len(m.content) for m in messages)
    kwargs = render_for(target, events, TARGET_MODELS[target])
    rendered = msgspec.json.encode(kwargs).decode()
    every_turn_is_there(messages, rendered)
    provider, api = {
        "anthropic": ("anthropic", "messages"),
        "openai-chat": ("openai", "chat"),
        "openai-responses": ("openai", "responses"),
    }[target]
    own, foreign = opaque_strings(
        messages, Provenance(provider=provider, api=api, model=TARGET_MODELS[target])
    )
    if source == "openai-chat":  # Chat reasoning is plain text: no opaque payload
        assert not (foreign or own)
        assert "Check both tools." not in rendered  # the default policy drops it
    else:
        assert foreign or own
    for value in foreign:
        assert value not in rendered, f"{source} reasoning leaked to {target}"
    for value in own:
        assert value in rendered, f"{source} reasoning lost for its own model"
    assert "<image>" not in rendered and PNG in rendered  # the image travels


def failed_results(target: str, kwargs: dict[str, Any]) -> int:
    """How many tool results the rendered request marks as failed (Anthropic
    ``is_error``; Chat's and Responses' outputs start with the error marker)."""
    if target == "anthropic":
        return sum(
            1
            for message in kwargs["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result" and block.get("is_error")
        )
    if target == "openai-responses":
        return sum(
            1
            for item in kwargs["input"]
            if item.get("type") == "function_call_output"
            and _first_text(item["output"]).startswith(TOOL_ERROR_MARKER)
        )
    return sum(
        1
        for message in kwargs["messages"]
        if message["role"] == "tool"
        and _first_text(message["content"]).startswith(TOOL_ERROR_MARKER)
    )


def _first_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return str(content[0]["text"]) if content else ""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", SOURCES)
def test_switching_keeps_failed_tool_calls_failed(source: str, target: str) -> None:
    """Every failed result of the log is failed in every target."""
    events = source_events(source)
    messages = log_of(events).derive_messages()
    failed = sum(1 for m in messages if isinstance(m, ToolMessage) and m.is_error)
    if source != "openai-responses":  # the recorded Responses history has no failed call
        assert failed
    assert failed_results(target, render_for(target, events, TARGET_MODELS[target])) == failed


RESPONSE_OF = {
    "anthropic": ("stream_thinking_signature_text", 0),
    "openai-chat": ("stream_tool_call_then_text_usage", 1),
    "openai-responses": ("reasoning_summaries_encrypted_replay", 0),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", SOURCES)
def test_switching_there_and_back_loses_nothing(source: str, target: str) -> None:
    events = source_events(source)
    home = SOURCE_FORMAT[source]
    home_model = source_header_model(events)
    before = render_for(home, events, home_model)
    name, index = RESPONSE_OF[target]
    response = _response_events(target, recording(target, name)["interactions"][index])
    answered = [*events, *response]
    away = render_for(target, answered, TARGET_MODELS[target])
    back = render_for(home, answered, home_model)
    key = "input" if home == "openai-responses" else "messages"
    assert back[key][: len(before[key])] == before[key]
    new_text = next(
        part.text
        for event in response
        if type(event).__name__ == "AssistantMessageEvent"
        for part in event.content  # type: ignore[attr-defined]
        if isinstance(part, TextPart)
    )
    snippet = msgspec.json.encode(new_text[:40]).decode()[1:-1]
    assert snippet in msgspec.json.encode(back[key][len(before[key]) :]).decode()
    assert snippet in msgspec.json.encode(away).decode()
    # the log itself is untouched by rendering
    assert copy.deepcopy(log_of(answered).derive_messages()) == log_of(answered).derive_messages()
