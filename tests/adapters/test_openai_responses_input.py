"""OpenAI Responses adapter: input shapes, bad input, tool outputs, errors and the CLI.

Streams are built from recorded fixtures (tests/fixtures/recorded/openai-responses/) and
cut, corrupted or re-ordered here; hand-made payloads are kept minimal and say so.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import msgspec
import openai
import pytest
import respx

from adapters import create_adapter
from adapters.openai_responses import OpenAIResponsesAdapter, atap, tap
from universal_event import codec
from universal_event.cli import main
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    NativeUnknownEvent,
    StepEndEvent,
    StepStartEvent,
    ToolOutputEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UsageEvent,
    WarningEvent,
)
from universal_event.ingest import normalize_bytes
from universal_event.log import SessionLog
from universal_event.parts import (
    ImagePart,
    RefusalPart,
    ServerToolCallPart,
    ServerToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "recorded" / "openai-responses"


def fixture_body(name: str, index: int = 0) -> bytes:
    interaction = json.loads((FIXTURES / name).read_text())["interactions"][index]
    body = interaction["response_body"]
    if interaction["response_body_format"] == "sse-data-jsonl":
        return "".join(f"data: {line}\n\n" for line in body.splitlines() if line.strip()).encode()
    return body.encode() if isinstance(body, str) else json.dumps(body).encode()


def payloads(name: str, index: int = 0) -> list[dict[str, Any]]:
    """The SSE data payloads of a recorded stream, parsed."""
    return [
        json.loads(line[6:])
        for line in fixture_body(name, index).decode().splitlines()
        if line.startswith("data: ")
    ]


def sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e.get('type')}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def of_type(events: list[Event], cls: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, cls)]


def run(data: bytes, chunk: int | None = None) -> list[Event]:
    adapter = OpenAIResponsesAdapter()
    if chunk is None:
        return adapter.feed(data) + adapter.close()
    events: list[Event] = []
    for start in range(0, len(data), chunk):
        events.extend(adapter.feed(data[start : start + chunk]))
    return events + adapter.close()


def shape(events: list[Event]) -> list[Any]:
    out = []
    for event in events:
        data = codec.to_builtins(event)
        data.pop("id")
        data.pop("ts")
        out.append(data)
    return out


# ----------------------------------------------------------------------- input shapes


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1000])
def test_bytes_cut_anywhere_give_the_same_events(chunk: int) -> None:
    data = fixture_body("stream_function_call_then_text.json")
    assert shape(run(data, chunk)) == shape(run(data))


def test_crlf_framing() -> None:
    data = fixture_body("stream_background_queued.json")
    crlf = data.replace(b"\n", b"\r\n")
    assert shape(run(crlf, 5)) == shape(run(data))


def test_dicts_strings_and_sdk_objects_equal_bytes() -> None:
    events = payloads("stream_phase_function_call_text.json")
    from_bytes = run(sse(events))

    by_dict = OpenAIResponsesAdapter()
    from_dicts = [e for p in events for e in by_dict.feed(p)] + by_dict.close()
    by_str = OpenAIResponsesAdapter()
    from_strs = [e for p in events for e in by_str.feed(json.dumps(p))] + by_str.close()
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    typed = TypeAdapter(ResponseStreamEvent)
    by_sdk = OpenAIResponsesAdapter()
    from_sdk = [e for p in events for e in by_sdk.feed(typed.validate_python(p))] + by_sdk.close()
    assert shape(from_dicts) == shape(from_bytes)
    assert shape(from_strs) == shape(from_bytes)
    assert shape(from_sdk) == shape(from_bytes)


def test_whole_json_body_in_pieces_and_json_lines() -> None:
    body = fixture_body("reasoning_summaries_encrypted_replay.json")
    whole = run(body)
    assert shape(run(body, 500)) == shape(whole)
    (message,) = of_type(whole, AssistantMessageEvent)
    thinking = message.content[0]
    assert isinstance(thinking, ThinkingPart) and len(thinking.summary or []) == 6
    # JSON lines of events (what `normalize` gets from a file of data payloads).
    events = payloads("stream_background_queued.json")
    lines = "\n".join(json.dumps(e) for e in events).encode()
    assert shape(run(lines, 333)) == shape(run(sse(events)))


def test_json_lines_with_a_malformed_first_line_are_not_held_back() -> None:
    """A pretty-printed body still arriving waits for the rest; JSON lines whose first
    line is broken do not: each later event comes out when its line does."""
    pretty = json.dumps(
        json.loads(fixture_body("reasoning_summaries_encrypted_replay.json")), indent=2
    )
    adapter = OpenAIResponsesAdapter()
    *pieces, last = pretty.encode().splitlines(keepends=True)
    assert [e for piece in pieces for e in adapter.feed(piece)] == []
    assert shape(adapter.feed(last) + adapter.close()) == shape(run(pretty.encode()))

    events = payloads("stream_background_queued.json")
    adapter = OpenAIResponsesAdapter()
    assert adapter.feed(b"{not json\n") == []  # alone it could be a body's start
    first = adapter.feed(json.dumps(events[0]).encode() + b"\n")
    assert [type(e) for e in first][0] is NativeUnknownEvent
    assert len(first) > 1  # the first event's own events, not held until close
    rest = [e for event in events[1:] for e in adapter.feed(json.dumps(event).encode() + b"\n")]
    lines = b"\n".join(json.dumps(e).encode() for e in events) + b"\n"
    assert shape(first[1:] + rest + adapter.close()) == shape(run(lines))


def test_registry_and_normalize_bytes() -> None:
    assert isinstance(create_adapter("openai-responses"), OpenAIResponsesAdapter)
    events = normalize_bytes("openai-responses", fixture_body("stream_mcp_call.json"))
    assert len(of_type(events, AssistantMessageEvent)) == 1
    assert isinstance(events[-2], StepEndEvent) and isinstance(events[-1], TurnEndEvent)


# ----------------------------------------------------------------------- bad input


def test_cut_stream_closes_partial_and_interrupted() -> None:
    events = payloads("stream_phase_function_call_text.json")
    # Cut inside the function call's arguments (after its second delta).
    deltas = [
        i for i, e in enumerate(events) if e["type"] == "response.function_call_arguments.delta"
    ]
    cut = sse(events[: deltas[1] + 1])
    adapter = OpenAIResponsesAdapter()
    streamed = adapter.feed(cut[:-7])  # and inside the last frame
    closed = adapter.close()
    assert not of_type(streamed, AssistantMessageEvent)
    (message,) = of_type(closed, AssistantMessageEvent)
    assert message.status == "partial"
    thinking, text, call = message.content
    assert isinstance(thinking, ThinkingPart) and thinking.encrypted_content
    assert isinstance(text, TextPart) and text.phase == "commentary"
    assert isinstance(call, ToolCallPart)
    assert call.arguments is None and call.arguments_raw is not None
    assert call.id == "call_LabG58Uhrq9kZvR52BYKjToD"
    chunks = "".join(
        c.delta for c in of_type(streamed, AssistantChunkEvent) if c.kind == "tool_arguments"
    )
    assert call.arguments_raw.startswith(chunks[:4])
    (error,) = of_type(closed, ErrorEvent)
    assert error.code == "stream_interrupted" and error.retryable
    (end,) = of_type(closed, StepEndEvent)
    assert end.status == "interrupted"
    assert adapter.close() == []  # closing twice adds nothing


def test_cut_inside_message_text_keeps_the_text_so_far() -> None:
    events = payloads("stream_background_queued.json")
    deltas = [i for i, e in enumerate(events) if e["type"] == "response.output_text.delta"]
    closed = run(sse(events[: deltas[3] + 1]))
    (message,) = of_type(closed, AssistantMessageEvent)
    (text,) = message.content
    expected = "".join(e["delta"] for e in events[: deltas[3] + 1] if "delta" in e)
    assert isinstance(text, TextPart) and text.text == expected and expected


def test_malformed_json_keeps_earlier_and_later_events() -> None:
    events = payloads("stream_function_call_then_text.json")
    good = sse(events)
    broken = (
        sse(events[:3])
        + b'event: response.output_text.delta\ndata: {"type": "resp\n\n'
        + sse(events[3:])
    )
    result = run(broken)
    (unknown,) = of_type(result, NativeUnknownEvent)
    assert unknown.reason is not None and unknown.reason.startswith("malformed JSON")
    assert unknown.native_type == "response.output_text.delta"
    assert shape([e for e in result if e is not unknown]) == shape(run(good))


def test_unknown_event_type_is_kept() -> None:
    events = payloads("stream_background_queued.json")
    novel = {"type": "response.hologram.delta", "sequence_number": 5, "delta": "✨"}
    # renumber so the insertion is not also a sequence gap
    patched = (
        events[:5]
        + [novel]
        + [
            {**e, "sequence_number": e["sequence_number"] + 1} if "sequence_number" in e else e
            for e in events[5:]
        ]
    )
    result = run(sse(patched))
    (unknown,) = of_type(result, NativeUnknownEvent)
    assert unknown.native_type == "response.hologram.delta"
    assert unknown.payload == novel
    assert unknown.reason == "event type not mapped by this adapter"
    assert not of_type(result, WarningEvent)
    assert len(of_type(result, AssistantMessageEvent)) == 1


def test_known_type_with_a_wrong_shape_is_kept_not_raised() -> None:
    bad = {"type": "response.output_item.added", "sequence_number": 0, "item": "not an object"}
    (unknown,) = OpenAIResponsesAdapter().feed(bad)
    assert isinstance(unknown, NativeUnknownEvent)
    assert unknown.reason is not None and "unexpected shape" in unknown.reason


def test_sequence_gap_is_a_warning_and_the_message_stays_whole() -> None:
    events = payloads("stream_phase_function_call_text.json", 1)
    deltas = [i for i, e in enumerate(events) if e["type"] == "response.output_text.delta"]
    dropped = events[: deltas[1]] + events[deltas[1] + 2 :]
    result = run(sse(dropped))
    (warning,) = of_type(result, WarningEvent)
    assert warning.code == "sequence_gap"
    assert warning.details == {
        "expected": events[deltas[1]]["sequence_number"],
        "received": events[deltas[1]]["sequence_number"] + 2,
    }
    (message,) = of_type(result, AssistantMessageEvent)
    assert message == msgspec.structs.replace(
        of_type(run(sse(events)), AssistantMessageEvent)[0], id=message.id, ts=message.ts
    )


def test_repeated_sequence_number_is_out_of_order() -> None:
    events = payloads("stream_background_queued.json")
    result = run(sse(events[:6] + [events[5]] + events[6:]))
    (warning,) = of_type(result, WarningEvent)
    assert warning.code == "sequence_out_of_order"


def test_incomplete_response_keeps_output_and_says_why() -> None:
    events = payloads("stream_background_queued.json")
    last = events[-1]
    incomplete = {
        **last,
        "type": "response.incomplete",
        "response": {
            **last["response"],
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
        },
    }
    result = run(sse(events[:-1] + [incomplete]))
    (message,) = of_type(result, AssistantMessageEvent)
    assert (message.status, message.stop_reason) == ("complete", "max_output_tokens")
    (error,) = of_type(result, ErrorEvent)
    assert (error.code, error.fatal, error.retryable) == ("max_output_tokens", False, False)
    (end,) = of_type(result, StepEndEvent)
    assert (end.status, end.stop_reason) == ("completed", "max_output_tokens")
    assert len(of_type(result, UsageEvent)) == 1


def test_flat_error_event_shape() -> None:
    """The documented flat ``error`` event (code/message at the top), hand-made."""
    adapter = OpenAIResponsesAdapter()
    (error,) = adapter.feed(
        {
            "type": "error",
            "code": "rate_limit_exceeded",
            "message": "slow down",
            "sequence_number": 1,
        }
    )
    assert isinstance(error, ErrorEvent)
    assert (error.code, error.message, error.retryable) == (
        "rate_limit_exceeded",
        "slow down",
        True,
    )


def test_refusal_and_shell_output_deltas() -> None:
    """Hand-made events in the SDK's documented shapes (no recording has them)."""
    adapter = OpenAIResponsesAdapter()
    created = payloads("stream_background_queued.json")[0]
    events = adapter.feed(created)
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    events += adapter.feed({"type": "response.output_item.added", "output_index": 0, "item": item})
    events += adapter.feed(
        {
            "type": "response.refusal.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": "No.",
        }
    )
    shell = {"id": "sh_1", "type": "shell_call", "call_id": "call_sh", "status": "in_progress"}
    events += adapter.feed({"type": "response.output_item.added", "output_index": 1, "item": shell})
    events += adapter.feed(
        {
            "type": "response.shell_call_output_content.delta",
            "item_id": "sh_1",
            "output_index": 1,
            "command_index": 0,
            "delta": {"stdout": "hello\n", "stderr": "warn\n"},
        }
    )
    events += adapter.close()
    (refusal_chunk,) = [c for c in of_type(events, AssistantChunkEvent) if c.kind == "refusal"]
    assert refusal_chunk.delta == "No."
    outputs = of_type(events, ToolOutputEvent)
    assert [(o.call_id, o.stream, o.delta) for o in outputs] == [
        ("call_sh", "stdout", "hello\n"),
        ("call_sh", "stderr", "warn\n"),
    ]
    (message,) = of_type(events, AssistantMessageEvent)
    refusal, shell_part = message.content
    assert refusal == RefusalPart(text="No.", item_id="msg_1")
    assert isinstance(shell_part, ServerToolCallPart) and shell_part.id == "call_sh"
    assert shell_part.name == "shell"


