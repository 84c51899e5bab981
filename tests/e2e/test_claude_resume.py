"""Turns run on a Claude Code session outside this log's runner (``claude --resume`` in a
terminal, another log's runner, an SDK user) are logged from the session's transcript
before the runner's next turn: the history derived from the log is what Claude Code
sends then (the oracle: that turn's request, with the real CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e._support import (
    anthropic_skeleton,
    assert_claude_compaction_followed,
    claude_compaction_steps,
    first_text_delta,
    log_skeleton,
    of_type,
    runner,
    tool_started,
)
from universal_event.errors import RuntimeTimeoutError
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)
from universal_event.fake_models import FakeModelServer, Reply, ShellCall, Stall
from universal_event.log import SessionLog
from universal_event.parts import TextPart


def _from_transcript(events: list[Event]) -> list[Event]:
    return [e for e in events if e.source is not None and e.source.native_type == "transcript"]


def test_turns_run_outside_the_runner_are_logged_before_its_next_turn(tmp_path: Path) -> None:
    """A turn with a tool call, run by another log's runner on the session, is in the
    history of this log's next turn as Claude Code sent it. The other log, which ran no
    turn of the session before, imports nothing."""
    steps = [
        Reply(text="One."),
        Reply(text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
        Reply(text="Two, elsewhere."),
        Reply(text="Three."),
    ]
    log, elsewhere = SessionLog(), SessionLog()
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path)
        first = claude.run(log, "First question")
        assert first.status == "completed", first.error
        native = first.native_session_id
        other = claude.run(elsewhere, "Use the shell to compute 1+1 with bc", resume=native)
        assert other.status == "completed", other.error
        assert not _from_transcript(elsewhere.events())
        third = claude.run(log, "Third question", resume=native)
        assert third.status == "completed", third.error
        sent = server.model_requests()[3]

    assert log_skeleton(log.derive_messages())[:-1] == anthropic_skeleton(sent.body)
    imported = _from_transcript(log.events())
    assert len(of_type(imported, TurnStartEvent)) == len(of_type(imported, TurnEndEvent)) == 1
    (prompt,) = of_type(imported, UserMessageEvent)
    assert prompt.content == [TextPart(text="Use the shell to compute 1+1 with bc")]
    (result,) = of_type(imported, ToolResultEvent)
    assert [p.text for p in result.content if isinstance(p, TextPart)] == ["2"]
    # logged by the third run (its events), before its prompt
    *_, third_prompt = of_type(third.events, UserMessageEvent)
    assert third_prompt.content == [TextPart(text="Third question")]
    assert {e.id for e in imported} <= {e.id for e in third.events}
    assert max(e.seq for e in imported) < third_prompt.seq
    assert len(of_type(log.events(), TurnEndEvent)) == 3


def test_a_compaction_run_outside_leaves_what_claude_code_sends_next(tmp_path: Path) -> None:
    """``/compact`` run elsewhere replaces, in the transcript, what Claude Code sent
    before: this log's surface becomes what the transcript shows (the summary and
    what it keeps). What it replaced stays in the log."""
    steps = claude_compaction_steps()
    log, elsewhere = SessionLog(), SessionLog()
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path)
        native = claude.run(log, "First question").native_session_id
        second = claude.run(log, "Second question", resume=native)
        assert second.status == "completed", second.error
        compacted = claude.run(elsewhere, "/compact", resume=native)
        assert compacted.status == "completed", compacted.error
        third = claude.run(log, "Third question", resume=native)
        assert third.status == "completed", third.error
        requests = server.model_requests()
    assert len(requests) == 5
    assert_claude_compaction_followed(log, requests[-1])


def test_a_turn_of_this_log_cut_before_any_reply_is_not_taken_for_one_run_elsewhere(
    tmp_path: Path,
) -> None:
    """The second run times out on a stalled model: its prompt is in the transcript
    with nothing of the log's native ids beside it. It is the log's own turn, not one
    run elsewhere: the history holds it once, as Claude Code sends it. Claude Code
    answers the cut prompt, when the session is resumed, with a reply of its own
    (``No response requested.``, model ``<synthetic>``) that it writes to the transcript
    and does not stream: it is logged where Claude Code sends it, before the third
    prompt."""
    steps = [Reply(text="One."), Stall(60, Reply(text="late")), Reply(text="Three.")]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path)
        native = claude.run(log, "First question").native_session_id
        cut = runner("claude-code", server.url, tmp_path, timeout=3).run(
            log, "Second question", resume=native
        )
        assert isinstance(cut.error, RuntimeTimeoutError), cut.error
        third = claude.run(log, "Third question", resume=native)
        assert third.status == "completed", third.error
        sent = server.model_requests()[-1]
    imported = _from_transcript(log.events())
    assert [type(e) for e in imported] == [AssistantMessageEvent]  # the made-up reply only
    sent_skeleton = anthropic_skeleton(sent.body)
    assert sent_skeleton[3] == ("assistant", "No response requested.")
    assert log_skeleton(log.derive_messages())[:-1] == sent_skeleton
    # the third run's own events are kept: its prompt and reply, shown again after it
    prompts = [e for e in log.events() if isinstance(e, UserMessageEvent)]
    assert [p.content[0].text for p in prompts].count("Third question") == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("hook", ["interrupt_when", "kill_when"])
def test_a_turn_cut_mid_message_is_logged_as_claude_code_sends_it_next(
    hook: str, tmp_path: Path
) -> None:
    """A run interrupted (or its CLI killed) mid-message, then resumed: the history is
    what Claude Code sends next, the reply it makes up for the cut prompt included."""
    long_text = "This is a long answer that streams slowly. " * 12
    steps = [Reply(text="One."), Reply(text=long_text), Reply(text="Three.")]
    log = SessionLog()
    with FakeModelServer(steps, delay=0.05) as server:
        claude = runner("claude-code", server.url, tmp_path)
        native = claude.run(log, "First question").native_session_id
        cutter = runner("claude-code", server.url, tmp_path, **{hook: first_text_delta})
        assert cutter.run(log, "Second question", resume=native).status == "interrupted"
        third = claude.run(log, "Third question", resume=native)
        assert third.status == "completed", third.error
        sent = server.model_requests()[-1]
    sent_skeleton = anthropic_skeleton(sent.body)
    assert ("assistant", "No response requested.") in sent_skeleton
    assert log_skeleton(log.derive_messages())[:-1] == sent_skeleton


def _tool_result_arrived(native: object) -> bool:
    return type(native).__name__ == "UserMessage"


def _answer_by_last_prompt(api: str, body: dict[str, Any]) -> Reply | Stall:
    """Each request answered by what it asks (a killed CLI may or may not have sent the
    request after a tool result: a script's order would depend on it)."""
    last = body["messages"][-1]["content"]
    blocks = [{"type": "text", "text": last}] if isinstance(last, str) else last
    texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
    if any(b.get("type") == "tool_result" for b in blocks) and not texts:
        return Stall(20, Reply(text="Too late."))
    if any("Second question" in text for text in texts):
        return Reply(text="Running.", calls=[ShellCall("echo 1+1 | bc")])
    return Reply(text="Three." if any("Third" in text for text in texts) else "One.")


@pytest.mark.parametrize("kill_at", ["call", "result"])
def test_a_claude_code_killed_around_a_tool_is_logged_as_it_sends_next(
    kill_at: str, tmp_path: Path
) -> None:
    """Killed when the tool call (or its result) arrives: the transcript may lack the
    end of the turn (Claude Code writes it a little after the fact) and, resumed,
    Claude Code answers what it has itself (an interrupted result, its made-up
    reply). How much it lost varies from run to run; the history is what it sends."""
    kill_when = tool_started if kill_at == "call" else _tool_result_arrived
    log = SessionLog()
    with FakeModelServer(responder=_answer_by_last_prompt) as server:
        claude = runner("claude-code", server.url, tmp_path)
        native = claude.run(log, "First question").native_session_id
        killer = runner("claude-code", server.url, tmp_path, kill_when=kill_when)
        assert killer.run(log, "Second question", resume=native).status == "interrupted"
        third = claude.run(log, "Third question", resume=native)
        assert third.status == "completed", third.error
        sent = server.model_requests()[-1]
    assert log_skeleton(log.derive_messages())[:-1] == anthropic_skeleton(sent.body)
    assert "Running." in str([getattr(e, "content", "") for e in log.events()])  # kept
