"""Control-plane fan-out: 100 SSE clients on one session, 2,000 events, loopback only.

Compared in the same run, against the same server process and the same 100 clients:

* project: a producer process POSTs the events (20 per request, each after the last
  one's response) to the control plane, which stores them (SQLite, the default store,
  ``synchronous=FULL``), encodes each once and fans it out to the 100 SSE clients;
* baseline: a bare Starlette endpoint streams the *same pre-encoded SSE bytes* (the
  frames the control plane sent, 20 events per chunk) to the same 100 clients.

Both sides run in one uvicorn server (one config: its "auto" HTTP parser and loop,
httptools and uvloop when installed, as ``universal-event serve`` gets them), each in
its own Starlette app so each pays for one middleware stack. The clients and the
producer run on uvloop when installed.

Two kinds of client, each against both sides (see :class:`Client`): ones that parse
every event as they read (the issue's figure, ``RATIO server_fanout``; the reading
process is itself a bottleneck there, mostly of the bare rounds) and light ones that
find only the last id per read (``RATIO server_fanout_light_clients``: what the servers
can push). Every client's ids are checked: all, once each, in order.

Throughput = events delivered to all clients per second, from the first POST (or the
baseline's go signal) until the last client holds the last event. Latency = from the
moment the producer sent an event's POST to the moment a client read it. Rounds
alternate; the median round counts. The server's CPU time per round is printed too
(less disturbed by other load on the machine than wall time).
Run: ``python bench/bench_server.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLIENTS = 100
EVENTS = 2_000
BATCH = 20
ROUNDS = 5
TARGET = 0.5
ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- server side


def serve(store_url: str) -> None:
    """The control plane with a bare streaming endpoint beside it (run in a subprocess)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

    from universal_event.server import Limits, create_app
    from universal_event.sse import encode_events, encode_retry
    from universal_event.stores import open_store

    store = open_store(store_url)
    control_plane = create_app(store, tokens=None, limits=Limits(client_buffer_events=100_000))
    state: dict[str, object] = {"chunks": [], "go": asyncio.Event()}

    async def prepare(request: Request) -> Response:
        events = list(store.read(request.query_params["session"]))
        state["chunks"] = [
            encode_events(events[i : i + BATCH]) for i in range(0, len(events), BATCH)
        ]
        state["go"] = asyncio.Event()
        return Response(b"ok")

    async def go(request: Request) -> Response:
        go_event = state["go"]
        assert isinstance(go_event, asyncio.Event)
        go_event.set()
        return Response(b"ok")

    async def bare(request: Request) -> Response:
        go_event, chunks = state["go"], state["chunks"]
        assert isinstance(go_event, asyncio.Event) and isinstance(chunks, list)

        async def stream():  # type: ignore[no-untyped-def]
            yield encode_retry(1000)
            await go_event.wait()
            for chunk in chunks:
                yield chunk

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def stop(request: Request) -> Response:
        server.should_exit = True
        return Response(b"ok")

    bare_app = Starlette(
        routes=[
            Route("/bench/stop", stop, methods=["POST"]),
            Route("/bare/prepare", prepare, methods=["POST"]),
            Route("/bare/go", go, methods=["POST"]),
            Route("/bare/events", bare),
        ]
    )

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        # Each side runs in its own Starlette app, one middleware stack each (mounting
        # the control plane inside the bare app would wrap its every send twice).
        path = scope.get("path", "")
        target = bare_app if path.startswith(("/bare/", "/bench/")) else control_plane
        await target(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(f"serving {sock.getsockname()[1]}", flush=True)
    print(f"server stack (both sides): {_stack()}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", backlog=2048))
    if not os.environ.get("BENCH_PROFILE"):
        server.run(sockets=[sock])
        return
    import cProfile  # BENCH_PROFILE=file: profile the server side

    profiler = cProfile.Profile()
    try:
        profiler.runcall(server.run, sockets=[sock])
    finally:
        profiler.dump_stats(os.environ["BENCH_PROFILE"])


def _stack() -> str:
    """What uvicorn's "auto" picks here: httptools and uvloop when installed."""
    import importlib.util

    import uvicorn

    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return f"uvicorn {uvicorn.__version__}, http={http}, loop={loop}"


# ---------------------------------------------------------------- client side


