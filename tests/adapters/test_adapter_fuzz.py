"""Native values of the wrong type, in every adapter but Codex's (tests/adapters/
test_codex_robustness.py has those): Anthropic Messages, OpenAI Chat and Responses
streams, Claude Code / Agent SDK lines and transcripts, and the three request-body
parsers.

msgspec does not check field types when a Struct is built, so a native value of another
type copied into a typed event field (a number for ``model``, a list for
``parent_id``) made an event that encodes but does not decode back: a stored session
holding it could not be read. What must hold instead:

* an optional field of another type is dropped (None);
* a native item whose required part is of another type is kept whole as
  ``native/unknown`` (a request body: a :class:`DecodeError` naming where);
* nothing but a :class:`UniversalEventError` leaves ``feed`` / ``close``, and every event
  decodes back to itself.

The last tests feed seeded mutations of the recorded and captured fixtures (keys dropped,
values swapped for ones of other types, deep inside) under a capped address space.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters import create_adapter
from adapters.anthropic import AnthropicAdapter
from adapters.claude_sdk import ClaudeCodeAdapter, ClaudeTranscriptAdapter
from adapters.openai_responses import OpenAIResponsesAdapter
from tests.adapters._fuzz_support import capped_address_space, mutate
from universal_event.codec import decode_lines, encode_lines
from universal_event.errors import DecodeError, UniversalEventError
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    NativeUnknownEvent,
    RequestHeaderEvent,
    SessionStartEvent,
    StepEndEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UsageEvent,
    UserMessageEvent,
)
from universal_event.ingest import REQUEST_RUNTIMES, import_events
from universal_event.log import SessionLog
from universal_event.parts import Citation, TextPart, ThinkingPart, ToolCallPart

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def round_trips(events: list[Event]) -> list[Event]:
    """``events``, after checking that each encodes and decodes back to itself."""
    for event in events:
        assert decode_lines(encode_lines([event])) == [event], event
    return events


def of(events: list[Event], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def sse(*frames: dict[str, Any]) -> bytes:
    return b"".join(f"event: {f.get('type')}\ndata: {json.dumps(f)}\n\n".encode() for f in frames)


def lines(*objects: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objects)


def run(adapter: Any, *inputs: Any) -> list[Event]:
    events: list[Event] = []
    for native in inputs:
        events += adapter.feed(native)
    return round_trips(events + adapter.close())


# ---------------------------------------------------------------- Anthropic Messages


def _start(message_id: Any = "msg_1", **message: Any) -> dict[str, Any]:
    usage = {"input_tokens": 3, "output_tokens": 1}
    body = {"id": message_id, "model": "claude-x", "usage": usage, **message}
    return {"type": "message_start", "message": body}


def _block(index: Any, **block: Any) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: Any, **delta: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


_STOP = {"type": "message_stop"}


def both(*frames: dict[str, Any]) -> list[list[Event]]:
    """The frames as SSE bytes (typed fast path, then its dict fallback) and as dicts."""
    return [run(AnthropicAdapter(), sse(*frames)), run(AnthropicAdapter(), *frames)]


@pytest.mark.parametrize("model", [5, ["x"], {"a": 1}, True])
def test_anthropic_model_of_another_type_is_dropped(model: Any) -> None:
    for events in both(_start(model=model), _block(0, type="text", text="hi"), _STOP):
        [message] = of(events, AssistantMessageEvent)
        assert message.source.model is None and message.provenance.model is None
        assert [p.text for p in message.content] == ["hi"]
        assert of(events, UsageEvent)[0].model is None


@pytest.mark.parametrize("field", ["stop_reason", "stop_sequence"])
def test_anthropic_stop_fields_of_another_type_are_dropped(field: str) -> None:
    stop = {"type": "message_delta", "delta": {field: 1.5}, "usage": {"output_tokens": 2}}
    for events in both(_start(), _block(0, type="text", text="hi"), stop, _STOP):
        [message] = of(events, AssistantMessageEvent)
        assert getattr(message, field) is None
        assert of(events, StepEndEvent)[0].stop_reason is None
        assert of(events, TurnEndEvent)[0].status == "completed"


def test_anthropic_tool_id_and_name_of_another_type_are_dropped_from_chunks() -> None:
    frames = [
        _start(),
        _block(0, type="tool_use", id={"a": 1}, name=7, input={}),
        _delta(0, type="input_json_delta", partial_json='{"a": 1}'),
        _STOP,
    ]
    for events in both(*frames):
        [chunk] = of(events, AssistantChunkEvent)
        assert chunk.tool_call_id is None and chunk.tool_name is None
        [message] = of(events, AssistantMessageEvent)
        assert isinstance(message.content[0], ToolCallPart)


@pytest.mark.parametrize("index", ["0", 1.5, [0], True, None])
def test_anthropic_block_index_of_another_type_keeps_the_frame(index: Any) -> None:
    """It used to become the chunk's ``index`` (undecodable), or a block key that broke
    sorting the blocks at ``close`` (``TypeError`` out of the adapter)."""
    frames = [_start(), _block(0, type="text", text="a"), _block(index, type="text", text="b")]
    for events in both(*frames, _delta(index, type="text_delta", text="c"), _STOP):
        assert len(of(events, NativeUnknownEvent)) == 2
        [message] = of(events, AssistantMessageEvent)
        assert [p.text for p in message.content] == ["a"]
    for events in both(*frames):  # cut: the blocks are sorted at close
        assert of(events, AssistantMessageEvent)[0].status == "partial"


@pytest.mark.parametrize("message_id", [{"a": 1}, ["x"], 5])
def test_anthropic_message_id_of_another_type_keeps_the_frame(message_id: Any) -> None:
    """A dict id used to fail at ``close`` (unhashable), out of the adapter."""
    for events in both(_start(message_id), _block(0, type="text", text="a"), _STOP):
        assert of(events, AssistantMessageEvent) == []
        assert of(events, TurnStartEvent) == []


def test_anthropic_citation_fields_of_another_type_are_dropped() -> None:
    bad = {"type": "char_location", "cited_text": 5, "url": [], "start_char_index": "1"}
    citation = {**bad, "end_char_index": 1.5, "title": {}}
    frames = [
        _start(),
        _block(0, type="text", text="a"),
        _delta(0, type="citations_delta", citation=citation),
        _STOP,
    ]
    for events in both(*frames):
        [message] = of(events, AssistantMessageEvent)
        [kept] = message.content[0].citations
        assert kept == Citation(kind="char_location", native=citation)


def test_anthropic_redacted_data_and_error_fields_of_another_type_are_dropped() -> None:
    error = {"type": "error", "error": {"type": ["x"], "message": "boom"}, "request_id": 5}
    frames = [_start(), _block(0, type="redacted_thinking", data=5), error]
    for events in both(*frames):
        [message] = of(events, AssistantMessageEvent)
        assert message.content == [ThinkingPart(redacted_data=None, provenance=message.provenance)]
        [reported] = of(events, ErrorEvent)
        assert reported.code is None and reported.source.native_id is None


@pytest.mark.parametrize("usage", [[1], "x", 5])
def test_anthropic_usage_of_another_type_is_ignored(usage: Any) -> None:
    stop = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage}
    frames = [_start(usage=usage), _block(0, type="text", text="a"), stop, _STOP]
    for events in both(*frames):
        assert of(events, AssistantMessageEvent)[0].stop_reason == "end_turn"
        assert of(events, UsageEvent) == []


def test_anthropic_whole_message_with_a_block_of_another_shape_is_kept_whole() -> None:
    """Checked before the message opened a turn: nothing half-made is left behind."""
    body = {
        "type": "message",
        "id": "msg_1",
        "model": "claude-x",
        "content": [{"type": "text", "text": "ok"}, {"type": "text", "text": ["x"]}],
        "stop_reason": 3,
    }
    for native in (body, json.dumps(body).encode()):
        events = run(AnthropicAdapter(), native)
        assert [type(e) for e in events] == [NativeUnknownEvent]
    body["content"] = [{"type": "thinking", "thinking": "t", "signature": 5}]
    [message] = of(run(AnthropicAdapter(), body), AssistantMessageEvent)
    assert message.stop_reason is None
    assert message.content == [ThinkingPart(text="t", provenance=message.provenance)]


# ---------------------------------------------------------------- OpenAI Responses


def _item(**item: Any) -> dict[str, Any]:
    return {"id": "fc_1", "status": "completed", **item}


def test_responses_dict_of_an_unhashable_type_is_kept() -> None:
    """``feed(dict)`` used to raise ``TypeError`` (unhashable ``type``)."""
    for kind in ({"a": 1}, [1]):
        events = run(OpenAIResponsesAdapter(), {"type": kind, "sequence_number": 0})
        [kept] = of(events, NativeUnknownEvent)
        assert kept.payload == {"type": kind, "sequence_number": 0}


@pytest.mark.parametrize("summary", [[5], ["x"], [None]])
def test_responses_body_with_an_item_of_another_shape_still_ends(summary: Any) -> None:
    """A reasoning item whose summary holds no objects used to raise ``AttributeError``
    out of ``feed``; the item is kept, the rest of the response goes on."""
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": summary},
        {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
    ]
    body = {"object": "response", "id": "resp_1", "status": "completed", "output": output}
    body["output"][1]["content"] = [{"type": "output_text", "text": "hi", "annotations": []}]
    for native in (body, json.dumps(body).encode()):
        events = run(OpenAIResponsesAdapter(), native)
        [message] = of(events, AssistantMessageEvent)
        assert [p.text for p in message.content] == ["hi"]
        [kept] = of(events, NativeUnknownEvent)
        assert kept.payload == output[0]
        assert of(events, TurnEndEvent)[0].status == "completed"


def test_responses_chunk_call_id_and_name_of_another_type_are_dropped() -> None:
    frames = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": _item(type="function_call", call_id=5, name=["f"], arguments=""),
        },
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "item_id": "fc_1",
            "delta": "{}",
        },
    ]
    for events in (
        run(OpenAIResponsesAdapter(), sse(*frames)),
        run(OpenAIResponsesAdapter(), *frames),
    ):
        [chunk] = of(events, AssistantChunkEvent)
        assert chunk.tool_call_id == "fc_1" and chunk.tool_name == "function_call"


# ---------------------------------------------------------------- Claude Code


_INIT = {
    "type": "system",
    "subtype": "init",
    "session_id": "s1",
    "model": "claude-x",
    "cwd": "/w",
    "tools": ["Bash"],
}


def _assistant(*blocks: dict[str, Any], **line: Any) -> dict[str, Any]:
    message = {"id": "msg_1", "model": "claude-x", "content": list(blocks), "stop_reason": None}
    return {"type": "assistant", "message": message, "parent_tool_use_id": None, **line}


def _claude(*objects: dict[str, Any]) -> list[list[Event]]:
    """The lines as bytes and as dicts."""
    return [run(ClaudeCodeAdapter(), lines(*objects)), run(ClaudeCodeAdapter(), *objects)]


@pytest.mark.parametrize("parent", [5, ["x"], {"a": 1}, True])
def test_claude_parent_of_another_type_keeps_the_line(parent: Any) -> None:
    """Dropped, a sub-agent's message would pass for the main agent's: kept whole."""
    text = {"type": "text", "text": "hi"}
    for events in _claude(_INIT, _assistant(text, parent_tool_use_id=parent)):
        [kept] = [e for e in of(events, NativeUnknownEvent) if e.native_type == "assistant"]
        assert "parent_tool_use_id" in str(kept.reason)
        assert of(events, AssistantMessageEvent) == []


def test_claude_optional_fields_of_another_type_are_dropped() -> None:
    init = {**_INIT, "model": 5, "cwd": ["x"], "session_id": True}
    result = {
        "type": "result",
        "subtype": "success",
        "uuid": 7,
        "duration_ms": True,
        "stop_reason": 1.5,
        "is_error": False,
    }
    retry = {"type": "system", "subtype": "api_retry", "uuid": [], "error_status": True}
    tool = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
    answer = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "2"}
    user = {"type": "user", "uuid": {"a": 1}, "message": {"content": [answer]}}
    assistant = _assistant(tool, uuid=3)
    assistant["message"].update(model=[1], stop_reason={"a": 1})
    for events in _claude(init, retry, assistant, user, result):
        [start] = of(events, SessionStartEvent)
        assert (start.model, start.cwd, start.native_session_id) == (None, None, None)
        assert of(events, RequestHeaderEvent)[0].model is None
        assert of(events, ErrorEvent)[0].http_status is None
        [message] = of(events, AssistantMessageEvent)
        assert message.source.model is None and message.stop_reason is None
        assert of(events, ToolResultEvent)[0].source.native_id is None
        [end] = of(events, TurnEndEvent)
        assert (end.duration_ms, end.stop_reason, end.source.native_id) == (None, None, None)


def test_claude_block_of_another_shape_keeps_its_line_not_the_message() -> None:
    """Checked when the line comes, not when the merged message is emitted (a failure
    there lost the message, and the line that happened to flush it)."""
    good = _assistant({"type": "text", "text": "hi"})
    bad = _assistant({"type": "text", "text": 5})
    done = {"type": "result", "subtype": "success", "is_error": False}
    for events in _claude(good, bad, done):
        [message] = of(events, AssistantMessageEvent)
        assert message.content == [TextPart(text="hi")]
        [kept] = of(events, NativeUnknownEvent)
        assert kept.payload == bad


def test_claude_sdk_object_of_another_shape_is_kept() -> None:
    sdk = pytest.importorskip("claude_agent_sdk")
    for content in ([object()], [{"type": "text", "text": 5}], True):
        message = sdk.AssistantMessage(content=content, model="claude-x")  # type: ignore[arg-type]
        events = run(ClaudeCodeAdapter(), message)
        assert len(of(events, NativeUnknownEvent)) == 1
        assert of(events, AssistantMessageEvent) == []


def test_claude_transcript_cwd_of_another_type_is_dropped() -> None:
    line = {"type": "user", "sessionId": "s1", "cwd": 5, "uuid": ["u"]}
    line["message"] = {"role": "user", "content": "hi"}
    events = run(ClaudeTranscriptAdapter(), lines(line))
    assert of(events, SessionStartEvent)[0].cwd is None
    assert of(events, UserMessageEvent)[0].source.native_id is None


# ---------------------------------------------------------------- request bodies


def _parse(runtime: str, body: dict[str, Any]) -> list[Event]:
    return round_trips(import_events(runtime, json.dumps(body).encode()))


_TOOLS = {
    "anthropic-request": lambda **t: {"name": "f", "input_schema": {}, **t},
    "openai-chat-request": lambda **t: {"type": "function", "function": {"name": "f", **t}},
    "openai-responses-request": lambda **t: {"type": "function", "name": "f", **t},
}
_SCHEMA_KEY = {
    "anthropic-request": "input_schema",
    "openai-chat-request": "parameters",
    "openai-responses-request": "parameters",
}


def _history(runtime: str, text: Any) -> dict[str, Any]:
    if runtime == "openai-responses-request":
        return {"input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}


@pytest.mark.parametrize("runtime", sorted(REQUEST_RUNTIMES))
def test_request_optional_fields_of_another_type_are_dropped(runtime: str) -> None:
    tool = _TOOLS[runtime](description=5, **{_SCHEMA_KEY[runtime]: True})
    events = _parse(runtime, {"model": ["m"], "tools": [tool], **_history(runtime, "hi")})
    [header] = of(events, RequestHeaderEvent)
    assert header.model is None
    assert (header.tools[0].name, header.tools[0].description) == ("f", None)
    assert header.tools[0].input_schema is None


@pytest.mark.parametrize("runtime", sorted(REQUEST_RUNTIMES))
def test_request_required_fields_of_another_type_name_where(runtime: str) -> None:
    with pytest.raises(DecodeError) as info:
        _parse(runtime, {"model": "m", **_history(runtime, ["x"])})
    assert info.value.path in ("$.messages[0]", "$.input[0]")
    tool = _TOOLS[runtime]()
    bad = {**tool, "function": {"name": 5}} if "function" in tool else {**tool, "name": 5}
    with pytest.raises(DecodeError) as info:
        _parse(runtime, {"model": "m", "tools": [tool, bad], **_history(runtime, "hi")})
    assert info.value.path == "$.tools[1]"


@pytest.mark.parametrize("arguments", [[], {}, 0, False, [1]])
def test_request_tool_arguments_of_another_type_name_where(arguments: Any) -> None:
    """``[]``, ``{}``, ``0`` used to become ``arguments_raw`` (a string field)."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [call]}]
    with pytest.raises(DecodeError) as info:
        _parse("openai-chat-request", {"model": "m", "messages": messages})
    assert info.value.path == "$.messages[1]"
    item = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": arguments}
    with pytest.raises(DecodeError) as info:
        _parse("openai-responses-request", {"model": "m", "input": [item]})
    assert info.value.path == "$.input[0]"


