"""What the end-to-end tests share: runners in a temp dir, request validation, oracles.

The oracles compare the universal log with what the fake model server saw:

* an assistant message in the log equals what the server *sent* (rebuilt from the SSE
  events it wrote: thinking + signature, text, tool calls with ids and arguments);
* a tool result in the log equals what the runtime *sent back* in its next request.

The runtimes' own additions are named here, not ignored wholesale: Claude Code's
``<system-reminder>`` text blocks and the ``<system-reminder>`` suffix on a tool result;
Codex's developer messages and its ``<environment_context>`` user message. A command's
output is compared exactly, with the header Codex puts before it (``Chunk ID… Wall
time… Output:\\n``): the log holds the text the model saw.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from universal_event.events import (
    AssistantMessageEvent,
    Event,
    ToolResultEvent,
)
from universal_event.fake_models import RecordedRequest, Reply, anthropic_blocks
from universal_event.handoff import RuntimePlaces, make_runner
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import TextPart, ThinkingPart, ToolCallPart
from universal_event.runtimes import runtime_available

RUNTIMES = ("claude-code", "codex")


def need(runtime: str) -> None:
    """Skip when the runtime's CLI is not installed (the ``claude``/``codex`` extras).

    Never skipped in CI (``CI`` set, as GitHub Actions does) or with
    ``UNIVERSAL_EVENT_REQUIRE_RUNTIMES=1``: there a missing runtime fails the test, so the
    end-to-end suite cannot pass by not running.
    """
    if not runtime_available(runtime):
        message = f"{runtime} is not installed (extras claude / codex)"
        if os.environ.get("CI") or os.environ.get("UNIVERSAL_EVENT_REQUIRE_RUNTIMES") == "1":
            pytest.fail(message + "; required in CI")
        pytest.skip(message)


def runner(runtime: str, server_url: str, tmp_path: Path, **hooks: Any) -> Any:
    need(runtime)
    places = RuntimePlaces(tmp_path / "homes", tmp_path / "work")
    return make_runner(runtime, server_url, places, **hooks)  # type: ignore[arg-type]


# ---------------------------------------------------------------- provider validation


def _walk(value: Any) -> Any:
    """Materialise every lazily validated iterable (TESTING-NOTES.md): pydantic checks
    an ``Iterable[...]`` field only when it is iterated."""
    if isinstance(value, dict):
        return {key: _walk(item) for key, item in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, Iterable):
        return [_walk(item) for item in value]
    return value


@functools.cache
def _adapter(target: str) -> TypeAdapter[Any]:
    """One adapter per type, kept alive: pydantic's lazy iterators refer to the adapter's
    definitions and panic when walked after it was collected."""
    if target == "anthropic":
        from anthropic.types import MessageParam

        return TypeAdapter(list[MessageParam])
    from openai.types.responses import ResponseInputParam

    return TypeAdapter(ResponseInputParam)


def validate_anthropic_messages(messages: list[dict[str, Any]]) -> None:
    """Raise unless ``messages`` are valid ``anthropic`` MessageParams, deeply."""
    _walk(_adapter("anthropic").validate_python(messages))


def validate_responses_input(items: list[dict[str, Any]]) -> None:
    """Raise unless ``items`` are a valid OpenAI Responses ``input``, deeply."""
    _walk(_adapter("responses").validate_python(items))


# ---------------------------------------------------------------- what the server sent


def anthropic_sent_blocks(request: RecordedRequest) -> tuple[str, list[dict[str, Any]]]:
    """(message id, content blocks) of the streamed Anthropic message the server sent."""
    start = next(event for event in request.sent if event.get("type") == "message_start")
    return start["message"]["id"], anthropic_blocks(request.sent)


def responses_sent_items(request: RecordedRequest) -> list[dict[str, Any]]:
    """The output items of the ``response.completed`` event the server sent."""
    for event in request.sent:
        if event.get("type") == "response.completed":
            items: list[dict[str, Any]] = event["response"]["output"]
            return items
    raise AssertionError("the server sent no response.completed")


def assert_claude_message_is_what_server_sent(
    event: AssistantMessageEvent, request: RecordedRequest
) -> None:
    message_id, blocks = anthropic_sent_blocks(request)
    assert event.message_id == message_id
    expected: list[Any] = []
    for block in blocks:
        if block["type"] == "thinking":
            expected.append(("thinking", block["thinking"], block["signature"]))
        elif block["type"] == "text":
            expected.append(("text", block["text"]))
        else:
            expected.append(("call", block["id"], block["name"], block["input"]))
    assert [_part_key(p) for p in event.content] == expected


def assert_codex_message_is_what_server_sent(
    event: AssistantMessageEvent, request: RecordedRequest
) -> None:
    expected: list[Any] = []
    for item in responses_sent_items(request):
        if item["type"] == "reasoning":
            texts = [part["text"] for part in item["summary"]]
            expected.append(("reasoning", item["id"], texts, item["encrypted_content"]))
        elif item["type"] == "message":
            expected.append(("text", item["content"][0]["text"], item["id"]))
        else:
            arguments = json.loads(item["arguments"])
            expected.append(("call", item["call_id"], item["name"], arguments, item["id"]))
    got: list[Any] = []
    for part in event.content:
        if isinstance(part, ThinkingPart):
            got.append(("reasoning", part.id, part.summary, part.encrypted_content))
        elif isinstance(part, TextPart):
            got.append(("text", part.text, part.item_id))
        elif isinstance(part, ToolCallPart):
            got.append(("call", part.id, part.name, part.arguments, part.item_id))
    assert got == expected


def _part_key(part: Any) -> Any:
    if isinstance(part, ThinkingPart):
        return ("thinking", part.text, part.signature)
    if isinstance(part, TextPart):
        return ("text", part.text)
    if isinstance(part, ToolCallPart):
        return ("call", part.id, part.name, part.arguments)
    return ("other", part)


# ---------------------------------------------------------------- what the runtime sent back


def first_text_delta(native: Any) -> bool:
    """Claude: a StreamEvent text delta; Codex: an agentMessage delta notification."""
    event = getattr(native, "event", None)
    if isinstance(event, dict) and event.get("type") == "content_block_delta":
        return bool(event.get("delta", {}).get("type") == "text_delta")
    return getattr(native, "method", None) == "item/agentMessage/delta"


def tool_started(native: Any) -> bool:
    """Claude: the assistant message asking for a tool; Codex: a command started."""
    if type(native).__name__ == "AssistantMessage":
        return any(type(block).__name__ == "ToolUseBlock" for block in native.content)
    item = getattr(getattr(native, "payload", None), "item", None)
    return (
        getattr(native, "method", None) == "item/started"
        and "ommand" in type(getattr(item, "root", item)).__name__
    )


def claude_sent_texts(request: RecordedRequest) -> list[tuple[str, str]]:
    """(role, text) of each text block of an Anthropic request's messages, without
    Claude Code's ``<system-reminder>`` blocks (trailing newlines dropped)."""
    out = []
    for message in request.body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            if block["type"] == "text" and not block["text"].startswith("<system-reminder>"):
                out.append((message["role"], block["text"].rstrip("\n")))
    return out


