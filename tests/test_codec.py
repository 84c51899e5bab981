"""Codec: round trips, unknown event types, and bad input with typed, located errors."""

from __future__ import annotations

import tracemalloc

import msgspec.inspect as mi
import pytest
from hypothesis import given, settings

import universal_event as ue
from tests.strategies import events
from universal_event import codec
from universal_event.errors import DecodeError
from universal_event.events import EVENT_TYPES, UserMessageEvent


def _minimal(info: mi.Type) -> object:
    """The simplest valid value of a type (first choice of unions and literals)."""
    match info:
        case mi.StrType():
            return "x"
        case mi.IntType():
            return 1
        case mi.FloatType():
            return 1.0
        case mi.BoolType():
            return True
        case mi.ListType():
            return []
        case mi.DictType():
            return {}
        case mi.LiteralType():
            return info.values[0]
        case mi.UnionType():
            return _minimal(info.types[0])
        case mi.StructType():
            return _sample(info.cls)
        case _:
            return None


def _sample(struct_type: type) -> object:
    """A minimal valid instance: every required field filled with its simplest value."""
    info = mi.type_info(struct_type)
    assert isinstance(info, mi.StructType)
    return struct_type(**{f.name: _minimal(f.type) for f in info.fields if f.required})


@pytest.mark.parametrize("tag", sorted(EVENT_TYPES))
def test_every_event_type_round_trips_json_and_msgpack(tag: str) -> None:
    event = _sample(EVENT_TYPES[tag])
    assert isinstance(event, ue.EventBase)
    assert ue.decode(ue.encode(event)) == event
    assert ue.decode_msgpack(ue.encode_msgpack(event)) == event
    assert ue.to_builtins(event)["type"] == tag


@settings(max_examples=200, deadline=None)
@given(events())
def test_property_round_trip(event: ue.EventBase) -> None:
    assert ue.decode(ue.encode(event)) == event
    assert ue.decode_msgpack(ue.encode_msgpack(event)) == event
    assert ue.decode_lines(ue.encode_lines([event, event])) == [event, event]


def test_json_lines_skip_blank_lines_and_name_the_bad_line() -> None:
    good = ue.encode(ue.TurnStartEvent(seq=0))
    assert len(ue.decode_lines(b"\n" + good + b"\n\n  \n" + good + b"\n")) == 2
    with pytest.raises(ue.DecodeError) as info:
        ue.decode_lines(good + b"\n" + b'{"type":"turn/end","status":"bogus"}\n')
    assert info.value.line == 2
    assert info.value.path == "$.status"


def test_unknown_event_type_is_preserved_with_its_envelope() -> None:
    raw = b'{"type":"future/thing","seq":7,"id":"e7","session_id":"s","ts":1.5,"x":[1,2]}'
    event = ue.decode(raw)
    assert isinstance(event, ue.NativeUnknownEvent)
    assert (event.seq, event.id, event.session_id, event.ts) == (7, "e7", "s", 1.5)
    assert event.runtime == "universal-event"
    assert event.native_type == "future/thing"
    assert event.payload == {
        "type": "future/thing",
        "seq": 7,
        "id": "e7",
        "session_id": "s",
        "ts": 1.5,
        "x": [1, 2],
    }


def test_a_log_with_an_unknown_type_keeps_seq_contiguous() -> None:
    lines = b"\n".join(
        [
            ue.encode(ue.TurnStartEvent(seq=0)),
            b'{"type":"agent/telepathy","seq":1,"level":9}',
            ue.encode(ue.TurnEndEvent(seq=2)),
        ]
    )
    decoded = ue.decode_lines(lines)
    assert [e.seq for e in decoded] == [0, 1, 2]
    assert isinstance(decoded[1], ue.NativeUnknownEvent)


def test_unknown_event_type_raises_when_asked() -> None:
    with pytest.raises(ue.DecodeError) as info:
        ue.decode(b'{"type":"future/thing"}', unknown="raise")
    assert info.value.path == "$.type"


def test_unknown_fields_of_known_types_are_ignored() -> None:
    event = ue.decode(b'{"type":"turn/start","seq":3,"added_in_v9":{"a":1}}')
    assert event == ue.TurnStartEvent(seq=3)


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [
        (b'{"type":"tool/result"}', "$", "missing required field `call_id`"),
        (
            b'{"type":"user/message","content":[{"type":"text","text":1}]}',
            "$.content[0].text",
            "Expected `str`, got `int`",
        ),
        (
            b'{"type":"user/message","content":[{"type":"thinking"}]}',
            "$.content[0].type",
            "Invalid value 'thinking'",
        ),
        (b'{"seq":1}', "$", "missing required field `type`"),
        (b"[1,2]", "$", "Expected `object`"),
        (
            b'{"type":"usage","usage":{"input_tokens":"9"}}',
            "$.usage.input_tokens",
            "Expected `int`",
        ),
    ],
)
def test_bad_input_names_path_and_problem(data: bytes, path: str, fragment: str) -> None:
    with pytest.raises(ue.DecodeError) as info:
        ue.decode(data)
    assert info.value.path == path
    assert fragment in info.value.problem
    assert isinstance(info.value, ue.UniversalEventError)


