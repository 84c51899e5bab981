"""Claude Code / Claude Agent SDK → Universal Events.

:class:`ClaudeCodeAdapter` reads what ``claude -p --output-format stream-json --verbose``
prints (JSON lines; raw ``bytes`` are buffered across chunks, a ``str`` line or a
``dict`` work too) and the typed messages ``claude_agent_sdk.query()`` yields
(``SystemMessage``, ``AssistantMessage``, ``UserMessage``, ``StreamEvent``,
``ResultMessage``, the task messages). :class:`ClaudeTranscriptAdapter` reads Claude
Code's own session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

What the runtime prints, and what it becomes (facts from
tests/fixtures/captured/claude, Claude Code 2.1.332 / claude-agent-sdk 0.2.189):

* ``system/init`` → ``session/start`` (once per native session) and ``request/header``
  (model, tool names, cwd, permission mode), re-written only when it changes.
* ``assistant`` — **one line per content block**; the blocks of one API message share
  ``message.id`` and arrive as separate lines. They are merged into one
  ``assistant/message`` (one per agent: a sub-agent's lines do not end the main
  agent's message), emitted when the message is complete: at the next different
  message id, a ``user`` line, the ``result`` line, or :meth:`close`. Claude Code runs
  a tool as soon as its block is complete, so with partial messages on a line of tool
  results can come while the message still streams (another call, or before
  ``message_stop``): it is held and logged after the message, once the stream ends it.
  The lines carry
  ``stop_reason: null`` and the provisional ``message_start`` usage; with
  ``--include-partial-messages`` the real stop reason and usage come from the
  ``stream_event`` lines (which also give the chunks), and the ``assistant`` line of a
  block arrives *before* that block's ``content_block_stop``.
* ``assistant`` with ``model: "<synthetic>"`` and an ``error`` (such as
  ``server_error``) or ``isApiErrorMessage: true`` is the CLI's own error report after retries ran out — an ``error``
  event, never an assistant message (it is not in the history the CLI sends next);
  ``http_status`` from the line's ``api_error_status`` (from its ``API Error: 500 …``
  text for the SDK's ``AssistantMessage``, which drops that field). Its other made-up
  messages (``No response requested.`` after an interrupt) are assistant messages:
  the CLI sends them to the model.
* ``user`` lines carry ``tool_result`` blocks → ``tool/result``; ``tool_use_result`` is an
  object on success (``{"stdout", "stderr", ...}``) and a string on failure
  (``"Error: Exit code 3\\noops"``); it is kept in ``details["tool_use_result"]``. Text in
  a ``user`` line (``[Request interrupted by user]``) → ``user/message``.
* ``result`` → ``turn/end``: status (``completed``; ``interrupted`` for
  ``terminal_reason`` ``aborted_*``; ``failed`` for other errors), the turn's usage
  (normalised once, cache included), ``total_cost_usd``, ``duration_ms``, errors.
* ``system/api_retry`` → a retryable, non-fatal ``error``; ``system/permission_denied``
  and rate-limit events that are not ``allowed`` → non-fatal ``error``;
  ``system/task_started`` / ``task_notification`` → ``task/start`` / ``task/end``.
  Events of a sub-agent (``parent_tool_use_id`` set) carry ``parent_id`` and their
  messages are logged with surface ``hidden``: they are not the main model's history.
* Everything else (``system/status``, ``thinking_tokens``, hook and state lines) is kept
  as ``native/unknown`` — informational, never dropped.

Turns and steps are synthesised: a turn opens with :meth:`ClaudeCodeAdapter.user_prompt`
(the prompt given to ``query()`` / ``claude -p`` is not in the output stream) or with the
first model activity; each API message is a step (its tool results included); ``result``
ends the turn. A step ends ``completed`` unless its message was cut (with partial
messages on: logged partial, or its stream closed without a stop reason) — then
``failed`` when an API error came in the step (a stream cut and retried, the CLI's final
error), else ``interrupted`` (a user interrupt).

Native values of the wrong type never reach a typed event field: optional ones
(``uuid``, ``model``, ``cwd``, ``stop_reason``, ``duration_ms``, ``error_status``, ...)
are dropped to None; a ``parent_tool_use_id`` that is not a string, or an ``assistant``
line with a content block of another shape, keeps the line whole as ``native/unknown``
(checked when the line comes, before it changes any state).

What the runtime itself adds when it sends the history back (Claude Code 2.1.332,
``requests/*.json`` of the captures) and is *not* in the log: ``<system-reminder>``
text blocks before the prompt, a ``<system-reminder><total_tokens>…`` suffix on the last
tool result's text, and ``cache_control`` on the last block. The oracle tests name them.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import msgspec

from adapters._base import (
    MALFORMED,
    Adapter,
    int_or_none,
    new_id,
    str_or_none,
    text_value,
)
from adapters._tap import AsyncTap, EventLog, Tap, finish_open_taps, log_session_id
from adapters._tap import atap as generic_atap
from adapters._tap import tap as generic_tap
from adapters._usage import anthropic_usage
from adapters.anthropic._request import user_part
from adapters.anthropic._stream import AnthropicAdapter, assistant_parts, whole_block
from universal_event.derive import is_surface_event
from universal_event.errors import UniversalEventError
from universal_event.events import (
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    EventBase,
    RequestHeaderEvent,
    SessionStartEvent,
    StepEndEvent,
    StepStartEvent,
    Surface,
    TaskEndEvent,
    TaskStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    ToolSpec,
    TurnEndEvent,
    TurnStartEvent,
    TurnStatus,
    UserMessageEvent,
)
from universal_event.log import SessionLog
from universal_event.parts import Provenance, ResultPart, TextPart, UserPart
from universal_event.runtimes import ClaudeCompaction

__all__ = ["ClaudeCodeAdapter", "ClaudeTranscriptAdapter", "atap", "sdk_message_to_line", "tap"]

T = TypeVar("T")


SYNTHETIC_MODEL = "<synthetic>"
"""The model name Claude Code puts on the error messages it makes up itself."""

_API_ERROR_STATUS = re.compile(r"API Error: ([1-5][0-9]{2})\b")
"""How the CLI words an API error that had an HTTP response (the status first)."""
_HIDDEN = Surface(op="hidden")
_INTERRUPTED_REASONS = frozenset({"aborted_streaming", "aborted_tools", "interrupted"})
_RETRYABLE_CLI_ERRORS = frozenset({"server_error", "rate_limit", "overloaded", "unknown"})
_TASK_STATUS: dict[str, TurnStatus] = {
    "completed": "completed",
    "failed": "failed",
    "stopped": "cancelled",
    "killed": "cancelled",
}

_BLOCK_TYPES = {
    "TextBlock": "text",
    "ThinkingBlock": "thinking",
    "ToolUseBlock": "tool_use",
    "ToolResultBlock": "tool_result",
    "ServerToolUseBlock": "server_tool_use",
    "ServerToolResultBlock": "server_tool_result",
}
"""claude_agent_sdk block dataclasses → the wire ``type`` (the SDK drops it)."""


class _EmbeddedStream(AnthropicAdapter):
    """The Anthropic normaliser for ``stream_event`` lines, tagged as Claude Code."""

    runtime: ClassVar[str] = "claude-code"


class _Pending:
    """An API message being merged from several ``assistant`` lines."""

    __slots__ = ("blocks", "id", "model", "parent_id", "stop_reason")

    def __init__(self, message_id: str | None, model: str | None, parent_id: str | None) -> None:
        self.id = message_id
        self.model = model
        self.parent_id = parent_id
        self.blocks: list[dict[str, Any]] = []
        self.stop_reason: str | None = None


class ClaudeCodeAdapter(Adapter):
    """Normalises Claude Code stream-json lines and claude_agent_sdk messages."""

    runtime: ClassVar[str] = "claude-code"
    _tool_result_key = "tool_use_result"

    def __init__(self, *, session_id: str = "") -> None:
        super().__init__(session_id=session_id)
        self._stream = _EmbeddedStream(session_id=session_id, embedded=True)
        self._pending: dict[str | None, _Pending] = {}
        """The message being merged, per agent (``parent_tool_use_id``; None: main)."""
        self._held: dict[str | None, list[Mapping[str, Any]]] = {}
        """Tool-result lines that came while their agent's message was still streaming."""
        self._turn_open = False
        self._step_message: str | None = None
        self._step_open = False
        self._step_partial = False
        """The step's message was logged ``partial``."""
        self._step_error = False
        """An API error (retry, in-stream error, the CLI's final error) came in the step."""
        self._next_step = 0
        self._streamed: set[str] = set()
        self._native_sessions: set[str | None] = set()
        self._header: dict[str, Any] | None = None
        self._runtime_settings: tuple[Any, Any] | None = None
        """The last init line's ``cwd`` and ``permissionMode``."""
        self._tool_names: dict[str, str] = {}
        self._open_calls: set[str] = set()

    # ------------------------------------------------------------------ public API

    def feed(self, native: Any) -> list[Event]:
        """Normalise JSON-lines bytes, a str line, a dict, or a claude_agent_sdk message."""
        out: list[Event] = []
        if isinstance(native, bytes | bytearray | memoryview):
            self._feed_bytes(bytes(native), out)
        elif isinstance(native, str):
            self._feed_bytes(native.encode() + (b"" if "\n" in native else b"\n"), out)
        elif isinstance(native, Mapping):
            self._on_line(native, out)
        elif dataclasses.is_dataclass(native) and not isinstance(native, type):
            try:
                line = sdk_message_to_line(native)
            except MALFORMED as exc:  # an object of another shape (a block, its content)
                out.append(self.malformed(type(native).__name__, repr(native), exc))
                return out
            if line is None:
                out.append(self.unknown(type(native).__name__, repr(native), "unknown SDK type"))
            else:
                self._on_line(line, out)
        else:
            out.append(self.unknown(type(native).__name__, repr(native), "not a Claude message"))
        return out

    def close(self) -> list[Event]:
        """Finish: a last line without newline, the pending message, an open turn."""
        out: list[Event] = []
        for raw in self._rest_of_lines():
            line = self._json_object(raw, out)
            if line is not None:
                self._on_line(line, out)
        out.extend(self._stream.close())
        try:
            self._flush_all(out)
            if self._turn_open:
                self._close_open_turn(out)
        except UniversalEventError:
            raise
        except MALFORMED as exc:  # a line of another shape left its mark in the state
            out.append(self.malformed("close", None, exc))
        return out

    def user_prompt(self, content: str | list[UserPart]) -> list[Event]:
        """Append the prompt given to ``query()`` / ``claude -p`` (not in the output).

        A tap of this adapter the caller stopped reading is finished first
        (:func:`adapters._tap.finish_open_taps`: an unfinished turn ends ``interrupted``
        before the prompt).
        """
        finish_open_taps(self)
        parts: list[UserPart] = [TextPart(text=content)] if isinstance(content, str) else content
        out: list[Event] = []
        self._flush_all(out)
        self._ensure_turn(out)
        out.append(self.make(UserMessageEvent, content=parts))
        return out

    def _envelope_defaults(self, fields: dict[str, Any]) -> None:
        """The step number only while a step is open."""
        if not self._step_open:
            fields.setdefault("step", None)

    # ------------------------------------------------------------------ lines

    def _feed_bytes(self, chunk: bytes, out: list[Event]) -> None:
        for raw in self._lines(chunk):
            line = self._json_object(raw, out)
            if line is not None:
                self._on_line(line, out)

    def _on_line(self, line: Mapping[str, Any], out: list[Event]) -> None:
        kind = line.get("type")
        try:
            # Every event of the line carries it: of another type, the line is kept whole
            # (dropped, a sub-agent's events would pass for the main agent's).
            if type(line.get("parent_tool_use_id")) not in (str, type(None)):
                raise TypeError("parent_tool_use_id is not a string")
            if kind == "stream_event":
                self._stream_event(line, out)
            elif kind == "assistant":
                self._assistant(line, out)
            elif kind == "user":
                self._user(line, out)
            elif kind == "system":
                self._system(line, out)
            elif kind == "result":
                self._result(line, out)
            elif kind == "rate_limit_event":
                self._rate_limit(line, out)
            else:
                out.append(self.unknown(str(kind), dict(line), "not normalised"))
        except UniversalEventError:
            raise
        except MALFORMED as exc:
            reason = f"malformed {kind!r} line: {type(exc).__name__}: {exc}"
            out.append(self.unknown(str(kind), dict(line), reason))

    def _system_error(
        self, line: Mapping[str, Any], native_type: str, message: str, **fields: Any
    ) -> ErrorEvent:
        """A ``system`` line about a problem the CLI goes on from: a non-fatal ``error``."""
        return self.make(
            ErrorEvent,
            native_type=native_type,
            native_id=str_or_none(line.get("uuid")),
            message=message,
            fatal=False,
            native=dict(line),
            parent_id=line.get("parent_tool_use_id"),
            **fields,
        )

    def _system(self, line: Mapping[str, Any], out: list[Event]) -> None:
        subtype = line.get("subtype")
        native_type = f"system/{subtype}"
        parent = line.get("parent_tool_use_id")
        if subtype == "init":
            self._init(line, out)
        elif subtype == "api_retry":
            if parent is None:
                self._ensure_turn(out)
                self._step_error = self._step_error or self._step_open
            status, error = line.get("error_status"), line.get("error")
            message = (
                f"API request failed ({error}, HTTP {status}); retry {line.get('attempt')}"
                f" of {line.get('max_retries')} in {line.get('retry_delay_ms')} ms"
            )
            out.append(
                self._system_error(
                    line,
                    native_type,
                    message,
                    code=str(error) if error is not None else None,
                    retryable=True,
                    http_status=int_or_none(status),
                )
            )
        elif subtype == "permission_denied":
            message = str(line.get("message") or line.get("reason") or "permission denied")
            out.append(self._system_error(line, native_type, message, code="permission_denied"))
        elif subtype == "task_started":
            out.append(
                self.make(
                    TaskStartEvent,
                    native_type=native_type,
                    task_id=str(line["task_id"]),
                    description=str_or_none(line.get("description")),
                    call_id=str_or_none(line.get("tool_use_id")),
                    parent_id=parent,
                )
            )
        elif subtype == "task_notification":
            out.append(
                self.make(
                    TaskEndEvent,
                    native_type=native_type,
                    task_id=str(line["task_id"]),
                    status=_TASK_STATUS.get(str(line.get("status")), "completed"),
                    summary=str_or_none(line.get("summary")),
                    parent_id=parent,
                )
            )
        else:
            out.append(self.unknown(native_type, dict(line), "informational; not normalised"))

    def _init(self, line: Mapping[str, Any], out: list[Event]) -> None:
        native_session = str_or_none(line.get("session_id"))
        model = str_or_none(line.get("model"))
        if native_session not in self._native_sessions:
            self._native_sessions.add(native_session)  # None too: once without an id
            keep = ("permissionMode", "claude_code_version", "apiKeySource", "mcp_servers")
            out.append(
                self.make(
                    SessionStartEvent,
                    native_type="system/init",
                    native_id=native_session,
                    model=model,
                    runtime=self.runtime,
                    native_session_id=native_session,
                    cwd=str_or_none(line.get("cwd")),
                    metadata={key: line[key] for key in keep if key in line},
                )
            )
        tool_names = [str(name) for name in line.get("tools") or []]
        header = {"model": model, "tools": tool_names}
        if header != self._header:
            self._header = header
            out.append(
                self.make(
                    RequestHeaderEvent,
                    native_type="system/init",
                    native_id=native_session,
                    provider="anthropic",
                    api="messages",
                    model=model,
                    # The init line names the tools only; their schemas are in the requests.
                    tools=[ToolSpec(name=name) for name in tool_names],
                )
            )
        # The runtime's own settings are no API settings (a request with them is
        # refused): the session start has them; a change later is kept as it came.
        settings = (line.get("cwd"), line.get("permissionMode"))
        if self._runtime_settings not in (None, settings):
            out.append(self.unknown("system/init", dict(line), "runtime settings changed"))
        self._runtime_settings = settings

    def _rate_limit(self, line: Mapping[str, Any], out: list[Event]) -> None:
        info = line.get("rate_limit_info") or {}
        if info.get("status") in (None, "allowed"):
            out.append(self.unknown("rate_limit_event", dict(line), "informational; allowed"))
            return
        out.append(
            self.make(
                ErrorEvent,
                native_type="rate_limit_event",
                native_id=str_or_none(line.get("uuid")),
                message=f"rate limit {info.get('status')} ({info.get('rateLimitType')})",
                code="rate_limit",
                retryable=True,
                fatal=False,
                http_status=429,
                native=dict(line),
            )
        )

    def _stream_event(self, line: Mapping[str, Any], out: list[Event]) -> None:
        event = line["event"]
        parent = line.get("parent_tool_use_id")
        if isinstance(event, Mapping) and event.get("type") == "message_start":
            message_id = text_value(event["message"]["id"])
            self._streamed.add(message_id)
            if parent is None:
                self._flush(out)
                self._begin_step(message_id, out)
        stream = self._stream
        stream.session_id = self.session_id
        stream.turn_id = self.turn_id
        stream.step = self.step if self._step_open else None
        stream.parent_id = parent
        events = stream.feed(event)
        if parent is None and self._step_open:
            self._step_error = self._step_error or any(isinstance(e, ErrorEvent) for e in events)
        out.extend(events)
        if self._held.get(parent) and self._complete(parent):
            self._flush(out, parent)  # the message ended: it, then the results held for it

    def _assistant(self, line: Mapping[str, Any], out: list[Event]) -> None:
        message = line["message"]
        parent = line.get("parent_tool_use_id")
        if message.get("model") == SYNTHETIC_MODEL and (
            line.get("error") is not None or line.get("isApiErrorMessage") is True
        ):
            # Claude Code's own error report. Its other made-up messages ("No response
            # requested." after an interrupt) are sent to the model: assistant messages.
            self._synthetic_error(line, out)
            return
        message_id = message.get("id")
        if message_id is not None:
            message_id = text_value(message_id)  # a key of the pending message
        # The blocks first: one of another shape keeps the line whole (native/unknown)
        # before it changed anything, not when the merged message is emitted.
        blocks = [dict(block) for block in message.get("content") or []]
        for index, block in enumerate(blocks):
            whole_block(index, block)
            if block.get("type") == "tool_use" and block.get("id"):
                text_value(block["id"])
        pending = self._pending.get(parent)
        if pending is not None and pending.id != message_id:
            self._flush(out, parent)
            pending = None
        if pending is None:
            if parent is None:
                self._begin_step(message_id, out)
            model = str_or_none(message.get("model"))
            pending = self._pending[parent] = _Pending(message_id, model, parent)
        for block in blocks:
            pending.blocks.append(block)
            if block.get("type") == "tool_use" and block.get("id"):
                self._tool_call(block, parent, out)
        pending.stop_reason = str_or_none(message.get("stop_reason")) or pending.stop_reason
        if self._held.get(parent) and self._complete(parent):
            self._flush(out, parent)  # the line that completes the message

    def _tool_call(self, block: Mapping[str, Any], parent: Any, out: list[Event]) -> None:
        """A ``tool_use`` block: Claude Code runs the tool as soon as its message ends,
        while the message may still get blocks (lines of the same id). ``tool/call`` is
        logged now, and checkpointed (``tap``), so the log has the call before the tool
        has any effect; the message follows when it is complete."""
        call_id = text_value(block["id"])
        name = str(block.get("name"))
        self._tool_names[call_id] = name
        if parent is None:
            self._open_calls.add(call_id)
        out.append(
            self.make(
                ToolCallEvent,
                native_type="assistant",
                native_id=call_id,
                call_id=call_id,
                name=name,
                arguments=block.get("input"),
                kind="function",
                parent_id=parent,
            )
        )

    def _synthetic_error(self, line: Mapping[str, Any], out: list[Event]) -> None:
        """Claude Code's own error message (``model: "<synthetic>"``): an error event."""
        self._flush(out, line.get("parent_tool_use_id"))
        self._ensure_turn(out)
        if line.get("parent_tool_use_id") is None:
            self._step_error = self._step_error or self._step_open
        message = line["message"]
        texts = [b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text"]
        text = "\n".join(texts)
        code = line.get("error")
        out.append(
            self.make(
                ErrorEvent,
                native_type="assistant",
                native_id=str_or_none(message.get("id")),
                model=SYNTHETIC_MODEL,
                message=text or str(code or "error"),
                code=str(code) if code is not None else None,
                retryable=code in _RETRYABLE_CLI_ERRORS,
                fatal=True,
                http_status=_synthetic_http_status(line, text),
                native=dict(line),
                parent_id=line.get("parent_tool_use_id"),
            )
        )

    def _user(self, line: Mapping[str, Any], out: list[Event]) -> None:
        """A ``user`` line of one agent (the main one, or a sub-agent: ``parent_tool_use_id``).

        Claude Code runs a tool as soon as its ``tool_use`` block is complete, so its
        result can come while the message is still streaming (another call, or before
        ``message_stop``). Such a line of tool results only is held, and logged after
        the message once it is complete (:meth:`_flush`): the message is one, and the
        results follow it, as in the next request. Any other line ends the message.
        """
        parent = line.get("parent_tool_use_id")
        content = line["message"]["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:  # of another shape: kept whole before it changed any state
            if block.get("type") == "tool_result":
                block["tool_use_id"]  # a result without its call id: KeyError
        only_results = bool(blocks) and all(b.get("type") == "tool_result" for b in blocks)
        if only_results and self._streaming(parent):
            self._held.setdefault(parent, []).append(line)
            return
        self._flush(out, parent)
        self._user_line(line, out)

    def _user_line(self, line: Mapping[str, Any], out: list[Event]) -> None:
        parent = line.get("parent_tool_use_id")
        content = line["message"]["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        results = [b for b in blocks if b.get("type") == "tool_result"]
        details_value = line.get(self._tool_result_key, line.get("toolUseResult"))
        others: list[dict[str, Any]] = []
        for index, block in enumerate(blocks):  # in the line's order
            if block.get("type") != "tool_result":
                others.append(block)
                if index + 1 == len(blocks) or blocks[index + 1].get("type") == "tool_result":
                    self._user_content(line, others, out)
                    others = []
                continue
            call_id = str(block["tool_use_id"])
            self._open_calls.discard(call_id)
            if parent is None and call_id in self._pending and not self._streaming(call_id):
                self._flush(out, call_id)  # the sub-agent of the call (Task) came back
            details = None
            if len(results) == 1 and details_value is not None:
                details = {"tool_use_result": details_value}
            out.append(
                self.make(
                    ToolResultEvent,
                    native_type="user",
                    native_id=str_or_none(line.get("uuid")),
                    call_id=call_id,
                    name=self._tool_names.get(call_id),
                    content=_result_parts(block.get("content")),
                    is_error=bool(block.get("is_error")),
                    details=details,
                    parent_id=parent,
                    surface=_HIDDEN if parent else None,
                )
            )

    def _user_content(
        self, line: Mapping[str, Any], blocks: list[dict[str, Any]], out: list[Event]
    ) -> None:
        parent = line.get("parent_tool_use_id")
        if parent is None:
            self._ensure_turn(out)
        out.append(
            self.make(
                UserMessageEvent,
                native_type="user",
                native_id=str_or_none(line.get("uuid")),
                content=_user_parts(blocks),
                parent_id=parent,
                surface=_HIDDEN if parent else None,
            )
        )

    def _result(self, line: Mapping[str, Any], out: list[Event]) -> None:
        self._flush_all(out)
        self._ensure_turn(out)
        is_error = bool(line.get("is_error"))
        status: TurnStatus = "completed"
        if line.get("terminal_reason") in _INTERRUPTED_REASONS:
            status = "interrupted"
        elif is_error:
            status = "failed"
        self._end_step(out, "completed", cut="interrupted" if status == "completed" else status)
        errors = line.get("errors")
        error = "; ".join(map(str, errors)) if errors else None
        if is_error and error is None:
            error = str(line.get("result") or line.get("subtype"))
        usage = line.get("usage")
        cost = line.get("total_cost_usd")
        duration = line.get("duration_ms")
        out.append(
            self.make(
                TurnEndEvent,
                native_type=f"result/{line.get('subtype')}",
                native_id=str_or_none(line.get("uuid")),
                status=status,
                usage=anthropic_usage(usage) if isinstance(usage, Mapping) else None,
                cost_usd=float(cost) if isinstance(cost, int | float) else None,
                duration_ms=int_or_none(duration),
                error=error,
                stop_reason=str_or_none(line.get("stop_reason")),
                native=dict(line),
            )
        )
        self._turn_open = False
        self._open_calls.clear()

    # ------------------------------------------------------------------ turns, steps

    def _ensure_turn(self, out: list[Event]) -> None:
        if not self._turn_open:
            self.turn_id = new_id()
            self._turn_open = True
            self._next_step = 0
            self._step_open = False
            self._step_message = None
            out.append(self.make(TurnStartEvent))

    def _begin_step(self, message_id: str | None, out: list[Event]) -> None:
        """A new API message: end the previous step, start this one (once per message)."""
        if self._step_open and self._step_message == message_id:
            return
        self._ensure_turn(out)
        self._end_step(out, "completed")
        self.step = self._next_step
        self._next_step += 1
        self._step_open = True
        self._step_message = message_id
        self._step_partial = False
        self._step_error = False
        out.append(self.make(StepStartEvent, native_id=message_id))

    def _end_step(
        self, out: list[Event], status: TurnStatus, *, cut: TurnStatus = "interrupted"
    ) -> None:
        """End the open step: ``status``, unless its message was cut — then ``failed``
        after an API error in the step (a retried stream, the CLI's final error), else
        ``cut`` (the turn's status at ``result``: ``interrupted`` for a user interrupt)."""
        if not self._step_open:
            return
        stop_reason = None
        finished = None
        if self._step_message is not None:
            finished = self._stream.finished.get(self._step_message)
            stop_reason = finished[0] if finished is not None else None
        if status == "completed" and self._step_cut(finished):
            status = "failed" if self._step_error else cut
        out.append(
            self.make(
                StepEndEvent, native_id=self._step_message, status=status, stop_reason=stop_reason
            )
        )
        self._step_open = False
        self.step = None

    def _step_cut(self, finished: tuple[str | None, str] | None) -> bool:
        """Whether the open step's message did not end as the API ends a message.

        Known only with partial messages on (``stream_event`` lines): the message was
        logged partial, its stream never reached ``message_stop``, or it stopped without
        a stop reason (the API always sends one in ``message_delta``; Claude Code closes
        a stream cut by an interrupt or a lost connection with a ``message_stop`` of its
        own and none). Without stream events the lines cannot tell.
        """
        if self._step_partial:
            return True
        if self._step_message not in self._streamed:
            return False
        return finished is None or finished[1] == "partial" or finished[0] is None

    def _streaming(self, parent: str | None) -> bool:
        """Whether the agent's pending message is known to be still streaming: its
        ``message_start`` came (partial messages on) and neither ``message_stop`` nor a
        line with its stop reason. Without stream events the lines cannot tell: a tool
        result is then logged when its line comes (the message first)."""
        pending = self._pending.get(parent)
        return pending is not None and pending.id in self._streamed and not self._complete(parent)

    def _complete(self, parent: str | None) -> bool:
        """Whether the agent's pending message is complete: a line of it carried its
        stop reason, or its stream reached ``message_stop``."""
        pending = self._pending.get(parent)
        if pending is None:
            return True
        return pending.stop_reason is not None or (pending.id or "") in self._stream.finished

    def _flush_all(self, out: list[Event]) -> None:
        """Emit every agent's pending message and held results (the main agent first)."""
        for parent in sorted({*self._pending, *self._held}, key=lambda p: p is not None):
            self._flush(out, parent)

    def _release(self, parent: str | None, out: list[Event]) -> None:
        """Log the tool-result lines held for the agent, in the order they came."""
        held = self._held.pop(parent, [])
        for line in held:
            self._user_line(line, out)

    def _flush(self, out: list[Event], parent: str | None = None) -> None:
        """Emit the agent's merged assistant message, if one is pending, then the
        tool results held for it."""
        pending = self._pending.pop(parent, None)
        if pending is None:
            self._release(parent, out)
            return
        self._flush_message(pending, out)
        self._release(parent, out)

    def _flush_message(self, pending: _Pending, out: list[Event]) -> None:
        provenance = Provenance(provider="anthropic", api="messages", model=pending.model)
        parts, unknown_blocks = assistant_parts(pending.blocks, provenance)
        for block in unknown_blocks:
            reason = "unknown content block type; kept out of the assistant message"
            out.append(self.unknown(str(block.get("type")), block, reason))
        finished = self._stream.finished.get(pending.id or "")
        stop_reason = pending.stop_reason or (finished[0] if finished else None)
        # With partial messages on, a message whose stream never reached message_stop
        # (interrupted) is partial; without them the lines give no way to tell.
        partial = pending.id in self._streamed and (finished is None or finished[1] == "partial")
        if partial and pending.parent_id is None and pending.id == self._step_message:
            self._step_partial = True
        out.append(
            self.make(
                AssistantMessageEvent,
                native_type="assistant",
                native_id=pending.id,
                model=pending.model,
                content=parts,
                message_id=pending.id,
                provenance=provenance,
                stop_reason=stop_reason,
                status="partial" if partial else "complete",
                parent_id=pending.parent_id,
                surface=_HIDDEN if pending.parent_id else None,
            )
        )

    def _close_open_turn(self, out: list[Event]) -> None:
        out.append(
            self.make(
                ErrorEvent,
                message="stream ended without a result line",
                code="stream_interrupted",
                retryable=True,
            )
        )
        self._end_step(out, "interrupted")
        out.append(self.make(TurnEndEvent, status="interrupted", error="no result line"))
        self._turn_open = False


class ClaudeTranscriptAdapter(ClaudeCodeAdapter):
    """Claude Code's session transcript (``~/.claude/projects/<project>/<session>.jsonl``).

    The same ``user``/``assistant`` lines as stream-json (one assistant line per content
    block, sharing ``message.id``), with ``toolUseResult`` instead of
    ``tool_use_result``, no ``system/init`` and no ``result`` lines. A user line that is
    not a tool result starts a new turn (``isMeta`` lines — a slash command's expanded
    prompt — belong to the turn of the line before). The first line with a
    ``sessionId`` gives ``session/start``; sub-agent lines (``isSidechain``) are logged
    hidden. Other line kinds (``summary``, ``queue-operation``, ``attachment``,
    ``file-history-snapshot``, ``system``) are kept as ``native/unknown``. At
    :meth:`close` the last turn ends ``completed`` — or ``interrupted`` when a tool call
    has no result. Branches (an entry whose ``parentUuid`` is an earlier one: a resume at
    an earlier message, an edited prompt) are followed as Claude Code follows them
    (:class:`_Branches`): the entries it no longer sends stay logged, off the surface.
    """

    runtime: ClassVar[str] = "claude-code-transcript"
    _tool_result_key = "toolUseResult"

    def __init__(self, *, session_id: str = "") -> None:
        super().__init__(session_id=session_id)
        self._branches = _Branches()

    def _on_line(self, line: Mapping[str, Any], out: list[Event]) -> None:
        start = len(out)
        self._line(line, out)
        self._branches.follow(line, out, start)

    def close(self) -> list[Event]:
        out = super().close()
        self._branches.closed(out)  # the message a branch began may be logged only now
        return out

    def _line(self, line: Mapping[str, Any], out: list[Event]) -> None:
        self._line_time(line.get("timestamp"))
        native_session = line.get("sessionId")
        if isinstance(native_session, str) and native_session not in self._native_sessions:
            self._native_sessions.add(native_session)
            out.append(
                self.make(
                    SessionStartEvent,
                    native_type=str(line.get("type")),
                    native_id=native_session,
                    runtime=self.runtime,
                    native_session_id=native_session,
                    cwd=str_or_none(line.get("cwd")),
                    metadata={"version": line["version"]} if "version" in line else {},
                )
            )
        if line.get("isSidechain") and line.get("type") in ("user", "assistant"):
            line = {**line, "parent_tool_use_id": line.get("parent_tool_use_id") or "sidechain"}
        if line.get("type") in ("user", "assistant"):
            super()._on_line(line, out)
        else:
            out.append(self.unknown(str(line.get("type")), dict(line), "transcript bookkeeping"))

    def _user_content(
        self, line: Mapping[str, Any], blocks: list[dict[str, Any]], out: list[Event]
    ) -> None:
        content = line["message"]["content"]
        results = (
            []
            if isinstance(content, str)
            else [b for b in content if b.get("type") == "tool_result"]
        )
        new_prompt = not line.get("isMeta") and not line.get("parent_tool_use_id") and not results
        if new_prompt and self._turn_open:
            self._end_turn(out)
        super()._user_content(line, blocks, out)

    def _end_turn(self, out: list[Event]) -> None:
        self._end_step(out, "completed")
        status: TurnStatus = "interrupted" if self._open_calls else "completed"
        error = "tool calls without a result" if self._open_calls else None
        out.append(self.make(TurnEndEvent, status=status, error=error))
        self._turn_open = False
        self._open_calls.clear()

    def _close_open_turn(self, out: list[Event]) -> None:
        self._end_turn(out)


class _Branches:
    """Which messages of a transcript Claude Code would send: the chain of entries from
    the last one back through ``parentUuid``, and after a compaction its summary.

    An entry whose parent is not the entry before it (a session resumed at an earlier
    message, ``--resume-session-at``; a prompt edited or rewound in the terminal) starts
    a branch: the entries after its parent are no longer sent. Their events stay in the
    log; the branch's first message leaves them off the surface, a replace of their range
    named by event ids (``Surface.start_id``/``end_id``, the log resolves them) — so the
    derived history is what Claude Code sends, and an import of the grown transcript
    replaces what an earlier import of it showed. A parent not in the file (a missing
    link), or none (a new root, a compaction's boundary), is no branch; sub-agent
    (``isSidechain``) entries are off the surface anyway. A branch back onto entries an
    earlier branch dropped does not show them again (a replace cannot): the history then
    lacks them. A compaction (``/compact``: a ``compact_boundary`` entry, then the
    summary) is taken the same way: the summary replaces what was shown before it, but
    the messages the boundary preserves (sent after the summary).
    """

    def __init__(self) -> None:
        self._parent: dict[str, str | None] = {}
        """Each main-chain entry's parent."""
        self._tip: str | None = None
        """The last main-chain entry."""
        self._origin: dict[str, str] = {}
        """Message id / tool call id → the entry that holds it (assistant messages and
        tool results may be logged by a later entry's line)."""
        self._shown: list[tuple[str, str]] = []
        """(event id, entry) of the surface events shown so far, in order."""
        self._order: dict[str, int] = {}
        """Each main-chain entry's place in the file."""
        self._replace: _Replace | None = None
        """A branch's (or compaction's) replace, for the next surface event shown."""
        self._noted: tuple[list[Event], int] | None = None
        """The list the last line's events went to, and how many of them were noted."""

    def follow(self, line: Mapping[str, Any], out: list[Event], start: int) -> None:
        """Take in an entry after its line's events (``out[start:]``) were made."""
        uuid = line.get("uuid")
        if not isinstance(uuid, str) or line.get("isSidechain"):
            self._noted = (out, self._note_shown(None, out, start))
            return
        self._note_origins(line, uuid)
        # The line may have logged what earlier entries held back (the message of the
        # turn it ends): those are shown before the branch is taken, its own after.
        own = self._note_shown(uuid, out, start, earlier_only=True)
        self._order.setdefault(uuid, len(self._order))
        parent = line.get("parentUuid")
        if isinstance(parent, str) and parent != self._tip and parent in self._parent:
            self._branch(parent, uuid)
        if line.get("type") == "system" and line.get("subtype") == "compact_boundary":
            self._compacted(line.get("compactMetadata"), uuid)
        self._parent[uuid] = parent if isinstance(parent, str) else None
        self._tip = uuid
        self._noted = (out, self._note_shown(uuid, out, own))

    def closed(self, out: list[Event]) -> None:
        """Take in the events the input's end logged (after those of a last line without
        its newline, which the end read into the same list)."""
        start = self._noted[1] if self._noted is not None and self._noted[0] is out else 0
        self._noted = None
        self._note_shown(None, out, start)

    def _note_origins(self, line: Mapping[str, Any], uuid: str) -> None:
        message = line.get("message")
        if not isinstance(message, Mapping):
            return
        if line.get("type") == "assistant" and isinstance(message.get("id"), str):
            self._origin[message["id"]] = uuid
        content = message.get("content")
        if line.get("type") == "user" and isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping) and isinstance(block.get("tool_use_id"), str):
                    self._origin[block["tool_use_id"]] = uuid

    def _branch(self, parent: str, uuid: str) -> None:
        """The entries after ``parent`` on the old chain are dropped: the surface events
        they showed (one run of them) are replaced by the branch's first."""
        kept = set()
        entry: str | None = parent
        while entry is not None and entry not in kept:
            kept.add(entry)
            entry = self._parent.get(entry)
        dropped = set()
        entry = self._tip
        while entry is not None and entry not in kept and entry not in dropped:
            dropped.add(entry)
            entry = self._parent.get(entry)
        self._replace = _Replace(dropped, keep=False, since=self._order[uuid])

    def _compacted(self, metadata: Any, uuid: str) -> None:
        """A ``compact_boundary``: what was shown is replaced by the summary entry that
        follows, except the messages compaction preserves (``preservedSegment``: the
        entries from ``headUuid`` to ``tailUuid``, the end of what was shown), which
        Claude Code sends after the summary."""
        segment = metadata.get("preservedSegment") if isinstance(metadata, Mapping) else None
        preserved: set[str] = set()
        if isinstance(segment, Mapping):
            entry, head = segment.get("tailUuid"), segment.get("headUuid")
            while isinstance(entry, str) and entry not in preserved:
                preserved.add(entry)
                if entry == head:
                    break
                entry = self._parent.get(entry)
            else:
                preserved = set()  # the head is not an ancestor of the tail: none kept
        self._replace = _Replace(preserved, keep=True, since=self._order[uuid])

    def _note_shown(
        self, uuid: str | None, out: list[Event], start: int, *, earlier_only: bool = False
    ) -> int:
        """Note the surface events shown in ``out[start:]``: a pending replace goes on
        the first of the entry that made it or a later one. ``earlier_only``: stop at
        the first of entry ``uuid`` (the line's own; before it, what the line logged
        late for earlier entries). Returns where it stopped."""
        for index in range(start, len(out)):
            event = out[index]
            if not is_surface_event(event):
                continue
            if event.surface is not None:  # hidden (a sub-agent's)
                continue
            entry = self._entry_of(event, uuid)
            if earlier_only and entry == uuid:
                return index
            replace = self._replace
            if replace is not None and self._order.get(entry, 1 << 62) >= replace.since:
                self._replace = None
                span = replace.span(self._shown)
                if span is not None:
                    first, end = span
                    surface = Surface(
                        op="replace",
                        start_id=self._shown[first][0],
                        end_id=self._shown[end - 1][0],
                    )
                    event = out[index] = msgspec.structs.replace(event, surface=surface)
                    self._shown[first:end] = [(event.id, entry)]
                    continue
            self._shown.append((event.id, entry))
        return len(out)

    def _entry_of(self, event: Event, uuid: str | None) -> str:
        key = (
            event.message_id
            if isinstance(event, AssistantMessageEvent)
            else event.call_id
            if isinstance(event, ToolResultEvent)
            else None
        )
        return self._origin.get(key or "", uuid or "")


@dataclasses.dataclass(frozen=True)
class _Replace:
    """A replace to come: of the shown events of ``entries`` (``keep`` False: they are
    dropped, a run of them) or of those before the first of ``entries`` (``keep`` True:
    they are kept). It goes on the next surface event shown of an entry from place
    ``since`` on (the branch's, the summary's): the messages of earlier entries that
    are logged late (a turn's, when the next prompt comes) are shown first, so the range
    is only taken then."""

    entries: set[str]
    keep: bool
    since: int

    def span(self, shown: list[tuple[str, str]]) -> tuple[int, int] | None:
        """The range of ``shown`` replaced (``first``, ``end``); None for none."""
        if self.keep:
            end = next((i for i, (_, e) in enumerate(shown) if e in self.entries), len(shown))
            return (0, end) if end else None
        places = [i for i, (_, e) in enumerate(shown) if e in self.entries]
        if not places or places[-1] - places[0] + 1 != len(places):
            return None  # nothing shown to drop, or not one run: left as it is
        return places[0], places[-1] + 1


# ---------------------------------------------------------------------- helpers


def _result_parts(content: Any) -> list[ResultPart]:
    """A ``tool_result`` block's content (a string or content blocks) as parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(text=content)]
    return _user_parts(content)


def _user_parts(blocks: list[dict[str, Any]]) -> list[UserPart]:
    """Content blocks as parts (the Anthropic API's blocks: :func:`user_part`)."""
    parts: list[UserPart] = []
    for block in blocks:
        try:
            part = user_part(block)
        except (KeyError, TypeError):  # a block of a known type but another shape
            part = None
        # A block type with no neutral part (search result, ...) or of another shape:
        # kept as JSON text so the content is not lost.
        parts.append(
            part if part is not None else TextPart(text=json.dumps(block, ensure_ascii=False))
        )
    return parts


def _synthetic_http_status(line: Mapping[str, Any], text: str) -> int | None:
    """The HTTP status of the request behind a ``<synthetic>`` error message.

    The stream-json line has it (``api_error_status``); claude_agent_sdk's
    ``AssistantMessage`` does not keep that field, but the CLI writes it into the
    text (``API Error: 500 Internal server error…``). Errors without a response
    (``API Error: Connection to the API was lost (ECONNRESET)…``) have none.
    """
    status = line.get("api_error_status")
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    match = _API_ERROR_STATUS.match(text)
    return int(match.group(1)) if match else None


def _block_dict(block: Any) -> dict[str, Any]:
    if isinstance(block, Mapping):
        return dict(block)
    data = dataclasses.asdict(block)
    data.setdefault("type", _BLOCK_TYPES.get(type(block).__name__, type(block).__name__))
    return {key: value for key, value in data.items() if value is not None or key == "content"}


def sdk_message_to_line(message: Any) -> dict[str, Any] | None:
    """A claude_agent_sdk message object as the stream-json line it was parsed from.

    The SDK drops the block ``type`` (restored from the class) and a few CLI fields; what
    the adapter reads survives. ``None`` for a type this version does not know.
    """
    name = type(message).__name__
    if name == "AssistantMessage":
        # Not in the typed object: the line's ``request_id`` and ``api_error_status``
        # (a ``<synthetic>`` error's status is read from its text instead).
        line: dict[str, Any] = {
            "type": "assistant",
            "message": {
                "id": message.message_id,
                "model": message.model,
                "content": [_block_dict(b) for b in message.content],
                "usage": message.usage,
                "stop_reason": message.stop_reason,
            },
            "parent_tool_use_id": message.parent_tool_use_id,
            "error": message.error,
            "session_id": message.session_id,
            "uuid": message.uuid,
        }
        for key in ("user_message_uuid", "user_message_uuids"):  # newer SDKs only
            value = getattr(message, key, None)
            if value is not None:
                line[key] = value
        return line
    if name == "UserMessage":
        content = message.content
        return {
            "type": "user",
            "message": {
                "role": "user",
                "content": content
                if isinstance(content, str)
                else [_block_dict(b) for b in content],
            },
            "parent_tool_use_id": message.parent_tool_use_id,
            "tool_use_result": message.tool_use_result,
            "uuid": message.uuid,
        }
    if name == "StreamEvent":
        return {
            "type": "stream_event",
            "event": message.event,
            "parent_tool_use_id": message.parent_tool_use_id,
            "session_id": message.session_id,
            "uuid": message.uuid,
        }
    if name == "ResultMessage":
        return {"type": "result", **dataclasses.asdict(message)}
    if name == "RateLimitEvent":
        # The SDK renames the CLI's camelCase fields (``rateLimitType`` →
        # ``rate_limit_type``) and keeps the line's own dict in ``raw``: use that.
        info = message.rate_limit_info
        raw = getattr(info, "raw", None)
        return {
            "type": "rate_limit_event",
            "rate_limit_info": dict(raw) if isinstance(raw, Mapping) else dataclasses.asdict(info),
            "uuid": message.uuid,
            "session_id": message.session_id,
        }
    data = getattr(message, "data", None)
    if isinstance(data, Mapping):  # SystemMessage and its task subclasses
        return {"type": "system", "subtype": getattr(message, "subtype", None), **data}
    return None


# ---------------------------------------------------------------------- taps


def tap(
    stream: Iterable[T],
    log: EventLog,
    *,
    adapter: ClaudeCodeAdapter | None = None,
    home: Path | None = None,
) -> Tap[T]:
    """Iterate a ``claude_agent_sdk`` message stream unchanged while its events go to
    ``log`` (``for message in tap(client.receive_response(), log): ...``): the generic
    :func:`adapters._tap.tap`, plus what is Claude Code's own. A compaction in the
    stream (``/compact``, or Claude Code's automatic one) leaves the history what Claude
    Code sends next: its summary replaces what came before it but the messages it
    preserved (:class:`~universal_event.runtimes.ClaudeCompaction`; ``home`` is the
    CLI's ``$HOME``, where its transcripts say which messages those are; default this
    process's). Pass the session's adapter to keep one across streams.
    """
    adapter = adapter or ClaudeCodeAdapter(session_id=log_session_id(log))
    return generic_tap(stream, adapter, _following_compactions(log, home))


def atap(
    stream: AsyncIterable[T],
    log: EventLog,
    *,
    adapter: ClaudeCodeAdapter | None = None,
    home: Path | None = None,
) -> AsyncTap[T]:
    """:func:`tap` for the async iterators the SDK gives (``query()``,
    ``ClaudeSDKClient.receive_response()``)."""
    adapter = adapter or ClaudeCodeAdapter(session_id=log_session_id(log))
    return generic_atap(stream, adapter, _following_compactions(log, home))


def _following_compactions(log: EventLog, home: Path | None) -> EventLog:
    """``log``, with a compaction's summary logged as a replace (a log without a surface
    to replace in is given the events as they are)."""
    if not isinstance(log, SessionLog):
        return log
    return _CompactionsFollowed(log, ClaudeCompaction(home=home))


class _CompactionsFollowed:
    """A :class:`SessionLog` whose events pass through a :class:`ClaudeCompaction` first,
    one by one (a summary's range is taken on the surface of what was logged before
    it)."""

    def __init__(self, log: SessionLog, compaction: ClaudeCompaction) -> None:
        self.log = log
        self.session_id = log.session_id
        self._compaction = compaction

    def extend(self, events: Iterable[EventBase]) -> Sequence[EventBase]:
        return [self.log.append(self._compaction.take(event, self.log)) for event in events]

    def checkpoint(self) -> int:
        return self.log.checkpoint()
