"""Regression tests for two CLI-audit findings (each fails without its fix).

1. A request body whose settings had the wrong shape (``thinking.budget_tokens`` a
   string, ``tool_choice.type`` an object) was imported, and rendering the stored header
   for another api then crashed (``TypeError`` in ``_reasoning_effort``, ``KeyError``
   in ``_native_tool_choice``). Now every ``parse_request`` refuses such a setting with
   a :class:`DecodeError` naming its JSON path, and a header already stored with one
   still renders: the setting is dropped with a ``setting_dropped`` warning saying
   what is wrong with it.
2. The openai-responses adapter kept an OpenAI error body (``{"error": {...}}``, whole or
   as an SSE ``data:`` line) as ``native/unknown``; openai-chat makes it an ``error``
   event, and so does openai-responses now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters._render import RenderPolicy
from adapters.openai_chat import OpenAIChatAdapter
from adapters.openai_responses import OpenAIResponsesAdapter
from tests.adapters._render_support import recording, validate_request
from tests.adapters.test_render_oracle import TARGETS, module
from universal_event.cli import main
from universal_event.errors import DecodeError
from universal_event.events import (
    ErrorEvent,
    Event,
    NativeUnknownEvent,
    RequestHeaderEvent,
    StepEndEvent,
    UserMessageEvent,
    WarningEvent,
)
from universal_event.ingest import normalize_bytes
from universal_event.log import SessionLog
from universal_event.messages import UserMessage
from universal_event.parts import TextPart
from universal_event.stores import open_store

# ---------------------------------------------------------------- 1. settings of the wrong shape

_HISTORY = {"anthropic": "messages", "openai-chat": "messages", "openai-responses": "input"}
_API = {"anthropic": "messages", "openai-chat": "chat", "openai-responses": "responses"}
_PROVIDER = {"anthropic": "anthropic", "openai-chat": "openai", "openai-responses": "openai"}

BAD_SETTINGS: list[tuple[str, dict[str, Any], str]] = [
    # the two bodies the audit imported (tmp/audit_cli/repro_render_traceback.sh)
    (
        "anthropic",
        {"thinking": {"type": "enabled", "budget_tokens": "8000"}},
        "$.thinking.budget_tokens",
    ),
    ("anthropic", {"tool_choice": {"type": {}}}, "$.tool_choice.type"),
    ("anthropic", {"tool_choice": {"type": "tool"}}, "$.tool_choice.name"),
    ("anthropic", {"tool_choice": "auto"}, "$.tool_choice"),
    ("anthropic", {"thinking": "on"}, "$.thinking"),
    ("anthropic", {"thinking": {"budget_tokens": 2048}}, "$.thinking.type"),
    ("anthropic", {"max_tokens": "4096"}, "$.max_tokens"),
    ("anthropic", {"stop_sequences": ["END", 7]}, "$.stop_sequences[1]"),
    ("anthropic", {"temperature": "hot"}, "$.temperature"),
    ("openai-chat", {"reasoning_effort": 5}, "$.reasoning_effort"),
    (
        "openai-chat",
        {"tool_choice": {"type": "function", "function": {}}},
        "$.tool_choice.function.name",
    ),
    ("openai-chat", {"tool_choice": {"type": "function"}}, "$.tool_choice.function"),
    ("openai-chat", {"tool_choice": 42}, "$.tool_choice"),
    ("openai-chat", {"stop": {"x": 1}}, "$.stop"),
    ("openai-chat", {"max_completion_tokens": True}, "$.max_completion_tokens"),
    ("openai-chat", {"stream": "yes"}, "$.stream"),
    ("openai-responses", {"reasoning": {"effort": 5}}, "$.reasoning.effort"),
    ("openai-responses", {"reasoning": "high"}, "$.reasoning"),
    ("openai-responses", {"tool_choice": {"type": "function"}}, "$.tool_choice.name"),
    ("openai-responses", {"tool_choice": {"type": None}}, "$.tool_choice.type"),
    ("openai-responses", {"max_output_tokens": "many"}, "$.max_output_tokens"),
    ("openai-responses", {"top_p": [1]}, "$.top_p"),
]


def _body(target: str, settings: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", _HISTORY[target]: [{"role": "user", "content": "hi"}], **settings}


@pytest.mark.parametrize(("target", "settings", "path"), BAD_SETTINGS)
def test_parse_request_refuses_a_setting_of_the_wrong_shape(
    target: str, settings: dict[str, Any], path: str
) -> None:
    with pytest.raises(DecodeError) as info:
        module(target).parse_request(_body(target, settings))
    assert info.value.path == path
    assert f"setting {path[2:]} must be" in str(info.value)


@pytest.mark.parametrize("target", TARGETS)
def test_parse_request_refuses_a_recording_of_the_request(target: str) -> None:
    """A recorded exchange (the body under ``body``, beside method, path, headers) is
    not a body: read as one, its keys passed for settings and its history was lost."""
    recorded = {"method": "POST", "path": "/v1/x", "headers": {}, "body": _body(target, {})}
    with pytest.raises(DecodeError, match="its 'body' has: a recording of the request"):
        module(target).parse_request(recorded)


@pytest.mark.parametrize(
    ("reader", "recorded_as", "fixture", "found"),
    [
        ("openai-chat", "anthropic", "stream_client_tool_two_turns", "a 'tool_use' block"),
        ("anthropic", "openai-chat", "stream_tool_call_then_text_usage", "'tool_calls'"),
    ],
)
def test_a_body_of_the_other_messages_api_is_refused_naming_the_right_reader(
    reader: str, recorded_as: str, fixture: str, found: str
) -> None:
    """Chat and Anthropic bodies both keep their history under ``messages``: one read
    as the other lost its tool calls, results and thinking, without a word."""
    body = recording(recorded_as, fixture)["interactions"][-1]["request_body"]
    assert len(module(recorded_as).parse_request(body)) > 3  # its own reader takes it
    with pytest.raises(DecodeError, match=f"has {found} at .*read it as {recorded_as}-request"):
        module(reader).parse_request(body)


@pytest.mark.parametrize("target", ["anthropic", "openai-chat"])
def test_parse_request_refuses_a_body_without_messages(target: str) -> None:
    """Chat and Messages requests cannot do without ``messages`` (Responses can go
    without ``input``: a stored prompt, a conversation)."""
    with pytest.raises(DecodeError, match="no 'messages': not a request body .*'temperature'"):
        module(target).parse_request({"model": "m", "temperature": 1})
    header = module("openai-responses").parse_request({"model": "m", "temperature": 1})[0]
    assert isinstance(header, RequestHeaderEvent) and header.sampling == {"temperature": 1}


@pytest.mark.parametrize(
    ("target", "settings"),
    [
        ("anthropic", {"thinking": {"type": "adaptive"}}),
        ("anthropic", {"thinking": {"type": "enabled", "budget_tokens": 8000.0}}),
        ("anthropic", {"thinking": {"type": "disabled"}, "tool_choice": {"type": "any"}}),
        ("anthropic", {"tool_choice": {"type": "tool", "name": "get"}, "stop_sequences": []}),
        ("openai-chat", {"tool_choice": "required", "stop": "END", "reasoning_effort": None}),
        ("openai-chat", {"tool_choice": {"type": "allowed_tools", "allowed_tools": {}}}),
        ("openai-chat", {"tool_choice": {"type": "function", "function": {"name": "get"}}}),
        ("openai-responses", {"reasoning": {"effort": "high", "summary": "auto"}}),
        ("openai-responses", {"tool_choice": {"type": "file_search"}, "temperature": None}),
        ("openai-responses", {"tool_choice": {"type": "function", "name": "get"}}),
    ],
)
def test_parse_request_keeps_well_shaped_settings(target: str, settings: dict[str, Any]) -> None:
    header = module(target).parse_request(_body(target, settings))[0]
    assert isinstance(header, RequestHeaderEvent)
    assert header.sampling == settings


@pytest.mark.parametrize(("source", "settings", "path"), BAD_SETTINGS)
@pytest.mark.parametrize("target", TARGETS)
def test_a_stored_header_with_a_setting_of_the_wrong_shape_still_renders(
    source: str, settings: dict[str, Any], path: str, target: str
) -> None:
    """A header logged before parsing refused it: the setting is dropped and named."""
    header = RequestHeaderEvent(
        provider=_PROVIDER[source],
        api=_API[source],
        model="m",
        sampling={"max_tokens": 1000, **settings},
    )
    warnings: list[WarningEvent] = []
    kwargs = module(target).render_request(
        [UserMessage(content=[TextPart(text="hi")])],
        header,
        RenderPolicy(model="m"),
        warnings=warnings,
    )
    validate_request(target, kwargs)
    (dropped,) = [w for w in warnings if w.message.startswith("settings of the wrong shape")]
    assert dropped.code == "setting_dropped"
    assert dropped.details is not None and dropped.details["settings"] == list(settings)
    assert path[2:] in dropped.message and path[2:] in dropped.details["problems"]
    sent = {**kwargs, **kwargs.get("extra_body", {})}
    for key in settings:
        if key != "max_tokens" or target != "anthropic":  # the default max_tokens stays
            assert sent.get(key) != settings[key]


def test_cli_import_refuses_and_render_of_a_stored_header_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audit's repro: import then render --to openai-chat / openai-responses."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    body = tmp_path / "body.json"
    bad = {"thinking": {"type": "enabled", "budget_tokens": "8000"}}
    body.write_text(json.dumps(_body("anthropic", {"max_tokens": 4096, **bad})))
    args = ["import", "--store", store, "--from", "anthropic-request", str(body), "--session", "b"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "thinking.budget_tokens must be an integer (it is a string)" in err
    assert "$.thinking.budget_tokens" in err and "Traceback" not in err

    # A session stored before the parser refused such bodies.
    opened = open_store(store)
    log = SessionLog(opened, "old")
    log.append(RequestHeaderEvent(provider="anthropic", api="messages", model="m", sampling=bad))
    log.append(UserMessageEvent(content=[TextPart(text="hi")]))
    log.checkpoint()
    log.close()
    opened.close()
    for target in ("anthropic", "openai-chat", "openai-responses"):
        assert main(["render", "--store", store, "--session", "old", "--to", target]) == 0
        out, err = capsys.readouterr()
        assert "budget_tokens" not in out
        assert "thinking.budget_tokens must be an integer" in err


# ---------------------------------------------------------------- 2. Responses error bodies


def _model_not_found() -> dict[str, Any]:
    interaction = recording("openai-responses", "error_400_model_not_found")["interactions"][0]
    body: dict[str, Any] = interaction["response_body"]
    assert interaction["response_status"] == 400 and set(body) == {"error"}
    return body


def _one_error(events: list[Event]) -> ErrorEvent:
    assert not [e for e in events if isinstance(e, NativeUnknownEvent)]
    (error,) = [e for e in events if isinstance(e, ErrorEvent)]
    return error


def _fields(error: ErrorEvent) -> tuple[Any, ...]:
    return (error.code, error.message, error.http_status, error.retryable, error.native)


@pytest.mark.parametrize("form", ["whole", "chunked", "dict", "str", "sse"])
def test_responses_error_body_is_an_error_event_like_chat(form: str) -> None:
    body = _model_not_found()
    raw = json.dumps(body).encode()

    def feed(adapter: OpenAIResponsesAdapter | OpenAIChatAdapter) -> list[Event]:
        if form == "chunked":
            return [e for i in range(0, len(raw), 7) for e in adapter.feed(raw[i : i + 7])] + (
                adapter.close()
            )
        native: Any = {
            "whole": raw,
            "dict": body,
            "str": raw.decode(),
            "sse": b"data: " + raw + b"\n\n",
        }[form]
        return adapter.feed(native) + adapter.close()

    error = _one_error(feed(OpenAIResponsesAdapter()))
    assert error.code == "model_not_found"
    assert error.message == body["error"]["message"]
    assert error.http_status is None and error.retryable is False  # no status in the bytes
    assert error.native == body
    assert _fields(error) == _fields(_one_error(feed(OpenAIChatAdapter())))


def test_responses_error_body_through_normalize_matches_chat() -> None:
    body = json.dumps(_model_not_found()).encode()
    sse = (
        b'data: {"error": {"code": "server_error", "message": "boom", "type": "server_error"}}\n\n'
    )
    for data in (body, sse):
        responses = _one_error(normalize_bytes("openai-responses", data))
        chat = _one_error(normalize_bytes("openai-chat", data))
        assert _fields(responses) == _fields(chat)
    assert _one_error(normalize_bytes("openai-responses", sse)).retryable is True
    for data in (b'{"error": "boom"}', b'data: {"error": "boom"}\n\n', b'{"error": {}}'):
        error = _one_error(normalize_bytes("openai-responses", data))
        assert error.native == json.loads(data.removeprefix(b"data: "))


def test_responses_error_line_inside_a_response_fails_it() -> None:
    """As when the SDK raises at that line (``api_error``): the step ends ``failed``."""
    created = {
        "type": "response.created",
        "sequence_number": 0,
        "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []},
    }
    data = b"".join(
        b"data: " + json.dumps(payload).encode() + b"\n\n"
        for payload in (created, _model_not_found())
    )
    events = normalize_bytes("openai-responses", data)
    error = _one_error(events)
    assert error.code == "model_not_found" and error.source is not None
    assert error.source.native_id == "resp_1"
    assert [e.status for e in events if isinstance(e, StepEndEvent)] == ["failed"]


def test_responses_http_error_is_unchanged_and_has_the_status() -> None:
    body = _model_not_found()
    (error,) = OpenAIResponsesAdapter().http_error(400, json.dumps(body).encode())
    assert isinstance(error, ErrorEvent)
    assert (error.code, error.http_status, error.native) == ("model_not_found", 400, body)
