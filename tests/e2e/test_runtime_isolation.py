"""The runtimes run isolated from the caller, bounded in time, and fail cleanly (audit 9).

* The caller's environment (credentials, ``CLAUDE_CONFIG_DIR``, proxies) does not reach
  the CLI: each is launched under ``env -i`` with exactly the runner's variables.
* Claude Code loads no project settings or ``CLAUDE.md`` from its ``cwd``.
* The first Codex turn after a hand-off is reconciled with the rollout like any other.
* A stalled model server does not hang a run: the timeout interrupts the turn, the log
  closes it, the CLI is gone.
* A native session that is gone, a CLI that does not start or is missing: a typed
  one-line error, and nothing of the prompt in the log.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e._support import (
    RUNTIMES,
    codex_sent_results,
    need,
    of_type,
    result_text,
    runner,
)
from universal_event.cli import main
from universal_event.errors import (
    RuntimeNotFoundError,
    RuntimeStartError,
    RuntimeTimeoutError,
)
from universal_event.events import (
    AssistantMessageEvent,
    RuntimeSwitchEvent,
    ToolResultEvent,
    TurnEndEvent,
    UserMessageEvent,
    WarningEvent,
)
from universal_event.fake_models import FakeModelServer, Reply, ShellCall, Stall
from universal_event.handoff import (
    RuntimePlaces,
    make_runner,
    prepare,
    render_for,
    uuid7,
    write_codex_rollout,
)
from universal_event.log import SessionLog
from universal_event.parts import TextPart

PROBE = "UNIVERSAL_EVENT_CALLER_PROBE"
NEVER_SEEN = "PROMPT-THE-CLI-NEVER-SAW"


class _ProxySink:
    """A would-be HTTP proxy on loopback: records every request line, answers 502."""

    def __init__(self) -> None:
        self.hits: list[bytes] = []
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            with connection:
                self.hits.append(connection.recv(4096).split(b"\r\n")[0])
                connection.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")

    def close(self) -> None:
        self._socket.close()


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment mentions ``marker`` (a test's tmp dir): the CLIs."""
    needle = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                stat = (entry / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def _gone(marker: str, wait: float = 5.0) -> bool:
    deadline = time.monotonic() + wait
    while _processes_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


# ---------------------------------------------------------------- isolation


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_callers_environment_does_not_reach_the_runtime(
    runtime: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = _ProxySink()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "sk-ant-callers-own-token")
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "X-From-Caller: yes")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "callers-claude"))
    monkeypatch.setenv(PROBE, "leaked")
    steps = [
        Reply(text="Looking.", calls=[ShellCall(f'echo "probe=${{{PROBE}-unset}}"')]),
        Reply(text="Done."),
    ]
    log = SessionLog()
    try:
        with FakeModelServer(steps) as server:
            result = runner(runtime, server.url, tmp_path).run(log, "Check the environment")
    finally:
        proxy.close()
    assert result.status == "completed", result.error
    assert proxy.hits == []
    assert len(server.model_requests()) == 2
    for request in server.requests:
        assert "x-from-caller" not in request.headers
        if runtime == "claude-code":  # its key is x-api-key; Codex sends its own bearer
            assert "authorization" not in request.headers
    (tool_result,) = of_type(result.events, ToolResultEvent)
    assert "probe=unset" in result_text(tool_result)
    if runtime == "claude-code":
        assert not (tmp_path / "callers-claude").exists()
        assert list((tmp_path / "homes" / "claude-home" / ".claude").rglob("*.jsonl"))


def test_claude_code_loads_no_project_settings_or_claude_md(tmp_path: Path) -> None:
    with (
        FakeModelServer([Reply(text="from the decoy")]) as decoy,
        FakeModelServer([Reply(text="from the runner's server")]) as server,
    ):
        claude = runner("claude-code", server.url, tmp_path)
        (claude.cwd / ".claude").mkdir(parents=True)
        settings = {"env": {"ANTHROPIC_BASE_URL": decoy.url, "DISABLE_TELEMETRY": "0"}}
        (claude.cwd / ".claude" / "settings.json").write_text(json.dumps(settings))
        (claude.cwd / "CLAUDE.md").write_text("PROJECT-MEMORY-MARKER")
        result = claude.run(SessionLog(), "hello")
    assert result.status == "completed", result.error
    assert decoy.requests == []
    (request,) = server.model_requests()
    assert "PROJECT-MEMORY-MARKER" not in json.dumps(request.body)


# ---------------------------------------------------------------- hand-off to Codex


