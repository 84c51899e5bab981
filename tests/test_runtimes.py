"""The runners' log side (the runs themselves: tests/e2e)."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from universal_event.events import Event, RequestHeaderEvent, SessionStartEvent, Surface
from universal_event.log import SessionLog
from universal_event.parts import TextPart
from universal_event.runtimes import (
    ClaudeCodeRunner,
    _claude_project_name,
    _RunLog,
    claude_project_dir,
)


def _run(log: SessionLog, *events: Event) -> list[Event]:
    sink: list[Event] = []
    _RunLog(log, sink, None).extend(events)
    return sink


def test_a_header_each_run_repeats_is_logged_once_per_epoch() -> None:
    log = SessionLog()
    header = RequestHeaderEvent(
        provider="openai", api="responses", model="gpt-5.5", sampling={"store": False}
    )
    first = _run(log, SessionStartEvent(native_session_id="t1"), header)
    again = _run(log, SessionStartEvent(native_session_id="t1"), header)
    changed = _run(log, RequestHeaderEvent(provider="openai", api="responses", model="gpt-6"))
    assert [type(e) for e in first] == [SessionStartEvent, RequestHeaderEvent]
    assert again == []
    assert [e.model for e in changed if isinstance(e, RequestHeaderEvent)] == ["gpt-6"]
    assert [type(e).__name__ for e in log.events()] == [
        "SessionStartEvent",
        "RequestHeaderEvent",
        "RequestHeaderEvent",
    ]


def test_a_watchdog_given_longer_than_the_platform_can_wait_keeps_watching() -> None:
    """A library caller's ``timeout=inf`` (or 1e10 s) used to kill the Codex watchdog
    thread with an OverflowError: the run then had no timeout at all. Such a wait is
    clamped to ``threading.TIMEOUT_MAX``; the watchdog lives until stopped."""
    import threading
    import time

    from universal_event.runtimes import _Watchdog

    failures: list[BaseException | None] = []
    previous = threading.excepthook
    threading.excepthook = lambda hook_args: failures.append(hook_args.exc_value)
    try:
        dogs = [_Watchdog(seconds) for seconds in (float("inf"), 1e10, threading.TIMEOUT_MAX)]
        time.sleep(0.2)
        for dog in dogs:
            assert dog._thread is not None and dog._thread.is_alive()
            assert not dog.expired
            dog.stop()
            assert not dog._thread.is_alive()
    finally:
        threading.excepthook = previous
    assert failures == []


def test_a_watchdog_still_expires() -> None:
    from universal_event.runtimes import _Watchdog

    dog = _Watchdog(0.01)
    assert dog._thread is not None
    dog._thread.join(timeout=5)
    assert dog.expired and dog.killed  # no turn to interrupt, no app-server to kill


# ---------------------------------------------------------------- claude_project_dir

# Each name below is what the real Claude Code 2.1.332 (bundled with claude_agent_sdk)
# made when run in that very directory (created for the purpose, under a fake model
# server on loopback): <home>/.claude/projects/<name>. The paths need not exist here.
_BASE = "/tmp/ue-claude-names"
_PREFIX = "-tmp-ue-claude-names-"
CLAUDE_CODE_NAMES = [
    # one "-" per UTF-16 code unit: ö is one, the emoji two
    (_BASE + "/w\u00f6rk-\U0001f680", _PREFIX + "w-rk---"),
    # not normalised: o + combining diaeresis (NFD) is "o-"
    (_BASE + "/wo\u0308rk", _PREFIX + "wo-rk"),
    (_BASE + "/\u65e5\u672c\u8a9e", _PREFIX + "---"),
    # 200 characters: kept whole
    (_BASE + "/" + "a" * 179, _PREFIX + "a" * 179),
    # 201 and more: cut to 200, "-" + base-36 hash of the path (negative hashes here)
    (_BASE + "/" + "b" * 180, _PREFIX + "b" * 179 + "-o4uqn4"),
    (_BASE + "/" + "d" * 100 + "/" + "e" * 108, _PREFIX + "d" * 100 + "-" + "e" * 78 + "-wdzyy9"),
    # ... positive hashes; the old code made a name longer than 255 of these two
    (_BASE + "/" + "d" * 100 + "/" + "f" * 178, _PREFIX + "d" * 100 + "-" + "f" * 78 + "-npwnpr"),
    (_BASE + "/" + "g" * 200 + "/" + "h" * 200, _PREFIX + "g" * 179 + "-53y3rj"),
    # 182 code points but 242 UTF-16 units: cut, and hashed over the units
    (
        _BASE + "/" + "d" * 100 + "/" + "\U0001f680" * 60,
        _PREFIX + "d" * 100 + "-" + "-" * 78 + "-ou9bk3",
    ),
]


@pytest.mark.parametrize(("cwd", "name"), CLAUDE_CODE_NAMES)
def test_claude_project_dir_names_a_project_as_claude_code_does(cwd: str, name: str) -> None:
    assert _claude_project_name(cwd) == name


def test_claude_project_dir_follows_a_symlinked_cwd(tmp_path: Path) -> None:
    """Claude Code's cwd is the kernel's (getcwd): the link resolved, not ``$PWD``
    (verified with the real CLI: run in ``…/link`` it wrote under ``…-real``)."""
    root = Path(os.path.realpath(tmp_path))
    (root / "real" / "sub").mkdir(parents=True)
    (root / "link").symlink_to(root / "real")
    home = root / "home"
    for cwd, name in [
        (root / "link", "real"),
        (root / "link" / "sub", "real-sub"),
        (root / "link" / "sub" / ".." / "new", "real-new"),
    ]:
        project = claude_project_dir(home, cwd)
        assert project == home / ".claude" / "projects" / (
            _claude_project_name(str(root)) + "-" + name
        )


def test_claude_project_dir_resolves_a_relative_cwd_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner starts the CLI here with that ``cwd``; Claude Code names the project
    after the absolute path (verified with the real CLI)."""
    root = Path(os.path.realpath(tmp_path))
    (root / "real").mkdir()
    monkeypatch.chdir(root)
    project = claude_project_dir(root / "home", Path("real"))
    assert project == root / "home" / ".claude" / "projects" / _claude_project_name(
        str(root / "real")
    )


