"""The Universal Event: one tagged union of msgspec structs.

Every event shares an envelope (:class:`EventBase`): ``seq`` and ``id`` (assigned by
the session log when left empty), ``session_id``, ``ts``, ``turn_id``/``step`` when
inside a turn, ``source`` (which runtime and native event produced it) and
``parent_id`` for sub-agent or nested tool work.

Tags follow one grammar, ``category/verb`` (``user/message``, ``turn/end``), with a
few single-word categories (``usage``, ``error``, ``warning``).

Only three event types reach the model and may carry a surface intent:
``user/message``, ``assistant/message`` and ``tool/result``. The ``surface`` field
exists on those three classes alone; :class:`Surface` says whether the event is
appended to what the model sees or replaces a range of it.

Schema evolution (msgspec rules): new fields get defaults, existing field types never
change, and decoders ignore fields they do not know. A reader that meets an event
*type* it does not know keeps it as ``native/unknown`` (see :mod:`universal_event.codec`).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from universal_event.parts import (
    AssistantPart,
    Citation,
    Provenance,
    ResultPart,
    TextPart,
    UserPart,
)

__all__ = [
    "EVENT_TYPES",
    "SCHEMA_VERSION",
    "SURFACE_EVENT_TYPES",
    "ApprovalRequestEvent",
    "ApprovalResponseEvent",
    "AssistantChunkEvent",
    "AssistantMessageEvent",
    "CompressionEndEvent",
    "CompressionPruneEvent",
    "CompressionStartEvent",
    "CompressionSummaryEvent",
    "ErrorEvent",
    "Event",
    "EventBase",
    "FileChange",
    "FileChangeEvent",
    "InstructionRole",
    "NativeUnknownEvent",
    "OpenToolCall",
    "PlanItem",
    "PlanUpdateEvent",
    "RequestContextEvent",
    "RequestHeaderEvent",
    "RuntimeSwitchEvent",
    "SessionEndEvent",
    "SessionEndedSeqEvent",
    "SessionInterruptedEvent",
    "SessionStartEvent",
    "Source",
    "StepEndEvent",
    "StepStartEvent",
    "Surface",
    "SurfaceEvent",
    "TaskEndEvent",
    "TaskStartEvent",
    "ToolCallEvent",
    "ToolOutputEvent",
    "ToolResultEvent",
    "ToolSpec",
    "TurnEndEvent",
    "TurnStartEvent",
    "Usage",
    "UsageEvent",
    "UserMessageEvent",
    "WarningEvent",
]

SCHEMA_VERSION = "1.1.0"
"""Version of the event schema; bumped in its minor part for added fields or types."""

TurnStatus = Literal["completed", "interrupted", "failed", "cancelled"]


class Source(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Which runtime and native event an event was normalised from."""

    runtime: str
    """The adapter's runtime name (``anthropic``, ``claude-code``, ``codex``, ...)."""
    native_type: str | None = None
    """The native event or message type (``content_block_delta``, ``item.completed``)."""
    native_id: str | None = None
    """The native object's id (message id, item id), when it has one."""
    model: str | None = None


class Usage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Token usage, normalised once.

    ``input_tokens`` always *includes* cached tokens (OpenAI's ``prompt_tokens`` does;
    Anthropic's ``input_tokens`` does not, so the Anthropic adapter adds the cache
    figures). ``native`` keeps the provider's own object.
    """

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    native: dict[str, Any] | None = None
    scope: Literal["request", "turn"] | None = None
    """What the figures cover: one model request, or the sum over every request of a
    turn (Codex ``turn.completed``, Claude Code ``result``); ``None`` when not said."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class Surface(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How a surface event enters what the model sees.

    ``append`` (the default when an event carries no surface) adds it at the end;
    ``replace`` swaps the surface nodes from seq ``start`` to seq ``end`` (inclusive,
    both must be on the surface) for this event; ``hidden`` logs it without showing it.
    """

    op: Literal["append", "replace", "hidden"] = "append"
    start: int | None = None
    end: int | None = None
    start_id: str | None = None
    end_id: str | None = None
    """A replace's range named by event ids instead of ``start``/``end``: for a producer
    that knows the ids of the events it made but not their seqs (an adapter: a Claude
    Code transcript rewound to an earlier message drops the messages after it). The log
    resolves them when it appends the event; the event it stores names seqs only."""

    @property
    def by_ids(self) -> bool:
        """Whether the range is named by event ids (``start_id``/``end_id``)."""
        return self.start_id is not None or self.end_id is not None


class EventBase(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type", gc=False
):
    """The envelope every event carries.

    Events are not tracked by the garbage collector (``gc=False``): they are frozen and
    made from decoded JSON, so they are in no reference cycle (unless one is made on
    purpose, by putting an event inside its own payload afterwards), and a session
    held in memory (100k events) would otherwise be walked by every full collection,
    while an adapter producing events would trigger collections that find nothing.
    """

    seq: int = -1
    """Position in the session log: 0, 1, 2, ... without gaps. -1 until appended."""
    id: str = ""
    """Unique id; the idempotency key when a producer retries. Filled when empty."""
    session_id: str = ""
    ts: float = 0.0
    """Unix time in seconds. Filled by the log when 0."""
    turn_id: str | None = None
    step: int | None = None
    source: Source | None = None
    parent_id: str | None = None
    """The tool call or task id this event is nested under (sub-agents)."""


# ---------------------------------------------------------------- lifecycle


class SessionStartEvent(EventBase, tag="session/start", kw_only=True, frozen=True):
    """A session began (Claude ``system/init``, Codex ``thread.started``)."""

    runtime: str | None = None
    native_session_id: str | None = None
    """The runtime's own session / thread id."""
    model: str | None = None
    cwd: str | None = None
    metadata: dict[str, Any] = {}


