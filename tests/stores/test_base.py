"""The shared store helpers: where a read that stopped early says rows are missing; the\nsignal that wakes this process's tails."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from universal_event.errors import CorruptEventError
from universal_event.stores._base import NO_END, AppendSignal, check_read_end
from universal_event.stores.jsonl import JsonlStore
from universal_event.stores.sqlite import SqliteStore
from universal_event.testing import sample_events


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


# ---------------------------------------------------------------------- AppendSignal


def test_append_signal_counts_its_waiters_and_wakes_them() -> None:
    signal = AppendSignal()
    signal.appended()  # nobody waits: nothing to do, and it does not block
    woke: list[bool] = []

    def tail() -> None:
        with signal:
            woke.append(signal.wait(30))

    waiter = threading.Thread(target=tail)
    waiter.start()
    deadline = time.monotonic() + 10
    while not signal.waiting and time.monotonic() < deadline:
        time.sleep(0.001)
    assert signal.waiting == 1
    signal.appended()
    waiter.join(10)
    assert woke == [True]  # notified, long before its 30 s timeout
    assert signal.waiting == 0


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
def test_a_waiting_tail_wakes_on_this_process_append(tmp_path: Path, backend: str) -> None:
    """The poll interval is a minute: only the append's signal can wake the tail."""
    store: JsonlStore | SqliteStore = (
        JsonlStore(tmp_path, poll_interval=60)
        if backend == "jsonl"
        else SqliteStore(tmp_path / "s.db", poll_interval=60)
    )
    store.append("s", sample_events("s", 0, 1), expected_seq=0)
    got: list[list[int]] = []
    tail = threading.Thread(
        target=lambda: got.append([e.seq for e in store.tail("s", 0, timeout=30)])
    )
    started = time.monotonic()
    tail.start()
    deadline = started + 10
    while not store._appended.waiting and time.monotonic() < deadline:
        time.sleep(0.001)
    store.append("s", sample_events("s", 1, 2), expected_seq=1)
    tail.join(30)
    assert got == [[1, 2]]
    assert time.monotonic() - started < 20
    store.close()