def test_output_item_types_map_as_documented() -> None:
    """A non-streamed body holding item types no recording has (SDK-documented shapes)."""
    body = {
        "object": "response",
        "id": "resp_x",
        "model": "gpt-test",
        "status": "completed",
        "output": [
            {"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed"},
            {
                "type": "local_shell_call",
                "id": "lsh_1",
                "call_id": "call_l",
                "action": {"command": ["ls"]},
            },
            {"type": "tool_search_output", "id": "tso_1", "call_id": "ts_1", "tools": []},
            {"type": "brand_new_item", "id": "new_1"},
        ],
    }
    (message,) = of_type(OpenAIResponsesAdapter().feed(body), AssistantMessageEvent)
    assert isinstance(message, AssistantMessageEvent)
    search, shell, result, new = message.content
    assert isinstance(search, ServerToolCallPart) and (search.name, search.input) == (
        "file_search",
        ["q"],
    )
    assert isinstance(shell, ServerToolCallPart) and (shell.id, shell.name) == (
        "call_l",
        "local_shell",
    )
    assert isinstance(result, ServerToolResultPart) and result.kind == "tool_search_output"
    assert isinstance(new, ServerToolCallPart) and new.native == body["output"][3]


def test_a_new_response_before_the_old_one_ended() -> None:
    first = payloads("stream_background_queued.json")
    second = payloads("stream_function_call_then_text.json")
    result = run(sse(first[:8] + second))
    assert [e.status for e in of_type(result, StepEndEvent)] == ["interrupted", "completed"]
    assert [m.status for m in of_type(result, AssistantMessageEvent)] == ["partial", "complete"]


