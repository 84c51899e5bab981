"""A writer killed inside an assistant message (its tool running): the adapter had logged
the message's chunks and the ``tool/call``, not the message. Repair logs the message,
``partial``, so the history keeps what the model said and the call it made, which the
renderers then answer as interrupted (captured Claude Code and Codex streams)."""

from __future__ import annotations

import json
from pathlib import Path

from adapters import create_adapter, render_session
from universal_event.events import AssistantMessageEvent, ToolCallEvent
from universal_event.log import SessionLog
from universal_event.messages import AssistantMessage, UserMessage
from universal_event.parts import TextPart, ThinkingPart, ToolCallPart
from universal_event.repair import repair
from universal_event.stores import MemoryStore, Store

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
CLAUDE = CAPTURED / "claude" / "cli" / "c02_tool_partial" / "stdout.jsonl"
CODEX = CAPTURED / "codex" / "app_server" / "xs01_tool" / "wire" / "server_to_client.jsonl"


def _cut(store: Store, runtime: str, lines: list[bytes], prompt: str | None = None) -> None:
    """Lines fed and checkpointed one by one, then the writer gone (no ``close()``)."""
    log = SessionLog(store, "cut")
    adapter = create_adapter(runtime, session_id="cut")
    if prompt is not None:
        log.extend(adapter.user_prompt(prompt))
    for line in lines:
        log.extend(adapter.feed(line))
        log.checkpoint()
    log.close()


def _closed(runtime: str, lines: list[bytes], prompt: str | None = None) -> AssistantMessage:
    """The message the adapter's own ``close()`` gives for the same cut."""
    log = SessionLog()
    adapter = create_adapter(runtime, session_id=log.session_id)
    if prompt is not None:
        log.extend(adapter.user_prompt(prompt))
    for line in lines:
        log.extend(adapter.feed(line))
    log.extend(adapter.close())
    (message,) = [m for m in log.derive_messages() if isinstance(m, AssistantMessage)]
    return message


def test_claude_code_killed_while_its_tool_runs() -> None:
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    cut_at = next(i for i, line in enumerate(lines) if b'"message_stop"' in line) + 1
    store = MemoryStore()
    prompt = "Use bash to compute 1+1 with bc"
    _cut(store, "claude-code", lines[:cut_at], prompt)
    assert not [e for e in store.read("cut") if isinstance(e, AssistantMessageEvent)]
    appended = repair(store, "cut")
    rebuilt = appended[0]
    assert isinstance(rebuilt, AssistantMessageEvent) and rebuilt.status == "partial"
    log = SessionLog.open(store, "cut")
    user, assistant = log.derive_messages()
    assert isinstance(user, UserMessage) and isinstance(assistant, AssistantMessage)
    closed = _closed("claude-code", lines[:cut_at], prompt)
    kinds = [type(part) for part in assistant.content]
    assert (
        kinds == [type(part) for part in closed.content] == [ThinkingPart, TextPart, ToolCallPart]
    )
    assert assistant.content[0].text == closed.content[0].text  # type: ignore[union-attr]
    assert assistant.content[1] == closed.content[1]
    call = assistant.content[2]
    assert isinstance(call, ToolCallPart) and call == closed.content[2]
    assert assistant.message_id == closed.message_id
    # the next runtime is told the call ran and was cut
    items = render_session(log, "openai-responses", model="gpt-5")["input"]
    output = next(i for i in items if i.get("type") == "function_call_output")
    assert output["call_id"] == call.id
    assert repair(store, "cut") == []


def test_claude_code_killed_mid_text_keeps_the_text_so_far() -> None:
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    first_text = next(i for i, line in enumerate(lines) if b'"text_delta"' in line)
    store = MemoryStore()
    _cut(store, "claude-code", lines[: first_text + 2], "Use bash to compute 1+1 with bc")
    repair(store, "cut")
    (assistant,) = [
        m
        for m in SessionLog.open(store, "cut").derive_messages()
        if isinstance(m, AssistantMessage)
    ]
    deltas = [
        json.loads(line)["event"]["delta"]["text"]
        for line in lines[first_text : first_text + 2]
        if b'"text_delta"' in line
    ]
    text = next(p for p in assistant.content if isinstance(p, TextPart))
    assert text.text == "".join(deltas) and text.text


def test_codex_killed_while_its_command_runs() -> None:
    lines = CODEX.read_bytes().splitlines(keepends=True)
    started = next(
        i
        for i, line in enumerate(lines)
        if b'"item/started"' in line and b'"commandExecution"' in line
    )
    store = MemoryStore()
    _cut(store, "codex", lines[: started + 1])
    (call,) = [e for e in store.read("cut") if isinstance(e, ToolCallEvent)]
    repair(store, "cut")
    messages = SessionLog.open(store, "cut").derive_messages()
    assistant = next(m for m in messages if isinstance(m, AssistantMessage))
    calls = [p for p in assistant.content if isinstance(p, ToolCallPart)]
    assert [c.id for c in calls] == [call.call_id]
    assert any(isinstance(p, ThinkingPart | TextPart) for p in assistant.content)
    assert assistant.status == "partial"
