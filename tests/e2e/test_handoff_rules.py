"""What each CLI makes of a handed-over history: measured at the fake model server.

* Claude Code sends a transcript's same-model signed thinking back only from lines that
  name their model; it adds two ``cache_control`` marks of its own to a request.
* Codex 0.163 silently drops the rollout items it cannot read back (a message or tool
  output with a file, a ``system`` message) and does not send remote image URLs: the
  hand-off rewrites them, so every message reaches the model.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from tests._history import add_assistant, add_user, started_log
from tests.e2e._support import (
    need,
    of_type,
    runner,
    validate_anthropic_messages,
    validate_responses_input,
)
from universal_event.events import (
    ToolResultEvent,
    WarningEvent,
)
from universal_event.fake_models import FakeModelServer, Reply
from universal_event.handoff import DEFAULT_MODELS, prepare
from universal_event.log import SessionLog
from universal_event.parts import (
    DocumentPart,
    ImagePart,
    Provenance,
    RefusalPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

CLAUDE = DEFAULT_MODELS["claude-code"]
CLAUDE_ORIGIN = Provenance(provider="anthropic", api="messages", model=CLAUDE)
CODEX_ORIGIN = Provenance(provider="openai", api="responses", model=DEFAULT_MODELS["codex"])
SIGNATURE = "ZmFrZS1zaWduYXR1cmU=" * 4
MARK = {"type": "ephemeral"}


def _result(log: SessionLog, call_id: str, *parts: Any) -> None:
    content = [TextPart(text=p) if isinstance(p, str) else p for p in parts]
    log.append(ToolResultEvent(call_id=call_id, content=content))


def _thinking(messages: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(message index, thinking, signature) of every thinking block."""
    return [
        (index, block["thinking"], block["signature"])
        for index, message in enumerate(messages)
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "thinking"
    ]


def _marks(value: Any) -> int:
    return json.dumps(value).count('"cache_control"')


# ---------------------------------------------------------------- Claude Code


def test_same_model_thinking_handed_to_claude_code_reaches_the_model(tmp_path: Path) -> None:
    """Claude's own signed thinking, kept by the renderer for the same model, is in
    the request Claude Code sends after the hand-off, where the renderer put it."""
    need("claude-code")
    log = started_log("codex")
    add_user(log, "Compute 1+1 with bc")
    add_assistant(
        log,
        CLAUDE_ORIGIN,
        ThinkingPart(text="THOUGHT-1 run bc", signature=SIGNATURE),
        "Running it.",
        ToolCallPart(id="toolu_01A", name="Bash", arguments={"command": "echo 1+1 | bc"}),
    )
    _result(log, "toolu_01A", "2")
    add_assistant(
        log, CLAUDE_ORIGIN, ThinkingPart(text="THOUGHT-2", signature=SIGNATURE), "It is 2."
    )
    add_user(log, "And in Codex?")
    add_assistant(log, CODEX_ORIGIN, "From Codex.")
    with FakeModelServer([Reply(text="Back in Claude Code.")]) as server:
        claude = runner("claude-code", server.url, tmp_path)
        resume, handed = prepare(log, claude)
        assert handed is not None
        result = claude.run(log, "Go on", resume=resume)
        assert result.status == "completed", result.error
        sent = server.model_requests("anthropic")[0].body["messages"]
    validate_anthropic_messages(sent)
    kept = _thinking(handed.request["messages"])
    assert [text for _, text, _ in kept] == ["THOUGHT-1 run bc", "THOUGHT-2"]
    assert _thinking(sent) == kept


def test_a_claude_code_handoff_leaves_room_for_claude_codes_cache_marks(tmp_path: Path) -> None:
    """An Anthropic-API history with four ``cache_control`` marks: Claude Code's
    request carries only its own (the Messages API takes at most four)."""
    need("claude-code")
    log = started_log("codex")
    add_user(log, TextPart(text="long document " * 50, cache_control=MARK))
    add_assistant(
        log,
        CLAUDE_ORIGIN,
        TextPart(text="a1", cache_control=MARK),
        ToolCallPart(id="toolu_1", name="Bash", arguments={"command": "ls"}),
    )
    log.append(
        ToolResultEvent(call_id="toolu_1", content=[TextPart(text="out")], cache_control=MARK)
    )
    add_assistant(log, CLAUDE_ORIGIN, "a2")
    add_user(log, TextPart(text="q2", cache_control=MARK))
    add_assistant(log, CLAUDE_ORIGIN, "a3")
    with FakeModelServer([Reply(text="ok"), Reply(text="ok again")]) as server:
        claude = runner("claude-code", server.url, tmp_path)
        resume, handed = prepare(log, claude)
        assert handed is not None
        assert claude.run(log, "Continue please", resume=resume).status == "completed"
        body = server.model_requests("anthropic")[0].body
        # Claude Code on its own, for comparison: a fresh session's request
        fresh = runner("claude-code", server.url, tmp_path / "fresh")
        assert fresh.run(SessionLog(), "hello").status == "completed"
        own = server.model_requests("anthropic")[1].body
    assert _marks(handed.path.read_text()) == 0
    total = _marks(body["messages"]) + _marks(body.get("system")) + _marks(body.get("tools"))
    assert total <= 4
    assert total == _marks(own["messages"]) + _marks(own.get("system")) + _marks(own.get("tools"))
    assert "long document" in json.dumps(body["messages"])


