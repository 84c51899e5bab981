"""The provider quirks every renderer shares, from their one place in
:mod:`adapters._render`: who issued a file id, the error mark of a failed tool result
(the OpenAI APIs have no error flag), the OpenAI reasoning families; and the Anthropic
request's settings as the real SDK client sends them."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from adapters._render import (
    FILE_ID_ISSUERS,
    TOOL_ERROR_MARKER,
    RenderPolicy,
    create_parameters,
    developer_role_model,
    file_id_issuer,
    foreign_file_id,
    openai_file,
    with_error_mark,
    without_error_mark,
)
from adapters.anthropic import render_request as render_anthropic
from adapters.openai_chat import render_request as render_chat
from adapters.openai_chat._request import system_role
from adapters.openai_responses import render_request as render_responses
from tests.adapters.test_render_oracle import send
from universal_event.events import RequestHeaderEvent, WarningEvent
from universal_event.messages import Message, UserMessage
from universal_event.parts import DocumentPart, ImagePart, TextPart, UserPart

# ---------------------------------------------------------------- file ids

ANTHROPIC_ID = "file_011CNha8iCJcU1wXNR6q4V8w"
OPENAI_ID = "file-OpenAIpdf456"
AZURE_ID = "assistant-Az9"  # an OpenAI-compatible server's own form
PDF = "JVBERi0="


@pytest.mark.parametrize(
    ("file_id", "issuer"),
    [(ANTHROPIC_ID, "anthropic"), (OPENAI_ID, "openai"), (AZURE_ID, None), ("", None)],
)
def test_the_prefix_tells_who_issued_a_file_id(file_id: str, issuer: str | None) -> None:
    assert file_id_issuer(file_id) == issuer
    assert set(FILE_ID_ISSUERS) == {"anthropic", "openai"}


@pytest.mark.parametrize(
    ("file_id", "foreign_to_anthropic", "foreign_to_openai"),
    [
        (None, False, False),
        (ANTHROPIC_ID, False, True),
        (OPENAI_ID, True, False),
        # OpenAI's APIs are served by servers that mint their own ids; Anthropic's are
        # all file_ ids
        (AZURE_ID, True, False),
    ],
)
def test_a_file_id_goes_only_to_a_provider_that_can_read_it(
    file_id: str | None, foreign_to_anthropic: bool, foreign_to_openai: bool
) -> None:
    assert foreign_file_id(file_id, "anthropic") is foreign_to_anthropic
    assert foreign_file_id(file_id, "openai") is foreign_to_openai


@pytest.mark.parametrize(
    ("part", "by_url", "expected"),
    [
        (DocumentPart(file_id=OPENAI_ID, data=PDF), False, {"file_id": OPENAI_ID}),
        (DocumentPart(file_id=AZURE_ID), False, {"file_id": AZURE_ID}),
        (
            DocumentPart(file_id=ANTHROPIC_ID, data=PDF, filename="a.pdf"),
            False,
            {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"},
        ),
        (DocumentPart(file_id=ANTHROPIC_ID, url="https://e.com/a.pdf"), False, None),
        (
            DocumentPart(file_id=ANTHROPIC_ID, url="https://e.com/a.pdf"),
            True,
            {"file_url": "https://e.com/a.pdf"},
        ),
        (DocumentPart(file_id=ANTHROPIC_ID), True, None),
    ],
)
def test_openai_file_skips_another_providers_file_id(
    part: DocumentPart, by_url: bool, expected: dict[str, Any] | None
) -> None:
    """The bytes (or, for Responses, the URL) beside a foreign file id go instead."""
    assert openai_file(part, by_url=by_url) == expected


def _sent_file_ids(kwargs: dict[str, Any]) -> set[str]:
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("file_id"), str):
                found.add(value["file_id"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(kwargs)
    return found


def test_every_renderer_follows_the_one_file_id_rule() -> None:
    parts: list[UserPart] = [
        TextPart(text="look"),
        *(DocumentPart(file_id=file_id) for file_id in (ANTHROPIC_ID, OPENAI_ID, AZURE_ID)),
        *(ImagePart(file_id=file_id) for file_id in (ANTHROPIC_ID + "i", OPENAI_ID + "i")),
    ]
    messages: list[Message] = [UserMessage(content=parts)]
    sent = {
        "anthropic": render_anthropic(
            messages, RequestHeaderEvent(provider="anthropic", api="messages", model="claude-4")
        ),
        "chat": render_chat(messages, RequestHeaderEvent(provider="openai", api="chat", model="m")),
        "responses": render_responses(
            messages, RequestHeaderEvent(provider="openai", api="responses", model="m")
        ),
    }
    assert _sent_file_ids(sent["anthropic"]) == {ANTHROPIC_ID, ANTHROPIC_ID + "i"}
    assert _sent_file_ids(sent["chat"]) == {OPENAI_ID, AZURE_ID}  # Chat images take URLs only
    assert _sent_file_ids(sent["responses"]) == {OPENAI_ID, AZURE_ID, OPENAI_ID + "i"}


# ---------------------------------------------------------------- failed tool results


@pytest.mark.parametrize(
    ("text", "marked"),
    [("clock offline", f"{TOOL_ERROR_MARKER} clock offline"), ("", TOOL_ERROR_MARKER)],
)
def test_the_error_mark_round_trips(text: str, marked: str) -> None:
    assert with_error_mark(text) == marked
    assert without_error_mark(marked) == text


@pytest.mark.parametrize("text", ["ok", f"{TOOL_ERROR_MARKER}x", f"ok {TOOL_ERROR_MARKER}"])
def test_a_text_that_does_not_open_with_the_mark_did_not_fail(text: str) -> None:
    assert without_error_mark(text) is None


# ---------------------------------------------------------------- OpenAI reasoning families


@pytest.mark.parametrize(
    ("model", "developer", "takes_temperature"),
    [
        ("o1-mini", True, False),
        ("o3-pro", True, False),
        ("o4-mini", True, False),
        ("gpt-5", True, False),
        ("gpt-5.1-codex", True, False),
        # the exception: in the family (developer role) but no reasoning
        ("gpt-5-chat-latest", True, True),
        ("gpt-5.1-chat-latest", True, True),
        ("gpt-4o", False, True),
        ("chatgpt-4o-latest", False, True),
    ],
)
def test_one_definition_of_the_reasoning_families(
    model: str, developer: bool, takes_temperature: bool
) -> None:
    assert developer_role_model(model) is developer
    assert system_role(model, RenderPolicy()) == ("developer" if developer else "system")
    header = RequestHeaderEvent(
        provider="openai", api="chat", model=model, sampling={"temperature": 0.2}
    )
    kwargs = render_chat([UserMessage(content=[TextPart(text="hi")])], header)
    assert ("temperature" in kwargs) is takes_temperature


# ---------------------------------------------------------------- Anthropic settings


ANTHROPIC_SETTINGS = {
    "max_tokens": 2000,
    "temperature": 0.3,
    "top_p": 0.9,
    "top_k": 40,
    "stop_sequences": ["END"],
    "metadata": {"user_id": "u-1"},
    "tool_choice": {"type": "auto"},
}


def _anthropic_kwargs(sampling: dict[str, Any]) -> tuple[dict[str, Any], list[WarningEvent]]:
    header = RequestHeaderEvent(
        provider="anthropic", api="messages", model="claude-sonnet-4-5", sampling=sampling
    )
    warned: list[WarningEvent] = []
    kwargs = render_anthropic([UserMessage(content=[TextPart(text="hi")])], header, warnings=warned)
    return kwargs, warned


def test_anthropic_settings_are_create_arguments_where_the_sdk_has_them() -> None:
    """Each setting is a ``messages.create()`` argument when this SDK's signature has
    one, and only otherwise rides in ``extra_body`` (a keyword the signature lacks is a
    ``TypeError``); either way the real client (over respx) sends every one at the top
    of the body."""
    kwargs, warned = _anthropic_kwargs(ANTHROPIC_SETTINGS)
    assert warned == []
    accepted = create_parameters(anthropic.resources.Messages.create)
    extra = kwargs.get("extra_body", {})
    for key, value in ANTHROPIC_SETTINGS.items():
        if key in accepted:
            assert kwargs[key] == value and key not in extra, key
        else:
            assert extra[key] == value and key not in kwargs, key
    body = send("anthropic", kwargs)
    assert {key: body.get(key) for key in ANTHROPIC_SETTINGS} == ANTHROPIC_SETTINGS
    assert "extra_body" not in body


def test_an_anthropic_thinking_request_reaches_the_wire_whole() -> None:
    """Thinking takes no temperature but the default, 1; set so, it goes out beside it."""
    thinking = {"type": "enabled", "budget_tokens": 2048}
    kwargs, _ = _anthropic_kwargs({"thinking": thinking, "max_tokens": 8000, "temperature": 1})
    body = send("anthropic", kwargs)
    assert body["thinking"] == thinking and body["max_tokens"] == 8000
    assert body["temperature"] == 1


def test_responses_server_items_needing_their_id_are_the_sdks() -> None:
    """Rule 4 drops a server item whose id it cannot leave out (its reasoning is not
    replayed): the list of such items is the SDK's input items with ``id: Required``,
    less the ones the renderer builds itself."""
    import typing

    from openai.types.responses.response_input_item_param import ResponseInputItemParam

    from adapters.openai_responses._request import _ID_REQUIRED

    required = set()
    for item in typing.get_args(ResponseInputItemParam):
        hints = typing.get_type_hints(item, include_extras=True)
        if "type" in hints and typing.get_origin(hints.get("id")) is typing.Required:
            required.update(typing.get_args(typing.get_args(hints["type"])[0]))
    assert required - {"message", "reasoning", "item_reference"} == _ID_REQUIRED