class SessionEndEvent(EventBase, tag="session/end", kw_only=True, frozen=True):
    """A session ended normally."""

    reason: str | None = None


class TurnStartEvent(EventBase, tag="turn/start", kw_only=True, frozen=True):
    """A turn began: one user request and everything the agent does about it."""


class TurnEndEvent(EventBase, tag="turn/end", kw_only=True, frozen=True):
    """A turn ended. ``usage`` sums every model request of the turn."""

    status: TurnStatus = "completed"
    usage: Usage | None = None
    cost_usd: float | None = None
    duration_ms: int | None = None
    error: str | None = None
    stop_reason: str | None = None
    native: dict[str, Any] | None = None
    """The runtime's own end-of-turn report, where it has one (Claude Code's ``result``
    line: permission denials, usage per model, API time), kept whole."""


class StepStartEvent(EventBase, tag="step/start", kw_only=True, frozen=True):
    """A step began: one model request and the tool runs it asked for."""


class StepEndEvent(EventBase, tag="step/end", kw_only=True, frozen=True):
    """A step ended."""

    status: TurnStatus = "completed"
    stop_reason: str | None = None


# ---------------------------------------------------------------- surface events


InstructionRole = Literal["system", "developer"]
"""The role of instructions placed between a history's turns (a Chat ``system`` /
``developer`` message after the first, a Responses ``system`` / ``developer`` input
message)."""


class UserMessageEvent(EventBase, tag="user/message", kw_only=True, frozen=True):
    """A user message (or anything in the user role: a summary, a system reminder).

    ``instruction_role`` is set for instructions in the history itself (``system`` /
    ``developer``): rendered back in that role where the target has one (Chat,
    Responses), as a user message where it has none (Anthropic, with an
    ``instruction_as_user`` warning).
    """

    content: list[UserPart] = []
    instruction_role: InstructionRole | None = None
    surface: Surface | None = None


class AssistantMessageEvent(EventBase, tag="assistant/message", kw_only=True, frozen=True):
    """One complete assistant message (one API response's content).

    ``status`` is ``partial`` when the stream was cut before it completed; the content
    then holds what arrived.
    """

    content: list[AssistantPart] = []
    message_id: str | None = None
    provenance: Provenance | None = None
    stop_reason: str | None = None
    stop_sequence: str | None = None
    """The stop sequence that ended the message (Anthropic, ``stop_reason:
    "stop_sequence"``): which of the request's sequences matched."""
    status: Literal["complete", "partial"] = "complete"
    surface: Surface | None = None
    choice: int | None = None
    """Chat Completions choice index (``n > 1``: each choice is its own message)."""
    logprobs: Any = None
    """Token log probabilities as the provider sent them (Chat: ``{"content": [...],
    "refusal": [...]}`` concatenated over the stream), when requested."""


class ToolResultEvent(EventBase, tag="tool/result", kw_only=True, frozen=True):
    """The result of a client-side tool call; ``call_id`` is the call's id."""

    call_id: str
    name: str | None = None
    content: list[ResultPart] = []
    is_error: bool = False
    exit_code: int | None = None
    details: dict[str, Any] | None = None
    """Structured result data some runtimes add (Claude Code ``tool_use_result``)."""
    cache_control: dict[str, Any] | None = None
    """A prompt-cache mark on the result block itself (Anthropic ``tool_result``:
    Claude Code marks the last block of its request, often a tool result)."""
    surface: Surface | None = None


SurfaceEvent = UserMessageEvent | AssistantMessageEvent | ToolResultEvent
"""The three event types that may reach the model."""


