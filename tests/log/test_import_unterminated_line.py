"""``import_events`` of a JSON-lines capture read while it is being written, just before
a line's newline: that line's events get the ids they get once the newline is there, so
importing the grown capture again does not log them twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from universal_event.ingest import append_imported, import_events
from universal_event.log import SessionLog

CAPTURED = Path(__file__).parent.parent / "fixtures" / "captured"
RECORDED = Path(__file__).parent.parent / "fixtures" / "recorded"

CAPTURES = [
    ("claude-code", CAPTURED / "claude/cli/c01_tool/stdout.jsonl"),
    ("codex", CAPTURED / "codex/exec/x03_text/stdout.jsonl"),
    ("codex-rollout", CAPTURED / "codex/exec/x03_text/rollout.jsonl"),
    ("claude-code-transcript", RECORDED / "claude-code/session_transcript_init_claude_md.jsonl"),
]


def _line_ends(data: bytes) -> list[int]:
    """The offset just after each line's newline."""
    ends, position = [], 0
    for line in data.splitlines(keepends=True):
        position += len(line)
        if line.endswith(b"\n"):
            ends.append(position)
    return ends


@pytest.mark.parametrize(("runtime", "path"), CAPTURES, ids=[r for r, _ in CAPTURES])
def test_a_line_without_its_newline_yet_gets_the_ids_it_gets_with_it(
    runtime: str, path: Path
) -> None:
    data = path.read_bytes()
    whole = {event.id for event in import_events(runtime, data)}
    for end in _line_ends(data)[:-1]:  # the whole input's end closes what it holds
        before = {event.id for event in import_events(runtime, data[: end - 1])}
        after = import_events(runtime, data[:end])
        # what the line completed (what the whole input holds too; the rest is what
        # the cut input's end closed) is the same, with or without the newline
        completed = {event.id for event in after if event.id in whole}
        assert completed <= before, f"line ending at byte {end}"


@pytest.mark.parametrize(("runtime", "path"), CAPTURES[:2], ids=[r for r, _ in CAPTURES[:2]])
def test_a_capture_cut_before_a_newline_then_imported_grown_derives_as_one_import(
    runtime: str, path: Path
) -> None:
    data = path.read_bytes()
    reference = SessionLog()
    append_imported(reference, import_events(runtime, data))
    expected = [type(message).__name__ for message in reference.derive_messages()]
    for end in _line_ends(data):
        log = SessionLog()
        append_imported(log, import_events(runtime, data[: end - 1]))  # still being written
        append_imported(log, import_events(runtime, data))  # imported again, grown
        derived = [type(message).__name__ for message in log.derive_messages()]
        assert derived == expected, f"cut before the newline at byte {end - 1}"


def test_an_input_without_a_final_newline_imports_the_events_of_one_with_it() -> None:
    data = (CAPTURED / "claude/cli/c01_tool/stdout.jsonl").read_bytes()
    assert data.endswith(b"\n")
    with_newline = import_events("claude-code", data)
    without = import_events("claude-code", data[:-1])
    assert [e.id for e in without] == [e.id for e in with_newline]