def test_claude_project_dir_is_under_the_nfc_form_of_home(tmp_path: Path) -> None:
    """Claude Code looks under ``$HOME/.claude`` normalised to NFC (verified with the
    real CLI: given an NFD ``$HOME`` it wrote under the NFC one)."""
    nfd = tmp_path / unicodedata.normalize("NFD", "h\u00f6me")
    project = claude_project_dir(nfd, tmp_path / "work")
    assert project.parent == tmp_path / "h\u00f6me" / ".claude" / "projects"


def test_claude_project_dir_of_a_long_cwd_can_be_made(tmp_path: Path) -> None:
    """A cwd whose full name is far past 255 characters still gives a directory name
    of at most 207 (200 + "-" + hash): the transcript can be written."""
    cwd = tmp_path / ("d" * 200) / ("\U0001f680" * 60) / ("e" * 200)
    project = claude_project_dir(tmp_path / "home", cwd)
    assert len(project.name) <= 207
    project.mkdir(parents=True)
    (project / "session.jsonl").write_text("{}\n")


def _compaction_log(preserved: list[str], transcript: Path | None) -> list[str]:
    from universal_event.events import AssistantMessageEvent, NativeUnknownEvent, Source
    from universal_event.events import UserMessageEvent as User
    from universal_event.parts import TextPart
    from universal_event.runtimes import ClaudeCompaction

    log = SessionLog()
    run_log = _RunLog(log, [], None, ClaudeCompaction(lambda: transcript))
    run_log.extend(
        [
            User(
                content=[TextPart(text="q1")], source=Source(runtime="claude-code", native_id="u1")
            ),
            AssistantMessageEvent(
                content=[TextPart(text="r1")],
                message_id="msg_1",
                source=Source(runtime="claude-code", native_id="msg_1"),
            ),
            NativeUnknownEvent(
                native_type="system/compact_boundary",
                runtime="claude-code",
                payload={"compact_metadata": {"preserved_messages": {"uuids": preserved}}},
            ),
            User(content=[TextPart(text="summary")]),
            User(content=[TextPart(text="q2")]),
        ]
    )
    return [m.content[0].text for m in log.derive_messages()]  # type: ignore[union-attr]


