"""The library's errors: one base class, a few subclasses, messages that say where.

The tree::

    UniversalEventError            anything this library raises on purpose
    ├── DecodeError                bytes or dicts that are not a valid Universal Event
    │                              (names the JSON path, e.g. ``at $.content[0].text``)
    ├── AdapterError               a native stream an adapter cannot make sense of
    ├── SurfaceError               a surface intent on an event that cannot carry one,
    │                              or a replace range that does not exist
    ├── EventIdConflictError       an event id already logged, sent with another body
    ├── CheckpointError            a checkpoint could not reach the store; the guarded
    │                              action (model request, tool run) must not happen
    ├── StoreError                 a store could not do what was asked
    │   ├── ConflictError          another writer appended first (expected seq taken)
    │   ├── CorruptEventError      a stored event cannot be read (names session and seq)
    │   ├── SessionNotFoundError   no such session
    │   └── StoreURLError          a store URL with a scheme no backend serves
    ├── LiveSessionError           repair was asked of a session that is still live
    ├── StreamError                a server ended an event stream it could not go on with
    ├── RenderError                a history cannot be rendered for the target
    ├── RuntimeRunError            a driven runtime's turn did not start or finish
    │   ├── RuntimeStartError      its CLI could not start the turn
    │   │   └── RuntimeNotFoundError   its CLI binary is not installed
    │   └── RuntimeTimeoutError    the turn outlived the runner's timeout
    └── NotAvailableError          a feature that this build does not provide (yet)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from universal_event.events import Event

__all__ = [
    "AdapterError",
    "CheckpointError",
    "ConflictError",
    "CorruptEventError",
    "DecodeError",
    "EventIdConflictError",
    "LiveSessionError",
    "NotAvailableError",
    "ProjectionError",
    "RenderError",
    "RuntimeNotFoundError",
    "RuntimeRunError",
    "RuntimeStartError",
    "RuntimeTimeoutError",
    "SessionNotFoundError",
    "StoreError",
    "StoreNotFoundError",
    "StoreURLError",
    "StreamError",
    "SurfaceError",
    "UniversalEventError",
]


class UniversalEventError(Exception):
    """Base class of every error this library raises on purpose."""


class DecodeError(UniversalEventError, ValueError):
    """Input that is not a valid Universal Event.

    ``path`` is the JSON path of the offending value (``$`` for the whole document),
    ``problem`` what was wrong with it, ``line`` the 1-based line for JSON-lines input.
    """

    def __init__(self, problem: str, *, path: str = "$", line: int | None = None) -> None:
        self.problem = problem
        self.path = path
        self.line = line
        where = f"at {path}" if line is None else f"at line {line}, {path}"
        super().__init__(f"{problem} ({where})")


class AdapterError(UniversalEventError, ValueError):
    """A native event an adapter cannot interpret (malformed, out of order).

    ``runtime`` names the adapter, ``native_type`` the offending native event type.
    """

    def __init__(self, message: str, *, runtime: str, native_type: str | None = None) -> None:
        self.runtime = runtime
        self.native_type = native_type
        prefix = f"[{runtime}]" if native_type is None else f"[{runtime} {native_type!r}]"
        super().__init__(f"{prefix} {message}")


class SurfaceError(UniversalEventError, ValueError):
    """A surface intent on an event type that never reaches the model, or a bad range."""


class EventIdConflictError(UniversalEventError, ValueError):
    """An event id the log already holds, appended again with a different body.

    An id is the idempotency key of a producer's retry: the same event sent again is
    taken as already logged; a different event under that id would be silently lost,
    so it is refused. ``seq`` is where the id is logged.
    """

    def __init__(self, session_id: str, event_id: str, seq: int, event_type: str) -> None:
        self.session_id = session_id
        self.event_id = event_id
        self.seq = seq
        super().__init__(
            f"session {session_id!r}: event id {event_id!r} is already logged at seq {seq} "
            f"with a different body ({event_type}); a retry must send the same event, "
            "a new event needs an id of its own"
        )


class CheckpointError(UniversalEventError):
    """A checkpoint failed: the buffered events did not reach the store.

    The action the checkpoint guards (sending a model request, running a tool) must not
    run; the events stay buffered so a later checkpoint can retry.
    """


class StoreError(UniversalEventError):
    """A store failed to do what was asked."""


class ConflictError(StoreError):
    """Another writer appended to the session first.

    ``expected_seq`` is the seq this writer wanted to write next, ``actual_seq`` the
    store's next free seq. Re-read the session and retry.
    """

    def __init__(self, session_id: str, expected_seq: int, actual_seq: int) -> None:
        self.session_id = session_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq
        super().__init__(
            f"session {session_id!r}: expected next seq {expected_seq}, "
            f"but the store is at {actual_seq} (another writer appended first)"
        )


class CorruptEventError(StoreError):
    """A stored event cannot be decoded. Other sessions stay readable."""

    def __init__(self, session_id: str, seq: int | None, problem: str) -> None:
        self.session_id = session_id
        self.seq = seq
        self.problem = problem
        super().__init__(f"session {session_id!r}, seq {seq}: corrupt event: {problem}")


class SessionNotFoundError(StoreError, KeyError):
    """No session with that id exists in the store."""

    def __init__(self, session_id: str, detail: str | None = None) -> None:
        self.session_id = session_id
        self.detail = detail
        """Why, when more is known (``no store at ...``)."""
        super().__init__(str(self))

    def __str__(self) -> str:
        message = f"no session {self.session_id!r}"
        return f"{message}: {self.detail}" if self.detail else message


class StoreNotFoundError(StoreError):
    """A read-only use of a store that does not exist (its file or directory is missing):
    reported instead of creating an empty store as a side effect."""

    def __init__(self, url: str) -> None:
        self.url = url
        super().__init__(f"no store at {url} (nothing has been written there yet)")


class StoreURLError(StoreError, ValueError):
    """A store URL no backend serves (``--store``, ``UNIVERSAL_EVENT_STORE``)."""


class LiveSessionError(UniversalEventError):
    """Repair refuses a session that still has a live writer."""


class StreamError(UniversalEventError):
    """The server ended a session's event stream with a ``stream-error`` frame (a stored
    event it cannot read). ``code``, ``session_id`` and ``seq`` are the frame's;
    ``events`` the events the same input held before it (already read, not lost)."""

    def __init__(self, error: dict[str, object], events: list[Event]) -> None:
        self.code = str(error.get("code") or "stream_failed")
        session_id, seq = error.get("session_id"), error.get("seq")
        self.session_id = session_id if isinstance(session_id, str) else None
        self.seq = seq if isinstance(seq, int) else None
        self.events = events
        super().__init__(f"the server ended the stream ({self.code}): {error.get('message')}")


class ProjectionError(UniversalEventError):
    """A projection's reducer raised: the projection stopped at that event (the log,
    and the other projections, went on)."""

    def __init__(self, name: str, seq: int, cause: BaseException) -> None:
        self.name = name
        self.seq = seq
        super().__init__(
            f"projection {name!r} failed at seq {seq}: {type(cause).__name__}: {cause}"
        )


class RenderError(UniversalEventError, ValueError):
    """A derived history cannot be rendered for the requested target."""


class RuntimeRunError(UniversalEventError):
    """A driven turn that could not start or did not finish (in ``RunResult.error``)."""


class RuntimeStartError(RuntimeRunError):
    """The runtime's CLI could not start the turn (its native session is gone, it did not
    connect); nothing of the prompt was logged."""


class RuntimeNotFoundError(RuntimeStartError):
    """The runtime's CLI binary is not there (the ``claude``/``codex`` extras)."""


class RuntimeTimeoutError(RuntimeRunError, TimeoutError):
    """The turn did not end within the runner's ``timeout``; it was interrupted."""

    def __init__(self, runtime: str, seconds: float) -> None:
        self.runtime = runtime
        self.seconds = seconds
        super().__init__(
            f"{runtime}: the turn did not end within the timeout of {seconds:g} s; "
            "it was interrupted and the CLI stopped"
        )


class NotAvailableError(UniversalEventError):
    """A feature that is not available in this build (yet)."""
