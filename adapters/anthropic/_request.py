"""Anthropic Messages requests: render a derived history, parse a request body.

``render_request(messages, header, policy)`` gives the keyword arguments of
``anthropic.Anthropic().messages.create``; ``parse_request(kwargs)`` turns a request
body (its ``system``, ``tools``, settings and ``messages``) back into Universal Events.
The shared rules live in :mod:`adapters._render`; the Anthropic-specific ones are here:

* rule 3: with ``thinking`` on, when the request continues a tool loop (the last
  assistant message is followed only by tool results) the final assistant turn must
  start with a ``thinking`` / ``redacted_thinking`` block. That turn is what the API
  sees as one: consecutive assistant messages (which it joins) and the tool loop's
  messages, back to the last user message that is not tool results; its first
  assistant message is the one checked. Otherwise thinking is turned off for this
  request (``thinking_disabled`` warning) or, by policy, an error;
* rule 7: all tool results of an assistant message go in one user message, before
  any user text of the same window;
* rule 8: no empty or whitespace-only text blocks; a history ending on an assistant
  message (a prefill) loses the trailing whitespace of its last text block
  (``trailing_whitespace_trimmed`` warning);
* documents: base64 ones only as PDF; ``text/*`` ones decoded into a plain-text
  source, other types dropped (``document_dropped``); file ids only when Anthropic
  issued them (``file_`` ids, :func:`~adapters._render.foreign_file_id`; others
  dropped with a warning, the part's bytes or URL going first when it has them);
* rule 10: ``cache_control`` kept on text, image, document, tool_use and tool_result
  blocks and on the blocks inside a tool result (never on thinking blocks, which
  cannot carry it); at most four marks in a request, the earliest message marks
  dropped first (``cache_control_trimmed`` warning);
* rule 11: the system prompt goes in ``system``.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Sequence
from typing import Any, assert_never

from adapters._base import bool_or_none, dict_or_none, str_or_none, text_value
from adapters._render import (
    ANTHROPIC_TOOL_IDS,
    Group,
    GroupRenderer,
    OtherAssistantPart,
    RenderCache,
    RenderPolicy,
    RenderRun,
    create_parameters,
    custom_tool_format,
    empty_message,
    foreign_file_id,
    foreign_reasoning,
    instruction_as_user,
    is_blank,
    map_tool_call_id,
    parse_data_url,
    parse_header,
    parse_tools,
    parsed_request,
    reasoning_origin,
    refuse_the_other_messages_api,
    replayable_server_part,
    request_body,
    request_part,
    server_results_dropped,
    source,
    unknown_role,
    warning,
)
from universal_event.errors import RenderError
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    NativeUnknownEvent,
    RequestHeaderEvent,
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

__all__ = ["parse_request", "render_request", "user_part"]

PROVIDER = "anthropic"
API = "messages"
RUNTIME = "anthropic-request"
_HISTORY_KEYS = frozenset({"messages", "system", "tools", "model"})
_SYSTEM_SEPARATOR = "\n\n"
"""Between system blocks' texts in ``RequestHeaderEvent.system`` (what other formats get)."""
_IDS = ANTHROPIC_TOOL_IDS.memo  # tool-call ids already mapped (rule 5)


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
    run = RenderRun(PROVIDER, API, header, policy)
    wire = run.history(messages, _GroupRenderer(run.target, run.policy), cache)
    kwargs: dict[str, Any] = {"model": run.model, "messages": wire}
    system = _render_system(header, run.policy)
    if system is not None:
        kwargs["system"] = system
    tools = run.tools(header, _function_tool)
    if tools:
        kwargs["tools"] = tools
    run.add_settings(kwargs, _HISTORY_KEYS)
    kwargs.setdefault("max_tokens", run.policy.default_max_tokens)
    _check_thinking_start(kwargs, run.policy, run.warnings)
    _trim_final_assistant(wire, run.warnings)
    _limit_cache_marks(kwargs, run.cache_marks, run.warnings)
    if wire and wire[0]["role"] != "user":
        run.warnings.append(
            warning(
                "first_message_not_user",
                "the history starts with an assistant message (a capture that does not "
                "echo the prompt, a trimmed history); the Messages API has refused such "
                'requests ("first message must use the user role")',
            )
        )
    return run.finish(kwargs, _accepted(), warnings)