def test_request_anthropic_blocks_of_another_type_are_dropped_or_named() -> None:
    system = [{"type": "text", "text": "s", "cache_control": "x"}]
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "cache_control": 5}
    image = {"type": "image", "source": {"type": "base64", "data": 5, "media_type": []}}
    body = {
        "model": "m",
        "system": system,
        "messages": [{"role": "user", "content": [result, image]}],
    }
    events = _parse("anthropic-request", body)
    header = of(events, RequestHeaderEvent)[0]
    assert header.system_parts is not None and header.system_parts[0].cache_control is None
    assert of(events, ToolResultEvent)[0].cache_control is None
    with pytest.raises(DecodeError) as info:
        _parse("anthropic-request", {"model": "m", "system": {"a": 1}, "messages": []})
    assert info.value.path == "$.system"
    result["tool_use_id"] = ["t1"]
    with pytest.raises(DecodeError) as info:
        _parse("anthropic-request", body)
    assert info.value.path == "$.messages[0]"


# ---------------------------------------------------------------- property: mutated fixtures


def _mutate_some(values: list[Any], rng: random.Random) -> list[Any]:
    """A few of ``values`` (decoded frames or lines) changed 1-3 times each."""
    out = []
    for value in values:
        if isinstance(value, dict) and rng.random() < 0.3:
            for _ in range(rng.randint(1, 3)):
                value = mutate(value, rng)
        out.append(value)
    return out


