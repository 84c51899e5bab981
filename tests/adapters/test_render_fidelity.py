"""Fidelity gaps closed in the renderers: Anthropic system blocks and Chat tool errors.

* Anthropic ``system`` given as text blocks (Claude Code sends three, the middle one
  with ``cache_control``) is kept block by block in ``RequestHeaderEvent.system_parts``
  and rendered back exactly; the other formats get the joined text.
* Chat ``tool`` messages have no error flag: a failed result is marked with
  ``TOOL_ERROR_MARKER`` and ``parse_request`` reverses the mark, so the flag survives
  a trip through Chat.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest

from adapters._render import TOOL_ERROR_MARKER, RenderPolicy
from tests.adapters._render_support import FIXTURES, derive, flatten, validate_history
from tests.adapters.test_render_oracle import module, send
from tests.adapters.test_switching import anthropic_body
from universal_event.events import RequestHeaderEvent, ToolResultEvent
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import ImagePart, Provenance, TextPart, ToolCallPart

CACHE = {"type": "ephemeral"}
SYSTEM_BLOCKS = [
    {"type": "text", "text": "x-billing: 1"},
    {"type": "text", "text": "You are an agent.", "cache_control": CACHE},
    {"type": "text", "text": "\nBe terse."},
]
CLAUDE_CODE_REQUEST = (
    FIXTURES / "captured/claude/cli/c02_tool_partial/requests/0003_POST_v1_messages.json"
)


def anthropic_request(system: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": system,
        "messages": [{"role": "user", "content": "hi"}],
    }


def header_of(target: str, body: dict[str, Any]) -> RequestHeaderEvent:
    header = module(target).parse_request(copy.deepcopy(body))[0]
    assert isinstance(header, RequestHeaderEvent)
    return header


# ---------------------------------------------------------------- Anthropic system blocks


def test_anthropic_system_blocks_parse_into_system_parts() -> None:
    header = header_of("anthropic", anthropic_request(SYSTEM_BLOCKS))
    assert header.system == "x-billing: 1\n\nYou are an agent.\n\n\nBe terse."
    assert header.system_parts == [
        TextPart(text="x-billing: 1"),
        TextPart(text="You are an agent.", cache_control=CACHE),
        TextPart(text="\nBe terse."),
    ]
    # a plain string system stays a string, without parts
    plain = header_of("anthropic", anthropic_request("Be terse."))
    assert plain.system == "Be terse." and plain.system_parts is None


def test_anthropic_system_blocks_round_trip_exactly_through_the_log() -> None:
    body = anthropic_request(SYSTEM_BLOCKS)
    messages, header = derive(module("anthropic").parse_request(copy.deepcopy(body)))
    kwargs = module("anthropic").render_request(messages, header)
    assert kwargs["system"] == SYSTEM_BLOCKS
    assert send("anthropic", kwargs)["system"] == SYSTEM_BLOCKS  # on the wire too


def test_claude_code_system_blocks_round_trip_exactly() -> None:
    """A captured Claude Code request: its three system blocks, cache hint included."""
    captured = json.loads(CLAUDE_CODE_REQUEST.read_text())["body"]
    assert isinstance(captured["system"], list)
    assert any("cache_control" in block for block in captured["system"])
    messages, header = derive(module("anthropic").parse_request(copy.deepcopy(captured)))
    kwargs = module("anthropic").render_request(messages, header)
    assert flatten(kwargs)["system"] == captured["system"]


@pytest.mark.parametrize("target", ["openai-chat", "openai-responses"])
def test_system_blocks_reach_other_formats_as_their_joined_text(target: str) -> None:
    header = header_of("anthropic", anthropic_request(SYSTEM_BLOCKS))
    kwargs = module(target).render_request(
        [UserMessage(content=[TextPart(text="hi")])], header, RenderPolicy(model="gpt-4o")
    )
    joined = "x-billing: 1\n\nYou are an agent.\n\n\nBe terse."
    if target == "openai-chat":
        assert kwargs["messages"][0] == {"role": "system", "content": joined}
    else:
        assert kwargs["instructions"] == joined
    assert "cache_control" not in json.dumps(kwargs)


def test_system_changed_alone_wins_over_stale_parts() -> None:
    header = header_of("anthropic", anthropic_request(SYSTEM_BLOCKS))
    edited = msgspec.structs.replace(header, system="A new prompt.")
    kwargs = module("anthropic").render_request(
        [UserMessage(content=[TextPart(text="hi")])], edited
    )
    assert kwargs["system"] == "A new prompt."


def test_system_block_cache_control_follows_the_policy() -> None:
    header = header_of("anthropic", anthropic_request(SYSTEM_BLOCKS))
    kwargs = module("anthropic").render_request(
        [UserMessage(content=[TextPart(text="hi")])],
        header,
        RenderPolicy(keep_cache_control=False),
    )
    assert kwargs["system"] == [{"type": "text", "text": b["text"]} for b in SYSTEM_BLOCKS]


# ---------------------------------------------------------------- Chat tool errors

GPT = Provenance(provider="openai", api="chat", model="gpt-4o")
CHAT_HEADER = RequestHeaderEvent(provider="openai", api="chat", model="gpt-4o")


def tool_loop(*results: ToolMessage) -> list[Message]:
    calls = [ToolCallPart(id=r.call_id, name="run", arguments={}) for r in results]
    return [
        UserMessage(content=[TextPart(text="go")]),
        AssistantMessage(content=list(calls), provenance=GPT),
        *results,
    ]


def chat(messages: list[Message], **policy: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = module("openai-chat").render_request(
        messages, CHAT_HEADER, RenderPolicy(**policy)
    )
    validate_history("openai-chat", kwargs)
    return kwargs


def tool_messages(kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in kwargs["messages"] if m["role"] == "tool"]


def test_chat_failed_tool_result_is_marked() -> None:
    kwargs = chat(
        tool_loop(
            ToolMessage(call_id="call_a", content=[TextPart(text="ok")]),
            ToolMessage(call_id="call_b", content=[TextPart(text="disk full")], is_error=True),
            ToolMessage(call_id="call_c", content=[], is_error=True),
        )
    )
    assert [m["content"] for m in tool_messages(kwargs)] == [
        "ok",
        f"{TOOL_ERROR_MARKER} disk full",
        TOOL_ERROR_MARKER,
    ]


def test_chat_interrupted_call_result_is_marked_as_failed() -> None:
    messages = tool_loop(ToolMessage(call_id="call_a", content=[TextPart(text="ok")]))
    messages[1] = AssistantMessage(
        content=[
            ToolCallPart(id="call_a", name="run", arguments={}),
            ToolCallPart(id="call_b", name="run", arguments={}),
        ],
        provenance=GPT,
    )
    (synthetic,) = [m for m in tool_messages(chat(messages)) if m["tool_call_id"] == "call_b"]
    assert synthetic["content"].startswith(f"{TOOL_ERROR_MARKER} interrupted")


@pytest.mark.parametrize(
    "content",
    [
        [TextPart(text="disk full")],
        [],
        [TextPart(text="first"), TextPart(text="second")],
        [TextPart(text="see image"), ImagePart(data="iVBORw0KGgo=", media_type="image/png")],
    ],
    ids=["text", "empty", "two-texts", "text-and-image"],
)
def test_chat_parse_reverses_the_error_mark(content: list[Any]) -> None:
    failed = ToolMessage(call_id="call_a", content=content, is_error=True)
    kwargs = chat(tool_loop(failed))
    events = module("openai-chat").parse_request(copy.deepcopy(flatten(kwargs)))
    (parsed,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert parsed.is_error is True
    assert TOOL_ERROR_MARKER not in json.dumps(msgspec.to_builtins(parsed.content))
    texts = [p.text for p in content if isinstance(p, TextPart)]
    if texts:
        assert parsed.content[0] == TextPart(text=texts[0])
    # and rendering what was parsed gives the same request back
    messages, header = derive(events)
    assert module("openai-chat").render_request(messages, header) == kwargs


@pytest.mark.parametrize(
    "text", ["error: clock offline", f"{TOOL_ERROR_MARKER}x", f"ok {TOOL_ERROR_MARKER} later"]
)
def test_chat_text_without_the_mark_is_not_an_error(text: str) -> None:
    body = flatten(chat(tool_loop(ToolMessage(call_id="call_a", content=[TextPart(text=text)]))))
    (parsed,) = [
        e for e in module("openai-chat").parse_request(body) if isinstance(e, ToolResultEvent)
    ]
    assert parsed.is_error is False and parsed.content == [TextPart(text=text)]


def test_tool_error_survives_anthropic_to_chat_and_back() -> None:
    anthropic = anthropic_body()  # its second tool call failed (is_error)
    results = anthropic["messages"][2]["content"]
    assert [block.get("is_error", False) for block in results] == [False, True]
    messages, _ = derive(module("anthropic").parse_request(copy.deepcopy(anthropic)))
    as_chat = chat(messages)
    back_events = module("openai-chat").parse_request(copy.deepcopy(flatten(as_chat)))
    back_messages, _ = derive(back_events)
    kwargs = module("anthropic").render_request(
        back_messages, None, RenderPolicy(model="claude-sonnet-4-5")
    )
    assert kwargs["messages"][2]["content"] == results
