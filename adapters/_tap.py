"""``tap``: keep iterating an SDK stream unchanged while its events go to a session log.

Generic over every adapter (Anthropic, Claude Code, OpenAI Chat / Responses, Codex —
anything with ``feed``/``close``)::

    from adapters._tap import tap
    from adapters.anthropic import AnthropicAdapter

    adapter = AnthropicAdapter(session_id=log.session_id)
    log.extend(adapter.user_prompt("What's the weather?"))
    stream = client.messages.create(..., stream=True)
    for event in tap(stream, adapter, log):   # the SDK's own objects, untouched
        ...

    async for message in atap(claude_agent_sdk.query(prompt=...), ClaudeCodeAdapter(), log):
        ...

Each native item is fed to the adapter and the events it completes are appended to the
log *before* the item is handed to the caller. Checkpoints (the log reaches its store)
happen at the moments DESIGN.md asks for:

* before the caller can act on an assistant message that calls tools (the item that
  completed it is yielded only after the checkpoint — the caller runs tools after
  seeing it, so the call is durable first). An SDK helper hands a call over before its
  message ends (``messages.stream()``'s ``content_block_stop`` holding the
  ``tool_use``, ``chat.completions.stream()``'s ``tool_calls.function.arguments.done``,
  a Responses ``response.output_item.done``): such an item (the adapter's
  ``hands_over_call``) and the items after it are held back until the message is
  logged and checkpointed, then yielded in order;
* at every ``step/end`` and ``turn/end`` (before the next step / request);
* on a fatal ``error``;
* when the stream ends — normally, with an exception (the stream was cut), or because
  the caller stopped iterating early: the adapter's ``close()`` events (a partial
  message, an ``interrupted`` turn) are logged and checkpointed, and an exception is
  re-raised unchanged.

A failed checkpoint raises :class:`~universal_event.errors.CheckpointError` out of the
iteration: the caller must not go on to run the tool or send the next request.

Stopping early. Python finishes an abandoned generator only when it is cleaned up: a
``break`` out of ``async for`` leaves that to the event loop, later, and a ``break`` out
of a ``for`` over an iterator the caller still holds, to whenever it is dropped. Two
ways to have the stream finished in its place:

* the deterministic one — use the tap as a context manager (or through
  ``contextlib.closing`` / ``contextlib.aclosing``): the stream is finished when the
  block is left, and a failed checkpoint raises there::

      with tap(stream, adapter, log) as items:          # async with atap(...) as items:
          for item in items:                            #     async for item in items:
              if enough(item):
                  break
      # the partial message and the interrupted turn are logged and stored here

* the bare form (``for item in tap(...): ... break``) is safe too: a tap the caller
  stopped reading is registered with its adapter, and the adapter's next
  ``user_prompt`` — or the next tap on that adapter — first finishes it (partial
  message, ``interrupted`` turn, checkpoint), so the cut turn is logged before the next
  prompt whatever the event loop or the garbage collector do; the cleanup that comes
  later then does nothing. A checkpoint that fails while Python cleans the abandoned
  tap up (where an exception cannot reach the caller) is not lost: the events stay
  pending in the log (``log.pending``), and the adapter's next ``user_prompt`` or tap
  retries the checkpoint and raises :class:`~universal_event.errors.CheckpointError`
  if the store still refuses them — as does the log's next ``checkpoint()`` (a
  ``before_request`` / ``before_tool`` guard).

A prompt logged while the caller still holds a tap it has not finished (in the loop body)
finishes that tap's stream the same way; iterating on after that feeds the adapter
again (a long-lived stream — Claude Code's ``receive_messages()`` — goes on), and the
tap is finished again when it ends.
"""

from __future__ import annotations

import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Sequence,
)
from types import TracebackType
from typing import Any, Protocol, TypeVar

from universal_event.errors import AdapterError
from universal_event.events import (
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    EventBase,
    StepEndEvent,
    ToolCallEvent,
    TurnEndEvent,
    UserMessageEvent,
)
from universal_event.parts import ToolCallPart

__all__ = [
    "AsyncTap",
    "EventLog",
    "FeedsEvents",
    "RaisesAPIErrors",
    "Tap",
    "aerrors_logged",
    "atap",
    "atap_sdk_stream",
    "errors_logged",
    "finish_open_taps",
    "log_session_id",
    "needs_checkpoint",
    "tap",
    "tap_sdk_stream",
]

T = TypeVar("T")


class FeedsEvents(Protocol):
    """What ``tap`` needs of an adapter."""

    def feed(self, native: Any) -> list[Event]: ...

    def close(self) -> list[Event]: ...


