"""Responses request rendering: reasoning items and their following item (rule 4),
failed tool results, provider file ids."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from adapters._render import TOOL_ERROR_MARKER, RenderPolicy
from adapters.openai_responses import parse_request, render_request
from tests.adapters._render_support import (
    derive,
    recording,
    validate_history,
    validate_request,
)
from tests.adapters.test_switching import SOURCES, TARGET_MODELS, render_for, source_events
from universal_event.events import RequestHeaderEvent, ToolResultEvent, WarningEvent
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import (
    AssistantPart,
    DocumentPart,
    ImagePart,
    Provenance,
    ResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPart,
)

GPT = Provenance(provider="openai", api="responses", model="gpt-5")
CLAUDE = Provenance(provider="anthropic", api="messages", model="claude-sonnet-4-5")
HEADER = RequestHeaderEvent(provider="openai", api="responses", model=GPT.model)
PNG = "iVBORw0KGgo="
IMAGE_ITEM = {"type": "input_image", "detail": "auto", "image_url": f"data:image/png;base64,{PNG}"}


def render(messages: list[Message], **policy: Any) -> tuple[list[dict[str, Any]], list[str]]:
    warnings: list[WarningEvent] = []
    kwargs = render_request(messages, HEADER, RenderPolicy(**policy), warnings=warnings)
    validate_history("openai-responses", kwargs)
    validate_request("openai-responses", kwargs)
    return kwargs["input"], [w.code for w in warnings]


def user(*parts: UserPart | str) -> UserMessage:
    return UserMessage(content=[TextPart(text=p) if isinstance(p, str) else p for p in parts])


def shape(items: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """Each item's type (``easy:<role>`` for an easy message) and whether it has an id."""
    return [(item.get("type") or f"easy:{item['role']}", "id" in item) for item in items]


# ---------------------------------------------------------------- rule 4


def reasoning() -> ThinkingPart:
    return ThinkingPart(id="rs_1", summary=[], encrypted_content="gAAAA", provenance=GPT)


def loop(following: AssistantPart) -> list[Message]:
    messages: list[Message] = [
        user("What is the meaning of life?"),
        AssistantMessage(content=[reasoning(), following], provenance=GPT),
    ]
    if isinstance(following, ToolCallPart):
        messages.append(ToolMessage(call_id=following.id, content=[TextPart(text="42")]))
    return [*messages, user("and?")]


@pytest.mark.parametrize(
    ("following", "replayed"),
    [
        (TextPart(text="42."), [("easy:assistant", False)]),
        (ToolCallPart(id="call_1", name="calc", arguments={}, provenance=GPT), [
            ("function_call", False), ("function_call_output", False)
        ]),
        (TextPart(text="42.", item_id="msg_1"), [
            ("reasoning", True), ("message", True)
        ]),
        (ToolCallPart(id="call_1", name="calc", arguments={}, item_id="fc_1", provenance=GPT), [
            ("reasoning", True), ("function_call", True), ("function_call_output", False)
        ]),
    ],
    ids=["text-without-msg-id", "call-without-fc-id", "text-with-msg-id", "call-with-fc-id"],
)  # fmt: skip
def test_reasoning_goes_back_only_before_an_item_that_keeps_its_id(
    following: AssistantPart, replayed: list[tuple[str, bool]]
) -> None:
    """An ``rs_`` item before an id-less item is refused: "provided without its required
    following item" (the recorded HTTP 400 below)."""
    items, warnings = render(loop(following))
    assert shape(items) == [("easy:user", False), *replayed, ("easy:user", False)]
    assert warnings == ([] if replayed[0][0] == "reasoning" else ["reasoning_dropped"])


def test_the_recorded_refused_request_renders_without_its_reasoning_item() -> None:
    """fixtures/recorded/openai-responses/error_400_invalid_encrypted_reasoning_history
    #1: reasoning, then an easy assistant message, got HTTP 400."""
    interaction = recording("openai-responses", "error_400_invalid_encrypted_reasoning_history")[
        "interactions"
    ][1]
    assert interaction["response_status"] == 400
    assert "required following item" in str(interaction["response_body"])
    body = interaction["request_body"]
    assert shape(body["input"])[1:3] == [("reasoning", True), ("easy:assistant", False)]
    messages, header = derive(parse_request(copy.deepcopy(body)))
    warnings: list[WarningEvent] = []
    kwargs = render_request(messages, header, warnings=warnings)
    assert shape(kwargs["input"]) == [
        ("easy:user", False), ("easy:assistant", False), ("easy:user", False)
    ]  # fmt: skip
    assert [w.code for w in warnings] == ["reasoning_dropped"]
    assert "item id" in warnings[0].message


