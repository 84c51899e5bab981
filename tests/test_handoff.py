"""The files a hand-off writes (the CLIs reading them: tests/e2e/test_handoff_rules.py)."""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from tests._history import add_assistant, add_user, started_log
from universal_event.events import (
    ToolResultEvent,
    WarningEvent,
)
from universal_event.handoff import (
    HandoffError,
    RuntimePlaces,
    codex_input_items,
    codex_readable,
    continue_session,
    hand_off,
    make_runner,
    render_for,
)
from universal_event.log import SessionLog
from universal_event.parts import (
    DocumentPart,
    ImagePart,
    Provenance,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

CLAUDE = "claude-sonnet-4-5-20250929"
CLAUDE_ORIGIN = Provenance(provider="anthropic", api="messages", model=CLAUDE)
OTHER_CLAUDE = Provenance(provider="anthropic", api="messages", model="claude-opus-4-1-20250805")
CODEX_ORIGIN = Provenance(provider="openai", api="responses", model="gpt-5.5")
SIGNATURE = "ZmFrZS1zaWduYXR1cmU=" * 4
MARK = {"type": "ephemeral"}


def _transcript(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------- Claude Code


def test_a_claude_transcript_names_the_model_on_the_lines_that_keep_thinking(
    tmp_path: Path,
) -> None:
    """Claude Code strips a transcript line's thinking unless ``message.model`` is the
    model it runs: a line holding the thinking the renderer kept names that model."""
    log = started_log("codex")
    add_user(log, "first")
    add_assistant(
        log,
        CLAUDE_ORIGIN,
        ThinkingPart(text="SAME-MODEL-THOUGHT", signature=SIGNATURE),
        "Running it.",
        ToolCallPart(id="toolu_01A", name="Bash", arguments={"command": "ls"}),
    )
    log.append(ToolResultEvent(call_id="toolu_01A", content=[TextPart(text="a.txt")]))
    add_assistant(log, CLAUDE_ORIGIN, ThinkingPart(redacted_data="REDACTED"), "Done.")
    add_user(log, "second")
    add_assistant(log, OTHER_CLAUDE, ThinkingPart(text="OTHER-MODEL", signature=SIGNATURE), "x")
    add_user(log, "third")
    add_assistant(log, CODEX_ORIGIN, "From Codex.")
    result = hand_off(
        log, "claude-code", model=CLAUDE, cwd=tmp_path / "work", claude_home=tmp_path / "home"
    )
    lines = _transcript(result.path)
    assert [line["message"] for line in lines] == [
        {"role": m["role"], "content": m["content"]} | ({"model": CLAUDE} if i in (1, 3) else {})
        for i, m in enumerate(result.request["messages"])
    ]
    kinds = [[b["type"] for b in line["message"]["content"]] for line in lines[1:4:2]]
    assert kinds == [["thinking", "text", "tool_use"], ["redacted_thinking", "text"]]
    assert "OTHER-MODEL" not in result.path.read_text()
    assert [list(line["message"]) for line in lines if line["type"] == "assistant"] == [
        ["role", "model", "content"],
        ["role", "model", "content"],
        ["role", "content"],
        ["role", "content"],
    ]


def test_a_claude_handoff_leaves_the_cache_marks_to_claude_code(tmp_path: Path) -> None:
    """Claude Code adds two marks of its own to each request: the history's would take
    it past the four a Messages request may carry."""
    log = started_log("codex")
    add_user(log, TextPart(text="long document " * 50, cache_control=MARK))
    add_assistant(
        log,
        CLAUDE_ORIGIN,
        TextPart(text="a1", cache_control=MARK),
        ToolCallPart(id="toolu_1", name="Bash", arguments={"command": "ls"}, cache_control=MARK),
    )
    log.append(
        ToolResultEvent(
            call_id="toolu_1",
            content=[TextPart(text="out", cache_control=MARK)],
            cache_control=MARK,
        )
    )
    add_assistant(log, CLAUDE_ORIGIN, "a2")
    add_user(log, TextPart(text="q2", cache_control=MARK))
    add_assistant(log, CLAUDE_ORIGIN, "a3")
    result = hand_off(
        log, "claude-code", model=CLAUDE, cwd=tmp_path / "work", claude_home=tmp_path / "home"
    )
    assert "cache_control" not in result.path.read_text()
    assert "cache_control" not in json.dumps(result.request)
    assert "cache_control_trimmed" not in [w.code for w in result.warnings]
    assert "long document" in result.path.read_text()


# ---------------------------------------------------------------- nothing to hand over


def _reasoning_only(runtime: str) -> SessionLog:
    """A history nothing of which may go to ``runtime``'s provider: one message of the
    other provider's reasoning and blank text."""
    if runtime == "claude-code":
        log = started_log("codex")
        thought = ThinkingPart(text="", summary=["thinking"], id="rs_1", encrypted_content="enc")
        add_assistant(log, CODEX_ORIGIN, thought, TextPart(text="  "))
    else:
        log = started_log("claude-code")
        add_assistant(
            log, CLAUDE_ORIGIN, ThinkingPart(text="t", signature=SIGNATURE), TextPart(text=" ")
        )
    return log


@pytest.mark.parametrize("runtime", ["claude-code", "codex"])
def test_a_history_that_renders_to_nothing_is_not_handed_over(runtime: Any, tmp_path: Path) -> None:
    """An empty native session cannot be resumed ("No conversation found"); logging a
    switch to it would make every later run resume it again."""
    log = _reasoning_only(runtime)
    assert log.derive_messages()
    before = log.events()
    places = RuntimePlaces(tmp_path / "homes", tmp_path / "work")
    with pytest.raises(HandoffError, match="renders to nothing for .*empty_history"):
        hand_off(
            log,
            runtime,
            model=CLAUDE if runtime == "claude-code" else "gpt-5.5",
            cwd=places.cwd,
            claude_home=places.claude_home,
            codex_home=places.codex_home,
        )
    # continue_session hands over before the CLI starts: the same error, every time
    with socket.create_server(("127.0.0.1", 0)) as listening:  # takes connections (preflight)
        port = listening.getsockname()[1]
        runner = make_runner(runtime, f"http://127.0.0.1:{port}", places)
        for _ in range(2):
            with pytest.raises(HandoffError, match="empty rendered history"):
                continue_session(log, runner, "go on")
    assert log.events() == before
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


# ---------------------------------------------------------------- Codex


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


PDF = b"%PDF-1.4\n%%EOF"
PNG_URL = _data_url("image/png", b"\x89PNG\r\n\x1a\n")


def test_codex_readable_rewrites_what_codex_drops_and_keeps_the_rest() -> None:
    items: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "read these"},
                {"type": "input_file", "file_data": _data_url("application/pdf", PDF),
                 "filename": "a.pdf"},
                {"type": "input_file", "file_data": _data_url("text/plain", "héllo\n".encode()),
                 "filename": "notes.txt"},
                {"type": "input_file", "file_url": "https://example.com/b.pdf"},
                {"type": "input_file", "file_id": "file-abc"},
            ],
        },
        {"type": "function_call", "call_id": "c1", "name": "Read", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "second pdf:"},
                {"type": "input_file", "file_data": _data_url("application/pdf", PDF),
                 "filename": "document.pdf"},
                {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
            ],
        },
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": [{"type": "input_text", "text": "as a developer"}]},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "and this picture"},
                {"type": "input_image", "image_url": "https://example.com/cat.png",
                 "detail": "auto"},
                {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
                {"type": "input_image", "file_id": "file-img", "detail": "auto"},
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "refusal", "refusal": "I can't help with that."}],
        },
        {"role": "assistant", "content": "plain"},
        {"type": "function_call_output", "call_id": "c2", "output": "a string output"},
    ]  # fmt: skip
    original = json.dumps(items)
    warnings: list[WarningEvent] = []
    out = codex_readable(items, warnings)
    assert json.dumps(items) == original  # not changed in place
    assert out[0]["content"] == [
        {"type": "input_text", "text": "read these"},
        {"type": "input_text", "text": "[document a.pdf (application/pdf) was attached here; "
         "its content is not available]"},
        {"type": "input_text", "text": "[document notes.txt (text/plain):]\nhéllo\n"},
        {"type": "input_text", "text": "[document https://example.com/b.pdf was attached "
         "here; its content is not available]"},
        {"type": "input_text", "text": "[document file id file-abc was attached here; its "
         "content is not available]"},
    ]  # fmt: skip
    assert out[2]["output"] == [
        {"type": "input_text", "text": "second pdf:"},
        {"type": "input_text", "text": "[document document.pdf (application/pdf) was "
         "attached here; its content is not available]"},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
    ]  # fmt: skip
    assert out[3] == {"role": "developer", "content": "be brief"}
    assert out[5]["content"] == [
        {"type": "input_text", "text": "and this picture"},
        {"type": "input_text", "text": "[image by URL, not shown here: "
         "https://example.com/cat.png]"},
        {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
        {"type": "input_image", "file_id": "file-img", "detail": "auto"},
    ]  # fmt: skip
    assert out[6]["content"] == [
        {"type": "output_text", "text": "I can't help with that.", "annotations": []}
    ]
    assert [out[i] for i in (1, 4, 7, 8)] == [items[i] for i in (1, 4, 7, 8)]
    assert [(w.code, (w.details or {}).get("index")) for w in warnings] == [
        ("document_as_text", 0),
        ("document_as_text", 0),
        ("document_as_text", 0),
        ("document_as_text", 0),
        ("document_as_text", 2),
        ("instruction_as_developer", 3),
        ("image_url_as_text", 5),
        ("refusal_as_text", 6),
    ]
    assert {w.source.native_type for w in warnings if w.source} == {"handoff"}


def test_a_codex_handoff_writes_every_message_in_a_form_codex_reads(tmp_path: Path) -> None:
    """The rollout of a Claude Code history with a PDF, a PDF tool result, a system
    message and an image by URL: no part Codex drops, every text kept, each rewrite
    logged as a warning."""
    pdf = base64.b64encode(PDF).decode()
    log = started_log("claude-code")
    add_user(log, "MARK-U1 read it", DocumentPart(data=pdf, media_type="application/pdf"))
    add_assistant(
        log,
        CLAUDE_ORIGIN,
        "MARK-A1",
        ToolCallPart(id="toolu_01R", name="Read", arguments={"file_path": "/b.pdf"}),
    )
    log.append(
        ToolResultEvent(
            call_id="toolu_01R",
            content=[
                TextPart(text="MARK-R1"),
                DocumentPart(data=pdf, media_type="application/pdf"),
            ],
        )
    )
    add_assistant(log, CLAUDE_ORIGIN, "MARK-A2")
    add_user(log, "MARK-S1 be brief", instruction_role="system")
    add_assistant(log, CLAUDE_ORIGIN, "MARK-A3")
    add_user(log, "MARK-U2", ImagePart(url="https://example.com/cat.png"))
    add_assistant(log, CLAUDE_ORIGIN, "MARK-A4")
    result = hand_off(
        log, "codex", model="gpt-5.5", cwd=tmp_path / "work", codex_home=tmp_path / "codex"
    )
    rollout = _transcript(result.path)
    items = [line["payload"] for line in rollout if line["type"] == "response_item"]
    assert items == codex_input_items(result.request)
    parts = [p for i in items for p in (i.get("content") or i.get("output") or []) if isinstance(p, dict)]  # fmt: skip
    assert {p["type"] for p in parts} <= {"input_text", "output_text"}
    assert {i["role"] for i in items if i.get("type") == "message"} == {
        "user",
        "assistant",
        "developer",
    }
    text = json.dumps(items)
    for mark in ("U1", "A1", "R1", "A2", "S1", "A3", "U2", "A4"):
        assert f"MARK-{mark}" in text
    assert "https://example.com/cat.png" in text
    logged = [e.code for e in log.events() if isinstance(e, WarningEvent)]
    assert logged == [w.code for w in result.warnings]
    assert sorted(logged) == [
        "document_as_text",
        "document_as_text",
        "image_url_as_text",
        "instruction_as_developer",
    ]


def test_render_for_codex_keeps_what_codex_reads_as_it_is() -> None:
    log = started_log("claude-code")
    add_user(log, "hello", ImagePart(data="iVBORw0KGgo=", media_type="image/png"))
    add_assistant(log, CLAUDE_ORIGIN, "hi")
    request, warnings = render_for("codex", log.derive_messages(), "gpt-5.5")
    assert warnings == []
    assert request["input"][0]["content"][1]["image_url"].startswith("data:image/png;base64,")


@pytest.mark.parametrize("runtime", ["claude-code", "codex"])
def test_a_session_file_the_system_refuses_is_a_handoff_error(runtime: Any, tmp_path: Path) -> None:
    """A home the runtime's session file cannot be written in (here: a file where its
    directory must go) is a HandoffError naming the file, and no switch is logged."""
    log = started_log("codex" if runtime == "claude-code" else "claude-code")
    add_user(log, "hello")
    add_assistant(log, CLAUDE_ORIGIN if runtime == "codex" else CODEX_ORIGIN, "hi")
    before = log.events()
    blocked = tmp_path / "blocked"
    blocked.write_text("not a directory")
    with pytest.raises(HandoffError, match="cannot write the hand-off session file"):
        hand_off(
            log,
            runtime,
            model=CLAUDE if runtime == "claude-code" else "gpt-5.5",
            cwd=tmp_path / "work",
            claude_home=blocked,
            codex_home=blocked,
        )
    assert log.events() == before
