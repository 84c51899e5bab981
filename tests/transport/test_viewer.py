"""The session viewer in a real headless browser (Debian's chromium), driven over the
Chrome DevTools Protocol: the page draws the timeline from the SSE stream, follows
live appends, and a screenshot of it is not blank."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from tests.transport._support import ServerThread, post_events
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    StepStartEvent,
    ToolCallEvent,
    ToolOutputEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    Usage,
    UsageEvent,
    UserMessageEvent,
)
from universal_event.parts import TextPart, ToolCallPart
from universal_event.server import Tokens, create_app
from universal_event.stores import MemoryStore

WRITER = "viewer-writer-token-0123456789"
READER = "viewer-reader-token-0123456789"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--window-size=1100,900",
]


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(
            "chromium is not installed (scripts/test installs it: apt-get install chromium)"
        )
    return path


class Browser:
    """A headless chromium and a CDP session on its one page."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="ue-chromium-")
        self.process = subprocess.Popen(
            [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        port = self._devtools_port()
        deadline = time.monotonic() + 20
        while True:
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=5).json()
            pages = [t for t in targets if t.get("type") == "page"]
            if pages or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        # websockets >= 17 wants connect() used as a context manager
        self._exit = contextlib.ExitStack()
        self.ws: ClientConnection = self._exit.enter_context(
            connect(pages[0]["webSocketDebuggerUrl"], max_size=None)
        )
        self._next_id = 0

    def _devtools_port(self) -> int:
        marker = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text().split()[0])
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        self.ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=20))
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                dom = self.evaluate("document.body.innerText")
                raise AssertionError(f"timed out waiting for {expression!r}; page: {dom!r}")
            time.sleep(0.05)

    def close(self) -> None:
        self._exit.close()
        os.killpg(self.process.pid, signal.SIGKILL)  # chromium and its helper processes
        self.process.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture
def browser() -> Iterator[Browser]:
    started = Browser()
    try:
        yield started
    finally:
        started.close()


def _turn(turn: str) -> list[Event]:
    return [
        TurnStartEvent(id=f"{turn}-ts", turn_id=turn),
        UserMessageEvent(id=f"{turn}-u", turn_id=turn, content=[TextPart(text="List the files")]),
        StepStartEvent(id=f"{turn}-ss", turn_id=turn, step=0),
        AssistantChunkEvent(
            id=f"{turn}-c0", turn_id=turn, step=0, message_id="m1", delta="Let me "
        ),
        AssistantChunkEvent(id=f"{turn}-c1", turn_id=turn, step=0, message_id="m1", delta="look."),
        AssistantMessageEvent(
            id=f"{turn}-am",
            turn_id=turn,
            step=0,
            message_id="m1",
            content=[
                TextPart(text="Let me look."),
                ToolCallPart(id="call_1", name="bash", arguments={"command": "ls"}),
            ],
        ),
        ToolCallEvent(id=f"{turn}-tc", turn_id=turn, step=0, call_id="call_1", name="bash"),
        ToolOutputEvent(
            id=f"{turn}-to", turn_id=turn, step=0, call_id="call_1", delta="README.md\n"
        ),
        ToolResultEvent(
            id=f"{turn}-tr",
            turn_id=turn,
            step=0,
            call_id="call_1",
            content=[TextPart(text="README.md\n")],
        ),
        UsageEvent(
            id=f"{turn}-us", turn_id=turn, step=0, usage=Usage(input_tokens=1200, output_tokens=34)
        ),
        ErrorEvent(id=f"{turn}-er", turn_id=turn, step=0, message="rate limited", code="429"),
    ]


