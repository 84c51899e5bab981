"""What every adapter shares: native timestamps read for imported sessions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from adapters._base import native_time
from adapters.openai_chat import OpenAIChatAdapter
from universal_event.events import Source, WarningEvent


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
