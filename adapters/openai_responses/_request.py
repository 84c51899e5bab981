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
  A server-tool item (``web_search_call``, ...) follows the same rule: its id is left
  out where the input schema allows it, and an item whose schema requires its id
  (:data:`_ID_REQUIRED`) is not sent when a reasoning part before it is not replayed
  ("Item 'ws_...' of type 'web_search_call' was provided without its required
  'reasoning' item", ``server_tool_dropped``).
* rule 5: ``call_id`` carries the (mapped) tool-call id; the ``fc_`` item ``id`` is a
  different thing, sent only back to its origin.
* rule 6 for caller-run provider items (``local_shell_call``, ``shell_call``,
  ``computer_call``, ``apply_patch_call``: opaque server-tool parts whose output the
  caller logs as a tool result): each goes back with its output item
  (:func:`_caller_output`), a synthetic failed one when it has none ("No tool output
  found for local shell call call_..."); one that no output can be made for (a
  computer call without a screenshot) is not sent, nor its output.
* rule 11: the system prompt goes in ``instructions``.
* failed tool results: a tool output has no error flag, so a failed one opens with
  :data:`~adapters._render.TOOL_ERROR_MARKER` (and a space), as Chat's tool messages
  do, and ``parse_request`` reverses it, as Chat's does.
* file ids go only to the provider that issued them: an Anthropic ``file_`` id is not
  sent (:func:`~adapters._render.foreign_file_id`); the part's bytes or URL go instead.
"""

from __future__ import annotations

import functools
import json
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
    server_call_id,
    server_result_dropped,
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
        # outputs of the caller-run provider items, by the call they answer (rule 6)
        answers = {result.call_id: result for result in group.server_results}
        outputs: list[dict[str, Any]] = []
        if group.assistant is not None:
            self.assistant_items(group.assistant, out, warnings, answers, outputs)
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
        out.extend(outputs)
        for result in answers.values():  # their calls were not sent
            why = "its call is not sent to openai/responses"
            warnings.append(server_result_dropped(result, why))
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
        self,
        message: AssistantMessage,
        items: list[dict[str, Any]],
        warnings: list[WarningEvent],
        answers: dict[str, ToolMessage],
        outputs: list[dict[str, Any]],
    ) -> None:
        """The message's items; the outputs of its caller-run provider items go to
        ``outputs`` (taken from ``answers``, which keeps the outputs of calls not sent)."""
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
                items.append(_call_item(part, keep_ids, warnings))
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
                    item = self.server_item(part, message, index, keep_ids, warnings)
                    if item is not None and self.answered(
                        item, part, message, answers, outputs, warnings
                    ):
                        items.append(item)
            elif isinstance(part, ImagePart):
                warnings.append(warning("image_dropped", "no images in Responses assistant items"))
            else:
                assert_never(part)

    def server_item(
        self,
        part: ServerToolCallPart | ServerToolResultPart,
        message: AssistantMessage,
        index: int,
        keep_ids: bool,
        warnings: list[WarningEvent],
    ) -> dict[str, Any] | None:
        """A server-tool part as an input item, under rule 4's ids: without
        ``keep_ids`` its id is left out, or, where the input schema requires it, the
        item is not sent (None) when a reasoning part before it is not replayed."""
        item = _replay_item(part.native)
        if keep_ids or "id" not in item:
            return item
        kind = item.get("type")
        if kind not in _ID_REQUIRED:
            del item["id"]  # as fc_ / msg_ ids
            return item
        bound = isinstance(kind, str) and not kind.endswith("_output")  # outputs: caller's
        if bound and any(type(p) is ThinkingPart for p in message.content[:index]):
            warnings.append(
                warning(
                    "server_tool_dropped",
                    f"{kind} item {item['id']!r} needs its id, and with it the reasoning "
                    "item before it, which is not replayed; dropped",
                    item_id=item["id"],
                    seq=message.seq,
                )
            )
            return None
        return item

    def answered(
        self,
        item: dict[str, Any],
        part: ServerToolCallPart | ServerToolResultPart,
        message: AssistantMessage,
        answers: dict[str, ToolMessage],
        outputs: list[dict[str, Any]],
        warnings: list[WarningEvent],
    ) -> bool:
        """Rule 6 for a caller-run provider item: its output (a synthetic failed one
        when the log has none) goes to ``outputs``; False when no output can be made
        for it, and the item is not sent either. Other items need no output: True, as
        for one whose output item is in the message itself (a parsed request body)."""
        kind = item.get("type")
        if type(part) is not ServerToolCallPart or kind not in _CALLER_RUN:
            return True
        call_id = server_call_id(part)
        result = answers.pop(call_id, None)
        synthetic = result is None
        if result is None and call_id in _native_outputs(message):
            return True
        if result is None:
            text = self.policy.interrupted_result
            result = ToolMessage(call_id=call_id, content=[TextPart(text=text)], is_error=True)
        output = _caller_output(kind, call_id, result, warnings)
        if output is None:
            warnings.append(
                warning(
                    "server_tool_dropped",
                    f"{kind} {call_id!r} has no output Responses takes (a computer call's "
                    "output is a screenshot); the call and its output dropped",
                    call_id=call_id,
                )
            )
            return False
        if synthetic:
            warnings.append(
                warning(
                    "synthetic_tool_result",
                    f"{kind} {call_id!r} has no output; a synthetic failed output was inserted",
                    call_id=call_id,
                )
            )
        outputs.append(output)
        return True


def _native_outputs(message: AssistantMessage) -> set[str]:
    """The calls answered by output items inside the message itself (``parse_request``
    keeps a ``local_shell_call_output`` / ``shell_call_output`` item of a request body
    in the assistant message, whole): ``call_id``, else ``id`` (the local shell one's)."""
    answered = set()
    for part in message.content:
        if isinstance(part, ServerToolCallPart | ServerToolResultPart):
            kind = part.native.get("type")
            if isinstance(kind, str) and kind.endswith("_output"):
                call_id = part.native.get("call_id") or part.native.get("id")
                if isinstance(call_id, str):
                    answered.add(call_id)
    return answered


_ID_REQUIRED = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "computer_call",
        "local_shell_call",
        "local_shell_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "program",
        "program_output",
    }
)
"""Server-tool input items whose ``id`` the input schema requires (openai 3.57
``ResponseInputItemParam``: ``id: Required[str]``); the others (``shell_call``,
``apply_patch_call``, ``tool_search_call``, the ``*_output`` items but
``local_shell_call_output``...) take none, as ``function_call`` does. Checked against
the SDK by ``test_responses_server_items_needing_their_id_are_the_sdks``."""

