"""A tapped stream the caller stops early: when it is finished (partial message,
``interrupted`` turn, checkpoint) and what a failed final checkpoint does.

Python finishes an abandoned generator only when it is cleaned up (``async for`` →
``break``: the event loop, later; a ``for`` over an iterator the caller holds: when it
is dropped). The tap must still log the cut turn before the caller's next prompt, offer
a deterministic form (a context manager) and never lose a failed checkpoint."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx
import pytest
import respx

from adapters._tap import AsyncTap, Tap, atap, tap
from adapters.anthropic import AnthropicAdapter
from adapters.anthropic import atap as anthropic_atap
from adapters.anthropic import tap as anthropic_tap
from adapters.claude_sdk import ClaudeCodeAdapter
from adapters.openai_chat import OpenAIChatAdapter
from tests.adapters._anthropic_support import CAPTURED, recorded, sdk_objects, sse_body
from universal_event.errors import CheckpointError
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    StepStartEvent,
    TurnEndEvent,
    UserMessageEvent,
)
from universal_event.log import SessionLog
from universal_event.stores.memory import MemoryStore

BASE = "https://api.anthropic.com"
REQUEST: dict[str, Any] = {
    "model": "claude-haiku-4-5-20251001",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
}
BODY = sse_body(recorded("stream_thinking_signature_text.json")["interactions"][0])
CUT_AT = 10
"""The item after which the caller stops (inside the message)."""


class FlakyStore(MemoryStore):
    """A store that refuses appends while ``failing``."""

    failing = False

    def append(self, session_id: str, events: Any, *, expected_seq: int) -> Any:
        if self.failing:
            raise OSError("disk full")
        return super().append(session_id, events, expected_seq=expected_seq)


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE) as mock:
        mock.post("/v1/messages").mock(
            return_value=httpx.Response(
                200, content=BODY, headers={"content-type": "text/event-stream"}
            )
        )
        yield mock


def _client() -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test", base_url=BASE, max_retries=0)


def _async_client() -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="test", base_url=BASE, max_retries=0)


def _tags(events: list[Event]) -> list[str]:
    tags = [str(e.__struct_config__.tag) for e in events]
    return [tag for tag in tags if tag != "assistant/chunk"]


CUT_TURN = [
    "turn/start",
    "user/message",
    "step/start",
    "assistant/message",
    "usage",
    "error",
    "step/end",
    "turn/end",
]
"""A first turn cut by the caller, as logged (chunks aside)."""


def _assert_cut_turn_then_next_prompt(log: SessionLog) -> None:
    """Turn 1 ends (partial message, interrupted) before turn 2's prompt is logged."""
    events = log.events()
    assert _tags(events) == [*CUT_TURN, "turn/start", "user/message"]
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert message.status == "partial" and message.content
    (end,) = [e for e in events if isinstance(e, TurnEndEvent)]
    assert end.status == "interrupted" and end.turn_id == message.turn_id
    prompts = [e for e in events if isinstance(e, UserMessageEvent)]
    assert prompts[1].turn_id != message.turn_id
    assert [type(m).__name__ for m in log.derive_messages()] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
    ]


# ------------------------------------------------------------ the bare form


def test_atap_break_then_the_next_prompt_logs_the_cut_turn_first(
    router: respx.MockRouter,
) -> None:
    async def run() -> SessionLog:
        log, adapter = SessionLog(), AnthropicAdapter()
        log.extend(adapter.user_prompt("hi"))
        stream = await _async_client().messages.create(**REQUEST)
        count = 0
        async for _ in anthropic_atap(stream, log, adapter=adapter):
            count += 1
            if count == CUT_AT:
                break
        # the event loop has not cleaned the tap up yet: the caller goes on at once
        log.extend(adapter.user_prompt("next question"))
        logged = len(log)
        await asyncio.sleep(0.01)  # now it does: nothing more is logged
        assert len(log) == logged
        await stream.close()
        return log

    _assert_cut_turn_then_next_prompt(asyncio.run(run()))


def test_tap_held_by_the_caller_then_the_next_prompt_logs_the_cut_turn_first(
    router: respx.MockRouter,
) -> None:
    log, adapter = SessionLog(), AnthropicAdapter()
    log.extend(adapter.user_prompt("hi"))
    stream = _client().messages.create(**REQUEST)
    items = anthropic_tap(stream, log, adapter=adapter)
    for count, _ in enumerate(items, 1):
        if count == CUT_AT:
            break
    log.extend(adapter.user_prompt("next question"))
    logged = len(log)
    del items
    gc.collect()  # the tap's cleanup, later: it does nothing
    assert len(log) == logged
    _assert_cut_turn_then_next_prompt(log)
    stream.close()