MAX_CACHE_MARKS = 4
"""Blocks a request may mark with ``cache_control`` ("A maximum of 4 blocks with
cache_control may be provided")."""

_MarkPath = tuple[str, tuple[int, ...]]


def _limit_cache_marks(
    kwargs: dict[str, Any], history_marks: int, warnings: list[WarningEvent]
) -> None:
    """Rule 10: at most :data:`MAX_CACHE_MARKS` marks. A history put together from
    several requests (each marking its own last blocks) can hold more; the earliest
    marks in the messages go first (they marked prefixes of requests long past), then,
    if need be, the earliest of the tools and system prompt. ``history_marks`` (counted
    while rendering, kept by the render cache) spares walking the messages when the
    request is within the limit."""
    head_marks = sum(
        "cache_control" in item
        for area in ("tools", "system")
        if isinstance(items := kwargs.get(area), list)
        for item in items
    )
    if head_marks + history_marks <= MAX_CACHE_MARKS:
        return
    marks = _cache_marks(kwargs)
    excess = len(marks) - MAX_CACHE_MARKS
    if excess <= 0:
        return
    in_messages = [mark for mark in marks if mark[0] == "messages"]
    elsewhere = [mark for mark in marks if mark[0] != "messages"]
    for area, path in (in_messages + elsewhere)[:excess]:
        _unmark(kwargs, area, path)
    warnings.append(
        warning(
            "cache_control_trimmed",
            f"{len(marks)} blocks carry cache_control, Anthropic takes {MAX_CACHE_MARKS}: "
            f"the {excess} earliest marks were removed",
        )
    )


def _cache_marks(kwargs: dict[str, Any]) -> list[_MarkPath]:
    """Where the request carries ``cache_control``, in prompt order (tools, system,
    messages; inside a message, a block and then the blocks of its tool result)."""
    marks: list[_MarkPath] = []
    for area in ("tools", "system"):
        items = kwargs.get(area)
        if isinstance(items, list):
            marks += [(area, (i,)) for i, item in enumerate(items) if "cache_control" in item]
    for m, message in enumerate(kwargs["messages"]):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for b, block in enumerate(content):
            if "cache_control" in block:
                marks.append(("messages", (m, b)))
            inner = block.get("content")
            if isinstance(inner, list):
                marks += [
                    ("messages", (m, b, c))
                    for c, sub in enumerate(inner)
                    if isinstance(sub, dict) and "cache_control" in sub
                ]
    return marks


def _unmark(kwargs: dict[str, Any], area: str, path: tuple[int, ...]) -> None:
    """Remove one mark, copying every list and dict on the way to it: the rendered
    blocks may be shared with the session's render cache."""
    items = kwargs[area] = list(kwargs[area])
    item = items[path[0]] = dict(items[path[0]])
    for index in path[1:]:
        content = item["content"] = list(item["content"])
        item = content[index] = dict(content[index])
    del item["cache_control"]


def _render_system(
    header: RequestHeaderEvent | None, policy: RenderPolicy
) -> str | list[dict[str, Any]] | None:
    """Rule 11: ``system``. Blocks as they were given (``system_parts``, with their
    ``cache_control``, rule 10) while they still spell ``header.system``; else the
    string (an empty prompt is left out)."""
    if header is None:
        return None
    parts = header.system_parts
    if parts is not None and _SYSTEM_SEPARATOR.join(p.text for p in parts) == (header.system or ""):
        keep_cache = policy.keep_cache_control
        blocks = []
        for part in parts:
            block: dict[str, Any] = {"type": "text", "text": part.text}
            if part.cache_control is not None and keep_cache:
                block["cache_control"] = part.cache_control
            blocks.append(block)
        return blocks
    return header.system or None