def test_a_compaction_in_a_run_replaces_all_but_what_it_preserved(tmp_path: Path) -> None:
    """Preserved entries are named by transcript uuid: a user message's is its native id,
    an assistant message's ``message.id`` comes from the transcript."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        '{"type":"user","uuid":"u1","message":{"role":"user","content":"q1"}}\n'
        "not json\n"
        '[1, 2]\n{"uuid": ["a1"]}\n'
        '{"type":"assistant","uuid":"a1","message":{"id":"msg_1","role":"assistant"}}\n'
    )
    assert _compaction_log([], transcript) == ["summary", "q2"]
    assert _compaction_log(["a1"], transcript) == ["summary", "r1", "q2"]
    assert _compaction_log(["u1", "a1"], transcript) == ["q1", "r1", "summary", "q2"]
    # Without the transcript the assistant message is not known as preserved.
    assert _compaction_log(["a1"], None) == ["summary", "q2"]
    assert _compaction_log(["a1"], tmp_path / "missing.jsonl") == ["summary", "q2"]


def _codex_compacted_turn(replacements: list[list[str]], after: list[str]) -> list[str]:
    """The history after reconciling a turn whose rollout holds compactions, each
    followed by its replacement history (user texts), then ``after`` (assistant texts)."""
    from universal_event.events import AssistantMessageEvent, NativeUnknownEvent, Source
    from universal_event.events import UserMessageEvent as User
    from universal_event.parts import TextPart
    from universal_event.runtimes import reconcile_codex_turn

    def said(kind: type[Any], text: str) -> Any:
        return kind(content=[TextPart(text=text)], turn_id="t2", source=Source(runtime="codex"))

    log = SessionLog()
    logged = log.extend(
        [said(User, "q1"), said(AssistantMessageEvent, "r1"), said(User, "q2")]
        + [said(AssistantMessageEvent, text) for text in after]
    )
    rollout: list[Any] = [said(AssistantMessageEvent, "compaction's own reply")]
    for kept in replacements:
        rollout.append(NativeUnknownEvent(native_type="compacted", runtime="codex", turn_id="t2"))
        rollout += [said(User, text) for text in kept]
    rollout += [said(AssistantMessageEvent, text) for text in after]
    corrected = reconcile_codex_turn(log, logged, rollout)
    assert all(e.source is not None and e.source.native_type == "rollout" for e in corrected)
    assert [e.seq for e in log.events()[: len(logged)]] == [e.seq for e in logged]  # kept
    return [m.content[0].text for m in log.derive_messages()]  # type: ignore[union-attr]


def test_a_codex_turn_compacted_takes_the_rollout_from_its_last_compaction() -> None:
    assert _codex_compacted_turn([["q1", "q2", "summary"]], ["after"]) == [
        "q1",
        "q2",
        "summary",
        "after",
    ]
    assert _codex_compacted_turn([["q1", "summary"], ["summary 2"]], ["a", "b"]) == [
        "summary 2",
        "a",
        "b",
    ]
    # A compaction that kept nothing, with nothing after it: the turn is left as logged.
    assert _codex_compacted_turn([[]], []) == ["q1", "r1", "q2"]


def _user_entry(content: Any, prompt_id: str = "p2") -> str:
    import json

    return json.dumps(
        {"type": "user", "promptId": prompt_id, "message": {"role": "user", "content": content}}
    )


CAVEAT = "<local-command-caveat>The command below was run directly</local-command-caveat>"
NAME = "<command-name>/cost</command-name>"


@pytest.mark.parametrize(
    ("lines", "texts"),
    [
        # the command's output is not one of the entries sent in its place
        (
            [_user_entry(CAVEAT), _user_entry(NAME), _user_entry("<local-command-stdout>")],
            [CAVEAT, NAME],
        ),
        ([_user_entry(CAVEAT), _user_entry(NAME)], [CAVEAT, NAME]),
        ([_user_entry(NAME)], [NAME]),
        # the caveat of another prompt is not this command's
        ([_user_entry(CAVEAT, "p1"), _user_entry(NAME)], [NAME]),
        # the last command entry is a caveat without its name: nothing
        ([_user_entry(CAVEAT), _user_entry(NAME), _user_entry(CAVEAT, "p3")], []),
        ([_user_entry([{"type": "text", "text": NAME}]), "[1]", "not json"], []),
        ([], []),
    ],
)
def test_a_local_command_is_logged_as_the_transcript_holds_it(
    tmp_path: Path, lines: list[str], texts: list[str]
) -> None:
    """A run whose prompt is a local command logs the command's caveat and name from the
    transcript in the prompt's place (``/compact`` through the real CLI: tests/e2e)."""
    from universal_event.events import UserMessageEvent
    from universal_event.parts import TextPart
    from universal_event.runtimes import _command_sent

    transcript = tmp_path / "t.jsonl"
    transcript.write_text("\n".join(lines) + "\n")
    log = SessionLog()
    prompt = log.extend([UserMessageEvent(content=[TextPart(text="/cost")])])
    corrected = _command_sent(log, prompt, transcript)
    history = [p.text for m in log.derive_messages() for p in m.content]  # type: ignore[union-attr]
    assert history == (texts or ["/cost"])
    assert len(corrected) == bool(texts)
    assert log.events()[0].content[0].text == "/cost"  # type: ignore[union-attr]
    assert _command_sent(log, [], transcript) == []
    assert _command_sent(SessionLog(), prompt, None) == []


