"""The control plane as real processes: a restart mid-stream, and two servers on one
PostgreSQL (scale-out). Servers are ``universal-event serve`` subprocesses on
ephemeral loopback ports."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.transport._support import ResumingClient, post_events, serve_process, user_events
from universal_event.stores import open_store

POSTGRES_URL = os.environ.get(
    "UNIVERSAL_EVENT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
TOKEN = "process-test-token-0123456789"
TOKEN_ENV = {"UNIVERSAL_EVENT_TOKENS": f"{TOKEN} * read,write"}
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _follow_in_thread(
    clients: list[ResumingClient], until_seq: int, timeout: float
) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    async def watch() -> None:
        async with httpx.AsyncClient(timeout=httpx.Timeout(20, connect=2)) as client:
            deadline = time.monotonic() + timeout
            await asyncio.gather(*(c.run(client, until_seq, deadline) for c in clients))

    def run() -> None:
        try:
            asyncio.run(watch())
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def test_server_restart_mid_stream_clients_resume_exactly(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'sessions.db'}"
    clients = [
        ResumingClient("", "r", rng=random.Random(seed), disconnects=0, headers=AUTH)
        for seed in range(5)
    ]
    first = user_events(120, prefix="before")
    second = user_events(120, prefix="after")
    with httpx.Client(timeout=10, headers=AUTH) as http:
        with serve_process(store_url, env=TOKEN_ENV) as (process, base):
            port = int(base.rsplit(":", 1)[1])
            for client in clients:
                client.url = f"{base}/sessions/r/events"
            watcher, errors = _follow_in_thread(clients, 239, timeout=40)
            for index in range(0, 120, 10):
                post_events(http, base, "r", first[index : index + 10])
                time.sleep(0.01)
            deadline = time.monotonic() + 10
            while min(len(c.received) for c in clients) < 60 and time.monotonic() < deadline:
                time.sleep(0.02)
            process.send_signal(signal.SIGKILL)  # a crash, mid-stream
            process.wait(10)
        with serve_process(store_url, port=port, env=TOKEN_ENV) as (_, base_again):
            assert base_again == base
            # the producer retries its last batch after the crash: adds nothing
            retry = post_events(http, base, "r", first[110:120])
            assert retry.json() == {"appended": 0, "duplicates": 10}
            for index in range(0, 120, 10):
                post_events(http, base, "r", second[index : index + 10])
            watcher.join(40)
    assert not errors, errors
    store = open_store(store_url)
    try:
        expected = [(event.seq, event.id) for event in store.read("r")]
    finally:
        store.close()
    assert [seq for seq, _ in expected] == list(range(240))
    for client in clients:
        assert client.received == expected
        assert client.connections >= 2  # the crash cut every stream; each resumed


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A unique schema per run on the test database; dropped afterwards."""
    try:
        import psycopg

        connection = psycopg.connect(POSTGRES_URL, connect_timeout=3, autocommit=True)
    except Exception as exc:
        if os.environ.get("UNIVERSAL_EVENT_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL required but unreachable at {POSTGRES_URL}: {exc}")
        pytest.skip(f"PostgreSQL unreachable at {POSTGRES_URL}: {exc}")
    schema = f"ue_transport_{uuid.uuid4().hex[:10]}"
    separator = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{separator}schema={schema}"
    finally:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        connection.close()


def test_two_server_processes_on_one_postgres_fan_out_in_order(postgres_url: str) -> None:
    total_per_producer = 150
    with (
        serve_process(postgres_url, env=TOKEN_ENV) as (_, base_a),
        serve_process(postgres_url, env=TOKEN_ENV) as (_, base_b),
    ):
        rng = random.Random(99)
        on_b = [
            ResumingClient(
                base_b, "pg", rng=random.Random(rng.random()), disconnects=2, headers=AUTH
            )
            for _ in range(6)
        ]
        on_a = [
            ResumingClient(
                base_a, "pg", rng=random.Random(rng.random()), disconnects=1, headers=AUTH
            )
            for _ in range(2)
        ]
        last = 2 * total_per_producer - 1
        watcher, errors = _follow_in_thread(on_a + on_b, last, timeout=40)

        def produce(base: str, prefix: str) -> None:
            events = user_events(total_per_producer, prefix=prefix)
            batch_rng = random.Random(prefix)
            with httpx.Client(timeout=10, headers=AUTH) as http:
                position = 0
                while position < total_per_producer:
                    batch = events[position : position + batch_rng.randint(1, 12)]
                    assert post_events(http, base, "pg", batch).status_code == 200
                    position += len(batch)
                    time.sleep(batch_rng.random() * 0.01)
                # a retried POST through the *other* process adds nothing either
                other = base_b if base == base_a else base_a
                assert post_events(http, other, "pg", events[-5:]).json()["appended"] == 0

        # Producers write through A and through B at once: appends conflict and retry.
        producers = [
            threading.Thread(target=produce, args=(base_a, "via-a")),
            threading.Thread(target=produce, args=(base_b, "via-b")),
        ]
        for producer in producers:
            producer.start()
        for producer in producers:
            producer.join(30)
        watcher.join(40)
    assert not errors, errors
    store = open_store(postgres_url)
    try:
        expected = [(event.seq, event.id) for event in store.read("pg")]
    finally:
        store.close()
    assert [seq for seq, _ in expected] == list(range(2 * total_per_producer))
    # each producer's events stay in the order it sent them
    for prefix in ("via-a", "via-b"):
        ids = [event_id for _, event_id in expected if event_id.startswith(prefix)]
        assert ids == [f"{prefix}-{index}" for index in range(total_per_producer)]
    for client in on_a + on_b:
        assert client.received == expected
