"""The oracle for OpenAI Chat: the history derived from the log equals what the real
client sent as history in its next request.

For every recorded multi-turn exchange (request N+1 repeats request N's messages and
adds the turn's outcome), the log holds:

* the caller's inputs, parsed from the requests: user messages and the tool results
  (``role: tool``) the client sent back;
* the assistant messages, from the adapter fed turn N's recorded response (raw bytes,
  and again through the real ``openai`` client over respx with ``tap``).

``SessionLog.derive_messages()`` of that log, put in Chat's shape, must equal request
N+1's ``messages``: every assistant message with its tool calls (ids, names, argument
text byte for byte), every tool result in place. User messages are the caller's own
input and are compared as they were logged.

``vision_and_400_error.json`` repeats one request three times (no history grows), so it
has no pair to check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import msgspec
import openai
import pytest
import respx

from adapters.openai_chat import OpenAIChatAdapter, tap
from universal_event.events import Event, ToolResultEvent, UserMessageEvent
from universal_event.log import SessionLog
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import ImagePart, TextPart, ToolCallPart

FIXTURES = Path(__file__).parent.parent / "fixtures" / "recorded" / "openai-chat"
URL = "https://api.openai.com/v1/chat/completions"


def load(name: str) -> dict[str, Any]:
    fixture: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return fixture


def pairs() -> list[tuple[str, int]]:
    """(fixture, N) for every request N+1 that extends request N's history."""
    found = []
    for path in sorted(FIXTURES.glob("*.json")):
        interactions = load(path.name)["interactions"]
        for number in range(len(interactions) - 1):
            this, after = (
                interactions[number]["request_body"],
                interactions[number + 1]["request_body"],
            )
            if this is None or after is None:
                continue
            if len(after["messages"]) > len(this["messages"]):
                assert after["messages"][: len(this["messages"])] == this["messages"]
                found.append((path.name, number))
    return found


def test_every_multi_turn_fixture_is_covered() -> None:
    names = {name for name, _ in pairs()}
    assert names == {
        "image_in_tool_result_followup.json",
        "stream_parallel_tool_calls_usage_3turns.json",
        "stream_tool_call_then_text_usage.json",
        "tool_call_then_json_schema_output.json",
    }
    assert len(pairs()) == 5


# ---------------------------------------------------------------- the caller's inputs


def user_event(message: dict[str, Any]) -> UserMessageEvent:
    content = message["content"]
    if isinstance(content, str):
        return UserMessageEvent(content=[TextPart(text=content)])
    parts: list[TextPart | ImagePart] = []
    for part in content:
        if part["type"] == "text":
            parts.append(TextPart(text=part["text"]))
        else:
            parts.append(ImagePart(url=part["image_url"]["url"]))
    return UserMessageEvent(content=parts)


def tool_event(message: dict[str, Any]) -> ToolResultEvent:
    content = message["content"]
    text = content if isinstance(content, str) else "".join(p["text"] for p in content)
    return ToolResultEvent(call_id=message["tool_call_id"], content=[TextPart(text=text)])


# ---------------------------------------------------------------- neutral → Chat shape


def chat_shape(message: Message) -> dict[str, Any]:
    """A derived message in the shape of a Chat ``messages`` entry.

    Only what the oracle needs: text, tool calls (``arguments_raw`` when the adapter
    kept it, else the compact JSON the API sends), tool results as text.
    """
    if isinstance(message, AssistantMessage):
        shaped: dict[str, Any] = {"role": "assistant"}
        text = "".join(part.text for part in message.content if isinstance(part, TextPart))
        if text:
            shaped["content"] = text
        calls = [part for part in message.content if isinstance(part, ToolCallPart)]
        if calls:
            shaped["tool_calls"] = [
                {
                    "function": {"arguments": arguments_text(call), "name": call.name},
                    "id": call.id,
                    "type": "function",
                }
                for call in calls
            ]
        return shaped
    if isinstance(message, ToolMessage):
        text = "".join(part.text for part in message.content if isinstance(part, TextPart))
        return {"content": text, "role": "tool", "tool_call_id": message.call_id}
    assert isinstance(message, UserMessage)
    return {"role": "user"}


