"""What the command line refuses, and how: one ``universal-event: error:`` line (usage
errors: argparse's, exit 2), nothing written where nothing was asked to be.

Each test here stood for a bug: a ``--timeout`` the runners could not wait for, an
``import`` into a session another process was writing, a read-only command that made an
empty file a store, failure lines without the prefix, a blank ``--model``, a closed
stdout, a ``runtime/switch`` to the runtime already in use.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from universal_event.cli import build_parser, main
from universal_event.events import RuntimeSwitchEvent
from universal_event.stores import open_store

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "tests" / "fixtures" / "captured" / "claude" / "cli" / "c01_tool" / "stdout.jsonl"
POSTGRES_URL = os.environ.get(
    "UNIVERSAL_EVENT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def _cli(*args: str, shell_suffix: str = "") -> subprocess.CompletedProcess[str]:
    """The real entry point in a subprocess; ``shell_suffix`` redirects (``>&-``)."""
    command = [sys.executable, "-m", "universal_event", *args]
    if shell_suffix:
        command = ["sh", "-c", f'"$@" {shell_suffix}', "sh", *command]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
    )


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("universal-event: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# ---------------------------------------------------------------- --timeout


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e10", "1e400", "0", "-5", "soon"])
@pytest.mark.parametrize("command", ["run", "handoff"])
def test_a_timeout_no_run_can_wait_for_is_a_usage_error_naming_the_option(
    command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``inf`` / ``1e10`` used to pass (positive), and the Codex watchdog then died
    with an OverflowError: the run had no timeout at all."""
    target = ["--runtime", "codex"] if command == "run" else ["--to", "codex"]
    argv = [command, *target, "--session", "s", f"--timeout={value}", "hi"]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert "argument --timeout" in capsys.readouterr().err


def test_a_timeout_in_range_is_taken() -> None:
    for value, seconds in (("600", 600.0), ("0.5", 0.5), ("31536000", 31536000.0)):
        args = build_parser().parse_args(
            ["run", "--runtime", "codex", "--session", "s", "--timeout", value, "hi"]
        )
        assert args.timeout == seconds


# ---------------------------------------------------------------- import under a live writer


_LIVE_WRITER = """
import sys
from universal_event import SessionLog
from universal_event.events import TurnStartEvent, UserMessageEvent
from universal_event.parts import TextPart
from universal_event.stores import open_store

log = SessionLog(open_store(sys.argv[1]), "busy")  # live: this process writes it
log.append(TurnStartEvent(turn_id="t1"))
log.checkpoint()
print("ready", flush=True)
sys.stdin.readline()
log.append(UserMessageEvent(turn_id="t1", content=[TextPart(text="logged live")]))
try:
    log.checkpoint()
    print("checkpoint ok", flush=True)
except Exception as exc:
    print(f"checkpoint failed: {type(exc).__name__}", flush=True)
"""


