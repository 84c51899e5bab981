"""The runners' log side (the runs themselves: tests/e2e)."""

from __future__ import annotations

from universal_event.events import Event, RequestHeaderEvent, SessionStartEvent
from universal_event.log import SessionLog
from universal_event.runtimes import _RunLog


def _run(log: SessionLog, *events: Event) -> list[Event]:
    sink: list[Event] = []
    _RunLog(log, sink, None).extend(events)
    return sink


def test_a_header_each_run_repeats_is_logged_once_per_epoch() -> None:
    log = SessionLog()
    header = RequestHeaderEvent(
        provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
    )
    first = _run(log, SessionStartEvent(native_session_id="t1"), header)
    again = _run(log, SessionStartEvent(native_session_id="t1"), header)
    changed = _run(log, RequestHeaderEvent(provider="openai", api="responses", model="gpt-6"))
    assert [type(e) for e in first] == [SessionStartEvent, RequestHeaderEvent]
    assert again == []
    assert [e.model for e in changed if isinstance(e, RequestHeaderEvent)] == ["gpt-6"]
    assert [type(e).__name__ for e in log.events()] == [
        "SessionStartEvent",
        "RequestHeaderEvent",
        "RequestHeaderEvent",
    ]