def test_rollout_of_a_handoff_keeps_the_handed_history_out_of_the_first_turn(
    tmp_path: Path,
) -> None:
    """A hand-off's rollout has no turns: its last assistant message is not the next
    turn's (the adapter flushes it when the task starts)."""
    from adapters.codex import CodexRolloutAdapter

    request = {
        "input": [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "Hi from Claude."},
        ]
    }
    thread_id, path = write_codex_rollout(request, codex_home=tmp_path, cwd=tmp_path)
    turn = [
        {"type": "event_msg", "payload": {"type": "task_started", "turn_id": "t1"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "go on"}],
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Going on."}],
            },
        },
        {"type": "event_msg", "payload": {"type": "task_complete", "turn_id": "t1"}},
    ]
    data = path.read_bytes() + b"".join(json.dumps(line).encode() + b"\n" for line in turn)
    events = CodexRolloutAdapter().feed(data)
    messages = [(e.turn_id, e.content[0].text) for e in of_type(events, AssistantMessageEvent)]
    assert messages == [(None, "Hi from Claude."), ("t1", "Going on.")]
    assert thread_id


def test_first_codex_turn_after_a_handoff_is_reconciled(tmp_path: Path) -> None:
    steps = [
        Reply(text="Hi from Claude."),
        Reply(thinking="Codex reasons.", text="Checking.", calls=[ShellCall("echo no >&2")]),
        Reply(text="Done."),
    ]
    log = SessionLog()
    with FakeModelServer(steps) as server:
        claude = runner("claude-code", server.url, tmp_path)
        codex = runner("codex", server.url, tmp_path)
        assert claude.run(log, "hello").status == "completed"
        resume, handed = prepare(log, codex)
        assert handed is not None
        result = codex.run(log, "Now run a command", resume=resume)
        assert result.status == "completed", result.error
        sent = codex_sent_results(server.model_requests("responses")[1])
    assert not [w for w in of_type(log.events(), WarningEvent) if w.code.startswith("codex")]
    request, _ = render_for("codex", log.derive_messages(), "gpt-5.5")
    calls = [i for i in request["input"] if i.get("type") == "function_call"]
    outputs = [i for i in request["input"] if i.get("type") == "function_call_output"]
    assert [c["name"] for c in calls] == ["exec_command"]
    assert json.loads(calls[0]["arguments"])["cmd"] == "echo no >&2"
    assert [(o["call_id"], o["output"]) for o in outputs] == list(sent.items())
    texts = [i for i in request["input"] if i.get("role") == "assistant"]
    assert [t["content"] for t in texts].count("Hi from Claude.") == 1


# ---------------------------------------------------------------- timeouts


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_stalled_model_server_times_the_run_out(runtime: str, tmp_path: Path) -> None:
    log = SessionLog()
    with FakeModelServer([Stall(60, Reply(text="late"))] * 3) as server:
        bounded = runner(runtime, server.url, tmp_path, timeout=3)
        started = time.monotonic()
        result = bounded.run(log, "hello")
        elapsed = time.monotonic() - started
    assert isinstance(result.error, RuntimeTimeoutError), result.error
    assert "timeout of 3 s" in str(result.error)
    assert result.status == "interrupted"
    assert elapsed < 20
    ends = of_type(log.events(), TurnEndEvent)
    assert [e.status for e in ends] == ["interrupted"]
    assert [w.code for w in of_type(log.events(), WarningEvent)] == ["runtime_timeout"]
    assert _gone(str(tmp_path))


def test_run_timeout_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need("claude-code")
    with FakeModelServer([Stall(60, Reply(text="late"))] * 3) as server:
        status = main(
            [
                "run", "--runtime", "claude-code", "--session", "s1", "hello",
                "--store", f"sqlite:///{tmp_path / 'db.sqlite'}", "--model-url", server.url,
                "--workdir", str(tmp_path / "homes"), "--cwd", str(tmp_path / "work"),
                "--quiet", "--timeout", "2",
            ]
        )  # fmt: skip
    assert status == 1
    err = capsys.readouterr().err
    assert "the turn did not end within the timeout of 2 s" in err
    assert _gone(str(tmp_path))


# ---------------------------------------------------------------- runs that cannot start


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_resuming_a_native_session_that_is_gone_is_a_typed_error(
    runtime: str, tmp_path: Path
) -> None:
    log = SessionLog()
    gone = uuid7() if runtime == "codex" else str(uuid.uuid4())
    with FakeModelServer([Reply(text="never")]) as server:
        result = runner(runtime, server.url, tmp_path).run(log, "again", resume=gone)
    assert isinstance(result.error, RuntimeStartError), result.error
    assert gone in str(result.error) and "\n" not in str(result.error)
    assert result.status == "failed"
    assert log.events() == []
    assert server.model_requests() == []