def arguments_text(call: ToolCallPart) -> str:
    if call.arguments_raw is not None:
        return call.arguments_raw
    return msgspec.json.encode(call.arguments).decode()


def expected_shape(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] == "user":
        return {"role": "user"}
    if message["role"] == "assistant" and "content" in message and message["content"] is None:
        # A named client difference: for a tool-only turn pydantic-ai's stream path
        # sends ``"content": null`` where its other paths omit the key; both say "no
        # text" (stream_tool_call_then_text_usage.json).
        return {key: value for key, value in message.items() if key != "content"}
    return message


# ---------------------------------------------------------------- the oracle


def log_turns(
    interactions: list[dict[str, Any]], upto: int, responses: list[list[Event]]
) -> SessionLog:
    """The log a Chat agent loop would write for requests 0..upto and responses 0..upto."""
    log = SessionLog()
    request = interactions[upto + 1]["request_body"]
    seen = 0
    for number in range(upto + 1):
        messages = request["messages"]
        own = interactions[number]["request_body"]["messages"]
        # The caller's inputs that came before request ``number`` went out.
        for message in messages[seen : len(own)]:
            if message["role"] == "user":
                log.append(user_event(message))
            elif message["role"] == "tool":
                log.append(tool_event(message))
        seen = len(own)
        seen += 1  # the assistant message of response ``number`` comes from the adapter
        log.extend(responses[number])
    # Tool results (and user messages) the caller added after the last response.
    for message in request["messages"][seen:]:
        if message["role"] == "user":
            log.append(user_event(message))
        elif message["role"] == "tool":
            log.append(tool_event(message))
    return log


def raw_responses(interactions: list[dict[str, Any]], upto: int) -> list[list[Event]]:
    adapter = OpenAIChatAdapter()  # one adapter for the whole loop: one turn, many steps
    responses = []
    for interaction in interactions[: upto + 1]:
        body = interaction["response_body"]
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        responses.append(adapter.feed(data) + adapter.close())
    return responses


def sdk_responses(interactions: list[dict[str, Any]], upto: int) -> list[list[Event]]:
    adapter = OpenAIChatAdapter()
    client = openai.OpenAI(api_key="sk-test", base_url="https://api.openai.com/v1", max_retries=0)
    responses = []
    for interaction in interactions[: upto + 1]:
        request = interaction["request_body"]
        body = interaction["response_body"]
        log = SessionLog()
        with respx.mock() as mock:
            if request.get("stream"):
                mock.post(URL).mock(
                    return_value=httpx.Response(
                        200, content=body.encode(), headers={"content-type": "text/event-stream"}
                    )
                )
                for _ in tap(client.chat.completions.create(**request), log, adapter=adapter):
                    pass
                responses.append(list(log.events()))
            else:
                mock.post(URL).mock(return_value=httpx.Response(200, json=body))
                completion = client.chat.completions.create(**request)
                responses.append(adapter.feed(completion) + adapter.close())
    return responses


@pytest.mark.parametrize("path", ["raw", "sdk"])
@pytest.mark.parametrize(("name", "upto"), pairs())
def test_derived_history_equals_the_next_request(name: str, upto: int, path: str) -> None:
    interactions = load(name)["interactions"]
    responses = (raw_responses if path == "raw" else sdk_responses)(interactions, upto)
    if path == "sdk":
        # Events logged by a previous log carry its seq; re-log them fresh.
        responses = [
            [msgspec.structs.replace(event, seq=-1, session_id="") for event in events]
            for events in responses
        ]
    log = log_turns(interactions, upto, responses)
    derived = [chat_shape(message) for message in log.derive_messages()]
    expected = [
        expected_shape(message) for message in interactions[upto + 1]["request_body"]["messages"]
    ]
    assert derived == expected
    # The assistant messages really came from the adapter (not from the request).
    assistants = [m for m in log.derive_messages() if isinstance(m, AssistantMessage)]
    assert len(assistants) == upto + 1
    assert all(m.provenance is not None and m.provenance.api == "chat" for m in assistants)
