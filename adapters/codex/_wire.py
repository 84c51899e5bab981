"""Typed app-server lines for the fast path: the common notifications as msgspec structs.

Most lines of an app-server stream are deltas and ``item/started`` / ``item/completed``
of agent messages, reasoning and user messages. Those are decoded straight into the
structs below (one prebuilt decoder, unknown fields skipped, no dicts built), tagged on
the line's ``method``. Only what the adapter reads is declared, with the types the
captures show (``tests/fixtures/captured/codex/app_server/*/wire``); a line of another
method, item type or shape fails to decode here and goes down the general dict path,
which reads it exactly as before. The capture harness's ``notifications.jsonl`` says
``payload`` where the wire says ``params``: both are declared.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "AgentMessageItem",
    "DeltaParams",
    "ItemParams",
    "PartParams",
    "ReasoningItem",
    "TypedLine",
    "UserMessageItem",
    "decode_typed_line",
]


class DeltaParams(msgspec.Struct):
    """A delta notification's fields the adapter reads (the rest is skipped)."""

    itemId: str
    delta: str
    summaryIndex: int = 0
    contentIndex: int = 0


class PartParams(msgspec.Struct):
    """``item/reasoning/summaryPartAdded``: which item gets a new summary part."""

    itemId: str


class AgentMessageItem(msgspec.Struct, tag_field="type", tag="agentMessage"):
    id: str | None = None
    text: str | None = None
    phase: str | None = None


class ReasoningItem(msgspec.Struct, tag_field="type", tag="reasoning"):
    id: str | None = None
    summary: list[str] | None = None
    content: list[str] | None = None


class UserMessageItem(msgspec.Struct, tag_field="type", tag="userMessage"):
    id: str | None = None
    content: Any = None


class ItemParams(msgspec.Struct):
    """``item/started`` / ``item/completed`` params of the item types decoded here."""

    item: AgentMessageItem | ReasoningItem | UserMessageItem


class _Line(msgspec.Struct, tag_field="method"):
    pass


class MessageDeltaLine(_Line, tag="item/agentMessage/delta"):
    params: DeltaParams | None = None
    payload: DeltaParams | None = None


class SummaryDeltaLine(_Line, tag="item/reasoning/summaryTextDelta"):
    params: DeltaParams | None = None
    payload: DeltaParams | None = None


class ReasoningDeltaLine(_Line, tag="item/reasoning/textDelta"):
    params: DeltaParams | None = None
    payload: DeltaParams | None = None


class CommandOutputDeltaLine(_Line, tag="item/commandExecution/outputDelta"):
    params: DeltaParams | None = None
    payload: DeltaParams | None = None


class FileOutputDeltaLine(_Line, tag="item/fileChange/outputDelta"):
    params: DeltaParams | None = None
    payload: DeltaParams | None = None


class SummaryPartLine(_Line, tag="item/reasoning/summaryPartAdded"):
    params: PartParams | None = None
    payload: PartParams | None = None


class ItemStartedLine(_Line, tag="item/started"):
    params: ItemParams | None = None
    payload: ItemParams | None = None


class ItemCompletedLine(_Line, tag="item/completed"):
    params: ItemParams | None = None
    payload: ItemParams | None = None


TypedLine = (
    MessageDeltaLine
    | SummaryDeltaLine
    | ReasoningDeltaLine
    | CommandOutputDeltaLine
    | FileOutputDeltaLine
    | SummaryPartLine
    | ItemStartedLine
    | ItemCompletedLine
)

_decoder: msgspec.json.Decoder[TypedLine] = msgspec.json.Decoder(TypedLine)


def decode_typed_line(raw: bytes) -> TypedLine | None:
    """``raw`` as a typed line, or None when it is not one (general path).

    A line of another method (thread status, rate limits, ...) fails at its tag, the
    first key on the wire: cheaper than peeking at every line's method beforehand.
    """
    if b'"method"' not in raw:  # exec lines, JSON-RPC responses
        return None
    try:
        return _decoder.decode(raw)
    except msgspec.DecodeError:
        return None
