"""One session from Claude Code to Codex and back (issue 9, part 3), and after a crash.

Success is measured at the fake model server: the first request the target runtime
sends holds the whole prior history — user turns, assistant text, tool calls and their
results from the other runtime — valid for that provider (checked with the SDKs' own
parameter types, walked deeply); the target's events land in the same universal session
with contiguous seqs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from adapters._render import ANTHROPIC_TOOL_IDS, RESPONSES_TOOL_IDS, map_tool_call_id
from tests.e2e._support import (
    Entry,
    anthropic_skeleton,
    log_skeleton,
    need,
    of_type,
    responses_skeleton,
    runner,
    validate_anthropic_messages,
    validate_responses_input,
    without_error_flags,
)
from universal_event.events import (
    RuntimeSwitchEvent,
    SessionInterruptedEvent,
    ToolResultEvent,
    TurnEndEvent,
)
from universal_event.fake_models import FakeModelServer, Reply, ShellCall, Stall
from universal_event.handoff import continue_session
from universal_event.log import SessionLog
from universal_event.repair import repair
from universal_event.stores import open_store

ROOT = Path(__file__).resolve().parents[2]


def _mapped(entries: list[Entry], fmt: Any) -> list[Entry]:
    """The log's entries with tool-call ids as the target sees them (rule 5)."""
    out: list[Entry] = []
    for entry in entries:
        if entry[0] in ("call", "result"):
            entry = (entry[0], map_tool_call_id(entry[1], fmt), *entry[2:])
        out.append(entry)
    return out


def _check_contiguous(log: SessionLog) -> None:
    events = log.events()
    assert [e.seq for e in events] == list(range(len(events)))
    assert {e.session_id for e in events} == {log.session_id}


def test_claude_code_to_codex_and_back(tmp_path: Path) -> None:
    need("claude-code")
    need("codex")
    steps = [
        # Claude Code: a tool turn
        Reply(thinking="Run bc.", text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
        Reply(text="It is 2."),
        # Codex: a failing command, then an answer
        Reply(thinking="Check.", text="Checking here.", calls=[ShellCall("echo no >&2; exit 3")]),
        Reply(text="That command failed with exit 3."),
        # Claude Code again
        Reply(text="Back in Claude Code, I have it all."),
    ]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path)
        codex = runner("codex", server.url, tmp_path)

        first = continue_session(log, claude, "Use the shell to compute 1+1 with bc")
        assert first.status == "completed", first.error
        history = log_skeleton(log.derive_messages())

        second = continue_session(log, codex, "Now run a failing command")
        assert second.status == "completed", second.error
        opening = server.model_requests("responses")[0]
        validate_responses_input(opening.body["input"])
        expected = [*_mapped(history, RESPONSES_TOOL_IDS), ("user", "Now run a failing command")]
        assert list(without_error_flags(responses_skeleton(opening.body))) == list(
            without_error_flags(expected)
        )
        # Claude Code's tool call arrived as Codex forwards it: name and id unchanged
        assert any(
            e[:3] == ("call", history[2][1], "Bash") for e in responses_skeleton(opening.body)
        )
        history = log_skeleton(log.derive_messages())

        third = continue_session(log, claude, "What happened in Codex?")
        assert third.status == "completed", third.error
        back = server.model_requests("anthropic")[2]
        validate_anthropic_messages(back.body["messages"])
        expected = [*_mapped(history, ANTHROPIC_TOOL_IDS), ("user", "What happened in Codex?")]
        assert anthropic_skeleton(back.body) == expected
        # Codex's failed command came back as an error result
        assert [e for e in anthropic_skeleton(back.body) if e[0] == "result"][1][3] is True

    switches = of_type(log.events(), RuntimeSwitchEvent)
    assert [(s.from_runtime, s.to_runtime) for s in switches] == [
        ("claude-code", "codex"),
        ("codex", "claude-code"),
    ]
    assert switches[0].native_session_id == second.native_session_id
    assert switches[1].native_session_id == third.native_session_id
    _check_contiguous(log)
    runtimes = [e.source.runtime for e in log.events() if isinstance(e, TurnEndEvent) and e.source]
    assert runtimes == ["claude-code", "codex", "claude-code"]
    assert {r.path.split("?")[0] for r in server.requests} == {"/v1/messages", "/v1/responses"}


def test_crash_mid_turn_keeps_checkpoints_repairs_and_hands_over(tmp_path: Path) -> None:
    """Kill the whole process (our CLI and Claude Code) while the model is answering."""
    need("claude-code")
    need("codex")
    store_url = f"sqlite:///{tmp_path / 'sessions.db'}"
    steps = [
        Reply(text="Running it.", calls=[ShellCall("echo 1+1 | bc")]),
        Stall(30, Reply(text="Too late.")),
    ]
    with FakeModelServer(steps) as server:
        command = [
            sys.executable, "-m", "universal_event", "run", "--runtime", "claude-code",
            "--session", "crashy", "--store", store_url, "--model-url", server.url,
            "--workdir", str(tmp_path / "homes"), "--cwd", str(tmp_path / "work"),
            "Use the shell to compute 1+1 with bc",
        ]  # fmt: skip
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 30
            while len(server.model_requests()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(server.model_requests()) == 2, "Claude Code never sent the tool result"
        finally:
            os.killpg(process.pid, signal.SIGKILL)  # the process group we started
            process.wait()
        sent_back = server.model_requests()[1].body["messages"]

    store = open_store(store_url)
    try:
        before = list(store.read("crashy"))
        # every event checkpointed before the tool result went to the model is there
        (result,) = [e for e in before if isinstance(e, ToolResultEvent)]
        assert result.content[0].text == "2"  # type: ignore[union-attr]
        assert not any(isinstance(e, TurnEndEvent) for e in before)
        repaired = repair(store, "crashy")
        assert [type(e).__name__ for e in repaired] == [
            "StepEndEvent",
            "TurnEndEvent",
            "SessionInterruptedEvent",
            "SessionEndedSeqEvent",
        ]
        assert of_type(repaired, TurnEndEvent)[0].status == "interrupted"
        assert isinstance(repaired[2], SessionInterruptedEvent)

        log = SessionLog(store, "crashy")
        history = log_skeleton(log.derive_messages())
        assert [e[0] for e in history] == ["user", "assistant", "call", "result"]
        # the log holds what Claude Code itself sent back before it died
        assert anthropic_skeleton({"messages": sent_back})[-1] == history[-1]
        with FakeModelServer([Reply(text="Picked up after the crash.")]) as server:
            codex = runner("codex", server.url, tmp_path)
            after = continue_session(log, codex, "Continue please")
            assert after.status == "completed", after.error
            opening = server.model_requests("responses")[0]
        validate_responses_input(opening.body["input"])
        assert list(without_error_flags(responses_skeleton(opening.body))) == list(
            without_error_flags([*history, ("user", "Continue please")])
        )
        log.close()
        _check_contiguous(SessionLog.open(store, "crashy"))
    finally:
        store.close()
