"""Anthropic request rendering: the final assistant turn (rules 3 and 8) and media
sources (documents, file ids)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from adapters._render import RenderCache, RenderPolicy
from adapters.anthropic import render_request
from tests.adapters._render_support import validate_history, validate_request
from universal_event.errors import RenderError
from universal_event.events import RequestHeaderEvent, WarningEvent
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import (
    DocumentPart,
    ImagePart,
    Provenance,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPart,
)

CLAUDE = Provenance(provider="anthropic", api="messages", model="claude-sonnet-4-5")
CHAT = Provenance(provider="openai", api="chat", model="gpt-4o")
HEADER = RequestHeaderEvent(provider="anthropic", api="messages", model=CLAUDE.model)
THINKING = RequestHeaderEvent(
    provider="anthropic",
    api="messages",
    model=CLAUDE.model,
    sampling={"thinking": {"type": "enabled", "budget_tokens": 2048}, "max_tokens": 8000},
)


def render(
    messages: list[Message],
    header: RequestHeaderEvent = HEADER,
    cache: RenderCache | None = None,
    **policy: Any,
) -> tuple[dict[str, Any], list[str]]:
    warnings: list[WarningEvent] = []
    kwargs = render_request(
        messages, header, RenderPolicy(**policy), warnings=warnings, cache=cache
    )
    validate_history("anthropic", kwargs)
    validate_request("anthropic", kwargs)
    return kwargs, [w.code for w in warnings]


def user(*parts: UserPart | str) -> UserMessage:
    return UserMessage(content=[TextPart(text=p) if isinstance(p, str) else p for p in parts])


def signed() -> ThinkingPart:
    return ThinkingPart(text="need the tool", signature="SIG", provenance=CLAUDE)


def call(call_id: str) -> ToolCallPart:
    return ToolCallPart(id=call_id, name="weather", arguments={"city": "Paris"})


def result(call_id: str) -> ToolMessage:
    return ToolMessage(call_id=call_id, content=[TextPart(text="sunny")])


# ---------------------------------------------------------------- a final assistant message


def test_a_final_assistant_message_loses_its_trailing_whitespace() -> None:
    """A reply cut short, resumed: the API refuses a final assistant message that ends
    in whitespace ("final assistant content cannot end with trailing whitespace")."""
    cut = AssistantMessage(
        content=[TextPart(text="Autumn  "), TextPart(text="moonlight—\n")],
        provenance=CHAT,
        status="partial",
    )
    kwargs, warnings = render([user("Write a haiku"), cut])
    assert kwargs["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Autumn  "}, {"type": "text", "text": "moonlight—"}],
    }
    assert warnings == ["trailing_whitespace_trimmed"]


def test_only_the_final_assistant_message_is_trimmed_and_the_cache_keeps_the_text() -> None:
    cache = RenderCache()
    cut = AssistantMessage(content=[TextPart(text="Autumn moonlight—\n")], provenance=CHAT)
    trimmed, _ = render([user("Write a haiku"), cut], cache=cache)
    assert trimmed["messages"][-1]["content"] == [{"type": "text", "text": "Autumn moonlight—"}]
    # the same message with a user message after it is not final: sent as it is
    kwargs, warnings = render([user("Write a haiku"), cut, user("go on")], cache=cache)
    assert kwargs["messages"][1]["content"] == [{"type": "text", "text": "Autumn moonlight—\n"}]
    assert warnings == []


def test_a_final_assistant_message_ending_in_a_tool_call_is_left_alone() -> None:
    messages: list[Message] = [
        user("weather?"),
        AssistantMessage(content=[TextPart(text="checking \n")], provenance=CLAUDE),
    ]
    kwargs, _ = render(messages)
    assert kwargs["messages"][-1]["content"][-1]["text"] == "checking"
    messages[1] = AssistantMessage(
        content=[TextPart(text="checking \n"), call("toolu_1")], provenance=CLAUDE
    )
    kwargs, warnings = render(messages)
    assert kwargs["messages"][1]["content"][0]["text"] == "checking \n"
    assert "trailing_whitespace_trimmed" not in warnings


# ---------------------------------------------------------------- rule 3: the final turn


def test_thinking_is_checked_at_the_first_message_of_the_final_assistant_turn() -> None:
    """Two consecutive assistant messages (a cut reply, then the retry that thinks and
    calls a tool) are one turn to the API, and it starts with text."""
    messages: list[Message] = [
        user("weather in Paris?"),
        AssistantMessage(content=[TextPart(text="Let me check")], provenance=CLAUDE),
        AssistantMessage(content=[signed(), call("toolu_1")], provenance=CLAUDE),
        result("toolu_1"),
    ]
    kwargs, warnings = render(messages, THINKING)
    assert [m["role"] for m in kwargs["messages"]] == ["user", "assistant", "assistant", "user"]
    assert kwargs["thinking"] == {"type": "disabled"}
    assert warnings == ["thinking_disabled"]
    with pytest.raises(RenderError, match="starts with 'text'"):
        render(messages, THINKING, thinking_fallback="error")


def test_a_tool_loop_is_one_turn_started_by_its_first_assistant_message() -> None:
    """Without interleaved thinking Claude thinks once, at the start of the turn; the
    replies after tool results start with a tool call, and the turn is still led by
    thinking."""
    messages: list[Message] = [
        user("weather in Paris and Rome?"),
        AssistantMessage(content=[signed(), call("toolu_1")], provenance=CLAUDE),
        result("toolu_1"),
        AssistantMessage(content=[call("toolu_2")], provenance=CLAUDE),
        result("toolu_2"),
    ]
    kwargs, warnings = render(messages, THINKING)
    assert kwargs["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert warnings == []


def test_a_new_prompt_starts_a_new_turn() -> None:
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[signed(), TextPart(text="hello")], provenance=CLAUDE),
        user("weather in Paris?"),
        AssistantMessage(content=[call("toolu_1")], provenance=CLAUDE),
        result("toolu_1"),
    ]
    kwargs, warnings = render(messages, THINKING)
    assert kwargs["thinking"] == {"type": "disabled"}
    assert warnings == ["thinking_disabled"]


# ---------------------------------------------------------------- documents


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def document_source(part: DocumentPart) -> tuple[dict[str, Any] | None, list[str]]:
    kwargs, warnings = render([user("read this", part)])
    blocks = kwargs["messages"][0]["content"]
    return (blocks[1]["source"] if len(blocks) > 1 else None), warnings


@pytest.mark.parametrize("media_type", ["text/csv", "text/plain", "text/markdown; charset=utf-8"])
def test_a_text_document_goes_as_a_plain_text_source(media_type: str) -> None:
    """Base64 document sources are PDFs only; text goes as a ``text`` source."""
    part = DocumentPart(data=b64(b"a,b\n1,2\n"), media_type=media_type)
    source, warnings = document_source(part)
    assert source == {"type": "text", "media_type": "text/plain", "data": "a,b\n1,2\n"}
    assert warnings == []


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (b64(b"PK\x03\x04"), "application/zip"),
        (b64(b"\xff\xfe\x00bad"), "text/plain"),  # not UTF-8
        (b64(b"  \n"), "text/plain"),  # blank
    ],
    ids=["zip", "not-utf8", "blank"],
)
def test_a_document_anthropic_cannot_read_is_dropped_with_a_warning(
    data: str, media_type: str
) -> None:
    source, warnings = document_source(DocumentPart(data=data, media_type=media_type))
    assert source is None
    assert warnings == ["document_dropped"]


@pytest.mark.parametrize("media_type", ["application/pdf", None])
def test_a_pdf_stays_a_base64_source(media_type: str | None) -> None:
    source, warnings = document_source(DocumentPart(data=b64(b"%PDF-1.4"), media_type=media_type))
    assert source == {"type": "base64", "media_type": "application/pdf", "data": b64(b"%PDF-1.4")}
    assert warnings == []


# ---------------------------------------------------------------- file ids


def test_another_providers_file_ids_are_not_sent() -> None:
    """Parts do not say who issued a file id: OpenAI's are ``file-...``, Anthropic's
    ``file_...``; only Anthropic's go to Anthropic."""
    kwargs, warnings = render(
        [
            user(
                "what is in these?",
                ImagePart(file_id="file-OpenAIimg123"),
                DocumentPart(file_id="file-OpenAIpdf456"),
                ImagePart(file_id="file_011CNha8iCJcU1wXNR6q4V8a"),
                DocumentPart(file_id="file_011CNha8iCJcU1wXNR6q4V8w"),
            )
        ]
    )
    assert kwargs["messages"][0]["content"][1:] == [
        {"type": "image", "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8a"}},
        {
            "type": "document",
            "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
        },
    ]
    assert warnings == ["image_dropped", "document_dropped"]


def test_a_foreign_file_id_does_not_hide_the_bytes_beside_it() -> None:
    png = "iVBORw0KGgo="
    kwargs, warnings = render(
        [user("look", ImagePart(file_id="file-abc", data=png, media_type="image/png"))]
    )
    assert kwargs["messages"][0]["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": png,
    }
    assert warnings == []
