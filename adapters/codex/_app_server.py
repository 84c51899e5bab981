"""app-server v2 notifications → events (facts: tests/fixtures/captured/codex/app_server).

Lines are JSON-RPC-like **without** a ``jsonrpc`` field: ``{"method", "params",
"emittedAtMs"}`` on the wire (``wire/server_to_client.jsonl``); the capture harness's
``notifications.jsonl`` has ``payload`` instead of ``params`` — both are read. The
``openai_codex`` SDK yields ``Notification(method, payload)`` with a pydantic payload.

Item ids here are the **model server's**: reasoning ``rs_…``, agent message ``msg_…``, and
a command's id is the function call's ``call_…``. They are kept (``ThinkingPart.id``,
``TextPart.item_id``, ``ToolCallPart.id`` / ``tool/result`` ``call_id``): a Responses
request replaying the history needs them.

==================================  ==========================================================
``thread/started``                  ``session/start`` (thread id, model, cwd); sets the model
``turn/started``                    ``turn/start`` with Codex's turn id; ``request/header``
                                    (model, ``store: false``) for the first turn and when the
                                    model changed
``item/started`` / ``completed``    userMessage → ``user/message`` (at completion);
                                    reasoning / agentMessage → parts of the message;
                                    commandExecution / fileChange / mcpToolCall /
                                    dynamicToolCall → ``tool/call`` … ``tool/result``;
                                    webSearch → a server-tool part
``item/agentMessage/delta``         ``assistant/chunk`` text
``item/reasoning/summaryTextDelta`` ``assistant/chunk`` summary (index = summaryIndex)
``item/reasoning/textDelta``        ``assistant/chunk`` thinking (index = contentIndex)
``item/commandExecution/outputDelta`` ``tool/output``; the **first chunk of output may be
                                    missing** from the deltas (xs02: ``tick 1`` never came as a
                                    delta) — the ``tool/result`` takes ``aggregatedOutput``,
                                    which is complete
``item/fileChange/outputDelta``     ``tool/output``
``turn/plan/updated``               ``plan/update``
``thread/tokenUsage/updated``       ``usage`` of one request (``last``); the turn's
                                    ``turn/end`` usage is their sum (``scope="turn"``); the
                                    response is over: its message, then its calls' results
``rawResponseItem/completed``       the raw Responses item (when raw events are on): fills
                                    in the function call (``exec_command``, arguments, ``fc_``
                                    id; the calls' order) and ``encrypted_content`` the other
                                    items lack; a ``function_call_output`` (sent *after* the
                                    response's commands completed) becomes the
                                    ``tool/result`` text: the result waits for it until the
                                    next response starts
``error``                           ``error``: ``retryable``/not ``fatal`` when ``willRetry``;
                                    ``code`` from ``codexErrorInfo``
``turn/completed``                  ``turn/end`` completed / failed / interrupted; an agent
                                    message still streaming is kept, ``status="partial"``,
                                    ``stop_reason="interrupted"``
anything else                       ``native/unknown`` (thread status, rate limits, …)
==================================  ==========================================================

Without raw events (``thread/resume`` does not take them) the stream lacks, compared with
the next request: the function call itself (only the command is shown, under the call's
id), ``encrypted_content``, the tool output as Codex formats it for the model, and the
order of parallel calls (the message has them, and their results follow it, in the order
the commands started, not always the model's). The rollout file has all of them
(:class:`~universal_event.runtimes.CodexRunner` reconciles a turn with it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, get_args

import msgspec

from adapters._base import MALFORMED, int_or_none, kept_bytes, str_or_none
from adapters.codex._core import (
    CodexCore,
    LateItem,
    OpenItem,
    codex_usage,
    part_index,
    text_content,
)
from adapters.codex._exec import mcp_content
from adapters.codex._wire import (
    UNMODELLED_LINES,
    AgentMessageDelta,
    AgentMessageItem,
    AnyLine,
    CommandExecutionItem,
    CommandOutputDelta,
    DeltaParams,
    ErrorLine,
    ErrorParams,
    FileChangeOutputDelta,
    ItemCompleted,
    ItemParams,
    ItemStarted,
    PartParams,
    ReasoningDeltaParams,
    ReasoningItem,
    ReasoningTextDelta,
    SummaryDeltaParams,
    SummaryPartAdded,
    SummaryTextDelta,
    ThreadInfo,
    ThreadParams,
    ThreadStarted,
    TokenUsageParams,
    TokenUsageUpdated,
    TurnCompleted,
    TurnInfo,
    TurnParams,
    TurnStarted,
    TypedLine,
    decode_typed_line,
    decode_typed_lines,
)
from adapters.openai_responses._items import CLIENT_RESULT_TYPES
from universal_event.errors import UniversalEventError
from universal_event.events import (
    ErrorEvent,
    Event,
    FileChange,
    FileChangeEvent,
    PlanItem,
    PlanUpdateEvent,
    SessionStartEvent,
    ToolOutputEvent,
    TurnStatus,
    UsageEvent,
    UserMessageEvent,
)
from universal_event.parts import (
    ImagePart,
    TextPart,
    ThinkingPart,
    UserPart,
)

__all__ = ["AppServerLines"]

_TURN_STATUS: dict[str, TurnStatus] = {
    "completed": "completed",
    "failed": "failed",
    "interrupted": "interrupted",
}
_PLAN_STATUS = {"pending": "pending", "inProgress": "in_progress", "completed": "completed"}
_FILE_STATUS = {"inProgress": "in_progress", "completed": "completed", "failed": "failed"}
_NOT_MODELLED = "app-server notification not modelled"
_DECODE_BLOCK = 256
"""Lines decoded at once: a whole large chunk decoded before any is handled holds every
line's structs at the same time, out of the CPU caches by the time they are handled
(measured on 6000 lines in one chunk: ~10% slower than blocks of 256)."""
_TOOL_KINDS = {
    "commandExecution": "command",
    "fileChange": "file_change",
    "mcpToolCall": "mcp",
    "dynamicToolCall": "function",
}


class AppServerLines(CodexCore):
    """The app-server half of :class:`~adapters.codex.CodexAdapter`."""

    def _app_line(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        handler = _HANDLERS.get(method)
        if handler is None:
            out.append(self.unknown(method, dict(params), _NOT_MODELLED))
            return
        handler(self, method, params, out)

    # ------------------------------------------------------------ thread and turn

    # The handlers of a decoded line (a dict) read its fields and hand them to the
    # methods below them, which the typed handlers (fast path) call too.

    def _thread_started(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        thread = params.get("thread") or {}
        thread_id, model, cwd = (str_or_none(thread.get(k)) for k in ("id", "model", "cwd"))
        self._session_started(method, thread_id, model, cwd, out)

    def _session_started(
        self, method: str, thread_id: str | None, model: str | None, cwd: str | None,
        out: list[Event],
    ) -> None:  # fmt: skip
        if model:
            self.model = model
        out.append(
            self.make(
                SessionStartEvent,
                native_type=method,
                native_id=thread_id,
                runtime=self.runtime,
                native_session_id=thread_id,
                model=self.model,
                cwd=cwd,
            )
        )

    def _turn_started(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        turn = params.get("turn") or {}
        self._start_turn(out, turn.get("id"), method)

    def _turn_completed(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        turn = params.get("turn") or {}
        error = turn.get("error")
        message = error.get("message") if isinstance(error, Mapping) else None
        self._turn_finished(method, turn.get("status"), message, turn.get("durationMs"), out)

    def _turn_finished(
        self, method: str, status: Any, message: Any, duration_ms: Any, out: list[Event]
    ) -> None:
        self._end_turn(
            out,
            _TURN_STATUS.get(str(status), "failed"),
            method,
            error=str(message) if message else None,
            duration_ms=duration_ms,
        )

    def _token_usage(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        token_usage = params.get("tokenUsage") or {}
        last = token_usage.get("last")
        if not isinstance(last, Mapping):
            out.append(self.unknown(method, dict(params), "token usage without 'last'"))
            return
        self._request_usage(method, last, out)

    def _request_usage(self, method: str, last: Mapping[str, Any], out: list[Event]) -> None:
        usage = codex_usage(last, "request")
        self._add_request_usage(usage)
        # Sent after each model request completes (after its calls ran and their raw
        # outputs came): the response is over.
        self._response_over(out, method)
        out.append(self.make(UsageEvent, native_type=method, usage=usage, model=self.model))

    def _error(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        self._error_event(method, params.get("error") or {}, bool(params.get("willRetry")), out)

    def _error_event(
        self, method: str, error: Mapping[str, Any], will_retry: bool, out: list[Event]
    ) -> None:
        if will_retry:
            self._retry()
        info = error.get("codexErrorInfo")
        code: str | None = None
        http_status: int | None = None
        if isinstance(info, str):
            code = info
        elif isinstance(info, Mapping) and info:
            code = str(next(iter(info)))
            detail = info[code]
            if isinstance(detail, Mapping):
                http_status = int_or_none(detail.get("httpStatusCode"))
        message = str(error.get("message") or "")
        if error.get("additionalDetails"):
            message = f"{message} ({error['additionalDetails']})"
        out.append(
            self.make(
                ErrorEvent,
                native_type=method,
                message=message,
                code=code,
                retryable=will_retry,
                fatal=not will_retry,
                http_status=http_status,
                native=dict(error),
            )
        )

    def _plan_updated(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        steps = params.get("plan") or []
        out.append(
            self.make(
                PlanUpdateEvent,
                native_type=method,
                plan_id=str_or_none(params.get("turnId")),
                items=[
                    PlanItem(
                        text=str(step.get("step") or ""),
                        status=_PLAN_STATUS.get(str(step.get("status")), "pending"),  # type: ignore[arg-type]
                    )
                    for step in steps
                    if isinstance(step, Mapping)
                ],
            )
        )

    def _raw_item(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        item = params.get("item")
        if not isinstance(item, Mapping):
            out.append(self.unknown(method, dict(params), "raw item event without an item"))
            return
        self._raw_events = True
        if item.get("type") in CLIENT_RESULT_TYPES:
            self._sent_output(item, out)
            return
        key = item.get("call_id") if item.get("type") == "function_call" else item.get("id")
        if key:
            self._raw_items[str(key)] = item
            if item.get("type") == "function_call":
                self._call_rank.setdefault(str(key), len(self._call_rank))

    # ------------------------------------------------------------ deltas

    def _message_delta(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        item_id = str(params.get("itemId") or "")
        self._text_delta(method, item_id, str(params.get("delta") or ""), out)

    def _summary_delta(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        item_id = str(params.get("itemId") or "")
        index = params.get("summaryIndex")  # checked by ``_part_slot`` (None: the first)
        delta = str(params.get("delta") or "")
        self._summary_text_delta(method, item_id, 0 if index is None else index, delta, out)

    def _reasoning_delta(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        item_id = str(params.get("itemId") or "")
        index = params.get("contentIndex")  # checked by ``_part_slot`` (None: the first)
        delta = str(params.get("delta") or "")
        self._thinking_delta(method, item_id, 0 if index is None else index, delta, out)

    def _summary_part(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        self._summary_part_added(str(params.get("itemId") or ""))

    def _output_delta(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        item_id = str(params.get("itemId") or "")
        self._tool_output_delta(method, item_id, str(params.get("delta") or ""), out)

    def _text_delta(self, method: str, item_id: str, delta: str, out: list[Event]) -> None:
        self._open(item_id, "text").text.append(delta)
        self._chunk(out, method, item_id, "text", delta)

    def _summary_text_delta(
        self, method: str, item_id: str, index: Any, delta: str, out: list[Event]
    ) -> None:
        self._part_slot(item_id, index, summary=True).append(delta)
        self._chunk(out, method, item_id, "summary", delta, index)  # index: checked

    def _thinking_delta(
        self, method: str, item_id: str, index: Any, delta: str, out: list[Event]
    ) -> None:
        self._part_slot(item_id, index, summary=False).append(delta)
        self._chunk(out, method, item_id, "thinking", delta, index)  # index: checked

    def _summary_part_added(self, item_id: str) -> None:
        # Structure only: the part's text follows as summaryTextDelta.
        self._part_slot(item_id, 0, summary=True)

    def _part_slot(self, item_id: str, index: Any, *, summary: bool) -> list[str]:
        """Where a reasoning delta's text goes: the slot of summary / content part
        ``index`` of the item (opened by its first delta).

        The index is checked first (:func:`~adapters.codex._core.part_index`: an int, at
        most a few past the parts seen so far), so a malformed line raises before it
        opens an item or allocates anything.
        """
        item = self._open_items.get(item_id)
        parts = (item.summary if summary else item.content) if item is not None else []
        index = part_index(index, len(parts))
        if item is None:
            item = self._open(item_id, "thinking")
            parts = item.summary if summary else item.content
        while len(parts) <= index:
            parts.append([])
        return parts[index]

    def _tool_output_delta(self, method: str, item_id: str, delta: str, out: list[Event]) -> None:
        out.append(self.call_event(ToolOutputEvent, method, item_id, delta=delta))

    def _open(self, item_id: str, kind: Any) -> OpenItem:
        """The streamed item ``item_id``, opened by its first line; one this turn has
        completed is not opened again (:class:`~adapters.codex._core.LateItem`)."""
        item = self._open_items.get(item_id)
        if item is None:
            if item_id in self._done_items:
                raise LateItem(f"item {item_id!r} already completed in this turn: late line")
            item = self._open_items[item_id] = OpenItem(kind, item_id)
        return item

    # ------------------------------------------------------------ items

    def _item_started(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        item = params.get("item") or {}
        item_type = item.get("type")
        item_id = str(item.get("id") or "")
        self._ensure_turn(out, method)
        if item_type == "agentMessage":
            self._message_started(out, method, item_id, str_or_none(item.get("phase")))
        elif item_type == "reasoning":
            self._reasoning_started(out, method, item_id)
        elif item_type in _TOOL_KINDS:
            self._app_tool_call(method, item_type, item_id, item, out)
        elif item_type not in ("userMessage", "webSearch"):
            out.append(self.unknown(f"{method}:{item_type}", dict(item), "item type not modelled"))

    def _item_completed(self, method: str, params: Mapping[str, Any], out: list[Event]) -> None:
        item = params.get("item") or {}
        item_type = item.get("type")
        item_id = str(item.get("id") or "")
        self._ensure_turn(out, method)
        if item_type == "agentMessage":
            text = str(item.get("text") or "")
            self._message_completed(out, method, item_id, text, str_or_none(item.get("phase")))
        elif item_type == "reasoning":
            summary = [str(s) for s in item.get("summary") or []]
            content = "".join(str(s) for s in item.get("content") or [])
            self._reasoning_completed(out, method, item_id, summary, content)
        elif item_type == "userMessage":
            self._user_message_completed(method, item_id, item.get("content"), out)
        elif item_type in _TOOL_KINDS:
            self._app_tool_call(method, item_type, item_id, item, out)
            self._app_tool_result(method, item_type, item_id, item, out)
        elif item_type == "webSearch":
            self._web_search(out, method, item_id, item)
        else:
            out.append(self.unknown(f"{method}:{item_type}", dict(item), "item type not modelled"))

    # A reasoning or message item (started, or completed in a stream without its start)
    # after tool results is the next response's: the last one is over (``_next_response``).

    def _message_started(
        self, out: list[Event], method: str, item_id: str, phase: str | None
    ) -> None:
        self._open(item_id, "text").phase = phase
        self._next_response(out, method)

    def _reasoning_started(self, out: list[Event], method: str, item_id: str) -> None:
        self._open(item_id, "thinking")
        self._next_response(out, method)

    def _message_completed(
        self, out: list[Event], method: str, item_id: str, text: str, phase: str | None
    ) -> None:
        self._response_item_done(out, method, item_id)
        self._open_items.pop(item_id, None)
        self._add_part(TextPart(text=text, item_id=item_id or None, phase=phase), ("text", text))

    def _reasoning_completed(
        self, out: list[Event], method: str, item_id: str, summary: list[str], content: str
    ) -> None:
        self._response_item_done(out, method, item_id)
        self._open_items.pop(item_id, None)
        part = ThinkingPart(
            text=content, summary=summary, id=item_id or None, provenance=self.provenance()
        )
        self._add_part(part, ("thinking", "\n".join(summary) + content))

    def _user_message_completed(
        self, method: str, item_id: str, content: Any, out: list[Event]
    ) -> None:
        self._flush(out, method)
        self._release(out, final=True)
        out.append(
            self.make(
                UserMessageEvent,
                native_type=method,
                native_id=item_id,
                content=_user_parts(content),
            )
        )

    # ------------------------------------------------------------ typed lines (fast path)

    def _raw_lines(self, complete: bytes, out: list[Event]) -> None:
        """A chunk of notification lines is decoded :data:`_DECODE_BLOCK` lines at a time
        (:func:`._wire.decode_typed_lines`), each block handled before the next is decoded;
        a line that is not a typed one goes down the general dict path."""
        raws = complete.split(b"\n")
        raws.pop()  # after the last newline: b""
        if len(raws) <= _DECODE_BLOCK:
            self._typed_lines(raws, decode_typed_lines(raws), out)
            return
        for start in range(0, len(raws), _DECODE_BLOCK):
            block = raws[start : start + _DECODE_BLOCK]
            self._typed_lines(block, decode_typed_lines(block), out)

    def _raw_line(self, raw: bytes, out: list[Event], problem: str = "malformed JSON line") -> None:
        """A common notification line is decoded into its struct (:mod:`._wire`) and
        handled; any other line (another method or shape, an exec line) goes down the
        general dict path."""
        line = decode_typed_line(raw)
        if line is None:
            super()._raw_line(raw, out, problem)
        else:
            self._typed_lines([raw], [line], out)

    def _typed_lines(
        self, raws: list[bytes], lines: list[AnyLine | None], out: list[Event]
    ) -> None:
        """Handle lines (``lines[i]`` decoded from ``raws[i]``, None where it is not a
        typed line); one that is not, or has no params, goes down the general path, which
        reads it as it reads such a line (a blank line is skipped)."""
        handlers = _TYPED_HANDLERS
        for raw, line in zip(raws, lines, strict=True):
            if line is not None:
                params = line.params
                if params is None:
                    params = line.payload
                if params is not None:
                    try:
                        handlers[type(line)](self, line.METHOD, params, out)
                    except UniversalEventError:
                        raise
                    except LateItem as exc:  # out of order or repeated: kept as it came
                        out.append(self.unknown(line.METHOD, msgspec.json.decode(raw), str(exc)))
                    except MALFORMED as exc:  # a field the struct takes as it comes
                        out.append(self.malformed(line.METHOD, kept_bytes(raw), exc))
                    continue
            if raw and not raw.isspace():
                super()._raw_line(raw, out)

    def _unmodelled(self, method: str, params: dict[str, Any], out: list[Event]) -> None:
        # ``params`` is freshly decoded: kept as it is (the dict path copies a caller's).
        out.append(self.unknown(method, params, _NOT_MODELLED))

    # A delta line from bytes opens a turn for a stream joined late (the dict path's
    # delta handlers do not). The deltas are most of a stream's lines: their handlers
    # do inline what ``_open`` / ``_ensure_turn`` / ``_text_delta`` would.
    def _typed_message_delta(self, method: str, params: DeltaParams, out: list[Event]) -> None:
        if not self._turn_open:
            self._start_turn(out, None, method)
        item_id = params.itemId
        delta = params.delta
        item = self._open_items.get(item_id)
        if item is None:
            item = self._open(item_id, "text")
        item.text.append(delta)
        self._chunk(out, method, item_id, "text", delta)

    def _typed_summary_delta(
        self, method: str, params: SummaryDeltaParams, out: list[Event]
    ) -> None:
        if not self._turn_open:
            self._start_turn(out, None, method)
        item_id = params.itemId
        delta = params.delta
        index = params.summaryIndex
        item = self._open_items.get(item_id)
        if item is not None and 0 <= index < len(item.summary):
            item.summary[index].append(delta)
        else:  # a new part or item, or an index out of range (checked there)
            self._part_slot(item_id, index, summary=True).append(delta)
        self._chunk(out, method, item_id, "summary", delta, index)

    def _typed_reasoning_delta(
        self, method: str, params: ReasoningDeltaParams, out: list[Event]
    ) -> None:
        if not self._turn_open:
            self._start_turn(out, None, method)
        self._thinking_delta(method, params.itemId, params.contentIndex, params.delta, out)

    def _typed_output_delta(self, method: str, params: DeltaParams, out: list[Event]) -> None:
        if not self._turn_open:
            self._start_turn(out, None, method)
        self._tool_output_delta(method, params.itemId, params.delta, out)

    def _typed_summary_part(self, method: str, params: PartParams, out: list[Event]) -> None:
        self._summary_part_added(params.itemId)

    def _typed_item_started(self, method: str, params: ItemParams, out: list[Event]) -> None:
        item = params.item
        self._ensure_turn(out, method)
        if isinstance(item, AgentMessageItem):
            self._message_started(out, method, item.id or "", item.phase)
        elif isinstance(item, ReasoningItem):
            self._reasoning_started(out, method, item.id or "")
        elif isinstance(item, CommandExecutionItem):
            self._command_call(method, item.id or "", item.command, out)
        # userMessage: logged when completed

    def _typed_item_completed(self, method: str, params: ItemParams, out: list[Event]) -> None:
        item = params.item
        self._ensure_turn(out, method)
        if isinstance(item, AgentMessageItem):
            self._message_completed(out, method, item.id or "", item.text or "", item.phase)
        elif isinstance(item, ReasoningItem):
            content = "".join(item.content or ())
            self._reasoning_completed(out, method, item.id or "", item.summary or [], content)
        elif isinstance(item, CommandExecutionItem):
            item_id = item.id or ""
            self._command_call(method, item_id, item.command, out)
            self._command_completed(
                method,
                item_id,
                out,
                status=item.status,
                command=item.command,
                cwd=item.cwd,
                output=item.aggregatedOutput,
                exit_code=item.exitCode,
                duration_ms=item.durationMs,
            )
        else:
            self._user_message_completed(method, item.id or "", item.content, out)

    def _typed_thread_started(self, method: str, params: ThreadParams, out: list[Event]) -> None:
        thread = params.thread or ThreadInfo()
        self._session_started(method, thread.id, thread.model, thread.cwd, out)

    def _typed_turn_started(self, method: str, params: TurnParams, out: list[Event]) -> None:
        self._start_turn(out, params.turn.id if params.turn else None, method)

    def _typed_turn_completed(self, method: str, params: TurnParams, out: list[Event]) -> None:
        turn = params.turn or TurnInfo()
        message = turn.error.message if turn.error else None
        self._turn_finished(method, turn.status, message, turn.durationMs, out)

    def _typed_token_usage(self, method: str, params: TokenUsageParams, out: list[Event]) -> None:
        self._request_usage(method, params.tokenUsage.last, out)

    def _typed_error(self, method: str, params: ErrorParams, out: list[Event]) -> None:
        self._error_event(method, params.error or {}, bool(params.willRetry), out)

    # ------------------------------------------------------------ tools

    def _app_tool_call(
        self, method: str, item_type: str, item_id: str, item: Mapping[str, Any], out: list[Event]
    ) -> None:
        if item_type == "commandExecution":
            self._command_call(method, item_id, item.get("command"), out)
            return
        if item_type == "fileChange":
            name, arguments = "apply_patch", None
        else:
            name, arguments = str(item.get("tool") or ""), item.get("arguments")
        self._tool_call(out, method, item_id, name, arguments, _TOOL_KINDS[item_type])

    def _command_call(self, method: str, item_id: str, command: Any, out: list[Event]) -> None:
        self._tool_call(out, method, item_id, "command_execution", {"command": command}, "command")

    def _app_tool_result(
        self, method: str, item_type: str, item_id: str, item: Mapping[str, Any], out: list[Event]
    ) -> None:
        status = item.get("status")
        failed = status in ("failed", "declined")
        if item_type == "commandExecution":
            self._command_completed(
                method,
                item_id,
                out,
                status=status,
                command=item.get("command"),
                cwd=item.get("cwd"),
                output=item.get("aggregatedOutput"),
                exit_code=item.get("exitCode"),
                duration_ms=item.get("durationMs"),
            )
        elif item_type == "fileChange":
            changes = [_file_change(c) for c in item.get("changes") or [] if isinstance(c, Mapping)]
            out.append(
                self.make(
                    FileChangeEvent,
                    native_type=method,
                    native_id=item_id,
                    changes=changes,
                    call_id=item_id,
                    status=_FILE_STATUS.get(str(status), "declined"),
                )
            )
            summary = "\n".join(f"{change.kind} {change.path}" for change in changes)
            self._tool_result(
                out,
                method,
                item_id,
                text_content(summary),
                is_error=failed,
                details={"status": status},
            )
        else:
            result = item.get("result")
            error = item.get("error")
            if item_type == "mcpToolCall":
                blocks = result.get("content") if isinstance(result, Mapping) else None
            else:
                blocks = [
                    {"type": "text", "text": c.get("text")}
                    if isinstance(c, Mapping) and c.get("type") == "inputText"
                    else c
                    for c in item.get("contentItems") or []
                ]
            content = mcp_content(blocks)
            if isinstance(error, Mapping) and error.get("message") and not content:
                content = text_content(str(error["message"]))
            self._tool_result(
                out,
                method,
                item_id,
                content,
                is_error=failed or isinstance(error, Mapping) or item.get("success") is False,
                details={"server": item.get("server"), "status": status},
            )

    def _command_completed(
        self,
        method: str,
        item_id: str,
        out: list[Event],
        *,
        status: Any,
        command: Any,
        cwd: Any,
        output: Any,
        exit_code: Any,
        duration_ms: Any,
    ) -> None:
        self._command_result(
            out,
            method,
            item_id,
            # aggregatedOutput, not the deltas: the first chunk may never come as one.
            str(output or ""),
            is_error=status in ("failed", "declined") or exit_code not in (None, 0),
            exit_code=int_or_none(exit_code),
            details={"status": status, "command": command, "cwd": cwd, "duration_ms": duration_ms},
        )


def _file_change(change: Mapping[str, Any]) -> FileChange:
    kind = change.get("kind")
    kind_type = kind.get("type") if isinstance(kind, Mapping) else kind
    return FileChange(
        path=str(change.get("path") or ""),
        kind=kind_type if kind_type in ("add", "delete", "update") else "update",
        diff=str_or_none(change.get("diff")),
    )


def _user_parts(content: Any) -> list[UserPart]:
    """app-server user input (``text``, ``image`` url, ``localImage`` path) as parts."""
    parts: list[UserPart] = []
    for entry in content or []:
        if not isinstance(entry, Mapping):
            continue
        kind = entry.get("type")
        if kind == "text":
            parts.append(TextPart(text=str(entry.get("text") or "")))
        elif kind == "image":
            parts.append(ImagePart(url=str_or_none(entry.get("url"))))
        elif kind == "localImage":
            parts.append(ImagePart(url=f"file://{entry.get('path')}"))
        else:
            parts.append(TextPart(text=str(entry)))
    return parts


_TYPED_HANDLERS: dict[type[AnyLine], Callable[[AppServerLines, str, Any, list[Event]], None]] = {
    AgentMessageDelta: AppServerLines._typed_message_delta,
    SummaryTextDelta: AppServerLines._typed_summary_delta,
    ReasoningTextDelta: AppServerLines._typed_reasoning_delta,
    CommandOutputDelta: AppServerLines._typed_output_delta,
    FileChangeOutputDelta: AppServerLines._typed_output_delta,
    SummaryPartAdded: AppServerLines._typed_summary_part,
    ItemStarted: AppServerLines._typed_item_started,
    ItemCompleted: AppServerLines._typed_item_completed,
    ThreadStarted: AppServerLines._typed_thread_started,
    TurnStarted: AppServerLines._typed_turn_started,
    TurnCompleted: AppServerLines._typed_turn_completed,
    TokenUsageUpdated: AppServerLines._typed_token_usage,
    ErrorLine: AppServerLines._typed_error,
}
"""Line struct → handler of its typed line: the fast path for the common lines."""
assert set(_TYPED_HANDLERS) == set(get_args(TypedLine)), "one handler per typed method"
_TYPED_HANDLERS.update(dict.fromkeys(UNMODELLED_LINES, AppServerLines._unmodelled))

_HANDLERS = {
    "thread/started": AppServerLines._thread_started,
    "turn/started": AppServerLines._turn_started,
    "turn/completed": AppServerLines._turn_completed,
    "turn/plan/updated": AppServerLines._plan_updated,
    "thread/tokenUsage/updated": AppServerLines._token_usage,
    "error": AppServerLines._error,
    "item/started": AppServerLines._item_started,
    "item/completed": AppServerLines._item_completed,
    "item/agentMessage/delta": AppServerLines._message_delta,
    "item/reasoning/summaryTextDelta": AppServerLines._summary_delta,
    "item/reasoning/summaryPartAdded": AppServerLines._summary_part,
    "item/reasoning/textDelta": AppServerLines._reasoning_delta,
    "item/commandExecution/outputDelta": AppServerLines._output_delta,
    "item/fileChange/outputDelta": AppServerLines._output_delta,
    "rawResponseItem/completed": AppServerLines._raw_item,
}
"""Notification method → handler."""