def test_a_local_command_takes_only_the_entries_its_run_wrote(tmp_path: Path) -> None:
    """A command Claude Code expanded into a prompt wrote no command entries: an earlier
    run's are not taken for its own."""
    from universal_event.events import UserMessageEvent
    from universal_event.parts import TextPart
    from universal_event.runtimes import _command_sent

    transcript = tmp_path / "t.jsonl"
    transcript.write_text(_user_entry(CAVEAT, "p1") + "\n" + _user_entry(NAME, "p1") + "\n")
    start = transcript.stat().st_size
    with transcript.open("a") as grown:
        grown.write(_user_entry("Review the diff", "p2") + "\n")
    log = SessionLog()
    prompt = log.extend([UserMessageEvent(content=[TextPart(text="/review")])])
    assert _command_sent(log, prompt, transcript, start) == []
    assert len(_command_sent(log, prompt, transcript)) == 1  # from the start: p1's


def _entry(kind: str, uuid: str, parent: str | None, content: Any, **more: Any) -> str:
    import json

    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message["id"] = f"msg_{uuid}"
    line = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1", **more}
    return json.dumps({**line, "message": message})


def _claude_import(
    tmp_path: Path, known: list[str], lines: list[str]
) -> tuple[SessionLog, list[Event]]:
    """The log holding assistant messages of native ids ``known``, and what a Claude Code
    runner logs into it from session ``s1``'s transcript (``lines``) before its next turn."""
    from universal_event.events import AssistantMessageEvent, Source
    from universal_event.runtimes import ClaudeCodeRunner, import_claude_turns

    runner = ClaudeCodeRunner(base_url="http://127.0.0.1:9", home=tmp_path, cwd=tmp_path / "w")
    path = runner.transcript_path("s1")
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")
    log = SessionLog()
    log.extend(
        AssistantMessageEvent(
            content=[TextPart(text=native)],
            message_id=native,
            source=Source(runtime="claude-code", native_id=native),
        )
        for native in known
    )
    return log, import_claude_turns(log, runner.transcript_path("s1"))


TRANSCRIPT = [
    _entry("user", "u1", None, "q1"),
    _entry("assistant", "a1", "u1", [{"type": "text", "text": "r1"}]),
    _entry("user", "u2", "a1", "q2, elsewhere"),
    _entry("user", "s2", "u2", "a sub-agent's prompt", isSidechain=True),
    _entry("assistant", "a2", "u2", [{"type": "text", "text": "r2"}]),
    '{"type": "user", "uuid": "cut',
]


def test_claude_turns_after_the_last_the_log_knows_are_logged_from_the_transcript(
    tmp_path: Path,
) -> None:
    from universal_event.events import TurnEndEvent, TurnStartEvent

    _, logged = _claude_import(tmp_path / "a", ["msg_a1"], TRANSCRIPT)
    texts = [
        (type(e).__name__, e.content[0].text, e.surface)  # type: ignore[union-attr]
        for e in logged
        if hasattr(e, "content")
    ]
    assert texts == [
        ("UserMessageEvent", "q2, elsewhere", None),
        ("UserMessageEvent", "a sub-agent's prompt", Surface(op="hidden")),
        ("AssistantMessageEvent", "r2", None),
    ]
    assert [type(e) for e in logged if not hasattr(e, "content")] == [TurnStartEvent, TurnEndEvent]
    assert {(e.source.runtime, e.source.native_type) for e in logged if e.source} == {
        ("claude-code", "transcript")
    }
    # The log's last turn is the transcript's last: nothing to log.
    assert _claude_import(tmp_path / "b", ["msg_a1", "msg_a2"], TRANSCRIPT)[1] == []
    # A session the log ran no turn of (a hand-off's): nothing either.
    assert _claude_import(tmp_path / "c", ["msg_other"], TRANSCRIPT)[1] == []
    assert _claude_import(tmp_path / "d", [], TRANSCRIPT)[1] == []


