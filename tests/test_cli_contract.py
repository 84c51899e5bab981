"""The command line is a contract: names, options and exit codes scripts rely on.

These run the real entry point (``python -m universal_event``) in a subprocess, the
way scripts do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "tests" / "fixtures" / "captured" / "claude" / "cli" / "c01_tool" / "stdout.jsonl"
COMMANDS = (
    "schema normalize import events derive render sessions show fork repair replay run "
    "handoff serve"
).split()


def _run(
    *args: str,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "universal_event", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
        cwd=cwd or ROOT,
    )


def test_help_lists_every_contract_command() -> None:
    result = _run("--help")
    assert result.returncode == 0
    for command in COMMANDS:
        assert command in result.stdout.decode(), command


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_store(command: str) -> None:
    result = _run(command, "--help")
    assert result.returncode == 0
    assert "--store" in result.stdout.decode()


def test_normalize_reads_stdin_and_writes_json_lines() -> None:
    result = _run("normalize", "--from", "claude-code", "-", stdin=CAPTURE.read_bytes())
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert "session/start" in types and "assistant/message" in types and "tool/result" in types
    assert all(e["source"]["runtime"] == "claude-code" for e in events if "source" in e)


def test_input_none_of_which_the_runtime_recognises_is_kept_with_a_warning(
    tmp_path: Path,
) -> None:
    """A Claude Code capture read as an Anthropic SSE stream: every line is kept (as
    ``native/unknown``), and the user is told the ``--from`` is likely wrong."""
    result = _run("normalize", "--from", "anthropic", str(CAPTURE))
    assert result.returncode == 0
    types = {json.loads(line)["type"] for line in result.stdout.splitlines()}
    assert types == {"native/unknown"}
    assert f"nothing in {CAPTURE} was recognised as anthropic input" in result.stderr.decode()
    store = f"sqlite:///{tmp_path / 's.db'}"
    imported = _run("import", "--from", "codex", str(CAPTURE), "--session", "s", "--store", store)
    assert imported.returncode == 0 and "is --from right?" in imported.stderr.decode()
    right = _run("normalize", "--from", "claude-code", str(CAPTURE))
    assert right.returncode == 0 and right.stderr == b""


@pytest.mark.parametrize(
    ("runtime", "body"),
    [
        ("openai-chat-request", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        ("anthropic-request", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        ("openai-responses-request", {"model": "m", "input": "hi"}),
    ],
)
def test_normalize_of_a_request_body_gives_events_an_id_and_a_time(
    runtime: str, body: dict[str, object]
) -> None:
    """As any adapter's events have: ids stable for the same bytes (an import of the
    same body later finds them logged), the time the body was read."""
    data = json.dumps(body).encode()
    first, again = (_run("normalize", "--from", runtime, "-", stdin=data) for _ in range(2))
    assert first.returncode == 0, first.stderr
    events = [json.loads(line) for line in first.stdout.splitlines()]
    assert [e["type"] for e in events] == ["request/header", "user/message"]
    assert all(e["id"] and e["ts"] > 1.7e9 for e in events)
    assert len({e["id"] for e in events}) == len(events)
    assert [json.loads(line)["id"] for line in again.stdout.splitlines()] == [
        e["id"] for e in events
    ]


def test_store_defaults_to_env_then_embedded_sqlite(tmp_path: Path) -> None:
    from_env = tmp_path / "env.db"
    result = _run(
        "import",
        "--from",
        "claude-code",
        str(CAPTURE),
        "--session",
        "s1",
        env={"UNIVERSAL_EVENT_STORE": f"sqlite:///{from_env}"},
    )
    assert result.returncode == 0, result.stderr
    assert from_env.exists()
    listed = _run("sessions", env={"UNIVERSAL_EVENT_STORE": f"sqlite:///{from_env}"})
    assert b"s1" in listed.stdout

    env = {k: v for k, v in os.environ.items() if k != "UNIVERSAL_EVENT_STORE"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "universal_event",
            "import",
            "--from",
            "claude-code",
            str(CAPTURE),
            "--session",
            "s2",
        ],
        capture_output=True,
        timeout=120,
        check=False,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / ".universal-event" / "sessions.db").exists()


def test_unknown_runtime_is_a_usage_error() -> None:
    result = _run("normalize", "--from", "gopher", "-", stdin=b"")
    assert result.returncode == 2
    assert b"invalid choice" in result.stderr


def test_bad_input_exits_nonzero_with_a_message_naming_the_problem(tmp_path: Path) -> None:
    store = f"jsonl:///{tmp_path}"
    result = _run("derive", "--session", "nope", "--store", store)
    assert result.returncode != 0
    assert b"nope" in result.stderr


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_reading_a_missing_store_reports_it_and_creates_nothing(
    tmp_path: Path, scheme: str
) -> None:
    target = tmp_path / "absent" / ("sessions.db" if scheme == "sqlite" else "sessions")
    store = f"{scheme}:///{target}"
    for command in (
        ("events", "--session", "s1"),
        ("derive", "--session", "s1"),
        ("show", "s1"),
        ("replay", "--session", "s1"),
        ("repair", "--session", "s1"),
    ):
        result = _run(*command, "--store", store)
        assert result.returncode == 1, (command, result.stderr)
        assert f"no store at {store}".encode() in result.stderr, (command, result.stderr)
    listed = _run("sessions", "--store", store)
    assert listed.returncode == 0, listed.stderr
    assert b"s1" not in listed.stdout
    assert not (tmp_path / "absent").exists()


def test_a_run_repairs_a_session_its_last_run_left_cut_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DESIGN: repair on load of a non-live session. ``run`` continuing a session whose
    last run was killed mid-turn first closes that turn (interrupted) and reports the
    tool call it left open; a clean session is left as it is."""
    from universal_event.cli import _repair_before_continuing
    from universal_event.events import (
        AssistantMessageEvent,
        SessionEndedSeqEvent,
        SessionInterruptedEvent,
        TurnEndEvent,
        TurnStartEvent,
    )
    from universal_event.log import SessionLog
    from universal_event.parts import ToolCallPart
    from universal_event.stores import open_store

    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    cut = SessionLog(store, "cut")
    cut.append(TurnStartEvent(turn_id="t1"))
    call = ToolCallPart(id="call_1", name="Bash", arguments={"command": "sleep 9"})
    cut.append(AssistantMessageEvent(turn_id="t1", content=[call]))
    cut.checkpoint()
    cut.close()  # the process that wrote it is gone

    log = SessionLog(store, "cut", live=False)  # as run loads it: once, repaired, then live
    _repair_before_continuing(log)
    log.go_live()
    assert log.live and SessionLog.live_writer(store, "cut") is log
    log.close()
    events = SessionLog.open(store, "cut").events()
    assert [type(e) for e in events[2:]] == [
        TurnEndEvent,
        SessionInterruptedEvent,
        SessionEndedSeqEvent,
    ]
    interrupted = events[3]
    assert isinstance(interrupted, SessionInterruptedEvent)
    assert [c.call_id for c in interrupted.open_tool_calls] == ["call_1"]
    assert "the last run was cut off" in capsys.readouterr().err
    _repair_before_continuing(SessionLog(store, "cut", live=False))  # nothing open any more
    _repair_before_continuing(SessionLog(store, "new", live=False))  # no session yet
    assert len(SessionLog.open(store, "cut").events()) == 5
    assert capsys.readouterr().err == ""
    store.close()


