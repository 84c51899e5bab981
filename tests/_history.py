"""Building a session's history by hand, as the hand-off tests do."""

from __future__ import annotations

from typing import Any

from universal_event.events import AssistantMessageEvent, SessionStartEvent, UserMessageEvent
from universal_event.log import SessionLog
from universal_event.parts import Provenance, TextPart


def started_log(runtime: str) -> SessionLog:
    """A memory log whose session the runtime ``runtime`` started."""
    log = SessionLog()
    log.append(SessionStartEvent(runtime=runtime, native_session_id="native-1"))
    return log


def add_user(log: SessionLog, *parts: Any, **fields: Any) -> None:
    """A user message of ``parts`` (a ``str`` is a text part)."""
    content = [TextPart(text=p) if isinstance(p, str) else p for p in parts]
    log.append(UserMessageEvent(content=content, **fields))


def add_assistant(log: SessionLog, origin: Provenance, *parts: Any) -> None:
    """An assistant message of ``parts`` from ``origin``."""
    content = [TextPart(text=p) if isinstance(p, str) else p for p in parts]
    log.append(AssistantMessageEvent(content=content, provenance=origin))
