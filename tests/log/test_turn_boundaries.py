"""Turn boundaries agree with repair: a ``turn/end`` without a turn id, or with one that
matches no open turn, closes the last open turn for both."""

from __future__ import annotations

import pytest

from universal_event import (
    Event,
    SessionLog,
    TextPart,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)
from universal_event.repair import find_open_work


def _turn(log: SessionLog, turn_id: str, *, end_as: str | None) -> None:
    log.append(TurnStartEvent(turn_id=turn_id))
    log.append(UserMessageEvent(turn_id=turn_id, content=[TextPart(text=turn_id)]))
    log.append(TurnEndEvent(turn_id=end_as))


def _closed_by_repair(events: list[Event]) -> list[int]:
    """The seqs of the ``turn/end`` events after which repair finds no turn open."""
    return [
        event.seq
        for index, event in enumerate(events)
        if isinstance(event, TurnEndEvent) and not find_open_work(events[: index + 1]).turns
    ]


@pytest.mark.parametrize("end_as", [None, "not-a-turn"])
def test_an_unnamed_or_unmatched_turn_end_is_a_boundary(end_as: str | None) -> None:
    """The repro: before, t1 stayed open for turn_boundaries forever, so no later turn
    was a fork point either, while repair called the session clean."""
    log = SessionLog()
    _turn(log, "t1", end_as=end_as)
    _turn(log, "t2", end_as="t2")
    assert not find_open_work(log.events())
    assert log.turn_boundaries() == [("t1", 2), ("t2", 5)]
    for turn_id, upto in log.turn_boundaries():
        child = log.fork(after_turn=turn_id)
        assert child.next_seq == upto + 1
        child.close()


def test_boundaries_are_where_repair_finds_nothing_open() -> None:
    """Nested turns (a sub-agent's), unnamed ends closing the innermost, a stray end."""
    log = SessionLog()
    log.append(TurnStartEvent(turn_id="outer"))
    log.append(TurnStartEvent(turn_id="inner"))
    log.append(TurnEndEvent())  # closes inner: no boundary, outer is open
    log.append(TurnEndEvent(turn_id="outer"))  # a boundary
    log.append(TurnEndEvent(turn_id="stray"))  # nothing open: a boundary too
    log.append(TurnStartEvent(turn_id="a"))
    log.append(TurnStartEvent(turn_id="b"))
    log.append(TurnEndEvent(turn_id="a"))  # closes a: b still open
    log.append(TurnEndEvent(turn_id="zzz"))  # closes b, the last open
    assert [seq for _, seq in log.turn_boundaries()] == _closed_by_repair(log.events())
    assert log.turn_boundaries() == [("outer", 3), ("stray", 4), ("b", 8)]
