"""What every adapter shares: native timestamps read for imported sessions."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from adapters._base import native_time
from adapters.claude_sdk import ClaudeCodeAdapter
from adapters.openai_chat import OpenAIChatAdapter
from universal_event.events import AssistantMessageEvent, Event, Source, WarningEvent
from universal_event.parts import TextPart


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29T06:39:11.817Z",
        "2026-11-29T06:39:11.817+00:00",
        "2026-11-29T07:39:11.817+01:00",
        "2026-11-29T06:39:11.817",  # no zone: UTC
    ],
)
def test_native_time_reads_iso_8601(text: str) -> None:
    expected = datetime(2026, 11, 29, 6, 39, 11, 817000, tzinfo=UTC).timestamp()
    assert native_time(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("value", [None, "", "yesterday", 1764398351.8, {"t": 1}])
def test_native_time_of_anything_else_is_none(value: object) -> None:
    assert native_time(value) is None


def test_make_keeps_an_envelope_field_given_outright() -> None:
    """``make`` fills id, ts and source, but one the caller passes is not overwritten."""
    adapter = OpenAIChatAdapter(session_id="s")
    made = adapter.make(WarningEvent, native_type="x", code="c", message="m")
    assert made.id and made.ts > 0 and made.source is not None
    assert made.source.native_type == "x" and made.session_id == "s"
    source = Source(runtime="elsewhere")
    given = adapter.make(WarningEvent, code="c", message="m", id="evt_1", ts=12.5, source=source)
    assert (given.id, given.ts, given.source) == ("evt_1", 12.5, source)


# ------------------------------------------------------------ JSON-lines input

_LONG_TEXT = "x" * (4 << 20)
_LONG_LINES = (
    msgspec.json.encode(
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "text", "text": _LONG_TEXT}],
            },
        }
    )
    + b'\n{"type":"result","subtype":"success","is_error":false}\n'
)


class _CountingBuffer(bytearray):
    """A line buffer that counts how often it is copied out whole (``bytes(buffer)``)."""

    copies = 0

    def __bytes__(self) -> bytes:
        self.copies += 1
        return bytes(memoryview(self))


def _feed(adapter: ClaudeCodeAdapter, data: bytes, chunk: int) -> list[Event]:
    events: list[Event] = []
    for offset in range(0, len(data), chunk):
        events += adapter.feed(data[offset : offset + chunk])
    return events + adapter.close()


def _without_envelope(events: list[Event]) -> list[Event]:
    """Events with the fields that differ between runs (fresh ids, times) blanked."""
    return [msgspec.structs.replace(event, id="", ts=0.0, turn_id=None) for event in events]


@pytest.mark.parametrize("chunk", [4096, 4093, 65536])
def test_a_long_line_fed_in_small_chunks_reads_as_fed_whole(chunk: int) -> None:
    whole = _feed(ClaudeCodeAdapter(session_id="s"), _LONG_LINES, len(_LONG_LINES))
    (message,) = [e for e in whole if isinstance(e, AssistantMessageEvent)]
    assert message.content == [TextPart(text=_LONG_TEXT)]
    pieces = _feed(ClaudeCodeAdapter(session_id="s"), _LONG_LINES, chunk)
    assert _without_envelope(pieces) == _without_envelope(whole)


def test_a_long_line_is_copied_out_of_the_buffer_once_not_per_chunk() -> None:
    """Feeding a 4 MB line in 1 KiB pieces copies the buffered line once, when its
    newline arrives; a copy per piece (4096 of them) made such lines quadratic."""
    adapter = ClaudeCodeAdapter(session_id="s")
    buffer = adapter._line_buffer = _CountingBuffer()
    line_end = _LONG_LINES.index(b"\n") + 1
    pieces = [_LONG_LINES[offset : offset + 1024] for offset in range(0, line_end, 1024)]
    assert len(pieces) > 4000
    for piece in pieces[:-1]:
        assert adapter.feed(piece) == []
    assert buffer.copies == 0
    events = adapter.feed(pieces[-1] + _LONG_LINES[line_end:])
    assert buffer.copies == 1
    assert [e for e in events if isinstance(e, AssistantMessageEvent)]
