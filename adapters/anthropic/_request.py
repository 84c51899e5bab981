"""Anthropic Messages requests: render a derived history, parse a request body.

``render_request(messages, header, policy)`` gives the keyword arguments of
``anthropic.Anthropic().messages.create``; ``parse_request(kwargs)`` turns a request
body (its ``system``, ``tools``, settings and ``messages``) back into Universal Events.
The shared rules live in :mod:`adapters._render`; the Anthropic-specific ones are here:

* rule 3: with ``thinking`` on, when the request continues a tool loop (the last
  assistant message is followed only by tool results) that assistant message must
  start with a ``thinking`` / ``redacted_thinking`` block; otherwise thinking is turned
  off for this request (``thinking_disabled`` warning) or, by policy, an error;
* rule 7: all tool results of an assistant message go in one user message, before
  any user text of the same window;
* rule 8: no empty or whitespace-only text blocks;
* rule 10: ``cache_control`` kept on text, image, document, tool_use and tool_result
  blocks (never on thinking blocks, which cannot carry it);
* rule 11: the system prompt goes in ``system``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, assert_never

import msgspec

from adapters._render import (
    ANTHROPIC_TOOL_IDS,
    Group,
    RenderCache,
    RenderPolicy,
    create_parameters,
    foreign_reasoning_text,
    is_blank,
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
from universal_event.errors import RenderError
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

PROVIDER = "anthropic"
API = "messages"
RUNTIME = "anthropic-request"
_HISTORY_KEYS = frozenset({"messages", "system", "tools", "model"})


@functools.cache
def _accepted() -> frozenset[str]:
    from anthropic.resources.messages import Messages

    return create_parameters(Messages.create)


# ================================================================ render


def render_request(
    messages: Sequence[Message],
    header: RequestHeaderEvent | None,
    policy: RenderPolicy | None = None,
    *,
    warnings: list[WarningEvent] | None = None,
    cache: RenderCache | None = None,
) -> dict[str, Any]:
    """The ``messages.create`` keyword arguments for this history and header.

    ``warnings`` (when given) receives a :class:`WarningEvent` for everything repaired
    or dropped; ``cache`` (one per session) makes re-rendering after an append cheap.
    """
    policy = policy or RenderPolicy()
    target = target_provenance(PROVIDER, API, header, policy)
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
    kwargs: dict[str, Any] = {"model": target.model, "messages": wire}
    if header is not None and header.system:
        kwargs["system"] = header.system
    tools = _render_tools(header, found)
    if tools:
        kwargs["tools"] = tools
    for key, value in sampling.items():
        if key not in _HISTORY_KEYS:
            kwargs[key] = value
    kwargs.setdefault("max_tokens", policy.default_max_tokens)
    _check_thinking_start(kwargs, policy, found)
    if warnings is not None:
        warnings.extend(found)
    return split_create_kwargs(kwargs, _accepted())


def _render_group(
    group: Group, *, target: Provenance, policy: RenderPolicy
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if group.assistant is not None:
        content = _assistant_blocks(group.assistant, target, policy, group.warnings)
        if content:
            out.append({"role": "assistant", "content": content})
        elif group.results:
            raise RenderError(
                f"assistant message at seq {group.assistant.seq} renders empty but has tool calls"
            )
    # rule 7: every result of this window in one user message, before any user text;
    # the first user message of the window joins it (as Claude Code sends it)
    pending = [_tool_result_block(result, policy, group.warnings) for result in group.results]
    for user in group.users:
        rendered = _user_blocks(user.content, policy, group.warnings)
        if not rendered:
            group.warnings.append(
                warning("empty_message", f"user message at seq {user.seq} has no content; dropped")
            )
            continue
        out.append({"role": "user", "content": pending + rendered})
        pending = []
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def _check_thinking_start(
    kwargs: dict[str, Any], policy: RenderPolicy, warnings: list[WarningEvent]
) -> None:
    """Rule 3: a tool loop continued with thinking on must end on a thinking-led turn.

    The API answers 400 "Expected `thinking` or `redacted_thinking`, but found `text`"
    otherwise (openai-agents-python#1704, pydantic-ai#2040, litellm#9020).
    """
    thinking = kwargs.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "adaptive"):
        return
    history: list[dict[str, Any]] = kwargs["messages"]
    last_assistant = next(
        (i for i in range(len(history) - 1, -1, -1) if history[i]["role"] == "assistant"), None
    )
    if last_assistant is None:
        return
    after = history[last_assistant + 1 :]
    continues_loop = all(
        isinstance(m["content"], list) and m["content"][0].get("type") == "tool_result"
        for m in after
    )
    first = history[last_assistant]["content"][0]
    if not continues_loop or first.get("type") in ("thinking", "redacted_thinking"):
        return
    if policy.thinking_fallback == "error":
        raise RenderError(
            "thinking is enabled but the last assistant turn of the tool loop does not "
            f"start with a thinking block (it starts with {first.get('type')!r})"
        )
    kwargs["thinking"] = {"type": "disabled"}
    warnings.append(
        warning(
            "thinking_disabled",
            "thinking turned off for this request: the last assistant turn of the tool "
            f"loop starts with {first.get('type')!r}, not a replayable thinking block",
        )
    )


def _assistant_blocks(
    message: AssistantMessage,
    target: Provenance,
    policy: RenderPolicy,
    warnings: list[WarningEvent],
) -> list[dict[str, Any]]:
    native = same_origin(message.provenance, target)
    blocks: list[dict[str, Any]] = []
    for part in message.content:
        block = _assistant_block(part, message, native, target, policy, warnings)
        if block is not None:
            blocks.append(block)
    return blocks


def _assistant_block(
    part: AssistantPart,
    message: AssistantMessage,
    native: bool,
    target: Provenance,
    policy: RenderPolicy,
    warnings: list[WarningEvent],
) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return _text_block(part, policy, citations=native)
    if isinstance(part, RefusalPart):
        return None if is_blank(part.text) else {"type": "text", "text": part.text}
    if isinstance(part, ThinkingPart):
        return _thinking_block(part, message, target, policy, warnings)
    if isinstance(part, ToolCallPart):
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": map_tool_call_id(part.id, ANTHROPIC_TOOL_IDS),
            "name": part.name,
            "input": _tool_input(part),
        }
        if part.cache_control is not None and policy.keep_cache_control:
            block["cache_control"] = part.cache_control
        return block
    if isinstance(part, ServerToolCallPart | ServerToolResultPart):
        origin = part.provenance or message.provenance
        if origin is not None and origin.provider == PROVIDER and origin.api == API:
            return dict(part.native)
        warnings.append(
            warning(
                "server_tool_dropped",
                f"{type(part).__name__} from {origin.provider if origin else 'unknown'} "
                "cannot be replayed to Anthropic; dropped",
            )
        )
        return None
    if isinstance(part, ImagePart):
        warnings.append(warning("image_dropped", "Anthropic takes no images in assistant turns"))
        return None
    assert_never(part)


def _thinking_block(
    part: ThinkingPart,
    message: AssistantMessage,
    target: Provenance,
    policy: RenderPolicy,
    warnings: list[WarningEvent],
) -> dict[str, Any] | None:
    """Rules 1-2: a signed block only to the model that signed it, else the policy."""
    if same_origin(reasoning_origin(part, message), target):
        if part.redacted_data is not None:
            return {"type": "redacted_thinking", "data": part.redacted_data}
        if part.signature:
            return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    text = foreign_reasoning_text(part, policy)
    warnings.append(
        warning(
            "reasoning_dropped" if text is None else "reasoning_as_text",
            "reasoning without a signature valid for "
            f"{target.provider}/{target.api}/{target.model} "
            + ("dropped" if text is None else "sent as text"),
            origin=msgspec.to_builtins(reasoning_origin(part, message)),
        )
    )
    return None if text is None else {"type": "text", "text": text}


def _tool_input(part: ToolCallPart) -> Any:
    if part.arguments is not None:
        return part.arguments
    if part.kind == "custom" or part.arguments_raw:
        # a freeform (custom) tool's text input, or arguments that were not JSON:
        # Anthropic wants an object, so the text travels under "input"
        return {"input": part.arguments_raw or ""}
    return {}


def _text_block(part: TextPart, policy: RenderPolicy, *, citations: bool) -> dict[str, Any] | None:
    if is_blank(part.text):  # rule 8
        return None
    block: dict[str, Any] = {"type": "text", "text": part.text}
    if citations and part.citations and all(c.native for c in part.citations):
        block["citations"] = [c.native for c in part.citations]
    if part.cache_control is not None and policy.keep_cache_control:
        block["cache_control"] = part.cache_control
    return block


def _user_blocks(
    parts: Sequence[UserPart], policy: RenderPolicy, warnings: list[WarningEvent]
) -> list[dict[str, Any]]:
    blocks = []
    for part in parts:
        block = _user_block(part, policy, warnings)
        if block is not None:
            blocks.append(block)
    return blocks


def _user_block(
    part: UserPart, policy: RenderPolicy, warnings: list[WarningEvent]
) -> dict[str, Any] | None:
    block: dict[str, Any] | None
    if isinstance(part, TextPart):
        return _text_block(part, policy, citations=False)
    if isinstance(part, ImagePart):
        block = _image_block(part, warnings)
    elif isinstance(part, DocumentPart):
        block = _document_block(part, warnings)
    else:
        assert_never(part)
    if block is not None and part.cache_control is not None and policy.keep_cache_control:
        block["cache_control"] = part.cache_control
    return block


def _image_block(part: ImagePart, warnings: list[WarningEvent]) -> dict[str, Any] | None:
    source: dict[str, Any]
    if part.data is not None:
        source = {"type": "base64", "media_type": part.media_type or "image/png", "data": part.data}
    elif part.url is not None and (inline := parse_data_url(part.url)) is not None:
        source = {"type": "base64", "media_type": inline[0], "data": inline[1]}
    elif part.url is not None:
        source = {"type": "url", "url": part.url}
    elif part.file_id is not None:
        source = {"type": "file", "file_id": part.file_id}
    else:
        warnings.append(warning("image_dropped", "image part with no url, data or file id"))
        return None
    return {"type": "image", "source": source}


def _document_block(part: DocumentPart, warnings: list[WarningEvent]) -> dict[str, Any] | None:
    source: dict[str, Any]
    if part.text is not None:
        source = {"type": "text", "media_type": "text/plain", "data": part.text}
    elif part.data is not None:
        source = {
            "type": "base64",
            "media_type": part.media_type or "application/pdf",
            "data": part.data,
        }
    elif part.url is not None:
        source = {"type": "url", "url": part.url}
    elif part.file_id is not None:
        source = {"type": "file", "file_id": part.file_id}
    else:
        warnings.append(warning("document_dropped", "document part with no content"))
        return None
    block: dict[str, Any] = {"type": "document", "source": source}
    for key in ("title", "context"):
        if getattr(part, key) is not None:
            block[key] = getattr(part, key)
    if part.citations_enabled is not None:
        block["citations"] = {"enabled": part.citations_enabled}
    return block


def _tool_result_block(
    result: ToolMessage, policy: RenderPolicy, warnings: list[WarningEvent]
) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": map_tool_call_id(result.call_id, ANTHROPIC_TOOL_IDS),
    }
    content = _result_content(result.content, policy, warnings)
    if content is not None:
        block["content"] = content
    if result.is_error:
        block["is_error"] = True
    return block


def _result_content(
    parts: Sequence[ResultPart], policy: RenderPolicy, warnings: list[WarningEvent]
) -> str | list[dict[str, Any]] | None:
    """One plain text part travels as a string (what most clients send), else blocks."""
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        only = parts[0]
        if not only.citations and (only.cache_control is None or not policy.keep_cache_control):
            return None if is_blank(only.text) else only.text
    blocks = _user_blocks(parts, policy, warnings)
    return blocks or None


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
        elif spec.kind == "server":
            warnings.append(
                warning(
                    "tool_dropped",
                    f"provider tool {spec.name!r} from {header.provider}/{header.api} "
                    "has no Anthropic equivalent; not offered",
                )
            )
        else:
            tools.append(_function_tool(spec))
    return tools


def _function_tool(spec: ToolSpec) -> dict[str, Any]:
    schema = spec.input_schema or {"type": "object", "properties": {}}
    if spec.kind == "custom":
        schema = {
            "type": "object",
            "properties": {"input": {"type": "string"}},
            "required": ["input"],
        }
    tool: dict[str, Any] = {"name": spec.name, "input_schema": schema}
    if spec.description:
        tool["description"] = spec.description
    return tool


# ================================================================ parse


def parse_request(kwargs: dict[str, Any]) -> list[Event]:
    """A ``messages.create`` request body as events: the header, then the history.

    Assistant content gets the provenance ``("anthropic", "messages", model)`` — the
    request's model is the best knowledge of which model wrote it. A user message's
    ``tool_result`` blocks become ``tool/result`` events (in order) followed by one
    ``user/message`` with the rest. Blocks of a type this parser does not know are
    kept as ``native/unknown`` events.
    """
    model = kwargs.get("model")
    provenance = Provenance(provider=PROVIDER, api=API, model=model)
    events: list[Event] = [_parse_header(kwargs)]
    for index, message in enumerate(kwargs.get("messages") or []):
        role = message.get("role")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if role == "assistant":
            events.extend(_parse_assistant(blocks or [], provenance, index))
        else:
            events.extend(_parse_user(blocks or [], index))
    return events


def _source(native_type: str, model: str | None = None) -> Source:
    return Source(runtime=RUNTIME, native_type=native_type, model=model)


def _parse_header(kwargs: dict[str, Any]) -> RequestHeaderEvent:
    body = {**kwargs, **(kwargs.get("extra_body") or {})}
    body.pop("extra_body", None)
    system = body.get("system")
    if isinstance(system, list):
        system = "\n\n".join(block.get("text", "") for block in system)
    return RequestHeaderEvent(
        provider=PROVIDER,
        api=API,
        model=body.get("model"),
        system=system,
        tools=[_parse_tool(tool) for tool in body.get("tools") or []],
        sampling={key: value for key, value in body.items() if key not in _HISTORY_KEYS},
        source=_source("request"),
    )


def _parse_tool(tool: dict[str, Any]) -> ToolSpec:
    kind = tool.get("type")
    # client tools have no type (or "custom"); versioned types are Anthropic-defined
    server = kind is not None and kind != "custom"
    return ToolSpec(
        name=tool.get("name", kind or ""),
        description=tool.get("description"),
        input_schema=tool.get("input_schema"),
        kind="server" if server else "function",
        native=tool,
    )


def _parse_user(blocks: list[dict[str, Any]], index: int) -> list[Event]:
    events: list[Event] = []
    parts: list[UserPart] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            events.append(
                ToolResultEvent(
                    call_id=block["tool_use_id"],
                    content=_parse_result_content(block.get("content"), index, events),
                    is_error=bool(block.get("is_error", False)),
                    source=_source("tool_result"),
                )
            )
            continue
        part = _parse_user_part(block)
        if part is None:
            events.append(_unknown(block, index, "user content block"))
        else:
            parts.append(part)
    if parts:
        events.append(UserMessageEvent(content=parts, source=_source("message")))
    return events


def _parse_result_content(content: Any, index: int, events: list[Event]) -> list[ResultPart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[ResultPart] = []
    for block in content:
        part = _parse_user_part(block)
        if part is None:
            events.append(_unknown(block, index, "tool_result content block"))
        else:
            parts.append(part)
    return parts


def _parse_user_part(block: dict[str, Any]) -> UserPart | None:
    kind = block.get("type")
    cache = block.get("cache_control")
    if kind == "text":
        return TextPart(text=block["text"], cache_control=cache)
    if kind == "image":
        source = block.get("source") or {}
        return ImagePart(
            url=source.get("url"),
            data=source.get("data"),
            media_type=source.get("media_type"),
            file_id=source.get("file_id"),
            cache_control=cache,
        )
    if kind == "document":
        source = block.get("source") or {}
        text_source = source.get("type") == "text"
        citations = block.get("citations")
        return DocumentPart(
            url=source.get("url"),
            data=None if text_source else source.get("data"),
            text=source.get("data") if text_source else None,
            media_type=None if text_source else source.get("media_type"),
            file_id=source.get("file_id"),
            title=block.get("title"),
            context=block.get("context"),
            citations_enabled=citations.get("enabled") if isinstance(citations, dict) else None,
            cache_control=cache,
        )
    return None


def _parse_assistant(
    blocks: list[dict[str, Any]], provenance: Provenance, index: int
) -> list[Event]:
    events: list[Event] = []
    parts: list[AssistantPart] = []
    for block in blocks:
        part = _parse_assistant_part(block, provenance)
        if part is None:
            events.append(_unknown(block, index, "assistant content block"))
        else:
            parts.append(part)
    events.insert(
        0,
        AssistantMessageEvent(
            content=parts, provenance=provenance, source=_source("message", provenance.model)
        ),
    )
    return events


def _parse_assistant_part(block: dict[str, Any], provenance: Provenance) -> AssistantPart | None:
    kind = block.get("type", "")
    if kind == "text":
        citations = [
            Citation(kind=c.get("type", ""), cited_text=c.get("cited_text"), native=c)
            for c in block.get("citations") or []
        ]
        return TextPart(
            text=block["text"], citations=citations, cache_control=block.get("cache_control")
        )
    if kind == "thinking":
        return ThinkingPart(
            text=block.get("thinking", ""), signature=block.get("signature"), provenance=provenance
        )
    if kind == "redacted_thinking":
        return ThinkingPart(redacted_data=block.get("data"), provenance=provenance)
    if kind == "tool_use":
        return ToolCallPart(
            id=block["id"],
            name=block["name"],
            arguments=block.get("input"),
            cache_control=block.get("cache_control"),
            provenance=provenance,
        )
    if kind in ("server_tool_use", "mcp_tool_use") or (
        "id" in block and "name" in block and kind.endswith("tool_use")
    ):
        return ServerToolCallPart(
            id=block.get("id", ""),
            name=block.get("name", kind),
            input=block.get("input"),
            native=block,
            provenance=provenance,
        )
    if "tool_use_id" in block:
        return ServerToolResultPart(
            call_id=block["tool_use_id"], kind=kind, native=block, provenance=provenance
        )
    return None


def _unknown(block: dict[str, Any], index: int, what: str) -> NativeUnknownEvent:
    return NativeUnknownEvent(
        runtime=RUNTIME,
        native_type=str(block.get("type")),
        payload=block,
        reason=f"{what} of an unknown type in messages[{index}]",
        source=_source(str(block.get("type"))),
    )
