"""A run that ends before its tool does (the timeout) leaves nothing of the runtime
running: the CLI and the commands it started (Claude Code gives a tool's command a
process group of its own, which outlived the killed CLI). The real CLIs, offline."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e._support import runner
from universal_event.fake_models import FakeModelServer, Reply, ShellCall
from universal_event.log import SessionLog


def _running(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            command = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ")
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in command and state != b"Z":
            found.append(int(name))
    return found


@pytest.mark.parametrize("runtime", ["claude-code", "codex"])
def test_a_timed_out_run_leaves_no_command_running(runtime: str, tmp_path: Path) -> None:
    seconds = 40 + uuid.uuid4().int % 20  # a command line of this test alone
    marker = f"time.sleep({seconds}.5)"  # Claude Code refuses a plain long `sleep`
    command = f"python3 -c 'import time; {marker}'; echo done"
    steps = [Reply(text="Running.", calls=[ShellCall(command)])]
    with FakeModelServer(steps) as server:
        run = runner(runtime, server.url, tmp_path, timeout=8.0)
        result = run.run(SessionLog(), "Run it")
    assert result.status == "interrupted"
    deadline = time.monotonic() + 5
    while _running(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running(marker) == []
