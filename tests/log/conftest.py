"""Fixtures for the session-log tests: real stores, and a builder of realistic turns."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from universal_event import (
    AssistantMessageEvent,
    SessionLog,
    StepEndEvent,
    StepStartEvent,
    TextPart,
    ToolCallEvent,
    ToolCallPart,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessageEvent,
)
from universal_event.parts import Provenance
from universal_event.stores import Store, open_store

PROVENANCE = Provenance(provider="anthropic", api="messages", model="claude-test")

StoreFactory = Callable[[], Store]


@pytest.fixture(params=["memory", "jsonl", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL per backend; opening the URL twice gives two handles on one store
    (except ``memory:``, which the tests that reopen skip)."""
    return {
        "memory": "memory:",
        "jsonl": f"jsonl://{tmp_path / 'jsonl'}",
        "sqlite": f"sqlite://{tmp_path / 'events.db'}",
    }[request.param]


@pytest.fixture(params=["jsonl", "sqlite"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return {
        "jsonl": f"jsonl://{tmp_path / 'jsonl'}",
        "sqlite": f"sqlite://{tmp_path / 'events.db'}",
    }[request.param]


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def add_turn(
    log: SessionLog, turn: int, *, tools: int = 1, finish: bool = True, run_tools: bool = True
) -> None:
    """Append one realistic turn: user message, steps with tool calls and results."""
    turn_id = f"t{turn}"
    log.append(TurnStartEvent(turn_id=turn_id))
    log.append(UserMessageEvent(turn_id=turn_id, content=[TextPart(text=f"question {turn}")]))
    for step in range(tools):
        call_id = f"call_{turn}_{step}"
        log.append(StepStartEvent(turn_id=turn_id, step=step))
        log.append(
            AssistantMessageEvent(
                turn_id=turn_id,
                step=step,
                content=[
                    TextPart(text=f"running tool {step}"),
                    ToolCallPart(id=call_id, name="bash", arguments={"cmd": f"echo {turn}"}),
                ],
                provenance=PROVENANCE,
                message_id=f"msg_{turn}_{step}",
                stop_reason="tool_use",
            )
        )
        if not run_tools:
            return
        log.append(ToolCallEvent(turn_id=turn_id, step=step, call_id=call_id, name="bash"))
        log.append(
            ToolResultEvent(
                turn_id=turn_id,
                step=step,
                call_id=call_id,
                name="bash",
                content=[TextPart(text=f"output {turn}.{step}")],
            )
        )
        log.append(StepEndEvent(turn_id=turn_id, step=step, stop_reason="tool_use"))
    if not finish:
        return
    log.append(StepStartEvent(turn_id=turn_id, step=tools))
    log.append(
        AssistantMessageEvent(
            turn_id=turn_id,
            step=tools,
            content=[TextPart(text=f"answer {turn}")],
            provenance=PROVENANCE,
            message_id=f"msg_{turn}_final",
            stop_reason="end_turn",
        )
    )
    log.append(StepEndEvent(turn_id=turn_id, step=tools, stop_reason="end_turn"))
    log.append(TurnEndEvent(turn_id=turn_id, status="completed"))
