"""Importing a conversation's successive request bodies (a proxy logging each one): each
body holds the whole history so far, so the session's history becomes the last body's,
without what the earlier bodies repeat logged twice (recorded multi-turn traffic)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from universal_event.cli import main
from universal_event.events import AssistantMessageEvent, RequestHeaderEvent
from universal_event.ingest import append_imported, append_request, import_events
from universal_event.log import SessionLog
from universal_event.stores import open_store

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"
CONVERSATIONS = [
    ("openai-chat-request", "openai-chat/stream_parallel_tool_calls_usage_3turns.json"),
    ("openai-chat-request", "openai-chat/stream_tool_call_then_text_usage.json"),
    ("anthropic-request", "anthropic-messages/stream_client_tool_two_turns.json"),
    ("anthropic-request", "anthropic-messages/stream_thinking_tooluse_signature_replay.json"),
]


def _bodies(fixture: str) -> list[bytes]:
    interactions = json.loads((RECORDED / fixture).read_text())["interactions"]
    return [json.dumps(i["request_body"]).encode() for i in interactions]


def _history_of(runtime: str, body: bytes) -> list[object]:
    log = SessionLog()
    append_request(log, import_events(runtime, body))
    return _said(log)


def _said(log: SessionLog) -> list[object]:
    """The derived messages without the seqs they were derived from."""
    messages = msgspec.to_builtins(log.derive_messages())
    for message in messages:
        message.pop("seq", None)
    return list(messages)


@pytest.mark.parametrize(("runtime", "fixture"), CONVERSATIONS)
def test_successive_request_bodies_leave_the_last_ones_history(runtime: str, fixture: str) -> None:
    bodies = _bodies(fixture)
    assert len(bodies) >= 2
    log = SessionLog()
    for body in bodies:
        append_request(log, import_events(runtime, body))
        assert _said(log) == _history_of(runtime, body)
    count = len(log.events())
    # only what each body added was logged: as many surface events as the last one holds
    last = import_events(runtime, bodies[-1])
    headers = [e for e in log.events() if isinstance(e, RequestHeaderEvent)]
    assert count - len(headers) == len(last) - 1
    for body in bodies:  # again, or an older one after the newer: nothing added
        append_request(log, import_events(runtime, body))
    assert len(log.events()) == count


@pytest.mark.parametrize(
    ("runtime", "fixture"),
    [
        *CONVERSATIONS,
        ("openai-responses-request", "openai-responses/stream_function_call_then_text.json"),
        ("openai-responses-request", "openai-responses/stream_custom_tool_call_freeform.json"),
    ],
)
def test_bodies_imported_again_into_a_stored_session_add_nothing(
    runtime: str, fixture: str, tmp_path: Path
) -> None:
    """As the CLI imports: a log opened on the stored session each time. A Responses
    body's function tools were parsed with a ``kind`` equal to the default but not it,
    which the encoder writes out; read back from the store it is left out: the same
    body imported again was refused (another body under the same id), and a grown one
    logged its header a second time."""
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    bodies = _bodies(fixture)
    for body in (bodies[0], bodies[0], *bodies[1:], bodies[-1]):
        log = SessionLog(store, "s")
        append_request(log, import_events(runtime, body))
        log.checkpoint()
        log.close()
    stored = SessionLog(store, "s", live=False)
    fresh = SessionLog()
    for body in bodies:
        append_request(fresh, import_events(runtime, body))
    assert [type(e) for e in stored.events()] == [type(e) for e in fresh.events()]
    assert _said(stored) == _said(fresh)


def test_a_streamed_reply_between_two_bodies_gives_way_to_the_clients_copy() -> None:
    """Body, the streamed response, the next body: the history is the next body's (the
    reply as the client sent it back); the streamed reply stays in the log."""
    fixture = json.loads(
        (RECORDED / "openai-chat/stream_tool_call_then_text_usage.json").read_text()
    )
    first, second = (json.dumps(i["request_body"]).encode() for i in fixture["interactions"][:2])
    stream = fixture["interactions"][0]["response_body"].encode()
    log = SessionLog()
    append_request(log, import_events("openai-chat-request", first))
    append_imported(log, import_events("openai-chat", stream))
    streamed = [e.seq for e in log.events() if isinstance(e, AssistantMessageEvent)]
    assert streamed and streamed[-1] in log.surface_seqs()
    append_request(log, import_events("openai-chat-request", second))
    assert _said(log) == _history_of("openai-chat-request", second)
    assert streamed[-1] not in log.surface_seqs()
    assert log.events()[streamed[-1]].seq == streamed[-1]  # kept


def test_the_cli_imports_successive_request_bodies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    bodies = _bodies("openai-chat/stream_parallel_tool_calls_usage_3turns.json")
    for index, body in enumerate(bodies):
        path = tmp_path / f"request-{index}.json"
        path.write_bytes(body)
        arguments = ["import", "--from", "openai-chat-request", str(path), "--session", "s"]
        assert main([*arguments, "--store", store]) == 0
    capsys.readouterr()
    assert main(["derive", "--session", "s", "--store", store]) == 0
    derived = json.loads(capsys.readouterr().out)
    log = SessionLog(open_store("memory:"), "x")
    append_request(log, import_events("openai-chat-request", bodies[-1]))
    roles = [m["role"] for m in derived]
    assert roles == [m.__struct_config__.tag for m in log.derive_messages()]
    assert roles.count("user") == sum(
        1 for m in json.loads(bodies[-1])["messages"] if m["role"] == "user"
    )
