"""OpenAI Responses: raw SSE bytes of a 2,000-event stream → events + encoded log bytes,
against the openai SDK's own ``client.responses.create(stream=True)`` iteration of the
same bytes over a mock transport (no network), in the same run.

The stream copies the shape of the recorded 2025-2026 events (``event:`` lines,
``sequence_number`` on every event, ``obfuscation`` on deltas, ``logprobs: []`` on text
deltas, the whole response echoed by created / in_progress / completed): a reasoning
item with 300 summary deltas, a function call in 200 argument fragments, a message in
1,484 text deltas, with their added / done events, and ``response.completed`` with
usage. The project side feeds the bytes in 4 KiB pieces (a network read's size) and
encodes every event as a JSON line, i.e. what the log would store.

    python bench/adapters_openai_responses.py   (or via bench/bench_adapters.py)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import httpx2  # noqa: E402
import openai  # noqa: E402
from _ratio import best_of, ratio_line  # noqa: E402

from adapters.openai_responses import OpenAIResponsesAdapter  # noqa: E402
from universal_event.codec import encode_lines  # noqa: E402

SUMMARY_DELTAS = 300
ARGUMENT_FRAGMENTS = 200
TEXT_DELTAS = 1_484
PIECE = 4096
RESPONSE_ID = "resp_0fabc13af1ee0049006a691dfdab8881a1a75f2db7ff78cb83"
PREFIX = "0fabc13af1ee0049006a691dfe60b081a1baa444d3cf19af"


def _response(status: str, output: list[Any], usage: Any = None) -> dict[str, Any]:
    return {
        "id": RESPONSE_ID,
        "object": "response",
        "created_at": 1779023357,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": "gpt-5.5-2026-04-23",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "medium", "summary": "detailed"},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def build_stream() -> tuple[bytes, int]:
    """The SSE body and its number of SSE events."""
    events: list[dict[str, Any]] = []

    def emit(event_type: str, **fields: Any) -> None:
        events.append({"type": event_type, "sequence_number": len(events), **fields})

    emit("response.created", response=_response("in_progress", []))
    emit("response.in_progress", response=_response("in_progress", []))

    reasoning_id = f"rs_{PREFIX}a1"
    summary = [f" step{index}" for index in range(SUMMARY_DELTAS)]
    reasoning = {
        "id": reasoning_id,
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "gAAAAB" + "x" * 800,
    }
    emit("response.output_item.added", output_index=0, item=reasoning)
    emit(
        "response.reasoning_summary_part.added",
        item_id=reasoning_id,
        output_index=0,
        summary_index=0,
        part={"type": "summary_text", "text": ""},
    )
    for delta in summary:
        emit(
            "response.reasoning_summary_text.delta",
            item_id=reasoning_id,
            output_index=0,
            summary_index=0,
            delta=delta,
            obfuscation="a1b2c3",
        )
    done_reasoning = {**reasoning, "summary": [{"type": "summary_text", "text": "".join(summary)}]}
    emit(
        "response.reasoning_summary_text.done",
        item_id=reasoning_id,
        output_index=0,
        summary_index=0,
        text="".join(summary),
    )
    emit(
        "response.reasoning_summary_part.done",
        item_id=reasoning_id,
        output_index=0,
        summary_index=0,
        part={"type": "summary_text", "text": "".join(summary)},
    )
    emit("response.output_item.done", output_index=0, item=done_reasoning)

    call_id = f"fc_{PREFIX}b2"
    fragments = ['{"city":"'] + [f"x{index}" for index in range(ARGUMENT_FRAGMENTS - 2)] + ['"}']
    call = {
        "id": call_id,
        "type": "function_call",
        "status": "in_progress",
        "arguments": "",
        "call_id": "call_LabG58Uhrq9kZvR52BYKjToD",
        "name": "get_weather",
    }
    emit("response.output_item.added", output_index=1, item=call)
    for fragment in fragments:
        emit(
            "response.function_call_arguments.delta",
            item_id=call_id,
            output_index=1,
            delta=fragment,
            obfuscation="q9w8e7",
        )
    done_call = {**call, "status": "completed", "arguments": "".join(fragments)}
    emit(
        "response.function_call_arguments.done",
        item_id=call_id,
        output_index=1,
        arguments="".join(fragments),
    )
    emit("response.output_item.done", output_index=1, item=done_call)

    message_id = f"msg_{PREFIX}c3"
    words = [f" word{index}" for index in range(TEXT_DELTAS)]
    message = {
        "id": message_id,
        "type": "message",
        "status": "in_progress",
        "content": [],
        "role": "assistant",
        "phase": "final_answer",
    }
    emit("response.output_item.added", output_index=2, item=message)
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    emit(
        "response.content_part.added",
        item_id=message_id,
        output_index=2,
        content_index=0,
        part=part,
    )
    for word in words:
        emit(
            "response.output_text.delta",
            item_id=message_id,
            output_index=2,
            content_index=0,
            delta=word,
            logprobs=[],
            obfuscation="Zx9",
        )
    text = "".join(words)
    emit(
        "response.output_text.done",
        item_id=message_id,
        output_index=2,
        content_index=0,
        text=text,
        logprobs=[],
    )
    emit(
        "response.content_part.done",
        item_id=message_id,
        output_index=2,
        content_index=0,
        part={**part, "text": text},
    )
    done_message = {**message, "status": "completed", "content": [{**part, "text": text}]}
    emit("response.output_item.done", output_index=2, item=done_message)
    usage = {
        "input_tokens": 364,
        "input_tokens_details": {"cached_tokens": 128},
        "output_tokens": 2000,
        "output_tokens_details": {"reasoning_tokens": 300},
        "total_tokens": 2364,
    }
    emit(
        "response.completed",
        response=_response("completed", [done_reasoning, done_call, done_message], usage),
    )
    body = b"".join(
        b"event: "
        + e["type"].encode()
        + b"\ndata: "
        + json.dumps(e, separators=(",", ":")).encode()
        + b"\n\n"
        for e in events
    )
    return body, len(events)


def project(body: bytes) -> bytes:
    adapter = OpenAIResponsesAdapter(session_id="bench")
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
    stream = client.responses.create(model="gpt-5.5", input="hi", stream=True)
    for _event in stream:
        count += 1
    return count


def main() -> None:
    body, sse_events = build_stream()
    client, http_client = make_baseline(body)
    # Sanity: both sides see the whole stream.
    assert baseline(client) == sse_events
    log_bytes = project(body)
    logged_events = log_bytes.count(b"\n")
    assert logged_events >= SUMMARY_DELTAS + ARGUMENT_FRAGMENTS + TEXT_DELTAS
    assert b'"type":"assistant/message"' in log_bytes and b'"type":"warning"' not in log_bytes
    project_time, baseline_time = best_of(15, lambda: project(body), lambda: baseline(client))
    print(
        f"# {sse_events} SSE events, {len(body)} bytes; "
        f"{logged_events} events, {len(log_bytes)} log bytes"
    )
    print(
        ratio_line(
            "openai_responses_sse_to_events_and_log_vs_sdk_stream",
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