def _png_pixels(png: bytes) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """Width, height and the RGB pixel rows of an 8-bit RGB/RGBA PNG (no imaging library)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat = 8, b""
    width = height = channels = 0
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind = png[position + 4 : position + 8]
        data = png[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", data[:10])
            assert depth == 8 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += data
        position += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                estimate = left + up - corner
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[x] = (line[x] + predictor) & 0xFF
        rows.append(bytes(line))
        previous = line
    pixels = [
        [(row[x], row[x + 1], row[x + 2]) for x in range(0, stride, channels)] for row in rows
    ]
    return width, height, pixels


def test_viewer_draws_the_timeline_live_and_renders_a_non_blank_page(browser: Browser) -> None:
    store = MemoryStore()
    tokens = Tokens.parse(f"{WRITER} v1 write\n{READER} v1 read")
    auth = {"Authorization": f"Bearer {WRITER}"}
    with (
        ServerThread(create_app(store, tokens=tokens, keepalive=0.5)) as server,
        httpx.Client(timeout=10, headers=auth) as http,
    ):
        assert post_events(http, server.url, "v1", _turn("t1")).status_code == 200
        browser.call("Page.enable")
        browser.call("Page.navigate", url=f"{server.url}/view/v1?token={READER}")
        browser.wait_for("window.universalEventViewer && window.universalEventViewer.count === 11")
        dom = browser.evaluate(
            """({
              turns: document.querySelectorAll('.turn').length,
              steps: document.querySelectorAll('.step').length,
              user: document.querySelector('.item.user .text').textContent,
              assistant: document.querySelector('.item.assistant .text').textContent,
              streaming: document.querySelectorAll('.assistant.streaming').length,
              toolName: document.querySelector('.tool .name').textContent,
              toolArgs: document.querySelector('.tool .args').textContent,
              toolOutput: document.querySelector('.tool .output').textContent,
              error: document.querySelector('.item.error').textContent,
              usage: document.getElementById('usage-total').textContent,
              status: document.getElementById('status').textContent,
            })"""
        )
        assert dom == {
            "turns": 1,
            "steps": 1,
            "user": "List the files",
            "assistant": "Let me look.",
            "streaming": 0,
            "toolName": "bash",
            "toolArgs": '{"command":"ls"}',
            "toolOutput": "README.md\n",
            "error": "error · 429rate limited",
            "usage": "in 1200 · out 34",
            "status": "live",
        }
        # Live: text streams in while the page is open, then the turn ends.
        live = [
            StepStartEvent(id="t1-s1", turn_id="t1", step=1),
            AssistantChunkEvent(id="t1-l0", turn_id="t1", step=1, message_id="m2", delta="Found "),
            AssistantChunkEvent(id="t1-l1", turn_id="t1", step=1, message_id="m2", delta="README"),
        ]
        post_events(http, server.url, "v1", live)
        browser.wait_for(
            "document.querySelector('.assistant.streaming .text')?.textContent === 'Found README'"
        )
        post_events(
            http, server.url, "v1", [TurnEndEvent(id="t1-end", turn_id="t1", status="failed")]
        )
        browser.wait_for(
            "document.querySelector('.turn.failed .turn-status')?.textContent === 'failed'"
        )
        assert browser.evaluate("document.querySelectorAll('.step').length") == 2
        assert browser.evaluate("window.universalEventViewer.lastSeq") == 14
        shot = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
        browser.call("Page.navigate", url="about:blank")  # close the stream before the server
    width, height, rows = _png_pixels(shot)
    assert width == 1100 and height > 500
    colours = {pixel for row in rows[::5] for pixel in row[::3]}
    assert len(colours) > 20  # text, panels, header: far from a blank page
    assert max(rows[5][5]) < 80  # the dark header bar is drawn at the top
    body = [pixel for row in rows[60:400:4] for pixel in row[20:700:4]]
    tinted = [pixel for pixel in body if pixel != body[0]]
    assert len(tinted) > len(body) // 10  # the timeline's panels fill the page


def test_viewer_stops_at_a_stream_error_and_says_why(browser: Browser, tmp_path: Path) -> None:
    """A stored event the server cannot read ends the stream with a ``stream-error``
    frame; the page shows it and stops, instead of reconnecting into it every second."""
    import sqlite3

    from universal_event.stores.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "s.db")
    with ServerThread(create_app(store, tokens=None)) as server, httpx.Client(timeout=10) as http:
        assert post_events(http, server.url, "v2", _turn("t1")).status_code == 200
        with sqlite3.connect(tmp_path / "s.db") as raw:
            raw.execute("UPDATE events SET payload = ? WHERE seq = 3", (b"{not json",))
        browser.call("Page.enable")
        browser.call("Page.navigate", url=f"{server.url}/view/v2")
        browser.wait_for("document.getElementById('status').textContent === 'stopped'")
        shown = browser.evaluate(
            """({
              count: window.universalEventViewer.count,
              closed: window.universalEventViewer.source.readyState === EventSource.CLOSED,
              error: [...document.querySelectorAll('.item.error')].pop().textContent,
            })"""
        )
        time.sleep(1.5)  # a reconnect would come within a second
        assert browser.evaluate("document.getElementById('status').textContent") == "stopped"
        browser.call("Page.navigate", url="about:blank")
    assert shown["count"] == 3 and shown["closed"]
    assert shown["error"].startswith("stream error:") and "(seq 3)" in shown["error"]