class RaisesAPIErrors(FeedsEvents, Protocol):
    """An adapter for an HTTP SDK whose stream raises errors (``api_error`` turns one
    into events)."""

    def api_error(self, exc: BaseException) -> list[Event]: ...


class EventLog(Protocol):
    """What ``tap`` needs of a log (:class:`universal_event.log.SessionLog` has it)."""

    def extend(self, events: Iterable[EventBase]) -> Sequence[EventBase]: ...

    def checkpoint(self) -> int: ...


def needs_checkpoint(events: Sequence[Event]) -> bool:
    """Whether a batch of events ends something the caller may act on next."""
    for event in events:
        # a tool began (its effects may follow at once); a user message (tool results,
        # a prompt) is what the next model request will see
        if isinstance(event, StepEndEvent | TurnEndEvent | ToolCallEvent | UserMessageEvent):
            return True
        if isinstance(event, ErrorEvent) and event.fatal:
            return True
        if isinstance(event, AssistantMessageEvent) and any(
            isinstance(part, ToolCallPart) for part in event.content
        ):
            return True
    return False


def _log(events: list[Event], log: EventLog) -> bool:
    """Log ``events``; whether that checkpointed (:func:`needs_checkpoint`)."""
    if not events:
        return False
    log.extend(events)
    if not needs_checkpoint(events):
        return False
    log.checkpoint()
    return True


class _Run:
    """One tap's stream: what finishing it needs, and where it stands."""

    __slots__ = ("adapter", "by_caller", "dirty", "ended", "failure", "fed", "log", "paused")

    def __init__(self, adapter: FeedsEvents, log: EventLog) -> None:
        self.adapter = adapter
        self.log = log
        self.dirty = True
        """The adapter may hold some of this stream (a new stream always needs a close)."""
        self.paused = False
        """Suspended at a ``yield``: the caller holds an item, or stopped reading."""
        self.by_caller = False
        """The caller closes the tap itself (``close()``/``aclose()``, a ``with`` exit)."""
        self.ended = False
        self.fed = False
        """Some of the stream went to the adapter (it is following this stream)."""
        self.failure: Exception | None = None
        """The checkpoint that finished the stream failed (retried before the next input)."""

    def claim(self, *, paused_only: bool) -> bool:
        """Whether the caller of this takes the finish on (only one does)."""
        with _runs_lock:
            if not self.dirty or (paused_only and not self.paused):
                return False
            self.dirty = False
            return True

    def finish(self) -> None:
        """The adapter's ``close()`` events logged, then checkpointed."""
        closing = self.adapter.close()
        if closing:
            self.log.extend(closing)
        self.checkpoint()

    def checkpoint(self) -> None:
        try:
            self.log.checkpoint()
        except Exception as exc:
            self.failure = exc  # stays registered: the next prompt / tap retries
            raise
        self.failure = None
        if self.ended:
            _unregister(self)

    def end(self, *, in_cleanup: bool) -> None:
        """The tap's generator ends: finish the stream unless a prompt did already.

        ``in_cleanup``: Python is cleaning an abandoned tap up (an exception raised here
        reaches no caller), so a failed checkpoint is kept for the next input instead.
        """
        try:
            if self.claim(paused_only=False):
                self.finish()
        except Exception as exc:
            if not (in_cleanup and exc is self.failure):
                raise
        finally:
            self.ended = True
            if self.failure is None:
                _unregister(self)


_runs: list[_Run] = []
"""Taps not ended yet, and ended ones whose last checkpoint failed."""
_runs_lock = threading.Lock()


def _register(run: _Run) -> None:
    with _runs_lock:
        # An ended tap whose failed checkpoint the log has since made good (its own next
        # checkpoint went through) needs no retry: let go of its adapter and log.
        _runs[:] = [
            other
            for other in _runs
            if not (other.ended and getattr(other.log, "pending", None) == 0)
        ]
        _runs.append(run)


def _unregister(run: _Run) -> None:
    with _runs_lock:
        if run in _runs:
            _runs.remove(run)


def finish_open_taps(adapter: object) -> None:
    """Before the next input through ``adapter`` (a prompt, a new tap on it): finish
    every tap of ``adapter`` the caller stopped reading — its ``close()`` events (the
    partial message, the ``interrupted`` turn) are logged and checkpointed now, ahead
    of what comes next, and the tap's later cleanup does nothing — and retry the
    checkpoint of one whose finish failed (raising
    :class:`~universal_event.errors.CheckpointError` again while the store refuses).

    A tap that is waiting for the stream's next item (another task or thread iterates
    it) is left alone. Adapters call this from ``user_prompt``.
    """
    if not _runs:
        return
    with _runs_lock:
        mine = [run for run in _runs if run.adapter is adapter]
    for run in mine:
        if run.claim(paused_only=True):
            run.finish()
        elif run.failure is not None:
            run.checkpoint()


