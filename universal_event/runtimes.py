"""Drive the real agent runtimes (Claude Code, Codex) and log them live.

Each runner launches the runtime through its own Python SDK (``claude_agent_sdk`` for
Claude Code, ``openai_codex`` for the Codex app-server), points it at a model server
(``base_url``), feeds every native message through the runtime's adapter and appends
the universal events to a :class:`~universal_event.log.SessionLog` with
:func:`adapters._tap.tap` / :func:`~adapters._tap.atap`: checkpointed before the caller
(and so the runtime) can act on a tool call, at every step and turn end, and when the
stream ends however it ends.

Isolation from the caller: the environment is built from scratch with the switches that
keep each CLI on loopback (see the module constants). Both SDKs merge the caller's whole
``os.environ`` under the env they are given (``ANTHROPIC_AUTH_TOKEN``,
``CLAUDE_CONFIG_DIR``, ``CLAUDE_CODE_USE_BEDROCK``, ``HTTPS_PROXY`` would reach the CLI),
so each CLI is launched through a small generated script (:func:`write_launcher`) that
execs the real binary under ``env -i`` with exactly the runner's variables, plus the few
the SDK itself sets for the CLI (its protocol: entry point, SDK version). Claude Code
runs with ``setting_sources=[]`` (the SDK's isolation mode): no user, project or local
``settings.json``, hooks or ``CLAUDE.md`` are loaded from ``cwd`` or ``$HOME``, since a
project's ``.claude/settings.json`` could point ``ANTHROPIC_BASE_URL`` elsewhere or run
hooks.

Every run is bounded (``timeout``, seconds): on expiry the turn is interrupted (Codex)
or the CLI killed, the turn ends ``interrupted`` in the log and the result's ``error``
is a :class:`RuntimeTimeoutError`. A run whose CLI cannot start (binary missing, native
session gone) logs nothing of its prompt and reports a :class:`RuntimeStartError`.

Test hooks, also useful to a platform: ``interrupt_when`` (a predicate over the native
messages: interrupt the turn the way the SDK does it) and ``kill_when`` (SIGKILL the CLI
process: a runtime crash).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec

from universal_event.derive import EventT, is_surface_event
from universal_event.errors import (
    RuntimeNotFoundError,
    RuntimeRunError,
    RuntimeStartError,
    RuntimeTimeoutError,
)
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    EventBase,
    NativeUnknownEvent,
    RequestHeaderEvent,
    RuntimeSwitchEvent,
    SessionStartEvent,
    Source,
    Surface,
    SurfaceEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UsageEvent,
    UserMessageEvent,
    WarningEvent,
)
from universal_event.log import SessionLog
from universal_event.parts import TextPart, ToolCallPart

__all__ = [
    "CLAUDE_CODE_OFFLINE_ENV",
    "CODEX_CONFIG_TEMPLATE",
    "ClaudeCodeRunner",
    "CodexRunner",
    "DEFAULT_TIMEOUT",
    "ClaudeCompaction",
    "RunResult",
    "bundled_claude",
    "bundled_codex",
    "codex_rollout_path",
    "codex_rollout_turn",
    "import_claude_turns",
    "import_codex_turns",
    "claude_project_dir",
    "current_native_session",
    "last_runtime",
    "reconcile_codex_turn",
    "runtime_available",
    "write_launcher",
]

CLAUDE_CODE_OFFLINE_ENV = {
    # Without this the CLI sends HEAD /api/hello and resolves api.anthropic.com (RECIPE.md).
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_UPDATES": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_GROWTHBOOK": "1",
    "CLAUDE_CODE_DISABLE_FEATURE_FLAGS": "1",
    "DISABLE_INSTALLATION_CHECKS": "1",
    # --dangerously-skip-permissions refuses to run as root unless this is set.
    "IS_SANDBOX": "1",
}

CODEX_CONFIG_TEMPLATE = """\
model = "{model}"
model_provider = "universal_event_target"
approval_policy = "never"
sandbox_mode = "danger-full-access"
model_reasoning_effort = "medium"
model_reasoning_summary = "auto"
check_for_update_on_startup = false

[model_providers.universal_event_target]
name = "universal-event model server"
base_url = "{base_url}"
wire_api = "responses"
env_key = "UNIVERSAL_EVENT_CODEX_API_KEY"
request_max_retries = {retries}
stream_max_retries = 1
stream_idle_timeout_ms = 15000
supports_websockets = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
log_user_prompt = false

[features]
# With plugins on, every start resolves github.com and chatgpt.com (marketplace sync).
plugins = false
"""

_BASE_PATH = "/usr/local/bin:/usr/bin:/bin"

_LOOPBACK_NO_PROXY = "127.0.0.1,localhost,::1"
"""``NO_PROXY``: even a proxy given in ``extra_env`` is not used for the model server."""

CLAUDE_SDK_VARIABLES = (
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_AGENT_SDK_VERSION",
    "CLAUDE_AGENT_SDK_CLIENT_APP",
    "CLAUDE_AGENT_SDK_DERIVED_CLIENT_APP",
    "CLAUDE_CODE_SDK_READS_SESSION_STATE",
    "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING",
)
"""What ``claude_agent_sdk`` sets for the CLI itself (its protocol with it): passed on by
the launcher when set, the rest of the SDK's environment (the caller's) is not."""

DEFAULT_TIMEOUT = 600.0
"""Seconds a run may take (start to end of turn) before it is interrupted."""

_KILL_GRACE = 5.0
"""Seconds an interrupted Codex turn gets to end before its app-server is killed."""


def write_launcher(
    path: Path, binary: Path, env: dict[str, str], passthrough: Sequence[str] = ()
) -> Path:
    """Write an executable ``sh`` script that runs ``binary`` with exactly ``env``.

    The script ``exec``s ``env -i`` (nothing of the environment it was started with
    survives) with ``env``'s variables and those of ``passthrough`` that are set (``sh``'s
    ``${VAR+...}``: unset stays unset), then ``binary`` with the script's arguments.
    Written atomically (a concurrent run may be executing the previous one).
    """
    env_bin = "/usr/bin/env" if os.access("/usr/bin/env", os.X_OK) else shutil.which("env")
    if env_bin is None:  # pragma: no cover - every POSIX system has env(1)
        raise RuntimeStartError("env(1) not found: cannot launch a runtime in a clean environment")
    words = [shlex.quote(env_bin), "-i"]
    for name in passthrough:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"not a variable name: {name!r}")
        words.append(f'${{{name}+"{name}=${name}"}}')
    for name, value in env.items():
        if "=" in name or not name:
            raise ValueError(f"not a variable name: {name!r}")
        words.append(shlex.quote(f"{name}={value}"))
    command = str(binary.resolve())  # a relative path would be looked up in PATH
    if "=" in command:  # env(1) would take it for one more variable
        words.extend(["/bin/sh", "-c", shlex.quote('exec "$0" "$@"')])
    words.extend([shlex.quote(command), '"$@"'])
    script = "#!/bin/sh\n# written by universal-event: the runtime in a clean environment\n"
    script += "exec " + " \\\n  ".join(words) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    temporary.write_text(script, encoding="utf-8")
    temporary.chmod(0o700)
    os.replace(temporary, path)
    return path


def _launcher(
    runtime: str,
    given: Path | None,
    directory: Path,
    env: dict[str, str],
    passthrough: Sequence[str] = (),
) -> Path:
    """The runtime's CLI (:func:`_runtime_binary`) behind its launcher in ``directory``
    (:func:`write_launcher`); :class:`RuntimeNotFoundError` when the CLI is not there."""
    binary = _runtime_binary(runtime, given)
    return write_launcher(directory / _cli_name(runtime), binary, env, passthrough)


def _cli_name(runtime: str) -> str:
    """The runtime's CLI command, which is also the name of its extra."""
    return "claude" if runtime == "claude-code" else "codex"


def _installed_binary(runtime: str) -> Path | None:
    """The runtime's CLI as installed: the bundled one, else the one on PATH."""
    bundled = bundled_claude() if runtime == "claude-code" else bundled_codex()
    if bundled is not None:
        return bundled
    found = shutil.which(_cli_name(runtime))
    return Path(found) if found else None


def _runnable(binary: Path | None) -> bool:
    return binary is not None and binary.is_file() and os.access(binary, os.X_OK)


_SDK_MODULES = {"claude-code": "claude_agent_sdk", "codex": "openai_codex"}
"""The SDK each runner drives its CLI through (in the same extra as the CLI)."""


def _sdk_installed(runtime: str) -> bool:
    return importlib.util.find_spec(_SDK_MODULES[runtime]) is not None


def _missing(runtime: str, given: Path | None) -> RuntimeNotFoundError | None:
    """Why a runner of ``runtime`` cannot start: its CLI binary or its SDK is not
    installed (a ``codex`` on PATH without ``openai_codex`` failed with an ImportError)."""
    try:
        _runtime_binary(runtime, given)
    except RuntimeNotFoundError as exc:
        return exc
    if not _sdk_installed(runtime):
        return RuntimeNotFoundError(
            f"{runtime}: the {_SDK_MODULES[runtime]} package is not installed "
            f"(pip install 'universal-event[{_cli_name(runtime)}]')"
        )
    return None


def _runtime_binary(runtime: str, given: Path | None) -> Path:
    """The CLI binary a runner launches: ``given``, else the bundled one, else on PATH."""
    if given is None:
        given = _installed_binary(runtime)
    if given is None or not _runnable(given):
        where = f" at {given}" if given is not None else ""
        raise RuntimeNotFoundError(
            f"{runtime}: the CLI binary is not there{where} "
            f"(pip install 'universal-event[{_cli_name(runtime)}]')"
        )
    return given


