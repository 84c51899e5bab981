"""JSONL reads skip to a range's first line from the nearest line the store knows: the
last position read or appended, or a mark noted while an earlier read skipped (one per
block). Blocks are made small here so that a few hundred events cross many of them."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from universal_event.events import Event, Source, UserMessageEvent
from universal_event.parts import TextPart
from universal_event.stores import jsonl
from universal_event.stores.jsonl import JsonlStore

BLOCK = 512


def _events(session_id: str, count: int, seed: int = 7) -> list[Event]:
    """Lines of many lengths, some longer than a block."""
    rng = random.Random(seed)
    return [
        UserMessageEvent(
            seq=seq,
            id=f"{session_id}-{seq}",
            session_id=session_id,
            ts=1.0 + seq,
            source=Source(runtime="codex"),
            content=[TextPart(text="x" * rng.choice([1, 40, 300, 3 * BLOCK]))],
        )
        for seq in range(count)
    ]


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Blocks of :data:`BLOCK` bytes; the list collects each skip's (from seq, to seq)."""
    skips: list[tuple[int, int]] = []
    skip = jsonl._skip_lines

    def recorded(fd: int, seq: int, start: int, offset: int, note: Any) -> int | None:
        skips.append((seq, start))
        return skip(fd, seq, start, offset, note)

    monkeypatch.setattr(jsonl, "_SKIP_BLOCK", BLOCK)
    monkeypatch.setattr(jsonl, "_skip_lines", recorded)
    return skips


def _ids(events: Any) -> list[str]:
    return [event.id for event in events]


def test_any_range_in_any_order_reads_what_was_written(
    tmp_path: Path, small_blocks: list[tuple[int, int]]
) -> None:
    written = _events("s", 300)
    writer = JsonlStore(tmp_path)
    writer.append("s", written, expected_seq=0)
    rng = random.Random(11)
    ranges = [(start, start + rng.randint(0, 40)) for start in rng.choices(range(320), k=200)]
    ranges += [(299, None), (0, 5), (150, 151), (300, None), (298, 300)]
    for store in (writer, JsonlStore(tmp_path)):  # what it appended; a fresh one
        store.tail("s", 290, timeout=0)  # the end read first: the known position is there
        for start, end in ranges:
            got = list(store.read("s", start, end))
            assert _ids(got) == _ids(written[start:end]), (start, end)
            assert [msgspec.structs.asdict(e) for e in got] == [
                msgspec.structs.asdict(e) for e in written[start:end]
            ]
    assert small_blocks  # the ranges were skipped to, not read from the start


def test_an_earlier_range_after_the_end_skips_from_a_mark_not_from_the_start(
    tmp_path: Path, small_blocks: list[tuple[int, int]]
) -> None:
    """Paging through a session after its end was read: each page skips from the
    nearest mark (it skipped from line 0: quadratic over a whole session)."""
    JsonlStore(tmp_path).append("s", _events("s", 400), expected_seq=0)
    store = JsonlStore(tmp_path)
    assert len(list(store.read("s", 399))) == 1  # skips the whole file once, noting marks
    assert small_blocks == [(0, 399)]
    for start in range(0, 390, 10):
        assert _ids(store.read("s", start, start + 10)) == [
            f"s-{n}" for n in range(start, start + 10)
        ]
    later_skips = small_blocks[1:]
    assert later_skips and all(start - seq < 40 for seq, start in later_skips), later_skips


def test_marks_of_a_session_deleted_and_written_again_are_not_used(
    tmp_path: Path, small_blocks: list[tuple[int, int]]
) -> None:
    """Another process deleted the session and wrote it again, its file taking the same
    inode (written in place here): the header line differs, the marks go unused."""
    store = JsonlStore(tmp_path / "a")
    store.append("s", _events("s", 200), expected_seq=0)
    assert _ids(store.read("s", 190, 192)) == ["s-190", "s-191"]
    elsewhere = JsonlStore(tmp_path / "b")
    again = _events("s", 200, seed=99)
    elsewhere.append(
        "s", [msgspec.structs.replace(e, id=f"new-{e.seq}") for e in again], expected_seq=0
    )
    (path,) = (tmp_path / "a").glob("*.jsonl")
    inode = path.stat().st_ino
    path.write_bytes(next((tmp_path / "b").glob("*.jsonl")).read_bytes())
    assert path.stat().st_ino == inode
    assert _ids(store.read("s", 120, 123)) == ["new-120", "new-121", "new-122"]
    assert _ids(store.read("s", 195, 197)) == ["new-195", "new-196"]


def test_a_range_past_a_torn_last_line_is_not_there_yet(
    tmp_path: Path, small_blocks: list[tuple[int, int]]
) -> None:
    store = JsonlStore(tmp_path)
    store.append("s", _events("s", 50), expected_seq=0)
    path = next(tmp_path.glob("*.jsonl"))
    with path.open("ab") as handle:
        handle.write(b'{"type":"user/message","seq":50,"id":"torn')  # a writer cut mid-line
    fresh = JsonlStore(tmp_path)
    assert list(fresh.read("s", 50)) == []
    assert list(fresh.read("s", 51)) == []
    assert _ids(fresh.read("s", 49)) == ["s-49"]
