"""Drive the real agent runtimes (Claude Code, Codex) and log them live.

Each runner launches the runtime through its own Python SDK (``claude_agent_sdk`` for
Claude Code, ``openai_codex`` for the Codex app-server), points it at a model server
(``base_url``), feeds every native message through the runtime's adapter and appends
the universal events to a :class:`~universal_event.log.SessionLog`, checkpointing as it
goes. The environment is built from scratch (no inherited variables) with the switches
that keep each CLI on loopback (see the module constants).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from universal_event.events import (
    Event,
    RuntimeSwitchEvent,
    SessionStartEvent,
    Source,
    UserMessageEvent,
)
from universal_event.log import SessionLog
from universal_event.parts import TextPart

__all__ = [
    "CLAUDE_CODE_OFFLINE_ENV",
    "CODEX_CONFIG_TEMPLATE",
    "ClaudeCodeRunner",
    "CodexRunner",
    "RunResult",
    "claude_project_dir",
]

CLAUDE_CODE_OFFLINE_ENV = {
    # Without this the CLI sends HEAD /api/hello and resolves api.anthropic.com (RECIPE.md).
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_UPDATES": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_GROWTHBOOK": "1",
    "CLAUDE_CODE_DISABLE_FEATURE_FLAGS": "1",
    "DISABLE_INSTALLATION_CHECKS": "1",
    # --dangerously-skip-permissions refuses to run as root unless this is set.
    "IS_SANDBOX": "1",
}

CODEX_CONFIG_TEMPLATE = """\
model = "{model}"
model_provider = "universal_event_target"
approval_policy = "never"
sandbox_mode = "danger-full-access"
model_reasoning_effort = "medium"
model_reasoning_summary = "auto"
check_for_update_on_startup = false

[model_providers.universal_event_target]
name = "universal-event model server"
base_url = "{base_url}"
wire_api = "responses"
env_key = "UNIVERSAL_EVENT_CODEX_API_KEY"
request_max_retries = {retries}
stream_max_retries = 1
stream_idle_timeout_ms = 15000
supports_websockets = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
log_user_prompt = false

[features]
# With plugins on, every start resolves github.com and chatgpt.com (marketplace sync).
plugins = false
"""

_BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass
class RunResult:
    """What one driven turn produced."""

    events: list[Event] = field(default_factory=list)
    native_session_id: str | None = None
    """Claude Code's session UUID or Codex's thread id."""
    status: str = "completed"
    native: list[Any] = field(default_factory=list)
    """Every native message the SDK yielded, unchanged (what a tap gives the caller)."""


def claude_project_dir(home: Path, cwd: Path) -> Path:
    """Where Claude Code keeps a project's transcripts: every non-alphanumeric → '-'."""
    return home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def _append_prompt(log: SessionLog, runtime: str, prompt: str) -> None:
    log.append(
        UserMessageEvent(
            content=[TextPart(text=prompt)], source=Source(runtime=runtime, native_type="prompt")
        )
    )


def _note_switch(log: SessionLog, runtime: str) -> None:
    """Log a ``runtime/switch`` when the session was last driven by another runtime."""
    previous = None
    for event in log.events():
        if isinstance(event, SessionStartEvent) and event.runtime:
            previous = event.runtime
        elif isinstance(event, RuntimeSwitchEvent):
            previous = event.to_runtime
    if previous is not None and previous != runtime:
        log.append(RuntimeSwitchEvent(from_runtime=previous, to_runtime=runtime))


def _log_all(log: SessionLog, events: Iterable[Event], sink: list[Event]) -> None:
    for event in events:
        sink.append(log.append(event))


@dataclass
class ClaudeCodeRunner:
    """Runs Claude Code (the CLI bundled with ``claude_agent_sdk``) one turn at a time."""

    base_url: str
    home: Path
    cwd: Path
    model: str = "claude-sonnet-4-5-20250929"
    max_retries: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    on_native: Callable[[Any], None] | None = None

    def env(self) -> dict[str, str]:
        return {
            "PATH": _BASE_PATH,
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "SHELL": "/bin/bash",
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "universal-event-offline",
            "CLAUDE_CODE_MAX_RETRIES": str(self.max_retries),
            **CLAUDE_CODE_OFFLINE_ENV,
            **self.extra_env,
        }

    def run(self, log: SessionLog, prompt: str, *, resume: str | None = None) -> RunResult:
        """Run one turn (resuming a native session when given) and log it live."""
        return asyncio.run(self.arun(log, prompt, resume=resume))

    async def arun(self, log: SessionLog, prompt: str, *, resume: str | None = None) -> RunResult:
        from claude_agent_sdk import ClaudeAgentOptions, query

        from adapters import create_adapter

        self.home.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        _note_switch(log, "claude-code")
        _append_prompt(log, "claude-code", prompt)
        log.checkpoint()
        adapter = create_adapter("claude-code", session_id=log.session_id)
        options = ClaudeAgentOptions(
            model=self.model,
            permission_mode="bypassPermissions",
            cwd=str(self.cwd),
            max_turns=8,
            env=self.env(),
            resume=resume,
        )
        result = RunResult()
        async for message in query(prompt=prompt, options=options):
            result.native.append(message)
            if self.on_native is not None:
                self.on_native(message)
            session_id = getattr(message, "session_id", None) or (
                getattr(message, "data", {}) or {}
            ).get("session_id")
            if isinstance(session_id, str) and session_id:
                result.native_session_id = session_id
            _log_all(log, adapter.feed(message), result.events)
            log.checkpoint()
        _log_all(log, adapter.close(), result.events)
        log.checkpoint()
        result.status = _last_turn_status(result.events)
        return result


