"""The oracle for Codex: the history derived from the log equals what Codex itself sent.

Each capture's ``requests/NNNN_*.json`` is Codex's own request to the model; request N+1's
``input`` replays turn N. The request's items are turned into neutral messages here
(with the Responses item mappers) and compared with ``SessionLog.derive_messages()`` of
the normalised native output, part by part.

Codex's own additions to ``input`` are named, not ignored wholesale: the ``developer``
messages (system prompt, skills) and the ``<environment_context>`` user message — the
rollout import logs them as ``request/header`` / ``request/context``, never as
conversation.

* rollout files: **equal**, item for item (reasoning with ``encrypted_content``, the
  ``exec_command`` function call with its ``call_id`` and arguments, the output as sent);
* app-server notifications: the model's ids are equal (``rs_``, ``msg_``, ``call_``);
  missing, and named: ``encrypted_content``, the function call's name/arguments/``fc_``
  id, and Codex's wrapping of the tool output. With ``rawResponseItem/completed``
  notifications (raw events on) the assistant message is equal too;
* exec ``--json``: texts are equal; missing, and named: every model id, the prompt, the
  function call (only the command is shown), the wrapped output.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from adapters._render import RenderPolicy
from adapters.codex import CodexAdapter, CodexRolloutAdapter
from adapters.openai_responses import render_request
from adapters.openai_responses._items import CLIENT_RESULT_TYPES, item_parts, result_parts
from universal_event.events import (
    AssistantMessageEvent,
    RequestContextEvent,
    RequestHeaderEvent,
    ToolResultEvent,
    UserMessageEvent,
)
from universal_event.log import SessionLog
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import AssistantPart, Provenance, TextPart, ThinkingPart, ToolCallPart

CAPTURED = Path(__file__).parent.parent / "fixtures" / "captured" / "codex"
TOOL_RUNS = ["exec/x01_tool", "exec/x04_tool_fail"]
APP_TOOL_RUNS = ["app_server/xs01_tool", "app_server/xs02_tool_stream", "app_server/xs03_tool_fail"]
_CHECKLIST_LINE = (
    "- If you create a checklist or task list, you update item statuses incrementally as each"
    " item is completed rather than marking every item done only at the end.\n"
)
ALL_RUNS = sorted(
    str(path.parent.relative_to(CAPTURED)) for path in CAPTURED.glob("*/*/rollout.jsonl")
)


def _requests(run: str) -> list[dict[str, Any]]:
    files = sorted((CAPTURED / run / "requests").glob("*_POST_v1_responses.json"))
    return [json.loads(path.read_text())["body"] for path in files]


def request_history(body: dict[str, Any]) -> tuple[list[Message], list[dict[str, Any]]]:
    """A request's ``input`` as neutral messages, and Codex's own additions beside them.

    Consecutive assistant-side items (one response) are one assistant message.
    """
    provenance = Provenance(provider="openai", api="responses", model=body["model"])
    messages: list[Message] = []
    additions: list[dict[str, Any]] = []
    parts: list[AssistantPart] = []

    def flush() -> None:
        if parts:
            messages.append(AssistantMessage(content=list(parts), provenance=provenance))
            parts.clear()

    for item in body["input"]:
        kind, role = item.get("type"), item.get("role")
        if kind == "message" and role != "assistant":
            flush()
            content = result_parts(item["content"])
            first = content[0].text if isinstance(content[0], TextPart) else ""
            if role == "developer" or first.lstrip().startswith("<environment_context>"):
                additions.append(item)
            else:
                messages.append(UserMessage(content=list(content)))
        elif kind in CLIENT_RESULT_TYPES:
            flush()
            messages.append(
                ToolMessage(call_id=item["call_id"], content=result_parts(item["output"]))
            )
        elif kind == "function_call":
            # the arguments' text as sent (with Codex's blanks), not re-encoded
            (call,) = item_parts(item, provenance)
            assert isinstance(call, ToolCallPart)
            parts.append(msgspec.structs.replace(call, arguments_raw=item["arguments"]))
        else:
            parts.extend(item_parts(item, provenance))
    flush()
    return messages, additions


def derived(events: list[Any]) -> list[Message]:
    log = SessionLog()
    log.extend(events)
    return [_unseq(message) for message in log.derive_messages()]


def _unseq(message: Message) -> Message:
    message = msgspec.structs.replace(message, seq=-1)
    if isinstance(message, ToolMessage):
        # The Responses wire has no error flag on a function_call_output: compared apart.
        return msgspec.structs.replace(message, name=None, is_error=False)
    if isinstance(message, AssistantMessage):
        return AssistantMessage(content=message.content, provenance=message.provenance)
    return message


def normalise(adapter: Any, path: Path) -> list[Any]:
    events = adapter.feed(path.read_bytes())
    return [*events, *adapter.close()]


# ---------------------------------------------------------------- rollout: equal


@pytest.mark.parametrize("run", ALL_RUNS)
def test_rollout_history_equals_every_request_codex_sent(run: str) -> None:
    events = normalise(CodexRolloutAdapter(), CAPTURED / run / "rollout.jsonl")
    history = derived(events)
    requests = _requests(run)
    assert requests
    for body in requests:
        expected, additions = request_history(body)
        assert history[: len(expected)] == expected
        # Codex's own additions are in the log, as request state, not conversation.
        roles = [item["role"] for item in additions]
        assert roles == ["developer", "developer", "user"]
    header = next(e for e in events if isinstance(e, RequestHeaderEvent))
    sent = requests[-1]["input"][0]["content"][0]["text"]
    assert header.system is not None
    # Named difference: Codex leaves one line of the rollout's base_instructions out of
    # the developer message it sends (0.163.0, every capture).
    assert _CHECKLIST_LINE in header.system
    assert header.system.replace(_CHECKLIST_LINE, "") == sent
    contexts = [e.kind for e in events if isinstance(e, RequestContextEvent)]
    assert contexts[:2] == ["skills_instructions", "environment_context"]


@pytest.mark.parametrize("run", TOOL_RUNS + APP_TOOL_RUNS)
def test_rollout_replays_reasoning_function_call_and_output_exactly(run: str) -> None:
    history = derived(normalise(CodexRolloutAdapter(), CAPTURED / run / "rollout.jsonl"))
    body = _requests(run)[1]
    reasoning, message, call, output = body["input"][-4:]
    assistant = history[1]
    assert isinstance(assistant, AssistantMessage)
    thinking, text, tool_call = assistant.content
    assert isinstance(thinking, ThinkingPart) and isinstance(tool_call, ToolCallPart)
    assert thinking.id == reasoning["id"]
    assert thinking.encrypted_content == reasoning["encrypted_content"]
    assert thinking.summary == [reasoning["summary"][0]["text"]]
    assert isinstance(text, TextPart) and text.item_id == message["id"]
    assert (tool_call.name, tool_call.id, tool_call.item_id) == (
        "exec_command",
        call["call_id"],
        call["id"],
    )
    assert tool_call.arguments == json.loads(call["arguments"])
    result = history[2]
    assert isinstance(result, ToolMessage)
    assert result.call_id == output["call_id"]
    assert result.content == [TextPart(text=output["output"])]
    log = SessionLog()
    log.extend(normalise(CodexRolloutAdapter(), CAPTURED / run / "rollout.jsonl"))
    tool_message = log.derive_messages()[2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.is_error == run.endswith("_fail")  # exit code 3 in the *_fail runs
    assert tool_message.name == "exec_command"
    # The last message is the final answer, which no request replays (the turn ended).
    assert isinstance(history[-1], AssistantMessage) and len(history) == 4


# ---------------------------------------------------------------- app-server: the ids


def _app_history(run: str, extra: list[bytes] = ()) -> list[Message]:  # type: ignore[assignment]
    adapter = CodexAdapter()
    events = adapter.feed((CAPTURED / run / "notifications.jsonl").read_bytes())
    for line in extra:
        events += adapter.feed(line)
    return derived([*events, *adapter.close()])


@pytest.mark.parametrize("run", APP_TOOL_RUNS)
def test_app_server_history_keeps_the_model_ids(run: str) -> None:
    history = _app_history(run)
    expected, _ = request_history(_requests(run)[1])
    assert history[0] == expected[0]  # the prompt
    got, want = history[1], expected[1]
    assert isinstance(got, AssistantMessage) and isinstance(want, AssistantMessage)
    g_thinking, g_text, g_call = got.content
    w_thinking, w_text, w_call = want.content
    assert isinstance(g_thinking, ThinkingPart) and isinstance(w_thinking, ThinkingPart)
    assert (g_thinking.id, g_thinking.summary) == (w_thinking.id, w_thinking.summary)
    assert g_text == w_text  # msg_ id, text
    assert isinstance(g_call, ToolCallPart) and isinstance(w_call, ToolCallPart)
    assert g_call.id == w_call.id  # the call_ id: the command item's id
    # Not in the notifications (named): encrypted reasoning, the function call itself.
    assert g_thinking.encrypted_content is None and w_thinking.encrypted_content
    assert (g_call.name, g_call.item_id) == ("command_execution", None)
    assert (w_call.name, w_call.arguments["cmd"]) == ("exec_command", w_call.arguments["cmd"])
    # The output: Codex wraps it for the model ("Chunk ID: ...\nOutput:\n<output>").
    g_result, w_result = history[2], expected[2]
    assert isinstance(g_result, ToolMessage) and isinstance(w_result, ToolMessage)
    assert g_result.call_id == w_result.call_id
    w_text_out = w_result.content[0]
    g_text_out = g_result.content[0]
    assert isinstance(w_text_out, TextPart) and isinstance(g_text_out, TextPart)
    assert w_text_out.text.endswith("Output:\n" + g_text_out.text)


def _raw_item_lines(run: str, types: tuple[str, ...]) -> list[bytes]:
    """``rawResponseItem/completed`` lines as the app-server sends them with raw events
    on, built from the same run's rollout items (the captures ran without raw events)."""
    lines = []
    for line in (CAPTURED / run / "rollout.jsonl").read_text().splitlines():
        record = json.loads(line)
        payload = record["payload"]
        if record["type"] == "response_item" and payload["type"] in types:
            params = {"item": payload, "threadId": "t", "turnId": "u"}
            lines.append(
                json.dumps({"method": "rawResponseItem/completed", "params": params}).encode()
                + b"\n"
            )
    return lines


