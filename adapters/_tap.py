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
  seeing it, so the call is durable first);
* at every ``step/end`` and ``turn/end`` (before the next step / request);
* on a fatal ``error``;
* when the stream ends — normally, with an exception (the stream was cut), or because
  the caller stopped iterating early: the adapter's ``close()`` events (a partial
  message, an ``interrupted`` turn) are logged and checkpointed, and an exception is
  re-raised unchanged.

A failed checkpoint raises :class:`~universal_event.errors.CheckpointError` out of the
iteration: the caller must not go on to run the tool or send the next request.
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from typing import Any, Protocol, TypeVar

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
    "EventLog",
    "FeedsEvents",
    "RaisesAPIErrors",
    "aerrors_logged",
    "atap",
    "atap_sdk_stream",
    "errors_logged",
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


def _log(events: list[Event], log: EventLog) -> None:
    if events:
        log.extend(events)
        if needs_checkpoint(events):
            log.checkpoint()


def _finish(adapter: FeedsEvents, log: EventLog) -> None:
    closing = adapter.close()
    if closing:
        log.extend(closing)
    log.checkpoint()


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


def tap(stream: Iterable[T], adapter: FeedsEvents, log: EventLog) -> Iterator[T]:
    """Yield ``stream``'s items unchanged; their events go to ``log`` (see module doc)."""
    try:
        for item in stream:
            _log(adapter.feed(item), log)
            yield item
    finally:
        # Normal end, a cut stream (exception) or an early ``break`` (GeneratorExit):
        # whatever the adapter still holds is logged and made durable.
        _finish(adapter, log)


async def atap(stream: AsyncIterable[T], adapter: FeedsEvents, log: EventLog) -> AsyncIterator[T]:
    """The async ``tap`` (``claude_agent_sdk.query()``, ``AsyncAnthropic`` streams).

    Checkpoints run inline (the stores are synchronous and short); an async caller
    that needs them off the loop can wrap its store.
    """
    try:
        async for item in stream:
            _log(adapter.feed(item), log)
            yield item
    finally:
        _finish(adapter, log)


def tap_sdk_stream(stream: Iterable[T], adapter: RaisesAPIErrors, log: EventLog) -> Iterator[T]:
    """:func:`tap` for an HTTP SDK's stream: an exception it raises mid-stream (an
    in-stream error event, a dropped connection) is logged as the adapter's ``error``
    events before it propagates (:func:`errors_logged`)."""
    return tap(errors_logged(stream, adapter.api_error, log), adapter, log)


def atap_sdk_stream(
    stream: AsyncIterable[T], adapter: RaisesAPIErrors, log: EventLog
) -> AsyncIterator[T]:
    """The async :func:`tap_sdk_stream`."""
    return atap(aerrors_logged(stream, adapter.api_error, log), adapter, log)


def log_session_id(log: EventLog) -> str:
    """The log's session id (``""`` for a log without one): a default adapter's."""
    return str(getattr(log, "session_id", ""))
