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
output and never from the other runtime's native data. What each CLI adds or drops on
its own is allowed for (:func:`render_for`): Claude Code manages its own
``cache_control`` marks, so the history goes without any; Codex silently drops the
rollout items it cannot read back, so those are rewritten into ones it can. A history
that renders to nothing is not handed over (:class:`HandoffError`). The renderers'
warnings and a ``runtime/switch`` naming the written native session are appended to
the log.
"""

from __future__ import annotations

import base64
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

from universal_event.errors import SessionNotFoundError, UniversalEventError
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
    "codex_readable",
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
    """Now, ``offset_ms`` later. A native session is written with its lines a millisecond
    apart, in order, all *before* now (negative offsets): the ``runtime/switch`` logged
    after it is newer than every line, so the runner's import of turns run outside the
    log (those begun after its last event) never takes the hand-off's own for one."""
    moment = datetime.fromtimestamp(time.time() + offset_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# ---------------------------------------------------------------- rendering


def render_for(
    runtime: Runtime, messages: Sequence[Message], model: str
) -> tuple[dict[str, Any], list[WarningEvent]]:
    """The target provider's request for ``messages`` (history only) and its warnings.

    Claude Code talks to Anthropic Messages; Codex to OpenAI Responses with
    ``store: false`` (so only reasoning with ``encrypted_content`` may be replayed).

    * **Claude Code** gets the history without ``cache_control`` marks: it marks its
      own requests (the system prompt, the last message), and marks kept from the log
      would come on top of them, past the four a Messages request may carry.
    * **Codex** 0.163 silently drops from a resumed rollout what it cannot read back
      (a message or tool output holding a file, a ``system`` message, an assistant
      ``refusal``) and sends a remote image URL as a note that it was left out. Such
      items are rewritten into ones it reads, losing the least, each with a warning:
      :func:`codex_readable`.
    """
    warnings: list[WarningEvent] = []
    if runtime == "claude-code":
        from adapters import RenderPolicy
        from adapters.anthropic import render_request as render_anthropic

        header = RequestHeaderEvent(provider="anthropic", api="messages", model=model)
        policy = RenderPolicy(keep_cache_control=False)
        request = render_anthropic(messages, header, policy, warnings=warnings)
        return request, warnings
    if runtime == "codex":
        from adapters.openai_responses import render_request as render_responses

        header = RequestHeaderEvent(
            provider="openai", api="responses", model=model, sampling={"store": False}
        )
        request = render_responses(messages, header, warnings=warnings)
        request["input"] = codex_readable(request["input"], warnings)
        return request, warnings
    raise HandoffError(f"unknown runtime {runtime!r}; hand-off targets: claude-code, codex")


def _handoff_warning(code: str, message: str, **details: Any) -> WarningEvent:
    from adapters._render import warning

    return warning(code, message, native_type="handoff", **details)


def codex_readable(
    items: Sequence[dict[str, Any]], warnings: list[WarningEvent] | None = None
) -> list[dict[str, Any]]:
    """Responses input ``items`` rewritten into what Codex reads back from a rollout.

    Codex 0.163 reads a rollout's ``response_item`` lines as its own ``ResponseItem``
    type and silently skips a line that does not fit it, or sends a part it will not
    forward as a note. Checked against the real CLI (tests/e2e/test_handoff_rules.py):

    * a message holding an ``input_file`` is dropped whole, its text too; a tool output
      holding one is dropped, and Codex answers the call with ``aborted``: the file
      becomes an ``input_text`` note naming it (its name, media type, URL or file id)
      and, for a ``text/*`` file given by its bytes, holding its text;
      the rest of the message or output stays (``document_as_text``);
    * an ``input_image`` by a remote URL is sent as "image content omitted because
      remote image URLs are not supported": it becomes a note with the URL
      (``image_url_as_text``); images as ``data:`` URLs or file ids go as they are;
    * a ``system`` message is dropped: it becomes a ``developer`` message, the role
      Codex gives instructions (``instruction_as_developer``);
    * an assistant message with a ``refusal`` part is dropped: the refusal becomes
      ``output_text`` (``refusal_as_text``).

    Each rewrite appends a warning to ``warnings``; the items are not changed in place.
    """
    found = warnings if warnings is not None else []
    out: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "message":
            item = _readable_message(item, index, found)
        elif kind in ("function_call_output", "custom_tool_call_output") and isinstance(
            item.get("output"), list
        ):
            where = f"the output of tool call {item.get('call_id')!r}"
            output = _readable_parts(item["output"], where, index, found)
            item = {**item, "output": output}
        out.append(item)
    return out


def _readable_message(
    item: dict[str, Any], index: int, warnings: list[WarningEvent]
) -> dict[str, Any]:
    role = item.get("role")
    if role == "system":
        warnings.append(
            _handoff_warning(
                "instruction_as_developer",
                f"input item {index}: a system message was written as a developer message "
                "(Codex drops system messages from a session it resumes)",
                index=index,
            )
        )
        item = {**item, "role": "developer"}
        role = "developer"
    content = item.get("content")
    if not isinstance(content, list):
        return item
    if role == "assistant":
        if not any(isinstance(p, dict) and p.get("type") == "refusal" for p in content):
            return item
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "refusal":
                part = {
                    "type": "output_text",
                    "text": str(part.get("refusal", "")),
                    "annotations": [],
                }
                warnings.append(
                    _handoff_warning(
                        "refusal_as_text",
                        f"input item {index}: an assistant refusal was written as its text "
                        "(Codex drops an assistant message holding a refusal part)",
                        index=index,
                    )
                )
            parts.append(part)
        return {**item, "content": parts}
    return {**item, "content": _readable_parts(content, f"a {role} message", index, warnings)}


def _readable_parts(
    parts: list[Any], where: str, index: int, warnings: list[WarningEvent]
) -> list[Any]:
    """Input parts with files and remote image URLs as text notes."""
    out: list[Any] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_file":
            note, name = _document_note(part)
            out.append({"type": "input_text", "text": note})
            warnings.append(
                _handoff_warning(
                    "document_as_text",
                    f"input item {index}: document {name} in {where} was written as a text "
                    "note naming it (Codex drops a message or tool output holding a file "
                    "from a session it resumes)",
                    index=index,
                    document=name,
                )
            )
        elif kind == "input_image" and _remote_url(part.get("image_url")):
            url = part["image_url"]
            out.append({"type": "input_text", "text": f"[image by URL, not shown here: {url}]"})
            warnings.append(
                _handoff_warning(
                    "image_url_as_text",
                    f"input item {index}: an image by URL in {where} was written as a text "
                    f"note with its URL (Codex does not send remote image URLs): {url}",
                    index=index,
                    url=url,
                )
            )
        else:
            out.append(part)
    return out


def _remote_url(url: Any) -> bool:
    return isinstance(url, str) and not url.startswith("data:")


def _document_note(part: dict[str, Any]) -> tuple[str, str]:
    """(the text that stands for an ``input_file`` part, the name the warning gives it)."""
    from adapters._render import parse_data_url

    filename, url, file_id = part.get("filename"), part.get("file_url"), part.get("file_id")
    if isinstance(url, str):
        name = url
    elif isinstance(filename, str) and filename:
        name = filename
    elif isinstance(file_id, str):
        name = f"file id {file_id}"
    else:
        name = "(unnamed)"
    data = part.get("file_data")
    parsed = parse_data_url(data) if isinstance(data, str) else None
    if parsed is None:
        return f"[document {name} was attached here; its content is not available]", name
    media_type, payload = parsed
    if media_type.startswith("text/"):
        try:
            text = base64.b64decode(payload).decode("utf-8", errors="replace")
        except ValueError:  # not base64 after all: named only
            pass
        else:
            return f"[document {name} ({media_type}):]\n{text}", name
    return (
        f"[document {name} ({media_type}) was attached here; its content is not available]",
        name,
    )


# ---------------------------------------------------------------- Claude Code


def write_claude_transcript(
    request: dict[str, Any], *, home: Path, cwd: Path, session_id: str | None = None
) -> tuple[str, Path]:
    """Write the request's ``messages`` as a Claude Code transcript; (session id, path).

    Claude Code sends a transcript's ``thinking`` / ``redacted_thinking`` blocks back
    only from an assistant line whose ``message.model`` is the model it runs (on a line
    without one it strips them, as it does for another model's: the signature is bound
    to the model). The renderer keeps signed thinking only for the request's model
    (rules 1-2), so a line holding some names ``request["model"]``; the other lines name
    none (their text may come from another provider).
    """
    session_id = session_id or str(uuid.uuid4())
    path = claude_project_dir(home, cwd) / f"{session_id}.jsonl"
    parent: str | None = None
    lines: list[str] = []
    count = len(request["messages"])
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
            "timestamp": _timestamp(index - count),
            "message": _transcript_message(message, request["model"]),
        }
        lines.append(json.dumps(record, ensure_ascii=False))
        parent = line_id
    _write_native_session(path, "".join(line + "\n" for line in lines))
    return session_id, path


