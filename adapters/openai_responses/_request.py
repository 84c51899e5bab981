"""OpenAI Responses requests: render a derived history, parse a request body.

``render_request(messages, header, policy)`` gives the keyword arguments of
``openai.OpenAI().responses.create`` (stateless: the whole history in ``input``, no
``previous_response_id``); ``parse_request(kwargs)`` turns a request body back into
Universal Events. Responses-specific rules:

* rule 4: a ``reasoning`` item is replayed only to the same provider/api/model, only
  with its ``rs_`` id, only when an item follows it in the same assistant message and
  that item goes back with its own ``msg_`` / ``fc_`` id (an ``rs_`` item without its
  following item fails: vercel/ai#7099, and an id-less item does not count: recorded
  in fixtures/recorded/openai-responses/error_400_invalid_encrypted_reasoning_history),
  and, with ``store=false``, only with its ``encrypted_content`` (else "item not
  found", opencode#7724). ``summary`` is always present, ``[]`` when empty
  (Agora#141). When any reasoning of a message is not replayed, the message's
  ``fc_`` / ``msg_`` item ids are left out too (an ``fc_`` item without its ``rs_``
  fails: mastra#8738).
* rule 5: ``call_id`` carries the (mapped) tool-call id; the ``fc_`` item ``id`` is a
  different thing, sent only back to its origin.
* rule 11: the system prompt goes in ``instructions``.
* failed tool results: a tool output has no error flag, so a failed one opens with
  :data:`~adapters._render.TOOL_ERROR_MARKER` (and a space), as Chat's tool messages
  do, and ``parse_request`` reverses it, as Chat's does.
* file ids go only to the provider that issued them: an Anthropic ``file_`` id is not
  sent (:func:`~adapters._render.foreign_file_id`); the part's bytes or URL go instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, assert_never

from adapters._base import dict_or_none, str_or_none, text_value
from adapters._render import (
    RESPONSES_TOOL_IDS,
    TOOL_ERROR_MARKER,
    Group,
    GroupRenderer,
    RenderCache,
    RenderPolicy,
    RenderRun,
    add_openai_users,
    create_parameters,
    custom_tool_format,
    foreign_file_id,
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
    replayable_server_part,
    request_body,
    request_part,
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
from universal_event.messages import AssistantMessage, Message
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
_IDS = RESPONSES_TOOL_IDS.memo  # tool-call ids already mapped (rule 5)


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
    run = RenderRun(PROVIDER, API, header, policy)
    stored = run.sampling.get("store") is not False
    wire = run.history(messages, _GroupRenderer(run.target, run.policy, stored), cache, stored)
    kwargs: dict[str, Any] = {"model": run.model, "input": wire}
    if header is not None and header.system is not None:
        kwargs["instructions"] = header.system
    tools = run.tools(header, _function_tool)
    if tools:
        kwargs["tools"] = tools
    run.add_settings(kwargs, _HISTORY_KEYS)
    return run.finish(kwargs, _accepted(), warnings)


class _GroupRenderer(GroupRenderer):
    """Renders the groups of one request: Responses items and rules 4 and 5.

    ``stored``: the request does not set ``store: false`` (rule 4 needs
    ``encrypted_content`` when it does).
    """

    __slots__ = ("stored",)

    def __init__(self, target: Provenance, policy: RenderPolicy, stored: bool) -> None:
        super().__init__(target, policy)
        self.stored = stored

    def __call__(self, group: Group, out: list[dict[str, Any]]) -> None:
        warnings = group.warnings
        if group.assistant is not None:
            self.assistant_items(group.assistant, out, warnings)
        calls = group.calls
        for result in group.results:
            parts = result.content
            output = (
                parts[0].text
                if len(parts) == 1 and type(parts[0]) is TextPart  # the common case
                else _output(parts, warnings)
            )
            out.append(
                {
                    # every result (synthetic ones too) answers a call of this group
                    "type": "custom_tool_call_output"
                    if calls[result.call_id].kind == "custom"
                    else "function_call_output",
                    "call_id": _IDS.get(result.call_id)
                    or map_tool_call_id(result.call_id, RESPONSES_TOOL_IDS),
                    "output": _failed_output(output) if result.is_error else output,
                }
            )
        add_openai_users(group, _input_part, out, _same_role)

    def unreplayable(self, part: ThinkingPart, message: AssistantMessage, index: int) -> str | None:
        """Rule 4: why a reasoning part (``message.content[index]``) cannot go back as
        a reasoning item, or None when it can: same origin, an ``rs_`` id, encrypted
        content unless the API keeps the items (``store`` not false), and an item after
        it that goes back with its own id (an ``rs_`` item followed by an id-less item
        is refused: "provided without its required following item", recorded in
        fixtures/recorded/openai-responses/error_400_invalid_encrypted_reasoning_history)."""
        if not self.native(reasoning_origin(part, message)):
            return "other origin"
        if not part.id:
            return "no rs_ id"
        if part.encrypted_content is None and not self.stored:
            return "store=false without encrypted_content"
        # not a blank text, which is not sent: a cut turn's last reasoning has none
        following = next((p for p in message.content[index + 1 :] if _is_item(p)), None)
        if following is None:
            return "no item follows it"
        if not self.keeps_id(following, message):
            return f"the {type(following).__name__} after it has no item id"
        return None

    def keeps_id(self, part: AssistantPart, message: AssistantMessage) -> bool:
        """Whether an item goes back with its own id (when the message's ids do)."""
        if isinstance(part, ServerToolCallPart | ServerToolResultPart):
            origin = part.provenance or message.provenance
            return (
                origin is not None
                and (origin.provider, origin.api) == (self.target.provider, self.target.api)
                and bool(part.native.get("id"))
            )
        return isinstance(part, TextPart | RefusalPart | ToolCallPart) and part.item_id is not None

    def assistant_items(
        self, message: AssistantMessage, items: list[dict[str, Any]], warnings: list[WarningEvent]
    ) -> None:
        content = message.content
        refused = {
            index: self.unreplayable(part, message, index)
            for index, part in enumerate(content)
            if type(part) is ThinkingPart
        }
        # fc_ / msg_ ids go back only to their origin, with all its reasoning, and
        # without their ids no reasoning item goes back either
        keep_ids = self.native(message.provenance) and not any(refused.values())
        for index, part in enumerate(content):
            if isinstance(part, ToolCallPart):
                items.append(_call_item(part, keep_ids))
            elif isinstance(part, TextPart | RefusalPart):
                _add_text(items, part, keep_ids)
            elif isinstance(part, ThinkingPart):
                if keep_ids:  # every reasoning part of the message is replayable
                    items.append(_reasoning_item(part))
                    continue
                why = refused[index] or (
                    "another reasoning item of the message is not replayable"
                    if any(refused.values())
                    else "its message is from another origin"
                )
                text = foreign_reasoning(part, message, self.target, self.policy, warnings, why)
                if text is not None:
                    items.append({"role": "assistant", "content": text})
            elif isinstance(part, ServerToolCallPart | ServerToolResultPart):
                if replayable_server_part(part, message, self.target, warnings):
                    items.append(_replay_item(part.native))
            elif isinstance(part, ImagePart):
                warnings.append(warning("image_dropped", "no images in Responses assistant items"))
            else:
                assert_never(part)


def _is_item(part: AssistantPart) -> bool:
    """Whether a part goes out as an input item (what a reasoning item needs after it)."""
    if isinstance(part, TextPart | RefusalPart):
        return not is_blank(part.text)
    return not isinstance(part, ThinkingPart | ImagePart)


def _add_text(items: list[dict[str, Any]], part: TextPart | RefusalPart, keep_ids: bool) -> None:
    """Text joins its ``msg_`` output message when replayed natively (``keep_ids``),
    else is an easy assistant message of its own."""
    if is_blank(part.text):
        return
    item_id = part.item_id if keep_ids else None
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
    call_id = _IDS.get(part.id) or map_tool_call_id(part.id, RESPONSES_TOOL_IDS)
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


def _output(
    parts: Sequence[ResultPart], warnings: list[WarningEvent]
) -> str | list[dict[str, Any]]:
    """A tool result's ``output``: a lone text as the string, else input parts."""
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return parts[0].text
    if not parts:
        return ""
    return [r for part in parts if (r := _input_part(part, warnings)) is not None]


def _failed_output(output: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A failed result's output (Responses has no error flag): marked as Chat marks a
    failed tool message, :data:`TOOL_ERROR_MARKER` opening its text; parts open with
    a text part that carries it."""
    if isinstance(output, str):
        return with_error_mark(output)
    if output and output[0]["type"] == "input_text":
        return [{**output[0], "text": with_error_mark(output[0]["text"])}, *output[1:]]
    return [{"type": "input_text", "text": TOOL_ERROR_MARKER}, *output]


def _input_part(part: ResultPart, warnings: list[WarningEvent]) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        return _input_image(part, warnings)
    if isinstance(part, DocumentPart):
        if part.text is not None:
            return {"type": "input_text", "text": part.text}
        file = openai_file(part, by_url=True)
        if file is None:
            warnings.append(openai_file_dropped(part, "Responses"))
            return None
        return {"type": "input_file", **file}
    assert_never(part)


def _input_image(part: ImagePart, warnings: list[WarningEvent]) -> dict[str, Any] | None:
    """An image by file id, else by URL; a file id another provider issued is not
    sent (:func:`~adapters._render.foreign_file_id`)."""
    image: dict[str, Any] = {"type": "input_image", "detail": part.detail or "auto"}
    foreign = foreign_file_id(part.file_id, PROVIDER)
    if part.file_id is not None and not foreign:
        image["file_id"] = part.file_id
    elif (url := image_url(part)) is not None:
        image["image_url"] = url
    else:
        why = (
            f"by file id {part.file_id!r}, which another provider issued, and no url or data"
            if foreign
            else "without url, data or file id"
        )
        warnings.append(warning("image_dropped", f"image {why}; dropped", file_id=part.file_id))
        return None
    return image


def _function_tool(spec: ToolSpec) -> dict[str, Any] | None:
    if spec.kind == "function":
        return {
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema or {"type": "object", "properties": {}},
            # schemas written for other providers are rarely strict-mode valid
            "strict": False,
        }
    if spec.kind == "custom":
        tool: dict[str, Any] = {"type": "custom", "name": spec.name}
        if spec.description:
            tool["description"] = spec.description
        form = custom_tool_format(spec)
        if form is not None:
            tool["format"] = form
        return tool
    return None


# ================================================================ parse


@parsed_request
def parse_request(kwargs: dict[str, Any]) -> list[Event]:
    """A ``responses.create`` body as events: the header, then the history.

    Consecutive output items (``reasoning``, assistant ``message``, ``function_call``,
    ``custom_tool_call``, server-tool items) form one assistant message; a user message
    or a tool output closes it. Server-tool and other provider items are kept whole as
    :class:`ServerToolCallPart` for a same-provider replay.
    """
    body = request_body(kwargs, "input")
    model = str_or_none(body.get("model"))
    provenance = Provenance(provider=PROVIDER, api=API, model=model)
    with request_part("$.instructions"):
        instructions = body.get("instructions")
        system = None if instructions is None else text_value(instructions)
    specs = parse_tools(body, _parse_tool)
    events: list[Event] = [
        parse_header(
            body,
            provider=PROVIDER,
            api=API,
            runtime=RUNTIME,
            history_keys=_HISTORY_KEYS,
            system=system,
            tools=specs,
        )
    ]
    raw = body.get("input")
    with request_part("$.input"):
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

    for index, item in enumerate(items):
        with request_part(f"$.input[{index}]"):
            _parse_item(item, index, provenance, pending, flush, events)
    flush()
    return events


def _parse_item(
    item: dict[str, Any],
    index: int,
    provenance: Provenance,
    pending: list[AssistantPart],
    flush: Callable[[], None],
    events: list[Event],
) -> None:
    """One input item: a user-role message or a tool output closes the assistant
    message being gathered (``pending``); an output item joins it."""
    kind = item.get("type", "message")
    role = item.get("role")
    if kind == "message" and role not in (*_USER_ROLES, "assistant"):
        flush()
        events.append(unknown_role(RUNTIME, item, f"$.input[{index}]"))
    elif kind == "message" and role in _USER_ROLES:
        flush()
        events.append(
            UserMessageEvent(
                content=_parse_input_content(item.get("content")),
                instruction_role=None if role == "user" else role,
                source=_source(str(role)),
            )
        )
    elif kind in ("function_call_output", "custom_tool_call_output"):
        flush()
        content, failed = _parse_output(item.get("output"))
        events.append(
            ToolResultEvent(
                call_id=text_value(item["call_id"]),
                content=content,
                is_error=failed,
                source=_source(kind),
            )
        )
    else:
        pending.extend(_parse_output_item(item, provenance))


_source = functools.partial(source, RUNTIME)


def _same_role(role: InstructionRole) -> str:
    """Responses input messages take ``system`` and ``developer`` as they are."""
    return role


def _parse_tool(tool: dict[str, Any]) -> ToolSpec:
    kind = tool.get("type")
    if kind in ("function", "custom"):
        return ToolSpec(
            name=text_value(tool.get("name", "")),
            description=str_or_none(tool.get("description")),
            input_schema=dict_or_none(tool.get("parameters")),
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
        item_id, phase = str_or_none(item.get("id")), str_or_none(item.get("phase"))
        for block in content or []:
            if block.get("type") == "refusal":
                refusal = text_value(block.get("refusal", ""))
                parts.append(RefusalPart(text=refusal, item_id=item_id))
            else:
                parts.append(
                    TextPart(
                        text=text_value(block.get("text", "")),
                        citations=[
                            Citation(
                                kind=str(a.get("type", "")),
                                url=str_or_none(a.get("url")),
                                native=dict(a),
                            )
                            for a in block.get("annotations") or []
                        ],
                        item_id=item_id,
                        phase=phase,
                    )
                )
        return parts
    if kind == "reasoning":
        summary = [text_value(s.get("text", "")) for s in item.get("summary") or []]
        content_texts = [text_value(c.get("text", "")) for c in item.get("content") or []]
        return [
            ThinkingPart(
                text="\n\n".join(summary or content_texts),
                summary=summary,
                encrypted_content=str_or_none(item.get("encrypted_content")),
                id=str_or_none(item.get("id")),
                provenance=provenance,
            )
        ]
    if kind == "function_call":
        arguments, raw = parse_arguments(text_value(item.get("arguments", "")))
        return [
            ToolCallPart(
                id=text_value(item["call_id"]),
                name=text_value(item.get("name", "")),
                arguments=arguments,
                arguments_raw=raw,
                item_id=str_or_none(item.get("id")),
                provenance=provenance,
            )
        ]
    if kind == "custom_tool_call":
        return [
            ToolCallPart(
                id=text_value(item["call_id"]),
                name=text_value(item.get("name", "")),
                arguments_raw=text_value(item.get("input", "")),
                kind="custom",
                item_id=str_or_none(item.get("id")),
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


def _parse_output(output: Any) -> tuple[list[ResultPart], bool]:
    """A tool output's parts, and whether it failed: its text opens with
    :data:`TOOL_ERROR_MARKER` (the reverse of :func:`_failed_output`; a real output
    that happens to open so parses as a failure too, and renders back the same)."""
    if isinstance(output, str):
        unmarked = without_error_mark(output)
        return [TextPart(text=output if unmarked is None else unmarked)], unmarked is not None
    parts = [_parse_input_part(part) for part in output or []]
    first = parts[0] if parts else None
    unmarked = without_error_mark(first.text) if type(first) is TextPart else None
    if unmarked is None:
        return parts, False
    # the mark alone was a text part of its own, put before parts without text
    return ([TextPart(text=unmarked)] if unmarked else []) + parts[1:], True


def _parse_input_part(part: dict[str, Any]) -> UserPart:
    kind = part.get("type")
    if kind == "input_image":
        url = str_or_none(part.get("image_url"))
        inline = parse_data_url(url) if url else None
        return ImagePart(
            url=None if inline else url,
            data=inline[1] if inline else None,
            media_type=inline[0] if inline else None,
            file_id=str_or_none(part.get("file_id")),
            detail=str_or_none(part.get("detail")),
        )
    if kind == "input_file":
        inline = parse_data_url(str_or_none(part.get("file_data")) or "")
        return DocumentPart(
            url=str_or_none(part.get("file_url")),
            data=inline[1] if inline else None,
            media_type=inline[0] if inline else None,
            file_id=str_or_none(part.get("file_id")),
            filename=str_or_none(part.get("filename")),
        )
    return TextPart(text=text_value(part.get("text", "")))
