"""What every renderer shares: policy, tool-call id mapping, orphan repair, caching.

A renderer turns ``derive_messages()`` output plus the current ``request/header`` into
the keyword arguments of one SDK's ``create()``. The three renderers
(:mod:`adapters.anthropic._request`, :mod:`adapters.openai_chat._request`,
:mod:`adapters.openai_responses._request`) differ in wire shapes only; the decisions
that every switch of runtime runs into (see ``shared/PITFALLS.md``) are made here, once:

* **Rule 1 / 2 — reasoning.** Provider-bound reasoning (Anthropic signatures and
  redacted data, Responses ``encrypted_content`` and ``rs_`` ids) is replayed only
  when its :class:`~universal_event.parts.Provenance` is the same origin as the target
  (provider + api + model). Anything else is *foreign* and follows
  :attr:`RenderPolicy.foreign_reasoning`: ``drop`` (the default) removes the block,
  ``text`` turns its readable text into a plain text part. A block is never half kept
  (no signature-less thinking block, no ``redacted_thinking`` re-wrap).
* **Rule 5 — tool-call ids** go through :func:`map_tool_call_id`: one deterministic,
  collision-free function of the id and the target's id format, the same for calls and
  results; :class:`ToolIdMapper` reverses it for ids that come back. Tool names the
  target refuses go through :func:`map_tool_name` (the same digest), alike in the
  declared tools, the tool choice and the calls of the history, with one
  ``tool_name_mapped`` warning holding the mapping.
* **Rule 6 — orphans.** :func:`repair_group` pairs every tool result with the call
  it answers, within the assistant message's window (up to the next assistant
  message). A call without a result gets a synthetic error result
  (:attr:`RenderPolicy.interrupted_result`); a result without a call is dropped. Both
  produce a :class:`~universal_event.events.WarningEvent`. A result answering a
  provider-bound call the *caller* runs (a Responses ``local_shell_call``,
  ``shell_call``, ``computer_call``, ``apply_patch_call``: opaque
  :class:`~universal_event.parts.ServerToolCallPart` s) is no orphan: it goes in
  :attr:`Group.server_results`, replayed with its call where the call is, dropped with
  it (``server_tool_dropped``) where it is not.
* **Caching.** Rendering is a pure function of each history *group* (an assistant
  message with its results and the user messages after them), the target and the
  policy, so :class:`RenderCache` keeps each group's wire messages and re-renders only
  the groups after the first message that changed (the surface segment that moved).

Speed: a full render is one pass over the history. Groups are found and repaired in
that pass without copying messages, each renderer appends straight into the one wire
list (no per-group lists to merge), warnings go to one shared list, tool-call ids are
memoised per id format, and the renderers take the common parts (text, tool call,
one-text tool result) on inline fast paths before any general dispatch
(``bench/bench_render.py``).

:class:`RenderRun` is the frame every ``render_request`` shares (target, translated
settings, warnings, tools, ``extra_body``); :func:`request_body` and
:func:`parse_header` the frame every ``parse_request`` shares.
"""

from __future__ import annotations

import base64
import bisect
import functools
import hashlib
import json
import re
import string
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import msgspec

from adapters._base import MALFORMED
from universal_event.errors import DecodeError, RenderError, UniversalEventError
from universal_event.events import (
    Event,
    InstructionRole,
    NativeUnknownEvent,
    RequestHeaderEvent,
    Source,
    ToolSpec,
    WarningEvent,
)
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
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

__all__ = [
    "ANTHROPIC_TOOL_IDS",
    "CHAT_TOOL_IDS",
    "CallIds",
    "FILE_ID_ISSUERS",
    "INVALID_ARGUMENTS_KEY",
    "RESPONSES_TOOL_IDS",
    "TOOL_ERROR_MARKER",
    "TOOL_NAMES",
    "Group",
    "GroupRenderer",
    "OtherAssistantPart",
    "RenderCache",
    "RenderPolicy",
    "RenderRun",
    "RenderedHistory",
    "Renderer",
    "ToolIdFormat",
    "ToolIdMapper",
    "add_openai_users",
    "developer_role_model",
    "empty_message",
    "file_id_issuer",
    "foreign_file_id",
    "foreign_reasoning",
    "foreign_reasoning_text",
    "group_history",
    "instruction_as_user",
    "is_blank",
    "map_tool_call_id",
    "map_tool_name",
    "merged_sampling",
    "model_snapshot_date",
    "model_snapshot_family",
    "openai_file",
    "openai_file_dropped",
    "parse_arguments",
    "parse_header",
    "parse_tools",
    "parsed_request",
    "render_history",
    "repair_group",
    "request_body",
    "request_part",
    "unknown_role",
    "same_model",
    "same_origin",
    "server_call_id",
    "server_result_dropped",
    "server_results_dropped",
    "setting_shape_problem",
    "valid_arguments",
    "warning",
    "with_error_mark",
    "without_error_mark",
]


class RenderPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How a renderer resolves what the target cannot take as it is.

    Every option has the safe default; each is one documented decision.
    """

    foreign_reasoning: Literal["drop", "text"] = "drop"
    """Reasoning minted by another provider / api / model (rules 1-2).

    ``drop``: removed, with a ``reasoning_dropped`` warning (Vercel AI's choice: the
    request always works, the model loses that context). ``text``: its readable text
    (thinking text or Responses summaries) becomes a plain text part, formatted by
    :attr:`foreign_reasoning_template`. Opaque payloads (signatures, redacted data,
    encrypted content) are never sent to a foreign target under either policy.
    """
    foreign_reasoning_template: str = "{text}"
    """Format of foreign reasoning under ``text``; ``{text}`` is the reasoning (it must
    appear; other literal braces are doubled, ``{{``). Tags such as ``<thinking>`` get
    imitated by some models (pydantic-ai#5869), so the default is the bare text. A
    template that cannot be formatted is a :class:`RenderError` when the policy is built."""
    thinking_fallback: Literal["disable", "error"] = "disable"
    """Anthropic with thinking on, when the last assistant turn of a tool loop does not
    start with a thinking block (rule 3): ``disable`` sends the request with
    ``thinking: {"type": "disabled"}`` and a ``thinking_disabled`` warning; ``error``
    raises :class:`~universal_event.errors.RenderError`."""
    interrupted_result: str = "interrupted: the tool call ended before it returned a result"
    """Text of the synthetic error result given to a call without a result (rule 6)."""
    chat_system_role: Literal["auto", "system", "developer"] = "auto"
    """Chat Completions role of the system prompt (rule 11). ``auto``: ``developer``
    for the reasoning families (o1, o3, o4, gpt-5, their ``-chat`` models included:
    :func:`developer_role_model`; o1-mini rejects ``system`` with HTTP 400, see
    fixtures/recorded/openai-chat/error_400_system_role_unsupported), ``system`` for
    the others."""
    chat_reasoning_content: bool = False
    """Chat Completions: send same-origin reasoning back as ``reasoning_content`` (some
    compatible servers need it, PITFALLS 12). OpenAI's own API has no such field."""
    keep_cache_control: bool = True
    """Keep ``cache_control`` hints where the target supports them (Anthropic; rule 10)."""
    model: str | None = None
    """The target model; default: the header's model."""
    default_max_tokens: int = 4096
    """Anthropic requires ``max_tokens``; used when the header sets none."""

    def __post_init__(self) -> None:
        _check_reasoning_template(self.foreign_reasoning_template)


def _check_reasoning_template(template: str) -> None:
    """A :class:`RenderError` naming the policy field unless ``template`` formats with
    ``{text}`` alone: no other placeholder, no stray brace, ``{text}`` present."""
    problem = _template_problem(template)
    if problem is not None:
        raise RenderError(
            f"RenderPolicy.foreign_reasoning_template {template!r}: {problem} "
            "(the only placeholder is {text}; write a literal brace as {{ or }})"
        )


def _template_problem(template: str) -> str | None:
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:  # a lone "{" or "}"
        return str(exc)
    others = sorted({name for name in fields if name != "text"})
    if others:
        return "unknown placeholder " + ", ".join("{" + name + "}" for name in others)
    if not fields:
        return "no {text} placeholder: the reasoning would not be sent"
    try:  # a format spec the text does not take ({text:d})
        template.format(text="")
    except ValueError as exc:
        return str(exc)
    return None


# ---------------------------------------------------------------- warnings


def warning(
    code: str, message: str, *, native_type: str = "render", **details: Any
) -> WarningEvent:
    """A warning event for something a renderer (or a hand-off: ``native_type``)
    repaired or dropped on purpose."""
    return WarningEvent(
        code=code,
        message=message,
        details=details or None,
        source=Source(runtime="universal-event", native_type=native_type),
    )


# ---------------------------------------------------------------- tool-call ids


@dataclass(frozen=True, slots=True, eq=False)
class ToolIdFormat:
    """The tool-call ids a target accepts.

    Compared and hashed by identity: the formats are the module's constants.
    ``memo`` holds every id already mapped for this format (the mapping is a pure
    function, so the memo is exact); renderers look ids up in it before calling
    :func:`map_tool_call_id`, which makes the mapping of a whole history one dict
    lookup per id after its first render.
    """

    name: str
    pattern: re.Pattern[str]
    max_length: int
    memo: dict[str, str] = field(default_factory=dict, repr=False)

    def accepts(self, call_id: str) -> bool:
        return 0 < len(call_id) <= self.max_length and self.pattern.fullmatch(call_id) is not None

    def remember(self, value: str, mapped: str) -> str:
        """``mapped``, memoised for ``value`` (the memo is cleared first when it holds
        :data:`_MEMO_LIMIT` values)."""
        if len(self.memo) >= _MEMO_LIMIT:
            self.memo.clear()
        self.memo[value] = mapped
        return mapped


ANTHROPIC_TOOL_IDS = ToolIdFormat("anthropic", re.compile(r"[a-zA-Z0-9_-]+"), 64)
"""Anthropic ``tool_use.id`` / ``tool_result.tool_use_id``: ``^[a-zA-Z0-9_-]+$``, at most
64 characters (the API's 400 message states the pattern; PITFALLS 6)."""
CHAT_TOOL_IDS = ToolIdFormat("openai-chat", re.compile(r"[a-zA-Z0-9_-]+"), 40)
"""OpenAI Chat ``tool_calls[].id``: the API rejects ids over 40 characters
("string too long. Expected a string with maximum length 40"); we also keep to the
Anthropic charset so ids survive a later switch unchanged."""
RESPONSES_TOOL_IDS = ToolIdFormat("openai-responses", re.compile(r"[!-~]+"), 64)
"""OpenAI Responses ``call_id``: printable ASCII (``|`` included), at most 64 characters
("Invalid 'input[5].call_id': string too long. Expected a string with maximum length
64", ``string_above_max_length``). Ids minted elsewhere can be far longer (450+
characters from some Responses-compatible servers, Codex MCP call ids past 80;
PITFALLS 6): those are mapped, the same way for the call and its output."""

_MAPPED_PREFIX = "ue_"
_DIGEST_CHARS = 22  # 16 bytes (128 bits) of SHA-256, base64url without padding
_MEMO_LIMIT = 1 << 16  # ids per format; the memo is cleared when it grows past this


def map_tool_call_id(call_id: str, fmt: ToolIdFormat) -> str:
    """The id a target sees for ``call_id``: deterministic and collision-free.

    An id the target accepts passes unchanged, unless it starts with the reserved
    prefix ``ue_``. Every other id becomes ``ue_<readable part>_<digest>`` where the
    digest is 128 bits of SHA-256 of the original id, base64url-encoded. The two
    ranges are disjoint (passed ids never start with ``ue_``), and two mapped ids are
    equal only if their digests are: the function is injective up to a SHA-256
    collision. Calls and results use this same function, so pairs stay paired.
    """
    mapped = fmt.memo.get(call_id)
    return mapped if mapped is not None else fmt.remember(call_id, _mapped_id(call_id, fmt))


def _mapped_id(call_id: str, fmt: ToolIdFormat) -> str:
    if fmt.accepts(call_id) and not call_id.startswith(_MAPPED_PREFIX):
        return call_id
    return _digested(call_id, fmt.max_length)


def _digested(value: str, max_length: int) -> str:
    """``ue_<readable part>_<128-bit digest of value>``, at most ``max_length`` long."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(value.encode()).digest()[:16])
    tail = digest.decode().rstrip("=")
    room = max_length - len(_MAPPED_PREFIX) - 1 - _DIGEST_CHARS
    readable = re.sub(r"[^a-zA-Z0-9_-]", "_", value)[: max(room, 0)]
    return f"{_MAPPED_PREFIX}{readable}_{tail}"


class ToolIdMapper:
    """Maps ids for one target and reverses the ones it mapped.

    The mapping itself is :func:`map_tool_call_id` (stateless); the mapper remembers
    each id it mapped so an id coming back from the target (a tool result the client
    reports against the rendered id, an echoed item) can be turned back into the
    session's own id. Ids it never mapped are returned unchanged: they are new ids
    minted by the target.
    """

    def __init__(self, fmt: ToolIdFormat) -> None:
        self.fmt = fmt
        self._reverse: dict[str, str] = {}

    def forward(self, call_id: str) -> str:
        mapped = map_tool_call_id(call_id, self.fmt)
        self._reverse[mapped] = call_id
        return mapped

    def reverse(self, mapped: str) -> str:
        return self._reverse.get(mapped, mapped)

    @classmethod
    def for_messages(cls, messages: Sequence[Message], fmt: ToolIdFormat) -> ToolIdMapper:
        """A mapper that knows every call id of a history."""
        mapper = cls(fmt)
        for message in messages:
            if isinstance(message, AssistantMessage):
                for part in message.content:
                    if isinstance(part, ToolCallPart):
                        mapper.forward(part.id)
        return mapper


# ---------------------------------------------------------------- tool names


TOOL_NAMES = {
    "messages": ToolIdFormat("anthropic-tool-names", re.compile(r"[a-zA-Z0-9_-]+"), 128),
    "chat": ToolIdFormat("openai-chat-tool-names", re.compile(r"[a-zA-Z0-9_-]+"), 64),
    "responses": ToolIdFormat("openai-responses-tool-names", re.compile(r"[a-zA-Z0-9_-]+"), 64),
}
"""The tool names each api takes (Anthropic's API errors quote its pattern; OpenAI's
function definitions say "a-z, A-Z, 0-9, underscores and dashes, at most 64"). OpenAI
checks the calls of the history too ("Invalid 'messages[2].tool_calls[0].function.name':
string does not match pattern '^[a-zA-Z0-9_-]+$'"); every api gets its calls mapped like
its declared tools, so the two keep one name. MCP tools from other runtimes are often
named outside them (``docs.search``, 68-character ``mcp__...`` names)."""


def map_tool_name(name: str, api: str) -> str:
    """The name a target api sees for a tool: deterministic and collision-free.

    A name the api takes passes unchanged; any other becomes ``ue_<readable part>_<digest>``
    (:func:`map_tool_call_id`'s digest), the same for the declared tool, the tool choice
    and every call of the history, so the model sees one name. Unlike ids, passed names
    are not kept out of the ``ue_`` range: a mapped name is a valid name and maps to
    itself, so a call the model makes with it (logged under that name) stays the same
    tool. Two refused names map to different names up to a SHA-256 collision.
    """
    fmt = TOOL_NAMES[api]
    mapped = fmt.memo.get(name)
    if mapped is not None:
        return mapped
    return fmt.remember(name, name if fmt.accepts(name) else _digested(name, fmt.max_length))


def _map_call_names(group: Group, api: str) -> None:
    """The group's tool calls under the names ``api`` takes (:func:`map_tool_name`),
    with one ``tool_name_mapped`` warning (:class:`RenderRun` merges them)."""
    renames = {
        call.name: mapped
        for call in group.calls.values()
        if (mapped := map_tool_name(call.name, api)) != call.name
    }
    if not renames:
        return
    _rename_in_calls(group, "name", renames)
    group.warnings.append(_names_mapped(renames, api))


def _rename_in_calls(group: Group, key: Literal["id", "name"], renames: dict[str, str]) -> None:
    """Give the group's tool calls whose ``key`` (their id or tool name) ``renames``
    holds its new value, alike in the assistant message and in ``calls`` (keyed by the
    ids the calls now have)."""

    def renamed(part: ToolCallPart) -> ToolCallPart:
        new = renames.get(getattr(part, key))
        return part if new is None else msgspec.structs.replace(part, **{key: new})

    assert group.assistant is not None  # only an assistant message opens calls
    group.assistant = msgspec.structs.replace(
        group.assistant,
        content=[
            renamed(part) if type(part) is ToolCallPart else part
            for part in group.assistant.content
        ],
    )
    group.calls = {call.id: call for call in map(renamed, group.calls.values())}


def _names_mapped(renames: dict[str, str], api: str) -> WarningEvent:
    return warning(
        "tool_name_mapped",
        f"tool names {api} refuses were sent mapped (calls the model makes come back under "
        "the mapped name): " + ", ".join(f"{name!r} as {new!r}" for name, new in renames.items()),
        names=renames,
    )


# ---------------------------------------------------------------- reasoning


_SNAPSHOT_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


@functools.lru_cache(maxsize=256)
def model_snapshot_family(model: str | None) -> str | None:
    """A model name without its snapshot suffix: ``claude-sonnet-4-20250514`` and the
    alias ``claude-sonnet-4-0`` → ``claude-sonnet-4``; ``gpt-5-2025-08-07`` → ``gpt-5``."""
    if model is None:
        return None
    base = _SNAPSHOT_SUFFIX.sub("", model)
    return base[:-2] if base.endswith("-0") else base


@functools.lru_cache(maxsize=256)
def model_snapshot_date(model: str | None) -> str | None:
    """The date of a dated snapshot (``20250514``, ``2025-08-07``); None for an alias
    (``claude-sonnet-4-0``, ``claude-3-5-sonnet-latest``, ``gpt-5``)."""
    match = _SNAPSHOT_SUFFIX.search(model) if model is not None else None
    if match is None or match.group(1) == "latest":
        return None
    return match.group(1)


def same_model(model: str | None, other: str | None) -> bool:
    """One model under two names: one snapshot family, and not two different dates.

    An alias and a dated snapshot of its family count as one (the API reports the
    snapshot for a request made with the alias); two dated snapshots are two models
    (``claude-3-5-sonnet-20240620`` and ``-20241022`` are different Claudes).
    """
    if model == other:
        return True
    if model_snapshot_family(model) != model_snapshot_family(other):
        return False
    date, other_date = model_snapshot_date(model), model_snapshot_date(other)
    return date is None or other_date is None or date == other_date


def same_origin(provenance: Provenance | None, target: Provenance) -> bool:
    """True when provider-bound content from ``provenance`` may go to ``target`` (rule 1).

    Provider and api must match exactly; the model must be the same model
    (:func:`same_model`), where an alias and its dated snapshot count as one: the API
    reports the snapshot (``claude-sonnet-4-20250514``, ``gpt-5-2025-08-07``) for a
    request made with the alias, and replaying to the alias is accepted (recorded:
    anthropic-messages/thinking_tool_use_nonstream and
    openai-responses/reasoning_summaries_encrypted_replay, both HTTP 200). Two
    different models (another Claude, another GPT, another dated snapshot) never match.
    """
    if provenance is None:
        return False
    if provenance == target:  # the common case, one C comparison
        return True
    return (
        provenance.provider == target.provider
        and provenance.api == target.api
        and provenance.model is not None
        and same_model(provenance.model, target.model)
    )


def reasoning_origin(part: ThinkingPart, message: AssistantMessage) -> Provenance | None:
    """A thinking part's provenance, else its message's."""
    return part.provenance or message.provenance


def foreign_reasoning_text(part: ThinkingPart, policy: RenderPolicy) -> str | None:
    """The text part foreign reasoning becomes under ``policy`` (rule 2), or None."""
    if policy.foreign_reasoning == "drop":
        return None
    text = part.text or "\n\n".join(part.summary or [])
    if is_blank(text):
        return None
    return policy.foreign_reasoning_template.format(text=text)


def foreign_reasoning(
    part: ThinkingPart,
    message: AssistantMessage,
    target: Provenance,
    policy: RenderPolicy,
    warnings: list[WarningEvent],
    why: str,
) -> str | None:
    """Reasoning a target cannot replay natively (rule 2): its text under the policy,
    or None, with a ``reasoning_as_text`` / ``reasoning_dropped`` warning saying ``why``."""
    text = foreign_reasoning_text(part, policy)
    warnings.append(
        warning(
            "reasoning_dropped" if text is None else "reasoning_as_text",
            f"reasoning not replayable to {target.provider}/{target.api}/{target.model} "
            f"({why}): " + ("dropped" if text is None else "sent as text"),
            origin=msgspec.to_builtins(reasoning_origin(part, message)),
        )
    )
    return text


def replayable_server_part(
    part: ServerToolCallPart | ServerToolResultPart,
    message: AssistantMessage,
    target: Provenance,
    warnings: list[WarningEvent],
) -> bool:
    """A server-tool block goes back only to its own provider and api (any model: the
    block carries no signature); anywhere else it is dropped with a warning. (An
    unfinished one never reaches a renderer: :func:`repair_group` drops it.)"""
    origin = part.provenance or message.provenance
    if origin is not None and origin.provider == target.provider and origin.api == target.api:
        return True
    warnings.append(
        warning(
            "server_tool_dropped",
            f"{type(part).__name__} from "
            f"{f'{origin.provider}/{origin.api}' if origin else 'an unknown origin'} "
            f"cannot be replayed to {target.provider}/{target.api}; dropped",
        )
    )
    return False


_FINISHED_ITEM_STATUSES = frozenset({"completed", "incomplete", "failed"})
"""Responses server-tool items (``web_search_call``, ``file_search_call``,
``code_interpreter_call``, ``image_generation_call``, ``mcp_call``) end in one of these;
``in_progress``, ``searching``, ``interpreting``, ``generating``, ``calling`` are an
item the stream was cut inside (the input schema wants its ``action`` and the rest)."""


def unfinished_server_call(part: ServerToolCallPart) -> str | None:
    """Why a server-tool call is unfinished (a stream cut inside it), or None.

    Anthropic ``server_tool_use`` / ``mcp_tool_use``: the input is still the JSON text
    streamed so far, not an object. Responses: the item's status is not a final one.
    """
    native = part.native
    if "input" in native and not isinstance(native["input"], dict):
        return "its input is an unparsed fragment"
    status = native.get("status")
    if isinstance(status, str) and status not in _FINISHED_ITEM_STATUSES:
        return f"status {status!r}"
    return None


def _without_unfinished_server_calls(
    message: AssistantMessage, warnings: list[WarningEvent]
) -> AssistantMessage:
    """The message without the server-tool calls a stream was cut inside: no API takes
    them back (the SDK types refuse a fragment for an input, an item without its
    ``action``), and a Responses reasoning item must not be left pairing with one."""
    kept: list[AssistantPart] = []
    for part in message.content:
        if not isinstance(part, ServerToolCallPart):
            kept.append(part)
            continue
        reason = unfinished_server_call(part)
        if reason is None:
            kept.append(part)
            continue
        warnings.append(
            warning(
                "server_tool_dropped",
                f"server tool call {part.name!r} ({part.id}) did not finish ({reason}); dropped",
                call_id=part.id,
                name=part.name,
                seq=message.seq,
            )
        )
    if len(kept) == len(message.content):
        return message
    return msgspec.structs.replace(message, content=kept)


def is_blank(text: str | None) -> bool:
    """Empty or whitespace-only: Anthropic rejects such text blocks (rule 8)."""
    return not text or text.isspace()  # no copy of the text, unlike strip()


# ---------------------------------------------------------------- history groups


class Group:
    """One cacheable stretch of history.

    ``assistant`` is None only for the user messages before the first assistant
    message; ``calls`` its tool calls by id. ``results`` are the tool results paired
    with its calls, in arrival order, synthetic ones (rule 6) appended in call order;
    ``users`` the user messages of the window, which every target wants after the
    results (rule 7). ``warnings`` is the render's one warning list: what a renderer
    repairs or drops in this group is appended there. ``marks``: how many blocks of
    the group's wire messages carry a prompt-cache mark (Anthropic's limit, rule 10),
    set by a renderer that writes marks and read (and reset) by the driver.
    ``server_results``: the tool results that answer a :class:`ServerToolCallPart` of
    ``assistant`` (a call the caller runs but the provider keeps opaque: Responses
    shell / computer / apply-patch calls), in arrival order, one per call.
    """

    __slots__ = ("assistant", "calls", "marks", "results", "server_results", "users", "warnings")

    def __init__(
        self,
        assistant: AssistantMessage | None,
        calls: dict[str, ToolCallPart],
        results: list[ToolMessage],
        users: list[UserMessage],
        warnings: list[WarningEvent],
    ) -> None:
        self.assistant = assistant
        self.calls = calls
        self.results = results
        self.users = users
        self.warnings = warnings
        self.marks = 0
        self.server_results: list[ToolMessage] = []

    def call(self, call_id: str) -> ToolCallPart | None:
        return self.calls.get(call_id)


def _group_starts(messages: Sequence[Message], start: int) -> list[int]:
    """Start indexes of the groups from ``start`` on (each assistant message opens one)."""
    starts = [start]
    for index in range(start + 1, len(messages)):
        if type(messages[index]) is AssistantMessage:
            starts.append(index)
    return starts


def repair_group(
    messages: Sequence[Message],
    start: int,
    end: int,
    policy: RenderPolicy,
    warnings: list[WarningEvent],
    into: Group | None = None,
    call_ids: CallIds | None = None,
) -> Group:
    """Pair calls and results in ``messages[start:end]``; repair orphans (rule 6);
    with ``call_ids`` (the ids earlier groups use), rename reused ids (rule 8).

    ``into``: a group to fill instead of a new one (a render reuses one group object
    for all its groups; a renderer keeps nothing of the group beyond its call).
    """
    group_start = start
    first = messages[start]
    calls: dict[str, ToolCallPart] = {}
    assistant = None
    shared: dict[str, list[str]] = {}
    if type(first) is AssistantMessage:
        assistant = first
        if any(type(part) is ServerToolCallPart for part in first.content):
            assistant = _without_unfinished_server_calls(first, warnings)
        start += 1
        for part in assistant.content:
            if type(part) is ToolCallPart:
                if part.id in calls:
                    assistant, shared = _distinct_call_ids(assistant)
                    calls = {p.id: p for p in assistant.content if type(p) is ToolCallPart}
                    break
                calls[part.id] = part
    results: list[ToolMessage] = []
    users: list[UserMessage] = []
    open_ids = set(calls)
    reused = False
    if call_ids is not None:  # rule 8; the usual group: two set operations
        in_use = call_ids.in_use
        if in_use.isdisjoint(open_ids):
            in_use |= open_ids
        else:
            reused = True
    pairs = iter(
        _pair_shared_results(messages[start:end], shared, calls, warnings) if shared else ()
    )
    server_calls: set[str] | None = None  # built at the first result no call answers
    server_results: list[ToolMessage] = []
    for message in messages[start:end]:
        if type(message) is ToolMessage:
            if shared and message.call_id in shared:
                paired = next(pairs)
                if paired is not None:
                    message = msgspec.structs.replace(message, call_id=paired)
            if message.call_id in open_ids:
                open_ids.remove(message.call_id)
                results.append(message)
                continue
            if server_calls is None:
                server_calls = _answerable_server_calls(assistant)
            if message.call_id in server_calls:  # a caller-run provider item's output
                server_calls.remove(message.call_id)
                server_results.append(message)
            else:
                warnings.append(
                    warning(
                        "orphan_tool_result",
                        f"tool result {message.call_id!r} answers no open call of the "
                        "assistant message before it; dropped",
                        call_id=message.call_id,
                        seq=message.seq,
                    )
                )
        elif type(message) is UserMessage:
            users.append(message)
    if open_ids:
        _add_synthetic_results(calls, open_ids, results, policy, warnings)
    if into is None:
        into = Group(assistant, calls, results, users, warnings)
    else:
        into.assistant, into.calls, into.results, into.users = assistant, calls, results, users
    into.server_results = server_results
    if reused and call_ids is not None:
        call_ids.add(into, group_start)
    return into


def server_call_id(part: ServerToolCallPart) -> str:
    """The id a caller's tool result names for a server-tool call: the native item's
    ``call_id`` (a Responses ``local_shell_call`` has an ``lsh_`` item id and a
    ``call_`` call id), else the part's id."""
    call_id = part.native.get("call_id")
    return call_id if isinstance(call_id, str) and call_id else part.id


def _answerable_server_calls(assistant: AssistantMessage | None) -> set[str]:
    """The ids a tool result may answer among ``assistant``'s server-tool calls (rule 6:
    a caller-run provider item's output is no orphan)."""
    if assistant is None:
        return set()
    return {server_call_id(part) for part in assistant.content if type(part) is ServerToolCallPart}


def server_results_dropped(group: Group, target: str) -> None:
    """Rule 6 for a target that replays no caller-run provider item: the outputs of the
    group's server-tool calls go with their calls (dropped, ``server_tool_dropped``),
    rather than standing alone as orphans."""
    for result in group.server_results:
        group.warnings.append(server_result_dropped(result, f"its call cannot be sent to {target}"))


def server_result_dropped(result: ToolMessage, why: str) -> WarningEvent:
    """The warning for the output of a server-tool call that is not sent."""
    return warning(
        "server_tool_dropped",
        f"output of server tool call {result.call_id!r} not sent ({why}); dropped",
        call_id=result.call_id,
        seq=result.seq,
    )


def _distinct_call_ids(
    message: AssistantMessage,
) -> tuple[AssistantMessage, dict[str, list[str]]]:
    """Rule 8 inside one message: calls sharing an id (some servers give parallel calls
    one id, or none) get ``<id>#<n>`` from the second on; the id → the ids its calls
    now have, in order, which its results take (:func:`_pair_shared_results`)."""
    shared: dict[str, list[str]] = {}
    taken = {part.id for part in message.content if type(part) is ToolCallPart}
    content: list[Any] = []
    for part in message.content:
        if type(part) is ToolCallPart:
            ids = shared.setdefault(part.id, [])
            if ids:
                uses = len(ids)
                while f"{part.id}#{uses}" in taken:
                    uses += 1
                new_id = f"{part.id}#{uses}"
                taken.add(new_id)
                ids.append(new_id)
                part = msgspec.structs.replace(part, id=new_id)
            else:
                ids.append(part.id)
        content.append(part)
    shared = {call_id: ids for call_id, ids in shared.items() if len(ids) > 1}
    return msgspec.structs.replace(message, content=content), shared


def _pair_shared_results(
    window: Sequence[Message],
    shared: dict[str, list[str]],
    calls: dict[str, ToolCallPart],
    warnings: list[WarningEvent],
) -> list[str | None]:
    """The call each result of a shared id answers, for those results in arrival order
    (None: more results than calls; the extra one is an orphan).

    Never a guess where the log decides (rule 8): a result naming its tool
    (``ToolMessage.name``) answers the first open call of that name; the others take
    the calls left, in call order. One ``tool_id_shared`` warning per shared id says
    which it was (``paired_by``: ``name``, or ``order`` when any result could have
    answered more than one call).
    """
    results = [m for m in window if type(m) is ToolMessage and m.call_id in shared]
    left = {call_id: list(ids) for call_id, ids in shared.items()}
    guessed: set[str] = set()
    paired: list[str | None] = [None] * len(results)

    def pair(index: int, candidates: list[str]) -> None:
        shared_id = results[index].call_id
        if len(candidates) > 1:
            guessed.add(shared_id)
        paired[index] = candidates[0]
        left[shared_id].remove(candidates[0])

    for index, result in enumerate(results):
        if result.name is not None:
            named = [c for c in left[result.call_id] if calls[c].name == result.name]
            if named:
                pair(index, named)
    for index, result in enumerate(results):
        if paired[index] is None and left[result.call_id]:
            pair(index, left[result.call_id])
    for call_id, ids in shared.items():
        warnings.append(_shared_id_warning(call_id, ids, call_id in guessed))
    return paired


def _shared_id_warning(call_id: str, ids: list[str], guessed: bool) -> WarningEvent:
    how = (
        "in the order they came: nothing in the log says which answers which"
        if guessed
        else "by the tool each names"
    )
    return warning(
        "tool_id_shared",
        f"{len(ids)} tool calls of one assistant message share the id {call_id!r}; "
        f"sent as {', '.join(map(repr, ids))}, its results paired with them {how}",
        call_id=call_id,
        paired_by="order" if guessed else "name",
    )


def _add_synthetic_results(
    calls: dict[str, ToolCallPart],
    open_ids: set[str],
    results: list[ToolMessage],
    policy: RenderPolicy,
    warnings: list[WarningEvent],
) -> None:
    """Rule 6: every call without a result gets an error result, in call order."""
    for call_id, call in calls.items():
        if call_id not in open_ids:
            continue
        results.append(
            ToolMessage(
                call_id=call_id,
                name=call.name,
                content=[TextPart(text=policy.interrupted_result)],
                is_error=True,
            )
        )
        warnings.append(
            warning(
                "synthetic_tool_result",
                f"tool call {call_id!r} ({call.name}) has no result; "
                "a synthetic error result was inserted",
                call_id=call_id,
            )
        )


def group_history(
    messages: Sequence[Message], policy: RenderPolicy
) -> tuple[list[Group], list[WarningEvent]]:
    """Split a history into repaired groups (rules 6 and 8), with the repairs' warnings."""
    warnings: list[WarningEvent] = []
    if not messages:
        return [], warnings
    starts = _group_starts(messages, 0)
    ends = [*starts[1:], len(messages)]
    call_ids = CallIds()
    groups = [
        repair_group(messages, start, end, policy, warnings, call_ids=call_ids)
        for start, end in zip(starts, ends, strict=True)
    ]
    return groups, warnings


# ---------------------------------------------------------------- render driver + cache

Renderer = Callable[[Group, list[dict[str, Any]]], None]
"""Renders one repaired group, appending its wire messages to the list it is given."""


@dataclass(slots=True)
class _CacheState:
    """One (session, target) render, kept to be extended in place by the next.

    The lists are the cache's own (the caller gets copies), so a re-render truncates
    them to the groups it keeps and appends the rest: the work is one comparison of
    the message lists, one copy of the result and the new groups themselves.
    """

    messages: list[Message] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    """Start index of each group in ``messages``."""
    wire: list[dict[str, Any]] = field(default_factory=list)
    """All groups' wire messages, flattened."""
    wire_ends: list[int] = field(default_factory=list)
    """``len(wire)`` after each group."""
    warnings: list[WarningEvent] = field(default_factory=list)
    warning_ends: list[int] = field(default_factory=list)
    """``len(warnings)`` after each group."""
    call_ids: CallIds = field(default_factory=lambda: CallIds())
    """Rule 8: the call ids the groups so far use."""
    marks: dict[int, int] = field(default_factory=dict)
    """``Group.marks`` of the groups that have any."""

    def rewind(self, messages: Sequence[Message]) -> int:
        """Keep the groups ``messages`` leaves valid, drop the rest; the index of the
        first message to render again.

        Group g is still valid when its messages and the assistant message opening
        group g+1 (which closes its window) lie in the unchanged prefix.
        """
        prefix = _common_prefix(self.messages, messages)
        keep = max(bisect.bisect_left(self.starts, prefix, lo=1) - 1, 0)
        start = self.starts[keep] if keep else 0
        self.call_ids.forget(self.messages, self.starts, keep)
        for index in [index for index in self.marks if index >= keep]:
            del self.marks[index]
        del self.messages[prefix:]
        self.messages.extend(messages[prefix:])
        del self.starts[keep:]
        del self.wire[self.wire_ends[keep - 1] if keep else 0 :]
        del self.wire_ends[keep:]
        del self.warnings[self.warning_ends[keep - 1] if keep else 0 :]
        del self.warning_ends[keep:]
        return start


class RenderCache:
    """Per-session memo of rendered groups (hold one per session and target).

    A group's wire messages depend only on its own messages, the target and the
    policy. On each call the cache finds the longest prefix of messages equal to
    the previous call's (``is``, else ``==``), keeps every group that lies wholly
    before the first change *and* is closed by a later assistant message, and renders
    the rest. Appending a turn therefore re-renders one or two groups; a surface
    ``replace`` re-renders from the first replaced message on.
    """

    def __init__(self) -> None:
        self._states: dict[Any, _CacheState] = {}

    def take(self, key: Any) -> _CacheState | None:
        """The state for ``key``, removed until :meth:`store` puts it back (a render
        that fails half-way leaves no half-updated state behind)."""
        return self._states.pop(key, None)

    def store(self, key: Any, state: _CacheState) -> None:
        self._states[key] = state


def _common_prefix(old: list[Message], new: Sequence[Message]) -> int:
    """How many leading messages ``old`` and ``new`` share."""
    limit = len(old)
    if limit <= len(new) and old == new[:limit]:  # the append case: one C comparison,
        return limit  # which short-cuts on ``is`` and never touches the messages
    limit = min(limit, len(new))
    index = 0
    while index < limit:
        a, b = old[index], new[index]
        if a is not b and a != b:
            break
        index += 1
    return index


def render_history(
    messages: Sequence[Message],
    render_group: Renderer,
    policy: RenderPolicy,
    *,
    cache: RenderCache | None = None,
    cache_key: Any = None,
) -> RenderedHistory:
    """Render every group of ``messages``; reuse cached groups when ``cache`` is given."""
    state = cache.take(cache_key) if cache is not None else None
    if state is None:
        state = _CacheState()
        start = 0
        if cache is not None:
            state.messages.extend(messages)
    else:
        start = state.rewind(messages)
    wire, warnings = state.wire, state.warnings
    if start < len(messages):
        first = len(state.starts)
        state.starts.extend(_group_starts(messages, start))
        starts = state.starts
        ends = [*starts[first + 1 :], len(messages)]
        group = Group(None, {}, [], [], warnings)
        call_ids = state.call_ids
        cached = cache is not None
        for index, end in enumerate(ends, first):
            repair_group(messages, starts[index], end, policy, warnings, group, call_ids)
            render_group(group, wire)
            if cached:  # where each group ends, for a later rewind
                state.wire_ends.append(len(wire))
                state.warning_ends.append(len(warnings))
            if group.marks:
                state.marks[index], group.marks = group.marks, 0
    marks = sum(state.marks.values())
    if cache is None:
        return RenderedHistory(wire, warnings, marks)
    cache.store(cache_key, state)
    return RenderedHistory(list(wire), list(warnings), marks)


class RenderedHistory(NamedTuple):
    """What :func:`render_history` gives: the wire messages, the warnings, and how many
    blocks carry a prompt-cache mark."""

    wire: list[dict[str, Any]]
    warnings: list[WarningEvent]
    cache_marks: int


class CallIds:
    """Rule 8: a call id an earlier group of the history already used gets ``#n``.

    Some providers number tool calls per response (Kimi ``functions.search:0``, Grok
    ``call_0``), so one id comes back round after round; pairing stays right (it is
    per group), but Anthropic refuses a request whose ``tool_use`` ids repeat ("tool_use
    ids must be unique") and the OpenAI APIs pair by id. The n-th reuse of an id
    becomes ``<id>#<n>`` in the call and its results, the same on every render, with a
    ``tool_id_reused`` warning; the target's id mapping then applies as to any id.

    Every id a group ends up with is new to the history, so ``in_use`` loses exactly
    a group's ids when a cache rewind drops the group. The usual group (no id reused)
    costs two set operations, done by :func:`repair_group`; :meth:`add` takes the rest.
    """

    __slots__ = ("_renamed", "_uses", "in_use")

    def __init__(self) -> None:
        self.in_use: set[str] = set()
        """Every id the groups so far use (a renamed one as renamed)."""
        self._uses: dict[str, int] = {}  # reused id -> the last ``#n`` given
        self._renamed: dict[int, list[tuple[str, str, int]]] = {}
        """A group's first message index -> (id, renamed to, the ``#n`` before) of its
        renamed calls."""

    def add(self, group: Group, start: int) -> None:
        """Count the calls of the group starting at message ``start``; rename those an
        earlier group used."""
        in_use = self.in_use
        renames: dict[str, str] = {}
        undo = self._renamed[start] = []
        for call_id in group.calls:
            if call_id not in in_use:
                in_use.add(call_id)
                continue
            previous = self._uses.get(call_id, 0)
            uses = previous + 1
            while f"{call_id}#{uses}" in in_use:
                uses += 1
            renames[call_id] = renamed = f"{call_id}#{uses}"
            in_use.add(renamed)
            self._uses[call_id] = uses
            undo.append((call_id, renamed, previous))
        _rename_calls(group, renames)

    def forget(self, messages: Sequence[Message], starts: Sequence[int], keep: int) -> None:
        """Drop the groups from index ``keep`` on (a cache rewind); ``messages`` and
        ``starts`` are the ones they were counted from."""
        for index in range(len(starts) - 1, keep - 1, -1):
            undo = self._renamed.pop(starts[index], ())
            renamed = {call_id: new for call_id, new, _ in undo}
            first = messages[starts[index]]
            if type(first) is AssistantMessage:
                ids = [part.id for part in first.content if type(part) is ToolCallPart]
                if len(set(ids)) < len(ids):  # as repair_group counted them
                    distinct, _ = _distinct_call_ids(first)
                    ids = [part.id for part in distinct.content if type(part) is ToolCallPart]
                for call_id in ids:
                    self.in_use.discard(renamed.get(call_id, call_id))
            for call_id, _, previous in reversed(undo):
                if previous:
                    self._uses[call_id] = previous
                else:
                    del self._uses[call_id]


def _rename_calls(group: Group, renames: dict[str, str]) -> None:
    _rename_in_calls(group, "id", renames)
    group.results = [
        msgspec.structs.replace(result, call_id=renames[result.call_id])
        if result.call_id in renames
        else result
        for result in group.results
    ]
    for original, new in renames.items():
        group.warnings.append(
            warning(
                "tool_id_reused",
                f"tool call id {original!r} was used earlier in the history; "
                f"sent as {new!r} with its results",
                call_id=original,
            )
        )


OtherAssistantPart = (
    RefusalPart | ThinkingPart | ServerToolCallPart | ServerToolResultPart | ImagePart
)
"""An assistant part other than the common two (text, tool call), which renderers
take on their fast path."""


class GroupRenderer:
    """Base of the three renderers' group renderers (a :data:`Renderer`): the target,
    the policy, and whether a provenance is the target's own origin (rule 1), worked
    out once per distinct provenance of a history rather than once per message."""

    __slots__ = ("origins", "policy", "target")

    def __init__(self, target: Provenance, policy: RenderPolicy) -> None:
        self.target = target
        self.policy = policy
        self.origins: dict[Provenance | None, bool] = {}

    def native(self, provenance: Provenance | None) -> bool:
        """:func:`same_origin` for the target, memoised."""
        known = self.origins.get(provenance)
        if known is None:
            known = self.origins[provenance] = same_origin(provenance, self.target)
        return known

    def __call__(self, group: Group, out: list[dict[str, Any]]) -> None:
        raise NotImplementedError


def empty_message(user: UserMessage) -> WarningEvent:
    """The warning for a user message that renders to nothing (dropped, rule 8)."""
    return warning("empty_message", f"user message at seq {user.seq} has no content; dropped")


# ---------------------------------------------------------------- the render frame


class RenderRun:
    """What one ``render_request`` call holds, whatever the target format.

    Built from the header and policy: the target :class:`Provenance` (rule 1 compares
    against it), the header's settings translated for the target api, and the list
    of warnings the call collects (settings dropped, history repairs, tools not
    offered), in that order.
    """

    __slots__ = (
        "api",
        "cache_marks",
        "model",
        "policy",
        "provider",
        "sampling",
        "target",
        "tool_names",
        "warnings",
    )

    def __init__(
        self,
        provider: str,
        api: str,
        header: RequestHeaderEvent | None,
        policy: RenderPolicy | None,
    ) -> None:
        self.provider = provider
        self.api = api
        self.policy = policy or RenderPolicy()
        self.cache_marks = 0
        """Prompt-cache marks in the rendered history (after :meth:`history`)."""
        self.tool_names: dict[str, str] = {}
        """Tool names the target refuses → the names sent (:func:`map_tool_name`), from
        the history and the declared tools; one warning names them all."""
        self.target = target_provenance(provider, api, header, self.policy)
        self.model: str = self.target.model or ""
        self.sampling, self.warnings = translate_sampling(
            merged_sampling(header), header.api if header is not None else api, api, self.model
        )
        if (
            self.policy.model is None
            and header is not None
            and header.provider is not None
            and header.provider != provider
        ):
            # The header's model names another provider's model (a Codex session's
            # ``gpt-5.5`` rendered for Anthropic): the request is well-formed but the
            # target API will refuse the model. Say so instead of failing at the API.
            self.warnings.append(
                warning(
                    "model_foreign",
                    f"model {self.model!r} is the session's {header.provider} model; "
                    f"rendering for {provider} needs a {provider} model (RenderPolicy.model, "
                    "CLI --model)",
                    model=self.model,
                    session_provider=header.provider,
                )
            )

    def history(
        self,
        messages: Sequence[Message],
        render_group: Renderer,
        cache: RenderCache | None,
        *cache_key: Any,
    ) -> list[dict[str, Any]]:
        """The rendered history (``cache_key``: what else the groups depend on), its
        tool calls under names the target takes."""
        api = self.api

        def render_named(group: Group, out: list[dict[str, Any]]) -> None:
            _map_call_names(group, api)
            render_group(group, out)

        wire, warnings, self.cache_marks = render_history(
            messages,
            render_named,
            self.policy,
            cache=cache,
            cache_key=(self.provider, self.api, self.model, self.policy, *cache_key),
        )
        for event in warnings:  # the groups' name warnings become one (see finish)
            if event.code == "tool_name_mapped" and event.details is not None:
                self.tool_names.update(event.details["names"])
            else:
                self.warnings.append(event)
        return wire

    def tools(
        self,
        header: RequestHeaderEvent | None,
        convert: Callable[[ToolSpec], dict[str, Any] | None],
    ) -> list[dict[str, Any]]:
        """The header's tools for the target: a header of the target's own api sends
        each tool's native definition unchanged; otherwise (or when the target refuses
        its name, :func:`map_tool_name`) ``convert`` renders the spec, and a spec it
        cannot render (None) is not offered, with a warning."""
        if header is None:
            return []
        native_header = header.provider == self.provider and header.api == self.api
        tools = []
        unschemed: list[str] = []
        for spec in header.tools:
            named = self._named_for_target(spec)
            if named is spec and native_header and spec.native is not None:
                tools.append(dict(spec.native))
            elif (tool := convert(named)) is not None:
                tools.append(tool)
                if spec.kind == "function" and spec.input_schema is None:
                    unschemed.append(spec.name)
            else:
                self.warnings.append(
                    warning(
                        "tool_dropped",
                        f"{spec.kind} tool {spec.name!r} from {header.provider}/{header.api} "
                        f"has no {self.provider}/{self.api} equivalent; not offered",
                    )
                )
        if unschemed:
            # Claude Code's init line names its tools only.
            self.warnings.append(
                warning(
                    "tool_schema_missing",
                    f"{len(unschemed)} tools have no input schema in the log and are offered "
                    f"as taking no arguments: {', '.join(unschemed)}",
                    tools=unschemed,
                )
            )
        return tools

    def _named_for_target(self, spec: ToolSpec) -> ToolSpec:
        """``spec`` under the name the target takes (a server tool keeps its own)."""
        if spec.kind == "server":
            return spec
        name = map_tool_name(spec.name, self.api)
        if name == spec.name:
            return spec
        self.tool_names[spec.name] = name
        return msgspec.structs.replace(spec, name=name)

    def add_settings(self, kwargs: dict[str, Any], history_keys: frozenset[str]) -> None:
        """The translated settings, except the keys the request builds itself."""
        for key, value in self.sampling.items():
            if key not in history_keys:
                kwargs[key] = value

    def finish(
        self,
        kwargs: dict[str, Any],
        accepted: frozenset[str],
        warnings: list[WarningEvent] | None,
    ) -> dict[str, Any]:
        """Hand the warnings over and fold unknown keys into ``extra_body``."""
        if kwargs.get("messages", kwargs.get("input")) == []:
            self.warnings.append(
                warning(
                    "empty_history",
                    "the history holds no message to send; the API refuses a request without one",
                )
            )
        if self.tool_names:
            self.warnings.append(_names_mapped(self.tool_names, self.api))
        if warnings is not None:
            warnings.extend(self.warnings)
        return split_create_kwargs(kwargs, accepted)


# ---------------------------------------------------------------- header helpers


def merged_sampling(header: RequestHeaderEvent | None) -> dict[str, Any]:
    """Adapter defaults overridden by explicit settings."""
    if header is None:
        return {}
    return {**header.adapter_defaults, **header.sampling}


_MAX_TOKENS_KEY = {
    "messages": "max_tokens",
    "chat": "max_completion_tokens",
    "responses": "max_output_tokens",
}
_STOP_KEY = {"messages": "stop_sequences", "chat": "stop"}
_EFFORT_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32000}
_PORTABLE = ("temperature", "top_p", "stream")


def _neutral_tool_choice(api: str | None, choice: Any) -> Any:
    """``auto`` | ``none`` | ``required`` | ``{"name": ...}`` from any api's tool_choice;
    None for one this cannot read (it is then dropped, with a warning)."""
    if isinstance(choice, str):
        return choice
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if not isinstance(kind, str):
        return None
    if api == "messages":
        if kind == "tool":
            name = choice.get("name")
            return {"name": name} if isinstance(name, str) else None
        return "required" if kind == "any" else kind
    if kind == "function":
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else choice.get("name")
        return {"name": name} if isinstance(name, str) else None
    return None


def _choice_of_declared_name(api: str, choice: Any) -> Any:
    """A forced tool choice of ``api`` kept as given, but naming the tool as it is
    declared when the target refuses its name (:func:`map_tool_name`)."""
    neutral = _neutral_tool_choice(api, choice)
    if isinstance(neutral, dict) and map_tool_name(neutral["name"], api) != neutral["name"]:
        return _native_tool_choice(api, neutral)
    return choice


def _native_tool_choice(api: str, choice: Any) -> Any:
    if isinstance(choice, dict):  # {"name": str}, as _neutral_tool_choice gives it
        choice = {"name": map_tool_name(choice["name"], api)}  # as the tool is declared
    elif not isinstance(choice, str):
        return None
    if api == "messages":
        if isinstance(choice, dict):
            return {"type": "tool", "name": choice["name"]}
        return {"type": {"required": "any"}.get(choice, choice)}
    if isinstance(choice, dict):
        if api == "chat":
            return {"type": "function", "function": {"name": choice["name"]}}
        return {"type": "function", "name": choice["name"]}
    return choice


def _reasoning_effort(api: str | None, sampling: dict[str, Any]) -> str | None:
    if api == "messages":
        thinking = sampling.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
            budget = thinking.get("budget_tokens") or 8192
            return "low" if budget <= 2048 else "medium" if budget <= 8192 else "high"
        return None
    if api == "chat":
        effort = sampling.get("reasoning_effort")
        return effort if isinstance(effort, str) else None
    reasoning = sampling.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    return effort if isinstance(effort, str) else None


def translate_sampling(
    sampling: dict[str, Any],
    source_api: str | None,
    target_api: str,
    target_model: str | None = None,
) -> tuple[dict[str, Any], list[WarningEvent]]:
    """A header's settings for another api: the portable ones translated, the rest dropped.

    Portable: temperature, top_p, stream, the output-token limit, stop sequences,
    tool_choice and the reasoning level (Anthropic ``thinking`` budget, Chat
    ``reasoning_effort``, Responses ``reasoning.effort``). Each dropped setting is
    named in a ``setting_dropped`` warning, and so is one the target model's family
    does not take (:data:`_MODEL_REFUSES`), whatever api the settings came from.
    A setting of the wrong shape for its api (:func:`setting_shape_problem`: a header
    stored before :func:`parse_header` refused them) is dropped first, with a
    ``setting_dropped`` warning saying what is wrong with it.
    """
    warnings: list[WarningEvent] = []
    sampling = _well_shaped(sampling, source_api, warnings)
    if source_api == target_api:
        out = dict(sampling)
        if "tool_choice" in out:
            out["tool_choice"] = _choice_of_declared_name(target_api, out["tool_choice"])
        _drop_refused_by_model(out, target_api, target_model, warnings)
        return out, warnings
    out = _translated_sampling(sampling, source_api, target_api, warnings)
    _drop_refused_by_model(out, target_api, target_model, warnings)
    if "thinking" in out:  # translated from a reasoning effort
        _fit_thinking(out, warnings)
    return out, warnings


_MISSING: Any = object()
_ShapeProblem = tuple[str, str]
"""Where below a setting (``""``, ``".budget_tokens"``) and what is wrong there."""
_Shape = Callable[[Any], _ShapeProblem | None]


def _kind_of(value: Any) -> str:
    if value is _MISSING:
        return "missing"
    if value is None:
        return "null"
    return next((name for kind, name in _KINDS if isinstance(value, kind)), type(value).__name__)


_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
)


def _wrong(where: str, expected: str, value: Any) -> _ShapeProblem:
    return where, f"must be {expected} (it is {_kind_of(value)})"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_shape(value: Any) -> _ShapeProblem | None:
    return None if _is_number(value) else _wrong("", "a number", value)


def _count_shape(value: Any) -> _ShapeProblem | None:
    """A token count: an integer (``8000.0`` too, as a JSON parser may give it)."""
    whole = _is_number(value) and (isinstance(value, int) or value.is_integer())
    return None if whole else _wrong("", "an integer", value)


def _flag_shape(value: Any) -> _ShapeProblem | None:
    return None if isinstance(value, bool) else _wrong("", "a boolean", value)


def _text_shape(value: Any) -> _ShapeProblem | None:
    return None if isinstance(value, str) else _wrong("", "a string", value)


def _texts_shape(value: Any) -> _ShapeProblem | None:
    if not isinstance(value, list):
        return _wrong("", "an array of strings", value)
    bad = next((i for i, item in enumerate(value) if not isinstance(item, str)), None)
    return None if bad is None else _wrong(f"[{bad}]", "a string", value[bad])


def _stop_shape(value: Any) -> _ShapeProblem | None:
    """Chat's ``stop``: one string or a list of them."""
    if isinstance(value, str | list):
        return _texts_shape([value] if isinstance(value, str) else value)
    return _wrong("", "a string or an array of strings", value)


def _field_problem(value: dict[str, Any], path: str, shape: _Shape) -> _ShapeProblem | None:
    """``shape``'s problem with the field at ``path`` (``.a.b``) of ``value``, if any;
    an object on the way that is not one (or missing) is the problem named."""
    *outer, last = path.split(".")[1:]
    node: Any = value
    where = ""
    for key in outer:
        where += f".{key}"
        node = node.get(key, _MISSING)
        if not isinstance(node, dict):
            return _wrong(where, "an object", node)
    problem = shape(node.get(last, _MISSING))
    return None if problem is None else (path + problem[0], problem[1])


def _thinking_shape(value: Any) -> _ShapeProblem | None:
    """Anthropic ``thinking``: ``{"type": str, "budget_tokens"?: int}``."""
    if not isinstance(value, dict):
        return _wrong("", "an object", value)
    if (problem := _field_problem(value, ".type", _text_shape)) is not None:
        return problem
    budget = value.get("budget_tokens")
    return None if budget is None else _field_problem(value, ".budget_tokens", _count_shape)


def _reasoning_shape(value: Any) -> _ShapeProblem | None:
    """Responses ``reasoning``: ``{"effort"?: str}``."""
    if not isinstance(value, dict):
        return _wrong("", "an object", value)
    effort = value.get("effort")
    return None if effort is None else _field_problem(value, ".effort", _text_shape)


def _tool_choice_shape(api: str) -> _Shape:
    """``tool_choice``: Anthropic's an object (``{"type": "tool", "name"}`` names the
    tool); OpenAI's a string or an object (a ``function`` one names the function,
    under ``function.name`` in Chat, ``name`` in Responses)."""
    named = {"messages": ("tool", ".name"), "chat": ("function", ".function.name")}
    kind_named, name_path = named.get(api, ("function", ".name"))

    def shape(value: Any) -> _ShapeProblem | None:
        if isinstance(value, str) and api != "messages":
            return None
        if not isinstance(value, dict):
            expected = "an object" if api == "messages" else "a string or an object"
            return _wrong("", expected, value)
        if (problem := _field_problem(value, ".type", _text_shape)) is not None:
            return problem
        if value["type"] == kind_named:
            return _field_problem(value, name_path, _text_shape)
        return None

    return shape


_PORTABLE_SHAPES: dict[str, _Shape] = {
    "temperature": _number_shape,
    "top_p": _number_shape,
    "stream": _flag_shape,
    "max_tokens": _count_shape,
}
_SETTING_SHAPES: dict[str, dict[str, _Shape]] = {
    "messages": {
        **_PORTABLE_SHAPES,
        "stop_sequences": _texts_shape,
        "thinking": _thinking_shape,
        "tool_choice": _tool_choice_shape("messages"),
    },
    "chat": {
        **_PORTABLE_SHAPES,
        "max_completion_tokens": _count_shape,
        "stop": _stop_shape,
        "reasoning_effort": _text_shape,
        "tool_choice": _tool_choice_shape("chat"),
    },
    "responses": {
        **_PORTABLE_SHAPES,
        "max_output_tokens": _count_shape,
        "reasoning": _reasoning_shape,
        "tool_choice": _tool_choice_shape("responses"),
    },
}
"""The settings :func:`translate_sampling` reads, per api, and the shape each must have
(null is always taken: not set). Any other setting is passed on or dropped unread."""


def setting_shape_problem(api: str | None, key: str, value: Any) -> _ShapeProblem | None:
    """What is wrong with the shape of setting ``key`` of an ``api`` request:
    ``(path, problem)`` (``("thinking.budget_tokens", "must be an integer (it is a
    string)")``), or None when the renderers can read it (or do not read it)."""
    shape = _SETTING_SHAPES.get(api or "", _PORTABLE_SHAPES).get(key)
    if shape is None or value is None:
        return None
    problem = shape(value)
    return None if problem is None else (key + problem[0], problem[1])


def _well_shaped(
    sampling: dict[str, Any], api: str | None, warnings: list[WarningEvent]
) -> dict[str, Any]:
    """``sampling`` without the settings of the wrong shape, named in one warning."""
    problems = {
        key: problem
        for key, value in sampling.items()
        if (problem := setting_shape_problem(api, key, value)) is not None
    }
    if not problems:
        return sampling
    warnings.append(
        warning(
            "setting_dropped",
            "settings of the wrong shape were not sent: "
            + "; ".join(f"{path} {problem}" for path, problem in problems.values()),
            settings=sorted(problems),
            problems=dict(problems.values()),
        )
    )
    return {key: value for key, value in sampling.items() if key not in problems}


def _translated_sampling(
    sampling: dict[str, Any],
    source_api: str | None,
    target_api: str,
    warnings: list[WarningEvent],
) -> dict[str, Any]:
    out: dict[str, Any] = {key: sampling[key] for key in _PORTABLE if key in sampling}
    used = set(out)
    source_max = _MAX_TOKENS_KEY.get(source_api or "", "max_tokens")
    for key in (source_max, "max_tokens"):
        if key in sampling:
            out[_MAX_TOKENS_KEY[target_api]] = sampling[key]
            used.add(key)
            break
    source_stop = _STOP_KEY.get(source_api or "")
    if source_stop in sampling and target_api in _STOP_KEY:
        stop = sampling[source_stop]
        # Chat takes one string or a list; Anthropic only a list.
        out[_STOP_KEY[target_api]] = [stop] if isinstance(stop, str) else stop
        used.add(source_stop)
    if "tool_choice" in sampling:
        choice = _native_tool_choice(
            target_api, _neutral_tool_choice(source_api, sampling["tool_choice"])
        )
        if choice is not None:  # else dropped, with the warning below
            out["tool_choice"] = choice
            used.add("tool_choice")
    effort = _reasoning_effort(source_api, sampling)
    used.update(("thinking", "reasoning", "reasoning_effort"))
    if effort is not None:
        if target_api == "messages":
            if effort != "none":  # "none" is no reasoning: thinking stays off
                budget = _EFFORT_BUDGET.get(effort, 8192)
                out["thinking"] = {"type": "enabled", "budget_tokens": budget}
        elif target_api == "chat":
            out["reasoning_effort"] = effort
        else:
            out["reasoning"] = {"effort": effort}
    dropped = sorted(key for key in sampling if key not in used)
    if dropped:
        warnings.append(
            warning(
                "setting_dropped",
                f"settings with no {target_api} equivalent were not sent: {', '.join(dropped)}",
                settings=dropped,
            )
        )
    return out


_OPENAI_REASONING_FAMILIES = r"o1|o3|o4|gpt-5"
"""OpenAI's reasoning families, matched at the start of a model name (``o1-mini``,
``o3-pro``, ``gpt-5.1-codex``): Chat gives their system prompt the ``developer`` role
(:func:`developer_role_model`), and they refuse the sampling settings of
:data:`_NOT_FOR_REASONING_MODELS` (:data:`_OPENAI_REASONING_MODELS`)."""
_GPT5_CHAT_MODELS = r"gpt-5(\.\d+)?-chat"
"""The one exception inside those families: ``gpt-5-chat-latest``, ``gpt-5.1-chat-latest``
do not reason (they take ``temperature``), yet keep the family's ``developer`` role."""
_OPENAI_DEVELOPER_ROLE_MODELS = re.compile(_OPENAI_REASONING_FAMILIES)
_OPENAI_REASONING_MODELS = re.compile(rf"(?!{_GPT5_CHAT_MODELS})(?:{_OPENAI_REASONING_FAMILIES})")
"""The reasoning families less :data:`_GPT5_CHAT_MODELS`."""
_OPENAI_PLAIN_MODELS = re.compile(r"(gpt-4|gpt-3\.5|chatgpt-)")
"""OpenAI families without reasoning (gpt-4o, gpt-4.1, ...)."""
_CLAUDE_PLAIN_MODELS = re.compile(r"claude-(instant|2|3-opus|3-sonnet|3-haiku|3-5-)")
"""Claude families without extended thinking (3.7 and the 4 families have it)."""

_NOT_FOR_REASONING_MODELS = (
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "logprobs",
    "top_logprobs",
    "logit_bias",
)
_MODEL_REFUSES: tuple[tuple[str, re.Pattern[str], tuple[str, ...], str], ...] = (
    ("chat", _OPENAI_PLAIN_MODELS, ("reasoning_effort",), "it does not reason"),
    ("responses", _OPENAI_PLAIN_MODELS, ("reasoning",), "it does not reason"),
    ("chat", _OPENAI_REASONING_MODELS, _NOT_FOR_REASONING_MODELS, "a reasoning model"),
    ("responses", _OPENAI_REASONING_MODELS, _NOT_FOR_REASONING_MODELS, "a reasoning model"),
    ("messages", _CLAUDE_PLAIN_MODELS, ("thinking",), "it has no extended thinking"),
)
"""Settings a model family refuses with HTTP 400 (api, model family matched at the start
of the name, settings, why). OpenAI: "Unrecognized request argument supplied:
reasoning_effort" (gpt-4o); "Unsupported value: 'temperature' does not support 0.2 with
this model", "Unsupported parameter: 'top_p'" (o-series, gpt-5). An unknown model
(another server's) takes every setting."""


def developer_role_model(model: str) -> bool:
    """Whether Chat gives this model's system prompt the ``developer`` role (rule 11,
    :attr:`RenderPolicy.chat_system_role` ``auto``): the OpenAI reasoning families,
    their ``-chat`` models included (:data:`_OPENAI_REASONING_FAMILIES`)."""
    return _OPENAI_DEVELOPER_ROLE_MODELS.match(model) is not None


def _drop_refused_by_model(
    out: dict[str, Any], api: str, model: str | None, warnings: list[WarningEvent]
) -> None:
    """Leave out the settings the target model's family refuses, with a
    ``setting_dropped`` warning naming them and the model."""
    if model is None:
        return
    for refusing_api, family, settings, why in _MODEL_REFUSES:
        if refusing_api != api or not family.match(model):
            continue
        refused = [key for key in settings if key in out and _is_refused(key, out[key])]
        for key in refused:
            del out[key]
        if refused:
            warnings.append(
                warning(
                    "setting_dropped",
                    f"{model} does not take {', '.join(refused)} ({why}): not sent",
                    settings=refused,
                    model=model,
                )
            )


def _is_refused(key: str, value: Any) -> bool:
    """Whether the family refuses this value of a setting it does not take: thinking
    switched off is the default, which every Claude takes."""
    return not (key == "thinking" and isinstance(value, dict) and value.get("type") == "disabled")


def _fit_thinking(out: dict[str, Any], warnings: list[WarningEvent]) -> None:
    """Anthropic thinking for a translated reasoning effort, unless a setting it cannot
    go with wins: a forced tool choice keeps the request's flow (thinking is left off);
    a temperature (or a ``top_p`` under 0.95), which thinking does not take, is left out.
    """
    choice = out.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        del out["thinking"]
        warnings.append(
            warning(
                "setting_conflict",
                "thinking cannot be on with a forced tool choice: the reasoning effort "
                "was not sent",
                settings=["thinking"],
            )
        )
        return
    budget = out["thinking"]["budget_tokens"]
    out["max_tokens"] = max(int(out.get("max_tokens") or 0), budget + 4096)
    conflicting = [
        key
        for key in ("temperature", "top_p")
        if key in out
        and not (key == "top_p" and isinstance(out[key], int | float) and 0.95 <= out[key] <= 1)
    ]
    for key in conflicting:
        del out[key]
    if conflicting:
        warnings.append(
            warning(
                "setting_conflict",
                f"thinking does not take {' or '.join(conflicting)} (as set): not sent",
                settings=conflicting,
            )
        )


def custom_tool_format(spec: ToolSpec) -> dict[str, Any] | None:
    """A custom (freeform) tool's input format, Responses-shaped (``{"type": "grammar",
    "syntax", "definition"}`` or ``{"type": "text"}``), from its native definition in
    either OpenAI shape (Chat nests the grammar: ``custom.format.grammar``)."""
    native = spec.native or {}
    form = native.get("format")
    if form is None and isinstance(native.get("custom"), dict):
        form = native["custom"].get("format")
        if isinstance(form, dict) and isinstance(form.get("grammar"), dict):
            form = {"type": "grammar", **form["grammar"]}
    return form if isinstance(form, dict) else None


def split_create_kwargs(kwargs: dict[str, Any], accepted: frozenset[str]) -> dict[str, Any]:
    """Move keys ``create()`` has no parameter for into ``extra_body`` (the SDK merges
    ``extra_body`` into the JSON body, so the wire request is the same)."""
    extra = {key: kwargs.pop(key) for key in [k for k in kwargs if k not in accepted]}
    if extra:
        kwargs["extra_body"] = {**kwargs.get("extra_body", {}), **extra}
    return kwargs


def create_parameters(create: Callable[..., Any]) -> frozenset[str]:
    """The keyword parameters of an SDK ``create()`` method."""
    import inspect

    names = inspect.signature(create).parameters
    return frozenset(name for name in names if name != "self")


def target_provenance(
    provider: str, api: str, header: RequestHeaderEvent | None, policy: RenderPolicy
) -> Provenance:
    """The provenance content must match to be replayed to this request (rule 1)."""
    model = policy.model or (header.model if header is not None else None)
    if model is None:
        from universal_event.errors import RenderError

        raise RenderError(
            f"no model to render a {provider} {api} request for: set one in "
            "the request/header or RenderPolicy.model"
        )
    return Provenance(provider=provider, api=api, model=model)


def data_url(media_type: str | None, data: str) -> str:
    """``data:<type>;base64,<data>`` for inline bytes."""
    return f"data:{media_type or 'application/octet-stream'};base64,{data}"


def parse_data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a base64 ``data:`` URL, else None."""
    match = re.fullmatch(r"data:([^;,]+);base64,(.*)", url, re.DOTALL)
    return (match.group(1), match.group(2)) if match else None


def json_arguments(part: ToolCallPart, warnings: list[WarningEvent] | None = None) -> str:
    """A function call's arguments as the JSON text the OpenAI APIs carry.

    Compact separators and raw UTF-8, as the APIs emit them (recorded fixtures), so a
    same-provider replay is byte-identical. ``arguments_raw`` (the model's own text,
    kept by parsers when it differs from the compact form or is not JSON) wins, unless
    it is not JSON (:func:`valid_arguments`).
    """
    if part.arguments_raw is not None:
        if part.arguments is None:  # a parser keeps unparsed text only when it is not JSON
            return valid_arguments(part, warnings)
        return part.arguments_raw
    return _JSON.encode(part.arguments if part.arguments is not None else {}).decode()


INVALID_ARGUMENTS_KEY = "input"
"""The key under which call arguments that are not JSON travel as a string
(:func:`valid_arguments`; Anthropic's ``tool_use.input`` wraps them the same way)."""


def valid_arguments(part: ToolCallPart, warnings: list[WarningEvent] | None = None) -> str:
    """The arguments of a past call as JSON the OpenAI APIs take: text that is not JSON
    (a call cut off by ``max_tokens``: ``{"x": "trunc``) is sent as
    ``{"input": "<the text>"}``, with a ``tool_arguments_invalid`` warning.

    OpenAI-compatible servers (vLLM, llama-server, Kimi) parse the arguments of the
    history and refuse the whole request when one does not parse
    (MoonshotAI/kimi-cli#2196 sends ``{}``). Wrapping keeps what the model wrote (it
    sees how far its call got) in a valid JSON object, as Anthropic's ``tool_use.input``
    already carries it; ``{}`` would tell the model it called the tool without
    arguments. Valid JSON text passes unchanged (byte-exact replay)."""
    raw = part.arguments_raw or ""
    if is_blank(raw):  # no argument text at all: no arguments (as Anthropic gets ``{}``)
        return "{}"
    try:
        json.loads(raw)
    except ValueError:
        if warnings is not None:
            warnings.append(
                warning(
                    "tool_arguments_invalid",
                    f"arguments of tool call {part.id!r} ({part.name}) are not JSON (a call "
                    f"cut off?); sent as a JSON object with the text under "
                    f"{INVALID_ARGUMENTS_KEY!r}",
                    call_id=part.id,
                )
            )
        return _JSON.encode({INVALID_ARGUMENTS_KEY: raw}).decode()
    return raw


_JSON = msgspec.json.Encoder()


def parse_arguments(raw: str) -> tuple[Any, str | None]:
    """``(arguments, arguments_raw)`` of a function call's JSON text (the reverse of
    :func:`json_arguments`): the parsed object, and the text itself only when
    re-encoding it compactly would not give it back (or it is not JSON at all)."""
    try:
        arguments = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        return None, raw
    try:  # as json_arguments will encode it back
        compact = _JSON.encode(arguments).decode()
    except (TypeError, ValueError, OverflowError):
        # Nothing the log could store either: a lone surrogate (``"\ud83d"``, half an
        # emoji) decodes but cannot be encoded. The text alone is kept.
        return None, raw
    return arguments, None if compact == raw else raw


def lone_text_or_parts(
    parts: Sequence[UserPart],
    render_part: Callable[[UserPart, list[WarningEvent]], dict[str, Any] | None],
    warnings: list[WarningEvent],
) -> str | list[dict[str, Any]]:
    """OpenAI content: a lone text part as a plain string, anything else as parts.

    Blank text parts are left out (rule 8 holds for every target)."""
    kept = [p for p in parts if not (type(p) is TextPart and is_blank(p.text))]
    if len(kept) == 1 and type(kept[0]) is TextPart:
        return kept[0].text
    return [r for part in kept if (r := render_part(part, warnings)) is not None]


def add_openai_users(
    group: Group,
    render_part: Callable[[UserPart, list[WarningEvent]], dict[str, Any] | None],
    out: list[dict[str, Any]],
    instruction_role: Callable[[InstructionRole], str],
) -> None:
    """A group's user messages as OpenAI messages (Chat and Responses share the
    shape): ``user``, or for instructions in the history the role ``instruction_role``
    gives; one that renders to nothing is dropped with a warning."""
    for user in group.users:
        content = lone_text_or_parts(user.content, render_part, group.warnings)
        if not content:
            group.warnings.append(empty_message(user))
        elif user.instruction_role is None:
            out.append({"role": "user", "content": content})
        else:
            _add_instruction(user, instruction_role(user.instruction_role), content, out, group)


_TEXT_ONLY_INSTRUCTION_PARTS = frozenset({"image_url", "input_audio", "file"})
"""Chat Completions' content parts other than text: its ``system`` and ``developer``
messages take text parts only (``ChatCompletionSystemMessageParam``,
``ChatCompletionDeveloperMessageParam``). Responses instruction messages take images
and files (``input_image``, ``input_file``: not named here), so this is Chat's quirk."""


def _add_instruction(
    user: UserMessage,
    role: str,
    content: str | list[dict[str, Any]],
    out: list[dict[str, Any]],
    group: Group,
) -> None:
    """An instruction message; media its role cannot carry (Chat) follow it in a user
    message of their own, so the model still sees them, right where they were."""
    if isinstance(content, str) or not any(
        part.get("type") in _TEXT_ONLY_INSTRUCTION_PARTS for part in content
    ):
        out.append({"role": role, "content": content})
        return
    texts = [part for part in content if part.get("type") not in _TEXT_ONLY_INSTRUCTION_PARTS]
    media = [part for part in content if part.get("type") in _TEXT_ONLY_INSTRUCTION_PARTS]
    if texts:
        out.append({"role": role, "content": texts})
    label = f"Attachments of the {user.instruction_role} message above:"
    out.append({"role": "user", "content": [{"type": "text", "text": label}, *media]})
    group.warnings.append(
        warning(
            "instruction_media_moved",
            f"{user.instruction_role} message at seq {user.seq}: {len(media)} attachment(s) "
            f"sent in a user message after it (a {role} message takes text only)",
            seq=user.seq,
        )
    )


def instruction_as_user(user: UserMessage, target: str) -> WarningEvent:
    """Instructions between the turns, for a target with no such role."""
    return warning(
        "instruction_as_user",
        f"{user.instruction_role} message in the history (seq {user.seq}) sent as a user "
        f"message: {target} has no {user.instruction_role} role between turns",
        seq=user.seq,
    )


def image_url(part: ImagePart) -> str | None:
    """An image as the URL the OpenAI APIs take: its URL, else a ``data:`` URL."""
    if part.url is not None:
        return part.url
    return data_url(part.media_type, part.data) if part.data is not None else None


# ---------------------------------------------------------------- file ids


FILE_ID_ISSUERS = {"anthropic": "file_", "openai": "file-"}
"""The prefix of the file ids each provider's Files API issues (Anthropic
``file_011CNha8iCJcU1wXNR6q4V8w``, OpenAI ``file-...``). A part does not say which
provider issued its file id, so the prefix tells; a file id goes only to a provider
that can read it (:func:`foreign_file_id`), every renderer falling back to the part's
bytes or URL."""
_TAKES_UNKNOWN_FILE_IDS = frozenset({"openai"})
"""Providers that also take a file id of no issuer's form above: OpenAI's APIs are
served by Azure (``assistant-...``) and compatible servers, which mint their own ids.
Every Anthropic file id starts with ``file_``."""


def file_id_issuer(file_id: str) -> str | None:
    """The provider that issued a file id, by its prefix (:data:`FILE_ID_ISSUERS`);
    None for an id of another form."""
    for provider, prefix in FILE_ID_ISSUERS.items():
        if file_id.startswith(prefix):
            return provider
    return None


def foreign_file_id(file_id: str | None, provider: str) -> bool:
    """Whether a part's file id is one ``provider`` cannot read: another provider
    issued it, or (for a provider not in :data:`_TAKES_UNKNOWN_FILE_IDS`) no known
    provider did. False when there is no file id."""
    if file_id is None:
        return False
    issuer = file_id_issuer(file_id)
    return issuer != provider and (issuer is not None or provider not in _TAKES_UNKNOWN_FILE_IDS)


def openai_file(part: DocumentPart, *, by_url: bool = False) -> dict[str, Any] | None:
    """A document as both OpenAI APIs' file content part: its ``file_id`` unless
    another provider issued it (:func:`foreign_file_id`), else its bytes as
    ``file_data`` + ``filename``, else, with ``by_url`` (Responses' ``input_file``
    takes a ``file_url``, Chat's file part does not), its URL; None when nothing is
    left (:func:`openai_file_dropped`)."""
    if part.file_id is not None and not foreign_file_id(part.file_id, "openai"):
        return {"file_id": part.file_id}
    if part.data is not None:
        return {
            "file_data": data_url(part.media_type or "application/pdf", part.data),
            "filename": part.filename or "document.pdf",
        }
    if by_url and part.url is not None:
        return {"file_url": part.url}
    return None


def openai_file_dropped(part: DocumentPart, target: str) -> WarningEvent:
    """The warning for a document :func:`openai_file` found no form for."""
    if foreign_file_id(part.file_id, "openai"):
        why = f"by file id {part.file_id!r}, which another provider issued,"
    else:
        why = "by URL" if part.url is not None else "without content"
    return warning(
        "document_dropped", f"document {why} has no {target} form; dropped", file_id=part.file_id
    )


# ---------------------------------------------------------------- failed tool results


TOOL_ERROR_MARKER = "[tool error]"
"""Opens the text of a failed tool result for the OpenAI APIs: a Chat ``tool`` message
and a Responses tool output have no error flag, so a failed result (``is_error``, and
the synthetic "interrupted" result of rule 6) is sent as ``"[tool error] clock
offline"`` (:func:`with_error_mark`; the marker alone when it has no text), which the
model reads as the failure it is. Both ``parse_request`` reverse it
(:func:`without_error_mark`), so an error survives Anthropic → OpenAI → Anthropic. A
real output that happens to open with the marker parses as a failure too; rendered
again it is the same text."""


def with_error_mark(text: str) -> str:
    """A failed result's text behind :data:`TOOL_ERROR_MARKER` and a space."""
    return f"{TOOL_ERROR_MARKER} {text}" if text else TOOL_ERROR_MARKER


def without_error_mark(text: str) -> str | None:
    """The reverse of :func:`with_error_mark`: the text without the mark, or None when
    it does not open with it (a result that did not fail)."""
    if text == TOOL_ERROR_MARKER or text.startswith(TOOL_ERROR_MARKER + " "):
        return text[len(TOOL_ERROR_MARKER) + 1 :]
    return None


# ---------------------------------------------------------------- parse frame


@contextmanager
def request_part(path: str) -> Iterator[None]:
    """Parse one part of a request body: one of the wrong shape (a missing key, a value
    of another type) is a :class:`DecodeError` naming ``path`` (``$.messages[3]``), not
    the parser's own ``KeyError`` / ``TypeError``."""
    try:
        yield
    except UniversalEventError:
        raise
    except MALFORMED as exc:
        problem = f"request body of the wrong shape: {type(exc).__name__}: {exc}"
        raise DecodeError(problem, path=path) from None


def parse_tools(
    body: dict[str, Any], parse_tool: Callable[[dict[str, Any]], ToolSpec]
) -> list[ToolSpec]:
    """A request body's ``tools``, each parsed by ``parse_tool``; one of the wrong shape
    is a :class:`DecodeError` naming it (``$.tools[1]``)."""
    with request_part("$.tools"):
        tools = list(body.get("tools") or [])
    specs = []
    for index, tool in enumerate(tools):
        with request_part(f"$.tools[{index}]"):
            specs.append(parse_tool(tool))
    return specs


def parsed_request(
    parse: Callable[[dict[str, Any]], list[Event]],
) -> Callable[[dict[str, Any]], list[Event]]:
    """A request format's ``parse_request``, with a body of the wrong shape anywhere its
    own :func:`request_part` guards do not name more closely reported at ``$``."""

    @functools.wraps(parse)
    def guarded(kwargs: dict[str, Any]) -> list[Event]:
        with request_part("$"):
            return parse(kwargs)

    return guarded


def unknown_role(runtime: str, message: Any, path: str) -> NativeUnknownEvent:
    """A history message in a role the format does not have: kept, never guessed."""
    role = message.get("role") if isinstance(message, dict) else None
    return NativeUnknownEvent(
        runtime=runtime,
        native_type=str(role),
        payload=message,
        reason=f"message role {role!r} at {path} is not rendered back",
        source=source(runtime, str(role)),
    )


def request_body(
    kwargs: dict[str, Any], history_key: Literal["messages", "input"]
) -> dict[str, Any]:
    """``create()`` kwargs as the JSON body: ``extra_body`` merged in.

    Refused (:class:`DecodeError`), where its history would pass for a setting and be
    lost: a body whose history is under the other APIs' key (``messages`` for Responses,
    ``input`` for Chat and Anthropic), a request of another API read with the wrong
    parser; a recording of an exchange (the body under one of its keys); a Chat or
    Messages body without ``messages`` (the APIs require it; Responses does not).
    """
    from universal_event.errors import DecodeError

    body = {**kwargs, **(kwargs.get("extra_body") or {})}
    body.pop("extra_body", None)
    if history_key in body:
        return body
    other = "input" if history_key == "messages" else "messages"
    if other in body:
        readers = (
            "openai-responses-request"
            if other == "input"
            else "openai-chat-request or anthropic-request"
        )
        raise DecodeError(
            f"the body has {other!r} but no {history_key!r}: a request of another API "
            f"(read it as {readers})"
        )
    wrapper = next(
        (key for key, value in body.items() if isinstance(value, Mapping) and history_key in value),
        None,
    )
    if wrapper is not None:
        raise DecodeError(
            f"the body has no {history_key!r} but its {wrapper!r} has: a recording of the "
            f"request, not its body (import the {wrapper!r} object itself)"
        )
    if history_key == "messages":
        raise DecodeError(
            f"the body has no 'messages': not a request body (its keys: "
            f"{', '.join(map(repr, list(body)[:12]))})"
        )
    return body


_ANTHROPIC_ONLY_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})


def refuse_the_other_messages_api(
    body: dict[str, Any], reading_as: Literal["chat", "anthropic"]
) -> None:
    """DecodeError for a body of the other API that keeps its history under
    ``messages``: Chat and Anthropic Messages bodies share the key, and one read as the
    other lost its tool calls, results and thinking (made empty text) and its tools,
    without a word. Told by what only the other API has: Anthropic's content blocks
    (``tool_use``, ``tool_result``, ``thinking``), Chat's ``tool`` role and
    ``tool_calls``."""
    from universal_event.errors import DecodeError

    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        if reading_as == "chat":
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            kinds = {str(b.get("type")) for b in blocks if isinstance(b, dict)}
            other = sorted(kinds & _ANTHROPIC_ONLY_BLOCKS)
            found, reader = (f"a {other[0]!r} block", "anthropic-request") if other else ("", "")
        else:
            role_is_tool = message.get("role") == "tool"
            found = "a 'tool' message" if role_is_tool else ""
            found = found or ("'tool_calls'" if "tool_calls" in message else "")
            reader = "openai-chat-request"
        if found:
            raise DecodeError(
                f"the body has {found} at $.messages[{index}]: a request of another API "
                f"(read it as {reader})"
            )


def source(runtime: str, native_type: str, model: str | None = None) -> Source:
    """The source of an event parsed from a request body."""
    return Source(runtime=runtime, native_type=native_type, model=model)


def parse_header(
    body: dict[str, Any],
    *,
    provider: str,
    api: str,
    runtime: str,
    history_keys: frozenset[str],
    system: str | None,
    tools: list[ToolSpec],
    system_parts: list[TextPart] | None = None,
) -> RequestHeaderEvent:
    """A request body's ``request/header``: every key that is not history (nor model,
    system or tools) is a setting. A ``model`` that is not a string is dropped (the
    header would not decode back). A setting the renderers read, of the wrong shape
    (:func:`setting_shape_problem`), is a :class:`DecodeError` naming it
    (``$.thinking.budget_tokens``)."""
    model = body.get("model")
    sampling = {key: value for key, value in body.items() if key not in history_keys}
    for key, value in sampling.items():
        problem = setting_shape_problem(api, key, value)
        if problem is not None:
            path, what = problem
            raise DecodeError(
                f"request body of the wrong shape: setting {path} {what}", path=f"$.{path}"
            )
    return RequestHeaderEvent(
        provider=provider,
        api=api,
        model=model if isinstance(model, str) else None,
        system=system,
        system_parts=system_parts,
        tools=tools,
        sampling=sampling,
        source=source(runtime, "request"),
    )
