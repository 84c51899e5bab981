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
  as ``reasoning_content`` only when the policy asks (compatible servers; an assistant
  turn of reasoning alone then goes with an empty ``content``, which Chat requires
  without tool calls, as does a turn of a refusal alone), foreign reasoning follows the
  foreign-reasoning policy.
* arguments that are not JSON (a call cut off by ``max_tokens``) go as a JSON object
  (:func:`~adapters._render.valid_arguments`); the outputs of another api's caller-run
  provider items are dropped with their calls
  (:func:`~adapters._render.server_results_dropped`).
* failed tool results: a ``tool`` message has no error flag (its fields are
  ``role``, ``tool_call_id``, ``content``), so a failed result starts with
  :data:`~adapters._render.TOOL_ERROR_MARKER` and a space (with text parts, the first
  one carries it); ``parse_request`` reverses it — a tool message whose text starts so
  becomes a ``tool/result`` with ``is_error`` and the marker removed.
* file ids go only to the provider that issued them: an Anthropic ``file_`` id is not
  sent (:func:`~adapters._render.openai_file`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any, assert_never

from adapters._base import dict_or_none, str_or_none, text_value
from adapters._render import (
    CHAT_TOOL_IDS,
    Group,
    GroupRenderer,
    OtherAssistantPart,
    RenderCache,
    RenderPolicy,
    RenderRun,
    add_openai_users,
    create_parameters,
    custom_tool_format,
    developer_role_model,
    foreign_reasoning,
    image_url,
    is_blank,
    json_arguments,
    map_tool_call_id,
    openai_file,
    openai_file_dropped,
    parse_arguments,
    parse_data_url,
    parse_header,
    parse_tools,
    parsed_request,
    reasoning_origin,
    refuse_the_other_messages_api,
    request_body,
    request_part,
    server_results_dropped,
    source,
    unknown_role,
    warning,
    with_error_mark,
    without_error_mark,
)
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    InstructionRole,
    RequestHeaderEvent,
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
_IDS = CHAT_TOOL_IDS.memo  # tool-call ids already mapped (rule 5)


@functools.cache
def _accepted() -> frozenset[str]:
    from openai.resources.chat.completions import Completions

    return create_parameters(Completions.create)


def system_role(model: str, policy: RenderPolicy) -> str:
    """``system`` or ``developer`` for this model (rule 11)."""
    if policy.chat_system_role != "auto":
        return policy.chat_system_role
    return "developer" if developer_role_model(model) else "system"


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
    run = RenderRun(PROVIDER, API, header, policy)
    wire = run.history(messages, _GroupRenderer(run.target, run.policy), cache)
    if header is not None and header.system:
        wire = [{"role": system_role(run.model, run.policy), "content": header.system}, *wire]
    kwargs: dict[str, Any] = {"model": run.model, "messages": wire}
    tools = run.tools(header, _function_tool)
    if tools:
        kwargs["tools"] = tools
    run.add_settings(kwargs, _HISTORY_KEYS)
    return run.finish(kwargs, _accepted(), warnings)


class _GroupRenderer(GroupRenderer):
    """Renders the groups of one request: Chat's wire shapes and rules 7 and 9.

    Text, tool calls and a tool result of one text are built inline.
    """

    __slots__ = ()

    def __call__(self, group: Group, out: list[dict[str, Any]]) -> None:
        warnings = group.warnings
        if group.assistant is not None:
            assistant = self.assistant_message(group.assistant, warnings)
            if assistant is not None:
                out.append(assistant)
        moved: list[dict[str, Any]] = []
        for result in group.results:
            out.append(_tool_message(result, moved, warnings))
        if group.server_results:  # their calls have no Chat form (other_part)
            server_results_dropped(group, "openai/chat")
        if moved:  # rule 9: after every tool message of the window, never between them
            out.append({"role": "user", "content": moved})
        add_openai_users(group, _user_part, out, self.instruction_role)

    def instruction_role(self, role: InstructionRole) -> str:
        """Instructions between the turns speak in the system prompt's role for this
        model (rule 11): ``developer`` and ``system`` are one role to Chat."""
        return system_role(self.target.model or "", self.policy)

    def assistant_message(
        self, message: AssistantMessage, warnings: list[WarningEvent]
    ) -> dict[str, Any] | None:
        texts: list[str] = []
        refusals: list[str] = []
        reasoning: list[str] = []
        calls: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, ToolCallPart):
                calls.append(_tool_call(part, warnings))
            elif isinstance(part, TextPart):
                if not is_blank(part.text):
                    texts.append(part.text)
            else:
                self.other_part(part, message, texts, refusals, reasoning, warnings)
        if not (texts or refusals or calls or reasoning):
            return None
        rendered: dict[str, Any] = {"role": "assistant"}
        if texts:
            rendered["content"] = texts[0] if len(texts) == 1 else "\n\n".join(texts)
        elif not calls:
            # reasoning or a refusal only (a turn cut after its reasoning, a refused
            # turn): Chat wants ``content`` unless there are tool calls
            # (``ChatCompletionAssistantMessageParam.content``: "Required unless
            # tool_calls or function_call is specified"), so an empty one carries them
            rendered["content"] = ""
        if refusals:
            rendered["refusal"] = "\n\n".join(refusals)
        if reasoning:
            rendered["reasoning_content"] = "\n\n".join(reasoning)
        if calls:
            rendered["tool_calls"] = calls
        return rendered

    def other_part(
        self,
        part: OtherAssistantPart,
        message: AssistantMessage,
        texts: list[str],
        refusals: list[str],
        reasoning: list[str],
        warnings: list[WarningEvent],
    ) -> None:
        """Everything but text and tool calls, into the message's text / refusal /
        reasoning lists (or dropped, with a warning)."""
        if isinstance(part, RefusalPart):
            (refusals if self.native(message.provenance) else texts).append(part.text)
        elif isinstance(part, ThinkingPart):
            if self.native(reasoning_origin(part, message)) and part.text:
                if self.policy.chat_reasoning_content:
                    reasoning.append(part.text)
                return
            text = foreign_reasoning(
                part, message, self.target, self.policy, warnings, "Chat takes no opaque reasoning"
            )
            if text is not None:
                texts.append(text)
        elif isinstance(part, ServerToolCallPart | ServerToolResultPart | ImagePart):
            warnings.append(
                warning(
                    "content_dropped",
                    f"{type(part).__name__} has no Chat Completions form; dropped",
                )
            )
        else:
            assert_never(part)


