"""The shared SSE framer: frames equal a plain WHATWG reading of the whole stream,
wherever the input is cut and whatever the line ends (``\\n``, ``\\r\\n``, ``\\r``)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from universal_event._sse_frames import SSEDecoder, SSEFrame

Frame = tuple[str | None, bytes, str | None]


def reference(stream: bytes) -> list[Frame]:
    """The WHATWG event-stream algorithm over the whole input, line by line (no speed
    tricks); a last frame without its blank line is dispatched too, as ``flush`` does."""
    frames: list[Frame] = []
    event: str | None = None
    data: list[bytes] = []
    last_id: str | None = None
    for line in re.split(rb"\r\n|\r|\n", stream) + [b""]:
        if not line:
            if data or event is not None:
                frames.append((event, b"\n".join(data), last_id))
            event, data = None, []
            continue
        if line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event = value.decode("utf-8", "replace")
        elif name == b"id":
            last_id = value.decode("utf-8", "replace")
    return frames


def decode(stream: bytes, cuts: list[int]) -> list[Frame]:
    decoder = SSEDecoder()
    frames: list[SSEFrame] = []
    start = 0
    for end in [*sorted(cuts), len(stream)]:
        frames += decoder.feed(stream[start:end])
        start = end
    frames += decoder.flush()
    return [(frame.event, frame.data, frame.id) for frame in frames]


LINES = [
    b"data: {}",
    b'data: {"a": "b"}',
    b"data:x",
    b"data:  two spaces",
    b"data",
    b"event: message_start",
    b"event:ping",
    b"event",
    b"id: 7",
    b"id:",
    b": keep-alive",
    b"retry: 3000",
    b"other: field",
    b"",
    b"",
]

streams = st.lists(
    st.tuples(st.sampled_from(LINES), st.sampled_from([b"\n", b"\n", b"\r\n", b"\r"])),
    max_size=25,
).map(lambda lines: b"".join(line + end for line, end in lines))


@settings(max_examples=300, deadline=None)
@given(streams, st.data())
def test_any_stream_cut_anywhere_reads_as_the_whole(stream: bytes, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    assert decode(stream, cuts) == reference(stream)


def test_provider_shapes_at_every_cut() -> None:
    stream = (
        b'event: message_start\ndata: {"type":"message_start"}\n\n'
        b": comment\n\n"
        b'data: {"choices":[]}\n\n'
        b"id: 42\nevent: response.created\ndata: {}\n\n"
        b"data: line one\ndata: line two\n\n"
        b"data: [DONE]\n\n"
    )
    expected = [
        ("message_start", b'{"type":"message_start"}', None),
        (None, b'{"choices":[]}', None),
        ("response.created", b"{}", "42"),
        (None, b"line one\nline two", "42"),  # the id carries over
        (None, b"[DONE]", "42"),
    ]
    assert reference(stream) == expected
    for variant in (stream, stream.replace(b"\n", b"\r\n"), stream.replace(b"\n", b"\r")):
        for cut in range(len(variant) + 1):
            assert decode(variant, [cut]) == expected, (variant[:cut], variant[cut:])


def test_a_carriage_return_split_from_its_line_feed_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n\r") == []  # "\r\n" then "\r": the blank line, still unsure
    frames = decoder.feed(b"\n")  # "\r\n": one blank line, not two
    assert [(f.event, f.data) for f in frames] == [(None, b"a")]
    assert decoder.flush() == []


def test_a_lone_carriage_return_ends_a_line_once_the_next_byte_comes() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\r") == []
    assert [f.data for f in decoder.feed(b"data: b")] == [b"a"]
    assert [f.data for f in decoder.flush()] == [b"b"]  # the cut stream's last frame


def test_a_stream_cut_after_a_carriage_return_ends_its_last_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: e\rdata: x\r") == []
    assert [(f.event, f.data) for f in decoder.flush()] == [("e", b"x")]
