"""The renderer oracles: real requests are what rendering must reproduce.

* **Parse side**: every recorded request body, and every request the real Claude Code
  and Codex sent in the captured runs → ``parse_request`` → events → session log →
  ``derive_messages`` → ``render_request`` gives the same request back (history,
  system / instructions, tools and settings).
* **Render side**: the log of request N's history plus turn N's recorded *response*
  (normalised by the target's own stream adapter) plus the caller's new input renders
  request N+1's history.
* Every rendered request validates against the SDK's own parameter types (walked
  deeply) and goes through the real SDK client over respx: the body on the wire is
  the rendered one.

Differences allowed between a real request and ours, each named here and nowhere
else (key order never matters: compared as parsed JSON):

``TEXT_AS_STRING``
    a lone text part may be sent as a plain string or as a one-element list of text
    blocks; clients differ (pydantic-ai sends lists, others strings), the APIs treat
    both alike. We send the string.
``IS_ERROR_FALSE``
    Anthropic ``tool_result.is_error: false`` is the default; pydantic-ai spells it
    out, we leave it out.
``NULL_CONTENT``
    Chat ``assistant.content: null`` and an absent ``content`` are the same.
``MESSAGE_TYPE``
    Responses easy input messages may carry ``"type": "message"`` or not.
``EMPTY_TEXT``
    an assistant text that is empty is dropped (rule 8); pydantic-ai sends ``""``.
``SYSTEM_ROLE``
    Chat's system prompt goes out as ``developer`` for o1/o3/o4/gpt-5 (rule 11); the
    one recording that sent ``system`` to o1-mini got HTTP 400 for it.
``REASONING_WITHOUT_ITS_ITEM``
    a reasoning item goes back only before an item that keeps its own id (rule 5); the
    one recording that sent it before an assistant message without its ``msg_`` id got
    HTTP 400 ("provided without its required following item"): it is dropped.

Named for the captured Claude Code / Codex requests only:

``CLIENT_INPUT_IDS``
    Codex numbers the input items it writes itself (``"id": "msg_<uuid>"`` on its
    developer and user messages, ``fco_<uuid>`` on tool outputs); they are its
    bookkeeping, not kept, not sent back.
``NULL_REASONING_CONTENT``
    Codex sends reasoning items with ``"content": null``; absent is the same.
``EMPTY_TOOLS``
    ``tools: []`` (Claude Code with every tool off) and no ``tools`` are the same.
``EMPTY_LOGPROBS``
    Codex replays its ``output_text`` parts with ``"logprobs": []``; absent is the same.
``CALL_STATUS``
    Codex replays its ``function_call`` items with ``"status": "completed"``; a
    replayed call is a completed one, we leave it out.

Client quirks on the render side (what one client did that the API also accepted):

``FC_ID_AS_CALL_ID``
    openai-responses/stream_function_call_then_text: that pydantic-ai version sent the
    ``fc_`` *item* id as ``call_id``; we send the call id the API minted (rule 5).
``CUSTOM_INPUT_AS_JSON``
    openai-responses/stream_custom_tool_call_freeform: pydantic-ai re-sent the freeform
    tool's text wrapped as JSON (``{"query": text}``); we send the text the model wrote.
``ITEM_IDS_OMITTED``
    openai-responses/parallel_function_calls_nonstream and stream_function_call_then_text:
    that client sent ``function_call`` items without their ``fc_`` id; we send it back to
    its origin (the API accepts both; with reasoning the id is required, rule 4).
``ASCII_QUOTES``
    openai-responses/stream_phase_function_call_text: the recorded request has ASCII
    quotes where the recorded stream has typographic ones (the cassette's re-encoding).

Pairs whose next request the API rejected (HTTP 4xx) are no oracle and are skipped.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from adapters._render import RenderPolicy
from tests.adapters._render_support import (
    captured_requests,
    derive,
    flatten,
    recorded_requests,
    recording,
    validate_history,
    validate_request,
)
from universal_event.events import AssistantMessageEvent, Event
from universal_event.parts import ToolCallPart

TARGETS = ("anthropic", "openai-chat", "openai-responses")


def module(target: str) -> Any:
    import importlib

    return importlib.import_module(
        {
            "anthropic": "adapters.anthropic",
            "openai-chat": "adapters.openai_chat",
            "openai-responses": "adapters.openai_responses",
        }[target]
    )


# ---------------------------------------------------------------- named differences


def _text_as_list(content: Any, text_type: str) -> Any:
    """TEXT_AS_STRING: a plain string content becomes one text block."""
    if isinstance(content, str):
        return [{"type": text_type, "text": content}]
    return content


def normalise(target: str, body: dict[str, Any]) -> dict[str, Any]:
    """Apply the named differences to one request body (real or rendered)."""
    body = copy.deepcopy(body)
    if target == "anthropic":
        for message in body.get("messages", []):
            message["content"] = _text_as_list(message["content"], "text")
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    if block.get("is_error") is False:  # IS_ERROR_FALSE
                        del block["is_error"]
                    if "content" in block:
                        block["content"] = _text_as_list(block["content"], "text")
    elif target == "openai-chat":
        for message in body.get("messages", []):
            if message.get("role") == "assistant" and message.get("content") is None:
                message.pop("content", None)  # NULL_CONTENT
            elif "content" in message:
                message["content"] = _text_as_list(message["content"], "text")
    else:
        kept = []
        for item in body.get("input", []):
            if "role" in item and item.get("type") == "message" and "id" not in item:
                del item["type"]  # MESSAGE_TYPE
            if item.get("role") == "assistant" and item.get("content") == "":
                continue  # EMPTY_TEXT
            if "role" in item and "id" not in item:
                item["content"] = _text_as_list(
                    item["content"],
                    "output_text" if item["role"] == "assistant" else "input_text",
                )
            kept.append(item)
        body["input"] = kept
    return body


def roundtrip(target: str, body: dict[str, Any], **render: Any) -> dict[str, Any]:
    events: list[Event] = module(target).parse_request(copy.deepcopy(body))
    messages, header = derive(events)
    kwargs: dict[str, Any] = module(target).render_request(messages, header, **render)
    return kwargs


# ---------------------------------------------------------------- parse side


def _captured_client_quirks(target: str, body: dict[str, Any]) -> dict[str, Any]:
    """The named differences of the captured Claude Code / Codex requests."""
    body = copy.deepcopy(body)
    if body.get("tools") == []:
        del body["tools"]  # EMPTY_TOOLS
    for item in body.get("input", []):
        if item.get("role") in ("user", "system", "developer") or (
            item.get("type") == "function_call_output"
        ):
            item.pop("id", None)  # CLIENT_INPUT_IDS
        if item.get("type") == "reasoning" and item.get("content", ()) is None:
            del item["content"]  # NULL_REASONING_CONTENT
        if item.get("type") == "function_call" and item.get("status") == "completed":
            del item["status"]  # CALL_STATUS
        if item.get("role") == "assistant" and isinstance(item.get("content"), list):
            for part in item["content"]:
                if part.get("logprobs") == []:
                    del part["logprobs"]  # EMPTY_LOGPROBS
    return normalise(target, body)


@pytest.mark.parametrize(
    ("target", "name", "body"),
    captured_requests(),
    ids=[f"{target}:{name}" for target, name, _ in captured_requests()],
)
def test_parse_side_oracle_reproduces_every_captured_client_request(
    target: str, name: str, body: dict[str, Any]
) -> None:
    """What the real Claude Code and Codex sent, parsed and rendered again: Codex's
    developer messages stay developer messages, Claude Code's cache marks (on a
    ``tool_result`` block too) stay where they were."""
    kwargs = roundtrip(target, body)
    validate_history(target, kwargs)
    rendered = flatten(kwargs)
    assert _captured_client_quirks(target, rendered) == _captured_client_quirks(target, body)


def test_captured_oracle_covers_both_clients() -> None:
    counts: dict[str, int] = {}
    for target, _, _ in captured_requests():
        counts[target] = counts.get(target, 0) + 1
    assert counts == {"anthropic": 21, "openai-responses": 23}


@pytest.mark.parametrize(
    ("target", "name", "body"),
    [(t, n, b) for t in TARGETS for n, b in recorded_requests(t)],
    ids=[f"{t}:{n}" for t in TARGETS for n, _ in recorded_requests(t)],
)
def test_parse_side_oracle_reproduces_every_recorded_request(
    target: str, name: str, body: dict[str, Any]
) -> None:
    kwargs = roundtrip(target, body)
    validate_history(target, kwargs)
    rendered = flatten(kwargs)
    if name == "error_400_system_role_unsupported#0":  # SYSTEM_ROLE
        assert rendered["messages"][0] == {
            "role": "developer",
            "content": "You are a helpful assistant.",
        }
        rendered["messages"][0]["role"] = "system"
    if name == "error_400_invalid_encrypted_reasoning_history#1":  # REASONING_WITHOUT_ITS_ITEM
        kept = [item for item in body["input"] if item.get("type") != "reasoning"]
        assert len(kept) < len(body["input"])
        body = {**body, "input": kept}
    assert normalise(target, rendered) == normalise(target, body)


def test_oracle_covers_every_recorded_request() -> None:
    counts = {target: len(recorded_requests(target)) for target in TARGETS}
    assert counts == {"anthropic": 28, "openai-chat": 17, "openai-responses": 28}


def test_normalise_names_real_differences_only() -> None:
    """The named differences are needed: without them real requests would differ."""
    body = recording("anthropic", "parallel_tool_use_nonstream")["interactions"][1]
    rendered = flatten(roundtrip("anthropic", body["request_body"]))
    assert rendered != body["request_body"]
    assert rendered["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_0167cfEnoQaPviGdVXA95zcu",
        "content": "alice is bob's wife",
    }


# ---------------------------------------------------------------- render side


def _response_events(target: str, interaction: dict[str, Any]) -> list[Event]:
    """Turn N's recorded response, normalised by the target's own stream adapter."""
    adapter_class = {
        "anthropic": "AnthropicAdapter",
        "openai-chat": "OpenAIChatAdapter",
        "openai-responses": "OpenAIResponsesAdapter",
    }[target]
    adapter = getattr(module(target), adapter_class)()
    body = interaction["response_body"]
    fmt = interaction["response_body_format"]
    events: list[Event] = []
    if fmt == "json":
        events.extend(adapter.feed(body))
    elif fmt == "sse-data-jsonl":
        for line in body.splitlines():
            if line.strip():
                events.extend(adapter.feed(f"data: {line}\n\n".encode()))
    else:
        events.extend(adapter.feed(body.encode()))
    events.extend(adapter.close())
    return events


def _history_key(target: str) -> str:
    return "input" if target == "openai-responses" else "messages"


def _is_output_item(item: dict[str, Any]) -> bool:
    return item.get("role") not in ("user", "system", "developer") and item.get("type") not in (
        "function_call_output",
        "custom_tool_call_output",
    )


def render_side_pairs() -> list[tuple[str, str, int]]:
    found = []
    for target in TARGETS:
        names = sorted({name.split("#")[0] for name, _ in recorded_requests(target)})
        for name in names:
            interactions = recording(target, name)["interactions"]
            key = _history_key(target)
            for n in range(len(interactions) - 1):
                this, after = interactions[n], interactions[n + 1]
                if this["request_body"] is None or after["request_body"] is None:
                    continue
                if this["response_status"] != 200 or after["response_status"] != 200:
                    continue
                before, later = this["request_body"][key], after["request_body"][key]
                if isinstance(before, list) and len(later) > len(before) + 1:
                    if later[: len(before)] == before:
                        found.append((target, name, n))
    return found


@pytest.mark.parametrize(
    ("target", "name", "n"),
    render_side_pairs(),
    ids=[f"{t}:{n}#{i}" for t, n, i in render_side_pairs()],
)
def test_render_side_oracle_renders_the_next_request(target: str, name: str, n: int) -> None:
    interactions = recording(target, name)["interactions"]
    this, after = interactions[n]["request_body"], interactions[n + 1]["request_body"]
    key = _history_key(target)
    parse = module(target).parse_request
    events = list(parse(copy.deepcopy(this)))
    events.extend(_response_events(target, interactions[n]))
    # the caller's new input: what request N+1 adds after the model's output
    tail = after[key][len(this[key]) :]
    if target == "openai-responses":
        while tail and _is_output_item(tail[0]):
            tail = tail[1:]
    else:
        tail = tail[1:]  # the assistant message: that is the response's
    if name == "stream_function_call_then_text":  # FC_ID_AS_CALL_ID: the caller's side
        minted = {
            part.item_id: part.id
            for event in events
            if isinstance(event, AssistantMessageEvent)
            for part in event.content
            if isinstance(part, ToolCallPart)
        }
        tail = [
            {**item, "call_id": minted.get(item.get("call_id"), item.get("call_id"))}
            for item in tail
        ]
    events.extend(e for e in parse({"model": after["model"], key: tail})[1:])
    messages, header = derive(events)
    kwargs = module(target).render_request(messages, header)
    validate_history(target, kwargs)
    validate_request(target, kwargs)
    expected = copy.deepcopy(after[key])
    if name == "stream_function_call_then_text":  # FC_ID_AS_CALL_ID
        minted = next(
            item["call_id"] for item in kwargs[key] if item.get("type") == "function_call"
        )
        for item in expected:
            if item.get("call_id", "").startswith("fc_"):
                item["call_id"] = minted
    rendered = copy.deepcopy(kwargs[key])
    fresh = range(len(this[key]), len(expected))  # the items request N+1 added
    if name == "stream_custom_tool_call_freeform":  # CUSTOM_INPUT_AS_JSON
        for index in fresh:
            if expected[index].get("type") == "custom_tool_call":
                (expected[index]["input"],) = json.loads(expected[index]["input"]).values()
    if name in ("parallel_function_calls_nonstream", "stream_function_call_then_text"):
        for item in rendered:  # ITEM_IDS_OMITTED
            if item.get("type") == "function_call":
                assert item.pop("id").startswith("fc_")
    if name == "stream_phase_function_call_text":  # ASCII_QUOTES
        for item in rendered:
            for part in item.get("content") if isinstance(item.get("content"), list) else []:
                part["text"] = part["text"].translate(str.maketrans("’“”", '\'""'))
    assert normalise(target, {key: rendered})[key] == normalise(target, {key: expected})[key]


def test_render_side_oracle_has_pairs_for_every_format() -> None:
    targets = {target for target, _, _ in render_side_pairs()}
    assert targets == set(TARGETS)


# ---------------------------------------------------------------- wire


_RESPONSES = {
    "anthropic": (
        "https://api.anthropic.com/v1/messages",
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    ),
    "openai-chat": (
        "https://api.openai.com/v1/chat/completions",
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
        },
    ),
    "openai-responses": (
        "https://api.openai.com/v1/responses",
        {"id": "resp_1", "object": "response", "created_at": 0, "model": "m", "output": []},
    ),
}


def send(target: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Send ``kwargs`` through the real SDK client over respx; the JSON body it sent.

    The anthropic SDK warns (DeprecationWarning) for recorded models near end of life;
    that says nothing about the request, so it is silenced here.
    """
    import warnings

    import anthropic
    import httpx
    import openai
    import respx

    url, response = _RESPONSES[target]
    streaming = bool(kwargs.get("stream"))
    with respx.mock(assert_all_called=True) as router:
        if streaming:
            route = router.post(url).mock(
                return_value=httpx.Response(
                    200, text="", headers={"content-type": "text/event-stream"}
                )
            )
        else:
            route = router.post(url).mock(return_value=httpx.Response(200, json=response))
        if target == "anthropic":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                result: Any = anthropic.Anthropic(api_key="k").messages.create(**kwargs)
        elif target == "openai-chat":
            result = openai.OpenAI(api_key="k").chat.completions.create(**kwargs)
        else:
            result = openai.OpenAI(api_key="k").responses.create(**kwargs)
        if streaming:
            result.close()
        sent: dict[str, Any] = json.loads(route.calls.last.request.content)
    return sent


@pytest.mark.parametrize(
    ("target", "name", "body"),
    [(t, n, b) for t in TARGETS for n, b in recorded_requests(t)][::3],
    ids=[f"{t}:{n}" for t in TARGETS for n, _ in recorded_requests(t)][::3],
)
def test_rendered_request_goes_through_the_sdk_unchanged(
    target: str, name: str, body: dict[str, Any]
) -> None:
    kwargs = roundtrip(target, body, policy=RenderPolicy())
    assert send(target, kwargs) == json.loads(json.dumps(flatten(kwargs)))