def _sse_frames(body: str) -> list[tuple[str | None, Any]]:
    """(event name, decoded data, or the data text when it is not JSON) per frame."""
    frames: list[tuple[str | None, Any]] = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            text = "\n".join(data)
            try:
                frames.append((name, json.loads(text)))
            except ValueError:
                frames.append((name, text))
    return frames


def _sse_bytes(names: list[str | None], datas: list[Any]) -> bytes:
    out = []
    for name, data in zip(names, datas, strict=True):
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


_Input = tuple[str, str, Any]
"""(kind, runtime, what): ``sse`` (frames), ``lines`` (decoded JSON lines), ``body``
(a whole JSON response) or ``request`` (a request body)."""


def _inputs() -> dict[str, list[_Input]]:
    found: dict[str, list[_Input]] = {name: [] for name in _FAMILIES}
    recorded = FIXTURES / "recorded"
    for folder, runtime in (
        ("anthropic-messages", "anthropic"),
        ("openai-chat", "openai-chat"),
        ("openai-responses", "openai-responses"),
    ):
        for path in sorted((recorded / folder).glob("*.json")):
            for interaction in json.loads(path.read_text())["interactions"]:
                body, form = interaction["response_body"], interaction.get("response_body_format")
                if form == "sse":
                    found[runtime].append(("sse", runtime, _sse_frames(body)))
                elif form == "sse-data-jsonl":
                    decoded = [json.loads(line) for line in body.splitlines() if line.strip()]
                    found[runtime].append(("lines", runtime, decoded))
                elif isinstance(body, dict):
                    found[runtime].append(("body", runtime, body))
                if interaction.get("request_body") is not None:
                    request = ("request", f"{runtime}-request", interaction["request_body"])
                    found["requests"].append(request)
    captured = FIXTURES / "captured"
    for path in sorted(captured.glob("claude/*/*/requests/*.response.sse")):
        found["anthropic"].append(("sse", "anthropic", _sse_frames(path.read_text())))
    for pattern, runtime in (
        ("claude/*/*/requests/*_v1_messages.json", "anthropic-request"),
        ("codex/*/*/requests/*_v1_responses.json", "openai-responses-request"),
    ):
        for path in sorted(captured.glob(pattern)):
            found["requests"].append(("request", runtime, json.loads(path.read_text())["body"]))
    for pattern, runtime in (
        ("captured/claude/*/*/stdout.jsonl", "claude-code"),
        ("captured/claude/*/*/session_transcript.jsonl", "claude-code-transcript"),
        ("captured/claude_chains/*/session_transcript.jsonl", "claude-code-transcript"),
        ("recorded/claude-code/*.jsonl", "claude-code-transcript"),
    ):
        for path in sorted(FIXTURES.glob(pattern)):
            decoded = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            found["claude"].append(("lines", runtime, decoded))
    return found