class Tap(Iterator[T]):
    """What :func:`tap` returns: an iterator of the stream's items (iterating it runs
    the tap's generator itself), and a context manager that finishes the stream when
    the block is left (:meth:`close`; ``contextlib.closing`` works the same)."""

    __slots__ = ("_items", "_run")

    def __init__(self, items: Generator[T, None, None], run: _Run) -> None:
        self._items = items
        self._run = run

    def __iter__(self) -> Generator[T, None, None]:
        return self._items

    def __next__(self) -> T:
        return next(self._items)

    def send(self, value: None) -> T:
        return self._items.send(value)

    def throw(self, exc: BaseException) -> T:
        return self._items.throw(exc)

    def close(self) -> None:
        """Stop iterating: the stream is finished now (its ``close()`` events logged and
        checkpointed); a failed checkpoint raises here."""
        self._run.by_caller = True
        self._items.close()

    def __enter__(self) -> Tap[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncTap(AsyncIterator[T]):
    """What :func:`atap` returns: the async :class:`Tap` (``async with``,
    ``contextlib.aclosing``)."""

    __slots__ = ("_items", "_run")

    def __init__(self, items: AsyncGenerator[T, None], run: _Run) -> None:
        self._items = items
        self._run = run

    def __aiter__(self) -> AsyncGenerator[T, None]:
        return self._items

    def __anext__(self) -> Awaitable[T]:
        return self._items.__anext__()

    def asend(self, value: None) -> Awaitable[T]:
        return self._items.asend(value)

    def athrow(self, exc: BaseException) -> Awaitable[T]:
        return self._items.athrow(exc)

    async def aclose(self) -> None:
        """Stop iterating: the stream is finished now; a failed checkpoint raises here."""
        self._run.by_caller = True
        await self._items.aclose()

    async def __aenter__(self) -> AsyncTap[T]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def errors_logged(
    stream: Iterable[T], on_error: Callable[[BaseException], list[Event]], log: EventLog
) -> Iterator[T]:
    """``stream`` unchanged, but an exception it raises is logged (``on_error``'s events,
    checkpointed when fatal) before it propagates: SDKs that raise on an in-stream error
    (``openai.APIError``) or a dropped connection would otherwise leave no trace."""
    try:
        yield from stream
    except Exception as exc:
        _log(on_error(exc), log)
        raise


async def aerrors_logged(
    stream: AsyncIterable[T], on_error: Callable[[BaseException], list[Event]], log: EventLog
) -> AsyncIterator[T]:
    """The async :func:`errors_logged`."""
    try:
        async for item in stream:
            yield item
    except Exception as exc:
        _log(on_error(exc), log)
        raise


def tap(stream: Iterable[T], adapter: FeedsEvents, log: EventLog) -> Tap[T]:
    """Yield ``stream``'s items unchanged; their events go to ``log`` (see module doc).

    The result is an iterator and a context manager (:class:`Tap`).
    """
    _refuse_a_response(stream)
    run = _Run(adapter, log)
    return Tap(_tapped(stream, run), run)


def _refuse_a_response(stream: object) -> None:
    """TypeError for one str or bytes (not a stream of them), or for a non-streamed
    response (an SDK's pydantic ``Message``, ``ChatCompletion``, ``Response``): iterating
    one yields its ``(field, value)`` pairs, each kept as an unknown native item and the
    reply itself lost. Either is fed whole."""
    if isinstance(stream, (str, bytes, bytearray, memoryview)):
        # Iterated, one is characters or ints: each kept as an unknown item. An SDK gives
        # a str where a call that was not asked to stream was answered with SSE.
        raise TypeError(
            f"tap() got one {type(stream).__name__}, not a stream of items: feed it whole "
            "with log.extend(adapter.feed(data)), or tap an iterable of its chunks"
        )
    if hasattr(stream, "model_dump") and hasattr(type(stream), "model_fields"):
        raise TypeError(
            f"tap() got a {type(stream).__name__}, a whole response, not a stream: "
            "log it with log.extend(adapter.feed(response)) (or tap([response], log))"
        )


def _tapped(stream: Iterable[T], run: _Run) -> Generator[T, None, None]:
    adapter = run.adapter
    finish_open_taps(adapter)  # an earlier stream of this adapter, abandoned
    _register(run)
    held = _Held(adapter)
    try:
        for item in stream:
            run.dirty = True
            for ready in held.after(item, _fed(run, item)):
                run.paused = True
                yield ready
                run.paused = False
    except GeneratorExit:
        # An early ``break`` (the caller's ``close()``, or Python cleaning the tap up):
        # whatever the adapter still holds is logged and made durable.
        run.paused = False
        run.end(in_cleanup=not run.by_caller)
        raise
    except BaseException:  # a cut stream: the same, then the exception goes on
        run.paused = False
        run.end(in_cleanup=False)
        raise
    run.end(in_cleanup=False)
    yield from held.rest()  # the stream ended inside the message: now logged (partial)


def _fed(run: _Run, item: Any) -> bool:
    """Feed ``item``, log its events; whether that checkpointed (:func:`needs_checkpoint`)."""
    if len(_runs) > 1:
        _refuse_a_second_stream(run)
    run.fed = True
    return _log(run.adapter.feed(item), run.log)


def _refuse_a_second_stream(run: _Run) -> None:
    """AdapterError when another tap of the same adapter is still reading its stream: an
    adapter follows one response at a time, and two fed at once (parallel requests, two
    taps iterated in turn) would be merged into one message, the other cut. A tap the
    caller stopped reading was finished when this one began; it is not counted."""
    with _runs_lock:
        other = any(
            o is not run and o.adapter is run.adapter and o.fed and o.dirty and not o.ended
            for o in _runs
        )
    if other:
        run.dirty = False  # its end must not close what the adapter holds of the other
        raise AdapterError(
            "another tap is reading a stream with this adapter: an adapter follows one "
            "response at a time; give each concurrent request its own adapter (the "
            "conversation's next request can take it over once this one is done)",
            runtime=str(getattr(run.adapter, "runtime", "") or "tap"),
        )


class _Held:
    """Items held back from the caller from one that hands over a tool call before the
    message holding it is logged, until a checkpoint (see the module doc)."""

    __slots__ = ("_holds", "_items")

    def __init__(self, adapter: FeedsEvents) -> None:
        self._holds: Callable[[Any], bool] = getattr(adapter, "hands_over_call", _never)
        self._items: list[Any] = []

    def after(self, item: T, checkpointed: bool) -> list[T]:
        """What the caller may have now that ``item`` was fed."""
        if not self._items and not self._holds(item):
            return [item]
        self._items.append(item)
        if not checkpointed:
            return []
        ready, self._items = self._items, []
        return ready

    def rest(self) -> list[Any]:
        ready, self._items = self._items, []
        return ready


def _never(item: Any) -> bool:
    return False


def atap(stream: AsyncIterable[T], adapter: FeedsEvents, log: EventLog) -> AsyncTap[T]:
    """The async ``tap`` (``claude_agent_sdk.query()``, ``AsyncAnthropic`` streams).

    Checkpoints run inline (the stores are synchronous and short); an async caller
    that needs them off the loop can wrap its store. The result is an async iterator
    and an async context manager (:class:`AsyncTap`).
    """
    _refuse_a_response(stream)
    run = _Run(adapter, log)
    return AsyncTap(_atapped(stream, run), run)


async def _atapped(stream: AsyncIterable[T], run: _Run) -> AsyncGenerator[T, None]:
    adapter = run.adapter
    finish_open_taps(adapter)
    _register(run)
    held = _Held(adapter)
    try:
        async for item in stream:
            run.dirty = True
            for ready in held.after(item, _fed(run, item)):
                run.paused = True
                yield ready
                run.paused = False
    except GeneratorExit:
        run.paused = False
        run.end(in_cleanup=not run.by_caller)
        raise
    except BaseException:
        run.paused = False
        run.end(in_cleanup=False)
        raise
    run.end(in_cleanup=False)
    for ready in held.rest():
        yield ready


def tap_sdk_stream(stream: Iterable[T], adapter: RaisesAPIErrors, log: EventLog) -> Tap[T]:
    """:func:`tap` for an HTTP SDK's stream: an exception it raises mid-stream (an
    in-stream error event, a dropped connection) is logged as the adapter's ``error``
    events before it propagates (:func:`errors_logged`)."""
    _refuse_a_response(stream)
    return tap(errors_logged(stream, adapter.api_error, log), adapter, log)


def atap_sdk_stream(
    stream: AsyncIterable[T], adapter: RaisesAPIErrors, log: EventLog
) -> AsyncTap[T]:
    """The async :func:`tap_sdk_stream`."""
    _refuse_a_response(stream)
    return atap(aerrors_logged(stream, adapter.api_error, log), adapter, log)


def log_session_id(log: EventLog) -> str:
    """The log's session id (``""`` for a log without one): a default adapter's."""
    return str(getattr(log, "session_id", ""))
