"""The log's CLI commands, run in-process on a real SQLite (and JSONL) store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from adapters import create_adapter
from tests.log.conftest import add_turn
from universal_event import SessionInterruptedEvent, SessionLog, decode_lines
from universal_event.cli import main
from universal_event.events import TurnStartEvent
from universal_event.ingest import import_events, normalize_bytes
from universal_event.stores import open_store

FIXTURE = (
    Path(__file__).parent.parent
    / "fixtures/recorded/anthropic-messages/stream_client_tool_two_turns.json"
)

CAPTURED_CLI = Path(__file__).parent.parent / "fixtures/captured/claude/cli"


@pytest.fixture
def first_stream(tmp_path: Path) -> Path:
    """Turn 1 of a recorded Anthropic exchange: text and a tool_use, then the stream ends."""
    interactions = json.loads(FIXTURE.read_text())["interactions"]
    path = tmp_path / "turn1.sse"
    path.write_text(interactions[0]["response_body"])
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_import_events_derive(
    durable_url: str, first_stream: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(
        capsys, "import", "--from", "anthropic", str(first_stream), "--session", "s1",
        "--store", durable_url,
    )  # fmt: skip
    expected = normalize_bytes("anthropic", first_stream.read_bytes())
    assert status == 0
    assert f"{len(expected)} events imported" in out

    status, out, _ = run(capsys, "events", "--session", "s1", "--store", durable_url)
    assert status == 0
    events = decode_lines(out.encode())
    assert [e.seq for e in events] == list(range(len(expected)))
    assert [type(e) for e in events] == [type(e) for e in expected]
    assert {e.session_id for e in events} == {"s1"}

    status, out, _ = run(capsys, "derive", "--session", "s1", "--store", durable_url)
    assert status == 0
    derived = json.loads(out)
    live = SessionLog()
    live.extend(expected)
    assert derived == msgspec.to_builtins(live.derive_messages())
    assert [m["role"] for m in derived] == ["assistant"]
    assert any(part["type"] == "tool_call" for part in derived[0]["content"])


def test_importing_the_same_input_twice_adds_nothing_another_input_appends(
    durable_url: str, first_stream: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("import", "--from", "anthropic", str(first_stream), "--session", "s1")
    run(capsys, *args, "--store", durable_url)
    count = open_store(durable_url).latest_seq("s1") + 1
    status, out, _ = run(capsys, *args, "--store", durable_url)
    assert status == 0
    assert f"0 events imported, {count} in all" in out
    other = tmp_path / "other.sse"
    other.write_bytes(first_stream.read_bytes().replace(b"msg_", b"msg_X"))
    status, out, _ = run(
        capsys,
        "import",
        "--from",
        "anthropic",
        str(other),
        "--session",
        "s1",
        "--store",
        durable_url,
    )
    assert status == 0
    events = list(open_store(durable_url).read("s1"))
    assert [e.seq for e in events] == list(range(len(events)))
    assert len(events) == 2 * count
    assert len({e.id for e in events}) == 2 * count


def test_missing_session_is_an_error(durable_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("events", "derive", "repair", "replay"):
        status, _, err = run(capsys, command, "--session", "nope", "--store", durable_url)
        assert status == 1, command
        assert "nope" in err
    status, _, err = run(capsys, "show", "nope", "--store", durable_url)
    assert status == 1 and "nope" in err


def test_sessions_show_fork_replay(durable_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    log = SessionLog(open_store(durable_url), "parent")
    for turn in range(2):
        add_turn(log, turn, tools=1)
    log.checkpoint()
    log.close()

    status, out, _ = run(capsys, "sessions", "--store", durable_url)
    assert status == 0
    assert "parent" in out and str(log.next_seq) in out

    status, out, _ = run(capsys, "show", "parent", "--store", durable_url)
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == (
        f"session parent: {log.next_seq} events, 2 turns, 2 tool calls requested, 2 run"
    )
    assert any("tool/call" in line and "bash (call_0_0)" in line for line in lines)
    assert any("#2" in line and "turn/end" in line and "completed" in line for line in lines)
    assert any("turn/start" in line and "id t1" in line for line in lines)
    assert any("user/message" in line and "'question 1'" in line for line in lines)

    status, out, _ = run(
        capsys, "fork", "--session", "parent", "--new", "child", "--turn", "t0",
        "--store", durable_url,
    )  # fmt: skip
    assert status == 0
    store = open_store(durable_url)
    child_events = list(store.read("child"))
    boundary = log.turn_boundaries()[0][1]
    assert [e.id for e in child_events] == [e.id for e in log.events()[: boundary + 1]]
    assert store.latest_seq("parent") == log.next_seq - 1

    status, out, _ = run(capsys, "replay", "--session", "parent", "--store", durable_url)
    assert status == 0
    assert decode_lines(out.encode()) == log.events()


def test_repair_via_cli(
    durable_url: str, first_stream: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "import", "--from", "anthropic", str(first_stream), "--session", "cut",
        "--store", durable_url)  # fmt: skip
    status, out, _ = run(capsys, "repair", "--session", "cut", "--store", durable_url)
    assert status == 0
    assert "turn/end, session/interrupted, session/ended-seq" in out
    status, out, _ = run(capsys, "repair", "--session", "cut", "--store", durable_url)
    assert status == 0 and "nothing to repair" in out
    events = list(open_store(durable_url).read("cut"))
    interrupted = events[-2]
    assert isinstance(interrupted, SessionInterruptedEvent)
    assert [(c.name, c.state) for c in interrupted.open_tool_calls] == [
        ("str_replace_based_edit_tool", "not-started")
    ]


def test_unreadable_input_and_unknown_store_url_are_one_line_errors(
    tmp_path: Path, durable_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.jsonl"
    status, _, err = run(capsys, "import", "--from", "claude-code", str(missing),
                         "--session", "s", "--store", durable_url)  # fmt: skip
    assert status == 1
    assert err == f"universal-event: error: cannot read input file {str(missing)!r}: " \
        "No such file or directory\n"  # fmt: skip
    assert open_store(durable_url).latest_seq("s") == -1

    status, _, err = run(capsys, "sessions", "--store", "gopher://x")
    assert status == 1
    assert err.startswith("universal-event: error: unknown store URL 'gopher://x'")
    assert "Traceback" not in err


def test_fork_into_an_existing_session_names_it_and_changes_nothing(
    durable_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    log = SessionLog(open_store(durable_url), "parent")
    add_turn(log, 0, tools=1)
    log.checkpoint()
    log.close()
    fork = ("fork", "--session", "parent", "--new", "child", "--store", durable_url)
    assert run(capsys, *fork)[0] == 0
    before = list(open_store(durable_url).read("child"))

    status, _, err = run(capsys, *fork)
    assert status == 1
    assert "'child': that session already exists" in err
    assert list(open_store(durable_url).read("child")) == before


def test_a_part_not_installed_exits_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import universal_event.runtimes

    monkeypatch.setattr(universal_event.runtimes, "runtime_available", lambda runtime: False)
    status, out, err = run(capsys, "run", "--runtime", "codex", "--session", "s", "hi",
                           "--store", "memory:")  # fmt: skip
    assert (status, out) == (2, "")
    assert (
        err
        == "universal-event: error: codex is not installed (pip install 'universal-event[codex]')\n"
    )


def test_show_counts_a_tool_as_run_when_only_its_result_is_logged(
    durable_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Claude Code's stream has no tool/call event: the tool/result alone shows it ran."""
    capture = Path(__file__).parent.parent / "fixtures/captured/claude/cli/c01_tool/stdout.jsonl"
    run(capsys, "import", "--from", "claude-code", str(capture), "--session", "cc",
        "--store", durable_url)  # fmt: skip
    status, out, _ = run(capsys, "show", "cc", "--store", durable_url)
    assert status == 0
    assert out.splitlines()[0].endswith(", 1 turns, 1 tool calls requested, 1 run")