class _GroupRenderer(GroupRenderer):
    """Renders the groups of one request: Anthropic's wire shapes and rules 3, 7, 8, 10.

    The common parts (text, tool call, a tool result of one text) are built inline;
    everything else goes through the general per-part functions below.
    """

    __slots__ = ("keep_cache", "marks")

    def __init__(self, target: Provenance, policy: RenderPolicy) -> None:
        super().__init__(target, policy)
        self.keep_cache = policy.keep_cache_control
        self.marks = 0
        """``cache_control`` marks written for the group being rendered."""

    def __call__(self, group: Group, out: list[dict[str, Any]]) -> None:
        warnings = group.warnings
        if group.assistant is not None:
            content = self.assistant_blocks(group.assistant, warnings)
            if content:
                out.append({"role": "assistant", "content": content})
            elif group.results:
                raise RenderError(
                    f"assistant message at seq {group.assistant.seq} renders empty "
                    "but has tool calls"
                )
        # rule 7: every result of this window in one user message, before any user text;
        # the first user message of the window joins it (as Claude Code sends it)
        pending = []
        for result in group.results:
            pending.append(self.tool_result(result, warnings))
        if group.server_results:  # outputs of another api's caller-run provider items
            server_results_dropped(group, "anthropic/messages")
        for user in group.users:
            rendered = self.blocks(user.content, warnings)
            if not rendered:
                warnings.append(empty_message(user))
                continue
            if user.instruction_role is not None:
                warnings.append(instruction_as_user(user, "anthropic/messages"))
            out.append({"role": "user", "content": pending + rendered if pending else rendered})
            pending = []
        if pending:
            out.append({"role": "user", "content": pending})
        if self.marks:  # rare: spares two attribute writes per group
            group.marks, self.marks = self.marks, 0

    def assistant_blocks(
        self, message: AssistantMessage, warnings: list[WarningEvent]
    ) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        for part in message.content:
            block: dict[str, Any] | None
            if isinstance(part, ToolCallPart):
                block = self.tool_use(part)
            elif isinstance(part, TextPart):
                block = self.text_block(part, message.provenance)
            else:
                block = self.other_block(part, message, warnings)
            if block is not None:
                blocks.append(block)
        return blocks

    def tool_use(self, part: ToolCallPart) -> dict[str, Any]:
        block = {
            "type": "tool_use",
            "id": _IDS.get(part.id) or map_tool_call_id(part.id, ANTHROPIC_TOOL_IDS),
            "name": part.name,
            "input": part.arguments if type(part.arguments) is dict else _tool_input(part),
        }
        if part.cache_control is not None and self.keep_cache:
            block["cache_control"] = part.cache_control
            self.marks += 1
        return block

    def other_block(
        self,
        part: OtherAssistantPart,
        message: AssistantMessage,
        warnings: list[WarningEvent],
    ) -> dict[str, Any] | None:
        """Everything but text and tool calls."""
        if isinstance(part, RefusalPart):
            return None if is_blank(part.text) else {"type": "text", "text": part.text}
        if isinstance(part, ThinkingPart):
            return self.thinking_block(part, message, warnings)
        if isinstance(part, ServerToolCallPart | ServerToolResultPart):
            if replayable_server_part(part, message, self.target, warnings):
                native = dict(part.native)
                if "cache_control" in native:
                    if self.keep_cache:
                        self.marks += 1
                    else:
                        del native["cache_control"]
                return native
            return None
        if isinstance(part, ImagePart):
            warnings.append(
                warning("image_dropped", "Anthropic takes no images in assistant turns")
            )
            return None
        assert_never(part)

    def thinking_block(
        self, part: ThinkingPart, message: AssistantMessage, warnings: list[WarningEvent]
    ) -> dict[str, Any] | None:
        """Rules 1-2: a signed block only to the model that signed it, else the policy."""
        if self.native(reasoning_origin(part, message)):
            if part.redacted_data:  # an empty one is no block the API takes
                return {"type": "redacted_thinking", "data": part.redacted_data}
            if part.signature:
                return {"type": "thinking", "thinking": part.text, "signature": part.signature}
        text = foreign_reasoning(
            part, message, self.target, self.policy, warnings, "no signature valid for it"
        )
        return None if text is None else {"type": "text", "text": text}

    def text_block(self, part: TextPart, origin: Provenance | None) -> dict[str, Any] | None:
        """Rule 8: no blank text; citations only back to their origin; rule 10."""
        if is_blank(part.text):
            return None
        block: dict[str, Any] = {"type": "text", "text": part.text}
        if part.citations and self.native(origin) and all(c.native for c in part.citations):
            block["citations"] = [c.native for c in part.citations]
        if part.cache_control is not None and self.keep_cache:
            block["cache_control"] = part.cache_control
            self.marks += 1
        return block

    def tool_result(self, result: ToolMessage, warnings: list[WarningEvent]) -> dict[str, Any]:
        """One ``tool_result``; a lone plain text travels as a string (what most
        clients send), anything else as blocks."""
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": _IDS.get(result.call_id)
            or map_tool_call_id(result.call_id, ANTHROPIC_TOOL_IDS),
        }
        parts = result.content
        if (
            len(parts) == 1
            and type(only := parts[0]) is TextPart
            and not only.citations
            and (only.cache_control is None or not self.keep_cache)
        ):
            text = only.text
            if text and not text.isspace():  # is_blank, inline: every result passes here
                block["content"] = text
        elif parts and (blocks := self.blocks(parts, warnings)):
            block["content"] = blocks
        if result.is_error:
            block["is_error"] = True
        if result.cache_control is not None and self.keep_cache:
            block["cache_control"] = result.cache_control
            self.marks += 1
        return block

    def blocks(
        self, parts: Sequence[UserPart], warnings: list[WarningEvent]
    ) -> list[dict[str, Any]]:
        """User or tool-result content blocks."""
        blocks = []
        for part in parts:
            block: dict[str, Any] | None
            if isinstance(part, TextPart):
                block = self.text_block(part, None)
            else:
                block = _media_block(part, self.keep_cache, warnings)
                if block is not None and "cache_control" in block:
                    self.marks += 1
            if block is not None:
                blocks.append(block)
        return blocks