def test_the_next_tap_on_the_adapter_finishes_the_abandoned_one(
    router: respx.MockRouter,
) -> None:
    log, adapter = SessionLog(), AnthropicAdapter()
    log.extend(adapter.user_prompt("hi"))
    first = anthropic_tap(_client().messages.create(**REQUEST), log, adapter=adapter)
    for count, _ in enumerate(first, 1):
        if count == CUT_AT:
            break
    # a retry of the same request, without a prompt in between
    for _ in anthropic_tap(_client().messages.create(**REQUEST), log, adapter=adapter):
        pass
    tags = _tags(log.events())
    assert tags[: len(CUT_TURN)] == CUT_TURN
    assert tags[len(CUT_TURN) :][:2] == ["turn/start", "step/start"]
    del first
    gc.collect()
    assert _tags(log.events()) == tags
    assert log.pending == 0


def test_a_prompt_does_not_finish_a_tap_waiting_for_its_next_item() -> None:
    """Another task iterating a stream (waiting inside it) keeps it: only a tap paused
    at a ``yield`` (the caller holds an item, or stopped reading) is finished."""
    objects = sdk_objects(CAPTURED / "sdk" / "sdk01_tool" / "sdk_messages.jsonl")

    async def run() -> tuple[SessionLog, list[Any]]:
        released = asyncio.Event()
        waiting = asyncio.Event()

        async def query() -> AsyncIterator[Any]:
            for index, message in enumerate(objects):
                if index == 2:
                    waiting.set()
                    await released.wait()
                yield message

        log, adapter = SessionLog(), ClaudeCodeAdapter()
        log.extend(adapter.user_prompt("Use bash to compute 1+1 with bc"))

        async def consume() -> list[Any]:
            return [item async for item in atap(query(), adapter, log)]

        task = asyncio.create_task(consume())
        await waiting.wait()
        before = len(log)
        assert adapter.user_prompt("queued") and len(log) == before  # nothing finished
        released.set()
        return log, await task

    log, items = asyncio.run(run())
    assert items == objects
    assert not any(isinstance(e, TurnEndEvent) and e.status == "interrupted" for e in log.events())


def test_a_prompt_in_the_loop_body_then_the_stream_ends() -> None:
    """The caller logs the next prompt while it holds the last item: the stream is
    finished then, and its end later does not close the turn the prompt opened."""
    lines = [
        json.loads(line)
        for line in (CAPTURED / "cli" / "c01_tool" / "stdout.jsonl").read_text().splitlines()
    ]
    log, adapter = SessionLog(), ClaudeCodeAdapter()
    log.extend(adapter.user_prompt("Use bash"))
    for line in tap(iter(lines), adapter, log):
        if line.get("type") == "result":
            log.extend(adapter.user_prompt("next question"))
    ends = [e for e in log.events() if isinstance(e, TurnEndEvent)]
    assert [end.status for end in ends] == ["completed"]
    assert _tags(log.events())[-2:] == ["turn/start", "user/message"]  # left open


def test_taps_let_go_of_their_adapter_and_log(router: respx.MockRouter) -> None:
    from adapters import _tap as tap_module

    log = SessionLog()
    for _ in anthropic_tap(_client().messages.create(**REQUEST), log):
        pass
    for count, _ in enumerate(anthropic_tap(_client().messages.create(**REQUEST), log), 1):
        if count == CUT_AT:
            break
    with anthropic_tap(_client().messages.create(**REQUEST), log) as items:
        next(iter(items))
    gc.collect()
    assert tap_module._runs == []


def test_anthropic_user_prompt_with_a_message_open_ends_it_interrupted() -> None:
    adapter = AnthropicAdapter()
    events = adapter.user_prompt("hi")
    events += adapter.feed(BODY[: BODY.index(b"event: content_block_stop")])
    events += adapter.user_prompt("next")  # the caller never closed the stream
    assert _tags(events) == [*CUT_TURN, "turn/start", "user/message"]
    (end,) = [e for e in events if isinstance(e, TurnEndEvent)]
    assert end.status == "interrupted"
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert message.status == "partial"
    assert adapter.close() == []


