"""A Codex rollout across a compaction (captured: ``captured/codex_compact/manual``): the
history derived from it is what Codex sent next."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from adapters.codex import CodexRolloutAdapter
from tests.adapters._render_support import derived_texts
from universal_event.events import NativeUnknownEvent, UserMessageEvent
from universal_event.ingest import append_imported, import_events
from universal_event.log import SessionLog

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "captured" / "codex_compact" / "manual"
_CONTEXT = re.compile(r"^\s*<[a-z_]+>")


def _sent(name: str) -> list[tuple[str, str]]:
    """(role, text) of the request's conversation: Codex's developer messages and its
    tagged context messages (``<environment_context>``) left out."""
    items: list[dict[str, Any]] = json.loads((RUN / "requests" / name).read_text())["input"]
    texts = []
    for item in items:
        if item.get("type") != "message" or item.get("role") == "developer":
            continue
        for block in item["content"]:
            text = block.get("text", "")
            if not _CONTEXT.match(text):
                texts.append((item["role"], text))
    return texts


def test_the_history_after_a_compaction_is_what_codex_sent() -> None:
    log = SessionLog()
    adapter = CodexRolloutAdapter()
    log.extend(adapter.feed((RUN / "rollout.jsonl").read_bytes()) + adapter.close())
    sent = _sent("turn3_input.json")
    assert sent[2][1].startswith("Another language model started")  # the summary
    assert ("assistant", "Turn one done.") not in sent
    assert derived_texts(log) == [*sent, ("assistant", "Turn three after compaction.")]
    # Nothing lost: the turns before the compaction, and the line itself, are logged.
    prompts = [e.content[0].text for e in log.events() if isinstance(e, UserMessageEvent)]  # type: ignore[union-attr]
    assert prompts[:2] == ["First question", "Second question"]
    assert [
        e
        for e in log.events()
        if isinstance(e, NativeUnknownEvent) and e.native_type == "compacted"
    ]


def test_the_compaction_request_was_the_history_before_it() -> None:
    """Before the compaction line the derived history is the one the compaction request
    summarised (its last item, Codex's compaction prompt, is the request's own)."""
    data = (RUN / "rollout.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    compacted = next(i for i, line in enumerate(lines) if b'"type":"compacted"' in line)
    log = SessionLog()
    append_imported(log, import_events("codex-rollout", b"".join(lines[:compacted])))
    sent = _sent("compact_input.json")
    assert derived_texts(log)[:4] == sent[:4]
    # The grown rollout, imported into the same log: the compaction applies, and a
    # third import adds nothing.
    append_imported(log, import_events("codex-rollout", data))
    assert derived_texts(log) == [
        *_sent("turn3_input.json"),
        ("assistant", "Turn three after compaction."),
    ]
    count = len(log.events())
    append_imported(log, import_events("codex-rollout", data))
    assert len(log.events()) == count


def test_two_compactions_replace_what_the_first_one_left() -> None:
    """A second ``compacted`` line replaces the first one's history (and what followed)."""
    lines = (RUN / "rollout.jsonl").read_bytes().splitlines(keepends=True)
    compacted = next(line for line in lines if b'"type":"compacted"' in line)
    second = json.loads(compacted)
    history = second["payload"]["replacement_history"]
    history[-1]["content"][0]["text"] = "SECOND SUMMARY"
    data = b"".join(lines) + json.dumps(second).encode() + b"\n"
    log = SessionLog()
    adapter = CodexRolloutAdapter()
    log.extend(adapter.feed(data) + adapter.close())
    texts = [text for _, text in derived_texts(log)]
    assert texts == ["First question", "Second question", "SECOND SUMMARY"]
