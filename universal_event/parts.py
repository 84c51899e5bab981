"""Content parts: the pieces that messages, tool results and chunks are made of.

Parts are tagged msgspec structs (``type`` field) shared by events and neutral
messages. Provider-bound data (signatures, encrypted reasoning, server-tool blocks)
always travels with a :class:`Provenance` so a renderer can tell whether replaying it
to a given target is safe (see PITFALLS.md: signatures are bound to provider + api +
model, not provider alone).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "AssistantPart",
    "Citation",
    "DocumentPart",
    "ImagePart",
    "Part",
    "Provenance",
    "RefusalPart",
    "ResultPart",
    "ServerToolCallPart",
    "ServerToolResultPart",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "UserPart",
]


class Provenance(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where a provider-bound piece of content came from.

    Two provenances are "the same origin" only when provider, api and model all match:
    Anthropic rejects a thinking signature minted by another Claude model.
    """

    provider: str
    """``anthropic`` or ``openai`` (or another vendor name for compatible servers)."""
    api: str
    """``messages``, ``chat`` or ``responses``."""
    model: str | None = None
    """The model that produced the content, as the API reported it."""

    def same_origin(self, other: Provenance | None) -> bool:
        """True when content from ``self`` may be replayed to ``other`` unchanged."""
        return (
            other is not None
            and self.provider == other.provider
            and self.api == other.api
            and self.model == other.model
        )


class _Part(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type", gc=False
):
    """Base of every content part; ``type`` is the tag. Not tracked by the garbage
    collector, like the events that hold them (see :class:`~universal_event.events.EventBase`)."""


class Citation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One citation attached to a text part.

    Supported by: Anthropic ``citations`` (char/page/content-block locations, web search
    results), OpenAI Responses ``annotations`` (url_citation, file_citation).
    The provider's own object is kept whole in ``native`` for a same-provider replay.
    """

    kind: str
    """The native citation type, e.g. ``web_search_result_location``, ``url_citation``."""
    cited_text: str | None = None
    url: str | None = None
    title: str | None = None
    start_index: int | None = None
    end_index: int | None = None
    native: dict[str, Any] | None = None


class TextPart(_Part, tag="text", kw_only=True, frozen=True):
    """Plain text, optionally with citations and a cache hint."""

    text: str
    citations: list[Citation] = []
    cache_control: dict[str, Any] | None = None
    """Anthropic prompt-caching hint, kept for targets that support it."""
    item_id: str | None = None
    """OpenAI Responses: the ``msg_...`` output item this text came from. Consecutive
    parts with the same ``item_id`` belong to one ``message`` item."""
    phase: str | None = None
    """OpenAI Responses message ``phase`` (``commentary`` / ``final_answer``, gpt-5.5+)."""


class RefusalPart(_Part, tag="refusal", kw_only=True, frozen=True):
    """A model refusal (OpenAI ``refusal`` content); rendered as text elsewhere."""

    text: str
    item_id: str | None = None
    """OpenAI Responses: the ``msg_...`` output item this refusal came from."""


class ImagePart(_Part, tag="image", kw_only=True, frozen=True):
    """An image given by URL, inline base64 data, or a provider file id."""

    url: str | None = None
    data: str | None = None
    """Base64-encoded bytes (without a ``data:`` prefix)."""
    media_type: str | None = None
    file_id: str | None = None
    detail: str | None = None
    """OpenAI's ``detail`` hint (``low``/``high``/``auto``)."""
    cache_control: dict[str, Any] | None = None


class DocumentPart(_Part, tag="document", kw_only=True, frozen=True):
    """A document (PDF, plain text) given by URL, base64 data, text or file id."""

    url: str | None = None
    data: str | None = None
    text: str | None = None
    media_type: str | None = None
    file_id: str | None = None
    filename: str | None = None
    title: str | None = None
    context: str | None = None
    citations_enabled: bool | None = None
    cache_control: dict[str, Any] | None = None


class ThinkingPart(_Part, tag="thinking", kw_only=True, frozen=True):
    """Model reasoning.

    Anthropic: ``thinking`` (``text`` + ``signature``) or ``redacted_thinking``
    (``redacted_data``). OpenAI Responses: a ``reasoning`` item (``id`` = ``rs_...``,
    ``summary`` parts, optional ``encrypted_content``). Chat-compatible servers:
    ``reasoning_content`` (text only). Everything opaque is valid only for
    ``provenance``.
    """

    text: str = ""
    signature: str | None = None
    redacted_data: str | None = None
    encrypted_content: str | None = None
    summary: list[str] | None = None
    """Responses reasoning summary texts (``summary_text`` parts), in order."""
    id: str | None = None
    """The provider's item id (Responses ``rs_...``)."""
    provenance: Provenance | None = None


class ToolCallPart(_Part, tag="tool_call", kw_only=True, frozen=True):
    """A client-side tool call the model asked for.

    ``arguments`` is the parsed JSON object; when the model produced text that is not
    valid JSON (truncated by ``max_tokens``, or a freeform custom tool), ``arguments``
    is ``None`` and ``arguments_raw`` holds the text.
    """

    id: str
    """The id tool results refer to (Anthropic ``toolu_...``, OpenAI ``call_...``)."""
    name: str
    arguments: Any = None
    arguments_raw: str | None = None
    kind: Literal["function", "custom"] = "function"
    """``custom``: an OpenAI freeform tool whose input is plain text (``arguments_raw``)."""
    item_id: str | None = None
    """Responses ``fc_...`` item id, distinct from the ``call_id`` kept in ``id``."""
    provenance: Provenance | None = None
    cache_control: dict[str, Any] | None = None


class ServerToolCallPart(_Part, tag="server_tool_call", kw_only=True, frozen=True):
    """A tool the provider ran itself (web search, code execution, MCP, ...).

    Opaque and provider-bound: ``native`` is the provider's block or item, replayed
    only to the same provider and api.
    """

    id: str
    name: str
    input: Any = None
    native: dict[str, Any] = {}
    provenance: Provenance | None = None


class ServerToolResultPart(_Part, tag="server_tool_result", kw_only=True, frozen=True):
    """The result of a server tool, opaque and provider-bound like its call."""

    call_id: str
    kind: str
    """The native block type, e.g. ``web_search_tool_result``."""
    native: dict[str, Any] = {}
    provenance: Provenance | None = None


UserPart = TextPart | ImagePart | DocumentPart
"""What a user message may contain."""

ResultPart = TextPart | ImagePart | DocumentPart
"""What a tool result may contain."""

AssistantPart = (
    TextPart
    | RefusalPart
    | ThinkingPart
    | ToolCallPart
    | ServerToolCallPart
    | ServerToolResultPart
    | ImagePart
)
"""What an assistant message may contain."""

Part = (
    TextPart
    | RefusalPart
    | ImagePart
    | DocumentPart
    | ThinkingPart
    | ToolCallPart
    | ServerToolCallPart
    | ServerToolResultPart
)
"""Any content part."""
