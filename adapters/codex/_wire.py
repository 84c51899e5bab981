"""Typed app-server lines for the fast path: the common notifications as msgspec structs.

Most lines of an app-server stream are deltas and ``item/started`` / ``item/completed``
of agent messages, reasoning, user messages and commands, and the thread / turn / usage /
error lines around them. Those are decoded straight into the
structs below by **one** decoder: a union tagged by the line's ``method`` (unknown
fields skipped, no dicts built). Only what the adapter reads is declared, with the
types the captures show (``tests/fixtures/captured/codex/app_server/*/wire``); a line
of another method, item type or shape fails to decode here and goes down the general
dict path, which reads it exactly as before. The capture harness's
``notifications.jsonl`` says ``payload`` where the wire says ``params``: both are
declared.

The structs are ``gc=False``: decoded JSON holds no reference cycles, and a line's
structs are freed as soon as it is handled, so the collector need not count them.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, ClassVar, Generic, TypeVar, Union, get_args

import msgspec

__all__ = [
    "UNMODELLED_LINES",
    "UNMODELLED_METHODS",
    "AgentMessageDelta",
    "AnyLine",
    "AgentMessageItem",
    "CommandExecutionItem",
    "CommandOutputDelta",
    "DeltaParams",
    "ErrorLine",
    "ErrorParams",
    "FileChangeOutputDelta",
    "ItemCompleted",
    "ItemParams",
    "ItemStarted",
    "PartParams",
    "ReasoningDeltaParams",
    "ReasoningItem",
    "ReasoningTextDelta",
    "SummaryDeltaParams",
    "SummaryPartAdded",
    "SummaryTextDelta",
    "ThreadInfo",
    "ThreadParams",
    "ThreadStarted",
    "TokenUsage",
    "TokenUsageParams",
    "TokenUsageUpdated",
    "TurnCompleted",
    "TurnError",
    "TurnInfo",
    "TurnParams",
    "TurnStarted",
    "TypedLine",
    "UnmodelledLine",
    "UserMessageItem",
    "decode_typed_line",
    "decode_typed_lines",
]


class DeltaParams(msgspec.Struct, gc=False):
    """A text delta's fields the adapter reads (the rest is skipped)."""

    itemId: str
    delta: str


class SummaryDeltaParams(msgspec.Struct, gc=False):
    itemId: str
    delta: str
    summaryIndex: int = 0


class ReasoningDeltaParams(msgspec.Struct, gc=False):
    itemId: str
    delta: str
    contentIndex: int = 0


class PartParams(msgspec.Struct, gc=False):
    """``item/reasoning/summaryPartAdded``: which item gets a new summary part."""

    itemId: str


class AgentMessageItem(msgspec.Struct, gc=False, tag_field="type", tag="agentMessage"):
    id: str | None = None
    text: str | None = None
    phase: str | None = None


class ReasoningItem(msgspec.Struct, gc=False, tag_field="type", tag="reasoning"):
    id: str | None = None
    summary: list[str] | None = None
    content: list[str] | None = None


class UserMessageItem(msgspec.Struct, gc=False, tag_field="type", tag="userMessage"):
    id: str | None = None
    content: Any = None


class CommandExecutionItem(msgspec.Struct, gc=False, tag_field="type", tag="commandExecution"):
    id: str | None = None
    command: str | None = None
    cwd: str | None = None
    status: str | None = None
    aggregatedOutput: str | None = None
    exitCode: int | None = None
    durationMs: int | None = None


class ItemParams(msgspec.Struct, gc=False):
    """``item/started`` / ``item/completed`` params of the item types decoded here."""

    item: AgentMessageItem | ReasoningItem | UserMessageItem | CommandExecutionItem


class ThreadInfo(msgspec.Struct, gc=False):
    id: str | None = None
    model: str | None = None
    cwd: str | None = None


class ThreadParams(msgspec.Struct, gc=False):
    """``thread/started``: the thread (most of its fields are skipped)."""

    thread: ThreadInfo | None = None


class TurnError(msgspec.Struct, gc=False):
    message: str | None = None


class TurnInfo(msgspec.Struct, gc=False):
    id: str | None = None
    status: str | None = None
    error: TurnError | None = None
    durationMs: int | None = None


class TurnParams(msgspec.Struct, gc=False):
    """``turn/started`` / ``turn/completed``: the turn (its ``items`` are skipped)."""

    turn: TurnInfo | None = None


class TokenUsage(msgspec.Struct, gc=False):
    last: dict[str, Any]