# ---------------------------------------------------------------- failed tool results


def failed(*content: ResultPart) -> list[Message]:
    return [
        user("time?"),
        AssistantMessage(
            content=[ToolCallPart(id="toolu_1", name="clock", arguments={})], provenance=CLAUDE
        ),
        ToolMessage(call_id="toolu_1", content=list(content), is_error=True),
        user("ok?"),
    ]


@pytest.mark.parametrize(
    ("content", "output"),
    [
        ([TextPart(text="clock offline")], f"{TOOL_ERROR_MARKER} clock offline"),
        ([], TOOL_ERROR_MARKER),
        (
            [TextPart(text="see"), ImagePart(data=PNG, media_type="image/png")],
            [
                {"type": "input_text", "text": f"{TOOL_ERROR_MARKER} see"},
                IMAGE_ITEM,
            ],
        ),
        (
            [ImagePart(data=PNG, media_type="image/png")],
            [
                {"type": "input_text", "text": TOOL_ERROR_MARKER},
                IMAGE_ITEM,
            ],
        ),
    ],
    ids=["text", "empty", "text-and-image", "image"],
)  # fmt: skip
def test_a_failed_tool_result_is_marked_as_chat_marks_it(
    content: list[ResultPart], output: Any
) -> None:
    """Responses has no error flag on a tool output, as Chat has none on a tool
    message: the output opens with the same marker, and parsing reverses it."""
    items, _ = render(failed(*content))
    (result,) = [item for item in items if item.get("type") == "function_call_output"]
    assert result["output"] == output
    kwargs = render_request(failed(*content), HEADER)
    events = parse_request(copy.deepcopy(kwargs))
    (parsed,) = [event for event in events if isinstance(event, ToolResultEvent)]
    assert parsed.is_error is True
    assert TOOL_ERROR_MARKER not in str(parsed.content)
    messages, header = derive(events)
    assert render_request(messages, header) == kwargs


def test_an_output_that_is_not_marked_is_no_failure() -> None:
    body = render_request(failed(TextPart(text="x")), HEADER)
    body["input"][2]["output"] = f"{TOOL_ERROR_MARKER}x"
    (parsed,) = [e for e in parse_request(body) if isinstance(e, ToolResultEvent)]
    assert parsed.is_error is False and parsed.content == [TextPart(text=f"{TOOL_ERROR_MARKER}x")]


@pytest.mark.parametrize("source", SOURCES)
def test_switching_keeps_failed_tool_calls_failed_in_responses(source: str) -> None:
    """What tests/adapters/test_switching.py checks for Anthropic and Chat targets."""
    events = source_events(source)
    messages = derive(events)[0]
    failures = sum(1 for m in messages if isinstance(m, ToolMessage) and m.is_error)
    kwargs = render_for("openai-responses", events, TARGET_MODELS["openai-responses"])
    marked = [
        item
        for item in kwargs["input"]
        if item.get("type") == "function_call_output"
        and str(item["output"]).startswith(TOOL_ERROR_MARKER)
    ]
    assert len(marked) == failures


# ---------------------------------------------------------------- file ids


def test_an_anthropic_file_id_is_not_sent() -> None:
    """Parts do not say who issued a file id: an Anthropic ``file_`` id is not
    OpenAI's. An image falls back to its URL; a part with nothing else is dropped."""
    items, warnings = render(
        [
            user(
                "read",
                DocumentPart(file_id="file_011CNha8iCJcU1wXNR6q4V8w"),
                ImagePart(file_id="file_011CNhb"),
                ImagePart(file_id="file_011CNhc", url="https://example.com/a.png"),
                DocumentPart(file_id="file-OpenAIpdf456"),
                ImagePart(file_id="file-OpenAIimg123"),
            )
        ]
    )
    assert items[0]["content"][1:] == [
        {"type": "input_image", "detail": "auto", "image_url": "https://example.com/a.png"},
        {"type": "input_file", "file_id": "file-OpenAIpdf456"},
        {"type": "input_image", "detail": "auto", "file_id": "file-OpenAIimg123"},
    ]
    assert warnings == ["document_dropped", "image_dropped"]
