"""A ``claude_agent_sdk`` client of one's own (no runner), its streams logged with
``adapters.claude_sdk.atap``: what Claude Code does to the history by itself is followed
as the runner follows it (the real CLI, offline against the fake model)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.e2e._support import (
    AUTO_COMPACT_LIMITS,
    anthropic_skeleton,
    assert_claude_compaction_followed,
    claude_compaction_steps,
    log_skeleton,
    runner,
)
from universal_event.events import ToolResultEvent
from universal_event.fake_models import FakeModelServer, Reply, ShellCall
from universal_event.log import SessionLog


def _sdk_options(claude: Any, tmp_path: Path, **more: Any) -> Any:
    """``ClaudeAgentOptions`` that start the bundled CLI as the runner ``claude`` would
    (offline, its home and variables), with the SDK's isolation (no settings files)."""
    from claude_agent_sdk import ClaudeAgentOptions

    from universal_event.runtimes import CLAUDE_SDK_VARIABLES, bundled_claude, write_launcher

    binary = bundled_claude()
    assert binary is not None
    launcher = write_launcher(
        tmp_path / "bin" / "claude", binary, claude.env(), CLAUDE_SDK_VARIABLES
    )
    claude.cwd.mkdir(parents=True, exist_ok=True)
    return ClaudeAgentOptions(
        model=claude.model,
        cwd=str(claude.cwd),
        env=claude.env(),
        cli_path=str(launcher),
        setting_sources=[],
        **more,
    )


def test_a_compaction_in_an_sdk_stream_tapped_without_the_runner_is_followed(
    tmp_path: Path,
) -> None:
    """A ``claude_agent_sdk`` client of one's own, its streams logged with
    ``adapters.claude_sdk.atap``: Claude Code compacts by itself before the third turn
    (its threshold lowered through its own variables); the history derived from the log
    is what it sends then."""
    from claude_agent_sdk import ClaudeSDKClient

    from adapters.claude_sdk import ClaudeCodeAdapter, atap

    steps = claude_compaction_steps(automatic=True)
    log = SessionLog()
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path, extra_env=AUTO_COMPACT_LIMITS)
        options = _sdk_options(claude, tmp_path)
        adapter = ClaudeCodeAdapter(session_id=log.session_id)

        async def converse() -> None:
            async with ClaudeSDKClient(options=options) as client:
                for prompt in ("First question", "Second question", "Third question"):
                    log.extend(adapter.user_prompt(prompt))
                    await client.query(prompt)
                    async for _ in atap(
                        client.receive_response(), log, adapter=adapter, home=claude.home
                    ):
                        pass

        asyncio.run(converse())
        requests = server.model_requests()
    assert len(requests) == 5
    assert_claude_compaction_followed(log, requests[-1])


def test_an_sdk_user_logs_turns_run_elsewhere_before_a_resumed_prompt(tmp_path: Path) -> None:
    """``import_claude_turns(log, transcript)`` before the prompt of a resumed turn: a
    turn another log ran on the session is in the history, as Claude Code sends it."""
    from claude_agent_sdk import ClaudeSDKClient

    from adapters.claude_sdk import ClaudeCodeAdapter, atap
    from universal_event.runtimes import (
        import_claude_turns,
    )

    steps = [
        Reply(text="One."),
        Reply(text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
        Reply(text="Two, elsewhere."),
        Reply(text="Three."),
    ]
    log, elsewhere = SessionLog(), SessionLog()
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path)
        adapter = ClaudeCodeAdapter(session_id=log.session_id)

        async def turn(prompt: str, resume: str | None) -> str | None:
            options = _sdk_options(
                claude, tmp_path, permission_mode="bypassPermissions", resume=resume
            )
            if resume is not None:
                import_claude_turns(log, claude.transcript_path(resume))
            log.extend(adapter.user_prompt(prompt))
            session = None
            async with ClaudeSDKClient(options=options) as client:
                await client.query(prompt)
                async for message in atap(
                    client.receive_response(), log, adapter=adapter, home=claude.home
                ):
                    session = getattr(message, "session_id", None) or session
            return session

        native = asyncio.run(turn("First question", None))
        assert native is not None
        other = claude.run(elsewhere, "Use the shell to compute 1+1 with bc", resume=native)
        assert other.status == "completed", other.error
        asyncio.run(turn("Third question", native))
        sent = server.model_requests()[3]
    assert log_skeleton(log.derive_messages())[:-1] == anthropic_skeleton(sent.body)
    imported = [e for e in log.events() if e.source and e.source.native_type == "transcript"]
    assert any(isinstance(e, ToolResultEvent) for e in imported)