_CALLER_RUN = frozenset({"local_shell_call", "shell_call", "computer_call", "apply_patch_call"})
"""Provider items the caller runs and answers with an output item (rule 6)."""


def _caller_output(
    kind: str, call_id: str, result: ToolMessage, warnings: list[WarningEvent]
) -> dict[str, Any] | None:
    """The output item answering a caller-run provider item, built from the logged
    tool result (its parts: the native output item is not in the history); None when
    the result holds nothing the item type takes (a computer call wants a screenshot).

    ``local_shell_call``: a ``function_call_output`` naming the ``call_id``, as Codex
    (the client the local shell tool was made for) answers it (openai/codex
    ``codex-rs``: a ``LocalShellCall`` pairs with a ``FunctionCallOutput``).
    ``shell_call``: ``shell_call_output`` chunks, each parsed back from the JSON text the
    adapter logged it as (else the text as stdout, exit code 1 for a failed result).
    ``apply_patch_call``: ``apply_patch_call_output``, ``failed`` for a failed result.
    ``computer_call``: ``computer_call_output`` with the result's first image.
    """
    if kind == "local_shell_call":
        output = _output(result.content, warnings)
        return {
            "type": "function_call_output",
            "call_id": call_id,
            "output": _failed_output(output) if result.is_error else output,
        }
    if kind == "shell_call":
        return {"type": "shell_call_output", "call_id": call_id, "output": _shell_chunks(result)}
    if kind == "apply_patch_call":
        item: dict[str, Any] = {
            "type": "apply_patch_call_output",
            "call_id": call_id,
            "status": "failed" if result.is_error else "completed",
        }
        text = "\n".join(p.text for p in result.content if isinstance(p, TextPart))
        if text:
            item["output"] = text
        return item
    image = next((p for p in result.content if isinstance(p, ImagePart)), None)
    if image is None:
        return None
    screenshot: dict[str, Any] = {"type": "computer_screenshot"}
    if image.file_id is not None and not foreign_file_id(image.file_id, PROVIDER):
        screenshot["file_id"] = image.file_id
    elif (url := image_url(image)) is not None:
        screenshot["image_url"] = url
    else:
        return None
    return {"type": "computer_call_output", "call_id": call_id, "output": screenshot}


def _shell_chunks(result: ToolMessage) -> list[dict[str, Any]]:
    """``shell_call_output.output``: the chunks the adapter logged as JSON text
    (``{"stdout", "stderr", "outcome"}``), any other text as the stdout of one chunk."""
    chunks: list[dict[str, Any]] = []
    for part in result.content:
        if not isinstance(part, TextPart):
            continue
        try:
            chunk = json.loads(part.text)
        except ValueError:
            chunk = None
        if isinstance(chunk, dict) and {"stdout", "stderr", "outcome"} <= chunk.keys():
            chunks.append(chunk)
        else:
            exit_code = 1 if result.is_error else 0
            outcome = {"type": "exit", "exit_code": exit_code}
            chunks.append({"stdout": part.text, "stderr": "", "outcome": outcome})
    return chunks


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


def _call_item(part: ToolCallPart, keep_ids: bool, warnings: list[WarningEvent]) -> dict[str, Any]:
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
            "arguments": json_arguments(part, warnings),
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
            kind="function" if kind == "function" else "custom",  # the default itself
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
