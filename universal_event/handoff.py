"""Hand a session to another runtime: write its own native session from the log.

The universal log is the source of truth. To continue a session in Claude Code or
Codex, the history derived from the log is rendered for the target's provider (with
every cross-provider rule of the renderers: foreign signatures and reasoning dropped,
tool-call ids mapped, orphan calls given a result, no empty text) and written in the
form the runtime resumes from (facts: tests/fixtures/captured/HANDOFF.md):

* **Claude Code** — a transcript ``$HOME/.claude/projects/<cwd, non-alphanumerics →
  '-'>/<uuid>.jsonl``: one line per message, ``parentUuid`` chaining each line to the
  one before (the CLI walks back from the last record; a broken link silently drops
  everything before it). Resumed with ``ClaudeAgentOptions(resume=uuid)``.
* **Codex** — a rollout ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl``:
  a ``session_meta`` line (id, timestamp, cwd, originator, cli_version: all required)
  and one ``response_item`` line per Responses input item (every line with its
  ``timestamp``). Once Codex's state DB exists it finds rollouts by file name, so the
  thread id is in the name. Resumed with the app-server's ``thread/resume``.

Both CLIs forward what they read unchecked (foreign tool ids, names, fake signatures
go to the model as written), which is why the files are built from ``render_request``
output and never from the other runtime's native data. The renderers' warnings and a
``runtime/switch`` naming the written native session are appended to the log.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from universal_event.errors import UniversalEventError
from universal_event.events import RequestHeaderEvent, RuntimeSwitchEvent, Source, WarningEvent
from universal_event.log import SessionLog
from universal_event.messages import Message
from universal_event.runtimes import claude_project_dir, last_runtime

__all__ = [
    "CODEX_CLI_VERSION",
    "HandoffError",
    "HandoffResult",
    "Runtime",
    "codex_input_items",
    "hand_off",
    "render_for",
    "uuid7",
    "write_claude_transcript",
    "write_codex_rollout",
]

Runtime = Literal["claude-code", "codex"]

CODEX_CLI_VERSION = "0.163.0"
"""Written into ``session_meta.cli_version`` (the Codex the rollout format was checked with)."""


class HandoffError(UniversalEventError, ValueError):
    """A session that cannot be handed over (empty history, unknown runtime)."""


@dataclass
class HandoffResult:
    """What a hand-off wrote."""

    runtime: Runtime
    native_session_id: str
    path: Path
    request: dict[str, Any]
    """The rendered request whose history was written (what the target will send)."""
    warnings: list[WarningEvent] = field(default_factory=list)
    switch: RuntimeSwitchEvent | None = None


def uuid7() -> str:
    """A UUIDv7 (time-ordered), the form of Codex's thread ids."""
    millis = time.time_ns() // 1_000_000
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= (int.from_bytes(os.urandom(2), "big") & 0x0FFF) << 64
    value |= 0b10 << 62
    value |= int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


