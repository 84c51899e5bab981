"""Session log: incremental derive, full derive vs decode, derived-cache memory.

A 100k-event session (10k turns, each with a tool call, a tool result and a final
answer, plus usage and streamed chunks). Three ratios, all from one run:

* ``derive_incremental``: one append + ``derive_messages()`` on the live log, against a
  full from-scratch derive of the session (target: at most 1%);
* ``derive_full_vs_decode``: a full derive of the session's events against msgspec
  decoding the same events from JSON lines (target: at most 2x);
* ``derive_cache_memory``: bytes allocated by the derived cache (surface, keys,
  messages) against the encoded bytes of the surface events (target: at most 1.5x).

    python bench/bench_log.py [--turns N] [--rounds R]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ratio import best_of

from universal_event import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    Event,
    Provenance,
    SessionLog,
    TextPart,
    ToolCallEvent,
    ToolCallPart,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    Usage,
    UsageEvent,
    UserMessageEvent,
    decode_lines,
    derive_messages,
    encode,
    encode_lines,
)
from universal_event.derive import SurfaceView, is_surface_event

PROVENANCE = Provenance(provider="anthropic", api="messages", model="claude-sonnet-4-6")


def turn_events(turn: int) -> list[Event]:
    """Ten events: a realistic tool-using turn."""
    turn_id = f"turn_{turn}"
    call_id = f"toolu_{turn:08d}"
    return [
        TurnStartEvent(turn_id=turn_id),
        UserMessageEvent(
            turn_id=turn_id, content=[TextPart(text=f"Please look at file {turn}.py and fix it")]
        ),
        AssistantMessageEvent(
            turn_id=turn_id,
            content=[
                TextPart(text="Let me read the file first."),
                ToolCallPart(id=call_id, name="read_file", arguments={"path": f"src/{turn}.py"}),
            ],
            provenance=PROVENANCE,
            message_id=f"msg_{turn}_a",
            stop_reason="tool_use",
        ),
        ToolCallEvent(turn_id=turn_id, call_id=call_id, name="read_file"),
        ToolResultEvent(
            turn_id=turn_id,
            call_id=call_id,
            name="read_file",
            content=[TextPart(text=f"def f{turn}(x):\n    return x + {turn}\n" * 3)],
        ),
        AssistantChunkEvent(turn_id=turn_id, message_id=f"msg_{turn}_b", delta="The file "),
        AssistantChunkEvent(turn_id=turn_id, message_id=f"msg_{turn}_b", delta="looks fine."),
        AssistantMessageEvent(
            turn_id=turn_id,
            content=[TextPart(text="The file looks fine.")],
            provenance=PROVENANCE,
            message_id=f"msg_{turn}_b",
            stop_reason="end_turn",
        ),
        UsageEvent(turn_id=turn_id, usage=Usage(input_tokens=1200 + turn, output_tokens=40)),
        TurnEndEvent(turn_id=turn_id),
    ]


def build_log(turns: int) -> SessionLog:
    log = SessionLog(session_id="bench")
    for turn in range(turns):
        log.extend(turn_events(turn))
    return log


def line(name: str, project: float, baseline: float, unit: str, target: float) -> str:
    """A RATIO line where ratio = project / baseline and lower is better."""
    ratio = project / baseline if baseline else float("inf")
    return (
        f"RATIO {name} project={project:.4g}{unit} baseline={baseline:.4g}{unit} "
        f"ratio={ratio:.4f} target=<={target} ok={'yes' if ratio <= target else 'no'}"
    )


def cache_bytes(events: list[Event]) -> int:
    """Bytes the derived cache allocates while taking in ``events``."""
    view = SurfaceView()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for event in events:
            if isinstance(event, UserMessageEvent | AssistantMessageEvent | ToolResultEvent):
                view.apply(event)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(view) > 0
    return after - before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--appends", type=int, default=500)
    args = parser.parse_args()

    started = time.perf_counter()
    log = build_log(args.turns)
    events = log.events()
    encoded = encode_lines(events)
    print(
        f"session: {len(events)} events, {len(log.derive_messages())} surface messages, "
        f"{len(encoded) / 1e6:.1f} MB JSON lines (built in {time.perf_counter() - started:.1f}s)"
    )

    # 1. incremental derive after one append vs a full derive
    extra = [
        UserMessageEvent(content=[TextPart(text=f"follow-up {i}")]) for i in range(args.appends)
    ]

    def append_and_derive() -> None:
        for event in extra:
            log.append(event)
            log.derive_messages()

    full_time, decode_time = best_of(
        args.rounds, lambda: derive_messages(events), lambda: decode_lines(encoded)
    )
    start = time.perf_counter()
    append_and_derive()
    incremental_time = (time.perf_counter() - start) / args.appends
    assert derive_messages(log.events()) == log.derive_messages()
    print(line("derive_incremental", incremental_time * 1e3, full_time * 1e3, "ms", 0.01))

    # 2. full derive vs msgspec decode of the same events
    print(line("derive_full_vs_decode", full_time * 1e3, decode_time * 1e3, "ms", 2.0))

    # 3. derived-cache memory vs encoded bytes of the surface events
    surface = [e for e in events if is_surface_event(e)]
    surface_bytes = sum(len(encode(e)) for e in surface)
    memory = min(cache_bytes(surface) for _ in range(2))
    print(line("derive_cache_memory", memory / 1e6, surface_bytes / 1e6, "MB", 1.5))


if __name__ == "__main__":
    main()
