"""Parallel calls: one model response asking for two commands is one message, then both
results — the history Codex sends next (captured/codex/parallel/two_calls, SOURCE.md).

Codex runs a response's calls one after the other, in no fixed order (both captured turns
ran them in the other order than the model gave them), and the first command completes
before the second starts. The oracle is Codex's own next request: the history derived
from the log equals its ``input`` items (the reasoning, the message, both
``exec_command`` calls in the model's order, then both outputs as Codex wrapped them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from adapters.codex import CodexAdapter, CodexRolloutAdapter
from tests.adapters.test_codex_oracle import derived, normalise, request_history
from universal_event.events import (
    AssistantMessageEvent,
    Event,
    NativeUnknownEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from universal_event.ingest import append_imported, import_events
from universal_event.log import SessionLog
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import TextPart, ThinkingPart, ToolCallPart

RUN = Path(__file__).parent.parent / "fixtures" / "captured" / "codex" / "parallel" / "two_calls"
APP = RUN / "app_server"
EXEC = RUN / "exec"


def _request(dialect: Path, n: int) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(
        (dialect / "requests" / f"{n:04d}_POST_v1_responses.json").read_text()
    )["body"]
    return body


def _lines(turn: int) -> list[dict[str, Any]]:
    text = (APP / f"turn{turn}.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _feed(lines: list[dict[str, Any]], adapter: CodexAdapter | None = None) -> list[Event]:
    adapter = adapter or CodexAdapter(model="gpt-5.5")
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    return [*adapter.feed(data), *adapter.close()]


def _turn_of(history: list[Message], prompt: str) -> list[Message]:
    """The messages from the user message ``prompt`` to the next user message."""
    start = next(
        i
        for i, m in enumerate(history)
        if isinstance(m, UserMessage) and m.content == [TextPart(text=prompt)]
    )
    end = next(
        (i for i in range(start + 1, len(history)) if isinstance(history[i], UserMessage)),
        len(history),
    )
    return history[start:end]


def _shape(history: list[Message]) -> list[Any]:
    out: list[Any] = []
    for m in history:
        if isinstance(m, AssistantMessage):
            out.append([type(p).__name__ for p in m.content])
        else:
            out.append(type(m).__name__)
    return out


def _is_raw_output(line: dict[str, Any]) -> bool:
    item = line["params"].get("item") or {}
    return line["method"] == "rawResponseItem/completed" and bool(
        item["type"] == "function_call_output"
    )


def _text(content: list[Any]) -> str:
    return "".join(p.text for p in content if isinstance(p, TextPart))


def _outputs(history: list[Message]) -> list[ToolMessage]:
    return [m for m in history if isinstance(m, ToolMessage)]


def _calls(message: Message) -> list[ToolCallPart]:
    assert isinstance(message, AssistantMessage)
    return [p for p in message.content if isinstance(p, ToolCallPart)]


TURN_SHAPE = [
    "UserMessage",
    ["ThinkingPart", "TextPart", "ToolCallPart", "ToolCallPart"],
    "ToolMessage",
    "ToolMessage",
    ["TextPart"],
]


# ---------------------------------------------------------------- app-server, raw events on


def test_the_captured_commands_ran_in_the_other_order_than_the_model_gave_them() -> None:
    """What the capture is for: the stream's order is not the model's."""
    for turn, request in ((1, 2), (2, 4)):
        started = [
            line["params"]["item"]["id"]
            for line in _lines(turn)
            if line["method"] == "item/started"
            and line["params"]["item"]["type"] == "commandExecution"
        ]
        model = [
            i["call_id"] for i in _request(APP, request)["input"] if i["type"] == "function_call"
        ][-2:]
        assert started == model[::-1]


def test_app_server_with_raw_events_logs_the_response_as_codex_sent_it() -> None:
    events = _feed(_lines(1))
    history = derived(events)
    expected, _ = request_history(_request(APP, 2))
    assert _shape(history) == TURN_SHAPE
    # The calls in the model's order, named and argued as the model did, the outputs as
    # Codex wrapped them, the reasoning with its encrypted_content: equal, item for item.
    assert history == expected[: len(history)]
    # The message first (it was emitted once the response was over), then the results.
    kinds = [type(e) for e in events if isinstance(e, AssistantMessageEvent | ToolResultEvent)]
    assert kinds == [AssistantMessageEvent, ToolResultEvent, ToolResultEvent, AssistantMessageEvent]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    plain = [(r.details or {}).get("output") for r in results]
    assert plain == ["one\n", "two\n"]
    for result, output in zip(results, plain, strict=True):
        text = _text(result.content)
        assert text.startswith("Chunk ID: ") and text.endswith(f"Output:\n{output}")
        assert result.name == "exec_command"
    # tool/call is still logged as each command starts (the order it ran in).
    calls = [e.call_id for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [r.call_id for r in results][::-1]


def test_raw_outputs_after_the_usage_report_still_give_the_wrapped_text() -> None:
    """The raw function_call_output may come after thread/tokenUsage/updated: the results
    wait for it (the message is logged at the report)."""
    lines = _lines(1)
    outputs = [line for line in lines if _is_raw_output(line)]
    rest = [line for line in lines if not _is_raw_output(line)]
    usage = next(i for i, line in enumerate(rest) if line["method"] == "thread/tokenUsage/updated")
    moved = rest[: usage + 1] + outputs + rest[usage + 1 :]
    history = derived(_feed(moved))
    expected, _ = request_history(_request(APP, 2))
    assert history == expected[: len(history)] == derived(_feed(lines))


def test_without_usage_reports_the_next_message_ends_the_response() -> None:
    """A provider that reports no usage: the next response's first item ends the last one."""
    lines = [line for line in _lines(1) if line["method"] != "thread/tokenUsage/updated"]
    history = derived(_feed(lines))
    expected, _ = request_history(_request(APP, 2))
    assert history == expected[: len(history)]