_FAMILIES = ("anthropic", "openai-chat", "openai-responses", "claude", "requests")


def _feeds(kind: str, runtime: str, mutated: Any, names: list[str | None]) -> Iterator[list[Event]]:
    """The events of one mutated input, fed every way the adapter takes it."""
    if kind == "request":
        try:
            yield import_events(runtime, json.dumps(mutated).encode())
        except UniversalEventError:  # a body of the wrong shape: a DecodeError naming where
            pass
        return
    if kind == "sse":
        data = _sse_bytes(names, mutated)
        dicts = [d for d in mutated if isinstance(d, dict)]
    elif kind == "lines":
        data = b"".join(json.dumps(line).encode() + b"\n" for line in mutated)
        dicts = [d for d in mutated if isinstance(d, dict)]
    else:
        data, dicts = json.dumps(mutated).encode(), [mutated]
    for feed in (data, dicts):
        adapter = create_adapter(runtime)
        events: list[Event] = []
        try:  # a UniversalEventError is on purpose (Chat: a body that is no object)
            for native in [feed] if isinstance(feed, bytes) else feed:
                events += adapter.feed(native)
            events += adapter.close()
        except UniversalEventError:
            pass
        yield events
    try:
        yield import_events(runtime, data)  # line by line, numbered
    except UniversalEventError:
        pass