@pytest.fixture(params=["sqlite", "jsonl", "postgresql"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 's.db'}"
    elif request.param == "jsonl":
        yield f"jsonl:///{tmp_path / 'sessions'}"
    else:
        import psycopg

        try:
            with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            if os.environ.get("UNIVERSAL_EVENT_REQUIRE_POSTGRES") == "1":
                pytest.fail(f"PostgreSQL at {POSTGRES_URL} is unreachable: {exc}")
            pytest.skip(f"PostgreSQL at {POSTGRES_URL} is unreachable: {exc}")
        schema = f"ue_test_cli_{uuid.uuid4().hex[:10]}"
        yield f"{POSTGRES_URL}?schema={schema}"
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_import_refuses_a_session_another_process_is_writing(durable_url: str) -> None:
    """As repair does: an import appended under a live writer made the writer's next
    checkpoint fail (ConflictError), and what it had not stored yet was lost. Once the
    writer is gone the same import goes ahead."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _LIVE_WRITER, durable_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    imported = ["import", "--from", "claude-code", str(CAPTURE), "--session", "busy"]
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        refused = _cli(*imported, "--store", durable_url)
        assert refused.returncode == 1, refused.stderr
        line = _one_error_line(refused.stderr)
        assert "'busy'" in line and "another process" in line and "import" in line
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "checkpoint ok"
    finally:
        writer.kill()
        writer.wait()
    store = open_store(durable_url)
    try:
        assert store.latest_seq("busy") == 1  # the writer's two events, nothing imported
    finally:
        store.close()
    done = _cli(*imported, "--store", durable_url)  # the writer is gone (PG: a moment later)
    assert done.returncode == 0, done.stderr
    assert "events imported" in done.stdout


# ---------------------------------------------------------------- read-only commands


READ_ONLY = (
    ("events", "--session", "x"),
    ("derive", "--session", "x"),
    ("render", "--session", "x", "--to", "anthropic", "--model", "m"),
    ("show", "x"),
    ("fork", "--session", "x", "--new", "y"),
    ("repair", "--session", "x"),
    ("replay", "--session", "x"),
)


def test_read_only_commands_leave_an_empty_file_as_it_is(tmp_path: Path) -> None:
    """An existing 0-byte file is no store yet: reported as a missing one is, and never
    turned into a SQLite database by a command that only reads."""
    empty = tmp_path / "empty.db"
    empty.touch()
    url = f"sqlite:///{empty}"
    for command in READ_ONLY:
        result = _cli(*command, "--store", url)
        assert result.returncode == 1, (command, result.stderr)
        assert f"no store at {url}" in _one_error_line(result.stderr), command
        assert empty.stat().st_size == 0, command
    listed = _cli("sessions", "--store", url)
    assert listed.returncode == 0, listed.stderr
    assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_read_only_commands_do_not_write_into_another_sqlite_database(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    url = f"sqlite:///{other}"
    for command in (*READ_ONLY, ("sessions",)):
        result = _cli(*command, "--store", url)
        assert result.returncode == 1, (command, result.stderr)
        assert "is not a universal-event store" in _one_error_line(result.stderr), command
    assert other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


# ---------------------------------------------------------------- the error prefix


def test_schema_check_failures_carry_the_error_prefix(tmp_path: Path) -> None:
    missing = _cli("schema", "--check", "--out", str(tmp_path))
    assert missing.returncode == 1
    assert "does not exist" in _one_error_line(missing.stderr)
    (tmp_path / "universal-event.schema.json").mkdir()
    a_directory = _cli("schema", "--check", "--out", str(tmp_path))
    assert "universal-event.schema.json is not a file" in _one_error_line(a_directory.stderr)
    (tmp_path / "universal-event.schema.json").rmdir()
    (tmp_path / "universal-event.schema.json").write_text("{}\n")
    stale = _cli("schema", "--check", "--out", str(tmp_path))
    assert stale.returncode == 1
    assert "is stale" in _one_error_line(stale.stderr)
    a_file = _cli("schema", "--check", "--out", str(tmp_path / "universal-event.schema.json"))
    assert a_file.returncode == 1
    assert "is a file; --out names the directory" in _one_error_line(a_file.stderr)


def test_serve_without_usable_tokens_is_a_usage_error_with_the_prefix(tmp_path: Path) -> None:
    env_without_tokens = {k: v for k, v in os.environ.items() if k != "UNIVERSAL_EVENT_TOKENS"}
    store = f"sqlite:///{tmp_path / 's.db'}"
    cases = (
        ([], "serve needs tokens"),
        (["--tokens-file", str(tmp_path / "none")], "No such file or directory"),
        (["--dev", "--host", "0.0.0.0"], "only on loopback"),
    )
    for extra, message in cases:
        result = subprocess.run(
            [sys.executable, "-m", "universal_event", "serve", "--store", store, "--port", "0",
             *extra],
            capture_output=True, text=True, timeout=60, check=False, cwd=ROOT,
            env=env_without_tokens,
        )  # fmt: skip
        assert result.returncode == 2, (extra, result.stderr)
        assert message in _one_error_line(result.stderr), extra


# ---------------------------------------------------------------- --model


@pytest.mark.parametrize("model", ["", " ", "\t"])
def test_a_blank_model_is_a_usage_error_naming_the_option(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ["render", "--session", "s", "--to", "openai-chat", "--model", model],
        ["run", "--runtime", "codex", "--session", "s", "--model", model, "hi"],
        ["handoff", "--session", "s", "--to", "codex", "--model", model],
    ):
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--store", f"sqlite:///{tmp_path / 's.db'}"])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert "argument --model: a model name must not be empty" in err, argv
    assert not (tmp_path / "s.db").exists()


# ---------------------------------------------------------------- closed stdout


def test_a_closed_stdout_is_one_error_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert _cli("import", "--from", "claude-code", str(CAPTURE), "--session", "cc",
                "--store", url).returncode == 0  # fmt: skip
    for command in (
        ("events", "--session", "cc"),
        ("derive", "--session", "cc"),
        ("replay", "--session", "cc"),
        ("show", "cc"),
        ("normalize", "--from", "claude-code", str(CAPTURE)),
    ):
        result = _cli(*command, "--store", url, shell_suffix=">&-")
        assert result.returncode == 1, (command, result.stderr)
        assert "standard output is closed" in _one_error_line(result.stderr), command


def test_a_closed_stdin_is_one_error_line() -> None:
    result = _cli("normalize", "--from", "claude-code", "-", shell_suffix="<&-")
    assert result.returncode == 1, result.stderr
    assert "standard input is closed" in _one_error_line(result.stderr)


# ---------------------------------------------------------------- handoff


def _switches(url: str, session: str) -> list[tuple[str | None, str]]:
    store = open_store(url)
    try:
        return [
            (e.from_runtime, e.to_runtime)
            for e in store.read(session)
            if isinstance(e, RuntimeSwitchEvent)
        ]
    finally:
        store.close()


def test_a_file_where_a_directory_belongs_is_named(tmp_path: Path) -> None:
    """``schema --out`` and a ``jsonl:`` store take a directory: a file there is said to
    be one (it was ``File exists``)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    schema = _cli("schema", "--out", str(a_file))
    assert schema.returncode == 1
    assert "goes into a directory; this is a file" in _one_error_line(schema.stderr)
    store = _cli("sessions", "--store", f"jsonl://{a_file}")
    assert store.returncode == 1
    assert f"a JSONL store is a directory; {str(a_file)!r} is a file" in _one_error_line(
        store.stderr
    )
    assert a_file.read_text() == "mine\n"


def test_a_run_whose_cwd_is_a_file_says_so(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    store = f"sqlite:///{tmp_path / 's.db'}"
    done = _cli("run", "--runtime", "claude-code", "--session", "s", "hi", "--cwd", str(a_file),
                "--store", store)  # fmt: skip
    assert done.returncode == 1
    assert "--cwd names a file, not a directory" in _one_error_line(done.stderr)
