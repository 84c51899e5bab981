"""Codex rollout files (``$CODEX_HOME/sessions/**/rollout-*.jsonl``) → events.

A rollout is Codex's own session log. Its ``response_item`` lines are **the exact
history Codex sends to the model** (the captures' ``requests/*.json`` ``input`` items,
less Codex's bookkeeping key ``internal_chat_message_metadata_passthrough``), so they
are imported item for item:

==============================  ==============================================================
``session_meta``                ``session/start`` (thread id, cwd); ``base_instructions`` is
                                the system prompt (sent as the first ``developer`` input item);
                                ``request/header`` (model, system, ``store: false``) once
                                the model is known
``turn_context``                ``request/header`` (model, system, settings as the request
                                carries them: ``reasoning: {effort, summary}``, ``store:
                                false``, ``include``), written again only when it changes
                                (also for a model ``thread_settings_applied`` switches to)
``response_item`` assistant     reasoning (``rs_`` id, summary, ``encrypted_content``),
 side                           messages (``msg_`` id, phase), ``function_call`` (``call_id``,
                                ``fc_`` id, arguments), ``custom_tool_call``, server tools:
                                consecutive ones are one ``assistant/message`` (one response)
``function_call_output`` …      ``tool/result`` (exit code and status from the matching
                                ``item_completed`` command event, when there is one)
``message`` role ``user``       ``user/message``; Codex's own tagged context messages
                                (``<environment_context>``, …) and ``developer`` messages →
                                ``request/context`` (kind = the tag): the runtime adds them,
                                they are not the conversation. ``<turn_aborted>`` (written
                                where a turn was interrupted, sent there from then on) is
                                a ``user/message``
``event_msg`` task_started /    ``turn/start`` / ``turn/end`` (failed when it carries an
task_complete / turn_aborted    ``error``; ``interrupted`` for an abort), turn usage summed
``token_usage_record``          ``usage`` of one response (``message_id`` = ``resp_`` id); it
                                also closes the response's message
``compacted``                   its ``replacement_history`` items, imported as above; the
                                first surface event they make replaces what was shown
                                before (Codex sends only them from then on); the line
                                itself is kept as ``native/unknown``
``event_msg`` error             ``error``
the rest                        ``event_msg`` copies of the items above (``item_completed``,
                                ``token_count``, ``user_message``, ...) are redundant and
                                skipped; other lines are ``native/unknown``
==============================  ==============================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeGuard

import msgspec

from adapters._base import int_or_none, str_or_none
from adapters.codex._core import (
    CODEX_REQUEST_SETTINGS,
    CodexCore,
    codex_usage,
    exact_arguments,
)
from adapters.openai_responses._items import (
    CLIENT_RESULT_TYPES,
    item_parts,
    result_parts,
)
from universal_event.derive import is_surface_event
from universal_event.errors import AdapterError
from universal_event.events import (
    ErrorEvent,
    Event,
    NativeUnknownEvent,
    RequestContextEvent,
    SessionStartEvent,
    Surface,
    SurfaceEvent,
    ToolResultEvent,
    UsageEvent,
    UserMessageEvent,
)
from universal_event.parts import TextPart, ToolCallPart, UserPart

__all__ = ["CodexRolloutAdapter"]

_CONTEXT_TAG = re.compile(r"^\s*<([a-z_]+)>")
"""Codex wraps the context it adds in the user role in a tag: ``<environment_context>``."""

_HISTORY_TAGS = frozenset({"turn_aborted"})
"""Tagged user messages that are history, not context: Codex writes ``<turn_aborted>``
once, where a turn was interrupted, and sends it at that place from then on."""

_REDUNDANT_EVENT_MSGS = frozenset(
    {
        "item_started",
        "item_completed",
        "token_count",
        "user_message",
        "agent_message",
        "agent_reasoning",
        "agent_reasoning_raw_content",
        "exec_command_begin",
        "exec_command_end",
    }
)
"""``event_msg`` types that repeat what the ``response_item`` lines already hold."""

_BOOKKEEPING_KEYS = ("internal_chat_message_metadata_passthrough",)
"""Keys Codex stores in rollout items but strips before sending them (requests/*.json)."""


def _shows(event: Event) -> TypeGuard[SurfaceEvent]:
    """Whether ``event`` is on the surface: a surface event appended or replacing
    (this adapter makes no hidden ones)."""
    return is_surface_event(event) and (event.surface is None or event.surface.op == "replace")


def turn_settings(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Responses settings of a ``turn_context``, as Codex's request carries them.

    ``effort`` / ``summary`` are Codex's reasoning config: the request sends them as
    ``reasoning: {"effort", "summary"}`` (a summary of ``none`` is left out, as Codex
    leaves it out), with ``include: ["reasoning.encrypted_content"]``; every request
    carries ``store: false`` (:data:`~adapters.codex._core.CODEX_REQUEST_SETTINGS`).
    These are the names every renderer reads (a Responses header's own), so another
    api gets the effort translated (Anthropic ``thinking``, Chat ``reasoning_effort``).
    """
    reasoning: dict[str, str] = {}
    effort, summary = payload.get("effort"), payload.get("summary")
    if isinstance(effort, str) and effort:
        reasoning["effort"] = effort
    if isinstance(summary, str) and summary and summary != "none":
        reasoning["summary"] = summary
    settings: dict[str, Any] = {}
    if reasoning:
        settings["reasoning"] = reasoning
    settings.update(CODEX_REQUEST_SETTINGS)
    if reasoning:
        settings["include"] = ["reasoning.encrypted_content"]
    return settings


class CodexRolloutAdapter(CodexCore):
    """Import a Codex rollout file: the history exactly as Codex sends it to the model."""

    runtime = "codex-rollout"
    _holds_results = False  # its tool outputs come where Codex put them: after the calls

    def __init__(self, *, session_id: str = "", model: str | None = None) -> None:
        super().__init__(session_id=session_id, model=model)
        self._system: str | None = None
        self._settings: dict[str, Any] = dict(CODEX_REQUEST_SETTINGS)
        """The request settings the last ``turn_context`` gives (:func:`turn_settings`)."""
        self._command_status: dict[str, Mapping[str, Any]] = {}
        self._call_names: dict[str, str] = {}
        self._line_no = 0
        """The number of the line being read (1-based, blank lines counted; a dict fed is
        one line): a line kept as ``native/unknown`` says where it is (:meth:`unknown`)."""
        self._shown: list[str] = []
        """Ids of the surface events made so far (what a compaction replaces)."""

    def feed(self, native: Any) -> list[Event]:
        """Raw rollout bytes (cut anywhere), one ``str`` line, or one line as a dict."""
        out: list[Event] = []
        if isinstance(native, Mapping):
            self._line_no += 1
        if not self._feed_lines(native, out):
            raise AdapterError(
                f"cannot import a {type(native).__name__!r}: expected rollout JSON lines",
                runtime=self.runtime,
            )
        return out

    def close(self) -> list[Event]:
        """Finish: a last line without newline; a turn the file leaves open is interrupted."""
        out: list[Event] = []
        for raw in self._rest_of_lines():
            self._line_no += 1
            self._raw_line(raw, out, problem="truncated last line (file cut)")
        if self._turn_open:
            self._end_turn(out, "interrupted", "close", error="rollout ends inside the turn")
        else:
            self._flush(out, "close")
        return out

    def _raw_lines(self, complete: bytes, out: list[Event]) -> None:
        """Complete lines one by one, each counted (blank ones too, so the count is the
        file's line number)."""
        raws = complete.split(b"\n")
        raws.pop()  # after the last newline: b""
        for raw in raws:
            self._line_no += 1
            if raw and not raw.isspace():
                self._raw_line(raw, out)

    def unknown(self, native_type: str | None, payload: Any, reason: str) -> NativeUnknownEvent:
        """A line kept as ``native/unknown``; its reason ends with the line's number."""
        return super().unknown(native_type, payload, f"{reason} (line {self._line_no})")

    def _line(self, line: Mapping[str, Any], out: list[Event]) -> None:
        start = len(out)
        self._line_events(line, out)
        self._note_shown(out, start)

    def _note_shown(self, out: list[Event], start: int) -> None:
        """Note the surface events of ``out[start:]``; one that replaces what was shown
        (a compaction's first) starts the list again."""
        for event in out[start:]:
            if _shows(event):
                if event.surface is not None:
                    self._shown = []
                self._shown.append(event.id)

    def _line_events(self, line: Mapping[str, Any], out: list[Event]) -> None:
        self._line_time(line.get("timestamp"))
        kind = line.get("type")
        payload = line.get("payload")
        if not isinstance(payload, Mapping):
            out.append(self.unknown(str(kind), dict(line), "rollout line without a payload"))
            return
        try:
            if kind == "compacted" and isinstance(payload.get("replacement_history"), list):
                self._compacted(payload, out)
            elif kind == "response_item":
                self._response_item(payload, out)
            elif kind == "event_msg":
                self._event_msg(payload, out)
            elif kind == "token_usage_record":
                self._usage_record(payload, out)
            elif kind == "session_meta":
                self._session_meta(payload, out)
            elif kind == "turn_context":
                self._turn_context(payload, out)
            else:
                out.append(self.unknown(str(kind), dict(payload), "rollout line not modelled"))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            out.append(self.unknown(str(kind), dict(line), f"bad rollout line: {exc!r}"))

    def _compacted(self, payload: Mapping[str, Any], out: list[Event]) -> None:
        """A compaction: from here on Codex sends its ``replacement_history`` (the user
        messages kept, then the summary, as input items) instead of what came before.
        Those items are imported as the history's items are; the first surface event
        they make replaces everything shown so far (by event ids, see
        :class:`~universal_event.events.Surface`). The earlier events stay logged, and
        so does the line (``native/unknown``)."""
        flushed = len(out)
        self._flush(out, "compacted")  # the compaction's own reply, shown until now
        shown = self._shown + [event.id for event in out[flushed:] if _shows(event)]
        out.append(self.unknown("compacted", dict(payload), "compaction: its history follows"))
        start = len(out)
        for item in payload["replacement_history"]:
            if isinstance(item, Mapping):
                self._response_item(item, out)
        self._flush(out, "compacted")
        first = next((i for i in range(start, len(out)) if _shows(out[i])), None)
        if shown and first is not None:
            surface = Surface(op="replace", start_id=shown[0], end_id=shown[-1])
            out[first] = msgspec.structs.replace(out[first], surface=surface)

    # ------------------------------------------------------------ session and header

    def _session_meta(self, payload: Mapping[str, Any], out: list[Event]) -> None:
        instructions = payload.get("base_instructions")
        if isinstance(instructions, Mapping):
            self._system = str_or_none(instructions.get("text"))
            # Codex 0.163.0: {"text", "provenance": {"type": "model", "model": "gpt-5.5"}}
            # — the session's model, before any turn_context says it.
            origin = instructions.get("provenance")
            if self.model is None and isinstance(origin, Mapping) and origin.get("model"):
                self.model = str(origin["model"])
        out.append(
            self.make(
                SessionStartEvent,
                native_type="session_meta",
                native_id=str_or_none(payload.get("id")),
                runtime="codex",
                native_session_id=str_or_none(payload.get("id")),
                cwd=str_or_none(payload.get("cwd")),
                metadata={
                    k: payload[k]
                    for k in ("originator", "cli_version", "source", "model_provider")
                    if k in payload
                },
            )
        )
        # What the session's requests carry before any turn_context says more (a cut
        # rollout may have none). Not without a model (a hand-off's rollout names none):
        # the header would take an earlier header's model away.
        if self.model is not None:
            self._header(out, "session_meta")

    def _turn_context(self, payload: Mapping[str, Any], out: list[Event]) -> None:
        if payload.get("model"):
            self.model = str(payload["model"])
        self._settings = turn_settings(payload)
        self._header(out, "turn_context")

    def _header(self, out: list[Event], native_type: str) -> None:
        self._request_header(out, native_type, self._system, self._settings)

    # ------------------------------------------------------------ history items

    def _response_item(self, item: Mapping[str, Any], out: list[Event]) -> None:
        item = {k: v for k, v in item.items() if k not in _BOOKKEEPING_KEYS}
        item_type = item.get("type")
        role = item.get("role")
        if item_type == "message" and role != "assistant":
            self._flush(out, "response_item")
            self._input_message(item, out)
        elif item_type in CLIENT_RESULT_TYPES:
            self._flush(out, "response_item")
            self._tool_output(item, out)
        else:
            if item_type in ("function_call", "custom_tool_call"):
                self._call_names[str(item.get("call_id"))] = str(item.get("name") or "")
            for part in item_parts(item, self.provenance()):
                if item_type == "function_call" and isinstance(part, ToolCallPart):
                    arguments, raw = exact_arguments(item)
                    part = msgspec.structs.replace(part, arguments=arguments, arguments_raw=raw)
                self._add_part(part, None)

    def _input_message(self, item: Mapping[str, Any], out: list[Event]) -> None:
        parts: list[UserPart] = list(result_parts(item.get("content")))
        first = parts[0].text if parts and isinstance(parts[0], TextPart) else ""
        tag = _CONTEXT_TAG.match(first)
        if item.get("role") == "user" and (tag is None or tag.group(1) in _HISTORY_TAGS):
            out.append(
                self.make(
                    UserMessageEvent,
                    native_type="response_item",
                    native_id=str_or_none(item.get("id")),
                    content=parts,
                )
            )
            return
        out.append(
            self.make(
                RequestContextEvent,
                native_type="response_item",
                native_id=str_or_none(item.get("id")),
                kind=tag.group(1) if tag else str(item.get("role")),
                content=parts,
            )
        )

    def _tool_output(self, item: Mapping[str, Any], out: list[Event]) -> None:
        call_id = str(item.get("call_id") or "")
        status = self._command_status.pop(call_id, {})
        exit_code = status.get("exit_code")
        out.append(
            self.make(
                ToolResultEvent,
                native_type="response_item",
                native_id=str_or_none(item.get("id")),
                call_id=call_id,
                name=self._call_names.get(call_id),
                content=result_parts(item.get("output")),
                is_error=status.get("status") in ("failed", "declined")
                or exit_code not in (None, 0),
                exit_code=int_or_none(exit_code),
                # The output as sent (``content``) wraps the command's own output, kept here.
                details={
                    "output_type": item.get("type"),
                    **(
                        {"output": status["aggregated_output"]}
                        if "aggregated_output" in status
                        else {}
                    ),
                    **({"command": status["command"]} if "command" in status else {}),
                },
            )
        )

    # ------------------------------------------------------------ event messages

    def _event_msg(self, payload: Mapping[str, Any], out: list[Event]) -> None:
        kind = str(payload.get("type"))
        if kind == "task_started":
            if not self._turn_open:
                # Items before the task (a hand-off's rollout has no turns) are not its:
                # the message they leave pending is flushed outside the turn.
                self._flush(out, kind)
            self._start_turn(out, payload.get("turn_id"), kind)
        elif kind == "task_complete":
            error = payload.get("error")
            message = error.get("message") if isinstance(error, Mapping) else None
            self._end_turn(
                out,
                "failed" if message else "completed",
                kind,
                error=str(message) if message else None,
                duration_ms=payload.get("duration_ms"),
            )
        elif kind == "turn_aborted":
            self._end_turn(out, "interrupted", kind, duration_ms=payload.get("duration_ms"))
        elif kind == "error":
            out.append(
                self.make(ErrorEvent, native_type=kind, message=str(payload.get("message") or ""))
            )
        elif kind == "thread_settings_applied":
            # The model chosen for the thread (also a model switched mid-session).
            settings = payload.get("thread_settings")
            if isinstance(settings, Mapping) and settings.get("model"):
                self.model = str(settings["model"])
                self._header(out, kind)
        elif kind == "item_completed":
            item = payload.get("item")
            if isinstance(item, Mapping) and item.get("type") == "CommandExecution":
                self._command_status[str(item.get("id"))] = item
        elif kind not in _REDUNDANT_EVENT_MSGS:
            out.append(self.unknown(f"event_msg:{kind}", dict(payload), "event not modelled"))

    def _usage_record(self, payload: Mapping[str, Any], out: list[Event]) -> None:
        usage = payload.get("usage")
        if not isinstance(usage, Mapping):
            out.append(self.unknown("token_usage_record", dict(payload), "record without usage"))
            return
        normalised = codex_usage(usage, "request")
        self._add_request_usage(normalised)
        self._flush(out, "token_usage_record")
        out.append(
            self.make(
                UsageEvent,
                native_type="token_usage_record",
                usage=normalised,
                message_id=str_or_none(payload.get("response_id")),
                model=self.model,
            )
        )
