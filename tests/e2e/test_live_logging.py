"""Claude Code and Codex driven for real, offline, logged live (issue 9, part 2).

Each test scripts the fake model server, runs the real CLI through its SDK and checks
the universal log against what the server saw: the assistant messages against what it
sent, the tool results against what the runtime sent back in its next request.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e._support import (
    AUTO_COMPACT_LIMITS,
    COMPACTION_SUMMARY,
    RUNTIMES,
    anthropic_skeleton,
    assert_claude_compaction_followed,
    assert_claude_message_is_what_server_sent,
    assert_codex_message_is_what_server_sent,
    claude_compaction_steps,
    claude_sent_results,
    codex_sent_results,
    command_output,
    first_text_delta,
    log_skeleton,
    of_type,
    responses_skeleton,
    result_text,
    runner,
    tool_started,
    validate_anthropic_messages,
    validate_responses_input,
    without_error_flags,
)
from universal_event.events import (
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    ToolResultEvent,
    TurnEndEvent,
)
from universal_event.fake_models import FakeModelServer, HttpError, Reply, ShellCall, Stall
from universal_event.log import SessionLog
from universal_event.parts import TextPart, ToolCallPart
from universal_event.repair import find_open_work

TOOL_TURN = [
    Reply(thinking="The user wants bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
    Reply(text="It is 2."),
]


def _contiguous(log: SessionLog) -> None:
    events = log.events()
    assert [e.seq for e in events] == list(range(len(events)))
    assert {e.session_id for e in events} == {log.session_id}
    assert list(log.store.read(log.session_id)) == events  # everything reached the store


def _only_model_calls(server: FakeModelServer, runtime: str) -> None:
    """Every request the runtime made went to the fake model endpoint (nothing else)."""
    path = "/v1/messages" if runtime == "claude-code" else "/v1/responses"
    assert server.requests
    assert {r.path.split("?")[0] for r in server.requests} == {path}


def test_validators_can_fail() -> None:
    """The request validators refuse a tool_use without input and a call without arguments."""
    with pytest.raises(ValueError):
        validate_anthropic_messages(
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "x", "name": "y"}]}]
        )
    with pytest.raises(ValueError):
        validate_responses_input([{"type": "function_call", "call_id": "c", "name": "n"}])


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_tool_turn_is_logged_live_as_the_server_saw_it(runtime: str, tmp_path: Any) -> None:
    log = SessionLog()
    durable_before_result: list[bool] = []

    def watch(native: Any) -> None:
        # At each native message: a tool result in the store has its call stored before it.
        stored = list(log.store.read(log.session_id))
        calls = {
            part.id
            for event in stored
            if isinstance(event, AssistantMessageEvent)
            for part in event.content
            if isinstance(part, ToolCallPart)
        }
        for event in stored:
            if isinstance(event, ToolResultEvent):
                durable_before_result.append(event.call_id in calls)

    with FakeModelServer(TOOL_TURN) as server:
        result = runner(runtime, server.url, tmp_path, on_native=watch).run(
            log, "Use the shell to compute 1+1 with bc"
        )
    assert result.status == "completed", result.error
    assert durable_before_result and all(durable_before_result)
    first, second = server.model_requests()
    messages = of_type(result.events, AssistantMessageEvent)
    (tool_result,) = of_type(result.events, ToolResultEvent)
    assert len(messages) == 2
    if runtime == "claude-code":
        assert_claude_message_is_what_server_sent(messages[0], first)
        assert_claude_message_is_what_server_sent(messages[1], second)
        # bc really ran: "2" is its output, and it is what Claude Code sent back
        assert claude_sent_results(second) == {tool_result.call_id: ("2", False)}
        assert result_text(tool_result) == "2"
    else:
        assert_codex_message_is_what_server_sent(messages[0], first)
        assert_codex_message_is_what_server_sent(messages[1], second)
        # exactly what the model saw (Codex's header and all), the plain output beside it
        assert codex_sent_results(second) == {tool_result.call_id: result_text(tool_result)}
        assert command_output(result_text(tool_result)) == "2\n"
        assert tool_result.details["output"] == "2\n" and tool_result.exit_code == 0
    assert of_type(result.events, TurnEndEvent)[-1].status == "completed"
    _contiguous(log)
    _only_model_calls(server, runtime)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_failed_command_is_an_error_result(runtime: str, tmp_path: Any) -> None:
    steps = [
        Reply(text="Trying.", calls=[ShellCall("echo oops >&2; exit 3")]),
        Reply(text="It failed."),
    ]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        result = runner(runtime, server.url, tmp_path).run(log, "Run the failing command")
    assert result.status == "completed", result.error
    (tool_result,) = of_type(result.events, ToolResultEvent)
    assert tool_result.is_error
    _, second = server.model_requests()
    if runtime == "claude-code":
        assert claude_sent_results(second) == {tool_result.call_id: ("Exit code 3\noops", True)}
        assert result_text(tool_result) == "Exit code 3\noops"
    else:
        assert tool_result.exit_code == 3
        assert codex_sent_results(second) == {tool_result.call_id: result_text(tool_result)}
        assert "Process exited with code 3\n" in result_text(tool_result)
        assert command_output(result_text(tool_result)) == "oops\n"
        assert tool_result.details["output"] == "oops\n"
    _contiguous(log)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_http_500_is_retried_and_logged(runtime: str, tmp_path: Any) -> None:
    steps = [HttpError(500, "boom"), Reply(text="Recovered after a retry.")]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        result = runner(runtime, server.url, tmp_path).run(log, "Say something")
    assert result.status == "completed", result.error
    failed, retried = server.model_requests()
    key = "messages" if runtime == "claude-code" else "input"
    assert failed.body[key] == retried.body[key]  # the same request again
    (message,) = of_type(result.events, AssistantMessageEvent)
    assert message.content[-1].text == "Recovered after a retry."  # type: ignore[union-attr]
    if runtime == "claude-code":
        retries = [e for e in of_type(result.events, ErrorEvent) if e.retryable and not e.fatal]
        assert retries and retries[0].http_status in (500, None)
    _contiguous(log)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_interrupt_ends_the_turn_interrupted(runtime: str, tmp_path: Any) -> None:
    long_text = "This is a long answer that streams slowly. " * 12
    log = SessionLog()
    with FakeModelServer([Reply(text=long_text)], delay=0.05) as server:
        run = runner(runtime, server.url, tmp_path, interrupt_when=first_text_delta)
        result = run.run(log, "Tell me a long story")
    assert result.status == "interrupted", result.error
    (turn_end,) = of_type(result.events, TurnEndEvent)
    assert turn_end.status == "interrupted"
    for message in of_type(result.events, AssistantMessageEvent):
        text = "".join(getattr(p, "text", "") for p in message.content)
        assert len(text) < len(long_text)  # cut before the whole answer arrived
    assert not find_open_work(log.events())  # closed cleanly, nothing for repair
    _contiguous(log)
    assert len(server.model_requests()) == 1


def _events(result: Any) -> list[Event]:
    return list(result.events)


def _tool_result_arrived(native: Any) -> bool:
    """Claude: the user message carrying the tool result; Codex: the command completed."""
    if type(native).__name__ == "UserMessage":
        return True
    payload = getattr(native, "payload", None)
    item = getattr(payload, "item", None)
    return (
        getattr(native, "method", None) == "item/completed"
        and "ommand" in type(getattr(item, "root", item)).__name__
    )


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_runtime_killed_mid_turn_closes_the_turn(runtime: str, tmp_path: Any) -> None:
    """SIGKILL the CLI after its tool ran: what was logged stays, the turn ends interrupted."""
    steps = [TOOL_TURN[0], Stall(20, Reply(text="never seen"))]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        run = runner(runtime, server.url, tmp_path, kill_when=_tool_result_arrived)
        result = run.run(log, "Use the shell to compute 1+1 with bc")
    assert result.status == "interrupted"
    (tool_result,) = of_type(log.events(), ToolResultEvent)
    # Codex: the wrapped text when its raw output item came before the kill, else the
    # plain output; the command's own output is in details either way.
    plain = tool_result.details["output"] if runtime == "codex" else result_text(tool_result)
    assert plain.strip() == "2"
    assert of_type(log.events(), TurnEndEvent)[-1].status == "interrupted"
    assert not find_open_work(log.events()).turns  # closed by the runner, not left to repair
    assert len(of_type(log.events(), AssistantMessageEvent)) == 1  # the answer never came
    _contiguous(log)


def test_a_missing_runtime_fails_in_ci_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.e2e import _support

    monkeypatch.setattr(_support, "runtime_available", lambda runtime: False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("UNIVERSAL_EVENT_REQUIRE_RUNTIMES", raising=False)
    with pytest.raises(pytest.skip.Exception):
        _support.need("codex")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required in CI"):
        _support.need("codex")
    monkeypatch.delenv("CI")
    monkeypatch.setenv("UNIVERSAL_EVENT_REQUIRE_RUNTIMES", "1")
    with pytest.raises(pytest.fail.Exception, match="required in CI"):
        _support.need("claude-code")


def test_a_claude_compaction_run_leaves_what_claude_code_sends_next(tmp_path: Any) -> None:
    """``/compact`` in a run (the real CLI): the summary replaces what came before it on
    the surface, but the message the compaction preserved, and the prompt gives way to
    the command's caveat and name, as Claude Code sends them; the next request (turn
    three's) is the oracle. The earlier turns and the prompt stay in the log."""
    from universal_event.events import UserMessageEvent

    summary = COMPACTION_SUMMARY
    steps = claude_compaction_steps()
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path)
        log = SessionLog()
        native = claude.run(log, "First question").native_session_id
        for prompt in ("Second question", "/compact", "Third question"):
            result = claude.run(log, prompt, resume=native)
            assert result.status == "completed", result.error
        sent = server.model_requests()[-1].body["messages"]
    texts = [
        (message.__struct_config__.tag, part.text.rstrip("\n"))
        for message in log.derive_messages()
        for part in message.content
        if isinstance(part, TextPart)
    ]
    first = sent[0]["content"]
    assert isinstance(first, str) and summary in first
    assert texts[0] == ("user", first.rstrip("\n"))
    assert (
        texts[1]
        == ("assistant", "Turn two done.")
        == (sent[1]["role"], sent[1]["content"][0]["text"])
    )
    assert [role for role, _ in texts[2:]] == ["user"] * 4 + ["assistant"]
    assert texts[2][1].startswith("<local-command-caveat>")
    assert texts[3][1].startswith("<command-name>/compact</command-name>")
    assert texts[4:] == [
        ("user", "<local-command-stdout>Compacted </local-command-stdout>"),
        ("user", "Third question"),
        ("assistant", "Turn three after compaction."),
    ]
    sent_blocks = [
        block["text"].rstrip("\n") for block in sent[2]["content"] if block["type"] == "text"
    ]
    assert sent_blocks[-4:] == [text.rstrip("\n") for _, text in texts[2:6]]
    logged = [e.content[0].text for e in log.events() if isinstance(e, UserMessageEvent)]  # type: ignore[union-attr]
    assert logged[:3] == ["First question", "Second question", "/compact"]  # not lost