def _check_thinking_start(
    kwargs: dict[str, Any], policy: RenderPolicy, warnings: list[WarningEvent]
) -> None:
    """Rule 3: a tool loop continued with thinking on must be in a thinking-led turn.

    The API answers 400 "Expected `thinking` or `redacted_thinking`, but found `text`"
    otherwise (openai-agents-python#1704, pydantic-ai#2040, litellm#9020). The turn is
    the final assistant turn as the API sees it (:func:`_final_turn_start`), so the
    message checked is its first one, not merely the last assistant message.
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
    # The API joins consecutive user messages: what follows the assistant turn starts
    # with the first one's first block.
    continues_loop = not after or _opens_with_tool_result(after[0])
    first = history[_final_turn_start(history, last_assistant)]["content"][0]
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


def _final_turn_start(history: list[dict[str, Any]], last_assistant: int) -> int:
    """The first wire message of the assistant turn that ends at ``last_assistant``.

    The API joins consecutive messages of one role into one turn, and a tool loop is
    one assistant turn ("a tool-use loop is one assistant turn"): going back from the
    last assistant message, the turn goes on over assistant messages and over user
    messages whose joined content opens with tool results; it ends at a user message
    that opens with anything else (a new prompt).
    """
    start = index = last_assistant
    while index > 0:
        index -= 1
        if history[index]["role"] == "assistant":
            start = index
            continue
        first_user = index
        while first_user > 0 and history[first_user - 1]["role"] == "user":
            first_user -= 1
        if first_user == 0 or not _opens_with_tool_result(history[first_user]):
            break
        index = first_user
    return start


def _opens_with_tool_result(message: dict[str, Any]) -> bool:
    content = message["content"]
    return isinstance(content, list) and bool(content) and content[0].get("type") == "tool_result"


def _trim_final_assistant(history: list[dict[str, Any]], warnings: list[WarningEvent]) -> None:
    """A history that ends on an assistant message (a reply cut short, resumed) sends
    it as a prefill, which the API refuses when it ends in whitespace ("final
    assistant content cannot end with trailing whitespace"): the trailing whitespace
    of its last block, when that is text, is removed. Blank text blocks are never
    rendered (rule 8), so the block keeps some text. The message and block are
    copied: the rendered blocks may be shared with the session's render cache."""
    if not history or history[-1]["role"] != "assistant":
        return
    content = history[-1]["content"]
    last = content[-1] if content else None
    if last is None or last.get("type") != "text" or not last["text"][-1:].isspace():
        return
    text = last["text"].rstrip()
    if not text:  # never an empty block (rule 8); rendered blocks are never blank
        return
    history[-1] = {**history[-1], "content": [*content[:-1], {**last, "text": text}]}
    warnings.append(
        warning(
            "trailing_whitespace_trimmed",
            "the history ends on an assistant message whose text ends in whitespace; "
            "Anthropic refuses such a final assistant message: the whitespace was removed",
        )
    )


def _tool_input(part: ToolCallPart) -> Any:
    if part.arguments is not None:  # JSON, but not an object (a list, a number)
        return {"input": part.arguments}
    if part.kind == "custom" or part.arguments_raw:
        # a freeform (custom) tool's text input, or arguments that were not JSON:
        # Anthropic wants an object, so the text travels under "input"
        return {"input": part.arguments_raw or ""}
    return {}


def _media_block(
    part: ImagePart | DocumentPart, keep_cache: bool, warnings: list[WarningEvent]
) -> dict[str, Any] | None:
    block: dict[str, Any] | None
    if isinstance(part, ImagePart):
        block = _image_block(part, warnings)
    elif isinstance(part, DocumentPart):
        block = _document_block(part, warnings)
    else:
        assert_never(part)
    if block is not None and part.cache_control is not None and keep_cache:
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
        if not _readable_file_id(part.file_id, "image", warnings):
            return None
        source = {"type": "file", "file_id": part.file_id}
    else:
        warnings.append(warning("image_dropped", "image part with no url, data or file id"))
        return None
    return {"type": "image", "source": source}


def _document_block(part: DocumentPart, warnings: list[WarningEvent]) -> dict[str, Any] | None:
    source: dict[str, Any] | None
    if part.text is not None:
        source = {"type": "text", "media_type": "text/plain", "data": part.text}
    elif part.data is not None:
        source = _inline_document(part.data, part.media_type, warnings)
    elif part.url is not None:
        source = {"type": "url", "url": part.url}
    elif part.file_id is not None:
        if not _readable_file_id(part.file_id, "document", warnings):
            return None
        source = {"type": "file", "file_id": part.file_id}
    else:
        warnings.append(warning("document_dropped", "document part with no content"))
        return None
    if source is None:
        return None
    block: dict[str, Any] = {"type": "document", "source": source}
    for key in ("title", "context"):
        if getattr(part, key) is not None:
            block[key] = getattr(part, key)
    if part.citations_enabled is not None:
        block["citations"] = {"enabled": part.citations_enabled}
    return block


def _readable_file_id(file_id: str, kind: str, warnings: list[WarningEvent]) -> bool:
    """Whether a file id can be Anthropic's (:func:`~adapters._render.foreign_file_id`);
    one that cannot (another provider's file, which Anthropic does not know) is dropped
    with an ``image_dropped`` / ``document_dropped`` warning."""
    if not foreign_file_id(file_id, PROVIDER):
        return True
    warnings.append(
        warning(
            f"{kind}_dropped",
            f"{kind} by file id {file_id!r}, which is not an Anthropic file id (another "
            "provider's file): Anthropic cannot read it; dropped",
            file_id=file_id,
        )
    )
    return False


def _inline_document(
    data: str, media_type: str | None, warnings: list[WarningEvent]
) -> dict[str, Any] | None:
    """A document's base64 bytes as a source: Anthropic takes base64 PDFs only, and
    plain text as a ``text`` source. So ``text/*`` (CSV, Markdown...) is decoded and
    sent as text; any other type is dropped with a ``document_dropped`` warning. No
    media type is taken to be a PDF (what OpenAI's file parts mostly carry)."""
    kind = (media_type or "application/pdf").split(";")[0].strip().lower()
    if kind == "application/pdf":
        return {"type": "base64", "media_type": "application/pdf", "data": data}
    text = _decoded_text(data) if kind.startswith("text/") else None
    if text is None or is_blank(text):
        why = "not UTF-8 text" if kind.startswith("text/") else "only PDF and plain text"
        warnings.append(
            warning(
                "document_dropped",
                f"{kind} document: Anthropic takes {why} as a document; dropped",
                media_type=kind,
            )
        )
        return None
    return {"type": "text", "media_type": "text/plain", "data": text}


def _decoded_text(data: str) -> str | None:
    """Base64 bytes as UTF-8 text, or None when they are not."""
    try:
        return base64.b64decode(data, validate=True).decode("utf-8")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        return None


def _function_tool(spec: ToolSpec) -> dict[str, Any] | None:
    """A client tool's definition; provider (server) tools have no Anthropic form."""
    if spec.kind == "server":
        return None
    schema = spec.input_schema or {"type": "object", "properties": {}}
    if spec.kind == "custom":
        schema = {
            "type": "object",
            "properties": {"input": {"type": "string"}},
            "required": ["input"],
        }
    tool: dict[str, Any] = {"name": spec.name, "input_schema": schema}
    description = spec.description
    form = custom_tool_format(spec) if spec.kind == "custom" else None
    if form is not None and form.get("type") == "grammar":
        # No grammar-constrained input here: the model is told the grammar instead.
        grammar = f"The input follows this {form.get('syntax')} grammar:\n{form.get('definition')}"
        description = f"{description}\n\n{grammar}" if description else grammar
    if description:
        tool["description"] = description
    return tool


# ================================================================ parse


@parsed_request
def parse_request(kwargs: dict[str, Any]) -> list[Event]:
    """A ``messages.create`` request body as events: the header, then the history.

    Assistant content gets the provenance ``("anthropic", "messages", model)`` — the
    request's model is the best knowledge of which model wrote it. A user message's
    ``tool_result`` blocks become ``tool/result`` events (in order) followed by one
    ``user/message`` with the rest. Blocks of a type this parser does not know are
    kept as ``native/unknown`` events.
    """
    model = str_or_none(kwargs.get("model"))
    provenance = Provenance(provider=PROVIDER, api=API, model=model)
    events: list[Event] = [_parse_header(kwargs)]
    with request_part("$.messages"):
        messages = list(kwargs.get("messages") or [])
    for index, message in enumerate(messages):
        with request_part(f"$.messages[{index}]"):
            role = message.get("role")
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if role == "assistant":
                events.extend(_parse_assistant(blocks or [], provenance, index))
            elif role == "user":
                events.extend(_parse_user(blocks or [], index))
            else:
                events.append(unknown_role(RUNTIME, message, f"$.messages[{index}]"))
    return events


_source = functools.partial(source, RUNTIME)


def _parse_header(kwargs: dict[str, Any]) -> RequestHeaderEvent:
    body = request_body(kwargs, "messages")
    refuse_the_other_messages_api(body, "anthropic")
    system = body.get("system")
    system_parts = None
    with request_part("$.system"):
        if isinstance(system, list):  # text blocks: kept whole, their texts joined
            system_parts = [
                TextPart(
                    text=text_value(block.get("text", "")),
                    cache_control=dict_or_none(block.get("cache_control")),
                )
                for block in system
            ]
            system = _SYSTEM_SEPARATOR.join(part.text for part in system_parts)
        elif system is not None:
            system = text_value(system)
    specs = parse_tools(body, _parse_tool)
    return parse_header(
        body,
        provider=PROVIDER,
        api=API,
        runtime=RUNTIME,
        history_keys=_HISTORY_KEYS,
        system=system,
        system_parts=system_parts,
        tools=specs,
    )


def _parse_tool(tool: dict[str, Any]) -> ToolSpec:
    kind = tool.get("type")
    # client tools have no type (or "custom"); versioned types are Anthropic-defined
    server = kind is not None and kind != "custom"
    return ToolSpec(
        name=text_value(tool.get("name", kind or "")),
        description=str_or_none(tool.get("description")),
        input_schema=dict_or_none(tool.get("input_schema")),
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
                    call_id=text_value(block["tool_use_id"]),
                    content=_parse_result_content(block.get("content"), index, events),
                    is_error=bool(block.get("is_error", False)),
                    cache_control=dict_or_none(block.get("cache_control")),
                    source=_source("tool_result"),
                )
            )
            continue
        part = user_part(block)
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
        part = user_part(block)
        if part is None:
            events.append(_unknown(block, index, "tool_result content block"))
        else:
            parts.append(part)
    return parts


