"""``universal-event serve``: run the control plane under uvicorn.

Without ``--dev`` the server refuses to start unless tokens are configured
(``--tokens-file FILE`` or ``$UNIVERSAL_EVENT_TOKENS``; format in
:mod:`universal_event.server._auth`). ``--dev`` turns auth off and therefore only binds
loopback addresses. ``--port 0`` picks a free port; the first line on stdout is always
``serving http://HOST:PORT`` with the port actually bound.

Shutdown (SIGTERM, SIGINT): open SSE streams end cleanly first (their clients resume
elsewhere or later with ``Last-Event-ID``; one stuck writing to a client that does not
read is dropped after a second), then uvicorn shuts down and the store is closed. The
process then exits as uvicorn would have: by the signal (SIGTERM) or with status 130
(SIGINT).
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from universal_event.server._auth import Tokens

__all__ = ["TOKENS_ENV", "load_tokens", "run_server"]

TOKENS_ENV = "UNIVERSAL_EVENT_TOKENS"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_tokens(tokens_file: str | None) -> Tokens | None:
    """Tokens from the file, else from the environment; None when neither is set."""
    if tokens_file:
        return Tokens.parse(Path(tokens_file).read_text("utf-8"), origin=tokens_file)
    text = os.environ.get(TOKENS_ENV, "")
    if text.strip():
        return Tokens.parse(text, origin=f"${TOKENS_ENV}")
    return None


_STREAM_GRACE = 1.0
"""Seconds a stream may take to end on shutdown before its connection is dropped."""


def _server(config: Any, app: Any) -> Any:
    """A uvicorn server that ends the app's open streams when it begins shutting down
    (uvicorn itself waits for them, then cancels each with a traceback)."""
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            app.state.control_plane.hub.end_streams(_STREAM_GRACE)
            await super().shutdown(sockets=sockets)

    return Server(config)


def run_server(*, store_url: str, host: str, port: int, dev: bool, tokens_file: str | None) -> int:
    """Serve until interrupted; returns the exit status."""
    import uvicorn

    from universal_event.server._app import create_app
    from universal_event.stores import open_store

    if dev and not _is_loopback(host):
        print(
            f"universal-event: error: --dev serves without auth, so only on loopback, not {host!r}",
            file=sys.stderr,
        )
        return 2
    try:
        tokens = None if dev else load_tokens(tokens_file)
    except OSError as exc:  # the file cannot be read
        where = f": {exc.filename}" if exc.filename else ""
        print(f"universal-event: error: bad tokens: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"universal-event: error: bad tokens: {exc}", file=sys.stderr)
        return 2
    if not dev and tokens is None:
        print(
            f"universal-event: error: serve needs tokens: --tokens-file FILE or ${TOKENS_ENV} "
            "(lines `TOKEN SESSION read,write`), or --dev for a loopback-only server without auth",
            file=sys.stderr,
        )
        return 2
    store = open_store(store_url)
    # uvicorn re-raises the signal that stopped it once it is done; with the default
    # handler in place that killed the process before the store was closed.
    received: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for handled in (signal.SIGINT, signal.SIGTERM):
            previous[handled] = signal.signal(handled, remember)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Quirk: asyncio turns on TCP_NODELAY only for sockets whose proto is IPPROTO_TCP
    # (asyncio/base_events.py `_set_nodelay`); a plain socket.socket() has proto 0, so
    # every small SSE/HTTP write after the first waited ~40 ms for a delayed ACK (Nagle).
    # Measured here: 45 ms per request with proto 0, under 1 ms with IPPROTO_TCP.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        try:
            sock.bind((host, port))
        except OSError as exc:
            shown = f"[{host}]" if family == socket.AF_INET6 else host
            raise OSError(exc.errno, f"cannot listen on {shown}:{port}: {exc.strerror}") from exc
        sock.listen(2048)  # connections queue from now on, before uvicorn accepts them
        bound_port = sock.getsockname()[1]
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        print(f"serving http://{shown}:{bound_port}", flush=True)
        app = create_app(store, tokens=tokens)
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
        _server(config, app).run(sockets=[sock])
    finally:
        sock.close()
        store.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if signal.SIGTERM in received and previous.get(signal.SIGTERM) == signal.SIG_DFL:
        signal.raise_signal(signal.SIGTERM)
    if received:
        return 128 + received[0]
    return 0
