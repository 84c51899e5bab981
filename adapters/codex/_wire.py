"""Typed app-server lines for the fast path: the common notifications as msgspec structs.

Most lines of an app-server stream are deltas and ``item/started`` / ``item/completed``
of agent messages, reasoning and user messages. Those are decoded straight into the
structs below (one prebuilt decoder per method, unknown fields skipped, no dicts
built). Only what the adapter reads is declared, with the types the
captures show (``tests/fixtures/captured/codex/app_server/*/wire``); a line of another
method, item type or shape fails to decode here and goes down the general dict path,
which reads it exactly as before. The capture harness's ``notifications.jsonl`` says
``payload`` where the wire says ``params``: both are declared.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

__all__ = [
    "AgentMessageItem",
    "DeltaParams",
    "PARAMS",
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


ParamsT = TypeVar("ParamsT")


class TypedLine(msgspec.Struct, Generic[ParamsT]):
    """A notification line of one of :data:`PARAMS`' methods."""

    method: str
    params: ParamsT | None = None
    payload: ParamsT | None = None


PARAMS: dict[str, type[Any]] = {
    "item/agentMessage/delta": DeltaParams,
    "item/reasoning/summaryTextDelta": DeltaParams,
    "item/reasoning/textDelta": DeltaParams,
    "item/commandExecution/outputDelta": DeltaParams,
    "item/fileChange/outputDelta": DeltaParams,
    "item/reasoning/summaryPartAdded": PartParams,
    "item/started": ItemParams,
    "item/completed": ItemParams,
}
"""The methods decoded here → their params struct."""

_decoders: dict[bytes, tuple[msgspec.json.Decoder[TypedLine[Any]], str]] = {
    method.encode(): (msgspec.json.Decoder(TypedLine[params]), method)  # type: ignore[valid-type]
    for method, params in PARAMS.items()
}
_WIRE_HEAD = b'{"method":"'


def decode_typed_line(raw: bytes) -> TypedLine[Any] | None:
    """``raw`` as a typed line, or None when it is not one (general path).

    The method is peeked at first, so that a line of another method (thread status,
    rate limits, ...) never reaches a decoder. On the wire the method is the first key:
    the peek is exact. In another key order (the capture harness's files) a
    ``"method"`` key nested before the line's own could mislead it: the decoded method
    must agree.
    """
    if raw.startswith(_WIRE_HEAD):
        wire_order = True
        method = raw[11 : raw.find(b'"', 11)]
    else:
        key = raw.find(b'"method"')
        if key == -1:  # exec lines, JSON-RPC responses
            return None
        wire_order = False
        quote = raw.find(b'"', key + 8) + 1  # the value's, after ``:`` and any blanks
        method = raw[quote : raw.find(b'"', quote)]
    entry = _decoders.get(method)
    if entry is None:
        return None
    decoder, name = entry
    try:
        line = decoder.decode(raw)
    except msgspec.DecodeError:  # another item type, a field of another type, ...
        return None
    return line if wire_order or line.method == name else None
