"""OpenAI Chat Completions requests: render a derived history, parse a request body.

``render_request(messages, header, policy)`` gives the keyword arguments of
``openai.OpenAI().chat.completions.create``; ``parse_request(kwargs)`` turns a request
body back into Universal Events. Chat-specific rules:

* rule 7: the ``tool`` messages answering an assistant message come right after it,
  before any user message (OpenAI rejects a user message between them,
  mozilla-ai/any-llm PR #1312);
* rule 9: a ``tool`` message carries text only. Images (and documents) in a tool
  result are moved into one ``user`` message right after the window's tool messages,
  introduced by a text naming the call; the tool message says where they went.
* rule 11: the system prompt is the first message, role ``system`` or ``developer``
  (:attr:`~adapters._render.RenderPolicy.chat_system_role`).
* reasoning: OpenAI's Chat API takes no reasoning back; same-origin reasoning is sent
  as ``reasoning_content`` only when the policy asks (compatible servers), foreign
  reasoning follows the foreign-reasoning policy.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import Any, assert_never

from adapters._render import (
    CHAT_TOOL_IDS,
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
    NativeUnknownEvent,
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
    DocumentPart,
    ImagePart,
    Provenance,
    RefusalPart,
    ServerToolCallPart,
    ServerToolResultPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPart,
)

__all__ = ["parse_request", "render_request", "system_role"]

PROVIDER = "openai"
API = "chat"
RUNTIME = "openai-chat-request"
_HISTORY_KEYS = frozenset({"messages", "tools", "model"})
_DEVELOPER_MODELS = re.compile(r"^(o1|o3|o4|gpt-5)")


@functools.cache
def _accepted() -> frozenset[str]:
    from openai.resources.chat.completions import Completions

    return create_parameters(Completions.create)


def system_role(model: str, policy: RenderPolicy) -> str:
    """``system`` or ``developer`` for this model (rule 11)."""
    if policy.chat_system_role != "auto":
        return policy.chat_system_role
    return "developer" if _DEVELOPER_MODELS.match(model) else "system"


# ================================================================ render


def render_request(
    messages: Sequence[Message],
    header: RequestHeaderEvent | None,
    policy: RenderPolicy | None = None,
    *,
    warnings: list[WarningEvent] | None = None,
    cache: RenderCache | None = None,
) -> dict[str, Any]:
    """The ``chat.completions.create`` keyword arguments for this history and header."""
    policy = policy or RenderPolicy()
    target = target_provenance(PROVIDER, API, header, policy)
    assert target.model is not None
    found: list[WarningEvent] = []
    sampling, dropped = translate_sampling(
        merged_sampling(header), header.api if header is not None else API, API
    )
    found.extend(dropped)
    wire, history_warnings = render_history(
        messages,
        functools.partial(_render_group, target=target, policy=policy),
        policy,
        cache=cache,
        cache_key=(PROVIDER, API, target.model, policy),
    )
    found.extend(history_warnings)
    if header is not None and header.system:
        system = {"role": system_role(target.model, policy), "content": header.system}
        wire = [system, *wire]
    kwargs: dict[str, Any] = {"model": target.model, "messages": wire}
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
    group: Group, *, target: Provenance, policy: RenderPolicy
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if group.assistant is not None:
        assistant = _assistant_message(group.assistant, target, policy, group.warnings)
        if assistant is not None:
            out.append(assistant)
    moved: list[dict[str, Any]] = []
    for result in group.results:
        tool_message, media = _tool_message(result, group.warnings)
        out.append(tool_message)
        moved.extend(media)
    if moved:  # rule 9: after every tool message of the window, never between them
        out.append({"role": "user", "content": moved})
    for user in group.users:
        content = _user_content(user.content, group.warnings)
        if content:
            out.append({"role": "user", "content": content})
        else:
            group.warnings.append(
                warning("empty_message", f"user message at seq {user.seq} has no content; dropped")
            )
    return out


def _assistant_message(
    message: AssistantMessage,
    target: Provenance,
    policy: RenderPolicy,
    warnings: list[WarningEvent],
) -> dict[str, Any] | None:
    texts: list[str] = []
    refusals: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    native = same_origin(message.provenance, target)
    for part in message.content:
        if isinstance(part, TextPart):
            if not is_blank(part.text):
                texts.append(part.text)
        elif isinstance(part, RefusalPart):
            (refusals if native else texts).append(part.text)
        elif isinstance(part, ThinkingPart):
            if same_origin(reasoning_origin(part, message), target) and part.text:
                if policy.chat_reasoning_content:
                    reasoning.append(part.text)
                continue
            text = foreign_reasoning_text(part, policy)
            warnings.append(
                warning(
                    "reasoning_dropped" if text is None else "reasoning_as_text",
                    "reasoning from another provider/api/model "
                    + ("dropped" if text is None else "sent as text"),
                )
            )
            if text is not None:
                texts.append(text)
        elif isinstance(part, ToolCallPart):
            calls.append(_tool_call(part))
        elif isinstance(part, ServerToolCallPart | ServerToolResultPart | ImagePart):
            warnings.append(
                warning(
                    "content_dropped",
                    f"{type(part).__name__} has no Chat Completions form; dropped",
                )
            )
        else:
            assert_never(part)
    if not (texts or refusals or calls):
        return None
    rendered: dict[str, Any] = {"role": "assistant"}
    if texts:
        rendered["content"] = "\n\n".join(texts)
    if refusals:
        rendered["refusal"] = "\n\n".join(refusals)
    if reasoning:
        rendered["reasoning_content"] = "\n\n".join(reasoning)
    if calls:
        rendered["tool_calls"] = calls
    return rendered


def _tool_call(part: ToolCallPart) -> dict[str, Any]:
    call_id = map_tool_call_id(part.id, CHAT_TOOL_IDS)
    if part.kind == "custom":
        return {
            "id": call_id,
            "type": "custom",
            "custom": {"name": part.name, "input": part.arguments_raw or ""},
        }
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": part.name, "arguments": json_arguments(part)},
    }


def _tool_message(
    result: ToolMessage, warnings: list[WarningEvent]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The tool message (text only) and the media moved out of it (rule 9)."""
    call_id = map_tool_call_id(result.call_id, CHAT_TOOL_IDS)
    if len(result.content) == 1 and type(result.content[0]) is TextPart:  # the common case
        only = result.content[0].text
        return {"role": "tool", "tool_call_id": call_id, "content": only}, []
    texts = [p.text for p in result.content if isinstance(p, TextPart) and not is_blank(p.text)]
    media: list[dict[str, Any]] = []
    for part in result.content:
        if isinstance(part, TextPart):
            continue
        rendered = _user_part(part, warnings)
        if rendered is not None:
            media.append(rendered)
    if media:
        media.insert(0, {"type": "text", "text": f"Attachments of tool result {call_id}:"})
        texts.append("(attachments follow in the next user message)")
    content: str | list[dict[str, Any]]
    if len(texts) == 1:
        content = texts[0]
    elif texts:
        content = [{"type": "text", "text": text} for text in texts]
    else:
        content = ""
    return {"role": "tool", "tool_call_id": call_id, "content": content}, media