def test_claude_turns_that_compacted_make_the_surface_what_the_transcript_shows(
    tmp_path: Path,
) -> None:
    """A turn outside compacted the session: the log shows the summary and what the
    compaction preserved; what the outside turn sent before it is logged, hidden."""
    import json

    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "b1",
        "parentUuid": "a2",
        "sessionId": "s1",
        "compactMetadata": {"preservedSegment": {"headUuid": "a2", "tailUuid": "a2"}},
    }
    lines = [
        *TRANSCRIPT[:3],
        _entry("assistant", "a2", "u2", [{"type": "text", "text": "r2"}]),
        json.dumps(boundary),
        _entry("user", "u3", "b1", "the summary", isCompactSummary=True),
    ]
    log, logged = _claude_import(tmp_path, ["msg_a1"], lines)
    texts = [
        (e.content[0].text, e.surface.op if e.surface else None)  # type: ignore[union-attr]
        for e in logged
        if hasattr(e, "content")
    ]
    assert texts == [("q2, elsewhere", "hidden"), ("the summary", "replace"), ("r2", None)]
    derived = [m.content[0].text for m in log.derive_messages()]  # type: ignore[union-attr]
    assert derived == ["the summary", "r2"]
    assert "msg_a1" in [e.content[0].text for e in log.events() if hasattr(e, "content")]  # type: ignore[attr-defined]


def test_claude_turns_that_branched_make_the_surface_what_the_transcript_shows(
    tmp_path: Path,
) -> None:
    """Outside the runner the session was resumed at an earlier message (a branch back
    to r1): Claude Code no longer sends q2/r2, run elsewhere before the branch. They are
    logged, hidden; the surface is the branch's."""
    lines = [
        *TRANSCRIPT[:3],
        _entry("assistant", "a2", "u2", [{"type": "text", "text": "r2"}]),
        _entry("user", "u3", "a1", "q3, on a branch from r1"),
        _entry("assistant", "a3", "u3", [{"type": "text", "text": "r3"}]),
    ]
    log, logged = _claude_import(tmp_path, ["msg_a1"], lines)
    derived = [m.content[0].text for m in log.derive_messages()]  # type: ignore[union-attr]
    assert derived == ["q1", "r1", "q3, on a branch from r1", "r3"]
    hidden = [
        e.content[0].text  # type: ignore[union-attr]
        for e in logged
        if getattr(e, "surface", None) is not None and e.surface.op == "hidden"  # type: ignore[union-attr]
    ]
    assert hidden == ["q2, elsewhere", "r2"]


def test_what_a_killed_claude_code_left_out_of_its_transcript_leaves_the_surface(
    tmp_path: Path,
) -> None:
    """Claude Code killed just after a message may not have written it (nor its turn's
    prompt) to the transcript; resumed, it sends the conversation without them. A reply
    the log shows after the transcript's last entry that the transcript lacks takes the
    end of the surface off (it stays in the log)."""
    from universal_event.events import AssistantMessageEvent, Source, UserMessageEvent
    from universal_event.runtimes import import_claude_turns

    log, _ = _claude_import(tmp_path / "a", ["msg_a1"], TRANSCRIPT[:2])
    log.extend(
        [
            UserMessageEvent(content=[TextPart(text="q2, cut")]),
            AssistantMessageEvent(
                content=[TextPart(text="r2, never written")],
                message_id="msg_lost",
                source=Source(runtime="claude-code", native_id="msg_lost"),
            ),
        ]
    )
    runner = ClaudeCodeRunner(
        base_url="http://127.0.0.1:9", home=tmp_path / "a", cwd=tmp_path / "a" / "w"
    )
    import_claude_turns(log, runner.transcript_path("s1"))
    derived = [m.content[0].text for m in log.derive_messages()]  # type: ignore[union-attr]
    assert derived == ["msg_a1"]  # the log's last event the transcript has
    assert "r2, never written" in str([e for e in log.events() if hasattr(e, "content")])

    # What the transcript has is left alone: a reply it holds, a prompt without an id.
    log, _ = _claude_import(tmp_path / "b", ["msg_a1"], TRANSCRIPT[:2])
    log.extend([UserMessageEvent(content=[TextPart(text="q2, written")])])
    runner = ClaudeCodeRunner(
        base_url="http://127.0.0.1:9", home=tmp_path / "b", cwd=tmp_path / "b" / "w"
    )
    import_claude_turns(log, runner.transcript_path("s1"))
    derived = [m.content[0].text for m in log.derive_messages()]  # type: ignore[union-attr]
    assert derived == ["msg_a1", "q2, written"]