_THINKING_BLOCKS = ("thinking", "redacted_thinking")


def _transcript_message(message: dict[str, Any], model: str) -> dict[str, Any]:
    """A transcript line's ``message``: the rendered one, with the ``model`` its thinking
    is bound to when it holds some (as Claude Code's own lines carry it)."""
    content = message["content"]
    body: dict[str, Any] = {"role": message["role"]}
    if message["role"] == "assistant" and any(
        isinstance(block, dict) and block.get("type") in _THINKING_BLOCKS for block in content
    ):
        body["model"] = model
    body["content"] = content
    return body


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
    path = directory / f"rollout-{now.strftime('%Y-%m-%dT%H-%M-%S')}-{thread_id}.jsonl"
    items = list(codex_input_items(request))
    started = _timestamp(-len(items) - 1)
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
    for index, item in enumerate(items, start=1):
        stamp = _timestamp(index - len(items) - 1)
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
    _write_native_session(
        path, "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    )
    return thread_id, path


def _write_native_session(path: Path, text: str) -> None:
    """Write a runtime's session file (its directory made first); HandoffError naming
    the file when the system refuses (a path too long, a read-only home)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise HandoffError(f"cannot write the hand-off session file {str(path)!r}: {exc}") from exc


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
    id) to ``log`` and checkpoints. A history that renders to nothing for ``runtime``
    (all of it dropped by the cross-provider rules: the renderer warns
    ``empty_history``) is a :class:`HandoffError`: nothing is written or logged. The next run of ``runtime`` on this session resumes
    the written native session (:func:`universal_event.runtimes.current_native_session`).
    """
    messages = log.derive_messages()
    if not messages:
        raise HandoffError(f"session {log.session_id!r} has no history to hand over")
    request, warnings = render_for(runtime, messages, model)
    history = request["messages"] if runtime == "claude-code" else request["input"]
    if not history:
        # An empty native session cannot be resumed ("No conversation found"), and a
        # switch to it would be resumed again by every later run: hand nothing over.
        why = "; ".join(f"{w.code}: {w.message}" for w in warnings) or "no warnings"
        raise HandoffError(
            f"session {log.session_id!r}: its history renders to nothing for {runtime} "
            f"(an empty rendered history: {why}); nothing was handed over"
        )
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
    written from the log); a new session starts fresh. A forked session whose native
    session is its parent's (named before the fork point) is handed over too, to a
    native session of its own: resuming the parent's would share it both ways.

    A runner whose turn could not start (its ``preflight()`` finds the CLI missing, the
    model server unreachable) hands nothing over: its run fails the same way, and the
    log is left as it was.
    """
    from universal_event.runtimes import current_native_session

    runtime: Runtime = runner.runtime
    events = log.events()
    previous = last_runtime(events)
    if previous is None or not log.derive_messages():
        return None, None
    preflight = getattr(runner, "preflight", None)
    if preflight is not None and preflight() is not None:
        return None, None  # its run reports why
    reason = "handoff"
    if previous == runtime:
        fork_point = _fork_point(log)
        native = current_native_session(events, runtime, after_seq=fork_point)
        if native is not None or fork_point < 0:
            return native, None
        reason = "fork"
    result = hand_off(
        log,
        runtime,
        model=runner.model,
        cwd=runner.cwd,
        claude_home=getattr(runner, "home", None),
        codex_home=getattr(runner, "codex_home", None),
        reason=reason,
    )
    return result.native_session_id, result


def _fork_point(log: SessionLog) -> int:
    """The last seq a forked session copied from its parent; -1 for one not forked."""
    try:
        info = log.store.session_info(log.session_id)
    except SessionNotFoundError:
        return -1
    if info.parent_id is None or info.fork_seq is None:
        return -1
    return info.fork_seq


def continue_session(log: SessionLog, runner: Any, prompt: str) -> Any:
    """Run one turn of ``prompt`` in the runner's runtime, continuing ``log``'s history.

    Returns the runner's :class:`~universal_event.runtimes.RunResult`.
    """
    resume, _ = prepare(log, runner)
    return runner.run(log, prompt, resume=resume)
