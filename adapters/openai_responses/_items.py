"""Responses output items ↔ content parts, shared by the stream and the whole-body paths.

One output item becomes one or more parts, in ``output_index`` order:

==========================  ===============================================================
``message``                 one :class:`TextPart` per ``output_text`` (citations from its
                            ``annotations``), one :class:`RefusalPart` per ``refusal``;
                            each keeps ``item_id`` (``msg_...``) and ``phase``
``reasoning``               :class:`ThinkingPart`: ``id`` (``rs_...``), ``summary`` texts,
                            ``encrypted_content``, ``text`` = the raw ``reasoning_text``
                            content (open-weight models; empty otherwise)
``function_call``           :class:`ToolCallPart`: ``id`` = ``call_id`` (what results must
                            reference), ``item_id`` = the ``fc_...`` item id; the
                            argument text in ``arguments_raw`` whenever the compact
                            re-encoding would differ (or it is not JSON: a truncated
                            call), so a same-provider replay is byte-exact
``custom_tool_call``        :class:`ToolCallPart` ``kind="custom"``: the freeform text input
                            in ``arguments_raw``, ``item_id`` = ``ctc_...``
``*_output`` items          :class:`ServerToolResultPart` (the whole item in ``native``)
anything else               :class:`ServerToolCallPart` with the whole item in ``native``:
                            web_search_call, file_search_call, code_interpreter_call,
                            mcp_call, mcp_list_tools, mcp_approval_request, image_generation,
                            tool_search_call, shell_call, local_shell_call, computer_call,
                            apply_patch_call, compaction and item types newer than this
                            module — kept in order, replayable to the same provider
==========================  ===============================================================

A server-tool item carries its call *and* its result (``web_search_call`` has the
action and the sources, ``mcp_call`` the arguments and the output), so it is one
``ServerToolCallPart``, never split. Shell / local shell / computer / apply-patch calls
are executed by the caller but are provider-bound item types, so they stay opaque too
(``id`` = their ``call_id``, so a caller-sent ``*_call_output`` pairs with them).

Native values of the wrong type never reach a typed field (an event holding one encodes
but does not decode: a stored session holding it could not be read back). An optional
field of another type (an ``id``, ``encrypted_content``, ``phase``, a citation's
``url``, an image's ``file_id``, ...) is dropped (:func:`str_or_none`,
:func:`int_or_none`); a message's ``text`` that is not a string makes the item malformed
(``TypeError``: the caller keeps it as ``native/unknown``), as it is the item itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from adapters._base import int_or_none, str_or_none, text_value
from adapters._render import parse_arguments
from universal_event.parts import (
    AssistantPart,
    Citation,
    DocumentPart,
    ImagePart,
    Provenance,
    RefusalPart,
    ResultPart,
    ServerToolCallPart,
    ServerToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

__all__ = [
    "CLIENT_RESULT_TYPES",
    "citation",
    "item_parts",
    "parse_arguments",
    "result_parts",
]

CLIENT_RESULT_TYPES = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
    }
)
"""Input item types the *caller* sends with the result of a tool it ran."""

_SERVER_TOOL_INPUT_KEYS: dict[str, tuple[str, ...]] = {
    "web_search_call": ("action",),
    "file_search_call": ("queries",),
    "code_interpreter_call": ("code",),
    "mcp_call": ("server_label", "name", "arguments"),
    "mcp_approval_request": ("server_label", "name", "arguments"),
    "local_shell_call": ("action",),
    "shell_call": ("action",),
    "computer_call": ("action",),
    "apply_patch_call": ("operation",),
    "tool_search_call": ("arguments",),
}
"""What the tool was asked to do, per server-tool item type (the rest is in ``native``)."""


def citation(annotation: Mapping[str, Any]) -> Citation:
    """A Responses annotation (``url_citation``, ``file_citation``, ...) as a Citation."""
    return Citation(
        kind=str(annotation.get("type") or "annotation"),
        url=str_or_none(annotation.get("url")),
        title=str_or_none(annotation.get("title") or annotation.get("filename")),
        start_index=int_or_none(annotation.get("start_index")),
        end_index=int_or_none(annotation.get("end_index")),
        native=dict(annotation),
    )


def item_parts(item: Mapping[str, Any], provenance: Provenance) -> list[AssistantPart]:
    """The parts one output item becomes (see the module table)."""
    item_type = item.get("type")
    if item_type == "message":
        return _message_parts(item, provenance)
    if item_type == "reasoning":
        return [_thinking(item, provenance)]
    if item_type == "function_call":
        return [_function_call(item, provenance)]
    if item_type == "custom_tool_call":
        return [_custom_tool_call(item, provenance)]
    if isinstance(item_type, str) and item_type.endswith("_output"):
        return [
            ServerToolResultPart(
                call_id=str(item.get("call_id") or item.get("id") or ""),
                kind=item_type,
                native=dict(item),
                provenance=provenance,
            )
        ]
    return [_server_tool_call(item, provenance)]


def _message_parts(item: Mapping[str, Any], provenance: Provenance) -> list[AssistantPart]:
    item_id = str_or_none(item.get("id"))
    phase = str_or_none(item.get("phase"))
    parts: list[AssistantPart] = []
    for content in item.get("content") or []:
        content_type = content.get("type")
        if content_type == "output_text":
            annotations = content.get("annotations") or []
            parts.append(
                TextPart(
                    text=text_value(content.get("text") or ""),
                    citations=[citation(a) for a in annotations],
                    item_id=item_id,
                    phase=phase,
                )
            )
        elif content_type == "refusal":
            parts.append(
                RefusalPart(text=text_value(content.get("refusal") or ""), item_id=item_id)
            )
        else:
            # A content type newer than this module: keep the whole item opaque rather
            # than drop the part (a renderer replays it to the same provider only).
            return [_server_tool_call(item, provenance)]
    return parts


def _thinking(item: Mapping[str, Any], provenance: Provenance) -> ThinkingPart:
    summary = [
        str(part.get("text") or "")
        for part in item.get("summary") or []
        if part.get("type") == "summary_text"
    ]
    text = "".join(
        str(part.get("text") or "")
        for part in item.get("content") or []
        if part.get("type") == "reasoning_text"
    )
    return ThinkingPart(
        text=text,
        summary=summary,
        encrypted_content=str_or_none(item.get("encrypted_content")),
        id=str_or_none(item.get("id")),
        provenance=provenance,
    )


def _function_call(item: Mapping[str, Any], provenance: Provenance) -> ToolCallPart:
    arguments, arguments_raw = parse_arguments(str(item.get("arguments") or ""))
    return ToolCallPart(
        id=str(item.get("call_id") or item.get("id") or ""),
        name=str(item.get("name") or ""),
        arguments=arguments,
        arguments_raw=arguments_raw,
        item_id=str_or_none(item.get("id")),
        provenance=provenance,
    )


def _custom_tool_call(item: Mapping[str, Any], provenance: Provenance) -> ToolCallPart:
    return ToolCallPart(
        id=str(item.get("call_id") or item.get("id") or ""),
        name=str(item.get("name") or ""),
        arguments_raw=str(item.get("input") or ""),
        kind="custom",
        item_id=str_or_none(item.get("id")),
        provenance=provenance,
    )


def _server_tool_call(item: Mapping[str, Any], provenance: Provenance) -> ServerToolCallPart:
    item_type = str(item.get("type") or "unknown")
    keys = _SERVER_TOOL_INPUT_KEYS.get(item_type, ())
    tool_input: Any = None
    if len(keys) == 1:
        tool_input = item.get(keys[0])
    elif keys:
        tool_input = {key: item.get(key) for key in keys}
    return ServerToolCallPart(
        id=str(item.get("call_id") or item.get("id") or ""),
        name=item_type.removesuffix("_call"),
        input=tool_input,
        native=dict(item),
        provenance=provenance,
    )


def result_parts(output: Any) -> list[ResultPart]:
    """A caller-sent tool output (a string, or a list of input content parts) as parts."""
    if output is None:
        return []
    if isinstance(output, str):
        return [TextPart(text=output)]
    if isinstance(output, Mapping):
        output = [output]
    if not isinstance(output, list):
        return [TextPart(text=msgspec.json.encode(output).decode())]
    return [_result_part(part) for part in output]


def _result_part(part: Any) -> ResultPart:
    if not isinstance(part, Mapping):
        return TextPart(text=str(part))
    part_type = part.get("type")
    if part_type in ("input_text", "output_text", "text"):
        return TextPart(text=str(part.get("text") or ""))
    if part_type in ("input_image", "computer_screenshot"):
        url = part.get("image_url")
        data, media_type = _split_data_url(url)
        return ImagePart(
            url=None if data is not None else str_or_none(url),
            data=data,
            media_type=media_type,
            file_id=str_or_none(part.get("file_id")),
            detail=str_or_none(part.get("detail")),
        )
    if part_type == "input_file":
        data, media_type = _split_data_url(part.get("file_data"))
        return DocumentPart(
            url=str_or_none(part.get("file_url")),
            data=data,
            media_type=media_type,
            file_id=str_or_none(part.get("file_id")),
            filename=str_or_none(part.get("filename")),
        )
    # Unknown content: keep it readable as JSON text rather than drop it.
    return TextPart(text=msgspec.json.encode(part).decode())


def _split_data_url(url: Any) -> tuple[str | None, str | None]:
    """``data:image/png;base64,AAA`` → ``("AAA", "image/png")``; other values → (None, None)."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None, None
    header, _, data = url.partition(",")
    media_type = header[5:].split(";", 1)[0] or None
    return data, media_type
