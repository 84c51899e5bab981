"""app-server v2 notifications: every captured run (harness file, raw wire, the SDK's typed
objects), tap over a turn stream, retries and interrupts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, get_args

import pytest
from openai_codex.generated.notification_registry import NOTIFICATION_MODELS
from openai_codex.models import Notification, UnknownNotification

from adapters.codex import CodexAdapter, atap, tap
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    NativeUnknownEvent,
    PlanUpdateEvent,
    SessionStartEvent,
    ToolCallEvent,
    ToolOutputEvent,
    ToolResultEvent,
    TurnEndEvent,
    UsageEvent,
    UserMessageEvent,
)
from universal_event.log import SessionLog
from universal_event.parts import Provenance, TextPart, ThinkingPart, ToolCallPart

APP = Path(__file__).parent.parent / "fixtures" / "captured" / "codex" / "app_server"
RUNS = sorted(p.name for p in APP.iterdir())


def normalise(data: bytes, **options: Any) -> list[Event]:
    adapter = CodexAdapter(**options)
    return [*adapter.feed(data), *adapter.close()]


def of(events: list[Event], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def comparable(event: Event) -> dict[str, Any]:
    fields = {f: getattr(event, f) for f in event.__struct_fields__}
    return {k: v for k, v in fields.items() if k not in ("id", "ts")}


def sdk_notifications(run: str) -> list[Notification]:
    """The run's wire notifications as the SDK yields them (its own coercion rule)."""
    out = []
    for line in (APP / run / "wire" / "server_to_client.jsonl").read_text().splitlines():
        message = json.loads(line)
        if "method" not in message:
            continue
        model = NOTIFICATION_MODELS.get(message["method"])
        params = message.get("params") or {}
        payload = model.model_validate(params) if model else UnknownNotification(params=params)
        out.append(Notification(method=message["method"], payload=payload))
    return out


def test_tool_turn_xs01() -> None:
    events = normalise((APP / "xs01_tool" / "notifications.jsonl").read_bytes(), model="gpt-5.5")
    turn = "01a22607-8148-7c93-b33a-699d845d601d"
    assert all(e.turn_id == turn for e in events)
    (user,) = of(events, UserMessageEvent)
    assert user.content == [TextPart(text="Use the shell to compute 1+1 with bc")]
    first, final = of(events, AssistantMessageEvent)
    thinking, text, call = first.content
    assert isinstance(thinking, ThinkingPart)
    assert thinking.id == "rs_698e63699f774d20b13368a9fab04ca28769817be613496a"
    assert thinking.provenance == Provenance(provider="openai", api="responses", model="gpt-5.5")
    assert text == TextPart(
        text="I'll compute that with bc.",
        item_id="msg_eb5a0e4495d04593a901f87eaf807bd3032e8634f0784c34",
    )
    assert first.message_id == text.item_id
    assert isinstance(call, ToolCallPart) and call.id == "call_98982ce3cf984c4681f6e169"
    (result,) = of(events, ToolResultEvent)
    assert (result.call_id, result.exit_code, result.is_error) == (call.id, 0, False)
    assert result.content == [TextPart(text="2\n")]
    assert final.content[-1] == TextPart(
        text="The result of `echo 1+1 | bc` is **2**.",
        item_id="msg_324d61cc686448f186aae0df88c26a651a751516e475462a",
    )
    # Chunks: concatenated, they equal the final content.
    chunks = [c for c in of(events, AssistantChunkEvent) if c.message_id == text.item_id]
    assert "".join(c.delta for c in chunks) == text.text
    summary = [c for c in of(events, AssistantChunkEvent) if c.kind == "summary"]
    assert "".join(c.delta for c in summary[:6]) == thinking.summary[0]  # type: ignore[index]
    # Usage: one event per model request, the turn's total is their sum.
    requests = of(events, UsageEvent)
    assert [u.usage.input_tokens for u in requests] == [9617, 9893]
    assert all(u.usage.scope == "request" for u in requests)
    end = events[-1]
    assert isinstance(end, TurnEndEvent) and end.status == "completed" and end.duration_ms == 653
    assert end.usage is not None and end.usage.scope == "turn"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (19510, 114)


