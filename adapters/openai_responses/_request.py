"""OpenAI Responses requests: render a derived history, parse a request body.

``render_request(messages, header, policy)`` gives the keyword arguments of
``openai.OpenAI().responses.create`` (stateless: the whole history in ``input``, no
``previous_response_id``); ``parse_request(kwargs)`` turns a request body back into
Universal Events. Responses-specific rules:

* rule 4: a ``reasoning`` item is replayed only to the same provider/api/model, only
  with its ``rs_`` id, only when an item follows it in the same assistant message
  (an ``rs_`` item without its following item fails: vercel/ai#7099), and, with
  ``store=false``, only with its ``encrypted_content`` (else "item not found",
  opencode#7724). ``summary`` is always present, ``[]`` when empty (Agora#141). When
  any reasoning of a message is not replayed, the message's ``fc_`` / ``msg_`` item ids
  are left out too (an ``fc_`` item without its ``rs_`` fails: mastra#8738).
* rule 5: ``call_id`` carries the (mapped) tool-call id; the ``fc_`` item ``id`` is a
  different thing, sent only back to its origin.
* rule 11: the system prompt goes in ``instructions``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any, assert_never

from adapters._render import (
    RESPONSES_TOOL_IDS,
    Group,
    RenderCache,
    RenderPolicy,
    create_parameters,
    data_url,
    foreign_reasoning_text,
    is_blank,
    json_arguments,
    map_tool_call_id,
    merged_sampling,
    parse_data_url,
    reasoning_origin,
    render_history,
    same_origin,
    split_create_kwargs,
    target_provenance,
    translate_sampling,
    warning,
)
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    RequestHeaderEvent,
    Source,
    ToolResultEvent,
    ToolSpec,
    UserMessageEvent,
    WarningEvent,
)
from universal_event.messages import AssistantMessage, Message, ToolMessage
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
    UserPart,
)

__all__ = ["parse_request", "render_request"]

PROVIDER = "openai"
API = "responses"
RUNTIME = "openai-responses-request"
_HISTORY_KEYS = frozenset({"input", "instructions", "tools", "model"})
_USER_ROLES = ("user", "system", "developer")


@functools.cache
def _accepted() -> frozenset[str]:
    from openai.resources.responses import Responses

    return create_parameters(Responses.create)


# ================================================================ render


def render_request(
    messages: Sequence[Message],
    header: RequestHeaderEvent | None,
    policy: RenderPolicy | None = None,
    *,
    warnings: list[WarningEvent] | None = None,
    cache: RenderCache | None = None,
) -> dict[str, Any]:
    """The ``responses.create`` keyword arguments for this history and header."""
    policy = policy or RenderPolicy()
    target = target_provenance(PROVIDER, API, header, policy)
    found: list[WarningEvent] = []
    sampling, dropped = translate_sampling(
        merged_sampling(header), header.api if header is not None else API, API
    )
    found.extend(dropped)
    stored = sampling.get("store") is not False
    wire, history_warnings = render_history(
        messages,
        functools.partial(_render_group, target=target, policy=policy, stored=stored),
        policy,
        cache=cache,
        cache_key=(PROVIDER, API, target.model, policy, stored),
    )
    found.extend(history_warnings)
    kwargs: dict[str, Any] = {"model": target.model, "input": wire}
    if header is not None and header.system is not None:
        kwargs["instructions"] = header.system
    tools = _render_tools(header, found)
    if tools:
        kwargs["tools"] = tools
    for key, value in sampling.items():
        if key not in _HISTORY_KEYS:
            kwargs[key] = value
    if warnings is not None:
        warnings.extend(found)
    return split_create_kwargs(kwargs, _accepted())


def _render_group(
    group: Group, *, target: Provenance, policy: RenderPolicy, stored: bool
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if group.assistant is not None:
        out.extend(_assistant_items(group.assistant, target, policy, stored, group.warnings))
    for result in group.results:
        call = group.call(result.call_id)
        custom = call is not None and call.kind == "custom"
        out.append(
            {
                "type": "custom_tool_call_output" if custom else "function_call_output",
                "call_id": map_tool_call_id(result.call_id, RESPONSES_TOOL_IDS),
                "output": _output(result, group.warnings),
            }
        )
    for user in group.users:
        content = _user_content(user.content, group.warnings)
        if content:
            out.append({"role": "user", "content": content})
    return out


def _replayable(
    part: ThinkingPart,
    message: AssistantMessage,
    index: int,
    target: Provenance,
    stored: bool,
) -> bool:
    """Rule 4: same origin, an ``rs_`` id, a following item, and encrypted content
    unless the API keeps the items (``store`` not false)."""
    if not same_origin(reasoning_origin(part, message), target) or not part.id:
        return False
    if part.encrypted_content is None and not stored:
        return False
    return any(not isinstance(later, ThinkingPart) for later in message.content[index + 1 :])


def _assistant_items(
    message: AssistantMessage,
    target: Provenance,
    policy: RenderPolicy,
    stored: bool,
    warnings: list[WarningEvent],
) -> list[dict[str, Any]]:
    native = same_origin(message.provenance, target)
    replay = [
        isinstance(part, ThinkingPart) and _replayable(part, message, index, target, stored)
        for index, part in enumerate(message.content)
    ]
    keep_ids = native and all(
        flag or not isinstance(part, ThinkingPart)
        for flag, part in zip(replay, message.content, strict=True)
    )
    items: list[dict[str, Any]] = []
    for part, replayed in zip(message.content, replay, strict=True):
        if isinstance(part, TextPart | RefusalPart):
            _add_text(items, part, native, keep_ids)
        elif isinstance(part, ThinkingPart):
            if replayed:
                items.append(_reasoning_item(part))
                continue
            text = foreign_reasoning_text(part, policy)
            warnings.append(
                warning(
                    "reasoning_dropped" if text is None else "reasoning_as_text",
                    "reasoning not replayable to "
                    f"{target.provider}/{target.api}/{target.model} "
                    "(other origin, no rs_ id, no following item, or store=false without "
                    "encrypted_content) " + ("dropped" if text is None else "sent as text"),
                )
            )
            if text is not None:
                items.append({"role": "assistant", "content": text})
        elif isinstance(part, ToolCallPart):
            items.append(_call_item(part, keep_ids))
        elif isinstance(part, ServerToolCallPart | ServerToolResultPart):
            origin = part.provenance or message.provenance
            if origin is not None and origin.provider == PROVIDER and origin.api == API:
                items.append(_replay_item(part.native))
            else:
                warnings.append(
                    warning("server_tool_dropped", f"{type(part).__name__} of another provider")
                )
        elif isinstance(part, ImagePart):
            warnings.append(warning("image_dropped", "no images in Responses assistant items"))
        else:
            assert_never(part)
    return items


def _add_text(
    items: list[dict[str, Any]], part: TextPart | RefusalPart, native: bool, keep_ids: bool
) -> None:
    """Text joins its ``msg_`` output message when replayed natively, else is an easy
    assistant message of its own."""
    if is_blank(part.text):
        return
    item_id = part.item_id if keep_ids and native else None
    if item_id is None:
        items.append({"role": "assistant", "content": part.text})
        return
    if isinstance(part, RefusalPart):
        content: dict[str, Any] = {"type": "refusal", "refusal": part.text}
    else:
        annotations = [c.native for c in part.citations if c.native is not None]
        content = {"type": "output_text", "text": part.text, "annotations": annotations}
    last = items[-1] if items else None
    if last is not None and last.get("type") == "message" and last.get("id") == item_id:
        last["content"].append(content)
        return
    item: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "id": item_id,
        "status": "completed",
        "content": [content],
    }
    if isinstance(part, TextPart) and part.phase is not None:
        item["phase"] = part.phase
    items.append(item)


def _replay_item(native: dict[str, Any]) -> dict[str, Any]:
    """A server-tool output item as input. ``web_search_call.action.sources`` is output
    only (sent when ``include`` asks for it, with source types such as ``api`` that the
    input schema lacks: the SDK's ``ResponseInputParam`` rejects them); clients replay
    the item without it (fixtures/recorded/openai-responses/stream_web_search_call #1,
    HTTP 200)."""
    item = dict(native)
    action = item.get("action")
    if item.get("type") == "web_search_call" and isinstance(action, dict) and "sources" in action:
        item["action"] = {key: value for key, value in action.items() if key != "sources"}
    return item


def _reasoning_item(part: ThinkingPart) -> dict[str, Any]:
    summary = part.summary if part.summary is not None else ([part.text] if part.text else [])
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": part.id,
        "summary": [{"type": "summary_text", "text": text} for text in summary],
    }
    if part.encrypted_content is not None:
        item["encrypted_content"] = part.encrypted_content
    return item


def _call_item(part: ToolCallPart, keep_ids: bool) -> dict[str, Any]:
    call_id = map_tool_call_id(part.id, RESPONSES_TOOL_IDS)
    item: dict[str, Any]
    if part.kind == "custom":
        item = {
            "type": "custom_tool_call",
            "call_id": call_id,
            "name": part.name,
            "input": part.arguments_raw or "",
        }
    else:
        item = {
            "type": "function_call",
            "call_id": call_id,
            "name": part.name,
            "arguments": json_arguments(part),
        }
    if keep_ids and part.item_id is not None:
        item["id"] = part.item_id
    return item


def _output(result: ToolMessage, warnings: list[WarningEvent]) -> str | list[dict[str, Any]]:
    if not result.content:
        return ""
    only = result.content[0]
    if len(result.content) == 1 and isinstance(only, TextPart):
        return only.text
    return [r for part in result.content if (r := _input_part(part, warnings)) is not None]


def _user_content(
    parts: Sequence[UserPart], warnings: list[WarningEvent]
) -> str | list[dict[str, Any]]:
    parts = [p for p in parts if not (isinstance(p, TextPart) and is_blank(p.text))]  # rule 8
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    return [r for part in parts if (r := _input_part(part, warnings)) is not None]


def _input_part(part: ResultPart, warnings: list[WarningEvent]) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        image: dict[str, Any] = {"type": "input_image", "detail": part.detail or "auto"}
        if part.file_id is not None:
            image["file_id"] = part.file_id
        elif part.url is not None:
            image["image_url"] = part.url
        elif part.data is not None:
            image["image_url"] = data_url(part.media_type, part.data)
        else:
            warnings.append(warning("image_dropped", "image without url, data or file id"))
            return None
        return image
    if isinstance(part, DocumentPart):
        if part.text is not None:
            return {"type": "input_text", "text": part.text}
        file: dict[str, Any] = {"type": "input_file"}
        if part.file_id is not None:
            file["file_id"] = part.file_id
        elif part.data is not None:
            file["file_data"] = data_url(part.media_type or "application/pdf", part.data)
            file["filename"] = part.filename or "document.pdf"
        elif part.url is not None:
            file["file_url"] = part.url
        return file
    assert_never(part)


def _render_tools(
    header: RequestHeaderEvent | None, warnings: list[WarningEvent]
) -> list[dict[str, Any]]:
    if header is None:
        return []
    native_header = header.provider == PROVIDER and header.api == API
    tools = []
    for spec in header.tools:
        if native_header and spec.native is not None:
            tools.append(dict(spec.native))
        elif spec.kind == "function":
            tools.append(
                {
                    "type": "function",
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.input_schema or {"type": "object", "properties": {}},
                    # schemas written for other providers are rarely strict-mode valid
                    "strict": False,
                }
            )
        elif spec.kind == "custom":
            tools.append({"type": "custom", "name": spec.name, "description": spec.description})
        else:
            warnings.append(
                warning("tool_dropped", f"provider tool {spec.name!r} has no Responses form")
            )
    return tools


# ================================================================ parse


def parse_request(kwargs: dict[str, Any]) -> list[Event]:
    """A ``responses.create`` body as events: the header, then the history.

    Consecutive output items (``reasoning``, assistant ``message``, ``function_call``,
    ``custom_tool_call``, server-tool items) form one assistant message; a user message
    or a tool output closes it. Server-tool and other provider items are kept whole as
    :class:`ServerToolCallPart` for a same-provider replay.
    """
    body = {**kwargs, **(kwargs.get("extra_body") or {})}
    body.pop("extra_body", None)
    model = body.get("model")
    provenance = Provenance(provider=PROVIDER, api=API, model=model)
    events: list[Event] = [
        RequestHeaderEvent(
            provider=PROVIDER,
            api=API,
            model=model,
            system=body.get("instructions"),
            tools=[_parse_tool(tool) for tool in body.get("tools") or []],
            sampling={key: value for key, value in body.items() if key not in _HISTORY_KEYS},
            source=_source("request"),
        )
    ]
    raw = body.get("input")
    items: list[dict[str, Any]] = (
        [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
    )
    pending: list[AssistantPart] = []

    def flush() -> None:
        if pending:
            events.append(
                AssistantMessageEvent(
                    content=list(pending),
                    provenance=provenance,
                    source=_source("message", model),
                )
            )
            pending.clear()

    for item in items:
        kind = item.get("type", "message")
        role = item.get("role")
        if kind == "message" and role in _USER_ROLES:
            flush()
            events.append(
                UserMessageEvent(
                    content=_parse_input_content(item.get("content")), source=_source(str(role))
                )
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            flush()
            events.append(
                ToolResultEvent(
                    call_id=item["call_id"],
                    content=_parse_output(item.get("output")),
                    source=_source(kind),
                )
            )
        else:
            pending.extend(_parse_output_item(item, provenance))
    flush()
    return events


def _source(native_type: str, model: str | None = None) -> Source:
    return Source(runtime=RUNTIME, native_type=native_type, model=model)


def _parse_tool(tool: dict[str, Any]) -> ToolSpec:
    kind = tool.get("type")
    if kind in ("function", "custom"):
        return ToolSpec(
            name=tool.get("name", ""),
            description=tool.get("description"),
            input_schema=tool.get("parameters"),
            kind=kind,
            native=tool,
        )
    return ToolSpec(name=str(kind), kind="server", native=tool)


def _parse_output_item(item: dict[str, Any], provenance: Provenance) -> list[AssistantPart]:
    kind = item.get("type", "message")
    if kind == "message":
        content = item.get("content")
        if isinstance(content, str):
            return [TextPart(text=content)]
        parts: list[AssistantPart] = []
        for block in content or []:
            if block.get("type") == "refusal":
                parts.append(RefusalPart(text=block.get("refusal", ""), item_id=item.get("id")))
            else:
                parts.append(
                    TextPart(
                        text=block.get("text", ""),
                        citations=[
                            Citation(kind=a.get("type", ""), url=a.get("url"), native=a)
                            for a in block.get("annotations") or []
                        ],
                        item_id=item.get("id"),
                        phase=item.get("phase"),
                    )
                )
        return parts
    if kind == "reasoning":
        summary = [s.get("text", "") for s in item.get("summary") or []]
        content_texts = [c.get("text", "") for c in item.get("content") or []]
        return [
            ThinkingPart(
                text="\n\n".join(summary or content_texts),
                summary=summary,
                encrypted_content=item.get("encrypted_content"),
                id=item.get("id"),
                provenance=provenance,
            )
        ]
    if kind == "function_call":
        raw = item.get("arguments", "")
        try:
            arguments = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            arguments = None
        compact = (
            json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
            if arguments is not None
            else None
        )
        return [
            ToolCallPart(
                id=item["call_id"],
                name=item.get("name", ""),
                arguments=arguments,
                arguments_raw=None if compact == raw else raw,
                item_id=item.get("id"),
                provenance=provenance,
            )
        ]
    if kind == "custom_tool_call":
        return [
            ToolCallPart(
                id=item["call_id"],
                name=item.get("name", ""),
                arguments_raw=item.get("input", ""),
                kind="custom",
                item_id=item.get("id"),
                provenance=provenance,
            )
        ]
    return [
        ServerToolCallPart(
            id=str(item.get("id") or item.get("call_id") or ""),
            name=str(kind),
            native=item,
            provenance=provenance,
        )
    ]


def _parse_input_content(content: Any) -> list[UserPart]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    return [_parse_input_part(part) for part in content or []]


def _parse_output(output: Any) -> list[ResultPart]:
    if isinstance(output, str):
        return [TextPart(text=output)]
    return [_parse_input_part(part) for part in output or []]


def _parse_input_part(part: dict[str, Any]) -> UserPart:
    kind = part.get("type")
    if kind == "input_image":
        url = part.get("image_url")
        inline = parse_data_url(url) if url else None
        return ImagePart(
            url=None if inline else url,
            data=inline[1] if inline else None,
            media_type=inline[0] if inline else None,
            file_id=part.get("file_id"),
            detail=part.get("detail"),
        )
    if kind == "input_file":
        inline = parse_data_url(part.get("file_data") or "")
        return DocumentPart(
            url=part.get("file_url"),
            data=inline[1] if inline else None,
            media_type=inline[0] if inline else None,
            file_id=part.get("file_id"),
            filename=part.get("filename"),
        )
    return TextPart(text=part.get("text", ""))
