"""The neutral message model: what ``derive_messages()`` returns and renderers consume.

Three roles: user, assistant, tool. Tool results are messages of their own (one per
call); renderers group them as their target wants (Anthropic: all results of a turn in
one user message; Chat: one ``tool`` message each). Assistant messages keep their
:class:`~universal_event.parts.Provenance` so a renderer can decide what is safe to
replay. ``seq`` is the log position of the surface event each message came from.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from universal_event.events import InstructionRole
from universal_event.parts import AssistantPart, Provenance, ResultPart, UserPart

__all__ = ["AssistantMessage", "Message", "ToolMessage", "UserMessage"]


class _Message(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="role"):
    seq: int = -1
    """The seq of the surface event this message was derived from."""


class UserMessage(_Message, tag="user", kw_only=True, frozen=True):
    """Content in the user role, or instructions between the turns
    (``instruction_role``, see :class:`~universal_event.events.UserMessageEvent`)."""

    content: list[UserPart]
    instruction_role: InstructionRole | None = None


class AssistantMessage(_Message, tag="assistant", kw_only=True, frozen=True):
    """One assistant response."""

    content: list[AssistantPart]
    provenance: Provenance | None = None
    message_id: str | None = None
    stop_reason: str | None = None
    status: Literal["complete", "partial"] = "complete"


class ToolMessage(_Message, tag="tool", kw_only=True, frozen=True):
    """The result of one client-side tool call."""

    call_id: str
    content: list[ResultPart]
    name: str | None = None
    is_error: bool = False
    cache_control: dict[str, Any] | None = None
    """A prompt-cache mark on the result block itself (Anthropic)."""


Message = UserMessage | AssistantMessage | ToolMessage
"""Any neutral message."""