def test_streamed_command_output_and_its_complete_result_xs02() -> None:
    events = normalise((APP / "xs02_tool_stream" / "notifications.jsonl").read_bytes())
    # Codex never sent the first chunk ("tick 1") as a delta ...
    assert [o.delta for o in of(events, ToolOutputEvent)] == ["tick 2\n", "tick 3\n", "2\n"]
    # ... the result is complete all the same (aggregatedOutput).
    (result,) = of(events, ToolResultEvent)
    assert result.content == [TextPart(text="tick 1\ntick 2\ntick 3\n2\n")]
    assert result.details is not None and result.details["duration_ms"] == 1063
    order = [
        type(e).__name__
        for e in events
        if isinstance(e, ToolCallEvent | ToolOutputEvent | ToolResultEvent)
    ]
    assert order == [
        "ToolCallEvent",
        "ToolOutputEvent",
        "ToolOutputEvent",
        "ToolOutputEvent",
        "ToolResultEvent",
    ]


def test_failed_command_xs03() -> None:
    (result,) = of(
        normalise((APP / "xs03_tool_fail" / "notifications.jsonl").read_bytes()), ToolResultEvent
    )
    assert (result.exit_code, result.is_error, result.content) == (
        3,
        True,
        [TextPart(text="oops\n")],
    )


def test_retry_then_failure_xs05() -> None:
    events = normalise((APP / "xs05_err_http500" / "notifications.jsonl").read_bytes())
    retry, final = of(events, ErrorEvent)
    assert (retry.retryable, retry.fatal, retry.code) == (True, False, "responseStreamDisconnected")
    assert retry.message.startswith("Reconnecting... 1/1 (We’re currently")
    assert (final.retryable, final.fatal, final.code) == (False, True, "internalServerError")
    end = events[-1]
    assert isinstance(end, TurnEndEvent) and end.status == "failed"
    assert end.error == final.message
    assert not of(events, AssistantMessageEvent)


def test_interrupted_message_is_kept_partial_xs09() -> None:
    events = normalise((APP / "xs09_interrupt" / "notifications.jsonl").read_bytes())
    (message,) = of(events, AssistantMessageEvent)
    assert (message.status, message.stop_reason) == ("partial", "interrupted")
    assert message.content == [
        TextPart(
            text="Counting slowly: 1 2 3 4 5 6 7",
            item_id="msg_0846ee256b504d9b9654a77344ac888f2cd10f4db7e646fd",
        )
    ]
    end = events[-1]
    assert isinstance(end, TurnEndEvent) and end.status == "interrupted" and end.error is None
    # The capture harness's own marker line is kept, not dropped.
    (marker,) = of(events, NativeUnknownEvent)
    assert marker.native_type == ">>> client called turn/interrupt"


@pytest.mark.parametrize("run", RUNS)
def test_wire_harness_file_and_sdk_objects_agree(run: str) -> None:
    """The raw wire, the harness file and the SDK's typed objects give the same turn."""
    wire = normalise((APP / run / "wire" / "server_to_client.jsonl").read_bytes())
    harness = normalise((APP / run / "notifications.jsonl").read_bytes(), model="gpt-5.5")
    adapter = CodexAdapter()
    typed = [e for n in sdk_notifications(run) for e in adapter.feed(n)] + adapter.close()
    (start,) = of(wire, SessionStartEvent)
    assert start.model == "gpt-5.5" and start.native_session_id
    turn_types = (UserMessageEvent, AssistantMessageEvent, ToolCallEvent, ToolResultEvent,
                  ToolOutputEvent, UsageEvent, ErrorEvent, TurnEndEvent)  # fmt: skip

    def turn(events: list[Event]) -> list[dict[str, Any]]:
        # ``native`` differs in nulls only: the harness dumped the payloads without them.
        return [
            comparable(e) | {"source": None, "native": None}
            for e in events
            if isinstance(e, turn_types)
        ]

    assert turn(wire) == turn(harness) == turn(typed)
    assert turn(wire)


def test_tap_logs_the_sdk_stream_and_hands_it_on_unchanged() -> None:
    notifications = sdk_notifications("xs01_tool")
    log = SessionLog()
    seen = list(tap(iter(notifications), log))
    assert seen == notifications
    events = log.events()
    assert isinstance(events[-1], TurnEndEvent) and events[-1].status == "completed"
    assert [type(m).__name__ for m in log.derive_messages()] == [
        "UserMessage", "AssistantMessage", "ToolMessage", "AssistantMessage",
    ]  # fmt: skip
    assert log.pending == 0  # checkpointed at the end


