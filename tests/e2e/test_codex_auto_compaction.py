"""A Codex thread compacted mid-session is logged as Codex sends it next (the real CLI).

Codex compacts a thread by itself inside a turn, past ``model_auto_compact_token_limit``,
or when asked (``run(log, "/compact", resume=...)``, the app-server's
``thread/compact/start``): it asks the model for a summary, then goes on with a
replacement history (the user messages kept and the summary, as a user message). The
live stream shows only a ``contextCompaction`` item, or nothing of the compaction's own
turn; the runner takes the history from the rollout's ``compacted`` line. The oracle:
the history derived from the log after the compaction, rendered for the same model, is
the ``input`` Codex sent in its next turn.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from adapters.openai_responses import render_request
from tests.e2e._support import codex_conversation, comparable_item, of_type, runner
from universal_event.events import (
    AssistantMessageEvent,
    NativeUnknownEvent,
    RequestHeaderEvent,
    ToolResultEvent,
    WarningEvent,
)
from universal_event.fake_models import (
    FakeModelServer,
    HttpError,
    RecordedRequest,
    Reply,
    ShellCall,
    Stall,
)
from universal_event.log import SessionLog
from universal_event.messages import Message
from universal_event.parts import TextPart
from universal_event.runtimes import RunResult

SUMMARY = "SUMMARY: one question answered; computing 1+1 with bc gave 2."
BC = "Use the shell to compute 1+1 with bc"
LAST = "Third question"


def _three_turns(
    steps: list[Reply], prompts: tuple[str, str], tmp_path: Path, **hooks: Any
) -> tuple[SessionLog, RunResult, list[Message], list[RecordedRequest]]:
    """Run ``prompts`` then :data:`LAST` on one thread: the log, the second run, the
    history derived before the last run, and the model requests."""
    log = SessionLog()
    with FakeModelServer(steps) as server:
        codex = runner("codex", server.url, tmp_path, **hooks)
        first = codex.run(log, prompts[0])
        assert first.status == "completed", first.error
        thread = first.native_session_id
        second = codex.run(log, prompts[1], resume=thread)
        assert second.status == "completed", second.error
        history = log.derive_messages()
        last = codex.run(log, LAST, resume=thread)
        assert last.status == "completed", last.error
        return log, second, history, server.model_requests()


def _assert_history_is_what_codex_sent_next(
    log: SessionLog, history: list[Message], next_turn: RecordedRequest
) -> list[str]:
    """The oracle (derive + render for the same model == Codex's next ``input``, the
    prompt after it); the history's texts."""
    assert not of_type(log.events(), WarningEvent)  # no rollout mismatch
    header = RequestHeaderEvent(
        provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
    )
    rendered = render_request(history, header)["input"]
    sent = codex_conversation(next_turn.body["input"])
    assert [comparable_item(i) for i in rendered] == [comparable_item(i) for i in sent[:-1]]
    assert comparable_item(sent[-1])["content"] == LAST
    texts = [p.text for m in history for p in m.content if isinstance(p, TextPart)]
    assert any(SUMMARY in text for text in texts)
    return texts