@dataclass
class CodexRunner:
    """Runs Codex (the app-server bundled with ``openai-codex-cli-bin``) one turn at a time."""

    base_url: str
    codex_home: Path
    cwd: Path
    model: str = "gpt-5.5"
    max_retries: int = 1
    on_native: Callable[[Any], None] | None = None

    def write_config(self) -> Path:
        self.codex_home.mkdir(parents=True, exist_ok=True)
        path = self.codex_home / "config.toml"
        path.write_text(
            CODEX_CONFIG_TEMPLATE.format(
                model=self.model, base_url=self.base_url, retries=self.max_retries
            )
        )
        return path

    def env(self) -> dict[str, str]:
        return {
            "PATH": _BASE_PATH,
            "HOME": str(self.codex_home),
            "LANG": "C.UTF-8",
            "CODEX_HOME": str(self.codex_home),
            "UNIVERSAL_EVENT_CODEX_API_KEY": "universal-event-offline",
        }

    def run(
        self,
        log: SessionLog,
        prompt: str,
        *,
        resume: str | None = None,
        interrupt_after: int | None = None,
    ) -> RunResult:
        """Run one turn (resuming thread ``resume`` when given) and log it live.

        ``interrupt_after``: interrupt the turn after that many native notifications.
        """
        from openai_codex import ApprovalMode, Codex, CodexConfig, Sandbox

        from adapters import create_adapter

        self.cwd.mkdir(parents=True, exist_ok=True)
        self.write_config()
        _note_switch(log, "codex")
        _append_prompt(log, "codex", prompt)
        log.checkpoint()
        adapter = create_adapter("codex", session_id=log.session_id)
        config = CodexConfig(cwd=str(self.cwd), env=self.env())
        result = RunResult()
        with Codex(config=config) as codex:
            if resume is None:
                thread = codex.thread_start(
                    approval_mode=ApprovalMode.deny_all,
                    sandbox=Sandbox.full_access,
                    model=self.model,
                    cwd=str(self.cwd),
                )
            else:
                thread = codex.thread_resume(
                    resume,
                    approval_mode=ApprovalMode.deny_all,
                    sandbox=Sandbox.full_access,
                    model=self.model,
                    cwd=str(self.cwd),
                )
            result.native_session_id = thread.id
            handle = thread.turn(prompt)
            for count, notification in enumerate(handle.stream(), start=1):
                result.native.append(notification)
                if self.on_native is not None:
                    self.on_native(notification)
                _log_all(log, adapter.feed(notification), result.events)
                log.checkpoint()
                if interrupt_after is not None and count == interrupt_after:
                    handle.interrupt()
        _log_all(log, adapter.close(), result.events)
        log.checkpoint()
        result.status = _last_turn_status(result.events)
        return result


def _last_turn_status(events: list[Event]) -> str:
    from universal_event.events import TurnEndEvent

    for event in reversed(events):
        if isinstance(event, TurnEndEvent):
            return event.status
    return "interrupted"


def bundled_codex() -> Path | None:
    """The Codex binary shipped in ``openai-codex-cli-bin``, if installed."""
    try:
        import codex_cli_bin
    except ImportError:
        return None
    candidate = Path(codex_cli_bin.__file__).parent / "bin" / "codex"
    return candidate if candidate.exists() else None


def bundled_claude() -> Path | None:
    """The Claude Code binary shipped in ``claude-agent-sdk``, if installed."""
    try:
        import claude_agent_sdk
    except ImportError:
        return None
    candidate = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return candidate if candidate.exists() else None


def runtime_available(runtime: str) -> bool:
    """Whether the runtime's binary is installed (the ``claude``/``codex`` extras)."""
    binary = bundled_claude() if runtime == "claude-code" else bundled_codex()
    return binary is not None and os.access(binary, os.X_OK) or shutil.which(runtime) is not None
