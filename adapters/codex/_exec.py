"""``codex exec --json`` lines → events (facts: tests/fixtures/captured/codex/exec, 0.163.0).

=========================  ==================================================================
``thread.started``         ``session/start`` (``native_session_id`` = the thread id)
``turn.started``           ``turn/start`` (exec gives turns no id: one is made up); the
                           first one: ``request/header`` (the ``model=`` given, ``store:
                           false``; none without ``model=``)
``turn.completed``         ``turn/end`` completed, ``usage`` = the sum over **every model
                           request of the turn** (Codex adds them up; ``Usage.scope="turn"``);
                           exec marks no request's end: a response's ``assistant/message``
                           and its calls' ``tool/result`` wait for the next reasoning /
                           message / web-search item after tool results, or the turn's end
                           (:mod:`adapters.codex._core`)
``turn.failed``            ``turn/end`` failed with the error message
``error`` (top level)      ``error``: ``Reconnecting... n/m (...)`` is retryable and not
                           fatal (Codex retries the request); any other is the final error
``item.*`` reasoning       a ``summary`` chunk now; a :class:`ThinkingPart` (summary = the
                           item's text) in the response's ``assistant/message``
``item.*`` agent_message   a ``text`` chunk now; a :class:`TextPart` in the message
``item.*`` command_exec.   ``tool/call`` (+ a ``ToolCallPart`` named ``command_execution``),
                           ``tool/output`` for output growing in ``item.updated``,
                           ``tool/result`` (exit code; ``is_error`` on ``failed``/
                           ``declined`` or a non-zero exit)
``item.*`` file_change     ``tool/call`` ``apply_patch``, ``file/change`` paired by call id,
                           ``tool/result`` (failed → ``is_error``)
``item.*`` mcp_tool_call   ``tool/call`` (kind ``mcp``) and ``tool/result`` (its content, or
                           its error)
``item.*`` web_search      a server-tool part (the provider ran it; no ``tool/call``)
``item.*`` todo_list       ``plan/update`` (the whole list, every time it changes)
``item.*`` error           ``error``, not fatal (e.g. "Model metadata for ... not found")
anything else              ``native/unknown``
=========================  ==================================================================

What exec ``--json`` does **not** show, and the next model request does carry (the
oracle tests name each): the reasoning item's ``rs_`` id and ``encrypted_content``, the
message's ``msg_`` id, the model's function call itself (``exec_command``, its
``call_id`` and JSON arguments — exec shows only the resulting command, with a local
``item_N`` id), the tool output exactly as sent (Codex wraps it: ``Chunk ID``, ``Wall
time``, ``Process exited with code``, ``Output:``), and the prompt. Import the rollout file
(``--from codex-rollout``) for the exact history, or use the app-server stream, which
carries the model's ids.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from adapters._base import int_or_none, str_or_none
from adapters.codex._core import CodexCore, codex_usage, text_content
from universal_event.events import (
    ErrorEvent,
    Event,
    FileChange,
    FileChangeEvent,
    PlanItem,
    PlanUpdateEvent,
    SessionStartEvent,
    ToolOutputEvent,
    Usage,
)
from universal_event.parts import ResultPart, TextPart, ThinkingPart

__all__ = ["ExecLines"]

_RECONNECTING = re.compile(r"^Reconnecting\.\.\. \d+/\d+")
"""Codex's retry notice (``Reconnecting... 1/1 (<reason>)``), one line per retry."""

_FILE_KINDS = {"add": "add", "delete": "delete", "update": "update"}


