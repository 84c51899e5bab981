"""OpenAI Chat: raw SSE bytes of a 2,000-event stream → events + encoded log bytes,
against the openai SDK's own ``client.chat.completions.create(stream=True)`` iteration
of the same bytes over a mock transport (no network), in the same run.

The stream copies the shape of the recorded 2025 chunks (``obfuscation``,
``service_tier``, ``usage: null`` on every chunk): a role chunk, 1,500 text deltas,
a tool call in 495 argument fragments, the finish chunk, the usage chunk, ``[DONE]``.
The project side feeds the bytes in 4 KiB pieces (a network read's size) and encodes
every event as a JSON line, i.e. what the log would store.

    python bench/adapters_openai_chat.py        (or via bench/bench_adapters.py)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import httpx2  # noqa: E402
import openai  # noqa: E402
from _ratio import best_of, ratio_line  # noqa: E402

from adapters.openai_chat import OpenAIChatAdapter  # noqa: E402
from universal_event.codec import encode_lines  # noqa: E402

TEXT_DELTAS = 1_500
ARGUMENT_FRAGMENTS = 495
PIECE = 4096


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "chatcmpl-C2QD1kGWsTW5OWiqAtOSFEAOfPfQH",
        "object": "chat.completion.chunk",
        "created": 1754693439,
        "model": "gpt-4o-2024-08-06",
        "service_tier": "default",
        "system_fingerprint": "fp_07871e2ad8",
        "usage": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "obfuscation": "3Y6yaTIPlXV",
    }


def build_stream() -> tuple[bytes, int]:
    """The SSE body and its number of SSE events."""
    chunks: list[dict[str, object]] = [_chunk({"role": "assistant", "content": ""})]
    chunks += [_chunk({"content": f" word{index}"}) for index in range(TEXT_DELTAS)]
    first = {
        "index": 0,
        "id": "call_q2UyBRP7eXNTzAoR8lEhjc9Z",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    chunks.append(_chunk({"tool_calls": [first]}))
    chunks.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "'}}]}))
    for index in range(ARGUMENT_FRAGMENTS - 2):
        fragment = {"index": 0, "function": {"arguments": f"x{index}"}}
        chunks.append(_chunk({"tool_calls": [fragment]}))
    chunks.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}))
    chunks.append(_chunk({}, finish="tool_calls"))
    usage = {
        "prompt_tokens": 364,
        "completion_tokens": 2000,
        "total_tokens": 2364,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }
    final = {**_chunk({}), "choices": [], "usage": usage}
    chunks.append(final)
    body = b"".join(
        b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in chunks
    )
    return body + b"data: [DONE]\n\n", len(chunks) + 1


def project(body: bytes) -> bytes:
    adapter = OpenAIChatAdapter(session_id="bench")
    events = []
    for start in range(0, len(body), PIECE):
        events += adapter.feed(body[start : start + PIECE])
    events += adapter.close()
    return encode_lines(events)


def make_baseline(body: bytes) -> tuple[openai.OpenAI, httpx2.Client]:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    http_client = httpx2.Client(transport=httpx2.MockTransport(handler))
    client = openai.OpenAI(
        api_key="sk-bench", base_url="https://api.openai.com/v1", http_client=http_client
    )
    return client, http_client


def baseline(client: openai.OpenAI) -> int:
    count = 0
    stream = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    for _chunk in stream:
        count += 1
    return count


def main() -> None:
    body, sse_events = build_stream()
    client, http_client = make_baseline(body)
    # Sanity: both sides see the whole stream.
    assert baseline(client) == sse_events - 1  # the SDK swallows [DONE]
    log_bytes = project(body)
    logged_events = log_bytes.count(b"\n")
    assert logged_events >= sse_events - 1
    project_time, baseline_time = best_of(15, lambda: project(body), lambda: baseline(client))
    print(
        f"# {sse_events} SSE events, {len(body)} bytes; "
        f"{logged_events} events, {len(log_bytes)} log bytes"
    )
    print(
        ratio_line(
            "openai_chat_sse_to_events_and_log_vs_sdk_stream",
            project_time * 1e3,
            baseline_time * 1e3,
            "ms",
            ">=",
            20,
        )
    )
    http_client.close()


if __name__ == "__main__":
    main()