def test_atap_logs_an_async_turn_stream_as_tap_does() -> None:
    notifications = sdk_notifications("xs01_tool")

    async def stream() -> AsyncIterator[Any]:
        for notification in notifications:
            yield notification

    async def run() -> tuple[list[Any], SessionLog]:
        log = SessionLog(session_id="codex-async")
        return [n async for n in atap(stream(), log)], log

    seen, log = asyncio.run(run())
    assert seen == notifications
    sync_log = SessionLog()
    list(tap(iter(notifications), sync_log))
    assert log.derive_messages() == sync_log.derive_messages()
    assert {event.session_id for event in log.events()} == {"codex-async"}
    assert log.pending == 0


def test_tap_cut_short_closes_the_turn_as_interrupted() -> None:
    notifications = sdk_notifications("xs01_tool")
    log = SessionLog()
    for index, _ in enumerate(tap(iter(notifications), log)):
        if index == 20:  # mid-stream of the first agent message
            break
    end = log.events()[-1]
    assert isinstance(end, TurnEndEvent) and end.status == "interrupted"
    partial = [e for e in log.events() if isinstance(e, AssistantMessageEvent)][-1]
    assert partial.status == "partial"


# ---------------------------------------------------------------- synthetic: retries, plans, raw


def _note(method: str, **params: Any) -> dict[str, Any]:
    return {"method": method, "params": {"threadId": "t", "turnId": "u", **params}}


def test_retry_abandons_the_cut_message_and_keeps_one_copy_of_re_emitted_items() -> None:
    adapter = CodexAdapter()
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": ["Plan"], "content": []}
    events: list[Event] = []
    for line in [
        _note("turn/started", turn={"id": "u", "status": "inProgress", "items": []}),
        _note("item/completed", item=reasoning),
        _note("item/started", item={"type": "agentMessage", "id": "msg_cut", "text": ""}),
        _note("item/agentMessage/delta", itemId="msg_cut", delta="Half"),
        _note("error", willRetry=True, error={"message": "Reconnecting... 1/1", "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": 502}}}),
        _note("item/completed", item={**reasoning, "id": "rs_2"}),
        _note("item/started", item={"type": "agentMessage", "id": "msg_ok", "text": ""}),
        _note("item/agentMessage/delta", itemId="msg_ok", delta="Whole"),
        _note("item/completed", item={"type": "agentMessage", "id": "msg_ok", "text": "Whole"}),
        _note("turn/completed", turn={"id": "u", "status": "completed", "items": []}),
    ]:  # fmt: skip
        events += adapter.feed(line)
    error = of(events, ErrorEvent)[0]
    assert (error.http_status, error.retryable) == (502, True)
    (message,) = of(events, AssistantMessageEvent)
    thinking, text = message.content
    assert isinstance(thinking, ThinkingPart) and thinking.id == "rs_2"  # the retry's id
    assert text == TextPart(text="Whole", item_id="msg_ok")


def test_plan_updates_and_unknown_items() -> None:
    events = CodexAdapter().feed(
        _note(
            "turn/plan/updated",
            plan=[{"step": "a", "status": "completed"}, {"step": "b", "status": "inProgress"}],
        )
    ) + CodexAdapter().feed(
        _note("item/completed", item={"type": "sleep", "id": "s", "durationMs": 5})
    )
    (plan,) = of(events, PlanUpdateEvent)
    assert [(i.text, i.status) for i in plan.items] == [("a", "completed"), ("b", "in_progress")]
    (unknown,) = of(events, NativeUnknownEvent)
    assert unknown.payload == {"type": "sleep", "id": "s", "durationMs": 5}


def test_a_bare_pydantic_payload_is_recognised_by_its_class() -> None:
    model = NOTIFICATION_MODELS["item/agentMessage/delta"]
    payload = model.model_validate(
        {"threadId": "t", "turnId": "u", "itemId": "msg_1", "delta": "hi"}
    )
    (chunk,) = CodexAdapter().feed(payload)
    assert isinstance(chunk, AssistantChunkEvent) and (chunk.message_id, chunk.delta) == (
        "msg_1",
        "hi",
    )


# ---------------------------------------------------------------- the typed fast path


def test_unmodelled_methods_are_the_sdks_that_nothing_else_handles() -> None:
    """The methods kept whole on the fast path are real notifications (the SDK's
    registry) and none of them has a handler of its own."""
    from adapters.codex._app_server import _HANDLERS
    from adapters.codex._wire import UNMODELLED_METHODS, TypedLine

    typed = {line.METHOD for line in get_args(TypedLine)}
    assert set(UNMODELLED_METHODS) <= set(NOTIFICATION_MODELS)
    assert not set(UNMODELLED_METHODS) & (set(_HANDLERS) | typed)