def test_non_utf8_bytes_are_a_decode_error() -> None:
    with pytest.raises(ue.DecodeError) as info:
        ue.decode(b'{"type":"user/message","content":[{"type":"text","text":"\xff\xfe"}]}')
    assert "malformed" in info.value.problem or "utf" in info.value.problem.lower()


def test_truncated_json_is_a_decode_error() -> None:
    with pytest.raises(ue.DecodeError):
        ue.decode(b'{"type":"turn/start","seq":')


def test_deeply_nested_payload_is_a_decode_error_not_a_crash() -> None:
    depth = 100_000
    data = b'{"type":"native/unknown","runtime":"x","payload":' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(ue.DecodeError) as info:
        ue.decode(data)
    assert "depth" in info.value.problem.lower() or "recursion" in info.value.problem.lower()


def test_moderately_nested_payload_round_trips() -> None:
    payload: object = "leaf"
    for _ in range(200):
        payload = {"k": [payload]}
    event = ue.NativeUnknownEvent(runtime="x", payload=payload)
    assert ue.decode(ue.encode(event)) == event


def test_a_20_mb_string_field_round_trips_without_needless_copies() -> None:
    big = "x" * (20 * 1024 * 1024)
    event = ue.ToolResultEvent(call_id="c1", content=[ue.TextPart(text=big)])
    data = ue.encode(event)
    tracemalloc.start()
    decoded = ue.decode(memoryview(data))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert decoded == event
    # one copy for the decoded str itself; no copy of the input buffer on top
    assert peak < 1.5 * len(big), peak


def test_malformed_json_with_a_readable_unknown_type_is_a_decode_error() -> None:
    with pytest.raises(ue.DecodeError):
        ue.decode(b'{"type":"assistant/c{"type":"x"}')


def test_text_input_and_text_that_is_not_utf8() -> None:
    """``decode_lines`` takes a ``str`` as ``decode`` does; a lone surrogate (no UTF-8
    for it) is a DecodeError naming the character, not a UnicodeEncodeError."""
    line = '{"type":"user/message","content":[{"type":"text","text":"hé"}]}\n'
    (event,) = codec.decode_lines(line * 1)
    assert isinstance(event, UserMessageEvent)
    for bad in ("\ud800", '{"type":"user/message","id":"\ud800"}'):
        with pytest.raises(DecodeError, match="not encodable as UTF-8 at character"):
            codec.decode(bad)
    with pytest.raises(DecodeError, match="character 1"):
        codec.decode_lines("x\ud800")


def test_a_known_event_holding_a_part_type_from_a_newer_version_is_kept() -> None:
    """Forward compatibility reaches inside events: a part type this version does not
    know keeps the event (as native/unknown, its envelope and whole payload intact);
    a tag of the wrong kind is still an error."""
    data = (
        b'{"type":"user/message","seq":3,"id":"e3","session_id":"s","content":'
        b'[{"type":"text","text":"a"},{"type":"zz_future_part","x":1}]}'
    )
    kept = codec.decode(data)
    assert isinstance(kept, ue.NativeUnknownEvent)
    assert (kept.seq, kept.id, kept.session_id, kept.native_type) == (3, "e3", "s", "user/message")
    assert kept.payload["content"][1] == {"type": "zz_future_part", "x": 1}
    assert "$.content[1].type 'zz_future_part' unknown to this version" in kept.reason
    with pytest.raises(DecodeError, match=r"content\[0\]\.type"):
        codec.decode(b'{"type":"user/message","content":[{"type":5}]}')
    with pytest.raises(DecodeError):
        codec.decode(data, unknown="raise")


def test_json_lines_skip_whitespace_only_lines_of_any_length() -> None:
    """Before, only blank lines shorter than 64 bytes were skipped; a longer one was a
    DecodeError. A line that starts with whitespace and holds an event still decodes."""
    good = ue.encode(ue.TurnStartEvent(seq=0))
    for blank in (b" " * 64, b" \t" * 5000 + b"\r", b"\x0c" * 100):
        assert (
            ue.decode_lines(good + b"\n" + blank + b"\n" + good) == [ue.TurnStartEvent(seq=0)] * 2
        )
    assert ue.decode_lines(b" " * 100 + good + b"\n") == [ue.TurnStartEvent(seq=0)]
    with pytest.raises(ue.DecodeError) as info:
        ue.decode_lines(good + b"\n" + b" " * 100 + b"x\n")
    assert info.value.line == 2


def test_an_integer_written_as_a_float_is_read_as_the_schema_takes_it() -> None:
    """JSON Schema's ``integer`` (the exported schema) takes ``1.0`` and ``1e2``, as a
    producer in another language may write them; a fraction is still refused."""
    event = codec.decode(b'{"type":"usage","seq":3.0,"usage":{"input_tokens":1E2}}')
    assert isinstance(event, ue.UsageEvent)
    assert (event.seq, event.usage.input_tokens) == (3, 100)
    (line,) = codec.decode_lines(b'{"type":"turn/start","seq":0e0}\n')
    assert line.seq == 0 and isinstance(line.seq, int)
    with pytest.raises(DecodeError) as refused:
        codec.decode(b'{"type":"turn/start","seq":1.5}')
    assert refused.value.path == "$.seq" and "float" in refused.value.problem
