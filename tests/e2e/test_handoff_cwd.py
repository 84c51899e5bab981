"""A hand-off to Claude Code in a working directory Claude Code names its own way.

Claude Code keeps a project's transcripts under ``~/.claude/projects/<name>``, the name
made from its kernel-resolved cwd (symlinks followed, absolute), one ``-`` per UTF-16
code unit, cut past 200 characters with a hash. A transcript written anywhere else is
"No conversation found with session ID" on resume.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e._support import anthropic_skeleton, log_skeleton, need, validate_anthropic_messages
from universal_event.events import AssistantMessageEvent, SessionStartEvent, UserMessageEvent
from universal_event.fake_models import FakeModelServer, Reply
from universal_event.handoff import DEFAULT_MODELS, RuntimePlaces, continue_session, make_runner
from universal_event.log import SessionLog
from universal_event.parts import Provenance, TextPart
from universal_event.runtimes import claude_project_dir

CODEX_ORIGIN = Provenance(provider="openai", api="responses", model=DEFAULT_MODELS["codex"])


def test_a_handoff_into_a_symlinked_long_non_ascii_relative_cwd_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need("claude-code")
    real = tmp_path / "réal-wörk-🚀"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    # relative, through the link, with an emoji, and far past 200 characters resolved
    cwd = Path("link") / ("projekt-🚀-" + "x" * 200) / "日本語"
    resolved = os.path.realpath(cwd)
    assert len(resolved.encode("utf-16-le")) // 2 > 255

    log = SessionLog()
    log.append(SessionStartEvent(runtime="codex", native_session_id="codex-thread"))
    log.append(UserMessageEvent(content=[TextPart(text="Remember the word PELICAN")]))
    log.append(
        AssistantMessageEvent(content=[TextPart(text="Noted: PELICAN.")], provenance=CODEX_ORIGIN)
    )
    history = log_skeleton(log.derive_messages())
    homes = tmp_path / "homes"
    with FakeModelServer([Reply(text="PELICAN."), Reply(text="hi")]) as server:
        claude = make_runner("claude-code", server.url, RuntimePlaces(homes, cwd))
        result = continue_session(log, claude, "Which word?")
        assert result.status == "completed", result.error  # found the handed-over transcript
        sent = server.model_requests("anthropic")[0].body
        # where a fresh Claude Code run in the same cwd keeps its transcript
        fresh = make_runner("claude-code", server.url, RuntimePlaces(tmp_path / "fresh", cwd))
        assert fresh.run(SessionLog(), "hello").status == "completed"

    validate_anthropic_messages(sent["messages"])
    assert anthropic_skeleton(sent) == [*history, ("user", "Which word?")]
    project = claude_project_dir(homes / "claude-home", cwd)
    (own,) = (tmp_path / "fresh" / "claude-home" / ".claude" / "projects").iterdir()
    assert own.name == project.name
    assert len(project.name) == 200 + 1 + len(project.name.rsplit("-", 1)[1])
    # Claude Code went on in the transcript it resumed, in that directory only
    assert list(project.parent.iterdir()) == [project]
    assert (project / f"{result.native_session_id}.jsonl").is_file()
