"""A ``claude_agent_sdk`` client of one's own (no runner), its streams logged with
``adapters.claude_sdk.atap``: what Claude Code does to the history by itself is followed
as the runner follows it (the real CLI, offline against the fake model)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e._support import runner
from tests.e2e.test_claude_resume import _texts
from universal_event.fake_models import FakeModelServer, Reply
from universal_event.log import SessionLog
from universal_event.parts import TextPart


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

    summary = "SUMMARY: two questions, both answered."
    steps = [
        Reply(text="Turn one done."),
        Reply(text="Turn two done.", input_tokens=60_000),
        Reply(text=summary),  # Claude Code asks for the summary twice
        Reply(text=summary),
        Reply(text="Turn three after compaction."),
    ]
    limits = {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000", "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "10"}
    log = SessionLog()
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path, extra_env=limits)
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
    sent = [
        (m["role"], text) for m in requests[-1].body["messages"] for text in _texts(m["content"])
    ]
    derived = [
        (str(message.__struct_config__.tag), part.text.rstrip("\n"))
        for message in log.derive_messages()
        for part in message.content
        if isinstance(part, TextPart)
    ]
    assert summary in sent[0][1]
    assert derived == [*sent, ("assistant", "Turn three after compaction.")]
    assert any("Turn one done." in str(getattr(e, "content", "")) for e in log.events())