def derived_texts(messages: Iterable[Message]) -> list[tuple[str, str]]:
    """(role, text) of each text part of a derived history (trailing newlines dropped)."""
    return [
        (str(message.__struct_config__.tag), part.text.rstrip("\n"))
        for message in messages
        for part in message.content
        if isinstance(part, TextPart)
    ]


COMPACTION_SUMMARY = "SUMMARY: two questions, both answered."
AUTO_COMPACT_LIMITS = {
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000",
    "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "10",
}
"""Claude Code's own variables, lowered so that a reply reporting 60k input tokens
makes it compact before the next turn."""


def claude_compaction_steps(*, automatic: bool = False) -> list[Reply]:
    """Two turns, the summary (Claude Code asks for it twice), the turn after; with
    ``automatic`` the second reply reports enough input tokens for Claude Code to
    compact by itself (:data:`AUTO_COMPACT_LIMITS`)."""
    return [
        Reply(text="Turn one done."),
        Reply(text="Turn two done.", input_tokens=60_000 if automatic else 100),
        Reply(text=COMPACTION_SUMMARY),
        Reply(text=COMPACTION_SUMMARY),
        Reply(text="Turn three after compaction."),
    ]


def assert_claude_compaction_followed(log: Any, next_request: RecordedRequest) -> None:
    """The oracle after the compaction of :func:`claude_compaction_steps`: the history
    derived from ``log`` is what Claude Code sent next (the summary first), then the
    last reply; turn one's reply is off the surface but still in the log."""
    sent = claude_sent_texts(next_request)
    derived = derived_texts(log.derive_messages())
    assert COMPACTION_SUMMARY in sent[0][1]
    assert derived == [*sent, ("assistant", "Turn three after compaction.")]
    assert ("assistant", "Turn one done.") not in derived
    assert any("Turn one done." in str(getattr(e, "content", "")) for e in log.events())


def claude_sent_results(request: RecordedRequest) -> dict[str, tuple[str, bool]]:
    """tool_use_id → (result text, is_error) of the last user message of a request.

    Claude Code appends ``<system-reminder>…`` to the last result's text: cut off here.
    """
    out: dict[str, tuple[str, bool]] = {}
    for block in request.body["messages"][-1]["content"]:
        if block.get("type") == "tool_result":
            content = block["content"]
            text = (
                content
                if isinstance(content, str)
                else "".join(part.get("text", "") for part in content)
            )
            text = text.split("<system-reminder>", 1)[0].rstrip("\n")
            out[block["tool_use_id"]] = (text, bool(block.get("is_error")))
    return out