class TokenUsageParams(msgspec.Struct, gc=False):
    """``thread/tokenUsage/updated``: the last request's figures (kept whole as ``native``);
    required, so a line without them goes down the dict path (kept as ``native/unknown``)."""

    tokenUsage: TokenUsage


class ErrorParams(msgspec.Struct, gc=False):
    """``error``: the error object is kept whole (``native``), so it stays a dict."""

    error: dict[str, Any] | None = None
    willRetry: bool | None = None


# One struct per method, tagged by ``method``: the decoder picks the struct from the
# line's own top-level ``method`` (first on the wire, anywhere in the harness's files).
# ``method`` is the tag, not a field: each class names it as ``METHOD``.

ParamsT = TypeVar("ParamsT")


class _Line(msgspec.Struct, Generic[ParamsT], gc=False, tag_field="method"):
    """A notification line: ``params`` on the wire, ``payload`` in the harness's files."""

    METHOD: ClassVar[str]
    params: ParamsT | None = None
    payload: ParamsT | None = None


class AgentMessageDelta(_Line[DeltaParams], tag="item/agentMessage/delta"):
    METHOD: ClassVar[str] = "item/agentMessage/delta"


class SummaryTextDelta(_Line[SummaryDeltaParams], tag="item/reasoning/summaryTextDelta"):
    METHOD: ClassVar[str] = "item/reasoning/summaryTextDelta"


class ReasoningTextDelta(_Line[ReasoningDeltaParams], tag="item/reasoning/textDelta"):
    METHOD: ClassVar[str] = "item/reasoning/textDelta"


class CommandOutputDelta(_Line[DeltaParams], tag="item/commandExecution/outputDelta"):
    METHOD: ClassVar[str] = "item/commandExecution/outputDelta"


class FileChangeOutputDelta(_Line[DeltaParams], tag="item/fileChange/outputDelta"):
    METHOD: ClassVar[str] = "item/fileChange/outputDelta"


class SummaryPartAdded(_Line[PartParams], tag="item/reasoning/summaryPartAdded"):
    METHOD: ClassVar[str] = "item/reasoning/summaryPartAdded"


class ItemStarted(_Line[ItemParams], tag="item/started"):
    METHOD: ClassVar[str] = "item/started"


class ItemCompleted(_Line[ItemParams], tag="item/completed"):
    METHOD: ClassVar[str] = "item/completed"


class ThreadStarted(_Line[ThreadParams], tag="thread/started"):
    METHOD: ClassVar[str] = "thread/started"


class TurnStarted(_Line[TurnParams], tag="turn/started"):
    METHOD: ClassVar[str] = "turn/started"


class TurnCompleted(_Line[TurnParams], tag="turn/completed"):
    METHOD: ClassVar[str] = "turn/completed"


class TokenUsageUpdated(_Line[TokenUsageParams], tag="thread/tokenUsage/updated"):
    METHOD: ClassVar[str] = "thread/tokenUsage/updated"


class ErrorLine(_Line[ErrorParams], tag="error"):
    METHOD: ClassVar[str] = "error"


TypedLine = (
    AgentMessageDelta
    | SummaryTextDelta
    | ReasoningTextDelta
    | CommandOutputDelta
    | FileChangeOutputDelta
    | SummaryPartAdded
    | ItemStarted
    | ItemCompleted
    | ThreadStarted
    | TurnStarted
    | TurnCompleted
    | TokenUsageUpdated
    | ErrorLine
)
"""A notification line of one of the methods decoded here."""


class UnmodelledLine(_Line[dict[str, Any]]):
    """A notification of a method the adapter keeps whole, as ``native/unknown`` (thread
    status, rate limits, ...): a fifth of a stream's lines. Decoding them here spares each
    a failed typed decode and a second, general one; one subclass per method
    (:data:`UNMODELLED_METHODS`). Params of another shape (not an object) fail here and
    go down the general path, as before."""


