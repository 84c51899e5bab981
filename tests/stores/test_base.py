"""The shared store helpers: where a read that stopped early says rows are missing."""

from __future__ import annotations

import pytest

from universal_event.errors import CorruptEventError
from universal_event.stores._base import NO_END, check_read_end


def test_a_session_that_ends_where_the_read_did() -> None:
    check_read_end("s", 10, NO_END, 10, 9)
    check_read_end("s", 0, NO_END, None, None)  # deleted meanwhile: nothing to read


def test_rows_appended_after_the_last_page_are_not_missing() -> None:
    """The read stopped at 10; since then seqs 10-14 were appended: the session row and
    the highest stored seq agree, so nothing is missing."""
    check_read_end("s", 10, NO_END, 15, 14)


@pytest.mark.parametrize(
    ("reached", "bound", "event_count", "top_seq", "missing"),
    [
        (10, NO_END, 15, 9, 10),  # the last rows are gone
        (0, NO_END, 6, None, 0),  # every row is gone
        (3, NO_END, 6, 4, 5),  # the read stopped at a gap; the rows after it went too
        (10, 12, 15, 9, 10),  # the hole starts inside the read's bound
    ],
)
def test_rows_missing_from_the_end(
    reached: int, bound: int, event_count: int, top_seq: int | None, missing: int
) -> None:
    with pytest.raises(CorruptEventError) as info:
        check_read_end("s", reached, bound, event_count, top_seq)
    assert info.value.session_id == "s"
    assert info.value.seq == missing
    assert f"the session has {event_count} events" in str(info.value)


def test_a_hole_beyond_the_reads_bound_is_not_its_business() -> None:
    check_read_end("s", 4, 4, 6, 3)