def test_raw_outputs_that_never_come_fall_back_to_the_plain_output_in_order() -> None:
    lines = [line for line in _lines(1) if not _is_raw_output(line)]
    history = derived(_feed(lines))
    expected, _ = request_history(_request(APP, 2))
    assert _shape(history) == TURN_SHAPE
    assert history[1] == expected[1]  # the message: the calls in the model's order
    outputs = _outputs(history)
    assert [m.call_id for m in outputs] == [m.call_id for m in _outputs(expected)[:2]]
    assert [m.content for m in outputs] == [[TextPart(text="one\n")], [TextPart(text="two\n")]]


# ---------------------------------------------------------------- app-server, resumed thread


def test_a_resumed_thread_logs_one_message_then_both_results() -> None:
    """No raw events: the message has both calls and the results follow it, in the order
    the commands started (the stream does not say the model's); the rollout has it."""
    events = _feed(_lines(2))
    history = derived(events)
    assert _shape(history) == TURN_SHAPE
    expected = _turn_of(request_history(_request(APP, 4))[0], "Once more")
    got_message, want_message = history[1], expected[1]
    assert isinstance(got_message, AssistantMessage) and isinstance(want_message, AssistantMessage)
    thinking, text, *_ = got_message.content
    w_thinking, w_text, *_ = want_message.content
    assert isinstance(thinking, ThinkingPart) and isinstance(w_thinking, ThinkingPart)
    assert (thinking.id, thinking.summary) == (w_thinking.id, w_thinking.summary)
    assert text == w_text
    started = [e.call_id for e in events if isinstance(e, ToolCallEvent)]
    assert [c.id for c in _calls(got_message)] == started
    assert sorted(started) == sorted(c.id for c in _calls(want_message))
    results = _outputs(history)
    assert [r.call_id for r in results] == started
    # The plain output, which Codex wrapped for the model.
    sent = {m.call_id: _text(m.content) for m in _outputs(expected)}
    for result in results:
        assert sent[result.call_id].endswith("Output:\n" + _text(result.content))


@pytest.mark.parametrize("dialect", [APP, EXEC], ids=["app_server", "exec"])
def test_the_rollout_import_is_what_codex_sent(dialect: Path) -> None:
    history = derived(normalise(CodexRolloutAdapter(), dialect / "rollout.jsonl"))
    requests = sorted((dialect / "requests").glob("*.json"))
    for n in range(len(requests)):
        expected, _ = request_history(_request(dialect, n))
        assert history[: len(expected)] == expected
    assert _shape(_turn_of(history, "Run echo one and echo two")) == TURN_SHAPE


