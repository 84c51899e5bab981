"""Helpers for the transport tests: servers on ephemeral loopback ports, SSE clients."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette

from universal_event.codec import encode_lines
from universal_event.events import Event, UserMessageEvent
from universal_event.parts import TextPart
from universal_event.sse import SSEEventDecoder

ROOT = Path(__file__).resolve().parents[2]


class ServerThread:
    """A uvicorn server for ``app`` in a background thread, on a free loopback port."""

    def __init__(self, app: Starlette) -> None:
        # IPPROTO_TCP, or asyncio leaves Nagle on (see universal_event/server/_serve.py)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@contextmanager
def serve_process(
    store_url: str, *, port: int = 0, extra: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``universal-event serve`` in a subprocess; yields (process, base URL)."""
    command = [sys.executable, "-m", "universal_event", "serve", "--store", store_url]
    command += ["--port", str(port), *extra]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("serving "):
            process.kill()
            _, err = process.communicate(timeout=10)
            raise RuntimeError(f"server did not start: {line!r} {err}")
        yield process, line.split()[1]
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def user_events(count: int, *, prefix: str, size: int = 0) -> list[Event]:
    """``count`` distinct user messages with ids ``{prefix}-{i}`` (seq left to the server)."""
    pad = "x" * size
    return [
        UserMessageEvent(id=f"{prefix}-{index}", content=[TextPart(text=f"message {index}{pad}")])
        for index in range(count)
    ]


def post_events(
    client: httpx.Client, base: str, session: str, events: list[Event], **headers: str
) -> httpx.Response:
    return client.post(
        f"{base}/sessions/{session}/events",
        content=encode_lines(events),
        headers={"content-type": "application/x-ndjson", **headers},
    )


class ResumingClient:
    """An SSE client that drops its connection at random places and resumes.

    It keeps what it received (seq, id) across connections and sends ``Last-Event-ID``
    on every reconnect, like a browser's EventSource.
    """

    def __init__(
        self,
        base: str,
        session: str,
        *,
        rng: random.Random,
        disconnects: int,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.url = f"{base}/sessions/{session}/events"
        self.rng = rng
        self.disconnects_left = disconnects
        self.headers = headers or {}
        self.received: list[tuple[int, str]] = []
        self.last_event_id = ""
        self.connections = 0
        self.server_closed = 0
        """Connections the *server* ended (overflow, restart), not the client."""

    async def run(self, client: httpx.AsyncClient, until_seq: int, deadline: float) -> None:
        while not self.received or self.received[-1][0] < until_seq:
            if time.monotonic() > deadline:
                raise TimeoutError(f"stuck at {self.received[-1:]} waiting for {until_seq}")
            try:
                await self._connect(client, until_seq)
            except (httpx.TransportError, httpx.RemoteProtocolError):
                await asyncio.sleep(0.05)  # server away (restart): retry like EventSource

    async def _connect(self, client: httpx.AsyncClient, until_seq: int) -> None:
        headers = dict(self.headers)
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        self.connections += 1
        # Cut after a random number of bytes while we still have disconnects to spend.
        budget = self.rng.randint(1, 20_000) if self.disconnects_left > 0 else None
        decoder = SSEEventDecoder()
        async with client.stream("GET", self.url, headers=headers) as response:
            response.raise_for_status()
            async for chunk in response.aiter_raw():
                if budget is not None and len(chunk) >= budget:
                    self._take(decoder, chunk[:budget])
                    self.disconnects_left -= 1
                    return  # leaving the block closes the connection mid-stream
                if budget is not None:
                    budget -= len(chunk)
                self._take(decoder, chunk)
                if self.received and self.received[-1][0] >= until_seq:
                    return
        self.server_closed += 1

    def _take(self, decoder: SSEEventDecoder, chunk: bytes) -> None:
        for event in decoder.feed_events(chunk):
            self.received.append((event.seq, event.id))
        if decoder.last_event_id:
            self.last_event_id = decoder.last_event_id