TRANSCRIPT = (
    Path(__file__).parent.parent
    / "fixtures/recorded/claude-code/session_transcript_init_claude_md.jsonl"
)


def test_importing_a_grown_input_adds_only_what_is_new(
    durable_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A transcript imported while it was being written, then again when it has grown:
    the second import adds what the new lines completed, not the first part again."""
    lines = TRANSCRIPT.read_bytes().splitlines(keepends=True)
    early = tmp_path / "early.jsonl"
    early.write_bytes(b"".join(lines[:8]))
    args = ("import", "--from", "claude-code-transcript", "--session", "t", "--store", durable_url)
    assert run(capsys, *args[:3], str(early), *args[3:])[0] == 0
    early_ids = [e.id for e in open_store(durable_url).read("t")]
    assert run(capsys, *args[:3], str(TRANSCRIPT), *args[3:])[0] == 0
    events = list(open_store(durable_url).read("t"))
    ids = [e.id for e in events]
    assert len(set(ids)) == len(ids) and ids[: len(early_ids)] == early_ids
    full = import_events("claude-code-transcript", TRANSCRIPT.read_bytes())
    closed_early = import_events("claude-code-transcript", b"".join(lines[:8]))
    # what the early import completed before its end is shared; the events its end
    # closed (the message and turn it cut) are its own
    adapter = create_adapter("claude-code-transcript")
    for line in lines[:8]:
        adapter.feed(line)
    closed_at_end = len(adapter.close())
    shared = {e.id for e in full} & set(early_ids)
    assert closed_at_end > 0 and len(shared) == len(closed_early) - closed_at_end > 5
    assert len(events) == len(full) + len(set(early_ids) - shared)
    _, out, _ = run(capsys, *args[:3], str(TRANSCRIPT), *args[3:])
    assert f"0 events imported, {len(events)} in all" in out


@pytest.mark.parametrize("cut", [5, 10, 20, 30])
def test_a_grown_capture_imported_again_derives_as_one_import_does(
    durable_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], cut: int
) -> None:
    """A Claude Code capture cut inside a message (its blocks come a line each), imported,
    then imported whole: one turn id throughout (made-up ids are made stable), and the
    message the cut left short is replaced on the surface by the whole one."""
    capture = CAPTURED_CLI / "c02_tool_partial" / "stdout.jsonl"
    early = tmp_path / "early.jsonl"
    early.write_bytes(b"".join(capture.read_bytes().splitlines(keepends=True)[:cut]))
    args = ("import", "--from", "claude-code", "--session", "g", "--store", durable_url)
    for path in (early, capture):
        assert run(capsys, *args[:3], str(path), *args[3:])[0] == 0
    log = SessionLog.open(open_store(durable_url), "g")
    turn_starts = {e.turn_id for e in log.events() if isinstance(e, TurnStartEvent)}
    assert {e.turn_id for e in log.events() if e.turn_id} <= turn_starts
    fresh = SessionLog()
    fresh.extend(import_events("claude-code", capture.read_bytes()))
    assert _without_seqs(log.derive_messages()) == _without_seqs(fresh.derive_messages())


CAPTURED_CODEX = Path(__file__).parent.parent / "fixtures/captured/codex"


@pytest.mark.parametrize(
    ("runtime", "capture"),
    [
        ("codex", "exec/x01_tool/stdout.jsonl"),
        ("codex-rollout", "exec/x01_tool/rollout.jsonl"),
        ("codex", "app_server/xs01_tool/wire/server_to_client.jsonl"),
    ],
)
def test_a_codex_input_grown_line_by_line_derives_as_one_import_does(
    tmp_path: Path, runtime: str, capture: str
) -> None:
    """Codex messages come as an item per line, and exec lines and rollout reasoning name
    no message id: an input imported at every length, then whole, shows the model each
    response once (the message an import's end cut is replaced by the whole one)."""
    from universal_event.ingest import append_imported

    data = (CAPTURED_CODEX / capture).read_bytes()
    lines = data.splitlines(keepends=True)
    log = SessionLog()
    for cut in range(1, len(lines) + 1):
        append_imported(log, import_events(runtime, b"".join(lines[:cut])))
    fresh = SessionLog()
    fresh.extend(import_events(runtime, data))
    assert _without_seqs(log.derive_messages()) == _without_seqs(fresh.derive_messages())


def _without_seqs(messages: list[Any]) -> list[Any]:
    return [msgspec.structs.replace(m, seq=0) for m in messages]


def test_events_prints_what_comes_before_a_damaged_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    url = f"sqlite:///{tmp_path / 'x.db'}"
    store = open_store(url)
    log = SessionLog(store, "d")
    add_turn(log, 0, tools=1)
    log.checkpoint()
    log.close()
    total = store.latest_seq("d") + 1
    store.close()
    with sqlite3.connect(tmp_path / "x.db") as raw:
        raw.execute("UPDATE events SET payload = ? WHERE seq = ?", (b"{broken", total - 1))
    status, out, err = run(capsys, "events", "--session", "d", "--store", url)
    assert status == 1 and f"seq {total - 1}" in err
    assert [json.loads(line)["seq"] for line in out.splitlines()] == list(range(total - 1))


def test_show_escapes_control_characters_and_marks_surface_changes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Native data shown raw (an escape sequence in a type, in a message) would clear the
    terminal; a hidden event and a pruned result say what they do to the surface."""
    from universal_event.events import (
        NativeUnknownEvent,
        Surface,
        ToolResultEvent,
        UserMessageEvent,
    )
    from universal_event.parts import TextPart

    url = f"sqlite:///{tmp_path / 's.db'}"
    log = SessionLog(open_store(url), "odd")
    log.append(UserMessageEvent(content=[TextPart(text="\x1b[31mred\x1b[0m")]))
    log.append(NativeUnknownEvent(runtime="codex", native_type="weird\x1b[2J", payload={}))
    log.append(UserMessageEvent(content=[TextPart(text="secret")], surface=Surface(op="hidden")))
    result = log.append(ToolResultEvent(call_id="c1", content=[TextPart(text="long")]))
    log.replace(result.seq, result.seq, ToolResultEvent(call_id="c1", content=[TextPart(text="x")]))
    log.checkpoint()
    log.close()
    status, out, _ = run(capsys, "show", "odd", "--store", url)
    assert status == 0
    assert "\x1b" not in out
    assert "\\x1b[31mred\\x1b[0m" in out and "weird\\x1b[2J" in out
    assert f"[replace {result.seq}..{result.seq}] " in out
    assert "[hidden] 'secret'" in out