def test_not_a_responses_object() -> None:
    (unknown,) = OpenAIResponsesAdapter().feed(3.5)
    assert isinstance(unknown, NativeUnknownEvent) and unknown.native_type == "float"


# ----------------------------------------------------------------------- tool outputs


def test_tool_outputs_become_tool_results_once() -> None:
    adapter = OpenAIResponsesAdapter()
    adapter.feed(fixture_body("parallel_function_calls_nonstream.json"))
    adapter.close()
    request = json.loads((FIXTURES / "parallel_function_calls_nonstream.json").read_text())
    items = request["interactions"][1]["request_body"]["input"]
    results = adapter.tool_outputs(items)
    assert [(r.call_id, r.name) for r in results] == [
        ("call_LWVp74L5HaH2KNvgVz9PJsrj", "get_location"),
        ("call_YnRAWeTyxI91m5uNa5bxXwVO", "get_location"),
    ]
    assert results[1].content == [TextPart(text='{"lat": 51, "lng": 0}')]
    assert all(isinstance(r, ToolResultEvent) and r.surface is None for r in results)
    assert adapter.tool_outputs(items) == []  # the loop re-sends its history: logged once


def test_tool_output_shapes() -> None:
    adapter = OpenAIResponsesAdapter()
    (image_result,) = adapter.feed(
        {
            "type": "function_call_output",
            "call_id": "call_img",
            "output": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            ],
        }
    )
    assert isinstance(image_result, ToolResultEvent)
    assert image_result.content == [
        TextPart(text="see"),
        ImagePart(data="AAAA", media_type="image/png"),
    ]
    (shell_result,) = adapter.tool_outputs(
        [{"type": "local_shell_call_output", "call_id": "call_l", "output": "total 0"}]
    )
    assert shell_result.details == {
        "native": {"type": "local_shell_call_output", "call_id": "call_l", "output": "total 0"}
    }
    # the SDK's shape (ResponseInputItemParam.LocalShellCallOutput) names the call by ``id``
    (by_id,) = adapter.tool_outputs(
        [{"type": "local_shell_call_output", "id": "call_m", "output": "done"}]
    )
    assert isinstance(by_id, ToolResultEvent) and by_id.call_id == "call_m"
    assert by_id.content == [TextPart(text="done")]