NativePredicate = Callable[[Any], bool]
"""Called with each native message; True triggers the hook (interrupt, kill)."""


@dataclass
class RunResult:
    """What one driven turn produced."""

    events: list[Event] = field(default_factory=list)
    """The events this run appended, as logged (seq filled)."""
    native_session_id: str | None = None
    """Claude Code's session UUID or Codex's thread id."""
    status: str = "completed"
    """The status of the turn's ``turn/end`` (``interrupted`` when none was logged;
    ``failed`` when the CLI could not start the turn: ``error`` says why)."""
    native: list[Any] = field(default_factory=list)
    """Every native message the SDK yielded, unchanged (what a tap gives the caller)."""
    error: BaseException | None = None
    """The exception that ended the stream early (the CLI died), if any: a
    :class:`RuntimeStartError` when the CLI could not start the turn (its binary missing:
    :class:`RuntimeNotFoundError`), a :class:`RuntimeTimeoutError` when the turn did not
    end within the runner's ``timeout``."""


_CLAUDE_PROJECT_NAME_MAX = 200
"""Claude Code cuts a project directory's name to this many characters (then ``-<hash>``)."""


def claude_project_dir(home: Path, cwd: Path) -> Path:
    """Where Claude Code (``$HOME`` = ``home``) keeps the transcripts of a run in ``cwd``.

    ``<home>/.claude/projects/<name>``, ``<name>`` made as Claude Code 2.1.332 makes it
    (the CLI bundled with ``claude_agent_sdk``; its minified code, found next to the
    ``"projects"`` directory and the constant 200)::

        var jae=200;
        function Nle(n){let t=0;for(let r=0;r<n.length;r++)t=(t<<5)-t+n.charCodeAt(r)|0;return t}
        function me(e){return Math.abs(Nle(e)).toString(36)}
        function w(e){return e.replace(/[^a-zA-Z0-9]/g,"-")}
        function J$(e){let n=w(e);if(n.length<=jae)return n;return`${n.slice(0,jae)}-${me(e)}`}
        function LO(e){return dwt()??J$(e)}      // dwt(): CLAUDE_CODE_PROJECT_DIR_NAME
        function Am(){return S(rt(),"projects")} // rt(): $CLAUDE_CONFIG_DIR or ~/.claude

    applied to its original working directory, ``process.cwd()``: the path the kernel
    gives (``getcwd``), symlinks resolved, absolute; not ``$PWD``, and not Unicode
    normalised. ``rt()`` is ``(… ?? join(homedir(), ".claude")).normalize("NFC")``: the
    ``.claude`` directory is looked for under the NFC form of ``$HOME``. So here:

    * ``home/.claude`` is taken in NFC (a home named in NFD is another directory on
      Linux, where Claude Code would not look);
    * ``cwd`` is resolved (:func:`os.path.realpath`, against this process's working
      directory when relative, as the runner's CLI is started here with that ``cwd``);
    * every UTF-16 code unit that is not an ASCII letter or digit becomes ``-`` (an
      emoji, two code units, becomes ``--``; ``ö`` one ``-``);
    * a name longer than 200 characters is cut to 200 and ``-`` + the base-36 absolute
      value of the Java-style 32-bit string hash (``h = 31*h + unit``) of the resolved
      path is appended: at most 207 characters, always a valid file name.

    ``CLAUDE_CONFIG_DIR`` / ``CLAUDE_CODE_PROJECT_DIR_NAME`` (which the runner does not
    set) would move the directory; they are not followed here.
    """
    config = Path(unicodedata.normalize("NFC", os.path.join(home, ".claude")))
    return config / "projects" / _claude_project_name(os.path.realpath(cwd))


def _claude_project_name(path: str) -> str:
    """Claude Code's directory name for the (already resolved) working directory ``path``.

    See :func:`claude_project_dir`. (A path with bytes that are not UTF-8, one lone
    surrogate each here, is not checked against Claude Code: the runner cannot start
    the CLI in such a directory.)
    """
    units = _utf16_units(path)
    name = "".join(chr(unit) if unit in _ASCII_ALNUM else "-" for unit in units)
    if len(name) <= _CLAUDE_PROJECT_NAME_MAX:
        return name
    digest = 0
    for unit in units:
        digest = (digest * 31 + unit) & 0xFFFFFFFF
    if digest >= 1 << 31:
        digest -= 1 << 32
    return f"{name[:_CLAUDE_PROJECT_NAME_MAX]}-{_base36(abs(digest))}"


_ASCII_ALNUM = frozenset(
    ord(c) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
)


