"""A turn Codex compacts by itself is logged as Codex sends it next (the real CLI).

Past ``model_auto_compact_token_limit`` Codex compacts inside a turn: it asks the model
for a summary, then goes on with a replacement history (the user messages kept and the
summary, as a user message). The live stream shows only a ``contextCompaction`` item;
the runner takes the history from the rollout's ``compacted`` line. The oracle: the
history derived from the log after that turn, rendered for the same model, is the
``input`` Codex sent in its next turn.
"""

from __future__ import annotations

from pathlib import Path

from adapters.openai_responses import render_request
from tests.e2e._support import codex_conversation, comparable_item, of_type, runner
from universal_event.events import (
    AssistantMessageEvent,
    NativeUnknownEvent,
    RequestHeaderEvent,
    ToolResultEvent,
    WarningEvent,
)
from universal_event.fake_models import FakeModelServer, Reply, ShellCall
from universal_event.log import SessionLog
from universal_event.parts import TextPart

SUMMARY = "SUMMARY: one question answered; computing 1+1 with bc gave 2."
STEPS = [
    Reply(text="Turn one done."),
    Reply(thinking="Plan bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
    Reply(text=SUMMARY),  # the compaction request, inside turn two
    Reply(text="It is 2."),
    Reply(text="Turn three done."),
]
LIMIT = 150
"""The fake model reports 120 tokens a response: turn two passes the limit after its
first response, and Codex compacts before sending the command's output."""


def test_a_turn_codex_compacted_is_logged_as_codex_sends_it_next(tmp_path: Path) -> None:
    log = SessionLog()
    with FakeModelServer(STEPS) as server:
        codex = runner("codex", server.url, tmp_path, auto_compact_token_limit=LIMIT)
        first = codex.run(log, "First question")
        assert first.status == "completed", first.error
        thread = first.native_session_id
        second = codex.run(log, "Use the shell to compute 1+1 with bc", resume=thread)
        assert second.status == "completed", second.error
        history = log.derive_messages()
        third = codex.run(log, "Third question", resume=thread)
        assert third.status == "completed", third.error
        requests = server.model_requests()
    assert len(requests) == 5
    compaction_request, next_turn = requests[2], requests[4]
    assert "Turn one done." in str(compaction_request.body["input"])  # it compacted these

    # The live stream showed the compaction as an item only ...
    kinds = {e.native_type for e in of_type(second.events, NativeUnknownEvent)}
    assert "item/started:contextCompaction" in kinds
    # ... the turn's history came from the rollout, without a mismatch warning.
    assert not of_type(log.events(), WarningEvent)
    texts = [p.text for m in history for p in m.content if isinstance(p, TextPart)]
    assert "Turn one done." not in texts and "Running it." not in texts
    assert any(SUMMARY in text for text in texts)
    assert texts[-1] == "It is 2."
    # What the compaction replaced stays in the log, off the surface.
    logged = [e for e in log.events() if isinstance(e, AssistantMessageEvent | ToolResultEvent)]
    off_surface = {e.seq for e in logged} - set(log.surface_seqs())
    assert {e.seq for e in logged if "Turn one done." in str(e.content)} <= off_surface

    # The oracle: derive + render for the same model == what Codex sent next.
    header = RequestHeaderEvent(
        provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
    )
    rendered = render_request(history, header)["input"]
    sent = codex_conversation(next_turn.body["input"])
    assert [comparable_item(i) for i in rendered] == [comparable_item(i) for i in sent[:-1]]
    assert comparable_item(sent[-1])["content"] == "Third question"


MANUAL_STEPS = [
    Reply(thinking="Plan bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
    Reply(text="It is 2."),
    Reply(text=SUMMARY),  # the compaction request
    Reply(text="Turn three done."),
]


def test_compact_as_a_prompt_compacts_a_codex_thread_as_in_claude_code(tmp_path: Path) -> None:
    """``run(log, "/compact", resume=...)``: Codex compacts the thread (a turn of its own,
    ``thread/compact/start``); the history after it is what Codex sends next."""
    log = SessionLog()
    with FakeModelServer(MANUAL_STEPS) as server:
        codex = runner("codex", server.url, tmp_path)
        first = codex.run(log, "Use the shell to compute 1+1 with bc")
        assert first.status == "completed", first.error
        thread = first.native_session_id
        compacted = codex.run(log, " /compact\n", resume=thread)
        assert compacted.status == "completed", compacted.error
        history = log.derive_messages()
        third = codex.run(log, "Third question", resume=thread)
        assert third.status == "completed", third.error
        requests = server.model_requests()
    assert len(requests) == 4
    assert "Running it." in str(requests[2].body["input"])  # the compaction request
    assert not [e for e in compacted.events if "/compact" in str(getattr(e, "content", ""))]
    assert not of_type(log.events(), WarningEvent)
    texts = [p.text for m in history for p in m.content if isinstance(p, TextPart)]
    assert "It is 2." not in texts and any(SUMMARY in text for text in texts)

    header = RequestHeaderEvent(
        provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
    )
    rendered = render_request(history, header)["input"]
    sent = codex_conversation(requests[3].body["input"])
    assert [comparable_item(i) for i in rendered] == [comparable_item(i) for i in sent[:-1]]
    assert comparable_item(sent[-1])["content"] == "Third question"
