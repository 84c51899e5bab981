"""``universal-event serve``: refuses to run open to the network, starts with tokens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.transport._support import ROOT, serve_process


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "universal_event", "serve", "--store", "memory:", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


def test_without_dev_it_needs_tokens() -> None:
    result = _serve("--port", "0")
    assert result.returncode == 2
    assert "needs tokens" in result.stderr and "UNIVERSAL_EVENT_TOKENS" in result.stderr


def test_dev_mode_only_binds_loopback() -> None:
    result = _serve("--dev", "--host", "0.0.0.0", "--port", "0")
    assert result.returncode == 2
    assert "only on loopback" in result.stderr


def test_a_bad_tokens_file_names_the_line(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# agents\nagent-token-0123456789 s1 write,delete\n")
    result = _serve("--tokens-file", str(tokens), "--port", "0")
    assert result.returncode == 2
    assert "line 2: unknown right 'delete'" in result.stderr


def test_serves_with_a_tokens_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("agent-token-0123456789 s1 read,write\n")
    with serve_process("memory:", extra=("--tokens-file", str(tokens))) as (_, base):
        assert base.startswith("http://127.0.0.1:")
        assert httpx.get(f"{base}/sessions").status_code == 401
        auth = {"Authorization": "Bearer agent-token-0123456789"}
        assert httpx.get(f"{base}/sessions", headers=auth).json() == []


def test_a_port_in_use_is_named() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = _serve("--dev", "--port", str(port))
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
