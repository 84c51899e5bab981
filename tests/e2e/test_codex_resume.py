"""A resumed Codex thread is logged as Codex sent it to the model (issue 9, fidelity).

``thread/resume`` does not take ``experimentalRawEvents``: a resumed turn streams only
``commandExecution`` items (the command line, the plain output). The runner reconciles
each turn with the thread's rollout file, so the history derived from the log — rendered
for the same model — is exactly the ``input`` Codex sends in its next request, reasoning
(with ``encrypted_content``), the ``exec_command`` call and the wrapped output included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.openai_responses import render_request
from tests.e2e._support import (
    codex_conversation,
    codex_sent_results,
    command_output,
    comparable_item,
    first_text_delta,
    of_type,
    runner,
    tool_started,
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


def _history_is_what_codex_sent(history: list[Any], next_turn: Any) -> list[dict[str, Any]]:
    """The oracle: ``history`` rendered for the same model is the conversation Codex
    sent in ``next_turn`` (its prompt after it); the rendered items."""
    header = RequestHeaderEvent(
        provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
    )
    rendered = [comparable_item(i) for i in render_request(history, header)["input"]]
    conversation = [comparable_item(i) for i in codex_conversation(next_turn.body["input"])]
    assert rendered == conversation[:-1]
    return rendered


def test_an_interrupted_turn_is_logged_as_codex_sends_it_next(tmp_path: Path) -> None:
    """Codex keeps of an interrupted turn what completed and adds a ``<turn_aborted>``
    note it never streams; the cut message it does not send. The turn becomes the
    rollout's after the run (the cut message stays in the log, off the surface)."""
    long_text = "This is a long answer that streams slowly. " * 12
    log = SessionLog()
    steps = [Reply(text=long_text), Reply(text="Next answer.")]
    with FakeModelServer(steps, delay=0.05) as server:
        cut = runner("codex", server.url, tmp_path, interrupt_when=first_text_delta).run(
            log, "Tell me a long story"
        )
        assert cut.status == "interrupted", cut.error
        history = log.derive_messages()
        following = runner("codex", server.url, tmp_path).run(
            log, "Next", resume=cut.native_session_id
        )
        assert following.status == "completed", following.error
        sent = server.model_requests()[-1]
    rendered = _history_is_what_codex_sent(history, sent)
    assert str(rendered[-1]["content"]).startswith("<turn_aborted>")
    partial = [e for e in of_type(log.events(), AssistantMessageEvent) if e.status == "partial"]
    assert partial and partial[0].seq not in log.surface_seqs()


def test_a_turn_cut_by_the_timeout_is_logged_as_codex_sends_it_next(tmp_path: Path) -> None:
    """The app-server is killed while a command runs: Codex ends the turn when the
    thread is resumed (the command's output so far, ``<turn_aborted>``), which the next
    run logs before its prompt."""
    steps = [
        Reply(text="One."),
        Reply(text="Running.", calls=[ShellCall("sleep 30; echo done")]),
        Reply(text="Three."),
    ]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        codex = runner("codex", server.url, tmp_path)
        thread = codex.run(log, "First question").native_session_id
        cut = runner("codex", server.url, tmp_path, timeout=4).run(
            log, "Second question", resume=thread
        )
        assert cut.status == "interrupted"
        third = codex.run(log, "Third question", resume=thread)
        assert third.status == "completed", third.error
        sent = server.model_requests()[-1]
    history = log.derive_messages()[:-2]  # before the third prompt
    rendered = _history_is_what_codex_sent(history, sent)
    assert [i.get("type") for i in rendered].count("function_call_output") == 1
    assert str(rendered[-1]["content"]).startswith("<turn_aborted>")


def test_a_turn_whose_app_server_was_killed_is_logged_as_codex_sends_it_next(
    tmp_path: Path,
) -> None:
    """``kill_when`` kills the app-server mid-message: the rollout keeps the turn's
    prompt, not the cut message (and no end, no ``<turn_aborted>`` note); the next run
    takes the turn from the rollout before its prompt."""
    long_text = "This is a long answer that streams slowly. " * 12
    steps = [Reply(text="One."), Reply(text=long_text), Reply(text="Three.")]
    log = SessionLog()
    with FakeModelServer(steps, delay=0.05) as server:
        codex = runner("codex", server.url, tmp_path)
        thread = codex.run(log, "First question").native_session_id
        killer = runner("codex", server.url, tmp_path, kill_when=first_text_delta)
        killed = killer.run(log, "Second question", resume=thread)
        assert killed.status == "interrupted"
        third = codex.run(log, "Third question", resume=thread)
        assert third.status == "completed", third.error
        sent = server.model_requests()[-1]
    rendered = _history_is_what_codex_sent(log.derive_messages()[:-2], sent)
    assert rendered[-1] == {"role": "user", "content": "Second question"}
    partial = [e for e in of_type(log.events(), AssistantMessageEvent) if e.status == "partial"]
    assert partial and partial[0].seq not in log.surface_seqs()  # in the log, not sent


def test_a_command_whose_app_server_was_killed_gets_the_result_codex_makes_up(
    tmp_path: Path,
) -> None:
    """Killed while its command runs, the turn keeps the call without a result; when it
    sends the call again Codex answers it itself (``aborted``), in no file. The next run
    logs that result before its prompt."""
    steps = [
        Reply(text="One."),
        Reply(text="Running.", calls=[ShellCall("sleep 20; echo done")]),
        Reply(text="Three."),
    ]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        codex = runner("codex", server.url, tmp_path)
        thread = codex.run(log, "First question").native_session_id
        killer = runner("codex", server.url, tmp_path, kill_when=tool_started)
        assert killer.run(log, "Second question", resume=thread).status == "interrupted"
        third = codex.run(log, "Third question", resume=thread)
        assert third.status == "completed", third.error
        sent = server.model_requests()[-1]
    rendered = _history_is_what_codex_sent(log.derive_messages()[:-2], sent)
    assert rendered[-1]["type"] == "function_call_output" and rendered[-1]["output"] == "aborted"
