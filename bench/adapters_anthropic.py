"""Benchmark: normalising an Anthropic Messages stream (raw SSE bytes and SDK objects).

Two figures, both measured against the anthropic SDK in the same process, alternating
rounds (best of N with the GC paused while timing, as ``timeit`` does, so scheduler noise on
a shared machine counts against no one):

* ``anthropic_sse_fast_path``: the raw SSE bytes of a 2,000-event stream → Universal
  Events → encoded JSON-lines log bytes, vs the SDK's own
  ``client.messages.create(stream=True)`` iteration of the same bytes over an
  ``httpx2.MockTransport`` (no network). Target: at least 5x faster.
* ``anthropic_typed_overhead``: the SDK iteration *plus* feeding every typed event to
  the adapter, vs the SDK iteration alone. Target: at most 1.2x (<= 20% added).

Run: ``python -m bench.adapters_anthropic`` (or call :func:`main`).
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable

import anthropic
import httpx2

from adapters.anthropic import AnthropicAdapter
from universal_event.codec import encode_lines

EVENTS = 2000
ROUNDS = 15


def build_stream(events: int = EVENTS) -> bytes:
    """A realistic stream: thinking, text and a tool call, ``events`` SSE events in all."""
    frames: list[tuple[str, dict[str, object]]] = []
    frames.append(
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_01bench",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 1200,
                        "cache_read_input_tokens": 800,
                        "output_tokens": 1,
                    },
                },
            },
        )
    )
    fixed = 1 + 3 * 3 + 2  # message_start; per block start, stop, signature|ping; delta, stop
    per_block = (events - fixed) // 3
    blocks = [
        (
            "thinking",
            {"type": "thinking", "thinking": "", "signature": ""},
            "thinking_delta",
            "thinking",
        ),
        ("text", {"type": "text", "text": ""}, "text_delta", "text"),
        (
            "tool_use",
            {"type": "tool_use", "id": "toolu_01bench", "name": "search", "input": {}},
            "input_json_delta",
            "partial_json",
        ),
    ]
    for index, (kind, start, delta_type, field) in enumerate(blocks):
        frames.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        count = per_block if index < 2 else events - fixed - 2 * per_block
        if kind == "tool_use":
            pieces = ['{"q": "'] + ["word " for _ in range(count - 2)] + ['"}']
        else:
            pieces = [f"token {n} " for n in range(count)]
        for piece in pieces:
            frames.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": delta_type, field: piece},
                    },
                )
            )
        if kind == "thinking":
            frames.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": "Eq" + "A" * 300},
                    },
                )
            )
        else:
            frames.append(("ping", {"type": "ping"}))
        frames.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    frames.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 1500},
            },
        )
    )
    frames.append(("message_stop", {"type": "message_stop"}))
    assert len(frames) == events, len(frames)
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
        for name, data in frames
    )


def _client(body: bytes) -> anthropic.Anthropic:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    return anthropic.Anthropic(
        api_key="bench",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def _best(function: Callable[[], object], rounds: int) -> float:
    """Best wall time; the garbage collector paused while timing (as ``timeit`` does),
    for the project and the baseline alike."""
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            function()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def main() -> None:
    body = build_stream()
    client = _client(body)
    kwargs = {"model": "claude-sonnet-4-6", "max_tokens": 2048, "messages": []}

    def sdk_iteration() -> int:
        return sum(1 for _ in client.messages.create(**kwargs, stream=True))  # type: ignore[call-overload]

    def sdk_plus_adapter() -> int:
        adapter = AnthropicAdapter()
        count = 0
        for event in client.messages.create(**kwargs, stream=True):  # type: ignore[call-overload]
            count += len(adapter.feed(event))
        return count + len(adapter.close())

    def fast_path() -> int:
        adapter = AnthropicAdapter()
        events = adapter.feed(body)
        events += adapter.close()
        return len(encode_lines(events))

    # Sanity: every path sees the whole stream.
    assert sdk_iteration() == EVENTS - 2  # the SDK swallows the two pings
    produced = AnthropicAdapter().feed(body)
    assert sum(1 for e in produced if e.__struct_config__.tag == "assistant/message") == 1

    sdk, sdk_typed, fast = [], [], []
    for _ in range(ROUNDS):  # alternate so load spikes hit both sides
        sdk.append(_best(sdk_iteration, 1))
        fast.append(_best(fast_path, 1))
        sdk_typed.append(_best(sdk_plus_adapter, 1))
    sdk_s, fast_s, typed_s = min(sdk), min(fast), min(sdk_typed)
    speedup = sdk_s / fast_s
    overhead = typed_s / sdk_s
    print(f"# {EVENTS} SSE events, {len(body)} bytes, best of {ROUNDS} rounds")
    print(
        f"RATIO anthropic_sse_fast_path project={fast_s * 1e3:.2f}ms baseline={sdk_s * 1e3:.2f}ms "
        f"ratio={speedup:.2f}x target=>=5x ok={'yes' if speedup >= 5 else 'no'}"
    )
    print(
        f"RATIO anthropic_typed_overhead project={typed_s * 1e3:.2f}ms baseline={sdk_s * 1e3:.2f}ms "
        f"ratio={overhead:.2f}x target=<=1.2x ok={'yes' if overhead <= 1.2 else 'no'}"
    )


if __name__ == "__main__":
    main()