class Client:
    """A raw HTTP/1.0 SSE reader that notes when each event id arrives.

    Two kinds, run against both sides alike:

    * ``parse_each`` (the issue's figure): finds every ``id:`` line as it reads, Python
      work per event like any client that handles each event. With 100 of them in one
      process this reading side is itself a bottleneck of both rounds, the bare one most.
    * light: finds only the *last* ``id:`` line of each read (ids are consecutive seqs,
      so every id after the previous read's last one came with this read): a few
      C-level searches per read, so the figures are about the servers.

    Either way every id is checked afterwards from all the bytes received.
    """

    def __init__(self, parse_each: bool) -> None:
        self.parse_each = parse_each
        self.reads: list[tuple[int, float]] = []
        """``(last id seen, when)`` per read that brought new ids."""
        self.per_event: dict[int, float] = {}
        self.received: list[bytes] = []
        self.connected = asyncio.Event()

    async def run(self, port: int, path: str, last_seq: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path} HTTP/1.0\r\nHost: bench\r\n\r\n".encode())
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")
        self.connected.set()
        if self.parse_each:
            await self._read_each(reader, last_seq)
        else:
            await self._read_light(reader, last_seq)
        writer.close()

    async def _read_each(self, reader: asyncio.StreamReader, last_seq: int) -> None:
        buffer = b""
        arrivals = self.per_event
        while last_seq not in arrivals:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            now = time.perf_counter()
            self.received.append(chunk)
            buffer += chunk
            start = 0
            while True:
                found = buffer.find(b"\nid: ", start)
                if found == -1:
                    break
                end = buffer.find(b"\n", found + 5)
                if end == -1:
                    break
                arrivals[int(buffer[found + 5 : end])] = now
                start = end
            buffer = buffer[max(start, len(buffer) - 16) :]
        if arrivals:
            self.reads.append((max(arrivals), arrivals[max(arrivals)]))

    async def _read_light(self, reader: asyncio.StreamReader, last_seq: int) -> None:
        last = -1
        carry = b""
        while last < last_seq:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            now = time.perf_counter()
            self.received.append(chunk)
            seen = _last_id(carry + chunk)
            if seen is not None and seen > last:
                last = seen
                self.reads.append((seen, now))
            carry = chunk[-32:]  # an id line cut between two reads

    @property
    def arrivals(self) -> dict[int, float]:
        """When each id arrived (light: every id up to a read's last one came with it)."""
        if self.parse_each:
            return self.per_event
        arrivals: dict[int, float] = {}
        previous = -1
        for last, at in self.reads:
            for seq in range(previous + 1, last + 1):
                arrivals[seq] = at
            previous = last
        return arrivals

    def ids(self) -> list[int]:
        """Every id received, in order, parsed from all the bytes (for the check)."""
        return [int(found) for found in _ID_LINE.findall(b"".join(self.received))]


_ID_LINE = re.compile(rb"\nid: (\d+)\n")


def _last_id(data: bytes) -> int | None:
    """The id of the last complete ``id:`` line in ``data``."""
    end = len(data)
    while (found := data.rfind(b"\nid: ", 0, end)) != -1:
        line_end = data.find(b"\n", found + 5)
        if line_end != -1:
            return int(data[found + 5 : line_end])
        end = found
    return None


async def _connect(
    port: int, path: str, parse_each: bool
) -> tuple[list[Client], list[asyncio.Task[None]]]:
    clients = [Client(parse_each) for _ in range(CLIENTS)]
    tasks = [asyncio.create_task(c.run(port, path, EVENTS - 1)) for c in clients]
    await asyncio.wait_for(asyncio.gather(*(c.connected.wait() for c in clients)), 30)
    await asyncio.sleep(0.3)  # let every subscription settle server-side
    return clients, tasks