def _user_content(
    parts: Sequence[UserPart], warnings: list[WarningEvent]
) -> str | list[dict[str, Any]]:
    """A lone text part travels as a plain string, anything else as content parts.

    Blank text parts are left out (rule 8 holds for every target)."""
    parts = [p for p in parts if not (isinstance(p, TextPart) and is_blank(p.text))]
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    rendered = [r for part in parts if (r := _user_part(part, warnings)) is not None]
    return rendered


def _user_part(part: UserPart, warnings: list[WarningEvent]) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        url = part.url or (data_url(part.media_type, part.data) if part.data else None)
        if url is None:
            warnings.append(warning("image_dropped", "image without url or data for Chat"))
            return None
        image: dict[str, Any] = {"url": url}
        if part.detail is not None:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    if isinstance(part, DocumentPart):
        if part.text is not None:
            return {"type": "text", "text": part.text}
        file: dict[str, Any] = {}
        if part.file_id is not None:
            file["file_id"] = part.file_id
        elif part.data is not None:
            file["file_data"] = data_url(part.media_type or "application/pdf", part.data)
            file["filename"] = part.filename or "document.pdf"
        else:
            warnings.append(warning("document_dropped", "document by URL has no Chat form"))
            return None
        return {"type": "file", "file": file}
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
            function: dict[str, Any] = {
                "name": spec.name,
                "parameters": spec.input_schema or {"type": "object", "properties": {}},
            }
            if spec.description:
                function["description"] = spec.description
            tools.append({"type": "function", "function": function})
        elif spec.kind == "custom":
            tools.append({"type": "custom", "custom": {"name": spec.name}})
        else:
            warnings.append(
                warning(
                    "tool_dropped",
                    f"provider tool {spec.name!r} has no Chat Completions equivalent",
                )
            )
    return tools


# ================================================================ parse