def test_chat_user_prompt_with_a_response_open_ends_it_interrupted() -> None:
    chunk = (
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
        b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},'
        b'"finish_reason":null}]}\n\n'
    )
    adapter = OpenAIChatAdapter()
    events = adapter.feed(chunk)
    events += adapter.user_prompt("next")
    assert _tags(events) == [
        "turn/start",
        "step/start",
        "assistant/message",
        "error",
        "step/end",
        "turn/end",
        "user/message",
    ]
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert message.status == "partial"
    (end,) = [e for e in events if isinstance(e, TurnEndEvent)]
    assert end.status == "interrupted"
    assert adapter.close() == []


# ------------------------------------------------------------ the deterministic form


def test_tap_as_a_context_manager_finishes_the_stream_when_the_block_is_left(
    router: respx.MockRouter,
) -> None:
    for closing in (False, True):
        log, adapter = SessionLog(), AnthropicAdapter()
        log.extend(adapter.user_prompt("hi"))
        stream = _client().messages.create(**REQUEST)
        tapped = anthropic_tap(stream, log, adapter=adapter)
        assert isinstance(tapped, Tap)
        manager = contextlib.closing(tapped) if closing else tapped
        with manager as items:
            for count, _ in enumerate(items, 1):
                if count == CUT_AT:
                    break
        # finished here, before anything else the caller does
        assert _tags(log.events()) == CUT_TURN
        assert log.pending == 0
        log.extend(adapter.user_prompt("next"))
        _assert_cut_turn_then_next_prompt(log)
        stream.close()


def test_atap_as_an_async_context_manager_finishes_the_stream_when_the_block_is_left(
    router: respx.MockRouter,
) -> None:
    async def run(closing: bool) -> SessionLog:
        log, adapter = SessionLog(), AnthropicAdapter()
        log.extend(adapter.user_prompt("hi"))
        stream = await _async_client().messages.create(**REQUEST)
        tapped = anthropic_atap(stream, log, adapter=adapter)
        assert isinstance(tapped, AsyncTap)
        manager = contextlib.aclosing(tapped) if closing else tapped
        async with manager as items:
            count = 0
            async for _ in items:
                count += 1
                if count == CUT_AT:
                    break
        assert _tags(log.events()) == CUT_TURN  # at the block's end, not later
        assert log.pending == 0
        await stream.close()
        return log

    for closing in (False, True):
        asyncio.run(run(closing))


def test_a_whole_stream_through_the_context_manager_is_logged_once(
    router: respx.MockRouter,
) -> None:
    log = SessionLog()
    with anthropic_tap(_client().messages.create(**REQUEST), log) as items:
        seen = list(items)
    assert seen and _tags(log.events())[-1] == "turn/end"
    assert sum(isinstance(e, StepStartEvent) for e in log.events()) == 1
    assert log.events()[-1].status == "completed"  # type: ignore[union-attr]


# ------------------------------------------------------------ a failed final checkpoint


def _durable_prompt(store: FlakyStore) -> tuple[SessionLog, AnthropicAdapter]:
    log, adapter = SessionLog(store, "s"), AnthropicAdapter(session_id="s")
    log.extend(adapter.user_prompt("hi"))
    log.checkpoint()
    return log, adapter


def _recovers(store: FlakyStore, log: SessionLog, adapter: AnthropicAdapter) -> None:
    """Until the store is back the next prompt raises; then it goes through in order."""
    with pytest.raises(CheckpointError):
        adapter.user_prompt("next")
    with pytest.raises(CheckpointError):  # again: the events are still not stored
        adapter.user_prompt("next")
    store.failing = False
    log.extend(adapter.user_prompt("next"))
    log.checkpoint()
    assert [e.id for e in store.read("s")] == [e.id for e in log.events()]
    _assert_cut_turn_then_next_prompt(log)


def test_a_failed_checkpoint_raises_at_the_with_exit(router: respx.MockRouter) -> None:
    store = FlakyStore()
    log, adapter = _durable_prompt(store)
    stream = _client().messages.create(**REQUEST)
    with pytest.raises(CheckpointError), anthropic_tap(stream, log, adapter=adapter) as items:
        for count, _ in enumerate(items, 1):
            if count == CUT_AT:
                store.failing = True
                break
    assert log.pending > 0 and _tags(log.events()) == CUT_TURN
    stream.close()
    _recovers(store, log, adapter)


