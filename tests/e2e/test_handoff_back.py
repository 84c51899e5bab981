"""A session handed back to a runtime it ran on before (claude-code → codex →
claude-code): the native session the hand-off wrote holds the log's own history, which
the runner must not take for turns run outside the log (the real CLIs, offline)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e._support import anthropic_skeleton, log_skeleton, runner
from universal_event.events import UserMessageEvent
from universal_event.fake_models import FakeModelServer, Reply, ShellCall
from universal_event.handoff import continue_session
from universal_event.log import SessionLog


def test_handing_back_to_claude_code_logs_no_turn_twice(tmp_path: Path) -> None:
    steps = [
        Reply(text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
        Reply(text="It is 2."),
        Reply(text="I know 2."),
        Reply(text="Codex here."),
        Reply(text="Claude again."),
    ]
    log = SessionLog()
    prompts = ["Use the shell to compute 1+1 with bc", "What do you know?", "Now in codex?"]
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path)
        codex = runner("codex", server.url, tmp_path)
        for prompt, run in zip(prompts, (claude, claude, codex), strict=True):
            assert continue_session(log, run, prompt).status == "completed"
        back = continue_session(log, claude, "Back in claude?")
        assert back.status == "completed", back.error
        sent = server.model_requests()[-1]
    texts = [
        part.text
        for e in back.events
        if isinstance(e, UserMessageEvent)
        for part in e.content
        if hasattr(part, "text")
    ]
    assert texts == ["Back in claude?"]  # nothing of the hand-off taken for outside turns
    history = log_skeleton(log.derive_messages())
    assert history[:-1] == anthropic_skeleton(sent.body)
    asked = [entry for entry in history if entry[0] == "user"]
    assert len(asked) == len(set(asked)) == 4