# ---------------------------------------------------------------- Codex

PDF = base64.b64encode(b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF").decode()
NOTES = base64.b64encode(b"MARK-T1 the notes say hello").decode()


def test_every_message_handed_to_codex_reaches_the_model(tmp_path: Path) -> None:
    """A Claude Code history with a PDF, a tool result holding a PDF, a text file, a
    ``system`` message, an image by URL and a Codex refusal: each message, its text and
    its tool output reach the model, each rewritten part named by a logged warning."""
    need("codex")
    log = started_log("claude-code")
    add_user(
        log,
        "MARK-U1 read the attached pdf",
        DocumentPart(data=PDF, media_type="application/pdf", filename="a.pdf"),
    )
    add_assistant(
        log,
        CLAUDE_ORIGIN,
        "MARK-A1 reading it",
        ToolCallPart(id="toolu_01R", name="Read", arguments={"file_path": "/b.pdf"}),
    )
    _result(
        log,
        "toolu_01R",
        "MARK-R1 second pdf:",
        DocumentPart(data=PDF, media_type="application/pdf"),
    )
    add_assistant(log, CLAUDE_ORIGIN, "MARK-A2 both read")
    add_user(log, "MARK-S1 be brief from now on", instruction_role="system")
    add_assistant(log, CLAUDE_ORIGIN, "MARK-A3 ok")
    add_user(
        log,
        "MARK-U2 and this picture and these notes",
        ImagePart(url="https://example.com/cat.png"),
        DocumentPart(data=NOTES, media_type="text/plain", filename="notes.txt"),
    )
    add_assistant(log, CLAUDE_ORIGIN, "MARK-A4 nice cat")
    add_user(log, "MARK-U3 now something else")
    # Codex's own refusal, replayed to it natively (as a `refusal` part)
    add_assistant(
        log, CODEX_ORIGIN, RefusalPart(text="MARK-F1 I can't help with that", item_id="msg_f1")
    )
    with FakeModelServer([Reply(text="Picked it up.")]) as server:
        codex = runner("codex", server.url, tmp_path)
        resume, handed = prepare(log, codex)
        assert handed is not None
        result = codex.run(log, "Continue please", resume=resume)
        assert result.status == "completed", result.error
        sent = server.model_requests("responses")[0].body["input"]
    validate_responses_input(sent)
    text = json.dumps(sent)
    for mark in ("U1", "A1", "R1", "A2", "S1", "A3", "U2", "T1", "A4", "U3", "F1"):
        assert f"MARK-{mark}" in text, mark
    outputs = [i["output"] for i in sent if i.get("type") == "function_call_output"]
    assert outputs == [
        [
            {"type": "input_text", "text": "MARK-R1 second pdf:"},
            {
                "type": "input_text",
                "text": "[document document.pdf (application/pdf) was attached here; "
                "its content is not available]",
            },
        ]
    ]
    (instruction,) = [i for i in sent if "MARK-S1" in json.dumps(i)]
    assert instruction["role"] == "developer"
    (pictured,) = [i for i in sent if "MARK-U2" in json.dumps(i)]
    assert pictured["content"][1] == {
        "type": "input_text",
        "text": "[image by URL, not shown here: https://example.com/cat.png]",
    }
    assert "remote image URLs are not supported" not in text
    assert "aborted" not in json.dumps(outputs)
    logged = sorted(w.code for w in of_type(log.events(), WarningEvent))
    assert logged == [
        "document_as_text",
        "document_as_text",
        "document_as_text",
        "image_url_as_text",
        "instruction_as_developer",
        "refusal_as_text",
    ]
