"""Crash safety and concurrent writers on the durable backends (jsonl, sqlite, postgresql).

Every trial is a real process: an ``os.fork()`` of this one, killed with SIGKILL.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from universal_event.events import SessionEndedSeqEvent
from universal_event.repair import find_open_work, repair
from universal_event.stores import Store, open_store

from ._writers import (
    AckReader,
    append_forever,
    append_racing,
    fork_child,
    kill_hard,
    scripted_event,
)
from .conftest import POSTGRES_URL, RUN_TAG, StoreKit, make_kit

KILL_TRIALS = 200


def _child_options(backend: str) -> dict[str, Any]:
    """Small pools in children: one connection is all a writer needs."""
    return {"min_size": 1, "max_size": 1} if backend == "postgresql" else {}


def test_kill_9_writer_at_random_points(durable_kit: StoreKit) -> None:
    """Kill a writer at random points; acknowledged events survive, nothing torn or
    duplicated, seqs contiguous; repair then closes the session cleanly."""
    rng = random.Random(4242)
    first = durable_kit.make()
    url = durable_kit.url_of(first)
    first.close()
    stats = {"unacked_present": 0, "torn_tails": 0, "repaired": 0, "killed_before_open": 0}
    for trial in range(KILL_TRIALS):
        session = f"kill-{trial}"
        writer_url = url
        if durable_kit.backend == "postgresql":
            writer_url = f"{url}&application_name=ue-kill-{RUN_TAG}-{trial}"
        read_fd, write_fd = os.pipe()
        pid = fork_child(
            lambda s=session, w=write_fd, t=trial, u=writer_url: append_forever(
                u, _child_options(durable_kit.backend), s, w, seed=t
            )
        )
        os.close(write_fd)
        acks = AckReader(read_fd)
        try:
            # Anywhere in a writer's first ~40 batches: before its first append, between
            # appends, inside one (writing, syncing), with a session of some length.
            acks.wait_for(rng.randint(0, 40), timeout=20)
            time.sleep(rng.uniform(0, 0.004))
        finally:
            status = kill_hard(pid)
            acks.drain()
            os.close(read_fd)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (
            f"trial {trial}: the writer died on its own (status {status}) before the kill"
        )
        acked = max(acks.values, default=-1)
        if durable_kit.backend == "postgresql":
            _wait_for_backends_to_end(f"ue-kill-{RUN_TAG}-{trial}")
        if durable_kit.backend == "jsonl":
            stats["torn_tails"] += _has_torn_tail(url, session)
        store = open_store(url)
        try:
            _check_after_kill(store, session, acked, trial, stats)
        finally:
            store.close()
    print(f"\n{durable_kit.backend}: {KILL_TRIALS} kills, {stats}")


def _check_after_kill(
    store: Store, session: str, acked: int, trial: int, stats: dict[str, int]
) -> None:
    latest = store.latest_seq(session)
    assert latest >= acked, f"trial {trial}: acked seq {acked} lost (store at {latest})"
    stats["unacked_present"] += latest > acked
    stored = list(store.read(session))
    assert [e.seq for e in stored] == list(range(latest + 1)), f"trial {trial}: seq gap"
    for event in stored:
        assert event == scripted_event(session, event.seq), f"trial {trial}: seq {event.seq}"
    if latest < 0:
        stats["killed_before_open"] += 1
        return
    added = repair(store, session)
    repaired = list(store.read(session))
    assert not find_open_work(repaired), f"trial {trial}: repair left work open"
    if added:
        stats["repaired"] += 1
        last = repaired[-1]
        assert isinstance(last, SessionEndedSeqEvent) and last.last_seq == latest
        assert repaired[: latest + 1] == stored, "repair changed what was there"
        assert [e.seq for e in repaired] == list(range(len(repaired)))
    assert repair(store, session) == [], "a second repair added events"


def _wait_for_backends_to_end(application_name: str) -> None:
    """Wait until the killed writer's server backends are gone.

    Quirk of client-server databases: SIGKILL ends the client, not its server backend.
    A COMMIT the client sent just before dying still completes afterwards, so the
    session can grow once more after the kill. It is still contiguous and whole; but
    repair must only run once the writer is really gone, which for PostgreSQL means its
    backend has ended (a control plane would use a lease or pg_stat_activity likewise).
    """
    import psycopg

    deadline = time.monotonic() + 10
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (application_name,),
            ).fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.002)
    raise AssertionError(f"backend of {application_name} still alive 10 s after the kill")


def _has_torn_tail(url: str, session: str) -> bool:
    """Does the session file end mid-line after the kill? If so: opening the store and
    reading leave the file as it is, and the next write (an empty append, which still
    takes the lock and checks the end) cuts exactly the torn line."""
    from urllib.parse import quote

    path = os.path.join(url.removeprefix("jsonl://"), quote(session, safe="") + ".jsonl")
    try:
        with open(path, "rb") as handle:
            before = handle.read()
    except FileNotFoundError:
        return False
    if before.endswith(b"\n") or not before:
        return False
    store = open_store(url)
    try:
        latest = store.latest_seq(session)
        assert [e.seq for e in store.read(session)] == list(range(latest + 1))
        with open(path, "rb") as handle:
            assert handle.read() == before, "opening or reading the store changed the file"
        store.append(session, [], expected_seq=latest + 1)
    finally:
        store.close()
    with open(path, "rb") as handle:
        after = handle.read()
    assert after == before[: before.rfind(b"\n") + 1], "the next write did not cut the torn line"
    return True


def test_two_processes_append_to_one_session(durable_kit: StoreKit) -> None:
    """Two writer processes at once: no gap, no duplicate; losers retry after a conflict."""
    store = durable_kit.make()
    url = durable_kit.url_of(store)
    session, batches = "race", 60
    go_read, go_write = os.pipe()
    report_read, report_write = os.pipe()
    pids = [
        fork_child(
            lambda w=writer: append_racing(
                url,
                _child_options(durable_kit.backend),
                session,
                w,
                batches,
                go_read,
                report_write,
            )
        )
        for writer in range(2)
    ]
    os.close(report_write)
    reports = AckReader(report_read)
    try:
        os.write(go_write, b"gg")
        reports.wait_for(2, timeout=60)
    finally:
        statuses = [os.waitpid(pid, 0)[1] for pid in pids]
        for fd in (go_read, go_write, report_read):
            os.close(fd)
    assert statuses == [0, 0], f"a writer failed: {statuses}"
    stored = list(store.read(session))
    assert [e.seq for e in stored] == list(range(2 * batches * 3)), "gap or duplicate seq"
    ids = [e.id for e in stored]
    expected_ids = {f"w{w}-b{b}-{i}" for w in range(2) for b in range(batches) for i in range(3)}
    assert sorted(ids) == sorted(expected_ids), "a batch is missing or stored twice"
    for start in range(0, len(ids), 3):
        writers_in_batch = {event_id.split("-")[0] for event_id in ids[start : start + 3]}
        assert len(writers_in_batch) == 1, f"batches interleaved at seq {start}"
    assert sum(reports.values) > 0, "the writers never collided; the test proves nothing"
    store.close()


def test_tail_wakes_on_another_process_append(durable_kit: StoreKit) -> None:
    """A tail in this process wakes when another process appends (PG: LISTEN/NOTIFY,
    with polling slowed to 30 s so only a notification can explain a quick wake)."""
    options: dict[str, Any] = {"poll_interval": 30.0} if durable_kit.backend == "postgresql" else {}
    store = durable_kit.make()
    url = durable_kit.url_of(store)
    store.close()
    tailer = open_store(url, **options)
    session = "tailed"
    tailer.append(session, [scripted_event(session, 0)], expected_seq=0)

    def append_soon() -> None:
        writer = open_store(url, **_child_options(durable_kit.backend))
        time.sleep(0.3)
        writer.append(session, [scripted_event(session, 1)], expected_seq=1)
        writer.close()

    assert tailer.tail(session, 0, timeout=0.05) == []
    pid = fork_child(append_soon)
    started = time.monotonic()
    woke = tailer.tail(session, 0, timeout=20)
    waited = time.monotonic() - started
    _, status = os.waitpid(pid, 0)
    assert status == 0
    assert [e.seq for e in woke] == [1]
    assert waited < 5, f"tail woke after {waited:.1f} s"
    tailer.close()


def test_postgres_listen_thread_stops_on_close(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = make_kit("postgresql", request, tmp_path).make()
    assert store.tail("nobody", -1, timeout=0.05) == []
    listener = store._listener  # type: ignore[attr-defined]
    assert listener is not None and listener.is_alive()
    store.close()
    assert not listener.is_alive()
