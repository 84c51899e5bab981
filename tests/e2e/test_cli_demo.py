"""The README's offline demo through the real command line (issue 9, part 4).

``universal-event run`` (a tool turn in Claude Code) then ``universal-event handoff``
(the session continues in Codex), with no ``--model-url``: the built-in fake model
server answers. Where we may (root, ``unshare`` and ``ip`` present — as in CI) both
commands run in a fresh network namespace whose only interface is loopback, so nothing
could leave the machine even by mistake.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e._support import need
from universal_event.events import (
    AssistantMessageEvent,
    RuntimeSwitchEvent,
    ToolResultEvent,
    TurnEndEvent,
)
from universal_event.stores import open_store

ROOT = Path(__file__).resolve().parents[2]


def _isolated() -> list[str]:
    """A prefix that runs a command with loopback as the only network, when possible."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return []
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    return (
        ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
        if probe.returncode == 0
        else []
    )


def _cli(prefix: list[str], tmp_path: Path, *args: str) -> str:
    command = [
        *prefix, sys.executable, "-m", "universal_event", *args,
        "--store", f"sqlite:///{tmp_path / 'demo.db'}",
        "--workdir", str(tmp_path / "homes"), "--cwd", str(tmp_path / "work"),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_offline_demo_tool_turn_in_claude_code_handed_to_codex(tmp_path: Path) -> None:
    need("claude-code")
    need("codex")
    prefix = _isolated()
    if not prefix and os.environ.get("CI"):
        pytest.fail("CI runs as root with unshare: the demo must run without a network")
    first = _cli(
        prefix, tmp_path, "run", "--runtime", "claude-code", "--session", "demo",
        "Use the shell to run `echo 1+1 | bc`",
    )  # fmt: skip
    assert "runtimes: claude-code" in first
    assert "The command printed: '2'." in first
    second = _cli(
        prefix, tmp_path, "handoff", "--session", "demo", "--to", "codex", "What do you know?"
    )
    assert "runtimes: claude-code → codex" in second

    store = open_store(f"sqlite:///{tmp_path / 'demo.db'}")
    try:
        events = list(store.read("demo"))
    finally:
        store.close()
    assert [e.seq for e in events] == list(range(len(events)))
    assert [type(e).__name__ for e in events if isinstance(e, RuntimeSwitchEvent)] == [
        "RuntimeSwitchEvent"
    ]
    assert [e.status for e in events if isinstance(e, TurnEndEvent)] == ["completed"] * 2
    (result,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.content[0].text == "2"  # type: ignore[union-attr]
    # Codex's model was given Claude Code's prompt, its Bash call and the output
    last = [e for e in events if isinstance(e, AssistantMessageEvent)][-1]
    assert last.source is not None and last.source.runtime == "codex"
    assert last.content[-1].text == (  # type: ignore[union-attr]
        "Responses API: I was given 1 earlier prompt, tool calls ['Bash'], last output '2'."
    )


def test_handoff_of_an_unknown_session_fails_cleanly(tmp_path: Path) -> None:
    need("codex")
    command = [
        sys.executable, "-m", "universal_event", "handoff", "--session", "nothing",
        "--to", "codex", "--store", f"sqlite:///{tmp_path / 'x.db'}",
        "--workdir", str(tmp_path / "homes"),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "no session 'nothing'" in done.stderr and not (tmp_path / "x.db").exists()


def test_a_turn_the_model_server_fails_is_one_error_line(tmp_path: Path) -> None:
    """HTTP 500s: the turn ends failed, and the command says so on stderr (exit 1), as
    every failure does — it printed nothing."""
    from universal_event.fake_models import FakeModelServer, HttpError

    need("claude-code")
    with FakeModelServer([HttpError(500)] * 12) as server:
        command = [
            sys.executable, "-m", "universal_event", "run", "--quiet", "--runtime",
            "claude-code", "--session", "f", "hello", "--model-url", server.url,
            "--store", f"sqlite:///{tmp_path / 'f.db'}",
            "--workdir", str(tmp_path / "homes"), "--cwd", str(tmp_path / "work"),
        ]  # fmt: skip
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    errors = [
        line for line in done.stderr.splitlines() if line.startswith("universal-event: error:")
    ]
    assert len(errors) == 1 and "the turn ended failed" in errors[0], done.stderr


def test_an_imported_session_is_run_after_a_handoff_the_error_points_to(tmp_path: Path) -> None:
    """A session imported from a capture names a native session that is not here: `run`
    cannot resume it and says to hand the session over; `handoff --to` with a prompt
    writes one from the log (even to the runtime the session last ran on) and runs."""
    need("claude-code")
    capture = ROOT / "tests/fixtures/captured/claude/cli/c02_tool_partial/stdout.jsonl"
    store = f"sqlite:///{tmp_path / 'i.db'}"
    places = ["--workdir", str(tmp_path / "homes"), "--cwd", str(tmp_path / "work")]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "universal_event", *args, "--store", store]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert cli("import", "--from", "claude-code", str(capture), "--session", "imp").returncode == 0
    cut = cli("run", "--quiet", "--runtime", "claude-code", "--session", "imp", "Go on", *places)
    assert cut.returncode == 1
    assert "universal-event handoff --to claude-code --session imp" in cut.stderr
    handed = cli("handoff", "--quiet", "--to", "claude-code", "--session", "imp", "Go on", *places)
    assert handed.returncode == 0, handed.stderr
    log = open_store(store)
    ends = [e for e in log.read("imp") if isinstance(e, TurnEndEvent)]
    assert ends[-1].status == "completed"
    assert [e for e in log.read("imp") if isinstance(e, RuntimeSwitchEvent)]