def _timestamp(offset_ms: int = 0) -> str:
    moment = datetime.fromtimestamp(time.time() + offset_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# ---------------------------------------------------------------- rendering


def render_for(
    runtime: Runtime, messages: Sequence[Message], model: str
) -> tuple[dict[str, Any], list[WarningEvent]]:
    """The target provider's request for ``messages`` (history only) and its warnings.

    Claude Code talks to Anthropic Messages; Codex to OpenAI Responses with
    ``store: false`` (so only reasoning with ``encrypted_content`` may be replayed).
    """
    warnings: list[WarningEvent] = []
    if runtime == "claude-code":
        from adapters.anthropic import render_request as render_anthropic

        header = RequestHeaderEvent(provider="anthropic", api="messages", model=model)
        return render_anthropic(messages, header, warnings=warnings), warnings
    if runtime == "codex":
        from adapters.openai_responses import render_request as render_responses

        header = RequestHeaderEvent(
            provider="openai", api="responses", model=model, sampling={"store": False}
        )
        return render_responses(messages, header, warnings=warnings), warnings
    raise HandoffError(f"unknown runtime {runtime!r}; hand-off targets: claude-code, codex")


# ---------------------------------------------------------------- Claude Code


def write_claude_transcript(
    request: dict[str, Any], *, home: Path, cwd: Path, session_id: str | None = None
) -> tuple[str, Path]:
    """Write the request's ``messages`` as a Claude Code transcript; (session id, path)."""
    session_id = session_id or str(uuid.uuid4())
    directory = claude_project_dir(home, cwd)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{session_id}.jsonl"
    parent: str | None = None
    lines: list[str] = []
    for index, message in enumerate(request["messages"]):
        line_id = str(uuid.uuid4())
        record: dict[str, Any] = {
            "type": message["role"],
            "uuid": line_id,
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "sessionId": session_id,
            "cwd": str(cwd),
            "timestamp": _timestamp(index),
            "message": {"role": message["role"], "content": message["content"]},
        }
        lines.append(json.dumps(record, ensure_ascii=False))
        parent = line_id
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return session_id, path


# ---------------------------------------------------------------- Codex


def codex_input_items(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's ``input`` as the typed items a rollout holds.

    The renderer may use the easy form ``{"role", "content": "text"}`` for a message;
    Codex reads rollout lines as tagged ``ResponseItem``s whose content is a list, and
    sends them on as written. A user message becomes ``{"type": "message", "role":
    "user", "content": [{"type": "input_text", ...}]}``; an assistant message the
    output-message form the Responses API takes as input — ``id``, ``status`` and
    ``output_text`` parts with ``annotations`` (without them the SDK's
    ``ResponseInputParam`` refuses it). The id is derived from the item's position and
    text (Codex itself sends ids of its own making on messages with ``store: false``).
    """
    items: list[dict[str, Any]] = []
    for index, item in enumerate(request["input"]):
        if "type" in item and item["type"] != "message":
            items.append(item)
            continue
        content = item["content"]
        if item["role"] == "assistant" and isinstance(content, str):
            digest = hashlib.sha256(f"{index}:{content}".encode()).hexdigest()[:32]
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": item.get("id") or f"msg_{digest}",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": content, "annotations": []}],
                }
            )
            continue
        if isinstance(content, str):
            content = [{"type": "input_text", "text": content}]
        message = {k: v for k, v in item.items() if k != "content"}
        message.update(type="message", content=content)
        items.append(message)
    return items


def write_codex_rollout(
    request: dict[str, Any], *, codex_home: Path, cwd: Path, thread_id: str | None = None
) -> tuple[str, Path]:
    """Write the request's ``input`` as a Codex rollout file; (thread id, path)."""
    thread_id = thread_id or uuid7()
    now = datetime.now(UTC)
    directory = codex_home / "sessions" / now.strftime("%Y/%m/%d")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"rollout-{now.strftime('%Y-%m-%dT%H-%M-%S')}-{thread_id}.jsonl"
    started = _timestamp()
    lines: list[dict[str, Any]] = [
        {
            "timestamp": started,
            "type": "session_meta",
            "payload": {
                "id": thread_id,
                "timestamp": started,
                "cwd": str(cwd),
                "originator": "universal_event",
                "cli_version": CODEX_CLI_VERSION,
            },
        }
    ]
    for index, item in enumerate(codex_input_items(request), start=1):
        stamp = _timestamp(index)
        lines.append({"timestamp": stamp, "type": "response_item", "payload": item})
        if item.get("type") == "message" and item.get("role") == "user":
            # Codex's own rollouts pair each prompt with a user_message event; without
            # one, `resume --last` starts an empty thread (HANDOFF.md).
            text = "".join(
                part.get("text", "") for part in item["content"] if part.get("type") == "input_text"
            )
            lines.append(
                {
                    "timestamp": stamp,
                    "type": "event_msg",
                    "payload": {"type": "user_message", "message": text, "images": []},
                }
            )
    path.write_text(
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8"
    )
    return thread_id, path


# ---------------------------------------------------------------- the hand-off


def hand_off(
    log: SessionLog,
    runtime: Runtime,
    *,
    model: str,
    cwd: Path,
    claude_home: Path | None = None,
    codex_home: Path | None = None,
    reason: str = "handoff",
) -> HandoffResult:
    """Write ``runtime``'s native session from ``log`` and log the switch.

    Appends the renderer's warnings and a ``runtime/switch`` (with the native session
    id) to ``log`` and checkpoints. The next run of ``runtime`` on this session resumes
    the written native session (:func:`universal_event.runtimes.current_native_session`).
    """
    messages = log.derive_messages()
    if not messages:
        raise HandoffError(f"session {log.session_id!r} has no history to hand over")
    request, warnings = render_for(runtime, messages, model)
    if runtime == "claude-code":
        if claude_home is None:
            raise HandoffError("a hand-off to claude-code needs Claude Code's home directory")
        native, path = write_claude_transcript(request, home=claude_home, cwd=cwd)
    else:
        if codex_home is None:
            raise HandoffError("a hand-off to codex needs the CODEX_HOME directory")
        native, path = write_codex_rollout(request, codex_home=codex_home, cwd=cwd)
    for found in warnings:
        log.append(found)
    switch = log.append(
        RuntimeSwitchEvent(
            from_runtime=last_runtime(log.events()),
            to_runtime=runtime,
            reason=reason,
            native_session_id=native,
            source=Source(runtime="universal-event", native_type="handoff"),
        )
    )
    log.checkpoint()
    return HandoffResult(runtime, native, path, request, warnings, switch)


# ---------------------------------------------------------------- driving a session


DEFAULT_MODELS: dict[str, str] = {
    "claude-code": "claude-sonnet-4-5-20250929",
    # Codex only knows the slugs of its bundled catalog (RECIPE.md); gpt-5.5 is one.
    "codex": "gpt-5.5",
}


@dataclass
class RuntimePlaces:
    """Where the runtimes keep their state for a session, and where they run commands.

    ``workdir/claude-home`` is Claude Code's ``$HOME`` (transcripts under ``.claude``),
    ``workdir/codex-home`` Codex's ``$CODEX_HOME`` (config, rollouts, state DBs).
    """

    workdir: Path
    cwd: Path

    @property
    def claude_home(self) -> Path:
        return self.workdir / "claude-home"

    @property
    def codex_home(self) -> Path:
        return self.workdir / "codex-home"


def make_runner(
    runtime: Runtime, model_url: str, places: RuntimePlaces, model: str | None = None, **hooks: Any
) -> Any:
    """A runner for ``runtime`` against the model server at ``model_url`` (its root URL).

    Claude Code appends ``/v1/messages`` itself; Codex is given ``<root>/v1`` and posts
    to ``/responses`` under it. ``hooks`` are the runner's other fields (``on_event``,
    ``timeout``, ``cli_path``, ...).
    """
    from universal_event.runtimes import ClaudeCodeRunner, CodexRunner

    root = model_url.rstrip("/")
    if runtime == "claude-code":
        return ClaudeCodeRunner(
            base_url=root,
            home=places.claude_home,
            cwd=places.cwd,
            model=model or DEFAULT_MODELS[runtime],
            **hooks,
        )
    if runtime == "codex":
        return CodexRunner(
            base_url=root if root.endswith("/v1") else root + "/v1",
            codex_home=places.codex_home,
            cwd=places.cwd,
            model=model or DEFAULT_MODELS[runtime],
            **hooks,
        )
    raise HandoffError(f"unknown runtime {runtime!r}; runtimes: claude-code, codex")


def prepare(log: SessionLog, runner: Any) -> tuple[str | None, HandoffResult | None]:
    """The native session ``runner`` resumes for ``log``, handing over first if needed.

    A session last driven by the runner's runtime resumes that runtime's current native
    session; one last driven by another runtime is handed over (its native session
    written from the log); a new session starts fresh.
    """
    from universal_event.runtimes import current_native_session

    runtime: Runtime = runner.runtime
    events = log.events()
    previous = last_runtime(events)
    if previous is None or not log.derive_messages():
        return None, None
    if previous == runtime:
        return current_native_session(events, runtime), None
    result = hand_off(
        log,
        runtime,
        model=runner.model,
        cwd=runner.cwd,
        claude_home=getattr(runner, "home", None),
        codex_home=getattr(runner, "codex_home", None),
    )
    return result.native_session_id, result


def continue_session(log: SessionLog, runner: Any, prompt: str) -> Any:
    """Run one turn of ``prompt`` in the runner's runtime, continuing ``log``'s history.

    Returns the runner's :class:`~universal_event.runtimes.RunResult`.
    """
    resume, _ = prepare(log, runner)
    return runner.run(log, prompt, resume=resume)
