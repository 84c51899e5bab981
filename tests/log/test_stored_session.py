"""StoredSession: what a reader that derives or renders needs of a stored session, read
in one pass without keeping the events (a SessionLog holds them all)."""

from __future__ import annotations

import tracemalloc

import pytest

from adapters import render_session
from tests.log.conftest import add_turn
from tests.log.test_epochs_compression import header
from universal_event import (
    AssistantChunkEvent,
    CorruptEventError,
    SessionLog,
    SessionNotFoundError,
    SurfaceError,
    TextPart,
    ToolResultEvent,
    UserMessageEvent,
)
from universal_event.events import Surface
from universal_event.log import StoredSession
from universal_event.stores import MemoryStore, open_store


def _session(url: str) -> SessionLog:
    """Turns with tools, a header change, a compression and a prune: every surface op."""
    log = SessionLog(open_store(url), "s")
    log.append(header())
    for turn in range(4):
        add_turn(log, turn, tools=2)
    surface = log.surface_seqs()
    log.compress(surface[0], surface[3], "turn 0, summarised", tokens_before=9, tokens_after=1)
    log.append(header(model="claude-other"))
    results = [e for e in log.events() if isinstance(e, ToolResultEvent)]
    log.prune([results[-1].seq], "[pruned]")
    log.checkpoint()
    return log


def test_it_derives_and_renders_what_the_log_does(durable_url: str) -> None:
    log = _session(durable_url)
    stored = StoredSession(log.store, "s")
    assert stored.derive_messages() == log.derive_messages()
    assert stored.current_header() == log.current_header()
    assert stored.current_header().model == "claude-other"  # type: ignore[union-attr]
    for target in ("anthropic", "openai-chat", "openai-responses"):
        assert render_session(stored, target) == render_session(log, target)


def test_a_missing_session_a_gap_and_a_bad_intent_are_refused_as_the_log_refuses_them() -> None:
    with pytest.raises(SessionNotFoundError):
        StoredSession(MemoryStore(), "none")
    store = MemoryStore()
    log = SessionLog(store, "s")
    add_turn(log, 0)
    log.checkpoint()
    events = log.events()

    class Gapped(MemoryStore):
        def read(self, session_id, start=0, end=None):  # type: ignore[no-untyped-def]
            return iter(events[:3] + events[4:])

    gapped = Gapped()
    gapped.append("s", events, expected_seq=0)
    with pytest.raises(CorruptEventError, match="seq 4 where 3 was due"):
        StoredSession(gapped, "s")
    bad = UserMessageEvent(
        seq=len(events),
        id="x",
        session_id="s",
        ts=1.0,
        content=[TextPart(text="replaces what is not there")],
        surface=Surface(op="replace", start=900, end=901),
    )
    store.append("s", [bad], expected_seq=len(events))  # a store takes it; a log would not
    with pytest.raises(SurfaceError):
        SessionLog.open(store, "s")
    with pytest.raises(SurfaceError):
        StoredSession(store, "s")


def test_it_keeps_the_surface_not_the_events() -> None:
    """A streamed session is mostly chunks, which never reach the surface."""
    store = MemoryStore()
    log = SessionLog(store, "s")
    for turn in range(20):
        add_turn(log, turn)
        log.extend(AssistantChunkEvent(message_id=f"m{turn}", delta="x" * 50) for _ in range(500))
    log.checkpoint()
    del log

    def held(open_it: object) -> int:
        tracemalloc.start()
        kept = open_it()  # type: ignore[operator]
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del kept
        return size

    as_log = held(lambda: SessionLog.open(store, "s"))
    as_stored = held(lambda: StoredSession(store, "s"))
    assert as_stored * 10 < as_log, (as_stored, as_log)
