"""A ``claude_agent_sdk`` client of one's own (no runner), its streams logged with
``adapters.claude_sdk.atap``: what Claude Code does to the history by itself is followed
as the runner follows it (the real CLI, offline against the fake model)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e._support import (
    AUTO_COMPACT_LIMITS,
    assert_claude_compaction_followed,
    claude_compaction_steps,
    runner,
)
from universal_event.fake_models import FakeModelServer
from universal_event.log import SessionLog


def test_a_compaction_in_an_sdk_stream_tapped_without_the_runner_is_followed(
    tmp_path: Path,
) -> None:
    """A ``claude_agent_sdk`` client of one's own, its streams logged with
    ``adapters.claude_sdk.atap``: Claude Code compacts by itself before the third turn
    (its threshold lowered through its own variables); the history derived from the log
    is what it sends then."""
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

    from adapters.claude_sdk import ClaudeCodeAdapter, atap
    from universal_event.runtimes import CLAUDE_SDK_VARIABLES, bundled_claude, write_launcher

    steps = claude_compaction_steps(automatic=True)
    log = SessionLog()
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path, extra_env=AUTO_COMPACT_LIMITS)
        binary = bundled_claude()
        assert binary is not None
        launcher = write_launcher(
            tmp_path / "bin" / "claude", binary, claude.env(), CLAUDE_SDK_VARIABLES
        )
        claude.cwd.mkdir(parents=True, exist_ok=True)
        options = ClaudeAgentOptions(
            model=claude.model,
            cwd=str(claude.cwd),
            env=claude.env(),
            cli_path=str(launcher),
            setting_sources=[],
        )
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