def user_part(block: dict[str, Any]) -> UserPart | None:
    """An Anthropic user / tool-result content block (text, image, document) as a part;
    None for another block type. Claude Code's messages carry the same blocks.

    A text that is not a string makes the block malformed (``TypeError``); an optional
    field of another type is dropped."""
    kind = block.get("type")
    cache = dict_or_none(block.get("cache_control"))
    if kind == "text":
        return TextPart(text=text_value(block["text"]), cache_control=cache)
    if kind == "image":
        source = block.get("source") or {}
        return ImagePart(
            url=str_or_none(source.get("url")),
            data=str_or_none(source.get("data")),
            media_type=str_or_none(source.get("media_type")),
            file_id=str_or_none(source.get("file_id")),
            cache_control=cache,
        )
    if kind == "document":
        source = block.get("source") or {}
        text_source = source.get("type") == "text"
        citations = block.get("citations")
        return DocumentPart(
            url=str_or_none(source.get("url")),
            data=None if text_source else str_or_none(source.get("data")),
            text=str_or_none(source.get("data")) if text_source else None,
            media_type=None if text_source else str_or_none(source.get("media_type")),
            file_id=str_or_none(source.get("file_id")),
            title=str_or_none(block.get("title")),
            context=str_or_none(block.get("context")),
            citations_enabled=bool_or_none(citations.get("enabled"))
            if isinstance(citations, dict)
            else None,
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
    if not isinstance(kind, str):
        return None  # kept as native/unknown
    if kind == "text":
        citations = [
            Citation(
                kind=str(c.get("type", "")),
                cited_text=str_or_none(c.get("cited_text")),
                native=dict(c),
            )
            for c in block.get("citations") or []
        ]
        return TextPart(
            text=text_value(block["text"]),
            citations=citations,
            cache_control=dict_or_none(block.get("cache_control")),
        )
    if kind == "thinking":
        return ThinkingPart(
            text=text_value(block.get("thinking", "")),
            signature=str_or_none(block.get("signature")),
            provenance=provenance,
        )
    if kind == "redacted_thinking":
        return ThinkingPart(redacted_data=str_or_none(block.get("data")), provenance=provenance)
    if kind == "tool_use":
        return ToolCallPart(
            id=text_value(block["id"]),
            name=text_value(block["name"]),
            arguments=block.get("input"),
            cache_control=dict_or_none(block.get("cache_control")),
            provenance=provenance,
        )
    if kind in ("server_tool_use", "mcp_tool_use") or (
        "id" in block and "name" in block and kind.endswith("tool_use")
    ):
        return ServerToolCallPart(
            id=text_value(block.get("id", "")),
            name=text_value(block.get("name", kind)),
            input=block.get("input"),
            native=block,
            provenance=provenance,
        )
    if "tool_use_id" in block:
        return ServerToolResultPart(
            call_id=text_value(block["tool_use_id"]),
            kind=kind,
            native=block,
            provenance=provenance,
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
