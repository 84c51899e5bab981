"""What every adapter shares: native timestamps read for imported sessions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from adapters._base import native_time


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
