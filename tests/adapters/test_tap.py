"""tap / atap: the caller iterates the SDK's own objects while events reach the log,
checkpointed before the caller can act (run a tool, send the next request)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx
import pytest
import respx

from adapters._tap import atap, tap
from adapters.anthropic import AnthropicAdapter
from adapters.claude_sdk import ClaudeCodeAdapter
from tests.adapters._anthropic_support import CAPTURED, recorded, sdk_objects, sse_body
from universal_event.events import AssistantMessageEvent, ToolResultEvent, TurnEndEvent
from universal_event.log import SessionLog
from universal_event.stores.memory import MemoryStore


def _stream(name: str) -> Iterator[Any]:
    body = sse_body(recorded(name)["interactions"][0])
    with respx.mock(base_url="https://api.anthropic.com") as router:
        router.post("/v1/messages").mock(
            return_value=httpx.Response(
                200, content=body, headers={"content-type": "text/event-stream"}
            )
        )
        client = anthropic.Anthropic(api_key="test", max_retries=0)
        yield from client.messages.create(
            model="claude-haiku-4-5-20251001", max_tokens=64, messages=[], stream=True
        )


def test_tap_yields_native_objects_and_checkpoints_before_the_tool_runs() -> None:
    store = MemoryStore()
    log = SessionLog(store, "tap-1")
    adapter = AnthropicAdapter(session_id="tap-1")
    log.extend(adapter.user_prompt("Use the fixed_version tool."))
    plain = list(_stream("stream_thinking_tooluse_signature_replay.json"))
    seen: list[Any] = []
    persisted_when_stop_seen = -1
    for item in tap(_stream("stream_thinking_tooluse_signature_replay.json"), adapter, log):
        seen.append(item)
        if item.type == "message_stop":
            persisted_when_stop_seen = store.latest_seq("tap-1")
    # The caller sees exactly the SDK's objects.
    assert [type(i) for i in seen] == [type(i) for i in plain]
    assert [i.type for i in seen] == [i.type for i in plain]
    message_seq = next(e.seq for e in log.events() if isinstance(e, AssistantMessageEvent))
    # When the caller gets message_stop (and may run the tool), the tool call is durable.
    assert persisted_when_stop_seen >= message_seq
    assert store.latest_seq("tap-1") == log.next_seq - 1
    with log.before_tool("toolu_01825dXWLSoJwCst1qTsiWdb"):
        log.extend(adapter.tool_result("toolu_01825dXWLSoJwCst1qTsiWdb", "0.32a0"))
    assert isinstance(log.events()[-1], ToolResultEvent)


def test_tap_early_break_logs_the_partial_message() -> None:
    log = SessionLog()
    adapter = AnthropicAdapter()
    for index, _ in enumerate(tap(_stream("stream_thinking_signature_text.json"), adapter, log)):
        if index == 10:
            break
    message = next(e for e in log.events() if isinstance(e, AssistantMessageEvent))
    assert message.status == "partial" and message.content
    end = log.events()[-1]
    assert isinstance(end, TurnEndEvent) and end.status == "interrupted"
    assert log.pending == 0


def test_tap_stream_error_is_reraised_after_logging() -> None:
    def broken() -> Iterator[Any]:
        for index, item in enumerate(_stream("stream_parallel_tool_use.json")):
            if index == 12:
                raise anthropic.APIConnectionError(request=httpx.Request("POST", "https://x"))
            yield item

    log = SessionLog()
    with pytest.raises(anthropic.APIConnectionError):
        for _ in tap(broken(), AnthropicAdapter(), log):
            pass
    tags = [
        e.__struct_config__.tag
        for e in log.events()
        if e.__struct_config__.tag != "assistant/chunk"
    ]
    assert tags[-5:] == ["assistant/message", "usage", "error", "step/end", "turn/end"]
    assert log.pending == 0


def test_atap_over_claude_agent_sdk_messages() -> None:
    objects = sdk_objects(CAPTURED / "sdk" / "sdk01_tool" / "sdk_messages.jsonl")

    async def query() -> AsyncIterator[Any]:
        for message in objects:
            await asyncio.sleep(0)
            yield message

    async def consume() -> list[Any]:
        log_items = []
        async for item in atap(query(), adapter, log):
            log_items.append(item)
        return log_items

    store = MemoryStore()
    log = SessionLog(store, "atap-1")
    adapter = ClaudeCodeAdapter(session_id="atap-1")
    log.extend(adapter.user_prompt("Use bash to compute 1+1 with bc"))
    items = asyncio.run(consume())
    assert items == objects
    assert [m.__struct_config__.tag for m in log.derive_messages()] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert store.latest_seq("atap-1") == log.next_seq - 1


def test_a_claude_code_tool_call_is_durable_when_its_line_reaches_the_caller() -> None:
    """Claude Code runs a tool as soon as the message ends, before the next line can
    tell the adapter the message is complete: ``tool/call`` is checkpointed with the
    ``tool_use`` line, and the tool result (what the next request sees) with its line."""
    import json

    from universal_event.events import ToolCallEvent

    store = MemoryStore()
    log = SessionLog(store, "cc")
    lines = [
        json.loads(line)
        for line in (CAPTURED / "cli" / "c01_tool" / "stdout.jsonl").read_text().splitlines()
    ]
    stored_when_seen: dict[str, list[str]] = {}
    for line in tap(iter(lines), ClaudeCodeAdapter(session_id="cc"), log):
        blocks = (line.get("message") or {}).get("content") or []
        kinds = [b.get("type") for b in blocks if isinstance(b, dict)]
        for kind in ("tool_use", "tool_result"):
            if kind in kinds:
                stored_when_seen[kind] = [e.__struct_config__.tag for e in store.read("cc")]
    assert stored_when_seen["tool_use"][-1] == "tool/call"
    assert "assistant/message" not in stored_when_seen["tool_use"]  # the message goes on
    assert stored_when_seen["tool_result"][-1] == "tool/result"
    (call,) = [e for e in store.read("cc") if isinstance(e, ToolCallEvent)]
    assert call.name == "Bash"
