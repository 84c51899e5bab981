"""Importing a Codex app-server capture streamed with raw events while it grows.

With raw events (``rawResponseItem/completed``) a command's result waits for the raw
``function_call_output`` (the text Codex sends the model), and an input's end (the
adapter's ``close()``) logs the results it still holds with the plain output. The grown
input logs those results again, by the line that completes them, under other ids: the
model must be shown each result once, the grown import's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from universal_event import SessionLog, TextPart, ToolMessage, ToolResultEvent
from universal_event.ingest import append_imported, import_events

TWO_CALLS = Path(__file__).parent.parent / "fixtures/captured/codex/parallel/two_calls/app_server"


def _capture(name: str) -> bytes:
    """``turn1.jsonl`` (raw events on: a new thread), or ``all``: the three turns as one
    stream (turns 2 and 3 resume the thread, raw events stay on for the adapter)."""
    if name == "all":
        return b"".join((TWO_CALLS / f"turn{n}.jsonl").read_bytes() for n in (1, 2, 3))
    return (TWO_CALLS / name).read_bytes()


def _without_seqs(messages: list[Any]) -> list[Any]:
    return [msgspec.structs.replace(m, seq=0) for m in messages]


def _imported_once(data: bytes) -> list[Any]:
    log = SessionLog()
    log.extend(import_events("codex", data))
    return _without_seqs(log.derive_messages())


CAPTURES = ["turn1.jsonl", "all"]


def test_the_capture_streams_raw_events() -> None:
    assert b'"rawResponseItem/completed"' in _capture("turn1.jsonl")
    assert b'"function_call_output"' in _capture("turn1.jsonl")


@pytest.mark.parametrize("capture", CAPTURES)
def test_a_raw_events_capture_imported_cut_then_whole_derives_as_one_import_does(
    capture: str,
) -> None:
    """At every line boundary: the prefix, then the whole capture, into a fresh log."""
    data = _capture(capture)
    lines = data.splitlines(keepends=True)
    once = _imported_once(data)
    differing = []
    for cut in range(1, len(lines) + 1):
        log = SessionLog()
        append_imported(log, import_events("codex", b"".join(lines[:cut])))
        append_imported(log, import_events("codex", data))
        if _without_seqs(log.derive_messages()) != once:
            differing.append(cut)
    assert differing == []


@pytest.mark.parametrize("capture", CAPTURES)
def test_a_raw_events_capture_grown_line_by_line_derives_as_one_import_does(
    capture: str,
) -> None:
    """Imported after every new line (one log all along), then whole."""
    data = _capture(capture)
    lines = data.splitlines(keepends=True)
    log = SessionLog()
    for cut in range(1, len(lines) + 1):
        append_imported(log, import_events("codex", b"".join(lines[:cut])))
    append_imported(log, import_events("codex", data))
    assert _without_seqs(log.derive_messages()) == _imported_once(data)


def test_the_result_an_input_end_logged_stays_in_the_log() -> None:
    """Cut after the first command completed (before its raw output): the end logs its
    plain output; the grown import's formatted result replaces it on the surface only."""
    data = _capture("turn1.jsonl")
    lines = data.splitlines(keepends=True)
    cut = next(
        n
        for n in range(1, len(lines) + 1)
        if any(isinstance(e, ToolResultEvent) for e in import_events("codex", b"".join(lines[:n])))
    )
    log = SessionLog()
    early = append_imported(log, import_events("codex", b"".join(lines[:cut])))
    (plain,) = [e for e in early if isinstance(e, ToolResultEvent)]
    assert plain.content == [TextPart(text="two\n")]
    assert plain.seq in log.surface_seqs()

    append_imported(log, import_events("codex", data))
    assert log.event_by_id(plain.id) == plain  # still logged
    assert plain.seq not in log.surface_seqs()  # no longer shown
    results = [m for m in log.derive_messages() if isinstance(m, ToolMessage)]
    assert [r.call_id for r in results] == [
        "call_0122ffc6912b41f6aa78d185",
        "call_eef22c4858834e7ca831564c",
    ]
    assert all(
        isinstance(part, TextPart) and part.text.startswith("Chunk ID: ")
        for r in results
        for part in r.content
    )


def test_an_input_cut_where_it_ends_keeps_its_results_shown() -> None:
    """A capture that never grows: what its end logged is what the model sees."""
    data = _capture("turn1.jsonl")
    lines = data.splitlines(keepends=True)
    for cut in range(1, len(lines) + 1):
        prefix = b"".join(lines[:cut])
        log = SessionLog()
        append_imported(log, import_events("codex", prefix))
        append_imported(log, import_events("codex", prefix))  # the same again: nothing new
        assert _without_seqs(log.derive_messages()) == _imported_once(prefix)


def test_an_import_keeps_the_inputs_turn_ids_and_makes_up_stable_ones() -> None:
    """Codex's own turn ids (in its turn/started lines) stay; ids an adapter made up (an
    exec stream names no turn) become ones made from the input, the same on every
    import. Looked for in the lines just read: the whole input once per turn made an
    import quadratic."""
    import json

    data = _capture("all")
    native = {
        json.loads(line)["params"]["turn"]["id"]
        for line in data.splitlines()
        if b'"turn/started"' in line
    }
    assert len(native) == 3
    events = import_events("codex", data)
    assert {e.turn_id for e in events if e.turn_id is not None} == native
    exec_lines = (
        Path(__file__).parent.parent / "fixtures/captured/codex/exec/x01_tool/stdout.jsonl"
    ).read_bytes()
    made_up = [e.turn_id for e in import_events("codex", exec_lines) if e.turn_id is not None]
    assert made_up and all(turn.startswith("turn_import-") for turn in made_up)
    assert made_up == [e.turn_id for e in import_events("codex", exec_lines) if e.turn_id]


@pytest.mark.parametrize(
    ("runtime", "path"),
    [
        ("codex", "codex/exec/x01_tool/stdout.jsonl"),
        ("claude-code-transcript", "claude/cli/c01_tool/session_transcript.jsonl"),
    ],
)
def test_a_copy_with_crlf_line_ends_is_the_same_input(runtime: str, path: str) -> None:
    """Ids hashed the line ends too: a CRLF copy of an imported file was imported again
    whole. It adds nothing now; a cut CRLF copy, grown into the LF file, logs what the
    cut LF file grown into it does."""
    lf = (Path(__file__).parent.parent / "fixtures/captured" / path).read_bytes()
    crlf = lf.replace(b"\n", b"\r\n")
    logs = []
    for first, then in ((lf, crlf), (crlf, lf)):
        log = SessionLog()
        for data in (first, then):
            append_imported(log, import_events(runtime, data))
        logs.append([e.id for e in log.events()])
    assert logs[0] == logs[1] and len(logs[0]) == len(import_events(runtime, lf))
    cut_at = lf.index(b"\n", len(lf) // 2)  # a cut line, then what the file grew to
    grown = []
    for cut in (lf[:cut_at], crlf[: crlf.index(b"\r\n", len(crlf) // 2 + 200) + 1]):
        log = SessionLog()
        for data in (cut, lf):
            append_imported(log, import_events(runtime, data))
        grown.append(_without_seqs(log.derive_messages()))
    assert grown[0] == grown[1]
