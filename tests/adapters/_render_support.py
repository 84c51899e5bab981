"""Shared helpers of the renderer tests: fixtures, logs, SDK validation, wire capture."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pydantic

from universal_event.events import Event
from universal_event.log import SessionLog
from universal_event.messages import Message

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = FIXTURES / "recorded"

FORMAT_DIRS = {
    "anthropic": "anthropic-messages",
    "openai-chat": "openai-chat",
    "openai-responses": "openai-responses",
}


def recorded_requests(target: str) -> list[tuple[str, dict[str, Any]]]:
    """(``file#n``, request body) of every recorded interaction that kept its request."""
    found = []
    for path in sorted((RECORDED / FORMAT_DIRS[target]).glob("*.json")):
        recording = json.loads(path.read_text())
        for index, interaction in enumerate(recording["interactions"]):
            if interaction.get("request_body") is not None:
                found.append((f"{path.stem}#{index}", interaction["request_body"]))
    return found


def captured_requests() -> list[tuple[str, str, dict[str, Any]]]:
    """(target, ``run/file``, body) of every model request the real Claude Code and
    Codex sent in the captured runs (``requests/*.json`` beside each run)."""
    captured = FIXTURES / "captured"
    found = []
    for pattern, target in (
        ("claude/*/*/requests/*_v1_messages.json", "anthropic"),
        ("codex/*/*/requests/*_v1_responses.json", "openai-responses"),
    ):
        for path in sorted(captured.glob(pattern)):
            name = f"{path.parent.parent.relative_to(captured)}/{path.stem}"
            found.append((target, name, json.loads(path.read_text())["body"]))
    return found


def recording(target: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / FORMAT_DIRS[target] / f"{name}.json").read_text())
    return data


def log_of(events: Iterable[Event]) -> SessionLog:
    """A memory session log holding ``events`` (headers through ``update_header``)."""
    from universal_event.events import RequestHeaderEvent

    log = SessionLog()
    for event in events:
        if isinstance(event, RequestHeaderEvent):
            log.update_header(event)
        else:
            log.append(event)
    return log


def derive(events: Iterable[Event]) -> tuple[list[Message], Any]:
    log = log_of(events)
    return log.derive_messages(), log.current_header()


# ---------------------------------------------------------------- SDK validation

_ADAPTERS: dict[str, pydantic.TypeAdapter[Any]] = {}


def _adapter(target: str) -> pydantic.TypeAdapter[Any]:
    if target not in _ADAPTERS:
        if target == "anthropic":
            from anthropic.types import MessageParam

            _ADAPTERS[target] = pydantic.TypeAdapter(list[MessageParam])
        elif target == "openai-chat":
            from openai.types.chat import ChatCompletionMessageParam

            _ADAPTERS[target] = pydantic.TypeAdapter(list[ChatCompletionMessageParam])
        else:
            from openai.types.responses import ResponseInputParam

            _ADAPTERS[target] = pydantic.TypeAdapter(ResponseInputParam)
    return _ADAPTERS[target]


def _materialise(value: Any) -> Any:
    """Walk a validated value, consuming pydantic's lazy ``ValidatorIterator``s.

    The SDK types ``Iterable[...]`` fields; pydantic validates them only when iterated
    (TESTING-NOTES.md), so without this walk a bogus block would pass.
    """
    if isinstance(value, Mapping):
        return {key: _materialise(item) for key, item in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, Iterable | Iterator):
        return [_materialise(item) for item in value]
    return value


_REQUEST_ADAPTERS: dict[str, pydantic.TypeAdapter[Any]] = {}


def _request_adapter(target: str) -> pydantic.TypeAdapter[Any]:
    """The SDK's TypedDict for the whole ``create()`` call (system, tools, tool_choice...)."""
    if target not in _REQUEST_ADAPTERS:
        if target == "anthropic":
            from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

            _REQUEST_ADAPTERS[target] = pydantic.TypeAdapter(MessageCreateParamsNonStreaming)
        elif target == "openai-chat":
            from openai.types.chat.completion_create_params import (
                CompletionCreateParamsNonStreaming,
            )

            _REQUEST_ADAPTERS[target] = pydantic.TypeAdapter(CompletionCreateParamsNonStreaming)
        else:
            from openai.types.responses.response_create_params import (
                ResponseCreateParamsNonStreaming,
            )

            _REQUEST_ADAPTERS[target] = pydantic.TypeAdapter(ResponseCreateParamsNonStreaming)
    return _REQUEST_ADAPTERS[target]


def validate_request(target: str, kwargs: dict[str, Any]) -> Any:
    """Validate the whole rendered ``create()`` kwargs against the SDK's TypedDict, deeply.

    ``extra_body`` is what the SDK merges into the body unchecked; it is not validated.
    ``stream`` is the one field that differs between the streaming and non-streaming
    TypedDicts (a ``Literal``); it is left out so one TypedDict checks both.
    """
    checked = {key: value for key, value in kwargs.items() if key not in ("extra_body", "stream")}
    return _materialise(_request_adapter(target).validate_python(checked))


def validate_history(target: str, kwargs: dict[str, Any]) -> Any:
    """Validate the rendered history against the SDK's own parameter types, deeply.

    The history only: the parse-side oracle re-renders real requests whose beta tools
    (``advisor_20260301``) the SDK's non-beta types do not know. Requests this project
    renders from a log are checked whole with :func:`validate_request`.
    """
    history = kwargs["messages"] if target != "openai-responses" else kwargs["input"]
    return _materialise(_adapter(target).validate_python(history))


# ---------------------------------------------------------------- wire


def flatten(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON body the SDK sends for these kwargs (``extra_body`` merged in)."""
    body = {key: value for key, value in kwargs.items() if key != "extra_body"}
    body.update(kwargs.get("extra_body") or {})
    return body


def derived_texts(log: SessionLog) -> list[tuple[str, str]]:
    """(role, text) of each text part of the history derived from ``log``."""
    from universal_event.parts import TextPart

    return [
        (str(message.__struct_config__.tag), part.text)
        for message in log.derive_messages()
        for part in message.content
        if isinstance(part, TextPart)
    ]