# ---------------------------------------------------------------- streaming, log only


class AssistantChunkEvent(EventBase, tag="assistant/chunk", kw_only=True, frozen=True):
    """A streamed delta. Concatenated chunks of a message equal its final content."""

    message_id: str | None = None
    index: int = 0
    """The content block index (Anthropic) or output index (Responses)."""
    kind: Literal[
        "text", "thinking", "signature", "tool_arguments", "refusal", "summary", "citation"
    ] = "text"
    delta: str = ""
    tool_call_id: str | None = None
    tool_name: str | None = None
    citation: Citation | None = None
    choice: int | None = None
    """Chat Completions choice index when ``n > 1``."""


class ToolCallEvent(EventBase, tag="tool/call", kw_only=True, frozen=True):
    """A tool invocation began running (the runtime started it)."""

    call_id: str
    name: str
    arguments: Any = None
    kind: str | None = None
    """What ran: ``function``, ``command``, ``mcp``, ``web_search``, ``file_change``..."""


class ToolOutputEvent(EventBase, tag="tool/output", kw_only=True, frozen=True):
    """Streamed output of a running tool (a command's stdout, say)."""

    call_id: str
    delta: str
    stream: Literal["stdout", "stderr", "output"] = "output"


# ---------------------------------------------------------------- request state


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool offered to the model."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    kind: Literal["function", "custom", "server"] = "function"
    native: dict[str, Any] | None = None
    """The provider's own tool definition (server tools are provider-bound)."""


class RequestHeaderEvent(EventBase, tag="request/header", kw_only=True, frozen=True):
    """The request "epoch": model, system prompt, tools, sampling config.

    Written at the first request and again only when something changes. Adapter
    defaults are kept apart from explicit settings, which override them.
    """

    provider: str | None = None
    api: str | None = None
    model: str | None = None
    system: str | None = None
    tools: list[ToolSpec] = []
    sampling: dict[str, Any] = {}
    """Explicit settings: temperature, max_tokens, thinking, reasoning, tool_choice..."""
    adapter_defaults: dict[str, Any] = {}
    """Defaults an adapter filled in; re-evaluated each turn, overridden by ``sampling``."""
    system_parts: list[TextPart] | None = None
    """The system prompt as the blocks it was given in, when it came as blocks
    (Anthropic ``system: [{"type": "text", "text": ..., "cache_control": ...}]``):
    each block's text and ``cache_control`` kept, so an Anthropic request renders
    them back exactly. ``system`` then holds their texts joined by a blank line, which
    is what the other formats get; a renderer sends the parts only while that still
    matches ``system`` (else ``system`` was changed alone and wins)."""


class RequestContextEvent(EventBase, tag="request/context", kw_only=True, frozen=True):
    """Context a runtime adds to a request besides the history (environment, reminders)."""

    kind: str
    content: list[UserPart] = []


class UsageEvent(EventBase, tag="usage", kw_only=True, frozen=True):
    """Usage of one model request."""

    usage: Usage
    message_id: str | None = None
    model: str | None = None
    cost_usd: float | None = None
    service_tier: str | None = None
    """The processing tier the request ran in, which sets its price (OpenAI
    ``service_tier``: ``default``, ``flex``, ``priority``...; Anthropic
    ``usage.service_tier``)."""


class ErrorEvent(EventBase, tag="error", kw_only=True, frozen=True):
    """An error: from the API, the stream, the runtime, or a tool harness."""

    message: str
    code: str | None = None
    retryable: bool = False
    fatal: bool = True
    http_status: int | None = None
    native: Any = None


class WarningEvent(EventBase, tag="warning", kw_only=True, frozen=True):
    """Something was repaired or dropped on purpose (e.g. an orphan tool result)."""

    code: str
    message: str
    details: dict[str, Any] | None = None


# ---------------------------------------------------------------- compression


class CompressionStartEvent(EventBase, tag="compression/start", kw_only=True, frozen=True):
    """Compression of a surface range began."""

    start: int
    end: int
    reason: str | None = None


class CompressionSummaryEvent(EventBase, tag="compression/summary", kw_only=True, frozen=True):
    """The summary of a range; it enters the surface as the ``user/message`` at ``message_seq``."""

    text: str
    start: int
    end: int
    message_seq: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None


class CompressionEndEvent(EventBase, tag="compression/end", kw_only=True, frozen=True):
    """Compression finished."""

    tokens_saved: int | None = None


class CompressionPruneEvent(EventBase, tag="compression/prune", kw_only=True, frozen=True):
    """Tool results pruned from the surface and replaced by shorter ones."""

    pruned: list[int]
    """Seqs of the pruned ``tool/result`` events."""
    tokens_saved: int = 0
    replacement_seqs: list[int] = []


