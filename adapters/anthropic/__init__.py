"""Anthropic Messages API: native stream → events (:class:`AnthropicAdapter`).

``_wire`` declares the SSE wire format (msgspec structs, the fast path), ``_stream``
normalises streamed and non-streamed responses.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable
from typing import TypeVar

from adapters._tap import (
    AsyncTap,
    EventLog,
    Tap,
    atap_sdk_stream,
    log_session_id,
    tap_sdk_stream,
)
from adapters.anthropic._request import parse_request, render_request
from adapters.anthropic._stream import AnthropicAdapter

__all__ = ["AnthropicAdapter", "atap", "parse_request", "render_request", "tap"]

T = TypeVar("T")


def tap(stream: Iterable[T], log: EventLog, *, adapter: AnthropicAdapter | None = None) -> Tap[T]:
    """Iterate an ``anthropic`` Messages stream unchanged while its events go to ``log``.

    ``for event in tap(client.messages.create(..., stream=True), log): ...`` — the
    generic :func:`adapters._tap.tap` (checkpoints before the caller can act on tool
    calls, ``close()`` on a cut or abandoned stream), plus what is Anthropic-specific:
    the SDK raises an in-stream ``error`` event (``overloaded_error``) as an exception,
    which is logged as that ``error`` event (code, retryable) before it propagates.
    Pass the conversation's adapter to keep an agent loop's requests in one turn.

    The ``messages.stream(...)`` helper is tapped itself (its events), not its
    ``text_stream``, which yields only the text: a :class:`TypeError` says so.
    """
    _refuse_text_stream(stream)
    return tap_sdk_stream(stream, adapter or AnthropicAdapter(session_id=log_session_id(log)), log)


def atap(
    stream: AsyncIterable[T], log: EventLog, *, adapter: AnthropicAdapter | None = None
) -> AsyncTap[T]:
    """:func:`tap` for ``AsyncAnthropic`` streams (``async for``)."""
    _refuse_text_stream(stream)
    return atap_sdk_stream(stream, adapter or AnthropicAdapter(session_id=log_session_id(log)), log)


def _refuse_text_stream(stream: object) -> None:
    """A ``MessageStream``'s ``text_stream`` holds none of the events the log needs (the
    message's blocks, its ids, usage, the stop): each text would be kept as an unknown
    native item and the reply itself lost."""
    code = getattr(stream, "gi_code", None) or getattr(stream, "ag_code", None)
    if getattr(code, "co_name", None) == "__stream_text__":
        raise TypeError(
            "tap() got a MessageStream's text_stream, which yields only the text: tap the "
            "MessageStream itself (for event in tap(stream, log)) and take the text from "
            "its 'text' events (event.type == 'text': event.text)"
        )