class RawHttp:
    """A keep-alive HTTP/1.1 client on one socket: the producer, with no client library
    overhead in the figures."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> RawHttp:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def post(self, path: str, body: bytes = b"") -> bytes:
        head = f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"content-type: application/x-ndjson\r\n\r\n" + body)
        headers = await self.reader.readuntil(b"\r\n\r\n")
        status = headers.split(b" ", 2)[1]
        length = 0
        for line in headers.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        response = await self.reader.readexactly(length)
        if status != b"200":
            raise SystemExit(f"POST {path}: {status.decode()} {response.decode()}")
        return response

    def close(self) -> None:
        self.writer.close()


async def produce(port: int, session: str) -> None:
    """The agent: POSTs the events, 20 a request, one after another (own process).

    Prints the ``time.perf_counter()`` (CLOCK_MONOTONIC, shared by every process on
    Linux) at which each batch was sent, as one JSON list.
    """
    from universal_event.codec import encode_lines
    from universal_event.events import AssistantChunkEvent

    events = [
        AssistantChunkEvent(id=f"{session}-{i}", message_id="m", delta=f"token {i} " * 8)
        for i in range(EVENTS)
    ]
    bodies = [encode_lines(events[i : i + BATCH]) for i in range(0, EVENTS, BATCH)]
    http = await RawHttp.open(port)
    sent: list[float] = []
    for body in bodies:
        sent.append(time.perf_counter())
        await http.post(f"/sessions/{session}/events", body)
    http.close()
    print(json.dumps(sent), flush=True)


async def control_plane_round(
    port: int, session: str, parse_each: bool
) -> tuple[float, list[float]]:
    clients, tasks = await _connect(port, f"/sessions/{session}/events", parse_each)
    producer = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--produce",
        str(port),
        session,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    output, _ = await asyncio.wait_for(producer.communicate(), 60)
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    batch_sent: list[float] = json.loads(output)
    started = batch_sent[0]
    _check_complete(clients)
    finished = max(c.reads[-1][1] for c in clients)
    latencies = [at - batch_sent[seq // BATCH] for c in clients for seq, at in c.arrivals.items()]
    return CLIENTS * EVENTS / (finished - started), latencies


async def bare_round(port: int, session: str, parse_each: bool) -> float:
    http = await RawHttp.open(port)
    await http.post(f"/bare/prepare?session={session}")
    clients, tasks = await _connect(port, "/bare/events", parse_each)
    started = time.perf_counter()
    await http.post("/bare/go")
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    http.close()
    _check_complete(clients)
    finished = max(c.reads[-1][1] for c in clients)
    return CLIENTS * EVENTS / (finished - started)


def _check_complete(clients: list[Client]) -> None:
    for client in clients:
        ids = client.ids()
        if ids != list(range(EVENTS)):
            raise SystemExit(f"a client got {len(ids)} ids, not 0..{EVENTS - 1} once each in order")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    """p50 and p99 in milliseconds."""
    ordered = sorted(latencies)
    return ordered[len(ordered) // 2] * 1000, ordered[int(len(ordered) * 0.99)] * 1000


@dataclass
class Figures:
    """One kind of client's rounds."""

    name: str
    parse_each: bool
    project: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    async def round(self, port: int, server_pid: int, round_number: int) -> None:
        session = f"bench-{'each' if self.parse_each else 'light'}-{round_number}"
        cpu = _cpu_seconds(server_pid)
        rate, latencies = await control_plane_round(port, session, self.parse_each)
        project_cpu = _cpu_seconds(server_pid) - cpu
        self.project.append(rate)
        self.latencies += latencies
        cpu = _cpu_seconds(server_pid)
        self.baseline.append(await bare_round(port, session, self.parse_each))
        baseline_cpu = _cpu_seconds(server_pid) - cpu
        p50, p99 = _percentiles(latencies)
        print(
            f"round {round_number} [{self.name}]: control plane {rate:,.0f} events/s "
            f"(server CPU {project_cpu:.2f}s, p50={p50:.1f}ms p99={p99:.1f}ms), "
            f"bare endpoint {self.baseline[-1]:,.0f} events/s (server CPU {baseline_cpu:.2f}s)"
        )

    def report(self, ratio_name: str) -> None:
        p50, p99 = _percentiles(self.latencies)
        print(
            f"[{self.name}] delivery latency over {len(self.latencies):,} deliveries: "
            f"p50={p50:.1f}ms p99={p99:.1f}ms"
        )
        project_rate = statistics.median(self.project)
        baseline_rate = statistics.median(self.baseline)
        ratio = project_rate / baseline_rate
        print(
            f"RATIO {ratio_name} project={project_rate:.0f}events/s "
            f"baseline={baseline_rate:.0f}events/s ratio={ratio:.2f} target=>={TARGET} "
            f"ok={'yes' if ratio >= TARGET else 'no'}"
        )


async def bench(port: int, server_pid: int) -> None:
    per_event = Figures("clients parse each event", parse_each=True)
    light = Figures("light clients", parse_each=False)
    for round_number in range(ROUNDS):
        for figures in (per_event, light):
            await figures.round(port, server_pid, round_number)
    per_event.report("server_fanout")
    light.report("server_fanout_light_clients")


async def _stop(port: int) -> None:
    http = await RawHttp.open(port)
    await http.post("/bench/stop")
    http.close()


def _harness_loop() -> str:
    return "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"


def _run(main: Coroutine[Any, Any, None]) -> None:
    """The harness (clients, producer) on uvloop when installed: the cheaper the
    measuring side, the more the figures are about the server (and the bare endpoint,
    bound by its clients, gains from it more than the control plane)."""
    if _harness_loop() == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main)
    else:
        asyncio.run(main)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--produce":
        _run(produce(int(sys.argv[2]), sys.argv[3]))
        return
    with tempfile.TemporaryDirectory() as directory:
        store_url = os.environ.get("BENCH_STORE") or f"sqlite:///{directory}/bench.db"
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", store_url],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline().split()[1])
            print(server.stdout.readline().strip())
            print(f"{CLIENTS} SSE clients, {EVENTS} events in POSTs of {BATCH}, {ROUNDS} rounds")
            print(f"clients and producer (both sides): loop={_harness_loop()}")
            _run(bench(port, server.pid))
            _run(_stop(port))
            server.wait(10)
        finally:
            if server.poll() is None:
                server.terminate()
                server.wait(10)


if __name__ == "__main__":
    main()