def _with_raw_items(run: str, adapter: CodexAdapter) -> list[Any]:
    """The run's notifications with the raw items where a live app-server puts them: the
    model's items before the turn's items complete, a command's ``function_call_output``
    right *after* the command's ``item/completed`` (seen live, Codex 0.163.0)."""
    model_items = _raw_item_lines(run, ("reasoning", "function_call"))
    outputs = _raw_item_lines(run, ("function_call_output",))
    events = []
    for line in (CAPTURED / run / "notifications.jsonl").read_bytes().splitlines(keepends=True):
        events += adapter.feed(line)
        if b'"turn/started"' in line:
            for raw_line in model_items:
                events += adapter.feed(raw_line)
        if b'"item/completed"' in line and b'"commandExecution"' in line:
            for raw_line in outputs:
                events += adapter.feed(raw_line)
    return [*events, *adapter.close()]


@pytest.mark.parametrize("run", APP_TOOL_RUNS)
def test_app_server_with_raw_items_equals_the_request(run: str) -> None:
    # notifications.jsonl holds the turn's notifications only (no thread/started): the
    # model is what the caller gave thread_start().
    events = _with_raw_items(run, CodexAdapter(model="gpt-5.5"))
    history = derived(events)
    expected, _ = request_history(_requests(run)[1])
    # The reasoning, the exec_command call and the output exactly as Codex sent them.
    assert history[:3] == expected[:3]
    (result,) = [e for e in events if isinstance(e, ToolResultEvent)]
    text = result.content[0].text
    assert text.startswith("Chunk ID: ") and "\nOutput:\n" in text
    # The command's own output and exit code stay beside the text the model saw.
    assert text.endswith("Output:\n" + result.details["output"])
    assert result.exit_code == (3 if run.endswith("_fail") else 0)
    assert f"Process exited with code {result.exit_code}" in text
    assert result.name == "exec_command"  # the model's name for the call, as in tool/call


