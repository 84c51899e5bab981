"""``universal-event normalize --from openai-chat FILE``: recorded bodies in, events out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from universal_event.cli import main
from universal_event.codec import decode_lines
from universal_event.events import (
    AssistantMessageEvent,
    ErrorEvent,
    StepEndEvent,
    TurnStartEvent,
    UsageEvent,
)
from universal_event.parts import ToolCallPart

FIXTURES = Path(__file__).parent.parent / "fixtures" / "recorded" / "openai-chat"


def response_file(tmp_path: Path, name: str, number: int = 0) -> Path:
    body = json.loads((FIXTURES / name).read_text())["interactions"][number]["response_body"]
    path = tmp_path / "body"
    path.write_bytes(body.encode() if isinstance(body, str) else json.dumps(body).encode())
    return path


def test_normalize_sse_stream(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    path = response_file(tmp_path, "stream_parallel_tool_calls_usage_3turns.json")
    assert main(["normalize", "--from", "openai-chat", str(path)]) == 0
    events = decode_lines(capsysbinary.readouterr().out)
    assert isinstance(events[0], TurnStartEvent)
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    names = [part.name for part in message.content if isinstance(part, ToolCallPart)]
    assert names == ["get_country", "get_product_name"]
    (usage,) = [e for e in events if isinstance(e, UsageEvent)]
    assert usage.usage.input_tokens == 364
    assert isinstance(events[-1], StepEndEvent) and events[-1].stop_reason == "tool_calls"


def test_normalize_whole_completion_and_error_body(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    path = response_file(tmp_path, "reasoning_model_usage.json")
    assert main(["normalize", "--from", "openai-chat", str(path)]) == 0
    events = decode_lines(capsysbinary.readouterr().out)
    (usage,) = [e for e in events if isinstance(e, UsageEvent)]
    assert usage.usage.reasoning_tokens == 64
    path = response_file(tmp_path, "error_404_model_not_found.json")
    assert main(["normalize", "--from", "openai-chat", str(path)]) == 0
    (error,) = decode_lines(capsysbinary.readouterr().out)
    assert isinstance(error, ErrorEvent) and error.code == "model_not_found"


def test_normalize_garbage_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad"
    path.write_bytes(b"{this is not json")
    assert main(["normalize", "--from", "openai-chat", str(path)]) == 1
    assert "openai-chat" in capsys.readouterr().err