# ----------------------------------------------------------------------- HTTP errors


@pytest.mark.parametrize(
    ("status", "body", "code", "retryable"),
    [
        (
            429,
            {"error": {"code": "rate_limit_exceeded", "message": "slow"}},
            "rate_limit_exceeded",
            True,
        ),
        (
            429,
            {"error": {"code": "insufficient_quota", "message": "pay"}},
            "insufficient_quota",
            False,
        ),
        (
            500,
            b'{"error": {"type": "server_error", "message": "oops", "code": null}}',
            "server_error",
            True,
        ),
        (502, b"<html>bad gateway</html>", None, True),
        (404, {"error": {"code": "model_not_found", "message": "no"}}, "model_not_found", False),
    ],
)
def test_http_error_bodies(status: int, body: Any, code: str | None, retryable: bool) -> None:
    (error,) = OpenAIResponsesAdapter().http_error(status, body)
    assert isinstance(error, ErrorEvent)
    assert (error.http_status, error.code, error.retryable) == (status, code, retryable)
    assert error.message


# ----------------------------------------------------------------------- tap


def _client_with(body: bytes, router: respx.MockRouter) -> openai.OpenAI:
    router.post("/v1/responses").mock(
        return_value=httpx.Response(
            200, content=body, headers={"content-type": "text/event-stream"}
        )
    )
    return openai.OpenAI(api_key="sk-test", max_retries=0)