def test_app_server_output_without_its_raw_item_falls_back_to_the_plain_output() -> None:
    """Raw events on, but the output item never came: the result is not lost."""
    run = "app_server/xs01_tool"
    adapter = CodexAdapter(model="gpt-5.5")
    events = []
    for line in (CAPTURED / run / "notifications.jsonl").read_bytes().splitlines(keepends=True):
        events += adapter.feed(line)
        if b'"turn/started"' in line:
            for raw_line in _raw_item_lines(run, ("reasoning", "function_call")):
                events += adapter.feed(raw_line)
    (result,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.content == [TextPart(text="2\n")] == [TextPart(text=result.details["output"])]
    kinds = [type(e).__name__ for e in events]
    # released when the next item started: still before the next response's message
    assert kinds.index("ToolResultEvent") < len(kinds) - kinds[::-1].index("AssistantMessageEvent")


def _responses_header(model: str) -> RequestHeaderEvent:
    return RequestHeaderEvent(
        provider="openai", api="responses", model=model, sampling={"store": False}
    )


def _reasoning_items(history: list[Message], model: str) -> list[dict[str, Any]]:
    request = render_request(history, _responses_header(model))
    return [item for item in request["input"] if item.get("type") == "reasoning"]


@pytest.mark.parametrize("run", APP_TOOL_RUNS)
def test_codex_reasoning_is_replayed_to_the_same_model_only(run: str) -> None:
    """Provenance carries the model: Codex's encrypted reasoning goes back to gpt-5.5
    exactly as Codex sent it, and is dropped for another model (rule 1)."""
    body = _requests(run)[1]
    sent = [item for item in body["input"] if item["type"] == "reasoning"]
    log = SessionLog()
    log.extend(_with_raw_items(run, CodexAdapter(model="gpt-5.5")))
    replayed = _reasoning_items(log.derive_messages(), "gpt-5.5")
    assert [(r["id"], r["encrypted_content"]) for r in replayed[:1]] == [
        (s["id"], s["encrypted_content"]) for s in sent
    ]
    assert _reasoning_items(log.derive_messages(), "gpt-4.1") == []


@pytest.mark.parametrize("run", ["exec/x01_tool", "app_server/xs01_tool"])
def test_rollout_events_keep_the_time_of_their_line(run: str) -> None:
    """An imported rollout is history: each event carries the time of the line it was
    made from (the session's own time), not the time of the import; a line without a
    timestamp, and what ``close()`` logs, keeps the time of the line before it."""
    lines = (CAPTURED / run / "rollout.jsonl").read_text().splitlines(keepends=True)
    adapter = CodexRolloutAdapter()
    checked = 0
    for line in lines:
        moment = datetime.fromisoformat(json.loads(line)["timestamp"]).timestamp()
        for event in adapter.feed(line):
            assert event.ts == moment, (type(event).__name__, line[:80])
            checked += 1
    assert checked > 5
    untimed = json.loads(lines[-1])
    del untimed["timestamp"]
    events = adapter.feed(json.dumps(untimed)) + adapter.close()
    assert events and all(event.ts == moment for event in events)


def test_rollout_model_from_session_meta_alone() -> None:
    """A rollout whose turns carry no turn_context / thread settings (e.g. one written by
    a hand-off, or cut): session_meta's base_instructions name the model."""
    run = "app_server/xs01_tool"
    lines = [
        line
        for line in (CAPTURED / run / "rollout.jsonl").read_text().splitlines(keepends=True)
        if '"turn_context"' not in line[:80] and "thread_settings_applied" not in line
    ]
    events = normalise_text(CodexRolloutAdapter(), "".join(lines))
    messages = [e for e in events if isinstance(e, AssistantMessageEvent)]
    assert messages and all(
        m.provenance == Provenance(provider="openai", api="responses", model="gpt-5.5")
        for m in messages
    )
    log = SessionLog()
    log.extend(events)
    sent = [item for item in _requests(run)[1]["input"] if item["type"] == "reasoning"]
    replayed = _reasoning_items(log.derive_messages(), "gpt-5.5")
    assert replayed[0]["encrypted_content"] == sent[0]["encrypted_content"]
    assert _reasoning_items(log.derive_messages(), "gpt-4.1") == []


def test_thread_settings_switch_the_model() -> None:
    run = "app_server/xs01_tool"
    text = (CAPTURED / run / "rollout.jsonl").read_text()
    switched = text.replace(
        '"thread_settings":{"model":"gpt-5.5"', '"thread_settings":{"model":"gpt-5.5-mini"', 1
    )
    switched = "".join(
        line for line in switched.splitlines(keepends=True) if '"turn_context"' not in line[:80]
    )
    assert switched != text
    events = normalise_text(CodexRolloutAdapter(), switched)
    models = {e.provenance.model for e in events if isinstance(e, AssistantMessageEvent)}
    assert models == {"gpt-5.5-mini"}


def normalise_text(adapter: Any, text: str) -> list[Any]:
    return [*adapter.feed(text.encode()), *adapter.close()]


# ---------------------------------------------------------------- exec --json: what is missing


@pytest.mark.parametrize("run", TOOL_RUNS)
def test_exec_history_texts_match_and_the_missing_pieces_are_named(run: str) -> None:
    history = derived(normalise(CodexAdapter(model="gpt-5.5"), CAPTURED / run / "stdout.jsonl"))
    expected, _ = request_history(_requests(run)[1])
    # exec does not print the prompt: the request starts with it, the log does not.
    assert isinstance(expected[0], UserMessage)
    assert not any(isinstance(m, UserMessage) for m in history)
    got, want = history[0], expected[1]
    assert isinstance(got, AssistantMessage) and isinstance(want, AssistantMessage)
    assert got.provenance == want.provenance
    g_thinking, g_text, g_call = got.content
    w_thinking, w_text, w_call = want.content
    assert isinstance(g_thinking, ThinkingPart) and isinstance(w_thinking, ThinkingPart)
    assert g_thinking.summary == w_thinking.summary
    assert isinstance(g_text, TextPart) and isinstance(w_text, TextPart)
    assert g_text.text == w_text.text
    # Missing from exec --json: the model's ids and encrypted reasoning ...
    assert (g_thinking.id, g_thinking.encrypted_content, g_text.item_id) == (None, None, None)
    assert w_thinking.id and w_thinking.encrypted_content and w_text.item_id
    # ... and the function call: exec shows the command it ran, under a local item id.
    assert isinstance(g_call, ToolCallPart) and isinstance(w_call, ToolCallPart)
    assert g_call.id.startswith("item_") and w_call.id.startswith("call_")
    assert w_call.name == "exec_command" and g_call.name == "command_execution"
    assert g_call.arguments["command"] == f"/bin/bash -lc '{w_call.arguments['cmd']}'"
    g_result, w_result = history[1], expected[2]
    assert isinstance(g_result, ToolMessage) and isinstance(w_result, ToolMessage)
    assert g_result.call_id == g_call.id
    g_out, w_out = g_result.content[0], w_result.content[0]
    assert isinstance(g_out, TextPart) and isinstance(w_out, TextPart)
    assert w_out.text.endswith("Output:\n" + g_out.text)


# ---------------------------------------------------------------- the request settings


def _log(events: list[Any]) -> SessionLog:
    log = SessionLog()
    log.extend(events)
    return log


def _settings_sent(body: dict[str, Any]) -> dict[str, Any]:
    """The settings of a Codex request that its session's header can know of."""
    return {key: body[key] for key in ("store", "include")} | {
        "reasoning": {"effort": body["reasoning"]["effort"]}
    }


@pytest.mark.parametrize("run", ALL_RUNS)
def test_rollout_header_carries_the_settings_as_the_request_does(run: str) -> None:
    """turn_context's ``effort`` / ``summary`` are the request's ``reasoning``; every
    Codex request has ``store: false`` (and asks for the encrypted reasoning back)."""
    header = _log(
        normalise(CodexRolloutAdapter(), CAPTURED / run / "rollout.jsonl")
    ).current_header()
    assert header is not None and (header.provider, header.api) == ("openai", "responses")
    for body in _requests(run):
        assert header.model == body["model"]
        # turn_context says summary "none" (left out, as Codex leaves it out); the
        # request carries config.toml's "auto" there: not in the rollout.
        assert header.sampling == _settings_sent(body)


@pytest.mark.parametrize("run", ["exec/x01_tool", "app_server/xs01_tool"])
def test_rollout_settings_render_as_each_api_names_them(run: str) -> None:
    from adapters.anthropic import render_request as render_anthropic
    from adapters.openai_chat import render_request as render_chat

    events = normalise(CodexRolloutAdapter(), CAPTURED / run / "rollout.jsonl")
    log = _log([*events, UserMessageEvent(content=[TextPart(text="Now with 2+2.")])])
    messages, header = log.derive_messages(), log.current_header()
    body = _requests(run)[-1]
    responses = render_request(messages, header)
    assert "extra_body" not in responses  # no unknown top-level effort / summary
    assert {key: responses[key] for key in ("store", "include")} == {
        key: body[key] for key in ("store", "include")
    }
    assert responses["reasoning"] == {"effort": body["reasoning"]["effort"]}
    # Another api gets the effort translated, as from any Responses header.
    anthropic = render_anthropic(messages, header, RenderPolicy(model="claude-sonnet-4-5"))
    assert anthropic["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert render_chat(messages, header, RenderPolicy(model="gpt-5"))["reasoning_effort"] == (
        "medium"
    )


def test_rollout_reasoning_summary_is_sent_unless_none() -> None:
    run = "app_server/xs01_tool"
    text = (CAPTURED / run / "rollout.jsonl").read_text()
    auto = text.replace('"effort":"medium","summary":"none"', '"effort":"high","summary":"auto"')
    assert auto != text
    header = _log(normalise_text(CodexRolloutAdapter(), auto)).current_header()
    assert header is not None
    assert header.sampling["reasoning"] == {"effort": "high", "summary": "auto"}


def test_rollout_without_turn_context_still_says_store_false() -> None:
    """A rollout with no turn_context (a hand-off's, a cut one): session_meta's header has
    the model, the system prompt and ``store: false``, not the reasoning it cannot know."""
    run = "app_server/xs01_tool"
    lines = [
        line
        for line in (CAPTURED / run / "rollout.jsonl").read_text().splitlines(keepends=True)
        if '"turn_context"' not in line[:80]
    ]
    events = normalise_text(CodexRolloutAdapter(), "".join(lines))
    (header,) = [e for e in events if isinstance(e, RequestHeaderEvent)]
    assert header.source is not None and header.source.native_type == "session_meta"
    assert (header.model, header.sampling) == ("gpt-5.5", {"store": False})
    assert header.system is not None


def test_rollout_header_is_written_again_only_when_something_changes() -> None:
    run = "app_server/xs01_tool"
    text = (CAPTURED / run / "rollout.jsonl").read_text()
    once = [
        e for e in normalise_text(CodexRolloutAdapter(), text) if isinstance(e, RequestHeaderEvent)
    ]
    # session_meta's (before any setting is known), then turn_context's
    assert [(h.model, "reasoning" in h.sampling) for h in once] == [
        ("gpt-5.5", False),
        ("gpt-5.5", True),
    ]
    lines = text.splitlines(keepends=True)
    context = next(line for line in lines if '"turn_context"' in line[:80])
    twice = normalise_text(CodexRolloutAdapter(), text + context)
    assert len([e for e in twice if isinstance(e, RequestHeaderEvent)]) == 2
    switched = context.replace('"model":"gpt-5.5"', '"model":"gpt-5.5-mini"', 1)
    headers = [
        e
        for e in normalise_text(CodexRolloutAdapter(), text + switched)
        if isinstance(e, RequestHeaderEvent)
    ]
    assert [h.model for h in headers] == ["gpt-5.5", "gpt-5.5", "gpt-5.5-mini"]
    assert headers[-1].sampling == headers[-2].sampling


@pytest.mark.parametrize("run", APP_TOOL_RUNS)
def test_app_server_session_says_store_false_so_reasoning_is_not_sent_by_id(run: str) -> None:
    """The stream has no request, but every Codex request has ``store: false`` (the
    captures'): items were never stored, so reasoning without its ``encrypted_content``
    (raw events off) is not sent back by id alone ("item not found")."""
    body = _requests(run)[1]
    adapter = CodexAdapter(model="gpt-5.5")
    events = [
        *adapter.feed((CAPTURED / run / "notifications.jsonl").read_bytes()),
        *adapter.close(),
    ]
    log = _log(events)
    header = log.current_header()
    assert header is not None
    assert (header.provider, header.api, header.model) == ("openai", "responses", body["model"])
    assert header.sampling == {"store": body["store"]} == {"store": False}
    # Neither stream shows the system prompt or the tools: unknown, not made up.
    assert (header.system, header.tools) == (None, [])
    request = render_request(log.derive_messages(), header)
    assert request["store"] is False
    assert [item for item in request["input"] if item.get("type") == "reasoning"] == []
    # With raw events the reasoning goes back as Codex sent it, encrypted content and all.
    log = _log(_with_raw_items(run, CodexAdapter(model="gpt-5.5")))
    replayed = [
        item
        for item in render_request(log.derive_messages(), log.current_header())["input"]
        if item.get("type") == "reasoning"
    ]
    sent = [item for item in body["input"] if item["type"] == "reasoning"]
    assert [(r["id"], r["encrypted_content"]) for r in replayed[:1]] == [
        (s["id"], s["encrypted_content"]) for s in sent
    ]


def test_app_server_header_once_per_model() -> None:
    run = "app_server/xs01_tool"
    data = (CAPTURED / run / "notifications.jsonl").read_bytes()
    adapter = CodexAdapter()
    events = adapter.feed(data)  # no thread/started: the model is unknown, no header
    assert not [e for e in events if isinstance(e, RequestHeaderEvent)]
    started = {"method": "thread/started", "params": {"thread": {"id": "t", "model": "gpt-5.5"}}}
    events = adapter.feed(json.dumps(started)) + adapter.feed(data) + adapter.feed(data)
    headers = [e for e in events if isinstance(e, RequestHeaderEvent)]
    assert [(h.model, h.sampling) for h in headers] == [("gpt-5.5", {"store": False})]
    assert headers[0].turn_id is not None  # the turn's: its requests carry it
    started["params"]["thread"]["model"] = "gpt-5.5-mini"  # type: ignore[index]
    events = adapter.feed(json.dumps(started)) + adapter.feed(data)
    assert [e.model for e in events if isinstance(e, RequestHeaderEvent)] == ["gpt-5.5-mini"]


def test_exec_header_says_store_false_once_the_model_is_known() -> None:
    """exec never prints the model: with ``model=`` the header is written; without, none
    (a header without a model would take an earlier header's model away)."""
    data = (CAPTURED / "exec" / "x01_tool" / "stdout.jsonl").read_bytes()
    adapter = CodexAdapter(model="gpt-5.5")
    (header,) = [e for e in adapter.feed(data) if isinstance(e, RequestHeaderEvent)]
    body = _requests("exec/x01_tool")[0]
    assert (header.model, header.sampling) == (body["model"], {"store": body["store"]})
    assert not [e for e in CodexAdapter().feed(data) if isinstance(e, RequestHeaderEvent)]


def test_rollout_naming_no_model_writes_no_header() -> None:
    """A hand-off's rollout (session_meta without base_instructions): no model, so no
    header that would take an earlier header's model away; with ``model=`` there is one."""
    meta = {
        "timestamp": "2026-01-01T00:00:00.000Z",
        "type": "session_meta",
        "payload": {"id": "t", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"},
    }
    line = json.dumps(meta) + "\n"
    assert not [
        e for e in normalise_text(CodexRolloutAdapter(), line) if isinstance(e, RequestHeaderEvent)
    ]
    (header,) = [
        e
        for e in normalise_text(CodexRolloutAdapter(model="gpt-5.5"), line)
        if isinstance(e, RequestHeaderEvent)
    ]
    assert (header.model, header.system, header.sampling) == ("gpt-5.5", None, {"store": False})
