"""The ``universal-event`` command line (also ``python -m universal_event``).

The command and option names are a stable contract: scripts rely on them.
Commands whose parts are not built exit 2 with a "not available yet" message.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import msgspec

from universal_event.errors import NotAvailableError, UniversalEventError
from universal_event.stores import DEFAULT_STORE_URL

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
    url: str | None = args.store
    return url or os.environ.get("UNIVERSAL_EVENT_STORE") or DEFAULT_STORE_URL


def _read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    return Path(path).read_bytes()


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
        if not path.exists() or path.read_bytes() != render_schema():
            print(
                f"{path} is stale: run `universal-event schema --out {directory}`",
                file=sys.stderr,
            )
            return 1
        print(f"{path} is up to date")
        return 0
    print(write_schema(directory))
    return 0


def cmd_normalize(args: argparse.Namespace) -> int:
    from universal_event.codec import encode_lines
    from universal_event.ingest import normalize_bytes

    events = normalize_bytes(args.runtime, _read_input(args.file))
    sys.stdout.buffer.write(encode_lines(events))
    return 0


def _not_available(what: str) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        raise NotAvailableError(f"`{what}` is not available yet")

    return handler


cmd_import = _not_available("import")
cmd_events = _not_available("events")
cmd_derive = _not_available("derive")
cmd_render = _not_available("render")
cmd_sessions = _not_available("sessions")
cmd_show = _not_available("show")
cmd_fork = _not_available("fork")
cmd_repair = _not_available("repair")
cmd_replay = _not_available("replay")
cmd_run = _not_available("run")
cmd_handoff = _not_available("handoff")
cmd_serve = _not_available("serve")


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="universal-event",
        description="One event schema for every agent runtime.",
    )
    store_option = argparse.ArgumentParser(add_help=False)
    store_option.add_argument(
        "--store",
        default=None,
        help=f"store URL (default: $UNIVERSAL_EVENT_STORE, else {DEFAULT_STORE_URL})",
    )
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
    import_.add_argument("--session", required=True)

    for name, handler, help_text in (
        ("events", cmd_events, "the stored events as JSON lines"),
        ("derive", cmd_derive, "the derived neutral messages as a JSON array"),
    ):
        sub = add(name, handler, help_text)
        sub.add_argument("--session", required=True)

    render = add("render", cmd_render, "the SDK create() keyword arguments for a target")
    render.add_argument("--session", required=True)
    render.add_argument("--to", dest="target", required=True, choices=TARGET_CHOICES)

    add("sessions", cmd_sessions, "list stored sessions")
    show = add("show", cmd_show, "a readable table of a session's turns, steps, tool calls")
    show.add_argument("session")

    fork = add("fork", cmd_fork, "fork a session at a turn boundary")
    fork.add_argument("--session", required=True)
    fork.add_argument("--new", dest="new_session", required=True)
    fork.add_argument("--turn", default=None, help="turn id to fork after (default: last)")

    repair = add("repair", cmd_repair, "close a cut-off session cleanly")
    repair.add_argument("--session", required=True)

    replay = add("replay", cmd_replay, "print every event again, chunks included")
    replay.add_argument("--session", required=True)
    replay.add_argument("--paced", action="store_true", help="wait as the original did")

    run = add("run", cmd_run, "drive a runtime, log it live, print the unified timeline")
    run.add_argument("--runtime", required=True, choices=("claude-code", "codex"))
    run.add_argument("--session", required=True)
    run.add_argument("prompt")

    handoff = add("handoff", cmd_handoff, "hand a session to another runtime")
    handoff.add_argument("--session", required=True)
    handoff.add_argument("--to", dest="target", required=True, choices=("claude-code", "codex"))

    serve = add("serve", cmd_serve, "the control plane: SSE transport and session viewer")
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--dev", action="store_true", help="loopback only, no auth")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except NotAvailableError as exc:
        print(f"universal-event: {exc}", file=sys.stderr)
        return 2
    except UniversalEventError as exc:
        print(f"universal-event: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