# ---------------------------------------------------------------- codex exec --json


def test_exec_logs_one_message_then_both_results() -> None:
    adapter = CodexAdapter(model="gpt-5.5")
    events = normalise(adapter, EXEC / "stdout.jsonl")
    history = derived(events)
    assert _shape(history) == TURN_SHAPE[1:]  # exec does not show the prompt
    expected = _turn_of(request_history(_request(EXEC, 1))[0], "Run echo one and echo two")
    message, want = history[0], expected[1]
    assert isinstance(message, AssistantMessage) and isinstance(want, AssistantMessage)
    thinking, text, *_ = message.content
    w_thinking, w_text, *_ = want.content
    assert isinstance(thinking, ThinkingPart) and isinstance(w_thinking, ThinkingPart)
    assert thinking.summary == w_thinking.summary
    assert isinstance(text, TextPart) and isinstance(w_text, TextPart)
    assert text.text == w_text.text
    # exec shows the commands, in the order they ran, and their plain outputs.
    calls = _calls(message)
    commands = [c.arguments["command"] for c in calls]
    assert sorted(commands) == sorted(f"/bin/bash -lc '{c.arguments['cmd']}'" for c in _calls(want))
    results = _outputs(history)
    assert [r.call_id for r in results] == [c.id for c in calls]
    sent = {_text(m.content).rsplit("Output:\n", 1)[1] for m in _outputs(expected)}
    assert {_text(r.content) for r in results} == sent


def _exec_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (EXEC / "stdout.jsonl").read_text().splitlines()]


def test_exec_cut_between_the_calls_keeps_them_in_one_partial_message() -> None:
    """The input ends inside the response (a cut stream, or a capture still being
    written): the partial message has both calls; the first one's result, held until the
    response is over, is not logged at the input's end (a grown input logs it where the
    response ends), so both calls are unanswered, as in an interrupt."""
    lines = _exec_lines()
    cut = next(i for i, line in enumerate(lines) if line.get("item", {}).get("id") == "item_3")
    events = _feed(lines[: cut + 1])  # the second command started, then the input ended
    (message,) = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert (message.status, message.stop_reason) == ("partial", "interrupted")
    assert [type(p).__name__ for p in message.content][-2:] == ["ToolCallPart", "ToolCallPart"]
    assert [e for e in events if isinstance(e, ToolResultEvent)] == []


@pytest.mark.parametrize(
    ("runtime", "capture"),
    [
        ("codex", EXEC / "stdout.jsonl"),
        ("codex", APP / "turn2.jsonl"),
        ("codex-rollout", APP / "rollout.jsonl"),
    ],
    ids=["exec", "app_server_resumed", "rollout"],
)
def test_an_input_grown_line_by_line_derives_as_one_import_does(
    runtime: str, capture: Path
) -> None:
    """Imported at every length, then whole (a capture still being written): each
    response once, each result once (none logged at an import's end, then again)."""
    data = capture.read_bytes()
    lines = data.splitlines(keepends=True)
    log = SessionLog()
    for cut in range(1, len(lines) + 1):
        append_imported(log, import_events(runtime, b"".join(lines[:cut])))
    whole = SessionLog()
    whole.extend(import_events(runtime, data))
    grown = [msgspec.structs.replace(m, seq=0) for m in log.derive_messages()]
    assert grown == [msgspec.structs.replace(m, seq=0) for m in whole.derive_messages()]
    assert len(_outputs(grown)) == len({m.call_id for m in _outputs(grown)}) >= 2


def test_exec_a_repeated_message_line_after_a_result_does_not_end_the_response() -> None:
    lines = _exec_lines()
    first_done = next(
        i
        for i, line in enumerate(lines)
        if line["type"] == "item.completed" and line["item"]["id"] == "item_2"
    )
    repeated = next(line for line in lines if line.get("item", {}).get("id") == "item_1")
    events = _feed([*lines[: first_done + 1], repeated, *lines[first_done + 1 :]])
    assert [e.reason for e in events if isinstance(e, NativeUnknownEvent)] == [
        "item 'item_1' already completed in this turn"
    ]
    assert _shape(derived(events)) == TURN_SHAPE[1:]