def parse_request(kwargs: dict[str, Any]) -> list[Event]:
    """A ``chat.completions.create`` body as events: the header, then the history.

    Leading ``system`` / ``developer`` messages become the header's system prompt
    (joined by a blank line); later ones become user messages (Chat is the only format
    that allows them mid-history). Assistant content gets the provenance
    ``("openai", "chat", model)``.
    """
    body = {**kwargs, **(kwargs.get("extra_body") or {})}
    body.pop("extra_body", None)
    model = body.get("model")
    provenance = Provenance(provider=PROVIDER, api=API, model=model)
    history: list[dict[str, Any]] = list(body.get("messages") or [])
    system: list[str] = []
    while history and history[0].get("role") in ("system", "developer"):
        system.append(_text_of(history.pop(0).get("content")))
    events: list[Event] = [
        RequestHeaderEvent(
            provider=PROVIDER,
            api=API,
            model=model,
            system="\n\n".join(system) if system else None,
            tools=[_parse_tool(tool) for tool in body.get("tools") or []],
            sampling={key: value for key, value in body.items() if key not in _HISTORY_KEYS},
            source=_source("request"),
        )
    ]
    for index, message in enumerate(history):
        events.extend(_parse_message(message, provenance, index))
    return events


def _source(native_type: str, model: str | None = None) -> Source:
    return Source(runtime=RUNTIME, native_type=native_type, model=model)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _parse_tool(tool: dict[str, Any]) -> ToolSpec:
    if tool.get("type") == "function":
        function = tool.get("function") or {}
        return ToolSpec(
            name=function.get("name", ""),
            description=function.get("description"),
            input_schema=function.get("parameters"),
            native=tool,
        )
    if tool.get("type") == "custom":
        custom = tool.get("custom") or {}
        return ToolSpec(
            name=custom.get("name", ""),
            description=custom.get("description"),
            kind="custom",
            native=tool,
        )
    return ToolSpec(name=str(tool.get("type")), kind="server", native=tool)


def _parse_message(message: dict[str, Any], provenance: Provenance, index: int) -> list[Event]:
    role = message.get("role")
    if role in ("user", "system", "developer"):
        return [
            UserMessageEvent(
                content=_parse_user_content(message.get("content")), source=_source(str(role))
            )
        ]
    if role == "assistant":
        return [_parse_assistant(message, provenance)]
    if role == "tool":
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [_text_of([p]) for p in content or []]
        return [
            ToolResultEvent(
                call_id=message["tool_call_id"],
                content=[TextPart(text=text) for text in texts],
                source=_source("tool"),
            )
        ]
    return [
        NativeUnknownEvent(
            runtime=RUNTIME,
            native_type=str(role),
            payload=message,
            reason=f"message role {role!r} in messages[{index}] is not rendered back",
            source=_source(str(role)),
        )
    ]


def _parse_user_content(content: Any) -> list[UserPart]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[UserPart] = []
    for part in content or []:
        kind = part.get("type")
        if kind == "text":
            parts.append(TextPart(text=part["text"]))
        elif kind == "image_url":
            image = part.get("image_url") or {}
            url = image.get("url", "")
            inline = parse_data_url(url)
            parts.append(
                ImagePart(url=url, detail=image.get("detail"))
                if inline is None
                else ImagePart(data=inline[1], media_type=inline[0], detail=image.get("detail"))
            )
        elif kind == "file":
            file = part.get("file") or {}
            inline = parse_data_url(file.get("file_data", ""))
            parts.append(
                DocumentPart(
                    file_id=file.get("file_id"),
                    data=inline[1] if inline else None,
                    media_type=inline[0] if inline else None,
                    filename=file.get("filename"),
                )
            )
        else:
            parts.append(TextPart(text=json.dumps(part)))
    return parts


def _parse_assistant(message: dict[str, Any], provenance: Provenance) -> AssistantMessageEvent:
    parts: list[AssistantPart] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append(ThinkingPart(text=reasoning, provenance=provenance))
    content = message.get("content")
    if isinstance(content, str):
        if content:
            parts.append(TextPart(text=content))
    else:
        for part in content or []:
            if part.get("type") == "refusal":
                parts.append(RefusalPart(text=part.get("refusal", "")))
            else:
                parts.append(TextPart(text=part.get("text", "")))
    if message.get("refusal"):
        parts.append(RefusalPart(text=message["refusal"]))
    for call in message.get("tool_calls") or []:
        parts.append(_parse_tool_call(call, provenance))
    return AssistantMessageEvent(
        content=parts, provenance=provenance, source=_source("assistant", provenance.model)
    )


def _parse_tool_call(call: dict[str, Any], provenance: Provenance) -> ToolCallPart:
    if call.get("type") == "custom":
        custom = call.get("custom") or {}
        return ToolCallPart(
            id=call["id"],
            name=custom.get("name", ""),
            arguments_raw=custom.get("input", ""),
            kind="custom",
            provenance=provenance,
        )
    function = call.get("function") or {}
    raw = function.get("arguments", "")
    try:
        arguments = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return ToolCallPart(
            id=call["id"], name=function.get("name", ""), arguments_raw=raw, provenance=provenance
        )
    compact = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    return ToolCallPart(
        id=call["id"],
        name=function.get("name", ""),
        arguments=arguments,
        arguments_raw=None if compact == raw else raw,
        provenance=provenance,
    )
