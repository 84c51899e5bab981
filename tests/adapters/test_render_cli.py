"""The CLI: ``import --from <target>-request`` then ``render --to <target>``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adapters._render_support import recording
from universal_event.cli import main


def test_import_request_body_then_render_for_each_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = recording("anthropic", "thinking_tool_use_nonstream")
    request = body["interactions"][1]["request_body"]
    path = tmp_path / "body.json"
    path.write_text(json.dumps(request))
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert (
        main(
            ["import", "--store", store, "--from", "anthropic-request", str(path), "--session", "s"]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["render", "--store", store, "--session", "s", "--to", "anthropic"]) == 0
    rendered = json.loads(capsys.readouterr().out)
    assert (
        rendered["messages"][1]["content"][0]["signature"]
        == request["messages"][1]["content"][0]["signature"]
    )
    assert (
        main(
            [
                "render",
                "--store",
                store,
                "--session",
                "s",
                "--to",
                "openai-chat",
                "--model",
                "gpt-4o",
            ]
        )
        == 0
    )
    out = capsys.readouterr()
    chat = json.loads(out.out)
    assert chat["model"] == "gpt-4o"
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "tool"]
    assert "signature" not in out.out and "reasoning_dropped" in out.err


def test_normalize_request_body_gives_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = recording("openai-responses", "stream_function_call_then_text")["interactions"][1][
        "request_body"
    ]
    path = tmp_path / "body.json"
    path.write_text(json.dumps(request))
    assert main(["normalize", "--from", "openai-responses-request", str(path)]) == 0
    types = [json.loads(line)["type"] for line in capsys.readouterr().out.splitlines()]
    assert types == ["request/header", "user/message", "assistant/message", "tool/result"]


def test_a_session_without_a_header_renders_with_model_and_says_so_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ``request/header``: the model is ``--model``, else that of the session's last
    reply from the target's provider, else none (an error naming ``--model``)."""
    stream = tmp_path / "stream.sse"
    recorded = recording("anthropic", "stream_client_tool_two_turns")
    stream.write_text(recorded["interactions"][0]["response_body"])
    replied = json.loads(
        recorded["interactions"][0]["response_body"].split("data: ")[1].split("\n")[0]
    )
    store = f"sqlite:///{tmp_path / 's.db'}"
    assert (
        main(["import", "--store", store, "--from", "anthropic", str(stream), "--session", "s"])
        == 0
    )
    capsys.readouterr()
    assert main(["render", "--store", store, "--session", "s", "--to", "openai-chat"]) == 1
    error = capsys.readouterr().err
    assert "names no model" in error and "--model" in error
    assert main(["render", "--store", store, "--session", "s", "--to", "anthropic"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == replied["message"]["model"]
    assert (
        main(["render", "--store", store, "--session", "s", "--to", "anthropic", "--model", "m1"])
        == 0
    )
    rendered = json.loads(capsys.readouterr().out)
    assert rendered["model"] == "m1"
    assert rendered["messages"][0]["role"] == "assistant"