def test_an_automatic_claude_compaction_leaves_what_claude_code_sends_next(tmp_path: Any) -> None:
    """Claude Code compacts by itself past its threshold (lowered here through its own
    variables; the fake model reports 60k input tokens): the summary replaces what came
    before it but the preserved message, as with ``/compact``; the next request is the
    oracle."""
    steps = claude_compaction_steps(automatic=True)
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path, extra_env=AUTO_COMPACT_LIMITS)
        log = SessionLog()
        native = claude.run(log, "First question").native_session_id
        for prompt in ("Second question", "Third question"):
            result = claude.run(log, prompt, resume=native)
            assert result.status == "completed", result.error
        requests = server.model_requests()
    assert len(requests) == 5
    boundaries = [
        e for e in log.events() if getattr(e, "native_type", None) == "system/compact_boundary"
    ]
    assert len(boundaries) == 1

    assert_claude_compaction_followed(log, requests[-1])


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_tool_run_interrupted_then_resumed_is_logged_as_sent_next(
    runtime: str, tmp_path: Any
) -> None:
    """Interrupted while its command runs, the turn ends with the runtime's own record
    of it (Claude Code: a refused result, ``[Request interrupted by user for tool use]``
    and, on resuming, its made-up reply; Codex: the aborted output and
    ``<turn_aborted>``); the next turn's request is the oracle."""
    steps = [
        Reply(text="One."),
        Reply(text="Running.", calls=[ShellCall("sleep 20; echo done")]),
        Reply(text="Three."),
    ]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        plain = runner(runtime, server.url, tmp_path)
        native = plain.run(log, "First question").native_session_id
        interrupting = runner(runtime, server.url, tmp_path, interrupt_when=tool_started)
        cut = interrupting.run(log, "Second question", resume=native)
        assert cut.status == "interrupted", cut.error
        third = plain.run(log, "Third question", resume=native)
        assert third.status == "completed", third.error
        sent = server.model_requests()[-1]
    logged = log_skeleton(log.derive_messages())[:-1]
    if runtime == "claude-code":
        assert logged == anthropic_skeleton(sent.body)
    else:
        assert list(without_error_flags(logged)) == list(
            without_error_flags(responses_skeleton(sent.body))
        )
    assert len([entry for entry in logged if entry[0] == "result"]) == 1