# ---------------------------------------------------------------- agent work UIs show


class PlanItem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One entry of a plan / todo list."""

    text: str
    status: Literal["pending", "in_progress", "completed"] = "pending"


class PlanUpdateEvent(EventBase, tag="plan/update", kw_only=True, frozen=True):
    """The agent's plan or todo list, whole, as it now stands."""

    items: list[PlanItem]
    plan_id: str | None = None


class FileChange(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One changed file."""

    path: str
    kind: Literal["add", "delete", "update"] = "update"
    diff: str | None = None


class FileChangeEvent(EventBase, tag="file/change", kw_only=True, frozen=True):
    """Files the agent changed, paired with the tool call that changed them."""

    changes: list[FileChange]
    call_id: str | None = None
    status: Literal["in_progress", "completed", "failed", "declined"] = "completed"


class ApprovalRequestEvent(EventBase, tag="approval/request", kw_only=True, frozen=True):
    """The runtime asks permission to run a tool or apply a change."""

    request_id: str
    call_id: str | None = None
    tool_name: str | None = None
    reason: str | None = None


class ApprovalResponseEvent(EventBase, tag="approval/response", kw_only=True, frozen=True):
    """The answer to an approval request."""

    request_id: str
    decision: Literal["approved", "denied"]
    reason: str | None = None


class TaskStartEvent(EventBase, tag="task/start", kw_only=True, frozen=True):
    """A sub-agent task began; its events carry ``parent_id`` = ``task_id``."""

    task_id: str
    description: str | None = None
    call_id: str | None = None


class TaskEndEvent(EventBase, tag="task/end", kw_only=True, frozen=True):
    """A sub-agent task ended."""

    task_id: str
    status: TurnStatus = "completed"
    summary: str | None = None


# ---------------------------------------------------------------- recovery


class OpenToolCall(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool call found open by repair."""

    call_id: str
    name: str | None = None
    state: Literal["not-started", "running"]
    """``not-started``: only in an assistant message; ``running``: ``tool/call`` logged."""


class SessionInterruptedEvent(EventBase, tag="session/interrupted", kw_only=True, frozen=True):
    """Repair found the session cut off; lists what was left open."""

    open_tool_calls: list[OpenToolCall] = []
    closed_turns: list[str] = []
    reason: str | None = None


class SessionEndedSeqEvent(EventBase, tag="session/ended-seq", kw_only=True, frozen=True):
    """Marks the last seq written before the session was interrupted."""

    last_seq: int


class RuntimeSwitchEvent(EventBase, tag="runtime/switch", kw_only=True, frozen=True):
    """The session continues in another runtime from here on."""

    from_runtime: str | None = None
    to_runtime: str
    reason: str | None = None
    native_session_id: str | None = None
    """The target runtime's native session written from the log for the hand-off
    (Claude Code session UUID, Codex thread id), when there is one."""


class NativeUnknownEvent(EventBase, tag="native/unknown", kw_only=True, frozen=True):
    """A native event the adapter does not recognise, kept whole; never dropped.

    Also what a reader turns an event of an unknown *type* into (written by a newer
    producer): ``runtime`` is then ``universal-event`` and ``native_type`` the tag.
    """

    runtime: str
    native_type: str | None = None
    payload: Any = None
    reason: str | None = None


Event = (
    SessionStartEvent
    | SessionEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | StepStartEvent
    | StepEndEvent
    | UserMessageEvent
    | AssistantMessageEvent
    | ToolResultEvent
    | AssistantChunkEvent
    | ToolCallEvent
    | ToolOutputEvent
    | RequestHeaderEvent
    | RequestContextEvent
    | UsageEvent
    | ErrorEvent
    | WarningEvent
    | CompressionStartEvent
    | CompressionSummaryEvent
    | CompressionEndEvent
    | CompressionPruneEvent
    | PlanUpdateEvent
    | FileChangeEvent
    | ApprovalRequestEvent
    | ApprovalResponseEvent
    | TaskStartEvent
    | TaskEndEvent
    | SessionInterruptedEvent
    | SessionEndedSeqEvent
    | RuntimeSwitchEvent
    | NativeUnknownEvent
)
"""Any Universal Event."""

EVENT_TYPES: dict[str, type[EventBase]] = {cls.__struct_config__.tag: cls for cls in Event.__args__}
"""Tag → event class, for every type in the catalog."""

SURFACE_EVENT_TYPES: frozenset[str] = frozenset(
    {"user/message", "assistant/message", "tool/result"}
)
"""Tags of the event types that may carry a surface intent."""
