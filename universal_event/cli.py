"""The ``universal-event`` command line (also ``python -m universal_event``).

The command and option names are a stable contract: scripts rely on them. Exit
status: 0 done, 1 an error (one ``universal-event: error: ...`` line on stderr), 2 a
usage error or a runtime that is not installed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import msgspec

from universal_event.errors import (
    CorruptEventError,
    LiveSessionError,
    NotAvailableError,
    SessionNotFoundError,
    StoreError,
    StoreNotFoundError,
    StoreURLError,
    UniversalEventError,
)
from universal_event.stores import DEFAULT_STORE_URL

if TYPE_CHECKING:
    from universal_event.events import Event
    from universal_event.log import SessionLog, StoredSession
    from universal_event.stores import Store

__all__ = ["main"]

RUNTIME_CHOICES = (
    "anthropic",
    "claude-code",
    "claude-code-transcript",
    "openai-chat",
    "openai-responses",
    "codex",
    "codex-rollout",
    "anthropic-request",
    "openai-chat-request",
    "openai-responses-request",
)
TARGET_CHOICES = ("anthropic", "openai-chat", "openai-responses")

Handler = Callable[[argparse.Namespace], int]


def _store_url(args: argparse.Namespace) -> str:
    """``--store`` after the command, else before it, else the environment, else the
    embedded default."""
    url: str | None = args.store if args.store is not None else getattr(args, "global_store", None)
    if url is not None and not url.strip():
        raise StoreURLError("--store is empty: give a store URL (or leave the option out)")
    return url or os.environ.get("UNIVERSAL_EVENT_STORE") or DEFAULT_STORE_URL


def _read_input(path: str) -> bytes:
    return b"".join(_input_chunks(path))


def _write_json(value: Any, out: IO[bytes] | None = None) -> None:
    stream = out or sys.stdout.buffer
    stream.write(msgspec.json.format(msgspec.json.encode(value), indent=2) + b"\n")
    stream.flush()


# ---------------------------------------------------------------- commands


def cmd_schema(args: argparse.Namespace) -> int:
    from universal_event.schema import SCHEMA_FILENAME, render_schema, write_schema

    directory = Path(args.out)
    if args.check:
        path = directory / SCHEMA_FILENAME
        if directory.exists() and not directory.is_dir():
            print(
                f"universal-event: error: {directory} is a file; --out names the directory "
                f"the schema goes into",
                file=sys.stderr,
            )
            return 1
        if not path.is_file():
            missing = "is not a file" if path.exists() else "does not exist"
            print(
                f"universal-event: error: {path} {missing}: "
                f"run `universal-event schema --out {directory}`",
                file=sys.stderr,
            )
            return 1
        if path.read_bytes() != render_schema():
            print(
                f"universal-event: error: {path} is stale: "
                f"run `universal-event schema --out {directory}`",
                file=sys.stderr,
            )
            return 1
        print(f"{path} is up to date")
        return 0
    print(write_schema(directory))
    return 0


def cmd_normalize(args: argparse.Namespace) -> int:
    """Events written as the input completes them (a live stream piped in is followed,
    not read to its end first; memory stays that of the adapter's state)."""
    from universal_event.codec import encode_lines
    from universal_event.events import NativeUnknownEvent
    from universal_event.ingest import normalize_stream

    count = unknown = 0
    out = sys.stdout.buffer
    for events in normalize_stream(args.runtime, _input_chunks(args.file)):
        if events:
            out.write(encode_lines(events))
            out.flush()
            count += len(events)
            unknown += sum(isinstance(event, NativeUnknownEvent) for event in events)
    _warn_if_unrecognised(args, count, unknown)
    return 0


def _input_chunks(path: str) -> Iterator[bytes]:
    """The input as it can be read: from a pipe, what has arrived (``read1``)."""
    if path == "-":
        if sys.stdin is None:  # started with stdin closed (`<&-`)
            raise UniversalEventError("standard input is closed: give the input as FILE")
        source: IO[bytes] = sys.stdin.buffer
    else:
        try:
            source = open(path, "rb")
        except OSError as exc:
            raise UniversalEventError(f"cannot read input file {path!r}: {exc.strerror}") from exc
    try:
        while chunk := source.read1(1 << 16):  # type: ignore[attr-defined]
            yield chunk
    finally:
        if path != "-":
            source.close()


def _warn_if_unrecognised(args: argparse.Namespace, count: int, unknown: int) -> None:
    """Input none of which the runtime's adapter recognised is kept all the same (as
    ``native/unknown``: never dropped), but is most likely another runtime's: say so."""
    if count and unknown == count:
        print(
            f"universal-event: warning: nothing in {args.file or '-'} was recognised as "
            f"{args.runtime} input ({count} native/unknown events); is --from right?",
            file=sys.stderr,
        )


def _open_store(args: argparse.Namespace, *, must_exist: bool = False) -> Store:
    """The ``--store``; ``must_exist`` for commands that only read what is stored (a
    missing sqlite file or jsonl directory is reported, not created)."""
    from universal_event.stores import open_store

    url = _store_url(args)
    if must_exist:
        _refuse_a_file_that_is_no_store(url)
    return open_store(url, must_exist=must_exist)


def _refuse_a_file_that_is_no_store(url: str) -> None:
    """A read-only command writes nothing, so a ``sqlite:`` file that holds no store is
    not made one (opening it would write the store's schema into it): an empty file is
    no store yet (:class:`StoreNotFoundError`), a SQLite database without the store's
    tables someone else's (:class:`StoreError`). Looked at read-only; anything else (a
    missing file, one that is no database) is left to ``open_store`` to report."""
    if not url.startswith("sqlite:"):
        return
    import sqlite3
    import stat
    from urllib.parse import quote

    from universal_event.stores.sqlite import SqliteStore

    try:
        path = SqliteStore.path_of(url)
        found = os.stat(path)
    except (OSError, ValueError):  # missing, or a bad URL: open_store says which
        return
    if not stat.S_ISREG(found.st_mode):
        return
    if found.st_size == 0:
        raise StoreNotFoundError(url)
    absolute = "/" + os.path.abspath(path).lstrip("/")  # `//x` would be a URI authority
    try:
        conn = sqlite3.connect(f"file:{quote(absolute)}?mode=ro", uri=True)
        try:
            table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:  # not a database, or not readable so: open_store reports it
        return
    if table is None:
        raise StoreError(
            f"{path} is not a universal-event store (a SQLite database without its tables); "
            "a command that only reads does not write to it"
        )


def _open_session_store(args: argparse.Namespace, session_id: str) -> Store:
    """The ``--store`` of a command on an existing session; no store is no such session."""
    try:
        return _open_store(args, must_exist=True)
    except StoreNotFoundError as exc:
        raise SessionNotFoundError(session_id, str(exc)) from None


def _stored_session(store: Store, session_id: str) -> StoredSession:
    """What the model sees of the session, its events not kept (``derive``, ``render``)."""
    from universal_event.log import StoredSession

    return StoredSession(store, session_id)


def cmd_import(args: argparse.Namespace) -> int:
    """Normalise a native input into a stored session; importing it again adds nothing
    (and once it has grown, only what is new: :func:`~universal_event.ingest.import_events`)."""
    from universal_event.events import NativeUnknownEvent
    from universal_event.ingest import (
        REQUEST_RUNTIMES,
        append_imported,
        append_request,
        import_events,
    )
    from universal_event.log import SessionLog

    events = import_events(args.runtime, _read_input(args.file))
    unknown = sum(isinstance(event, NativeUnknownEvent) for event in events)
    _warn_if_unrecognised(args, len(events), unknown)
    store = _open_store(args)
    try:
        release = _hold_session(store, args.session)
        try:
            log = SessionLog(store, args.session, live=False)
            first = log.next_seq
            if args.runtime in REQUEST_RUNTIMES:  # a snapshot of the whole history
                append_request(log, events)
            else:
                append_imported(log, events)
            log.checkpoint()
        finally:
            if release is not None:
                release()
        print(
            f"session {args.session}: {log.next_seq - first} events imported, {log.next_seq} in all"
        )
    finally:
        store.close()
    return 0


_LIVE_GRACE = 1.0
"""Seconds another process's live lock may take to go (a writer that just ended)."""


def _hold_session(store: Store, session_id: str) -> Callable[[], None] | None:
    """Take the session's live lock for a command that appends to it (``import``):
    returns the release (None where the store has no such lock, or it cannot be made).

    A session another process is writing live is refused, as ``repair`` refuses it: its
    writer's next checkpoint would fail (the seqs it expects taken), and what it had not
    stored yet would be lost. Held while appending, so no run takes the session
    meanwhile. A lock still held a second later is a live writer (PostgreSQL lets go of
    a dead one's when the server notices its connection closed)."""
    hold = getattr(store, "hold_live", None)
    if hold is None:
        return None
    has_live_writer = getattr(store, "has_live_writer", None)
    deadline = time.monotonic() + _LIVE_GRACE
    while True:
        release: Callable[[], None] | None = hold(session_id)
        if release is not None:
            return release
        if has_live_writer is None or not has_live_writer(session_id):
            return None  # the lock cannot be made here (best effort, as for a live log)
        if time.monotonic() >= deadline:
            raise LiveSessionError(
                f"session {session_id!r} is being written by another process (a run still "
                "going); refusing to import into it: what that run has not stored yet "
                "would be lost"
            )
        time.sleep(0.05)


def cmd_events(args: argparse.Namespace) -> int:
    from universal_event.codec import encode_lines

    store = _open_session_store(args, args.session)
    try:
        try:
            if store.latest_seq(args.session) < 0:
                raise SessionNotFoundError(args.session)
        except CorruptEventError:
            pass  # damaged at its end: the events before the damage are printed, then this
        out = sys.stdout.buffer
        page: list[Event] = []
        try:
            for event in store.read(args.session):
                page.append(event)
                if len(page) >= 512:
                    out.write(encode_lines(page))
                    page.clear()
        finally:  # the events before a damaged one are printed before the error
            out.write(encode_lines(page))
            out.flush()
    finally:
        store.close()
    return 0


def cmd_derive(args: argparse.Namespace) -> int:
    store = _open_session_store(args, args.session)
    try:
        _write_json(_stored_session(store, args.session).derive_messages())
    finally:
        store.close()
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    """The stored session rendered as the target SDK's ``create()`` keyword arguments.

    Warnings (repaired orphans, dropped foreign reasoning) go to stderr, one per line.
    """
    from adapters import render_session

    store = _open_session_store(args, args.session)
    try:
        stored = _stored_session(store, args.session)
        warnings: list[Any] = []
        rendered = render_session(stored, args.target, model=args.model, warnings=warnings)
        _write_json(rendered)
        for warning in warnings:
            print(f"universal-event: warning: [{warning.code}] {warning.message}", file=sys.stderr)
    finally:
        store.close()
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    from universal_event._show import sessions_table

    try:
        store = _open_store(args, must_exist=True)
    except StoreNotFoundError:
        print("\n".join(sessions_table([])))  # nothing stored yet: no sessions
        return 0
    try:
        print("\n".join(sessions_table(store.list_sessions())))
    finally:
        store.close()
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from universal_event._show import session_table

    store = _open_session_store(args, args.session)
    try:
        if store.latest_seq(args.session) < 0:
            raise SessionNotFoundError(args.session)
        print("\n".join(session_table(args.session, store.read(args.session))))
    finally:
        store.close()
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    store = _open_session_store(args, args.session)
    try:
        from universal_event.log import fork_stored

        child_id, copied = fork_stored(store, args.session, args.new_session, after_turn=args.turn)
        print(f"session {child_id}: forked from {args.session}, {copied} events")
    finally:
        store.close()
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    from universal_event.repair import repair

    store = _open_session_store(args, args.session)
    try:
        appended = repair(store, args.session)
    finally:
        store.close()
    if not appended:
        print(f"session {args.session}: nothing open, nothing to repair")
        return 0
    kinds = ", ".join(str(type(e).__struct_config__.tag) for e in appended)
    print(f"session {args.session}: appended {kinds} (seqs {appended[0].seq}..{appended[-1].seq})")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from universal_event.codec import encode
    from universal_event.replay import replay

    store = _open_session_store(args, args.session)
    try:
        if store.latest_seq(args.session) < 0:
            raise SessionNotFoundError(args.session)
        out = sys.stdout.buffer
        events = replay(
            store.read(args.session), paced=args.paced, speed=args.speed, max_gap=args.max_gap
        )
        for event in events:
            out.write(encode(event) + b"\n")
            if args.paced:
                out.flush()
        out.flush()
    finally:
        store.close()
    return 0


def _drive(
    args: argparse.Namespace, runtime: str, prompt: str | None, *, handing_over: bool = False
) -> int:
    """``run`` and ``handoff``: open the session live, hand over / run, print the timeline.

    Without ``--model-url`` a built-in fake model server on 127.0.0.1 answers (see
    :func:`universal_event.fake_models.demo_responder`): nothing leaves the machine.
    """
    import contextlib

    from universal_event.errors import RuntimeStartError
    from universal_event.fake_models import FakeModelServer, demo_responder
    from universal_event.handoff import RuntimePlaces, hand_off, make_runner, prepare
    from universal_event.log import SessionLog
    from universal_event.runtimes import (
        runtime_available,
        timeline_lines,
        timeline_row,
    )

    if not runtime_available(runtime):
        extra = "claude" if runtime == "claude-code" else "codex"
        raise NotAvailableError(
            f"{runtime} is not installed (pip install 'universal-event[{extra}]')"
        )
    for option, directory in (("--cwd", args.cwd), ("--workdir", args.workdir)):
        if Path(directory).exists() and not Path(directory).is_dir():
            raise NotADirectoryError(20, f"{option} names a file, not a directory", directory)
    places = RuntimePlaces(Path(args.workdir).resolve(), Path(args.cwd).resolve())
    # A hand-over needs a session to hand over: no store or session is said so, not made.
    store = _open_session_store(args, args.session) if handing_over else _open_store(args)
    if handing_over and store.latest_seq(args.session) < 0:
        store.close()
        raise SessionNotFoundError(args.session)
    with contextlib.ExitStack() as stack:
        stack.callback(store.close)
        model_url = args.model_url
        if model_url is None:
            fake = stack.enter_context(FakeModelServer(responder=demo_responder))
            model_url = fake.url
            print(
                f"universal-event: model: built-in fake model server at {model_url}",
                file=sys.stderr,
            )

        def show(event: Event) -> None:
            row = timeline_row(event)
            if row is not None and not args.quiet:
                print(row, file=sys.stderr, flush=True)

        runner = make_runner(
            runtime,  # type: ignore[arg-type]
            model_url,
            places,
            args.model,
            on_event=show,
            timeout=args.timeout,
        )
        log = SessionLog(store, args.session, live=False)  # loaded once: repaired, then run
        stack.callback(log.close)
        _repair_before_continuing(log)
        log.go_live()
        status = "completed"
        error: BaseException | None = None
        if handing_over:
            # Asked for: written from the log even when the session's last runtime is
            # this one (an imported session, whose native session is not here).
            written = hand_off(
                log,
                runtime,  # type: ignore[arg-type]
                model=runner.model,
                cwd=runner.cwd,
                claude_home=places.claude_home,
                codex_home=places.codex_home,
            )
            for warning in written.warnings:
                print(
                    f"universal-event: warning: [{warning.code}] {warning.message}", file=sys.stderr
                )
            print(
                f"session {args.session}: handed to {runtime} as {written.native_session_id} ({written.path})"
            )
            if prompt is not None:
                result = runner.run(log, prompt, resume=written.native_session_id)
                status, error = result.status, result.error
        else:
            resume, handed = prepare(log, runner)
            if handed is not None:
                print(
                    f"universal-event: handed to {runtime} as {handed.native_session_id}",
                    file=sys.stderr,
                )
            result = runner.run(log, prompt, resume=resume)
            status, error = result.status, result.error
        print("\n".join(timeline_lines(args.session, log.events())))
        if isinstance(error, RuntimeStartError):  # nothing of the prompt was logged
            hint = ""
            if not handing_over and "resume" in str(error):
                hint = (
                    f" (its native session is not here: `universal-event handoff --to "
                    f"{runtime} --session {args.session}` writes one from the log)"
                )
            print(f"universal-event: error: {error}{hint}", file=sys.stderr)
            return 1
        if error is not None:
            # e.g. a checkpoint refused because another process wrote the session, the
            # timeout (RuntimeTimeoutError)
            print(f"universal-event: error: the run ended early: {error}", file=sys.stderr)
            return 1
        if status != "completed":
            print(f"universal-event: error: {_turn_failure(log.events(), status)}", file=sys.stderr)
            return 1
    return 0


def _turn_failure(events: Sequence[Event], status: str) -> str:
    """Why the run's turn did not complete, from its ``turn/end`` (the model server's
    error, as the runtime gave it)."""
    from universal_event.events import TurnEndEvent

    end = next((e for e in reversed(events) if isinstance(e, TurnEndEvent)), None)
    why = f": {end.error}" if end is not None and end.error else ""
    return f"the turn ended {status}{why}"


def _repair_before_continuing(log: SessionLog) -> None:
    """A session whose last run was cut off (the process killed, a crash) is repaired
    when a new run loads it to continue: its open turns and steps end interrupted, its
    open tool calls are reported, before the new turn begins."""
    from universal_event.repair import repair_log

    if not log.next_seq:
        return
    appended = repair_log(log, reason="the last run was cut off; repaired before this one")
    if appended:
        print(
            f"universal-event: session {log.session_id}: the last run was cut off; closed what it "
            f"left open (seqs {appended[0].seq}..{appended[-1].seq})",
            file=sys.stderr,
        )


def cmd_run(args: argparse.Namespace) -> int:
    return _drive(args, args.runtime, args.prompt)


def cmd_handoff(args: argparse.Namespace) -> int:
    return _drive(args, args.target, args.prompt, handing_over=True)


def _runtime_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--model-url",
        default=None,
        help="root URL of the model server (Claude Code: Anthropic Messages at /v1/messages; "
        "Codex: OpenAI Responses at /v1/responses); default: a built-in offline fake model",
    )
    sub.add_argument(
        "--model", default=None, type=_model_name, help="model name (default: per runtime)"
    )
    sub.add_argument(
        "--workdir",
        default="./.universal-event/runtimes",
        help="the runtimes' homes (claude-home, codex-home); default ./.universal-event/runtimes",
    )
    sub.add_argument("--cwd", default=".", help="where the runtime runs commands (default: .)")
    sub.add_argument("--quiet", action="store_true", help="no live event lines on stderr")
    sub.add_argument(
        "--timeout",
        type=_timeout,
        default=600.0,  # universal_event.runtimes.DEFAULT_TIMEOUT
        help="seconds the run may take before the turn is interrupted and the runtime "
        "stopped (default: 600)",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    from universal_event.server._serve import run_server

    return run_server(
        store_url=_store_url(args),
        host=args.host,
        port=args.port,
        dev=args.dev,
        tokens_file=args.tokens_file,
    )


# ---------------------------------------------------------------- parser


def _session_id(text: str) -> str:
    """A session id given on the command line: not empty (the library would make one up,
    and the user could not find the session by what they typed)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a session id must not be empty")
    try:
        text.encode()
    except UnicodeEncodeError:  # bytes the locale could not decode (surrogate escapes)
        raise argparse.ArgumentTypeError(
            f"session id {text!r} is not valid UTF-8 (a byte the locale could not decode)"
        ) from None
    return text


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port < 65536:  # 0: any free port
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0-65535)")
    return port


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be a positive number")
    return value


_MAX_TIMEOUT = 365 * 24 * 3600.0
"""The longest ``--timeout``: a year (the runners' watchdogs cannot wait for ever)."""


def _timeout(text: str) -> float:
    """``--timeout``: seconds, more than 0 and finite (``inf``, ``nan``, ``1e10`` are
    refused: no run is meant to be unbounded from the command line)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= _MAX_TIMEOUT:  # also false for nan
        raise argparse.ArgumentTypeError(
            f"{text} is out of range: give seconds, more than 0 and at most "
            f"{_MAX_TIMEOUT:.0f} (a year)"
        )
    return value


def _model_name(text: str) -> str:
    """A ``--model`` given on the command line: not blank (no API knows a model '')."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a model name must not be empty")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="universal-event",
        description="One event schema for every agent runtime.",
    )
    store_help = f"store URL (default: $UNIVERSAL_EVENT_STORE, else {DEFAULT_STORE_URL})"
    # Before the command or after it: the command's own dest would overwrite the
    # global one with its default (argparse), so the global one has a dest of its own.
    parser.add_argument("--store", dest="global_store", default=None, help=store_help)
    store_option = argparse.ArgumentParser(add_help=False)
    store_option.add_argument("--store", default=None, help=store_help)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, parents=[store_option], help=help_text)
        sub.set_defaults(handler=handler)
        return sub

    schema = add("schema", cmd_schema, "write (or --check) the JSON Schema")
    schema.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    schema.add_argument("--out", default="schemas", help="directory (default: schemas)")

    normalize = add("normalize", cmd_normalize, "native stream in, events as JSON lines out")
    normalize.add_argument("--from", dest="runtime", required=True, choices=RUNTIME_CHOICES)
    normalize.add_argument("file", nargs="?", default="-")

    import_ = add("import", cmd_import, "normalize a native stream into a stored session")
    import_.add_argument("--from", dest="runtime", required=True, choices=RUNTIME_CHOICES)
    import_.add_argument("file")
    import_.add_argument("--session", required=True, type=_session_id)

    for name, handler, help_text in (
        ("events", cmd_events, "the stored events as JSON lines"),
        ("derive", cmd_derive, "the derived neutral messages as a JSON array"),
    ):
        sub = add(name, handler, help_text)
        sub.add_argument("--session", required=True, type=_session_id)

    render = add("render", cmd_render, "the SDK create() keyword arguments for a target")
    render.add_argument("--session", required=True, type=_session_id)
    render.add_argument("--to", dest="target", required=True, choices=TARGET_CHOICES)
    render.add_argument(
        "--model", default=None, type=_model_name, help="target model (default: the session's)"
    )

    add("sessions", cmd_sessions, "list stored sessions")
    show = add("show", cmd_show, "a readable table of a session's turns, steps, tool calls")
    show.add_argument("session", type=_session_id)

    fork = add("fork", cmd_fork, "fork a session at a turn boundary")
    fork.add_argument("--session", required=True, type=_session_id)
    fork.add_argument("--new", dest="new_session", required=True, type=_session_id)
    fork.add_argument("--turn", default=None, help="turn id to fork after (default: last)")

    repair = add("repair", cmd_repair, "close a cut-off session cleanly")
    repair.add_argument("--session", required=True, type=_session_id)

    replay = add("replay", cmd_replay, "print every event again, chunks included")
    replay.add_argument("--session", required=True, type=_session_id)
    replay.add_argument("--paced", action="store_true", help="wait as the original did")
    replay.add_argument(
        "--speed", type=_seconds, default=1.0, help="with --paced: this many times as fast"
    )
    replay.add_argument(
        "--max-gap",
        type=_seconds,
        default=None,
        help="with --paced: wait at most this many seconds between two events",
    )

    run = add("run", cmd_run, "drive a runtime, log it live, print the unified timeline")
    run.add_argument("--runtime", required=True, choices=("claude-code", "codex"))
    run.add_argument("--session", required=True, type=_session_id)
    run.add_argument("prompt")
    _runtime_options(run)

    handoff = add("handoff", cmd_handoff, "hand a session to another runtime")
    handoff.add_argument("--session", required=True, type=_session_id)
    handoff.add_argument("--to", dest="target", required=True, choices=("claude-code", "codex"))
    handoff.add_argument("prompt", nargs="?", default=None, help="run this turn there at once")
    _runtime_options(handoff)

    serve = add("serve", cmd_serve, "the control plane: SSE transport and session viewer")
    serve.add_argument("--port", type=_port, default=8765)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--dev", action="store_true", help="loopback only, no auth")
    serve.add_argument(
        "--tokens-file",
        default=None,
        help="a file of lines `TOKEN SESSION read,write` (without it: the lines "
        "themselves in $UNIVERSAL_EVENT_TOKENS)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    if sys.stdout is None:  # started with stdout closed (`>&-`): refused before any work
        print(
            "universal-event: error: standard output is closed "
            "(redirect it to /dev/null to discard what the command prints)",
            file=sys.stderr,
        )
        return 1
    try:
        return handler(args)
    except NotAvailableError as exc:
        print(f"universal-event: error: {exc}", file=sys.stderr)
        return 2
    except UniversalEventError as exc:
        print(f"universal-event: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a full disk, a port in use, a path that cannot be written
        print(f"universal-event: error: {_os_error(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # what was logged before it is stored (checkpoints)
        print("universal-event: interrupted", file=sys.stderr)
        return 130


def _os_error(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


if __name__ == "__main__":
    raise SystemExit(main())