def test_a_codex_run_against_a_model_server_that_takes_no_connection_fails_at_once(
    tmp_path: Path,
) -> None:
    """Codex waits for the network again and again on a refused connection: the run
    would end only at its timeout (600 s). It fails at once, nothing of the prompt
    logged."""
    import socket
    import time

    from tests.e2e._support import need
    from universal_event.errors import RuntimeStartError
    from universal_event.runtimes import CodexRunner

    need("codex")
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    runner = CodexRunner(
        base_url=f"http://127.0.0.1:{port}/v1",
        codex_home=tmp_path / "h",
        cwd=tmp_path / "w",
        timeout=20,
    )
    log = SessionLog()
    started = time.monotonic()
    result = runner.run(log, "hello")
    assert time.monotonic() - started < 10
    assert result.status == "failed" and isinstance(result.error, RuntimeStartError)
    assert "takes no connection" in str(result.error) and str(port) in str(result.error)
    assert log.events() == []


def test_a_session_is_not_handed_to_a_runner_that_cannot_start(tmp_path: Path) -> None:
    """A session last driven by Claude Code, continued on Codex with a model server that
    takes no connection: the run fails at its preflight, and no ``runtime/switch`` (nor
    a native session) is logged for a runtime that never ran."""
    import socket

    from tests.e2e._support import need
    from universal_event.errors import RuntimeStartError
    from universal_event.events import AssistantMessageEvent, Source, UserMessageEvent
    from universal_event.handoff import continue_session
    from universal_event.runtimes import CodexRunner

    need("codex")
    log = SessionLog()
    log.extend(
        [
            SessionStartEvent(runtime="claude-code", native_session_id="s1"),
            UserMessageEvent(content=[TextPart(text="hi")], source=Source(runtime="claude-code")),
            AssistantMessageEvent(
                content=[TextPart(text="hello")], source=Source(runtime="claude-code")
            ),
        ]
    )
    before = log.events()
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    runner = CodexRunner(
        base_url=f"http://127.0.0.1:{port}/v1", codex_home=tmp_path / "h", cwd=tmp_path / "w"
    )
    result = continue_session(log, runner, "and now?")
    assert result.status == "failed" and isinstance(result.error, RuntimeStartError)
    assert log.events() == before
    assert not (tmp_path / "h" / "sessions").exists()


@pytest.mark.parametrize("runtime", ["claude-code", "codex"])
def test_a_runtime_without_its_sdk_is_not_available(
    runtime: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI is there but not the SDK the runner drives it through (a ``codex`` on
    PATH without ``openai_codex``): not available, and a run says which package is
    missing instead of failing with an ImportError."""
    from tests.e2e._support import need
    from universal_event import runtimes
    from universal_event.errors import RuntimeNotFoundError

    need(runtime)
    assert runtimes.runtime_available(runtime)
    monkeypatch.setitem(runtimes._SDK_MODULES, runtime, "universal_event_no_such_sdk")
    assert not runtimes.runtime_available(runtime)
    runner: Any
    if runtime == "codex":
        runner = runtimes.CodexRunner(
            base_url="http://127.0.0.1:9/v1", codex_home=tmp_path / "h", cwd=tmp_path / "w"
        )
    else:
        runner = runtimes.ClaudeCodeRunner(
            base_url="http://127.0.0.1:9", home=tmp_path / "h", cwd=tmp_path / "w"
        )
    log = SessionLog()
    result = runner.run(log, "hello")
    assert result.status == "failed" and isinstance(result.error, RuntimeNotFoundError)
    assert "universal_event_no_such_sdk package is not installed" in str(result.error)
    assert log.events() == []