def _mixed_stream() -> list[dict[str, Any]]:
    """Typed, unmodelled and general lines interleaved, with shapes the fast path does
    not take (params not an object, no params, a JSON-RPC response, an exec line)."""
    wire = (APP / "xs01_tool" / "wire" / "server_to_client.jsonl").read_text().splitlines()
    lines: list[dict[str, Any]] = [json.loads(line) for line in wire]
    lines[3:3] = [
        {"method": "thread/status/changed", "params": ["not", "an", "object"]},
        {"method": "account/rateLimits/updated"},
        {"id": 7, "result": {"ok": True}},
        {"type": "turn.started"},
        {"method": "warning", "params": {"message": "slow"}},
    ]
    return lines


@pytest.mark.parametrize("repeat", [1, 12])
def test_bytes_whole_cut_and_dicts_give_the_same_events(repeat: int) -> None:
    """``repeat`` 12: a chunk of more lines than one decode block (``_DECODE_BLOCK``)."""
    from adapters.codex._app_server import _DECODE_BLOCK

    lines = _mixed_stream() * repeat
    assert (len(lines) > _DECODE_BLOCK) == (repeat > 1)
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    whole = normalise(data)
    adapter = CodexAdapter()
    cut = [e for start in range(0, len(data), 97) for e in adapter.feed(data[start : start + 97])]
    cut += adapter.close()
    adapter = CodexAdapter()
    one_by_one = [e for line in lines for e in adapter.feed(line)] + adapter.close()
    # A line fed as a dict opens no turn for a delta (bytes do, for a stream joined late);
    # this stream starts its turn first, so all three agree.

    def shape(events: list[Event]) -> list[dict[str, Any]]:
        generated: dict[str, str] = {}  # turn ids the adapter made up, by first use
        out = []
        for event in events:
            fields = comparable(event)
            turn_id = fields.get("turn_id")
            if isinstance(turn_id, str) and turn_id.startswith("turn_"):
                fields["turn_id"] = generated.setdefault(turn_id, f"generated {len(generated)}")
            out.append(fields)
        return out

    assert shape(whole) == shape(cut) == shape(one_by_one)
    unknown = [(e.native_type, e.payload) for e in of(whole, NativeUnknownEvent)]
    assert ("warning", {"message": "slow"}) in unknown
    assert ("account/rateLimits/updated", {}) in unknown
    # params not an object: read as the dict path reads such a line
    assert ("thread/status/changed", {}) in unknown
    assert ("response", {"id": 7, "result": {"ok": True}}) in unknown
    assert of(whole, AssistantMessageEvent)


def test_a_chunk_keeps_its_typed_lines_around_lines_of_other_shapes() -> None:
    """One line of another shape in a chunk (a JSON-RPC response, a blank or broken
    line) costs that line only: the typed lines around it stay decoded, nothing twice."""
    from adapters.codex._wire import decode_typed_lines

    wire = (APP / "xs01_tool" / "wire" / "server_to_client.jsonl").read_bytes().splitlines()
    typed = [line for line in wire if line.startswith(b'{"method"')][:3]
    raws = [typed[0], wire[0], b"", b"  \r", typed[1], b"{not json", typed[2]]
    lines = decode_typed_lines(raws)
    assert [line is None for line in lines] == [False, True, True, True, False, True, False]
    assert [line.METHOD for line in lines if line is not None] == [
        json.loads(raw)["method"] for raw in typed
    ]
    assert decode_typed_lines([b"", b"{not json"]) == [None, None]


def test_blank_and_broken_lines_in_a_chunk() -> None:
    """Blank lines are skipped; a broken one is kept as native/unknown; the events of
    the rest are those of the stream without them."""
    wire = (APP / "xs01_tool" / "wire" / "server_to_client.jsonl").read_bytes()
    lines = wire.splitlines(keepends=True)
    damaged = b"".join([*lines[:4], b"\n", b"   \n", b"{not json\n", *lines[4:]])
    clean_events = normalise(wire)
    damaged_events = normalise(damaged)
    (broken,) = [
        e for e in damaged_events if isinstance(e, NativeUnknownEvent) and e.payload == "{not json"
    ]
    assert broken.reason.startswith("malformed JSON line")
    rest = [e for e in damaged_events if e is not broken]
    assert [comparable(e) for e in rest] == [comparable(e) for e in clean_events]
