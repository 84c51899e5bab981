"""Writer processes for the reliability tests: forked children that append and report.

A child is an ``os.fork()`` of the test process (no new interpreter: ~ms per trial). It
opens its own store from a URL, appends, and writes every acknowledged seq to a pipe as
an 8-byte record, *after* ``append`` returned. It never returns into pytest: it ends
with ``os._exit``.
"""

from __future__ import annotations

import os
import random
import select
import signal
import struct
import time
import traceback
from collections.abc import Callable
from typing import Any

import msgspec

from universal_event.errors import ConflictError
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    SessionStartEvent,
    Source,
    StepEndEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)
from universal_event.parts import TextPart, ToolCallPart
from universal_event.stores import open_store
from universal_event.testing import sample_events

_RECORD = struct.Struct("<q")
_CYCLE = 8
"""A turn is 8 events: turn/start, user, step/start, assistant (tool call),
tool/call, tool/result, step/end, turn/end."""


def scripted_event(session_id: str, seq: int) -> Event:
    """The event a writer puts at ``seq``: turns with tool calls, some results large.

    Deterministic, so a reader can tell a stored event is whole and in its place.
    """
    envelope: dict[str, Any] = {
        "seq": seq,
        "id": f"{session_id}/{seq}",
        "session_id": session_id,
        "ts": 1_700_000_000.0 + seq,
        "source": Source(runtime="anthropic"),
    }
    if seq == 0:
        return SessionStartEvent(**envelope, runtime="anthropic")
    turn, position = divmod(seq - 1, _CYCLE)
    envelope["turn_id"] = f"turn-{turn}"
    call_id = f"call_{turn}"
    if position == 0:
        return TurnStartEvent(**envelope)
    if position == 1:
        return UserMessageEvent(**envelope, content=[TextPart(text=f"do task {turn}")])
    if position == 2:
        return StepStartEvent(**envelope, step=0)
    if position == 3:
        return AssistantMessageEvent(
            **envelope,
            content=[ToolCallPart(id=call_id, name="bash", arguments={"cmd": f"echo {turn}"})],
        )
    if position == 4:
        return ToolCallEvent(**envelope, call_id=call_id, name="bash")
    if position == 5:
        # Every third result is 256 KB: a write long enough for a kill to land inside.
        size = 256 * 1024 if turn % 3 == 0 else 40
        text = (f"output of turn {turn} ✓ " * (size // 20 + 1))[:size]
        return ToolResultEvent(**envelope, call_id=call_id, content=[TextPart(text=text)])
    if position == 6:
        return StepEndEvent(**envelope, step=0)
    return TurnEndEvent(**envelope)


def fork_child(body: Callable[[], None]) -> int:
    """Run ``body`` in a forked child that always ends with ``os._exit``."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 0
        try:
            body()
        except BaseException:
            traceback.print_exc()
            code = 3
        finally:
            os._exit(code)
    return pid


def append_forever(url: str, options: dict[str, Any], session_id: str, ack: int, seed: int) -> None:
    """Child body: append scripted batches of 1-8 events forever, acking each."""
    store = open_store(url, **options)
    rng = random.Random(seed)
    seq = store.latest_seq(session_id) + 1
    while True:
        size = rng.choice((1, 1, 2, 3, 5, 8))
        store.append(
            session_id,
            [scripted_event(session_id, s) for s in range(seq, seq + size)],
            expected_seq=seq,
        )
        seq += size
        os.write(ack, _RECORD.pack(seq - 1))


def append_racing(
    url: str,
    options: dict[str, Any],
    session_id: str,
    writer: int,
    batches: int,
    go: int,
    report: int,
) -> None:
    """Child body: wait for the start signal, then append ``batches`` batches, retrying
    on conflict; report the number of conflicts met."""
    store = open_store(url, **options)
    rng = random.Random(writer)
    os.read(go, 1)
    conflicts = 0
    for batch in range(batches):
        while True:
            seq = store.latest_seq(session_id) + 1
            time.sleep(rng.uniform(0, 0.002))  # a writer's think time widens the race
            events = [
                msgspec.structs.replace(event, id=f"w{writer}-b{batch}-{index}")
                for index, event in enumerate(sample_events(session_id, seq, 3))
            ]
            try:
                store.append(session_id, events, expected_seq=seq)
                break
            except ConflictError:
                conflicts += 1
    os.write(report, _RECORD.pack(conflicts))
    store.close()


class AckReader:
    """Reads the 8-byte records a child writes to a pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.values: list[int] = []

    def wait_for(self, count: int, timeout: float) -> None:
        """Block until ``count`` records arrived (or EOF / timeout)."""
        deadline = time.monotonic() + timeout
        while len(self.values) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]:
                raise TimeoutError(f"only {len(self.values)} of {count} records in {timeout} s")
            if not self._read_some():
                return

    def drain(self) -> None:
        """Read everything left (the writer is dead: the pipe ends)."""
        while self._read_some():
            pass

    def _read_some(self) -> bool:
        chunk = os.read(self.fd, 65536)
        if not chunk:
            return False
        self.buffer += chunk
        whole = len(self.buffer) - len(self.buffer) % _RECORD.size
        self.values += [v for (v,) in _RECORD.iter_unpack(self.buffer[:whole])]
        self.buffer = self.buffer[whole:]
        return True


def kill_hard(pid: int) -> int:
    """SIGKILL a child and reap it; return its wait status."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, status = os.waitpid(pid, 0)
    return status