def test_tap_stopped_early_logs_a_partial_response() -> None:
    log = SessionLog()
    with respx.mock(base_url="https://api.openai.com") as router:
        client = _client_with(fixture_body("stream_mcp_call.json"), router)
        stream = tap(client.responses.create(model="o4-mini", input="hi", stream=True), log)
        for count, native in enumerate(stream):
            assert native.type.startswith("response.")  # the caller keeps the SDK objects
            if count == 30:
                break
        stream.close()
    events = log.events()
    assert [e.seq for e in events] == list(range(len(events)))
    (message,) = of_type(events, AssistantMessageEvent)
    assert message.status == "partial"
    assert of_type(events, StepEndEvent)[-1].status == "interrupted"


def test_atap_with_the_async_client() -> None:
    log = SessionLog()

    async def go() -> None:
        with respx.mock(base_url="https://api.openai.com") as router:
            router.post("/v1/responses").mock(
                return_value=httpx.Response(
                    200,
                    content=fixture_body("stream_reasoning_encrypted_function_call.json"),
                    headers={"content-type": "text/event-stream"},
                )
            )
            client = openai.AsyncOpenAI(api_key="sk-test", max_retries=0)
            stream = await client.responses.create(model="gpt-5", input="hi", stream=True)
            async for _ in atap(stream, log):
                pass

    asyncio.run(go())
    events = log.events()
    (message,) = of_type(events, AssistantMessageEvent)
    assert [type(p) for p in message.content] == [ThinkingPart, ToolCallPart]
    assert isinstance(events[0], TurnStartEvent) and isinstance(events[1], StepStartEvent)
    # the response ends in a function call: the turn goes on (the caller runs the tool)
    assert isinstance(events[-1], StepEndEvent)
    assert all(e.session_id == log.session_id for e in events)


def test_tap_logs_an_sdk_error_raised_mid_stream() -> None:
    log = SessionLog()
    with respx.mock(base_url="https://api.openai.com") as router:
        client = _client_with(fixture_body("stream_error_event_response_failed.json"), router)
        with pytest.raises(openai.APIError):
            for _ in tap(client.responses.create(model="gpt-5-nano", input="hi", stream=True), log):
                pass
    events = log.events()
    (error,) = of_type(events, ErrorEvent)
    assert error.code == "insufficient_quota"
    assert [e.status for e in of_type(events, StepEndEvent)] == ["failed"]
    assert log.persisted_seq == len(events)  # checkpointed before the exception surfaced


# ----------------------------------------------------------------------- CLI


