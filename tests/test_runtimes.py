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


def test_a_watchdog_given_longer_than_the_platform_can_wait_keeps_watching() -> None:
    """A library caller's ``timeout=inf`` (or 1e10 s) used to kill the Codex watchdog
    thread with an OverflowError: the run then had no timeout at all. Such a wait is
    clamped to ``threading.TIMEOUT_MAX``; the watchdog lives until stopped."""
    import threading
    import time

    from universal_event.runtimes import _Watchdog

    failures: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda hook_args: failures.append(hook_args.exc_value)
    try:
        dogs = [_Watchdog(seconds) for seconds in (float("inf"), 1e10, threading.TIMEOUT_MAX)]
        time.sleep(0.2)
        for dog in dogs:
            assert dog._thread is not None and dog._thread.is_alive()
            assert not dog.expired
            dog.stop()
            assert not dog._thread.is_alive()
    finally:
        threading.excepthook = previous
    assert failures == []


def test_a_watchdog_still_expires() -> None:
    from universal_event.runtimes import _Watchdog

    dog = _Watchdog(0.01)
    assert dog._thread is not None
    dog._thread.join(timeout=5)
    assert dog.expired and dog.killed  # no turn to interrupt, no app-server to kill