class ExecLines(CodexCore):
    """The ``codex exec --json`` half of :class:`~adapters.codex.CodexAdapter`."""

    def _exec_line(self, line: Mapping[str, Any], out: list[Event]) -> None:
        kind = str(line.get("type"))
        if kind.startswith("item."):
            item = line.get("item")
            if not isinstance(item, Mapping):
                out.append(self.unknown(kind, dict(line), "item line without an item"))
                return
            self._ensure_turn(out, kind)
            self._exec_item(kind, item, out)
        elif kind == "thread.started":
            thread_id = str_or_none(line.get("thread_id"))
            out.append(
                self.make(
                    SessionStartEvent,
                    native_type=kind,
                    native_id=thread_id,
                    runtime=self.runtime,
                    native_session_id=thread_id,
                    model=self.model,
                )
            )
        elif kind == "turn.started":
            self._start_turn(out, None, kind)
        elif kind == "turn.completed":
            usage = line.get("usage")
            self._end_turn(
                out,
                "completed",
                kind,
                usage=self._turn_total(usage) if isinstance(usage, Mapping) else None,
            )
        elif kind == "turn.failed":
            error = line.get("error")
            message = error.get("message") if isinstance(error, Mapping) else None
            self._end_turn(out, "failed", kind, error=str(message) if message else None)
        elif kind == "error":
            self._exec_error(line, out)
        elif "payload" in line and "timestamp" in line:
            # ``{"timestamp", "type": "session_meta" | "response_item" | ..., "payload"}``
            # is a rollout file's line, not a live stream's: say which --from reads it.
            reason = "a Codex rollout (rollout-*.jsonl) line: import it with --from codex-rollout"
            out.append(self.unknown(kind, dict(line), reason))
        else:
            out.append(self.unknown(kind, dict(line), "unknown exec event type"))

    def _turn_total(self, native: Mapping[str, Any]) -> Usage:
        return codex_usage(native, "turn")

    def _exec_error(self, line: Mapping[str, Any], out: list[Event]) -> None:
        message = str(line.get("message") or "")
        retrying = bool(_RECONNECTING.match(message))
        if retrying:
            self._retry()
        out.append(
            self.make(
                ErrorEvent,
                native_type="error",
                message=message,
                code="reconnecting" if retrying else None,
                retryable=retrying,
                fatal=not retrying,
                native=dict(line),
            )
        )

    def _exec_item(self, kind: str, item: Mapping[str, Any], out: list[Event]) -> None:
        item_type = item.get("type")
        item_id = str(item.get("id") or "")
        done = kind == "item.completed"
        if item_type == "agent_message" or item_type == "reasoning":
            if done:
                self._exec_text_item(kind, item_type, item_id, str(item.get("text") or ""), out)
        elif item_type == "command_execution":
            self._exec_command(kind, item_id, item, out)
        elif item_type == "file_change":
            self._exec_file_change(kind, item_id, item, out)
        elif item_type == "mcp_tool_call":
            self._exec_mcp(kind, item_id, item, out)
        elif item_type == "web_search":
            if done:
                self._web_search(out, kind, item_id, item)
        elif item_type == "todo_list":
            entries = item.get("items") or []
            out.append(
                self.make(
                    PlanUpdateEvent,
                    native_type=kind,
                    native_id=item_id,
                    plan_id=item_id,
                    items=[
                        PlanItem(
                            text=str(entry.get("text") or ""),
                            status="completed" if entry.get("completed") else "pending",
                        )
                        for entry in entries
                        if isinstance(entry, Mapping)
                    ],
                )
            )
        elif item_type == "error":
            if done:
                out.append(
                    self.make(
                        ErrorEvent,
                        native_type=kind,
                        native_id=item_id,
                        message=str(item.get("message") or ""),
                        code="item_error",
                        fatal=False,
                        native=dict(item),
                    )
                )
        else:
            out.append(self.unknown(f"{kind}:{item_type}", dict(item), "unknown exec item type"))

    def _exec_text_item(
        self, kind: str, item_type: str, item_id: str, text: str, out: list[Event]
    ) -> None:
        # exec item ids are Codex's own counters (item_0, item_1, ...), not the model's
        # rs_/msg_ ids: they stay out of the parts so no renderer replays them.
        # After tool results, a reasoning / message item is the next response's.
        self._response_item_done(out, kind, item_id)
        if item_type == "agent_message":
            if not self._add_part(TextPart(text=text), ("text", text)):
                self._chunk(out, kind, item_id, "text", text)
        else:
            part = ThinkingPart(summary=[text], provenance=self.provenance())
            if not self._add_part(part, ("thinking", text)):
                self._chunk(out, kind, item_id, "summary", text)

    def _exec_command(
        self, kind: str, item_id: str, item: Mapping[str, Any], out: list[Event]
    ) -> None:
        command = item.get("command")
        self._tool_call(out, kind, item_id, "command_execution", {"command": command}, "command")
        output = str(item.get("aggregated_output") or "")
        if kind != "item.completed":
            seen = self._output_seen.get(item_id, 0)
            if len(output) > seen:
                out.append(self.call_event(ToolOutputEvent, kind, item_id, delta=output[seen:]))
                self._output_seen[item_id] = len(output)
            return
        self._output_seen.pop(item_id, None)
        status = item.get("status")
        exit_code = item.get("exit_code")
        self._tool_result(
            out,
            kind,
            item_id,
            text_content(output),
            is_error=status in ("failed", "declined") or exit_code not in (None, 0),
            exit_code=int_or_none(exit_code),
            details={"status": status, "command": command},
        )

    def _exec_file_change(
        self, kind: str, item_id: str, item: Mapping[str, Any], out: list[Event]
    ) -> None:
        self._tool_call(out, kind, item_id, "apply_patch", None, "file_change")
        if kind != "item.completed":
            return
        changes = [
            FileChange(
                path=str(change.get("path") or ""),
                kind=_FILE_KINDS.get(str(change.get("kind")), "update"),  # type: ignore[arg-type]
            )
            for change in item.get("changes") or []
            if isinstance(change, Mapping)
        ]
        failed = item.get("status") == "failed"
        out.append(
            self.make(
                FileChangeEvent,
                native_type=kind,
                native_id=item_id,
                changes=changes,
                call_id=item_id,
                status="failed" if failed else "completed",
            )
        )
        # exec does not print the patch tool's own output: the result lists the changes.
        summary = "\n".join(f"{change.kind} {change.path}" for change in changes)
        self._tool_result(
            out,
            kind,
            item_id,
            text_content(summary),
            is_error=failed,
            details={"status": item.get("status")},
        )

    def _exec_mcp(self, kind: str, item_id: str, item: Mapping[str, Any], out: list[Event]) -> None:
        self._tool_call(
            out, kind, item_id, str(item.get("tool") or ""), item.get("arguments"), "mcp"
        )
        if kind != "item.completed":
            return
        result = item.get("result")
        error = item.get("error")
        content = mcp_content(result.get("content") if isinstance(result, Mapping) else None)
        if isinstance(error, Mapping) and error.get("message"):
            content = content or text_content(str(error["message"]))
        self._tool_result(
            out,
            kind,
            item_id,
            content,
            is_error=item.get("status") == "failed" or isinstance(error, Mapping),
            details={
                "server": item.get("server"),
                "status": item.get("status"),
                "structured_content": result.get("structured_content")
                if isinstance(result, Mapping)
                else None,
            },
        )


def mcp_content(blocks: Any) -> list[ResultPart]:
    """MCP content blocks as result parts: text as text, anything else as its JSON."""
    parts: list[ResultPart] = []
    for block in blocks or []:
        if isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(TextPart(text=str(block.get("text") or "")))
        else:
            parts.append(TextPart(text=msgspec.json.encode(block).decode()))
    return parts