_INPUTS: dict[str, list[_Input]] | None = None


def _family_inputs(family: str) -> list[_Input]:
    global _INPUTS
    if _INPUTS is None:
        _INPUTS = _inputs()
    return _INPUTS[family]


_TRIALS: dict[str, int] = {
    "anthropic": 50,
    "openai-chat": 40,
    "openai-responses": 40,
    "claude": 25,
    "requests": 120,
}


@pytest.mark.parametrize("seed", [3, 7])
@pytest.mark.parametrize("family", _FAMILIES)
def test_mutated_fixtures_give_events_that_round_trip(family: str, seed: int) -> None:
    """A bounded, seeded fuzz: each trial mutates a few frames / lines / a body of a
    fixture and feeds it as bytes, as dicts and through an import; only a
    UniversalEventError may leave the adapter, and every event decodes back."""
    inputs = _family_inputs(family)
    assert inputs, family
    rng = random.Random(f"{family}-{seed}")
    check: Callable[[list[Event]], list[Event]] = round_trips
    with capped_address_space(1 << 30):
        for _ in range(_TRIALS[family]):
            kind, runtime, native = rng.choice(inputs)
            names: list[str | None] = []
            if kind == "sse":
                names = [name for name, _ in native]
                mutated: Any = _mutate_some([data for _, data in native], rng)
            elif kind == "lines":
                mutated = _mutate_some(native, rng)
            else:
                mutated = native
                for _ in range(rng.randint(1, 3)):
                    mutated = mutate(mutated, rng)
            for events in _feeds(kind, runtime, mutated, names):
                check(events)
                SessionLog().extend(events)  # a log takes them: surface intents apply