def _tool_call(part: ToolCallPart, warnings: list[WarningEvent]) -> dict[str, Any]:
    call_id = _IDS.get(part.id) or map_tool_call_id(part.id, CHAT_TOOL_IDS)
    if part.kind == "custom":
        return {
            "id": call_id,
            "type": "custom",
            "custom": {"name": part.name, "input": part.arguments_raw or ""},
        }
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": part.name, "arguments": json_arguments(part, warnings)},
    }


def _tool_message(
    result: ToolMessage, moved: list[dict[str, Any]], warnings: list[WarningEvent]
) -> dict[str, Any]:
    """The tool message (text only); its media go to ``moved`` (rule 9)."""
    call_id = _IDS.get(result.call_id) or map_tool_call_id(result.call_id, CHAT_TOOL_IDS)
    parts = result.content
    if len(parts) == 1 and type(parts[0]) is TextPart:  # the common case
        text = parts[0].text
        content = with_error_mark(text) if result.is_error else text
        return {"role": "tool", "tool_call_id": call_id, "content": content}
    texts = [p.text for p in parts if isinstance(p, TextPart) and not is_blank(p.text)]
    media = [
        rendered
        for part in parts
        if not isinstance(part, TextPart) and (rendered := _user_part(part, warnings)) is not None
    ]
    if media:
        moved.append({"type": "text", "text": f"Attachments of tool result {call_id}:"})
        moved.extend(media)
        texts.append("(attachments follow in the next user message)")
    if result.is_error:
        texts[:1] = [with_error_mark(texts[0] if texts else "")]
    tool_content: str | list[dict[str, Any]]
    if len(texts) == 1:
        tool_content = texts[0]
    elif texts:
        tool_content = [{"type": "text", "text": text} for text in texts]
    else:
        tool_content = ""
    return {"role": "tool", "tool_call_id": call_id, "content": tool_content}


def _user_part(part: UserPart, warnings: list[WarningEvent]) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        url = image_url(part)
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
        file = openai_file(part)
        if file is None:
            warnings.append(openai_file_dropped(part, "Chat"))
            return None
        return {"type": "file", "file": file}
    assert_never(part)


def _function_tool(spec: ToolSpec) -> dict[str, Any] | None:
    if spec.kind == "function":
        function: dict[str, Any] = {
            "name": spec.name,
            "parameters": spec.input_schema or {"type": "object", "properties": {}},
        }
        if spec.description:
            function["description"] = spec.description
        return {"type": "function", "function": function}
    if spec.kind == "custom":
        custom: dict[str, Any] = {"name": spec.name}
        if spec.description:
            custom["description"] = spec.description
        form = custom_tool_format(spec)
        if form is not None:
            custom["format"] = (
                {"type": "grammar", "grammar": {k: v for k, v in form.items() if k != "type"}}
                if form.get("type") == "grammar"
                else form
            )
        return {"type": "custom", "custom": custom}
    return None


# ================================================================ parse