def test_cli_reports_a_lost_codex_thread_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need("codex")
    store = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with FakeModelServer([Reply(text="one"), Reply(text="two")]) as server:

        def run(prompt: str, workdir: str) -> int:
            return main(
                [
                    "run", "--runtime", "codex", "--session", "s1", prompt, "--store", store,
                    "--model-url", server.url, "--workdir", str(tmp_path / workdir),
                    "--cwd", str(tmp_path / "work"), "--quiet",
                ]
            )  # fmt: skip

        assert run("hello", "first") == 0
        capsys.readouterr()
        assert run("again", "lost") == 1  # another workdir: the thread's rollout is not there
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("universal-event: error: codex: cannot resume native session")
    assert not [line for line in err if "Traceback" in line]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_cli_that_cannot_start_logs_no_prompt(runtime: str, tmp_path: Path) -> None:
    need(runtime)
    missing = tmp_path / "no-such-cli"
    broken = tmp_path / "broken-cli"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    log = SessionLog()
    places = RuntimePlaces(tmp_path / "homes", tmp_path / "work")
    with FakeModelServer([Reply(text="hi")]) as server:
        for cli, error in ((missing, RuntimeNotFoundError), (broken, RuntimeStartError)):
            failed = make_runner(runtime, server.url, places, cli_path=cli).run(log, NEVER_SEEN)  # type: ignore[arg-type]
            assert isinstance(failed.error, error), failed.error
            assert failed.status == "failed"
            assert log.events() == []
        working = make_runner(runtime, server.url, places)  # type: ignore[arg-type]
        assert working.run(log, "second prompt").status == "completed"
        body = json.dumps(server.model_requests()[-1].body)
    assert NEVER_SEEN not in body and "second prompt" in body
    prompts = [
        "".join(p.text for p in e.content if isinstance(p, TextPart))
        for e in of_type(log.events(), UserMessageEvent)
    ]
    assert prompts == ["second prompt"]
    assert not of_type(log.events(), RuntimeSwitchEvent)


def test_the_launcher_runs_a_binary_on_any_path_with_exactly_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path holding ``=`` (env(1) would read it as a variable) or given relative (it
    would be looked up in PATH) still runs that binary; arguments and passed-through
    values arrive as they are; nothing else of the caller's environment does."""
    import subprocess

    from universal_event.runtimes import write_launcher

    for directory in (tmp_path / "a=b", tmp_path / "plain"):
        directory.mkdir()
        tool = directory / "tool"
        tool.write_text('#!/bin/sh\necho "$0"; printf "%s|" "$@"; echo; env | sort\n')
        tool.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    odd = "v with  spaces * $HOME `id`"
    for binary in (tmp_path / "a=b" / "tool", Path("plain/tool")):
        launcher = write_launcher(
            tmp_path / "launch", binary, {"FOO": "1 2"}, passthrough=("PASSED", "UNSET")
        )
        done = subprocess.run(
            [str(launcher), "x y", "*"],
            env={"PASSED": odd, "LEAKED": "no", "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            cwd=tmp_path / "plain",
            timeout=10,
            check=True,
        )
        script, arguments, *environment = done.stdout.splitlines()
        assert script == str(binary.resolve() if not binary.is_absolute() else binary)
        assert arguments == "x y|*|"
        names = {line.split("=", 1)[0] for line in environment}
        assert f"PASSED={odd}" in environment and "FOO=1 2" in environment
        assert "LEAKED" not in names and "UNSET" not in names


@pytest.mark.parametrize(("runtime", "command"), [("claude-code", "claude"), ("codex", "codex")])
def test_a_runtime_on_path_is_available_without_the_bundled_cli(
    runtime: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the extra, the CLI's own command on PATH is what a runner launches (the
    check looked for ``claude-code`` on PATH, which is no command)."""
    from universal_event import runtimes

    monkeypatch.setattr(runtimes, "bundled_claude", lambda: None)
    monkeypatch.setattr(runtimes, "bundled_codex", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not runtimes.runtime_available(runtime)
    cli = tmp_path / command
    cli.write_text("#!/bin/sh\nexit 0\n")
    assert not runtimes.runtime_available(runtime)  # not executable
    cli.chmod(0o755)
    assert runtimes.runtime_available(runtime)
    assert runtimes._runtime_binary(runtime, None) == cli
