"""Parallel calls with the real Codex CLI (app-server) against the fake model server.

One response holds reasoning, a message and two ``exec_command`` calls. Codex runs both
(one after the other, in no fixed order) and sends, in its next request, the response's
items then both outputs. The oracle (as in ``tests/e2e/test_codex_resume.py``): the
history derived from the log, rendered for the same model, is that request's ``input``.
Runs like the end-to-end tests (``tests/e2e/_support.runner``): skipped without the
``codex`` extra, required in CI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.openai_responses import render_request
from tests.e2e._support import codex_conversation, comparable_item, runner
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    RequestHeaderEvent,
    ToolResultEvent,
    WarningEvent,
)
from universal_event.fake_models import FakeModelServer, Reply, ShellCall
from universal_event.log import SessionLog
from universal_event.messages import Message
from universal_event.parts import ToolCallPart

TWO = [ShellCall("echo one"), ShellCall("echo two")]
STEPS = [
    Reply(thinking="Plan both.", text="Running both.", calls=TWO),
    Reply(text="Both ran."),
    Reply(thinking="Plan again.", text="Again.", calls=TWO),
    Reply(text="Both ran again."),
    Reply(text="Bye."),
]
HEADER = RequestHeaderEvent(
    provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
)


def _conversation(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [comparable_item(item) for item in codex_conversation(items)]


def _rendered(history: list[Message]) -> list[dict[str, Any]]:
    return [comparable_item(item) for item in render_request(history, HEADER)["input"]]


def _streamed(events: list[Event]) -> tuple[AssistantMessageEvent, list[ToolResultEvent]]:
    """The turn's message with the calls and the results after it, as the live stream
    logged them (no corrections): a message, both results, the answer — nothing else."""
    logged = [
        e
        for e in events
        if isinstance(e, AssistantMessageEvent | ToolResultEvent) and e.surface is None
    ]
    kinds = [AssistantMessageEvent, ToolResultEvent, ToolResultEvent, AssistantMessageEvent]
    assert [type(e) for e in logged] == kinds
    message, *results, _ = logged
    assert isinstance(message, AssistantMessageEvent)
    return message, [r for r in results if isinstance(r, ToolResultEvent)]


def test_parallel_calls_are_logged_as_codex_sends_them_next(tmp_path: Path) -> None:
    log = SessionLog()
    with FakeModelServer(STEPS) as server:
        codex = runner("codex", server.url, tmp_path)
        first = codex.run(log, "Run echo one and echo two")
        assert first.status == "completed", first.error
        history1 = log.derive_messages()
        resumed = codex.run(log, "Once more", resume=first.native_session_id)
        assert resumed.status == "completed", resumed.error
        history2 = log.derive_messages()
        final = codex.run(log, "Thanks", resume=first.native_session_id)
        assert final.status == "completed", final.error
        requests = server.model_requests()
    assert not [e for e in log.events() if isinstance(e, WarningEvent)]

    # A new thread (raw events on): logged exactly as streamed, nothing to correct ...
    assert not [e for e in first.events if getattr(e, "surface", None)]
    message, results = _streamed(first.events)
    calls = [p for p in message.content if isinstance(p, ToolCallPart)]
    assert [c.name for c in calls] == ["exec_command", "exec_command"]
    assert [r.call_id for r in results] == [c.id for c in calls]
    # ... and equal to what Codex sent next: one response's items, then both outputs.
    rendered = _rendered(history1)
    assert rendered == _conversation(requests[2].body["input"])[: len(rendered)]

    # A resumed thread (no raw events): one message with both calls, both results after
    # it, in the order the commands started ...
    message, results = _streamed(resumed.events)
    started = [p.id for p in message.content if isinstance(p, ToolCallPart)]
    assert len(started) == 2
    assert [r.call_id for r in results] == started
    # ... corrected from the rollout (no mismatch warning, asserted above; results paired
    # by call id, whichever command ran first): the history is what Codex sent next.
    rendered = _rendered(history2)
    sent = _conversation(requests[4].body["input"])[: len(rendered)]
    assert rendered == sent
