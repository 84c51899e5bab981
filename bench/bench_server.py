"""Control-plane fan-out: 100 SSE clients on one session, 2,000 events, loopback only.

Compared in the same run, against the same server process and the same 100 clients:

* project: a producer process POSTs the events (20 per request, each after the last
  one's response) to the control plane, which
  stores them (SQLite, the default store), encodes each once and fans it out to the
  100 SSE clients;
* baseline: a bare Starlette endpoint streams the *same pre-encoded SSE bytes* (the
  frames the control plane sent, 20 events per chunk) to the same 100 clients.

Throughput = events delivered to all clients per second, from the first POST (or the
baseline's go signal) until the last client holds the last event. Latency = from the
moment the producer sent an event's POST to the moment a client read it. Rounds
alternate; the median round counts. Run: ``python bench/bench_server.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLIENTS = 100
EVENTS = 2_000
BATCH = 20
ROUNDS = 3
TARGET = 0.5
ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- server side


def serve(store_url: str) -> None:
    """The control plane with a bare streaming endpoint beside it (run in a subprocess)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Mount, Route

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

    app = Starlette(
        routes=[
            Route("/bench/stop", stop, methods=["POST"]),
            Route("/bare/prepare", prepare, methods=["POST"]),
            Route("/bare/go", go, methods=["POST"]),
            Route("/bare/events", bare),
            Mount("/", app=control_plane),
        ]
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    print(f"serving {sock.getsockname()[1]}", flush=True)
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


# ---------------------------------------------------------------- client side


class Client:
    """A raw HTTP/1.0 SSE reader that notes when each event id arrives."""

    def __init__(self) -> None:
        self.arrivals: dict[int, float] = {}
        self.done = asyncio.Event()
        self.connected = asyncio.Event()

    async def run(self, port: int, path: str, last_seq: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path} HTTP/1.0\r\nHost: bench\r\n\r\n".encode())
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")
        self.connected.set()
        buffer = b""
        arrivals = self.arrivals
        while last_seq not in arrivals:
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            now = time.perf_counter()
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
        writer.close()
        self.done.set()


async def _connect(port: int, path: str) -> tuple[list[Client], list[asyncio.Task[None]]]:
    clients = [Client() for _ in range(CLIENTS)]
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


async def control_plane_round(port: int, session: str) -> tuple[float, list[float]]:
    clients, tasks = await _connect(port, f"/sessions/{session}/events")
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
    finished = max(c.arrivals[EVENTS - 1] for c in clients)
    _check_complete(clients)
    latencies = [at - batch_sent[seq // BATCH] for c in clients for seq, at in c.arrivals.items()]
    return CLIENTS * EVENTS / (finished - started), latencies


async def bare_round(port: int, session: str) -> float:
    http = await RawHttp.open(port)
    await http.post(f"/bare/prepare?session={session}")
    clients, tasks = await _connect(port, "/bare/events")
    started = time.perf_counter()
    await http.post("/bare/go")
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    http.close()
    finished = max(c.arrivals[EVENTS - 1] for c in clients)
    _check_complete(clients)
    return CLIENTS * EVENTS / (finished - started)


def _check_complete(clients: list[Client]) -> None:
    for client in clients:
        if sorted(client.arrivals) != list(range(EVENTS)):
            raise SystemExit(f"a client missed events: {len(client.arrivals)} of {EVENTS}")


async def bench(port: int) -> None:
    project: list[float] = []
    baseline: list[float] = []
    latencies: list[float] = []
    for round_number in range(ROUNDS):
        session = f"bench-{round_number}"
        rate, round_latencies = await control_plane_round(port, session)
        project.append(rate)
        latencies += round_latencies
        baseline.append(await bare_round(port, session))
        print(
            f"round {round_number}: control plane {rate:,.0f} events/s, "
            f"bare endpoint {baseline[-1]:,.0f} events/s"
        )
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    print(f"delivery latency over {len(latencies):,} deliveries: p50={p50:.1f}ms p99={p99:.1f}ms")
    project_rate = statistics.median(project)
    baseline_rate = statistics.median(baseline)
    ratio = project_rate / baseline_rate
    print(
        f"RATIO server_fanout project={project_rate:.0f}events/s "
        f"baseline={baseline_rate:.0f}events/s ratio={ratio:.2f} target=>={TARGET} "
        f"ok={'yes' if ratio >= TARGET else 'no'}"
    )


async def _stop(port: int) -> None:
    http = await RawHttp.open(port)
    await http.post("/bench/stop")
    http.close()


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--produce":
        asyncio.run(produce(int(sys.argv[2]), sys.argv[3]))
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
            print(f"{CLIENTS} SSE clients, {EVENTS} events in POSTs of {BATCH}, {ROUNDS} rounds")
            asyncio.run(bench(port))
            asyncio.run(_stop(port))
            server.wait(10)
        finally:
            if server.poll() is None:
                server.terminate()
                server.wait(10)


if __name__ == "__main__":
    main()