def test_store_may_come_before_the_command(tmp_path: Path) -> None:
    """DESIGN: ``--store URL`` everywhere: before the command or after it (after wins)."""
    before = tmp_path / "before.db"
    after = tmp_path / "after.db"
    imported = _run(
        "--store", f"sqlite:///{before}", "import", "--from", "claude-code", str(CAPTURE),
        "--session", "s1",
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    listed = _run("--store", f"sqlite:///{before}", "sessions")
    assert listed.returncode == 0 and b"s1" in listed.stdout
    both = _run("--store", f"sqlite:///{before}", "sessions", "--store", f"sqlite:///{after}")
    assert both.returncode == 0 and b"s1" not in both.stdout and not after.exists()


def test_bad_command_lines_get_one_line_errors_not_tracebacks(tmp_path: Path) -> None:
    """Usage errors exit 2, everything else 1, always as one line on stderr."""
    cases: list[tuple[list[str], int, str]] = [
        (["events", "--session", ""], 2, "a session id must not be empty"),
        (["fork", "--session", "a", "--new", " "], 2, "a session id must not be empty"),
        (["events", "--session", "caf\udce9"], 2, "is not valid UTF-8"),
        (["serve", "--port", "99999"], 2, "is not a TCP port"),
        (["replay", "--session", "a", "--paced", "--max-gap", "0"], 2, "must be a positive"),
        (["sessions", "--store", ""], 1, "--store is empty"),
        (
            ["sessions", "--store", f"sqlite:/{tmp_path}/x.db"],
            1,
            "has a host part",
        ),
        (["schema", "--out", "/proc/no-such-dir"], 1, "universal-event: error: "),
        (["schema", "--check", "--out", str(tmp_path)], 1, "does not exist"),
    ]
    for args, status, message in cases:
        result = _run(*args)
        err = result.stderr.decode()
        assert result.returncode == status, (args, err)
        assert message in err and "Traceback" not in err, (args, err)


def test_a_request_body_read_as_another_api_is_refused_naming_the_right_reader() -> None:
    chat_body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    result = _run("normalize", "--from", "openai-responses-request", "-", stdin=chat_body.encode())
    assert result.returncode == 1
    assert "read it as openai-chat-request or anthropic-request" in result.stderr.decode()
    responses_body = json.dumps({"model": "m", "input": "hi"}).encode()
    result = _run("normalize", "--from", "anthropic-request", "-", stdin=responses_body)
    assert "read it as openai-responses-request" in result.stderr.decode()


def test_replay_paced_caps_long_gaps(tmp_path: Path) -> None:
    from universal_event.events import UserMessageEvent
    from universal_event.stores import open_store

    store = f"sqlite:///{tmp_path}/s.db"
    opened = open_store(store)
    eight_hours_apart = [
        UserMessageEvent(seq=seq, id=f"e{seq}", session_id="s", ts=1.7e9 + seq * 30_000)
        for seq in range(2)
    ]
    opened.append("s", eight_hours_apart, expected_seq=0)
    opened.close()
    result = _run("replay", "--session", "s", "--paced", "--max-gap", "0.05", "--store", store)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2  # within the test's timeout, not 8 h later


def test_a_byte_order_mark_before_the_first_line_is_not_part_of_it() -> None:
    from universal_event.ingest import import_events, normalize_bytes

    data = CAPTURE.read_bytes()
    for read in (normalize_bytes, import_events):
        plain = read("claude-code", data)
        marked = read("claude-code", b"\xef\xbb\xbf" + data)
        tags = [e.__struct_config__.tag for e in marked]
        assert tags == [e.__struct_config__.tag for e in plain]
        assert tags[0] == "session/start" and "native/unknown" not in tags[:2]


def test_handoff_of_a_missing_session_creates_nothing_and_sessions_escape_control_chars(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    result = _run("handoff", "--session", "nope", "--to", "codex", "--store", url)
    assert result.returncode in (1, 2), result.stderr  # 2 where codex is not installed
    assert not (tmp_path / "s.db").exists()

    from universal_event.events import UserMessageEvent
    from universal_event.stores import open_store

    store = open_store(url)
    store.append(
        "evil\x1b[2J",
        [UserMessageEvent(seq=0, id="e", session_id="evil\x1b[2J", ts=1.0)],
        expected_seq=0,
    )
    store.close()
    listed = _run("sessions", "--store", url).stdout.decode()
    assert "\x1b" not in listed and "'evil\\x1b[2J'" in listed


def test_normalize_follows_a_live_stream_and_reads_it_in_chunks() -> None:
    """``normalize -`` writes each event once its line has come (it read the whole input
    first: nothing until EOF, every event stamped at the end); chunked as it arrives,
    even a byte at a time through a byte-order mark, it gives what the whole gives."""
    import select

    from universal_event.ingest import normalize_bytes, normalize_stream

    capture = Path(__file__).parent / "fixtures/captured/codex/exec/x01_tool/stdout.jsonl"
    lines = capture.read_bytes().splitlines(keepends=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "universal_event", "normalize", "--from", "codex", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(lines[0])  # thread.started: the session starts
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready, "nothing written while the input stays open"
        first = json.loads(process.stdout.readline())
        assert first["type"] == "session/start"
        process.stdin.writelines(lines[1:])
    finally:
        process.stdin.close()
        rest = process.stdout.read()
        process.wait(timeout=30)
    assert process.returncode == 0
    streamed = [first["type"], *(json.loads(line)["type"] for line in rest.splitlines())]
    data = b"\xef\xbb\xbf" + capture.read_bytes()
    whole = normalize_bytes("codex", data)
    assert streamed == [event.__struct_config__.tag for event in whole]
    byte_by_byte = [
        event
        for events in normalize_stream("codex", (data[i : i + 1] for i in range(len(data))))
        for event in events
    ]

    def shape(event: object) -> object:
        built = msgspec.to_builtins(event)
        for envelope in ("id", "ts", "turn_id"):
            built.pop(envelope, None)
        return built

    assert [shape(e) for e in byte_by_byte] == [shape(e) for e in whole]
