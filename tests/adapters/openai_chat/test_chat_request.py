"""Chat Completions request rendering: reasoning-only turns and provider file ids."""

from __future__ import annotations

import copy
from typing import Any

from adapters._render import RenderPolicy
from adapters.openai_chat import parse_request, render_request
from tests.adapters._render_support import derive, validate_history, validate_request
from universal_event.events import RequestHeaderEvent, WarningEvent
from universal_event.messages import AssistantMessage, Message, UserMessage
from universal_event.parts import DocumentPart, Provenance, TextPart, ThinkingPart, UserPart

DEEPSEEK = Provenance(provider="openai", api="chat", model="deepseek-reasoner")
HEADER = RequestHeaderEvent(provider="openai", api="chat", model=DEEPSEEK.model)


def render(messages: list[Message], **policy: Any) -> tuple[dict[str, Any], list[str]]:
    warnings: list[WarningEvent] = []
    kwargs = render_request(messages, HEADER, RenderPolicy(**policy), warnings=warnings)
    validate_history("openai-chat", kwargs)
    validate_request("openai-chat", kwargs)
    return kwargs, [w.code for w in warnings]


def user(*parts: UserPart | str) -> UserMessage:
    return UserMessage(content=[TextPart(text=p) if isinstance(p, str) else p for p in parts])


# ---------------------------------------------------------------- reasoning only


def test_a_reasoning_only_turn_is_sent_with_its_reasoning_content() -> None:
    """Servers that want ``reasoning_content`` back (PITFALLS 12) get a turn cut after
    its reasoning too; Chat wants ``content`` without tool calls: an empty one."""
    cut = AssistantMessage(
        content=[ThinkingPart(text="I should compute 6*7 first.", provenance=DEEPSEEK)],
        provenance=DEEPSEEK,
        status="partial",
    )
    messages: list[Message] = [user("q"), cut, user("go on")]
    kwargs, warnings = render(messages, chat_reasoning_content=True)
    assert kwargs["messages"] == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "reasoning_content": "I should compute 6*7 first."},
        {"role": "user", "content": "go on"},
    ]
    assert warnings == []
    # parsed back, the reasoning is the turn's one part, and renders the same again
    back, header = derive(parse_request(copy.deepcopy(kwargs)))
    assert back[1].content == [
        ThinkingPart(text="I should compute 6*7 first.", provenance=DEEPSEEK)
    ]
    assert render_request(back, header, RenderPolicy(chat_reasoning_content=True)) == kwargs


# ---------------------------------------------------------------- file ids


def test_an_anthropic_file_id_is_not_sent() -> None:
    """Parts do not say who issued a file id: an Anthropic ``file_`` id is not
    OpenAI's; the document's bytes go instead when it has them."""
    kwargs, warnings = render(
        [
            user(
                "read",
                DocumentPart(file_id="file_011CNha8iCJcU1wXNR6q4V8w"),
                DocumentPart(file_id="file_011CNhb", data="JVBERi0=", filename="a.pdf"),
                DocumentPart(file_id="file-OpenAIpdf456"),
            )
        ]
    )
    assert kwargs["messages"][0]["content"][1:] == [
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
        },
        {"type": "file", "file": {"file_id": "file-OpenAIpdf456"}},
    ]
    assert warnings == ["document_dropped"]