def test_cli_normalize_stream_and_body(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stream_file = tmp_path / "stream.sse"
    stream_file.write_bytes(fixture_body("stream_web_search_call.json"))
    assert main(["normalize", "--from", "openai-responses", str(stream_file)]) == 0
    events = codec.decode_lines(capsys.readouterr().out.encode())
    types = [e.__struct_config__.tag for e in events]
    assert types[:2] == ["turn/start", "step/start"] and types[-2:] == ["step/end", "turn/end"]
    assert types.count("assistant/message") == 1 and "usage" in types

    body_file = tmp_path / "body.json"
    body_file.write_bytes(fixture_body("parallel_function_calls_nano.json"))
    assert main(["normalize", "--from", "openai-responses", str(body_file)]) == 0
    events = codec.decode_lines(capsys.readouterr().out.encode())
    (message,) = of_type(events, AssistantMessageEvent)
    assert [p.name for p in message.content if isinstance(p, ToolCallPart)] == ["get_weather"] * 2


def test_cli_import_then_derive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stream_file = tmp_path / "stream.sse"
    stream_file.write_bytes(fixture_body("stream_custom_tool_call_freeform.json"))
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    args = ["import", "--from", "openai-responses", str(stream_file), "--session", "s1"]
    assert main([*args, "--store", store]) == 0
    capsys.readouterr()
    from universal_event.stores import open_store

    opened = open_store(store)
    try:
        log = SessionLog.open(opened, "s1")
        (message,) = log.derive_messages()
        assert [type(p).__name__ for p in message.content] == ["ThinkingPart", "ToolCallPart"]
    finally:
        opened.close()


def test_output_text_logprobs_are_kept_whole_and_streamed() -> None:
    """With ``include=["message.output_text.logprobs"]`` each ``output_text`` carries its
    tokens; the message keeps them as Chat's do (``{"content": [...]}``)."""
    tokens = [{"token": "Hi", "logprob": -0.01, "bytes": [72, 105], "top_logprobs": []}]
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Hi", "annotations": [], "logprobs": tokens}],
    }
    response = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-4.1",
        "output": [item],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
    stream = [
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {**response, "status": "in_progress", "output": []},
        },
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {**item, "content": [], "status": "in_progress"},
        },  # fmt: skip
        {
            "type": "response.output_text.delta",
            "sequence_number": 2,
            "output_index": 0,
            "item_id": "msg_1",
            "content_index": 0,
            "delta": "Hi",
            "logprobs": tokens,
        },  # fmt: skip
        {
            "type": "response.output_item.done",
            "sequence_number": 3,
            "output_index": 0,
            "item": item,
        },  # fmt: skip
        {"type": "response.completed", "sequence_number": 4, "response": response},
    ]
    for data in (json.dumps(response).encode(), sse(stream)):
        (message,) = of_type(run(data), AssistantMessageEvent)
        assert message.logprobs == {"content": tokens}
    (plain,) = of_type(
        run(fixture_body("stream_function_call_then_text.json")), AssistantMessageEvent
    )
    assert plain.logprobs is None


def test_a_tool_loop_over_two_responses_is_one_turn_of_two_steps() -> None:
    """As the other adapters do: a response ending in function calls leaves the turn
    open (the caller runs the tools, the next response goes on); the turn ends with the
    responses' usage summed."""
    from universal_event.events import UsageEvent

    interactions = json.loads((FIXTURES / "stream_function_call_then_text.json").read_text())[
        "interactions"
    ]
    adapter = OpenAIResponsesAdapter()
    events: list[Event] = []
    for index, _ in enumerate(interactions):
        events += adapter.feed(fixture_body("stream_function_call_then_text.json", index))
        events += adapter.close()
    life = [
        (e.__struct_config__.tag, e.step)
        for e in events
        if isinstance(e, TurnStartEvent | StepStartEvent | StepEndEvent | TurnEndEvent)
    ]
    assert life == [
        ("turn/start", 0),
        ("step/start", 0),
        ("step/end", 0),
        ("step/start", 1),
        ("step/end", 1),
        ("turn/end", 1),
    ]
    assert len({e.turn_id for e in events}) == 1
    (end,) = of_type(events, TurnEndEvent)
    usages = [e.usage for e in of_type(events, UsageEvent)]
    assert end.usage is not None and len(usages) == 2
    assert end.usage.input_tokens == sum(u.input_tokens for u in usages)
    # a response cut before its end closes its turn as interrupted
    adapter = OpenAIResponsesAdapter()
    body = fixture_body("stream_function_call_then_text.json", 1)
    cut = adapter.feed(body[: body.index(b"response.completed")]) + adapter.close()
    assert of_type(cut, TurnStartEvent)
    assert [e.status for e in of_type(cut, TurnEndEvent)] == ["interrupted"]