UNMODELLED_METHODS = (
    "account/gatewayOAuth/changed",
    "account/login/completed",
    "account/rateLimits/updated",
    "account/updated",
    "app/list/updated",
    "autoApprovalReview/strictReviewRequired",
    "command/exec/outputDelta",
    "configWarning",
    "deprecationNotice",
    "externalAgentConfig/import/completed",
    "externalAgentConfig/import/progress",
    "fs/changed",
    "fuzzyFileSearch/sessionCompleted",
    "fuzzyFileSearch/sessionUpdated",
    "guardianWarning",
    "hook/completed",
    "hook/started",
    "item/autoApprovalReview/completed",
    "item/autoApprovalReview/started",
    "item/commandExecution/terminalInteraction",
    "item/fileChange/patchUpdated",
    "item/mcpToolCall/progress",
    "item/plan/delta",
    "mcpServer/event/stream/notification",
    "mcpServer/oauthLogin/completed",
    "mcpServer/startupStatus/updated",
    "model/rerouted",
    "model/safetyBuffering/updated",
    "model/verification",
    "modelProvider/authRecoveryCompleted",
    "modelProvider/authRecoveryStarted",
    "process/exited",
    "process/outputDelta",
    "project/changed",
    "remoteControl/status/changed",
    "serverRequest/resolved",
    "skills/changed",
    "thread/archived",
    "thread/attachment/updated",
    "thread/closed",
    "thread/compacted",
    "thread/deleted",
    "thread/environment/connected",
    "thread/environment/disconnected",
    "thread/goal/cleared",
    "thread/goal/updated",
    "thread/name/updated",
    "thread/prediction/updated",
    "thread/project/updated",
    "thread/queue/changed",
    "thread/readState/changed",
    "thread/realtime/closed",
    "thread/realtime/error",
    "thread/realtime/item/completed",
    "thread/realtime/item/started",
    "thread/realtime/item/transcript/delta",
    "thread/realtime/itemAdded",
    "thread/realtime/outputAudio/delta",
    "thread/realtime/sdp",
    "thread/realtime/started",
    "thread/realtime/transcript/delta",
    "thread/realtime/transcript/done",
    "thread/reverted",
    "thread/settings/updated",
    "thread/status/changed",
    "thread/unarchived",
    "turn/diff/updated",
    "turn/moderationMetadata",
    "warning",
    "windows/worldWritableWarning",
    "windowsSandbox/setupCompleted",
)
"""The app-server v2 notification methods (the ``openai_codex`` SDK's registry) the adapter
does not model: neither a typed line here nor a dict handler of its own."""


def _unmodelled_line(method: str) -> type[UnmodelledLine]:
    line: type[UnmodelledLine] = msgspec.defstruct(
        f"Unmodelled_{method.replace('/', '_')}",
        [],
        bases=(UnmodelledLine,),
        tag=method,
        namespace={"METHOD": method},
    )  # type: ignore[assignment]  # defstruct is typed as returning type[Struct]
    return line


UNMODELLED_LINES = tuple(_unmodelled_line(method) for method in UNMODELLED_METHODS)
"""One line struct per method of :data:`UNMODELLED_METHODS`."""

AnyLine = TypedLine | UnmodelledLine
"""What the decoder gives: a typed line or one kept whole."""

_decoder: msgspec.json.Decoder[AnyLine] = msgspec.json.Decoder(
    Union[(*get_args(TypedLine), *UNMODELLED_LINES)]  # built at run time: both tuples
)
_WIRE_HEAD = b'{"method":"'


def decode_typed_line(raw: bytes) -> AnyLine | None:
    """``raw`` as a typed line, or None when it is not one (general path).

    A line of another method (one not listed, or a JSON-RPC response) fails at its tag:
    on the wire the method is the first key, so that costs less than looking at the
    method first would cost every line. Lines without a ``"method"`` key at all (exec
    lines) are not tried.
    """
    if not raw.startswith(_WIRE_HEAD) and b'"method"' not in raw:
        return None
    try:
        return _decoder.decode(raw)
    except msgspec.DecodeError:  # another method or item type, a field of another type
        return None


def decode_typed_lines(raws: list[bytes]) -> list[AnyLine | None]:
    """Each line of ``raws`` as a typed line, or None where it is not one (another
    method or item type, a JSON-RPC response, an exec line, a blank one).

    The lines are decoded by one ``extend`` over ``map``, without a Python call per
    line: a stream's lines are nearly all typed ones. When a line fails, the lines before
    it stay decoded (``extend`` keeps what it appended before the error), that line gets
    None, and decoding goes on after it: a chunk with a response line in it costs no
    second pass. ``decode_lines`` over the whole chunk would cost less, but reads it as
    a stream of JSON values (two on a line, one across lines): not line by line.
    """
    decode = _decoder.decode
    lines: list[AnyLine | None] = []
    while True:
        try:
            lines.extend(map(decode, islice(raws, len(lines), None)))
            return lines
        except msgspec.DecodeError:  # a line of another method, item type or shape
            lines.append(None)
