"""SSE encoding and decoding: frames, chunk cuts anywhere, Last-Event-ID semantics."""

from __future__ import annotations

import random

import pytest

from universal_event.codec import encode
from universal_event.errors import DecodeError
from universal_event.events import AssistantChunkEvent, ErrorEvent, UserMessageEvent
from universal_event.parts import TextPart
from universal_event.sse import (
    KEEPALIVE,
    SSEEventDecoder,
    encode_event,
    encode_events,
    encode_retry,
    resume_after,
)


def _logged(count: int) -> list[AssistantChunkEvent | UserMessageEvent | ErrorEvent]:
    events: list[AssistantChunkEvent | UserMessageEvent | ErrorEvent] = []
    for seq in range(count):
        if seq % 3 == 0:
            # text with newlines, CR and non-ASCII: must survive one data line
            text = f"line one\nline two\r\n — é {seq}"
            events.append(UserMessageEvent(seq=seq, id=f"u{seq}", content=[TextPart(text=text)]))
        elif seq % 3 == 1:
            events.append(AssistantChunkEvent(seq=seq, id=f"c{seq}", delta=f"δ{seq}\n"))
        else:
            events.append(ErrorEvent(seq=seq, id=f"e{seq}", message="boom:\n\nagain"))
    return events


def test_frame_layout_is_id_seq_event_type_data_json() -> None:
    event = AssistantChunkEvent(seq=42, id="x", session_id="s", delta="hi\nthere")
    frame = encode_event(event)
    assert frame == b"id: 42\nevent: assistant/chunk\ndata: " + encode(event) + b"\n\n"
    assert frame.count(b"\n") == 4  # JSON escapes the newline: one data line


def test_unlogged_event_is_refused() -> None:
    with pytest.raises(ValueError, match="no seq"):
        encode_event(UserMessageEvent(id="x"))


def test_round_trip_with_cuts_at_every_byte_position() -> None:
    events = _logged(9)
    wire = encode_retry(1000) + KEEPALIVE + encode_events(events[:5]) + KEEPALIVE
    wire += encode_events(events[5:]).replace(b"\n", b"\r\n")  # CRLF framing too
    for cut in range(len(wire) + 1):
        decoder = SSEEventDecoder()
        decoded = decoder.feed_events(wire[:cut]) + decoder.feed_events(wire[cut:])
        assert decoded == events, cut
        assert decoder.last_event_id == "8"


def test_random_chunking_and_lone_cr_line_endings() -> None:
    events = _logged(30)
    wire = encode_events(events).replace(b"\n", b"\r")
    rng = random.Random(7)
    for _ in range(50):
        decoder = SSEEventDecoder()
        decoded = []
        position = 0
        while position < len(wire):
            step = rng.randint(1, 40)
            decoded += decoder.feed_events(wire[position : position + step])
            position += step
        # a trailing lone "\r" may be the first half of "\r\n": the last frame waits
        decoded += decoder.feed_events(b"\n")
        assert decoded == events


def test_frame_cut_before_its_blank_line_is_discarded_and_id_not_committed() -> None:
    events = _logged(3)
    wire = encode_events(events)
    cut = wire.rindex(b"\n\n")  # the last frame lacks its terminating blank line
    decoder = SSEEventDecoder()
    assert decoder.feed_events(wire[:cut]) == events[:2]
    assert decoder.last_event_id == "1"
    partial_id = SSEEventDecoder()
    assert partial_id.feed(b"id: 5\nevent: x\n") == []
    assert partial_id.last_event_id == ""


def test_messages_carry_event_name_and_id() -> None:
    decoder = SSEEventDecoder()
    messages = decoder.feed(b"id: 3\nevent: usage\ndata: a\ndata:b\n\ndata: c\n\n")
    assert [(m.event, m.data, m.id) for m in messages] == [
        ("usage", "a\nb", "3"),
        ("message", "c", "3"),
    ]


@pytest.mark.parametrize(
    ("header", "after", "expected"),
    [
        (None, None, -1),
        ("", None, -1),
        ("7", None, 7),
        (None, "3", 3),
        ("7", "3", 7),
        (" 9 ", "", 9),
        ("-1", "5", -1),
    ],
)
def test_resume_position(header: str | None, after: str | None, expected: int) -> None:
    assert resume_after(header, after) == expected


@pytest.mark.parametrize(
    ("header", "after"),
    [
        ("abc", None),
        (None, "-2"),
        ("1.5", None),
        ("2_0", None),  # int() would read 20
        ("+2", None),
        (None, "99999999999999999999999"),  # past the stores' 64-bit seqs
        (str(2**62 + 1), None),
    ],
)
def test_bad_resume_position_names_the_field(header: str | None, after: str | None) -> None:
    with pytest.raises(DecodeError, match="Last-Event-ID" if header else "after"):
        resume_after(header, after)
