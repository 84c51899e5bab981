"""The oracle for Claude Code / the Claude Agent SDK.

For every captured run (tests/fixtures/captured/claude), the history derived from the
session log — assistant messages and tool results, block for block, thinking signature,
tool ids and inputs included — equals what the real runtime itself sent back to the
model in its last request. Claude Code's own additions are named and checked, not
ignored: ``<system-reminder>`` text blocks before the prompt, a ``<system-reminder>``
suffix on the last tool result, and ``cache_control`` on the last block.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from adapters.claude_sdk import ClaudeCodeAdapter
from tests.adapters._anthropic_support import (
    SYSTEM_REMINDER,
    claude_runs,
    cli_prompt,
    render_history,
    run_requests,
    sdk_objects,
)
from universal_event.log import SessionLog

SDK_PROMPT = "Use bash to compute 1+1 with bc"
"""The prompt of the captured SDK runs (their wire/sdk_to_cli.jsonl)."""


def _log_of_run(run: Path) -> SessionLog:
    adapter = ClaudeCodeAdapter()
    log = SessionLog()
    prompt = cli_prompt(run) if (run / "cmdline.txt").exists() else SDK_PROMPT
    log.extend(adapter.user_prompt(prompt))
    if (run / "stdout.jsonl").exists():
        log.extend(adapter.feed((run / "stdout.jsonl").read_bytes()))
    else:
        for message in sdk_objects(run / "sdk_messages.jsonl"):
            log.extend(adapter.feed(message))
    log.extend(adapter.close())
    return log


def _strip_claude_code_additions(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Remove — after asserting they are there — what Claude Code adds by itself."""
    messages = copy.deepcopy(messages)
    first = messages[0]["content"]
    reminders = [
        b for b in first if b["type"] == "text" and b["text"].startswith("<system-reminder>")
    ]
    assert reminders, "Claude Code prefixes the prompt with <system-reminder> blocks"
    messages[0]["content"] = [b for b in first if b not in reminders]
    cached = [
        (m, b)
        for m in messages
        for b in m["content"]
        if isinstance(b, dict) and "cache_control" in b
    ]
    assert cached, "Claude Code marks the last block with cache_control"
    assert all(m is messages[-1] for m, _ in cached), "cache_control only on the last message"
    for _, block in cached:
        assert block.pop("cache_control") == {"type": "ephemeral"}
    for message in messages:
        for block in message["content"]:
            if block.get("type") == "tool_result" and isinstance(block["content"], str):
                stripped = SYSTEM_REMINDER.sub("", block["content"])
                if message is messages[-1]:
                    assert stripped != block["content"], "reminder suffix on the last tool result"
                block["content"] = stripped
    return messages


@pytest.mark.parametrize("run", claude_runs(), ids=lambda run: f"{run.parent.name}/{run.name}")
def test_derived_history_equals_what_claude_code_sent_back(run: Path) -> None:
    log = _log_of_run(run)
    derived = render_history(log.derive_messages())
    requests = run_requests(run)
    assert requests
    sent = _strip_claude_code_additions(requests[-1]["messages"])
    # The last request's history is a prefix of what the log derived: the log also holds
    # the answer to that request (when there was one).
    assert derived[: len(sent)] == sent
    rest = derived[len(sent) :]
    assert all(m["role"] in ("assistant", "user") for m in rest)
    # Retried requests (HTTP 500, connection lost) send the same history each time.
    for request in requests[:-1]:
        earlier = _strip_claude_code_additions(request["messages"])
        assert derived[: len(earlier)] == earlier


def test_tool_turn_history_has_signature_ids_and_inputs() -> None:
    run = next(r for r in claude_runs() if r.name == "c01_tool")
    derived = render_history(_log_of_run(run).derive_messages())
    assert [m["role"] for m in derived] == ["user", "assistant", "user", "assistant"]
    thinking, text, tool_use = derived[1]["content"]
    assert thinking["type"] == "thinking" and thinking["signature"].startswith("ZmFrZS1z")
    assert text == {"type": "text", "text": "Let me compute that with bc."}
    assert tool_use == {
        "type": "tool_use",
        "id": "toolu_016f686f1746544348b5f5f1",
        "name": "Bash",
        "input": {"command": "echo 1+1 | bc", "description": "Compute 1+1 with bc"},
    }
    assert derived[2]["content"][0]["content"] == "2"


@pytest.mark.parametrize("name", ["c_err_http500_partial", "sdk03_err_http500_partial"])
def test_synthetic_error_message_never_enters_the_history(name: str) -> None:
    run = next(r for r in claude_runs() if r.name == name)
    log = _log_of_run(run)
    assert [m.__struct_config__.tag for m in log.derive_messages()] == ["user"]
    errors = [e for e in log.events() if e.__struct_config__.tag == "error"]
    assert [e.code for e in errors] == ["server_error", "server_error", "server_error"]
    assert [e.fatal for e in errors] == [False, False, True]
    assert errors[-1].message.startswith("API Error: 500")
