"""The command line over the Codex adapters: ``normalize`` and ``import`` + ``derive``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adapters._render_support import validate_history, validate_request
from universal_event.cli import main
from universal_event.codec import decode_lines
from universal_event.events import (
    AssistantMessageEvent,
    NativeUnknownEvent,
    ToolResultEvent,
    TurnEndEvent,
)

CAPTURED = Path(__file__).parent.parent / "fixtures" / "captured" / "codex"


@pytest.mark.parametrize(
    "path", ["exec/x01_tool/stdout.jsonl", "app_server/xs01_tool/wire/server_to_client.jsonl"]
)
def test_normalize_from_codex_detects_the_dialect(
    path: str, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    assert main(["normalize", "--from", "codex", str(CAPTURED / path)]) == 0
    events = decode_lines(capsysbinary.readouterr().out)
    assert len([e for e in events if isinstance(e, AssistantMessageEvent)]) == 2
    (result,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.content[0].text == "2\n"  # type: ignore[union-attr]
    assert isinstance(events[-1], TurnEndEvent) and events[-1].status == "completed"


@pytest.mark.parametrize(
    "path", ["exec/x01_tool/stdout.jsonl", "app_server/xs01_tool/wire/server_to_client.jsonl"]
)
def test_import_from_codex_live_output_then_derive(
    path: str, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """``import --from codex`` of exec or app-server output (the dialect detected), then
    the history: the command's call and its complete output (the app-server's first
    output chunk never came as a delta: xs01 has it only in ``aggregatedOutput``)."""
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    args = ["import", "--from", "codex", str(CAPTURED / path), "--session", "s1"]
    assert main([*args, "--store", store]) == 0
    assert b"events imported" in capsysbinary.readouterr().out
    assert main([*args, "--store", store]) == 0  # again: nothing new
    assert b"0 events imported" in capsysbinary.readouterr().out
    assert main(["derive", "--session", "s1", "--store", store]) == 0
    messages = json.loads(capsysbinary.readouterr().out)
    assert [m["role"] for m in messages][-3:] == ["assistant", "tool", "assistant"]
    call = messages[-3]["content"][-1]
    assert call["type"] == "tool_call" and "echo 1+1 | bc" in json.dumps(call["arguments"])
    assert messages[-2]["content"][0]["text"] == "2\n"


def test_import_codex_rollout_then_derive(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    rollout = CAPTURED / "exec" / "x01_tool" / "rollout.jsonl"
    args = ["import", "--from", "codex-rollout", str(rollout), "--session", "s1"]
    assert main([*args, "--store", store]) == 0
    capsysbinary.readouterr()
    assert main(["derive", "--session", "s1", "--store", store]) == 0
    messages = json.loads(capsysbinary.readouterr().out)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    call = messages[1]["content"][2]
    assert (call["type"], call["name"], call["id"]) == (
        "tool_call", "exec_command", "call_b88bea013f5f4e94b6dbf955",
    )  # fmt: skip
    assert call["arguments"] == {"cmd": "echo 1+1 | bc", "yield_time_ms": 10000}


@pytest.mark.parametrize(
    ("target", "model"),
    [("anthropic", "claude-sonnet-4-5"), ("openai-chat", None), ("openai-responses", None)],
)
def test_import_codex_rollout_then_render_for_each_target(
    target: str, model: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hand-run path of the audit: import a rollout, render it for every format."""
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    rollout = CAPTURED / "exec" / "x01_tool" / "rollout.jsonl"
    assert (
        main(
            ["import", "--from", "codex-rollout", str(rollout), "--session", "s1", "--store", store]
        )
        == 0
    )
    capsys.readouterr()
    render = ["render", "--session", "s1", "--to", target, "--store", store]
    assert main([*render, *(["--model", model] if model else [])]) == 0
    captured = capsys.readouterr()
    kwargs = json.loads(captured.out)
    validate_history(target, kwargs)
    validate_request(target, kwargs)
    assert kwargs["model"] == (model or "gpt-5.5")
    assert "model_foreign" not in captured.err
    wire = json.dumps(kwargs)
    assert "call_b88bea013f5f4e94b6dbf955" in wire and "echo 1+1 | bc" in wire
    # Codex's encrypted reasoning reaches only the Responses request of the same model.
    assert ("encrypted_content" in wire) == (target == "openai-responses")


def test_render_for_another_provider_without_a_model_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    rollout = CAPTURED / "exec" / "x01_tool" / "rollout.jsonl"
    assert (
        main(
            ["import", "--from", "codex-rollout", str(rollout), "--session", "s1", "--store", store]
        )
        == 0
    )
    assert main(["render", "--session", "s1", "--to", "anthropic", "--store", store]) == 0
    assert "[model_foreign] model 'gpt-5.5'" in capsys.readouterr().err


def test_normalize_from_codex_given_a_rollout_names_the_right_dialect(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    """A rollout file fed to ``--from codex`` is kept, and each line says what reads it."""
    rollout = CAPTURED / "exec" / "x01_tool" / "rollout.jsonl"
    assert main(["normalize", "--from", "codex", str(rollout)]) == 0
    events = decode_lines(capsysbinary.readouterr().out)
    assert len(events) == len(rollout.read_bytes().splitlines())
    assert all(isinstance(e, NativeUnknownEvent) for e in events)
    assert {e.reason for e in events if isinstance(e, NativeUnknownEvent)} == {
        "a Codex rollout (rollout-*.jsonl) line: import it with --from codex-rollout"
    }