def test_a_turn_codex_compacted_is_logged_as_codex_sends_it_next(tmp_path: Path) -> None:
    steps = [
        Reply(text="Turn one done."),
        Reply(thinking="Plan bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
        Reply(text=SUMMARY),  # the compaction request, inside turn two
        Reply(text="It is 2."),
        Reply(text="Turn three done."),
    ]
    # The fake model reports 120 tokens a response: turn two passes the limit after its
    # first response, and Codex compacts before sending the command's output.
    log, second, history, requests = _three_turns(
        steps, ("First question", BC), tmp_path, auto_compact_token_limit=150
    )
    assert len(requests) == 5
    assert "Turn one done." in str(requests[2].body["input"])  # what it compacted
    kinds = {e.native_type for e in of_type(second.events, NativeUnknownEvent)}
    assert "item/started:contextCompaction" in kinds  # all the live stream shows

    texts = _assert_history_is_what_codex_sent_next(log, history, requests[4])
    assert "Turn one done." not in texts and "Running it." not in texts
    assert texts[-1] == "It is 2."
    # What the compaction replaced stays in the log, off the surface.
    logged = [e for e in log.events() if isinstance(e, AssistantMessageEvent | ToolResultEvent)]
    off_surface = {e.seq for e in logged} - set(log.surface_seqs())
    assert {e.seq for e in logged if "Turn one done." in str(e.content)} <= off_surface


def test_compact_as_a_prompt_compacts_a_codex_thread_as_in_claude_code(tmp_path: Path) -> None:
    steps = [
        Reply(thinking="Plan bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
        Reply(text="It is 2."),
        Reply(text=SUMMARY),  # the compaction request
        Reply(text="Turn three done."),
    ]
    log, compacted, history, requests = _three_turns(steps, (BC, " /compact\n"), tmp_path)
    assert len(requests) == 4
    assert "Running it." in str(requests[2].body["input"])  # what it compacted
    assert not [e for e in compacted.events if "/compact" in str(getattr(e, "content", ""))]

    texts = _assert_history_is_what_codex_sent_next(log, history, requests[3])
    assert "It is 2." not in texts


def test_a_compaction_the_model_fails_leaves_the_history_and_says_failed(tmp_path: Path) -> None:
    steps = [
        Reply(text="Turn one done."),
        *[HttpError(400, "no summary for you")] * 4,  # the compaction request, retried
    ]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        codex = runner("codex", server.url, tmp_path)
        first = codex.run(log, "First question")
        compacted = codex.run(log, "/compact", resume=first.native_session_id)
    assert compacted.status == "failed"
    texts = [p.text for m in log.derive_messages() for p in m.content if isinstance(p, TextPart)]
    assert texts == ["First question", "Turn one done."]


def test_a_turn_compacted_outside_the_runner_is_logged_as_codex_sends_it_next(
    tmp_path: Path,
) -> None:
    """Turn two runs on the thread from another log and Codex compacts inside it: this
    log takes it from the rollout before its next turn, the surface from the compaction
    on; what turn two sent before compacting is logged too, hidden."""
    steps = [
        Reply(text="Turn one done."),
        Reply(thinking="Plan bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
        Reply(text=SUMMARY),
        Reply(text="It is 2."),
        Reply(text="Turn three done."),
    ]
    log, elsewhere = SessionLog(), SessionLog()
    with FakeModelServer(steps) as server:
        codex = runner("codex", server.url, tmp_path, auto_compact_token_limit=150)
        thread = codex.run(log, "First question").native_session_id
        other = codex.run(elsewhere, BC, resume=thread)
        assert other.status == "completed", other.error
        last = codex.run(log, LAST, resume=thread)
        assert last.status == "completed", last.error
        requests = server.model_requests()
    assert len(requests) == 5
    history = log.derive_messages()[:-2]  # before the last turn
    texts = _assert_history_is_what_codex_sent_next(log, history, requests[4])
    assert "Turn one done." not in texts and texts[-1] == "It is 2."
    from_rollout = [e for e in log.events() if e.source and e.source.native_type == "rollout"]
    hidden = [e for e in from_rollout if getattr(e, "surface", None) is not None]
    assert any("Running it." in str(e.content) for e in hidden)  # type: ignore[attr-defined]
    assert {e.surface.op for e in hidden} >= {"hidden"}  # type: ignore[attr-defined]


def test_a_compaction_asked_outside_the_runner_is_applied_before_its_next_turn(
    tmp_path: Path,
) -> None:
    """``thread/compact/start`` on the thread from elsewhere (here another log's
    ``/compact``; the TUI's is the same turn in the rollout): this log's next turn
    starts from the compacted history, as Codex sends it."""
    steps = [
        Reply(thinking="Plan bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
        Reply(text="It is 2."),
        Reply(text=SUMMARY),  # the compaction request
        Reply(text="Turn three done."),
    ]
    log, elsewhere = SessionLog(), SessionLog()
    with FakeModelServer(steps) as server:
        codex = runner("codex", server.url, tmp_path)
        thread = codex.run(log, BC).native_session_id
        other = codex.run(elsewhere, "/compact", resume=thread)
        assert other.status == "completed", other.error
        last = codex.run(log, LAST, resume=thread)
        assert last.status == "completed", last.error
        requests = server.model_requests()
    assert len(requests) == 4
    texts = _assert_history_is_what_codex_sent_next(log, log.derive_messages()[:-2], requests[3])
    assert "It is 2." not in texts
    assert any("It is 2." in str(getattr(e, "content", "")) for e in log.events())  # kept


@pytest.mark.parametrize("hook", ["interrupt_when", "kill_when"])
def test_the_hooks_stop_a_codex_compaction(hook: str, tmp_path: Path) -> None:
    """``interrupt_when`` during ``/compact`` interrupts the compaction's turn (named by
    the rollout: its notifications do not name it), ``kill_when`` kills the app-server,
    instead of waiting for the model: the run ends interrupted, the history is left as
    it was."""
    armed: list[bool] = []
    steps = [Reply(text="Turn one done."), Stall(60, Reply(text=SUMMARY))]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        codex = runner("codex", server.url, tmp_path, **{hook: lambda _: bool(armed)})
        first = codex.run(log, "First question")
        armed.append(True)
        started = time.monotonic()
        compacted = codex.run(log, "/compact", resume=first.native_session_id)
        elapsed = time.monotonic() - started
    assert elapsed < 30
    assert compacted.status == "interrupted", compacted.error
    texts = [p.text for m in log.derive_messages() for p in m.content if isinstance(p, TextPart)]
    assert texts == ["First question", "Turn one done."]