def test_a_failed_checkpoint_raises_at_the_async_with_exit(router: respx.MockRouter) -> None:
    store = FlakyStore()
    log, adapter = _durable_prompt(store)

    async def run() -> None:
        stream = await _async_client().messages.create(**REQUEST)
        with pytest.raises(CheckpointError):
            async with anthropic_atap(stream, log, adapter=adapter) as items:
                count = 0
                async for _ in items:
                    count += 1
                    if count == CUT_AT:
                        store.failing = True
                        break
        await stream.close()

    asyncio.run(run())
    assert log.pending > 0
    _recovers(store, log, adapter)


def test_a_checkpoint_failing_in_the_cleanup_of_a_bare_tap_is_not_lost(
    router: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    store = FlakyStore()
    log, adapter = _durable_prompt(store)
    with _client().messages.create(**REQUEST) as stream:
        for count, _ in enumerate(anthropic_tap(stream, log, adapter=adapter), 1):
            if count == CUT_AT:
                store.failing = True
                break  # the tap is cleaned up here, where it cannot raise to the caller
    gc.collect()
    assert unraisable == []  # not "Exception ignored in: <generator ...>"
    assert log.pending > 0 and _tags(log.events()) == CUT_TURN  # kept, in order
    _recovers(store, log, adapter)


def test_a_checkpoint_failing_in_the_event_loops_cleanup_of_atap_is_not_lost(
    router: respx.MockRouter,
) -> None:
    store = FlakyStore()
    log, adapter = _durable_prompt(store)
    loop_errors: list[dict[str, Any]] = []

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: loop_errors.append(ctx))
        stream = await _async_client().messages.create(**REQUEST)
        count = 0
        async for _ in anthropic_atap(stream, log, adapter=adapter):
            count += 1
            if count == CUT_AT:
                store.failing = True
                break
        await asyncio.sleep(0.01)  # the loop cleans the tap up
        gc.collect()
        await stream.close()

    asyncio.run(run())
    gc.collect()
    assert loop_errors == []  # no "Task exception was never retrieved"
    assert log.pending > 0 and _tags(log.events()) == CUT_TURN
    _recovers(store, log, adapter)


def test_a_generic_tap_still_closes_a_stream_that_ends_normally() -> None:
    lines = iter([{"type": "system", "subtype": "init", "session_id": "x"}])
    log = SessionLog()
    assert [*tap(lines, ClaudeCodeAdapter(), log)]
    assert log.pending == 0


def test_a_tool_result_after_a_break_at_the_call_answers_it() -> None:
    """The caller stops reading at the block that completes the call (the SDK helper's
    ``content_block_stop``), runs the tool and logs its result at once (the event loop
    has not cleaned the tap up): the cut message, with the call, is logged first, and
    the rendered history holds the real result, not a synthetic one."""
    from adapters import RenderPolicy
    from adapters.anthropic import render_request

    interactions = recorded("stream_client_tool_two_turns.json")["interactions"]
    request = {k: v for k, v in interactions[0]["request_body"].items() if k != "stream"}

    async def run() -> SessionLog:
        with respx.mock(base_url=BASE) as mock:
            mock.post("/v1/messages").mock(
                return_value=httpx.Response(
                    200,
                    content=sse_body(interactions[0]),
                    headers={"content-type": "text/event-stream"},
                )
            )
            log = SessionLog()
            adapter = AnthropicAdapter(session_id=log.session_id)
            log.extend(adapter.user_prompt("View the file"))
            call = None
            async with _async_client().messages.stream(**request) as stream:
                async for event in anthropic_atap(stream, log, adapter=adapter):
                    if (
                        event.type == "content_block_stop"
                        and event.content_block.type == "tool_use"
                    ):
                        call = event.content_block
                        break
            assert call is not None
            log.extend(adapter.tool_result(call.id, 'print("hello world")\n'))
            return log

    log = asyncio.run(run())
    tags = _tags(log.events())
    assert tags.index("tool/result") > tags.index("assistant/message")
    warnings: list[Any] = []
    rendered = render_request(
        log.derive_messages(), log.current_header(), RenderPolicy(model="m"), warnings=warnings
    )
    result = rendered["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "hello world" in str(result["content"])
    assert not [w for w in warnings if w.code in ("orphan_tool_result", "synthetic_tool_result")]
