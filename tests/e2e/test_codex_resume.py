"""A resumed Codex thread is logged as Codex sent it to the model (issue 9, fidelity).

``thread/resume`` does not take ``experimentalRawEvents``: a resumed turn streams only
``commandExecution`` items (the command line, the plain output). The runner reconciles
each turn with the thread's rollout file, so the history derived from the log — rendered
for the same model — is exactly the ``input`` Codex sends in its next request, reasoning
(with ``encrypted_content``), the ``exec_command`` call and the wrapped output included.
"""

from __future__ import annotations

from pathlib import Path

from adapters.openai_responses import render_request
from tests.e2e._support import (
    codex_conversation,
    codex_sent_results,
    command_output,
    comparable_item,
    of_type,
    runner,
)
from universal_event.events import (
    AssistantMessageEvent,
    RequestHeaderEvent,
    ToolResultEvent,
    TurnEndEvent,
    WarningEvent,
)
from universal_event.fake_models import FakeModelServer, Reply, ShellCall
from universal_event.log import SessionLog
from universal_event.parts import ThinkingPart, ToolCallPart

STEPS = [
    Reply(thinking="Plan bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
    Reply(text="It is 2."),
    Reply(thinking="Plan again.", text="Again.", calls=[ShellCall("echo 2+2 | bc")]),
    Reply(text="It is 4."),
    Reply(text="Both done."),
]


def test_resumed_thread_history_is_what_codex_sent(tmp_path: Path) -> None:
    log = SessionLog()
    with FakeModelServer(STEPS) as server:
        codex = runner("codex", server.url, tmp_path)
        first = codex.run(log, "Use the shell to compute 1+1 with bc")
        assert first.status == "completed", first.error
        # a fresh thread has raw events: nothing to correct
        assert not [e for e in first.events if getattr(e, "surface", None)]
        resumed = codex.run(log, "Now 2+2", resume=first.native_session_id)
        assert resumed.status == "completed", resumed.error
        history = log.derive_messages()
        final = codex.run(log, "Thanks", resume=first.native_session_id)
        assert final.status == "completed", final.error
        opening = server.model_requests()[4]
    assert not of_type(log.events(), WarningEvent)

    # What the resumed turn streamed: the command, the plain output ...
    (streamed_result,) = [e for e in of_type(resumed.events, ToolResultEvent) if e.surface is None]
    assert streamed_result.content[0].text == "4\n"  # type: ignore[union-attr]
    # ... corrected from the rollout: the call the model made, the output it was sent.
    corrections = [e for e in resumed.events if getattr(e, "surface", None)]
    assert {type(e) for e in corrections} == {AssistantMessageEvent, ToolResultEvent}
    (result,) = of_type(corrections, ToolResultEvent)
    sent = codex_sent_results(server.model_requests()[3])
    assert sent[result.call_id] == result.content[0].text  # type: ignore[union-attr]
    assert command_output(sent[result.call_id]) == "4\n" == result.details["output"]
    call_message = of_type(corrections, AssistantMessageEvent)[0]
    thinking, _, call = call_message.content
    assert isinstance(call, ToolCallPart) and call.name == "exec_command"
    assert isinstance(thinking, ThinkingPart) and thinking.encrypted_content

    # The oracle: derive + render for the same model == what Codex sent next.
    header = RequestHeaderEvent(
        provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
    )
    rendered = render_request(history, header)["input"]
    sent_input = codex_conversation(opening.body["input"])[: len(rendered)]
    assert [comparable_item(i) for i in rendered] == [comparable_item(i) for i in sent_input]
    assert [i["type"] for i in rendered if "type" in i].count("reasoning") == 2


def test_turns_run_outside_the_runner_are_logged_before_its_next_turn(tmp_path: Path) -> None:
    """A turn another log's runner ran on the thread (as the Codex TUI or an SDK user
    would) is taken from the rollout before this log's next turn: the history is what
    Codex sends. A thread this log never ran a turn of imports nothing."""
    steps = [
        Reply(text="One."),
        Reply(thinking="Plan bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
        Reply(text="Two, elsewhere."),
        Reply(text="Three."),
    ]
    log, elsewhere = SessionLog(), SessionLog()
    with FakeModelServer(steps) as server:
        codex = runner("codex", server.url, tmp_path)
        first = codex.run(log, "First question")
        thread = first.native_session_id
        other = codex.run(elsewhere, "Use the shell to compute 1+1 with bc", resume=thread)
        assert other.status == "completed", other.error
        assert len(of_type(other.events, TurnEndEvent)) == 1  # the first turn: not its own
        third = codex.run(log, "Third question", resume=thread)
        assert third.status == "completed", third.error
        sent = server.model_requests()[3]
    assert not of_type(log.events(), WarningEvent)
    history = log.derive_messages()[:-1]  # up to the third prompt
    header = RequestHeaderEvent(
        provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
    )
    rendered = render_request(history, header)["input"]
    conversation = codex_conversation(sent.body["input"])
    assert [comparable_item(i) for i in rendered] == [comparable_item(i) for i in conversation]
    assert [i.get("type") for i in rendered].count("function_call_output") == 1