def codex_conversation(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's ``input`` without Codex's own additions (named): its ``developer``
    messages and the ``<environment_context>`` user message it puts before a prompt."""
    out = []
    for item in items:
        if item.get("role") == "developer":
            continue
        content = item.get("content")
        if item.get("role") == "user" and isinstance(content, list):
            if content[0].get("text", "").startswith("<environment_context>"):
                continue
        out.append(item)
    return out


def comparable_item(item: dict[str, Any]) -> dict[str, Any]:
    """Named wire differences that carry no history: Codex puts ``status`` on the items
    and ids of its own making on user messages (``msg_<uuid>``) and tool outputs
    (``fco_<uuid>``), keeps ``content: null`` on reasoning; the renderer writes a user
    message's text as a plain string."""
    item = {k: v for k, v in item.items() if k != "status" and v is not None}
    if item.get("type") == "function_call_output":
        assert str(item.pop("id", "fco_")).startswith("fco_")
    if item.get("role") == "user":
        item.pop("id", None)
        item.pop("type", None)
        content = item["content"]
        if isinstance(content, list):
            item["content"] = "".join(part["text"] for part in content)
    return item


def codex_sent_results(request: RecordedRequest) -> dict[str, str]:
    """call_id → the ``output`` of every function_call_output of a request, exactly.

    Codex wraps a command's output in a header (``Chunk ID: …\\nWall time: …\\nProcess
    exited with code N\\nOriginal token count: …\\nOutput:\\n``); the log's tool/result
    holds that text when Codex gave it (raw events, rollout).
    """
    return {
        item["call_id"]: str(item["output"])
        for item in request.body["input"]
        if item.get("type") == "function_call_output"
    }


def command_output(sent: str) -> str:
    """The command's own output inside Codex's wrapped ``function_call_output``."""
    return sent.split("Output:\n", 1)[1]


def result_text(event: ToolResultEvent) -> str:
    return "".join(part.text for part in event.content if isinstance(part, TextPart))


def of_type(events: Iterable[Event], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


# ---------------------------------------------------------------- conversation skeletons

Entry = tuple[Any, ...]
"""("user", text) | ("assistant", text) | ("call", id, name, arguments) | ("result", id, text, is_error)"""


def log_skeleton(messages: Iterable[Message]) -> list[Entry]:
    """The conversation the log holds, as comparable entries (reasoning left out: it is
    provider-bound and dropped or replayed by the renderer's rules)."""
    out: list[Entry] = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = "".join(p.text for p in message.content if isinstance(p, TextPart))
            out.append(("user", text))
        elif isinstance(message, AssistantMessage):
            for part in message.content:
                if isinstance(part, TextPart) and part.text.strip():
                    out.append(("assistant", part.text))
                elif isinstance(part, ToolCallPart):
                    out.append(("call", part.id, part.name, part.arguments))
        elif isinstance(message, ToolMessage):
            text = "".join(p.text for p in message.content if isinstance(p, TextPart))
            out.append(("result", message.call_id, text, message.is_error))
    return out


def anthropic_skeleton(body: dict[str, Any]) -> list[Entry]:
    """The conversation in an Anthropic request, without Claude Code's reminders."""
    out: list[Entry] = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            kind = block["type"]
            if kind == "text" and not block["text"].startswith("<system-reminder>"):
                out.append((message["role"], block["text"]))
            elif kind == "tool_use":
                out.append(("call", block["id"], block["name"], block["input"]))
            elif kind == "tool_result":
                text = block["content"]
                if not isinstance(text, str):
                    text = "".join(part.get("text", "") for part in text)
                text = text.split("<system-reminder>", 1)[0]
                if text.endswith("\n\n"):  # the reminder suffix is joined with a blank line
                    text = text[:-2]
                out.append(("result", block["tool_use_id"], text, bool(block.get("is_error"))))
    return out


def responses_skeleton(body: dict[str, Any]) -> list[Entry]:
    """The conversation in a Responses request, without Codex's own context messages."""
    out: list[Entry] = []
    for item in body["input"]:
        kind = item.get("type", "message")
        if kind == "message":
            if item["role"] not in ("user", "assistant"):
                continue  # Codex's developer messages
            content = item["content"]
            text = (
                content
                if isinstance(content, str)
                else "".join(part.get("text", "") for part in content)
            )
            if item["role"] == "user" and text.startswith("<"):
                if not text.startswith("<turn_aborted>"):  # history, as the log holds it
                    continue  # <environment_context>, skills
            out.append((item["role"], text))
        elif kind == "function_call":
            out.append(("call", item["call_id"], item["name"], json.loads(item["arguments"])))
        elif kind == "function_call_output":
            # exactly as sent: the log holds Codex's own results as Codex wrapped them
            out.append(("result", item["call_id"], str(item["output"]), None))
    return out


def without_error_flags(entries: Iterable[Entry]) -> Iterator[Entry]:
    """Responses ``function_call_output`` has no error flag: compare without it."""
    for entry in entries:
        yield entry[:3] if entry[0] == "result" else entry