@parsed_request
def parse_request(kwargs: dict[str, Any]) -> list[Event]:
    """A ``chat.completions.create`` body as events: the header, then the history.

    Leading ``system`` / ``developer`` messages become the header's system prompt
    (joined by a blank line); later ones become user messages that keep their role
    (``UserMessageEvent.instruction_role``) and are rendered back in it. Assistant
    content gets the provenance ``("openai", "chat", model)``.
    """
    body = request_body(kwargs, "messages")
    refuse_the_other_messages_api(body, "chat")
    model = str_or_none(body.get("model"))
    provenance = Provenance(provider=PROVIDER, api=API, model=model)
    with request_part("$.messages"):
        history: list[dict[str, Any]] = list(body.get("messages") or [])
        system: list[str] = []
        while history and history[0].get("role") in ("system", "developer"):
            system.append(_text_of(history.pop(0).get("content")))
    specs = parse_tools(body, _parse_tool)
    events: list[Event] = [
        parse_header(
            body,
            provider=PROVIDER,
            api=API,
            runtime=RUNTIME,
            history_keys=_HISTORY_KEYS,
            system="\n\n".join(system) if system else None,
            tools=specs,
        )
    ]
    for index, message in enumerate(history, len(system)):
        with request_part(f"$.messages[{index}]"):
            events.extend(_parse_message(message, provenance, index))
    return events


_source = functools.partial(source, RUNTIME)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _parse_tool(tool: dict[str, Any]) -> ToolSpec:
    if tool.get("type") == "function":
        function = tool.get("function") or {}
        return ToolSpec(
            name=text_value(function.get("name", "")),
            description=str_or_none(function.get("description")),
            input_schema=dict_or_none(function.get("parameters")),
            native=tool,
        )
    if tool.get("type") == "custom":
        custom = tool.get("custom") or {}
        return ToolSpec(
            name=text_value(custom.get("name", "")),
            description=str_or_none(custom.get("description")),
            kind="custom",
            native=tool,
        )
    return ToolSpec(name=str(tool.get("type")), kind="server", native=tool)


def _parse_message(message: dict[str, Any], provenance: Provenance, index: int) -> list[Event]:
    role = message.get("role")
    if role in ("user", "system", "developer"):
        return [
            UserMessageEvent(
                content=_parse_user_content(message.get("content")),
                instruction_role=None if role == "user" else role,
                source=_source(str(role)),
            )
        ]
    if role == "assistant":
        return [_parse_assistant(message, provenance)]
    if role == "tool":
        return [_parse_tool_message(message)]
    return [unknown_role(RUNTIME, message, f"$.messages[{index}]")]


def _parse_tool_message(message: dict[str, Any]) -> ToolResultEvent:
    """A ``tool`` message; a text opening with the error mark is a failure
    (:func:`~adapters._render.without_error_mark`)."""
    content = message.get("content")
    texts = [content] if isinstance(content, str) else [_text_of([p]) for p in content or []]
    unmarked = without_error_mark(texts[0]) if texts else None
    failed = unmarked is not None
    if unmarked is not None:
        texts[0] = unmarked
    return ToolResultEvent(
        call_id=text_value(message["tool_call_id"]),
        content=[TextPart(text=text) for text in texts],
        is_error=failed,
        source=_source("tool"),
    )


def _parse_user_content(content: Any) -> list[UserPart]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[UserPart] = []
    for part in content or []:
        kind = part.get("type")
        if kind == "text":
            parts.append(TextPart(text=text_value(part["text"])))
        elif kind == "image_url":
            image = part.get("image_url") or {}
            url = text_value(image.get("url", ""))
            inline = parse_data_url(url)
            detail = str_or_none(image.get("detail"))
            parts.append(
                ImagePart(url=url, detail=detail)
                if inline is None
                else ImagePart(data=inline[1], media_type=inline[0], detail=detail)
            )
        elif kind == "file":
            file = part.get("file") or {}
            inline = parse_data_url(str_or_none(file.get("file_data")) or "")
            parts.append(
                DocumentPart(
                    file_id=str_or_none(file.get("file_id")),
                    data=inline[1] if inline else None,
                    media_type=inline[0] if inline else None,
                    filename=str_or_none(file.get("filename")),
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
                parts.append(RefusalPart(text=text_value(part.get("refusal", ""))))
            else:
                parts.append(TextPart(text=text_value(part.get("text", ""))))
    if message.get("refusal"):
        parts.append(RefusalPart(text=text_value(message["refusal"])))
    for call in message.get("tool_calls") or []:
        parts.append(_parse_tool_call(call, provenance))
    return AssistantMessageEvent(
        content=parts, provenance=provenance, source=_source("assistant", provenance.model)
    )


def _parse_tool_call(call: dict[str, Any], provenance: Provenance) -> ToolCallPart:
    if call.get("type") == "custom":
        custom = call.get("custom") or {}
        return ToolCallPart(
            id=text_value(call["id"]),
            name=text_value(custom.get("name", "")),
            arguments_raw=text_value(custom.get("input", "")),
            kind="custom",
            provenance=provenance,
        )
    function = call.get("function") or {}
    arguments, raw = parse_arguments(text_value(function.get("arguments", "")))
    return ToolCallPart(
        id=text_value(call["id"]),
        name=text_value(function.get("name", "")),
        arguments=arguments,
        arguments_raw=raw,
        provenance=provenance,
    )