def _utf16_units(text: str) -> list[int]:
    """The UTF-16 code units of ``text`` (JavaScript's string indices)."""
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def _base36(number: int) -> str:
    """``number.toString(36)`` for a number >= 0."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, digit = divmod(number, 36)
        out = digits[digit] + out
        if number == 0:
            return out


def last_runtime(events: Iterable[Event]) -> str | None:
    """The runtime that drove the session last (``session/start`` or ``runtime/switch``)."""
    runtime = None
    for event in events:
        if isinstance(event, SessionStartEvent) and event.runtime:
            runtime = event.runtime
        elif isinstance(event, RuntimeSwitchEvent):
            runtime = event.to_runtime
    return runtime


def current_native_session(
    events: Iterable[Event], runtime: str, *, after_seq: int = -1
) -> str | None:
    """The native session of ``runtime`` that holds the session's whole history, if any.

    Only a native session begun after the last ``runtime/switch`` counts: one from
    before a switch lacks what the other runtime did since. And only one begun after
    ``after_seq``: a forked session's events up to its fork point are its parent's, and
    so is a native session they name (resumed, it would hold the parent's turns since
    the fork, and take the child's).
    """
    native: str | None = None
    for event in events:
        if event.seq <= after_seq:
            continue
        if isinstance(event, RuntimeSwitchEvent):
            native = event.native_session_id if event.to_runtime == runtime else None
        elif isinstance(event, SessionStartEvent) and event.runtime == runtime:
            native = event.native_session_id or native
        elif isinstance(event, SessionStartEvent) and event.runtime:
            native = None
    return native


class _RunLog:
    """The log as ``tap`` sees it: records what this run appended, drops repeats.

    Every ``query()`` of Claude Code begins with ``system/init`` and so a ``session/start``;
    a resumed native session already has one in the log, so the repeat is dropped. Each
    run's adapter writes its ``request/header`` again too: logged only when it starts a
    new epoch (:meth:`SessionLog.update_header`).
    """

    def __init__(
        self,
        log: SessionLog,
        sink: list[Event],
        on_event: Callable[[Event], None] | None,
        compaction: ClaudeCompaction | None = None,
    ):
        self.log = log
        self.sink = sink
        self.on_event = on_event
        self.compaction = compaction
        self._started = {
            e.native_session_id for e in log.events() if isinstance(e, SessionStartEvent)
        }

    def extend(self, events: Iterable[EventBase]) -> Sequence[EventBase]:
        logged: list[Event] = []
        for event in events:
            if self.compaction is not None:
                event = self.compaction.take(event, self.log)
            if isinstance(event, SessionStartEvent):
                if event.native_session_id in self._started:
                    continue
                self._started.add(event.native_session_id)
            elif isinstance(event, RequestHeaderEvent):
                header = self.log.update_header(event)
                if header is not None:
                    logged.append(header)
                continue
            logged.append(self.log.append(event))  # type: ignore[arg-type]
        self.sink.extend(logged)
        if self.on_event is not None:
            for event in logged:
                self.on_event(event)
        return logged

    def note(self, logged: Sequence[Event]) -> None:
        """Take in events logged past :meth:`extend` (corrections made afterwards), and
        make them durable."""
        if logged:
            self.sink.extend(logged)
            if self.on_event is not None:
                for event in logged:
                    self.on_event(event)
            self.log.checkpoint()

    def checkpoint(self) -> int:
        return self.log.checkpoint()


class ClaudeCompaction:
    """A ``/compact`` (or an automatic compaction) in a live Claude Code stream.

    Claude Code then sends the summary it logs next (a synthetic user message), the
    messages the compaction preserved (``compact_metadata.preserved_messages``: the end
    of the conversation), and what follows; not what came before. So the summary is
    logged as a replace of the surface before the first preserved message (the earlier
    runs' messages included: they are in the log, not in this run's adapter). Preserved
    entries are named by transcript uuid: a user message or tool result has it as its
    native id, an assistant message its ``message.id``, which the transcript gives for
    the uuid: ``transcript`` names it, or else it is found under ``home`` (the CLI's
    ``$HOME``; default this process's) from the log's last ``session/start`` (its native
    session and ``cwd``), as Claude Code files it (:func:`claude_project_dir`).

    The runner applies it to every event it logs; a ``claude_agent_sdk`` user gets it
    from :func:`adapters.claude_sdk.tap`.
    """

    def __init__(
        self, transcript: Callable[[], Path | None] | None = None, *, home: Path | None = None
    ) -> None:
        self._transcript = transcript
        self._home = home
        self._preserved: set[str] | None = None
        """The preserved entries' uuids, from a boundary until its summary is logged."""

    def take(self, event: EventBase, log: SessionLog) -> EventBase:
        """``event`` as it is logged (the summary after a boundary: as a replace)."""
        if type(event) is NativeUnknownEvent and event.native_type == "system/compact_boundary":
            self._preserved = _preserved_uuids(event.payload)
        elif isinstance(event, UserMessageEvent) and self._preserved is not None:
            preserved, self._preserved = self._preserved, None
            if event.surface is None:
                surface = self._replaced(log, preserved)
                if surface is not None:
                    event = msgspec.structs.replace(event, surface=surface)
        return event

    def _replaced(self, log: SessionLog, preserved: set[str]) -> Surface | None:
        ids = preserved | self._message_ids(preserved, log)
        seqs = log.surface_seqs()
        kept = next(
            (i for i, seq in enumerate(seqs) if _native_id(log.events(seq, seq + 1)[0]) in ids),
            len(seqs),
        )
        return Surface(op="replace", start=seqs[0], end=seqs[kept - 1]) if kept else None

    def _transcript_of(self, log: SessionLog) -> Path | None:
        if self._transcript is not None:
            return self._transcript()
        started = [
            e for e in log.events() if isinstance(e, SessionStartEvent) and e.native_session_id
        ]
        if not started or not started[-1].cwd:
            return None
        home = self._home or Path.home()
        project = claude_project_dir(home, Path(started[-1].cwd))
        return project / f"{started[-1].native_session_id}.jsonl"

    def _message_ids(self, uuids: set[str], log: SessionLog) -> set[str]:
        """The ``message.id`` of the transcript's entries ``uuids`` (assistant ones)."""
        found: set[str] = set()
        if not uuids:
            return found
        for entry in _transcript_entries(self._transcript_of(log)):
            uuid, message = entry.get("uuid"), entry.get("message")
            if isinstance(uuid, str) and uuid in uuids and isinstance(message, dict):
                if isinstance(message.get("id"), str):
                    found.add(message["id"])
        return found


def _command_sent(
    log: SessionLog, prompt: Sequence[EventBase], transcript: Path | None, start: int = 0
) -> list[Event]:
    """Log a local command (``/compact``, ``/cost``, ...) as Claude Code sends it from
    then on: not the prompt's text but the command's entries of the transcript (from
    byte ``start``: what the run wrote), its caveat and its name (:func:`_command_texts`),
    in the prompt's place on the surface. The prompt (``prompt``: the events that logged
    it) stays in the log. Nothing when the run wrote no such entries (a command Claude
    Code expands into a prompt)."""
    texts = _command_texts(transcript, start)
    logged = [e for e in prompt if isinstance(e, UserMessageEvent)]
    if not texts or len(logged) != 1 or logged[0].seq not in log.surface_seqs():
        return []
    sent = UserMessageEvent(
        content=[TextPart(text=text) for text in texts],
        turn_id=logged[0].turn_id,
        source=Source(runtime="claude-code", native_type="transcript"),
    )
    return [log.replace(logged[0].seq, logged[0].seq, sent)]


def _resume_additions_sent(
    log: SessionLog, prompt: Sequence[EventBase], transcript: Path | None, start: int = 0
) -> list[Event]:
    """Log what Claude Code adds to a cut turn when the session is resumed: a result for
    each call left without one (``[Tool call interrupted: ...]``) and a reply to a
    prompt left unanswered (``No response requested.``, model ``<synthetic>``). It
    writes them to the transcript (from byte ``start``: what this run wrote) before
    this run's prompt, does not stream them, and sends them there. So they go on the
    surface where this run's prompt began, and the run's events from the prompt on are
    shown again after them (a replace puts one event in a range's place; those events
    stay in the log). Nothing when the run wrote none."""
    logged = [e for e in prompt if isinstance(e, UserMessageEvent)]
    shown = log.surface_seqs()
    if len(logged) != 1 or logged[0].seq not in shown:
        return []
    added = _resume_additions(transcript, start)
    if not added:
        return []
    at = shown.index(logged[0].seq)
    events = log.events()
    rest = [*added[1:], *(_shown_again(events[seq]) for seq in shown[at:])]
    return [log.replace(shown[at], shown[-1], added[0]), *(log.append(e) for e in rest)]


def _resume_additions(transcript: Path | None, start: int) -> list[SurfaceEvent]:
    """The results and made-up replies a transcript holds from byte ``start`` before the
    first prompt there (this run's), as events (:class:`ClaudeTranscriptAdapter`)."""
    from adapters.claude_sdk import SYNTHETIC_MODEL, ClaudeTranscriptAdapter

    lines = []
    for entry in _transcript_entries(transcript, start):
        kind, message = entry.get("type"), entry.get("message")
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        result = isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") == "tool_result" for block in content
        )
        if kind == "user" and not result:
            break  # the prompt
        if result or (kind == "assistant" and message.get("model") == SYNTHETIC_MODEL):
            lines.append(json.dumps(entry).encode())
    if not lines:
        return []
    adapter = ClaudeTranscriptAdapter()
    events = adapter.feed(b"\n".join(lines) + b"\n") + adapter.close()
    return [_native_copy(e, "transcript") for e in events if is_surface_event(e)]


def _shown_again(event: Event) -> Event:
    """A surface event of the log, to be shown again after others (a new event)."""
    return msgspec.structs.replace(event, id="", seq=-1, surface=None)


def _transcript_entries(path: Path | None, start: int = 0) -> list[dict[str, Any]]:
    """The JSON objects of a transcript's lines from byte ``start`` (others skipped);
    none without it."""
    if path is None:
        return []
    try:
        with path.open("rb") as transcript:
            transcript.seek(start)
            lines = transcript.read().splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def _file_size(path: Path | None) -> int:
    """The size of the file at ``path``; 0 when there is none."""
    try:
        return 0 if path is None else path.stat().st_size
    except OSError:
        return 0


_COMMAND_TAGS = ("<local-command-caveat>", "<command-name>")


def _command_texts(path: Path | None, start: int = 0) -> list[str]:
    """The texts of the last local command's caveat and name entries in a transcript
    from byte ``start`` (user entries of one ``promptId``); none when its last such
    entry is not a name."""
    entries = [
        (entry.get("promptId"), content)
        for entry in _transcript_entries(path, start)
        if entry.get("type") == "user"
        and isinstance(entry.get("message"), dict)
        and isinstance(content := entry["message"].get("content"), str)
        and content.startswith(_COMMAND_TAGS)
    ]
    if not entries or not entries[-1][1].startswith("<command-name>"):
        return []
    prompt_id = entries[-1][0]
    return [content for entry_prompt, content in entries[-2:] if entry_prompt == prompt_id]


def _preserved_uuids(payload: Any) -> set[str]:
    metadata = payload.get("compact_metadata") if isinstance(payload, dict) else None
    preserved = metadata.get("preserved_messages") if isinstance(metadata, dict) else None
    uuids = (
        preserved.get("all_uuids") or preserved.get("uuids")
        if isinstance(preserved, dict)
        else None
    )
    return {u for u in uuids if isinstance(u, str)} if isinstance(uuids, list) else set()


def _native_id(event: Event) -> str | None:
    return event.source.native_id if event.source is not None else None


def _turn_status(events: list[Event]) -> str:
    for event in reversed(events):
        if isinstance(event, TurnEndEvent):
            return event.status
    return "interrupted"


def _kill(pid: int | None) -> None:
    """SIGKILL a process we started (the runtime's CLI), and every process under it.

    Claude Code runs a tool's command in a process group of its own: killing the CLI
    alone (a timeout, ``kill_when``, Ctrl-C) left the command running, orphaned. The
    tree is read before anything is killed (an orphan is re-parented, out of reach).
    """
    if pid is None:
        return
    for member in [pid, *_descendants(pid)]:
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (children first), from ``/proc``; none without it."""
    children: dict[int, list[int]] = {}
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return []
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue  # gone meanwhile
        # "pid (command) state ppid ...": the command may hold spaces and parentheses
        fields = stat[stat.rindex(b")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    waiting = [pid]
    while waiting:
        for child in children.get(waiting.pop(), []):
            found.append(child)
            waiting.append(child)
    return found


@dataclass
class ClaudeCodeRunner:
    """Runs Claude Code (the CLI bundled with ``claude_agent_sdk``) one turn at a time.

    ``home`` is the CLI's ``$HOME`` (its transcripts live under ``home/.claude``);
    ``cwd`` where it runs commands. Claude Code loads no settings, hooks or
    ``CLAUDE.md`` from ``cwd`` or ``home`` (``setting_sources=[]``): a project's
    ``.claude/settings.json`` could redirect the model traffic (``env``) or run hooks.
    ``timeout`` bounds the run in seconds (None: unbounded); ``cli_path`` is the binary
    (default: the bundled one, else ``claude`` on ``PATH``).
    """

    base_url: str
    home: Path
    cwd: Path
    model: str = "claude-sonnet-4-5-20250929"
    max_retries: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    on_native: Callable[[Any], None] | None = None
    on_event: Callable[[Event], None] | None = None
    interrupt_when: NativePredicate | None = None
    kill_when: NativePredicate | None = None
    include_partial_messages: bool = True
    timeout: float | None = DEFAULT_TIMEOUT
    cli_path: Path | None = None

    runtime = "claude-code"

    def preflight(self) -> RuntimeRunError | None:
        """What stops a turn before it starts, found without starting one: the CLI or
        the SDK not installed. :func:`~universal_event.handoff.prepare` asks before it
        hands a session over, so a run that cannot start leaves the log as it was."""
        return _missing(self.runtime, self.cli_path)

    def transcript_path(self, native_session_id: str) -> Path:
        """Where Claude Code keeps the transcript of session ``native_session_id``."""
        return claude_project_dir(self.home, self.cwd) / f"{native_session_id}.jsonl"

    def env(self) -> dict[str, str]:
        """The CLI's whole environment (the launcher adds only the SDK's own variables)."""
        return {
            "PATH": _BASE_PATH,
            "HOME": str(self.home),
            "PWD": str(self.cwd),
            "LANG": "C.UTF-8",
            "SHELL": "/bin/bash",
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "universal-event-offline",
            "CLAUDE_CODE_MAX_RETRIES": str(self.max_retries),
            "NO_PROXY": _LOOPBACK_NO_PROXY,
            "no_proxy": _LOOPBACK_NO_PROXY,
            **CLAUDE_CODE_OFFLINE_ENV,
            **self.extra_env,
        }

    def run(self, log: SessionLog, prompt: str, *, resume: str | None = None) -> RunResult:
        """Run one turn (resuming native session ``resume`` when given) and log it live."""
        return asyncio.run(self.arun(log, prompt, resume=resume))

    async def arun(self, log: SessionLog, prompt: str, *, resume: str | None = None) -> RunResult:
        """The async :meth:`run`.

        The prompt is logged once the CLI is connected (a CLI that does not start, or
        cannot resume ``resume``, leaves nothing of it: ``status`` ``failed``, ``error``
        a :class:`RuntimeStartError`).
        """
        result = RunResult(native_session_id=resume)
        problem = self.preflight()
        if problem is not None:
            result.error, result.status = problem, "failed"
            return result

        from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

        from adapters._tap import atap
        from adapters.claude_sdk import ClaudeCodeAdapter

        env = self.env()
        try:
            launcher = _launcher(
                self.runtime,
                self.cli_path,
                self.home / ".universal-event",
                env,
                CLAUDE_SDK_VARIABLES,
            )
        except RuntimeNotFoundError as exc:
            result.error, result.status = exc, "failed"
            return result
        self.home.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)

        def transcript() -> Path | None:
            native = result.native_session_id
            return None if native is None else self.transcript_path(native)

        run_log = _RunLog(log, result.events, self.on_event, ClaudeCompaction(transcript))
        adapter = ClaudeCodeAdapter(session_id=log.session_id)
        options = ClaudeAgentOptions(
            model=self.model,
            permission_mode="bypassPermissions",
            cwd=str(self.cwd),
            max_turns=8,
            env=env,
            cli_path=str(launcher),
            # The SDK's isolation mode: no settings.json (user, project, local), hooks
            # or CLAUDE.md; only what the runner gives the CLI.
            setting_sources=[],
            resume=resume,
            include_partial_messages=self.include_partial_messages,
        )
        client = ClaudeSDKClient(options=options)
        interrupted = killed = False
        prompt_logged = tapped = finished = False
        deadline = asyncio.timeout(self.timeout)
        try:
            async with deadline:
                try:
                    await client.connect()
                except Exception as exc:  # not started: nothing of the prompt is logged
                    result.error, result.status = _start_error(self.runtime, resume, exc), "failed"
                    finished = True
                    return result
                _note_switch(run_log, log, self.runtime, resume)
                if resume is not None:
                    _import_claude_turns(log, run_log, self.transcript_path(resume))
                prompt_events = run_log.extend(adapter.user_prompt(prompt))
                log.checkpoint()
                transcript_start = _file_size(transcript())
                prompt_logged = True
                await client.query(prompt)
                tapped = True
                async for message in atap(client.receive_response(), adapter, run_log):
                    result.native.append(message)
                    if self.on_native is not None:
                        self.on_native(message)
                    session_id = getattr(message, "session_id", None) or (
                        getattr(message, "data", None) or {}
                    ).get("session_id")
                    if isinstance(session_id, str) and session_id:
                        result.native_session_id = session_id
                    if not interrupted and self.interrupt_when and self.interrupt_when(message):
                        interrupted = True
                        await client.interrupt()
                    if not killed and self.kill_when and self.kill_when(message):
                        killed = True
                        _kill(_claude_pid(client))
                if prompt.lstrip().startswith("/") and not killed:
                    run_log.note(_command_sent(log, prompt_events, transcript(), transcript_start))
                if resume is not None and not killed:
                    run_log.note(
                        _resume_additions_sent(log, prompt_events, transcript(), transcript_start)
                    )
            finished = True
        except TimeoutError as exc:
            finished = True
            if deadline.expired() and self.timeout is not None:
                _kill(_claude_pid(client))  # the tap closed the turn (interrupted)
                result.error = RuntimeTimeoutError(self.runtime, self.timeout)
            else:
                result.error = exc
        except Exception as exc:  # the CLI died: the tap already closed the turn
            finished = True
            result.error = exc
        finally:
            if not finished:  # cancelled by the caller: the CLI must not outlive the run
                _kill(_claude_pid(client))
            if prompt_logged and not tapped:  # the turn began, its stream never did
                run_log.extend(adapter.close())
                log.checkpoint()
            try:
                await asyncio.wait_for(client.disconnect(), 30)
            except Exception:  # a killed CLI may fail to disconnect; nothing to keep
                _kill(_claude_pid(client))
            except BaseException:
                _kill(_claude_pid(client))
                raise
        if isinstance(result.error, RuntimeTimeoutError):
            _note_timeout(run_log, log, result.error)
        result.status = _turn_status(result.events)
        return result


def _import_claude_turns(log: SessionLog, run_log: _RunLog, transcript: Path) -> None:
    """Log the native session's turns that ran since this log's last one, outside it
    (``claude --resume`` in a terminal, another log's runner, an SDK user), from its
    transcript: so the history holds what Claude Code will send.

    Only turns after one the log has count (one holding a message or result of the
    log's, by native id), and only turns begun after the log's last event: one of the
    log's own runs cut before any reply (a timeout) left its prompt in the transcript
    with no id the log knows, and a transcript a hand-off wrote from the log is stamped
    before its ``runtime/switch`` (:mod:`universal_event.handoff`). Each turn is logged as
    the transcript has it (lifecycle, messages, results). When one of them takes another
    branch or compacts, the transcript's import replaces a range of what it showed
    before, which the log holds as other events: the log's whole surface is then
    replaced by what the transcript shows, and what those turns sent that it no
    longer shows is logged hidden (:func:`_take_record_surface`).
    """
    imported = _transcript_events(transcript)
    known = {_native_id(e) for e in log.events() if not isinstance(e, SessionStartEvent)}
    known.discard(None)
    turns = _turns(imported)
    last_known = max(
        (i for i, turn in enumerate(turns) if any(_native_id(e) in known for e in turn)),
        default=None,
    )
    if last_known is None:
        return
    run_log.note(_lost_from_transcript(log, imported))
    # A turn of the log's own may hold none of its native ids (a run cut before any
    # reply): its entries are older than the log's last event.
    last_logged = max(e.ts for e in log.events())
    outside = [e for turn in turns[last_known + 1 :] if turn[0].ts > last_logged for e in turn]
    if any(_replaces(e) for e in outside):
        _take_record_surface(log, run_log, outside, _shown(imported), "transcript")
    else:
        run_log.extend(_native_copy(e, "transcript") for e in outside if _turn_kept(e))


def import_claude_turns(log: SessionLog, transcript: Path) -> list[Event]:
    """Log what Claude Code will send of a resumed session that the log lacks, from its
    ``transcript`` (:meth:`ClaudeCodeRunner.transcript_path`, :func:`claude_project_dir`),
    as the runner does before a turn: the end of the log a killed CLI left out of the
    transcript taken off the surface, then the turns that ran outside the log. The
    events logged (none when the log has no turn of the session). A
    ``claude_agent_sdk`` user calls it before logging the prompt of a resumed turn."""
    return _logged_by(log, lambda run_log: _import_claude_turns(log, run_log, transcript))


def _logged_by(log: SessionLog, fill: Callable[[_RunLog], None]) -> list[Event]:
    """The events ``fill`` logs through a run log of ``log`` (no run, no listener)."""
    logged: list[Event] = []
    fill(_RunLog(log, logged, None))
    return logged


def _lost_from_transcript(log: SessionLog, imported: Sequence[Event]) -> list[Event]:
    """Take off the surface the end of the log that Claude Code's transcript lost.

    Claude Code writes its transcript a little after the fact: a CLI killed (the
    runner's timeout, ``kill_when``) just after a message may leave it unwritten, and
    its turn's prompt too; resumed, Claude Code sends the conversation without them.
    After the last event of the log the transcript has (by native id), an event it
    lacks (a reply or result by id, a prompt by its text) starts what was lost, when
    a reply or result is among the missing (a prompt's text alone proves nothing):
    from there on the surface is replaced by the event before it (shown again: a
    replace puts one event in a range's place). What is taken off stays in the log.
    """
    in_transcript = {_native_id(e) for e in imported} - {None}
    prompts = {_text_of(e) for e in imported if isinstance(e, UserMessageEvent)}

    def written(event: Event) -> bool:
        if _native_id(event) is not None:
            return _native_id(event) in in_transcript
        if event.source is not None and event.source.native_type == "transcript":
            return True  # made from the transcript (a local command's entries)
        return not isinstance(event, UserMessageEvent) or _text_of(event) in prompts

    events = log.events()
    shown = log.surface_seqs()
    known = [i for i, seq in enumerate(shown) if _native_id(events[seq]) in in_transcript]
    if not known:
        return []
    missing = [i for i in range(known[-1] + 1, len(shown)) if not written(events[shown[i]])]
    lost_reply = any(
        isinstance(events[shown[i]], AssistantMessageEvent | ToolResultEvent) for i in missing
    )
    if not lost_reply:
        return []
    before = shown[missing[0] - 1]
    again = _shown_again(events[before])
    return [log.replace(before, shown[-1], again)] if is_surface_event(again) else []


def _text_of(event: Event) -> str:
    return "".join(p.text for p in getattr(event, "content", ()) if isinstance(p, TextPart))


def _transcript_events(path: Path) -> list[Event]:
    """A Claude Code transcript, imported (branches and compactions followed: see
    :class:`~adapters.claude_sdk.ClaudeTranscriptAdapter`); none without the file."""
    from adapters.claude_sdk import ClaudeTranscriptAdapter

    try:
        data = path.read_bytes()
    except OSError:
        return []
    adapter = ClaudeTranscriptAdapter()
    return adapter.feed(data) + adapter.close()


def _turns(events: Sequence[Event]) -> list[list[Event]]:
    """The events of each turn, in the order the turns start."""
    turns: dict[str, list[Event]] = {}
    for event in events:
        if isinstance(event, TurnStartEvent) and event.turn_id:
            turns.setdefault(event.turn_id, [])
        if event.turn_id in turns:
            turns[event.turn_id].append(event)
    return list(turns.values())


def _replaces(event: Event) -> bool:
    surface = getattr(event, "surface", None)
    return surface is not None and surface.op == "replace"


def _shown(events: Sequence[Event]) -> list[SurfaceEvent]:
    """The surface events an import's ``events`` leave shown, in the surface's order
    (its replaces applied, as a log applies them: a replacing event takes its range's
    place, so the order is not the events' own)."""
    imported = SessionLog()
    for event in events:
        imported.append(event)
    logged = imported.events()
    return [e for seq in imported.surface_seqs() if is_surface_event(e := logged[seq])]


def _unreachable(base_url: str) -> str | None:
    """Why the model server at ``base_url`` takes no connection (refused, no such host),
    or None when it takes one (what it answers is the runtime's to report)."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return f"the model server URL {base_url!r} is not one: {exc}"
    if parts.scheme not in ("http", "https") or not host:
        return f"the model server URL {base_url!r} is not an http(s) URL"
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        return f"the model server at {base_url} takes no connection: {exc.strerror or exc}"
    return None


def _start_error(runtime: str, resume: str | None, exc: BaseException) -> RuntimeStartError:
    """The one-line error of a CLI that could not start the turn."""
    if isinstance(exc, RuntimeStartError):
        return exc
    detail = " ".join(str(exc).split()) or type(exc).__name__
    what = f"cannot resume native session {resume}" if resume else "the CLI did not start"
    error = RuntimeStartError(f"{runtime}: {what}: {detail}")
    error.__cause__ = exc
    return error


def _note_timeout(run_log: _RunLog, log: SessionLog, error: RuntimeTimeoutError) -> None:
    """Say in the log why the turn ended ``interrupted``: the runner's timeout."""
    turn_id = next((e.turn_id for e in reversed(run_log.sink) if e.turn_id), None)
    warning = WarningEvent(
        code="runtime_timeout",
        message=str(error),
        turn_id=turn_id,
        source=Source(runtime=error.runtime, native_type="timeout"),
    )
    run_log.extend([warning])
    log.checkpoint()


def _claude_pid(client: Any) -> int | None:
    transport = getattr(client, "_transport", None)
    process = getattr(transport, "_process", None)
    pid = getattr(process, "pid", None)
    return pid if isinstance(pid, int) else None


class _Watchdog:
    """Bounds a Codex run: on expiry interrupts the turn, then kills the app-server."""

    def __init__(self, seconds: float | None) -> None:
        self.client: Any = None
        self.handle: Any = None
        self.expired = False
        self.killed = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        if seconds is not None:
            self._thread = threading.Thread(
                target=self._watch, args=(seconds,), name="universal-event-timeout", daemon=True
            )
            self._thread.start()

    def _watch(self, seconds: float) -> None:
        # A wait longer than the platform can time (threading.TIMEOUT_MAX, ~292 years;
        # inf) raises OverflowError: that long is as good as for ever, the watchdog lives on.
        if self._done.wait(min(seconds, threading.TIMEOUT_MAX)):
            return
        self.expired = True
        handle = self.handle
        if handle is not None:  # interrupt the turn the way the SDK does (may block)
            threading.Thread(target=_quietly, args=(handle.interrupt,), daemon=True).start()
            if self._done.wait(_KILL_GRACE):
                return
        self.killed = True
        _kill(_codex_pid(self.client))

    def stop(self) -> None:
        """The turn's stream ended: nothing more to interrupt or kill."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=1)


def _quietly(call: Callable[[], Any]) -> None:
    try:
        call()
    except Exception:  # an app-server that is gone or stuck: the watchdog kills it
        pass


@dataclass
class CodexRunner:
    """Runs Codex (the app-server bundled with ``openai-codex-cli-bin``) one turn at a time.

    ``codex_home`` is ``$CODEX_HOME`` (config, rollouts, state DBs); ``cwd`` where it
    runs commands. Raw response items are switched on (``experimentalRawEvents``) so the
    log gets the function calls and tool outputs exactly as Codex sends them to the model;
    a resumed thread gets none, and each turn is reconciled with the thread's rollout
    afterwards (:meth:`reconcile`). ``timeout`` bounds the run in seconds (None:
    unbounded; on expiry the turn is interrupted, the app-server killed if it does not
    end); ``cli_path`` is the binary (default: the bundled one, else ``codex`` on
    ``PATH``); ``auto_compact_token_limit`` sets Codex's
    ``model_auto_compact_token_limit`` (None: Codex's default for the model): past it,
    Codex compacts the thread, inside a turn too (see :func:`reconcile_codex_turn`).
    """

    base_url: str
    codex_home: Path
    cwd: Path
    model: str = "gpt-5.5"
    max_retries: int = 1
    on_native: Callable[[Any], None] | None = None
    on_event: Callable[[Event], None] | None = None
    interrupt_when: NativePredicate | None = None
    kill_when: NativePredicate | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    cli_path: Path | None = None
    auto_compact_token_limit: int | None = None

    runtime = "codex"

    def preflight(self) -> RuntimeRunError | None:
        """What stops a turn before it starts, found without starting one: the CLI or
        the SDK not installed, a model server that takes no connection (Codex waits for
        the network again and again on a refused one, its retry settings do not bound
        that: the run would end only at the timeout). :func:`~universal_event.handoff.
        prepare` asks before it hands a session over, so a run that cannot start leaves
        the log as it was."""
        missing = _missing(self.runtime, self.cli_path)
        if missing is not None:
            return missing
        unreachable = _unreachable(self.base_url)
        return None if unreachable is None else RuntimeStartError(f"{self.runtime}: {unreachable}")

    def write_config(self) -> Path:
        self.codex_home.mkdir(parents=True, exist_ok=True)
        path = self.codex_home / "config.toml"
        config = CODEX_CONFIG_TEMPLATE.format(
            model=self.model, base_url=self.base_url, retries=self.max_retries
        )
        if self.auto_compact_token_limit is not None:  # a top-level key: before the tables
            limit = int(self.auto_compact_token_limit)
            config = f"model_auto_compact_token_limit = {limit}\n" + config
        path.write_text(config)
        return path

    def env(self) -> dict[str, str]:
        """The app-server's whole environment (the launcher adds nothing to it)."""
        path = _BASE_PATH
        helpers = _codex_path_dir()
        if helpers is not None:  # what the SDK puts first on PATH for the bundled binary
            path = f"{helpers}:{path}"
        return {
            "PATH": path,
            "HOME": str(self.codex_home),
            "LANG": "C.UTF-8",
            "SHELL": "/bin/bash",
            "CODEX_HOME": str(self.codex_home),
            "UNIVERSAL_EVENT_CODEX_API_KEY": "universal-event-offline",
            "NO_PROXY": _LOOPBACK_NO_PROXY,
            "no_proxy": _LOOPBACK_NO_PROXY,
        }

    def run(self, log: SessionLog, prompt: str, *, resume: str | None = None) -> RunResult:
        """Run one turn (resuming thread ``resume`` when given) and log it live.

        A thread that cannot be started or resumed (``resume`` gone) logs nothing of the
        prompt: ``status`` ``failed``, ``error`` a :class:`RuntimeStartError`.

        ``/compact`` on a resumed thread compacts it, as the prompt does in Claude Code
        (the app-server has no slash commands: it is ``thread/compact/start``). Codex runs
        the compaction as a turn of its own; the history after it is the rollout's
        replacement history (:func:`reconcile_codex_turn`).
        """
        result = RunResult(native_session_id=resume)
        problem = self.preflight()
        if problem is not None:
            result.error, result.status = problem, "failed"
            return result

        from openai_codex import Codex, CodexConfig
        from openai_codex.api import Thread
        from openai_codex.errors import CodexError

        from adapters.codex import CodexAdapter

        env = self.env()
        try:
            launcher = _launcher(
                self.runtime, self.cli_path, self.codex_home / ".universal-event", env
            )
        except RuntimeNotFoundError as exc:
            result.error, result.status = exc, "failed"
            return result
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.write_config()
        config = CodexConfig(codex_bin=str(launcher), cwd=str(self.cwd), env=env)
        run_log = _RunLog(log, result.events, self.on_event)
        adapter = CodexAdapter(session_id=log.session_id, model=self.model)
        params: dict[str, Any] = {
            "approvalPolicy": "never",
            "sandbox": "danger-full-access",
            "model": self.model,
            "cwd": str(self.cwd),
        }
        watchdog = _Watchdog(self.timeout)
        try:
            try:
                codex = Codex(config=config)
            except (CodexError, OSError) as exc:
                result.error, result.status = _start_error(self.runtime, None, exc), "failed"
                return result
            with codex:
                client: Any = codex._client
                watchdog.client = client
                try:
                    if resume is None:
                        # thread_start() of the SDK has no experimentalRawEvents parameter;
                        # the app-server takes it (the SDK initialises with experimentalApi).
                        started = client.thread_start({**params, "experimentalRawEvents": True})
                    else:
                        started = client.thread_resume(
                            resume, {**params, "experimentalRawEvents": True}
                        )
                except CodexError as exc:  # the thread is gone: nothing of the prompt logged
                    result.error, result.status = _start_error(self.runtime, resume, exc), "failed"
                    return result
                _note_switch(run_log, log, self.runtime, resume)
                if resume is not None:
                    _import_codex_turns(log, run_log, self.codex_home, resume)
                log.checkpoint()
                thread_info = started.thread.model_dump(mode="json", by_alias=True)
                result.native_session_id = started.thread.id
                # thread/started is not in the turn stream: feed the thread itself.
                run_log.extend(
                    adapter.feed({"method": "thread/started", "params": {"thread": thread_info}})
                )
                if resume is not None and prompt.strip() == _COMPACT_PROMPT:
                    killed = self._compact(client, started.thread.id, adapter, run_log, result)
                else:
                    try:
                        handle = Thread(client, started.thread.id).turn(prompt)
                    except CodexError as exc:
                        error = _start_error(self.runtime, resume, exc)
                        result.error, result.status = error, "failed"
                        return result
                    watchdog.handle = handle
                    killed = self._stream(handle, client, adapter, run_log, result)
                watchdog.stop()
                if not killed and not watchdog.killed:
                    self.reconcile(log, run_log, result)
        finally:
            watchdog.stop()
            expired = watchdog.expired and _turn_status(result.events) != "completed"
            if expired and self.timeout is not None:
                result.error = RuntimeTimeoutError(self.runtime, self.timeout)
                result.status = "interrupted"
        if isinstance(result.error, RuntimeTimeoutError):
            _note_timeout(run_log, log, result.error)
        result.status = _turn_status(result.events)
        return result

    def _stream(
        self, handle: Any, client: Any, adapter: Any, run_log: _RunLog, result: RunResult
    ) -> bool:
        """Log the turn's stream live; whether ``kill_when`` killed the app-server."""

        def interrupt() -> bool:
            handle.interrupt()
            return True

        return self._follow(handle.stream(), client, adapter, run_log, result, interrupt)

    def _follow(
        self,
        notifications: Iterable[Any],
        client: Any,
        adapter: Any,
        run_log: _RunLog,
        result: RunResult,
        interrupt: Callable[[], bool],
    ) -> bool:
        """Log ``notifications`` live, with the hooks (``interrupt_when`` calls
        ``interrupt``, which says whether it could); whether ``kill_when`` killed the
        app-server. The app-server dying ends it with ``result.error``."""
        from adapters._tap import tap

        interrupted = killed = False
        try:
            for notification in tap(notifications, adapter, run_log):
                result.native.append(notification)
                if self.on_native is not None:
                    self.on_native(notification)
                if not interrupted and self.interrupt_when and self.interrupt_when(notification):
                    interrupted = interrupt()
                if not killed and self.kill_when and self.kill_when(notification):
                    killed = True
                    _kill(_codex_pid(client))
        except Exception as exc:  # the app-server died: the tap closed the turn
            result.error = exc
        return killed

    def _compact(
        self, client: Any, thread_id: str, adapter: Any, run_log: _RunLog, result: RunResult
    ) -> bool:
        """``/compact``: compact the thread and log the compaction's turn.

        Codex runs the compaction as a turn of its own, without a ``turn/start``: the SDK
        keeps such a turn's notifications for a consumer that asks for it by id, and the
        id is not given. The thread's own notifications are logged until it is idle
        again; the turn (its start and end, the ``compacted`` line, the compaction
        request's usage) comes from the rollout, which :meth:`reconcile` then takes the
        history from. ``interrupt_when`` interrupts that turn, which the rollout names.
        """
        known = _rollout_turn_ids(self.codex_home, thread_id)
        try:
            client.thread_compact(thread_id)
        except Exception as exc:  # refused
            result.error = exc
            return False

        def interrupt() -> bool:
            turn_id = _new_rollout_turn_id(self.codex_home, thread_id, known)
            if turn_id is not None:
                client.turn_interrupt(thread_id, turn_id)
            return turn_id is not None

        notifications = _until_idle(client, thread_id)
        killed = self._follow(notifications, client, adapter, run_log, result, interrupt)
        if result.error is not None:
            return killed
        turn = _new_rollout_turn(self.codex_home, thread_id, known)
        if turn is not None:
            run_log.extend(_native_copy(e) for e in turn if _turn_bookkeeping(e))
            run_log.checkpoint()
        return killed

    def reconcile(self, log: SessionLog, run_log: _RunLog, result: RunResult) -> None:
        """Make the turn's logged history what Codex sent the model (its rollout file).

        Codex gives the live stream the exact function calls, ``encrypted_content`` and
        wrapped tool outputs only with ``experimentalRawEvents``, which ``thread/resume``
        does not take: a resumed turn streams ``commandExecution`` items (the command
        line, the plain output) where the model called ``exec_command`` and was sent the
        wrapped output. The rollout's ``response_item`` lines are exactly what Codex sent,
        so after each turn its rollout is read (:func:`codex_rollout_turn`) and every
        ``assistant/message`` / ``tool/result`` of the turn that differs from the
        rollout's is corrected with a surface ``replace`` (:func:`reconcile_codex_turn`):
        the live events stay in the log, the model-facing surface holds each message
        and result once, as Codex sent it. A turn the live stream already logged exactly
        (raw events on) needs no correction and gets none. Corrections land after the
        turn: within a resumed turn, the requests after the first were sent before them.
        """
        thread_id = result.native_session_id
        turn_ids = [e.turn_id for e in result.events if isinstance(e, TurnEndEvent)]
        if thread_id is None or not turn_ids or turn_ids[-1] is None:
            return
        rollout = codex_rollout_turn(self.codex_home, thread_id, turn_ids[-1])
        if rollout is None:
            return
        run_log.note(reconcile_codex_turn(log, result.events, rollout))


_COMPACT_PROMPT = "/compact"
"""The prompt that compacts a session instead of sending a message: Claude Code's
slash command, which the Codex runner takes too."""


def _until_idle(client: Any, thread_id: str) -> Iterator[Any]:
    """The client's unscoped notifications until thread ``thread_id`` was active and is
    not any more (``thread/status/changed``: idle, or a system error)."""
    active = False
    while True:
        notification = client.next_notification()
        yield notification
        payload = notification.payload
        if notification.method != "thread/status/changed" or payload.thread_id != thread_id:
            continue
        status = getattr(getattr(payload.status, "root", payload.status), "type", None)
        if status == "active":
            active = True
        elif active:
            return


def _turn_kept(event: Event) -> bool:
    """What a turn logged from a runtime's record keeps: its history and bookkeeping."""
    return is_surface_event(event) or _turn_bookkeeping(event)


def _turn_bookkeeping(event: Event) -> bool:
    """What a turn logged from a runtime's record keeps besides its history: its start
    and end, the requests' usage and (a rollout's) ``compacted`` line."""
    if type(event) is NativeUnknownEvent:
        return event.native_type == "compacted"
    return isinstance(event, TurnStartEvent | TurnEndEvent | UsageEvent)


def _rollout_turn_ids(codex_home: Path, thread_id: str) -> set[str]:
    """The ids of the turns the thread's rollout holds so far."""
    events = _rollout_events(codex_home, thread_id)
    return {e.turn_id for e in events if isinstance(e, TurnStartEvent) and e.turn_id}


def _new_rollout_turn_id(
    codex_home: Path, thread_id: str, known: set[str], *, wait: float = 5.0
) -> str | None:
    """The id of a turn the thread's rollout holds that is not in ``known`` (read again,
    up to ``wait`` seconds, as :func:`_rollout_turn` does); None when it never does."""

    def started(events: list[Event]) -> str | None:
        begun = (e.turn_id for e in events if isinstance(e, TurnStartEvent))
        return next((turn for turn in begun if turn is not None and turn not in known), None)

    turn = _rollout_turn(codex_home, thread_id, started, wait)
    return turn[0].turn_id if turn else None


def _new_rollout_turn(
    codex_home: Path, thread_id: str, known: set[str], *, wait: float = 5.0
) -> list[Event] | None:
    """The events of the rollout's first ended turn not in ``known`` (read again, up to
    ``wait`` seconds, as :func:`codex_rollout_turn` does)."""

    def new_turn(events: list[Event]) -> str | None:
        ended = (e.turn_id for e in events if isinstance(e, TurnEndEvent))
        return next((turn for turn in ended if turn is not None and turn not in known), None)

    return _rollout_turn(codex_home, thread_id, new_turn, wait)


def _rollout_events(codex_home: Path, thread_id: str) -> list[Event]:
    """The thread's rollout, imported; none when it has no rollout yet."""
    from adapters.codex import CodexRolloutAdapter

    path = codex_rollout_path(codex_home, thread_id)
    return [] if path is None else CodexRolloutAdapter().feed(path.read_bytes())


def _rollout_turn(
    codex_home: Path,
    thread_id: str,
    ended_turn: Callable[[list[Event]], str | None],
    wait: float,
) -> list[Event] | None:
    """The events of the turn ``ended_turn`` finds ended in the rollout, which is read
    again (up to ``wait`` seconds) until it does; None when it never does."""
    deadline = time.monotonic() + wait
    while True:
        events = _rollout_events(codex_home, thread_id)
        turn_id = ended_turn(events)
        if turn_id is not None:
            return [e for e in events if e.turn_id == turn_id]
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def codex_rollout_path(codex_home: Path, thread_id: str) -> Path | None:
    """A thread's rollout file: ``CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread>.jsonl``."""
    found = sorted((codex_home / "sessions").glob(f"**/rollout-*-{thread_id}.jsonl"))
    return found[-1] if found else None


def codex_rollout_turn(
    codex_home: Path, thread_id: str, turn_id: str, *, wait: float = 5.0
) -> list[Event] | None:
    """The events of one turn of a rollout, as :class:`~adapters.codex.CodexRolloutAdapter`
    imports them.

    Codex appends to the rollout as the turn goes and may still be writing its end when
    ``turn/completed`` arrives: the file is read again (up to ``wait`` seconds) until it
    holds the turn's end. None when it never does (no file, a turn cut short).
    """

    def ended(events: list[Event]) -> str | None:
        ends = any(isinstance(e, TurnEndEvent) and e.turn_id == turn_id for e in events)
        return turn_id if ends else None

    return _rollout_turn(codex_home, thread_id, ended, wait)


def _import_codex_turns(log: SessionLog, run_log: _RunLog, codex_home: Path, thread: str) -> None:
    """Log the thread's turns that ran since this log's last one, outside it (the
    Codex TUI, another log's runner, an SDK user), from the rollout: so the history
    holds what Codex will send.

    Only turns after one the log has count: a thread the log has run no turn of
    (one a hand-off wrote from this log's history) holds nothing the log lacks. Each
    ended turn is logged as the rollout has it (lifecycle, messages, results); one
    that compacted takes the surface from its compaction on; what it sent before that
    is logged hidden (:func:`_take_record_surface`).
    """
    known = {e.turn_id for e in log.events() if isinstance(e, TurnStartEvent | TurnEndEvent)}
    turns = _turns(_rollout_events(codex_home, thread))
    last_known = max((i for i, turn in enumerate(turns) if turn[0].turn_id in known), default=None)
    if last_known is None:
        return
    last = turns[last_known]
    if _cut(last[0].turn_id, log.events()) and not _ended(last, "completed"):
        # The log's own turn, cut (killed, timed out): the rollout holds what Codex
        # kept of it, ended or not.
        run_log.note(_adopt_cut_turn(log, last))
        run_log.extend(_aborted_results(log, last[0].turn_id))
    for turn in turns[last_known + 1 :]:
        if not any(isinstance(e, TurnEndEvent) for e in turn):
            return  # still running elsewhere, or cut: nothing after it is whole
        compacted = _after_last_compaction(turn)
        if compacted is None:
            run_log.extend(_native_copy(e) for e in turn if _turn_kept(e))
        else:
            _take_record_surface(log, run_log, turn, compacted, "rollout")


def import_codex_turns(log: SessionLog, codex_home: Path, thread_id: str) -> list[Event]:
    """Log what Codex will send of the thread that the log lacks, from its rollout, as the
    runner does before a turn: the log's last turn when it was cut (what Codex kept of
    it, and an ``aborted`` result for each call left without one), then the turns that
    ran outside the log. The events logged (none when the log has no turn of the
    thread). :func:`adapters.codex.tap` calls it when a turn starts."""
    return _logged_by(log, lambda run_log: _import_codex_turns(log, run_log, codex_home, thread_id))


def reconcile_codex_turn(
    log: SessionLog, logged: Sequence[Event], rollout: Sequence[Event]
) -> list[Event]:
    """Correct the turn's logged messages and results to the rollout's; the corrections.

    ``logged`` are the events the live run logged, ``rollout`` the same turn's events
    from the rollout (:func:`codex_rollout_turn`). A turn Codex compacted is taken from
    the rollout from its compaction on (:func:`_adopt_surface`). Otherwise messages are paired
    in order, results by call id within each run of results: a resumed thread streams a
    response's results in the order its commands ran, the rollout holds them in the
    model's order. When the two do not pair (a turn cut mid-message), nothing is
    corrected and a ``warning`` says so. A pair that differs in what reaches the model
    (content, provenance; a result's content or place) gets a replacement on the
    surface: the rollout's content, the live event's own status, exit code and details.
    """
    compacted = _after_last_compaction(rollout)
    if compacted is not None:
        # The live stream shows a compaction only as a ``contextCompaction`` item, not
        # the history that replaces the conversation (the ``compacted`` line's
        # ``replacement_history``); from it on, the rollout holds what Codex sent.
        return _adopt_surface(log, compacted, "rollout")
    if _ended(rollout, "interrupted"):
        return _adopt_cut_turn(log, rollout)
    rollout = [e for e in rollout if isinstance(e, AssistantMessageEvent | ToolResultEvent)]
    turn_id = rollout[0].turn_id if rollout else None
    on_surface = set(log.surface_seqs())
    live = [
        e
        for e in logged
        if e.turn_id == turn_id
        and isinstance(e, AssistantMessageEvent | ToolResultEvent)
        and e.seq in on_surface
    ]
    if _turn_shape(live) != _turn_shape(rollout):
        warning = WarningEvent(
            code="codex_rollout_mismatch",
            message=(
                f"turn {turn_id}: the live stream logged {len(live)} messages/results, the "
                f"rollout holds {len(rollout)}; the turn is left as streamed"
            ),
            turn_id=turn_id,
            source=Source(runtime="codex", native_type="rollout"),
        )
        return [log.append(warning)]
    results = {e.call_id: e for e in live if isinstance(e, ToolResultEvent)}
    corrected: list[Event] = []
    for streamed, sent in zip(live, rollout, strict=True):
        own = results[sent.call_id] if isinstance(sent, ToolResultEvent) else streamed
        replacement = _corrected(own, sent, moved=own is not streamed)
        if replacement is not None:
            corrected.append(log.replace(streamed.seq, streamed.seq, replacement))
    return corrected


def _after_last_compaction(rollout: Sequence[Event]) -> list[SurfaceEvent] | None:
    """The surface events of the turn after its last compaction (the ``compacted`` line,
    which :class:`~adapters.codex.CodexRolloutAdapter` keeps as a native/unknown event):
    the replacement history, then what the turn sent after it. None: no compaction."""
    marks = [
        index
        for index, event in enumerate(rollout)
        if type(event) is NativeUnknownEvent and event.native_type == "compacted"
    ]
    if not marks:
        return None
    return [e for e in rollout[marks[-1] + 1 :] if is_surface_event(e)]


Record = Literal["rollout", "transcript"]
"""A runtime's own record of a session: a Codex rollout, a Claude Code transcript."""

_RECORD_RUNTIMES: dict[str, str] = {"rollout": "codex", "transcript": "claude-code"}


def _ended(rollout_turn: Sequence[Event], status: str) -> bool:
    """Whether the rollout ends the turn with ``status`` (``interrupted``: ``turn_aborted``)."""
    return any(isinstance(e, TurnEndEvent) and e.status == status for e in rollout_turn)


def _cut(turn_id: str | None, events: Sequence[Event]) -> bool:
    """Whether the log ended turn ``turn_id`` other than ``completed``."""
    return any(
        isinstance(e, TurnEndEvent) and e.turn_id == turn_id and e.status != "completed"
        for e in events
    )


def _adopt_cut_turn(log: SessionLog, rollout_turn: Sequence[Event]) -> list[Event]:
    """Make a cut turn what Codex sends of it: the rollout's.

    Codex keeps of an interrupted turn only what completed (the prompt, whole items);
    what the live stream gave of a cut message is not sent. An interrupt (``turn/
    interrupt``; the runner's timeout sends one before it kills) also adds a
    ``<turn_aborted>`` note, which is never streamed; an app-server killed outright
    leaves the turn without an end. The turn's events on the surface (the last ones)
    are replaced by the rollout's; nothing when they are the same already (an earlier
    reconcile took them) or are not the last on the surface.
    """
    turn_id = next((e.turn_id for e in rollout_turn if e.turn_id), None)
    sent = [e for e in rollout_turn if is_surface_event(e)]
    shown = log.surface_seqs()
    events = log.events()
    mine = [seq for seq in shown if events[seq].turn_id == turn_id]
    if turn_id is None or not sent or not mine or mine != shown[len(shown) - len(mine) :]:
        return []
    if [_said(events[seq]) for seq in mine] == [_said(e) for e in sent]:
        return []
    copies = [_native_copy(event) for event in sent]
    return [log.replace(mine[0], mine[-1], copies[0]), *(log.append(c) for c in copies[1:])]


def _aborted_results(log: SessionLog, turn_id: str | None) -> list[ToolResultEvent]:
    """The results Codex makes up, when it sends a cut turn's calls again, for those
    without one (an app-server killed while they ran): ``aborted``. It writes them
    nowhere (not in the rollout), so they are logged here, after the turn."""
    events = log.events()
    shown = [events[seq] for seq in log.surface_seqs()]
    answered = {e.call_id for e in shown if isinstance(e, ToolResultEvent)}
    calls = [
        part.id
        for e in shown
        if isinstance(e, AssistantMessageEvent) and e.turn_id == turn_id
        for part in e.content
        if isinstance(part, ToolCallPart)
    ]
    return [
        ToolResultEvent(
            call_id=call_id,
            content=[TextPart(text="aborted")],  # as Codex sends it: no error mark
            turn_id=turn_id,
            source=Source(runtime="codex", native_type="resume"),
        )
        for call_id in calls
        if call_id not in answered
    ]


def _said(event: Event) -> tuple[str, Any]:
    """What a surface event puts in the history, to compare two records of it."""
    return type(event).__name__, getattr(event, "content", None)


def _adopt_surface(log: SessionLog, sent: Sequence[SurfaceEvent], record: Record) -> list[Event]:
    """Replace everything on the surface by ``sent``, events of the runtime's ``record``
    that hold what it sends: the first takes the range, the rest follow. The events
    replaced stay in the log, off the surface."""
    copies = [_native_copy(event, record) for event in sent]
    if not copies:  # nothing kept: nothing to put in the surface's place
        return []
    shown = log.surface_seqs()
    first, rest = copies[0], copies[1:]
    adopted: list[Event] = [log.replace(shown[0], shown[-1], first) if shown else log.append(first)]
    adopted.extend(log.append(event) for event in rest)
    return adopted


def _native_copy(event: EventT, record: Record = "rollout", *, hidden: bool = False) -> EventT:
    """An event of a runtime's own ``record`` of a session, as a new event of the log:
    its own envelope, no intent; hidden when it was (a sub-agent's message) or ``hidden``."""
    changes = {**_new_envelope(event, record), "session_id": ""}
    if is_surface_event(event):
        surface = event.surface
        hidden = hidden or (surface is not None and surface.op == "hidden")
        changes["surface"] = Surface(op="hidden") if hidden else None
    return msgspec.structs.replace(event, **changes)


def _take_record_surface(
    log: SessionLog,
    run_log: _RunLog,
    events: Sequence[Event],
    shown: Sequence[SurfaceEvent],
    record: Record,
) -> None:
    """Log a record's turns that changed what came before them (a compaction, a
    branch): their lifecycle, their messages and results that are not in ``shown``
    (what the runtime sends now) hidden, so nothing of them is lost; then the surface
    becomes ``shown`` (:func:`_adopt_surface`)."""
    sent = {e.id for e in shown}
    run_log.extend(
        _native_copy(e, record, hidden=is_surface_event(e))
        for e in events
        if _turn_kept(e) and e.id not in sent
    )
    run_log.note(_adopt_surface(log, shown, record))


def _new_envelope(sent: EventBase, record: Record = "rollout") -> dict[str, Any]:
    """What an event taken from a ``record`` gets anew: the log fills id, seq and time;
    its source is the record, with the native id and model of the event ``sent``."""
    return {"id": "", "seq": -1, "ts": 0.0, "source": _record_source(sent, record)}


def _record_source(sent: EventBase, record: Record) -> Source:
    return Source(
        runtime=_RECORD_RUNTIMES[record],
        native_type=record,
        native_id=sent.source.native_id if sent.source else None,
        model=sent.source.model if sent.source else None,
    )


def _turn_shape(events: Sequence[Event]) -> list[Any]:
    """A turn's messages in order, each run of results as its call ids (any order)."""
    shape: list[Any] = []
    for event in events:
        if isinstance(event, ToolResultEvent):
            if not shape or not isinstance(shape[-1], list):
                shape.append([])
            shape[-1].append(event.call_id)
        else:
            shape.append(type(event))
    return [sorted(part) if isinstance(part, list) else part for part in shape]


def _corrected(
    streamed: Event, sent: Event, *, moved: bool = False
) -> AssistantMessageEvent | ToolResultEvent | None:
    """The streamed event with what the rollout says was sent, or None when they agree
    (``moved``: a result that goes in another's place is replaced all the same)."""
    envelope = {**_new_envelope(sent), "surface": None}
    if isinstance(streamed, AssistantMessageEvent) and isinstance(sent, AssistantMessageEvent):
        provenance = sent.provenance or streamed.provenance
        if (streamed.content, streamed.provenance) == (sent.content, provenance):
            return None
        return msgspec.structs.replace(
            streamed, content=sent.content, provenance=provenance, **envelope
        )
    if isinstance(streamed, ToolResultEvent) and isinstance(sent, ToolResultEvent):
        if not moved and (streamed.content, streamed.name) == (
            sent.content,
            sent.name or streamed.name,
        ):
            return None
        details = dict(streamed.details or {})
        output = "".join(p.text for p in streamed.content if isinstance(p, TextPart))
        details.setdefault("output", output)  # the plain output the stream gave
        return msgspec.structs.replace(
            streamed,
            content=sent.content,
            name=sent.name or streamed.name,
            details=details,
            **envelope,
        )
    return None


def _codex_pid(client: Any) -> int | None:
    pid = getattr(getattr(client, "_proc", None), "pid", None)
    return pid if isinstance(pid, int) else None


def _note_switch(run_log: _RunLog, log: SessionLog, runtime: str, native: str | None) -> None:
    """Log a ``runtime/switch`` when the session was last driven by another runtime."""
    previous = last_runtime(log.events())
    if previous is not None and previous != runtime:
        run_log.extend(
            [
                RuntimeSwitchEvent(
                    from_runtime=previous, to_runtime=runtime, native_session_id=native
                )
            ]
        )


def _codex_path_dir() -> Path | None:
    """The helper directory ``openai-codex-cli-bin`` ships for Codex's ``PATH``, if any."""
    try:
        from codex_cli_bin import bundled_path_dir  # type: ignore[import-untyped]

        found = bundled_path_dir()
    except (ImportError, AttributeError, OSError):
        return None
    return Path(found) if found is not None else None


def bundled_codex() -> Path | None:
    """The Codex binary shipped in ``openai-codex-cli-bin``, if installed."""
    try:
        import codex_cli_bin
    except ImportError:
        return None
    candidate = Path(codex_cli_bin.__file__).parent / "bin" / "codex"
    return candidate if candidate.exists() else None


def bundled_claude() -> Path | None:
    """The Claude Code binary shipped in ``claude-agent-sdk``, if installed."""
    try:
        import claude_agent_sdk
    except ImportError:
        return None
    candidate = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return candidate if candidate.exists() else None


def runtime_available(runtime: str) -> bool:
    """Whether the runtime's CLI is installed (the ``claude``/``codex`` extras, or the
    ``claude``/``codex`` command on PATH) with the SDK a runner drives it through."""
    return _runnable(_installed_binary(runtime)) and _sdk_installed(runtime)


# ---------------------------------------------------------------- the unified timeline

_QUIET_EVENTS = frozenset({"assistant/chunk", "tool/output", "native/unknown", "usage"})


def _clip(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _describe(event: Event) -> str:
    """One line about an event, for people."""
    from universal_event.events import (
        AssistantMessageEvent,
        ErrorEvent,
        SessionInterruptedEvent,
        ToolCallEvent,
        ToolResultEvent,
        UserMessageEvent,
        WarningEvent,
    )
    from universal_event.parts import TextPart, ThinkingPart, ToolCallPart

    if isinstance(event, UserMessageEvent | AssistantMessageEvent):
        bits: list[str] = []
        for part in event.content:
            if isinstance(part, TextPart):
                bits.append(repr(_clip(part.text, 100)))
            elif isinstance(part, ThinkingPart):
                bits.append("[thinking]")
            elif isinstance(part, ToolCallPart):
                arguments = json.dumps(part.arguments, ensure_ascii=False)
                bits.append(f"call {part.name} {_clip(arguments, 50)}")
        return " ".join(bits)
    if isinstance(event, ToolCallEvent):
        return f"{event.name} {event.call_id}"
    if isinstance(event, ToolResultEvent):
        text = "".join(p.text for p in event.content if isinstance(p, TextPart))
        flags = " error" if event.is_error else ""
        flags += f" exit {event.exit_code}" if event.exit_code is not None else ""
        return f"{event.call_id}{flags} → {_clip(text, 40)!r}"
    if isinstance(event, TurnEndEvent):
        return event.status + (f" ({_clip(event.error, 50)})" if event.error else "")
    if isinstance(event, SessionStartEvent):
        return f"{event.runtime} native session {event.native_session_id}"
    if isinstance(event, RuntimeSwitchEvent):
        return f"{event.from_runtime} → {event.to_runtime} (native {event.native_session_id})"
    if isinstance(event, ErrorEvent):
        return ("retry: " if event.retryable else "") + _clip(event.message, 60)
    if isinstance(event, WarningEvent):
        return f"[{event.code}] {_clip(event.message, 60)}"
    if isinstance(event, SessionInterruptedEvent):
        return f"{len(event.open_tool_calls)} open tool calls; {event.reason or ''}"
    return ""


def timeline_row(event: Event) -> str | None:
    """The timeline line of one event (None for streamed and informational events)."""
    tag = type(event).__struct_config__.tag
    if tag in _QUIET_EVENTS:
        return None
    runtime = event.source.runtime if event.source is not None else ""
    return f"{event.seq:>5}  {runtime:<15} {tag!s:<20} {_describe(event)}".rstrip()


def timeline_lines(session_id: str, events: Sequence[Event]) -> list[str]:
    """The unified timeline of a session: every runtime's events in one seq order.

    Streamed chunks, tool output, usage and native/unknown events are counted, not
    listed (``universal-event events`` has them all).
    """
    rows = [row for event in events if (row := timeline_row(event)) is not None]
    runtimes: list[str] = []
    for event in events:
        runtime = event.source.runtime if event.source is not None else None
        if isinstance(event, SessionStartEvent | RuntimeSwitchEvent):
            runtime = event.runtime if isinstance(event, SessionStartEvent) else event.to_runtime
            if runtime and (not runtimes or runtimes[-1] != runtime):
                runtimes.append(runtime)
    head = (
        f"session {session_id}: {len(events)} events ({len(events) - len(rows)} streamed or "
        f"informational not listed); runtimes: {' → '.join(runtimes) or '-'}"
    )
    return [head, f"{'seq':>5}  {'source':<15} {'event':<20} detail", *rows]
