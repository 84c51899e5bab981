"""An in-memory store: the reference implementation of the Store protocol."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import msgspec

from universal_event.errors import ConflictError, SessionNotFoundError, StoreURLError
from universal_event.events import Event, EventBase
from universal_event.stores._base import SessionInfo, check_batch, check_fork_point, runtime_of

__all__ = ["MemoryStore"]


class MemoryStore:
    """Keeps every session in a list; thread-safe; ``tail`` wakes on appends."""

    def __init__(self) -> None:
        self._events: dict[str, list[Event]] = {}
        self._info: dict[str, SessionInfo] = {}
        self._changed = threading.Condition()

    @classmethod
    def from_url(cls, url: str) -> MemoryStore:
        """``memory:`` (or ``memory://``): a new, empty store, gone when dropped."""
        if url.lower() not in ("memory:", "memory://"):
            raise StoreURLError(f"memory store URL {url!r}: a memory store is memory:, no path")
        return cls()

    def append(self, session_id: str, events: Sequence[EventBase], *, expected_seq: int) -> None:
        check_batch(session_id, events, expected_seq)
        with self._changed:
            stored = self._events.setdefault(session_id, [])
            if len(stored) != expected_seq or not events:
                if not stored:  # a session without events is none
                    del self._events[session_id]
                if len(stored) != expected_seq:
                    raise ConflictError(session_id, expected_seq, len(stored))
                return
            stored.extend(events)  # type: ignore[arg-type]
            now = time.time()
            info = self._info.get(session_id) or SessionInfo(session_id=session_id, created=now)
            runtime = info.runtime
            if runtime is None:
                runtime = next((e.source.runtime for e in events if e.source is not None), None)
            self._info[session_id] = msgspec.structs.replace(
                info, runtime=runtime, last_activity=now, event_count=len(stored)
            )
            self._changed.notify_all()

    def read(self, session_id: str, start: int = 0, end: int | None = None) -> Iterator[Event]:
        stored = self._events.get(session_id, [])
        stop = len(stored) if end is None else min(end, len(stored))
        for index in range(max(start, 0), stop):
            yield stored[index]

    def latest_seq(self, session_id: str) -> int:
        return len(self._events.get(session_id, [])) - 1

    def list_sessions(self) -> list[SessionInfo]:
        with self._changed:  # another thread deleting meanwhile: a KeyError
            return [self._info[session_id] for session_id in sorted(self._info)]

    def session_info(self, session_id: str) -> SessionInfo:
        with self._changed:
            info = self._info.get(session_id)
        if info is None:
            raise SessionNotFoundError(session_id)
        return info

    def fork(self, source_id: str, new_id: str, *, upto_seq: int) -> None:
        """Copy the events as they were appended, but for the session id: they are never
        encoded and decoded here, so whatever they hold (a newer producer's fields and
        types included) reaches the child as it is."""
        check_fork_point(source_id, new_id, upto_seq)
        with self._changed:
            if source_id not in self._events:
                raise SessionNotFoundError(source_id)
            if new_id in self._events:
                raise ConflictError(new_id, 0, len(self._events[new_id]))
            copied = [
                msgspec.structs.replace(event, session_id=new_id)
                for event in self._events[source_id][: upto_seq + 1]
            ]
            if not copied:
                return  # a session without events is none (as on the durable stores)
            self._events[new_id] = copied
            now = time.time()
            self._info[new_id] = SessionInfo(
                session_id=new_id,
                runtime=runtime_of(copied),
                created=now,
                last_activity=now,
                event_count=len(copied),
                parent_id=source_id,
                fork_seq=copied[-1].seq,
            )

    def delete(self, session_id: str) -> None:
        with self._changed:
            self._events.pop(session_id, None)
            self._info.pop(session_id, None)

    def tail(self, session_id: str, after_seq: int, *, timeout: float | None = None) -> list[Event]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while True:
                stored = self._events.get(session_id, [])
                if len(stored) > after_seq + 1:
                    return stored[max(after_seq + 1, 0) :]
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return []
                self._changed.wait(remaining)

    def close(self) -> None:
        """Nothing to release."""
